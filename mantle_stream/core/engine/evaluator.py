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
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import msgspec

from mantle_stream.core.assertions.base import ARM, UNTOUCHED, MatchTimeout
from mantle_stream.core.assertions.compiler import BY_VALUE, Plan, compile_scenario
from mantle_stream.core.defaults import DEFAULT_REGEX_TIMEOUT, DEFAULT_REORDER_WINDOW
from mantle_stream.core.engine.checkpoints import Checkpoint, Checkpoints, ConversationState
from mantle_stream.core.engine.conversation import (
    APPLIED_IDS,
    MAX_TOMBSTONES,
    MAX_TURN_STARTS,
    MAX_UNNAMED_BUFFER,
    MAX_UNNAMED_BYTES,
    Conversation,
    Irregular,
    LineFinder,
    ScenarioStatus,
    UnmatchedConversation,
    result_of,
)
from mantle_stream.core.engine.ordering import Ordering
from mantle_stream.core.engine.partition import JudgedConversations, Partition
from mantle_stream.core.engine.scenarios import ScenarioChoice
from mantle_stream.core.errors import CONTROL_ESCAPES, EventError, UsageError
from mantle_stream.core.events.decode import MAX_LINE_BYTES, EventDecoder
from mantle_stream.core.events.model import (
    PAYLOAD_FIELDS,
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
    single_payload,
)
from mantle_stream.core.scenario.model import Scenario
from mantle_stream.core.verdicts import (
    ConversationResult,
    Decision,
    Occurrence,
    Statistics,
    Tally,
)

__all__ = [
    "DEFAULT_REORDER_WINDOW",
    "MAX_UNNAMED_BUFFER",
    "MAX_UNNAMED_BYTES",
    "Checkpoint",
    "ConversationState",
    "Evaluator",
    "UnmatchedConversation",
]

_parse_json = msgspec.json.Decoder().decode
_APPLIED_MASK = APPLIED_IDS - 1  # Conversation.applied_ids's slot of a sequence


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


class Evaluator(Ordering, ScenarioChoice, Checkpoints):
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
        partition: Partition | None = None,
        ordered: bool = False,
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
        # The source delivers each conversation's events in the order they were
        # numbered (Feed.ordered; the Runner sets it from its feed): a gap never
        # fills, so it is passed at once rather than waited for (gaps_passed).
        self._ordered = ordered
        # One worker of `check --workers`: only its conversations are applied.
        self.partition = partition
        if isinstance(scenarios, Scenario):
            scenarios = [scenarios]
        self._plans = [compile_scenario(s, regex_timeout=regex_timeout) for s in scenarios]
        if not self._plans:
            raise UsageError("an evaluator needs at least one scenario")
        self._by_name: dict[str, Plan] = {}
        for plan in self._plans:
            # A file's stem is a second name; a scenario loaded from text has no file.
            names = {plan.scenario.name}
            if not plan.scenario.path.startswith("<"):
                names.add(plan.scenario.stem)
            for name in names:
                other = self._by_name.get(name)
                if other is not None and len(self._plans) > 1:
                    raise UsageError(
                        f"`{name}` names two scenarios ({other.scenario.path} and "
                        f"{plan.scenario.path}): a results folder or metadata could not tell "
                        "them apart; rename one (its `name`, or its file)"
                    )
                self._by_name[name] = plan
        self._single = self._plans[0] if len(self._plans) == 1 else None
        # Several candidates for a conversation (ScenarioChoice): one evaluator per
        # candidate scenario judges it apart; made when first needed, these options.
        self._apart: dict[str, Evaluator] = {}
        self._given: dict[str, tuple[str, ...]] = {}
        self._apart_options = (source, reorder_window, regex_timeout)
        self._assignments = dict(assignments or {})
        self._convs: dict[str, Conversation] = {}
        self._open_convs: dict[str, Conversation] = {}  # not finished yet
        self._judged = 0  # conversations with a scenario (the rest are unmatched)
        self._decoder = EventDecoder(source)
        self._line = 0
        # The counters, each named as its Statistics field (see Tally).
        self.tally = Tally()
        self._occurrences: list[Occurrence] = []  # where the warnings' events were
        self._noted: dict[str, int] = {}
        self._arrivals = 0  # tie-breaker keeping held events in arrival order
        self._releasing = False
        self._source: str | None = None  # where the chunk being pushed came from
        self._frozen: dict[str, msgspec.Raw] = {}  # encoded states of finished conversations
        # Ids of finished conversations not encoded yet, once checkpoints are taken
        # (see freeze_finished); None until then, so a run without them holds
        # nothing here. Ids, not conversations: one let go of is freed at once.
        self._unfrozen: deque[str] | None = None
        self._failures = 0  # failed decisions so far (what --fail-fast watches)

    # ------------------------------------------------------------------ input

    @property
    def ordered(self) -> bool:
        return self._ordered

    @ordered.setter
    def ordered(self, value: bool) -> None:
        # A source may learn it as it reads (a SQL table's ids, a Kafka partition's
        # records): the scenarios judged apart follow, whenever they were made.
        self._ordered = value
        for apart in self._apart.values():
            apart.ordered = value

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
        except Irregular as irregular:
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
        if self.partition is not None and not self.partition.keeps_line(line):
            return
        try:
            event = self._decoder.decode_raw(line, line_no)
        except EventError as exc:
            raise self._locate(exc, line_no, line) from None
        if event is None:
            return
        try:
            self._run([event], out, stop_at_failure, line, line_no, owner=owner)
        except Irregular as irregular:
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

        The fast path decodes the whole chunk at once and trusts it when it holds as
        many JSON values as lines. Where lines of several values make up for blank
        lines, or for a value spread over several lines (``{`` alone on a line), the
        count matches and those values are applied where line by line they would be
        bad events: a writer of one event per line never writes either (checking
        every line would cost a quarter of decoding).
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
        where: list[int] | None = None  # each event's line, when some are another worker's
        if events is not None and self.partition is not None:
            events, where = self.partition.select(events, LineFinder(chunk).line)
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
                    where=where,
                )
                return out
            except Irregular as irregular:
                position = start + irregular.position
                at = position if where is None else where[position]
                if split is None:
                    split = chunk.split(b"\n")
                self._bad_event(self._locate(irregular.error, first + at, split[at]), on_bad, out)
                start = position + 1
                if stop_at_failure and self._failed_now(out):
                    return out

    def _bad_event(
        self, error: EventError, on_bad: Callable[[EventError], object] | None, out: list[Decision]
    ) -> None:
        if on_bad is None:
            error.decisions = out  # made by the events before it: not to be lost
            raise error
        self.tally.bad_events += 1
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
        where: list[int] | None = None,
    ) -> None:
        """Apply events in order: the hot path, kept in one function on purpose.

        Every event of every source passes through this loop, so routing is
        inlined rather than split into helpers: each extra Python call per
        event costs about a fifth of decoding the event. ``chunk`` holds the
        events' lines, one each, from line ``first``; ``events[i]`` is line
        ``offset + i``: a line without exactly one payload field set (a flat
        event, a newer engine's kind, a bad event) is decoded again from it.
        Raises :class:`Irregular` for a bad event; the events before it stay
        applied. ``known``: the payload of the one event given, found when it
        arrived (a held event that needed its line, applied later without it).
        ``where``: the chunk's events were one worker's share
        (:meth:`Partition.select`): ``events[i]`` is line ``where[offset + i]``.
        """
        convs = self._convs
        decide = self._decide
        single = single_payload
        parse_json = _parse_json
        lines: LineFinder | None = None  # the chunk's lines, found on demand
        failures = self._failures  # failed decisions before these events (stop_at_failure)
        skipped = 0  # events not applied (replayed), or not reached
        try:
            for position, event in enumerate(events):
                # Exactly one payload field set (generated from the payload table).
                payload: Any = single(event)
                if payload is None:
                    # Not exactly one: a flat event, a newer kind, or a bad event.
                    if lines is None and chunk is not None and known is None:
                        lines = LineFinder(chunk)
                    index = offset + position if where is None else where[offset + position]
                    partition = self.partition
                    if (
                        partition is not None
                        and lines is not None
                        and not event.conversation_id
                        and not partition.keeps_line(lines.line(index))
                    ):
                        skipped += 1  # another worker's flat row or bad event
                        continue
                    event, payload = self._irregular(
                        event, known, lines, index, first + index, position
                    )
                elif not event.conversation_id:
                    if self.partition is not None and self.partition.index:
                        skipped += 1  # worker 0 reports it
                        continue
                    raise Irregular(EventError("no `conversation_id`"), position)
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
                        raise Irregular(_value_error(payload), position) from None
                conv = convs.get(event.conversation_id)
                if conv is None:
                    if event.conversation_id in self._tombstones:
                        self.tally.late_events += 1  # long finished, and let go of
                        self._note("late_events", event.conversation_id, event.sequence)
                        continue
                    conv = self._open(event)
                if owner is not None and conv.owner is not owner:
                    if conv.owner is None:
                        conv.owner = owner  # its first connection, or one taking it over
                    else:
                        self.tally.foreign_events += 1  # another client's conversation: refused
                        self._note("foreign_events", conv.cid, event.sequence)
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
                    if seq is not None and seq > conv.last_seq:  # (else a conflict)
                        conv.last_seq = seq
                        conv.applied_ids[seq & _APPLIED_MASK] = event.event_id
                elif seq is not None and seq == conv.last_seq + 1:  # in order: the usual
                    conv.last_seq = seq
                    conv.applied_ids[seq & _APPLIED_MASK] = event.event_id
                    if seq > conv.max_seen:
                        conv.max_seen = seq
                else:
                    not_now = self._out_of_order(conv, event, payload, seq, out, position)
                    if not_now is not None:
                        skipped += not_now
                        continue
                if not conv.events:
                    conv.first_time = event.timestamp  # the first applied, in order
                conv.events += 1
                if cls is not Skipped:
                    if cls is User:
                        text = payload.text
                        # A turn starts at a real message, not "" or a /command
                        # (events.model.starts_turn, inline: it is the hot loop).
                        if text and (text := text.strip()) and text[0] != "/":
                            conv.turn += 1
                            if seq is not None and conv.turn <= MAX_TURN_STARTS:
                                conv.turn_starts.append(seq)
                            if conv.armed:  # machines that asked to see this boundary
                                self._end_of_turn(conv, payload, seq, out)
                            if conv.tools is not None and conv.tools.armed:
                                conv.tools.end_turn(seq)  # a tool group's perfect turn ended
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
                    if cls is ToolExecuted and plan.expected_tools is not None:
                        scorer = conv.tools
                        if scorer is None:
                            scorer = conv.tools = plan.expected_tools.scorer()
                        scorer.step(payload, value[0], conv.turn, seq)
                    if cls is SessionEnded:
                        conv.last_time = event.timestamp  # (not kept per event: it costs)
                        self._drop_held(conv)
                        self._finish(conv, out)
                if conv.held and not self._releasing:
                    self._release(conv, out)
                if stop_at_failure and self._failures != failures:  # this event failed one
                    skipped += len(events) - position - 1
                    return
        except Irregular as irregular:
            skipped += len(events) - irregular.position
            raise
        finally:
            self.tally.events += len(events) - skipped

    def _irregular(
        self,
        event: Event,
        known: Payload | None,
        lines: LineFinder | None,
        index: int,
        line_no: int,
        position: int,
    ) -> tuple[Event, Payload]:
        """An event without exactly one payload field set, made sense of from its line.

        ``known``: its payload, found when it first arrived (a held event); a
        newer engine's kind learnt as a field is counted; anything else is
        decoded again from line ``index`` of the chunk (``lines``), which
        raises :class:`Irregular` for a bad event. Without a chunk (an
        :class:`Event` pushed as it is) the event is checked as it stands.
        """
        if known is not None:
            return event, known  # (noted when it first arrived)
        decoder = self._decoder
        unset = all(getattr(event, name) is None for name in PAYLOAD_FIELDS)
        if unset and event.event is None and decoder.learned_kind(event):
            payload: Payload = UNKNOWN  # a newer kind, decoded as a field of its own
        else:
            try:
                if lines is None:
                    payload_of(event)  # raises: pushed as an Event
                    raise AssertionError("an event without exactly one payload")
                event, payload = decoder.classify(event, lines.line(index), line_no, unset)
            except EventError as exc:
                raise Irregular(exc, position) from None
        if payload is UNKNOWN:
            self._note("unknown_kinds", event.conversation_id, event.sequence)
        return event, payload

    def _end_of_turn(
        self, conv: Conversation, payload: Payload, seq: int | None, out: list[Decision]
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
        conv: Conversation,
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
            plan.file,
            plan.lines[index],
        )
        self._record(conv, decision, out)

    def _record(self, conv: Conversation, decision: Decision, out: list[Decision]) -> None:
        """Keep a decision: its machine goes, it is a result and an output."""
        conv.machines[decision.index] = None
        conv.results[decision.index] = decision
        conv.pending -= 1
        self.tally.decisions += 1
        out.append(decision)

    # ------------------------------------------------------------------ ending

    def stop(
        self,
        conversation_id: str,
        settled_by: Decision | None = None,
        *,
        skip_pending: bool = True,
    ) -> None:
        """Record that the conversation's simulator was told to stop it: it is
        *stopped early* (``ConversationResult.stopped``) in every output.

        Its assertions still pending when it ends never had their chance:
        they end ``skipped``, not failed or passed (see :meth:`finish`), with
        a reason naming ``settled_by`` (the decision the stop message named;
        by default the first failure, else the first decision). With
        ``skip_pending=False`` (a Kafka member, whose simulator may play on)
        they are judged on what comes.
        """
        conv = self._convs.get(conversation_id)
        if conv is not None and conv.naming == ScenarioStatus.CANDIDATES and not conv.finished:
            for name in conv.candidates or ():
                self._apart_of(name).stop(conversation_id, settled_by, skip_pending=skip_pending)
            return
        if conv is None or conv.plan is None or conv.finished or conv.stopped is not None:
            return
        conv.stop_skips = skip_pending
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
                conv.plan.file,
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

    def _finish(self, conv: Conversation, out: list[Decision]) -> None:
        """The conversation ended: every assertion still open is decided now."""
        if conv.finished:
            return
        if conv.held:  # the end of input: what is held is all there is
            self._release(conv, out, force=len(conv.held))
            if conv.finished:
                return
        self._close(conv)
        plan = conv.plan
        if plan is None:
            conv.buffer = None  # never to be judged: nothing to keep
            if conv.naming == ScenarioStatus.CANDIDATES:
                conv.buffered = -1  # named later, it takes over its candidate's state
                for name in conv.candidates or ():
                    apart = self._apart_of(name)
                    if apart.is_open(conv.cid):
                        apart.finish(conv.cid)
        else:
            skips = conv.stopped is not None and conv.stop_skips
            if skips:
                self._skip_pending(conv, out)
            self._settle(conv, plan, out)
            if plan.expected_tools is not None:
                scorer = conv.tools or plan.expected_tools.scorer()
                conv.tool_scores = scorer.scores(finished=True, stopped=skips)
                conv.tools = None
            self._ended_judged(conv)
        self._let_go()

    def _ended_judged(self, conv: Conversation) -> None:
        if conv.failed:
            self.tally.failed += 1
        else:
            self.tally.passed += 1

    def _close(self, conv: Conversation) -> None:
        """Mark a conversation finished: no longer open, queued for checkpoints and
        for being let go of."""
        conv.finished = True
        conv.recent_ids = None  # only an open conversation needs them
        conv.applied_ids = []  # (nor these: what comes after the end is late, unread)
        if self._unfrozen is not None and conv.plan is not None:
            self._unfrozen.append(conv.cid)
        self._open_convs.pop(conv.cid, None)
        if self.keep_finished is not None:
            self._finished_order.append(conv.cid)  # let go of once it is old (_let_go)

    def _settle(self, conv: Conversation, plan: Plan, out: list[Decision]) -> None:
        """:meth:`_decide` for every assertion still open at the end.

        A machine's own ``finish()`` decides a touched assertion; one no event
        ever reached takes the plan's precomputed verdict, with the same
        bookkeeping as ``_decide`` done once for all of them: with many
        assertions this loop is most of a conversation's cost, so it does as
        little as it can per assertion.
        """
        verdicts, reasons, kinds = plan.fresh_verdicts, plan.fresh_reasons, plan.kinds
        cid, name, turn, results = conv.cid, plan.scenario.name, conv.turn, conv.results
        file, lines = plan.file, plan.lines
        untouched = 0
        append = out.append
        machines = conv.machines
        for index, machine in enumerate(machines):
            if machine is UNTOUCHED:
                decision = results[index] = Decision(
                    cid,
                    name,
                    index,
                    kinds[index],
                    verdicts[index],
                    None,
                    reasons[index],
                    turn,
                    file,
                    lines[index],
                )
                append(decision)
                untouched += 1
            elif machine is not None:
                passed, reason = machine.finish()
                self._decide(conv, index, passed, None, reason, out)
        if untouched:
            conv.pending -= untouched
            self.tally.decisions += untouched
            failed = sum(machines[i] is UNTOUCHED for i in plan.fresh_failures)
            if failed:
                self._failures += failed
                conv.failed = True
        conv.machines = []

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
                    result_of(conv) if conv.plan is not None else self._unmatched_of(conv)
                )
            self._let_candidates_go(conv)
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

    def _skip_pending(self, conv: Conversation, out: list[Decision]) -> None:
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
                    plan.file,
                    plan.lines[index],
                )
                self._record(conv, decision, out)

    # ------------------------------------------------------------------ reading

    def forget(self, conversation_id: str) -> None:
        """Let go of an open conversation judged elsewhere from now on, uncounted: a Kafka
        partition given to another member, which resumes it from its saved state."""
        conv = self._open_convs.pop(conversation_id, None)
        if conv is None:
            return
        del self._convs[conversation_id]
        self.tally.held -= len(conv.held or ())
        if conv.plan is not None:
            self._judged -= 1
        self._let_candidates_go(conv)

    def _apart_of(self, name: str) -> Evaluator:
        apart = self._apart.get(name)
        if apart is None:
            source, reorder_window, regex_timeout = self._apart_options
            plan = self._by_name[name]
            apart = self._apart[name] = Evaluator(
                plan.scenario,
                source=source,
                reorder_window=reorder_window,
                regex_timeout=regex_timeout,
                ordered=self.ordered,
            )
        return apart

    def naming(self, conversation_id: str) -> str | None:
        """How far the conversation's scenario is known (a :class:`ScenarioStatus` value); None
        for a conversation not seen (or let go of)."""
        conv = self._convs.get(conversation_id)
        return None if conv is None else conv.naming

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
        return result_of(conv)

    def results(self) -> list[ConversationResult]:
        """A snapshot of every judged conversation, in order of first event."""
        return [result_of(c) for c in self._convs.values() if c.plan is not None]

    def judged(self) -> JudgedConversations:
        """What was judged, as data (what :func:`~mantle_stream.build_report` reads):
        a worker of ``check --workers`` hands it to the process that merges them."""
        return JudgedConversations(
            results=self.results(),
            unmatched=self.unmatched(),
            statistics=self.statistics(),
            omitted=self.omitted(),
            unknown_kinds=dict(self._decoder.unknown),
            legacy_rows=dict(self._decoder.legacy),
            occurrences=list(self._occurrences),
        )

    def omitted(self) -> dict[str, int]:
        """Counters of the finished conversations let go of (``keep_finished``): how many,
        passed, failed, their assertions, skipped, errored, and unmatched ones."""
        return dict(self._omitted)

    def open_conversations(self) -> dict[str, int]:
        """Conversations not yet ended, with the number of events each has had."""
        return {cid: conv.events for cid, conv in self._open_convs.items()}

    def statistics(self) -> Statistics:
        omitted = self._omitted
        return Statistics(
            **self.tally.counted(),
            conversations=len(self._convs) + omitted["conversations"] + omitted["unmatched"],
            open=len(self._open_convs),
            unknown_kinds=sum(self._decoder.unknown.values()),
            unmatched=len(self._convs) - self._judged + omitted["unmatched"],
            legacy_rows=sum(self._decoder.legacy.values()),
        )
