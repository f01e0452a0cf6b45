"""``expected_tools`` in the outputs (issue 23, item 2): the JSON report, the table and
``--tool-calls``.

Sources: the issue (per-entry accuracy with turn and reason, recall and
precision; a ``gate: true`` entry fails the run only with ``--tool-calls``,
otherwise it is a metric), docs/outputs.md ("JSON report": keys are added, never
renamed). The command line runs on real files, called in this process (``cli.main``)
where no process of its own is needed, else as a subprocess (``--workers``, ``watch``).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from mantle_stream import Evaluator, load_scenario_text
from mantle_stream.outputs.html import render_html
from mantle_stream.outputs.junit import JunitWriter, run_cases
from mantle_stream.outputs.report import build_report
from mantle_stream.outputs.table import ReportTable
from mantle_stream.testing import conversation, session_ended, tool, user

from _harness import run_cli, run_cli_in_process

SCENARIO = """\
scenario:
  name: balance
  simulation_context: x
  goals:
    assertions:
      - tool_executed: {tool_name: get_card_limits, source: local}
    expected_tools:
      - tool_called: {tool_name: get_balance, arguments: {account: current}}
        gate: true
      - tool_group:
          - tool_called: get_balance
          - tool_called: get_card_limits
"""


def lines() -> list[bytes]:
    """c-1 meets every entry; c-2 misses the gate (other arguments) and the group (two
    turns). Every assertion passes in both."""
    return [
        *conversation(
            user("hi"),
            tool("get_balance", args={"account": "current"}),
            tool("get_card_limits"),
            user("thanks"),
            tool("complete_skill"),
            session_ended(),
            conversation_id="c-1",
        ),
        *conversation(
            user("hi"),
            tool("get_balance", args={"account": "savings"}),
            user("and limits"),
            tool("get_card_limits"),
            session_ended(),
            conversation_id="c-2",
        ),
    ]


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    scenario = tmp_path / "balance.yml"
    scenario.write_text(SCENARIO, encoding="utf-8")
    events = tmp_path / "events.jsonl"
    events.write_bytes(b"\n".join(lines()) + b"\n")
    return scenario, events


def check(
    files: tuple[Path, Path], *args: str, process: bool = False
) -> tuple[int, dict[str, Any]]:
    """``check`` on ``files`` with ``args``: its status and JSON report (``process``: as
    a subprocess, which ``--workers`` needs to start processes of its own)."""
    scenario, events = files
    run = run_cli if process else run_cli_in_process
    proc = run("check", str(scenario), "--events", str(events), "--format", "json", *args)
    return proc.returncode, json.loads(proc.stdout)


def test_the_report_lists_each_conversations_entries(files: tuple[Path, Path]) -> None:
    status, report = check(files)
    scenario = str(files[0])
    c1, c2 = report["conversations"]
    assert c2["expected_tools"] == {
        "entries": [
            {
                "index": 0,
                "kind": "tool_called",
                "verdict": "failed",
                "gate": True,
                "turn": None,
                "decided_at": None,
                "reason": "`get_balance` never ran with the listed arguments",
                "recall": 0.0,
                "precision": 0.0,
                "file": scenario,
                "line": 8,
            },
            {
                "index": 1,
                "kind": "tool_group",
                "verdict": "failed",
                "gate": False,
                "turn": 1,
                "decided_at": None,
                "reason": "no turn ran `get_balance`, `get_card_limits` and no other calls; "
                "turn 1 matched 1 of 2",
                "recall": 0.5,
                "precision": 1.0,
                "file": scenario,
                "line": 10,
            },
        ],
        "recall": 0.25,
        "precision": 0.5,
        "accuracy": 0.0,
    }
    assert [(e["verdict"], e["decided_at"]) for e in c1["expected_tools"]["entries"]] == [
        ("passed", 1),
        ("passed", 3),
    ]
    # Without --tool-calls a failed gate is a metric: both conversations pass.
    assert (status, c1["verdict"], c2["verdict"]) == (0, "passed", "passed")
    assert report["expected_tools"] == {
        "gated": False,
        "conversations": 2,
        "entries": 4,
        "passed": 2,
        "failed": 2,
        "gates_failed": 1,
        "recall": 0.625,
        "precision": 0.625,
        "accuracy": 0.5,
        "scenarios": [
            {
                "scenario": "balance",
                "index": 0,
                "kind": "tool_called",
                "gate": True,
                "verdict": "flaky",
                "judged": 2,
                "failed": 1,
                "recall": 0.5,
                "precision": 0.25,
                "file": scenario,
                "line": 8,
            },
            {
                "scenario": "balance",
                "index": 1,
                "kind": "tool_group",
                "gate": False,
                "verdict": "flaky",
                "judged": 2,
                "failed": 1,
                "recall": 0.75,
                "precision": 1.0,
                "file": scenario,
                "line": 10,
            },
        ],
    }


def test_with_tool_calls_a_failed_gate_fails_its_conversation(files: tuple[Path, Path]) -> None:
    status, report = check(files, "--tool-calls")
    assert status == 1
    assert [c["verdict"] for c in report["conversations"]] == ["passed", "failed"]
    assert (report["summary"]["passed"], report["summary"]["failed"]) == (1, 1)
    assert report["expected_tools"]["gated"] is True
    assert report["scenarios"][0]["pass_rate"] == 0.5


def test_watch_takes_tool_calls_too(files: tuple[Path, Path]) -> None:
    scenario, events = files
    proc = run_cli("watch", str(scenario), "--events", str(events), "--tool-calls")
    assert proc.returncode == 1, proc.stderr
    assert "`get_balance` never ran with the listed arguments" in proc.stdout + proc.stderr


def test_a_report_without_expected_tools_has_no_such_key(tmp_path: Path) -> None:
    scenario = tmp_path / "s.yml"
    scenario.write_text(SCENARIO.split("    expected_tools:")[0], encoding="utf-8")
    events = tmp_path / "events.jsonl"
    events.write_bytes(b"\n".join(lines()) + b"\n")
    proc = run_cli("check", str(scenario), "--events", str(events), "--format", "json")
    assert proc.returncode == 0
    assert "expected_tools" not in proc.stdout


def render(tool_calls: bool) -> list[str]:
    scenario = load_scenario_text(SCENARIO, "balance.yml")
    evaluator = Evaluator(scenario)
    for line in lines():
        evaluator.push_line(line)
    evaluator.finish_all()
    report = build_report(evaluator, tool_calls=tool_calls)
    console = Console(width=120, record=True, color_system=None)
    console.print(ReportTable(report, [scenario]))
    return [line.rstrip() for line in console.export_text().splitlines()]


def test_the_table_shows_each_conversations_entries_and_the_means() -> None:
    text = render(tool_calls=False)
    assert "  expected tools: recall 0.25, precision 0.50, accuracy 0.00" in text
    rows = [
        line for line in text if line.startswith("│ ") and ("called" in line or "group" in line)
    ]
    starts = [
        "│ 0 │ called gate │ ✔ passed │    1 │   1.00 │      0.50 │",
        "│ 1 │ group       │ ✔ passed │    1 │   1.00 │      1.00 │",
        "│ 0 │ called gate │ ✘ failed │    - │   0.00 │      0.00 │",
        "│ 1 │ group       │ ✘ failed │    1 │   0.50 │      1.00 │",
    ]
    assert [row[: len(start)] for row, start in zip(rows, starts, strict=True)] == starts
    assert " ".join(text[-2:]) == (
        "expected tools: 2 of 4 entries passed, recall 0.62, precision 0.62, accuracy 0.50; "
        "1 gate entry failed (metrics only: --tool-calls makes them fail the run)"
    )


def test_with_tool_calls_the_digest_names_the_failed_gate() -> None:
    text = render(tool_calls=True)
    at = text.index("1 failed gate entry of expected_tools (--tool-calls):")
    assert text[at + 1 : at + 3] == [
        "  balance.yml:8  expected_tools #0 tool_called ✘ failed in c-2",
        "    `get_balance` never ran with the listed arguments",
    ]


@pytest.mark.parametrize("gated", [False, True], ids=["metrics", "tool-calls"])
def test_junit_has_a_case_per_gate_entry(
    files: tuple[Path, Path], tmp_path: Path, gated: bool
) -> None:
    scenario, events = files
    junit = tmp_path / "junit.xml"
    args = ["--tool-calls"] if gated else []
    run_cli("check", str(scenario), "--events", str(events), "--junit", str(junit), *args)
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    cases = {
        c.get("name"): [child.tag for child in c if child.tag != "properties"]
        for c in suite.iter("testcase")
        if "expected_tools" in (c.get("name") or "")
    }
    assert cases == {
        "run 1 expected_tools #0 tool_called": ["system-out" if gated else "skipped"],
        "run 2 expected_tools #0 tool_called": ["failure" if gated else "skipped"],
    }
    failures = int(suite.get("failures") or 0)
    assert failures == (1 if gated else 0)
    case = next(
        c for c in suite.iter("testcase") if c.get("name") == "run 2 expected_tools #0 tool_called"
    )
    properties = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert (properties["verdict"], properties["recall"], case.get("line")) == ("failed", "0.0", "8")


@pytest.mark.parametrize("gated", [False, True], ids=["metrics", "tool-calls"])
def test_gate_cases_made_apart_are_written_as_the_writer_makes_them(
    tmp_path: Path, gated: bool
) -> None:
    # (What a --workers worker makes, numbered by the parent: the gates' cases too.)
    evaluator = Evaluator(load_scenario_text(SCENARIO, "balance.yml"))
    for line in lines():
        evaluator.push_line(line)
    evaluator.finish_all()
    report = build_report(evaluator, tool_calls=gated)
    files = []
    for made in (False, True):
        writer = JunitWriter(str(tmp_path / f"{made}.xml"), tool_calls=gated)
        if made:
            writer.add_made(
                {c.conversation_id: run_cases(c, tool_calls=gated) for c in report.conversations}
            )
        writer.finish(report)
        files.append((tmp_path / f"{made}.xml").read_bytes())
    assert files[1] == files[0]
    assert b"run 2 expected_tools #0 tool_called" in files[0]


def test_the_html_page_shows_the_entries() -> None:
    scenario = load_scenario_text(SCENARIO, "balance.yml")
    evaluator = Evaluator(scenario)
    for line in lines():
        evaluator.push_line(line)
    evaluator.finish_all()
    page = render_html(build_report(evaluator))
    assert '<section id="expected-tools"><h2>Expected tools</h2>' in page
    assert (
        "2 of 4 entries passed in 2 conversations · recall 0.62 · precision 0.62 · "
        "accuracy 0.50 · 1 gate entry failed (metrics only: --tool-calls makes them fail "
        "the run)"
    ) in page
    assert page.count("expected tools: recall") == 2  # one table per conversation
    assert "never ran with the listed arguments" in page


def test_workers_report_the_same_scores(files: tuple[Path, Path]) -> None:
    one = check(files, "--tool-calls")
    two = check(files, "--tool-calls", "--workers", "2", process=True)
    assert two == one
