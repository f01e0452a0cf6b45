"""An unkeyed topic's messages handed on in record-timestamp order across partitions.

Kafka keeps order within a partition only. With Rasa's default producer
(``partition_by_sender: false``) one conversation is spread over partitions,
and the engine can order only the rows that carry a ``sequence``: a row
without one is applied in arrival order, which would be partition by
partition. A member reading such a topic therefore passes its messages
through a :class:`StampedOrder`: each partition's messages wait, in their
partition's order, until every partition still being read has been read past
their Kafka record timestamp (a partition read to its end does not hold the
others back), and are then handed on oldest first. At most ``window``
messages wait: beyond that, the oldest go on. Messages not handed on yet were
not applied, so the member's commit never passes them.

It relies on each partition's timestamps going up (one producer's clock: a
partition read up to time T holds nothing older after). What it cannot
recover (docs/semantics.md): messages with equal timestamps on different
partitions (Rasa publishes a turn's events in one burst, often within one
millisecond: they go in partition order); a partition whose timestamps go
back (several producers with skewed clocks); a message that reaches its
partition later than ``window`` messages after one stamped after it; a topic
whose timestamps are not the producer's (``LogAppendTime``).
"""

from __future__ import annotations

from collections import deque
from typing import Any

__all__ = ["StampedOrder"]


def _stamp(message: Any) -> int:
    """The message's record timestamp in milliseconds (0 when it has none)."""
    kind, stamp = message.timestamp()
    return int(stamp) if kind and stamp >= 0 else 0


class StampedOrder:
    """Messages of several partitions, each partition's in its order, merged by time."""

    __slots__ = ("_latest", "_queues", "_waiting", "window")

    def __init__(self, window: int) -> None:
        self.window = window
        self._queues: dict[int, deque[tuple[int, Any]]] = {}  # partition -> (stamp, message)
        self._latest: dict[int, int] = {}  # partition -> highest timestamp read
        self._waiting = 0

    def __len__(self) -> int:
        return self._waiting

    def add(self, partition: int, messages: list[Any]) -> None:
        """Messages just read from ``partition``, in its order."""
        queue = self._queues.setdefault(partition, deque())
        latest = self._latest.get(partition, 0)
        for message in messages:
            stamp = _stamp(message)
            queue.append((stamp, message))
            latest = max(latest, stamp)
        self._latest[partition] = latest
        self._waiting += len(messages)

    def ready(self, reading: set[int]) -> list[tuple[int, list[Any]]]:
        """What can go on now, as runs of one partition's messages, oldest first.

        ``reading``: the partitions assigned and not read to their end; a
        message goes once each of them has been read up to its timestamp.
        """
        read = [self._latest.get(p) for p in reading]
        mark: int | None = None  # every partition read to its end: everything goes
        if None in read:
            mark = -1  # a partition not read yet may hold anything
        elif read:
            mark = min(r for r in read if r is not None)
        runs: list[tuple[int, list[Any]]] = []
        queues = self._queues
        while self._waiting:
            partition = min((p for p, q in queues.items() if q), key=lambda p: queues[p][0][0])
            stamp, message = queues[partition][0]
            if mark is not None and stamp > mark and self._waiting <= self.window:
                break
            queues[partition].popleft()
            self._waiting -= 1
            if runs and runs[-1][0] == partition:
                runs[-1][1].append(message)
            else:
                runs.append((partition, [message]))
        return runs

    def forget(self, partitions: set[int]) -> None:
        """Partitions given to another member: what waits of theirs is its to read."""
        for partition in partitions:
            self._waiting -= len(self._queues.pop(partition, ()))
            self._latest.pop(partition, None)
