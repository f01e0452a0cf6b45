"""The bundled examples are judged exactly as `examples/eval/expected.md` says.

expected.md was derived by hand from the assertion semantics, independently
of the engine; this test reads its per-conversation tables and compares every
verdict and decided_at with a real run over the interleaved feed, over each
per-scenario file and over the tracker document, paired with scenarios by the
results folder as `evaluate_agent` writes it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import mantle_stream as ms
from mantle_stream.core.events.flat import document_lines
from mantle_stream.core.recorded import compare, load_results
from mantle_stream.feeds.lines import split_lines

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "eval"
RESULTS = EXAMPLES / "results" / "2026-12-01T09-00-00"
ROW = re.compile(r"^\| (\d+) \| (\w+) \| (passed|failed) \| (\d+|end) \|")
HEADING = re.compile(r"^### `([^`]+)`")
Rows = dict[str, list[tuple[int, str, str, int | None]]]


def expected() -> Rows:
    table: Rows = {}
    current = None
    for line in (EXAMPLES / "expected.md").read_text().splitlines():
        if m := HEADING.match(line):
            current = m.group(1)
            table[current] = []
        elif current and (m := ROW.match(line)):
            at = None if m.group(4) == "end" else int(m.group(4))
            table[current].append((int(m.group(1)), m.group(2), m.group(3), at))
    return table


def evaluator() -> ms.Evaluator:
    runs = load_results(RESULTS)
    return ms.Evaluator(
        ms.load_scenarios([EXAMPLES / "scenarios"]),
        assignments={cid: run.scenario for cid, run in runs.items()},
    )


def rows(judged: ms.Evaluator) -> Rows:
    judged.finish_all()
    assert judged.unmatched() == []
    return {
        r.conversation_id: [(a.index, a.kind, a.verdict, a.decided_at) for a in r.assertions]
        for r in judged.results()
    }


def judge(events: Path) -> Rows:
    judged = evaluator()
    for chunk in split_lines(events.read_bytes()):
        judged.push_chunk(chunk)
    return rows(judged)


def test_expected_md_covers_fourteen_conversations() -> None:
    table = expected()
    assert len(table) == 14
    assert all(rows for rows in table.values())


def test_interleaved_feed_matches_expected_md() -> None:
    got = judge(EXAMPLES / "events" / "all.jsonl")
    assert len(got) == 13
    assert got == {cid: rows for cid, rows in expected().items() if cid in got}


@pytest.mark.parametrize(
    "events", sorted(p.name for p in (EXAMPLES / "events").glob("*.jsonl") if p.name != "all.jsonl")
)
def test_each_scenario_file_matches_expected_md(events: str) -> None:
    got = judge(EXAMPLES / "events" / events)
    want = expected()
    assert got == {cid: want[cid] for cid in got}


def test_the_tracker_document_matches_expected_md() -> None:
    [path] = (EXAMPLES / "trackers").glob("*.json")
    cid, lines = document_lines(path.read_bytes())
    judged = evaluator()
    judged.push_chunk(lines)
    assert rows(judged) == {cid: expected()[cid]}


def test_every_conversation_has_a_results_file_and_only_the_listed_ones_differ() -> None:
    runs = load_results(RESULTS)
    assert set(runs) == set(expected())
    judged = evaluator()
    for path in (EXAMPLES / "events").glob("*.jsonl"):
        if path.name != "all.jsonl":
            judged.push_chunk(path.read_bytes())
    judged.push_chunk(document_lines(next((EXAMPLES / "trackers").glob("*.json")).read_bytes())[1])
    judged.finish_all()
    differ = {
        (
            Path(runs[r.conversation_id].path).relative_to(RESULTS).as_posix(),
            d.index,
            d.verdict,
            d.recorded,
        )
        for r in judged.results()
        for d in compare(r, runs[r.conversation_id])
    }
    # expected.md, "Where the results folder differs": the buttons-payload divergence.
    assert differ == {(f"identity_check/run_{n}.json", 3, "passed", "failed") for n in (1, 2, 3)}


def test_the_demo_data_is_the_examples_folder_itself() -> None:
    demo = Path(ms.__file__).parent / "_demo_data"
    assert demo.resolve() == EXAMPLES.resolve()


def test_the_generated_files_are_up_to_date() -> None:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / "make_all.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
