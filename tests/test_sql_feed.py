"""``sqlite:///`` sources: Rasa's SQL tracker store and SQL event broker tables, for real.

Each test builds a SQLite file with Rasa's table shape holding the example
conversations, and the report from it equals the report from the JSON lines
file they came from.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from mantle_stream.cli import main
from mantle_stream.core.engine.partition import Partition
from mantle_stream.core.errors import FeedError
from mantle_stream.feeds import SqlOptions, open_feed, sql
from mantle_stream.feeds.sql import parse_since, redact
from mantle_stream.feeds.sql_db import Sqlite

from _harness import run_cli
from _stores import (
    RESULTS,
    ROOT,
    SCENARIOS,
    TRACKER_STORE,
    example_lines,
    from_file,
    insert,
    locked_by_a_writer,
    make_db,
    report,
    tracker_row,
)


def test_tracker_store_gives_the_same_report_as_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = make_db(tmp_path / "rasa.db", example_lines())
    expected = from_file(capsys)
    assert expected[1]["summary"]["conversations"] == 13
    assert report(capsys, f"sqlite:///{db}") == expected


def test_event_broker_gives_the_same_report_as_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = make_db(tmp_path / "events.db", example_lines(), broker=True)
    assert report(capsys, f"sqlite:///{db}") == from_file(capsys)


def test_a_relative_path_is_relative_to_the_working_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    make_db(tmp_path / "rasa.db", example_lines())
    expected = from_file(capsys)
    monkeypatch.chdir(tmp_path)
    assert report(capsys, "sqlite:///rasa.db") == expected


def flat_rows(lines: list[str]) -> list[str]:
    """The same events as flat rows without ``sender_id``, as older stores keep them."""
    out = []
    for line in lines:
        event = json.loads(line)
        _, kind, timestamp, _ = tracker_row(line)
        payload = event[kind]
        row: dict[str, Any] = {"event": kind, "timestamp": timestamp}
        row["sequence"] = event["sequence"]
        if event["metadata"] is not None:
            row["metadata"] = json.loads(event["metadata"])
        for key, value in payload.items():
            if key.endswith("_json") and value is not None:
                row[key.removesuffix("_json")] = json.loads(value)
            else:
                row[key] = value
        out.append(json.dumps(row, indent=2))  # pretty-printed, across lines
    return out


def test_flat_rows_are_given_their_sender_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = example_lines()
    path = tmp_path / "flat.db"
    with sqlite3.connect(path) as db:
        db.executescript(TRACKER_STORE)
        db.executemany(
            "INSERT INTO events (sender_id, type_name, timestamp, data) VALUES (?, ?, ?, ?)",
            [
                (*tracker_row(line)[:3], flat)
                for line, flat in zip(lines, flat_rows(lines), strict=True)
            ],
        )
    db.close()
    status, flat = report(capsys, f"sqlite:///{path}")
    expected = from_file(capsys)
    assert (status, flat["summary"]) == (expected[0], expected[1]["summary"])
    verdicts = {
        c["conversation_id"]: [a["verdict"] for a in c["assertions"]] for c in flat["conversations"]
    }
    assert verdicts == {
        c["conversation_id"]: [a["verdict"] for a in c["assertions"]]
        for c in expected[1]["conversations"]
    }


async def collect(spec: str, options: SqlOptions, *, limit: float = 10) -> list[bytes]:
    lines: list[bytes] = []
    with anyio.fail_after(limit):
        async with open_feed(spec, sql=options) as feed:
            async for chunk in feed:
                lines += chunk.data.splitlines()
    return lines


def conversation_ids(lines: list[bytes]) -> list[str]:
    seen: dict[str, None] = {}
    for line in lines:
        event = json.loads(line)
        seen[event.get("conversation_id") or event["sender_id"]] = None
    return list(seen)


def test_batches_cross_their_boundaries_in_order(tmp_path: Path) -> None:
    lines = example_lines()
    db = make_db(tmp_path / "rasa.db", lines)
    for batch in (1, 7, len(lines) - 1, len(lines), len(lines) + 1, 5000):
        got = anyio.run(collect, f"sqlite:///{db}", SqlOptions(batch_size=batch))
        assert [line.decode() for line in got] == lines, batch


def test_a_plain_store_is_read_in_batches_sqlite_joins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Rows fetched one Python tuple each, and the interpreter's lock handed back and
    # forth at every row, cost as much as judging them: after the first batch (rows,
    # to learn their size), a store Mantle wrote comes from SQLite a batch at a time.
    lines = example_lines()
    db = make_db(tmp_path / "rasa.db", lines)
    calls: list[str] = []
    fetch, joined = Sqlite.fetch, Sqlite.joined

    def counted_fetch(self: Sqlite, query: str, *args: Any) -> Any:
        calls.append("rows" if query.startswith("SELECT id, sender_id") else "other")
        return fetch(self, query, *args)

    def counted_joined(self: Sqlite, *args: Any) -> Any:
        calls.append("joined")
        return joined(self, *args)

    monkeypatch.setattr(Sqlite, "fetch", counted_fetch)
    monkeypatch.setattr(Sqlite, "joined", counted_joined)
    got = anyio.run(collect, f"sqlite:///{db}", SqlOptions(batch_size=7))
    assert [line.decode() for line in got] == lines
    assert calls.count("rows") == 1
    assert calls.count("joined") == (len(lines) - 7) // 7 + 1  # (the last: fewer)


@pytest.mark.parametrize(
    "odd",
    [
        '{"event": "user", "text": "hi"}',  # a flat row: given its sender_id
        '{"conversation_id": "c9",\n "timestamp": 1}',  # pretty-printed
        None,  # NULL data: a bad row
        "x",  # not JSON: a bad row
    ],
    ids=["flat", "two-lines", "null", "not-json"],
)
def test_a_batch_sqlite_joined_that_is_not_plain_is_read_row_by_row(
    tmp_path: Path, odd: str | None
) -> None:
    # After it, the store is read as rows, each looked at: the same lines as when
    # every batch was (a batch of one row).
    lines = example_lines()
    db = make_db(tmp_path / "rasa.db", lines, broker=True)
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO events (sender_id, data) VALUES ('c9', ?)", (odd,))
        insert(conn, lines[:20], broker=True)
    conn.close()
    spec = f"sqlite:///{db}"
    one_by_one = anyio.run(collect, spec, SqlOptions(batch_size=1))
    assert anyio.run(collect, spec, SqlOptions(batch_size=7)) == one_by_one
    assert len(one_by_one) == len(lines) + 21


def test_conversation_filter_keeps_only_those(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = example_lines()
    db = make_db(tmp_path / "rasa.db", lines)
    everyone = conversation_ids([line.encode() for line in lines])
    wanted = (everyone[1], everyone[4])
    got = anyio.run(collect, f"sqlite:///{db}", SqlOptions(conversations=wanted, batch_size=10))
    assert [line.decode() for line in got] == [
        line for line in lines if json.loads(line)["conversation_id"] in wanted
    ]
    _, data = report(
        capsys, f"sqlite:///{db}", "--conversation", wanted[0], "--conversation", wanted[1]
    )
    assert sorted(c["conversation_id"] for c in data["conversations"]) == sorted(wanted)


def test_since_keeps_rows_at_or_after_it(tmp_path: Path) -> None:
    lines = example_lines()
    db = make_db(tmp_path / "rasa.db", lines)
    stamps = sorted({json.loads(line)["timestamp"] for line in lines})
    cut = stamps[len(stamps) // 2]
    got = anyio.run(collect, f"sqlite:///{db}", SqlOptions(since=cut))
    assert [line.decode() for line in got] == [
        line for line in lines if json.loads(line)["timestamp"] >= cut
    ]
    assert got


def test_since_parses_iso_8601_and_epoch_seconds() -> None:
    assert parse_since("1796115600") == 1796115600.0
    assert parse_since("1796115600.5") == 1796115600.5
    assert parse_since("2026-12-01T09:00:00Z") == parse_since("2026-12-01T09:00:00+00:00")
    assert parse_since("2026-12-01T09:00:00") == parse_since("2026-12-01T09:00:00Z")
    assert parse_since("2026-12-01T10:00:00+01:00") == parse_since("2026-12-01T09:00:00Z")
    with pytest.raises(ValueError, match="--since"):
        parse_since("yesterday")
    with pytest.raises(ValueError, match="--since"):
        parse_since("nan")


def test_since_on_a_broker_table_is_a_clear_error(tmp_path: Path) -> None:
    db = make_db(tmp_path / "events.db", example_lines(), broker=True)
    with pytest.raises(FeedError, match="--since needs a `timestamp` column"):
        anyio.run(collect, f"sqlite:///{db}", SqlOptions(since=0))


def test_follow_picks_up_rows_written_after_it_started(tmp_path: Path) -> None:
    lines = example_lines()
    half = len(lines) // 2
    db = make_db(tmp_path / "rasa.db", lines[:half])

    def writer() -> None:
        time.sleep(0.3)
        with sqlite3.connect(db) as conn:
            for line in lines[half:]:
                insert(conn, [line])
                conn.commit()
        conn.close()

    async def follow() -> list[bytes]:
        got: list[bytes] = []
        options = SqlOptions(batch_size=50, poll_interval=0.02)
        with anyio.fail_after(20):
            async with open_feed(f"follow:sqlite:///{db}", sql=options) as feed:
                assert feed.live
                thread = threading.Thread(target=writer)
                thread.start()
                try:
                    async for chunk in feed:
                        got += chunk.data.splitlines()
                        if len(got) >= len(lines):
                            break
                finally:
                    await anyio.to_thread.run_sync(thread.join)
                # Nothing more comes, and the feed does not end by itself.
                with anyio.move_on_after(0.2) as scope:
                    await feed.__anext__()
                assert scope.cancelled_caught
        return got

    assert [line.decode() for line in anyio.run(follow)] == lines


def _check_with_a_bad_row(
    db: Path, row_id: str, capsys: pytest.CaptureFixture[str]
) -> tuple[int, str]:
    """``check`` of the store after the row ``row_id`` (an SQL literal) was broken:
    its exit status and standard error."""
    with sqlite3.connect(db) as conn:
        conn.execute(f"UPDATE events SET data = '{{not json' WHERE id = {row_id}")
    conn.close()
    capsys.readouterr()
    status = main(["check", str(SCENARIOS), "--events", f"sqlite:///{db}", "--format", "json"])
    return status, capsys.readouterr().err


def test_a_bad_row_is_named_by_its_table_and_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = example_lines()[:20]
    db = make_db(tmp_path / "rasa.db", lines)
    status, err = _check_with_a_bad_row(db, "7", capsys)
    assert status == 2
    assert f"sqlite:///{db} (table events, row id):7: bad event" in err


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p / "missing.db", "No such file"),
        (lambda p: p, "Is a directory"),
        (lambda p: _write(p / "text.db", b"not a database at all" * 100), "not a database"),
        (lambda p: _table(p / "other.db", "CREATE TABLE other (x)"), "no table `events`"),
        (
            lambda p: _table(p / "shape.db", "CREATE TABLE events (id INTEGER, body TEXT)"),
            "table `events` has no column `sender_id`, `data`",
        ),
    ],
)
def test_what_cannot_be_read_is_a_feed_error(tmp_path: Path, make: Any, message: str) -> None:
    path = make(tmp_path)
    with pytest.raises(FeedError, match=message):
        anyio.run(collect, f"sqlite:///{path}", SqlOptions())


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _table(path: Path, ddl: str) -> Path:
    with sqlite3.connect(path) as db:
        db.execute(ddl)
    db.close()
    return path


def test_a_bad_sqlite_url_says_what_it_expects(tmp_path: Path) -> None:
    with pytest.raises(FeedError, match="expected `sqlite:///PATH`"):
        anyio.run(collect, "sqlite://rasa.db", SqlOptions())


def test_the_cli_reports_errors_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    status = main(["check", str(SCENARIOS), "--events", f"sqlite:///{tmp_path}/missing.db"])
    err = capsys.readouterr().err
    assert status == 2
    assert "No such file" in err and "Traceback" not in err
    db = make_db(tmp_path / "events.db", example_lines(), broker=True)
    status = main(["check", str(SCENARIOS), "--events", f"sqlite:///{db}", "--since", "0"])
    err = capsys.readouterr().err
    assert status == 2 and "--since needs a `timestamp` column" in err
    status = main(["check", str(SCENARIOS), "--events", f"sqlite:///{db}", "--since", "soon"])
    err = capsys.readouterr().err
    assert status == 2 and "--since: expected" in err


def test_the_database_file_is_opened_read_only(tmp_path: Path) -> None:
    db = make_db(tmp_path / "rasa.db", example_lines()[:5])
    before = db.read_bytes()
    anyio.run(collect, f"sqlite:///{db}", SqlOptions())
    assert db.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rasa.db"]


def test_a_password_never_shows() -> None:
    assert (
        redact("postgresql://mantle:s3cret@db:5432/rasa") == "postgresql://mantle:***@db:5432/rasa"
    )
    assert redact("follow:postgres://u:p@h/d") == "follow:postgres://u:***@h/d"
    assert redact("postgresql://u@h/d") == "postgresql://u@h/d"
    assert redact("sqlite:///a:b@c") == "sqlite:///a:b@c"
    # A query parameter named for a secret; a URL urlsplit refuses (never raises).
    assert (
        redact("h://x/?a=1&sasl_password=p&token=t#f") == "h://x/?a=1&sasl_password=***&token=***#f"
    )
    assert redact("postgresql://u:pw@[db/rasa") == "postgresql://u:***@[db/rasa"


def test_libpqs_message_quoting_the_password_is_scrubbed() -> None:
    # libpq quotes the password it cannot parse: `invalid percent-encoded token`.
    with pytest.raises(FeedError) as caught:
        anyio.run(collect, "postgresql://u:p%zzs3cret-pw@127.0.0.1:1/db", SqlOptions())
    assert "s3cret-pw" not in str(caught.value) and "***" in str(caught.value)


def _keyed_by(path: Path, ids: list[str]) -> Path:
    """The example events in a broker table whose `id` column holds ``ids``, text."""
    rows = [tracker_row(line) for line in example_lines()]
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE events (id TEXT PRIMARY KEY, sender_id VARCHAR(255), data TEXT)")
        db.executemany(
            "INSERT INTO events (id, sender_id, data) VALUES (?, ?, ?)",
            [(i, r[0], r[3]) for i, r in zip(ids, rows, strict=True)],
        )
    db.close()
    return path


@pytest.mark.parametrize("kind", ["text", "uuid"])
@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_table_with_text_or_uuid_ids_is_read_in_id_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, workers: str
) -> None:
    # Keyset pagination from the first row on, by what the column holds: no
    # integer to compare with (before: `int(id)`, a ValueError traceback).
    n = len(example_lines())
    ids = [f"row-{i:05d}" for i in range(n)] if kind == "text" else [
        str(uuid.UUID(int=random.Random(i).getrandbits(128))) for i in range(n)
    ]  # fmt: skip
    db = _keyed_by(tmp_path / "events.db", ids)
    lines = anyio.run(collect, f"sqlite:///{db}", SqlOptions(batch_size=7))
    assert sorted(lines) == sorted(line.encode() for line in example_lines())
    status, got = report(capsys, f"sqlite:///{db}", source=["--workers", workers])
    expected = from_file(capsys)
    assert status == expected[0]
    for data in (got, expected[1]):  # (random ids: conversations start in another order)
        data["conversations"].sort(key=lambda c: c["conversation_id"])
    # Such ids order rows by value, not by when they were written: the table may
    # reorder a conversation, so its gap is waited for; one file passes it at once.
    waited, passed = got["warnings"], expected[1]["warnings"]
    assert (waited.pop("gaps"), passed.pop("gaps_passed")) == (1, 1)
    assert waited.pop("occurrences") == [
        {**o, "warning": "gaps"} for o in passed.pop("occurrences")
    ]
    assert got == expected[1]


def test_rows_without_integer_ids_are_numbered_by_their_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = _keyed_by(tmp_path / "events.db", [f"r{i:05d}" for i in range(len(example_lines()))])
    status, err = _check_with_a_bad_row(db, "'r00003'", capsys)
    assert status == 2
    # The fourth row in id order: a text id is no line number.
    assert f"sqlite:///{db} (table events, row in id order):4: bad event" in err


def _read_only_mount_works() -> bool:
    """Whether a private read-only bind mount can be made here (a user namespace)."""
    if not shutil.which("unshare"):
        return False
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", "mount --bind /tmp /tmp && mount -o remount,ro,bind /tmp"],
        capture_output=True,
        timeout=30,
        check=False,
    )
    return probe.returncode == 0


@pytest.mark.skipif(not _read_only_mount_works(), reason="no read-only bind mount here")
@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_wal_database_on_a_read_only_mount_is_read_as_immutable(
    tmp_path: Path, workers: str
) -> None:
    # `mode=ro` must create the -shm file beside a WAL database, which a
    # read-only file system refuses: "unable to open database file".
    folder = tmp_path / "ro"
    folder.mkdir()
    db = make_db(folder / "rasa.db", example_lines())
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode=WAL").fetchone() == ("wal",)
    conn.close()
    check = [sys.executable, "-m", "mantle_stream", "check", str(SCENARIOS), "--events"]
    check += [f"sqlite:///{db}", "--results", str(RESULTS), "--format", "json"]
    check += ["--workers", workers]
    mount = f"mount --bind {folder} {folder} && mount -o remount,ro,bind {folder}"
    proc = subprocess.run(
        ["unshare", "-rm", "sh", "-c", f'{mount} && exec "$@"', "sh", *check],
        capture_output=True, text=True, timeout=120, check=False, cwd=str(ROOT),
    )  # fmt: skip
    writable = subprocess.run(check, capture_output=True, text=True, timeout=120, cwd=str(ROOT))
    assert proc.returncode == writable.returncode == 1, proc.stderr  # judged: some fail
    assert json.loads(proc.stdout) == json.loads(writable.stdout)  # read whole, the same
    warning = (
        f"mantle-stream: warning: `{db}` is a WAL database that cannot be opened read-only "
        "here (a read-only file system?): read as immutable"
    )
    assert proc.stderr.startswith(warning) and proc.stderr.count(warning) == 1, proc.stderr


@pytest.mark.slow  # the lock is held 6 s, past SQLite's own 5 s wait: 12 s in all
def test_follow_waits_for_a_writers_lock_and_reports_the_wait(tmp_path: Path) -> None:
    lines = example_lines()
    db = make_db(tmp_path / "rasa.db", lines[:10])
    # Longer than SQLite's own default wait (5 s), after which it said "database is locked".
    with locked_by_a_writer(db, 6.0, lines[10:]):
        result = run_cli(
            "check", str(SCENARIOS), "--events", f"follow:sqlite:///{db}",
            "--results", str(RESULTS), "--linger", "1", "--format", "json",
        )  # fmt: skip
    assert result.returncode == 1, result.stderr  # (the example feed has failures)
    assert "is locked by another connection (a writer): waiting" in result.stderr
    data = json.loads(result.stdout)
    assert data["summary"]["conversations"] == 13
    (said,) = data["warnings"]["source"]
    match = re.fullmatch(
        rf"`follow:sqlite:///{re.escape(str(db))}` was locked by another connection "
        r"\(a writer\): waited once, (\d+\.\d) s at most",
        said,
    )
    assert match is not None, said
    assert float(match.group(1)) >= 1  # (less than 6: the process took a while to start)


def test_a_replay_waits_for_a_lock_up_to_its_bound(tmp_path: Path) -> None:
    lines = example_lines()
    db = make_db(tmp_path / "rasa.db", lines[:10])
    with locked_by_a_writer(db, 1.5, lines[10:]):
        with pytest.raises(FeedError, match=r"stayed locked by another connection for \d"):
            anyio.run(collect, f"sqlite:///{db}", SqlOptions(lock_timeout=0.5))
        # Within the bound: the wait ends with the writer's commit, and every row is read.
        got = anyio.run(collect, f"sqlite:///{db}", SqlOptions(lock_timeout=30))
    assert [line.decode() for line in got] == lines


_PEAK = """\
import atexit, sys
from mantle_stream.cli import main

def peak():
    # VmHWM: this process's own high-water mark (ru_maxrss would carry the parent's
    # size at fork across exec).
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmHWM:"))
    print("peak KiB", line.split()[1], file=sys.stderr)

atexit.register(peak)
sys.exit(main(sys.argv[1:]))
"""


def _peak_kib(tmp_path: Path, source: str) -> int:
    scenario = tmp_path / "skill.yml"
    scenario.write_text(
        "scenario:\n  name: skill\n  simulation_context: Long answers.\n  goals:\n"
        "    assertions:\n      - skill_activated:\n          skill_id: card_replace\n"
    )
    result = subprocess.run(
        # (One process: workers would each hold their own batches, out of this one's sight.)
        [sys.executable, "-c", _PEAK, "check", str(scenario), "--events", source, "--workers", "1"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr  # (no skill was activated)
    return int(result.stderr.rsplit("peak KiB ", 1)[1].split()[0])


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmHWM from /proc")
def test_a_table_of_large_events_is_read_a_few_mebibytes_at_a_time(tmp_path: Path) -> None:
    """150 events of 300 KB (43 MiB): rows are fetched in batches bounded by bytes,
    so the table costs about what the same events in a file cost (it was read
    5,000 rows at a time: the whole table, held four times over)."""
    from mantle_stream.testing import bot, conversation

    message = bot("x" * 300_000)
    lines = [
        line.decode()
        for n in range(15)
        for line in conversation(*[message] * 10, conversation_id=f"big-{n}")
    ]
    db = make_db(tmp_path / "large.db", lines)
    events = tmp_path / "large.jsonl"
    events.write_text("".join(lines))
    del lines, message
    from_table = _peak_kib(tmp_path, f"sqlite:///{db}")
    from_file = _peak_kib(tmp_path, str(events))
    assert from_table < from_file + 64 * 1024, (from_table, from_file)


def test_a_followed_database_deleted_and_created_again_is_read_anew(tmp_path: Path) -> None:
    lines = example_lines()
    half = len(lines) // 2
    db = make_db(tmp_path / "rasa.db", lines[:half])

    async def follow() -> tuple[list[bytes], list[str]]:
        got: list[bytes] = []
        options = SqlOptions(poll_interval=0.02)
        with anyio.fail_after(20):
            async with open_feed(f"follow:sqlite:///{db}", sql=options) as feed:
                async for chunk in feed:
                    got += chunk.data.splitlines()
                    if len(got) == half:
                        # Deleted while followed, then created again with the other rows.
                        db.unlink()
                        make_db(tmp_path / "new.db", lines[half:]).rename(db)
                    if len(got) >= len(lines):
                        break
                return got, feed.notices

    got, notices = anyio.run(follow)
    assert [line.decode() for line in got] == lines
    assert notices == [
        f"`follow:sqlite:///{db}` was deleted and created again (once): each new "
        "database was read from its first row"
    ]


def _insert_with_ids(db: Path, rows: Sequence[tuple[int | None, str]]) -> None:
    with sqlite3.connect(db) as conn:
        conn.executemany(
            "INSERT INTO events (id, sender_id, type_name, timestamp, data) VALUES (?, ?, ?, ?, ?)",
            [(row_id, *tracker_row(line)) for row_id, line in rows],
        )
    conn.close()


async def _follow_until(db: Path, wanted: int, write: Any) -> tuple[list[bytes], list[str]]:
    """Follow ``db``, call ``write()`` once its rows are read, then read until
    ``wanted`` lines came (or 8 s passed); the lines and the feed's notices."""
    got: list[bytes] = []
    options = SqlOptions(poll_interval=0.02)
    async with open_feed(f"follow:sqlite:///{db}", sql=options) as feed:
        with anyio.move_on_after(8):
            async for chunk in feed:
                first = not got
                got += chunk.data.splitlines()
                if first:
                    write()
                if len(got) >= wanted:
                    break
        await anyio.sleep(0.1)
        return got, feed.notices


def test_rows_written_later_with_lower_ids_are_read_late(tmp_path: Path) -> None:
    lines = example_lines()
    db = make_db(tmp_path / "rasa.db", [])
    _insert_with_ids(db, [(1000 + n, line) for n, line in enumerate(lines[:20])])
    # Ids below those read (a transaction that commits late; ids given by hand),
    # the lowest an id can be among them, and one above.
    later: list[tuple[int | None, str]] = [(5, lines[20]), (-(2**63), lines[21]), (2000, lines[22])]

    got, notices = anyio.run(_follow_until, db, 23, lambda: _insert_with_ids(db, later))
    assert sorted(got) == sorted(line.encode() for line in lines[:23])
    assert notices == [
        f"`follow:sqlite:///{db}`: 2 rows written after rows with higher ids were read, "
        f"read late (ids {-(2**63)}, 5)"
    ]


@pytest.mark.slow  # 10,000 rows read before the missed ones: 8 s
def test_rows_below_the_ids_kept_and_rows_without_an_id_are_counted_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sql, "LOOK_BACK_ROWS", 3)
    lines = example_lines()
    db = _table(
        tmp_path / "rasa.db",
        "CREATE TABLE events (id INTEGER, sender_id TEXT, type_name TEXT, "
        "timestamp FLOAT, data TEXT)",
    )
    _insert_with_ids(db, [(100 + n, line) for n, line in enumerate(lines[:10])])
    later = [(50, lines[10]), (None, lines[11]), (None, lines[12])]
    got, notices = anyio.run(_follow_until, db, 13, lambda: _insert_with_ids(db, later))
    assert got == [line.encode() for line in lines[:10]]
    names = sorted({json.loads(line)["conversation_id"] for line in lines[11:13]})
    assert notices == [
        f"`follow:sqlite:///{db}`: 1 row written with ids below the last 3 read "
        "(below id 107) was not read",
        f"`follow:sqlite:///{db}`: 2 rows with no id (NULL) were not read: no "
        f"place in id order (conversations {', '.join(f'`{n}`' for n in names)})",
    ]


def _counts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The COUNT queries SqlFeed asks any SQLite database from now on."""
    counts: list[str] = []
    fetch = Sqlite.fetch

    def counted(self: Sqlite, query: str, *args: Any) -> Any:
        if query.startswith("SELECT COUNT(*)"):
            counts.append(query)
        return fetch(self, query, *args)

    monkeypatch.setattr(Sqlite, "fetch", counted)
    return counts


@pytest.mark.parametrize("partition", [None, 0, 1], ids=["one-process", "worker-0", "worker-1"])
def test_a_replay_of_a_table_no_one_writes_to_counts_only_rows_without_an_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, partition: int | None
) -> None:
    # Counting the rows at or below the last id read scans the whole table (0.4 s of
    # each worker's share of a million rows): when no other connection committed
    # since reading began, no row can have been passed by, and none is counted.
    lines = example_lines()
    db = make_db(tmp_path / "rasa.db", lines)
    counts = _counts(monkeypatch)
    part = None if partition is None else Partition(partition, 2)

    async def replay() -> list[bytes]:
        got: list[bytes] = []
        async with open_feed(
            f"sqlite:///{db}", sql=SqlOptions(batch_size=7), partition=part
        ) as feed:
            async for chunk in feed:
                got += chunk.data.splitlines()
        return got

    got = anyio.run(replay)
    assert got and set(got) <= {line.encode() for line in lines}
    # Rows with no id were there from the start: counted once, by one worker alone.
    assert all("id IS NULL" in query for query in counts), counts
    assert len(counts) == (0 if partition == 1 else 1)


def test_a_replay_finds_rows_committed_below_the_ids_it_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another connection commits while the table is read: the counts are made, and
    # a row written below the ids already read is read late, as a follow reads it.
    lines = example_lines()
    db = make_db(tmp_path / "rasa.db", [])
    _insert_with_ids(db, [(1000 + n, line) for n, line in enumerate(lines[:30])])
    counts = _counts(monkeypatch)

    async def replay() -> tuple[list[bytes], list[str]]:
        got: list[bytes] = []
        async with open_feed(f"sqlite:///{db}", sql=SqlOptions(batch_size=7)) as feed:
            async for chunk in feed:
                if not got:
                    _insert_with_ids(db, [(5, lines[30])])
                got += chunk.data.splitlines()
            return got, feed.notices

    got, notices = anyio.run(replay)
    assert sorted(got) == sorted(line.encode() for line in lines[:31])
    assert notices == [
        f"`sqlite:///{db}`: 1 row written after rows with higher ids were read, read late (ids 5)"
    ]
    assert any("id <=" in query for query in counts)


def test_sqlite_says_when_another_connection_committed(tmp_path: Path) -> None:
    db = Sqlite(str(make_db(tmp_path / "rasa.db", example_lines()[:5])))
    try:
        first = db.changes()
        assert db.changes() == first
        _insert_with_ids(tmp_path / "rasa.db", [(10_000, example_lines()[5])])
        assert db.changes() != first
    finally:
        db.close()


def test_a_replay_reports_rows_without_an_id(tmp_path: Path) -> None:
    lines = example_lines()
    db = _table(
        tmp_path / "rasa.db",
        "CREATE TABLE events (id INTEGER, sender_id TEXT, type_name TEXT, "
        "timestamp FLOAT, data TEXT)",
    )
    rows: list[tuple[int | None, str]] = [(n, line) for n, line in enumerate(lines)]
    rows[7] = (None, lines[7])
    _insert_with_ids(db, rows)
    result = run_cli(
        "check", str(SCENARIOS), "--events", f"sqlite:///{db}", "--results", str(RESULTS),
        "--format", "json",
    )  # fmt: skip
    report = json.loads(result.stdout)
    cid = json.loads(lines[7])["conversation_id"]
    assert report["warnings"]["source"] == [
        f"`sqlite:///{db}`: 1 row with no id (NULL) was not read: no place in "
        f"id order (conversations `{cid}`)"
    ]
    assert "1 row with no id (NULL) was not read" in result.stderr
