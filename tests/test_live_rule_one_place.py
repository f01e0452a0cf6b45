"""A live-loop rule lives in one place (core/live.py): change it there and every live
loop follows — the runner's stop messages and the gate's ``[]`` answers alike.

The toy rule stops a conversation at its first decision, whatever it is: the runner
then sends a stop message for a conversation that has only passed one of its two
assertions, and the gate ends every run, passing ones too, at its next message.
(The Kafka member builds the same ``StopRule``: ``kafka/member.py``.)
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import anyio
import pytest

import mantle_stream as ms
from mantle_stream.core.live import StopRule
from mantle_stream.core.verdicts import Decision, StopMessage
from mantle_stream.feeds import open_feed
from mantle_stream.runner import Runner

from _harness import line, scenario

pytestmark = [pytest.mark.timeout(60)]

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "eval"


def _first_decision(
    self: StopRule, decisions: Iterable[Decision]
) -> list[tuple[StopMessage, Decision]]:
    """The toy rule: stop each open conversation at its first decision."""
    out = []
    for decision in decisions:
        cid = decision.conversation_id
        if cid in self.notified or not self.evaluator.is_open(cid):
            continue
        self.notified.add(cid)
        self.stopped.append(cid)
        if self.record:
            self.evaluator.stop(cid, decision, skip_pending=self.skip_pending)
        out.append((StopMessage.of(self.evaluator.result(cid), decision), decision))
    return out


@pytest.fixture
def toy_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(StopRule, "settling", _first_decision)


def _runner_stops() -> list[StopMessage]:
    evaluator = ms.Evaluator(
        [
            scenario(
                {"skill_activated": {"skill_id": "card_replace"}},
                {"skill_activated": {"skill_id": "card_block"}},
            )
        ]
    )
    stops: list[StopMessage] = []

    async def play() -> None:
        async with open_feed("tcp://127.0.0.1:0") as feed:
            host, port = feed.address.removeprefix("tcp://").rsplit(":", 1)  # type: ignore[union-attr]

            async def client() -> None:
                async with await anyio.connect_tcp(host, int(port)) as stream:
                    await stream.send(line("c", 0, skill_activated={"skill_id": "card_replace"}))
                    await anyio.sleep(0.3)  # a stop message, if any, arrives meanwhile
                    await stream.send(line("c", 1, session_ended={}))

            async with anyio.create_task_group() as tg:
                tg.start_soon(client)
                await Runner(evaluator, linger=0.2, on_stop=stops.append).run(feed)

    anyio.run(play)
    return stops


def test_the_runner_follows_the_rule_written_in_core_live() -> None:
    assert _runner_stops() == []  # one of two passed: not settled, no stop


def test_the_runner_follows_a_rule_changed_in_core_live(toy_rule: None) -> None:
    stops = _runner_stops()
    assert [(s.conversation_id, s.verdict, s.assertion.kind) for s in stops] == [
        ("c", "pending", "skill_activated")  # the conversation's verdict: not settled
    ]


def _gate_stopped() -> dict[str, str]:
    """The runs of the example batch the gate stopped, each with its verdict."""
    pytest.importorskip("uvicorn")
    from mantle_stream.gate.proxy import GateOptions
    from mantle_stream.gate.runs import GateJudge
    from mantle_stream.gate.serve import Gate
    from mantle_stream.gate.standin import StandInAgent, recordings, runs_of, serving, simulate

    scenarios = ms.load_scenarios([str(EXAMPLES / "scenarios" / "card_replace_damaged.yml")])
    lines = (EXAMPLES / "events" / "all.jsonl").read_bytes().splitlines()
    recorded = recordings(lines)
    runs = runs_of(recorded)

    async def play() -> GateJudge:
        async with serving(StandInAgent(recorded)) as upstream, anyio.create_task_group() as tg:
            judge = GateJudge(scenarios, stop="failed", upstream=upstream)
            gate = Gate(judge, GateOptions(upstream=upstream), listen=("127.0.0.1", 0))
            tg.start_soon(gate.run)
            await simulate(gate.address, runs, concurrency=8)
            gate.stop()
        return judge

    judge = anyio.run(play)
    return {cid: judge.main.result(cid).verdict for cid in judge.stopped_early}


def test_the_gate_follows_the_rule_written_in_core_live() -> None:
    stopped = _gate_stopped()
    assert stopped and set(stopped.values()) == {"failed"}


def test_the_gate_follows_a_rule_changed_in_core_live(toy_rule: None) -> None:
    stopped = _gate_stopped()
    # Runs that had not failed when the toy rule stopped them: ended at their next message.
    assert "failed" in stopped.values() and set(stopped.values()) - {"failed"}
