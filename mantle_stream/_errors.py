"""The exception tree.

Verdicts are data; exceptions mean "could not evaluate": a bad scenario file, a
bad event, a broken feed, bad usage. Every exception the package raises on
purpose derives from :class:`MantleStreamError`, so a caller (and the CLI) can
catch one type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mantle_stream._diagnostics import Diagnostic

__all__ = ["EventError", "FeedError", "MantleStreamError", "ScenarioError", "UsageError"]


class MantleStreamError(Exception):
    """Base of every error mantle_stream raises on purpose."""


class ScenarioError(MantleStreamError):
    """One or more scenario files are invalid; ``diagnostics`` lists every problem."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = diagnostics
        super().__init__("\n".join(d.render() for d in diagnostics))


class EventError(MantleStreamError):
    """An event could not be read: malformed JSON, wrong types, no or two payloads."""

    def __init__(self, message: str, *, source: str = "<events>", line: int | None = None,
                 excerpt: str = "") -> None:
        self.message = message
        self.source = source
        self.line = line
        self.excerpt = excerpt
        where = f"{source}:{line}" if line is not None else source
        text = f"{where}: bad event: {message}"
        if excerpt:
            text += f"\n    {excerpt}"
        super().__init__(text)


class FeedError(MantleStreamError):
    """An event source could not be opened or read."""


class UsageError(MantleStreamError):
    """The command line or API was used in a way that cannot work."""
