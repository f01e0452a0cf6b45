"""`tools_within_one_turn`: every listed call ran during the same user turn.

Reference ("tools_within_one_turn") and docs/semantics.md: a turn starts at each
real user message (test_rasa_parity.py has the rule), events before the first
one are turn 0; only counted runs are considered (framework tools such as
`complete_skill`, `set_fields`, `listen`, `hangup` are not counted, whatever
their source; `search_knowledge` and `cannot_help` are); each listed call takes a
different run (a maximum matching, not greedy first fit); `ordered: true`
needs the assigned runs in listed order; `allow_extra_calls: false` needs no
counted run beyond the assigned ones. Decided: with extras allowed at the run
completing it; without, at the next `user` event (None when the satisfying
turn is the last one); otherwise fails at the end.
"""

from __future__ import annotations

from typing import Any

import pytest

from _harness import (
    D,
    Ev,
    assert_outcome,
    bot,
    call,
    end,
    judge,
    setm,
    skill,
    tool,
    user,
    within,
)

BAL, ORD = call("check_balance"), call("order_replacement")
bal, order = tool("check_balance"), tool("order_replacement")

REFERENCE = within(BAL, ORD, extras=False, ordered=True)

# docs/semantics.md "Framework tools": recognised by name, whatever their source.
LIFECYCLE = [
    "activate",
    "complete",
    "complete_skill",
    "cancel",
    "set_fields",
    "correct",
    "resolve_tool_confirmation",
    "listen",
    "hangup",
]
COUNTED_MANTLE = ["search_knowledge", "cannot_help"]


# --------------------------------------------------------------------------
# Reference example
# --------------------------------------------------------------------------


def test_reference_example_passes_when_the_satisfying_turn_ends() -> None:
    assert_outcome(
        REFERENCE,
        [
            user("my card is damaged"),
            skill("activated", "card_replace"),
            bot("Let me check."),
            user("ok"),
            tool("check_balance", skill_id="card_replace", args={"account": "a-1"}),
            setm("card_replace.fee", 0),
            tool("order_replacement", skill_id="card_replace", args={"shipping": "standard"}),
            tool("set_fields", skill_id="card_replace"),
            bot("Your replacement was ordered.", utter="utter_replacement_ordered"),
            tool("complete_skill", skill_id="card_replace"),
            skill("completed", "card_replace"),
            D(user("thanks")),
            bot("You're welcome."),
            tool("hangup"),
        ],
        "passed",
    )


def test_reference_example_in_the_last_turn_passes_at_the_end() -> None:
    assert_outcome(REFERENCE, [user(), bal, bot("..."), order, tool("listen")], "passed")


def test_reference_example_fails_when_the_calls_span_two_turns() -> None:
    judged = assert_outcome(REFERENCE, [user(), bal, bot("wait"), user("ok"), order], "failed")
    assert "check_balance" in judged.reason() and "order_replacement" in judged.reason()


# --------------------------------------------------------------------------
# When it is decided
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extras", "events"),
    [
        pytest.param(True, [user(), bal, D(order), user(), order], id="extras-at-completing-run"),
        pytest.param(
            True,
            [user(), order, bot("x"), D(bal), tool("other")],
            id="extras-at-completing-run-any-order",
        ),
        pytest.param(
            False, [user(), bal, order, bot("done"), D(user()), bal], id="no-extras-at-next-user"
        ),
        pytest.param(False, [user(), bal, order], id="no-extras-last-turn-at-end"),
        pytest.param(
            False, [user(), bal, user(), bal, order, D(user()), user()], id="no-extras-second-turn"
        ),
        pytest.param(True, [bal, D(order), user()], id="turn-0-extras"),
        pytest.param(False, [bal, order, D(user())], id="turn-0-no-extras-at-first-user"),
        pytest.param(False, [bal, order], id="turn-0-only-turn"),
    ],
)
def test_passes_at_the_decisive_event(extras: bool, events: list[Ev]) -> None:
    assert_outcome(within(BAL, ORD, extras=extras), events, "passed")


def test_no_extras_passes_at_the_end_when_session_ended_closes_the_satisfying_turn() -> None:
    assert_outcome(within(BAL, ORD, extras=False), [user(), bal, order, end()], "passed")


def test_turn_0_runs_do_not_join_turn_1() -> None:
    assert_outcome(within(BAL, ORD, extras=True), [bal, user(), order], "failed")


def test_passes_in_a_later_turn_after_an_incomplete_one() -> None:
    assert_outcome(
        within(BAL, ORD, extras=True),
        [
            user(),
            bal,
            bal,
            user(),
            order,
            user(),
            bal,
            D(order),
        ],
        "passed",
    )


# --------------------------------------------------------------------------
# ordered
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ordered", "extras", "verdict", "events"),
    [
        pytest.param(True, False, "failed", [user(), order, bal, user()], id="ordered-reversed"),
        pytest.param(
            False, False, "passed", [user(), order, bal, D(user())], id="unordered-reversed"
        ),
        pytest.param(
            None, False, "passed", [user(), order, bal, D(user())], id="default-is-unordered"
        ),
        pytest.param(
            True,
            True,
            "passed",
            [user(), order, bal, D(order)],
            id="ordered-later-run-completes-order",
        ),
        pytest.param(
            True, True, "failed", [user(), order, bal, user(), order], id="ordered-not-across-turns"
        ),
        pytest.param(
            True,
            False,
            "failed",
            [user(), order, bal, order, user()],
            id="ordered-no-extras-order-right-but-extra-run",
        ),
    ],
)
def test_ordered(ordered: bool | None, extras: bool, verdict: str, events: list[Ev]) -> None:
    assert_outcome(within(BAL, ORD, extras=extras, ordered=ordered), events, verdict)


# --------------------------------------------------------------------------
# allow_extra_calls
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extras", "verdict", "events"),
    [
        pytest.param(
            False,
            "failed",
            [user(), bal, tool("get_card"), order, user()],
            id="extra-between-fails",
        ),
        pytest.param(
            True,
            "passed",
            [user(), bal, tool("get_card"), D(order), user()],
            id="extra-between-allowed",
        ),
        pytest.param(
            False,
            "failed",
            [user(), bal, order, tool("get_card")],
            id="extra-after-completion-fails",
        ),
        pytest.param(
            False, "failed", [user(), bal, order, order, user()], id="duplicate-run-is-extra"
        ),
        pytest.param(
            True, "passed", [user(), bal, D(order), order, user()], id="duplicate-run-allowed"
        ),
        pytest.param(
            False,
            "failed",
            [user(), bal, order, tool("order_replacement", is_error=True)],
            id="failed-run-is-extra",
        ),
        pytest.param(
            False,
            "passed",
            [user(), bal, order, D(user()), tool("get_card"), user()],
            id="extra-in-another-turn-is-fine",
        ),
        pytest.param(
            False,
            "passed",
            [user(), bal, order, tool("x"), user(), order, bal, D(user())],
            id="broken-turn-then-clean-turn",
        ),
    ],
)
def test_allow_extra_calls(extras: bool, verdict: str, events: list[Ev]) -> None:
    assert_outcome(within(BAL, ORD, extras=extras), events, verdict)


def test_no_extras_fail_reason_names_the_extra_call() -> None:
    judged = assert_outcome(
        within(BAL, ORD, extras=False), [user(), bal, tool("get_card"), order], "failed"
    )
    assert "get_card" in judged.reason()


# --------------------------------------------------------------------------
# Which runs count
# --------------------------------------------------------------------------


@pytest.mark.parametrize("name", LIFECYCLE)
def test_lifecycle_tools_are_not_extra_calls(name: str) -> None:
    assert_outcome(
        within(BAL, ORD, extras=False),
        [
            user(),
            tool(name),
            bal,
            tool(name, skill_id="card_replace"),
            order,
            tool(name),
            D(user()),
        ],
        "passed",
    )


@pytest.mark.parametrize("name", LIFECYCLE)
def test_lifecycle_tools_do_not_satisfy_a_listed_call(name: str) -> None:
    assert_outcome(
        within(call(name), BAL, extras=True),
        [
            user(),
            tool(name),
            bal,
            tool(name),
            user(),
            bal,
            tool(name),
        ],
        "failed",
    )


@pytest.mark.parametrize("name", LIFECYCLE)
def test_lifecycle_tools_do_not_break_ordered(name: str) -> None:
    assert_outcome(
        within(BAL, ORD, extras=False, ordered=True),
        [
            user(),
            bal,
            tool(name),
            order,
            D(user()),
        ],
        "passed",
    )


@pytest.mark.parametrize("name", COUNTED_MANTLE)
def test_search_knowledge_and_cannot_help_are_extra_calls(name: str) -> None:
    assert_outcome(
        within(BAL, ORD, extras=False), [user(), bal, tool(name), order, user()], "failed"
    )


@pytest.mark.parametrize("name", COUNTED_MANTLE)
def test_search_knowledge_and_cannot_help_satisfy_a_listed_call(name: str) -> None:
    assert_outcome(
        within(call(name), BAL, extras=False),
        [
            user(),
            tool(name),
            bal,
            D(user()),
        ],
        "passed",
    )


@pytest.mark.parametrize("name", LIFECYCLE)
def test_a_framework_tool_name_is_not_counted_whatever_its_source(name: str) -> None:
    assert_outcome(
        within(BAL, ORD, extras=False),
        [
            user(),
            bal,
            tool(name, source="mcp", server="forms"),
            order,
            D(user()),
        ],
        "passed",
    )


@pytest.mark.parametrize("name", LIFECYCLE)
def test_a_framework_tool_name_never_satisfies_a_listed_call_whatever_its_source(name: str) -> None:
    assert_outcome(
        within(call(name, "mcp", mcp_server="forms"), BAL, extras=True),
        [
            user(),
            tool(name, source="mcp", server="forms"),
            bal,
            user(),
        ],
        "failed",
    )


@pytest.mark.parametrize("name", LIFECYCLE)
def test_a_standalone_tool_executed_still_sees_framework_tools(name: str) -> None:
    assert_outcome(
        {"tool_executed": {"tool_name": name, "source": "local"}},
        [
            user(),
            D(tool(name)),
        ],
        "passed",
    )


def test_listed_calls_match_with_every_tool_executed_field() -> None:
    calls = (
        call(
            "lookup",
            "mcp",
            mcp_server="banking",
            skill_id="card_replace",
            arguments={"id": 1},
            is_error=False,
        ),
        BAL,
    )
    near_misses = [
        tool("lookup", source="mcp", server="cards", skill_id="card_replace", args={"id": 1}),
        tool("lookup", source="mcp", server="banking", skill_id="card_lock", args={"id": 1}),
        tool("lookup", source="mcp", server="banking", skill_id="card_replace", args={"id": "1"}),
        tool(
            "lookup",
            source="mcp",
            server="banking",
            skill_id="card_replace",
            args={"id": 1},
            is_error=True,
        ),
        tool("lookup", skill_id="card_replace", args={"id": 1}),
    ]
    assert_outcome(within(*calls, extras=True), [user(), bal, *near_misses], "failed")
    good = tool(
        "lookup",
        source="mcp",
        server="banking",
        skill_id="card_replace",
        args={"id": 1, "verbose": True},
    )
    assert_outcome(within(*calls, extras=True), [user(), bal, *near_misses, D(good)], "passed")


# --------------------------------------------------------------------------
# One run per listed call: a maximum matching
# --------------------------------------------------------------------------

ANY_LOOKUP = call("lookup")
LOOKUP_1 = call("lookup", arguments={"id": 1})


def lookup(id_: int) -> Ev:
    return tool("lookup", args={"id": id_})


@pytest.mark.parametrize(
    ("calls", "ordered", "extras", "verdict", "events"),
    [
        # The first run could satisfy both calls; first-fit gives it to ANY_LOOKUP
        # (listed first) and then finds nothing for LOOKUP_1. A maximum matching
        # gives run 1 to LOOKUP_1 and run 2 to ANY_LOOKUP.
        pytest.param(
            (ANY_LOOKUP, LOOKUP_1),
            False,
            True,
            "passed",
            [user(), lookup(1), D(lookup(2))],
            id="greedy-would-fail-extras",
        ),
        pytest.param(
            (ANY_LOOKUP, LOOKUP_1),
            False,
            False,
            "passed",
            [user(), lookup(1), lookup(2), D(user())],
            id="greedy-would-fail-no-extras",
        ),
        pytest.param(
            (ANY_LOOKUP, LOOKUP_1),
            False,
            False,
            "passed",
            [user(), lookup(1), lookup(2)],
            id="greedy-would-fail-last-turn",
        ),
        pytest.param(
            (LOOKUP_1, ANY_LOOKUP),
            False,
            True,
            "passed",
            [user(), lookup(2), D(lookup(1))],
            id="specific-call-runs-last",
        ),
        pytest.param(
            (ANY_LOOKUP, LOOKUP_1),
            False,
            True,
            "failed",
            [user(), lookup(1)],
            id="one-run-cannot-serve-two-calls",
        ),
        pytest.param(
            (ANY_LOOKUP, LOOKUP_1),
            False,
            True,
            "failed",
            [user(), lookup(2), lookup(3)],
            id="specific-call-never-matched",
        ),
        pytest.param(
            (ANY_LOOKUP, ANY_LOOKUP),
            False,
            True,
            "failed",
            [user(), lookup(1), user(), lookup(1)],
            id="same-call-twice-needs-two-runs-in-one-turn",
        ),
        pytest.param(
            (ANY_LOOKUP, ANY_LOOKUP),
            False,
            False,
            "passed",
            [user(), lookup(1), lookup(1), D(user())],
            id="same-call-twice-two-runs",
        ),
        pytest.param(
            (ANY_LOOKUP, ANY_LOOKUP),
            False,
            False,
            "failed",
            [user(), lookup(1), lookup(1), lookup(1), user()],
            id="same-call-twice-three-runs-no-extras",
        ),
        # ordered: the specific call must come after the generic one.
        pytest.param(
            (ANY_LOOKUP, LOOKUP_1),
            True,
            True,
            "failed",
            [user(), lookup(1), user()],
            id="ordered-one-run",
        ),
        pytest.param(
            (ANY_LOOKUP, LOOKUP_1),
            True,
            True,
            "failed",
            [user(), lookup(1), lookup(2)],
            id="ordered-specific-run-first",
        ),
        pytest.param(
            (ANY_LOOKUP, LOOKUP_1),
            True,
            True,
            "passed",
            [user(), lookup(1), lookup(2), D(lookup(1))],
            id="ordered-specific-run-again",
        ),
        pytest.param(
            (ANY_LOOKUP, LOOKUP_1),
            True,
            False,
            "passed",
            [user(), lookup(2), lookup(1), D(user())],
            id="ordered-no-extras",
        ),
        pytest.param(
            (LOOKUP_1, ANY_LOOKUP),
            True,
            False,
            "passed",
            [user(), lookup(1), lookup(1), D(user())],
            id="ordered-both-runs-match-both",
        ),
    ],
)
def test_each_run_serves_one_listed_call(
    calls: tuple[dict[str, Any], ...], ordered: bool, extras: bool, verdict: str, events: list[Ev]
) -> None:
    assert_outcome(within(*calls, extras=extras, ordered=ordered), events, verdict)


def test_three_calls_need_an_augmenting_path() -> None:
    # Calls: A = lookup with id 1, B = lookup with kind x, C = any lookup.
    # Runs: r1(id 1, kind x), r2(id 1), r3(id 2).
    a = call("lookup", arguments={"id": 1})
    b = call("lookup", arguments={"kind": "x"})
    c = call("lookup")
    runs = [
        tool("lookup", args={"id": 1, "kind": "x"}),
        tool("lookup", args={"id": 1}),
        tool("lookup", args={"id": 2}),
    ]
    # Only assignment: B=r1, A=r2, C=r3. First fit in listed order takes r1 for A.
    assert_outcome(within(a, b, c, extras=False), [user(), *runs, D(user())], "passed")


def test_several_tools_within_one_turn_checks_are_independent() -> None:
    judged = judge(
        [within(BAL, ORD, extras=True), within(BAL, ORD, extras=False)],
        [
            user(),
            bal,
            order,
            tool("x"),
            user(),
        ],
    )
    assert [judged.outcome(i) for i in range(2)] == [("passed", 12), ("failed", None)]
