"""The command line: commands, exit codes, report; called in-process, and run for
real as a subprocess where the surface is the process (python -m, --help, --version)."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from _harness import http_server, quick_http_retries, run_cli, run_cli_in_process

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "eval"
SCENARIOS = EXAMPLES / "scenarios"
CARD = SCENARIOS / "card_replace_damaged.yml"
CARD_EVENTS = EXAMPLES / "events" / "card_replace_damaged.jsonl"
RESULTS = EXAMPLES / "results" / "2026-12-01T09-00-00"
TRACKER = next((EXAMPLES / "trackers").glob("*.json"))
# The three card_replace_damaged runs (results/.../card_replace_damaged/run_N.json).
CARD_OK, CARD_EXPRESS, CARD_SPLIT = (
    "sim-5588a28d-011b-4f0b-822a-91e1448a99c5",
    "sim-b4802004-f8c7-4a8d-9d87-921bd4592b53",
    "sim-3588fc80-d695-48d1-864f-3ad82e8266c2",
)


def _in_a_terminal(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    """``mantle-stream ARGS`` as a process whose standard output is taken for an
    80-column terminal (rich's ``TTY_COMPATIBLE``), so ``check`` draws its table."""
    terminal_env = {"TTY_COMPATIBLE": "1", "COLUMNS": "80", "TERM": "dumb"}  # no styles
    return subprocess.run(
        [sys.executable, "-m", "mantle_stream", *args],
        input=None if stdin is None else stdin.decode(),
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **terminal_env},
        timeout=60,
        check=False,
    )


# Most tests call the command line in this process (no Python start-up each); the
# subprocess runs (`run_process`, `python -m mantle_stream`) keep each command's real
# surface: check, validate, --version, every command's --help, and --jsonl - (the
# process's standard output); `terminal=True` runs it as a process on a terminal.
def run(
    *args: str, stdin: bytes | None = None, terminal: bool = False
) -> subprocess.CompletedProcess[str]:
    """In this process; with ``terminal``, as a process writing to a terminal."""
    if terminal:
        return _in_a_terminal(*args, stdin=stdin)
    return run_cli_in_process(*args, stdin=stdin or b"")


def run_process(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, timeout=60)


def test_check_json_prints_the_cli_md_report_and_nothing_else() -> None:
    proc = run_process(
        "check",
        str(SCENARIOS),
        "--events",
        str(EXAMPLES / "events" / "all.jsonl"),
        "--results",
        str(RESULTS),
        "--format",
        "json",
    )
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert set(report) == {"conversations", "summary", "warnings", "scenarios"}
    assert report["summary"] == {
        "conversations": 13,
        "passed": 5,
        "failed": 8,
        "assertions": 143,
        "unmatched": 0,
        "recorded_differences": 2,
    }
    # transfer_mcp's run 1 skips sequences 36-37 (examples/eval/expected.md: normal):
    # a file holds each conversation in order, so the gap is passed, not waited for.
    assert report["warnings"] == {
        "gaps_passed": 1,
        "occurrences": [
            {
                "warning": "gaps_passed",
                "conversation_id": "sim-66a038ae-b30b-47be-8eb5-64703ce5024f",
                "sequence": 36,
                "last": 37,
            }
        ],
    }
    first = report["conversations"][0]
    assert set(first) == {
        "conversation_id",
        "scenario",
        "verdict",
        "events",
        "assertions",
        "recorded",
        "started",
        "duration",
        "turn_starts",
    }
    # Where each turn begins: the sequence of each user message that starts one.
    assert first["turn_starts"] == sorted(first["turn_starts"]) and first["turn_starts"]
    assert set(first["assertions"][0]) == {
        "index",
        "kind",
        "verdict",
        "decided_at",
        "reason",
        "file",
        "line",
    }
    # Standard output holds the report alone; what a person should know goes to stderr.
    assert proc.stderr == (
        "mantle-stream: warning: 1 gap in `sequence` passed at once (the source delivers "
        "each conversation in order: those events were never sent): "
        "`sim-66a038ae-b30b-47be-8eb5-64703ce5024f` sequences 36-37\n"
    )


def test_results_report_where_evaluate_agents_recorded_verdict_differs() -> None:
    proc = run(
        "check",
        str(SCENARIOS),
        "--events",
        str(TRACKER),
        "--results",
        str(RESULTS),
        "--format",
        "json",
    )
    assert proc.returncode == 0, proc.stderr
    [conv] = json.loads(proc.stdout)["conversations"]
    assert conv["recorded"] == {
        "file": str(RESULTS / "identity_check" / "run_3.json"),
        "run_index": 3,
        "differences": [
            {
                "index": 3,
                "kind": "bot_uttered",
                "verdict": "passed",
                "recorded": "failed",
                "divergences": ["a button without a payload matches any payload"],
            }
        ],
    }


def test_results_table_names_each_difference() -> None:
    proc = run(
        "check", str(SCENARIOS), "--events", str(TRACKER), "--results", str(RESULTS),
        terminal=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "#3 bot_uttered: passed here, failed in evaluate_agent's" in proc.stdout
    text = " ".join(proc.stdout.split())
    assert "may come from a documented divergence (docs/semantics.md): a button without a " in text
    assert "1 differ from evaluate_agent's recorded verdicts" in " ".join(proc.stdout.split())


def test_a_directory_of_tracker_documents_is_a_source() -> None:
    proc = run(
        "check",
        str(EXAMPLES / "scenarios" / "identity_check.yml"),
        "--events",
        str(TRACKER.parent),
        "--format",
        "json",
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["summary"]["conversations"] == 1
    assert report["warnings"] == {"legacy_rows": {"slot": 1, "flow_started": 1}}


def test_a_tracker_document_on_standard_input() -> None:
    proc = run(
        "check",
        str(EXAMPLES / "scenarios" / "identity_check.yml"),
        "--events",
        "-",
        "--format",
        "json",
        stdin=TRACKER.read_bytes(),
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["summary"]["passed"] == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--results", "/nonexistent"], "--results `/nonexistent` is not a directory"),
        (["--results", str(EXAMPLES / "scenarios")], "holds no run_*.json files"),
    ],
    ids=["missing", "empty"],
)
def test_a_bad_results_folder_is_a_usage_error(args: list[str], message: str) -> None:
    proc = run("check", str(CARD), "--events", str(CARD_EVENTS), *args)
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr


def test_check_exits_zero_when_every_assertion_passes(tmp_path: Path) -> None:
    ok = tmp_path / "ok.jsonl"
    ok.write_text(
        "".join(line + "\n" for line in CARD_EVENTS.read_text().splitlines() if CARD_OK in line)
    )
    proc = run("check", str(CARD), "--events", str(ok), "--format", "json")
    assert proc.returncode == 0, proc.stdout
    assert json.loads(proc.stdout)["summary"]["passed"] == 1


def test_check_reads_standard_input() -> None:
    proc = run(
        "check", str(CARD), "--events", "-", "--format", "json", stdin=CARD_EVENTS.read_bytes()
    )
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["summary"]["conversations"] == 3


def test_table_format_shows_every_conversation_and_a_summary() -> None:
    proc = run("check", str(CARD), "--events", str(CARD_EVENTS), terminal=True)
    assert proc.returncode == 1
    for cid in (CARD_OK, CARD_EXPRESS, CARD_SPLIT):
        assert cid in proc.stdout
    assert "3 conversations: 1 passed, 2 failed; 36 assertions" in proc.stdout


def test_the_json_report_is_utf_8_whatever_standard_outputs_encoding() -> None:
    # Written as the bytes it is encoded to: an ASCII standard output (a C locale,
    # PYTHONIOENCODING) once ended the run with a traceback at the report's first €.
    events = str(EXAMPLES / "events" / "all.jsonl")
    args = ["check", str(SCENARIOS), "--events", events, "--results", str(RESULTS)]
    proc = subprocess.run(
        [sys.executable, "-m", "mantle_stream", *args, "--format", "json"],
        capture_output=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONIOENCODING": "ascii"},
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    assert b"Traceback" not in proc.stderr
    text = proc.stdout.decode("utf-8")
    assert "€" in text
    assert json.loads(text)["summary"]["conversations"] == 13


def test_jsonl_gets_one_line_per_verdict(tmp_path: Path) -> None:
    out = tmp_path / "verdicts.jsonl"
    proc = run(
        "check", str(CARD), "--events", str(CARD_EVENTS), "--format", "json", "--jsonl", str(out)
    )
    assert proc.returncode == 1
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 36
    assert set(lines[0]) == {
        "conversation_id",
        "scenario",
        "index",
        "kind",
        "verdict",
        "decided_at",
        "reason",
        "file",
        "line",
    }
    # Every verdict points at its assertion: the file and line of the scenario.
    card = CARD.read_text().splitlines()
    for x in lines:
        assert x["file"] == str(CARD)
        assert card[x["line"] - 1].lstrip().startswith(f"- {x['kind']}:")
    assert {(x["conversation_id"], x["index"]) for x in lines} == {
        (c, i) for c in (CARD_OK, CARD_EXPRESS, CARD_SPLIT) for i in range(12)
    }


def test_fail_fast_stops_at_the_first_failure(tmp_path: Path) -> None:
    out = tmp_path / "verdicts.jsonl"
    proc = run(
        "check",
        str(CARD),
        "--events",
        str(CARD_EVENTS),
        "--format",
        "json",
        "--fail-fast",
        "--jsonl",
        str(out),
    )
    assert proc.returncode == 1
    decided = [json.loads(line) for line in out.read_text().splitlines()]
    assert decided[-1]["verdict"] == "failed"
    assert sum(d["verdict"] == "failed" for d in decided) >= 1
    assert len(decided) < 36


def test_several_scenarios_conversation_naming_an_unknown_scenario_is_reported(
    tmp_path: Path,
) -> None:
    feed = tmp_path / "feed.jsonl"
    feed.write_text(
        CARD_EVENTS.read_text()
        + '{"conversation_id":"stray","sequence":0,"metadata":"{\\"scenario\\": \\"nope\\"}",'
        '"user":{"text":"hi"}}\n'
    )
    proc = run(
        "check",
        str(CARD),
        str(SCENARIOS / "transfer_mcp.yml"),
        "--events",
        str(feed),
        "--results",
        str(RESULTS),
        "--format",
        "json",
    )
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    assert report["unmatched"] == [{"conversation_id": "stray", "scenario": "nope", "events": 1}]
    assert proc.stderr == (
        "mantle-stream: warning: not judged: `stray` (1 event): its scenario `nope` is not loaded\n"
    )


def test_an_unmatched_conversation_gets_a_hint_a_junit_error_and_fails_under_strict(
    tmp_path: Path,
) -> None:
    feed = tmp_path / "feed.jsonl"
    meta = json.dumps(json.dumps({"scenario": "transfer_mpc"}))  # a one-letter typo
    feed.write_text(
        f'{{"conversation_id":"c","sequence":0,"metadata":{meta},'
        '"user":{"text":"hi"}}\n' + CARD_EVENTS.read_text()
    )
    junit = tmp_path / "junit.xml"
    args = [
        "check",
        str(CARD),
        str(SCENARIOS / "transfer_mcp.yml"),
        "--events",
        str(feed),
        "--results",
        str(RESULTS),
        "--junit",
        str(junit),
    ]
    proc = run(*args)
    assert proc.returncode == 1  # card_replace_damaged's own runs fail two of three
    flat = " ".join(proc.stdout.split())
    assert (
        "not judged: `c` (1 event): its scenario `transfer_mpc` is not loaded; "
        "did you mean `transfer_mcp`?"
    ) in flat
    root = ET.parse(junit).getroot()
    assert root.get("errors") == "1"
    [error] = root.findall("testsuite/testcase/error")
    assert error.get("message") == (
        "not judged: its scenario `transfer_mpc` is not loaded; did you mean `transfer_mcp`?"
    )
    strict = run(*args, "--strict")
    assert strict.returncode == 2
    assert "mantle-stream: error: --strict: 1 conversation not judged" in strict.stderr


def test_every_warning_is_a_line_of_the_table(tmp_path: Path) -> None:
    feed = tmp_path / "feed.jsonl"
    lines = CARD_EVENTS.read_text().splitlines(keepends=True)
    feed.write_text(
        lines[0] + "".join(lines) + '{"conversation_id":"x","sequence":0,'
        '"new_kind":{}}\n{"event":"slot","sender_id":"x","name":"a","value":1}\n'
    )
    empty = tmp_path / "empty.yml"
    empty.write_text("scenario:\n  name: empty\n  simulation_context: x\n")
    proc = run("check", str(empty), "--events", str(feed))
    assert proc.returncode == 0
    out = " ".join(proc.stdout.split())
    for line in (
        "scenario `empty` has no assertions: every conversation judged against it passes",
        "1 duplicate event skipped",
        "1 event of kinds this version does not know skipped (`new_kind` 1)",
        "1 older CALM row skipped (`slot` 1)",
    ):
        assert line in out, out


def test_a_custom_simulator_names_the_scenario_in_the_envelope_metadata(tmp_path: Path) -> None:
    feed = tmp_path / "feed.jsonl"
    meta = json.dumps(json.dumps({"scenario": "transfer_mcp"}))
    feed.write_text(
        f'{{"conversation_id":"c","sequence":0,"metadata":{meta},'
        '"skill_activated":{"skill_id":"transfer_money"}}\n'
    )
    proc = run(
        "check",
        str(CARD),
        str(SCENARIOS / "transfer_mcp.yml"),
        "--events",
        str(feed),
        "--format",
        "json",
    )
    report = json.loads(proc.stdout)
    assert [c["scenario"] for c in report["conversations"]] == [
        "Customer transfers money to a saved payee"
    ], proc.stderr


def test_validate_broken_file_prints_every_problem_with_position_and_exits_2() -> None:
    broken = EXAMPLES / "broken" / "broken_scenario.yml"
    proc = run_process("validate", str(broken))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    located = [
        line
        for line in proc.stderr.splitlines()
        if line.startswith(f"{broken}:") and ": error: " in line
    ]
    assert len(located) >= 9
    assert proc.stderr.rstrip().endswith("errors in 1 file")


def test_validate_good_files_exits_0() -> None:
    proc = run("validate", str(SCENARIOS))
    assert proc.returncode == 0
    assert proc.stdout.count(": ok: ") == 5


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["check", str(CARD), "--events", "/nonexistent/feed.jsonl"],
            "mantle-stream: error: cannot read events from `/nonexistent/feed.jsonl`",
        ),
        (
            ["check", "/nonexistent.yml", "--events", str(CARD_EVENTS)],
            "/nonexistent.yml: error: cannot read: No such file or directory",
        ),
        (["check", str(CARD)], "where are the events? give --events SOURCE or --integrations PATH"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
    ],
    ids=["missing-feed", "missing-scenario", "no-events", "unknown-command"],
)
def test_usage_and_input_errors_exit_2_without_traceback(args: list[str], message: str) -> None:
    proc = run(*args)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_malformed_event_names_file_and_line_and_exits_2(tmp_path: Path) -> None:
    feed = tmp_path / "bad.jsonl"
    feed.write_text('{"conversation_id":"c","sequence":0,"user":{}}\n{"conversation_id":\n')
    proc = run("check", str(CARD), "--events", str(feed), "--format", "json")
    assert proc.returncode == 2
    assert f"{feed}:2: bad event: malformed JSON" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_empty_feed_is_an_error() -> None:
    proc = run("check", str(CARD), "--events", "-", "--format", "json", stdin=b"")
    assert proc.returncode == 2
    assert "the feed held no conversation to judge" in proc.stderr


def test_python_dash_m_and_version() -> None:
    proc = run_process("--version")
    assert proc.returncode == 0
    assert proc.stdout.startswith("mantle-stream ")


# The ten example lines of Mantle's event contract, exactly as its broker writes them.
SPEC_LINES = (Path(__file__).parent / "data" / "protojson_example.jsonl").read_text()

SPEC_SCENARIO = """\
scenario:
  name: spec example
  simulation_context: A customer whose card is damaged.
  goals:
    assertions:
      - skill_activated: {skill_id: card_replace}
      - memory_was_set: [{name: card_replace.replacement_reason, value: damaged}]
      - tool_executed:
          {tool_name: order_replacement, source: local, skill_id: card_replace,
           arguments: {shipping: standard}}
      - bot_uttered: {utter_name: utter_replacement_ordered, buttons: [{title: Track it}]}
      - bot_uttered: {text_matches: "replacement.*(ordered|placed)"}
      - skill_completed: {skill_id: card_replace}
      - sequencing:
          - memory_was_set: card_replace.replacement_reason
          - tool_executed: {tool_name: order_replacement, source: local}
          - skill_completed: {skill_id: card_replace}
      - bot_did_not_utter: {utter_name: utter_cannot_help}
      - memory_was_cleared: [{name: card_replace.draft_order_id}]
      - tool_executed: {tool_name: order_replacement, source: local, skill_id: card_lock}
      - bot_uttered: {buttons: [{title: Track it, payload: /other}]}
      - tools_within_one_turn:
          allow_extra_calls: false
          calls:
            - tool_executed: {tool_name: order_replacement, source: local}
            - tool_executed: {tool_name: notify, source: local}
"""


def test_check_judges_every_example_line_of_the_event_contract(tmp_path: Path) -> None:
    feed = tmp_path / "rasa_event.log"
    feed.write_text(SPEC_LINES)
    scen = tmp_path / "spec.yml"
    scen.write_text(SPEC_SCENARIO)
    proc = run("check", str(scen), "--events", str(feed), "--format", "json")
    assert proc.returncode == 1, proc.stderr
    [conv] = json.loads(proc.stdout)["conversations"]
    assert (conv["conversation_id"], conv["events"]) == ("sim-7c1e", 10)
    # Derived by hand: the skill activates at 2, the reason is written at 4, the
    # tool runs for card_replace at 5, the message with its button comes at 6, the
    # skill completes at 8; nothing clears the draft, no run is for card_lock, the
    # button's payload is /track, and `notify` never runs.
    assert [(a["verdict"], a["decided_at"]) for a in conv["assertions"]] == [
        ("passed", 2),
        ("passed", 4),
        ("passed", 5),
        ("passed", 6),
        ("passed", 6),
        ("passed", 8),
        ("passed", 8),
        ("passed", None),
        ("failed", None),
        ("failed", None),
        ("failed", None),
        ("failed", None),
    ]
    assert proc.stderr == ""


def test_a_byte_order_mark_at_the_start_of_a_feed_is_not_an_event(tmp_path: Path) -> None:
    feed = tmp_path / "bom.jsonl"
    feed.write_bytes(
        b"\xef\xbb\xbf" + (Path(__file__).parent / "data" / "protojson_example.jsonl").read_bytes()
    )
    scen = tmp_path / "spec.yml"
    scen.write_text(SPEC_SCENARIO)
    proc = run("check", str(scen), "--events", str(feed), "--format", "json")
    assert proc.returncode == 1, proc.stderr
    assert json.loads(proc.stdout)["conversations"][0]["events"] == 10


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--state", "/nonexistent/dir/state.json"],
            "--state `/nonexistent/dir/state.json`: "
            "the directory `/nonexistent/dir` does not exist",
        ),
        (
            ["--jsonl", "-", "--format", "json"],
            "--jsonl - would mix verdict lines into the JSON report on standard output",
        ),
    ],
    ids=["state-directory", "jsonl-stdout-json"],
)
def test_usage_problems_are_found_before_the_run(args: list[str], message: str) -> None:
    proc = run("check", str(CARD), "--events", str(CARD_EVENTS), *args)
    assert proc.returncode == 2
    assert message in proc.stderr


def test_a_scenario_file_given_as_events_says_the_arguments_look_swapped() -> None:
    proc = run("check", str(CARD_EVENTS), "--events", str(CARD))
    assert proc.returncode == 2
    assert (
        "looks like a scenario file, not events: were SCENARIO and --events swapped?" in proc.stderr
    )


def test_jsonl_dash_is_standard_output_and_overwrite_starts_afresh(tmp_path: Path) -> None:
    # `-` is the process's standard output (its file descriptor): a process of its own.
    proc = run_process("check", str(CARD), "--events", str(CARD_EVENTS), "--jsonl", "-")
    records = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(records) == 36
    out = tmp_path / "v.jsonl"
    for _ in range(2):
        run(
            "check",
            str(CARD),
            "--events",
            str(CARD_EVENTS),
            "--format",
            "json",
            "--jsonl",
            str(out),
            "--jsonl-mode",
            "overwrite",
        )
    assert len(out.read_text().splitlines()) == 36


def test_junit_honours_the_umask_like_any_file(tmp_path: Path) -> None:
    junit = tmp_path / "report.xml"
    proc = subprocess.run(
        [
            "sh",
            "-c",
            f'umask 022 && exec "{sys.executable}" -m mantle_stream check "{CARD}" '
            f'--events "{CARD_EVENTS}" --format json --junit "{junit}"',
        ],
        capture_output=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1
    assert junit.stat().st_mode & 0o777 == 0o644


def test_check_ends_with_a_digest_of_every_failure_and_where_it_is_written() -> None:
    proc = run("check", str(CARD), "--events", str(CARD_EVENTS), terminal=True)
    out = " ".join(proc.stdout.split())
    assert "4 failed assertions:" in out
    assert (
        f"{CARD}:42 #5 tool_executed ✘ failed at the end in {CARD_EXPRESS} tool "
        "`order_replacement` never ran as specified; closest: tool `order_replacement` "
        'ran with shipping=`"express"` (string), expected `"standard"` (string)'
    ) in out
    assert f"{CARD}:63 #8 bot_did_not_utter ✘ failed at sequence 35 in {CARD_EXPRESS}" in out


def test_a_big_replay_shows_a_row_per_scenario_and_the_digest(tmp_path: Path) -> None:
    lines = CARD_EVENTS.read_text().splitlines(keepends=True)
    feed = tmp_path / "big.jsonl"
    feed.write_text(
        "".join(line.replace('"sim-', f'"copy{n}-sim-') for n in range(20) for line in lines)
    )
    proc = run("check", str(CARD), "--events", str(feed), terminal=True)
    assert proc.returncode == 1
    out = " ".join(proc.stdout.split())
    assert "by scenario" in out and CARD_EXPRESS not in out.split("failed assertions:")[0]
    # runs, passed, failed, errored, stopped early, pass rate, pass^k, pass@k, failed assertions
    assert "│ 60 │ 20 │ 40 │ 0 │ 0 │ 33% │ no │ yes │ 80 │" in out
    assert "+30 more (every one is in --format json and --jsonl)" in out


@pytest.mark.parametrize("how", ["repeated", "at-once", "glob"])
def test_several_event_sources_are_read_as_one_feed(how: str) -> None:
    events = EXAMPLES / "events"
    files = [str(events / "card_replace_damaged.jsonl"), str(events / "transfer_mcp.jsonl")]
    args = {
        "repeated": ["--events", files[0], "--events", files[1]],
        "at-once": ["--events", *files],
        "glob": ["--events", str(events / "[ct]*_*.jsonl")],
    }[how]
    proc = run("check", str(SCENARIOS), *args, "--results", str(RESULTS), "--format", "json")
    assert proc.returncode == 1, proc.stderr
    assert json.loads(proc.stdout)["summary"]["conversations"] == 6


@pytest.mark.parametrize(
    ("events", "message"),
    [
        (["nothing-*.jsonl"], "--events `nothing-*.jsonl` matches no file"),
        ([str(CARD_EVENTS), "-"], "several event sources must all be files or directories; `-`"),
    ],
    ids=["glob-matches-nothing", "mixed-with-stdin"],
)
def test_bad_several_sources_are_usage_errors(events: list[str], message: str) -> None:
    proc = run("check", str(CARD), "--events", *events)
    assert proc.returncode == 2
    assert message in proc.stderr


def test_a_fail_fast_table_marks_pending_verdicts_and_says_the_run_is_incomplete() -> None:
    proc = run("check", str(CARD), "--events", str(CARD_EVENTS), "--fail-fast", terminal=True)
    assert proc.returncode == 1
    rows = [line for line in proc.stdout.splitlines() if "pending" in line and "│" in line]
    assert rows and all(" — " in row for row in rows)  # no deciding event to name
    assert "incomplete:" in proc.stdout and "still pending" in proc.stdout


def test_with_one_scenario_a_conversation_naming_another_is_not_judged(tmp_path: Path) -> None:
    feed = tmp_path / "feed.jsonl"
    meta = json.dumps(json.dumps({"scenario": "transfer_mcp"}))
    feed.write_text(
        f'{{"conversation_id":"c","sequence":0,"metadata":{meta},'
        '"skill_activated":{"skill_id":"card_replace"}}\n'
    )
    proc = run("check", str(CARD), "--events", str(feed))
    assert "not judged: `c` (1 event): its scenario `transfer_mcp` is not loaded" in proc.stdout


def test_one_scenario_and_a_mixed_feed_say_what_judged_what() -> None:
    """The example batch (five scenarios' runs) checked with one scenario: the results
    folder names the others' runs, which are not judged; without it, every run is
    judged against the one given, and the report says so."""
    args = ("check", str(CARD), "--events", str(EXAMPLES / "events" / "all.jsonl"))
    named = run(*args, "--results", str(EXAMPLES / "results" / "2026-12-01T09-00-00"))
    assert named.returncode == 1
    assert "3 conversations: 1 passed, 2 failed; 36 assertions" in named.stdout
    assert named.stdout.count("not judged: `") == 10
    assert "its scenario `fraud_report` is not loaded" in named.stdout
    unnamed = run(*args)
    assert "13 conversations: 1 passed, 12 failed" in unnamed.stdout
    assert (
        "every conversation naming no other scenario was judged against `Customer "
        "replaces a damaged card`, the one scenario given"
    ) in " ".join(unnamed.stdout.split())


@pytest.mark.parametrize("command", ["check", "watch", "validate", "demo"])
def test_every_command_help_has_examples_and_the_exit_statuses(command: str) -> None:
    proc = run_process(command, "--help")
    assert proc.returncode == 0
    assert proc.stdout.count(f"mantle-stream {command}") >= 2  # two examples
    assert "exit status:" in proc.stdout and "141" in proc.stdout
    assert "SCENARIO" not in proc.stdout or "a scenario file, or a directory" in proc.stdout


def test_keep_finished_lists_the_most_recent_and_counts_the_rest() -> None:
    proc = run(
        "check", str(CARD), "--events", str(CARD_EVENTS), "--format", "json", "--keep-finished", "1"
    )
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    assert len(report["conversations"]) == 1
    assert (
        report["summary"]["conversations"],
        report["summary"]["failed"],
        report["summary"]["omitted"],
    ) == (3, 2, 2)
    assert "2 finished conversations counted but not listed" in proc.stderr


def test_junit_holds_every_conversation_even_those_let_go_of(tmp_path: Path) -> None:
    junit, whole = tmp_path / "kept.xml", tmp_path / "whole.xml"
    for path, keep in ((junit, ["--keep-finished", "1"]), (whole, [])):
        proc = run(
            "check",
            str(CARD),
            "--events",
            str(CARD_EVENTS),
            "--format",
            "json",
            *keep,
            "--junit",
            str(path),
        )
        assert proc.returncode == 1, proc.stderr
    # Two conversations left memory before the end: their cases were written as they
    # went, so the scenario's suite lists all three runs, with the totals of all three.
    root, full = ET.parse(junit).getroot(), ET.parse(whole).getroot()
    [suite] = root.findall("testsuite")
    runs = {
        p.get("value")
        for p in suite.iterfind("testcase/properties/property[@name='conversation_id']")
    }
    assert len(runs) == 3
    [total] = [p for p in suite.iterfind("properties/property") if p.get("name") == "runs"]
    assert total.get("value") == "3"
    assert {k: root.get(k) for k in ("tests", "failures", "errors")} == {
        k: full.get(k) for k in ("tests", "failures", "errors")
    }
    by_name = {s.get("name"): ET.tostring(s) for s in full.findall("testsuite")}
    assert {s.get("name"): ET.tostring(s) for s in root.findall("testsuite")} == by_name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.xml", "whole.xml"]


def _conversation_of(case: ET.Element) -> str:
    found = case.find("properties/property[@name='conversation_id']")
    assert found is not None
    return found.get("value", "")


def test_junit_runs_let_go_of_keep_their_recorded_run_numbers(tmp_path: Path) -> None:
    # evaluate_agent's run numbers in the reverse of the order the runs come in, so
    # that a number by position would differ from the recorded one.
    results = tmp_path / "results" / "card_replace_damaged"
    results.mkdir(parents=True)
    runs = sorted((RESULTS / "card_replace_damaged").glob("run_*.json"))
    for n, path in enumerate(reversed(runs), start=1):
        run_file = json.loads(path.read_text())
        run_file["run_index"] = n
        (results / f"run_{n}.json").write_text(json.dumps(run_file))
    names = []
    for keep in (["--keep-finished", "1"], []):
        path = tmp_path / f"junit{len(keep)}.xml"
        args = ["check", str(CARD), "--events", str(CARD_EVENTS)]
        args += ["--results", str(results.parent)]
        proc = run(*args, *keep, "--junit", str(path))
        assert proc.returncode == 1, proc.stderr
        cases = ET.parse(path).getroot().iterfind("testsuite/testcase")
        names.append(sorted((c.get("name") or "", _conversation_of(c)) for c in cases))
    # The runs let go of before the end are named by evaluate_agent's run index too.
    assert names[0] == names[1]


_UNCLOSED = "a `[` without its `]` (an IPv6 host goes in brackets: `[::1]:PORT`)"


@pytest.mark.parametrize(
    ("spec", "shown", "extra"),
    [
        ("http://u:s3cret@[::1:5005", "http://u:***@[::1:5005", ["--conversation", "c"]),
        ("https://[rasa/x", "https://[rasa/x", ["--conversation", "c"]),
        ("postgresql://u:s3cret@[db/rasa", "postgresql://u:***@[db/rasa", []),
        ("sqlite://[x/rasa.db", "sqlite://[x/rasa.db", []),
        ("follow:sqlite://[x/rasa.db", "follow:sqlite://[x/rasa.db", []),
        ("kafka://u:s3cret@[broker:9092/t", "kafka://u:***@[broker:9092/t", []),
    ],
    ids=["http", "https", "postgresql", "sqlite", "follow-sqlite", "kafka"],
)
def test_a_url_source_with_a_bracket_unclosed_is_a_one_line_usage_error(
    spec: str, shown: str, extra: list[str]
) -> None:
    # urlsplit raises ValueError("Invalid IPv6 URL") on it: never a traceback,
    # and the spec named as messages name it (without its password).
    proc = run("check", str(SCENARIOS), "--events", spec, *extra)
    assert proc.returncode == 2
    assert proc.stderr == f"mantle-stream: error: bad event source `{shown}`: {_UNCLOSED}\n"


SECRET = "Zq9-s3cr3t-TOKEN"


class _Echo(BaseHTTPRequestHandler):
    """A server at its worst with secrets: echoes the request (token and all) in a
    400, refuses with a 401, or hangs up without an answer, by the path's start."""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        if self.path.startswith("/hangup"):
            self.close_connection = True
            return
        status = 401 if self.path.startswith("/refuse") else 400
        body = f"{self.path} {self.headers.get('Authorization')}".encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def echo() -> Iterator[str]:
    with http_server(_Echo) as url:
        yield url


_S = SECRET
_ONE = ["--conversation", "c"]
# Every source spec kind, through its error paths, with a password or token in it.
SECRET_RUNS = {
    # sqlite
    "sqlite-missing": ["--events", "sqlite:///{tmp}/missing.db?password=" + _S],
    "sqlite-host": ["--events", f"sqlite://u:{_S}@h/x.db"],
    "sqlite-bracket": ["--events", f"follow:sqlite://u:{_S}@[h/x.db"],
    "sqlite-not-a-db": ["--events", "sqlite:///{tmp}/scenario.yml?token=" + _S],
    # postgresql
    "pg-percent": ["--events", f"postgresql://u:p%zz{_S}@127.0.0.1:1/db"],
    "pg-refused": ["--events", f"postgresql://u:{_S}@127.0.0.1:1/db?password={_S}"],
    "pg-sslmode": ["--events", f"postgresql://u:{_S}@127.0.0.1:1/db?sslmode=bogus"],
    "pg-bracket": ["--events", f"postgres://u:{_S}@[db/rasa"],
    "pg-scheme": ["--events", f"postgresql+psycopg2://u:{_S}@h/db"],
    # http(s): in the URL, and as --rasa-token / --rasa-jwt
    "https-which": ["--events", f"https://u:{_S}@127.0.0.1:1"],
    "https-refused": ["--events", f"https://u:{_S}@127.0.0.1:1", *_ONE],
    "http-query": ["--events", f"http://127.0.0.1:1/?token={_S}", *_ONE],
    "http-bracket": ["--events", f"http://u:{_S}@[::1:5005", *_ONE],
    "http-echo-token": ["--events", "{echo}/echo", "--rasa-token", _S, *_ONE],
    "http-echo-jwt": ["--events", "{echo}/echo", "--rasa-jwt", _S, *_ONE],
    "http-echo-user": ["--events", "{echo_user}/echo", *_ONE],
    "http-refuse": ["--events", "{echo}/refuse", "--rasa-token", _S, *_ONE],
    "http-hangup": ["--events", "{echo}/hangup", "--rasa-token", _S, *_ONE],
    # kafka: in the URL, and as --kafka-config sasl.password
    "kafka-bracket": ["--events", f"kafka://u:{_S}@[broker:9092/t"],
    "kafka-setting": ["--events", f"kafka://u:{_S}@127.0.0.1:1/t?bogus=1"],
    "kafka-config-pair": ["--events", "kafka://127.0.0.1:1/t", "--kafka-config",
                          f"sasl.password:{_S}"],
    "kafka-config-bad": ["--events", f"kafka://u:{_S}@127.0.0.1:1/t?security_protocol=bogus",
                         "--kafka-config", f"sasl.password={_S}"],
}  # fmt: skip


@pytest.mark.parametrize("case", list(SECRET_RUNS))
def test_no_password_or_token_is_ever_shown(
    case: str, tmp_path: Path, echo: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    quick_http_retries(monkeypatch)  # (3.5 s of backoff in two cases)
    (tmp_path / "scenario.yml").write_bytes(CARD.read_bytes())
    args = [
        a.format(tmp=tmp_path, echo=echo, echo_user=echo.replace("//", f"//u:{SECRET}@"))
        for a in SECRET_RUNS[case]
    ]
    outputs = ["--jsonl", str(tmp_path / "v.jsonl"), "--junit", str(tmp_path / "j.xml")]
    outputs += ["--html", str(tmp_path / "r.html"), "--format", "json"]
    proc = run("check", str(CARD), *args, *outputs)
    assert proc.returncode == 2, proc.stderr
    everything = proc.stdout + proc.stderr
    everything += "".join(p.read_text(errors="replace") for p in tmp_path.iterdir() if p.is_file())
    assert SECRET not in everything
    assert proc.stderr.strip(), "an error was said"
    if case == "kafka-bracket":  # and for rekey too
        proc = run("rekey", args[1], "--kafka-config", f"sasl.password={SECRET}")
        assert proc.returncode == 2 and SECRET not in proc.stdout + proc.stderr


_FULL = "/dev/full"  # every write fails with ENOSPC: a full disk
_HAS_FULL = os.path.exists(_FULL) and stat.S_ISCHR(os.stat(_FULL).st_mode)
_OUTPUTS = {"html": "r.html", "junit": "j.xml", "jsonl": "v.jsonl"}


@pytest.mark.parametrize("where", ["directory", "full-disk"])
@pytest.mark.parametrize("broken", list(_OUTPUTS))
def test_an_output_that_cannot_be_written_fails_on_its_own(
    tmp_path: Path, broken: str, where: str
) -> None:
    if where == "full-disk" and not _HAS_FULL:
        pytest.skip("no /dev/full here")
    bad = str(tmp_path / "in-the-way") if where == "directory" else _FULL
    (tmp_path / "in-the-way").mkdir()
    args = ["check", str(CARD), "--events", str(CARD_EVENTS), "--format", "json"]
    for option, name in _OUTPUTS.items():
        args += [f"--{option}", bad if option == broken else str(tmp_path / name)]
    proc = run(*args)
    reason = "Is a directory" if where == "directory" else "No space left on device"
    assert proc.stderr == f"mantle-stream: error: cannot write `{bad}`: {reason}\n"
    assert proc.returncode == 2  # (not the 1 of a failed verdict: a file CI reads is missing)
    assert json.loads(proc.stdout)["summary"]["conversations"] == 3  # the JSON report
    written = {p.name for p in tmp_path.iterdir() if p.is_file()}
    assert written == {name for option, name in _OUTPUTS.items() if option != broken}
    if broken != "junit":
        ET.parse(tmp_path / "j.xml")  # whole
    if _HAS_FULL:  # written in place, never renamed over
        assert stat.S_ISCHR(os.stat(_FULL).st_mode)


@pytest.mark.skipif(not _HAS_FULL, reason="no /dev/full here")
def test_a_json_report_standard_output_cannot_take_fails_on_its_own(tmp_path: Path) -> None:
    outputs = [
        a for option, name in _OUTPUTS.items() for a in (f"--{option}", str(tmp_path / name))
    ]
    with open(_FULL, "w") as full:
        proc = subprocess.run(
            [sys.executable, "-m", "mantle_stream", "check", str(CARD), "--events",
             str(CARD_EVENTS), "--format", "json", *outputs],
            stdout=full, stderr=subprocess.PIPE, text=True, cwd=ROOT, timeout=60, check=False,
        )  # fmt: skip
    assert proc.stderr == (
        "mantle-stream: error: cannot write the JSON report to standard output: "
        "No space left on device\n"
    )
    assert proc.returncode == 2
    assert {p.name for p in tmp_path.iterdir()} == set(_OUTPUTS.values())


def _wait_in_fifo_open(pid: int, most: float = 2.0) -> None:
    """Until a thread of process ``pid`` waits in open() for a FIFO's writer (Linux's
    ``wait_for_partner`` in /proc/PID/task/*/wchan), then 0.1 s more: about 0.6 s, not
    a fixed 2 s. At most ``most`` seconds where the kernel does not say."""
    deadline = time.monotonic() + most
    while time.monotonic() < deadline:
        for wchan in Path(f"/proc/{pid}/task").glob("*/wchan"):
            with contextlib.suppress(OSError):
                if wchan.read_text() == "wait_for_partner":
                    time.sleep(0.1)  # (its signal handler is installed as it opens)
                    return
        time.sleep(0.02)


@pytest.mark.parametrize("spec", ["{fifo}", "follow:{fifo}"], ids=["pipe", "followed-pipe"])
def test_ctrl_c_while_a_pipe_waits_for_its_writer_ends_the_run(tmp_path: Path, spec: str) -> None:
    """Opening a FIFO no one writes to waits for a writer: Ctrl-C ends that wait."""
    import signal

    fifo = tmp_path / "events.fifo"
    os.mkfifo(fifo)
    process = subprocess.Popen(
        [sys.executable, "-m", "mantle_stream", "check", str(SCENARIOS), "--events",
         spec.format(fifo=fifo)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        _wait_in_fifo_open(process.pid)
        assert process.poll() is None, process.communicate()
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=15)
    finally:
        process.kill()
    assert process.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
