"""The live-loop rules every live loop shares (core/live.py): stops, gap and idle timers,
the event rate. Time is passed in, so nothing here waits."""

from __future__ import annotations

import pytest

from mantle_stream.core.engine.evaluator import Evaluator
from mantle_stream.core.live import EventRate, GapTimer, IdleTimer, StopRule
from mantle_stream.core.verdicts import Decision
from mantle_stream.testing import TrackerEvent, bot, conversation, scenario, skill, tool, user

SCENARIO = scenario(
    {"skill_activated": {"skill_id": "card_replace"}},
    {"bot_did_not_utter": {"utter_name": "utter_cannot_help"}},
    {"tool_executed": {"tool_name": "order_replacement", "source": "local"}},
)


def _push(
    evaluator: Evaluator, *events: TrackerEvent, cid: str = "c1", first: int = 0
) -> list[Decision]:
    return evaluator.push_chunk(b"".join(conversation(*events, conversation_id=cid, first=first)))


def test_a_failure_stops_a_conversation_once_and_skips_what_is_pending() -> None:
    evaluator = Evaluator(SCENARIO)
    rule = StopRule(evaluator)
    decisions = _push(evaluator, user("hi"), skill("activated", "card_replace"))
    assert rule.settled(decisions) == []  # passed one, two pending: not settled
    evaluator2 = Evaluator(
        scenario(
            {"bot_did_not_utter": {"text_matches": "sorry"}}, {"skill_activated": {"skill_id": "x"}}
        )
    )
    rule2 = StopRule(evaluator2)
    decisions = _push(evaluator2, user("hi"), bot("sorry"), cid="c2")
    [message] = rule2.settled(decisions)
    assert (message.conversation_id, message.verdict, message.assertion.index) == (
        "c2",
        "failed",
        0,
    )
    assert rule2.settled(decisions) == []  # told once
    assert list(rule2.stopped) == ["c2"]
    [skipped] = [d for d in evaluator2.finish("c2") if d.index == 1]
    assert skipped.verdict == "skipped"


def test_stop_when_failed_leaves_a_conversation_whose_assertions_all_passed() -> None:
    evaluator = Evaluator(scenario({"skill_activated": {"skill_id": "card_replace"}}))
    decisions = _push(evaluator, user("hi"), skill("activated", "card_replace"))
    assert StopRule(evaluator, when="failed").settled(decisions) == []
    [message] = StopRule(evaluator, when="settled").settled(decisions)
    assert message.verdict == "passed"


def test_without_skip_pending_the_conversation_is_judged_on() -> None:
    evaluator = Evaluator(
        scenario(
            {"bot_did_not_utter": {"text_matches": "x"}},
            {"tool_executed": {"tool_name": "t", "source": "local"}},
        )
    )
    rule = StopRule(evaluator, skip_pending=False, remember=1)
    assert len(rule.settled(_push(evaluator, user("hi"), bot("x"), cid="c"))) == 1
    [passed] = _push(evaluator, tool("t"), cid="c", first=2)
    assert passed.verdict == "passed"


def test_the_gap_timer_names_a_conversation_once_its_wait_is_over() -> None:
    timer = GapTimer(5.0)
    timer.note(["a"], 0.0)
    assert timer.expired(["a", "b"], 4.9) == []
    assert timer.expired(["a", "b"], 5.0) == ["a"]
    assert timer.expired(["b"], 9.9) == ["b"]  # b's wait started at 4.9
    assert not timer


def test_a_conversation_no_longer_holding_is_forgotten_by_the_gap_timer() -> None:
    timer = GapTimer(1.0)
    timer.note(["a"], 0.0)
    assert timer.expired([], 0.5) == []
    assert timer.expired(["a"], 1.2) == []  # a new wait, from 1.2


def test_the_gap_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        GapTimer(0)


def test_the_idle_timer_restarts_on_every_new_event() -> None:
    timer = IdleTimer(2.0)
    assert timer.expired({"a": 1}, 0.0) == []
    assert timer.expired({"a": 2}, 1.5) == []  # a new event: the wait starts again
    assert timer.expired({"a": 2}, 3.4) == []
    assert timer.expired({"a": 2}, 3.5) == ["a"]
    assert timer.expired({}, 9.0) == []


def test_the_event_rate_is_over_the_recent_window() -> None:
    rate = EventRate(3)
    assert rate.per_second() is None
    for t, n in [(0.0, 0), (1.0, 100), (2.0, 300), (3.0, 600)]:
        rate.add(t, n)
    assert rate.per_second() == 250.0  # (600 - 100) / (3 - 1)
