"""The command line, run for real as a subprocess (cli.md: commands, exit codes, report)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "eval"
SCENARIOS = EXAMPLES / "scenarios"
CARD = SCENARIOS / "card_replace_damaged.yml"
CARD_EVENTS = EXAMPLES / "events" / "card_replace_damaged.jsonl"


def run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mantle_stream", *args], input=None if stdin is None
        else stdin.decode(), capture_output=True, text=True, cwd=ROOT, timeout=60, check=False,
    )


def test_check_json_prints_the_cli_md_report_and_nothing_else() -> None:
    proc = run("check", str(SCENARIOS), "--events", str(EXAMPLES / "events" / "all.jsonl"),
               "--format", "json")
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)
    assert set(report) == {"conversations", "summary"}
    assert report["summary"] == {"conversations": 14, "passed": 6, "failed": 8,
                                 "assertions": 153, "unmatched": 0}
    first = report["conversations"][0]
    assert set(first) == {"conversation_id", "scenario", "verdict", "events", "assertions"}
    assert set(first["assertions"][0]) == {"index", "kind", "verdict", "decided_at", "reason"}
    assert proc.stderr == ""


def test_check_exits_zero_when_every_assertion_passes(tmp_path: Path) -> None:
    ok = tmp_path / "ok.jsonl"
    ok.write_text("".join(line + "\n" for line in CARD_EVENTS.read_text().splitlines()
                          if '"card-replace-ok-1"' in line))
    proc = run("check", str(CARD), "--events", str(ok), "--format", "json")
    assert proc.returncode == 0, proc.stdout
    assert json.loads(proc.stdout)["summary"]["passed"] == 1


def test_check_reads_standard_input() -> None:
    proc = run("check", str(CARD), "--events", "-", "--format", "json",
               stdin=CARD_EVENTS.read_bytes())
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["summary"]["conversations"] == 3


def test_table_format_shows_every_conversation_and_a_summary() -> None:
    proc = run("check", str(CARD), "--events", str(CARD_EVENTS))
    assert proc.returncode == 1
    for cid in ("card-replace-ok-1", "card-replace-express-2", "card-replace-split-3"):
        assert cid in proc.stdout
    assert "3 conversations: 1 passed, 2 failed; 36 assertions" in proc.stdout


def test_jsonl_gets_one_line_per_verdict(tmp_path: Path) -> None:
    out = tmp_path / "verdicts.jsonl"
    proc = run("check", str(CARD), "--events", str(CARD_EVENTS), "--format", "json",
               "--jsonl", str(out))
    assert proc.returncode == 1
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 36
    assert set(lines[0]) == {"conversation_id", "scenario", "index", "kind", "verdict",
                             "decided_at", "reason"}
    assert {(x["conversation_id"], x["index"]) for x in lines} == {
        (c, i) for c in ("card-replace-ok-1", "card-replace-express-2", "card-replace-split-3")
        for i in range(12)}


def test_fail_fast_stops_at_the_first_failure(tmp_path: Path) -> None:
    out = tmp_path / "verdicts.jsonl"
    proc = run("check", str(CARD), "--events", str(CARD_EVENTS), "--format", "json",
               "--fail-fast", "--jsonl", str(out))
    assert proc.returncode == 1
    decided = [json.loads(line) for line in out.read_text().splitlines()]
    assert decided[-1]["verdict"] == "failed"
    assert sum(d["verdict"] == "failed" for d in decided) >= 1
    assert len(decided) < 36


def test_several_scenarios_conversation_naming_an_unknown_scenario_is_reported(
        tmp_path: Path) -> None:
    feed = tmp_path / "feed.jsonl"
    feed.write_text(
        CARD_EVENTS.read_text()
        + '{"conversation_id":"stray","sequence":0,"metadata":{"scenario":"nope"},"user":{}}\n')
    proc = run("check", str(CARD), str(SCENARIOS / "transfer_mcp.yml"), "--events", str(feed),
               "--format", "json")
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    assert report["unmatched"] == [{"conversation_id": "stray", "scenario": "nope", "events": 1}]
    assert "conversation `stray` names scenario `nope`, which is not loaded" in proc.stderr


def test_validate_broken_file_prints_every_problem_with_position_and_exits_2() -> None:
    broken = EXAMPLES / "broken" / "broken_scenario.yml"
    proc = run("validate", str(broken))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    located = [line for line in proc.stderr.splitlines()
               if line.startswith(f"{broken}:") and ": error: " in line]
    assert len(located) >= 9
    assert proc.stderr.rstrip().endswith("errors in 1 file")


def test_validate_good_files_exits_0() -> None:
    proc = run("validate", str(SCENARIOS))
    assert proc.returncode == 0
    assert proc.stdout.count(": ok: ") == 5


@pytest.mark.parametrize(("args", "message"), [
    (["check", str(CARD), "--events", "/nonexistent/feed.jsonl"],
     "mantle-stream: error: cannot read events from `/nonexistent/feed.jsonl`"),
    (["check", "/nonexistent.yml", "--events", str(CARD_EVENTS)],
     "/nonexistent.yml:1:1: error: cannot read: No such file or directory"),
    (["check", str(CARD)], "the following arguments are required: --events"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
], ids=["missing-feed", "missing-scenario", "no-events", "unknown-command"])
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
    proc = run("--version")
    assert proc.returncode == 0
    assert proc.stdout.startswith("mantle-stream ")
