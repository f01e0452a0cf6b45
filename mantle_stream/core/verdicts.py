"""Verdict records: what the engine reports, as frozen msgspec Structs.

Produced by the engine, consumed at the edges (report, live view, JSONL,
JUnit, socket stop messages). Plain data: they encode to JSON as they are.

One family:

* :class:`VerdictRecord` — one assertion's verdict (``index``, ``kind``,
  ``verdict``, ``decided_at``, ``reason``): a row of the JSON report and the
  ``assertion`` of a :class:`StopMessage`;
* :class:`AssertionResult` — a VerdictRecord with the ``turn`` it was decided
  in: the rows of a :class:`ConversationResult`;
* :class:`DecisionRecord` — a verdict with the conversation it belongs to
  (``conversation_id``, ``scenario``, then a VerdictRecord's fields): a line
  of the JSONL stream;
* :class:`Decision` — a DecisionRecord with its ``turn``: what the engine
  emits.

A record is turned into another shape of the family with ``Shape.of(record)``
(the fields taken by name), never field by field. Each shape declares its
fields itself, in the order its positional constructor and its JSON have
(msgspec would put inherited fields first, and ``turn`` came before
``file`` and ``line``); tests/test_verdict_records.py keeps the shared fields
alike. The JSON shapes are published contracts (docs/outputs.md): add, never rename
or reorder.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Iterable
from typing import Any, Literal, Self

import msgspec

__all__ = [
    "COUNTED",
    "MAX_OCCURRENCES",
    "SAVED",
    "AssertionResult",
    "CandidateVerdict",
    "ConversationResult",
    "Decision",
    "DecisionRecord",
    "Occurrence",
    "Statistics",
    "StopMessage",
    "Tally",
    "ToolCallScores",
    "ToolEntryResult",
    "Verdict",
    "VerdictRecord",
    "bounded",
    "settling",
]

#: ``skipped``: still pending when a conversation mantle_stream had stopped
#: early ended; ``errored``: could not be evaluated. ``pending`` only in live
#: views and incomplete runs.
Verdict = Literal["pending", "passed", "failed", "skipped", "errored"]


@functools.cache
def _fields_getter(shape: type[msgspec.Struct]) -> Callable[[object], tuple[Any, ...]]:
    """Reads a shape's fields, by name and in its order, off any record that has them."""
    return operator.attrgetter(*shape.__struct_fields__)


class _Shape(msgspec.Struct, frozen=True, gc=False):
    """What every record of the family can do: be made from another by field name."""

    @classmethod
    def of(cls, record: object) -> Self:
        """This shape of ``record`` (any record of the family that has its fields)."""
        return cls(*_fields_getter(cls)(record))


class VerdictRecord(_Shape, frozen=True, gc=False):
    """One assertion's verdict: the fields every record of the family shares.

    On the wire (the JSON report's ``assertions``, a stop message's
    ``assertion``): ``{"index": 5, "kind": "tool_executed", "verdict":
    "failed", "decided_at": 19, "reason": "...", "file":
    "eval/scenarios/card.yml", "line": 24}``. ``decided_at`` is the
    ``sequence`` of the deciding event, or None when the end of the
    conversation decided it (or nothing has yet).
    """

    index: int
    kind: str
    verdict: Verdict
    decided_at: int | None = None
    reason: str = ""
    # Where the assertion is written: its scenario file and 1-based line (None
    # for a scenario built in Python without positions).
    file: str | None = None
    line: int | None = None


class AssertionResult(_Shape, frozen=True, gc=False):
    """A :class:`VerdictRecord` with the ``turn`` it was decided in (before
    ``file`` and ``line``, so that its positional constructor is as it was)."""

    index: int
    kind: str
    verdict: Verdict
    decided_at: int | None = None
    reason: str = ""
    turn: int | None = None  # the user turn the conversation was in when decided
    file: str | None = None
    line: int | None = None


class DecisionRecord(_Shape, frozen=True, gc=False):
    """A verdict with its conversation: a :class:`VerdictRecord`'s fields after
    ``conversation_id`` and ``scenario`` (a line of the JSONL stream).

    Not a VerdictRecord subclass: msgspec puts inherited fields first, and a
    Decision's positional order (``conversation_id`` first) is fixed.
    """

    conversation_id: str
    scenario: str
    index: int
    kind: str
    verdict: Verdict
    decided_at: int | None
    reason: str
    file: str | None = None  # where the assertion is written (see VerdictRecord)
    line: int | None = None


class Decision(_Shape, frozen=True, gc=False):
    """One assertion of one conversation was decided; it never changes again.

    ``decided_at`` is the ``sequence`` of the deciding event, or None when
    the end of the conversation decided it. ``turn`` is the user turn
    (0 before the first user message) the conversation was in; ``file`` and
    ``line`` where the assertion is written.
    """

    conversation_id: str
    scenario: str
    index: int
    kind: str
    verdict: Verdict
    decided_at: int | None
    reason: str
    turn: int = 0
    file: str | None = None
    line: int | None = None


class StopMessage(msgspec.Struct, frozen=True, tag_field="type", tag="stop"):
    """Sent once per conversation whose outcome is settled before it ended.

    On the wire (one line): ``{"type": "stop", "conversation_id": "c-17",
    "verdict": "failed", "stop": true, "assertion": {"index": 5, "kind":
    "tool_executed", "verdict": "failed", "decided_at": 19, "reason": "..."},
    "events": 20}``. ``verdict`` is the conversation's: ``failed`` as soon as one
    assertion failed (``assertion`` is that one), ``passed`` when every
    assertion passed before the end (``assertion`` is the last decided).
    """

    conversation_id: str
    verdict: Verdict
    assertion: VerdictRecord
    events: int
    stop: bool = True

    @classmethod
    def of(cls, result: ConversationResult, decision: Decision) -> StopMessage:
        """The stop message of a settled conversation, naming the decision that settled it."""
        return cls(
            result.conversation_id, result.verdict, VerdictRecord.of(decision), result.events
        )


def settling(decisions: Iterable[Decision]) -> dict[str, Decision]:
    """Per conversation of a batch of decisions, the one a stop message names: its first
    failure, else its last decision."""
    seen: dict[str, Decision] = {}
    for d in decisions:
        kept = seen.get(d.conversation_id)
        if kept is None or kept.verdict != "failed":
            seen[d.conversation_id] = d
    return seen


class CandidateVerdict(msgspec.Struct, frozen=True):
    """A conversation's verdict under one of its candidate scenarios (nothing named
    which it plays, and several scenarios' setups match it): provisional."""

    scenario: str
    verdict: str


class ToolEntryResult(msgspec.Struct, frozen=True):
    """One ``goals.expected_tools`` entry of one conversation, scored as Rasa scores it.

    On the wire (the JSON report's ``expected_tools.entries``): ``{"index": 0,
    "kind": "tool_group", "verdict": "failed", "gate": true, "turn": 2,
    "decided_at": null, "reason": "...", "recall": 0.5, "precision": 0.5,
    "file": "eval/scenarios/card.yml", "line": 31}``. ``verdict`` is Rasa's
    accuracy (``passed`` = 1.0); ``turn`` the user turn the entry matched on,
    or for a group that never matched the turn that came closest (None when
    no tool ran); ``recall`` and ``precision`` are None until the conversation
    ends (and precision when no tool ran at all).
    """

    index: int
    kind: str  # tool_called | tool_group
    verdict: Verdict
    gate: bool
    turn: int | None
    decided_at: int | None
    reason: str
    recall: float | None = None
    precision: float | None = None
    file: str | None = None
    line: int | None = None


class ToolCallScores(msgspec.Struct, frozen=True):
    """A conversation's ``expected_tools`` scores: each entry, and Rasa's conversation
    means of recall, precision and accuracy over the entries (None where no entry has
    the metric, or before the conversation ends)."""

    entries: tuple[ToolEntryResult, ...]
    recall: float | None = None
    precision: float | None = None
    accuracy: float | None = None

    @property
    def gates_failed(self) -> int:
        """Entries with ``gate: true`` that failed: with ``--tool-calls`` they fail the run."""
        return sum(e.gate and e.verdict == "failed" for e in self.entries)


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
    # The sequence of each turn's user message (the first 1,000 turns).
    turn_starts: tuple[int, ...] = ()
    # Its scenario's `goals.expected_tools`, scored (None when it has none).
    expected_tools: ToolCallScores | None = None
    # Stopped early: a stop was sent for it (a stop message, the gate's `[]`, the
    # Kafka stop topic), whatever was still pending then. The one meaning every
    # output shows.
    stopped: bool = False


#: Occurrences of each warning an evaluator (or the merge of several) keeps for the
#: report; the counters go on past them. Per warning, so that a flood of duplicates
#: does not hide the one gap.
MAX_OCCURRENCES = 100


class Occurrence(msgspec.Struct, frozen=True, omit_defaults=True):
    """Where one of the feed's irregularities happened: the conversation and sequence
    of a gap given up on (``sequence`` to ``last``), a late, duplicate or foreign
    event, or one of a kind this version does not know. ``warning`` is the report's
    counter it adds to (``gaps``, ``gaps_passed``, ``late_events``, ``duplicates``,
    ``sequence_conflicts``, ``foreign_events``, ``unknown_kinds``)."""

    warning: str
    conversation_id: str
    sequence: int | None = None  # None: a row without one
    last: int | None = None  # a gap's last missing sequence, when it spans several
    # A sequence conflict: the event applied after the one already applied at its
    # sequence (``applied_event_id``).
    event_id: str | None = None
    applied_event_id: str | None = None


def bounded(occurrences: Iterable[Occurrence]) -> list[Occurrence]:
    """The first :data:`MAX_OCCURRENCES` occurrences of each warning, in order."""
    kept: list[Occurrence] = []
    seen: dict[str, int] = {}
    for o in occurrences:
        n = seen.get(o.warning, 0)
        if n < MAX_OCCURRENCES:
            seen[o.warning] = n + 1
            kept.append(o)
    return kept


class Tally:
    """An evaluator's running counters, each named as its :class:`Statistics` field:
    the statistics, a checkpoint's counters and the report's warnings are all derived
    from it by field name (:data:`COUNTED`, :data:`SAVED`), never spelled out again."""

    __slots__ = (
        "bad_events",
        "decisions",
        "duplicates",
        "events",
        "failed",
        "foreign_events",
        "gaps",
        "gaps_passed",
        "held",
        "late_events",
        "passed",
        "replayed",
        "sequence_conflicts",
        "unnamed_given_up",
    )

    def __init__(self) -> None:
        for name in self.__slots__:
            setattr(self, name, 0)

    events: int
    late_events: int
    duplicates: int
    gaps: int
    gaps_passed: int
    sequence_conflicts: int
    held: int  # events waiting in reorder windows now
    bad_events: int
    replayed: int
    foreign_events: int
    unnamed_given_up: int
    decisions: int
    passed: int
    failed: int

    def counted(self) -> dict[str, int]:
        """Every counter, by name."""
        return {name: getattr(self, name) for name in COUNTED}

    def saved(self) -> dict[str, int]:
        """The counters a checkpoint keeps (:data:`SAVED`), by name."""
        return {name: getattr(self, name) for name in SAVED}

    def restore(self, saved: object) -> None:
        """The counters of a checkpoint (any record with the :data:`SAVED` fields)."""
        for name in SAVED:
            setattr(self, name, getattr(saved, name))


#: Every counter of a Tally (each a Statistics field).
COUNTED: tuple[str, ...] = Tally.__slots__
#: The counters a checkpoint keeps: what is open, held or replayed now is not saved.
SAVED: tuple[str, ...] = (
    "events",
    "late_events",
    "duplicates",
    "gaps",
    "gaps_passed",
    "sequence_conflicts",
    "decisions",
    "passed",
    "failed",
)


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
    # Missing sequences passed at once: the source delivers each conversation in
    # order (Feed.ordered), so they were never sent (Rasa numbers events it does
    # not publish); unlike `gaps`, nothing was held for them.
    gaps_passed: int = 0
    # Events at a sequence already applied with another event_id: applied after it.
    sequence_conflicts: int = 0
