"""Skill and ordered-block checks: `skill_*` and `ordered_block_*` assertions.

Reference ("Skill", "Ordered block") and docs/semantics.md: a check passes at the
first matching event and otherwise fails at the end; `step_id` narrows
cancel/interrupt/resume (and block completed); `block_id` must match; a skill
check never matches an ordered-block event and the other way around.
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
    judge,
    setm,
    skill,
    tool,
    user,
)

SKILL_EVENTS = ["activated", "completed", "cancelled", "interrupted", "resumed"]
BLOCK_EVENTS = ["entered", "completed", "cancelled", "interrupted", "resumed"]
STEPPED_SKILL = ["cancelled", "interrupted", "resumed"]
STEPPED_BLOCK = ["completed", "cancelled", "interrupted", "resumed"]

# The block event that looks most like each skill event (same skill id).
BLOCK_TWIN = {
    "activated": "entered",
    "completed": "completed",
    "cancelled": "cancelled",
    "interrupted": "interrupted",
    "resumed": "resumed",
}


def skill_check(event: str, skill_id: str = "card_replace", **extra: Any) -> dict[str, Any]:
    return {f"skill_{event}": {"skill_id": skill_id, **extra}}


def block_check(
    event: str, skill_id: str = "card_replace", block_id: str = "main", **extra: Any
) -> dict[str, Any]:
    return {f"ordered_block_{event}": {"skill_id": skill_id, "block_id": block_id, **extra}}


# --------------------------------------------------------------------------
# Reference examples on a realistic conversation
# --------------------------------------------------------------------------


def card_replace_conversation() -> list[Ev]:
    return [
        user("my card is damaged"),
        skill("activated", "card_replace"),
        block("entered", "card_replace", "main"),
        setm("card_replace.replacement_reason", "damaged"),
        tool("order_replacement", skill_id="card_replace", args={"shipping": "standard"}),
        block("completed", "card_replace", "main", "confirm"),
        bot("Your replacement was ordered.", utter="utter_replacement_ordered"),
        skill("completed", "card_replace"),
    ]


@pytest.mark.parametrize(
    ("assertion", "decider"),
    [
        (skill_check("activated"), 1),
        (skill_check("completed"), 7),
        (block_check("entered"), 2),
    ],
    ids=["skill_activated", "skill_completed", "ordered_block_entered"],
)
def test_reference_examples_pass_at_their_event(assertion: dict[str, Any], decider: int) -> None:
    events = card_replace_conversation()
    events[decider] = D(events[decider])
    assert_outcome(assertion, events, "passed")


# --------------------------------------------------------------------------
# Skill checks
# --------------------------------------------------------------------------


@pytest.mark.parametrize("event", SKILL_EVENTS)
def test_skill_check_passes_at_the_first_matching_event(event: str) -> None:
    assert_outcome(
        skill_check(event),
        [
            user(),
            skill("activated", "other"),
            D(skill(event, "card_replace")),
            skill(event, "card_replace"),
            user(),
        ],
        "passed",
    )


@pytest.mark.parametrize("event", SKILL_EVENTS)
def test_skill_check_fails_at_the_end_without_a_matching_event(event: str) -> None:
    judged = assert_outcome(skill_check(event), [user(), bot("hi"), user()], "failed")
    assert "card_replace" in judged.reason()


@pytest.mark.parametrize("event", SKILL_EVENTS)
def test_skill_check_ignores_another_skills_event(event: str) -> None:
    assert_outcome(
        skill_check(event),
        [user(), skill(event, "card_replace_v2"), skill(event, "card")],
        "failed",
    )


@pytest.mark.parametrize("event", SKILL_EVENTS)
def test_skill_check_is_not_satisfied_by_an_ordered_block_event(event: str) -> None:
    twin = BLOCK_TWIN[event]
    assert_outcome(
        skill_check(event),
        [
            user(),
            block(twin, "card_replace", "main"),
            block(twin, "card_replace", "card_replace"),
        ],
        "failed",
    )


@pytest.mark.parametrize("event", SKILL_EVENTS)
def test_skill_check_is_not_satisfied_by_another_lifecycle_event(event: str) -> None:
    others = [skill(e, "card_replace") for e in SKILL_EVENTS if e != event]
    assert_outcome(skill_check(event), [user(), *others], "failed")


@pytest.mark.parametrize("event", STEPPED_SKILL)
def test_skill_step_id_passes_on_the_recorded_step(event: str) -> None:
    assert_outcome(
        skill_check(event, step_id="collect_reason"),
        [
            user(),
            skill(event, "card_replace", "autonomous"),
            D(skill(event, "card_replace", "collect_reason")),
        ],
        "passed",
    )


@pytest.mark.parametrize("event", STEPPED_SKILL)
def test_skill_step_id_autonomous_matches_prose(event: str) -> None:
    assert_outcome(
        skill_check(event, step_id="autonomous"),
        [
            user(),
            skill(event, "card_replace", "confirm"),
            D(skill(event, "card_replace", "autonomous")),
        ],
        "passed",
    )


@pytest.mark.parametrize("event", STEPPED_SKILL)
def test_skill_step_id_fails_when_only_other_steps_are_recorded(event: str) -> None:
    judged = assert_outcome(
        skill_check(event, step_id="confirm"),
        [
            user(),
            skill(event, "card_replace", "autonomous"),
            skill(event, "card_replace", "Confirm"),
        ],
        "failed",
    )
    assert "confirm" in judged.reason()


@pytest.mark.parametrize("event", STEPPED_SKILL)
def test_skill_step_id_is_not_satisfied_by_a_block_event_on_that_step(event: str) -> None:
    assert_outcome(
        skill_check(event, step_id="confirm"),
        [
            user(),
            block(event, "card_replace", "main", "confirm"),
        ],
        "failed",
    )


# --------------------------------------------------------------------------
# Ordered-block checks
# --------------------------------------------------------------------------


@pytest.mark.parametrize("event", BLOCK_EVENTS)
def test_block_check_passes_at_the_first_matching_event(event: str) -> None:
    assert_outcome(
        block_check(event),
        [
            user(),
            skill("activated", "card_replace"),
            D(block(event, "card_replace", "main")),
            block(event, "card_replace", "main"),
        ],
        "passed",
    )


@pytest.mark.parametrize("event", BLOCK_EVENTS)
def test_block_check_fails_at_the_end_without_a_matching_event(event: str) -> None:
    judged = assert_outcome(
        block_check(event), [user(), skill("activated", "card_replace")], "failed"
    )
    assert "main" in judged.reason()


@pytest.mark.parametrize("event", BLOCK_EVENTS)
def test_block_check_needs_the_same_block_id(event: str) -> None:
    assert_outcome(
        block_check(event, block_id="main"),
        [
            user(),
            block(event, "card_replace", "submit"),
            block(event, "card_replace", "main_2"),
        ],
        "failed",
    )


@pytest.mark.parametrize("event", BLOCK_EVENTS)
def test_block_check_needs_the_same_skill_id(event: str) -> None:
    assert_outcome(
        block_check(event, skill_id="card_replace"),
        [
            user(),
            block(event, "card_lock", "main"),
        ],
        "failed",
    )


@pytest.mark.parametrize("event", BLOCK_EVENTS)
def test_block_check_is_not_satisfied_by_a_skill_event(event: str) -> None:
    twin = {v: k for k, v in BLOCK_TWIN.items()}[event]
    assert_outcome(block_check(event), [user(), skill(twin, "card_replace")], "failed")


@pytest.mark.parametrize("event", BLOCK_EVENTS)
def test_block_check_is_not_satisfied_by_another_block_lifecycle_event(event: str) -> None:
    others = [block(e, "card_replace", "main") for e in BLOCK_EVENTS if e != event]
    assert_outcome(block_check(event), [user(), *others], "failed")


@pytest.mark.parametrize("event", STEPPED_BLOCK)
def test_block_step_id_passes_on_the_recorded_step(event: str) -> None:
    assert_outcome(
        block_check(event, step_id="confirm"),
        [
            user(),
            block(event, "card_replace", "main", "collect"),
            D(block(event, "card_replace", "main", "confirm")),
        ],
        "passed",
    )


@pytest.mark.parametrize("event", STEPPED_BLOCK)
def test_block_step_id_fails_when_only_other_steps_are_recorded(event: str) -> None:
    assert_outcome(
        block_check(event, step_id="confirm"),
        [
            user(),
            block(event, "card_replace", "main", "collect"),
            block(event, "card_replace", "submit", "confirm"),
        ],
        "failed",
    )


@pytest.mark.parametrize("event", STEPPED_BLOCK)
def test_block_step_id_is_not_satisfied_by_a_skill_event_on_that_step(event: str) -> None:
    twin = {v: k for k, v in BLOCK_TWIN.items()}[event]
    assert_outcome(
        block_check(event, step_id="confirm"),
        [
            user(),
            skill(twin, "card_replace", *(["confirm"] if twin in STEPPED_SKILL else [])),
        ],
        "failed",
    )


def test_several_lifecycle_checks_are_judged_independently() -> None:
    judged = judge(
        [skill_check("activated"), block_check("entered"), skill_check("cancelled")],
        [
            user(),
            skill("activated", "card_replace"),
            block("entered", "card_replace", "main"),
            skill("completed", "card_replace"),
        ],
    )
    assert [judged.outcome(i) for i in range(3)] == [
        ("passed", 11),
        ("passed", 12),
        ("failed", None),
    ]
