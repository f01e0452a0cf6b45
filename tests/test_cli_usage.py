"""Usage errors as a user reads them: the line that matters, then where to read more.

Each case runs the command line as a subprocess and compares its standard error
with ``tests/golden/usage_*.txt``. Regenerate them with
``UPDATE_GOLDEN=1 python -m pytest tests/test_cli_usage.py`` and read the diff.
"""

from __future__ import annotations

import argparse

import pytest

from mantle_stream.cli.parser import _commands, _parser

from _harness import check_golden, run_cli

EVENTS = "examples/eval/events/all.jsonl"
SCENARIOS = "examples/eval/scenarios"


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("misspelled_flag", ["check", SCENARIOS, "--evnts", EVENTS]),
        ("abbreviated_flag", ["check", SCENARIOS, "--event", EVENTS]),
        ("missing_scenario", ["check", "--events", EVENTS]),
        ("watch_workers", ["watch", SCENARIOS, "--events", EVENTS, "--workers", "2"]),
        ("option_of_another_command", ["validate", SCENARIOS, "--format", "json"]),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_a_usage_error_is_its_message_and_where_to_read_more(name: str, args: list[str]) -> None:
    proc = run_cli(*args)
    assert proc.returncode == 2
    assert proc.stdout == ""
    check_golden(f"usage_{name}.txt", f"$ mantle-stream {' '.join(args)}\n{proc.stderr}")


def test_no_usage_error_prints_the_whole_usage() -> None:
    proc = run_cli("check", "--events", EVENTS)
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
