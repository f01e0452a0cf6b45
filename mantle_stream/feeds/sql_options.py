"""What a SQL source reads (:class:`SqlOptions`), and ``--since`` read as a time.

The options of :class:`~mantle_stream.feeds.sql.SqlFeed`, apart so that the
command line builds them without the feed.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
from collections.abc import Callable

from mantle_stream.core.engine.partition import Partition

__all__ = ["SqlOptions", "parse_since"]


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
    #: One worker's share (``check --workers``): a replay reads only its
    #: conversations' rows (:mod:`~mantle_stream.feeds.sql_share`); a table read
    #: whole hands on only its conversations' rows, the others' read but not decoded.
    partition: Partition | None = None
    #: Told what the user should know about how the database is read (a WAL
    #: database on a read-only file system, read as immutable; a writer's lock
    #: waited for).
    on_notice: Callable[[str], object] | None = None
    #: How long a replay waits for a writer's lock before it gives up (a followed
    #: database waits as long as it takes: a follow never ends on a lock).
    lock_timeout: float = 60.0

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, not {self.batch_size!r}")
        if not self.poll_interval > 0:
            raise ValueError(f"poll_interval must be positive, not {self.poll_interval!r}")
        if self.since is not None and not math.isfinite(self.since):
            raise ValueError(f"since must be a finite time, not {self.since!r}")
        if not self.lock_timeout >= 0:
            raise ValueError(f"lock_timeout must be at least 0, not {self.lock_timeout!r}")


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
