"""The verdict record family (core/verdicts.py) and the JSON every output publishes.

The JSON report, the JSONL lines and the stop messages are published
contracts: field names and their order. The records are one family whose
shapes are turned into one another by name (``Shape.of``), so these tests pin
each shape byte for byte, and the command line's whole output on the example
runs against goldens written before the family existed
(``tests/golden/check_examples.*``; regenerate only for an intended change,
with the command in :func:`test_check_on_the_examples_prints_the_same_bytes`).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import get_type_hints

import msgspec
import pytest

import mantle_stream as ms
from mantle_stream.core.verdicts import (
    AssertionResult,
    ConversationResult,
    Decision,
    DecisionRecord,
    StopMessage,
    VerdictRecord,
)
from mantle_stream.outputs import jsonl
from mantle_stream.outputs.report import report_conversation

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).parent / "golden"

DECISION = Decision(
    "c-1", "Card", 5, "tool_executed", "failed", 19, 'no "x" run', 3, "eval/card.yml", 24
)
AT_END = Decision("c-1", "Card", 0, "skill_activated", "passed", None, "", 0)


def test_decision_keeps_its_fields_order_and_positional_constructor() -> None:
    assert Decision.__struct_fields__ == (
        "conversation_id",
        "scenario",
        "index",
        "kind",
        "verdict",
        "decided_at",
        "reason",
        "turn",
        "file",
        "line",
    )
    assert Decision("c", "s", 1, "k", "passed", None, "r").turn == 0
    assert Decision.__struct_config__.frozen and not Decision.__struct_config__.gc
    assert msgspec.json.encode(DECISION) == (
        b'{"conversation_id":"c-1","scenario":"Card","index":5,"kind":"tool_executed",'
        b'"verdict":"failed","decided_at":19,"reason":"no \\"x\\" run","turn":3,'
        b'"file":"eval/card.yml","line":24}'
    )


def test_the_family_declares_each_field_once_and_types_the_verdict() -> None:
    # A DecisionRecord is a VerdictRecord after its conversation, field for field;
    # AssertionResult and Decision add the turn before where the assertion is written.
    verdict = VerdictRecord.__struct_fields__
    assert DecisionRecord.__struct_fields__ == ("conversation_id", "scenario", *verdict)
    assert AssertionResult.__struct_fields__ == (*verdict[:5], "turn", *verdict[5:])
    assert Decision.__struct_fields__ == (
        "conversation_id",
        "scenario",
        *verdict[:5],
        "turn",
        *verdict[5:],
    )
    hints = get_type_hints(VerdictRecord)
    for record in (AssertionResult, DecisionRecord, Decision):
        record_hints = get_type_hints(record)
        for name, hint in hints.items():
            assert record_hints[name] == hint, (record, name)
    for shape in (VerdictRecord, AssertionResult, DecisionRecord, Decision, StopMessage):
        assert get_type_hints(shape)["verdict"] == ms.Verdict, shape
    assert get_type_hints(StopMessage)["assertion"] is VerdictRecord
    # The old names are the family's records, not copies.
    from mantle_stream.runner import StopAssertion
    from mantle_stream.runner import StopMessage as RunnerStopMessage

    assert StopAssertion is VerdictRecord and RunnerStopMessage is StopMessage
    assert jsonl.JsonlRecord is DecisionRecord
    assert ms.StopMessage is StopMessage and ms.VerdictRecord is VerdictRecord


def test_of_takes_the_fields_by_name() -> None:
    assert VerdictRecord.of(DECISION) == VerdictRecord(
        5, "tool_executed", "failed", 19, 'no "x" run', "eval/card.yml", 24
    )
    assert AssertionResult.of(DECISION) == AssertionResult(
        5, "tool_executed", "failed", 19, 'no "x" run', 3, "eval/card.yml", 24
    )
    assert DecisionRecord.of(DECISION) == DecisionRecord(
        "c-1", "Card", 5, "tool_executed", "failed", 19, 'no "x" run', "eval/card.yml", 24
    )
    assert type(VerdictRecord.of(AssertionResult.of(DECISION))) is VerdictRecord
    # The engine's positional AssertionResult (a pending one) still builds.
    assert AssertionResult(2, "memory_was_set", "pending") == AssertionResult(
        2, "memory_was_set", "pending", None, "", None
    )


@pytest.mark.parametrize(
    ("decision", "line"),
    [
        (
            DECISION,
            b'{"conversation_id":"c-1","scenario":"Card","index":5,"kind":"tool_executed",'
            b'"verdict":"failed","decided_at":19,"reason":"no \\"x\\" run",'
            b'"file":"eval/card.yml","line":24}\n',
        ),
        (
            AT_END,
            b'{"conversation_id":"c-1","scenario":"Card","index":0,"kind":"skill_activated",'
            b'"verdict":"passed","decided_at":null,"reason":"","file":null,"line":null}\n',
        ),
    ],
)
def test_a_jsonl_line_is_a_decision_without_its_turn(
    decision: Decision, line: bytes, tmp_path: Path
) -> None:
    path = tmp_path / "verdicts.jsonl"
    writer = jsonl.JsonlWriter.open(str(path))
    writer.on_decisions([decision])
    writer.close()
    assert path.read_bytes() == line


def test_a_stop_message_line() -> None:
    message = StopMessage("c-1", "failed", VerdictRecord.of(DECISION), 20)
    assert msgspec.json.encode(message) == (
        b'{"type":"stop","conversation_id":"c-1","verdict":"failed","assertion":'
        b'{"index":5,"kind":"tool_executed","verdict":"failed","decided_at":19,'
        b'"reason":"no \\"x\\" run","file":"eval/card.yml","line":24},"events":20,'
        b'"stop":true}'
    )


def test_a_report_row_has_no_turn_and_keeps_its_defaults() -> None:
    result = ConversationResult(
        "c-1",
        "Card",
        "failed",
        20,
        (AssertionResult.of(DECISION), AssertionResult(1, "memory_was_set", "pending")),
    )
    assert msgspec.json.encode(report_conversation(result)) == (
        b'{"conversation_id":"c-1","scenario":"Card","verdict":"failed","events":20,'
        b'"assertions":[{"index":5,"kind":"tool_executed","verdict":"failed",'
        b'"decided_at":19,"reason":"no \\"x\\" run","file":"eval/card.yml","line":24},'
        b'{"index":1,"kind":"memory_was_set","verdict":"pending","decided_at":null,'
        b'"reason":"","file":null,"line":null}]}'
    )


def test_check_on_the_examples_prints_the_same_bytes(tmp_path: Path) -> None:
    out = tmp_path / "verdicts.jsonl"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mantle_stream",
            "check",
            "examples/eval/scenarios",
            "--events",
            "examples/eval/events/all.jsonl",
            "--results",
            "examples/eval/results/2026-12-01T09-00-00",
            "--format",
            "json",
            "--jsonl",
            str(out),
        ],
        capture_output=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout == (GOLDEN / "check_examples.json").read_bytes()
    assert out.read_bytes() == (GOLDEN / "check_examples.jsonl").read_bytes()


def test_every_counter_is_named_once_and_derived_everywhere_by_name() -> None:
    """The evaluator's counters (Tally) are Statistics fields; a checkpoint keeps the
    SAVED ones under the same names; the report's counted warnings are the Warnings
    fields of the same names. A counter added to Tally reaches them all."""
    import msgspec

    from mantle_stream.core.engine.checkpoints import Checkpoint
    from mantle_stream.core.verdicts import COUNTED, SAVED, Statistics, Tally
    from mantle_stream.outputs.report import WARNING_COUNTS, Warnings

    assert set(COUNTED) <= set(Statistics.__struct_fields__)
    assert set(SAVED) <= set(COUNTED)
    assert set(SAVED) <= set(Checkpoint.__struct_fields__)
    tally = Tally()
    for i, name in enumerate(COUNTED, 1):
        setattr(tally, name, i)
    stats = Statistics(**tally.counted())
    assert all(getattr(stats, name) == i for i, name in enumerate(COUNTED, 1))
    restored = Tally()
    saved = {"version": 0, "scenarios": [], "conversations": [], **tally.saved()}
    restored.restore(msgspec.convert(saved, Checkpoint))
    assert restored.saved() == tally.saved()
    counted_warnings = {f.name for f in msgspec.structs.fields(Warnings) if f.name in COUNTED}
    assert set(WARNING_COUNTS) == counted_warnings
