"""Checkpoints: an evaluator's state as JSON, to resume a run after a restart.

What is saved: every judged conversation's state (machine states, verdicts,
ordering), encoded once for a finished conversation, and the counters; a
fingerprint of each scenario's assertions, so an edited scenario cannot
resume machines compiled from the old one. Events held in a reorder window
are not saved: they were not applied, so a re-read delivers them again.
"""

from __future__ import annotations

import hashlib
from collections import deque
from typing import Any

import msgspec

from mantle_stream.core.assertions.base import UNTOUCHED
from mantle_stream.core.assertions.compiler import Plan
from mantle_stream.core.engine.conversation import RECENT_IDS, Conversation, Conversations
from mantle_stream.core.engine.notes import Notes
from mantle_stream.core.errors import UsageError
from mantle_stream.core.verdicts import Decision, Occurrence, Tally, ToolCallScores

__all__ = ["Checkpoint", "Checkpoints", "ConversationState", "Frozen"]


class ConversationState(msgspec.Struct, frozen=True):
    """Checkpoint of one judged conversation: plain data, msgspec-serializable."""

    conversation_id: str
    scenario: str
    events: int
    last_seq: int
    turn: int
    armed: list[int]
    results: list[Decision | None]
    machines: list[list[Any] | None]
    finished: bool = False
    unsequenced: int = 0  # rows without a sequence seen (replayed ones are skipped)
    recent_ids: list[str] = []
    gave_up: list[tuple[int, int]] = []
    stopped: Decision | None = None
    stop_skips: bool = True  # see Conversation.stop_skips
    late_max: int = -1  # the highest sequence that came after the end
    first_time: float | str | None = None  # timestamps of its first and last applied events
    last_time: float | str | None = None
    turn_starts: list[int] = []  # the sequence of each turn's user message
    # Its scenario's expected_tools: the scorer's state while open, the scores once ended.
    expected_tools: list[Any] | None = None
    tool_scores: ToolCallScores | None = None


class Checkpoint(msgspec.Struct, frozen=True):
    """Everything an evaluator needs to resume: see :meth:`Evaluator.checkpoint`."""

    version: int  # its counters are named as Tally's (SAVED), set and read by name
    scenarios: list[str]
    conversations: list[ConversationState]  # encoded once each after they finish
    # Per scenario, a digest of its assertions: an edited scenario of the same
    # name must not resume machines compiled from the old one.
    fingerprints: list[str] = []
    omitted: dict[str, int] = {}  # conversations let go of (keep_finished), counted
    events: int = 0
    late_events: int = 0
    duplicates: int = 0
    gaps: int = 0
    decisions: int = 0
    passed: int = 0
    failed: int = 0
    # Where the late, duplicate, gap (and foreign) events counted above were.
    occurrences: list[Occurrence] = []
    gaps_passed: int = 0
    sequence_conflicts: int = 0


_CHECKPOINT_VERSION = 2
_checkpoint_decoder = msgspec.json.Decoder(Checkpoint)
_checkpoint_encoder = msgspec.json.Encoder()


class Frozen:
    """Finished conversations' encoded states, each encoded once for every checkpoint.

    ``waiting``: ids of finished conversations not encoded yet, once checkpoints
    are taken (see :meth:`Checkpoints.freeze_finished`); None until then, so a
    run without them holds nothing here. Ids, not conversations: one let go of
    is freed at once.
    """

    __slots__ = ("encoded", "waiting")

    def __init__(self) -> None:
        self.encoded: dict[str, msgspec.Raw] = {}
        self.waiting: deque[str] | None = None

    def queue(self, cid: str) -> None:
        """A judged conversation finished: encode it for the next checkpoint."""
        if self.waiting is not None:
            self.waiting.append(cid)

    def thaw(self, cid: str) -> None:
        """A finished conversation's state changed (what came after its end): its
        encoding is stale, so it is encoded again for the next checkpoint."""
        if self.encoded.pop(cid, None) is not None and self.waiting is not None:
            self.waiting.append(cid)

    def drop(self, cid: str) -> None:
        """The conversation was let go of: nothing of it is saved."""
        self.encoded.pop(cid, None)


class Checkpoints:
    """Saves an evaluator's conversations and counters, and restores them."""

    __slots__ = ("book", "by_name", "frozen", "notes", "omitted", "plans", "tally")

    def __init__(
        self,
        plans: list[Plan],
        by_name: dict[str, Plan],
        book: Conversations,
        tally: Tally,
        notes: Notes,
        omitted: dict[str, int],
        frozen: Frozen,
    ) -> None:
        self.plans = plans
        self.by_name = by_name  # each plan by its scenario's name and file stem
        self.book = book
        self.tally = tally
        self.notes = notes
        self.omitted = omitted  # Retention's counters of the conversations let go of
        self.frozen = frozen

    def conversation_state(self, conversation_id: str) -> ConversationState:
        """See ``Evaluator.conversation_state``."""
        conv = self.book.all.get(conversation_id)
        if conv is None or conv.plan is None:
            raise UsageError(f"no judged conversation `{conversation_id}`")
        waiting = [e.event_id for _, _, e, _ in conv.held or () if e.sequence is None]
        return ConversationState(
            conversation_id=conv.cid,
            scenario=conv.plan.scenario.name,
            events=conv.events,
            last_seq=conv.last_seq,
            turn=conv.turn,
            turn_starts=list(conv.turn_starts),
            armed=list(conv.armed),
            results=list(conv.results),
            machines=[
                None if m is None else conv.plan.fresh_states[i] if m is UNTOUCHED else m.state()
                for i, m in enumerate(conv.machines)
            ],
            # Rows without a sequence still held were not applied: a re-read must
            # see them as new, neither replayed nor repeated.
            finished=conv.finished,
            unsequenced=conv.unsequenced - len(waiting),
            recent_ids=[i for i in conv.recent_ids or () if i not in set(waiting)],
            gave_up=list(conv.gave_up or ()),
            late_max=conv.late_max,
            first_time=conv.first_time,  # type: ignore[arg-type]
            last_time=conv.last_time,  # type: ignore[arg-type]
            stopped=conv.stopped,
            stop_skips=conv.stop_skips,
            expected_tools=None if conv.tools is None else conv.tools.state(),
            tool_scores=conv.tool_scores,
        )

    def restore_conversation(self, state: ConversationState) -> None:
        """See ``Evaluator.restore_conversation``."""
        plan = self.by_name.get(state.scenario)
        if plan is None:
            raise UsageError(f"checkpoint names unknown scenario `{state.scenario}`")
        machines = len(plan.kinds) if state.finished else len(state.machines)
        if not len(state.results) == machines == len(plan.kinds):  # (an ended one keeps none)
            raise ValueError(
                f"{len(state.results)} results and {len(state.machines)} machines "
                f"saved for {len(plan.kinds)} assertions"
            )
        conv = Conversation(state.conversation_id, plan)
        conv.events, conv.turn, conv.armed = state.events, state.turn, list(state.armed)
        conv.turn_starts = list(state.turn_starts)
        conv.last_seq = conv.replay_upto = conv.max_seen = state.last_seq
        conv.unsequenced = conv.replay_unsequenced = state.unsequenced
        if state.recent_ids:
            conv.recent_ids = deque(state.recent_ids, maxlen=RECENT_IDS)
        conv.gave_up = [(lo, hi) for lo, hi in state.gave_up] or None
        conv.late_max = conv.replay_late = state.late_max
        conv.first_time, conv.last_time = state.first_time, state.last_time
        conv.stopped, conv.stop_skips = state.stopped, state.stop_skips
        conv.results = list(state.results)
        conv.finished = state.finished
        if state.finished:
            conv.machines = []
        else:
            for index, machine_state in enumerate(state.machines):
                if machine_state is None:
                    conv.machines[index] = None
                elif machine_state != plan.fresh_states[index]:
                    machine = conv.machines[index] = plan.machine(index)
                    machine.restore(machine_state)
        conv.tool_scores = state.tool_scores
        if state.expected_tools is not None and plan.expected_tools is not None:
            conv.tools = plan.expected_tools.scorer()
            conv.tools.restore(state.expected_tools)
        conv.pending = sum(1 for r in conv.results if r is None)
        conv.failed = any(r is not None and r.verdict == "failed" for r in conv.results)
        self.book.add(conv)

    def freeze_finished(self, limit: int) -> int:
        """See ``Evaluator.freeze_finished``."""
        queue = self.frozen.waiting
        if queue is None:  # the first call: every finished conversation so far
            queue = self.frozen.waiting = deque(
                c.cid for c in self.book.all.values() if c.finished and c.plan is not None
            )
        frozen, convs = self.frozen.encoded, self.book.all
        while limit > 0 and queue:
            cid = queue.popleft()
            if cid in convs and cid not in frozen:  # (not let go of already)
                frozen[cid] = msgspec.Raw(_checkpoint_encoder.encode(self.conversation_state(cid)))
                limit -= 1
        return len(queue)

    def checkpoint(self) -> bytes:
        """See ``Evaluator.checkpoint``."""
        self.freeze_finished(len(self.book.all))
        frozen = self.frozen.encoded
        states: list[Any] = [
            frozen[conv.cid] if conv.finished else self.conversation_state(conv.cid)
            for conv in self.book.all.values()
            if conv.plan is not None
        ]
        return _checkpoint_encoder.encode(
            Checkpoint(
                version=_CHECKPOINT_VERSION,
                scenarios=[p.scenario.name for p in self.plans],
                fingerprints=self.fingerprints(),
                omitted=dict(self.omitted),
                conversations=states,
                **{
                    **self.tally.saved(),
                    # Held events were not applied, and conversations not judged are not
                    # saved: a re-read counts both again.
                    "events": self.tally.events
                    - self.tally.held
                    - sum(c.events for c in self.book.all.values() if c.plan is None),
                },
                occurrences=self.notes.saved(),
            )
        )

    def fingerprints(self) -> list[str]:
        # (expected_tools only when there are some: older checkpoints stay valid)
        return [
            hashlib.sha256(
                msgspec.json.encode(p.scenario.assertions)
                + (
                    msgspec.json.encode(p.scenario.expected_tools)
                    if p.scenario.expected_tools
                    else b""
                )
            ).hexdigest()[:16]
            for p in self.plans
        ]

    def restore(self, data: bytes) -> None:
        """See ``Evaluator.restore``."""
        try:
            saved = _checkpoint_decoder.decode(data)
        except msgspec.DecodeError as exc:
            raise UsageError(f"not a mantle-stream checkpoint: {exc}") from None
        if saved.version != _CHECKPOINT_VERSION:
            raise UsageError(f"checkpoint version {saved.version} is not supported")
        names = [p.scenario.name for p in self.plans]
        if saved.scenarios != names:
            raise UsageError(
                "the checkpoint was taken with other scenarios "
                f"({', '.join(saved.scenarios)}); load the same ones to resume"
            )
        changed = [
            name
            for name, old, new in zip(
                names, saved.fingerprints or [""] * len(names), self.fingerprints(), strict=True
            )
            if old != new
        ]
        if changed:
            raise UsageError(
                f"the checkpoint was taken before scenario {', '.join(f'`{n}`' for n in changed)} "
                "changed: its saved verdicts and machines belong to other assertions; remove "
                "the state file to judge the feed afresh"
            )
        if self.book.all:
            raise UsageError("restore into a fresh evaluator")
        for state in saved.conversations:
            try:
                self.restore_conversation(state)
            except (IndexError, KeyError, TypeError, ValueError) as exc:
                raise UsageError(
                    f"the checkpoint is damaged (conversation "
                    f"`{state.conversation_id}`: {exc}); remove the state file "
                    "to judge the feed afresh"
                ) from None
        self.tally.restore(saved)  # (bad lines are not saved: a re-read meets them again)
        self.notes.restore(saved.occurrences)
        self.omitted.update(saved.omitted)
