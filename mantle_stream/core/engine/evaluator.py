"""The engine: conversations, routing, verdicts. The embeddable library API.

Last stage of the pure core. An :class:`Evaluator` holds one compiled
:class:`~mantle_stream.core.assertions.compiler.Plan` per scenario and, per open
conversation, one machine per assertion. Each event is routed only to the
machines indexed under its payload type and key; a decision is reported the
moment a machine makes it and the machine is then dropped, so a decided
verdict never changes and costs nothing afterwards.

No I/O, no clock: feeds, the CLI and the live view drive it from the edges.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import heapq
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import msgspec

from mantle_stream.core.assertions.base import ARM, UNTOUCHED, MatchTimeout
from mantle_stream.core.assertions.compiler import BY_VALUE, Plan, compile_scenario
from mantle_stream.core.defaults import DEFAULT_REGEX_TIMEOUT, DEFAULT_REORDER_WINDOW
from mantle_stream.core.errors import CONTROL_ESCAPES, EventError, UsageError
from mantle_stream.core.events.decode import MAX_LINE_BYTES, EventDecoder
from mantle_stream.core.events.model import (
    UNKNOWN,
    Event,
    MemorySet,
    Payload,
    SessionEnded,
    Skipped,
    ToolExecuted,
    User,
    count_lines,
    excerpt,
    metadata_field,
    parse_json_value,
    payload_of,
)
from mantle_stream.core.scenario.model import Scenario
from mantle_stream.core.verdicts import (
    AssertionResult,
    ConversationResult,
    Decision,
    Statistics,
    Verdict,
)

__all__ = [
    "DEFAULT_REORDER_WINDOW",
    "Checkpoint",
    "ConversationState",
    "Evaluator",
    "UnmatchedConversation",
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
#: Given-up gaps remembered per conversation, to tell late events from duplicates.
RECENT_GAPS = 16


class UnmatchedConversation(msgspec.Struct, frozen=True, omit_defaults=True):
    """A conversation judged against no scenario: it named none, or an unknown one.

    ``did_you_mean``: the loaded scenario (name or file stem) closest to the
    one it named, when one is close.
    """

    conversation_id: str
    scenario: str | None
    events: int
    did_you_mean: str | None = None


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
    late_max: int = -1  # the highest sequence that came after the end
    first_time: float | str | None = None  # timestamps of its first and last applied events
    last_time: float | str | None = None


class Checkpoint(msgspec.Struct, frozen=True):
    """Everything an evaluator needs to resume: see :meth:`Evaluator.checkpoint`."""

    version: int
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


_CHECKPOINT_VERSION = 2
_checkpoint_decoder = msgspec.json.Decoder(Checkpoint)
_checkpoint_encoder = msgspec.json.Encoder()


class _Irregular(Exception):
    """Internal: an EventError at a position of a decoded chunk (to find its line)."""

    def __init__(self, error: EventError, position: int) -> None:
        self.error = error
        self.position = position


_parse_json = msgspec.json.Decoder().decode


def _value_error(payload: Payload) -> EventError:
    """Why the JSON-in-a-string of a payload did not parse (the engine's slow path)."""
    try:
        _value_of(payload)
    except EventError as exc:
        return exc
    raise AssertionError(f"the value of {payload!r} parses")


def _value_of(payload: Payload) -> Any:
    """The parsed JSON-in-a-string of a memory write or a tool run."""
    if type(payload) is MemorySet:
        return parse_json_value(payload.value_json, "`memory_set.value_json`")
    tool: ToolExecuted = payload  # type: ignore[assignment]
    value = parse_json_value(
        tool.arguments_json or "{}",  # None or "": no arguments
        "`tool_executed.arguments_json`",
    )
    if type(value) is not dict:
        raise EventError(
            f"`tool_executed.arguments_json` must hold a JSON object, got {type(value).__name__}"
        )
    return value


class _LineFinder:
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


class _Conversation:
    __slots__ = (
        "armed",
        "buffer",
        "buffered",
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
        "owner",
        "pending",
        "plan",
        "recent_ids",
        "replay_late",
        "replay_unsequenced",
        "replay_upto",
        "requested",
        "results",
        "stopped",
        "turn",
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
        self.armed: list[int] = []  # machines to show the next turn-starting user event
        self.finished = False
        self.stopped: Decision | None = None  # the simulator was told to stop, after this
        self.owner: object = None  # the connection whose conversation it is (see push_chunk)
        self.requested: str | None = None  # a scenario name that is not loaded
        # (event, payload) held until the scenario is named
        self.buffer: list[tuple[Event, Payload]] | None = None
        self.buffered = 0  # bytes in it (as JSON)
        # Ordering: events are applied in `sequence` order. `last_seq` is the
        # last applied (everything at or below it is a duplicate or too late);
        # `held` keeps events that arrived after a gap, at most the reorder
        # window, as a heap of (sequence, arrival, event). A row without a
        # sequence that arrives while events are held waits behind the highest
        # sequence that had arrived before it (`max_seen`).
        self.last_seq = -1
        self.max_seen = -1
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


class Evaluator:
    """Judges conversations against scenarios while their events arrive.

    >>> evaluator = Evaluator(load_scenarios(["scenarios/"]))   # doctest: +SKIP
    >>> for decision in evaluator.push_line(line): ...           # doctest: +SKIP
    >>> evaluator.finish_all(); evaluator.results()              # doctest: +SKIP

    Which scenario judges a conversation: the one ``assignments`` names for
    its id (an ``evaluate_agent`` results folder, see :mod:`mantle_stream.core.recorded`); else,
    with one scenario loaded, that one; else the scenario whose name or file
    stem is ``"scenario"`` in the envelope metadata of its events.
    """

    def __init__(
        self,
        scenarios: Scenario | Iterable[Scenario],
        *,
        source: str = "<events>",
        reorder_window: int = DEFAULT_REORDER_WINDOW,
        assignments: Mapping[str, str] | None = None,
        regex_timeout: float = DEFAULT_REGEX_TIMEOUT,
        keep_finished: int | None = None,
    ) -> None:
        if reorder_window < 0:
            raise UsageError(f"the reorder window must be >= 0, got {reorder_window}")
        if keep_finished is not None and keep_finished < 0:
            raise UsageError(f"keep_finished must be >= 0, got {keep_finished}")
        # None: every finished conversation stays for results(); N: only the N
        # most recent, the older ones folded into `omitted()` counters, so a
        # listener that runs for weeks holds what is open now (see _finish).
        self.keep_finished = keep_finished
        # Called with each finished conversation as it is let go of, so a sink that
        # needs every conversation (JUnit) can write it out before it leaves memory.
        self.on_let_go: Callable[[ConversationResult | UnmatchedConversation], None] | None = None
        self._finished_order: deque[str] = deque()
        # Ids of conversations let go (late if seen again), oldest first in the
        # deque. (A dict used as a queue would rescan the deleted slots at its
        # front on every eviction: quadratic over a long run.)
        self._tombstones: set[str] = set()
        self._tombstone_order: deque[str] = deque()
        self._omitted = {
            "conversations": 0,
            "passed": 0,
            "failed": 0,
            "assertions": 0,
            "skipped": 0,
            "errored": 0,
            "unmatched": 0,
        }
        self.reorder_window = reorder_window
        if isinstance(scenarios, Scenario):
            scenarios = [scenarios]
        self._plans = [compile_scenario(s, regex_timeout=regex_timeout) for s in scenarios]
        if not self._plans:
            raise UsageError("an evaluator needs at least one scenario")
        self._by_name: dict[str, Plan] = {}
        for plan in self._plans:
            for name in {plan.scenario.stem, plan.scenario.name}:
                other = self._by_name.get(name)
                if other is not None and len(self._plans) > 1:
                    raise UsageError(
                        f"`{name}` names two scenarios ({other.scenario.path} and "
                        f"{plan.scenario.path}): a results folder or metadata could not tell "
                        "them apart; rename one (its `name`, or its file)"
                    )
                self._by_name[name] = plan
        self._single = self._plans[0] if len(self._plans) == 1 else None
        self._named_other: dict[str, int] = {}  # see other_scenarios()
        self._assignments = dict(assignments or {})
        self._convs: dict[str, _Conversation] = {}
        self._open_convs: dict[str, _Conversation] = {}  # not finished yet
        self._judged = 0  # conversations with a scenario (the rest are unmatched)
        self._decoder = EventDecoder(source)
        self._line = 0
        self._events = 0
        self._late = 0
        self._duplicates = 0  # delivered again: skipped
        self._gaps = 0  # missing sequences given up on
        self._held = 0  # events waiting in reorder windows now
        self._arrivals = 0  # tie-breaker keeping held events in arrival order
        self._releasing = False
        self._bad = 0  # bad events skipped (on_bad)
        self._source: str | None = None  # where the chunk being pushed came from
        self._frozen: dict[str, msgspec.Raw] = {}  # encoded states of finished conversations
        # Ids of finished conversations not encoded yet, once checkpoints are taken
        # (see freeze_finished); None until then, so a run without them holds
        # nothing here. Ids, not conversations: one let go of is freed at once.
        self._unfrozen: deque[str] | None = None
        self._replayed = 0  # events already applied before a restore, seen again
        self._foreign = 0  # events for a conversation another owner holds: refused
        self._unnamed_given_up = 0  # conversations whose buffer filled before a scenario
        self._decisions = 0
        self._failures = 0  # failed decisions so far (what --fail-fast watches)
        self._passed = 0
        self._failed = 0

    # ------------------------------------------------------------------ input

    @property
    def scenarios(self) -> list[Scenario]:
        return [p.scenario for p in self._plans]

    def push(self, event: Event) -> list[Decision]:
        """Apply one parsed event; return the decisions it caused."""
        try:
            payload_of(event)  # exactly one payload and a conversation, or EventError
        except EventError as exc:
            raise EventError(exc.message, source=self._decoder.source) from None
        out: list[Decision] = []
        try:
            self._run([event], out)
        except _Irregular as irregular:
            raise irregular.error from None
        return out

    def push_line(self, line: bytes | str) -> list[Decision]:
        """Apply one JSON line (blank lines are ignored)."""
        self._source = None
        self._line += 1
        if isinstance(line, str):
            try:
                line = line.encode()
            except UnicodeEncodeError as exc:
                raise EventError(
                    f"not valid text ({exc.reason})", source=self._decoder.source, line=self._line
                ) from None
        out: list[Decision] = []
        self._push_line(line.rstrip(b"\r\n"), self._line, out)
        return out

    def _push_line(
        self,
        line: bytes,
        line_no: int,
        out: list[Decision],
        stop_at_failure: bool = False,
        owner: object = None,
    ) -> None:
        """Decode and apply one line on its own (exact line numbers in errors)."""
        try:
            event = self._decoder.decode_raw(line, line_no)
        except EventError as exc:
            raise self._locate(exc, line_no, line) from None
        if event is None:
            return
        try:
            self._run([event], out, stop_at_failure, line, line_no, owner=owner)
        except _Irregular as irregular:
            raise self._locate(irregular.error, line_no, line) from None

    def push_chunk(
        self,
        chunk: bytes,
        *,
        stop_at_failure: bool = False,
        on_bad: Callable[[EventError], object] | None = None,
        first_line: int | None = None,
        source: str | None = None,
        owner: object = None,
    ) -> list[Decision]:
        """Apply a chunk of complete JSON lines (the fast path for files and sockets).

        The chunk must end at a line boundary; a trailing partial line is
        decoded as a line of its own. With ``stop_at_failure`` the events after
        the first one that fails an assertion are not applied (``--fail-fast``).
        A bad event raises :class:`EventError` (the events before it are
        applied); with ``on_bad`` it is reported there, skipped and counted, and
        the rest of the chunk is applied. ``first_line`` and ``source`` name
        where the chunk came from in error messages (a socket connection, say);
        by default lines are counted across every chunk pushed. ``owner``
        (a connection, say) owns the conversations it opens: its events for a
        conversation another owner holds are refused and counted
        (``foreign_events``) until that owner is released (:meth:`release_owner`).
        """
        first = self._line + 1 if first_line is None else first_line
        self._source = source
        lines = count_lines(chunk) + (0 if chunk.endswith(b"\n") or not chunk else 1)
        self._line += lines
        events: list[Event] | None = None
        if len(chunk) <= MAX_LINE_BYTES:  # else the slow path checks each line's length
            # A bad line somewhere: the slow path below finds it and names it.
            with contextlib.suppress(msgspec.DecodeError, RecursionError):
                events = self._decoder.decode_lines(chunk)
            if events is not None and len(events) != lines:
                # Blank lines, or two JSON values on one line: only the line by
                # line path can tell which event came from which line, and it
                # rejects a line holding two values.
                events = None
        out: list[Decision] = []
        if events is None:
            for offset, line in enumerate(chunk.split(b"\n")):
                try:
                    self._push_line(line, first + offset, out, stop_at_failure, owner)
                except EventError as exc:
                    self._bad_event(exc, on_bad, out)
                if stop_at_failure and self._failed_now(out):
                    break
            return out
        start = 0
        split: list[bytes] | None = None
        while True:
            try:
                self._run(
                    events[start:] if start else events,
                    out,
                    stop_at_failure,
                    chunk,
                    first,
                    start,
                    owner=owner,
                )
                return out
            except _Irregular as irregular:
                position = start + irregular.position
                if split is None:
                    split = chunk.split(b"\n")
                self._bad_event(
                    self._locate(irregular.error, first + position, split[position]), on_bad, out
                )
                start = position + 1
                if stop_at_failure and self._failed_now(out):
                    return out

    def _bad_event(
        self, error: EventError, on_bad: Callable[[EventError], object] | None, out: list[Decision]
    ) -> None:
        if on_bad is None:
            error.decisions = out  # made by the events before it: not to be lost
            raise error
        self._bad += 1
        on_bad(error)

    def _locate(self, exc: EventError, line_no: int, line: bytes) -> EventError:
        source = self._source or self._decoder.source
        if exc.line is not None and exc.source == source:
            return exc
        return EventError(
            exc.message,
            source=source,
            line=exc.line if exc.line is not None else line_no,
            excerpt=exc.excerpt or excerpt(line),
        )

    def release_held(self, conversation_id: str | None = None) -> list[Decision]:
        """Apply the events waiting in reorder windows, giving up on their gaps.

        One conversation's, or every conversation's. The runner calls this for
        a conversation whose gap has stayed open for ``--gap-timeout`` seconds.
        """
        out: list[Decision] = []
        if conversation_id is not None:
            conv = self._open_convs.get(conversation_id)
            convs = [] if conv is None else [conv]
        else:
            convs = list(self._open_convs.values())
        for conv in convs:
            if conv.held:
                self._release(conv, out, force=len(conv.held))
        return out

    def release_owner(self, owner: object) -> None:
        """``owner`` is gone: the next owner to send events for its conversations takes
        them over (a simulator that reconnects)."""
        for conv in self._open_convs.values():
            if conv.owner is owner:
                conv.owner = None

    def holding(self) -> list[str]:
        """Conversations with events waiting for a missing earlier sequence."""
        return [cid for cid, conv in self._open_convs.items() if conv.held]

    @staticmethod
    def _failed_now(out: list[Decision]) -> bool:
        return any(d.verdict == "failed" for d in out)

    @property
    def lines_read(self) -> int:
        return self._line

    @property
    def decoder(self) -> EventDecoder:
        return self._decoder

    # ------------------------------------------------------------------ core

    def _run(
        self,
        events: list[Event],
        out: list[Decision],
        stop_at_failure: bool = False,
        chunk: bytes | None = None,
        first: int = 1,
        offset: int = 0,
        known: Payload | None = None,
        owner: object = None,
    ) -> None:
        """Apply events in order: the hot path, kept in one function on purpose.

        Every event of every source passes through this loop, so routing is
        inlined rather than split into helpers: each extra Python call per
        event costs about a fifth of decoding the event. ``chunk`` holds the
        events' lines, one each, from line ``first``; ``events[i]`` is line
        ``offset + i``: a line without exactly one payload field set (a flat
        event, a newer engine's kind, a bad event) is decoded again from it.
        Raises :class:`_Irregular` for a bad event; the events before it stay
        applied. ``known``: the payload of the one event given, found when it
        arrived (a held event that needed its line, applied later without it).
        """
        convs = self._convs
        decide = self._decide
        decoder = self._decoder
        parse_json = _parse_json
        lines: _LineFinder | None = None  # the chunk's lines, found on demand
        failures = self._failures  # failed decisions before these events (stop_at_failure)
        skipped = 0  # events not applied (replayed), or not reached
        try:
            for position, event in enumerate(events):
                # Exactly one payload: single_payload() inlined (see _events for
                # why two chains; the tests check both copies agree).
                payload: Any = (
                    event.stack
                    or event.action
                    or event.bot
                    or event.user
                    or event.tool_executed
                    or event.memory_set
                    or event.bot_turn_ended
                    or event.memory_cleared
                    or event.skill_activated
                    or event.skill_completed
                    or event.skill_interrupted
                    or event.skill_resumed
                    or event.skill_cancelled
                    or event.ordered_block_entered
                    or event.ordered_block_completed
                    or event.ordered_block_interrupted
                    or event.ordered_block_resumed
                    or event.ordered_block_cancelled
                    or event.session_started
                    or event.session_ended
                    or event.inactive
                    or event.user_barge_in
                    or event.tts_finished
                    or event.user_silence_timeout
                    or event.user_input_suppressed
                    or event.unsupported_request_classified
                )
                if payload is None or payload is not (
                    event.unsupported_request_classified
                    or event.user_input_suppressed
                    or event.user_silence_timeout
                    or event.tts_finished
                    or event.user_barge_in
                    or event.inactive
                    or event.session_ended
                    or event.session_started
                    or event.ordered_block_cancelled
                    or event.ordered_block_resumed
                    or event.ordered_block_interrupted
                    or event.ordered_block_completed
                    or event.ordered_block_entered
                    or event.skill_cancelled
                    or event.skill_resumed
                    or event.skill_interrupted
                    or event.skill_completed
                    or event.skill_activated
                    or event.memory_cleared
                    or event.bot_turn_ended
                    or event.memory_set
                    or event.tool_executed
                    or event.user
                    or event.bot
                    or event.action
                    or event.stack
                ):
                    # Not exactly one payload field: a flat event, a newer kind, or
                    # a bad event. Decode its line again on its own.
                    if known is not None:
                        payload = known
                    elif payload is None and event.event is None and decoder.learned_kind(event):
                        payload = UNKNOWN  # a newer kind, decoded as a field of its own
                    else:
                        try:
                            if chunk is None:
                                payload_of(event)  # raises: pushed as an Event
                            if lines is None:
                                lines = _LineFinder(chunk)  # type: ignore[arg-type]
                            event, payload = decoder.classify(
                                event,
                                lines.line(offset + position),
                                first + offset + position,
                                payload is None,
                            )
                        except EventError as exc:
                            raise _Irregular(exc, position) from None
                elif not event.conversation_id:
                    raise _Irregular(EventError("no `conversation_id`"), position)
                cls = type(payload)
                # Parse JSON-in-a-string before touching any state: a bad event
                # leaves the evaluator as it was (the caller may skip it).
                value: Any = None
                if cls is ToolExecuted or cls is MemorySet:
                    try:  # _value_of() inlined; it words the error when this fails
                        if cls is ToolExecuted:
                            text = payload.arguments_json
                            value = parse_json(text) if text else {}  # None, "": none
                            if type(value) is not dict:
                                raise ValueError
                            value = (value, event.metadata)
                        else:
                            value = parse_json(payload.value_json)
                    except (ValueError, RecursionError):  # msgspec.DecodeError is a ValueError
                        raise _Irregular(_value_error(payload), position) from None
                conv = convs.get(event.conversation_id)
                if conv is None:
                    if event.conversation_id in self._tombstones:
                        self._late += 1  # long finished, and let go of
                        continue
                    conv = self._open(event)
                if owner is not None and conv.owner is not owner:
                    if conv.owner is None:
                        conv.owner = owner  # its first connection, or one taking it over
                    else:
                        self._foreign += 1  # another client's conversation: refused
                        continue
                plan = conv.plan
                if plan is None or conv.finished:
                    if conv.finished:
                        skipped += self._after_end(conv, event)
                        continue
                    plan = self._await_scenario(conv, event, payload, out)
                    if plan is None:
                        continue
                seq = event.sequence
                if self._releasing:  # a held event, next in order (see _release)
                    if seq is not None:
                        conv.last_seq = seq
                elif seq is None:
                    # No sequence: arrival order, and its event_id is the only way
                    # to know it was seen before.
                    if conv.replay_unsequenced:
                        conv.replay_unsequenced -= 1  # seen before the restore
                        self._replayed += 1
                        skipped += 1
                        continue
                    conv.unsequenced += 1
                    if event.event_id and self._seen_id(conv, event.event_id):
                        self._duplicates += 1
                        continue
                    if conv.held:
                        self._hold(conv, conv.max_seen, event, payload, out)
                        continue
                elif seq != conv.last_seq + 1:
                    if seq <= conv.last_seq:
                        skipped += self._behind(conv, seq)
                        continue
                    if seq > conv.max_seen:
                        if conv.max_seen >= 0 and seq - conv.max_seen > MAX_SEQUENCE_JUMP:
                            # A typo of 10**12 would otherwise become the high-water
                            # mark and make every later event a duplicate.
                            raise _Irregular(
                                EventError(
                                    f"`sequence` {seq} is more than {MAX_SEQUENCE_JUMP:,} beyond "
                                    f"the highest this conversation has had ({conv.max_seen}): a "
                                    "wrong number, not a gap"
                                ),
                                position,
                            )
                        conv.max_seen = seq
                    if self.reorder_window:
                        self._hold(conv, seq, event, payload, out)
                        continue
                    self._give_up(conv, conv.last_seq + 1, seq - 1)  # no window: no waiting
                    conv.last_seq = seq
                else:
                    conv.last_seq = seq
                    if seq > conv.max_seen:
                        conv.max_seen = seq
                if not conv.events:
                    conv.first_time = event.timestamp  # the first applied, in order
                conv.events += 1
                if cls is not Skipped:
                    if cls is User:
                        text = payload.text
                        # A turn starts at a real message, not "" or a /command.
                        if text and (text := text.strip()) and text[0] != "/":
                            conv.turn += 1
                            if conv.armed:  # machines that asked to see this boundary
                                self._end_of_turn(conv, payload, seq, out)
                    route = plan.routes.get(cls)
                    if route is not None:
                        getter, keyed, wild = route
                        if getter is None:
                            targets = wild
                        elif getter is BY_VALUE:  # a bot message, by its response name
                            value = metadata_field(event.metadata, "utter_action")
                            targets = keyed.get(value, wild) if type(value) is str else wild
                        else:
                            targets = keyed.get(getter(payload), wild)
                        machines = conv.machines
                        turn = conv.turn
                        for index in targets:
                            machine = machines[index]
                            if machine is not None:
                                if machine is UNTOUCHED:
                                    machine = machines[index] = plan.machine(index)
                                try:
                                    outcome = machine.step(payload, value, turn)
                                except MatchTimeout as exc:  # could not be evaluated
                                    decide(conv, index, None, seq, str(exc), out)
                                    continue
                                if outcome is not None:
                                    if outcome is ARM:
                                        conv.armed.append(index)
                                    else:
                                        decide(conv, index, outcome[0], seq, outcome[1], out)
                    if cls is SessionEnded:
                        conv.last_time = event.timestamp  # (not kept per event: it costs)
                        self._drop_held(conv)
                        self._finish(conv, out)
                if conv.held and not self._releasing:
                    self._release(conv, out)
                if stop_at_failure and self._failures != failures:  # this event failed one
                    skipped += len(events) - position - 1
                    return
        except _Irregular as irregular:
            skipped += len(events) - irregular.position
            raise
        finally:
            self._events += len(events) - skipped

    def _behind(self, conv: _Conversation, seq: int) -> int:
        """An event at or below the last applied sequence: 1 if it was replayed."""
        if seq <= conv.replay_upto:
            self._replayed += 1  # applied before the restart
            return 1
        if conv.gave_up and any(lo <= seq <= hi for lo, hi in conv.gave_up):
            self._late += 1  # its gap was given up on before it came
        else:
            self._duplicates += 1
        return 0

    def _after_end(self, conv: _Conversation, event: Event) -> int:
        """An event of a conversation that has ended: 1 if it was replayed."""
        seq = event.sequence
        if seq is None:
            if conv.replay_unsequenced:
                conv.replay_unsequenced -= 1
                self._replayed += 1
                return 1
            conv.unsequenced += 1
            if event.event_id and self._seen_id(conv, event.event_id):
                self._duplicates += 1
            else:
                self._late += 1
            return 0
        if seq <= conv.last_seq:
            return self._behind(conv, seq)
        if seq <= conv.replay_late:
            self._replayed += 1  # counted late before the restart
            return 1
        self._late += 1
        conv.late_max = max(conv.late_max, seq)  # saved, so a resume counts it once
        return 0

    def _seen_id(self, conv: _Conversation, event_id: str) -> bool:
        """Remember the ids of recent sequence-less events (at most RECENT_IDS)."""
        recent = conv.recent_ids
        if recent is None:
            recent = conv.recent_ids = deque(maxlen=RECENT_IDS)
        elif event_id in recent:
            return True
        recent.append(event_id)
        return False

    def _hold(
        self, conv: _Conversation, key: int, event: Event, payload: Payload, out: list[Decision]
    ) -> None:
        """Keep an event that arrived after a gap, in sequence order.

        ``key`` is its sequence, or for a row without one the highest sequence
        that had arrived before it. When the window overflows, the oldest gap
        is given up on.
        """
        held = conv.held
        if held is None:
            held = conv.held = []
        heapq.heappush(held, (key, self._arrivals, event, payload))
        self._arrivals += 1
        self._held += 1
        if len(held) > self.reorder_window:
            self._release(conv, out, force=1)

    def _release(self, conv: _Conversation, out: list[Decision], *, force: int = 0) -> None:
        """Apply the held events that are next in order; ``force`` gaps given up on."""
        held = conv.held
        self._releasing = True
        try:
            while held and not conv.finished:
                key, _, event, payload = held[0]
                if event.sequence is None:
                    if key > conv.last_seq:  # (the events it waits behind are held too)
                        if force <= 0:
                            break  # waits behind events it arrived after
                        force -= 1
                        self._give_up(conv, conv.last_seq + 1, key)
                        conv.last_seq = key
                elif key <= conv.last_seq:  # held twice: the first copy was applied
                    heapq.heappop(held)
                    self._held -= 1
                    self._duplicates += 1
                    continue
                elif key != conv.last_seq + 1:
                    if force <= 0:
                        break
                    force -= 1
                    self._give_up(conv, conv.last_seq + 1, key - 1)
                    conv.last_seq = key - 1
                heapq.heappop(held)
                self._held -= 1
                self._events -= 1  # counted once already, when it arrived
                self._run([event], out, known=payload)
        finally:
            self._releasing = False
        if not held:
            conv.held = None

    def _give_up(self, conv: _Conversation, lo: int, hi: int) -> None:
        self._gaps += 1
        gave_up = conv.gave_up
        if gave_up is None:
            gave_up = conv.gave_up = []
        gave_up.append((lo, hi))
        if len(gave_up) > RECENT_GAPS:
            del gave_up[0]

    def _drop_held(self, conv: _Conversation) -> None:
        """The conversation ended: events still held came after its end (or twice)."""
        if conv.held:
            again = sum(
                1 for key, _, e, _ in conv.held if e.sequence is not None and key <= conv.last_seq
            )
            self._duplicates += again
            self._late += len(conv.held) - again
            self._held -= len(conv.held)
        conv.held = None

    def _end_of_turn(
        self, conv: _Conversation, payload: Payload, seq: int | None, out: list[Decision]
    ) -> None:
        armed, conv.armed = conv.armed, []
        for index in armed:
            machine = conv.machines[index]
            if machine is not None:
                outcome = machine.step(payload, None, conv.turn)
                if outcome is not None and outcome is not ARM:
                    self._decide(conv, index, outcome[0], seq, outcome[1], out)

    def _decide(
        self,
        conv: _Conversation,
        index: int,
        passed: bool | None,
        decided_at: int | None,
        reason: str,
        out: list[Decision],
    ) -> None:
        """Record a verdict: passed, failed, or (``passed`` None) errored."""
        plan = conv.plan
        assert plan is not None
        if not reason.isprintable():
            reason = reason.translate(CONTROL_ESCAPES)  # a reason is one line, whatever it quotes
        if passed is False:
            conv.failed = True
            self._failures += 1
        decision = Decision(
            conv.cid,
            plan.scenario.name,
            index,
            plan.kinds[index],
            "passed" if passed else "errored" if passed is None else "failed",
            decided_at,
            reason,
            conv.turn,
        )
        conv.machines[index] = None
        conv.results[index] = decision
        conv.pending -= 1
        self._decisions += 1
        out.append(decision)

    def _open(self, event: Event) -> _Conversation:
        cid = event.conversation_id
        plan = self._single
        requested = self._assignments.get(cid)
        if requested is not None:
            plan = self._by_name.get(requested)
        elif plan is not None:
            named = metadata_field(event.metadata, "scenario")
            if isinstance(named, str) and named not in self._by_name:
                EventDecoder.count(self._named_other, named)
        conv = _Conversation(cid, plan)
        if requested is not None and plan is None:
            conv.requested = requested  # its results file names a scenario not loaded
        self._convs[cid] = conv
        self._open_convs[cid] = conv
        if conv.plan is not None:
            self._judged += 1
        return conv

    def _await_scenario(
        self, conv: _Conversation, event: Event, payload: Payload, out: list[Decision]
    ) -> Plan | None:
        """Several scenarios and none named yet: hold the event, or name the plan.

        When an event finally names a loaded scenario (``"scenario"`` in its
        metadata), the held events are applied first, in arrival order, and
        the plan is returned so the naming event is applied next.
        """
        name = None if conv.requested is not None else metadata_field(event.metadata, "scenario")
        plan = self._by_name.get(name) if isinstance(name, str) else None
        if plan is None:
            if isinstance(name, str):
                conv.requested = name  # names a scenario that is not loaded: never judged
                conv.buffer = None
            conv.events += 1
            if conv.requested is None:
                held = conv.buffer if conv.buffer is not None else []
                conv.buffer = held
                size = len(_json_encode(event))
                if len(held) < MAX_UNNAMED_BUFFER and conv.buffered + size <= MAX_UNNAMED_BYTES:
                    held.append((event, payload))
                    conv.buffered += size
                else:
                    conv.requested = ""  # gave up waiting: reported as naming no scenario
                    conv.buffer = None
                    self._unnamed_given_up += 1
            if type(payload) is SessionEnded:
                conv.finished = True
                conv.buffer = None  # never to be judged: nothing to keep
                self._open_convs.pop(conv.cid, None)
            return None
        conv.plan = plan
        conv.machines = list(plan.untouched)
        conv.results = [None] * len(conv.machines)
        conv.pending = len(conv.machines)
        self._judged += 1
        held, conv.buffer = conv.buffer or [], None
        conv.events = 0
        self._events -= len(held)  # counted once already, when they arrived
        for earlier, its_payload in held:  # with its payload: its line is not at hand
            self._run([earlier], out, known=its_payload)
        return plan

    # ------------------------------------------------------------------ ending

    def stop(self, conversation_id: str, settled_by: Decision | None = None) -> None:
        """Record that the conversation's simulator was told to stop it.

        Its assertions still pending when it ends never had their chance:
        they end ``skipped``, not failed or passed (see :meth:`finish`), with
        a reason naming ``settled_by`` (the decision the stop message named;
        by default the first failure, else the first decision).
        """
        conv = self._convs.get(conversation_id)
        if conv is None or conv.plan is None or conv.finished or conv.stopped is not None:
            return
        settled = [r for r in conv.results if r is not None]
        failures = [r for r in settled if r.verdict == "failed"]
        if settled_by is not None:
            conv.stopped = settled_by
        elif failures or settled:
            conv.stopped = (failures or settled)[0]
        else:
            conv.stopped = Decision(
                conv.cid,
                conv.plan.scenario.name,
                -1,
                "",
                "pending",
                None,
                "stopped before any assertion was decided",
                conv.turn,
            )

    def finish(self, conversation_id: str) -> list[Decision]:
        """End one conversation now: every pending assertion resolves."""
        conv = self._convs.get(conversation_id)
        if conv is None:
            raise UsageError(f"unknown conversation `{conversation_id}`")
        out: list[Decision] = []
        self._finish(conv, out)
        return out

    def finish_all(self) -> list[Decision]:
        """End of input: finish every open conversation."""
        out: list[Decision] = []
        for conv in list(self._open_convs.values()):
            self._finish(conv, out)
        return out

    def _finish(self, conv: _Conversation, out: list[Decision]) -> None:
        if conv.finished:
            return
        if conv.held:  # the end of input: what is held is all there is
            self._release(conv, out, force=len(conv.held))
            if conv.finished:
                return
        conv.finished = True
        conv.recent_ids = None  # only an open conversation needs them
        if self._unfrozen is not None and conv.plan is not None:
            self._unfrozen.append(conv.cid)
        self._open_convs.pop(conv.cid, None)
        if self.keep_finished is not None:
            self._finished_order.append(conv.cid)  # let go of once it is old (_let_go)
        plan = conv.plan
        if plan is None:
            conv.buffer = None  # never to be judged: nothing to keep
            self._let_go()
            return
        if conv.stopped is not None:
            self._skip_pending(conv, out)
        verdicts, reasons, kinds = plan.fresh_verdicts, plan.fresh_reasons, plan.kinds
        cid, name, turn, results = conv.cid, plan.scenario.name, conv.turn, conv.results
        untouched = 0
        append = out.append
        machines = conv.machines
        for index, machine in enumerate(machines):
            if machine is UNTOUCHED:
                # Never reached by an event: the plan's precomputed verdict. With
                # many assertions this loop is most of a conversation's cost, so
                # it does as little as it can per assertion.
                decision = results[index] = Decision(
                    cid, name, index, kinds[index], verdicts[index], None, reasons[index], turn
                )
                append(decision)
                untouched += 1
            elif machine is not None:
                passed, reason = machine.finish()
                self._decide(conv, index, passed, None, reason, out)
        conv.pending -= untouched
        self._decisions += untouched
        fresh_failed = untouched and sum(machines[i] is UNTOUCHED for i in plan.fresh_failures)
        self._failures += fresh_failed
        failed = fresh_failed > 0
        conv.machines = []
        if failed or conv.failed:
            conv.failed = True
            self._failed += 1
        else:
            self._passed += 1
        self._let_go()

    def _let_go(self) -> None:
        """Fold the oldest finished conversations beyond ``keep_finished`` into counters.

        Their decisions were all reported when made; what is kept of each is
        its id, for a while, so an event that comes after is counted late and
        opens no new conversation.
        """
        order = self._finished_order
        keep = self.keep_finished
        while keep is not None and len(order) > keep:
            cid = order.popleft()
            conv = self._convs.pop(cid, None)
            if conv is None:
                continue
            if self.on_let_go is not None:
                self.on_let_go(
                    _result_of(conv) if conv.plan is not None else self._unmatched_of(conv)
                )
            omitted = self._omitted
            if conv.plan is None:
                omitted["unmatched"] += 1
            else:
                self._judged -= 1  # (judged = those listed; unmatched = the others)
                verdicts = [r.verdict for r in conv.results if r is not None]
                omitted["conversations"] += 1
                omitted["passed"] += not conv.failed and "errored" not in verdicts
                omitted["failed"] += conv.failed
                omitted["assertions"] += len(conv.results)
                omitted["skipped"] += verdicts.count("skipped")
                omitted["errored"] += verdicts.count("errored")
            self._frozen.pop(cid, None)
            if cid not in self._tombstones:
                self._tombstones.add(cid)
                self._tombstone_order.append(cid)
                if len(self._tombstone_order) > MAX_TOMBSTONES:
                    self._tombstones.discard(self._tombstone_order.popleft())

    def _skip_pending(self, conv: _Conversation, out: list[Decision]) -> None:
        """A stopped conversation ended: what is still pending is skipped."""
        plan = conv.plan
        by = conv.stopped
        assert plan is not None and by is not None
        if by.index < 0:
            reason = "not judged: the conversation was stopped early"
        else:
            at = "" if by.decided_at is None else f" at sequence {by.decided_at}"
            reason = (
                f"not judged: the conversation was stopped early after assertion "
                f"#{by.index} `{by.kind}` {by.verdict}{at}"
            )
        for index, machine in enumerate(conv.machines):
            if machine is not None:
                decision = Decision(
                    conv.cid,
                    plan.scenario.name,
                    index,
                    plan.kinds[index],
                    "skipped",
                    None,
                    reason,
                    conv.turn,
                )
                conv.machines[index] = None
                conv.results[index] = decision
                conv.pending -= 1
                self._decisions += 1
                out.append(decision)

    # ------------------------------------------------------------------ reading

    def is_open(self, conversation_id: str) -> bool:
        """True when the conversation has had events and has not ended yet."""
        return conversation_id in self._open_convs

    def is_settled(self, conversation_id: str) -> bool:
        """True when the conversation's outcome can no longer change.

        That is when it has ended, when an assertion has failed, or when every
        assertion is decided: a simulator may stop the conversation early.
        """
        conv = self._convs.get(conversation_id)
        if conv is None:
            return False
        if conv.finished or (conv.plan is not None and conv.pending == 0):
            return True
        return conv.failed

    def result(self, conversation_id: str) -> ConversationResult:
        conv = self._convs.get(conversation_id)
        if conv is None or conv.plan is None:
            raise UsageError(f"no judged conversation `{conversation_id}`")
        return _result_of(conv)

    def results(self) -> list[ConversationResult]:
        """A snapshot of every judged conversation, in order of first event."""
        return [_result_of(c) for c in self._convs.values() if c.plan is not None]

    def unmatched(self) -> list[UnmatchedConversation]:
        """Conversations judged against no scenario: they named none, or one not loaded."""
        return [self._unmatched_of(c) for c in self._convs.values() if c.plan is None]

    def _unmatched_of(self, conv: _Conversation) -> UnmatchedConversation:
        return UnmatchedConversation(
            conv.cid,
            conv.requested or None,
            conv.events,
            _closest(conv.requested, self._by_name) if conv.requested else None,
        )

    def omitted(self) -> dict[str, int]:
        """Counters of the finished conversations let go of (``keep_finished``): how many,
        passed, failed, their assertions, skipped, errored, and unmatched ones."""
        return dict(self._omitted)

    def other_scenarios(self) -> dict[str, int]:
        """Scenarios that conversations named in their metadata, though another judged them.

        With one scenario loaded every conversation is judged against it; one
        whose first event names a different scenario is counted here by that
        name (a wrong file given, most likely).
        """
        return dict(self._named_other)

    def open_conversations(self) -> dict[str, int]:
        """Conversations not yet ended, with the number of events each has had."""
        return {cid: conv.events for cid, conv in self._open_convs.items()}

    def statistics(self) -> Statistics:
        omitted = self._omitted
        return Statistics(
            events=self._events,
            conversations=len(self._convs) + omitted["conversations"] + omitted["unmatched"],
            open=len(self._open_convs),
            passed=self._passed,
            failed=self._failed,
            decisions=self._decisions,
            unknown_kinds=sum(self._decoder.unknown.values()),
            late_events=self._late,
            duplicates=self._duplicates,
            gaps=self._gaps,
            held=self._held,
            bad_events=self._bad,
            replayed=self._replayed,
            unmatched=len(self._convs) - self._judged + omitted["unmatched"],
            legacy_rows=sum(self._decoder.legacy.values()),
            foreign_events=self._foreign,
            unnamed_given_up=self._unnamed_given_up,
        )

    # ------------------------------------------------------------------ checkpoints

    def conversation_state(self, conversation_id: str) -> ConversationState:
        """The state of one judged conversation as plain data."""
        conv = self._convs.get(conversation_id)
        if conv is None or conv.plan is None:
            raise UsageError(f"no judged conversation `{conversation_id}`")
        waiting = [e.event_id for _, _, e, _ in conv.held or () if e.sequence is None]
        return ConversationState(
            conversation_id=conv.cid,
            scenario=conv.plan.scenario.name,
            events=conv.events,
            last_seq=conv.last_seq,
            turn=conv.turn,
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
        )

    def restore_conversation(self, state: ConversationState) -> None:
        """Re-open (or re-record, if finished) a conversation from its state.

        Events of it that arrive again are counted as replayed and skipped: a
        sequence it already applied, or one of the first ``unsequenced`` rows
        without a sequence. So a feed can be re-read from the start.
        """
        plan = self._by_name.get(state.scenario)
        if plan is None:
            raise UsageError(f"checkpoint names unknown scenario `{state.scenario}`")
        machines = len(plan.kinds) if state.finished else len(state.machines)
        if not len(state.results) == machines == len(plan.kinds):  # (an ended one keeps none)
            raise ValueError(
                f"{len(state.results)} results and {len(state.machines)} machines "
                f"saved for {len(plan.kinds)} assertions"
            )
        conv = _Conversation(state.conversation_id, plan)
        conv.events, conv.turn, conv.armed = state.events, state.turn, list(state.armed)
        conv.last_seq = conv.replay_upto = conv.max_seen = state.last_seq
        conv.unsequenced = conv.replay_unsequenced = state.unsequenced
        if state.recent_ids:
            conv.recent_ids = deque(state.recent_ids, maxlen=RECENT_IDS)
        conv.gave_up = [(lo, hi) for lo, hi in state.gave_up] or None
        conv.late_max = conv.replay_late = state.late_max
        conv.first_time, conv.last_time = state.first_time, state.last_time
        conv.stopped = state.stopped
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
        conv.pending = sum(1 for r in conv.results if r is None)
        conv.failed = any(r is not None and r.verdict == "failed" for r in conv.results)
        if conv.cid not in self._convs:
            self._judged += 1
        self._convs[conv.cid] = conv
        if not conv.finished:
            self._open_convs[conv.cid] = conv

    def freeze_finished(self, limit: int) -> int:
        """Encode up to ``limit`` finished conversations for the next :meth:`checkpoint`;
        return how many are still waiting.

        A finished conversation never changes again, so it is encoded once. A
        live run calls this in slices between chunks before each checkpoint,
        so that encoding thousands of newly finished conversations never
        holds the event loop at once; :meth:`checkpoint` encodes what is left.
        """
        queue = self._unfrozen
        if queue is None:  # the first call: every finished conversation so far
            queue = self._unfrozen = deque(
                c.cid for c in self._convs.values() if c.finished and c.plan is not None
            )
        frozen, convs = self._frozen, self._convs
        while limit > 0 and queue:
            cid = queue.popleft()
            if cid in convs and cid not in frozen:  # (not let go of already)
                frozen[cid] = msgspec.Raw(_checkpoint_encoder.encode(self.conversation_state(cid)))
                limit -= 1
        return len(queue)

    def checkpoint(self) -> bytes:
        """Every judged conversation's state and the counters, as JSON bytes.

        Events held in a reorder window are not included: they were not
        applied, so re-reading the feed delivers them again.
        """
        self.freeze_finished(len(self._convs))
        frozen = self._frozen
        states: list[Any] = [
            frozen[conv.cid] if conv.finished else self.conversation_state(conv.cid)
            for conv in self._convs.values()
            if conv.plan is not None
        ]
        return _checkpoint_encoder.encode(
            Checkpoint(
                version=_CHECKPOINT_VERSION,
                scenarios=[p.scenario.name for p in self._plans],
                fingerprints=self._fingerprints(),
                omitted=dict(self._omitted),
                conversations=states,
                # Held events were not applied, and conversations not judged are not
                # saved: a re-read counts both again.
                events=self._events
                - self._held
                - sum(c.events for c in self._convs.values() if c.plan is None),
                late_events=self._late,
                duplicates=self._duplicates,
                gaps=self._gaps,
                decisions=self._decisions,
                passed=self._passed,
                failed=self._failed,
            )
        )

    def _fingerprints(self) -> list[str]:
        return [
            hashlib.sha256(msgspec.json.encode(p.scenario.assertions)).hexdigest()[:16]
            for p in self._plans
        ]

    def restore(self, data: bytes) -> None:
        """Resume from :meth:`checkpoint` output (into a fresh evaluator, same scenarios)."""
        try:
            saved = _checkpoint_decoder.decode(data)
        except msgspec.DecodeError as exc:
            raise UsageError(f"not a mantle-stream checkpoint: {exc}") from None
        if saved.version != _CHECKPOINT_VERSION:
            raise UsageError(f"checkpoint version {saved.version} is not supported")
        names = [p.scenario.name for p in self._plans]
        if saved.scenarios != names:
            raise UsageError(
                "the checkpoint was taken with other scenarios "
                f"({', '.join(saved.scenarios)}); load the same ones to resume"
            )
        changed = [
            name
            for name, old, new in zip(
                names, saved.fingerprints or [""] * len(names), self._fingerprints(), strict=True
            )
            if old != new
        ]
        if changed:
            raise UsageError(
                f"the checkpoint was taken before scenario {', '.join(f'`{n}`' for n in changed)} "
                "changed: its saved verdicts and machines belong to other assertions; remove "
                "the state file to judge the feed afresh"
            )
        if self._convs:
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
        self._events, self._late = saved.events, saved.late_events
        self._duplicates, self._gaps = saved.duplicates, saved.gaps
        # Bad lines are not checkpointed: they belong to no conversation, and
        # re-reading the feed meets (and counts) them again.
        self._decisions, self._passed, self._failed = saved.decisions, saved.passed, saved.failed
        self._omitted.update(saved.omitted)


def _closest(name: str, known: Mapping[str, Plan]) -> str | None:
    """The loaded scenario name or stem nearest ``name``, if one is near."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.75)
    return close[0] if close else None


def _result_of(conv: _Conversation) -> ConversationResult:
    plan = conv.plan
    assert plan is not None
    assertions = tuple(
        AssertionResult(i, plan.kinds[i], "pending")
        if r is None
        else AssertionResult(i, r.kind, r.verdict, r.decided_at, r.reason, r.turn)
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
    )
