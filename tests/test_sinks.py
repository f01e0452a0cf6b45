"""Outputs as sinks: what a run tells them, in order, through the real runner.

The command line composes its outputs (JSONL, JUnit, plain verdict lines) as
a :class:`~mantle_stream.outputs.sink.Sinks` list; these runs wire one the
same way (``on_decisions`` and ``on_stop`` to the runner, ``on_end`` with the
final report, then ``close``) over a real loopback socket and a real file.
"""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

import mantle_stream as ms
from mantle_stream.core.errors import FeedError
from mantle_stream.feeds import open_feed
from mantle_stream.outputs.jsonl import JsonlWriter
from mantle_stream.outputs.junit import JunitWriter
from mantle_stream.outputs.live import decision_line
from mantle_stream.outputs.plain import DecisionLines
from mantle_stream.outputs.sink import Sink, Sinks
from mantle_stream.runner import Runner

from _harness import line, scenario

pytestmark = pytest.mark.timeout(30)

SKILL = {"skill_activated": {"skill_id": "card_replace"}}
FORBID_CANNOT_HELP = {"bot_did_not_utter": {"utter_name": "utter_cannot_help"}}
CANNOT_HELP = {"text": "no", "utter_name": "utter_cannot_help"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Recorder:
    """A sink that writes down what it is told, in one log shared with others."""

    def __init__(self, name: str, log: list[tuple[str, str, Any]]) -> None:
        self.name = name
        self.log = log

    def on_decisions(self, decisions: list[ms.Decision]) -> None:
        verdicts = [(d.conversation_id, d.index, d.verdict) for d in decisions]
        self.log.append((self.name, "decisions", verdicts))

    def on_stop(self, message: ms.StopMessage) -> None:
        self.log.append((self.name, "stop", message))

    def on_end(self, report: ms.Report) -> None:
        self.log.append((self.name, "end", report))

    def close(self) -> None:
        self.log.append((self.name, "close", None))


def wired(evaluator: ms.Evaluator, sinks: Sinks, **options: Any) -> Runner:
    """A runner wired to the sinks the way the command line wires its own."""
    return Runner(
        evaluator,
        on_decisions=sinks.on_decisions,
        on_stop=sinks.on_stop,
        stop_unconnected=False,
        **options,
    )


@pytest.mark.anyio
async def test_every_sink_hears_decisions_stops_and_the_end_in_order() -> None:
    evaluator = ms.Evaluator([scenario(SKILL, FORBID_CANNOT_HELP)])
    log: list[tuple[str, str, Any]] = []
    sinks = Sinks([Recorder("a", log), Recorder("b", log)])
    runner = wired(evaluator, sinks, linger=0.2)
    wire: list[bytes] = []
    async with open_feed("tcp://127.0.0.1:0") as feed:
        host, port = feed.address.removeprefix("tcp://").rsplit(":", 1)  # type: ignore[union-attr]

        async def simulator() -> None:
            async with await anyio.connect_tcp(host, int(port)) as stream:
                await stream.send(line("c1", 0, user={"text": "hi"}))
                await stream.send(line("c1", 1, bot=CANNOT_HELP))
                buffer = bytearray()
                with anyio.fail_after(5):
                    while b"\n" not in buffer:
                        buffer.extend(await stream.receive())
                wire.append(bytes(buffer))
                await stream.send(line("c1", 2, session_ended={}))

        async with anyio.create_task_group() as tg:
            tg.start_soon(simulator)
            outcome = await runner.run(feed)
    report = ms.build_report(evaluator)
    sinks.on_end(report)
    sinks.close()

    assert outcome.stopped_early == ("c1",)
    [stop] = [entry for name, what, entry in log if (name, what) == ("a", "stop")]
    # What the sinks hear is what the simulator was sent, byte for byte.
    assert wire == [msgspec.json.encode(stop) + b"\n"]
    assert (stop.conversation_id, stop.verdict, stop.assertion.index) == ("c1", "failed", 1)
    expected: list[tuple[str, Any]] = [
        ("decisions", [("c1", 1, "failed")]),
        ("stop", stop),
        ("decisions", [("c1", 0, "skipped")]),  # the simulator stopped, then it ended
        ("end", report),
        ("close", None),
    ]
    # Each call reaches every sink, in the order they were added, before the next call.
    assert log == [(name, what, entry) for what, entry in expected for name in ("a", "b")]


@pytest.mark.anyio
async def test_wired_sinks_never_stop_a_conversation_read_from_a_file(tmp_path: Path) -> None:
    feed_file = tmp_path / "feed.jsonl"
    feed_file.write_bytes(line("c", 0, bot=CANNOT_HELP))  # settled (failed), never ended
    log: list[tuple[str, str, Any]] = []
    evaluator = ms.Evaluator([scenario(SKILL, FORBID_CANNOT_HELP)])
    async with open_feed(str(feed_file)) as feed:
        outcome = await wired(evaluator, Sinks([Recorder("a", log)])).run(feed)
    assert outcome.stopped_early == ()
    assert [(what, entry) for _, what, entry in log] == [
        ("decisions", [("c", 1, "failed")]),
        ("decisions", [("c", 0, "failed")]),  # judged at the end of input, not skipped
    ]

    # Given on_stop alone, the caller is the simulator: the file's conversation stops.
    stops: list[ms.StopMessage] = []
    evaluator = ms.Evaluator([scenario(SKILL, FORBID_CANNOT_HELP)])
    async with open_feed(str(feed_file)) as feed:
        outcome = await Runner(evaluator, on_stop=stops.append).run(feed)
    assert outcome.stopped_early == ("c",)
    assert [s.conversation_id for s in stops] == ["c"]
    assert [a.verdict for a in evaluator.results()[0].assertions] == ["skipped", "failed"]


class Decided:
    """A sink that keeps every decision."""

    def __init__(self) -> None:
        self.decisions: list[ms.Decision] = []

    def on_decisions(self, decisions: list[ms.Decision]) -> None:
        self.decisions += decisions

    def on_stop(self, message: ms.StopMessage) -> None:
        raise AssertionError("a file is never stopped")

    def on_end(self, report: ms.Report) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.mark.anyio
async def test_the_real_outputs_as_sinks(tmp_path: Path) -> None:
    feed_file = tmp_path / "feed.jsonl"
    feed_file.write_bytes(
        b"".join(
            line(cid, 0, bot={"text": "x", "utter_name": utter})
            + line(cid, 1, skill_activated=SKILL["skill_activated"])
            + line(cid, 2, session_ended={})
            for cid, utter in (("c1", "utter_ok"), ("c2", "utter_cannot_help"))
        )
    )
    printed = io.StringIO()
    junit = JunitWriter(str(tmp_path / "junit.xml"))
    decided = Decided()
    outputs: list[Sink] = [
        JsonlWriter.open(str(tmp_path / "verdicts.jsonl")),
        junit,
        DecisionLines(printed),
        decided,
    ]
    sinks = Sinks(outputs)
    evaluator = ms.Evaluator([scenario(SKILL, FORBID_CANNOT_HELP)], keep_finished=1)
    evaluator.on_let_go = junit.add  # c1's cases are written as it leaves memory
    async with open_feed(str(feed_file)) as feed:
        await wired(evaluator, sinks).run(feed)
    sinks.on_end(ms.build_report(evaluator))
    sinks.close()

    assert [(d.conversation_id, d.index, d.verdict) for d in decided.decisions] == [
        ("c1", 0, "passed"),
        ("c1", 1, "passed"),
        ("c2", 1, "failed"),
        ("c2", 0, "passed"),
    ]
    assert (tmp_path / "verdicts.jsonl").read_bytes() == b"".join(
        msgspec.json.encode(ms.DecisionRecord.of(d)) + b"\n" for d in decided.decisions
    )
    assert printed.getvalue() == "".join(decision_line(d) + "\n" for d in decided.decisions)
    root = ET.parse(tmp_path / "junit.xml").getroot()
    [suite] = root  # one scenario, its two runs: c1 let go of, c2 kept
    assert suite.get("name") == "t"
    assert [c.get("name") for c in suite.iter("testcase")] == [
        "run 1 #0 skill_activated",
        "run 1 #1 bot_did_not_utter",
        "run 2 #0 skill_activated",
        "run 2 #1 bot_did_not_utter",
    ]
    assert (root.get("tests"), root.get("failures")) == ("4", "1")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "feed.jsonl",
        "junit.xml",
        "verdicts.jsonl",
    ]


def test_closing_the_list_closes_every_sink_in_order_even_past_a_failure() -> None:
    log: list[tuple[str, str, Any]] = []

    class Broken(Recorder):
        def close(self) -> None:
            super().close()
            raise OSError("disk gone")

    sinks = Sinks([Recorder("a", log), Broken("b", log), Recorder("c", log)])
    with pytest.raises(OSError, match="disk gone"):
        sinks.close()
    assert [name for name, what, _ in log if what == "close"] == ["a", "b", "c"]


def test_a_sink_that_cannot_write_is_dropped_and_the_others_go_on() -> None:
    log: list[tuple[str, str, Any]] = []
    said: list[str] = []

    class Full(Recorder):
        def on_decisions(self, decisions: list[ms.Decision]) -> None:
            raise FeedError("cannot write `out`: No space left on device")

    sinks = Sinks([Recorder("a", log), Full("b", log), Recorder("c", log)], on_failure=said.append)
    evaluator = ms.Evaluator([scenario(FORBID_CANNOT_HELP)])
    decisions = evaluator.push_line(line("c1", 0, bot=CANNOT_HELP))
    sinks.on_decisions(decisions)
    sinks.on_end(ms.build_report(evaluator))
    sinks.close()
    # The full one was told nothing more, and closed once, when it failed.
    assert [(name, what) for name, what, _ in log] == [
        ("a", "decisions"),
        ("b", "close"),
        ("c", "decisions"),
        ("a", "end"),
        ("c", "end"),
        ("a", "close"),
        ("c", "close"),
    ]
    assert said == sinks.failures == ["cannot write `out`: No space left on device"]
