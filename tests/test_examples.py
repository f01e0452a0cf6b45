"""The bundled examples are judged exactly as `examples/eval/expected.md` says.

expected.md was derived by hand from spec/semantics.md, independently of the
engine; this test reads its per-conversation tables and compares every
verdict and decided_at with a real run over the interleaved feed and over
each per-scenario file.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import mantle_stream as ms
from mantle_stream._sources import split_lines

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "eval"
ROW = re.compile(r"^\| (\d+) \| (\w+) \| (passed|failed) \| (\d+|end) \|")
HEADING = re.compile(r"^### `([^`]+)`")


def expected() -> dict[str, list[tuple[int, str, str, int | None]]]:
    table: dict[str, list[tuple[int, str, str, int | None]]] = {}
    current = None
    for line in (EXAMPLES / "expected.md").read_text().splitlines():
        if m := HEADING.match(line):
            current = m.group(1)
            table[current] = []
        elif current and (m := ROW.match(line)):
            at = None if m.group(4) == "end" else int(m.group(4))
            table[current].append((int(m.group(1)), m.group(2), m.group(3), at))
    return table


def judge(events: Path) -> dict[str, list[tuple[int, str, str, int | None]]]:
    evaluator = ms.Evaluator(ms.load_scenarios([EXAMPLES / "scenarios"]), source=str(events))
    for chunk in split_lines(events.read_bytes()):
        evaluator.push_chunk(chunk)
    evaluator.finish_all()
    assert evaluator.unmatched() == []
    return {r.conversation_id: [(a.index, a.kind, a.verdict, a.decided_at) for a in r.assertions]
            for r in evaluator.results()}


def test_expected_md_covers_fourteen_conversations() -> None:
    table = expected()
    assert len(table) == 14
    assert all(rows for rows in table.values())


def test_interleaved_feed_matches_expected_md() -> None:
    assert judge(EXAMPLES / "events" / "all.jsonl") == expected()


@pytest.mark.parametrize("events", sorted(p.name for p in (EXAMPLES / "events").glob("*.jsonl")
                                          if p.name != "all.jsonl"))
def test_each_scenario_file_matches_expected_md(events: str) -> None:
    got = judge(EXAMPLES / "events" / events)
    want = expected()
    assert got == {cid: want[cid] for cid in got}


def test_demo_data_is_an_exact_copy_of_the_examples() -> None:
    demo = Path(ms.__file__).parent / "_demo_data"
    wanted = {p.name: p.read_bytes() for p in (EXAMPLES / "scenarios").glob("*.yml")}
    wanted |= {p.name: p.read_bytes() for p in (EXAMPLES / "events").glob("*.jsonl")
               if p.name != "all.jsonl"}
    assert {p.name: p.read_bytes() for p in demo.iterdir()} == wanted
