"""Replaying a SQL tracker store: memory stays flat however big the table.

    python benchmarks/sql_store.py            # 2,000 and 8,000 conversations × 100 events
    python benchmarks/sql_store.py --quick    # 200 and 800 (a smoke run)
    python benchmarks/sql_store.py --large-events 960   # 960 events of 300 KB (287 MiB)

With ``--large-events N`` it builds one table of N events of 300 KB each (bot
messages, ten per conversation) and compares the peak RSS of ``check`` over it
with that over the same events in a JSON lines file: the feed reads rows in
batches bounded by bytes (``BATCH_BYTES``), so a table of large events is held a
few MiB at a time, as a file is.

Builds two SQLite files with the table Rasa's SQL tracker store creates
(``events(id, sender_id, type_name, timestamp, intent_name, action_name,
data)``, and its index on ``sender_id``), the second four times the first, and
runs ``mantle-stream check --events sqlite:///...`` on each in a fresh process
with ``--keep-finished`` (what a replay of a store too big to list keeps) and
``--jsonl`` (every verdict still written). It prints each run's peak RSS
(``wait4``'s ``ru_maxrss``) and the ratio big ÷ small: the feed reads the table
in batches by ``id`` and never holds it, so the ratio stays near 1 while the
table grows fourfold — the evidence, at a size that runs in seconds, that a 10
GB store is streamed.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import TRACKER_STORE, conversation_id, conversation_lines, machine

SCENARIO = (
    Path(__file__).resolve().parent.parent / "examples/eval/scenarios/card_replace_damaged.yml"
)

LARGE_SCENARIO = """\
scenario:
  name: skill
  simulation_context: A customer is answered at length.
  goals:
    assertions:
      - skill_activated:
          skill_id: card_replace
"""


def build(path: Path, conversations: int, events: int, seed: int = 5) -> int:
    """A tracker store of ``conversations`` × ``events`` rows, interleaved 20 at a time."""
    rng = random.Random(seed)
    with sqlite3.connect(path) as db:
        db.executescript(TRACKER_STORE)
        for start in range(0, conversations, 20):
            streams = [
                list(conversation_lines(conversation_id(i), events, rng))
                for i in range(start, min(start + 20, conversations))
            ]
            rows = [
                (conversation_id(start + s), "event", 1767261600.0 + n, line.decode())
                for n in range(events)
                for s, stream in enumerate(streams)
                for line in (stream[n],)
            ]
            db.executemany(
                "INSERT INTO events (sender_id, type_name, timestamp, data) VALUES (?, ?, ?, ?)",
                rows,
            )
    db.close()
    return path.stat().st_size


def large_events(db: Path, events: Path, count: int, size: int = 300_000) -> None:
    """``count`` bot messages of ``size`` bytes, ten per conversation, both as a
    tracker store table at ``db`` and as JSON lines at ``events``."""
    from mantle_stream.testing import bot, conversation

    message = bot("x" * size)
    rows: list[tuple[str, str]] = []
    for n in range(0, count, 10):
        cid = f"big-{n}"
        rows += [
            (cid, line.decode())
            for line in conversation(*[message] * min(10, count - n), conversation_id=cid)
        ]
    events.write_text("".join(line for _, line in rows))
    with sqlite3.connect(db) as conn:
        conn.executescript(TRACKER_STORE)
        conn.executemany(
            "INSERT INTO events (sender_id, type_name, timestamp, data) VALUES (?, 'bot', 0, ?)",
            rows,
        )
    conn.close()


def replay(
    db: Path | str, jsonl: Path, keep: int, scenario: Path = SCENARIO
) -> tuple[float, int, int]:
    """Seconds, peak RSS (KiB) and exit status of one check over the store (or a file)."""
    started = time.perf_counter()
    argv = [sys.executable, "-m", "mantle_stream", "check", str(scenario)]
    source = db if isinstance(db, str) else f"sqlite:///{db}"
    argv += ["--events", source, "--keep-finished", str(keep)]
    argv += ["--format", "json", "--jsonl", str(jsonl)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    return time.perf_counter() - started, usage.ru_maxrss, os.waitstatus_to_exitcode(status)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--conversations", type=int, default=2000)
    parser.add_argument("--events", type=int, default=100)
    parser.add_argument("--keep-finished", type=int, default=100)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--large-events", type=int, metavar="N", default=0)
    args = parser.parse_args()
    if args.large_events:
        return large(args.large_events)
    if args.quick:
        args.conversations = 200
    print(
        f"sql_store: Rasa's SQL tracker store in SQLite, {args.conversations:,} and "
        f"{4 * args.conversations:,} conversations × {args.events} events, replayed with "
        f"--keep-finished {args.keep_finished}"
    )
    print(f"machine: {machine()}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="mantle-sql-") as tmp:
        for scale in (1, 4):
            n = args.conversations * scale
            db = Path(tmp) / f"store{scale}.db"
            size = build(db, n, args.events)
            seconds, rss, code = replay(db, Path(tmp) / f"v{scale}.jsonl", args.keep_finished)
            verdicts = sum(1 for _ in (Path(tmp) / f"v{scale}.jsonl").open("rb"))
            rows.append((n, n * args.events, size, seconds, rss, code, verdicts))
    print()
    print("| conversations | rows      | store MB | seconds | rows/s   | peak RSS MiB | verdicts |")
    print("|---------------|-----------|----------|---------|----------|--------------|----------|")
    for n, events, size, seconds, rss, _, verdicts in rows:
        print(f"| {n:>13,} | {events:>9,} | {size / 1e6:>8.1f} | {seconds:>7.2f} | "
              f"{events / seconds:>8,.0f} | {rss / 1024:>12.1f} | {verdicts:>8,} |")  # fmt: skip
    small, big = rows
    ratio = big[4] / small[4]
    print(f"\npeak RSS big ÷ small: {ratio:.2f} for a table {big[1] / small[1]:.0f}× as big")
    ok = all(r[5] in (0, 1) for r in rows) and ratio < 1.3
    print("sql_store: OK: memory stays flat" if ok else "sql_store: MEMORY GREW or a run failed")
    return 0 if ok else 1


def large(count: int) -> int:
    """Peak RSS of a check over ``count`` events of 300 KB: in a table, in a file."""
    print(f"sql_store: {count:,} events of 300 KB, from a SQLite table and from a file")
    print(f"machine: {machine()}")
    found = []
    with tempfile.TemporaryDirectory(prefix="mantle-sql-") as tmp:
        db, events = Path(tmp) / "large.db", Path(tmp) / "large.jsonl"
        # Built in a process of its own: a child started from this one would inherit
        # the peak it reached building them (ru_maxrss survives fork and exec).
        builder = multiprocessing.get_context("spawn").Process(
            target=large_events, args=(db, events, count)
        )
        builder.start()
        builder.join()
        # A check no bot message settles or is quoted by: the feed's memory is measured.
        scenario = Path(tmp) / "skill.yml"
        scenario.write_text(LARGE_SCENARIO)
        for name, source in (("table", db), ("file", str(events))):
            seconds, rss, code = replay(source, Path(tmp) / f"{name}.jsonl", 100, scenario)
            mib = (db if name == "table" else events).stat().st_size / 2**20
            found.append((name, mib, seconds, rss, code))
    print()
    print("| source | MiB   | seconds | peak RSS MiB | exit |")
    print("|--------|-------|---------|--------------|------|")
    for name, mib, seconds, rss, code in found:
        print(f"| {name:<6} | {mib:>5.0f} | {seconds:>7.2f} | {rss / 1024:>12.1f} | {code:>4} |")
    table, file = found
    ok = table[4] in (0, 1) and table[3] < 4 * file[3]
    print("sql_store: OK: batches bounded by bytes" if ok else "sql_store: THE TABLE WAS HELD")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
