"""Each verdict that differs from evaluate_agent's names the documented divergences it can
come from, in the direction each divergence goes (docs/semantics.md, "Divergences")."""

from __future__ import annotations

from typing import Any

import pytest

from mantle_stream.core.recorded import (
    ALL_FIELDS_ONE_MESSAGE,
    ANY_PAYLOAD,
    BUTTONS_AT_POSITIONS,
    COMPLETE_SKILL,
    MATCHING,
    MORE_BUTTONS,
    NO_TEXT,
    NULL_ARGUMENT,
    TYPED_VALUES,
    divergences,
)

from _harness import call, scenario, within

BUTTONS = [{"title": "Yes", "payload": "/yes"}, {"title": "No"}]
CASES: list[tuple[dict[str, Any], str, list[str]]] = [
    ({"memory_was_set": [{"name": "p.n", "value": 1}]}, "failed", [TYPED_VALUES]),
    ({"memory_was_set": [{"name": "p.n", "value": 1}]}, "passed", []),
    ({"memory_was_not_set": [{"name": "p.n", "value": True}]}, "passed", [TYPED_VALUES]),
    ({"memory_was_set": [{"name": "p.n", "value": "1"}]}, "failed", []),
    ({"memory_was_set": [{"name": "p.n"}]}, "failed", []),
    (
        {"bot_uttered": {"utter_name": "utter_a", "text_matches": "x"}},
        "failed",
        [ALL_FIELDS_ONE_MESSAGE],
    ),
    ({"bot_uttered": {"utter_name": "utter_a", "text_matches": "x"}}, "passed", [NO_TEXT]),
    ({"bot_uttered": {"buttons": BUTTONS}}, "failed", [MORE_BUTTONS]),
    ({"bot_uttered": {"buttons": BUTTONS}}, "passed", [ANY_PAYLOAD]),
    ({"bot_did_not_utter": {"buttons": BUTTONS}}, "passed", [BUTTONS_AT_POSITIONS]),
    (
        {"bot_did_not_utter": {"utter_name": "utter_a", "text_matches": "x"}},
        "passed",
        [ALL_FIELDS_ONE_MESSAGE, NO_TEXT],
    ),
    ({"bot_uttered": {"utter_name": "utter_a"}}, "failed", []),
    (call("t"), "failed", []),
    (call("t", arguments={"k": None}), "failed", [NULL_ARGUMENT]),
    (within(call("a"), call("b"), extras=False), "passed", [MATCHING, COMPLETE_SKILL]),
    (within(call("a"), call("b"), extras=False, ordered=True), "passed", [COMPLETE_SKILL]),
    (within(call("a", arguments={"k": None}), call("b"), extras=True), "failed", [NULL_ARGUMENT]),
    ({"skill_activated": {"skill_id": "card"}}, "failed", []),
]


@pytest.mark.parametrize(("assertion", "verdict", "expected"), CASES)
def test_a_difference_names_the_divergences_that_go_its_way(
    assertion: dict[str, Any], verdict: str, expected: list[str]
) -> None:
    [check] = scenario(assertion).assertions
    assert divergences(check, verdict) == expected
