"""One conversation's state in the engine, and the limits that bound it.

A :class:`Conversation` is everything the evaluator keeps per conversation:
its scenario (see :class:`ScenarioStatus`), its machines and verdicts, its turn, and
the ordering state (last applied ``sequence``, held events, given-up gaps,
recent ids of rows without a sequence). Every field is bounded by the
scenario or by a constant here, never by the conversation's length.
"""

from __future__ import annotations

from collections import deque
from enum import StrEnum
from typing import Any

import msgspec

from mantle_stream.core.assertions.compiler import Plan
from mantle_stream.core.assertions.tool_scores import ToolScorer
from mantle_stream.core.errors import EventError
from mantle_stream.core.events.model import (
    Event,
    Payload,
)
from mantle_stream.core.verdicts import (
    AssertionResult,
    CandidateVerdict,
    ConversationResult,
    Decision,
    ToolCallScores,
    Verdict,
)

__all__ = [
    "APPLIED_IDS",
    "MAX_SEQUENCE_JUMP",
    "MAX_TOMBSTONES",
    "MAX_TURN_STARTS",
    "MAX_UNNAMED_BUFFER",
    "MAX_UNNAMED_BYTES",
    "RECENT_GAPS",
    "RECENT_IDS",
    "Conversation",
    "Conversations",
    "Irregular",
    "LineFinder",
    "ScenarioStatus",
    "UnmatchedConversation",
    "result_of",
]

#: Events, and their bytes (as JSON), kept for a conversation that has not yet
#: named its scenario; beyond either it is given up on (``unnamed_given_up``).
MAX_UNNAMED_BUFFER = 1000
MAX_UNNAMED_BYTES = 1 << 20
_json_encode = msgspec.json.Encoder().encode
#: Event ids remembered per conversation for events that carry no sequence.
RECENT_IDS = 64
#: A jump in one conversation's `sequence` past which it is a wrong number, not a
#: gap (a Mantle conversation has at most 30 simulated turns: some hundreds of events).
MAX_SEQUENCE_JUMP = 100_000
#: Ids of conversations let go of (keep_finished) remembered to count late events.
MAX_TOMBSTONES = 100_000
#: Turn starts remembered per conversation (for pictures of it; a Mantle
#: conversation has at most 30 simulated turns).
MAX_TURN_STARTS = 1000
#: Given-up gaps remembered per conversation, to tell late events from duplicates.
RECENT_GAPS = 16
#: Event ids of the last applied sequences remembered per conversation (a power of
#: two: a slot is ``sequence & (APPLIED_IDS - 1)``), to tell a row delivered again
#: from another event at the same sequence (a sequence conflict). Further back, a
#: row at an applied sequence is taken for a duplicate.
APPLIED_IDS = 32


class ScenarioStatus(StrEnum):
    """Which scenario judges a conversation, as far as the engine knows so far."""

    JUDGED = "judged"  # it has its plan
    WAITING = "waiting"  # several scenarios, none named yet: its events are buffered
    # Several candidates (by their setups) and none named yet: judged against each
    # apart, its events buffered still, so that a name given later judges it.
    CANDIDATES = "candidates"
    NOT_LOADED = "not loaded"  # it named a scenario not loaded (``requested``): never judged
    GAVE_UP = "gave up"  # it named none within the buffer's limits: never judged


class UnmatchedConversation(msgspec.Struct, frozen=True, omit_defaults=True):
    """A conversation judged against no scenario: it named none, or an unknown one.

    ``did_you_mean``: the loaded scenario (name or file stem) closest to the
    one it named, when one is close.
    """

    conversation_id: str
    scenario: str | None
    events: int
    did_you_mean: str | None = None
    # Several scenarios' initial slots matched its setup, and nothing named one of them.
    candidates: tuple[str, ...] = ()
    # Its verdict under each candidate, judged apart (provisional: none is its scenario).
    candidate_verdicts: tuple[CandidateVerdict, ...] = ()

    def why(self) -> str:
        """Why it was not judged, in a few words every output uses."""
        if self.scenario:
            why = f"its scenario `{self.scenario}` is not loaded"
            return why + (f"; did you mean `{self.did_you_mean}`?" if self.did_you_mean else "")
        if self.candidate_verdicts:
            each = ", ".join(f"`{c.scenario}` {c.verdict}" for c in self.candidate_verdicts)
            return (
                f"its setup matches {len(self.candidate_verdicts)} scenarios, judged apart: {each}"
            )
        if self.candidates:
            return f"its setup matches {len(self.candidates)} scenarios: " + ", ".join(
                f"`{c}`" for c in self.candidates
            )
        return (
            "several scenarios are loaded and no --results file, metadata `scenario` "
            "or setup names one"
        )


class Irregular(Exception):
    """An EventError at a position of a decoded chunk (to find its line)."""

    def __init__(self, error: EventError, position: int) -> None:
        self.error = error
        self.position = position


class LineFinder:
    """The i-th line of a chunk, for the rare events decoded again from their line.

    Lines are asked for in increasing order, so the search goes on from the
    end of the last one found: a chunk is scanned at most once, and not at
    all when every event in it is regular (splitting each chunk would cost
    more than skipping the events that need it).
    """

    __slots__ = ("chunk", "end", "index")

    def __init__(self, chunk: bytes) -> None:
        self.chunk = chunk
        self.index = -1  # the last line found, which ends at `end`
        self.end = -1

    def line(self, index: int) -> bytes:
        find = self.chunk.find
        i, end = self.index, self.end
        if index <= i:
            i = end = -1
        while True:
            start = end + 1
            end = find(b"\n", start)
            i += 1
            if i == index or end < 0:
                break
        self.index, self.end = i, end
        return self.chunk[start:] if end < 0 else self.chunk[start:end]


class Conversation:
    """Everything the evaluator keeps of one conversation, in five groups of slots.

    Each group is written by one collaborator of the evaluator:

    * **Judging** (the hot loop and :class:`~.settling.Settling`): ``plan``, its
      ``machines`` (``UNTOUCHED`` until an event reaches one, None once decided),
      ``results``, ``pending``, ``failed``, ``armed``, ``events``, ``turn`` and
      ``turn_starts``, ``tools`` and ``tool_scores`` (expected_tools), ``finished``,
      ``stopped`` and ``stop_skips`` (a stop was sent for it), ``first_time`` and
      ``last_time``.
    * **Scenario choice** (:class:`~.scenarios.ScenarioChoice`): ``naming`` (a
      :class:`ScenarioStatus`), ``requested``, ``buffer`` and ``buffered`` (its
      events until its scenario is named), ``candidates``.
    * **Ordering** (:class:`~.ordering.Ordering`): ``last_seq``, ``max_seen``,
      ``applied_ids``, ``held`` (the reorder window), ``gave_up``, ``late_max``,
      ``unsequenced`` and ``recent_ids`` (rows without a sequence).
    * **Replay after a restore** (:class:`~.checkpoints.Checkpoints` sets them,
      ordering reads them): ``replay_upto``, ``replay_late``,
      ``replay_unsequenced``.
    * **Identity**: ``cid``, and ``owner`` (the connection it belongs to).
    """

    __slots__ = (
        "applied_ids",
        "armed",
        "buffer",
        "buffered",
        "candidates",
        "cid",
        "events",
        "failed",
        "finished",
        "first_time",
        "gave_up",
        "held",
        "last_seq",
        "last_time",
        "late_max",
        "machines",
        "max_seen",
        "naming",
        "owner",
        "pending",
        "plan",
        "recent_ids",
        "replay_late",
        "replay_unsequenced",
        "replay_upto",
        "requested",
        "results",
        "stop_skips",
        "stopped",
        "tool_scores",
        "tools",
        "turn",
        "turn_starts",
        "unsequenced",
    )

    def __init__(self, cid: str, plan: Plan | None) -> None:
        self.cid = cid
        self.plan = plan
        self.machines: list[Any] = list(plan.untouched) if plan else []
        self.results: list[Decision | None] = [None] * len(self.machines)
        self.pending = len(self.machines)
        self.failed = False  # an assertion has failed
        self.events = 0
        self.turn = 0
        self.turn_starts: list[int] = []  # the sequence of each turn's user message
        self.armed: list[int] = []  # machines to show the next turn-starting user event
        # Its scenario's expected_tools: scored from its first tool run, final at its end.
        self.tools: ToolScorer | None = None
        self.tool_scores: ToolCallScores | None = None
        self.finished = False
        self.stopped: Decision | None = None  # the simulator was told to stop, after this
        # Its simulator stops when told (the runner's, the gate's): what is still pending
        # at its end is skipped. A Kafka member's judges on (False).
        self.stop_skips = True
        self.owner: object = None  # the connection whose conversation it is (see push_chunk)
        self.naming = ScenarioStatus.JUDGED if plan else ScenarioStatus.WAITING
        self.requested: str | None = None  # the scenario it named (ScenarioStatus.NOT_LOADED)
        # (event, payload) held until the scenario is named
        self.buffer: list[tuple[Event, Payload]] | None = None
        self.buffered = 0  # bytes in it (as JSON)
        # The scenarios its setup matched at its first user message (several: it waits on)
        self.candidates: tuple[str, ...] | None = None
        # Ordering: events are applied in `sequence` order. `last_seq` is the
        # last applied (everything at or below it is a duplicate or too late);
        # `held` keeps events that arrived after a gap, at most the reorder
        # window, as a heap of (sequence, arrival, event). A row without a
        # sequence that arrives while events are held waits behind the highest
        # sequence that had arrived before it (`max_seen`).
        self.last_seq = -1
        self.max_seen = -1
        # The event_id applied at each of the last APPLIED_IDS sequences, by
        # `sequence & (APPLIED_IDS - 1)` (None: unknown, or a gap passed or given up on).
        self.applied_ids: list[str | None] = [None] * APPLIED_IDS
        self.held: list[tuple[int, int, Event, Payload]] | None = None
        self.gave_up: list[tuple[int, int]] | None = None  # gaps given up on, for late events
        self.replay_upto = -1  # restored from a checkpoint: sequences applied before
        self.late_max = -1  # the highest sequence that came after the end
        # Timestamps of its first applied event and of its session_ended.
        self.first_time: object = None
        self.last_time: object = None
        self.replay_late = -1  # ... before a restore
        self.unsequenced = 0  # rows without a sequence seen so far
        self.replay_unsequenced = 0  # ... of which this many were seen before a restore
        self.recent_ids: deque[str] | None = None  # ids of recent sequence-less events


class Conversations:
    """The conversations an evaluator holds: every one by id (in order of first event),
    the open ones, and how many of them are judged (have a scenario)."""

    __slots__ = ("all", "judged", "open")

    def __init__(self) -> None:
        self.all: dict[str, Conversation] = {}
        self.open: dict[str, Conversation] = {}  # not finished yet
        self.judged = 0  # conversations with a scenario (the rest are unmatched)

    def add(self, conv: Conversation) -> None:
        """A conversation's first event (or its restore)."""
        if conv.plan is not None and conv.cid not in self.all:
            self.judged += 1
        self.all[conv.cid] = conv
        if not conv.finished:
            self.open[conv.cid] = conv

    def discard(self, cid: str) -> None:
        """Drop a conversation, open or finished, uncounted (a candidate's evaluator)."""
        self.all.pop(cid, None)
        self.open.pop(cid, None)


def result_of(conv: Conversation) -> ConversationResult:
    """A judged conversation's picture now: its verdicts, pending ones included."""
    plan = conv.plan
    assert plan is not None
    assertions = tuple(
        AssertionResult(i, plan.kinds[i], "pending", None, "", None, plan.file, plan.lines[i])
        if r is None
        else AssertionResult.of(r)
        for i, r in enumerate(conv.results)
    )
    verdicts = {a.verdict for a in assertions}
    verdict: Verdict = (
        "failed"
        if "failed" in verdicts
        else "pending"
        if "pending" in verdicts
        else "errored"
        if "errored" in verdicts
        else "passed"
    )
    first, last = conv.first_time, conv.last_time
    started = first if type(first) is float else None
    return ConversationResult(
        conv.cid,
        plan.scenario.name,
        verdict,
        conv.events,
        assertions,
        conv.finished,
        conv.turn,
        started,
        max(last - first, 0.0)  # type: ignore[operator]
        if started is not None and type(last) is float
        else None,
        tuple(conv.turn_starts),
        _tool_scores(conv, plan),
        conv.stopped is not None,
    )


def _tool_scores(conv: Conversation, plan: Plan) -> ToolCallScores | None:
    """The conversation's expected_tools scores: final once it ended, else what has
    passed so far."""
    if plan.expected_tools is None:
        return None
    if conv.tool_scores is not None:
        return conv.tool_scores
    scorer = conv.tools or plan.expected_tools.scorer()
    return scorer.scores(finished=False)
