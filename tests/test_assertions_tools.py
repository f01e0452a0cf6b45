"""`tool_executed`: one recorded tool run matching every field set.

Reference ("Tools") and docs/semantics.md "tool_executed": tool_name and source
must equal; with source mcp, mcp_server too; skill_id, is_error and each
listed argument, when given, must equal (typed); arguments not listed are
ignored and a listed key missing from the call does not match. Lifecycle
tools count here. Passes at the first matching run, else fails at the end.
"""

from __future__ import annotations

from typing import Any

import pytest

from _harness import (
    TYPED_VALUES,
    D,
    assert_outcome,
    bot,
    judge,
    setm,
    skill,
    tool,
    user,
)


def executed(
    name: str = "order_replacement", source: str = "local", **fields: Any
) -> dict[str, Any]:
    return {"tool_executed": {"tool_name": name, "source": source, **fields}}


REFERENCE_LOCAL = executed(skill_id="card_replace", arguments={"shipping": "standard"})
REFERENCE_MCP = executed("submit_transfer", "mcp", mcp_server="banking")


# --------------------------------------------------------------------------
# Reference examples
# --------------------------------------------------------------------------


def test_reference_examples_on_a_realistic_conversation() -> None:
    judged = judge(
        [REFERENCE_LOCAL, REFERENCE_MCP],
        [
            user("my card is damaged"),  # 10
            skill("activated", "card_replace"),  # 11
            tool("check_balance", skill_id="card_replace", args={"account": "a-1"}),  # 12
            tool("order_replacement", skill_id="card_replace", args={"shipping": "express"}),  # 13
            bot("Express costs extra, standard is free. Which one?"),  # 14
            user("standard please"),  # 15
            tool(
                "order_replacement",
                skill_id="card_replace",
                args={"shipping": "standard", "card_id": "c-7"},
                result={"ok": True},
            ),  # 16
            tool("submit_transfer", source="mcp", server="banking", args={"amount": 10}),  # 17
            skill("completed", "card_replace"),  # 18
        ],
    )
    assert [judged.outcome(i) for i in range(2)] == [("passed", 16), ("passed", 17)]


# --------------------------------------------------------------------------
# Field by field
# --------------------------------------------------------------------------

CASES = [
    # (assertion, run, matches?)
    pytest.param(executed(), tool("order_replacement"), True, id="name-and-source"),
    pytest.param(executed(), tool("order_replacements"), False, id="other-name"),
    pytest.param(executed(), tool("Order_replacement"), False, id="name-case"),
    pytest.param(
        executed(),
        tool("order_replacement", source="mcp", server="banking"),
        False,
        id="local-check-vs-mcp-run",
    ),
    pytest.param(
        executed(source="mcp", mcp_server="banking"),
        tool("order_replacement"),
        False,
        id="mcp-check-vs-local-run",
    ),
    pytest.param(
        executed(source="mcp", mcp_server="banking"),
        tool("order_replacement", source="mcp", server="banking"),
        True,
        id="mcp-same-server",
    ),
    pytest.param(
        executed(source="mcp", mcp_server="banking"),
        tool("order_replacement", source="mcp", server="cards"),
        False,
        id="mcp-other-server",
    ),
    pytest.param(
        executed(source="mcp", mcp_server="banking"),
        tool("banking.order_replacement", source="mcp", server="banking"),
        False,
        id="mcp-server-not-part-of-name",
    ),
    pytest.param(
        executed(skill_id="card_replace"),
        tool("order_replacement", skill_id="card_replace"),
        True,
        id="same-skill",
    ),
    pytest.param(
        executed(skill_id="card_replace"),
        tool("order_replacement", skill_id="card_lock"),
        False,
        id="other-skill",
    ),
    pytest.param(
        executed(skill_id="card_replace"),
        tool("order_replacement", skill_id=None),
        False,
        id="skill-required-run-has-none",
    ),
    pytest.param(
        executed(),
        tool("order_replacement", skill_id="card_lock"),
        True,
        id="no-skill-matches-any-skill",
    ),
    pytest.param(
        executed(), tool("order_replacement", skill_id=None), True, id="no-skill-matches-none"
    ),
    pytest.param(
        executed(is_error=True),
        tool("order_replacement", is_error=True),
        True,
        id="is_error-true-failed-run",
    ),
    pytest.param(
        executed(is_error=True),
        tool("order_replacement", is_error=False),
        False,
        id="is_error-true-successful-run",
    ),
    pytest.param(
        executed(is_error=False),
        tool("order_replacement", is_error=False),
        True,
        id="is_error-false-successful-run",
    ),
    pytest.param(
        executed(is_error=False),
        tool("order_replacement", is_error=True),
        False,
        id="is_error-false-failed-run",
    ),
    pytest.param(
        executed(), tool("order_replacement", is_error=True), True, id="no-is_error-matches-failed"
    ),
    pytest.param(
        executed(arguments={"shipping": "standard"}),
        tool("order_replacement", args={"shipping": "standard", "card": "c-1"}),
        True,
        id="unlisted-arguments-ignored",
    ),
    pytest.param(
        executed(arguments={"shipping": "standard", "card": "c-1"}),
        tool("order_replacement", args={"shipping": "standard"}),
        False,
        id="listed-argument-missing",
    ),
    pytest.param(
        executed(arguments={"shipping": "standard"}),
        tool("order_replacement", args={"shipping": "express"}),
        False,
        id="argument-other-value",
    ),
    pytest.param(
        executed(arguments={}),
        tool("order_replacement", args={"a": 1}),
        True,
        id="empty-arguments-match-any",
    ),
    pytest.param(
        executed(arguments={"opts": {"fast": True, "n": 2}}),
        tool("order_replacement", args={"opts": {"n": 2, "fast": True}}),
        True,
        id="object-argument-any-key-order",
    ),
    pytest.param(
        executed(arguments={"opts": {"fast": True}}),
        tool("order_replacement", args={"opts": {"fast": True, "n": 2}}),
        False,
        id="object-argument-compared-whole",
    ),
    pytest.param(
        executed(arguments={"shipping": "standard"}, skill_id="card_replace", is_error=False),
        tool(
            "order_replacement",
            args={"shipping": "standard"},
            skill_id="card_replace",
            is_error=True,
        ),
        False,
        id="every-field-must-match",
    ),
]


@pytest.mark.parametrize(("assertion", "run", "matches"), CASES)
def test_a_run_matches_when_every_given_field_matches(
    assertion: dict[str, Any], run: Any, matches: bool
) -> None:
    events = [user(), run]
    if matches:
        events[1] = D(run)
    assert_outcome(assertion, events, "passed" if matches else "failed")


@pytest.mark.parametrize(("expected", "called", "equal"), TYPED_VALUES)
def test_argument_equality_is_typed(expected: Any, called: Any, equal: bool) -> None:
    run = tool("order_replacement", args={"x": called, "other": 1})
    events = [user(), D(run) if equal else run]
    assert_outcome(executed(arguments={"x": expected}), events, "passed" if equal else "failed")


def test_passes_at_the_first_matching_run_after_near_misses() -> None:
    assert_outcome(
        executed(skill_id="card_replace", arguments={"shipping": "standard"}),
        [
            user(),
            tool("order_replacement", args={"shipping": "standard"}),
            tool("order_replacement", skill_id="card_replace", args={"shipping": "express"}),
            setm("card_replace.shipping", "standard"),
            D(tool("order_replacement", skill_id="card_replace", args={"shipping": "standard"})),
            tool("order_replacement", skill_id="card_replace", args={"shipping": "standard"}),
        ],
        "passed",
    )


def test_fails_at_the_end_when_the_tool_never_ran() -> None:
    judged = assert_outcome(executed(), [user(), bot("sorry"), tool("check_balance")], "failed")
    assert "order_replacement" in judged.reason()


@pytest.mark.parametrize(
    "name", ["complete_skill", "set_fields", "listen", "hangup", "search_knowledge", "cannot_help"]
)
def test_lifecycle_tools_count_for_tool_executed(name: str) -> None:
    assert_outcome(executed(name), [user(), D(tool(name, skill_id="card_replace"))], "passed")


# --------------------------------------------------------------------------
# Reasons a person can act on
# --------------------------------------------------------------------------


def test_wrong_argument_reason_names_the_argument_the_value_seen_and_expected() -> None:
    judged = assert_outcome(
        executed(arguments={"shipping": "standard"}),
        [
            user(),
            tool("order_replacement", args={"shipping": "express"}),
        ],
        "failed",
    )
    for part in ("shipping", "express", "standard"):
        assert part in judged.reason(), judged.reason()


def test_wrong_argument_type_reason_shows_both_values() -> None:
    judged = assert_outcome(
        executed(arguments={"count": 5}),
        [
            user(),
            tool("order_replacement", args={"count": "5"}),
        ],
        "failed",
    )
    reason = judged.reason()
    assert "count" in reason and '"5"' in reason and "5" in reason.replace('"5"', ""), reason


def test_missing_argument_reason_names_the_argument() -> None:
    judged = assert_outcome(
        executed(arguments={"shipping": "standard"}),
        [
            user(),
            tool("order_replacement", args={"card": "c-1"}),
        ],
        "failed",
    )
    assert "shipping" in judged.reason()


def test_wrong_server_reason_names_both_servers() -> None:
    judged = assert_outcome(
        executed(source="mcp", mcp_server="banking"),
        [
            user(),
            tool("order_replacement", source="mcp", server="cards"),
        ],
        "failed",
    )
    assert "banking" in judged.reason() and "cards" in judged.reason()


def test_wrong_skill_reason_names_both_skills() -> None:
    judged = assert_outcome(
        executed(skill_id="card_replace"),
        [
            user(),
            tool("order_replacement", skill_id="card_lock"),
        ],
        "failed",
    )
    assert "card_replace" in judged.reason() and "card_lock" in judged.reason()
