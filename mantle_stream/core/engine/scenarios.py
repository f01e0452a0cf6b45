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
from collections.abc import Callable, Mapping, Sequence

import msgspec

from mantle_stream.core.assertions.compiler import Plan
from mantle_stream.core.engine.checkpoints import Frozen
from mantle_stream.core.engine.conversation import (
    MAX_UNNAMED_BUFFER,
    MAX_UNNAMED_BYTES,
    Conversation,
    Conversations,
    ScenarioStatus,
    UnmatchedConversation,
    result_of,
)
from mantle_stream.core.engine.ordering import Ordering
from mantle_stream.core.engine.settling import Settling
from mantle_stream.core.errors import UsageError
from mantle_stream.core.events.model import (
    Event,
    Payload,
    SessionEnded,
    User,
    metadata_field,
    starts_turn,
)
from mantle_stream.core.setup import candidates, shown_by_events
from mantle_stream.core.verdicts import CandidateVerdict, ConversationResult, Decision

__all__ = ["Apart", "ScenarioChoice"]

_json_encode = msgspec.json.Encoder().encode


class Apart:
    """A single-scenario evaluator judging conversations against one candidate alone
    (the evaluator makes them: the same options, this one scenario), as scenario
    choice uses it. Its decisions are provisional: they reach no output."""

    __slots__ = ("book", "finish", "judge", "ordering", "stop")

    def __init__(
        self,
        book: Conversations,
        ordering: Ordering,
        judge: Callable[[Event, Payload, list[Decision]], None],
        finish: Callable[[str], list[Decision]],
        stop: Callable[[str, Decision | None, bool], None],
    ) -> None:
        self.book = book  # its conversations
        self.ordering = ordering  # its ordering (``ordered`` follows the evaluator's)
        self.judge = judge  # one event, its payload known
        self.finish = finish  # end a conversation
        self.stop = stop  # a stop was sent for a conversation

    def conversation(self, conversation_id: str) -> Conversation | None:
        return self.book.all.get(conversation_id)


class ScenarioChoice:
    """Names each conversation's scenario, or judges it apart under its candidates."""

    __slots__ = (
        "_make_apart",
        "apart",
        "apply",
        "assignments",
        "book",
        "by_name",
        "finish",
        "frozen",
        "given",
        "plans",
        "settling",
        "single",
        "tally",
    )

    def __init__(
        self,
        plans: list[Plan],
        assignments: Mapping[str, str] | None,
        book: Conversations,
        settling: Settling,
        frozen: Frozen,
        *,
        apply: Callable[[Event, Payload, list[Decision]], None],
        finish: Callable[[Conversation, list[Decision]], None],
        make_apart: Callable[[Plan], Apart],
    ) -> None:
        if not plans:
            raise UsageError("an evaluator needs at least one scenario")
        self.plans = plans
        self.by_name = _by_name(plans)  # each plan by its scenario's name and file stem
        self.single = plans[0] if len(plans) == 1 else None
        self.assignments = dict(assignments or {})  # the scenario named for an id
        self.given: dict[str, tuple[str, ...]] = {}  # candidates given from outside (consider)
        # Several candidates for a conversation: one evaluator per candidate
        # scenario judges it apart; made when first needed.
        self.apart: dict[str, Apart] = {}
        self._make_apart = make_apart
        self.book = book
        self.settling = settling
        self.tally = settling.tally
        self.frozen = frozen
        self.apply = apply  # one event, by the evaluator's hot loop (with its payload)
        self.finish = finish  # the evaluator's end of a conversation

    def apart_of(self, name: str) -> Apart:
        """The evaluator judging conversations against candidate ``name`` alone."""
        apart = self.apart.get(name)
        if apart is None:
            apart = self.apart[name] = self._make_apart(self.by_name[name])
        return apart

    def open(self, event: Event) -> Conversation:
        cid = event.conversation_id
        plan = self.single
        requested = self.assignments.get(cid)
        if requested is None and plan is not None:
            named = metadata_field(event.metadata, "scenario")
            if isinstance(named, str) and named not in self.by_name:
                requested = named  # another scenario than the one loaded: not judged
        if requested is not None:
            plan = self.by_name.get(requested)
        conv = Conversation(cid, plan)
        if requested is not None and plan is None:
            conv.naming, conv.requested = (
                ScenarioStatus.NOT_LOADED,
                requested,
            )  # its results file names it
        self.book.add(conv)
        return conv

    def await_scenario(
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
        plan = self.by_name.get(name) if isinstance(name, str) else None
        if (
            plan is None
            and name is None
            and conv.candidates is None
            and conv.naming == ScenarioStatus.WAITING
            and type(payload) is User
            and starts_turn(payload.text)
        ):
            plan = self.candidate(conv)
        if plan is not None:
            return plan if self.judge_with(conv, plan, out) else None
        if isinstance(name, str):
            self.not_loaded(conv, name)  # never judged
        conv.events += 1
        if conv.naming == ScenarioStatus.WAITING or conv.naming == ScenarioStatus.CANDIDATES:
            self.keep_unnamed(conv, event, payload)
        if conv.naming == ScenarioStatus.CANDIDATES:
            for name in conv.candidates or ():
                self.apart_of(name).judge(event, payload, [])
        if type(payload) is SessionEnded:
            self.finish(conv, out)  # and let go of in its turn (keep_finished)
        return None

    def keep_unnamed(self, conv: Conversation, event: Event, payload: Payload) -> None:
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

    def candidate(self, conv: Conversation) -> Plan | None:
        """At its first real user message: the one scenario whose initial slots its setup
        matches, if one alone does; with several, it is judged against each apart from
        now on (its events so far applied under each)."""
        names = self.given.pop(conv.cid, None)
        if names is None:
            setup = shown_by_events(conv.buffer or [])
            loaded = {id(p): p.scenario for p in self.by_name.values()}.values()
            found = candidates(loaded, setup, one_to_one=False)
            names = tuple(dict.fromkeys(s.name for s in found))
        conv.candidates = names
        if len(names) == 1:
            return self.by_name[names[0]]
        if names:
            conv.naming = ScenarioStatus.CANDIDATES
            for name in names:
                apart = self.apart_of(name)
                for earlier, its_payload in conv.buffer or ():
                    apart.judge(earlier, its_payload, [])
        return None

    def stop_apart(
        self, conv: Conversation, settled_by: Decision | None, skip_pending: bool
    ) -> None:
        """A stop was sent for a conversation judged apart: each candidate's evaluator
        records it."""
        for name in conv.candidates or ():
            self.apart_of(name).stop(conv.cid, settled_by, skip_pending)

    def ended_unjudged(self, conv: Conversation) -> None:
        """A conversation with no scenario ended: nothing of its events is kept; judged
        apart, its candidates' evaluators end it too."""
        conv.buffer = None  # never to be judged: nothing to keep
        if conv.naming == ScenarioStatus.CANDIDATES:
            conv.buffered = -1  # named later, it takes over its candidate's state
            for name in conv.candidates or ():
                apart = self.apart_of(name)
                if conv.cid in apart.book.open:
                    apart.finish(conv.cid)

    def not_loaded(self, conv: Conversation, name: str) -> None:
        """It named a scenario that is not loaded: never judged."""
        self.let_candidates_go(conv)
        conv.naming, conv.requested, conv.buffer = ScenarioStatus.NOT_LOADED, name, None

    def let_candidates_go(self, conv: Conversation) -> None:
        """The conversation is judged here (or let go of): its candidates' evaluators
        drop it, uncounted (their counters are never reported)."""
        for name in conv.candidates or ():
            self.apart_of(name).book.discard(conv.cid)

    def judge_with(self, conv: Conversation, plan: Plan, out: list[Decision]) -> bool:
        """A waiting conversation's scenario is known: its buffered events are applied
        (or, past the buffer's bounds, its candidate evaluator's state for that scenario
        is taken over). False when neither can judge it: then it is given up on."""
        held, conv.buffer = conv.buffer or [], None
        taken = None
        if conv.buffered < 0:
            if plan.scenario.name not in (conv.candidates or ()):
                self.let_candidates_go(conv)
                conv.naming = ScenarioStatus.GAVE_UP  # its early events are gone
                self.tally.unnamed_given_up += 1
                return False
            taken = self.apart_of(plan.scenario.name).conversation(conv.cid)
        self.let_candidates_go(conv)
        conv.plan, conv.naming = plan, ScenarioStatus.JUDGED
        self.book.judged += 1
        if taken is not None:
            self.take_over(conv, taken, out)
            return True
        conv.machines = list(plan.untouched)
        conv.results = [None] * len(conv.machines)
        conv.pending = len(conv.machines)
        conv.events = 0
        self.tally.events -= len(held)  # counted once already, when they arrived
        for earlier, its_payload in held:  # with its payload: its line is not at hand
            self.apply(earlier, its_payload, out)
        return True

    def take_over(self, conv: Conversation, judged: Conversation, out: list[Decision]) -> None:
        """Carry on from a candidate evaluator's state of the conversation (its decisions
        so far are this evaluator's outputs now, in the order they were made)."""
        for name in _JUDGING_STATE:
            setattr(conv, name, getattr(judged, name))
        self.tally.held += len(conv.held or ())
        if conv.finished:  # named after its end (a results file is written then)
            self.settling.ended(conv)
            self.frozen.queue(conv.cid)  # for the next checkpoint
        decided = sorted(
            (r for r in conv.results if r is not None),
            key=lambda d: (d.decided_at is None, d.decided_at or 0, d.index),
        )
        self.settling.took_over(decided)
        out.extend(decided)

    def assign(self, conversation_id: str, scenario: str) -> list[Decision]:
        """See ``Evaluator.assign``."""
        conv = self.book.all.get(conversation_id)
        if conv is None:
            self.assignments[conversation_id] = scenario
            return []
        out: list[Decision] = []
        if conv.naming == ScenarioStatus.CANDIDATES:
            pass  # even after its end: its candidates' evaluators judged it to the end
        elif conv.naming != ScenarioStatus.WAITING or conv.finished:
            return out
        plan = self.by_name.get(scenario)
        if plan is None:
            self.not_loaded(conv, scenario)
        else:
            self.judge_with(conv, plan, out)
        return out

    def consider(self, conversation_id: str, scenarios: Sequence[str]) -> None:
        """See ``Evaluator.consider``."""
        conv = self.book.all.get(conversation_id)
        if conv is None or conv.candidates is None:
            self.given[conversation_id] = tuple(
                dict.fromkeys(self.by_name[n].scenario.name for n in scenarios)
            )

    def failed_under_every_candidate(
        self, conversation_id: str
    ) -> tuple[ConversationResult, Decision] | None:
        """See ``Evaluator.failed_under_every_candidate``."""
        conv = self.book.all.get(conversation_id)
        if conv is None or conv.naming != ScenarioStatus.CANDIDATES or not conv.candidates:
            return None
        for name in conv.candidates:
            judged = self.apart_of(name).conversation(conversation_id)
            if judged is None or not judged.failed:
                return None
        judged = self.apart_of(conv.candidates[0]).conversation(conversation_id)
        assert judged is not None
        failure = next(r for r in judged.results if r is not None and r.verdict == "failed")
        return result_of(judged), failure

    def candidate_verdicts(self, conversation_id: str) -> list[CandidateVerdict]:
        """See ``Evaluator.candidate_verdicts``."""
        conv = self.book.all.get(conversation_id)
        return [] if conv is None else self.verdicts_of(conv)

    def verdicts_of(self, conv: Conversation) -> list[CandidateVerdict]:
        if conv.naming != ScenarioStatus.CANDIDATES:
            return []
        return [
            CandidateVerdict(name, result_of(judged).verdict)
            for name in conv.candidates or ()
            if (judged := self.apart_of(name).conversation(conv.cid)) is not None
        ]

    def unmatched(self) -> list[UnmatchedConversation]:
        """Conversations judged against no scenario: they named none, or one not loaded,
        or several candidates are left."""
        return [self.unmatched_of(c) for c in self.book.all.values() if c.plan is None]

    def unmatched_of(self, conv: Conversation) -> UnmatchedConversation:
        not_loaded = conv.naming == ScenarioStatus.NOT_LOADED
        return UnmatchedConversation(
            conv.cid,
            conv.requested if not_loaded else None,
            conv.events,
            _closest(conv.requested, self.by_name) if not_loaded and conv.requested else None,
            conv.candidates or () if not not_loaded else (),
            tuple(self.verdicts_of(conv)),
        )


#: What a conversation's judging is, apart from its identity and naming: taken over
#: from a candidate's evaluator (:meth:`ScenarioChoice.take_over`).
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


def _by_name(plans: list[Plan]) -> dict[str, Plan]:
    """Each plan by its scenario's name and, loaded from a file, its file's stem."""
    by_name: dict[str, Plan] = {}
    for plan in plans:
        # A file's stem is a second name; a scenario loaded from text has no file.
        names = {plan.scenario.name}
        if not plan.scenario.path.startswith("<"):
            names.add(plan.scenario.stem)
        for name in names:
            other = by_name.get(name)
            if other is not None and len(plans) > 1:
                raise UsageError(
                    f"`{name}` names two scenarios ({other.scenario.path} and "
                    f"{plan.scenario.path}): a results folder or metadata could not tell "
                    "them apart; rename one (its `name`, or its file)"
                )
            by_name[name] = plan
    return by_name
