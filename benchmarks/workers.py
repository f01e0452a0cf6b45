"""Workers: one replay judged by 1 and by 2 processes (``check --workers``), outputs compared.

    python benchmarks/workers.py            # 5,000 conversations × 200 events = 1,000,000
    python benchmarks/workers.py --quick    # 100 × 200 (a smoke run)
    python benchmarks/workers.py --sources sql --rounds 2   # the two SQLite tables alone
    python benchmarks/workers.py --sources tracker          # the tracker store's alone

Writes the feed of ``_common.py`` (30 assertions, every kind) as a JSON-lines
file and as the two SQLite tables Rasa writes: its SQL tracker store's
(``events(id, sender_id, type_name, timestamp, intent_name, action_name,
data)``, with its index on ``sender_id``) and its SQL event broker's
(``events(id, sender_id, data)``, no index), then runs ``mantle-stream check
--format json --jsonl`` on each with ``--workers 1`` and ``--workers 2``,
alternating, each in a fresh process, ``--rounds`` times. It prints the best
and median seconds of each and the speed-up (best of one ÷ best of two); the
speed-up of each round (its two runs, one after the other, so that a machine
whose speed drifts between minutes moves both), median and range; and what two
processes at once do on this machine in ones (``two_at_once``: a second of pure
Python alone, then two copies started together, once in each round before its
pair: 2.0 on two idle cores; less where the two processes share more than the
cores), the ceiling of the speed-up; and each round's speed-up over that
round's figure, median and range: the part of the machine's ceiling the workers
reached, which is the program's (the rest is the machine's). Then the load
average before each source (the machine may be shared), and the CPU seconds of
each process of the last timed run (sampled from ``/proc`` every 50 ms on
Linux: the parent first, then each worker). A last pair adds ``--junit``
(untimed: a JUnit case per verdict takes seconds) and the outputs are compared:
the JSON report and the JUnit file byte for byte, the JSONL verdicts as lines
(two workers write them grouped by conversation). Exit status 1 when an output
differs.

Every worker of a file reads and decodes the whole feed and judges its share,
so the speed-up is below the number of cores by what reading and decoding cost.
A worker of a SQL store reads only its conversations' rows
(``mantle_stream/feeds/sql_share.py``): the rows of each worker's share are
printed, each row in one share. Each worker first lists the table's
conversations: through the tracker store's index on ``sender_id``, a scan of
the index; in the event broker's table, which has none, a scan of every row.

Then the parent's serial tail (issue 27): ``--workers 2`` on each source run
in this process through the library (``mantle_stream.run``: a ``RunConfig``,
the sinks composed, ``run_workers``), with --jsonl, --junit and --html, timed
part by part: the workers' judging (taken apart: the workers' start, each
worker's judging of its share, its result's way to the parent), merging their
results, telling the sinks the decisions, building the report, encoding it,
and the report's outputs (JUnit, HTML, each written from the report at its
end). The best of ``--rounds`` of each part; ``tail ÷ run``: what follows the
workers' judging, of the whole; and the JUnit file's cases per second in the
parent (which numbers and writes the cases each worker made of its runs).

For each SQLite store, the CPU seconds of reading it alone (no judging, in this
process): as one process reads it, and each of 2 workers' shares (which also
list their conversations; their rows are counted at the end only when another
connection wrote to the store meanwhile).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from mantle_stream.core.engine.evaluator import Evaluator
from mantle_stream.core.engine.partition import Partition, partition_of
from mantle_stream.core.events.model import ENVELOPE_KEYS
from mantle_stream.core.scenario.load import load_scenarios
from mantle_stream.outputs.report import build_report
from mantle_stream.run import OutputsConfig, RunConfig, SourcesConfig, compose_sinks
from mantle_stream.run import workers as strategy
from mantle_stream.run.sources import feed_for

from _common import TRACKER_STORE, feed, machine, scenario_assertions

#: The SQLite stores: their label, their --sources name, whether a tracker store.
SQL_STORES = (("SQLite tracker store", "tracker", True), ("SQLite event broker", "broker", False))
#: The parts of the parent's tail, in the order they happen.
TAIL = ("judging", "merge", "decisions to sinks", "report built", "report JSON", "JUnit", "HTML")


def tail(scenario: Path, events: str, out: Path) -> dict[str, float]:
    """Seconds of each part of one ``check --workers 2`` run in this process."""
    out.mkdir(exist_ok=True)
    config = RunConfig(
        command="check",
        scenarios=(str(scenario),),
        sources=SourcesConfig(events=(events,)),
        outputs=OutputsConfig(
            format="json",
            jsonl=str(out / "v.jsonl"),
            jsonl_overwrite=True,
            junit=str(out / "j.xml"),
            html=str(out / "r.html"),
        ),
    )
    scenarios = load_scenarios([str(scenario)])
    composed = compose_sinks(config, Evaluator(scenarios))
    marks: dict[str, float] = {}
    merge = strategy._merge

    def timed_merge(*args: object, **kwargs: object) -> object:
        marks["merging"] = time.perf_counter()
        try:
            return merge(*args, **kwargs)  # type: ignore[arg-type]
        finally:
            marks["merged"] = time.perf_counter()

    judge = strategy._judge

    def timed_judge(*args: Any, **kwargs: Any) -> Any:
        """In each worker (forked: the parent's patch): when its judging began and
        ended, on the clock every process shares (CLOCK_MONOTONIC on Linux)."""
        began = time.perf_counter()
        try:
            return judge(*args, **kwargs)
        finally:
            (out / f"worker{args[5].index}.s").write_text(f"{began} {time.perf_counter()}")

    strategy._merge = timed_merge  # type: ignore[assignment]
    strategy._judge = timed_judge
    try:
        started = time.perf_counter()
        merged = strategy.run_workers(config, "bench", 2, None, scenarios, {}, composed.sinks)
        assert merged is not None
        returned = time.perf_counter()
        report = build_report(
            merged.judged,
            scenarios=scenarios,
            source=merged.notices,
            conversations=merged.conversations,
        )
        built = time.perf_counter()
        report.to_json()
        encoded = time.perf_counter()
        ended = []
        for sink in composed.sinks.sinks:  # JSONL (nothing left to write), JUnit, HTML
            sink.on_end(report)
            ended.append(time.perf_counter())
    finally:
        strategy._merge, strategy._judge = merge, judge
        composed.sinks.close()
    workers = [[float(x) for x in (out / f"worker{i}.s").read_text().split()] for i in (0, 1)]
    parts = dict(zip(TAIL, (
        marks["merging"] - started, marks["merged"] - marks["merging"], returned - marks["merged"],
        built - returned, encoded - built, ended[1] - ended[0], ended[2] - ended[1],
    ), strict=True))  # fmt: skip
    # Where the judging column goes: the workers started, each judged its share (read,
    # judged, outputs made), the last one's result sent and received.
    parts["workers started"] = min(w[0] for w in workers) - started
    parts["worker 1"], parts["worker 2"] = (w[1] - w[0] for w in workers)
    parts["results in"] = marks["merging"] - max(w[1] for w in workers)
    return parts


def reading(events: str, workers: int) -> list[float]:
    """CPU seconds (every thread's) of reading ``events`` alone, no judging, in this
    process: as one process reads it (``workers`` 1), else each worker's share."""
    config = RunConfig(command="check", sources=SourcesConfig(events=(events,)))
    parts = [None] if workers == 1 else [Partition(i, workers) for i in range(workers)]

    async def read(partition: Partition | None) -> None:
        async with feed_for(config, {}, partition) as feed:
            async for _ in feed:
                pass

    seconds = []
    for partition in parts:
        started = time.process_time()
        anyio.run(read, partition)
        seconds.append(time.process_time() - started)
    return seconds


def store(path: Path, data: bytes, *, tracker: bool = False) -> None:
    """The lines as rows of Rasa's SQL event broker table, or (``tracker``) of its SQL
    tracker store's, with its index on sender_id (``_common.TRACKER_STORE``)."""
    with sqlite3.connect(path) as db:
        if tracker:
            db.executescript(TRACKER_STORE)
        else:
            db.execute(
                "CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, "
                "sender_id VARCHAR(255) NOT NULL, data TEXT)"
            )
        rows = []
        for line in data.splitlines():
            event = json.loads(line)
            cid, text = event["conversation_id"], line.decode()
            if tracker:
                kind = next(k for k in event if k not in ENVELOPE_KEYS)  # its payload's
                rows.append((cid, kind, event.get("timestamp"), text))
            else:
                rows.append((cid, text))
        if tracker:
            db.executemany(
                "INSERT INTO events (sender_id, type_name, timestamp, data) VALUES (?, ?, ?, ?)",
                rows,
            )
        else:
            db.executemany("INSERT INTO events (sender_id, data) VALUES (?, ?)", rows)
    db.close()


#: CPU seconds of each process of the last run with this many workers (parent first).
CPU: dict[int, list[float]] = {}


def _cpu_while(process: subprocess.Popen[bytes]) -> list[float]:
    """The CPU seconds (user + system) of ``process`` and of its children, the last
    seen of each while it runs (every 50 ms; empty where there is no ``/proc``)."""
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    seen: dict[int, float] = {}
    while process.poll() is None:
        pids = [process.pid]
        try:
            for task in os.listdir(f"/proc/{process.pid}/task"):
                with open(f"/proc/{process.pid}/task/{task}/children") as fh:
                    pids += [int(p) for p in fh.read().split()]
        except OSError:
            pass
        for pid in pids:
            try:
                with open(f"/proc/{pid}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            seen[pid] = (int(fields[11]) + int(fields[12])) / tick
        time.sleep(0.05)
    return list(seen.values())


#: A second or so of allocation-heavy pure Python, as judging is: the machine's own
#: speed-up is this run alone against two copies at once (:func:`two_at_once`).
CEILING_CODE = (
    "for _ in range(3):\n"
    "    d = [{'k': i, 'v': str(i)} for i in range(600_000)]\n"
    "    s = sum(x['k'] for x in d)\n"
)


def two_at_once() -> float:
    """What two processes at once do here, in ones: twice the seconds of
    :data:`CEILING_CODE` alone over those of two copies started together. 2.0 on
    two idle cores; less where the two share more than the cores (caches, memory,
    a host's other guests), which bounds the workers' speed-up as much."""

    def run(n: int) -> float:
        started = time.perf_counter()
        for process in [subprocess.Popen([sys.executable, "-c", CEILING_CODE]) for _ in range(n)]:
            process.wait()
        return time.perf_counter() - started

    return 2 * run(1) / run(2)


def shares(path: Path, workers: int) -> list[int]:
    """The rows of each worker's share of the store: the rows its query reads."""
    rows = [0] * workers
    with sqlite3.connect(path) as db:
        for sender, count in db.execute("SELECT sender_id, COUNT(*) FROM events GROUP BY 1"):
            rows[partition_of(sender, workers)] += count
    db.close()
    return rows


def check(
    scenario: Path, events: str, workers: int, out: Path, *, junit: bool = False
) -> tuple[float, dict[str, bytes]]:
    """Seconds of one ``check`` in a fresh process, and what it wrote."""
    out.mkdir(exist_ok=True)
    argv = [sys.executable, "-m", "mantle_stream", "check", str(scenario), "--events", events]
    argv += ["--format", "json", "--workers", str(workers), "--jsonl", str(out / "v.jsonl")]
    argv += ["--jsonl-mode", "overwrite"]
    if junit:
        argv += ["--junit", str(out / "j.xml")]
    started = time.perf_counter()
    # (Into files: a pipe not read while the CPU is sampled would fill and stop it.)
    with tempfile.TemporaryFile() as got, tempfile.TemporaryFile() as err:
        process = subprocess.Popen(argv, stdout=got, stderr=err)
        cpu = _cpu_while(process)
        seconds = time.perf_counter() - started
        got.seek(0)
        err.seek(0)
        stdout, stderr = got.read(), err.read()
    if not junit:  # (the last timed run's)
        CPU[workers] = cpu
    if process.returncode not in (0, 1):
        raise SystemExit(f"workers: check failed ({process.returncode}): {stderr.decode()}")
    files = {"report": stdout}
    files["jsonl"] = b"\n".join(sorted((out / "v.jsonl").read_bytes().splitlines()))
    if junit:
        files["junit"] = (out / "j.xml").read_bytes()
    return seconds, files


def _spread(ratios: list[float], unit: str = "×") -> str:
    """Ratios as ``median× (least–most)``, or (``unit`` ``%``) as percentages."""
    if unit == "%":
        low, mid, high = (
            f"{100 * x:.0f}" for x in (min(ratios), statistics.median(ratios), max(ratios))
        )
        return f"{mid} % ({low}–{high})"
    return f"{statistics.median(ratios):.2f}× ({min(ratios):.2f}–{max(ratios):.2f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--conversations", type=int, default=5000)
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--sources",
        choices=["file", "tracker", "broker", "sql", "both"],
        default="both",
        help="the file, one SQLite table, both tables (sql), or all three (both)",
    )
    args = parser.parse_args()
    if args.quick:
        args.conversations, args.rounds = 100, 1
    total = args.conversations * args.events
    print(
        f"workers: {args.conversations:,} conversations × {args.events} events = {total:,}, "
        f"check --workers 1 and 2, best and median of {args.rounds} alternating rounds"
    )
    print(f"machine: {machine()}")
    rows = []
    tails: list[tuple[str, dict[str, float]]] = []
    same = True
    with tempfile.TemporaryDirectory(prefix="mantle-workers-") as tmp:
        folder = Path(tmp)
        scen = folder / "bench.yml"
        body = {"name": "bench", "simulation_context": "benchmark"}
        scen.write_text(
            json.dumps({"scenario": {**body, "goals": {"assertions": scenario_assertions()}}})
        )
        data = feed(args.conversations, args.events)
        sources: dict[str, str] = {}
        stores: dict[str, Path] = {}
        if args.sources in ("file", "both"):
            (folder / "feed.jsonl").write_bytes(data)
            sources["JSON-lines file"] = str(folder / "feed.jsonl")
        for label, kind, tracker in SQL_STORES:
            if args.sources in (kind, "sql", "both"):
                stores[label] = folder / f"{kind}.db"
                store(stores[label], data, tracker=tracker)
                sources[label] = f"sqlite:///{stores[label]}"
        del data
        loads: dict[str, tuple[Any, ...]] = {}
        for label, events in sources.items():
            loads[label] = os.getloadavg() if hasattr(os, "getloadavg") else ()
            times: dict[int, list[float]] = {1: [], 2: [], 0: []}  # 0: two_at_once()
            outputs: dict[int, dict[str, bytes]] = {}
            for _ in range(args.rounds):
                times[0].append(two_at_once())
                for workers in (1, 2):
                    seconds, outputs[workers] = check(scen, events, workers, folder / f"o{workers}")
                    times[workers].append(seconds)
            # Once more with --junit, untimed: writing a JUnit case per verdict (150,000
            # here) takes seconds, which would hide the judging being measured.
            for workers in (1, 2):
                _, outputs[workers] = check(
                    scen, events, workers, folder / f"o{workers}", junit=True
                )
            cpu = {n: CPU.get(n, []) for n in (1, 2)}
            differ = [k for k in outputs[1] if outputs[1][k] != outputs[2][k]]
            same = same and not differ
            rows.append((label, times, ", ".join(differ) or "same"))
            loads[label] = (*loads[label], cpu)
            parts = [tail(scen, events, folder / "tail") for _ in range(args.rounds)]
            tails.append((label, {k: min(p[k] for p in parts) for k in parts[0]}))
        for label, path in stores.items():
            share = shares(path, 2)
            print(f"{label}: rows of each of 2 workers' shares: {share} (of {total:,})")
            alone, apart = (
                [
                    min(x)
                    for x in zip(
                        *[reading(sources[label], n) for _ in range(args.rounds)], strict=True
                    )
                ]
                for n in (1, 2)
            )
            print(
                f"{label}: reading it alone (no judging), best CPU s of {args.rounds}: one "
                f"process {alone[0]:.2f}; 2 workers' shares "
                + " + ".join(f"{x:.2f}" for x in apart)
                + f" = {sum(apart):.2f} (each listing its conversations)"
            )
    print()
    print(
        "| source               | 1 worker: best / median s | 2 workers: best / median s "
        "| speed-up | of each round: median (range) | two processes at once: median (range) "
        "| round ÷ two at once: median (range) |"
    )
    print(
        "|----------------------|---------------------------|----------------------------"
        "|----------|-------------------------------|---------------------------------------"
        "|-------------------------------------|"
    )
    for label, times, _ in rows:
        one, two = times[1], times[2]
        pairs = [a / b for a, b in zip(one, two, strict=True)]
        of_machine = [p / c for p, c in zip(pairs, times[0], strict=True)]
        print(f"| {label:<20} | {min(one):>12.2f} / {statistics.median(one):<10.2f} | "
              f"{min(two):>13.2f} / {statistics.median(two):<10.2f} | "
              f"{min(one) / min(two):>7.2f}× | {_spread(pairs):>29} | "
              f"{_spread(times[0]):>37} | {_spread(of_machine, '%'):>35} |")  # fmt: skip
    print(
        "(speed-up: best of 1 worker ÷ best of 2; each round: its 1 worker ÷ its 2, run one "
        "after the other; two processes at once: what two copies of a pure-Python loop "
        "started together do, in ones, measured in each round before its pair; round ÷ two "
        "at once: how much of the machine's own figure each round's workers got, the part "
        "that is the program's)"
    )
    print()
    for label, _, outcome in rows:
        print(f"{label}: report, JUnit, JSONL of 1 and 2 workers: {outcome}")
    for label, (*load, cpu) in loads.items():
        shown = "; ".join(
            f"{n} worker{'s' * (n > 1)}: " + " + ".join(f"{c:.2f}" for c in cpu[n]) + " s"
            for n in (1, 2)
        )
        print(f"{label}: load average {', '.join(f'{x:.2f}' for x in load)} before; "
              f"CPU of the last timed run (parent first): {shown}")  # fmt: skip
    print()
    print("the parent's tail under --workers 2 with --jsonl, --junit and --html, best s:")
    width = {k: max(len(k), 6) for k in TAIL}
    print(
        "| source               | "
        + " | ".join(f"{k:>{width[k]}}" for k in TAIL)
        + " | tail ÷ run |"
    )
    print(
        "|----------------------|" + "|".join("-" * (width[k] + 2) for k in TAIL) + "|------------|"
    )
    for label, best in tails:
        run = sum(best[k] for k in TAIL)
        cells = " | ".join(f"{best[k]:>{width[k]}.3f}" for k in TAIL)
        print(f"| {label:<20} | {cells} | {(run - best['judging']) / run:>9.0%}  |")
    for label, best in tails:
        print(f"{label}: the judging column: the workers started after "
              f"{best['workers started']:.3f} s, "
              f"each judged its share in {best['worker 1']:.3f} and {best['worker 2']:.3f} s "
              f"(read, judged, its outputs made), the last result sent and received "
              f"{best['results in']:.3f} s after it was made")  # fmt: skip
    cases = args.conversations * len(scenario_assertions())
    for label, best in tails:
        print(f"{label}: JUnit, {cases:,} cases: {cases / best['JUnit']:,.0f} cases/s "
              "(the parent's part: the workers make each run's cases)")  # fmt: skip
    print()
    print("workers: OK: the outputs are the same" if same else "workers: OUTPUTS DIFFER")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
