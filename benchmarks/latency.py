"""Verdict latency: writing the deciding event on a socket → reading the stop message.

    python benchmarks/latency.py             # 2,000 conversations over 4 connections
    python benchmarks/latency.py --quick     # a smoke run (both rows)
    python benchmarks/latency.py --evil      # and again beside a client whose messages
                                             # an evil pattern backtracks on

A real loopback TCP listener (the same Runner and feed as `mantle-stream watch
--events tcp://...`) in this process; simulated clients send a few ordinary
events, then the one that fails an assertion, and time until the stop
message for that conversation arrives on the same connection.

With ``--evil`` a second row adds ``text_matches: (a+)+$`` to the scenario and
one more client that, until the others are done, opens a conversation every
0.2 s with a 5,001-character message that pattern backtracks on for ever:
each search is cut off at ``--regex-timeout`` (0.05 s), and the row shows
what that costs the other clients.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import anyio

import mantle_stream as ms
from mantle_stream.core.defaults import DEFAULT_REGEX_TIMEOUT
from mantle_stream.feeds import open_feed

from _common import machine


def line(cid: str, seq: int, metadata: str | None = None, **payload: object) -> bytes:
    """A ProtoJSON line as Mantle writes it (unset fields null)."""
    return (
        json.dumps(
            {
                "conversation_id": cid,
                "timestamp": 1767261600.0 + seq,
                "metadata": metadata,
                "event_id": f"{cid}-{seq}",
                "sequence": seq,
                **payload,
                "user_id": None,
                "deployment_environment": None,
                "session_id": None,
            }
        ).encode()
        + b"\n"
    )


async def client(host: str, port: int, name: str, n: int, samples: list[float]) -> None:
    async with await anyio.connect_tcp(host, port) as stream:
        buffer = b""
        for i in range(n):
            cid = f"{name}-{i}"
            await stream.send(
                line(cid, 0, user={"text": "hi"})
                + line(cid, 1, skill_activated={"skill_id": "card_replace"})
                + line(cid, 2, memory_set={"key": "a.b", "value_json": "5"})
            )
            start = time.perf_counter()
            await stream.send(
                line(
                    cid,
                    3,
                    json.dumps({"utter_action": "utter_cannot_help"}),
                    bot={"text": "sorry", "data": {}},
                )
            )
            while True:
                while b"\n" not in buffer:
                    buffer += await stream.receive()
                reply, buffer = buffer.split(b"\n", 1)
                if json.loads(reply)["conversation_id"] == cid:
                    break
            samples.append(time.perf_counter() - start)
            await stream.send(line(cid, 4, session_ended={}))


async def evil_client(host: str, port: int, done: anyio.Event) -> None:
    """Conversations whose one message ``(a+)+$`` backtracks on, every 0.2 s."""
    async with await anyio.connect_tcp(host, port) as stream:
        i = 0
        while not done.is_set():
            cid = f"evil-{i}"
            await stream.send(
                line(cid, 0, bot={"text": "a" * 5000 + "!", "data": {}})
                + line(cid, 1, session_ended={})
            )
            i += 1
            with anyio.move_on_after(0.2):
                await done.wait()


async def measure(
    conversations: int, connections: int, evil: bool, regex_timeout: float
) -> list[float]:
    assertions: list[dict[str, object]] = [
        {"skill_activated": {"skill_id": "card_replace"}},
        {"memory_was_set": [{"name": "a.b", "value": 5}]},
        {"bot_did_not_utter": {"utter_name": "utter_cannot_help"}},
        {"skill_completed": {"skill_id": "card_replace"}},
    ]
    if evil:
        assertions.append({"bot_uttered": {"text_matches": "(a+)+$"}})
    scenario = ms.load_scenario_text(
        json.dumps(
            {
                "scenario": {
                    "name": "latency",
                    "simulation_context": "x",
                    "goals": {"assertions": assertions},
                }
            }
        )
    )
    samples: list[float] = []
    done = anyio.Event()

    async def honest(host: str, port: int, name: str) -> None:
        await client(host, port, name, conversations // connections, samples)

    async with open_feed("tcp://127.0.0.1:0") as feed:
        assert feed.address is not None
        host, port = feed.address.removeprefix("tcp://").rsplit(":", 1)
        runner = ms.Runner(ms.Evaluator([scenario], regex_timeout=regex_timeout), linger=0.2)
        async with anyio.create_task_group() as tg:
            if evil:
                tg.start_soon(evil_client, host, int(port), done)
            async with anyio.create_task_group() as clients:
                for c in range(connections):
                    clients.start_soon(honest, host, int(port), f"c{c}")
                tg.start_soon(runner.run, feed)
            done.set()
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--conversations", type=int, default=2000)
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument(
        "--evil",
        action="store_true",
        help="a second row beside a client an evil pattern backtracks on",
    )
    parser.add_argument(
        "--regex-timeout",
        type=float,
        default=DEFAULT_REGEX_TIMEOUT,
        help="the evaluator's limit per search (default: mantle-stream's, "
        f"{DEFAULT_REGEX_TIMEOUT})",
    )
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.conversations, args.connections, args.evil = 40, 2, True
    print(
        f"latency: {args.conversations} conversations over {args.connections} loopback TCP "
        "connections, deciding event written → stop message read; "
        f"regex timeout {args.regex_timeout} s"
    )
    print(f"machine: {machine()}")
    print()
    print(f"| {'beside':<26} | {'median':>10} | {'p99':>10} | {'max':>10} |")
    print(f"|{'-' * 28}|{'-' * 12}|{'-' * 12}|{'-' * 12}|")
    for evil in (False, True) if args.evil else (False,):
        samples = sorted(
            anyio.run(measure, args.conversations, args.connections, evil, args.regex_timeout)
        )
        p99 = samples[min(len(samples) - 1, int(len(samples) * 0.99))]
        label = "an evil-pattern client" if evil else "nothing"
        print(
            f"| {label:<26} | {statistics.median(samples) * 1e3:>7.3f} ms | "
            f"{p99 * 1e3:>7.3f} ms | {samples[-1] * 1e3:>7.3f} ms |"
        )


if __name__ == "__main__":
    main()
