"""Feeds: end-to-end events/s through the CLI's code path, next to push_chunk in memory.

    python benchmarks/feeds.py            # 1,000 conversations × 200 events
    python benchmarks/feeds.py --quick    # tiny sizes (CI smoke run)

The same bytes each time, judged against the same 30 assertions:

* **in memory**: ``Evaluator.push_chunk`` over 64 KiB line-aligned chunks
  (the engine alone: the reference the other rows are divided by);
* **file**: ``run_feed(evaluator, path)``, as ``mantle-stream run --events
  PATH`` does (blocking reads in anyio's worker thread);
* **pipe**: ``run_feed(evaluator, "-")`` with standard input a pipe that a
  writer thread fills, as ``producer | mantle-stream run --events -``;
* **TCP**: a loopback ``tcp://127.0.0.1:0`` listener (the ``watch`` path:
  ``open_feed`` + ``Runner``) fed by a client task in the same event loop,
  which also reads the stop messages sent back. A live feed never ends by
  itself, so the run is stopped when the last event has been judged; the
  time is taken then.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable

import anyio

import mantle_stream as ms
from mantle_stream.feeds import open_feed

from _common import chunks, feed, machine, scenario


def in_memory(scen: ms.Scenario, data: bytes) -> Callable[[], ms.Evaluator]:
    parts = chunks(data)

    def run() -> ms.Evaluator:
        evaluator = ms.Evaluator([scen])
        for part in parts:
            evaluator.push_chunk(part)
        evaluator.finish_all()
        return evaluator

    return run


def from_file(scen: ms.Scenario, path: str) -> Callable[[], ms.Evaluator]:
    def run() -> ms.Evaluator:
        evaluator = ms.Evaluator([scen])
        anyio.run(ms.run_feed, evaluator, path)
        return evaluator

    return run


def from_pipe(scen: ms.Scenario, data: bytes) -> Callable[[], ms.Evaluator]:
    def run() -> ms.Evaluator:
        read_end, write_end = os.pipe()

        def write() -> None:
            with open(write_end, "wb") as pipe:  # buffered: writes every byte
                pipe.write(data)

        writer = threading.Thread(target=write, name="pipe writer", daemon=True)
        saved = sys.stdin
        sys.stdin = io.TextIOWrapper(open(read_end, "rb"))  # noqa: SIM115 - closed below
        try:
            evaluator = ms.Evaluator([scen])
            writer.start()
            anyio.run(ms.run_feed, evaluator, "-")
        finally:
            sys.stdin.close()
            sys.stdin = saved
            writer.join()
        return evaluator

    return run


async def _client(address: str, data: bytes) -> None:
    host, port = address.removeprefix("tcp://").rsplit(":", 1)
    async with await anyio.connect_tcp(host, int(port)) as stream:

        async def replies() -> None:
            async for _ in stream:  # stop messages: read them, as a simulator would
                pass

        async with anyio.create_task_group() as tg:
            tg.start_soon(replies)
            for start in range(0, len(data), 1 << 20):
                await stream.send(data[start : start + (1 << 20)])
            await stream.send_eof()


def from_tcp(scen: ms.Scenario, data: bytes, events: int) -> Callable[[], ms.Evaluator]:
    def run() -> ms.Evaluator:
        evaluator = ms.Evaluator([scen])

        async def go() -> None:
            # The feed closes before the task group waits for the client, whose
            # reading of replies ends when the server closes the connection.
            async with anyio.create_task_group() as tg, open_feed("tcp://127.0.0.1:0") as source:
                assert source.address is not None

                def judged(_: object) -> None:
                    stats = evaluator.statistics()
                    if stats.events >= events and stats.open == 0:
                        runner.stop(finish=True)

                runner = ms.Runner(evaluator, linger=None, on_decisions=judged)
                tg.start_soon(_client, source.address, data)
                await runner.run(source)

        anyio.run(go)
        return evaluator

    return run


def timed(fn: Callable[[], ms.Evaluator], repeat: int, events: int) -> float:
    """Best of ``repeat``; every run must have judged every event."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        evaluator = fn()
        best = min(best, time.perf_counter() - t0)
        stats = evaluator.statistics()
        if stats.events != events or stats.open:
            raise SystemExit(
                f"error: judged {stats.events:,} of {events:,} events, "
                f"{stats.open} conversations still open"
            )
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--conversations", type=int, default=1000)
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="tiny sizes for a smoke run")
    args = parser.parse_args()
    if args.quick:
        args.conversations, args.events, args.repeat = 20, 50, 1

    data = feed(args.conversations, args.events)
    n = args.conversations * args.events
    scen = scenario()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "events.jsonl")
        with open(path, "wb") as fh:
            fh.write(data)
        # Interleaved repeats: a disturbance of the machine hits every path alike.
        paths = [
            ("in memory: push_chunk", in_memory(scen, data)),
            ("file: run_feed(PATH)", from_file(scen, path)),
            ('pipe: run_feed("-"), writer thread', from_pipe(scen, data)),
            ("TCP loopback: open_feed + Runner", from_tcp(scen, data, n)),
        ]
        best = dict.fromkeys([name for name, _ in paths], float("inf"))
        for _ in range(args.repeat):
            for name, fn in paths:
                best[name] = min(best[name], timed(fn, 1, n))
        rows = list(best.items())

    print(
        f"feeds: {args.conversations} conversations × {args.events} events = {n:,} events, "
        f"{len(data) / 2**20:.1f} MiB, {len(scen.assertions)} assertions"
    )
    print(f"machine: {machine()}")
    print()
    print(
        f"| {'path':<38} | {'events/s':>12} | {'µs/event':>9} | {'MiB/s':>7} | "
        f"{'× in memory':>11} |"
    )
    print(f"|{'-' * 40}|{'-' * 14}|{'-' * 11}|{'-' * 9}|{'-' * 13}|")
    reference = rows[0][1]
    for name, seconds in rows:
        print(
            f"| {name:<38} | {n / seconds:>12,.0f} | {seconds / n * 1e6:>9.3f} | "
            f"{len(data) / 2**20 / seconds:>7.1f} | {seconds / reference:>11.2f} |"
        )


if __name__ == "__main__":
    main()
