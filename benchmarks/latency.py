"""Verdict latency: writing the deciding event on a socket → reading the stop message.

    python benchmarks/latency.py             # 2,000 conversations over 4 connections
    python benchmarks/latency.py --quick     # a smoke run

A real loopback TCP listener (the same Runner and feed as `mantle-stream watch
--events tcp://...`) in this process; simulated clients send a few ordinary
events, then the one that fails an assertion, and time until the stop
message for that conversation arrives on the same connection.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import anyio

import mantle_stream as ms
from mantle_stream._feeds import open_feed

from _common import machine


def line(cid: str, seq: int, metadata: str | None = None, **payload: object) -> bytes:
    """A ProtoJSON line as Mantle writes it (unset fields null)."""
    return json.dumps({"conversation_id": cid, "timestamp": 1767261600.0 + seq,
                       "metadata": metadata, "event_id": f"{cid}-{seq}", "sequence": seq,
                       **payload, "user_id": None, "deployment_environment": None,
                       "session_id": None}).encode() + b"\n"


async def client(host: str, port: int, name: str, n: int, samples: list[float]) -> None:
    async with await anyio.connect_tcp(host, port) as stream:
        buffer = b""
        for i in range(n):
            cid = f"{name}-{i}"
            await stream.send(line(cid, 0, user={"text": "hi"})
                              + line(cid, 1, skill_activated={"skill_id": "card_replace"})
                              + line(cid, 2, memory_set={"key": "a.b", "value_json": "5"}))
            start = time.perf_counter()
            await stream.send(line(cid, 3, json.dumps({"utter_action": "utter_cannot_help"}),
                                   bot={"text": "sorry", "data": {}}))
            while True:
                while b"\n" not in buffer:
                    buffer += await stream.receive()
                reply, buffer = buffer.split(b"\n", 1)
                if json.loads(reply)["conversation_id"] == cid:
                    break
            samples.append(time.perf_counter() - start)
            await stream.send(line(cid, 4, session_ended={}))


async def measure(conversations: int, connections: int) -> list[float]:
    scenario = ms.load_scenario_text(json.dumps({"scenario": {
        "name": "latency", "simulation_context": "x", "goals": {"assertions": [
            {"skill_activated": {"skill_id": "card_replace"}},
            {"memory_was_set": [{"name": "a.b", "value": 5}]},
            {"bot_did_not_utter": {"utter_name": "utter_cannot_help"}},
            {"skill_completed": {"skill_id": "card_replace"}}]}}}))
    samples: list[float] = []
    async with open_feed("tcp://127.0.0.1:0") as feed:
        assert feed.address is not None
        host, port = feed.address.removeprefix("tcp://").rsplit(":", 1)
        runner = ms.Runner(ms.Evaluator([scenario]), linger=0.2)
        async with anyio.create_task_group() as tg:
            for c in range(connections):
                tg.start_soon(client, host, int(port), f"c{c}", conversations // connections,
                              samples)
            await runner.run(feed)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--conversations", type=int, default=2000)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.conversations, args.connections = 40, 2
    samples = anyio.run(measure, args.conversations, args.connections)
    samples.sort()
    p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))]
    print(f"latency: {len(samples)} conversations over {args.connections} loopback TCP "
          "connections, deciding event written → stop message read")
    print(f"machine: {machine()}")
    print()
    print(f"| {'median':>10} | {'p99':>10} | {'max':>10} |")
    print(f"|{'-' * 12}|{'-' * 12}|{'-' * 12}|")
    print(f"| {statistics.median(samples) * 1e3:>7.3f} ms | {p99 * 1e3:>7.3f} ms | "
          f"{samples[-1] * 1e3:>7.3f} ms |")


if __name__ == "__main__":
    main()
