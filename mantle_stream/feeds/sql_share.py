"""One worker's share of a SQL store: the rows of its own conversations, and no others.

``check --workers N`` on ``sqlite://`` or ``postgresql://`` (a replay): before
the first batch, each worker lists the table's distinct ``sender_id`` values
(one query), keeps those :func:`~mantle_stream.core.engine.partition.partition_of`
gives it, and puts them in a temporary table of its own connection
(:data:`SHARE_TABLE`); every query of :class:`~mantle_stream.feeds.sql.SqlFeed`
then asks for ``sender_id IN`` that table, so no row is read, or decoded,
by two workers. A conversation whose first row is written while the table is
read is listed when the worker reaches the end (:meth:`Share.grow`: rows above
the highest id listed), and its rows read then, those passed by as the look
back reads any row passed by. Each conversation is numbered by its first row's id
(:meth:`~mantle_stream.core.engine.partition.Partition.place`), which orders
the conversations of every worker as one process reading every row would.

The split holds while every row goes to the worker of the conversation its
line names, as one process would judge it: the feed checks each row it reads
(:func:`check_row`), and a row that names another worker's conversation, that
names none (a bad row), or whose id is not an integer, ends the worker with
:class:`~mantle_stream.core.errors.OneProcessNeeded`: the run is judged again
in one process, as a run a bad event ends is. A table whose ids are not
integers, or whose ``sender_id`` values are not all text, is read whole by
every worker (each judges its own conversations' rows), as is a followed
table (``follow:`` is read by one process) and a PostgreSQL database that
refuses a temporary table.
"""

from __future__ import annotations

from typing import Any

from mantle_stream.core.engine.partition import Partition, partition_of
from mantle_stream.core.errors import OneProcessNeeded
from mantle_stream.feeds.sql_db import TABLE, Database, database_errors, locked

__all__ = ["SHARE_TABLE", "Share", "check_row", "check_rows", "share"]

#: The temporary table that holds a worker's ``sender_id`` values (its connection's).
SHARE_TABLE = "mantle_share"


class Share:
    """A worker's share of a table: ``condition`` selects its rows (its ``sender_id``
    values in :data:`SHARE_TABLE`); ``known``: every ``sender_id`` listed so far, of
    every worker; ``top``: the highest id when they were last listed."""

    def __init__(
        self, db: Database, partition: Partition, filters: tuple[list[str], list[Any]]
    ) -> None:
        self.partition = partition
        # (Off Rasa's index on sender_id: through it, each batch would sort every
        # row of the share left.)
        self.condition = f"{db.no_index}sender_id IN (SELECT sender_id FROM {SHARE_TABLE})"
        self.known: set[str] = set()
        self.top: int = 0
        self._where, self._params = filters

    def grow(self, db: Database) -> bool:
        """Conversations begun since the last listing (rows above :attr:`top`): this
        worker's put in its table; whether there were any (their rows below the last
        id read are the look back's, as any row passed by). Runs in a worker thread."""
        top = _top(db)
        if top is None or top <= self.top:
            return False
        where = " AND ".join([f"id > {db.placeholder}", *self._where])
        query = f"SELECT DISTINCT sender_id FROM {TABLE} WHERE {where}"
        listed = db.fetch(query, [self.top, *self._params], 1 << 62).rows
        self.top = top
        new = {row[0] for row in listed} - self.known
        if not new:
            return False
        if not all(isinstance(s, str) and s for s in new):
            raise OneProcessNeeded("a conversation with no text sender_id began during the replay")
        self.known |= new
        part = self.partition
        mine = [(s,) for s in sorted(new) if partition_of(s, part.count) == part.index]
        db.execute(f"INSERT INTO {SHARE_TABLE} VALUES ({db.placeholder})", mine)
        return bool(mine)


def _top(db: Database) -> int | None:
    """The table's highest id, None when it has none or it is not an integer."""
    top = db.fetch(
        f"SELECT id FROM {TABLE} WHERE id IS NOT NULL ORDER BY id DESC LIMIT 1", [], 1 << 20
    ).rows
    if not top or not isinstance(top[0][0], int) or isinstance(top[0][0], bool):
        return None
    return top[0][0]


def share(db: Database, partition: Partition, where: list[str], params: list[Any]) -> Share | None:
    """``partition``'s share of the table (its ``sender_id`` values put in
    :data:`SHARE_TABLE`), or None when the table is read whole (see the module).
    ``where`` and ``params``: the other conditions on rows (``--conversation``,
    ``--since``). Runs in a worker thread."""
    top = _top(db)
    if top is None:
        return None  # empty, or ids that are not integers: numbered by place
    query = f"SELECT DISTINCT sender_id FROM {TABLE}"
    if where:
        query += f" WHERE {' AND '.join(where)}"
    senders = [row[0] for row in db.fetch(query, params, 1 << 62).rows]
    if not all(isinstance(s, str) and s for s in senders):
        return None  # (NULL, numbers, "": the line may name no conversation)
    mine = [(s,) for s in senders if partition_of(s, partition.count) == partition.index]
    try:
        db.execute(f"CREATE TEMP TABLE IF NOT EXISTS {SHARE_TABLE} (sender_id TEXT PRIMARY KEY)")
        db.execute(f"DELETE FROM {SHARE_TABLE}")
        db.execute(f"INSERT INTO {SHARE_TABLE} VALUES ({db.placeholder})", mine)
    except database_errors() as exc:
        if locked(exc):
            raise  # waited for (SqlFeed._patiently)
        return None  # (no TEMP privilege on a PostgreSQL database)
    found = Share(db, partition, (where, params))
    found.known, found.top = set(senders), top
    return found


def check_row(partition: Partition, row_id: Any, conversation: str | None) -> None:
    """Number a row's conversation by its id in a worker that reads only its share;
    :class:`OneProcessNeeded` when the row is not this worker's to judge (the module
    says why)."""
    if conversation is None or not isinstance(row_id, int) or isinstance(row_id, bool):
        what = "names no conversation" if conversation is None else "has an id that is not a number"
        raise OneProcessNeeded(f"row {row_id} {what}: the store is judged in one process")
    if not partition.place(conversation, row_id):
        raise OneProcessNeeded(
            f"row {row_id} names conversation `{conversation}` of another worker than its "
            "sender_id's: the store is judged in one process"
        )


def check_rows(partition: Partition, row_ids: list[int], conversations: list[str]) -> None:
    """:func:`check_row` of a batch of rows whose ids are integers, each naming a
    conversation."""
    if not partition.place_all(conversations, row_ids):
        for row_id, conversation in zip(row_ids, conversations, strict=True):
            check_row(partition, row_id, conversation)
