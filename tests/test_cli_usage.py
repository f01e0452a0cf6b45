"""Usage and input errors as a user reads them: the line that matters, then what to do.

Each case calls the command line in this process (``cli.main``: the standard error
and exit status of ``python -m mantle_stream``, whose process ``test_cli.py`` runs)
and compares its standard error with ``tests/golden/usage_*.txt`` (usage) or
``tests/golden/input_*.txt`` (input).
Regenerate them with ``UPDATE_GOLDEN=1 python -m pytest tests/test_cli_usage.py``
and read the diff.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from mantle_stream.cli.parser import _commands, _parser

from _harness import check_golden, run_cli_in_process

EVENTS = "examples/eval/events/all.jsonl"
SCENARIOS = "examples/eval/scenarios"
CARD = "examples/eval/scenarios/card_replace_damaged.yml"
TRACKER = next(Path(__file__).parent.parent.glob("examples/eval/trackers/*.json"))


def run(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """``mantle-stream ARGS`` in this process, reading ``stdin``."""
    return run_cli_in_process(*args, stdin=stdin.encode())


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("misspelled_flag", ["check", SCENARIOS, "--evnts", EVENTS]),
        ("abbreviated_flag", ["check", SCENARIOS, "--event", EVENTS]),
        ("missing_scenario", ["check", "--events", EVENTS]),
        ("watch_workers", ["watch", SCENARIOS, "--events", EVENTS, "--workers", "2"]),
        ("option_of_another_command", ["validate", SCENARIOS, "--format", "json"]),
        # Unknown before missing: `--upstream` is missing because it was misspelled.
        ("misspelled_required_flag", ["gate", SCENARIOS, "--upstrem", "http://127.0.0.1:1"]),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_a_usage_error_is_its_message_and_where_to_read_more(name: str, args: list[str]) -> None:
    proc = run(*args)
    assert proc.returncode == 2
    assert proc.stdout == ""
    check_golden(f"usage_{name}.txt", f"$ mantle-stream {' '.join(args)}\n{proc.stderr}")


def test_no_usage_error_prints_the_whole_usage() -> None:
    proc = run("check", "--events", EVENTS)
    assert len(proc.stderr.splitlines()) == 2
    assert "[--integrations PATH]" not in proc.stderr


@pytest.mark.parametrize("command", sorted(_commands(_parser())))
def test_every_command_refuses_abbreviated_long_options(command: str) -> None:
    # A subcommand added later is built by the same parser class: this covers it too.
    parser = _commands(_parser())[command]
    assert isinstance(parser, argparse.ArgumentParser)
    assert parser.allow_abbrev is False


def test_the_top_level_refuses_abbreviated_long_options() -> None:
    assert _parser().allow_abbrev is False


# ------------------------------------------------------------------ input errors


def events_array() -> str:
    """What ``jq -c .events TRACKER.json`` prints: the tracker's flat rows as one array."""
    return json.dumps(json.loads(TRACKER.read_text())["events"]) + "\n"


def test_a_json_array_of_events_says_which_shapes_are_read_and_how_to_wrap_it() -> None:
    proc = run("check", CARD, "--events", "-", stdin=events_array())
    assert proc.returncode == 2
    # Skipping the array would judge nothing: no advice to.
    assert "--on-bad-event=skip" not in proc.stderr
    check_golden("input_events_array.txt", proc.stderr)


@pytest.mark.skipif(shutil.which("jq") is None, reason="the hint's command needs jq")
def test_the_array_hint_s_command_gives_events_that_are_judged() -> None:
    hint = run("check", CARD, "--events", "-", stdin=events_array()).stderr
    program = hint.split("jq -c '", 1)[1].split("'", 1)[0]
    lines = subprocess.run(
        ["jq", "-c", program, str(TRACKER)], capture_output=True, text=True, check=True
    ).stdout
    proc = run("check", CARD, "--events", "-", "--format", "json", stdin=lines)
    assert proc.returncode == 1, proc.stderr  # judged: the card scenario fails this run
    assert json.loads(proc.stdout)["summary"]["conversations"] == 1


def test_a_bad_event_without_a_hint_still_says_how_to_go_past_it() -> None:
    proc = run("check", CARD, "--events", "-", stdin='{"conversation_id": "c"}\n')
    assert proc.returncode == 2
    assert "(use --on-bad-event=skip to go on past bad events)" in proc.stderr
    assert "hint:" not in proc.stderr


def test_a_scenario_path_that_does_not_exist_has_no_line_and_column() -> None:
    proc = run("check", "eval/scenarios/nope.yml", "--events", EVENTS)
    assert proc.returncode == 2
    check_golden("input_missing_scenario_path.txt", proc.stderr)
