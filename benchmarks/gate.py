"""The gate's cost: time to first text through the gate against straight to the agent.

    python benchmarks/gate.py            # 14 example runs x 8 rounds, then 200 concurrent runs
    python benchmarks/gate.py --quick    # a smoke run

A stand-in agent (uvicorn on loopback, replaying the bundled example runs,
its first NDJSON line written at once) and the stand-in simulator in this
process, the gate (``mantle-stream gate``) in a process of its own, warmed
up by a few requests first. Each turn's time to first text is measured at
the simulator, as Rasa's does, once straight to the agent and once through a gate judging the
five example scenarios (the baseline in the same run); the added time is the
difference of the two distributions' median and p99. The simulator waits
``--think`` seconds between a reply and its next message (an LLM user takes
seconds; 0.02 s here is enough for the gate's tracker read to finish first);
with ``--think 0`` the next message waits for that read too, and the row says
so. The gate's CPU per turn (its process's user and system time from the
warm-up's end to the last turn, over the turns: forwarding, tracker reads
and judging) is a figure the machine's load moves less than the times. Beside the gate,
the same turns through a bare TCP relay (``benchmarks/_relay.py``: bytes
copied both ways, nothing parsed) show the floor: what any proxy in a process
of its own adds on this machine, the gate's own cost being the rest.
Then ``--runs`` runs at once through the gate, ``--crowd-think`` seconds (3)
between turns (an LLM user's pace; Rasa plays at most 8 at once): every one
must end with no error, stopped exactly where a run alone is.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import msgspec

from mantle_stream.core.recorded import load_results
from mantle_stream.core.scenario.load import load_scenarios
from mantle_stream.gate.standin import SimulatedRun, StandInAgent, recordings, runs_of, serving
from mantle_stream.gate.standin import simulate as play
from mantle_stream.outputs.report import GateReport

from _common import machine

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "eval"


def _recorded() -> dict[str, list[dict[str, Any]]]:
    out = recordings((EXAMPLES / "events" / "all.jsonl").read_bytes().splitlines())
    for path in (EXAMPLES / "trackers").glob("*.json"):
        document = json.loads(path.read_text())
        out[document["sender_id"]] = document["events"]
    return out


def _runs(recorded: dict[str, list[dict[str, Any]]], copies: int) -> list[SimulatedRun]:
    scenarios = {s.stem: s for s in load_scenarios([str(EXAMPLES / "scenarios")])}
    of = {
        cid: r.scenario
        for cid, r in load_results(EXAMPLES / "results" / "2026-12-01T09-00-00").items()
    }
    base = runs_of(recorded)
    out = []
    for i in range(copies):
        for run in base:
            out.append(
                SimulatedRun(
                    f"{run.conversation_id}-{i}",
                    list(run.messages),
                    dict(scenarios[of[run.conversation_id]].initial_slots),
                )
            )
    return out


def _agent_for(runs: list[SimulatedRun], recorded: dict[str, list[dict[str, Any]]]) -> StandInAgent:
    return StandInAgent(
        {r.conversation_id: recorded[r.conversation_id.rsplit("-", 1)[0]] for r in runs}
    )


def _cpu(pid: int) -> float:
    """A process's user and system time so far, in seconds (Linux's /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _quantiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


@contextlib.asynccontextmanager
async def _gate(upstream: str, relay: bool = False) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """``mantle-stream gate`` in a process of its own, as a team runs it (or the bare
    relay); its address, then (once the block is over and it is interrupted) its JSON
    report."""
    command = [sys.executable, "-m", "mantle_stream", "gate", str(EXAMPLES / "scenarios"),
               "--upstream", upstream, "--listen", "127.0.0.1:0", "--format", "json"]  # fmt: skip
    if relay:
        command = [sys.executable, str(Path(__file__).with_name("_relay.py")),
                   upstream.removeprefix("http://")]  # fmt: skip
    process = await anyio.open_process(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stderr is not None and process.stdout is not None
    address = (await process.stderr.receive()).decode().splitlines()[0].strip()
    report: dict[str, Any] = {"pid": process.pid}
    try:
        yield address, report
    finally:
        report["cpu"] = _cpu(process.pid) - report.get("cpu", 0.0)
        process.send_signal(signal.SIGINT)
        out = b""
        async for chunk in process.stdout:
            out += chunk
        await process.wait()
        report.update(json.loads(out))


async def _through(runs: list[SimulatedRun], recorded: Any, *, gate: bool, think: float,
                   concurrency: int, relay: bool = False,
                   ) -> tuple[list[float], dict[str, Any]]:  # fmt: skip
    async with serving(_agent_for(runs, recorded)) as upstream:
        if not gate:
            await play(upstream, runs, concurrency=concurrency, think=think)
            return [t for r in runs for t in r.first_text], {}
        async with _gate(upstream, relay) as (address, report):
            async with httpx.AsyncClient(trust_env=False) as client:
                for _ in range(20):  # the first requests import and warm what serves them
                    await client.get(f"{address}/status")
            report["cpu"] = _cpu(report["pid"])
            await play(address, runs, concurrency=concurrency, think=think)
        return [t for r in runs for t in r.first_text], report


async def main(args: argparse.Namespace) -> None:
    recorded = _recorded()
    print("# gate: time to first text through the gate, against straight to the agent")
    print(f"machine: {machine()}")
    rows = []
    for think in (args.think, 0.0):
        direct, _ = await _through(_runs(recorded, args.rounds), recorded, gate=False,
                                   think=think, concurrency=1)  # fmt: skip
        through, used = await _through(_runs(recorded, args.rounds), recorded, gate=True,
                                       think=think, concurrency=1)  # fmt: skip
        relayed, _ = await _through(_runs(recorded, args.rounds), recorded, gate=True,
                                    think=think, concurrency=1, relay=True)  # fmt: skip
        d50, d99 = _quantiles(direct)
        g50, g99 = _quantiles(through)
        r50, r99 = _quantiles(relayed)
        rows.append((think, len(through), d50, d99, g50, g99, r50 - d50, r99 - d99,
                     used["cpu"] / len(through)))  # fmt: skip
    print("\n| think (s) | turns | direct median / p99 (ms) | gate median / p99 (ms) "
          "| added median / p99 (ms) | bare relay added (ms) | gate CPU / turn (ms) |")  # fmt: skip
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for think, n, d50, d99, g50, g99, r50, r99, cpu in rows:
        added = f"{(g50 - d50) * 1e3:+.2f} / {(g99 - d99) * 1e3:+.2f}"
        print(f"| {think:g} | {n:,} | {d50 * 1e3:.2f} / {d99 * 1e3:.2f} | {g50 * 1e3:.2f} / "
              f"{g99 * 1e3:.2f} | {added} | {r50 * 1e3:+.2f} / {r99 * 1e3:+.2f} "
              f"| {cpu * 1e3:.2f} |")  # fmt: skip
    # Many at once: every run ends, none errors, each stopped as when it runs alone.
    alone = _runs(recorded, 1)
    await _through(alone, recorded, gate=True, think=0.0, concurrency=1)
    stopped_alone = {r.conversation_id.rsplit("-", 1)[0] for r in alone if r.stopped}
    many = _runs(recorded, -(-args.runs // 14))[: args.runs]
    started = time.perf_counter()
    _, whole = await _through(many, recorded, gate=True, think=args.crowd_think,
                              concurrency=args.runs)  # fmt: skip
    took = time.perf_counter() - started
    report = msgspec.convert(whole["gate"], GateReport)
    wrong = [r.conversation_id for r in many
             if r.stopped != (r.conversation_id.rsplit("-", 1)[0] in stopped_alone)]  # fmt: skip
    print(f"\n{len(many)} concurrent runs through the gate: {took:.2f} s, "
          f"{report.stopped} stopped, {report.turns_not_played} turns not played, "
          f"{len(report.problems)} problems, "
          f"{len(wrong)} stopped otherwise than alone")  # fmt: skip
    for problem in report.problems:
        print(f"  problem: {problem}")
    if report.problems or wrong or report.runs != len(many):
        raise SystemExit("concurrent runs went wrong")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    parser.add_argument("--rounds", type=int, default=8, help="each example run played N times")
    parser.add_argument("--runs", type=int, default=200, help="runs at once, at the end")
    parser.add_argument("--think", type=float, default=0.02, help="seconds between turns")
    parser.add_argument("--crowd-think", type=float, default=3.0,
                        help="seconds between turns of the concurrent runs")  # fmt: skip
    arguments = parser.parse_args()
    if arguments.quick:
        arguments.rounds, arguments.runs = 1, 20
    anyio.run(main, arguments)
