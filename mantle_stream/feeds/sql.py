"""``sqlite:///PATH`` and ``postgresql://...``: conversations where a Rasa agent keeps them.

Rasa's SQL tracker store keeps every event as a row of a table ``events(id,
sender_id, type_name, timestamp, intent_name, action_name, data)``; its SQL
event broker writes ``events(id, sender_id, data)``. ``data`` is the event
as JSON text: ProtoJSON for a Mantle agent, or a flat ``{"event": ...}`` row
(which may not name its conversation: it is given ``sender_id`` from the
column, as a tracker document's rows are).

The table is read in ``id`` order, ``batch_size`` rows at a time (keyset
pagination, ``WHERE id > ? ORDER BY id LIMIT ?``: never the whole table at
once), one JSON line per row; the first batch is asked for with no lower
bound, so ids of any type the database orders (integers, text, UUIDs) are
read in that order. A chunk holds rows of consecutive ids, and its line
numbers are the row ids, so a bad row's error reads ``... (table events,
row id):42``; in a table whose ids are not integers, rows are numbered by
their place in id order (``... (table events, row in id order):4``).
``SqlOptions`` can keep only some conversations (``sender_id``) and, in a tracker store, rows whose
``timestamp`` is at or after a time. Without ``follow:`` the feed ends after
the last row (a replay); with it, it asks for newer rows every
``poll_interval`` and never ends.

SQLite is read with the standard library, opened read-only; PostgreSQL with
psycopg 3, imported only when a ``postgresql://`` spec is used (the
``mantle_stream[postgres]`` extra). Every query runs in a worker thread, so
the event loop never waits on the database.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import os
import sqlite3
import urllib.parse
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import anyio
import msgspec
from anyio.streams.memory import MemoryObjectSendStream

from mantle_stream.core.engine.partition import Partition
from mantle_stream.core.errors import FeedError
from mantle_stream.core.events.model import count_lines
from mantle_stream.core.urls import redact, secrets_in
from mantle_stream.feeds.base import Item, QueuedFeed
from mantle_stream.feeds.interface import Chunk
from mantle_stream.feeds.lines import split_lines

__all__ = [
    "SQL_PREFIXES",
    "SqlFeed",
    "SqlOptions",
    "is_sql_spec",
    "parse_since",
    "redact",
]

#: The spec prefixes this module reads (after an optional ``follow:``).
SQL_PREFIXES = ("sqlite://", "postgresql://", "postgres://")
#: The table Rasa's SQL tracker store and SQL event broker write.
TABLE = "events"
_NEEDED = ("id", "sender_id", "data")
_CUT_KEEP = 200
_INSTALL = 'pip install "mantle_stream[postgres]"'


@dataclasses.dataclass(frozen=True)
class SqlOptions:
    """What a SQL source reads.

    ``conversations``: only rows of these ``sender_id`` values (all when
    empty); ``since``: only rows whose ``timestamp`` column (seconds since the
    epoch) is at or after it; ``batch_size`` rows per query;
    ``poll_interval`` seconds between looks for new rows under ``follow:``;
    ``partition``: only the conversations (by ``sender_id``) it owns.
    """

    conversations: tuple[str, ...] = ()
    since: float | None = None
    batch_size: int = 5000
    poll_interval: float = 0.5
    #: One worker's share (``check --workers``): rows of other conversations are
    #: read but not decoded.
    partition: Partition | None = None
    #: Told what the user should know about how the database is read (a WAL
    #: database on a read-only file system, read as immutable).
    on_notice: Callable[[str], object] | None = None

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, not {self.batch_size!r}")
        if not self.poll_interval > 0:
            raise ValueError(f"poll_interval must be positive, not {self.poll_interval!r}")
        if self.since is not None and not math.isfinite(self.since):
            raise ValueError(f"since must be a finite time, not {self.since!r}")


def parse_since(text: str) -> float:
    """``--since``: seconds since the epoch, or an ISO 8601 time (UTC when it names no zone)."""
    try:
        value = float(text)
    except ValueError:
        pass
    else:
        if math.isfinite(value):
            return value
        raise ValueError(f"--since: expected a time, got `{text}`")
    try:
        when = datetime.datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"--since: expected an ISO 8601 time (2026-12-01T09:00:00Z) or seconds since "
            f"the epoch, got `{text}`"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return when.timestamp()


def is_sql_spec(spec: str) -> bool:
    """Whether ``spec`` (without ``follow:``) names a SQL database."""
    return spec.startswith(SQL_PREFIXES)


class _Database(Protocol):
    """One connection, used from one worker thread at a time."""

    placeholder: str
    data: str  # the column's expression in the query

    def columns(self) -> set[str]: ...

    def fetch(self, query: str, params: Sequence[Any]) -> list[tuple[Any, ...]]: ...

    def close(self) -> None: ...


class _Sqlite:
    placeholder = "?"
    # As bytes: what the decoder reads (text would be decoded, then encoded again).
    data = "CAST(data AS BLOB)"

    def __init__(self, path: str) -> None:
        uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"
        #: Said to the user when the database could only be opened as immutable.
        self.notice: str | None = None
        # Used from anyio's worker threads, one call at a time.
        self._conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
        try:
            self._conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        except sqlite3.OperationalError:
            if not _in_wal_mode(path):
                raise
            # `mode=ro` must create the -shm file beside a WAL database, which a
            # read-only file system refuses. Immutable, it is read as it is.
            self._conn.close()
            self._conn = sqlite3.connect(uri + "&immutable=1", uri=True, check_same_thread=False)
            self.notice = (
                f"`{path}` is a WAL database that cannot be opened read-only here (a "
                "read-only file system?): read as immutable, so rows written to it "
                "while it is read are not seen"
            )

    def columns(self) -> set[str]:
        return {row[1] for row in self._conn.execute(f"PRAGMA table_info({TABLE})")}

    def fetch(self, query: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        return self._conn.execute(query, tuple(params)).fetchall()

    def close(self) -> None:
        self._conn.close()


def _in_wal_mode(path: str) -> bool:
    """Whether the SQLite file at ``path`` says it is in WAL mode (its header's
    format versions, bytes 18 and 19, are 2)."""
    try:
        with open(path, "rb") as fh:
            header = fh.read(20)
    except OSError:
        return False
    return header[:16] == b"SQLite format 3\x00" and header[18:20] == b"\x02\x02"


class _Postgres:
    placeholder = "%s"
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

    def fetch(self, query: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        return self._conn.execute(query, tuple(params)).fetchall()

    def close(self) -> None:
        self._conn.close()


def _database_errors() -> tuple[type[Exception], ...]:
    errors: tuple[type[Exception], ...] = (sqlite3.Error,)
    try:
        import psycopg
    except ImportError:
        return errors
    return (*errors, psycopg.Error)


_encode = msgspec.json.Encoder().encode


class _Names(msgspec.Struct):
    """What decides whether a row's JSON must be rewritten (the rest is skipped, not
    decoded: most rows name their conversation already and pass as they are)."""

    conversation_id: str | None = None
    sender_id: str | None = None
    event: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


_names = msgspec.json.Decoder(_Names).decode


def _raw(data: Any) -> bytes:
    """A row's ``data`` column as JSON bytes."""
    if isinstance(data, str):
        return data.encode()
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    return _encode(data)  # a json/jsonb column comes decoded, NULL as None


def _conversation(raw: bytes, sender_id: Any, limit: int) -> str | None:
    """The conversation the row's line (:func:`_line`) will name, found without decoding
    it whole; None when the line will not be an event that names one (a bad row)."""
    if len(raw) > limit:
        return None  # cut off: a bad event
    try:
        names = _names(raw)
    except (msgspec.DecodeError, RecursionError):
        return None  # not an object of these types: judged bad, or looked at whole
    if names.conversation_id:
        return names.conversation_id
    if names.event is not msgspec.UNSET and names.sender_id:
        return names.sender_id
    return sender_id if isinstance(sender_id, str) and sender_id else None  # given it


def _line(raw: bytes, sender_id: Any, limit: int) -> bytes:
    """One row's ``data`` (:func:`_raw`) as one JSON line naming its conversation."""
    if len(raw) <= limit and b"\n" not in raw and b"\r" not in raw:
        try:
            names = _names(raw)
        except (msgspec.DecodeError, RecursionError):
            pass  # not an object of these types: looked at whole below
        else:
            flat = names.event is not msgspec.UNSET
            if names.conversation_id or (flat and names.sender_id):
                return raw + b"\n"  # names its conversation: as it is
    try:
        row = msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        row = None  # the decoder says what is wrong with it, at this row
    if isinstance(row, dict) and isinstance(sender_id, str):
        if "event" in row and not row.get("sender_id") and not row.get("conversation_id"):
            row["sender_id"] = sender_id
            raw = _encode(row)
        elif "event" not in row and not row.get("conversation_id"):
            row["conversation_id"] = sender_id
            raw = _encode(row)
    if b"\n" in raw or b"\r" in raw:  # pretty-printed: one line of its own
        raw = _encode(row) if row is not None else raw.replace(b"\r", b" ").replace(b"\n", b" ")
    if len(raw) > limit:
        raw = b"<line cut off: longer than %d bytes> %s" % (limit, raw[:_CUT_KEEP])
    return raw + b"\n"


class SqlFeed(QueuedFeed):
    """Table ``events`` of a SQLite or PostgreSQL database, in ``id`` order.

    Ends after the last row, or with ``live`` (``follow:``) polls for newer
    rows and never ends.
    """

    def __init__(
        self, spec: str, url: str, options: SqlOptions, *, live: bool, max_line_bytes: int
    ) -> None:
        # Rows are read by `id`: the order they were written in, while ids are
        # integers (an autoincrement; see _chunks).
        super().__init__(redact(spec), live=live, max_line_bytes=max_line_bytes, ordered=True)
        self._url = url
        self._options = options
        self._db: _Database | None = None
        self._where = f"{redact(url)} (table {TABLE}, row id)"
        self._secrets = tuple(secrets_in(url))
        self._rows = 0  # rows read so far, in id order
        self._by_place = False  # numbered by place: the table's ids are not integers

    async def _open(self) -> None:
        self._db = await anyio.to_thread.run_sync(self._connect)

    def _connect(self) -> _Database:
        url, shown = self._url, redact(self._url)
        db: _Database
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
                sqlite = db = _Sqlite(path)
            except sqlite3.Error as exc:
                raise FeedError(f"cannot read events from `{shown}`: {exc}") from None
            partition, say = self._options.partition, self._options.on_notice
            # (Said once, not by every worker.)
            if sqlite.notice and say and (partition is None or partition.index == 0):
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
                db = _Postgres(url)
            except psycopg.Error as exc:
                message = " ".join(str(exc).split())
                raise FeedError(f"cannot connect to `{shown}`: {message}") from None
        try:
            columns = db.columns()
        except _database_errors() as exc:
            db.close()
            raise FeedError(f"cannot read events from `{shown}`: {exc}") from None
        self._check_columns(columns, shown, db)
        return db

    def _check_columns(self, columns: set[str], shown: str, db: _Database) -> None:
        problem = None
        if not columns:
            problem = (
                f"there is no table `{TABLE}` (is it the database of a Rasa SQL "
                "tracker store or SQL event broker?)"
            )
        elif missing := [c for c in _NEEDED if c not in columns]:
            problem = (
                f"table `{TABLE}` has no column {', '.join(f'`{c}`' for c in missing)}; "
                f"expected Rasa's `{TABLE}(id, sender_id, data, ...)`"
            )
        elif self._options.since is not None and "timestamp" not in columns:
            problem = (
                f"--since needs a `timestamp` column, and table `{TABLE}` has none "
                "(an event broker's table: only a tracker store's rows carry one)"
            )
        if problem is not None:
            db.close()
            raise FeedError(f"cannot read events from `{shown}`: {problem}")

    def _query(self, *, first: bool = False) -> tuple[str, list[Any]]:
        """The query of a batch: after the last id read, or (``first``) from the
        start, with no value to compare ids with, so that ids of any type the
        database orders (integers, text, UUIDs) are read in their order."""
        assert self._db is not None
        mark = self._db.placeholder
        where = ["id IS NOT NULL" if first else f"id > {mark}"]
        params: list[Any] = []
        if self._options.conversations:
            marks = ", ".join([mark] * len(self._options.conversations))
            where.append(f"sender_id IN ({marks})")
            params += self._options.conversations
        if self._options.since is not None:
            where.append(f'"timestamp" >= {mark}')
            params.append(self._options.since)
        query = (
            f"SELECT id, sender_id, {self._db.data} FROM {TABLE} WHERE {' AND '.join(where)} "
            f"ORDER BY id LIMIT {mark}"
        )
        return query, params

    async def _produce(self, send: MemoryObjectSendStream[Item]) -> None:
        with send:
            try:
                await self._read(send)
            except FeedError as exc:
                self._error = exc
            except _database_errors() as exc:
                message = " ".join(str(exc).split())
                self._error = FeedError(f"cannot read events from `{self.name}`: {message}")

    async def _read(self, send: MemoryObjectSendStream[Item]) -> None:
        db = self._db
        assert db is not None
        start, _ = self._query(first=True)
        query, params = self._query()
        size = self._options.batch_size
        last: Any = None  # no row read yet
        while True:
            if last is None:
                rows = await anyio.to_thread.run_sync(db.fetch, start, [*params, size])
            else:
                rows = await anyio.to_thread.run_sync(db.fetch, query, [last, *params, size])
            if rows:
                self._touch()
                last = rows[-1][0]
                for chunk in self._chunks(rows):
                    await send.send(chunk)
            if len(rows) < size:
                if not self.live:
                    return
                await anyio.sleep(self._options.poll_interval)

    def _chunks(self, rows: list[tuple[Any, ...]]) -> list[Chunk]:
        """Rows as chunks, each line numbered by its row id."""
        partition = self._options.partition
        ids: list[int] = []
        lines: list[bytes] = []
        limit = self._max_line_bytes
        for row_id, sender_id, data in rows:
            self._rows += 1
            if self._by_place or not isinstance(row_id, int) or isinstance(row_id, bool):
                # A text or UUID id is no line number: rows are numbered by their
                # place in id order from the first that is not an integer on.
                if not self._by_place:
                    self._by_place = True
                    # Ordered by value, not by when they were written: a
                    # conversation's rows may come in any order.
                    self.ordered = False
                    self._where = f"{redact(self._url)} (table {TABLE}, row in id order)"
                row_id = self._rows
            raw = _raw(data)
            if partition is not None:
                # By the conversation the line names, as the evaluator reads it (a row
                # that names none, or is bad, is worker 0's, which reports it).
                cid = _conversation(raw, sender_id, limit)
                if not (partition.owns(cid) if cid else partition.index == 0):
                    continue
            ids.append(int(row_id))
            lines.append(_line(raw, sender_id, limit))
        chunks: list[Chunk] = []
        done = 0
        for piece in split_lines(b"".join(lines)):
            n = count_lines(piece)
            numbers = ids[done : done + n]
            done += n
            # Ids with gaps (rows deleted, or another worker's): each line names its own.
            line_of = None if numbers[-1] - numbers[0] == n - 1 else numbers.__getitem__
            chunks.append(Chunk(piece, None, numbers[0], self._where, line_of=line_of))
        return chunks

    async def _close(self) -> None:
        if self._db is not None:
            db, self._db = self._db, None
            await anyio.to_thread.run_sync(db.close)
