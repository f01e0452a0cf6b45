"""`sequencing`: each step matches an event strictly after the previous step's event.

Reference ("Sequencing") and docs/semantics.md: other events may sit between
steps; each step is matched at the earliest possible event; steps are
skill, ordered-block and tool_executed checks in their usual
shape and memory_was_set / memory_was_cleared with the key as a string.
Passes at the event matching the last step, else fails at the end.
"""

from __future__ import annotations

from typing import Any

import pytest

from _harness import (
    D,
    Ev,
    assert_outcome,
    block,
    bot,
    clear,
    judge,
    setm,
    skill,
    tool,
    user,
)

REASON = "card_replace.replacement_reason"


def seq(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"sequencing": list(steps)}


SET_REASON = {"memory_was_set": REASON}
CLEARED_REASON = {"memory_was_cleared": REASON}
ORDER = {"tool_executed": {"tool_name": "order_replacement", "source": "local"}}
ACTIVATED = {"skill_activated": {"skill_id": "card_replace"}}
COMPLETED = {"skill_completed": {"skill_id": "card_replace"}}
ENTERED = {"ordered_block_entered": {"skill_id": "card_replace", "block_id": "main"}}
SKILL_ORDER = {
    "tool_executed": {
        "tool_name": "order_replacement",
        "source": "local",
        "skill_id": "card_replace",
    }
}

REFERENCE = seq(SET_REASON, ORDER, COMPLETED)

set_reason = setm(REASON, "damaged")
order = tool("order_replacement", skill_id="card_replace", args={"shipping": "standard"})
activated, completed = skill("activated", "card_replace"), skill("completed", "card_replace")


# --------------------------------------------------------------------------
# Reference example
# --------------------------------------------------------------------------


def test_reference_example_passes_at_the_last_step() -> None:
    assert_outcome(
        REFERENCE,
        [
            user("my card is damaged"),
            activated,
            block("entered", "card_replace", "main"),
            set_reason,
            bot("Ordering now."),
            order,
            bot("Your replacement was ordered."),
            D(completed),
            user("thanks"),
        ],
        "passed",
    )


def test_reference_example_fails_when_the_tool_ran_before_the_memory_write() -> None:
    judged = assert_outcome(REFERENCE, [user(), activated, order, set_reason, completed], "failed")
    assert "order_replacement" in judged.reason()


# --------------------------------------------------------------------------
# Order
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("steps", "events", "verdict"),
    [
        pytest.param(
            (ACTIVATED, COMPLETED),
            [user(), activated, bot("a"), user(), D(completed)],
            "passed",
            id="other-events-between",
        ),
        pytest.param(
            (ACTIVATED, COMPLETED), [user(), completed, activated], "failed", id="wrong-order"
        ),
        pytest.param(
            (ACTIVATED, COMPLETED),
            [user(), completed, activated, D(completed)],
            "passed",
            id="event-before-its-step-does-not-count",
        ),
        pytest.param(
            (ORDER, ORDER), [user(), order], "failed", id="one-event-cannot-serve-two-steps"
        ),
        pytest.param(
            (ORDER, ORDER),
            [user(), order, bot("x"), D(order)],
            "passed",
            id="same-step-twice-needs-two-events",
        ),
        pytest.param(
            (ACTIVATED, COMPLETED),
            [user(), activated, activated, D(completed), completed],
            "passed",
            id="decided-at-the-first-match-of-the-last-step",
        ),
        pytest.param(
            (ACTIVATED, COMPLETED, ACTIVATED),
            [user(), activated, completed, completed, D(activated)],
            "passed",
            id="revisited-step",
        ),
        pytest.param((ACTIVATED,), [user(), D(activated), completed], "passed", id="single-step"),
        pytest.param(
            (SET_REASON, ORDER, COMPLETED),
            [user(), order, set_reason, completed, order, D(completed)],
            "passed",
            id="chain-found-across-interleaving",
        ),
        pytest.param(
            (SET_REASON, ORDER, COMPLETED),
            [user(), order, completed, set_reason, completed],
            "failed",
            id="middle-step-missing-after-the-first",
        ),
    ],
)
def test_steps_match_strictly_after_the_previous_step(
    steps: tuple[dict[str, Any], ...], events: list[Ev], verdict: str
) -> None:
    assert_outcome(seq(*steps), events, verdict)


def test_steps_match_at_the_earliest_event_so_it_passes_as_soon_as_possible() -> None:
    # Step 1 at the first write, step 2 at the first order after it, step 3 at
    # the first write after that - not at a later chain.
    assert_outcome(
        seq(SET_REASON, ORDER, SET_REASON),
        [
            user(),
            set_reason,
            set_reason,
            order,
            D(set_reason),
            order,
            set_reason,
        ],
        "passed",
    )


# --------------------------------------------------------------------------
# Step kinds
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("step", "hit", "misses"),
    [
        pytest.param(
            SET_REASON,
            setm(REASON, 0),
            [clear(REASON), setm(REASON + "_x", 1)],
            id="memory_was_set-any-value",
        ),
        pytest.param(
            CLEARED_REASON,
            clear(REASON),
            [setm(REASON, ""), clear(REASON + "_x")],
            id="memory_was_cleared",
        ),
        pytest.param(
            ORDER,
            order,
            [tool("order_replacement", source="mcp", server="banking"), tool("check_balance")],
            id="tool_executed",
        ),
        pytest.param(
            {
                "tool_executed": {
                    "tool_name": "order_replacement",
                    "source": "local",
                    "arguments": {"shipping": "standard"},
                    "is_error": False,
                }
            },
            order,
            [
                tool("order_replacement", args={"shipping": "express"}),
                tool("order_replacement", args={"shipping": "standard"}, is_error=True),
            ],
            id="tool_executed-with-fields",
        ),
        pytest.param(
            {"skill_cancelled": {"skill_id": "card_replace", "step_id": "confirm"}},
            skill("cancelled", "card_replace", "confirm"),
            [
                skill("cancelled", "card_replace", "autonomous"),
                block("cancelled", "card_replace", "main", "confirm"),
            ],
            id="skill-with-step",
        ),
        pytest.param(
            ENTERED,
            block("entered", "card_replace", "main"),
            [block("entered", "card_replace", "submit"), activated],
            id="ordered_block_entered",
        ),
        pytest.param(
            {"ordered_block_completed": {"skill_id": "card_replace", "block_id": "main"}},
            block("completed", "card_replace", "main"),
            [skill("completed", "card_replace"), block("completed", "card_lock", "main")],
            id="ordered_block_completed",
        ),
        pytest.param(
            SKILL_ORDER,
            tool("order_replacement", skill_id="card_replace"),
            [tool("order_replacement"), tool("order_replacement", skill_id="card_lock")],
            id="tool_executed-skill_id",
        ),
    ],
)
def test_each_step_kind_matches_like_its_check(
    step: dict[str, Any], hit: Ev, misses: list[Ev]
) -> None:
    events = [user(), activated, *misses]
    assert_outcome(seq(ACTIVATED, step), events, "failed")
    assert_outcome(seq(ACTIVATED, step), [*events, D(hit)], "passed")


def test_memory_step_after_a_clear_needs_a_new_write() -> None:
    assert_outcome(
        seq(SET_REASON, CLEARED_REASON, SET_REASON),
        [
            user(),
            set_reason,
            clear(REASON),
            bot("reset"),
            D(setm(REASON, "lost")),
        ],
        "passed",
    )


def test_fail_reason_names_the_first_missing_step() -> None:
    judged = assert_outcome(
        seq(ACTIVATED, SKILL_ORDER, COMPLETED), [user(), activated, completed], "failed"
    )
    assert "step 2 of 3" in judged.reason() and "order_replacement" in judged.reason()


def test_several_sequencing_checks_are_independent() -> None:
    judged = judge(
        [seq(ACTIVATED, COMPLETED), seq(COMPLETED, ACTIVATED)], [user(), activated, completed]
    )
    assert [judged.outcome(i) for i in range(2)] == [("passed", 12), ("failed", None)]
