"""The hot loop: each event applied in order and routed to the machines it concerns.

Every event of every source passes through :meth:`Router.run`, so it is kept
in one function on purpose (its cost per event is what ``benchmarks/throughput.py``
measures): the usual event, next in its conversation, is routed inline; everything
else is handed to the collaborator whose case it is (:class:`~.ordering.Ordering`
for an event out of order, :class:`~.scenarios.ScenarioChoice` for a conversation
whose scenario is not named yet, :class:`~.intake.Intake` for a line without
exactly one payload field) and the verdicts to :class:`~.settling.Settling`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from mantle_stream.core.assertions.base import ARM, UNTOUCHED, MatchTimeout
from mantle_stream.core.assertions.compiler import BY_VALUE
from mantle_stream.core.engine.conversation import (
    APPLIED_IDS,
    MAX_TURN_STARTS,
    Conversation,
    Conversations,
    Irregular,
    LineFinder,
)
from mantle_stream.core.engine.intake import PLAIN, Context, Intake, value_error
from mantle_stream.core.engine.notes import Notes
from mantle_stream.core.engine.ordering import Ordering
from mantle_stream.core.engine.retention import Retention
from mantle_stream.core.engine.scenarios import ScenarioChoice
from mantle_stream.core.engine.settling import Settling
from mantle_stream.core.errors import EventError
from mantle_stream.core.events.model import (
    Event,
    MemorySet,
    SessionEnded,
    Skipped,
    ToolExecuted,
    User,
    metadata_field,
    single_payload,
)
from mantle_stream.core.verdicts import Decision

__all__ = ["Router"]

_parse_json = msgspec.json.Decoder().decode
_APPLIED_MASK = APPLIED_IDS - 1  # Conversation.applied_ids's slot of a sequence


class Router:
    """Applies events: the evaluator's hot loop, over the evaluator's collaborators."""

    __slots__ = (
        "book",
        "choice",
        "finish",
        "intake",
        "notes",
        "ordering",
        "retention",
        "settling",
        "tally",
    )

    def __init__(
        self,
        book: Conversations,
        intake: Intake,
        ordering: Ordering,
        choice: ScenarioChoice,
        settling: Settling,
        retention: Retention,
        notes: Notes,
        finish: Callable[[Conversation, list[Decision]], None],
    ) -> None:
        self.book = book
        self.intake = intake
        self.ordering = ordering
        self.choice = choice
        self.settling = settling
        self.retention = retention  # (its tombstones: conversations let go of)
        self.notes = notes
        self.tally = settling.tally
        self.finish = finish  # the evaluator's end of a conversation

    def run(self, events: list[Event], out: list[Decision], c: Context = PLAIN) -> None:
        """Apply events in order: the hot path, kept in one function on purpose.

        Every event of every source passes through this loop, so routing is
        inlined rather than split into helpers: each extra Python call per
        event costs about a fifth of decoding the event. What it rarely needs
        comes as one :class:`~.intake.Context`: a line without exactly one
        payload field set (a flat event, a newer engine's kind, a bad event)
        is decoded again from its line in ``c.chunk`` (:meth:`Intake.irregular`).
        Raises :class:`Irregular` for a bad event; the events before it stay
        applied.
        """
        stop_at_failure, owner = c.stop_at_failure, c.owner  # (the rest: irregular events)
        convs = self.book.all
        settling = self.settling
        decide = settling.decide
        ordering = self.ordering
        intake = self.intake
        single = single_payload
        parse_json = _parse_json
        lines: LineFinder | None = None  # the chunk's lines, found on demand
        failures = settling.failures  # failed decisions before these events (stop_at_failure)
        skipped = 0  # events not applied (replayed), or not reached
        try:
            for position, event in enumerate(events):
                # Exactly one payload field set (generated from the payload table).
                payload: Any = single(event)
                if payload is None:
                    # Not exactly one: a flat event, a newer kind, or a bad event.
                    chunk, known, where, index = c.chunk, c.known, c.where, c.offset + position
                    if lines is None and chunk is not None and known is None:
                        lines = LineFinder(chunk)
                    if where is not None:
                        index = where[index]
                    partition = intake.partition
                    if (
                        partition is not None
                        and lines is not None
                        and not event.conversation_id
                        and not partition.keeps_line(lines.line(index))
                    ):
                        skipped += 1  # another worker's flat row or bad event
                        continue
                    event, payload = intake.irregular(
                        event, known, lines, index, c.first + index, position
                    )
                elif not event.conversation_id:
                    if intake.partition is not None and intake.partition.index:
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
                        raise Irregular(value_error(payload), position) from None
                conv = convs.get(event.conversation_id)
                if conv is None:
                    if event.conversation_id in self.retention.tombstones:
                        self.tally.late_events += 1  # long finished, and let go of
                        self.notes.note("late_events", event.conversation_id, event.sequence)
                        continue
                    conv = self.choice.open(event)
                if owner is not None and conv.owner is not owner:
                    if conv.owner is None:
                        conv.owner = owner  # its first connection, or one taking it over
                    else:
                        self.tally.foreign_events += 1  # another client's conversation: refused
                        self.notes.note("foreign_events", conv.cid, event.sequence)
                        continue
                plan = conv.plan
                if plan is None or conv.finished:
                    if conv.finished:
                        skipped += ordering.after_end(conv, event)
                        continue
                    plan = self.choice.await_scenario(conv, event, payload, out)
                    if plan is None:
                        continue
                seq = event.sequence
                if ordering.releasing:  # a held event, next in order (see Ordering.release)
                    if seq is not None and seq > conv.last_seq:  # (else a conflict)
                        conv.last_seq = seq
                        conv.applied_ids[seq & _APPLIED_MASK] = event.event_id
                elif seq is not None and seq == conv.last_seq + 1:  # in order: the usual
                    conv.last_seq = seq
                    conv.applied_ids[seq & _APPLIED_MASK] = event.event_id
                    if seq > conv.max_seen:
                        conv.max_seen = seq
                else:
                    not_now = ordering.out_of_order(conv, event, payload, seq, out, position)
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
                                settling.end_of_turn(conv, payload, seq, out)
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
                        ordering.drop_held(conv)
                        self.finish(conv, out)
                if conv.held and not ordering.releasing:
                    ordering.release(conv, out)
                if stop_at_failure and settling.failures != failures:  # this event failed one
                    skipped += len(events) - position - 1
                    return
        except Irregular as irregular:
            skipped += len(events) - irregular.position
            raise
        finally:
            self.tally.events += len(events) - skipped
