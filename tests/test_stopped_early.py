"""One meaning of *stopped early* in every output: a stop was sent for the conversation
(a stop message, the gate's ``[]``, the Kafka stop topic), whether or not anything was
still pending then. Before, the report, JUnit and HTML said "has a skipped assertion":
a conversation stopped once all its assertions had passed was stopped in the live view
and not in them."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET

from rich.console import Console

from mantle_stream.core.engine.evaluator import Evaluator
from mantle_stream.outputs.github import step_summary
from mantle_stream.outputs.html import render_html
from mantle_stream.outputs.jsonl import JsonlWriter
from mantle_stream.outputs.junit import junit_xml
from mantle_stream.outputs.report import build_report
from mantle_stream.outputs.table import ReportTable
from mantle_stream.testing import conversation, scenario, skill, tool, user

SCENARIO = scenario(
    {"skill_activated": {"skill_id": "card_replace"}},
    {"tool_executed": {"tool_name": "order_replacement", "source": "local"}},
    name="card",
)
ALL_PASS = [user("hi"), skill("activated", "card_replace"), tool("order_replacement")]


def _judge() -> tuple[Evaluator, bytes]:
    """Four runs: ``settled`` is stopped once both assertions passed (nothing left to
    skip), ``pending`` with one still pending, ``judged-on`` by a Kafka member (its
    simulator may play on: nothing skipped), ``played`` not stopped."""
    evaluator = Evaluator(SCENARIO)
    jsonl = io.BytesIO()
    sink = JsonlWriter(jsonl)
    runs = {
        "settled": ALL_PASS,
        "pending": [user("hi"), skill("activated", "card_replace")],
        "judged-on": ALL_PASS[:2],
        "played": ALL_PASS,
    }
    for cid, events in runs.items():
        decisions = evaluator.push_chunk(b"".join(conversation(*events, conversation_id=cid)))
        sink.on_decisions(decisions)
    evaluator.stop("settled")  # (what StopRule does for a settled run)
    evaluator.stop("pending")
    evaluator.stop("judged-on", skip_pending=False)
    sink.on_decisions(evaluator.push_chunk(b"".join(
        conversation(tool("order_replacement"), conversation_id="judged-on", first=2)
    )))  # fmt: skip
    sink.on_decisions(evaluator.finish_all())
    return evaluator, jsonl.getvalue()


STOPPED = {"settled", "pending", "judged-on"}


def test_every_output_calls_the_same_conversations_stopped_early() -> None:
    evaluator, jsonl = _judge()
    report = build_report(evaluator)
    # JSON
    data = json.loads(report.to_json())
    assert {c["conversation_id"] for c in data["conversations"] if c.get("stopped_early")} == (
        STOPPED
    )
    assert data["scenarios"][0]["stopped_early"] == 3
    # Only what was still pending when a stop that skips came is skipped.
    verdicts = {c["conversation_id"]: [a["verdict"] for a in c["assertions"]] for c in
                data["conversations"]}  # fmt: skip
    assert verdicts == {
        "settled": ["passed", "passed"],
        "pending": ["passed", "skipped"],
        "judged-on": ["passed", "passed"],
        "played": ["passed", "passed"],
    }
    # JUnit: the suite's property.
    suite = ET.fromstring(junit_xml(report)).find("testsuite")
    assert suite is not None
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["stopped_early"] == "3"
    # HTML: the count and each stopped run's mark.
    html = render_html(report)
    assert "3 conversations stopped early" in html
    assert html.count('<g class="stop">') == 3
    # GitHub step summary: the scenario row's "stopped early" cell.
    summary = step_summary(report)
    header = next(line for line in summary.splitlines() if "stopped early" in line)
    row = next(line for line in summary.splitlines() if line.startswith("| card "))
    cells = dict(zip(header.split("|"), row.split("|"), strict=True))
    assert cells[" stopped early "].strip() == "3"
    # The terminal's table by scenario: its "stopped" column.
    console = Console(width=160, record=True, color_system=None)
    console.print(ReportTable(report)._by_scenario())
    table = console.export_text()
    head = next(line for line in table.splitlines() if "stopped" in line)
    row = next(line for line in table.splitlines() if line.lstrip("│ ").startswith("card"))
    cells = dict(zip([c.strip() for c in head.split("┃")], [c.strip() for c in row.split("│")],
                     strict=True))  # fmt: skip
    assert cells["stopped"] == "3"
    # JSONL: a skipped verdict only for a run a stop skipped; none for the others.
    lines = [json.loads(line) for line in jsonl.splitlines()]
    assert {d["conversation_id"] for d in lines if d["verdict"] == "skipped"} == {"pending"}
