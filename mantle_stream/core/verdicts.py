"""Verdict records: what the engine reports, as frozen msgspec Structs.

Produced by the engine, consumed at the edges (report, live view, JSONL,
JUnit, socket stop messages). Plain data: they encode to JSON as they are.
"""

from __future__ import annotations

from typing import Literal

import msgspec

__all__ = ["AssertionResult", "ConversationResult", "Decision", "Statistics", "Verdict"]

#: ``skipped``: still pending when a conversation mantle_stream had stopped
#: early ended; ``errored``: could not be evaluated. ``pending`` only in live
#: views and incomplete runs.
Verdict = Literal["pending", "passed", "failed", "skipped", "errored"]


class Decision(msgspec.Struct, frozen=True, gc=False):
    """One assertion of one conversation was decided; it never changes again.

    ``decided_at`` is the ``sequence`` of the deciding event, or None when
    the end of the conversation decided it. ``turn`` is the user turn
    (0 before the first user message) the conversation was in.
    """

    conversation_id: str
    scenario: str
    index: int
    kind: str
    verdict: Verdict
    decided_at: int | None
    reason: str
    turn: int = 0


class AssertionResult(msgspec.Struct, frozen=True, gc=False):
    index: int
    kind: str
    verdict: Verdict
    decided_at: int | None = None
    reason: str = ""
    turn: int | None = None  # the user turn the conversation was in when decided


class ConversationResult(msgspec.Struct, frozen=True):
    conversation_id: str
    scenario: str | None
    verdict: Verdict
    events: int
    assertions: tuple[AssertionResult, ...] = ()
    finished: bool = False
    turns: int = 0
    # From the events' timestamps (epoch seconds), when they carry numbers: its first
    # event's, and the time to its session_ended (None when it ended otherwise).
    started: float | None = None
    duration: float | None = None


class Statistics(msgspec.Struct, frozen=True):
    """Counters of an evaluator, as an immutable snapshot."""

    events: int = 0
    conversations: int = 0
    open: int = 0
    passed: int = 0
    failed: int = 0
    decisions: int = 0
    unknown_kinds: int = 0
    late_events: int = 0  # arrived after their conversation ended
    unmatched: int = 0
    duplicates: int = 0  # at or below the last applied sequence: skipped
    gaps: int = 0  # missing sequences given up on after the reorder window
    held: int = 0  # waiting in reorder windows now
    bad_events: int = 0  # skipped under on_bad / --on-bad-event=skip
    replayed: int = 0  # already applied before a restore from a checkpoint
    legacy_rows: int = 0  # older flat CALM rows (slot, flow_started, ...): skipped
    foreign_events: int = 0  # for a conversation another connection owns: refused
    # Conversations that named no scenario within MAX_UNNAMED_BUFFER events or bytes.
    unnamed_given_up: int = 0
