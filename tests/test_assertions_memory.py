"""Memory checks: `memory_was_set`, `memory_was_not_set`, `memory_was_cleared`.

Reference ("Memory") and docs/semantics.md: writes and clears are separate
events; values compare strictly and typed; a check with several entries is
the AND of its entries (fails as soon as one fails, passes when all passed);
memory_was_not_set with a value is judged on the last write, at the end.
"""

from __future__ import annotations

from typing import Any

import pytest

from _harness import (
    TYPED_VALUES,
    D,
    assert_outcome,
    bot,
    clear,
    judge,
    setm,
    skill,
    tool,
    user,
)

REASON = "card_replace.replacement_reason"
CARD = "card_replace.selected_card_id"
FRAUD = "card_replace.fraud_review"
DRAFT = "card_replace.draft_order_id"


def was_set(*entries: tuple[str, Any] | str) -> dict[str, Any]:
    return {"memory_was_set": [_entry(e) for e in entries]}


def not_set(*entries: tuple[str, Any] | str) -> dict[str, Any]:
    return {"memory_was_not_set": [_entry(e) for e in entries]}


def cleared(*names: str) -> dict[str, Any]:
    return {"memory_was_cleared": [{"name": n} for n in names]}


def _entry(entry: tuple[str, Any] | str) -> dict[str, Any]:
    if isinstance(entry, str):
        return {"name": entry}
    name, value = entry
    return {"name": name, "value": value}


# --------------------------------------------------------------------------
# Reference example
# --------------------------------------------------------------------------


def test_reference_memory_examples_on_a_realistic_conversation() -> None:
    judged = judge(
        [
            was_set((REASON, "damaged"), CARD),
            not_set(FRAUD),
            cleared(DRAFT),
        ],
        [
            user("my card is damaged"),  # 10
            skill("activated", "card_replace"),  # 11
            setm(REASON, "lost"),  # 12
            setm(DRAFT, "d-1"),  # 13
            bot("Which card?", utter="utter_ask_card"),  # 14
            user("the visa"),  # 15
            setm(CARD, "card-7"),  # 16
            setm(REASON, "damaged"),  # 17
            tool("order_replacement", skill_id="card_replace", args={"shipping": "standard"}),
            clear(DRAFT),  # 19
            skill("completed", "card_replace"),  # 20
        ],
    )
    assert [judged.outcome(i) for i in range(3)] == [
        ("passed", 17),
        ("passed", None),
        ("passed", 19),
    ]


# --------------------------------------------------------------------------
# memory_was_set
# --------------------------------------------------------------------------


def test_was_set_without_value_passes_at_the_first_write() -> None:
    assert_outcome(was_set(CARD), [user(), D(setm(CARD, "c-1")), setm(CARD, "c-2")], "passed")


def test_was_set_with_value_passes_at_the_first_equal_write() -> None:
    assert_outcome(
        was_set((REASON, "damaged")),
        [
            user(),
            setm(REASON, "lost"),
            D(setm(REASON, "damaged")),
            setm(REASON, "stolen"),
        ],
        "passed",
    )


def test_was_set_with_value_fails_at_the_end_when_never_written_equal() -> None:
    judged = assert_outcome(
        was_set((REASON, "damaged")),
        [
            user(),
            setm(REASON, "lost"),
            setm(REASON, "stolen"),
        ],
        "failed",
    )
    assert REASON in judged.reason()


def test_was_set_fail_reason_names_the_key_the_value_seen_and_expected() -> None:
    judged = assert_outcome(was_set((REASON, "damaged")), [user(), setm(REASON, "lost")], "failed")
    for part in (REASON, "lost", "damaged"):
        assert part in judged.reason()


def test_was_set_fails_when_never_written() -> None:
    assert_outcome(was_set(CARD), [user(), bot("hi"), setm("card_replace.other", 1)], "failed")


def test_was_set_is_not_satisfied_by_a_clear() -> None:
    assert_outcome(was_set(CARD), [user(), clear(CARD)], "failed")


@pytest.mark.parametrize(
    "name",
    [
        "card_replace.selected_card",
        "card_replace.selected_card_id_2",
        "selected_card_id",
        "session.card_replace.selected_card_id",
        "Card_replace.selected_card_id",
    ],
    ids=["prefix", "longer", "no-scope", "session-prefix", "case"],
)
def test_was_set_compares_the_key_exactly(name: str) -> None:
    assert_outcome(was_set(CARD), [user(), setm(name, "c-1")], "failed")


@pytest.mark.parametrize(("expected", "written", "equal"), TYPED_VALUES)
def test_was_set_value_equality_is_typed(expected: Any, written: Any, equal: bool) -> None:
    events = [user(), setm(REASON, written)]
    if equal:
        events[1] = D(events[1])
    assert_outcome(was_set((REASON, expected)), events, "passed" if equal else "failed")


def test_was_set_integer_value_json_stays_an_integer() -> None:
    # value_json "42" is 42, not 42.0 - so it equals the integer 42 ...
    assert_outcome(was_set((CARD, 42)), [user(), D(setm(CARD, 42))], "passed")


def test_was_set_float_value_json_equals_the_integer() -> None:
    # ... and "42.0" is the float 42.0: JSON has one number type, so it equals 42.
    assert_outcome(was_set((CARD, 42)), [user(), D(setm(CARD, 42.0))], "passed")


def test_was_set_boolean_never_equals_a_number() -> None:
    # Divergence from Rasa 3.21, which compares with Python's == (True == 1).
    assert_outcome(was_set((CARD, 1)), [user(), setm(CARD, True)], "failed")


def test_several_set_entries_pass_at_the_latest_first_match() -> None:
    assert_outcome(
        was_set((REASON, "damaged"), CARD),
        [
            user(),
            setm(REASON, "damaged"),
            setm(REASON, "lost"),
            bot("ok"),
            D(setm(CARD, "c-1")),
            setm(CARD, "c-2"),
        ],
        "passed",
    )


def test_several_set_entries_pass_at_the_latest_first_match_in_any_order() -> None:
    assert_outcome(
        was_set((REASON, "damaged"), CARD),
        [
            user(),
            setm(CARD, "c-1"),
            setm(REASON, "lost"),
            D(setm(REASON, "damaged")),
        ],
        "passed",
    )


def test_several_set_entries_fail_at_the_end_when_one_never_matches() -> None:
    judged = assert_outcome(
        was_set((REASON, "damaged"), CARD),
        [
            user(),
            setm(REASON, "damaged"),
            setm(CARD + "s", 1),
        ],
        "failed",
    )
    assert CARD in judged.reason()


def test_two_entries_for_one_key_need_both_values_written() -> None:
    assert_outcome(
        was_set((REASON, "lost"), (REASON, "damaged")),
        [
            user(),
            setm(REASON, "damaged"),
            setm(REASON, "damaged"),
            D(setm(REASON, "lost")),
        ],
        "passed",
    )


# --------------------------------------------------------------------------
# memory_was_not_set
# --------------------------------------------------------------------------


def test_not_set_without_value_fails_at_the_first_write() -> None:
    judged = assert_outcome(
        not_set(FRAUD),
        [
            user(),
            setm("card_replace.fraud", True),
            D(setm(FRAUD, False)),
            setm(FRAUD, True),
        ],
        "failed",
    )
    assert FRAUD in judged.reason()


def test_not_set_without_value_passes_at_the_end_when_never_written() -> None:
    assert_outcome(not_set(FRAUD), [user(), setm(REASON, "damaged"), bot("ok")], "passed")


def test_not_set_without_value_is_not_broken_by_a_clear() -> None:
    assert_outcome(not_set(FRAUD), [user(), clear(FRAUD)], "passed")


@pytest.mark.parametrize(
    ("writes", "verdict"),
    [
        pytest.param([], "passed", id="never-written"),
        pytest.param([setm(FRAUD, True)], "failed", id="only-write-equal"),
        pytest.param([setm(FRAUD, False)], "passed", id="only-write-different"),
        pytest.param(
            [setm(FRAUD, True), setm(FRAUD, False)], "passed", id="later-different-write-rescues"
        ),
        pytest.param(
            [setm(FRAUD, False), setm(FRAUD, True)], "failed", id="later-equal-write-fails"
        ),
        pytest.param([setm(FRAUD, True), clear(FRAUD)], "failed", id="clear-after-is-ignored"),
        pytest.param(
            [setm(FRAUD, False), setm(FRAUD, True), clear(FRAUD), bot("x")],
            "failed",
            id="clear-does-not-rescue",
        ),
        pytest.param(
            [setm(FRAUD, True), clear(FRAUD), setm(FRAUD, False)],
            "passed",
            id="write-after-clear-counts",
        ),
        pytest.param([clear(FRAUD)], "passed", id="only-cleared"),
        pytest.param([setm(FRAUD, "true")], "passed", id="typed-string-true"),
        pytest.param([setm(FRAUD, 1)], "passed", id="typed-one"),
        pytest.param([setm(FRAUD + "_x", True)], "passed", id="other-key"),
        pytest.param(
            [setm(FRAUD, True), setm(FRAUD + "_x", False)], "failed", id="other-key-does-not-rescue"
        ),
    ],
)
def test_not_set_with_value_is_judged_on_the_last_write_at_the_end(
    writes: list[Any], verdict: str
) -> None:
    # docs/semantics.md: never decided early ("a later write can change the last write").
    assert_outcome(not_set((FRAUD, True)), [user(), *writes, user(), bot("bye")], verdict)


def test_not_set_with_value_fail_reason_names_the_key_and_value() -> None:
    judged = assert_outcome(not_set((REASON, "stolen")), [user(), setm(REASON, "stolen")], "failed")
    assert REASON in judged.reason() and "stolen" in judged.reason()


@pytest.mark.parametrize(("expected", "written", "equal"), TYPED_VALUES)
def test_not_set_value_equality_is_typed(expected: Any, written: Any, equal: bool) -> None:
    assert_outcome(
        not_set((REASON, expected)),
        [user(), setm(REASON, written)],
        "failed" if equal else "passed",
    )


def test_several_not_set_entries_fail_early_when_a_no_value_entry_is_written() -> None:
    assert_outcome(
        not_set((REASON, "stolen"), FRAUD),
        [
            user(),
            setm(REASON, "damaged"),
            D(setm(FRAUD, False)),
            setm(REASON, "lost"),
        ],
        "failed",
    )


def test_several_not_set_entries_pass_at_the_end_when_all_hold() -> None:
    assert_outcome(
        not_set((REASON, "stolen"), FRAUD),
        [
            user(),
            setm(REASON, "stolen"),
            setm(REASON, "damaged"),
            clear(FRAUD),
        ],
        "passed",
    )


def test_several_not_set_entries_fail_at_the_end_on_one_forbidden_last_write() -> None:
    assert_outcome(
        not_set((REASON, "stolen"), (CARD, "c-9"), FRAUD),
        [
            user(),
            setm(REASON, "stolen"),
            setm(CARD, "c-9"),
            setm(CARD, "c-1"),
        ],
        "failed",
    )


# --------------------------------------------------------------------------
# memory_was_cleared
# --------------------------------------------------------------------------


def test_was_cleared_passes_at_the_first_clear() -> None:
    assert_outcome(
        cleared(DRAFT), [user(), setm(DRAFT, "d"), D(clear(DRAFT)), clear(DRAFT)], "passed"
    )


def test_was_cleared_is_not_satisfied_by_writes() -> None:
    judged = assert_outcome(cleared(DRAFT), [user(), setm(DRAFT, "d"), setm(DRAFT, "")], "failed")
    assert DRAFT in judged.reason()


def test_was_cleared_needs_the_same_key() -> None:
    assert_outcome(cleared(DRAFT), [user(), clear(DRAFT + "s"), clear("draft_order_id")], "failed")


def test_was_cleared_passes_without_an_earlier_write() -> None:
    assert_outcome(cleared(DRAFT), [user(), D(clear(DRAFT))], "passed")


def test_several_cleared_entries_pass_at_the_latest_first_clear() -> None:
    assert_outcome(
        cleared(DRAFT, CARD),
        [
            user(),
            clear(CARD),
            clear(CARD),
            setm(DRAFT, 1),
            D(clear(DRAFT)),
        ],
        "passed",
    )


def test_several_cleared_entries_fail_at_the_end_when_one_is_never_cleared() -> None:
    assert_outcome(cleared(DRAFT, CARD), [user(), clear(CARD), setm(DRAFT, 1)], "failed")


# --------------------------------------------------------------------------
# Written, then cleared
# --------------------------------------------------------------------------


def test_written_then_cleared_gives_set_passed_cleared_passed_not_set_failed() -> None:
    judged = judge(
        [was_set(DRAFT), cleared(DRAFT), not_set(DRAFT)],
        [
            user(),
            setm(DRAFT, "d-1"),
            bot("done"),
            clear(DRAFT),
        ],
    )
    assert [judged.outcome(i) for i in range(3)] == [("passed", 11), ("passed", 13), ("failed", 11)]
