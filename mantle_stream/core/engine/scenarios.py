"""Which scenario judges a conversation (see :class:`~.conversation.Naming`).

The one ``assignments`` names for its id (an ``evaluate_agent`` results
folder); else, with one scenario loaded, that one; else the scenario whose
name or file stem is ``"scenario"`` in the envelope metadata of its events,
its earlier events buffered (bounded) until one names it.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping

import msgspec

from mantle_stream.core.assertions.compiler import Plan
from mantle_stream.core.engine.conversation import (
    MAX_UNNAMED_BUFFER,
    MAX_UNNAMED_BYTES,
    Conversation,
    Naming,
    UnmatchedConversation,
)
from mantle_stream.core.events.decode import EventDecoder
from mantle_stream.core.events.model import (
    Event,
    Payload,
    SessionEnded,
    User,
    metadata_field,
    starts_turn,
)
from mantle_stream.core.setup import candidates, shown_by_events
from mantle_stream.core.verdicts import (
    Decision,
)

__all__ = ["ScenarioChoice"]

_json_encode = msgspec.json.Encoder().encode


class ScenarioChoice:
    """Naming each conversation's scenario: a mixin of :class:`~.evaluator.Evaluator`."""

    _assignments: dict[str, str]
    _by_name: dict[str, Plan]
    _single: Plan | None
    _named_other: dict[str, int]
    _convs: dict[str, Conversation]
    _open_convs: dict[str, Conversation]
    _judged: int
    _events: int
    _unnamed_given_up: int

    def _run(
        self, events: list[Event], out: list[Decision], *, known: Payload | None = None
    ) -> None:
        """Apply events (the evaluator's hot loop)."""
        raise NotImplementedError

    def _close(self, conv: Conversation) -> None:
        """Mark a conversation finished (the evaluator's)."""
        raise NotImplementedError

    def _let_go(self) -> None:
        """Let go of the oldest finished conversations beyond keep_finished (the evaluator's)."""
        raise NotImplementedError

    def _open(self, event: Event) -> Conversation:
        cid = event.conversation_id
        plan = self._single
        requested = self._assignments.get(cid)
        if requested is not None:
            plan = self._by_name.get(requested)
        elif plan is not None:
            named = metadata_field(event.metadata, "scenario")
            if isinstance(named, str) and named not in self._by_name:
                EventDecoder.count(self._named_other, named)
        conv = Conversation(cid, plan)
        if requested is not None and plan is None:
            conv.naming, conv.requested = Naming.NOT_LOADED, requested  # its results file names it
        self._convs[cid] = conv
        self._open_convs[cid] = conv
        if conv.plan is not None:
            self._judged += 1
        return conv

    def _await_scenario(
        self, conv: Conversation, event: Event, payload: Payload, out: list[Decision]
    ) -> Plan | None:
        """Several scenarios and none named yet: hold the event, or name the plan.

        When an event finally names a loaded scenario (``"scenario"`` in its
        metadata), the held events are applied first, in arrival order, and
        the plan is returned so the naming event is applied next.
        """
        name = metadata_field(event.metadata, "scenario") if conv.naming == Naming.WAITING else None
        plan = self._by_name.get(name) if isinstance(name, str) else None
        if (
            plan is None
            and name is None
            and conv.candidates is None
            and conv.naming == Naming.WAITING
            and type(payload) is User
            and starts_turn(payload.text)
        ):
            plan = self._candidate(conv)
        if plan is None:
            if isinstance(name, str):
                conv.naming, conv.requested = Naming.NOT_LOADED, name  # not loaded: never judged
                conv.buffer = None
            conv.events += 1
            if conv.naming == Naming.WAITING:
                held = conv.buffer if conv.buffer is not None else []
                conv.buffer = held
                size = len(_json_encode(event))
                if len(held) < MAX_UNNAMED_BUFFER and conv.buffered + size <= MAX_UNNAMED_BYTES:
                    held.append((event, payload))
                    conv.buffered += size
                else:
                    conv.naming = Naming.GAVE_UP  # reported as naming no scenario
                    conv.buffer = None
                    self._unnamed_given_up += 1
            if type(payload) is SessionEnded:
                conv.buffer = None  # never to be judged: nothing to keep
                self._close(conv)  # finished, and let go of in its turn (keep_finished)
                self._let_go()
            return None
        self._judge_with(conv, plan, out)
        return plan

    def _candidate(self, conv: Conversation) -> Plan | None:
        """At its first real user message: the one scenario whose initial slots its setup
        matches, if one alone does (the others are kept to report it by)."""
        setup = shown_by_events(conv.buffer or [])
        found = candidates([p.scenario for p in self._by_name.values()], setup, one_to_one=False)
        names = tuple(dict.fromkeys(s.name for s in found))
        conv.candidates = names
        return self._by_name[names[0]] if len(names) == 1 else None

    def _judge_with(self, conv: Conversation, plan: Plan, out: list[Decision]) -> None:
        """A waiting conversation's scenario is known: its buffered events are applied."""
        conv.plan, conv.naming = plan, Naming.JUDGED
        conv.machines = list(plan.untouched)
        conv.results = [None] * len(conv.machines)
        conv.pending = len(conv.machines)
        self._judged += 1
        held, conv.buffer = conv.buffer or [], None
        conv.events = 0
        self._events -= len(held)  # counted once already, when they arrived
        for earlier, its_payload in held:  # with its payload: its line is not at hand
            self._run([earlier], out, known=its_payload)

    def assign(self, conversation_id: str, scenario: str) -> list[Decision]:
        """Name the scenario that judges a conversation, from outside its events (a
        results folder that appeared, the gate's choice from the run's setup).

        Before its first event, it is judged against ``scenario`` from the start; a
        conversation still waiting for its scenario has its buffered events applied
        now. One already judged (or given up on) keeps what it has. An unknown
        ``scenario`` makes it one that named a scenario not loaded.
        """
        conv = self._convs.get(conversation_id)
        if conv is None:
            self._assignments[conversation_id] = scenario
            return []
        out: list[Decision] = []
        if conv.naming != Naming.WAITING or conv.finished:
            return out
        plan = self._by_name.get(scenario)
        if plan is None:
            conv.naming, conv.requested, conv.buffer = Naming.NOT_LOADED, scenario, None
        else:
            self._judge_with(conv, plan, out)
        return out

    def unmatched(self) -> list[UnmatchedConversation]:
        """Conversations judged against no scenario: they named none, or one not loaded."""
        return [self._unmatched_of(c) for c in self._convs.values() if c.plan is None]

    def _unmatched_of(self, conv: Conversation) -> UnmatchedConversation:
        return UnmatchedConversation(
            conv.cid,
            conv.requested if conv.naming == Naming.NOT_LOADED else None,
            conv.events,
            _closest(conv.requested, self._by_name)
            if conv.naming == Naming.NOT_LOADED and conv.requested
            else None,
            conv.candidates or () if conv.naming != Naming.NOT_LOADED else (),
        )

    def other_scenarios(self) -> dict[str, int]:
        """Scenarios that conversations named in their metadata, though another judged them.

        With one scenario loaded every conversation is judged against it; one
        whose first event names a different scenario is counted here by that
        name (a wrong file given, most likely).
        """
        return dict(self._named_other)


def _closest(name: str, known: Mapping[str, Plan]) -> str | None:
    """The loaded scenario name or stem nearest ``name``, if one is near."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.75)
    return close[0] if close else None
