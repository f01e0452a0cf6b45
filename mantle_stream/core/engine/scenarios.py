"""Which scenario judges a conversation (see :class:`~.conversation.ScenarioStatus`).

The one ``assignments`` names for its id (an ``evaluate_agent`` results
folder); else, with one scenario loaded, that one (unless the metadata of
its first event names another: then it is not judged); else the scenario
whose name or file stem is ``"scenario"`` in the envelope metadata of its
events, its earlier events buffered (bounded) until one names it.

When nothing has named it by its first real user message, its *candidates*
decide (:func:`~mantle_stream.core.setup.candidates`): one candidate judges
it; with several it is judged against each **apart**, in one single-scenario
evaluator per candidate (their decisions are provisional: they reach no
output), until something names its scenario; a conversation that ends with
several is reported with each candidate's verdict, never as passed or failed.
"""

from __future__ import annotations

import difflib
from collections import deque
from collections.abc import Mapping, Sequence

import msgspec

from mantle_stream.core.assertions.compiler import Plan
from mantle_stream.core.engine.conversation import (
    MAX_UNNAMED_BUFFER,
    MAX_UNNAMED_BYTES,
    Conversation,
    ScenarioStatus,
    UnmatchedConversation,
    result_of,
)
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
    CandidateVerdict,
    ConversationResult,
    Decision,
    Tally,
)

__all__ = ["ScenarioChoice"]

_json_encode = msgspec.json.Encoder().encode


class ScenarioChoice:
    """ScenarioStatus each conversation's scenario: a mixin of :class:`~.evaluator.Evaluator`."""

    _assignments: dict[str, str]
    _by_name: dict[str, Plan]
    _single: Plan | None
    _failures: int
    _convs: dict[str, Conversation]
    _open_convs: dict[str, Conversation]
    _judged: int
    _given: dict[str, tuple[str, ...]]  # candidates given from outside (consider)
    _unfrozen: deque[str] | None
    tally: Tally

    def _run(
        self, events: list[Event], out: list[Decision], *, known: Payload | None = None
    ) -> None:
        """Apply events (the evaluator's hot loop)."""
        raise NotImplementedError

    def _finish(self, conv: Conversation, out: list[Decision]) -> None:
        """The conversation ended (the evaluator's)."""
        raise NotImplementedError

    def _ended_judged(self, conv: Conversation) -> None:
        """Count a conversation judged to its end (the evaluator's)."""
        raise NotImplementedError

    def _apart_of(self, name: str) -> ScenarioChoice:
        """The evaluator judging conversations against candidate ``name`` alone (the
        evaluator's: the same options, this one scenario)."""
        raise NotImplementedError

    def _open(self, event: Event) -> Conversation:
        cid = event.conversation_id
        plan = self._single
        requested = self._assignments.get(cid)
        if requested is None and plan is not None:
            named = metadata_field(event.metadata, "scenario")
            if isinstance(named, str) and named not in self._by_name:
                requested = named  # another scenario than the one loaded: not judged
        if requested is not None:
            plan = self._by_name.get(requested)
        conv = Conversation(cid, plan)
        if requested is not None and plan is None:
            conv.naming, conv.requested = (
                ScenarioStatus.NOT_LOADED,
                requested,
            )  # its results file names it
        self._convs[cid] = conv
        self._open_convs[cid] = conv
        if conv.plan is not None:
            self._judged += 1
        return conv

    def _await_scenario(
        self, conv: Conversation, event: Event, payload: Payload, out: list[Decision]
    ) -> Plan | None:
        """Nothing has named the conversation's scenario yet: hold the event (and apply
        it under each candidate, when it has several), or name the plan.

        When an event finally names a loaded scenario (``"scenario"`` in its
        metadata), the held events are applied first, in arrival order, and
        the plan is returned so the naming event is applied next.
        """
        unnamed = conv.naming == ScenarioStatus.WAITING or conv.naming == ScenarioStatus.CANDIDATES
        name = metadata_field(event.metadata, "scenario") if unnamed else None
        plan = self._by_name.get(name) if isinstance(name, str) else None
        if (
            plan is None
            and name is None
            and conv.candidates is None
            and conv.naming == ScenarioStatus.WAITING
            and type(payload) is User
            and starts_turn(payload.text)
        ):
            plan = self._candidate(conv)
        if plan is not None:
            return plan if self._judge_with(conv, plan, out) else None
        if isinstance(name, str):
            self._not_loaded(conv, name)  # never judged
        conv.events += 1
        if conv.naming == ScenarioStatus.WAITING or conv.naming == ScenarioStatus.CANDIDATES:
            self._keep_unnamed(conv, event, payload)
        if conv.naming == ScenarioStatus.CANDIDATES:
            for name in conv.candidates or ():
                self._apart_of(name)._run([event], [], known=payload)
        if type(payload) is SessionEnded:
            self._finish(conv, out)  # and let go of in its turn (keep_finished)
        return None

    def _keep_unnamed(self, conv: Conversation, event: Event, payload: Payload) -> None:
        """Buffer an event until the conversation's scenario is named (bounded)."""
        if conv.buffered < 0:
            return  # judged apart by its candidates beyond the buffer's bounds
        held = conv.buffer if conv.buffer is not None else []
        conv.buffer = held
        size = len(_json_encode(event))
        if len(held) < MAX_UNNAMED_BUFFER and conv.buffered + size <= MAX_UNNAMED_BYTES:
            held.append((event, payload))
            conv.buffered += size
        elif conv.naming == ScenarioStatus.CANDIDATES:
            conv.buffer, conv.buffered = None, -1  # its candidates' evaluators go on
        else:
            conv.naming = ScenarioStatus.GAVE_UP  # reported as naming no scenario
            conv.buffer = None
            self.tally.unnamed_given_up += 1

    def _candidate(self, conv: Conversation) -> Plan | None:
        """At its first real user message: the one scenario whose initial slots its setup
        matches, if one alone does; with several, it is judged against each apart from
        now on (its events so far applied under each)."""
        names = self._given.pop(conv.cid, None)
        if names is None:
            setup = shown_by_events(conv.buffer or [])
            loaded = {id(p): p.scenario for p in self._by_name.values()}.values()
            found = candidates(loaded, setup, one_to_one=False)
            names = tuple(dict.fromkeys(s.name for s in found))
        conv.candidates = names
        if len(names) == 1:
            return self._by_name[names[0]]
        if names:
            conv.naming = ScenarioStatus.CANDIDATES
            for name in names:
                apart = self._apart_of(name)
                for earlier, its_payload in conv.buffer or ():
                    apart._run([earlier], [], known=its_payload)
        return None

    def _not_loaded(self, conv: Conversation, name: str) -> None:
        """It named a scenario that is not loaded: never judged."""
        self._let_candidates_go(conv)
        conv.naming, conv.requested, conv.buffer = ScenarioStatus.NOT_LOADED, name, None

    def _let_candidates_go(self, conv: Conversation) -> None:
        for name in conv.candidates or ():
            self._apart_of(name)._discard(conv.cid)

    def _discard(self, conversation_id: str) -> None:
        """(Of a candidate's evaluator) drop a conversation, open or finished, uncounted:
        its counters are never reported."""
        self._convs.pop(conversation_id, None)
        self._open_convs.pop(conversation_id, None)

    def _judge_with(self, conv: Conversation, plan: Plan, out: list[Decision]) -> bool:
        """A waiting conversation's scenario is known: its buffered events are applied
        (or, past the buffer's bounds, its candidate evaluator's state for that scenario
        is taken over). False when neither can judge it: then it is given up on."""
        held, conv.buffer = conv.buffer or [], None
        taken = None
        if conv.buffered < 0:
            if plan.scenario.name not in (conv.candidates or ()):
                self._let_candidates_go(conv)
                conv.naming = ScenarioStatus.GAVE_UP  # its early events are gone
                self.tally.unnamed_given_up += 1
                return False
            taken = self._apart_of(plan.scenario.name)._convs.get(conv.cid)
        self._let_candidates_go(conv)
        conv.plan, conv.naming = plan, ScenarioStatus.JUDGED
        self._judged += 1
        if taken is not None:
            self._take_over(conv, taken, out)
            return True
        conv.machines = list(plan.untouched)
        conv.results = [None] * len(conv.machines)
        conv.pending = len(conv.machines)
        conv.events = 0
        self.tally.events -= len(held)  # counted once already, when they arrived
        for earlier, its_payload in held:  # with its payload: its line is not at hand
            self._run([earlier], out, known=its_payload)
        return True

    def _take_over(self, conv: Conversation, judged: Conversation, out: list[Decision]) -> None:
        """Carry on from a candidate evaluator's state of the conversation (its decisions
        so far are this evaluator's outputs now, in the order they were made)."""
        for name in _JUDGING_STATE:
            setattr(conv, name, getattr(judged, name))
        self.tally.held += len(conv.held or ())
        if conv.finished:  # named after its end (a results file is written then)
            self._ended_judged(conv)
            if self._unfrozen is not None:
                self._unfrozen.append(conv.cid)  # for the next checkpoint
        decided = sorted(
            (r for r in conv.results if r is not None),
            key=lambda d: (d.decided_at is None, d.decided_at or 0, d.index),
        )
        self.tally.decisions += len(decided)
        self._failures += sum(d.verdict == "failed" for d in decided)
        out.extend(decided)

    def assign(self, conversation_id: str, scenario: str) -> list[Decision]:
        """Name the scenario that judges a conversation, from outside its events (a
        results folder that appeared, the gate's choice from the run's setup).

        Before its first event, it is judged against ``scenario`` from the start; a
        conversation still waiting for its scenario (or judged apart by several
        candidates) has its buffered events applied now. One already judged (or given
        up on) keeps what it has. An unknown ``scenario`` makes it one that named a
        scenario not loaded.
        """
        conv = self._convs.get(conversation_id)
        if conv is None:
            self._assignments[conversation_id] = scenario
            return []
        out: list[Decision] = []
        if conv.naming == ScenarioStatus.CANDIDATES:
            pass  # even after its end: its candidates' evaluators judged it to the end
        elif conv.naming != ScenarioStatus.WAITING or conv.finished:
            return out
        plan = self._by_name.get(scenario)
        if plan is None:
            self._not_loaded(conv, scenario)
        else:
            self._judge_with(conv, plan, out)
        return out

    def consider(self, conversation_id: str, scenarios: Sequence[str]) -> None:
        """Give the candidates of a conversation whose scenario is not named, from outside
        its events (the gate, which saw its setup on the wire): used at its first real
        user message in place of those its events show. One candidate judges it; none
        leaves it unmatched. Too late once its candidates are decided."""
        conv = self._convs.get(conversation_id)
        if conv is None or conv.candidates is None:
            self._given[conversation_id] = tuple(
                dict.fromkeys(self._by_name[n].scenario.name for n in scenarios)
            )

    def failed_under_every_candidate(
        self, conversation_id: str
    ) -> tuple[ConversationResult, Decision] | None:
        """A conversation judged apart under several candidates that has failed under
        every one: its result under the first, with that result's first failure."""
        conv = self._convs.get(conversation_id)
        if conv is None or conv.naming != ScenarioStatus.CANDIDATES or not conv.candidates:
            return None
        for name in conv.candidates:
            judged = self._apart_of(name)._convs.get(conversation_id)
            if judged is None or not judged.failed:
                return None
        judged = self._apart_of(conv.candidates[0])._convs[conversation_id]
        failure = next(r for r in judged.results if r is not None and r.verdict == "failed")
        return result_of(judged), failure

    def candidate_verdicts(self, conversation_id: str) -> list[CandidateVerdict]:
        """A conversation judged apart under several candidates: its verdict under each
        (empty for any other)."""
        conv = self._convs.get(conversation_id)
        return [] if conv is None else self._verdicts_of(conv)

    def _verdicts_of(self, conv: Conversation) -> list[CandidateVerdict]:
        if conv.naming != ScenarioStatus.CANDIDATES:
            return []
        return [
            CandidateVerdict(name, result_of(judged).verdict)
            for name in conv.candidates or ()
            if (judged := self._apart_of(name)._convs.get(conv.cid)) is not None
        ]

    def unmatched(self) -> list[UnmatchedConversation]:
        """Conversations judged against no scenario: they named none, or one not loaded,
        or several candidates are left."""
        return [self._unmatched_of(c) for c in self._convs.values() if c.plan is None]

    def _unmatched_of(self, conv: Conversation) -> UnmatchedConversation:
        not_loaded = conv.naming == ScenarioStatus.NOT_LOADED
        return UnmatchedConversation(
            conv.cid,
            conv.requested if not_loaded else None,
            conv.events,
            _closest(conv.requested, self._by_name) if not_loaded and conv.requested else None,
            conv.candidates or () if not not_loaded else (),
            tuple(self._verdicts_of(conv)),
        )


#: What a conversation's judging is, apart from its identity and naming: taken over
#: from a candidate's evaluator (:meth:`ScenarioChoice._take_over`).
_JUDGING_STATE = tuple(
    name
    for name in Conversation.__slots__
    if name
    not in {"cid", "owner", "naming", "requested", "buffer", "buffered", "candidates", "plan"}
)


def _closest(name: str, known: Mapping[str, Plan]) -> str | None:
    """The loaded scenario name or stem nearest ``name``, if one is near."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.75)
    return close[0] if close else None
