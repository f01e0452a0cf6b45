"""What the live view shows, taken at one instant: the snapshot and its counts.

An edge module under :mod:`.live`. The runner (or the gate, or the demo)
builds a :class:`LiveSnapshot` on the event-loop thread; every part of the
view (:mod:`.live_text`, :mod:`.live_detail`, :mod:`.live_compact`) reads
only the snapshot, and counts conversations the one way written here, so the
header, the ``+N more`` line and the summary always agree.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from mantle_stream.core.verdicts import ConversationResult, Decision, Statistics

__all__ = ["LiveSnapshot", "conversation_counts", "pending_word", "verdict_tally"]


class LiveSnapshot(msgspec.Struct, frozen=True):
    """Everything the live view shows, taken at one instant on the loop thread."""

    conversations: tuple[ConversationResult, ...]  # judged, in order of first event
    statistics: Statistics
    elapsed: float  # seconds since the run started
    events_per_second: float
    latest: tuple[Decision, ...] = ()  # newest decisions, newest last
    stopped_early: tuple[str, ...] = ()  # ids settled before their end
    source: str = ""
    bad_events: int = 0  # skipped bad lines
    final: bool = False  # the closing render: feed ended or Ctrl-C
    interrupted: bool = False  # (final) Ctrl-C or SIGTERM ended the run, not its feed
    omitted: tuple[int, int] = (0, 0)  # finished conversations let go of: passed, failed
    command: str = "watch"  # the command drawing it (watch, gate, demo): the title's


def pending_word(snap: LiveSnapshot) -> str:
    """What a conversation whose verdict is pending is called: *running* while the
    run lasts; once it has ended (Ctrl-C, --fail-fast) nothing runs any more, and it
    is *open*, everywhere the closing view counts it."""
    return "open" if snap.final else "running"


def conversation_counts(snap: LiveSnapshot) -> dict[str, int]:
    """Conversations by verdict, those let go of (keep_finished) included."""
    counts = verdict_tally(c.verdict for c in snap.conversations)
    counts["passed"] += snap.omitted[0]
    counts["failed"] += snap.omitted[1]
    return counts


def verdict_tally(verdicts: Iterable[str]) -> dict[str, int]:
    """How many of each verdict (pending, passed, failed and skipped always present)."""
    counts = {"pending": 0, "passed": 0, "failed": 0, "skipped": 0}
    for verdict in verdicts:
        counts[verdict] = counts.get(verdict, 0) + 1
    return counts
