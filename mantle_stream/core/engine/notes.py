"""Where the events behind the engine's warnings were (late, duplicate, gaps...).

The counters themselves are the evaluator's :class:`~mantle_stream.core.verdicts.Tally`;
this keeps, for the report, up to :data:`~mantle_stream.core.verdicts.MAX_OCCURRENCES`
of each warning's events: which conversation and sequence. Written by ordering, the
evaluator's hot loop and intake; saved and restored with checkpoints.
"""

from __future__ import annotations

from collections.abc import Iterable

from mantle_stream.core.verdicts import MAX_OCCURRENCES, Occurrence

__all__ = ["Notes"]


class Notes:
    """The occurrences of the warnings' events, bounded per warning."""

    __slots__ = ("noted", "occurrences")

    def __init__(self) -> None:
        self.occurrences: list[Occurrence] = []
        self.noted: dict[str, int] = {}  # occurrences kept, per warning

    def note(
        self,
        warning: str,
        cid: str,
        seq: int | None,
        last: int | None = None,
        ids: tuple[str, str] | None = None,
    ) -> None:
        """Remember where a warning's event was (the report names it), up to a bound per
        warning: a hostile feed could send a million duplicates. ``ids``: a sequence
        conflict's event and the one applied before it at that sequence."""
        n = self.noted.get(warning, 0)
        if n < MAX_OCCURRENCES:
            self.noted[warning] = n + 1
            if ids is None:
                self.occurrences.append(Occurrence(warning, cid, seq, last))
            else:
                self.occurrences.append(Occurrence(warning, cid, seq, last, *ids))

    def saved(self) -> list[Occurrence]:
        """What a checkpoint keeps: not the unknown kinds' (like their counts, a re-read
        meets them again)."""
        return [o for o in self.occurrences if o.warning != "unknown_kinds"]

    def restore(self, occurrences: Iterable[Occurrence]) -> None:
        """A checkpoint's occurrences, in place of these."""
        self.occurrences = list(occurrences)
        self.noted = {}
        for o in self.occurrences:
            self.noted[o.warning] = self.noted.get(o.warning, 0) + 1
