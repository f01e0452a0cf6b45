"""Scenario choice (core/engine/scenarios.py), alone: which scenario judges a
conversation, its events buffered until one is named, with stand-ins for the
evaluator's hot loop and end of a conversation."""

from __future__ import annotations

import pytest

import mantle_stream as ms
from mantle_stream.core.assertions.compiler import Plan, compile_scenario
from mantle_stream.core.engine.checkpoints import Frozen
from mantle_stream.core.engine.conversation import Conversation, Conversations, ScenarioStatus
from mantle_stream.core.engine.scenarios import Apart, ScenarioChoice
from mantle_stream.core.engine.settling import Settling
from mantle_stream.core.events.model import Event, Payload
from mantle_stream.core.verdicts import Decision, Tally

from _harness import scenario

_PLANS = [
    compile_scenario(scenario({"skill_activated": {"skill_id": "k"}}, name=name))
    for name in ("booking", "refund")
]


class _Evaluator:
    """The evaluator's side: what scenario choice hands back to it."""

    def __init__(self) -> None:
        self.applied: list[tuple[str, int | None]] = []
        self.finished: list[str] = []

    def apply(self, event: Event, payload: Payload, out: list[Decision]) -> None:
        self.applied.append((event.conversation_id, event.sequence))

    def finish(self, conv: Conversation, out: list[Decision]) -> None:
        self.finished.append(conv.cid)

    def make_apart(self, plan: Plan) -> Apart:
        raise AssertionError("no candidates here")


def _choice(
    plans: list[Plan] = _PLANS, assignments: dict[str, str] | None = None
) -> tuple[ScenarioChoice, _Evaluator, Conversations]:
    book, side = Conversations(), _Evaluator()
    choice = ScenarioChoice(
        plans,
        assignments,
        book,
        Settling(Tally()),
        Frozen(),
        apply=side.apply,
        finish=side.finish,
        make_apart=side.make_apart,
    )
    return choice, side, book


def _event(cid: str, seq: int, named: str | None = None) -> Event:
    metadata = {"scenario": named} if named else None
    return Event(conversation_id=cid, sequence=seq, metadata=metadata, user=ms.User(text="/x"))


def test_an_assignment_names_the_scenario_from_the_first_event() -> None:
    choice, _, book = _choice(assignments={"c": "refund"})
    conv = choice.open(_event("c", 0))
    assert conv.plan is _PLANS[1] and book.judged == 1 and book.open == {"c": conv}


def test_with_one_scenario_loaded_it_judges_every_conversation() -> None:
    choice, _, _ = _choice(plans=_PLANS[:1])
    assert choice.open(_event("c", 0)).plan is _PLANS[0]


def test_events_wait_until_one_names_the_scenario_then_are_applied_in_order() -> None:
    choice, side, book = _choice()
    first = _event("c", 0)
    conv = choice.open(first)
    assert conv.naming == ScenarioStatus.WAITING and book.judged == 0
    assert choice.await_scenario(conv, first, first.payload, []) is None
    naming = _event("c", 1, named="booking")
    assert choice.await_scenario(conv, naming, naming.payload, []) is _PLANS[0]
    assert side.applied == [("c", 0)]  # the buffered one; the naming event is the caller's
    assert book.all["c"].naming == ScenarioStatus.JUDGED and book.judged == 1


def test_a_scenario_not_loaded_is_never_judged_and_the_closest_is_suggested() -> None:
    choice, _, _ = _choice()
    event = _event("c", 0, named="bookin")
    conv = choice.open(event)
    choice.await_scenario(conv, event, event.payload, [])
    [unmatched] = choice.unmatched()
    assert (unmatched.scenario, unmatched.did_you_mean) == ("bookin", "booking")


def test_a_session_end_before_any_name_ends_it_unmatched() -> None:
    choice, side, _ = _choice()
    event = Event(conversation_id="c", sequence=0, session_ended=ms.SessionEnded())
    conv = choice.open(event)
    choice.await_scenario(conv, event, event.payload, [])
    assert side.finished == ["c"]


def test_two_scenarios_of_one_name_are_refused() -> None:
    twin = compile_scenario(scenario({"skill_activated": {"skill_id": "z"}}, name="booking"))
    with pytest.raises(ms.UsageError, match="`booking` names two scenarios"):
        _choice(plans=[_PLANS[0], twin])


def test_an_assignment_after_the_first_event_applies_what_was_buffered() -> None:
    choice, side, _ = _choice()
    event = _event("c", 0)
    conv = choice.open(event)
    choice.await_scenario(conv, event, event.payload, [])
    choice.assign("c", "refund")
    assert conv.plan is _PLANS[1] and side.applied == [("c", 0)]
