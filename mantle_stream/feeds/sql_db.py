"""The databases a SQL source reads: one connection each, SQLite or PostgreSQL.

:class:`Sqlite` opens a file read-only (as immutable when a WAL database
cannot be opened so: a read-only file system); :class:`Postgres` connects with
psycopg 3, imported only when a ``postgresql://`` spec is used. Both hand
:class:`Batch` es of rows bounded by bytes (:func:`_take`) to the feed,
:mod:`mantle_stream.feeds.sql`, which runs every call in a worker thread.
"""

from __future__ import annotations

import os
import sqlite3
import urllib.parse
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple, Protocol

from mantle_stream.core.errors import FeedError
from mantle_stream.core.urls import redact

__all__ = [
    "BUSY_SECONDS",
    "FETCH_MOST",
    "FETCH_ROWS",
    "TABLE",
    "Batch",
    "Database",
    "Joined",
    "Postgres",
    "Sqlite",
    "column_problem",
    "connect",
    "database_errors",
    "identity",
    "locked",
]

#: The table Rasa's SQL tracker store and SQL event broker write.
TABLE = "events"
_NEEDED = ("id", "sender_id", "data")
#: Rows taken from a cursor at a time, while the bytes are counted: at first, and
#: at most (:func:`_take`).
FETCH_ROWS = 16
FETCH_MOST = 128


class Batch(NamedTuple):
    """Rows of one query, in id order; ``cut``: fewer than asked for, because they
    reached the byte bound (the table may go on)."""

    rows: list[tuple[Any, ...]]
    size: int  # bytes of their data column
    cut: bool


class Joined(NamedTuple):
    """Rows of one query as SQLite joined them (:meth:`Sqlite.joined`): their ``data``
    each followed by a newline, their ids in order, the bytes of their data and of
    the longest row's."""

    lines: bytes
    ids: list[int]
    size: int
    longest: int


#: A query's rows (columns ``id`` and ``data``) joined by SQLite: how many, their
#: ids, their bytes, the longest, how many ids are integers and data bytes.
_JOINED = (
    "SELECT count(*), group_concat(id), sum(length(data)), max(length(data)), "
    "sum(typeof(id) = 'integer'), sum(typeof(data) = 'blob'), "
    "CAST(group_concat(data, X'0A') AS BLOB) FROM ({})"
)


class _Cursor(Protocol):
    def fetchmany(self, size: int) -> list[Any]: ...

    def close(self) -> None: ...


def _take(cursor: _Cursor, max_bytes: int) -> Batch:
    """Rows from ``cursor``, a few at a time, until ``max_bytes`` of data are taken
    (at least one row): a table of 300 KB events must not arrive 5,000 at once.
    :data:`FETCH_ROWS` first, then as many as half the bytes left hold at the size
    of the rows taken so far, :data:`FETCH_MOST` at most (a fetch of 16 rows costs
    as much as taking 30: small rows are taken by the hundred)."""
    rows: list[tuple[Any, ...]] = []
    size = 0
    step = FETCH_ROWS
    try:
        while size < max_bytes:
            some = cursor.fetchmany(step)
            if not some:
                return Batch(rows, size, cut=False)
            rows += some
            size += sum(map(_data_size, [row[-1] for row in some]))
            fits = (max_bytes - size) * len(rows) // (2 * size) if size else FETCH_MOST
            step = max(FETCH_ROWS, min(FETCH_MOST, fits))
        return Batch(rows, size, cut=True)
    finally:
        cursor.close()


def _data_size(data: Any) -> int:  # (of a row's last column: data, or an id alone)
    return len(data) if isinstance(data, str | bytes | bytearray) else 64


class Database(Protocol):
    """One connection, used from one worker thread at a time."""

    placeholder: str
    data: str  # the column's expression in the query
    #: Before a column, keeps the planner off its index (SQLite's unary plus): a
    #: query in id order must walk the id index, not sort what another gives.
    no_index: str

    def columns(self) -> set[str]: ...

    def fetch(self, query: str, params: Sequence[Any], max_bytes: int) -> Batch: ...

    def execute(self, query: str, rows: Iterable[Sequence[Any]] = ((),)) -> None:
        """``query`` once for each of ``rows`` (its parameters): a statement that
        returns no rows."""
        ...

    def changes(self) -> int | None:
        """A number that differs from the last one this connection was given when
        another connection committed anything meanwhile; None when the database
        cannot tell (then anything may have changed)."""
        ...

    def close(self) -> None: ...


#: How long one SQLite call waits for a lock (its busy handler) before the feed
#: looks again: short, so that a wait can be given up on or interrupted.
BUSY_SECONDS = 0.25
#: SQLite's primary result codes for a lock held by another connection.
_SQLITE_BUSY, _SQLITE_LOCKED = 5, 6


def locked(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite saying another connection holds the lock (a writer
    mid-commit with a rollback journal): worth waiting for, not a broken source."""
    code = getattr(exc, "sqlite_errorcode", None)
    return (
        isinstance(exc, sqlite3.OperationalError)
        and code is not None
        and ((code & 0xFF) in (_SQLITE_BUSY, _SQLITE_LOCKED))
    )


class Sqlite:
    placeholder = "?"
    no_index = "+"
    # As bytes: what the decoder reads (text would be decoded, then encoded again).
    data = "CAST(data AS BLOB)"

    def __init__(self, path: str) -> None:
        uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"
        #: Said to the user when the database could only be opened as immutable.
        self.notice: str | None = None
        self._conn = _connect_sqlite(uri)
        try:
            self._conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        except sqlite3.OperationalError as exc:
            if locked(exc) or not _in_wal_mode(path):
                self._conn.close()
                raise
            # `mode=ro` must create the -shm file beside a WAL database, which a
            # read-only file system refuses. Immutable, it is read as it is.
            self._conn.close()
            self._conn = _connect_sqlite(uri + "&immutable=1")
            self.notice = (
                f"`{path}` is a WAL database that cannot be opened read-only here (a "
                "read-only file system?): read as immutable, so rows written to it "
                "while it is read are not seen"
            )

    def columns(self) -> set[str]:
        return {row[1] for row in self._conn.execute(f"PRAGMA table_info({TABLE})")}

    def fetch(self, query: str, params: Sequence[Any], max_bytes: int) -> Batch:
        return _take(self._conn.execute(query, tuple(params)), max_bytes)

    def joined(self, query: str, params: Sequence[Any]) -> Joined | None:
        """The rows of ``query`` (columns ``id`` and ``data``, in id order) joined in
        SQLite, one value for them all: no Python object per row, and one step of
        the statement, so the event loop's thread judges meanwhile rather than
        handing the lock of the interpreter back and forth at every row. None when
        the rows are not all of an integer id and bytes of data (NULL), or not in
        the order of their ids: then they are fetched as rows (:meth:`fetch`)."""
        row = self._conn.execute(_JOINED.format(query), tuple(params)).fetchone()
        count, ids, size, longest, integers, blobs, data = row
        if not count:
            return Joined(b"", [], 0, 0)
        if integers != count or blobs != count or not isinstance(data, bytes):
            return None
        numbers = [int(i) for i in ids.split(",")]
        if len(numbers) != count or numbers != sorted(numbers):
            return None  # (an order the aggregate did not keep: never seen, but checked)
        if len(data) != size + count - 1:
            return None
        return Joined(data + b"\n", numbers, size, longest)

    def execute(self, query: str, rows: Iterable[Sequence[Any]] = ((),)) -> None:
        some = list(rows)
        if len(some) == 1:  # (executemany takes no CREATE)
            self._conn.execute(query, tuple(some[0]))
        else:
            self._conn.executemany(query, some)
        # (A temporary table written opens a transaction, whose reads would hold the
        # database's shared lock until it ends: a writer could not commit.)
        self._conn.commit()

    def changes(self) -> int | None:
        return int(self._conn.execute("PRAGMA data_version").fetchone()[0])

    def close(self) -> None:
        self._conn.close()


def identity(path: str) -> tuple[int, int] | None:
    """Which file ``path`` names (device, inode), None when there is none."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _connect_sqlite(uri: str) -> sqlite3.Connection:
    # Used from anyio's worker threads, one call at a time.
    return sqlite3.connect(uri, uri=True, check_same_thread=False, timeout=BUSY_SECONDS)


def _in_wal_mode(path: str) -> bool:
    """Whether the SQLite file at ``path`` says it is in WAL mode (its header's
    format versions, bytes 18 and 19, are 2)."""
    try:
        with open(path, "rb") as fh:
            header = fh.read(20)
    except OSError:
        return False
    return header[:16] == b"SQLite format 3\x00" and header[18:20] == b"\x02\x02"


class Postgres:
    placeholder = "%s"
    no_index = ""  # (no unary plus on text; the planner weighs ORDER BY id LIMIT)
    data = "data"

    def __init__(self, url: str) -> None:
        import psycopg

        self._conn = psycopg.connect(url, connect_timeout=10, autocommit=True)

    def columns(self) -> set[str]:
        rows = self._conn.execute(
            "SELECT column_name FROM information_schema.columns "
            "WHERE table_name = %s AND table_schema = ANY(current_schemas(false))",
            (TABLE,),
        ).fetchall()
        return {row[0] for row in rows}

    def fetch(self, query: str, params: Sequence[Any], max_bytes: int) -> Batch:
        # (psycopg's cursor holds the whole answer already: the LIMIT, sized by the
        # rows seen so far, is what bounds it.)
        return _take(self._conn.execute(query, tuple(params)), max_bytes)

    def execute(self, query: str, rows: Iterable[Sequence[Any]] = ((),)) -> None:
        with self._conn.cursor() as cursor:
            cursor.executemany(query, rows)

    def changes(self) -> int | None:
        return None  # (no such number: every look back counts)

    def close(self) -> None:
        self._conn.close()


def database_errors() -> tuple[type[Exception], ...]:
    errors: tuple[type[Exception], ...] = (sqlite3.Error,)
    try:
        import psycopg
    except ImportError:
        return errors
    return (*errors, psycopg.Error)


def column_problem(columns: set[str], *, since: bool) -> str | None:
    """What is wrong with table :data:`TABLE`, given its ``columns`` (none: no such
    table), for a source that reads it (``since``: from a time on); None: nothing."""
    if not columns:
        return (
            f"there is no table `{TABLE}` (is it the database of a Rasa SQL "
            "tracker store or SQL event broker?)"
        )
    if missing := [c for c in _NEEDED if c not in columns]:
        return (
            f"table `{TABLE}` has no column {', '.join(f'`{c}`' for c in missing)}; "
            f"expected Rasa's `{TABLE}(id, sender_id, data, ...)`"
        )
    if since and "timestamp" not in columns:
        return (
            f"--since needs a `timestamp` column, and table `{TABLE}` has none "
            "(an event broker's table: only a tracker store's rows carry one)"
        )
    return None


_INSTALL = 'pip install "mantle_stream[postgres]"'


def connect(url: str, *, since: bool, say: Callable[[str], object]) -> tuple[Database, str | None]:
    """A connection to ``url``'s database whose table :data:`TABLE` can be read (with
    ``since``: from a time on), and a SQLite file's path; a :class:`FeedError` that
    says why not (a lock held by another connection is raised as it is: waited for).
    ``say``: what the user is told now (a WAL database read as immutable)."""
    shown = redact(url)
    db: Database
    path: str | None = None
    if url.startswith("sqlite://"):
        path = url.removeprefix("sqlite://")
        if not path.startswith("/") or path == "/":
            raise FeedError(
                f"bad event source `{shown}`: expected `sqlite:///PATH` "
                "(`sqlite:////PATH` for an absolute path)"
            )
        path = path[1:]
        if not os.path.isfile(path):
            problem = "Is a directory" if os.path.isdir(path) else "No such file"
            raise FeedError(f"cannot read events from `{shown}`: {problem}: `{path}`")
        try:
            sqlite = db = Sqlite(path)
        except sqlite3.Error as exc:
            if locked(exc):
                raise  # waited for (SqlFeed._patiently)
            raise FeedError(f"cannot read events from `{shown}`: {exc}") from None
        if sqlite.notice:
            say(sqlite.notice)
    else:
        try:
            import psycopg
        except ImportError:
            raise FeedError(
                f"cannot read events from `{shown}`: PostgreSQL needs psycopg; "
                f"install it with `{_INSTALL}`"
            ) from None
        try:
            db = Postgres(url)
        except psycopg.Error as exc:
            message = " ".join(str(exc).split())
            raise FeedError(f"cannot connect to `{shown}`: {message}") from None
    try:
        columns = db.columns()
    except database_errors() as exc:
        db.close()
        if locked(exc):
            raise  # waited for (SqlFeed._patiently)
        raise FeedError(f"cannot read events from `{shown}`: {exc}") from None
    wrong = column_problem(columns, since=since)
    if wrong is not None:
        db.close()
        raise FeedError(f"cannot read events from `{shown}`: {wrong}")
    return db, path
