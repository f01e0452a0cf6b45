"""Every execution strategy feeds every sink: an output added in one line hears them all.

``mantle_stream.run.sinks.OUTPUTS`` is the one place the outputs are composed.
Each test adds a recording sink there (one line, as docs/architecture.md's
recipe says) and runs a strategy: one process, ``check --workers 2``, the
gate in front of a stand-in agent, and (slow set: it needs the broker) a
Kafka member. The recording sink must hear the decisions every other sink
heard (the JSONL lines), the same ones under every strategy that reads the
same events, and the report once.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from mantle_stream.core.engine.evaluator import Evaluator
from mantle_stream.core.scenario.load import load_scenarios
from mantle_stream.core.verdicts import Decision, DecisionRecord, StopMessage
from mantle_stream.outputs.junit import JunitWriter, RunCases
from mantle_stream.outputs.report import Report
from mantle_stream.run import sinks as composition
from mantle_stream.run.config import OutputsConfig, RunConfig, SourcesConfig
from mantle_stream.run.gate import gate_for
from mantle_stream.run.sinks import Composing, compose_sinks

from _harness import REPOSITORY, run_cli_in_process
from _kafka import FAST_CONSUMER, KafkaBroker, kafka_broker
from _stores import EVENTS, SCENARIOS, example_lines

__all__ = ["kafka_broker"]

EXAMPLES = REPOSITORY / "examples" / "eval"


class Recording:
    """A sink that keeps what it is told."""

    def __init__(self) -> None:
        self.decisions: list[Decision] = []
        self.stops: list[StopMessage] = []
        self.reports: list[Report] = []
        self.closed = False

    def on_decisions(self, decisions: list[Decision]) -> None:
        self.decisions += decisions

    def on_stop(self, message: StopMessage) -> None:
        self.stops.append(message)

    def on_end(self, report: Report) -> None:
        self.reports.append(report)

    def close(self) -> None:
        self.closed = True

    def lines(self) -> list[dict[str, Any]]:
        """The decisions as the JSONL sink writes them."""
        return [msgspec.to_builtins(DecisionRecord.of(d)) for d in self.decisions]


@pytest.fixture
def recording(monkeypatch: pytest.MonkeyPatch) -> Iterator[Recording]:
    """A new output, added the way the recipe says: one line of ``OUTPUTS``."""
    sink = Recording()

    def make(c: Composing) -> Recording:
        return sink

    monkeypatch.setattr(composition, "OUTPUTS", [*composition.OUTPUTS, make])
    yield sink


def _by_conversation(lines: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for line in lines:
        out.setdefault(line["conversation_id"], []).append(line)
    return out


def _check(tmp_path: Path, recording: Recording, workers: str) -> dict[str, Any]:
    """``check --workers N`` with every file output; what each output got."""
    out = tmp_path / f"w{workers}"
    out.mkdir()
    done = run_cli_in_process(
        "check", str(SCENARIOS), "--events", str(EVENTS), "--workers", workers,
        "--format", "json", "--jsonl", str(out / "v.jsonl"), "--junit", str(out / "j.xml"),
        "--html", str(out / "r.html"),
    )  # fmt: skip
    assert done.returncode == 1, done.stderr  # 8 of the 13 recorded runs fail
    jsonl = [json.loads(x) for x in (out / "v.jsonl").read_text().splitlines()]
    assert recording.lines() == jsonl  # the added sink heard what the JSONL sink heard
    assert len(recording.reports) == 1 and recording.closed
    return {
        "decisions": _by_conversation(jsonl),
        "report": json.loads(done.stdout),
        "junit": (out / "j.xml").read_text(),
        "html": (out / "r.html").read_text(),
    }


def test_an_output_added_in_one_line_hears_one_process_and_two_workers_alike(
    tmp_path: Path, recording: Recording
) -> None:
    one = _check(tmp_path, recording, "1")
    recording.__init__()  # type: ignore[misc]  # (the same sink, heard afresh)
    two = _check(tmp_path, recording, "2")
    assert sum(map(len, one["decisions"].values())) == 143
    # Each conversation's decisions in the order decided; the workers' grouped by
    # conversation (one process interleaves them as the feed does).
    assert two["decisions"] == one["decisions"]
    assert list(two["decisions"]) == [c["conversation_id"] for c in two["report"]["conversations"]
                                      if c["conversation_id"] in two["decisions"]]  # fmt: skip
    assert two["report"] == one["report"]
    assert two["junit"] == one["junit"] and two["html"] == one["html"]


def test_watch_into_a_pipe_tells_the_added_output_what_it_prints(recording: Recording) -> None:
    done = run_cli_in_process("watch", str(SCENARIOS), "--events", str(EVENTS))
    assert done.returncode == 1, done.stderr
    printed = [line for line in done.stdout.splitlines() if line.startswith(("PASS", "FAIL"))]
    assert len(recording.decisions) == 143 and len(recording.reports) == 1
    assert len(printed) <= len(recording.decisions)


def test_the_gate_tells_the_added_output_what_it_judges(
    tmp_path: Path, recording: Recording
) -> None:
    pytest.importorskip("uvicorn")
    from mantle_stream.gate.standin import StandInAgent, recordings, runs_of, serving, simulate

    scenarios = load_scenarios([str(EXAMPLES / "scenarios" / "card_replace_damaged.yml")])
    recorded = recordings([line.encode() for line in example_lines()])
    runs = runs_of(recorded)
    jsonl = tmp_path / "gate.jsonl"
    config = RunConfig(
        command="gate",
        scenarios=(str(EXAMPLES / "scenarios"),),
        outputs=OutputsConfig(format="json", jsonl=str(jsonl)),
        sources=SourcesConfig(),
    )
    config = msgspec.structs.replace(
        config, gate=msgspec.structs.replace(config.gate, listen="127.0.0.1:0")
    )
    evaluator = Evaluator(scenarios, source="gate")
    composed = compose_sinks(config, evaluator)

    async def play() -> None:
        async with serving(StandInAgent(recorded)) as upstream, anyio.create_task_group() as tg:
            gate = gate_for(
                msgspec.structs.replace(
                    config, gate=msgspec.structs.replace(config.gate, upstream=upstream)
                ),
                scenarios,
                evaluator,
                composed.sinks,
                {},
            )
            tg.start_soon(gate.run)
            await simulate(gate.address, runs, concurrency=8)
            gate.stop()

    anyio.run(play)
    composed.sinks.close()
    written = [json.loads(x) for x in jsonl.read_text().splitlines()]
    assert written and recording.lines() == written
    stopped = [r.conversation_id for r in runs if r.stopped]
    assert stopped and sorted(m.conversation_id for m in recording.stops) == sorted(stopped)


@pytest.mark.timeout(120)
def test_a_kafka_member_tells_the_added_output_what_one_process_decides(
    tmp_path: Path, recording: Recording, kafka_broker: KafkaBroker
) -> None:
    topic = "strategies"
    kafka_broker.create_topic(topic, 4)
    rows = [json.loads(line) for line in example_lines()]
    kafka_broker.produce(topic, [(r["conversation_id"], json.dumps(r)) for r in rows])
    one = _check(tmp_path, recording, "1")["decisions"]
    recording.__init__()  # type: ignore[misc]
    jsonl = tmp_path / "member.jsonl"
    done = run_cli_in_process(
        "check", str(SCENARIOS), "--events", f"kafka://{kafka_broker.bootstrap}/{topic}",
        "--format", "json", "--jsonl", str(jsonl),
        *(f"--kafka-config={k}={v}" for k, v in FAST_CONSUMER.items()),
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    written = [json.loads(x) for x in jsonl.read_text().splitlines()]
    assert recording.lines() == written
    assert _by_conversation(written) == one


class MadeApart:
    """A sink rendered apart: its lines say which process made them."""

    def __init__(self) -> None:
        self.decisions: list[Decision] = []
        self.written = b""

    def on_decisions(self, decisions: list[Decision]) -> None:
        self.decisions += decisions

    def on_stop(self, message: StopMessage) -> None:
        pass

    def on_end(self, report: Report) -> None:
        pass

    def close(self) -> None:
        pass

    @staticmethod
    def lines(decisions: Iterable[Decision]) -> bytes:
        return b"".join(f"{os.getpid()} {d.conversation_id}\n".encode() for d in decisions)

    def write_lines(self, data: bytes) -> None:
        self.written += data


def test_under_workers_a_sink_rendered_apart_has_its_lines_made_by_the_workers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sink = MadeApart()
    monkeypatch.setattr(composition, "OUTPUTS", [*composition.OUTPUTS, lambda c: sink])
    done = run_cli_in_process("check", str(SCENARIOS), "--events", str(EVENTS), "--workers", "2",
                              "--format", "json")  # fmt: skip
    assert done.returncode == 1, done.stderr
    made = [line.split() for line in sink.written.decode().splitlines()]
    assert len(made) == 143 and not sink.decisions  # the lines, not the decisions
    assert {int(pid) for pid, _ in made}.isdisjoint({os.getpid()})  # made in the workers
    conversations = [c["conversation_id"] for c in json.loads(done.stdout)["conversations"]]
    assert list(dict.fromkeys(cid for _, cid in made)) == conversations  # in the report's order


def test_under_workers_the_junit_cases_of_each_run_are_made_by_the_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The parent only numbers them and writes them: the file is one process's.
    handed: list[str] = []
    add_made = JunitWriter.add_made

    def recorded(self: JunitWriter, made: Mapping[str, RunCases]) -> None:
        handed.extend(made)
        add_made(self, made)

    monkeypatch.setattr(JunitWriter, "add_made", recorded)
    files = {}
    for workers in ("1", "2"):
        junit = tmp_path / f"j{workers}.xml"
        done = run_cli_in_process("check", str(SCENARIOS), "--events", str(EVENTS), "--workers",
                                  workers, "--format", "json", "--junit", str(junit))  # fmt: skip
        assert done.returncode == 1, done.stderr
        files[workers] = junit.read_bytes()
    conversations = [c["conversation_id"] for c in json.loads(done.stdout)["conversations"]]
    assert sorted(handed) == sorted(conversations)  # (two workers', one process none)
    assert files["2"] == files["1"]
