"""Every warning names its conversation and sequence, in the text and in the JSON report;
``--strict`` fails on what the docs call a problem, not on a gap Mantle's data may have.

The command line is called in this process (``cli.main``) on the card scenario's
example runs, edited to hold one of each irregularity; the warning lines are compared with
``tests/golden/warnings_named.txt`` (``UPDATE_GOLDEN=1`` rewrites it: read the diff).
"""

from __future__ import annotations

import json
from pathlib import Path

from _harness import check_golden, run_cli_in_process

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "eval"
CARD = str(EXAMPLES / "scenarios" / "card_replace_damaged.yml")
CARD_EVENTS = EXAMPLES / "events" / "card_replace_damaged.jsonl"
CARD_OK = "sim-5588a28d-011b-4f0b-822a-91e1448a99c5"
GAPPY = "sim-66a038ae-b30b-47be-8eb5-64703ce5024f"  # examples/eval/expected.md: its gap


def irregular_feed(tmp_path: Path) -> Path:
    """The card runs with sequence 4 of the first missing (a gap), its sequence 2 sent
    twice (a duplicate) and an event after its end (late)."""
    lines = CARD_EVENTS.read_text().splitlines(keepends=True)
    first = [line for line in lines if CARD_OK in line]
    rest = [line for line in lines if CARD_OK not in line]
    assert json.loads(first[4])["sequence"] == 4
    late = json.dumps({"conversation_id": CARD_OK, "sequence": 999, "user": {"text": "hi"}})
    feed = tmp_path / "feed.jsonl"
    feed.write_text("".join(first[:3] + first[2:4] + first[5:] + [late + "\n"] + rest))
    return feed


def test_every_warning_names_its_conversation_and_sequence_in_the_text(tmp_path: Path) -> None:
    proc = run_cli_in_process(
        "check", CARD, "--events", str(irregular_feed(tmp_path)), "--format", "json"
    )
    assert proc.returncode == 1, proc.stderr
    check_golden("warnings_named.txt", proc.stderr)


def test_the_json_report_lists_where_each_warning_was_beside_its_count(tmp_path: Path) -> None:
    proc = run_cli_in_process(
        "check", CARD, "--events", str(irregular_feed(tmp_path)), "--format", "json"
    )
    warnings = json.loads(proc.stdout)["warnings"]
    # The counts as before (a published contract: keys are added, never renamed); one
    # file holds each conversation in order, so its gap is passed, not waited for.
    assert {k: v for k, v in warnings.items() if k != "occurrences"} == {
        "duplicates": 1,
        "gaps_passed": 1,
        "late_events": 1,
    }
    assert warnings["occurrences"] == [
        {"warning": "duplicates", "conversation_id": CARD_OK, "sequence": 2},
        {"warning": "gaps_passed", "conversation_id": CARD_OK, "sequence": 4},
        {"warning": "late_events", "conversation_id": CARD_OK, "sequence": 999},
    ]


def test_strict_fails_on_a_late_event_and_names_it(tmp_path: Path) -> None:
    proc = run_cli_in_process("check", CARD, "--events", str(irregular_feed(tmp_path)), "--strict")
    assert proc.returncode == 2
    assert (
        f"mantle-stream: error: --strict: 1 late event (`{CARD_OK}` sequence 999)\n"
    ) in proc.stderr


def test_strict_does_not_fail_the_examples_for_the_gap_expected_md_calls_normal() -> None:
    proc = run_cli_in_process(
        "check",
        str(EXAMPLES / "scenarios"),
        "--events",
        str(EXAMPLES / "events" / "all.jsonl"),
        "--results",
        str(EXAMPLES / "results" / "2026-12-01T09-00-00"),
        "--format",
        "json",
        "--strict",
    )
    assert proc.returncode == 1, proc.stderr  # the failed runs; nothing --strict fails for
    assert "--strict" not in proc.stderr
    assert (
        "mantle-stream: warning: 1 gap in `sequence` passed at once (the source delivers "
        "each conversation in order: those events were never sent): "
        f"`{GAPPY}` sequences 36-37\n"
    ) in proc.stderr


def test_strict_names_where_events_of_unknown_kinds_were(tmp_path: Path) -> None:
    feed = tmp_path / "feed.jsonl"
    newer = json.dumps({"conversation_id": "c-9", "sequence": 0, "new_kind": {}})
    feed.write_text(CARD_EVENTS.read_text() + newer + "\n")
    proc = run_cli_in_process("check", CARD, "--events", str(feed), "--strict", "--format", "json")
    assert proc.returncode == 2
    assert "--strict: 1 event of unknown kinds (`c-9` sequence 0)\n" in proc.stderr
    assert json.loads(proc.stdout)["warnings"]["occurrences"] == [
        {"warning": "unknown_kinds", "conversation_id": "c-9", "sequence": 0}
    ]


def test_a_sequence_conflict_is_named_with_both_ids_in_the_text_and_the_json(
    tmp_path: Path,
) -> None:
    # The card run with another event at its sequence 5 (a renumbered session
    # restart): applied after the first, counted, and both ids named.
    lines = CARD_EVENTS.read_text().splitlines(keepends=True)
    first = [line for line in lines if CARD_OK in line]
    fifth = json.loads(first[5])
    assert fifth["sequence"] == 5
    other = {**fifth, "event_id": "01a230d5-ffff-7000-8000-000000000005"}
    feed = tmp_path / "feed.jsonl"
    feed.write_text("".join(first[:6]) + json.dumps(other) + "\n" + "".join(first[6:]))
    proc = run_cli_in_process("check", CARD, "--events", str(feed), "--format", "json")
    warnings = json.loads(proc.stdout)["warnings"]
    assert warnings == {
        "occurrences": [
            {
                "warning": "sequence_conflicts",
                "conversation_id": CARD_OK,
                "sequence": 5,
                "event_id": other["event_id"],
                "applied_event_id": fifth["event_id"],
            }
        ],
        "sequence_conflicts": 1,
    }
    assert (
        "mantle-stream: warning: 1 sequence conflict (another event at a sequence already "
        f"applied: applied after the first): `{CARD_OK}` sequence 5 "
        f"(`{other['event_id']}` after `{fifth['event_id']}`)\n"
    ) in proc.stderr
