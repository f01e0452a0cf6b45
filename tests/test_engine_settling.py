"""Settling (core/engine/settling.py), alone: decisions recorded, a conversation's
assertions settled at its end, a stop that skips what is pending, the counters."""

from __future__ import annotations

import mantle_stream as ms
from mantle_stream.core.assertions.compiler import Plan, compile_scenario
from mantle_stream.core.engine.conversation import Conversation
from mantle_stream.core.engine.settling import Settling
from mantle_stream.core.verdicts import Decision, Tally

from _harness import scenario

# Untouched at the end: the first fails (no such skill was activated), the second passes.
_PLAN: Plan = compile_scenario(
    scenario(
        {"skill_activated": {"skill_id": "k"}}, {"bot_did_not_utter": {"utter_name": "utter_x"}}
    )
)


def _conversation() -> tuple[Settling, Conversation, Tally]:
    tally = Tally()
    return Settling(tally), Conversation("c", _PLAN), tally


def test_a_decision_is_recorded_once_and_its_machine_dropped() -> None:
    settling, conv, tally = _conversation()
    out: list[Decision] = []
    settling.decide(conv, 0, True, 4, "activated", out)
    [decision] = out
    assert (decision.index, decision.verdict, decision.decided_at) == (0, "passed", 4)
    assert conv.results[0] == decision and conv.machines[0] is None and conv.pending == 1
    assert tally.decisions == 1 and settling.failures == 0 and not conv.failed


def test_a_failed_decision_marks_the_conversation_and_counts_for_fail_fast() -> None:
    settling, conv, _ = _conversation()
    settling.decide(conv, 1, False, 2, "it was", [])
    assert conv.failed and settling.failures == 1


def test_a_reason_with_control_characters_becomes_one_line() -> None:
    settling, conv, _ = _conversation()
    out: list[Decision] = []
    settling.decide(conv, 0, None, None, "a\nb", out)
    assert out[0].verdict == "errored" and "\n" not in out[0].reason


def test_at_the_end_untouched_assertions_take_their_precomputed_verdicts() -> None:
    settling, conv, tally = _conversation()
    out: list[Decision] = []
    settling.end(conv, _PLAN, out)
    assert [d.verdict for d in out] == ["failed", "passed"]
    assert conv.pending == 0 and conv.machines == [] and conv.failed
    assert (tally.decisions, tally.failed, tally.passed, settling.failures) == (2, 1, 0, 1)


def test_a_stopped_conversation_ends_with_its_pending_assertions_skipped() -> None:
    settling, conv, tally = _conversation()
    settling.decide(conv, 1, True, 3, "not uttered", [])
    settling.stop(conv, None, skip_pending=True)
    assert conv.stopped is not None and conv.stopped.index == 1  # the first decision
    out: list[Decision] = []
    settling.end(conv, _PLAN, out)
    [skipped] = out
    assert skipped.verdict == "skipped" and skipped.index == 0
    assert skipped.reason == (
        "not judged: the conversation was stopped early after assertion "
        "#1 `bot_did_not_utter` passed at sequence 3"
    )
    assert tally.passed == 1


def test_a_stop_before_any_decision_names_none() -> None:
    settling, conv, _ = _conversation()
    settling.stop(conv, None, skip_pending=True)
    assert conv.stopped is not None and conv.stopped.index == -1
    out: list[Decision] = []
    settling.end(conv, _PLAN, out)
    assert {d.reason for d in out} == {"not judged: the conversation was stopped early"}


def test_a_stop_that_does_not_skip_lets_the_end_judge() -> None:
    settling, conv, _ = _conversation()
    settling.stop(conv, None, skip_pending=False)  # a Kafka member's simulator plays on
    out: list[Decision] = []
    settling.end(conv, _PLAN, out)
    assert [d.verdict for d in out] == ["failed", "passed"]


def test_decisions_taken_over_from_elsewhere_are_counted() -> None:
    settling, conv, tally = _conversation()
    theirs: list[Decision] = []
    Settling(Tally()).decide(conv, 0, False, 1, "no", theirs)
    settling.took_over(theirs)
    assert tally.decisions == 1 and settling.failures == 1


def test_the_evaluator_reports_what_settling_alone_decides() -> None:
    settling, conv, _ = _conversation()
    alone: list[Decision] = []
    settling.end(conv, _PLAN, alone)
    evaluator = ms.Evaluator(_PLAN.scenario)
    evaluator.push(
        ms.Event(conversation_id="c", sequence=0, user=ms.User(text="/start"))
    )  # no turn
    assert evaluator.finish("c") == alone
