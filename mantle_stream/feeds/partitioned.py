"""One worker's share of a feed of tracker documents: only its conversations' documents.

``check --workers N`` starts N processes over the same source. Each
evaluator applies only its own conversations' events
(:class:`~mantle_stream.core.engine.partition.Partition`); a tracker document
is one conversation, so :class:`PartitionedFeed` hands on only this worker's
documents and the others are never decoded. Chunks of JSON lines pass as they
are. Sources that can pick rows themselves (SQL, the tracker endpoint) take
the partition instead and are not wrapped (see
:func:`mantle_stream.feeds.open_feed`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from types import TracebackType

from mantle_stream.core.engine.partition import Partition
from mantle_stream.feeds.interface import Chunk, Feed, Replies

__all__ = ["PartitionedFeed"]


class PartitionedFeed:
    """A :class:`Feed` of ``feed``'s chunks, without other workers' tracker documents."""

    def __init__(self, feed: Feed, partition: Partition) -> None:
        self._feed = feed
        self.partition = partition
        self.name = feed.name
        self.live = feed.live
        self.address = feed.address
        self.bytes_read = 0  # of the whole feed, this worker's share or not (progress)

    # The callbacks and counters are the wrapped feed's.
    @property
    def on_rejected(self) -> Callable[[str, str], object] | None:
        return self._feed.on_rejected

    @on_rejected.setter
    def on_rejected(self, callback: Callable[[str, str], object] | None) -> None:
        self._feed.on_rejected = callback

    @property
    def on_gone(self) -> Callable[[Replies], object] | None:
        return self._feed.on_gone

    @on_gone.setter
    def on_gone(self, callback: Callable[[Replies], object] | None) -> None:
        self._feed.on_gone = callback

    @property
    def connections(self) -> int:
        return self._feed.connections

    @property
    def last_activity(self) -> float:
        return self._feed.last_activity

    @property
    def rejected(self) -> dict[str, int]:
        return self._feed.rejected

    async def __aenter__(self) -> PartitionedFeed:
        await self._feed.__aenter__()
        self.address = self._feed.address
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        return await self._feed.__aexit__(exc_type, exc, tb)

    def __aiter__(self) -> AsyncIterator[Chunk]:
        return self

    async def __anext__(self) -> Chunk:
        while True:
            chunk = await self._feed.__anext__()
            self.bytes_read += len(chunk.data)
            if chunk.ends is None or self.partition.owns(chunk.ends):
                return chunk
