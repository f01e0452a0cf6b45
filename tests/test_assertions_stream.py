"""Every assertion kind over a live stream: endings, finality, several
conversations, legacy rows and checkpoints.

docs/semantics.md "Verdicts": once passed or failed a verdict never changes; at
conversation end (`session_ended`) every pending assertion resolves with
``decided_at`` None; events after the end change nothing, each
conversation is judged on its own, legacy flat rows read as their ProtoJSON
counterparts. A conversation's state is plain data, so it can be
checkpointed and restored elsewhere with the same outcome.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

import mantle_stream as ms

from _harness import (
    IN_ORDER,
    D,
    Ev,
    block,
    bot,
    calm_slot,
    checkpointed,
    clear,
    end,
    flat,
    judge,
    judge_lines,
    scenario,
    setm,
    skill,
    tool,
    user,
    within,
)

CR = "card_replace"
REASON, FRAUD, DRAFT = f"{CR}.replacement_reason", f"{CR}.fraud_review", f"{CR}.draft_order_id"
ORDER_CALL = {"tool_executed": {"tool_name": "order_replacement", "source": "local"}}
BAL_CALL = {"tool_executed": {"tool_name": "check_balance", "source": "local"}}
bal, order = tool("check_balance"), tool("order_replacement", skill_id=CR)


# --------------------------------------------------------------------------
# One early-decided conversation per kind, then events that would contradict it
# --------------------------------------------------------------------------

# (assertion, events up to and including the decision (D-marked), verdict, later events)
DECIDED_EARLY = [
    pytest.param(
        {"skill_activated": {"skill_id": CR}},
        [user(), D(skill("activated", CR))],
        "passed",
        [skill("activated", CR), skill("cancelled", CR)],
        id="skill_activated",
    ),
    pytest.param(
        {"skill_completed": {"skill_id": CR}},
        [user(), D(skill("completed", CR))],
        "passed",
        [skill("completed", CR)],
        id="skill_completed",
    ),
    pytest.param(
        {"skill_cancelled": {"skill_id": CR, "step_id": "s"}},
        [user(), D(skill("cancelled", CR, "s"))],
        "passed",
        [skill("cancelled", CR, "s")],
        id="skill_cancelled",
    ),
    pytest.param(
        {"skill_interrupted": {"skill_id": CR}},
        [user(), D(skill("interrupted", CR))],
        "passed",
        [skill("interrupted", CR)],
        id="skill_interrupted",
    ),
    pytest.param(
        {"skill_resumed": {"skill_id": CR}},
        [user(), D(skill("resumed", CR))],
        "passed",
        [skill("resumed", CR)],
        id="skill_resumed",
    ),
    pytest.param(
        {"ordered_block_entered": {"skill_id": CR, "block_id": "main"}},
        [user(), D(block("entered", CR, "main"))],
        "passed",
        [block("entered", CR, "main")],
        id="ordered_block_entered",
    ),
    pytest.param(
        {"ordered_block_completed": {"skill_id": CR, "block_id": "main"}},
        [user(), D(block("completed", CR, "main"))],
        "passed",
        [block("completed", CR, "main")],
        id="ordered_block_completed",
    ),
    pytest.param(
        {"ordered_block_cancelled": {"skill_id": CR, "block_id": "main"}},
        [user(), D(block("cancelled", CR, "main"))],
        "passed",
        [block("cancelled", CR, "main")],
        id="ordered_block_cancelled",
    ),
    pytest.param(
        {"ordered_block_interrupted": {"skill_id": CR, "block_id": "main", "step_id": "s"}},
        [user(), D(block("interrupted", CR, "main", "s"))],
        "passed",
        [block("interrupted", CR, "main", "s")],
        id="ordered_block_interrupted",
    ),
    pytest.param(
        {"ordered_block_resumed": {"skill_id": CR, "block_id": "main"}},
        [user(), D(block("resumed", CR, "main"))],
        "passed",
        [block("resumed", CR, "main")],
        id="ordered_block_resumed",
    ),
    pytest.param(
        {"memory_was_set": [{"name": REASON, "value": "damaged"}]},
        [user(), D(setm(REASON, "damaged"))],
        "passed",
        [clear(REASON), setm(REASON, "lost"), setm(REASON, "damaged")],
        id="memory_was_set",
    ),
    pytest.param(
        {"memory_was_not_set": [{"name": FRAUD}]},
        [user(), D(setm(FRAUD, False))],
        "failed",
        [clear(FRAUD), setm(FRAUD, True)],
        id="memory_was_not_set",
    ),
    pytest.param(
        {"memory_was_cleared": [{"name": DRAFT}]},
        [user(), D(clear(DRAFT))],
        "passed",
        [setm(DRAFT, 1), clear(DRAFT)],
        id="memory_was_cleared",
    ),
    pytest.param(
        {"tool_executed": {"tool_name": "order_replacement", "source": "local"}},
        [user(), D(order)],
        "passed",
        [order, tool("order_replacement", is_error=True)],
        id="tool_executed",
    ),
    pytest.param(
        within(BAL_CALL, ORDER_CALL, extras=True),
        [user(), bal, D(order)],
        "passed",
        [bal, order, user(), order],
        id="tools_within_one_turn-extras",
    ),
    pytest.param(
        within(BAL_CALL, ORDER_CALL, extras=False),
        [user(), bal, order, D(user())],
        "passed",
        [bal, order, tool("x"), user(), bal],
        id="tools_within_one_turn-no-extras",
    ),
    pytest.param(
        {"bot_uttered": {"utter_name": "utter_done"}},
        [user(), D(bot("ok", utter="utter_done"))],
        "passed",
        [bot("ok", utter="utter_done")],
        id="bot_uttered",
    ),
    pytest.param(
        {"bot_did_not_utter": {"utter_name": "utter_cannot_help"}},
        [user(), D(bot("no", utter="utter_cannot_help"))],
        "failed",
        [bot("no", utter="utter_cannot_help"), bot("fine")],
        id="bot_did_not_utter",
    ),
    pytest.param(
        {"sequencing": [{"memory_was_set": REASON}, ORDER_CALL]},
        [user(), setm(REASON, "x"), D(order)],
        "passed",
        [order, setm(REASON, "y"), clear(REASON)],
        id="sequencing",
    ),
]


@pytest.mark.parametrize(("assertion", "events", "verdict", "later"), DECIDED_EARLY)
def test_a_decided_verdict_never_changes(
    assertion: dict[str, Any], events: list[Ev], verdict: str, later: list[Ev]
) -> None:
    judged = judge(assertion, [*events, *later, user(), *later])
    assert judged.marked is not None
    assert judged.outcome() == (verdict, judged.marked)
    deciding = judged.seqs.index(judged.marked)
    assert [len(d) for d in judged.pushed] == [
        1 if i == deciding else 0 for i in range(len(judged.pushed))
    ]


@pytest.mark.parametrize(("assertion", "events", "verdict", "later"), DECIDED_EARLY)
def test_a_decided_verdict_survives_session_ended(
    assertion: dict[str, Any], events: list[Ev], verdict: str, later: list[Ev]
) -> None:
    judged = judge(assertion, [*events, *later, end()])
    assert judged.outcome() == (verdict, judged.marked)
    assert judged.pushed[-1] == []


# --------------------------------------------------------------------------
# The end decides what is still pending; nothing after the end counts
# --------------------------------------------------------------------------

# (assertion, events before the end, verdict at the end, events after the end that would flip it)
DECIDED_BY_END = [
    pytest.param(
        {"skill_activated": {"skill_id": CR}},
        [user()],
        "failed",
        [skill("activated", CR)],
        id="skill_activated",
    ),
    pytest.param(
        {"skill_completed": {"skill_id": CR}},
        [user(), skill("activated", CR)],
        "failed",
        [skill("completed", CR)],
        id="skill_completed",
    ),
    pytest.param(
        {"skill_cancelled": {"skill_id": CR}},
        [user()],
        "failed",
        [skill("cancelled", CR)],
        id="skill_cancelled",
    ),
    pytest.param(
        {"skill_interrupted": {"skill_id": CR}},
        [user()],
        "failed",
        [skill("interrupted", CR)],
        id="skill_interrupted",
    ),
    pytest.param(
        {"skill_resumed": {"skill_id": CR}},
        [user()],
        "failed",
        [skill("resumed", CR)],
        id="skill_resumed",
    ),
    pytest.param(
        {"ordered_block_entered": {"skill_id": CR, "block_id": "main"}},
        [user()],
        "failed",
        [block("entered", CR, "main")],
        id="ordered_block_entered",
    ),
    pytest.param(
        {"ordered_block_completed": {"skill_id": CR, "block_id": "main"}},
        [user()],
        "failed",
        [block("completed", CR, "main")],
        id="ordered_block_completed",
    ),
    pytest.param(
        {"ordered_block_cancelled": {"skill_id": CR, "block_id": "main"}},
        [user()],
        "failed",
        [block("cancelled", CR, "main")],
        id="ordered_block_cancelled",
    ),
    pytest.param(
        {"ordered_block_interrupted": {"skill_id": CR, "block_id": "main"}},
        [user()],
        "failed",
        [block("interrupted", CR, "main")],
        id="ordered_block_interrupted",
    ),
    pytest.param(
        {"ordered_block_resumed": {"skill_id": CR, "block_id": "main"}},
        [user()],
        "failed",
        [block("resumed", CR, "main")],
        id="ordered_block_resumed",
    ),
    pytest.param(
        {"memory_was_set": [{"name": REASON}]},
        [user(), clear(REASON)],
        "failed",
        [setm(REASON, "x")],
        id="memory_was_set",
    ),
    pytest.param(
        {"memory_was_not_set": [{"name": FRAUD}]},
        [user(), clear(FRAUD)],
        "passed",
        [setm(FRAUD, True)],
        id="memory_was_not_set",
    ),
    pytest.param(
        {"memory_was_not_set": [{"name": FRAUD, "value": True}]},
        [user(), setm(FRAUD, True), setm(FRAUD, False)],
        "passed",
        [setm(FRAUD, True)],
        id="memory_was_not_set-value-passed",
    ),
    pytest.param(
        {"memory_was_not_set": [{"name": FRAUD, "value": True}]},
        [user(), setm(FRAUD, True)],
        "failed",
        [setm(FRAUD, False)],
        id="memory_was_not_set-value-failed",
    ),
    pytest.param(
        {"memory_was_cleared": [{"name": DRAFT}]},
        [user(), setm(DRAFT, 1)],
        "failed",
        [clear(DRAFT)],
        id="memory_was_cleared",
    ),
    pytest.param(
        {"tool_executed": {"tool_name": "order_replacement", "source": "local"}},
        [user(), bal],
        "failed",
        [order],
        id="tool_executed",
    ),
    pytest.param(
        within(BAL_CALL, ORDER_CALL, extras=True),
        [user(), bal],
        "failed",
        [order],
        id="tools_within_one_turn-extras",
    ),
    pytest.param(
        within(BAL_CALL, ORDER_CALL, extras=False),
        [user(), bal, order],
        "passed",
        [tool("extra")],
        id="tools_within_one_turn-no-extras-passed",
    ),
    pytest.param(
        within(BAL_CALL, ORDER_CALL, extras=False),
        [user(), bal],
        "failed",
        [order],
        id="tools_within_one_turn-no-extras-failed",
    ),
    pytest.param(
        {"bot_uttered": {"text_matches": "ordered"}},
        [user(), bot("hm")],
        "failed",
        [bot("ordered")],
        id="bot_uttered",
    ),
    pytest.param(
        {"bot_did_not_utter": {"text_matches": "sorry"}},
        [user(), bot("hm")],
        "passed",
        [bot("sorry")],
        id="bot_did_not_utter",
    ),
    pytest.param(
        {"sequencing": [{"memory_was_set": REASON}, ORDER_CALL]},
        [user(), setm(REASON, "x")],
        "failed",
        [order],
        id="sequencing",
    ),
]


@pytest.mark.parametrize(("assertion", "before", "verdict", "after"), DECIDED_BY_END)
def test_session_ended_resolves_pending_assertions_with_no_decided_at(
    assertion: dict[str, Any], before: list[Ev], verdict: str, after: list[Ev]
) -> None:
    judged = judge(assertion, [*before, end()], finish=False)
    assert judged.outcome() == (verdict, None)
    assert len(judged.pushed[-1]) == 1


@pytest.mark.parametrize(("assertion", "before", "verdict", "after"), DECIDED_BY_END)
def test_events_after_session_ended_change_nothing(
    assertion: dict[str, Any], before: list[Ev], verdict: str, after: list[Ev]
) -> None:
    judged = judge(assertion, [*before, end(), *after, user(), *after])
    assert judged.outcome() == (verdict, None)
    assert all(d == [] for d in judged.pushed[len(before) + 1 :])


@pytest.mark.parametrize(("assertion", "before", "verdict", "after"), DECIDED_BY_END)
def test_the_end_of_input_resolves_like_session_ended(
    assertion: dict[str, Any], before: list[Ev], verdict: str, after: list[Ev]
) -> None:
    assert judge(assertion, before).outcome() == (verdict, None)


def test_not_set_with_value_stays_pending_after_a_forbidden_write() -> None:
    judged = judge(
        {"memory_was_not_set": [{"name": FRAUD, "value": True}]},
        [user(), setm(FRAUD, True), bot("x")],
        finish=False,
    )
    assert judged.decisions == []
    assert judged.outcome() == ("pending", None)


def test_finish_after_session_ended_reports_nothing_new() -> None:
    evaluator = ms.Evaluator([scenario({"skill_activated": {"skill_id": CR}})])
    evaluator.push_line(user().line("c", 0))
    [decision] = evaluator.push_line(end().line("c", 1))
    assert (decision.verdict, decision.decided_at) == ("failed", None)
    assert evaluator.finish_all() == []
    assert evaluator.push_line(skill("activated", CR).line("c", 2)) == []
    [result] = evaluator.results()
    assert result.finished and result.assertions[0].verdict == "failed"


def test_decided_at_is_the_events_own_sequence_across_gaps() -> None:
    judged = judge(
        [
            {"skill_activated": {"skill_id": CR}},
            {"sequencing": [{"memory_was_set": REASON}, ORDER_CALL]},
        ],
        [
            Ev("user", {"text": "hi"}, seq=3),
            Ev("skill_activated", {"skill_id": CR}, seq=17),
            Ev("memory_set", setm(REASON, "x").payload, seq=40),
            Ev("user", {"text": "ok"}, seq=41),
            Ev("tool_executed", order.payload, seq=1000),
        ],
    )
    assert [judged.outcome(i) for i in range(2)] == [("passed", 17), ("passed", 1000)]


def test_decisions_carry_the_user_turn_they_were_made_in() -> None:
    evaluator = ms.Evaluator(
        [
            scenario(
                {"skill_activated": {"skill_id": CR}},
                {"bot_uttered": {"text_matches": "done"}},
                within(BAL_CALL, ORDER_CALL, extras=False),
                {"skill_completed": {"skill_id": CR}},
            )
        ]
    )
    events = [skill("activated", CR), user(), bal, order, user(), bot("done"), user()]
    decisions = [d for i, ev in enumerate(events) for d in evaluator.push_line(ev.line("c", i))]
    decisions += evaluator.finish_all()
    assert {d.index: (d.turn, d.decided_at) for d in decisions} == {
        0: (0, 0),
        1: (2, 5),
        2: (2, 4),
        3: (3, None),
    }
    assert evaluator.results()[0].turns == 3


# --------------------------------------------------------------------------
# Several conversations in one feed
# --------------------------------------------------------------------------

ALL_KINDS_SCENARIO: list[dict[str, Any]] = [
    {"skill_activated": {"skill_id": CR}},
    {"ordered_block_completed": {"skill_id": CR, "block_id": "main"}},
    {"memory_was_set": [{"name": REASON, "value": "damaged"}]},
    {"memory_was_not_set": [{"name": FRAUD}]},
    {"memory_was_cleared": [{"name": DRAFT}]},
    {
        "tool_executed": {
            "tool_name": "order_replacement",
            "source": "local",
            "arguments": {"shipping": "standard"},
        }
    },
    within(BAL_CALL, ORDER_CALL, extras=False, ordered=True),
    {"bot_uttered": {"text_matches": "ordered"}},
    {"bot_did_not_utter": {"utter_name": "utter_cannot_help"}},
    {"sequencing": [{"memory_was_set": REASON}, ORDER_CALL, {"skill_completed": {"skill_id": CR}}]},
]

HAPPY = [  # sequences 0..
    user("damaged card"),  # 0
    skill("activated", CR),  # 1
    setm(REASON, "damaged"),  # 2
    setm(DRAFT, "d-1"),  # 3
    bal,  # 4
    tool("order_replacement", skill_id=CR, args={"shipping": "standard"}),  # 5
    block("completed", CR, "main"),  # 6
    bot("Your replacement was ordered."),  # 7
    clear(DRAFT),  # 8
    skill("completed", CR),  # 9
    user("thanks"),  # 10
]
HAPPY_OUTCOMES = [
    ("passed", 1),
    ("passed", 6),
    ("passed", 2),
    ("passed", None),
    ("passed", 8),
    ("passed", 5),
    ("passed", 10),
    ("passed", 7),
    ("passed", None),
    ("passed", 9),
]

UNHAPPY = [
    user("lost card"),  # 0
    setm(FRAUD, True),  # 1
    bal,  # 2
    user("hello?"),  # 3
    tool("order_replacement", skill_id=CR, args={"shipping": "express"}),  # 4
    bot("Sorry, I can't help.", utter="utter_cannot_help"),  # 5
]
UNHAPPY_OUTCOMES = [
    ("failed", None),
    ("failed", None),
    ("failed", None),
    ("failed", 1),
    ("failed", None),
    ("failed", None),
    ("failed", None),
    ("failed", None),
    ("failed", 5),
    ("failed", None),
]


def outcomes(result: ms.ConversationResult) -> list[tuple[str, int | None]]:
    return [(a.verdict, a.decided_at) for a in result.assertions]


def interleave(*convs: tuple[str, list[Ev]]) -> list[str]:
    """Round-robin the conversations' lines; each keeps its own sequences from 0."""
    lines: list[str] = []
    longest = max(len(events) for _, events in convs)
    for i in range(longest):
        for cid, events in convs:
            if i < len(events):
                lines.append(events[i].line(cid, i))
    return lines


def test_each_conversation_alone_gives_the_expected_outcomes() -> None:
    assert outcomes(judge_lines(ALL_KINDS_SCENARIO, interleave(("h", HAPPY)))[0]) == HAPPY_OUTCOMES
    assert (
        outcomes(judge_lines(ALL_KINDS_SCENARIO, interleave(("u", UNHAPPY)))[0]) == UNHAPPY_OUTCOMES
    )


def test_interleaved_conversations_are_judged_independently() -> None:
    results = judge_lines(ALL_KINDS_SCENARIO, interleave(("h", HAPPY), ("u", UNHAPPY)))
    by_id = {r.conversation_id: r for r in results}
    assert outcomes(by_id["h"]) == HAPPY_OUTCOMES
    assert outcomes(by_id["u"]) == UNHAPPY_OUTCOMES


def test_another_conversations_user_event_does_not_split_a_turn() -> None:
    lines = [
        user().line("a", 0),
        bal.line("a", 1),
        user().line("b", 0),
        user().line("b", 1),
        order.line("a", 2),
        tool("x").line("b", 2),
    ]
    results = judge_lines([within(BAL_CALL, ORDER_CALL, extras=False)], lines)
    assert {r.conversation_id: outcomes(r) for r in results} == {
        "a": [("passed", None)],
        "b": [("failed", None)],
    }


def test_session_ended_of_one_conversation_leaves_the_others_open() -> None:
    evaluator = ms.Evaluator([scenario({"skill_completed": {"skill_id": CR}})])
    evaluator.push_line(user().line("a", 0))
    evaluator.push_line(user().line("b", 0))
    [ended] = evaluator.push_line(end().line("a", 1))
    assert (ended.conversation_id, ended.verdict, ended.decided_at) == ("a", "failed", None)
    [passed] = evaluator.push_line(skill("completed", CR).line("b", 1))
    assert (passed.conversation_id, passed.verdict, passed.decided_at) == ("b", "passed", 1)
    assert evaluator.push_line(skill("completed", CR).line("a", 2)) == []
    assert {r.conversation_id: outcomes(r) for r in evaluator.results()} == {
        "a": [("failed", None)],
        "b": [("passed", 1)],
    }


def test_many_conversations_in_one_feed() -> None:
    convs = [(f"c{i}", HAPPY if i % 2 else UNHAPPY) for i in range(12)]
    results = judge_lines(ALL_KINDS_SCENARIO, interleave(*convs))
    assert len(results) == 12
    for r in results:
        expected = HAPPY_OUTCOMES if int(r.conversation_id[1:]) % 2 else UNHAPPY_OUTCOMES
        assert outcomes(r) == expected, r.conversation_id


@pytest.mark.parametrize(
    ("events", "passed", "failed"),
    [
        # Never reached: the check fails with the plan's precomputed verdict.
        ([(0, {"user": {"text": "hi"}}), (1, {"session_ended": {}})], 0, 1),
        # Reached and passed by an event: nothing failed.
        ([(0, {"skill_activated": {"skill_id": CR}}), (1, {"session_ended": {}})], 1, 0),
        # A machine failed it (bot_did_not_utter), the other check never reached.
        ([(0, {"bot": {"utter_name": "utter_cannot_help"}}), (1, {"session_ended": {}})], 0, 1),
    ],
    ids=["untouched-fails", "touched-passes", "machine-fails"],
)
def test_conversation_tallies_count_untouched_and_machine_failures(
    events: list[tuple[int, dict[str, Any]]], passed: int, failed: int
) -> None:
    scenario = ms.load_scenario_text(
        json.dumps(
            {
                "scenario": {
                    "name": "t",
                    "simulation_context": "x",
                    "goals": {
                        "assertions": [
                            {"skill_activated": {"skill_id": CR}},
                            {"bot_did_not_utter": {"utter_name": "utter_cannot_help"}},
                        ]
                    },
                }
            }
        )
    )
    evaluator = ms.Evaluator([scenario])
    for seq, payload in events:
        evaluator.push(
            msgspec.convert({"conversation_id": "c", "sequence": seq, **payload}, ms.Event)
        )
    stats = evaluator.statistics()
    assert (stats.passed, stats.failed) == (passed, failed)
    assert evaluator.is_settled("c")


def test_a_conversation_is_open_from_its_first_event_until_it_ends() -> None:
    evaluator = ms.Evaluator([scenario({"skill_activated": {"skill_id": CR}})])

    def push(cid: str, seq: int, payload: dict[str, Any]) -> None:
        evaluator.push(
            msgspec.convert({"conversation_id": cid, "sequence": seq, **payload}, ms.Event)
        )

    assert not evaluator.is_open("c")
    push("c", 0, {"user": {"text": "hi"}})
    assert evaluator.is_open("c")
    push("c", 1, {"session_ended": {}})
    assert not evaluator.is_open("c")
    push("d", 0, {"user": {"text": "hi"}})
    evaluator.finish_all()
    assert not evaluator.is_open("d")


# --------------------------------------------------------------------------
# Flat events (a tracker document's shape, one per line with sender_id)
# --------------------------------------------------------------------------

FLAT_ASSERTIONS: list[dict[str, Any]] = [
    {
        "memory_was_set": [
            {"name": REASON, "value": "damaged"},
            {"name": "card_replace.count", "value": 5},
        ]
    },
    {"memory_was_set": [{"name": "card_replace.count", "value": "5"}]},
    {"memory_was_not_set": [{"name": FRAUD, "value": True}]},
    {"memory_was_not_set": [{"name": "project.vip"}]},
    {"memory_was_cleared": [{"name": DRAFT}]},
    {
        "bot_uttered": {
            "utter_name": "utter_ask_shipping",
            "buttons": [{"title": "Standard", "payload": "/standard"}, {"title": "Express"}],
        }
    },
    {"bot_uttered": {"text_matches": "was ordered"}},
    {"bot_did_not_utter": {"utter_name": "utter_cannot_help"}},
    within(BAL_CALL, ORDER_CALL, extras=False),
    {
        "sequencing": [
            {"memory_was_set": REASON},
            {"memory_was_cleared": DRAFT},
            {
                "tool_executed": {
                    "tool_name": "order_replacement",
                    "source": "local",
                    "skill_id": CR,
                }
            },
        ]
    },
    {
        "tool_executed": {
            "tool_name": "order_replacement",
            "source": "local",
            "skill_id": CR,
            "arguments": {"shipping": "standard"},
        }
    },
]
FLAT_OUTCOMES = [
    ("passed", 15),
    ("failed", None),
    ("passed", None),
    ("passed", None),
    ("passed", 18),
    ("passed", 13),
    ("passed", 20),
    ("passed", None),
    ("passed", 21),
    ("passed", 19),
    ("passed", 19),
]

SHIPPING_BUTTONS = [
    {"title": "Standard", "payload": "/standard"},
    {"title": "Express", "payload": "/express"},
]


def conversation(shape: str) -> list[Ev]:
    """One conversation in ProtoJSON, or every event in the flat shape."""
    events = [
        user("my card is damaged"),  # 10
        setm(REASON, "damaged"),  # 11
        setm(FRAUD, True),  # 12
        bot("Which shipping?", utter="utter_ask_shipping", buttons=SHIPPING_BUTTONS),  # 13
        setm(DRAFT, "d-1"),  # 14
        setm("card_replace.count", 5),  # 15
        user("standard"),  # 16
        bal,  # 17
        clear(DRAFT),  # 18
        tool("order_replacement", skill_id=CR, args={"shipping": "standard"}),  # 19
        bot("Your replacement was ordered.", utter="utter_done"),  # 20
        user("thanks"),  # 21
        setm(FRAUD, False),  # 22
    ]
    return events if shape == "protojson" else [flat(e) for e in events]


@pytest.mark.parametrize("shape", ["protojson", "flat"])
def test_conversation_gives_the_expected_outcomes(shape: str) -> None:
    judged = judge(FLAT_ASSERTIONS, conversation(shape))
    assert [judged.outcome(i) for i in range(len(FLAT_ASSERTIONS))] == FLAT_OUTCOMES


def test_flat_events_are_judged_the_same_as_protojson() -> None:
    proto = judge(FLAT_ASSERTIONS, conversation("protojson"))
    flat_ = judge(FLAT_ASSERTIONS, conversation("flat"))
    assert flat_.results == proto.results


def test_flat_memory_value_is_already_typed() -> None:
    judged = judge(
        [
            {"memory_was_set": [{"name": "a.n", "value": 5}]},
            {"memory_was_set": [{"name": "a.s", "value": "5"}]},
            {"memory_was_set": [{"name": "a.o", "value": {"x": [1, True]}}]},
        ],
        [
            flat(setm("a.n", "5")),
            flat(setm("a.s", 5)),
            flat(setm("a.o", {"x": [1, True]})),
            flat(setm("a.n", 5)),
        ],
    )
    assert [judged.outcome(i) for i in range(3)] == [
        ("passed", 13),
        ("failed", None),
        ("passed", 12),
    ]


def test_older_calm_slot_rows_are_skipped_and_counted() -> None:
    evaluator = ms.Evaluator(
        [scenario({"memory_was_set": [{"name": DRAFT}]}, {"memory_was_cleared": [{"name": DRAFT}]})]
    )
    for seq, ev in enumerate([flat(user()), calm_slot(DRAFT, "d"), calm_slot(DRAFT, None)]):
        evaluator.push_line(ev.line("c", seq))
    evaluator.finish_all()
    [result] = evaluator.results()
    assert [a.verdict for a in result.assertions] == ["failed", "failed"]
    assert evaluator.statistics().legacy_rows == 2
    assert evaluator.decoder.legacy == {"slot": 2}


def test_flat_rows_without_sequence_are_judged_in_arrival_order() -> None:
    events = [
        flat(user(), with_sequence=False),
        flat(setm(DRAFT, "d"), with_sequence=False),
        flat(clear(DRAFT), with_sequence=False),
        flat(tool("submit"), with_sequence=False),
        flat(user(), with_sequence=False),
    ]
    ok = {
        "sequencing": [
            {"memory_was_set": DRAFT},
            {"memory_was_cleared": DRAFT},
            {"tool_executed": {"tool_name": "submit", "source": "local"}},
        ]
    }
    reversed_ = {
        "sequencing": [
            {"tool_executed": {"tool_name": "submit", "source": "local"}},
            {"memory_was_cleared": DRAFT},
        ]
    }
    [result] = judge_lines([ok, reversed_], [e.line("c", 0) for e in events])
    assert [a.verdict for a in result.assertions] == ["passed", "failed"]
    # Decided by an event without a sequence: there is no sequence to report.
    assert result.assertions[0].decided_at is None


def test_flat_and_protojson_rows_mix_in_one_conversation() -> None:
    judged = judge(
        [
            within(BAL_CALL, ORDER_CALL, extras=True),
            {"bot_uttered": {"utter_name": "utter_done", "text_matches": "ordered"}},
        ],
        [
            flat(user()),
            bal,
            flat(user()),
            flat(bal),
            D(order),
            flat(bot("ordered", utter="utter_done")),
        ],
    )
    assert [judged.outcome(i) for i in range(2)] == [("passed", 14), ("passed", 15)]


# --------------------------------------------------------------------------
# Checkpoint and restore
# --------------------------------------------------------------------------

# (assertions, conversation) - every split point is tried.
CHECKPOINT_CASES = [
    pytest.param(
        [
            {"skill_activated": {"skill_id": CR}},
            {"skill_completed": {"skill_id": CR}},
            {"skill_cancelled": {"skill_id": CR, "step_id": "confirm"}},
            {"skill_interrupted": {"skill_id": CR}},
            {"skill_resumed": {"skill_id": CR}},
        ],
        [
            user(),
            skill("activated", CR),
            skill("interrupted", CR),
            user(),
            skill("resumed", CR),
            skill("cancelled", CR, "other"),
            skill("completed", CR),
        ],
        id="skill",
    ),
    pytest.param(
        [
            {"ordered_block_entered": {"skill_id": CR, "block_id": "main"}},
            {"ordered_block_completed": {"skill_id": CR, "block_id": "main", "step_id": "s2"}},
            {"ordered_block_cancelled": {"skill_id": CR, "block_id": "submit"}},
            {"ordered_block_interrupted": {"skill_id": CR, "block_id": "main"}},
            {"ordered_block_resumed": {"skill_id": CR, "block_id": "main"}},
        ],
        [
            user(),
            block("entered", CR, "main"),
            block("interrupted", CR, "main"),
            block("resumed", CR, "main"),
            block("completed", CR, "main", "s1"),
            block("completed", CR, "main", "s2"),
        ],
        id="ordered_block",
    ),
    pytest.param(
        [
            {"memory_was_set": [{"name": REASON, "value": "damaged"}, {"name": DRAFT}]},
            {"memory_was_set": [{"name": REASON, "value": "stolen"}]},
        ],
        [user(), setm(REASON, "lost"), setm(REASON, "damaged"), bot("x"), setm(DRAFT, 1)],
        id="memory_was_set",
    ),
    pytest.param(
        [
            {"memory_was_not_set": [{"name": FRAUD, "value": True}]},
            {"memory_was_not_set": [{"name": REASON, "value": "lost"}]},
            {"memory_was_not_set": [{"name": DRAFT}, {"name": "x.y", "value": 1}]},
            {"memory_was_not_set": [{"name": "x.z"}]},
        ],
        [
            user(),
            setm(FRAUD, True),
            setm(REASON, "damaged"),
            clear(FRAUD),
            setm(REASON, "lost"),
            setm("x.y", 1),
            setm(DRAFT, 0),
            setm(FRAUD, False),
        ],
        id="memory_was_not_set",
    ),
    pytest.param(
        [
            {"memory_was_cleared": [{"name": DRAFT}, {"name": REASON}]},
            {"memory_was_cleared": [{"name": FRAUD}]},
        ],
        [user(), setm(DRAFT, 1), clear(DRAFT), user(), clear(REASON)],
        id="memory_was_cleared",
    ),
    pytest.param(
        [
            {
                "tool_executed": {
                    "tool_name": "order_replacement",
                    "source": "local",
                    "arguments": {"shipping": "standard"},
                }
            },
            {"tool_executed": {"tool_name": "submit", "source": "mcp", "mcp_server": "banking"}},
        ],
        [
            user(),
            tool("order_replacement", args={"shipping": "express"}),
            tool("order_replacement", args={"shipping": "standard"}),
            tool("submit", source="mcp", server="cards"),
        ],
        id="tool_executed",
    ),
    pytest.param(
        [
            within(BAL_CALL, ORDER_CALL, extras=False, ordered=True),
            within(BAL_CALL, ORDER_CALL, extras=True),
            within(
                {"tool_executed": {"tool_name": "lookup", "source": "local"}},
                {
                    "tool_executed": {
                        "tool_name": "lookup",
                        "source": "local",
                        "arguments": {"id": 1},
                    }
                },
                extras=False,
            ),
        ],
        [
            user(),
            bal,
            tool("x"),
            order,
            user(),
            bal,
            tool("listen"),
            order,
            user(),
            tool("lookup", args={"id": 1}),
            tool("set_fields"),
            tool("lookup", args={"id": 2}),
            user(),
        ],
        id="tools_within_one_turn",
    ),
    pytest.param(
        [within(BAL_CALL, ORDER_CALL, extras=False)],
        [bal, user(), bal, tool("x"), order, user(), order, bal],
        id="tools_within_one_turn-last-turn",
    ),
    pytest.param(
        [
            {"bot_uttered": {"utter_name": "utter_done", "text_matches": "ordered"}},
            {"bot_did_not_utter": {"text_matches": "sorry"}},
            {"bot_did_not_utter": {"utter_name": "utter_x"}},
        ],
        [
            user(),
            bot("ordered"),
            bot("done", utter="utter_done"),
            user(),
            bot("sorry"),
            bot("Your card was ordered", utter="utter_done"),
        ],
        id="bot",
    ),
    pytest.param(
        [
            {
                "sequencing": [
                    {"memory_was_set": REASON},
                    ORDER_CALL,
                    {"memory_was_cleared": REASON},
                    {"skill_completed": {"skill_id": CR}},
                ]
            },
            {"sequencing": [ORDER_CALL, {"memory_was_set": REASON}]},
        ],
        [
            user(),
            order,
            setm(REASON, "x"),
            bot("a"),
            order,
            user(),
            clear(REASON),
            skill("completed", CR),
        ],
        id="sequencing",
    ),
    pytest.param(ALL_KINDS_SCENARIO, HAPPY, id="all-kinds-happy"),
    pytest.param(ALL_KINDS_SCENARIO, UNHAPPY, id="all-kinds-unhappy"),
]


@pytest.mark.parametrize(("assertions", "events"), CHECKPOINT_CASES)
def test_checkpoint_and_restore_mid_conversation_equals_an_uninterrupted_run(
    assertions: list[dict[str, Any]], events: list[Ev]
) -> None:
    whole = judge(assertions, events)
    for split in range(1, len(events)):
        result, decisions = checkpointed(assertions, events, split)
        assert result.assertions == whole.results, f"checkpoint after {split} events"
        assert sorted(decisions, key=lambda d: d.index) == sorted(
            whole.decisions, key=lambda d: d.index
        ), f"checkpoint after {split} events"


@pytest.mark.parametrize(("assertions", "events"), CHECKPOINT_CASES)
def test_checkpoint_survives_a_second_checkpoint(
    assertions: list[dict[str, Any]], events: list[Ev]
) -> None:
    whole = judge(assertions, events)
    third = len(events) // 3 or 1
    scen = scenario(*assertions)
    evaluator = ms.Evaluator([scen], reorder_window=IN_ORDER)
    seq = 10
    for cut in (third, 2 * third, len(events)):
        for ev in events[seq - 10 : cut]:
            evaluator.push_line(ev.line("c", seq))
            seq += 1
        if cut < len(events):
            data = msgspec.json.encode(evaluator.conversation_state("c"))
            evaluator = ms.Evaluator([scen], reorder_window=IN_ORDER)
            evaluator.restore_conversation(msgspec.json.decode(data, type=ms.ConversationState))
    evaluator.finish_all()
    [result] = evaluator.results()
    assert result.assertions == whole.results


def test_checkpoint_is_plain_json() -> None:
    evaluator = ms.Evaluator([scenario(*ALL_KINDS_SCENARIO)])
    for i, ev in enumerate(HAPPY[:5]):
        evaluator.push_line(ev.line("c", i))
    data = msgspec.json.encode(evaluator.conversation_state("c"))
    assert json.loads(data)["conversation_id"] == "c"
