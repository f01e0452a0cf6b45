"""The engine: conversations, routing, verdicts. The embeddable library API.

Last stage of the pure core. An :class:`Evaluator` holds one compiled
:class:`~mantle_stream._compiler.Plan` per scenario and, per open
conversation, one machine per assertion. Each event is routed only to the
machines indexed under its payload type and key; a decision is reported the
moment a machine makes it and the machine is then dropped, so a decided
verdict never changes and costs nothing afterwards.

No I/O, no clock: feeds, the CLI and the live view drive it from the edges.
"""

from __future__ import annotations

import contextlib
import heapq
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

import msgspec

from mantle_stream._compiler import Plan, compile_scenario
from mantle_stream._errors import CONTROL_ESCAPES, EventError, UsageError
from mantle_stream._events import (
    MAX_LINE_BYTES,
    Event,
    EventDecoder,
    MemorySet,
    Payload,
    SessionEnded,
    ToolExecuted,
    User,
    count_lines,
    parse_json_value,
    payload_of,
)
from mantle_stream._machines import ARM, UNTOUCHED
from mantle_stream._scenario import Scenario
from mantle_stream._verdicts import (
    AssertionResult,
    ConversationResult,
    Decision,
    Statistics,
    Verdict,
)

__all__ = ["Checkpoint", "ConversationState", "Evaluator", "UnmatchedConversation"]

#: Events kept for a conversation that has not yet named its scenario.
MAX_UNNAMED_BUFFER = 1000
#: Events of one conversation held back waiting for a missing earlier sequence.
DEFAULT_REORDER_WINDOW = 0  # at-least-once brokers repeat; few reorder (see docs)
#: Event ids remembered per conversation for events that carry no sequence.
RECENT_IDS = 64



class UnmatchedConversation(msgspec.Struct, frozen=True):
    """A conversation judged against no scenario: it named none, or an unknown one."""

    conversation_id: str
    scenario: str | None
    events: int


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


class Checkpoint(msgspec.Struct, frozen=True):
    """Everything an evaluator needs to resume: see :meth:`Evaluator.checkpoint`."""

    version: int
    scenarios: list[str]
    conversations: list[ConversationState]  # encoded once each after they finish
    events: int = 0
    late_events: int = 0
    duplicates: int = 0
    gaps: int = 0
    decisions: int = 0
    passed: int = 0
    failed: int = 0


_CHECKPOINT_VERSION = 1
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
    value = parse_json_value(tool.arguments_json, "`tool_executed.arguments_json`")
    if type(value) is not dict:
        raise EventError("`tool_executed.arguments_json` must hold a JSON object, got "
                         f"{type(value).__name__}")
    return value


class _Conversation:
    __slots__ = ("armed", "buffer", "cid", "events", "failed", "finished", "held", "last_seq",
                 "machines", "pending", "plan", "recent_ids", "replay_upto", "requested",
                 "results", "turn")

    def __init__(self, cid: str, plan: Plan | None) -> None:
        self.cid = cid
        self.plan = plan
        self.machines: list[Any] = list(plan.untouched) if plan else []
        self.results: list[Decision | None] = [None] * len(self.machines)
        self.pending = len(self.machines)
        self.failed = False  # an assertion has failed
        self.events = 0
        self.turn = 0
        self.armed: list[int] = []  # machines to show the next user event (see ARM)
        self.finished = False
        self.requested: str | None = None  # a scenario name that is not loaded
        self.buffer: list[Event] | None = None  # held until the scenario is named
        # Ordering: events are applied in `sequence` order. `last_seq` is the
        # last applied (everything at or below it is a duplicate or too late);
        # `held` keeps events that arrived after a gap, at most the reorder
        # window, as a heap of (sequence, arrival, event).
        self.last_seq = -1
        self.held: list[tuple[int, int, Event]] | None = None
        self.replay_upto = -1  # restored from a checkpoint: sequences applied before
        self.recent_ids: deque[str] | None = None  # ids of recent sequence-less events


class Evaluator:
    """Judges conversations against scenarios while their events arrive.

    >>> evaluator = Evaluator(load_scenarios(["scenarios/"]))   # doctest: +SKIP
    >>> for decision in evaluator.push_line(line): ...           # doctest: +SKIP
    >>> evaluator.finish_all(); evaluator.results()              # doctest: +SKIP

    With one scenario every conversation is judged against it; with several,
    a conversation is judged against the scenario whose name or file stem
    equals ``metadata.scenario`` on its events.
    """

    def __init__(self, scenarios: Scenario | Iterable[Scenario], *,
                 source: str = "<events>", reorder_window: int = DEFAULT_REORDER_WINDOW) -> None:
        if reorder_window < 0:
            raise UsageError(f"the reorder window must be >= 0, got {reorder_window}")
        self.reorder_window = reorder_window
        if isinstance(scenarios, Scenario):
            scenarios = [scenarios]
        self._plans = [compile_scenario(s) for s in scenarios]
        if not self._plans:
            raise UsageError("an evaluator needs at least one scenario")
        self._by_name: dict[str, Plan] = {}
        for plan in self._plans:
            for name in {plan.scenario.stem, plan.scenario.name}:
                other = self._by_name.get(name)
                if other is not None and len(self._plans) > 1:
                    raise UsageError(
                        f"`{name}` names two scenarios ({other.scenario.path} and "
                        f"{plan.scenario.path}): metadata.scenario could not tell them apart; "
                        "rename one (its `name`, or its file)")
                self._by_name[name] = plan
        self._single = self._plans[0] if len(self._plans) == 1 else None
        self._convs: dict[str, _Conversation] = {}
        self._open_convs: dict[str, _Conversation] = {}  # not finished yet
        self._judged = 0  # conversations with a scenario (the rest are unmatched)
        self._decoder = EventDecoder(source)
        self._line = 0
        self._events = 0
        self._late = 0
        self._duplicates = 0  # events at or below a conversation's last applied sequence
        self._gaps = 0  # missing sequences given up on after the reorder window
        self._held = 0  # events waiting in reorder windows now
        self._arrivals = 0  # tie-breaker keeping held events in arrival order
        self._releasing = False
        self._bad = 0  # bad events skipped (on_bad)
        self._source: str | None = None  # where the chunk being pushed came from
        self._frozen: dict[str, msgspec.Raw] = {}  # encoded states of finished conversations
        self._replayed = 0  # events already applied before a restore, seen again
        self._decisions = 0
        self._passed = 0
        self._failed = 0

    # ------------------------------------------------------------------ input

    @property
    def scenarios(self) -> list[Scenario]:
        return [p.scenario for p in self._plans]

    def push(self, event: Event) -> list[Decision]:
        """Apply one parsed event; return the decisions it caused."""
        try:
            payload_of(event)  # exactly one payload, or EventError
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
                raise EventError(f"not valid text ({exc.reason})", source=self._decoder.source,
                                 line=self._line) from None
        event = self._decoder.decode_line(line.rstrip(b"\r\n"), self._line)
        out: list[Decision] = []
        if event is not None:
            try:
                self._run([event], out)
            except _Irregular as irregular:
                raise self._locate(irregular.error, self._line, line) from None
        return out

    def push_chunk(self, chunk: bytes, *, stop_at_failure: bool = False,
                   on_bad: Callable[[EventError], object] | None = None,
                   first_line: int | None = None, source: str | None = None) -> list[Decision]:
        """Apply a chunk of complete JSON lines (the fast path for files and sockets).

        The chunk must end at a line boundary; a trailing partial line is
        decoded as a line of its own. With ``stop_at_failure`` the events after
        the first one that fails an assertion are not applied (``--fail-fast``).
        A bad event raises :class:`EventError` (the events before it are
        applied); with ``on_bad`` it is reported there, skipped and counted, and
        the rest of the chunk is applied. ``first_line`` and ``source`` name
        where the chunk came from in error messages (a socket connection, say);
        by default lines are counted across every chunk pushed.
        """
        first = self._line + 1 if first_line is None else first_line
        self._source = source
        lines = count_lines(chunk) + (0 if chunk.endswith(b"\n") or not chunk else 1)
        self._line += lines
        decoder = self._decoder
        events: list[Event] | None = None
        if len(chunk) <= MAX_LINE_BYTES:  # else the slow path checks each line's length
            # A bad line somewhere: the slow path below finds it and names it.
            with contextlib.suppress(msgspec.DecodeError, RecursionError):
                events = decoder.decode_lines(chunk)
            if events is not None and len(events) != lines:
                # Blank lines, or two JSON values on one line: only the line by
                # line path can tell which event came from which line. (A chunk
                # with both, in equal numbers, still reads as one event per value:
                # finding that out would mean scanning every chunk.)
                events = None
        out: list[Decision] = []
        if events is None:
            # Line by line: exact line numbers, legacy rows mapped, unknown kinds dropped.
            for offset, line in enumerate(chunk.split(b"\n")):
                try:
                    event = decoder.decode_line(line, first + offset)
                    if event is not None:
                        self._run([event], out, stop_at_failure)
                except (EventError, _Irregular) as exc:
                    error = exc.error if isinstance(exc, _Irregular) else exc
                    self._bad_event(self._locate(error, first + offset, line), on_bad, out)
                if stop_at_failure and self._failed_now(out):
                    break
            return out
        start = 0
        while True:
            try:
                self._run(events[start:] if start else events, out, stop_at_failure, chunk,
                          first, start)
                return out
            except _Irregular as irregular:
                position = start + irregular.position
                self._bad_event(self._locate(irregular.error,
                                             *_line_of(chunk, first, position)), on_bad, out)
                start = position + 1
                if stop_at_failure and self._failed_now(out):
                    return out

    def _bad_event(self, error: EventError,
                   on_bad: Callable[[EventError], object] | None,
                   out: list[Decision]) -> None:
        if on_bad is None:
            error.decisions = out  # made by the events before it: not to be lost
            raise error
        self._bad += 1
        on_bad(error)

    def _locate(self, exc: EventError, line_no: int, line: bytes) -> EventError:
        source = self._source or self._decoder.source
        if exc.line is not None and exc.source == source:
            return exc
        return EventError(exc.message, source=source,
                          line=exc.line if exc.line is not None else line_no,
                          excerpt=exc.excerpt or line.decode("utf-8", "replace").strip()[:120])

    def release_held(self) -> list[Decision]:
        """Apply every event waiting in a reorder window, giving up on the gaps."""
        out: list[Decision] = []
        for conv in list(self._open_convs.values()):
            if conv.held:
                self._release(conv, out, force=len(conv.held))
        return out

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

    def _run(self, events: list[Event], out: list[Decision], stop_at_failure: bool = False,
             chunk: bytes | None = None, first: int = 1, offset: int = 0) -> None:
        """Apply events in order: the hot path, kept in one function on purpose.

        Every event of every source passes through this loop, so routing is
        inlined rather than split into helpers: each extra Python call per
        event costs about a fifth of decoding the event. ``chunk``/``first``
        locate the events' lines when an irregular one (a legacy row, an
        unknown kind, a bad event) must be decoded again on its own. Raises
        :class:`_Irregular` for a bad event; the events before it stay applied.
        """
        convs = self._convs
        decide = self._decide
        parse_json = _parse_json
        skipped = 0  # events not applied (unknown kinds), or not reached
        try:
            for position, event in enumerate(events):
                # Exactly one payload: single_payload() inlined (see _events for
                # why two chains; the tests check both copies agree).
                payload: Any = (
                    event.tool_executed or event.bot or event.memory_set or event.user
                    or event.memory_cleared or event.skill_activated or event.skill_completed
                    or event.skill_interrupted or event.skill_resumed or event.skill_cancelled
                    or event.ordered_block_entered or event.ordered_block_completed
                    or event.ordered_block_interrupted or event.ordered_block_resumed
                    or event.ordered_block_cancelled or event.session_started
                    or event.session_ended)
                if payload is None or payload is not (
                        event.session_ended or event.session_started
                        or event.ordered_block_cancelled or event.ordered_block_resumed
                        or event.ordered_block_interrupted or event.ordered_block_completed
                        or event.ordered_block_entered or event.skill_cancelled
                        or event.skill_resumed or event.skill_interrupted
                        or event.skill_completed or event.skill_activated
                        or event.memory_cleared or event.user or event.memory_set
                        or event.bot or event.tool_executed):
                    # Not exactly one known payload: decode its line alone (a legacy
                    # row, an unknown kind, or a bad event that gets its line number).
                    if chunk is None:
                        try:
                            payload_of(event)
                        except EventError as exc:
                            raise _Irregular(exc, position) from None
                    line_no, line = _line_of(chunk or b"", first, offset + position)
                    try:
                        decoded = self._decoder.decode_line(line, line_no)
                    except EventError as exc:
                        raise _Irregular(exc, position) from None
                    if decoded is None:
                        skipped += 1  # an unknown kind, counted by the decoder
                        continue
                    event, payload = decoded, payload_of(decoded)
                cls = type(payload)
                # Parse JSON-in-a-string before touching any state: a bad event
                # leaves the evaluator as it was (the caller may skip it).
                value: Any = None
                if cls is ToolExecuted or cls is MemorySet:
                    try:  # _value_of() inlined; it words the error when this fails
                        if cls is ToolExecuted:
                            value = parse_json(payload.arguments_json)
                            if type(value) is not dict:
                                raise ValueError
                        else:
                            value = parse_json(payload.value_json)
                    except (ValueError, RecursionError):  # msgspec.DecodeError is a ValueError
                        raise _Irregular(_value_error(payload), position) from None
                conv = convs.get(event.conversation_id)
                if conv is None:
                    conv = self._open(event)
                plan = conv.plan
                if plan is None or conv.finished:
                    if conv.finished:
                        if 0 <= event.sequence <= conv.replay_upto:
                            self._replayed += 1
                            skipped += 1
                        elif 0 <= event.sequence <= conv.last_seq:
                            self._duplicates += 1
                        else:
                            self._late += 1
                            # Late events move the replay mark too, so a resumed
                            # run does not count them twice.
                            conv.last_seq = max(conv.last_seq, event.sequence)
                        continue
                    plan = self._await_scenario(conv, event, payload, out)
                    if plan is None:
                        continue
                seq = event.sequence
                last = conv.last_seq
                if seq != last + 1:
                    if seq < 0:
                        # A row without sequence (legacy): arrival order, and its
                        # event_id is the only way to know it was seen before.
                        if event.event_id and self._seen_id(conv, event.event_id):
                            self._duplicates += 1
                            continue
                        seq = last + 1
                    elif seq <= last:
                        if seq <= conv.replay_upto:
                            self._replayed += 1  # applied before the restart
                            skipped += 1
                        else:
                            self._duplicates += 1  # delivered twice, or too late to apply
                        continue
                    elif self._hold(conv, seq, event, out):
                        continue  # waits for the missing sequences
                conv.last_seq = seq
                conv.events += 1
                if cls is User:
                    conv.turn += 1
                    if conv.armed:  # machines that asked to see this turn boundary
                        self._end_of_turn(conv, payload, seq, out)
                route = plan.routes.get(cls)
                if route is not None:
                    getter, keyed, wild = route
                    machines = conv.machines
                    turn = conv.turn
                    for index in wild if getter is None else keyed.get(getter(payload), wild):
                        machine = machines[index]
                        if machine is not None:
                            if machine is UNTOUCHED:
                                machine = machines[index] = plan.machine(index)
                            outcome = machine.step(payload, value, turn)
                            if outcome is not None:
                                if outcome is ARM:
                                    conv.armed.append(index)
                                else:
                                    decide(conv, index, outcome[0], seq, outcome[1], out)
                if cls is SessionEnded:
                    self._drop_held(conv)
                    self._finish(conv, out)
                elif conv.held and conv.held[0][0] == seq + 1 and not self._releasing:
                    self._release(conv, out)
                if stop_at_failure and out and self._failed_now(out):
                    skipped += len(events) - position - 1
                    return
        except _Irregular as irregular:
            skipped += len(events) - irregular.position
            raise
        finally:
            self._events += len(events) - skipped

    def _seen_id(self, conv: _Conversation, event_id: str) -> bool:
        """Remember the ids of recent sequence-less events (at most RECENT_IDS)."""
        recent = conv.recent_ids
        if recent is None:
            recent = conv.recent_ids = deque(maxlen=RECENT_IDS)
        elif event_id in recent:
            return True
        recent.append(event_id)
        return False

    def _hold(self, conv: _Conversation, seq: int, event: Event,
              out: list[Decision]) -> bool:
        """Keep an event that arrived after a gap; False to apply it right away.

        With a window of 0 the gap is given up on at once. When the window
        overflows, the oldest held event is applied across its gap.
        """
        if not self.reorder_window:
            return False  # sequences may have gaps; without a window nothing waits
        held = conv.held
        if held is None:
            held = conv.held = []
        elif any(s == seq for s, _, _ in held):
            self._duplicates += 1
            return True
        heapq.heappush(held, (seq, self._arrivals, event))
        self._arrivals += 1
        self._held += 1
        if len(held) > self.reorder_window:
            self._release(conv, out, force=1)
        return True

    def _release(self, conv: _Conversation, out: list[Decision], *, force: int = 0) -> None:
        """Apply the held events that are next in order; ``force`` more across gaps."""
        held = conv.held
        self._releasing = True
        try:
            while held and not conv.finished:
                seq = held[0][0]
                if seq != conv.last_seq + 1:
                    if force <= 0:
                        break
                    force -= 1
                    self._gaps += 1
                    conv.last_seq = seq - 1  # the missing sequences are given up on
                event = heapq.heappop(held)[2]
                self._held -= 1
                self._events -= 1  # counted once already, when it arrived
                self._run([event], out)
        finally:
            self._releasing = False
        if not held:
            conv.held = None

    def _drop_held(self, conv: _Conversation) -> None:
        """The conversation ended: events still held came after its end."""
        if conv.held:
            self._late += len(conv.held)
            self._held -= len(conv.held)
        conv.held = None

    def _end_of_turn(self, conv: _Conversation, payload: Payload, seq: int,
                     out: list[Decision]) -> None:
        armed, conv.armed = conv.armed, []
        for index in armed:
            machine = conv.machines[index]
            if machine is not None:
                outcome = machine.step(payload, None, conv.turn)
                if outcome is not None and outcome is not ARM:
                    self._decide(conv, index, outcome[0], seq, outcome[1], out)

    def _decide(self, conv: _Conversation, index: int, passed: bool, decided_at: int | None,
                reason: str, out: list[Decision]) -> None:
        plan = conv.plan
        assert plan is not None
        if not reason.isprintable():
            reason = reason.translate(CONTROL_ESCAPES)  # a reason is one line, whatever it quotes
        if not passed:
            conv.failed = True
        decision = Decision(conv.cid, plan.scenario.name, index, plan.kinds[index],
                            "passed" if passed else "failed", decided_at, reason, conv.turn)
        conv.machines[index] = None
        conv.results[index] = decision
        conv.pending -= 1
        self._decisions += 1
        out.append(decision)

    def _open(self, event: Event) -> _Conversation:
        conv = _Conversation(event.conversation_id, self._single)
        self._convs[event.conversation_id] = conv
        self._open_convs[event.conversation_id] = conv
        if conv.plan is not None:
            self._judged += 1
        return conv

    def _await_scenario(self, conv: _Conversation, event: Event, payload: Payload,
                        out: list[Decision]) -> Plan | None:
        """Several scenarios and none named yet: hold the event, or name the plan.

        When an event finally names a loaded scenario, the held events are
        applied first, in arrival order, and the plan is returned so the
        naming event is applied next.
        """
        name = event.metadata.get("scenario") if event.metadata else None
        plan = self._by_name.get(name) if isinstance(name, str) else None
        if plan is None or conv.requested is not None:
            if isinstance(name, str) and conv.requested is None:
                conv.requested = name  # names a scenario that is not loaded: never judged
                conv.buffer = None
            conv.events += 1
            if conv.requested is None:
                held = conv.buffer if conv.buffer is not None else []
                conv.buffer = held
                if len(held) < MAX_UNNAMED_BUFFER:
                    held.append(event)
                else:
                    conv.requested = ""  # gave up waiting: reported as naming no scenario
                    conv.buffer = None
            if type(payload) is SessionEnded:
                conv.finished = True
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
        self._run(held, out)
        return plan

    # ------------------------------------------------------------------ ending

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
        self._open_convs.pop(conv.cid, None)
        plan = conv.plan
        if plan is None:
            return
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
                decision = results[index] = Decision(cid, name, index, kinds[index],
                                                     verdicts[index], None, reasons[index], turn)
                append(decision)
                untouched += 1
            elif machine is not None:
                passed, reason = machine.finish()
                self._decide(conv, index, passed, None, reason, out)
        conv.pending -= untouched
        self._decisions += untouched
        failed = untouched > 0 and any(machines[i] is UNTOUCHED for i in plan.fresh_failures)
        conv.machines = []
        if failed or conv.failed:
            conv.failed = True
            self._failed += 1
        else:
            self._passed += 1

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
        """Conversations that named no known scenario (only with several scenarios)."""
        return [UnmatchedConversation(c.cid, c.requested or None, c.events)
                for c in self._convs.values() if c.plan is None]

    def open_conversations(self) -> dict[str, int]:
        """Conversations not yet ended, with the number of events each has had."""
        return {cid: conv.events for cid, conv in self._open_convs.items()}

    def statistics(self) -> Statistics:
        return Statistics(
            events=self._events, conversations=len(self._convs), open=len(self._open_convs),
            passed=self._passed, failed=self._failed, decisions=self._decisions,
            unknown_kinds=sum(self._decoder.unknown.values()), late_events=self._late,
            duplicates=self._duplicates, gaps=self._gaps, held=self._held,
            bad_events=self._bad, replayed=self._replayed,
            unmatched=len(self._convs) - self._judged,
        )

    # ------------------------------------------------------------------ checkpoints

    def conversation_state(self, conversation_id: str) -> ConversationState:
        """The state of one judged conversation as plain data."""
        conv = self._convs.get(conversation_id)
        if conv is None or conv.plan is None:
            raise UsageError(f"no judged conversation `{conversation_id}`")
        return ConversationState(
            conversation_id=conv.cid, scenario=conv.plan.scenario.name, events=conv.events,
            last_seq=conv.last_seq, turn=conv.turn, armed=list(conv.armed),
            results=list(conv.results),
            machines=[None if m is None else conv.plan.fresh_states[i] if m is UNTOUCHED
                      else m.state() for i, m in enumerate(conv.machines)],
            finished=conv.finished,
        )

    def restore_conversation(self, state: ConversationState) -> None:
        """Re-open (or re-record, if finished) a conversation from its state.

        Events of it that arrive again with a sequence it already applied are
        counted as replayed and skipped, so a feed can be re-read from the start.
        """
        plan = self._by_name.get(state.scenario)
        if plan is None:
            raise UsageError(f"checkpoint names unknown scenario `{state.scenario}`")
        conv = _Conversation(state.conversation_id, plan)
        conv.events, conv.turn, conv.armed = state.events, state.turn, list(state.armed)
        conv.last_seq = conv.replay_upto = state.last_seq
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

    def checkpoint(self) -> bytes:
        """Every judged conversation's state and the counters, as JSON bytes.

        Events held in a reorder window are not included: they were not
        applied, so re-reading the feed delivers them again.
        """
        states: list[Any] = []
        for conv in self._convs.values():
            if conv.plan is None:
                continue
            if conv.finished:
                # A finished conversation never changes again: encode it once.
                frozen = self._frozen.get(conv.cid)
                if frozen is None:
                    frozen = self._frozen[conv.cid] = msgspec.Raw(
                        _checkpoint_encoder.encode(self.conversation_state(conv.cid)))
                states.append(frozen)
            else:
                states.append(self.conversation_state(conv.cid))
        return _checkpoint_encoder.encode(Checkpoint(
            version=_CHECKPOINT_VERSION, scenarios=[p.scenario.name for p in self._plans],
            conversations=states,
            events=self._events, late_events=self._late, duplicates=self._duplicates,
            gaps=self._gaps, decisions=self._decisions,
            passed=self._passed, failed=self._failed,
        ))

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
            raise UsageError("the checkpoint was taken with other scenarios "
                             f"({', '.join(saved.scenarios)}); load the same ones to resume")
        if self._convs:
            raise UsageError("restore into a fresh evaluator")
        for state in saved.conversations:
            self.restore_conversation(state)
        self._events, self._late = saved.events, saved.late_events
        self._duplicates, self._gaps = saved.duplicates, saved.gaps
        # Bad lines are not checkpointed: they belong to no conversation, and
        # re-reading the feed meets (and counts) them again.
        self._decisions, self._passed, self._failed = saved.decisions, saved.passed, saved.failed


def _result_of(conv: _Conversation) -> ConversationResult:
    plan = conv.plan
    assert plan is not None
    assertions = tuple(
        AssertionResult(i, plan.kinds[i], "pending") if r is None
        else AssertionResult(i, r.kind, r.verdict, r.decided_at, r.reason, r.turn)
        for i, r in enumerate(conv.results)
    )
    verdicts = {a.verdict for a in assertions}
    verdict: Verdict = ("failed" if "failed" in verdicts else "pending" if "pending" in verdicts
                        else "passed")
    return ConversationResult(conv.cid, plan.scenario.name, verdict, conv.events, assertions,
                              conv.finished, conv.turn)


def _line_of(chunk: bytes, first: int, position: int) -> tuple[int, bytes]:
    """The line number and text of the ``position``-th non-blank line of a chunk."""
    seen = -1
    for offset, line in enumerate(chunk.split(b"\n")):
        if line.strip():
            seen += 1
            if seen == position:
                return first + offset, line
    return first, b""
