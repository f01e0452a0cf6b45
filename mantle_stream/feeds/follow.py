"""``follow:PATH``: a file that is still being written, tailed; never ends.

One task polls every ``poll_interval``: it waits for the file to appear,
reads what was appended, starts again from 0 when the size drops below its
position (truncation), and when PATH names another inode (rotation) drains
the old file, then opens the new one.
"""

from __future__ import annotations

import dataclasses
import os
from typing import BinaryIO

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from mantle_stream.core.errors import FeedError
from mantle_stream.feeds.base import Item, Lines, QueuedFeed, open_interruptibly, put, reason

__all__ = ["FollowFeed", "FollowOptions"]


@dataclasses.dataclass(frozen=True)
class FollowOptions:
    """How ``follow:PATH`` watches its file: ``poll_interval`` seconds between looks."""

    poll_interval: float = 0.05

    def __post_init__(self) -> None:
        if self.poll_interval <= 0:
            raise ValueError(f"poll_interval must be positive, not {self.poll_interval!r}")


class FollowFeed(QueuedFeed):
    """``follow:PATH``: tail a file that is still being written; never ends."""

    def __init__(
        self, spec: str, path: str, options: FollowOptions, *, max_line_bytes: int
    ) -> None:
        # One file, appended to in order: a conversation's events in their order.
        super().__init__(spec, live=True, max_line_bytes=max_line_bytes, ordered=True)
        self._path = path
        self._poll = options.poll_interval
        self._file: BinaryIO | None = None

    async def _open(self) -> None:
        if await anyio.to_thread.run_sync(os.path.isdir, self._path):
            raise FeedError(f"cannot follow `{self._path}`: Is a directory")

    async def _produce(self, send: MemoryObjectSendStream[Item]) -> None:
        with send:
            try:
                await self._follow(send)
            except OSError as exc:
                self._error = FeedError(f"cannot follow `{self._path}`: {reason(exc)}")

    async def _follow(self, send: MemoryObjectSendStream[Item]) -> None:
        run = anyio.to_thread.run_sync
        while True:
            self._file = fh = await _open_if_present(self._path)
            if fh is None:
                await anyio.sleep(self._poll)
                continue
            lines = Lines(self._max_line_bytes)
            while True:
                if data := await run(fh.read, self._read_size):
                    self._touch()
                    await put(send, lines.feed(data), None)
                    continue
                change = await run(_what_changed, fh, self._path)
                if change == _TRUNCATED:
                    # The partial line read before is gone from the file: drop it.
                    await run(fh.seek, 0)
                    lines = Lines(self._max_line_bytes)
                    self._touch()
                elif change == _ROTATED:
                    # The old file is finished; take what the writer added to it
                    # before switching, then complete its final line.
                    while data := await run(fh.read, self._read_size):
                        self._touch()
                        await put(send, lines.feed(data), None)
                    await put(send, lines.finish(), None)
                    break
                else:
                    await anyio.sleep(self._poll)
            self._file = None
            fh.close()

    async def _close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


async def _open_if_present(path: str) -> BinaryIO | None:
    try:
        return await open_interruptibly(path, buffering=0)  # the caller owns it
    except FileNotFoundError:
        return None


_SAME, _TRUNCATED, _ROTATED = "same", "truncated", "rotated"


def _what_changed(fh: BinaryIO, path: str) -> str:
    here = os.fstat(fh.fileno())
    try:
        there: os.stat_result | None = os.stat(path)
    except FileNotFoundError:
        there = None  # renamed away and not yet recreated: keep reading the old file
    if there is not None and (there.st_dev, there.st_ino) != (here.st_dev, here.st_ino):
        return _ROTATED
    if here.st_size < fh.tell():
        return _TRUNCATED
    return _SAME
