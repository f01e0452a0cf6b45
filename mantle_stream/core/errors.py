"""The exception tree.

Verdicts are data; exceptions mean "could not evaluate": a bad scenario file, a
bad event, a broken feed, bad usage. Every exception the package raises on
purpose derives from :class:`MantleStreamError`, so a caller (and the CLI) can
catch one type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mantle_stream.core.scenario.diagnostics import Diagnostic
    from mantle_stream.core.verdicts import Decision

__all__ = [
    "CONTROL_ESCAPES",
    "EventError",
    "FeedError",
    "MantleStreamError",
    "OneProcessNeeded",
    "ScenarioError",
    "UsageError",
]

#: Control characters written as escapes, so a message stays on one line.
CONTROL_ESCAPES = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))}
CONTROL_ESCAPES.update({ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"})


class MantleStreamError(Exception):
    """Base of every error mantle_stream raises on purpose."""


class ScenarioError(MantleStreamError):
    """One or more scenario files are invalid; ``diagnostics`` lists every problem."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = diagnostics
        super().__init__("\n".join(d.render() for d in diagnostics))


class EventError(MantleStreamError):
    """An event could not be read: malformed JSON, wrong types, no or two payloads."""

    def __init__(
        self,
        message: str,
        *,
        source: str = "<events>",
        line: int | None = None,
        excerpt: str = "",
        hint: str = "",
    ) -> None:
        # Input text quoted in a message must not break it over lines (or send
        # control sequences to a terminal).
        self.message = message.translate(CONTROL_ESCAPES)
        self.source = source
        self.line = line
        self.excerpt = excerpt.translate(CONTROL_ESCAPES)
        # Set by Evaluator.push_chunk: the decisions the events before this one
        # made, so a caller that stops here can still report them.
        self.decisions: list[Decision] = []
        where = f"{source}:{line}" if line is not None else source
        text = f"{where}: bad event: {self.message}"
        if self.excerpt:
            text += f"\n    {self.excerpt}"
        # What to do instead, when the message knows better than "skip it".
        self.hint = hint
        if hint:
            text += f"\nhint: {hint}"
        super().__init__(text)

    def at(self, line: int | None) -> EventError:
        """The same error at another line (of the whole feed, say, not of a part of it)."""
        moved = EventError(
            self.message, source=self.source, line=line, excerpt=self.excerpt, hint=self.hint
        )
        moved.decisions = self.decisions
        return moved


class FeedError(MantleStreamError):
    """An event source could not be opened or read."""


class OneProcessNeeded(FeedError):
    """A worker's share of a source cannot be read apart from the others' (``check
    --workers``): the run is judged again in one process, as a bad event's is."""


class UsageError(MantleStreamError):
    """The command line or API was used in a way that cannot work."""
