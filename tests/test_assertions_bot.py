"""Agent messages: `bot_uttered` and `bot_did_not_utter`.

Reference ("Agent messages") and docs/semantics.md: a message matches when every
given field matches that same message - `utter_name` equal, `text_matches` a
Python regex searched anywhere in the text (no text never matches),
`buttons` equal as a list (same length and order, each title equal, each
payload equal when given). bot_uttered passes at the first matching message,
else fails at the end; bot_did_not_utter fails at the first matching message,
else passes at the end.
"""

from __future__ import annotations

from typing import Any

import pytest

import mantle_stream as ms

from _harness import (
    D,
    Ev,
    assert_outcome,
    bot,
    judge,
    scenario,
    setm,
    skill,
    tool,
    user,
)

REFERENCE_UTTERED = {"bot_uttered": {"text_matches": "replacement.*(ordered|placed)"}}
REFERENCE_NOT_UTTERED = {"bot_did_not_utter": {"utter_name": "utter_cannot_help"}}

YES_NO = [{"title": "Yes", "payload": "/affirm"}, {"title": "No", "payload": "/deny"}]


def uttered(**fields: Any) -> dict[str, Any]:
    return {"bot_uttered": fields}


def not_uttered(**fields: Any) -> dict[str, Any]:
    return {"bot_did_not_utter": fields}


# --------------------------------------------------------------------------
# Reference examples
# --------------------------------------------------------------------------


def realistic(closing: Ev) -> list[Ev]:
    return [
        user("my card is damaged"),
        skill("activated", "card_replace"),
        bot(
            "Sorry to hear that. Shall I order a replacement?",
            utter="utter_offer_replacement",
            buttons=YES_NO,
        ),
        user("yes"),
        tool("order_replacement", skill_id="card_replace", args={"shipping": "standard"}),
        closing,
        skill("completed", "card_replace"),
    ]


def test_reference_examples_on_a_realistic_conversation() -> None:
    events = realistic(bot("Your replacement was ordered.", utter="utter_replacement_ordered"))
    judged = judge([REFERENCE_UTTERED, REFERENCE_NOT_UTTERED], events)
    assert [judged.outcome(i) for i in range(2)] == [("passed", 15), ("passed", None)]


def test_reference_examples_on_a_conversation_that_gave_up() -> None:
    events = realistic(bot("I can't help with that.", utter="utter_cannot_help"))
    judged = judge([REFERENCE_UTTERED, REFERENCE_NOT_UTTERED], events)
    assert [judged.outcome(i) for i in range(2)] == [("failed", None), ("failed", 15)]
    assert "utter_cannot_help" in judged.reason(1)


# --------------------------------------------------------------------------
# One message against one check
# --------------------------------------------------------------------------

MESSAGE_CASES = [
    # (fields, message, matches?)
    pytest.param(
        {"utter_name": "utter_greet"}, bot("Hi", utter="utter_greet"), True, id="utter-equal"
    ),
    pytest.param(
        {"utter_name": "utter_greet"}, bot("Hi", utter="utter_greet_2"), False, id="utter-other"
    ),
    pytest.param(
        {"utter_name": "utter_greet"},
        bot("utter_greet", utter=None),
        False,
        id="utter-none-text-is-not-utter",
    ),
    pytest.param(
        {"text_matches": "replacement"},
        bot("Your replacement was ordered."),
        True,
        id="regex-searched-in-the-middle",
    ),
    pytest.param(
        {"text_matches": "ordered\\.$"},
        bot("Your replacement was ordered."),
        True,
        id="regex-anchored-end",
    ),
    pytest.param(
        {"text_matches": "^ordered"},
        bot("Your replacement was ordered."),
        False,
        id="regex-anchored-start",
    ),
    pytest.param(
        {"text_matches": "Replacement"},
        bot("Your replacement was ordered."),
        False,
        id="regex-case-sensitive",
    ),
    pytest.param(
        {"text_matches": "(?i)REPLACEMENT"},
        bot("Your replacement was ordered."),
        True,
        id="regex-inline-flag",
    ),
    pytest.param(
        {"text_matches": "card \\d{4}"}, bot("Your card 1234 is locked"), True, id="regex-class"
    ),
    pytest.param(
        {"text_matches": "replacement.was"},
        bot("Your replacement\nwas ordered"),
        False,
        id="regex-dot-not-newline",
    ),
    pytest.param(
        {"text_matches": ".*"},
        bot(None, utter="utter_image"),
        False,
        id="regex-no-text-never-matches",
    ),
    pytest.param(
        {"text_matches": ""}, bot(None, utter="utter_image"), False, id="empty-regex-no-text"
    ),
    pytest.param({"text_matches": "^$"}, bot(""), True, id="empty-regex-empty-text"),
    pytest.param({"buttons": YES_NO}, bot("?", buttons=YES_NO), True, id="buttons-equal"),
    pytest.param(
        {"buttons": [{"title": "Yes"}, {"title": "No"}]},
        bot("?", buttons=YES_NO),
        True,
        id="buttons-payload-omitted-matches-any",
    ),
    pytest.param({"buttons": YES_NO[::-1]}, bot("?", buttons=YES_NO), False, id="buttons-order"),
    # docs/semantics.md: at least as many carried as listed; each listed position equal.
    pytest.param(
        {"buttons": YES_NO[:1]},
        bot("?", buttons=YES_NO),
        True,
        id="buttons-fewer-listed-than-carried",
    ),
    pytest.param(
        {"buttons": YES_NO[1:]},
        bot("?", buttons=YES_NO),
        False,
        id="buttons-listed-position-counts",
    ),
    pytest.param({"buttons": YES_NO}, bot("?", buttons=YES_NO[:1]), False, id="buttons-more"),
    pytest.param(
        {"buttons": [{"title": "yes", "payload": "/affirm"}, YES_NO[1]]},
        bot("?", buttons=YES_NO),
        False,
        id="buttons-title-exact",
    ),
    pytest.param(
        {"buttons": [{"title": "Yes", "payload": "/deny"}, YES_NO[1]]},
        bot("?", buttons=YES_NO),
        False,
        id="buttons-payload-given-differs",
    ),
    pytest.param(
        {"buttons": [{"title": "Yes", "payload": "/affirm"}]},
        bot("?", buttons=[{"title": "Yes", "payload": None}]),
        False,
        id="buttons-payload-given-message-none",
    ),
    pytest.param(
        {"buttons": [{"title": "Yes"}]},
        bot("?", buttons=[{"title": "Yes", "payload": None}]),
        True,
        id="buttons-payload-omitted-message-none",
    ),
    pytest.param({"buttons": YES_NO}, bot("Yes or No?"), False, id="buttons-message-has-none"),
    pytest.param({"buttons": []}, bot("Anything else?"), True, id="no-buttons-expected-none-sent"),
    pytest.param(
        {"buttons": []},
        bot("Anything else?", buttons=[]),
        True,
        id="no-buttons-expected-empty-list-sent",
    ),
    # An empty list asks for nothing: every message carries at least zero buttons.
    pytest.param(
        {"buttons": []}, bot("?", buttons=YES_NO), True, id="empty-buttons-list-matches-any"
    ),
    pytest.param(
        {"buttons": [{"title": "Yes"}]},
        bot("?", buttons=[{"title": "Yes", "payload": "/affirm", "image": None}]),
        True,
        id="buttons-extra-button-fields-ignored",
    ),
    pytest.param(
        {"buttons": [{"title": "Yes"}]},
        bot("?", buttons=["Yes"]),  # type: ignore[list-item]  # odd data on purpose
        False,
        id="buttons-odd-data-never-matches",
    ),
    pytest.param(
        {"utter_name": "utter_ask", "text_matches": "card", "buttons": YES_NO},
        bot("Lock the card?", utter="utter_ask", buttons=YES_NO),
        True,
        id="all-fields-same-message",
    ),
    pytest.param(
        {"utter_name": "utter_ask", "text_matches": "card"},
        bot("Lock the account?", utter="utter_ask"),
        False,
        id="one-field-misses",
    ),
    pytest.param(
        {"utter_name": "utter_ask", "buttons": YES_NO},
        bot("Lock the card?", utter="utter_ask"),
        False,
        id="buttons-field-misses",
    ),
]


@pytest.mark.parametrize(("fields", "message", "matches"), MESSAGE_CASES)
def test_bot_uttered_passes_at_a_matching_message(
    fields: dict[str, Any], message: Ev, matches: bool
) -> None:
    assert_outcome(
        uttered(**fields),
        [user(), D(message) if matches else message, user()],
        "passed" if matches else "failed",
    )


@pytest.mark.parametrize(("fields", "message", "matches"), MESSAGE_CASES)
def test_bot_did_not_utter_fails_at_a_matching_message(
    fields: dict[str, Any], message: Ev, matches: bool
) -> None:
    assert_outcome(
        not_uttered(**fields),
        [user(), D(message) if matches else message, user()],
        "failed" if matches else "passed",
    )


# --------------------------------------------------------------------------
# Over a conversation
# --------------------------------------------------------------------------


def test_bot_uttered_passes_at_the_first_of_several_matches() -> None:
    assert_outcome(
        uttered(utter_name="utter_greet"),
        [
            user(),
            bot("Hey", utter="utter_hey"),
            D(bot("Hi", utter="utter_greet")),
            bot("Hi again", utter="utter_greet"),
        ],
        "passed",
    )


def test_bot_did_not_utter_fails_at_the_first_of_several_matches() -> None:
    judged = assert_outcome(
        not_uttered(text_matches="cannot help"),
        [
            user(),
            bot("I can help"),
            D(bot("Sorry, I cannot help with that")),
            bot("I cannot help, really"),
        ],
        "failed",
    )
    assert "cannot help" in judged.reason()


def test_fields_matched_by_different_messages_do_not_combine_for_bot_uttered() -> None:
    assert_outcome(
        uttered(utter_name="utter_done", text_matches="ordered"),
        [
            user(),
            bot("All set.", utter="utter_done"),
            bot("Your card was ordered.", utter=None),
        ],
        "failed",
    )


def test_fields_matched_by_different_messages_do_not_combine_for_bot_did_not_utter() -> None:
    assert_outcome(
        not_uttered(utter_name="utter_done", text_matches="ordered"),
        [
            user(),
            bot("All set.", utter="utter_done"),
            bot("Your card was ordered.", utter=None),
        ],
        "passed",
    )


def test_user_text_is_not_an_agent_message() -> None:
    judged = judge(
        [uttered(text_matches="replacement"), not_uttered(text_matches="replacement")],
        [user("I want a replacement"), setm("card_replace.reason", "replacement")],
    )
    assert [judged.outcome(i) for i in range(2)] == [("failed", None), ("passed", None)]


def test_bot_uttered_fails_at_the_end_with_a_reason_naming_the_expectation() -> None:
    judged = assert_outcome(
        uttered(utter_name="utter_replacement_ordered"),
        [user(), bot("Hi", utter="utter_greet")],
        "failed",
    )
    assert "utter_replacement_ordered" in judged.reason()


def test_bot_did_not_utter_passes_at_the_end_without_messages() -> None:
    assert_outcome(not_uttered(utter_name="utter_cannot_help"), [user(), user()], "passed")


def test_bot_uttered_searches_past_a_newline() -> None:
    assert_outcome(
        uttered(text_matches="was ordered"),
        [user(), D(bot("Your replacement\nwas ordered"))],
        "passed",
    )


NEWLINE_REASONS = [
    pytest.param(
        not_uttered(text_matches="ordered"),
        [user(), bot("Your replacement\nwas ordered")],
        id="forbidden-message-text",
    ),
    pytest.param(
        uttered(text_matches="replacement\nwas"), [user(), bot("nothing")], id="regex-pattern"
    ),
    pytest.param(
        uttered(buttons=[{"title": "Yes\nplease"}]), [user(), bot("nothing")], id="button-title"
    ),
]


@pytest.mark.parametrize(("assertion", "events"), NEWLINE_REASONS)
def test_reason_stays_one_line_when_quoted_text_spans_lines(
    assertion: dict[str, Any], events: list[Ev]
) -> None:
    evaluator = ms.Evaluator([scenario(assertion)])
    decisions = [d for i, ev in enumerate(events) for d in evaluator.push_line(ev.line("c", i))]
    [decision] = decisions + evaluator.finish_all()
    assert "\n" not in decision.reason
