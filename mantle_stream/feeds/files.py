"""Files, directories of files and standard input: feeds that end.

Each file (and standard input) holds JSON lines, or one tracker document
(told apart by its first bytes, see :func:`~mantle_stream.core.events.flat.is_document`).
A file is read in 512 KiB blocks in anyio worker threads, split into 64 KiB
chunks; ``-`` is read by a daemon thread of the feed's own (a slow pipe
never blocks the event loop, and a read that never returns never keeps the
process alive).
"""

from __future__ import annotations

import functools
import os
import select
import stat
import sys
import threading
from collections.abc import Callable
from typing import BinaryIO

import anyio
from anyio.from_thread import BlockingPortal
from anyio.streams.memory import MemoryObjectSendStream

from mantle_stream.core.errors import EventError, FeedError
from mantle_stream.core.events.flat import document_lines, is_document
from mantle_stream.feeds.base import BOM, Item, Lines, QueuedFeed, open_interruptibly, put, reason
from mantle_stream.feeds.interface import Chunk

__all__ = ["EVENT_FILE_SUFFIXES", "MAX_DOCUMENT_BYTES", "FileFeed", "event_files"]


#: Files read from a directory source: JSON lines and tracker documents.
EVENT_FILE_SUFFIXES = (".json", ".jsonl", ".ndjson", ".log")
#: The largest tracker document read (it is read whole).
MAX_DOCUMENT_BYTES = 256 << 20


def _document_chunk(data: bytes, name: str) -> Chunk:
    """A whole tracker document as one chunk of JSON lines that ends its conversation."""
    data = data.removeprefix(BOM)
    if len(data) > MAX_DOCUMENT_BYTES:
        raise FeedError(
            f"`{name}` is a tracker document of {len(data)} bytes, more than the "
            f"{MAX_DOCUMENT_BYTES}-byte limit"
        )
    try:
        cid, lines = document_lines(data, name)
    except EventError as exc:
        raise FeedError(str(exc)) from None
    return Chunk(lines, None, 1, f"{name}#events", cid)


def event_files(path: str) -> list[str]:
    """A directory's event files, in name order (FeedError for none)."""
    try:
        names = sorted(os.listdir(path))
    except OSError as exc:
        raise FeedError(f"cannot read events from `{path}`: {reason(exc)}") from None
    files = [
        os.path.join(path, n)
        for n in names
        if n.endswith(EVENT_FILE_SUFFIXES)
        and not n.startswith(".")
        and os.path.isfile(os.path.join(path, n))
    ]
    if not files:
        raise FeedError(
            f"no event files in directory `{path}` (expected "
            f"{', '.join('*' + s for s in EVENT_FILE_SUFFIXES)})"
        )
    return files


class FileFeed(QueuedFeed):
    """Files and directories of files, or standard input when ``paths`` is None.

    Each file (and standard input) holds JSON lines, or one tracker document
    (told apart by its first bytes, see :func:`~mantle_stream.core.events.flat.is_document`).
    A directory's ``*.json``, ``*.jsonl``, ``*.ndjson`` and ``*.log`` files are
    read in name order; several paths one after the other, as one feed. Ends at
    the end of the last file.
    """

    def __init__(
        self, paths: list[str] | None, stdin: BinaryIO | None, *, max_line_bytes: int
    ) -> None:
        name = (
            "<stdin>"
            if paths is None
            else paths[0]
            if len(paths) == 1
            else f"{paths[0]} and {len(paths) - 1} more"
        )
        super().__init__(name, live=False, max_line_bytes=max_line_bytes)
        self._path = None if paths is None else paths[0]
        self._paths = paths
        self._stdin = stdin
        self._files: list[str] | None = None  # every file to read, when not one
        self._opened: dict[str, BinaryIO] = {}  # opened by _open, not yet read

    async def _open(self) -> None:
        if self._paths is None:
            if self._stdin is None:
                if sys.stdin is None:
                    raise FeedError("cannot read events from `-`: there is no standard input")
                self._stdin = sys.stdin.buffer
            return
        files: list[str] = []
        for path in self._paths:
            if os.path.isdir(path):
                files += event_files(path)
                continue
            try:
                file = await open_interruptibly(path)
                if stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                    file.close()  # (opened again when its turn comes: many files, few fds)
                else:  # a pipe opened, closed and opened again would lose its writer
                    self._opened[path] = file
            except OSError as exc:
                raise FeedError(f"cannot read events from `{path}`: {reason(exc)}") from None
            files.append(path)
        if len(self._paths) > 1 or os.path.isdir(self._paths[0]):
            self._files = files
        else:
            # One file holds each conversation in the order it was written;
            # several may split one in any order, and a pipe may carry anything.
            self.ordered = True

    async def _produce(self, send: MemoryObjectSendStream[Item]) -> None:
        with send:
            if self._path is None:
                try:
                    await self._read_stdin(send, Lines(self._max_line_bytes))
                except OSError as exc:
                    self._error = FeedError(f"cannot read events from `{self.name}`: {reason(exc)}")
                return
            files = self._files or [self._path]
            several = self._files is not None
            for name in files:
                try:
                    file = self._opened.pop(name, None) or await open_interruptibly(name)
                    with file:
                        await self._read_file(send, file, name if several else None)
                except OSError as exc:
                    self._error = FeedError(f"cannot read events from `{name}`: {reason(exc)}")
                    return
                except FeedError as exc:
                    self._error = exc
                    return

    async def _read_file(
        self, send: MemoryObjectSendStream[Item], file: BinaryIO, source: str | None
    ) -> None:
        lines = Lines(self._max_line_bytes)
        read = _read_function(file)
        first = True
        while data := await anyio.to_thread.run_sync(read, self._read_size):
            self._touch()
            if first and is_document(data.removeprefix(BOM)):
                rest = await anyio.to_thread.run_sync(file.read, MAX_DOCUMENT_BYTES)
                await send.send(_document_chunk(data + rest, source or self.name))
                return
            first = False
            await put(send, lines.feed(data), None, source)
        await put(send, lines.finish(), None, source)

    async def _read_stdin(self, send: MemoryObjectSendStream[Item], lines: Lines) -> None:
        # A read of standard input can block for as long as the writer likes
        # and cannot be interrupted. In anyio's worker pool it would keep the
        # process alive after the consumer stopped (--fail-fast, Ctrl-C on a
        # terminal), so a daemon thread of our own reads and hands blocks over.
        assert self._stdin is not None
        blocks, arrived = anyio.create_memory_object_stream[bytes | Exception](1)
        failed: Exception | None = None
        with blocks, arrived:
            async with BlockingPortal() as portal:
                threading.Thread(
                    target=_read_blocks,
                    name=f"mantle_stream {self.name} reader",
                    args=(_stdin_read_function(self._stdin), self._read_size, portal, blocks),
                    daemon=True,
                ).start()
                document: list[bytes] | None = None  # standard input holds one document
                first = True
                while data := await arrived.receive():
                    if isinstance(data, Exception):
                        failed = data  # raised below: the portal would wrap it in a group
                        break
                    self._touch()
                    if first:
                        first = False
                        document = [] if is_document(data.removeprefix(BOM)) else None
                    if document is not None:
                        document.append(data)
                        if sum(map(len, document)) > MAX_DOCUMENT_BYTES:
                            self._error = FeedError(
                                f"`{self.name}` is a tracker document of more than the "
                                f"{MAX_DOCUMENT_BYTES}-byte limit"
                            )
                            return
                    else:
                        await put(send, lines.feed(data), None)
                if document is not None and failed is None:
                    try:
                        await send.send(_document_chunk(b"".join(document), self.name))
                    except FeedError as exc:
                        self._error = exc
                    return
        if failed is not None:
            raise failed
        await put(send, lines.finish(), None)

    async def _close(self) -> None:
        for file in self._opened.values():
            file.close()
        self._opened.clear()


def _read_function(source: BinaryIO) -> Callable[[int], bytes]:
    # read1: at most one system call, so a pipe's lines flow as they come
    # instead of waiting for 64 KiB to pile up.
    read: Callable[[int], bytes] = getattr(source, "read1", source.read)
    return read


def _stdin_read_function(source: BinaryIO) -> Callable[[int], bytes]:
    # The file descriptor itself where there is one: a thread blocked inside
    # a buffered reader holds its lock, and the interpreter, closing
    # sys.stdin at exit, would wait for that read and then abort.
    try:
        fd = source.fileno()
    except (OSError, ValueError):  # io.UnsupportedOperation is both
        return _read_function(source)
    return functools.partial(_read_waiting, fd)


def _read_waiting(fd: int, size: int) -> bytes:
    """One read that may block, then whatever else is already waiting, up to ``size``.

    A pipe hands over at most what it holds (64 KiB on Linux) per read; taking
    what is already there too means a bulk pipe costs one hand-off to the
    event loop per ``size`` bytes, while a slow writer's lines still go on
    as soon as they arrive.
    """
    data = os.read(fd, size)
    if not data or len(data) >= size:
        return data
    parts, got = [data], len(data)
    try:
        while got < size and select.select([fd], [], [], 0)[0]:
            more = os.read(fd, size - got)
            if not more:
                break  # the end: the next read sees it again
            parts.append(more)
            got += len(more)
    except (OSError, ValueError):
        pass  # not selectable here: what was read is enough
    return b"".join(parts)


def _read_blocks(
    read: Callable[[int], bytes],
    size: int,
    portal: BlockingPortal,
    blocks: MemoryObjectSendStream[bytes | Exception],
) -> None:
    """Body of the standard-input thread: blocks (``b""`` at the end) or the error."""
    try:
        while True:
            try:
                data = read(size)
            except Exception as exc:
                portal.call(blocks.send, exc)
                return
            portal.call(blocks.send, data)  # waits while the feed is behind
            if not data:
                return
    except Exception:
        return  # the feed has closed its end: nobody is left to tell
