"""``--annotations github`` run for real as a subprocess, in and out of GitHub Actions.

The card scenario's three example runs: one passes, two fail, so four of its
assertions are flaky (1 of 3 runs failed each).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CARD = ROOT / "examples" / "eval" / "scenarios" / "card_replace_damaged.yml"
CARD_EVENTS = ROOT / "examples" / "eval" / "events" / "card_replace_damaged.jsonl"
FLAKY_TOOL = (
    f"::error file={CARD},line=42,title=Customer replaces a damaged card #5 tool_executed "
    "(flaky)::"
    "flaky: 1/3 runs failed (in sim-b4802004-f8c7-4a8d-9d87-921bd4592b53): tool "
    "`order_replacement` never ran as specified"
)


def run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    return subprocess.run(
        [sys.executable, "-m", "mantle_stream", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**clean, **env},
        timeout=60,
        check=False,
    )


def in_actions(summary: Path) -> dict[str, str]:
    return {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)}


def test_in_github_actions_check_annotates_after_the_table_and_writes_the_summary(
    tmp_path: Path,
) -> None:
    summary = tmp_path / "summary.md"
    proc = run("check", str(CARD), "--events", str(CARD_EVENTS), env=in_actions(summary))
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    first = next(i for i, text in enumerate(lines) if text.startswith("::"))
    assert first > 0 and "3 conversations" in proc.stdout.split("::error", 1)[0]
    commands = lines[first:]  # the annotations come last, all of them
    # Each failed in a run: the job fails (exit 1) and its annotations say where.
    assert all(c.startswith("::error ") for c in commands) and len(commands) == 4
    assert any(c.startswith(FLAKY_TOOL) for c in commands)
    text = summary.read_text(encoding="utf-8")
    assert text.startswith("## mantle-stream: 1/3 runs passed across 1 scenario\n")
    assert "| Customer replaces a damaged card | 3 | 1 | 2 | 0 | 0 | 33.3% | no | yes |" in text
    assert f"- `{CARD}:42` Customer replaces a damaged card #5 tool_executed" in text


def test_with_format_json_the_annotations_go_to_standard_error(tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    proc = run(
        "check", str(CARD), "--events", str(CARD_EVENTS), "--format", "json",
        env=in_actions(summary),
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    report = json.loads(proc.stdout)  # standard output holds the report alone
    assert report["summary"]["conversations"] == 3
    assert "::" not in proc.stdout
    assert any(c.startswith(FLAKY_TOOL) for c in proc.stderr.splitlines())
    assert summary.exists()


def test_watch_into_a_pipe_annotates_after_the_verdict_lines(tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    proc = run("watch", str(CARD), "--events", str(CARD_EVENTS), env=in_actions(summary))
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) > 10 and all(text.startswith("::error ") for text in lines[-4:])
    assert not any(text.startswith("::") for text in lines[:-4])
    assert "1/3 runs passed" in summary.read_text(encoding="utf-8")


def test_outside_github_actions_nothing_is_printed_or_written(tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    for env in ({}, {"GITHUB_STEP_SUMMARY": str(summary)}, {"GITHUB_ACTIONS": "false"}):
        proc = run("check", str(CARD), "--events", str(CARD_EVENTS), env=env)
        assert proc.returncode == 1, proc.stderr
        assert not any(text.startswith("::") for text in proc.stdout.splitlines())
        assert "::" not in proc.stderr
    assert not summary.exists()


def test_annotations_can_be_asked_for_or_turned_off(tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    off = run(
        "check", str(CARD), "--events", str(CARD_EVENTS), "--annotations", "none",
        env=in_actions(summary),
    )  # fmt: skip
    assert off.returncode == 1 and "\n::" not in off.stdout and not summary.exists()
    # Asked for outside Actions: annotations, and no summary without a path.
    on = run("check", str(CARD), "--events", str(CARD_EVENTS), "--annotations", "github", env={})
    assert any(c.startswith(FLAKY_TOOL) for c in on.stdout.splitlines())
