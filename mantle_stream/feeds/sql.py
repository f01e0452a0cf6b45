"""``sqlite:///PATH`` and ``postgresql://...``: conversations where a Rasa agent keeps them.

Rasa's SQL tracker store keeps every event as a row of a table ``events(id,
sender_id, type_name, timestamp, intent_name, action_name, data)``; its SQL
event broker writes ``events(id, sender_id, data)``. ``data`` is the event
as JSON text: ProtoJSON for a Mantle agent, or a flat ``{"event": ...}`` row
(which may not name its conversation: it is given ``sender_id`` from the
column, as a tracker document's rows are).

The table is read in ``id`` order, at most ``batch_size`` rows or about
:data:`BATCH_BYTES` of data at a time (keyset pagination, ``WHERE id > ?
ORDER BY id LIMIT ?``, the limit sized from the rows just read: never the
whole table at once), one JSON line per row (after the first, SQLite joins a
plain store's batches, bounded by the limit alone as PostgreSQL's are:
:meth:`~mantle_stream.feeds.sql_db.Sqlite.joined`); the first batch is asked for with no lower
bound, so ids of any type the database orders (integers, text, UUIDs) are
read in that order. A chunk holds rows of consecutive ids, and its line
numbers are the row ids, so a bad row's error reads ``... (table events,
row id):42``; in a table whose ids are not integers, rows are numbered by
their place in id order (``... (table events, row in id order):4``).
``SqlOptions`` can keep only some conversations (``sender_id``) and, in a tracker store, rows whose
``timestamp`` is at or after a time. Without ``follow:`` the feed ends after
the last row (a replay); with it, it asks for newer rows every
``poll_interval`` and never ends.

What can go wrong under a reader, and what it does (:attr:`Feed.notices`
tells the report): another connection holding the lock (a writer's commit
with a rollback journal) is waited for, a follow as long as it takes, a
replay ``lock_timeout`` at most (:meth:`SqlFeed._patiently`); a followed
SQLite file deleted and created again is noticed as ``follow:`` notices a
rotated file, and the new one read from its first row; rows the reading in
id order passed by (written later with lower ids, or with a NULL id) are
looked for once the table is read to its end, and read late or counted
(:meth:`SqlFeed._looked_back`; not counted when SQLite says no other
connection committed since reading began: then none can have been passed by).

SQLite is read with the standard library, opened read-only; PostgreSQL with
psycopg 3, imported only when a ``postgresql://`` spec is used (the
``mantle_stream[postgres]`` extra). Every query runs in a worker thread, so
the event loop never waits on the database. The connections are
:mod:`~mantle_stream.feeds.sql_db`'s, a row's line is made by
:mod:`~mantle_stream.feeds.sql_rows`, the options are
:mod:`~mantle_stream.feeds.sql_options`'.
"""

from __future__ import annotations

import sqlite3
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from mantle_stream.core.errors import FeedError
from mantle_stream.core.events.model import count_lines
from mantle_stream.core.urls import redact, secrets_in
from mantle_stream.feeds.base import Item, QueuedFeed
from mantle_stream.feeds.interface import Chunk
from mantle_stream.feeds.lines import split_lines
from mantle_stream.feeds.sql_db import (
    BUSY_SECONDS,
    FETCH_ROWS,
    TABLE,
    Database,
    Joined,
    Sqlite,
    connect,
    database_errors,
    identity,
    locked,
)
from mantle_stream.feeds.sql_options import SqlOptions, parse_since
from mantle_stream.feeds.sql_rows import _conversation, _line, _raw, named_lines, plain_lines
from mantle_stream.feeds.sql_share import Share, check_row, check_rows, share

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
_T = TypeVar("_T")
#: The data a batch of rows holds at most (about; at least one row): the feed then
#: holds a few times this, whatever the size of a row.
BATCH_BYTES = 4 << 20
#: Rows asked for by the first query, before their size is known.
_FIRST_ROWS = 100
#: The ids of the last rows read that are kept, to read a row written below them later.
LOOK_BACK_ROWS = 10_000
#: Seconds between two looks back among the last ids read of a followed table.
_LOOK_EVERY = 2.0
#: Seconds between two counts of a followed table's rows, at the least (a hundred
#: times what the last took, when that is longer).
_LOOK_WHOLE_EVERY = 60.0
#: Conversations or ids named in a message.
_NAMED = 5


def is_sql_spec(spec: str) -> bool:
    """Whether ``spec`` (without ``follow:``) names a SQL database."""
    return spec.startswith(SQL_PREFIXES)


def _rows(n: int) -> str:
    return "1 row" if n == 1 else f"{n:,} rows"


def _were(n: int) -> str:
    return "was" if n == 1 else "were"


def _ids(ids: Iterable[Any]) -> str:
    """Row ids for a message: the first few, and how many more."""
    shown = list(ids)
    head = ", ".join(str(i) for i in shown[:_NAMED])
    return head + (f" and {len(shown) - _NAMED} more" if len(shown) > _NAMED else "")


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
        self._db: Database | None = None
        self._where = f"{redact(url)} (table {TABLE}, row id)"
        self._secrets = tuple(secrets_in(url))
        self._rows = 0  # rows read so far, in id order
        self._by_place = False  # numbered by place: the table's ids are not integers
        self._lock_waits = 0  # waits for another connection's lock, and the longest
        self._path: str | None = None  # a SQLite file's path, and which file it named
        self._file: tuple[int, int] | None = None
        self._replaced = 0  # times the SQLite file was deleted and created again
        self._share: Share | None = None  # this worker's rows alone (sql_share)
        self._joins = False  # batches joined by SQLite (_read)
        #: Database.changes() when the database was connected to, or at the last look
        #: back that counted the whole table.
        self._changes: int | None = None
        self._forget_ids()
        self._longest_wait = 0.0

    async def _open(self) -> None:
        self._db = await self._patiently(self._connect)

    async def _patiently(self, call: Callable[..., _T], *args: Any) -> _T:
        """``call(*args)`` in a worker thread, again while another connection holds the
        database's lock (a writer mid-commit): a followed database waits as long as it
        takes, a replay ``lock_timeout`` seconds at most; the wait is said once when it
        starts, and how long it lasted kept for the report (:attr:`notices`)."""
        began: float | None = None
        while True:
            try:
                result = await anyio.to_thread.run_sync(call, *args)
            except sqlite3.OperationalError as exc:
                if not locked(exc):
                    raise
                now = anyio.current_time()
                if began is None:
                    began = now - BUSY_SECONDS
                    if not self._lock_waits:  # (said once; the report counts them all)
                        self._say(
                            f"`{self.name}` is locked by another connection (a writer): waiting"
                        )
                waited = now - began
                if not self.live and waited >= self._options.lock_timeout:
                    raise FeedError(
                        f"cannot read events from `{self.name}`: it stayed locked by another "
                        f"connection for {waited:.1f} s (more than {self._options.lock_timeout:g} "
                        "s); follow: waits as long as it takes"
                    ) from None
                await anyio.sleep(min(self._options.poll_interval, BUSY_SECONDS))
                continue
            if began is not None:
                self._waited(anyio.current_time() - began)
            return result

    def _waited(self, seconds: float) -> None:
        """One wait for a lock is over: counted, with the longest, in the notices."""
        self._lock_waits += 1
        self._longest_wait = max(self._longest_wait, seconds)
        times = "once" if self._lock_waits == 1 else f"{self._lock_waits} times"
        self._notices["locked"] = (
            f"`{self.name}` was locked by another connection (a writer): waited {times}, "
            f"{self._longest_wait:.1f} s at most"
        )

    def _say(self, message: str) -> None:
        """Tell the user now (standard error), once, not by every worker."""
        partition, say = self._options.partition, self._options.on_notice
        if say is not None and (partition is None or partition.index == 0):
            say(message)

    def _connect(self) -> Database:
        since = self._options.since is not None
        db, self._path = connect(self._url, since=since, say=self._say)
        self._file = None if self._path is None else identity(self._path)
        self._changes = db.changes()  # (before any row of this database is read)
        return db

    def _query(
        self, *, first: bool = False, columns: str = "id, sender_id, {data}"
    ) -> tuple[str, list[Any]]:
        """The query of a batch: after the last id read, or (``first``) from the
        start, with no value to compare ids with, so that ids of any type the
        database orders (integers, text, UUIDs) are read in their order."""
        assert self._db is not None
        mark = self._db.placeholder
        where, params = self._filters()
        where.insert(0, "id IS NOT NULL" if first else f"id > {mark}")
        query = (
            f"SELECT {columns.format(data=self._db.data)} FROM {TABLE} "
            f"WHERE {' AND '.join(where)} ORDER BY id LIMIT {mark}"
        )
        return query, params

    def _filters(self, *, shared: bool = True) -> tuple[list[str], list[Any]]:
        """The conditions on rows other than their id (``conversations``, ``since``,
        and with ``shared`` this worker's share: :mod:`~mantle_stream.feeds.sql_share`)."""
        assert self._db is not None
        mark = self._db.placeholder
        where: list[str] = []
        params: list[Any] = []
        if self._options.conversations:
            marks = ", ".join([mark] * len(self._options.conversations))
            where.append(f"sender_id IN ({marks})")
            params += self._options.conversations
        if self._options.since is not None:
            where.append(f'"timestamp" >= {mark}')
            params.append(self._options.since)
        if shared and self._share is not None:
            where.append(self._share.condition)
        return where, params

    async def _produce(self, send: MemoryObjectSendStream[Item]) -> None:
        with send:
            try:
                await self._read(send)
            except FeedError as exc:
                self._error = exc
            except database_errors() as exc:
                message = " ".join(str(exc).split())
                self._error = FeedError(f"cannot read events from `{self.name}`: {message}")

    async def _read(self, send: MemoryObjectSendStream[Item]) -> None:
        db = self._db
        assert db is not None
        partition = self._options.partition
        if partition is not None and not self.live:  # (a followed table is read whole)
            where, params = self._filters()
            self._share = await self._patiently(share, db, partition, where, params)
        query, params = self._query()
        queries = (self._query(first=True)[0], query, self._query(columns="id, {data} AS data")[0])
        # Joined in SQLite while every batch is plain (sql_db.Sqlite.joined).
        self._joins = isinstance(db, Sqlite)
        most = self._options.batch_size
        # Rows asked for: as many as BATCH_BYTES holds at the size of the rows of the
        # last batch (a client-side cursor such as psycopg's holds all it was asked
        # for), never more than batch_size.
        size = min(most, _FIRST_ROWS)
        last: Any = None  # no row read yet
        while True:
            chunks, got, size_read, ended, last = await self._batch(db, queries, params, last, size)
            if got:
                self._touch()
                size = max(1, min(most, BATCH_BYTES * got // max(1, size_read)))
                for chunk in chunks:
                    await send.send(chunk)
                del chunks  # (not held while the next batch is read)
            mine = self._share
            if ended and mine is not None and await self._patiently(mine.grow, db):
                continue  # (conversations begun while it was read: their rows too)
            if ended and last is not None and await self._looked_back(db, last, send):
                continue  # (what a look back found may not be all: look again at once)
            if ended:
                if not self.live:
                    return
                if await self._replaced_file():
                    db = self._db
                    assert db is not None
                    size, last = min(most, _FIRST_ROWS), None
                    continue
                await anyio.sleep(self._options.poll_interval)

    async def _batch(
        self, db: Database, queries: tuple[str, str, str], params: list[Any], last: Any, size: int
    ) -> tuple[list[Chunk], int, int, bool, Any]:
        """The next ``size`` rows after id ``last`` (None: from the first): their chunks,
        how many, their bytes, whether the table ended there, and the last id read.
        ``queries``: the first batch's, the next's, and the next's joined by SQLite."""
        first, query, joined_query = queries
        if last is not None and self._joins and self._plainly():
            assert isinstance(db, Sqlite)
            joined = await self._patiently(db.joined, joined_query, [last, *params, size])
            chunks = None if joined is None else self._joined_chunks(joined)
            if joined is not None and chunks is not None:
                ids = joined.ids
                return chunks, len(ids), joined.size, len(ids) < size, ids[-1] if ids else last
            self._joins = False  # (looked at row by row from now on)
        after = [] if last is None else [last]
        batch = await self._patiently(
            db.fetch, first if last is None else query, [*after, *params, size], BATCH_BYTES
        )
        rows, ended = batch.rows, not batch.cut and len(batch.rows) < size
        if not rows:
            return [], 0, 0, ended, last
        return self._chunks(rows), len(rows), batch.size, ended, rows[-1][0]

    def _chunks(self, rows: list[tuple[Any, ...]]) -> list[Chunk]:
        """Rows as chunks, each line numbered by its row id."""
        plain = self._plain(rows)
        if plain is not None:
            return plain
        partition = self._options.partition
        ids: list[int] = []
        lines: list[bytes] = []
        limit = self._max_line_bytes
        for row_id, sender_id, data in rows:
            self._rows += 1
            self._remember(row_id)
            raw = _raw(data)
            if self._share is not None:  # only this worker's rows are read: each checked
                assert partition is not None
                check_row(partition, row_id, _conversation(raw, sender_id, limit))
            elif self._by_place or not isinstance(row_id, int) or isinstance(row_id, bool):
                # A text or UUID id is no line number: rows are numbered by their
                # place in id order from the first that is not an integer on.
                if not self._by_place:
                    self._by_place = True
                    # Ordered by value, not by when they were written: a
                    # conversation's rows may come in any order.
                    self.ordered = False
                    self._where = f"{redact(self._url)} (table {TABLE}, row in id order)"
                row_id = self._rows
            if partition is not None and self._share is None:
                # By the conversation the line names, as the evaluator reads it (a row
                # that names none, or is bad, is worker 0's, which reports it).
                cid = _conversation(raw, sender_id, limit)
                if not (partition.owns(cid) if cid else partition.index == 0):
                    continue
            ids.append(int(row_id))
            lines.append(_line(raw, sender_id, limit))
        return self._numbered(b"".join(lines), ids)

    def _plainly(self) -> bool:
        """Whether a batch may be plain (:meth:`_plain`): rows numbered by their ids,
        and every row kept (one process, or a worker that reads only its share)."""
        return not self._by_place and (self._options.partition is None or self._share is not None)

    def _plain(self, rows: list[tuple[Any, ...]]) -> list[Chunk] | None:
        """The rows' chunks at once, when every row is one line naming its
        conversation with an integer id (:func:`plain_lines`: a store Mantle wrote)
        and every row is kept; None: each row is looked at (:meth:`_chunks`)."""
        if not self._plainly():
            return None
        ids = [row[0] for row in rows]
        if not all(type(i) is int for i in ids):
            return None
        plain = plain_lines([row[2] for row in rows], self._max_line_bytes)
        return None if plain is None else self._named(*plain, ids)

    def _joined_chunks(self, joined: Joined) -> list[Chunk] | None:
        """:meth:`_plain` of rows SQLite joined (:meth:`Sqlite.joined`)."""
        if not joined.ids:
            return []
        count, limit = len(joined.ids), self._max_line_bytes
        named = named_lines(joined.lines, count, joined.longest, limit)
        return None if named is None else self._named(*named, joined.ids)

    def _named(self, data: bytes, conversations: list[str], ids: list[int]) -> list[Chunk]:
        """Plain rows' chunks: ``data``, their lines, naming ``conversations``."""
        partition = self._options.partition
        if partition is not None:
            check_rows(partition, ids, conversations)
        self._rows += len(ids)
        self._remember_all(ids)
        return self._numbered(data, ids)

    def _numbered(self, data: bytes, ids: list[int]) -> list[Chunk]:
        """``data``'s lines as chunks, each line numbered by its row id (``ids``)."""
        chunks: list[Chunk] = []
        done = 0
        for piece in split_lines(data):
            n = count_lines(piece)
            numbers = ids[done : done + n]
            done += n
            # Ids with gaps (rows deleted, or another worker's): each line names its own.
            line_of = None if numbers[-1] - numbers[0] == n - 1 else numbers.__getitem__
            chunks.append(Chunk(piece, None, numbers[0], self._where, line_of=line_of))
        return chunks

    def _forget_ids(self) -> None:
        """What the look back (:meth:`_looked_back`) knows of a database: none read yet."""
        self._recent: deque[Any] = deque()  # the ids of the last rows read, and as a set
        self._recent_set: set[Any] = set()
        self._missed = 0  # rows found below the ids read, too far back to read
        self._late = 0  # rows found below the ids read, and read
        self._null = 0  # rows with no id (NULL): never read
        self._null_counted = False
        self._next_look = self._next_whole = 0.0

    def _remember_all(self, row_ids: list[int]) -> None:
        """:meth:`_remember` of each of ``row_ids``."""
        self._recent.extend(row_ids)
        self._recent_set.update(row_ids)
        over = len(self._recent) - LOOK_BACK_ROWS
        if over > 0:
            popleft = self._recent.popleft
            self._recent_set.difference_update([popleft() for _ in range(over)])

    def _remember(self, row_id: Any) -> None:
        self._recent.append(row_id)
        self._recent_set.add(row_id)
        if len(self._recent) > LOOK_BACK_ROWS:
            self._recent_set.discard(self._recent.popleft())

    async def _looked_back(
        self, db: Database, last: Any, send: MemoryObjectSendStream[Item]
    ) -> bool:
        """Rows the reading in id order passed by: written after rows with higher ids
        were read (PostgreSQL transactions that commit out of order, ids given by
        hand), and rows with no id (NULL). Looked for once the table is read to its
        end (a replay's end, a follow's poll, at most every few seconds and less
        often when counting takes long): rows are counted at or below the last id
        read; more than were read means some were passed by. Those among the last
        :data:`LOOK_BACK_ROWS` ids read are read now (True: handed on); older
        ones, and rows with no id, are counted and named in :attr:`notices`
        (:meth:`_look_whole`). (A row deleted meanwhile hides one written: counts
        cannot tell them apart.)"""
        began = anyio.current_time()
        if self.live and began < self._next_look:
            return False
        changes = await self._patiently(db.changes)
        if changes is not None and changes == self._changes:
            # No other connection committed since reading began (or since the last
            # look that counted the whole table, which saw every row committed before
            # it): no row can have been passed by. Rows with no id were there from the
            # start: counted once.
            if not self._null_counted:
                await self._count_null(db)
            self._next_look = anyio.current_time() + _LOOK_EVERY
            return False
        floor = self._recent[0] if self._recent else last  # (before found rows are read)
        found = await self._passed_by(db, floor, last)
        if found:
            self._late += len(found)
            self._notice(
                "late",
                f"`{self.name}`: {_rows(self._late)} written after rows with higher ids "
                f"were read, read late (ids {_ids(r[0] for r in found)})",
            )
            for chunk in self._chunks(found):
                await send.send(chunk)
        # Among the last ids read (cheap: a range of the id index) every look; the whole
        # table, and rows with no id, rarely (a count can read the whole table).
        if not self.live or began >= self._next_whole:
            await self._look_whole(db, floor, last)
            self._next_whole = anyio.current_time() + max(
                _LOOK_WHOLE_EVERY, 100 * (anyio.current_time() - began)
            )
            self._changes = changes  # (every row committed before this look, counted)
        self._next_look = anyio.current_time() + _LOOK_EVERY
        return bool(found)

    async def _passed_by(self, db: Database, floor: Any, last: Any) -> list[tuple[Any, ...]]:
        """The rows among the last :data:`LOOK_BACK_ROWS` ids read (``floor`` to
        ``last``) that were not read: counted, and when more than were read, fetched."""
        mark = db.placeholder
        where, params = self._filters()
        everything = len(self._recent_set) >= self._rows  # every id read is at hand
        if everything:
            near_where, near_params = [f"id <= {mark}", *where], [last, *params]
        else:
            near_where = [f"id >= {mark}", f"id <= {mark}", *where]
            near_params = [floor, last, *params]
        near = await self._count_rows(db, near_where, near_params)
        try:
            seen = (
                len(self._recent_set)
                if everything
                else sum(1 for i in self._recent_set if i >= floor)
            )
        except TypeError:  # ids of several types in one column: not compared here
            seen = near
        found: list[tuple[Any, ...]] = []
        if near - seen > 0:
            ids = await self._patiently(
                db.fetch,
                f"SELECT id FROM {TABLE} WHERE {' AND '.join(near_where)}",
                near_params,
                BATCH_BYTES,
            )
            new = [row[0] for row in ids.rows if row[0] not in self._recent_set]
            for start in range(0, len(new), FETCH_ROWS):  # (a few rows: bounded bytes)
                some = new[start : start + FETCH_ROWS]
                query = (
                    f"SELECT id, sender_id, {db.data} FROM {TABLE} WHERE id IN "
                    f"({', '.join([mark] * len(some))}) ORDER BY id"
                )
                found += (await self._patiently(db.fetch, query, some, 1 << 62)).rows
        return found

    async def _look_whole(self, db: Database, floor: Any, last: Any) -> None:
        """Rows below the last :data:`LOOK_BACK_ROWS` ids read that were not read, and
        rows with no id: counted over the whole table and named in :attr:`notices`."""
        mark = db.placeholder
        where, params = self._filters()
        total = await self._count_rows(db, [f"id <= {mark}", *where], [last, *params])
        missed = total - self._rows - self._missed
        if missed > 0:
            self._missed += missed
            self._notice(
                "missed",
                f"`{self.name}`: {_rows(self._missed)} written with ids below the last "
                f"{LOOK_BACK_ROWS:,} read (below id {floor}) {_were(self._missed)} not read",
            )
        await self._count_null(db)

    async def _count_null(self, db: Database) -> None:
        """Rows with no id (NULL), counted over the whole table and named in
        :attr:`notices`."""
        self._null_counted = True
        partition = self._options.partition
        if self._share is not None and partition is not None and partition.index > 0:
            return  # (worker 0 counts them in the whole table, as one process does)
        where, params = self._filters(shared=False)
        null = await self._count_rows(db, ["id IS NULL", *where], params)
        if null > self._null:
            self._null = null
            names = await self._patiently(
                db.fetch,
                f"SELECT DISTINCT sender_id FROM {TABLE} WHERE "
                + " AND ".join(["id IS NULL", *where])
                + f" ORDER BY sender_id LIMIT {_NAMED}",
                params,
                BATCH_BYTES,
            )
            named = ", ".join(f"`{row[0]}`" for row in names.rows)
            more = " and others" if len(names.rows) == _NAMED else ""
            self._notice(
                "null",
                f"`{self.name}`: {_rows(null)} with no id (NULL) {_were(null)} not read: "
                f"no place in id order (conversations {named}{more})",
            )

    async def _count_rows(self, db: Database, where: list[str], params: list[Any]) -> int:
        query = f"SELECT COUNT(*) FROM {TABLE} WHERE {' AND '.join(where)}"
        batch = await self._patiently(db.fetch, query, params, BATCH_BYTES)
        return int(batch.rows[0][0])

    def _notice(self, topic: str, message: str) -> None:
        """A line for the report (:attr:`notices`), said at once the first time."""
        if topic not in self._notices:
            self._say(message)
        self._notices[topic] = message

    async def _replaced_file(self) -> bool:
        """Whether a followed SQLite file was deleted and created again (PATH names
        another file), as ``follow:`` notices a rotated file: then the old one is
        let go of (every row it had was read) and the new one opened, to be read
        from its first row. A file deleted and not yet created again is read on."""
        if self._path is None or self._file is None:
            return False
        now = await anyio.to_thread.run_sync(identity, self._path)
        if now is None or now == self._file:
            return False
        old, self._db = self._db, None
        if old is not None:
            await anyio.to_thread.run_sync(old.close)
        self._say(
            f"`{self.name}` was deleted and created again: reading the new database "
            "from its first row"
        )
        while True:  # (a new file may not hold its table yet: a follow waits for it)
            try:
                self._db = await self._patiently(self._connect)
                break
            except FeedError:
                await anyio.sleep(self._options.poll_interval)
        self._replaced += 1
        self._rows, self._by_place = 0, False
        self._forget_ids()
        self._where = f"{redact(self._url)} (table {TABLE}, row id)"
        times = "once" if self._replaced == 1 else f"{self._replaced} times"
        self._notices["replaced"] = (
            f"`{self.name}` was deleted and created again ({times}): each new database "
            "was read from its first row"
        )
        return True

    async def _close(self) -> None:
        if self._db is not None:
            db, self._db = self._db, None
            await anyio.to_thread.run_sync(db.close)
