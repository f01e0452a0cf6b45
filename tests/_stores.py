"""Rasa's SQL tables and a report to compare sources by: shared by the store tests.

``TRACKER_STORE`` and ``EVENT_BROKER`` are the tables as Rasa's SQL tracker
store and SQL event broker create them on SQLite (the tracker store's index
too); :func:`make_db` fills one with the example conversations; :func:`report`
is ``check --format json`` over the example scenarios, minus what depends on
the source; :func:`read_by_workers` is what each worker's share of a SQL store
fetched and handed on.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from mantle_stream.cli import main
from mantle_stream.core.engine.partition import Partition
from mantle_stream.feeds import SqlOptions, open_feed
from mantle_stream.feeds.sql_db import _JOINED, Batch, Joined, Postgres, Sqlite

ROOT = Path(__file__).resolve().parent.parent
EVENTS = ROOT / "examples/eval/events/all.jsonl"
SCENARIOS = ROOT / "examples/eval/scenarios"
RESULTS = ROOT / "examples/eval/results/2026-12-01T09-00-00"

#: Rasa's SQLTrackerStore table, as SQLAlchemy creates it on SQLite, with its index on
#: sender_id (``index=True``): two statements, for ``executescript``.
TRACKER_STORE = """CREATE TABLE events (
    id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    sender_id VARCHAR(255) NOT NULL,
    type_name VARCHAR(255) NOT NULL,
    timestamp FLOAT,
    intent_name VARCHAR(255),
    action_name VARCHAR(255),
    data TEXT
);
CREATE INDEX ix_events_sender_id ON events (sender_id);"""
#: Rasa's SQLEventBroker table.
EVENT_BROKER = """CREATE TABLE events (
    id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    sender_id VARCHAR(255),
    data TEXT
)"""


def example_lines() -> list[str]:
    return [line for line in EVENTS.read_text().splitlines() if line.strip()]


def tracker_row(line: str) -> tuple[str, str, float | None, str]:
    """(sender_id, type_name, timestamp, data) of one ProtoJSON event, as the store keeps it."""
    event = json.loads(line)
    envelope = {"conversation_id", "timestamp", "metadata", "event_id", "sequence"}
    envelope |= {"user_id", "deployment_environment", "session_id"}
    kind = next(k for k in event if k not in envelope)
    return event["conversation_id"], kind, event["timestamp"], line


def make_db(path: Path, lines: list[str], *, broker: bool = False) -> Path:
    with sqlite3.connect(path) as db:
        db.executescript(EVENT_BROKER if broker else TRACKER_STORE)
        insert(db, lines, broker=broker)
    db.close()
    return path


def insert(db: sqlite3.Connection, lines: list[str], *, broker: bool = False) -> None:
    rows = [tracker_row(line) for line in lines]
    if broker:
        db.executemany(
            "INSERT INTO events (sender_id, data) VALUES (?, ?)", [(r[0], r[3]) for r in rows]
        )
    else:
        db.executemany(
            "INSERT INTO events (sender_id, type_name, timestamp, data) VALUES (?, ?, ?, ?)", rows
        )


def report(
    capsys: pytest.CaptureFixture[str], *events: str, source: Sequence[str] = ()
) -> tuple[int, dict[str, Any]]:
    """``check --format json`` over the example scenarios, minus what depends on the
    source: ``events`` are ``--events`` sources, ``source`` other arguments naming one."""
    capsys.readouterr()
    status = main(
        [
            "check",
            str(SCENARIOS),
            *(["--events", *events] if events else []),
            *source,
            "--results",
            str(RESULTS),
            "--format",
            "json",
        ]
    )
    data = json.loads(capsys.readouterr().out)
    for conversation in data["conversations"]:
        conversation.pop("started", None)
        conversation.pop("duration", None)
    return status, data


def from_file(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict[str, Any]]:
    return report(capsys, str(EVENTS), *extra)


def read_by_workers(
    spec: str, count: int, monkeypatch: pytest.MonkeyPatch, plans: list[str] | None = None
) -> tuple[list[list[Any]], list[list[bytes]]]:
    """The ids of the rows each of ``count`` workers' feeds of ``spec`` fetched (the
    queries of rows with their data), and the lines each handed on; ``plans`` gets
    SQLite's plan of each of those queries."""
    fetched: list[Any] = []
    for kind in (Sqlite, Postgres):

        def fetch(self: Any, query: str, params: Any, most: int, real: Any = kind.fetch) -> Batch:
            batch: Batch = real(self, query, params, most)
            if query.startswith("SELECT id, sender_id"):
                fetched.extend(row[0] for row in batch.rows)
                if plans is not None and isinstance(self, Sqlite):
                    shown = self._conn.execute(f"EXPLAIN QUERY PLAN {query}", tuple(params))
                    plans.append(" / ".join(row[-1] for row in shown))
            return batch

        monkeypatch.setattr(kind, "fetch", fetch)

    def joined(self: Sqlite, query: str, params: Any, real: Any = Sqlite.joined) -> Joined | None:
        found: Joined | None = real(self, query, params)
        if found is not None:  # (the rows SQLite joined: SqlFeed's batches of a plain store)
            fetched.extend(found.ids)
            if plans is not None:
                whole = _JOINED.format(query)
                shown = self._conn.execute(f"EXPLAIN QUERY PLAN {whole}", tuple(params))
                plans.append(" / ".join(row[-1] for row in shown))
        return found

    monkeypatch.setattr(Sqlite, "joined", joined)

    async def lines_of(index: int) -> list[bytes]:
        lines: list[bytes] = []
        options = SqlOptions(batch_size=7)
        async with open_feed(spec, sql=options, partition=Partition(index, count)) as feed:
            async for chunk in feed:
                lines += chunk.data.splitlines()
        return lines

    ids: list[list[Any]] = []
    handed: list[list[bytes]] = []
    for index in range(count):
        fetched.clear()
        handed.append(anyio.run(lines_of, index))
        ids.append(list(fetched))
    return ids, handed


@contextlib.contextmanager
def locked_by_a_writer(db: Path, seconds: float, then: list[str]) -> Iterator[None]:
    """A writer with a rollback journal holding the database's exclusive lock for
    ``seconds`` (a long commit), then writing ``then`` before letting go; the body
    runs while it holds the lock."""
    locked = threading.Event()

    def write() -> None:
        conn = sqlite3.connect(db, isolation_level=None)
        conn.execute("BEGIN EXCLUSIVE")
        locked.set()
        time.sleep(seconds)
        insert(conn, then)
        conn.execute("COMMIT")
        conn.close()

    writer = threading.Thread(target=write)
    writer.start()
    try:
        assert locked.wait(5)
        yield
    finally:
        writer.join()
