"""A worker's share of a SQLite store: its conversations' rows alone, every row read once.

``check --workers N`` on a SQL store (``mantle_stream.feeds.sql_share``): the
row ids each worker's feed fetched are recorded (``read_by_workers``); the
outputs of the workers against one process's are compared in
``test_workers.py`` (and on PostgreSQL in ``test_sql_postgres.py``).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import anyio
import pytest

from mantle_stream.core.engine.partition import Partition, partition_of
from mantle_stream.core.errors import OneProcessNeeded
from mantle_stream.feeds import SqlOptions, open_feed

from _stores import (
    EVENT_BROKER,
    example_lines,
    insert,
    locked_by_a_writer,
    make_db,
    read_by_workers,
)


def _conversations(lines: list[bytes]) -> set[str]:
    return {json.loads(line)["conversation_id"] for line in lines}


@pytest.mark.parametrize("workers", [2, 3])
@pytest.mark.parametrize("broker", [False, True], ids=["tracker-store", "event-broker"])
def test_each_worker_reads_its_conversations_rows_and_every_row_is_read_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int, broker: bool
) -> None:
    lines = example_lines()
    db = make_db(tmp_path / "rasa.db", lines, broker=broker)
    ids, handed = read_by_workers(f"sqlite:///{db}", workers, monkeypatch)
    # Before: every worker fetched every row, and skipped the others' after.
    assert sorted(i for mine in ids for i in mine) == list(range(1, len(lines) + 1))
    for index, mine in enumerate(handed):
        assert len(mine) == len(ids[index]) > 0
        assert {partition_of(c, workers) for c in _conversations(mine)} == {index}
    assert sorted(x for mine in handed for x in mine) == sorted(x.encode() for x in lines)


def test_a_share_is_read_in_id_order_past_rasa_s_index_on_sender_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Rasa's tracker store indexes sender_id: a share's query taken through that index
    # sorted every row left of the share for each batch (SQLite's "TEMP B-TREE FOR
    # ORDER BY"), a million rows' worth 200 times over.
    lines = example_lines()
    db = make_db(tmp_path / "rasa.db", lines)  # (with Rasa's index)
    plans: list[str] = []
    ids, _ = read_by_workers(f"sqlite:///{db}", 2, monkeypatch, plans)
    assert sorted(i for mine in ids for i in mine) == list(range(1, len(lines) + 1))
    assert plans and not [p for p in plans if "ORDER BY" in p or "sender_id" in p], plans


def test_a_table_whose_ids_are_not_integers_is_read_whole_by_each_worker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = example_lines()
    db = tmp_path / "keyed.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE events (id TEXT PRIMARY KEY, sender_id TEXT, data TEXT)")
        conn.executemany(
            "INSERT INTO events VALUES (?, ?, ?)",
            [(f"k{n:05}", json.loads(x)["conversation_id"], x) for n, x in enumerate(lines)],
        )
    conn.close()
    ids, handed = read_by_workers(f"sqlite:///{db}", 2, monkeypatch)
    assert [len(mine) for mine in ids] == [len(lines)] * 2  # (numbered by place: every row)
    assert sorted(x for mine in handed for x in mine) == sorted(x.encode() for x in lines)


async def _drain(spec: str, partition: Partition) -> list[bytes]:
    lines: list[bytes] = []
    async with open_feed(spec, sql=SqlOptions(batch_size=7), partition=partition) as feed:
        async for chunk in feed:
            lines += chunk.data.splitlines()
    return lines


def test_a_row_its_reader_may_not_judge_asks_for_one_process(tmp_path: Path) -> None:
    # A row filed under one conversation whose data names another worker's, and a bad
    # row: the worker that reads it cannot hand it to the worker one process would.
    lines = example_lines()
    first = json.loads(lines[0])
    owner = partition_of(first["conversation_id"], 2)
    other = next(f"moved-{n}" for n in range(100) if partition_of(f"moved-{n}", 2) != owner)
    for data in (json.dumps({**first, "conversation_id": other}), "{broken"):
        db = make_db(tmp_path / f"rasa-{len(data)}.db", lines, broker=True)
        with sqlite3.connect(db) as conn:
            row = (first["conversation_id"], data)
            conn.execute("INSERT INTO events (sender_id, data) VALUES (?, ?)", row)
        conn.close()
        with pytest.raises(OneProcessNeeded, match="judged in one process"):
            anyio.run(_drain, f"sqlite:///{db}", Partition(owner, 2))
        assert anyio.run(_drain, f"sqlite:///{db}", Partition(1 - owner, 2))  # (its own rows)


def test_a_worker_waits_for_a_writers_lock_and_reads_the_rows_written(tmp_path: Path) -> None:
    lines = example_lines()
    db = make_db(tmp_path / "rasa.db", lines[:10])
    with locked_by_a_writer(db, 1.0, lines[10:]):
        handed = [anyio.run(_drain, f"sqlite:///{db}", Partition(i, 2)) for i in (0, 1)]
    assert sorted(x for mine in handed for x in mine) == sorted(x.encode() for x in lines)


def test_conversations_begun_while_a_worker_reads_are_read_too(tmp_path: Path) -> None:
    # Listed when the worker starts, its share would leave out a conversation whose
    # first row is written after that: looked for again at the end of the table.
    lines = example_lines()
    cids = list(dict.fromkeys(json.loads(x)["conversation_id"] for x in lines))
    early = [x for x in lines if json.loads(x)["conversation_id"] in cids[:6]]
    late = [x for x in lines if json.loads(x)["conversation_id"] not in cids[:6]]
    db = tmp_path / "rasa.db"
    with sqlite3.connect(db) as conn:
        conn.execute(EVENT_BROKER)
        insert(conn, early, broker=True)
    conn.close()

    async def read_while_written(partition: Partition) -> list[bytes]:
        lines: list[bytes] = []
        options = SqlOptions(batch_size=5)
        async with open_feed(f"sqlite:///{db}", sql=options, partition=partition) as feed:
            async for chunk in feed:
                if not lines:  # (listed already: the first rows are read)
                    with sqlite3.connect(db) as conn:
                        insert(conn, late, broker=True)
                    conn.close()
                lines += chunk.data.splitlines()
        return lines

    handed: list[bytes] = []
    for index in (0, 1):
        handed += anyio.run(read_while_written, Partition(index, 2))
        with sqlite3.connect(db) as conn:  # (as it was, for the next worker)
            conn.execute("DELETE FROM events WHERE id > ?", (len(early),))
        conn.close()
    assert sorted(handed) == sorted(x.encode() for x in lines)
