"""The gate in front of an agent (mantle-stream gate), against real servers on loopback.

A stand-in agent (an ASGI app served by uvicorn) replays the example recordings
turn by turn; the stand-in simulator follows Rasa's protocol (session start,
initial slots, messages with ?stream=true, the tracker read at the end). No
HTTP layer is mocked: every request crosses a real socket, through the gate.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import msgspec
import pytest

from mantle_stream.core.engine.evaluator import Evaluator
from mantle_stream.core.recorded import load_results
from mantle_stream.core.scenario.load import load_scenarios
from mantle_stream.core.scenario.model import Scenario
from mantle_stream.gate.proxy import GateOptions
from mantle_stream.gate.runs import GateJudge
from mantle_stream.gate.serve import Gate
from mantle_stream.gate.standin import (
    SimulatedRun,
    StandInAgent,
    read_body,
    recordings,
    runs_of,
    serving,
    simulate,
)

from _harness import REPOSITORY

pytestmark = pytest.mark.anyio

EXAMPLES = REPOSITORY / "examples" / "eval"
RESULTS = EXAMPLES / "results" / "2026-12-01T09-00-00"
SCENARIOS = sorted((EXAMPLES / "scenarios").glob("*.yml"))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _recorded() -> dict[str, list[dict[str, Any]]]:
    """The 14 example runs: 13 as ProtoJSON lines, one as a tracker document (flat)."""
    lines = (EXAMPLES / "events" / "all.jsonl").read_bytes().splitlines()
    out = recordings(lines)
    for path in (EXAMPLES / "trackers").glob("*.json"):
        document = json.loads(path.read_text())
        out[document["sender_id"]] = document["events"]
    return out


def _scenarios(*stems: str) -> list[Scenario]:
    return load_scenarios([str(p) for p in SCENARIOS if not stems or p.stem in stems])


def _runs(
    recorded: dict[str, list[dict[str, Any]]], scenarios: list[Scenario]
) -> list[SimulatedRun]:
    """The recordings as runs, each starting with its scenario's initial slots."""
    of = {cid: run.scenario for cid, run in load_results(RESULTS).items()}
    by_stem = {s.stem: s for s in _scenarios()}
    runs = runs_of(recorded)
    for run in runs:
        run.initial_slots = dict(by_stem[of[run.conversation_id]].initial_slots)
    return [r for r in runs if by_stem[of[r.conversation_id]].name in {s.name for s in scenarios}]


@asynccontextmanager
async def _gate(
    upstream: str, scenarios: list[Scenario], **options: Any
) -> AsyncIterator[tuple[Gate, GateJudge]]:
    stop = options.pop("stop", "failed")
    results = options.pop("results", None)
    events = options.pop("events", None)
    judge = GateJudge(scenarios, stop=stop, upstream=upstream, reads_tracker=not events)
    gate = Gate(
        judge,
        GateOptions(upstream=upstream, **options),
        listen=("127.0.0.1", 0),
        results=results,
        events=events,
    )
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(gate.run)
        yield gate, judge
        gate.stop()


async def _play(
    agent: Any, scenarios: list[Scenario], runs: list[SimulatedRun], **options: Any
) -> GateJudge:
    """Play ``runs`` through a gate in front of ``agent`` (an ASGI app); the judge."""
    concurrency = options.pop("concurrency", 8)
    async with serving(agent) as upstream, _gate(upstream, scenarios, **options) as (gate, judge):
        await simulate(gate.address, runs, concurrency=concurrency)
    return judge


def _final_verdicts(runs: list[SimulatedRun], scenarios: list[Scenario]) -> dict[str, list[str]]:
    """What check gives on the trackers the simulator read at the end, per run."""
    of = {cid: run.scenario for cid, run in load_results(RESULTS).items()}
    out: dict[str, list[str]] = {}
    for run in runs:
        evaluator = Evaluator(scenarios, assignments={run.conversation_id: of[run.conversation_id]})
        document = json.loads(run.tracker)
        # Rasa's tracker endpoint numbers nothing: positions stand in for sequences.
        for position, event in enumerate(document["events"]):
            event["sender_id"] = document["sender_id"]
            event["sequence"] = position
            evaluator.push_line(json.dumps(event))
        evaluator.finish_all()
        [result] = evaluator.results()
        out[run.conversation_id] = [a.verdict for a in result.assertions]
    return out


# ---------------------------------------------------------------------------- stopping


async def test_a_failing_run_gets_an_empty_reply_and_ends_and_the_verdicts_equal_checks() -> None:
    recorded = _recorded()
    scenarios = _scenarios()
    runs = _runs(recorded, scenarios)
    agent = StandInAgent(recorded)
    judge = await _play(agent, scenarios, runs)
    report = judge.report()
    stopped = {r.conversation_id for r in runs if r.stopped}
    assert stopped and report.stopped == len(stopped) == len(judge.stopped_early)
    assert report.turns_not_played == len(stopped)  # each stopped at its next message
    assert report.runs == len(runs) == 14 and not report.ambiguous and not report.problems
    # The agent never played the messages the gate answered.
    assert agent.messages == sum(r.turns + 1 for r in runs)  # + the session start
    final = _final_verdicts(runs, scenarios)
    gate_verdicts = {
        r.conversation_id: [a.verdict for a in r.assertions] for r in judge.main.results()
    }
    for cid, verdicts in final.items():
        for ours, checks in zip(gate_verdicts[cid], verdicts, strict=True):
            assert ours == checks or (ours == "skipped" and cid in stopped), cid
    for cid in stopped:
        assert "failed" in gate_verdicts[cid]
    for run in runs:
        if run.conversation_id not in stopped:
            assert run.turns == len(run.messages)  # played to its end


async def test_with_events_from_a_broker_file_failing_runs_are_stopped_too(
    tmp_path: Path,
) -> None:
    """--events follow:FILE: the agent writes its events to a file broker as it plays;
    the gate judges them from there and never reads the tracker."""
    recorded = _recorded()
    scenarios = _scenarios()
    runs = _runs(recorded, scenarios)
    broker = tmp_path / "rasa_event.log"
    agent = StandInAgent(recorded, broker=str(broker))
    async with (
        serving(agent) as upstream,
        _gate(upstream, scenarios, events=[f"follow:{broker}"]) as (gate, judge),
    ):
        # Eight at a time (as Rasa plays them), thinking between turns as an LLM user does.
        await simulate(gate.address, runs, think=0.2, concurrency=8)
    stopped = {r.conversation_id for r in runs if r.stopped}
    assert stopped and judge.report().stopped == len(stopped)
    results = {r.conversation_id: r for r in judge.main.results()}
    assert set(results) == {r.conversation_id for r in runs}
    for cid in stopped:
        assert "failed" in [a.verdict for a in results[cid].assertions]


async def test_with_stop_never_every_run_plays_to_its_end() -> None:
    recorded = _recorded()
    scenarios = _scenarios()
    runs = _runs(recorded, scenarios)
    judge = await _play(StandInAgent(recorded), scenarios, runs, stop="never")
    assert not any(r.stopped for r in runs)
    assert judge.report().stopped == 0
    assert all(a.verdict != "skipped" for r in judge.main.results() for a in r.assertions)


# ---------------------------------------------------------------------------- pass-through


async def test_a_passing_run_passes_through_byte_for_byte_in_the_same_chunks() -> None:
    recorded = _recorded()
    [cid] = [c for c, run in load_results(RESULTS).items() if run.scenario == "identity_check"][:1]
    texts = runs_of({cid: recorded[cid]})[0].messages

    async def replies(base: str) -> list[list[bytes]]:
        out = []
        async with httpx.AsyncClient(trust_env=False) as client:
            for text in ["/session_start", *texts]:
                body = {"sender": cid, "message": text, "metadata": {"is_simulation": True}}
                async with client.stream(
                    "POST", f"{base}/webhooks/rest/webhook?stream=true", json=body
                ) as response:
                    out.append([chunk async for chunk in response.aiter_raw()])
        return out

    async with serving(StandInAgent(recorded, pace=0.02)) as direct:
        expected = await replies(direct)
    async with (
        serving(StandInAgent(recorded, pace=0.02)) as upstream,
        _gate(upstream, _scenarios("identity_check"), stop="never") as (gate, _),
    ):
        got = await replies(gate.address)
    assert got == expected
    assert sum(len(chunks) for chunks in got) > len(got)  # lines arrived apart


class _Echo:
    """An upstream that answers with what it was sent (method, path, query, headers, body)."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = await read_body(receive)
        self.seen.append(
            {
                "method": scope["method"],
                "raw_path": scope["raw_path"].decode(),
                "query": scope["query_string"].decode(),
                "headers": [(k.decode(), v.decode()) for k, v in scope["headers"]],
                "body": body.decode(),
            }
        )
        await send(
            {
                "type": "http.response.start",
                "status": 201,
                "headers": [
                    (b"x-upstream", b"1"),
                    (b"set-cookie", b"a=1"),
                    (b"set-cookie", b"b=2"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": b"echo:" + body})


async def test_requests_reach_the_upstream_unchanged_but_for_host() -> None:
    echo = _Echo()
    async with (
        serving(echo) as upstream,
        _gate(upstream, _scenarios("identity_check")) as (
            gate,
            _,
        ),
        httpx.AsyncClient(trust_env=False) as client,
    ):
        response = await client.request(
            "PUT",
            f"{gate.address}/some/path%2Fx?a=1&b=%20",
            headers={"X-Custom": "kept", "Authorization": "Bearer t"},
            content=b"payload",
        )
    assert response.status_code == 201 and response.content == b"echo:payload"
    assert response.headers.get_list("set-cookie") == ["a=1", "b=2"]
    [seen] = echo.seen
    assert seen["method"] == "PUT" and seen["raw_path"] == "/some/path%2Fx"
    assert seen["query"] == "a=1&b=%20" and seen["body"] == "payload"
    headers = dict(seen["headers"])
    assert headers["host"] == upstream.removeprefix("http://")
    assert headers["x-custom"] == "kept" and headers["authorization"] == "Bearer t"


async def test_the_gate_is_not_an_open_proxy() -> None:
    echo = _Echo()
    async with (
        serving(echo) as upstream,
        _gate(upstream, _scenarios("identity_check")) as (
            gate,
            _,
        ),
    ):
        host, port = gate.address.removeprefix("http://").split(":")

        def raw_request() -> bytes:
            with socket.create_connection((host, int(port)), timeout=10) as sock:
                sock.sendall(
                    b"GET http://example.invalid:81/elsewhere HTTP/1.1\r\n"
                    b"Host: example.invalid\r\n\r\n"
                )
                answer = b""
                while b"echo:" not in answer:
                    data = sock.recv(4096)
                    if not data:
                        break
                    answer += data
                return answer

        answer = await anyio.to_thread.run_sync(raw_request)
    assert answer.startswith(b"HTTP/1.1 201")
    [seen] = echo.seen
    assert seen["raw_path"] == "/elsewhere"  # at the upstream, whatever the target named


async def test_a_reply_is_streamed_its_first_line_arrives_before_the_last_is_written() -> None:
    first_read = anyio.Event()

    async def slow(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await receive()
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/x-ndjson")],
            }
        )
        await send({"type": "http.response.body", "body": b'{"text": "one"}\n', "more_body": True})
        with anyio.fail_after(10):  # the gate buffering the reply would never get here
            await first_read.wait()
        await send({"type": "http.response.body", "body": b'{"text": "two"}\n'})

    async with (
        serving(slow) as upstream,
        _gate(upstream, _scenarios("identity_check")) as (
            gate,
            _,
        ),
    ):
        body = {"sender": "s-1", "message": "/session_start", "metadata": {}}
        async with (
            httpx.AsyncClient(trust_env=False) as client,
            client.stream(
                "POST", f"{gate.address}/webhooks/rest/webhook?stream=true", json=body
            ) as response,
        ):
            lines = response.aiter_lines()
            assert json.loads(await anext(lines)) == {"text": "one"}
            first_read.set()
            assert json.loads(await anext(lines)) == {"text": "two"}


# ---------------------------------------------------------------------------- failing open


async def test_an_unreachable_upstream_gives_502_with_one_line() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    upstream = f"http://127.0.0.1:{port}"
    async with (
        _gate(upstream, _scenarios("identity_check")) as (gate, _),
        httpx.AsyncClient(trust_env=False) as client,
    ):
        response = await client.get(f"{gate.address}/status")
    assert response.status_code == 502
    assert response.text.startswith(f"mantle-stream gate: the agent at {upstream} did not answer: ")
    assert response.text.count("\n") == 1


async def test_a_request_body_over_the_bound_gets_413_and_is_not_forwarded() -> None:
    echo = _Echo()
    async with (
        serving(echo) as upstream,
        _gate(upstream, _scenarios("identity_check"), max_body=1000) as (gate, _),
        httpx.AsyncClient(trust_env=False) as client,
    ):
        response = await client.post(f"{gate.address}/webhooks/rest/webhook", content=b"x" * 1001)
    assert response.status_code == 413 and "1000 bytes" in response.text
    assert echo.seen == []


async def test_a_tracker_that_cannot_be_read_leaves_the_run_forwarded_unchanged() -> None:
    recorded = _recorded()
    scenarios = _scenarios("card_replace_damaged")
    runs = _runs(recorded, scenarios)
    agent = StandInAgent(recorded)

    async def no_tracker(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if (
            scope["type"] == "http"
            and scope["method"] == "GET"
            and scope["path"].endswith("/tracker")
        ):
            await send({"type": "http.response.start", "status": 500, "headers": []})
            await send({"type": "http.response.body", "body": b"down"})
            return
        await agent(scope, receive, send)

    judge = await _play(no_tracker, scenarios, runs)
    assert not any(r.stopped for r in runs)  # nothing judged: nothing stopped
    assert all(r.turns == len(r.messages) for r in runs)
    problems = judge.report().problems
    assert len(problems) == len(runs) and all("HTTP 500" in p for p in problems)


# ---------------------------------------------------------------------------- which scenario


async def test_runs_of_several_scenarios_are_told_apart_by_their_initial_slots() -> None:
    recorded = _recorded()
    scenarios = _scenarios()
    runs = _runs(recorded, scenarios)
    judge = await _play(StandInAgent(recorded), scenarios, runs)
    of = {cid: run.scenario for cid, run in load_results(RESULTS).items()}
    stems = {s.name: s.stem for s in scenarios}
    assert {r.conversation_id: stems[r.scenario or ""] for r in judge.main.results()} == of


async def test_a_run_left_ambiguous_is_reported_with_each_candidates_verdict() -> None:
    recorded = _recorded()
    [card] = _scenarios("card_replace_damaged")
    runs = _runs(recorded, [card])
    for run in runs:
        run.initial_slots = {}  # nothing tells the twins apart
    twins = [
        msgspec.structs.replace(card, initial_slots={}),
        msgspec.structs.replace(card, name="A copy", path="<copy>", initial_slots={}),
    ]
    judge = await _play(StandInAgent(recorded), twins, runs)
    report = judge.report()
    assert {a.conversation_id for a in report.ambiguous} == {r.conversation_id for r in runs}
    for entry in report.ambiguous:
        assert sorted(c.scenario for c in entry.candidates) == sorted(s.name for s in twins)
        assert len({c.verdict for c in entry.candidates}) == 1  # the same under both twins
    assert judge.main.results() == []  # never counted as passed or failed
    # Failed under both: stopped as a run of one scenario is.
    stopped = {r.conversation_id for r in runs if r.stopped}
    assert (
        stopped
        and stopped
        == {a.conversation_id for a in report.ambiguous if a.candidates[0].verdict == "failed"}
        & stopped
    )
    assert report.stopped == len(stopped)


async def test_the_results_folder_arriving_mid_run_names_the_scenario(tmp_path: Path) -> None:
    recorded = _recorded()
    scenarios = _scenarios("card_replace_damaged", "balance_and_limits")
    runs = _runs(recorded, scenarios)
    for run in runs:
        run.initial_slots = {}
    twins = [
        s.__class__(**{**{f: getattr(s, f) for f in s.__struct_fields__}, "initial_slots": {}})
        for s in scenarios
    ]
    results = tmp_path / "results"
    async with (
        serving(StandInAgent(recorded)) as upstream,
        _gate(upstream, twins, results=str(results)) as (gate, judge),
    ):
        await simulate(gate.address, runs)
        assert len(judge.report().ambiguous) == len(runs)
        shutil.copytree(
            RESULTS,
            results,
            ignore=shutil.ignore_patterns("fraud_report", "identity_check", "transfer_mcp"),
        )
        with anyio.fail_after(10):
            while judge.report().ambiguous:
                await anyio.sleep(0.05)
    of = {cid: run.scenario for cid, run in load_results(RESULTS).items()}
    stems = {s.name: s.stem for s in twins}
    assert {r.conversation_id: stems[r.scenario or ""] for r in judge.main.results()} == {
        r.conversation_id: of[r.conversation_id] for r in runs
    }


# ---------------------------------------------------------------------------- load


@pytest.mark.slow  # 50 runs at once through a gate on 2 cores: 8 to 12 s
async def test_fifty_concurrent_runs_are_judged_and_stopped_alike() -> None:
    recorded = _recorded()
    scenarios = _scenarios()
    base = _runs(recorded, scenarios)
    copies: dict[str, list[dict[str, Any]]] = {}
    runs = []
    for i in range(50):
        run = base[i % len(base)]
        cid = f"{run.conversation_id}-{i}"
        copies[cid] = recorded[run.conversation_id]
        runs.append(SimulatedRun(cid, list(run.messages), dict(run.initial_slots)))
    judge = await _play(StandInAgent(copies), scenarios, runs, concurrency=50)
    report = judge.report()
    assert report.runs == 50 and not report.problems and not report.ambiguous
    stopped_base = {r.conversation_id for r in base if r.stopped} or None
    by_base: dict[str, set[bool]] = {}
    for i, run in enumerate(runs):
        by_base.setdefault(base[i % len(base)].conversation_id, set()).add(run.stopped)
    assert all(len(v) == 1 for v in by_base.values())  # copies of one recording alike
    assert stopped_base is None  # (base itself was not played here)
    assert report.stopped == sum(r.stopped for r in runs) > 0


# ---------------------------------------------------------------------------- the command


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_the_command_writes_its_reports_when_interrupted(tmp_path: Path) -> None:
    """The gate as a subprocess in front of a stand-in agent in another; Ctrl-C mid-batch."""
    agent_port = _free_port()
    agent_script = tmp_path / "agent.py"
    agent_script.write_text(
        "import anyio, sys\n"
        "from pathlib import Path\n"
        "from mantle_stream.gate.standin import StandInAgent, recordings\n"
        "import uvicorn\n"
        f"lines = Path({str(EXAMPLES / 'events' / 'all.jsonl')!r}).read_bytes().splitlines()\n"
        "rec = recordings(lines)\n"
        f"uvicorn.run(StandInAgent(rec), host='127.0.0.1', port={agent_port},"
        " log_level='warning')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPOSITORY)}
    agent = subprocess.Popen([sys.executable, str(agent_script)], env=env)
    junit, html = tmp_path / "gate.xml", tmp_path / "gate.html"
    gate = subprocess.Popen(
        [sys.executable, "-m", "mantle_stream", "gate", str(EXAMPLES / "scenarios"),
         "--upstream", f"http://127.0.0.1:{agent_port}", "--listen", "127.0.0.1:0",
         "--format", "json", "--junit", str(junit), "--html", str(html)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPOSITORY, env=env,
    )  # fmt: skip
    try:
        assert gate.stderr is not None
        address = gate.stderr.readline().strip()
        assert address.startswith("http://127.0.0.1:")
        deadline = time.monotonic() + 20
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{agent_port}/status", timeout=1)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        runs = _runs(_recorded(), _scenarios())[:4]
        anyio.run(simulate, address, runs)
        gate.send_signal(signal.SIGINT)
        out, _ = gate.communicate(timeout=30)
    finally:
        gate.kill()
        agent.kill()
        agent.wait()
    report = json.loads(out)
    assert report["gate"]["runs"] == 4
    assert report["gate"]["stopped"] == sum(r.stopped for r in runs)
    assert len(report["conversations"]) == 4
    assert junit.read_text().startswith("<?xml") and html.read_text().startswith("<!DOCTYPE html>")
    assert gate.returncode == (
        1 if any(c["verdict"] == "failed" for c in report["conversations"]) else 0
    )


async def test_a_tracker_read_of_a_conversation_the_gate_never_saw_is_not_a_run() -> None:
    recorded = _recorded()
    [cid] = list(recorded)[:1]
    async with (
        serving(StandInAgent(recorded)) as upstream,
        _gate(upstream, _scenarios()) as (gate, judge),
        httpx.AsyncClient(trust_env=False) as client,
    ):
        response = await client.get(f"{gate.address}/conversations/{cid}/tracker")
    assert response.status_code == 200  # forwarded as any request is
    assert judge.report().runs == 0


def test_runs_under_way_at_ctrl_c_stay_open_not_failed() -> None:
    """Ctrl-C (or SIGTERM) while a run plays: it is left open, its undecided verdicts
    pending, never failed for what it had no time to do; --linger ends it judged."""
    recorded = _recorded()
    [card] = _scenarios("card_replace_damaged")
    cid = next(c for c, r in load_results(RESULTS).items() if r.scenario == card.stem)
    first = json.dumps({"sender_id": cid, "events": recorded[cid][:12]}).encode()
    outcomes = {}
    for cut_short in (True, False):
        judge = GateJudge([card])
        judge.message(cid, "/session_start", {})
        judge.message(cid, "hello", {})
        judge.tracker(cid, first)
        assert judge.finish_all(cut_short=cut_short) == ([cid] if cut_short else [])
        outcomes[cut_short] = {a.verdict for a in judge.main.result(cid).assertions}
    assert "pending" in outcomes[True] and "failed" not in outcomes[True]
    assert "pending" not in outcomes[False] and "failed" in outcomes[False]
