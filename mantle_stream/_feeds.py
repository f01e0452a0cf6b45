"""Every event source behind one async interface: files, pipes, tailed logs, sockets.

An edge module (docs/architecture.md). The engine consumes :class:`Chunk` values --
runs of complete lines tagged with where they came from -- and never learns
whether the bytes came from a file, standard input, a log still being written
or a simulator on a socket. The event loop, worker threads, files and sockets
all live here; the pure core (scenario, compiler, machines, events, engine)
never imports anyio.

Theory of operation
-------------------
``open_feed(spec)`` only picks a :class:`Feed` by the spec's shape; it does no
I/O and does not raise for a bad spec. Entering the feed (``async with``)
does everything that can fail for a reason the user must hear about up front
-- parsing the spec, opening the file, binding the socket -- and raises
:class:`~mantle_stream.FeedError` if it cannot. It then starts producers in a
task group the feed owns:

* a file: one task reading 512 KiB blocks in anyio worker threads, split into
  64 KiB chunks (a thread hand-off per 64 KiB cost as much as judging them);
  ``-``: a daemon thread of the feed's own reads the file descriptor (a slow
  pipe never blocks the event loop, and a read that never returns never
  keeps the process alive), taking what is already waiting too, up to
  512 KiB per hand-off; both end at end of file;
* ``follow:PATH``: one task polling every ``poll_interval``; it waits for the
  file to appear, reads what was appended, starts again from 0 when the size
  drops below its position (truncation), and when PATH names another inode
  (rotation) drains the old file, then opens the new one;
* ``tcp://`` and ``unix:``: one accept loop per listening socket and one task
  per connection, in :mod:`mantle_stream._sockets`, which also decides whom
  to let in (loopback by default, a shared token, connection limits and
  timeouts) and counts whom it turned away in ``Feed.rejected``.

Producers cut bytes into complete lines (``LineChunker``, wrapped by
``_Lines`` for line numbers and the overlong-line rule) and send chunks into
one bounded memory object stream; iterating the feed receives from it. When
the consumer falls behind, producers wait, reading stops, and for sockets the
kernel buffers fill and the sender slows down: backpressure end to end,
nothing buffered without bound. A file, ``-`` or follow producer that fails
mid-read records a ``FeedError`` and closes the stream; the iterator raises
it after the chunks that came before.

A connection's task sends a private "gone" marker after its last chunk. The
iterator acts on it when the consumer asks for the next chunk -- that is,
after the consumer has handled, and replied to, every line of that
connection. Only then is the socket closed (unless the listener closed it
already: see ``_sockets``) and ``connections`` decremented, so a client that
half-closes still gets replies to its last lines, and ``connections == 0``
means every line received has been handed out.

Line rules
----------
* CR stays in the chunk (the JSON decoder tolerates it); blank lines pass
  through (the decoder skips them).
* A final line without a newline is completed at the end of a file, of
  standard input, and of a followed file that was rotated away. A socket
  connection that ends mid-line loses that partial line: a simulator that
  dies mid-write must not produce half an event.
* ``Chunk.first_line`` is 1-based per file or per connection (where a
  token line, if asked for, is line 1). A followed file restarts at 1 after
  truncation or rotation, so numbers match the file now at PATH.
* A line whose content (without its newline) is longer than
  ``max_line_bytes`` is not buffered: once the excess is seen, the feed
  delivers ``<line cut off: longer than N bytes> `` followed by
  the line's first 200 bytes and a newline, and discards the rest of the line
  as it arrives. That line is not JSON, so the decoder rejects it as a bad
  event at the right line number, with an excerpt saying why. At most
  ``max_line_bytes`` plus one read block of a line is ever held.
* Truncation is noticed by the size dropping below the read position; a file
  truncated and regrown past that position between two polls is read on from
  the old position (``tail -F`` has the same blind spot).
"""

from __future__ import annotations

import functools
import os
import select
import sys
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from types import TracebackType
from typing import BinaryIO, NamedTuple, TypeAlias

import anyio
from anyio.abc import ByteStream, TaskGroup
from anyio.from_thread import BlockingPortal
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from mantle_stream._errors import EventError, FeedError
from mantle_stream._events import count_lines
from mantle_stream._flat import document_lines, is_document
from mantle_stream._sources import CHUNK_BYTES, READ_BYTES, LineChunker, split_lines

__all__ = ["Chunk", "Feed", "Peer", "open_feed"]

# Chunks waiting between producers and the consumer. Each is at most one read
# block (or a piece of one) plus one pending line: a few MiB at worst.
_QUEUE_SIZE = 16
# How much of an overlong line survives, so the error excerpt shows what it was.
_CUT_KEEP = 200
_FORMS = "a file, a directory, `-`, `follow:PATH`, `tcp://HOST:PORT` or `unix:PATH`"


#: Replies waiting for one slow client; past this many its connection is dropped.
MAX_OUTBOX = 256


class Peer:
    """One connection that can receive reply lines.

    ``send_timeout`` bounds each reply: a client that stops reading would
    otherwise stall whoever writes to it. When a reply cannot be written in
    time the connection is closed and ``on_stall`` called. :meth:`post`
    never waits: the reply goes to the connection's own queue, which its own
    task (:meth:`pump`) writes out; a client whose queue overflows is
    dropped, never the loop that reads every client's events.
    """

    __slots__ = ("_closed", "_lock", "_on_stall", "_outbox", "_overflow", "_ready",
                 "_send_timeout", "_stream", "name")

    def __init__(self, name: str, stream: ByteStream, *, send_timeout: float | None = None,
                 on_stall: Callable[[], object] | None = None) -> None:
        self.name = name
        self._stream = stream
        self._lock = anyio.Lock()
        self._closed = False
        self._send_timeout = send_timeout
        self._on_stall = on_stall
        self._outbox: deque[bytes] = deque()
        self._overflow = False
        self._ready = anyio.Event()

    def post(self, line: bytes) -> None:
        """Queue one reply for :meth:`pump` to write; never waits."""
        if self._closed or self._overflow:
            return
        if len(self._outbox) >= MAX_OUTBOX:
            self._overflow = True  # it does not read: pump drops the connection
        else:
            self._outbox.append(line)
        self._ready.set()

    async def pump(self) -> None:
        """Write queued replies until the connection closes (its own task)."""
        while not self._closed:
            if not self._outbox and not self._overflow:
                await self._ready.wait()
                self._ready = anyio.Event()
                continue
            if self._overflow:
                await self._close()
                if self._on_stall is not None:
                    self._on_stall()
                return
            await self.send(self._outbox.popleft())

    def __repr__(self) -> str:
        return f"<Peer {self.name}{' closed' if self._closed else ''}>"

    @property
    def closed(self) -> bool:
        """True once replies can no longer reach the client."""
        return self._closed

    async def send(self, line: bytes) -> None:
        """Write one line (a newline is added if missing).

        Never raises because the client has gone: the peer is marked closed
        and the line dropped. Sends are serialized, so concurrent callers
        never interleave bytes within a line. Like any socket write it waits
        while the client does not read and its buffers are full, for
        ``send_timeout`` at most; then the connection is closed.
        """
        if not line.endswith(b"\n"):
            line += b"\n"
        async with self._lock:
            if self._closed:
                return
            try:
                with anyio.fail_after(self._send_timeout):
                    await self._stream.send(line)
            except TimeoutError:
                # Part of the line may be out: closing is the only clean end.
                await self._close()
                if self._on_stall is not None:
                    self._on_stall()
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                self._closed = True

    async def _close(self) -> None:
        self._closed = True
        self._ready.set()  # let pump see it
        with anyio.CancelScope(shield=True):
            await self._stream.aclose()


class Chunk(NamedTuple):
    """One or more complete lines, each ending in ``b"\\n"``, from one source.

    ``source`` names where the lines came from when that is not the feed
    itself (one file of a directory); ``ends`` is the conversation a tracker
    document holds, which ends with the document.
    """

    data: bytes
    peer: Peer | None
    first_line: int
    source: str | None = None
    ends: str | None = None


class _Gone:
    """Queued after a connection's last chunk: retire the peer when reached."""

    __slots__ = ("peer",)

    def __init__(self, peer: Peer) -> None:
        self.peer = peer


_Item: TypeAlias = Chunk | _Gone


class _Lines:
    """``LineChunker`` plus 1-based line numbers and the overlong-line rule."""

    __slots__ = ("_chunker", "_limit", "_next", "_skipping", "_started")

    def __init__(self, limit: int, first_line: int = 1) -> None:
        self._chunker = LineChunker()
        self._limit = limit
        self._skipping = False  # inside an overlong line already reported
        self._next = first_line
        self._started = False

    def feed(self, data: bytes) -> list[tuple[bytes, int]]:
        """The complete lines so far, as chunks each with the number of its first line."""
        if not self._started and data:
            # A UTF-8 byte order mark, as some editors write: not part of the first event.
            self._started = True
            data = data.removeprefix(BOM)
        if self._skipping:
            newline = data.find(b"\n")
            if newline < 0:
                return []
            self._skipping = False
            data = data[newline + 1:]
        chunk = self._chunker.feed(data)
        if len(chunk) > self._limit:  # only then can a complete line be too long
            chunk = self._cut_long_lines(chunk)
        if self._chunker.pending > self._limit:
            rest = self._chunker.flush()
            chunk += self._cut(rest[:_CUT_KEEP].rstrip(b"\n"))
            self._skipping = True
        return self._take(chunk)

    def finish(self) -> list[tuple[bytes, int]]:
        """The final line of a source that ended cleanly, completed with a newline."""
        if self._skipping:
            self._skipping = False
            return []
        return self._take(self._chunker.flush())

    def _take(self, chunk: bytes) -> list[tuple[bytes, int]]:
        # A large read is handed on in chunks of the size the engine decodes best.
        pieces = []
        for piece in split_lines(chunk):
            pieces.append((piece, self._next))
            self._next += count_lines(piece)
        return pieces

    def _cut_long_lines(self, chunk: bytes) -> bytes:
        parts: list[bytes] = []
        start = 0
        while start < len(chunk):
            end = chunk.index(b"\n", start)
            if end - start > self._limit:
                parts.append(self._cut(chunk[start:min(end, start + _CUT_KEEP)]))
            else:
                parts.append(chunk[start:end + 1])
            start = end + 1
        return b"".join(parts)

    def _cut(self, head: bytes) -> bytes:
        return b"<line cut off: longer than %d bytes> %s\n" % (self._limit, head)


class Feed:
    """An event source: async context manager and async iterator of :class:`Chunk`.

    ``name`` is what to show in messages; ``live`` feeds (follow, tcp, unix)
    never end by themselves -- the consumer decides when a live run ends by
    no longer iterating. ``address`` is the bound ``tcp://HOST:PORT`` (the
    real port when 0 was asked) or ``unix:PATH``, else None.
    """

    # ``_peers``: every open connection, closed by __aexit__ whatever happens.

    def __init__(self, name: str, *, live: bool, max_line_bytes: int) -> None:
        self.name = name
        self.live = live
        self.address: str | None = None
        self._max_line_bytes = max_line_bytes
        # Files are read in large blocks, but at most half the line limit: a
        # block plus the pending line must stay under it, or every block would
        # be searched for overlong lines.
        self._read_size = max(CHUNK_BYTES, min(READ_BYTES, max_line_bytes // 2))
        self._connections = 0
        self._last_activity = 0.0
        self._error: FeedError | None = None
        self._rejected: dict[str, int] = {}
        #: Called with (client, reason) for every client the listener turns away.
        self.on_rejected: Callable[[str, str], object] | None = None
        #: Called with a connection once its last line has been handed out.
        self.on_gone: Callable[[Peer], object] | None = None
        self._peers: set[Peer] = set()
        self._entered = False
        self._task_group: TaskGroup | None = None
        self._send: MemoryObjectSendStream[_Item] | None = None
        self._receive: MemoryObjectReceiveStream[_Item] | None = None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"

    @property
    def connections(self) -> int:
        """Clients admitted and not yet retired; one counts until its last line is handed out."""
        return self._connections

    @property
    def last_activity(self) -> float:
        """``anyio.current_time()`` of the last byte received or connection change."""
        return self._last_activity

    @property
    def rejected(self) -> dict[str, int]:
        """Connections refused or closed by the listener, by reason (a copy).

        Keys appear with their first count: ``too many connections``,
        ``unauthorized``, ``auth timeout``, ``idle timeout``, ``send timeout``
        (see :mod:`mantle_stream._sockets`). Always empty for files.
        """
        return dict(self._rejected)

    async def __aenter__(self) -> Feed:
        if self._entered:
            raise RuntimeError(f"feed `{self.name}` can be entered only once")
        self._entered = True
        self._touch()
        await self._open()
        self._send, self._receive = anyio.create_memory_object_stream[_Item](_QUEUE_SIZE)
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        self._task_group.start_soon(self._produce, self._send)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        task_group, self._task_group = self._task_group, None
        try:
            if task_group is None:
                return None
            task_group.cancel_scope.cancel()
            try:
                return await task_group.__aexit__(exc_type, exc, tb)
            except BaseExceptionGroup as group:
                # anyio wraps an exception raised in the body in a group; the
                # caller's ``except EventError`` must see it as it was raised.
                if exc is not None and list(group.exceptions) == [exc]:
                    return False
                raise
        finally:
            if self._send is not None:
                self._send.close()
            if self._receive is not None:
                self._receive.close()
            with anyio.CancelScope(shield=True):
                for peer in self._peers:
                    await peer._close()
                self._peers.clear()
                self._connections = 0
                await self._close()

    def __aiter__(self) -> AsyncIterator[Chunk]:
        return self

    async def __anext__(self) -> Chunk:
        if self._receive is None or self._task_group is None:
            raise RuntimeError(f"iterate feed `{self.name}` inside `async with`")
        while True:
            try:
                item = await self._receive.receive()
            except anyio.EndOfStream:
                if self._error is not None:
                    error, self._error = self._error, None
                    raise error from None
                raise StopAsyncIteration from None
            if isinstance(item, Chunk):
                return item
            await self._retire(item.peer)

    # -- for subclasses ---------------------------------------------------

    async def _open(self) -> None:
        """Open files or bind sockets; raise FeedError if that cannot be done."""

    async def _produce(self, send: MemoryObjectSendStream[_Item]) -> None:
        raise NotImplementedError

    async def _close(self) -> None:
        """Release what ``_open`` acquired (runs shielded)."""

    def _touch(self) -> None:
        self._last_activity = anyio.current_time()

    def _count(self, reason: str, client: str = "a client") -> None:
        self._rejected[reason] = self._rejected.get(reason, 0) + 1
        if self.on_rejected is not None:
            self.on_rejected(client, reason)

    async def _retire(self, peer: Peer) -> None:
        if self.on_gone is not None:
            self.on_gone(peer)
        if peer in self._peers:
            self._peers.discard(peer)
            self._connections -= 1
        self._touch()
        await peer._close()


class _Invalid(Feed):
    """A spec that names no source: entering it raises the reason."""

    def __init__(self, spec: str, message: str) -> None:
        super().__init__(spec, live=False, max_line_bytes=1)
        self._message = message

    async def _open(self) -> None:
        raise FeedError(self._message)


async def _put(send: MemoryObjectSendStream[_Item], pieces: list[tuple[bytes, int]],
               peer: Peer | None, source: str | None = None) -> None:
    for data, first in pieces:
        await send.send(Chunk(data, peer, first, source))


#: Files read from a directory source: JSON lines and tracker documents.
EVENT_FILE_SUFFIXES = (".json", ".jsonl", ".ndjson", ".log")
#: The largest tracker document read (it is read whole).
MAX_DOCUMENT_BYTES = 256 << 20


#: The UTF-8 byte order mark some editors put at the start of a file.
BOM = b"\xef\xbb\xbf"


def _document_chunk(data: bytes, name: str) -> Chunk:
    """A whole tracker document as one chunk of JSON lines that ends its conversation."""
    data = data.removeprefix(BOM)
    if len(data) > MAX_DOCUMENT_BYTES:
        raise FeedError(f"`{name}` is a tracker document of {len(data)} bytes, more than the "
                        f"{MAX_DOCUMENT_BYTES}-byte limit")
    try:
        cid, lines = document_lines(data, name)
    except EventError as exc:
        raise FeedError(str(exc)) from None
    return Chunk(lines, None, 1, f"{name}#events", cid)


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _event_files(path: str) -> list[str]:
    """A directory's event files, in name order (FeedError for none)."""
    try:
        names = sorted(os.listdir(path))
    except OSError as exc:
        raise FeedError(f"cannot read events from `{path}`: {_reason(exc)}") from None
    files = [os.path.join(path, n) for n in names
             if n.endswith(EVENT_FILE_SUFFIXES) and not n.startswith(".")
             and os.path.isfile(os.path.join(path, n))]
    if not files:
        raise FeedError(f"no event files in directory `{path}` (expected "
                        f"{', '.join('*' + s for s in EVENT_FILE_SUFFIXES)})")
    return files


class _FileFeed(Feed):
    """Files and directories of files, or standard input when ``paths`` is None.

    Each file (and standard input) holds JSON lines, or one tracker document
    (told apart by its first bytes, see :func:`~mantle_stream._flat.is_document`).
    A directory's ``*.json``, ``*.jsonl``, ``*.ndjson`` and ``*.log`` files are
    read in name order; several paths one after the other, as one feed. Ends at
    the end of the last file.
    """

    def __init__(self, paths: list[str] | None, stdin: BinaryIO | None, *,
                 max_line_bytes: int) -> None:
        name = "<stdin>" if paths is None else paths[0] if len(paths) == 1 else \
            f"{paths[0]} and {len(paths) - 1} more"
        super().__init__(name, live=False, max_line_bytes=max_line_bytes)
        self._path = None if paths is None else paths[0]
        self._paths = paths
        self._stdin = stdin
        self._files: list[str] | None = None  # every file to read, when not one

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
                files += _event_files(path)
                continue
            try:
                (await anyio.to_thread.run_sync(open, path, "rb")).close()
            except OSError as exc:
                raise FeedError(f"cannot read events from `{path}`: {_reason(exc)}") from None
            files.append(path)
        if len(self._paths) > 1 or os.path.isdir(self._paths[0]):
            self._files = files


    async def _produce(self, send: MemoryObjectSendStream[_Item]) -> None:
        with send:
            if self._path is None:
                try:
                    await self._read_stdin(send, _Lines(self._max_line_bytes))
                except OSError as exc:
                    self._error = FeedError(
                        f"cannot read events from `{self.name}`: {_reason(exc)}")
                return
            files = self._files or [self._path]
            several = self._files is not None
            for name in files:
                try:
                    with open(name, "rb") as file:
                        await self._read_file(send, file, name if several else None)
                except OSError as exc:
                    self._error = FeedError(f"cannot read events from `{name}`: {_reason(exc)}")
                    return
                except FeedError as exc:
                    self._error = exc
                    return

    async def _read_file(self, send: MemoryObjectSendStream[_Item], file: BinaryIO,
                         source: str | None) -> None:
        lines = _Lines(self._max_line_bytes)
        read = _read_function(file)
        first = True
        while data := await anyio.to_thread.run_sync(read, self._read_size):
            self._touch()
            if first and is_document(data.removeprefix(BOM)):
                rest = await anyio.to_thread.run_sync(file.read, MAX_DOCUMENT_BYTES)
                await send.send(_document_chunk(data + rest, source or self.name))
                return
            first = False
            await _put(send, lines.feed(data), None, source)
        await _put(send, lines.finish(), None, source)

    async def _read_stdin(self, send: MemoryObjectSendStream[_Item], lines: _Lines) -> None:
        # A read of standard input can block for as long as the writer likes
        # and cannot be interrupted. In anyio's worker pool it would keep the
        # process alive after the consumer stopped (--fail-fast, Ctrl-C on a
        # terminal), so a daemon thread of our own reads and hands blocks over.
        assert self._stdin is not None
        blocks, arrived = anyio.create_memory_object_stream[bytes | Exception](1)
        failed: Exception | None = None
        with blocks, arrived:
            async with BlockingPortal() as portal:
                threading.Thread(target=_read_blocks, name=f"mantle_stream {self.name} reader",
                                 args=(_stdin_read_function(self._stdin), self._read_size,
                                       portal, blocks),
                                 daemon=True).start()
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
                                f"{MAX_DOCUMENT_BYTES}-byte limit")
                            return
                    else:
                        await _put(send, lines.feed(data), None)
                if document is not None and failed is None:
                    try:
                        await send.send(_document_chunk(b"".join(document), self.name))
                    except FeedError as exc:
                        self._error = exc
                    return
        if failed is not None:
            raise failed
        await _put(send, lines.finish(), None)


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


def _read_blocks(read: Callable[[int], bytes], size: int, portal: BlockingPortal,
                 blocks: MemoryObjectSendStream[bytes | Exception]) -> None:
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


def _open_if_present(path: str) -> BinaryIO | None:
    try:
        return open(path, "rb", buffering=0)  # the caller owns it
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


class _FollowFeed(Feed):
    """``follow:PATH``: tail a file that is still being written; never ends."""

    def __init__(self, spec: str, path: str, *, poll_interval: float,
                 max_line_bytes: int) -> None:
        super().__init__(spec, live=True, max_line_bytes=max_line_bytes)
        self._path = path
        self._poll = poll_interval
        self._file: BinaryIO | None = None

    async def _open(self) -> None:
        if await anyio.to_thread.run_sync(os.path.isdir, self._path):
            raise FeedError(f"cannot follow `{self._path}`: Is a directory")

    async def _produce(self, send: MemoryObjectSendStream[_Item]) -> None:
        with send:
            try:
                await self._follow(send)
            except OSError as exc:
                self._error = FeedError(f"cannot follow `{self._path}`: {_reason(exc)}")

    async def _follow(self, send: MemoryObjectSendStream[_Item]) -> None:
        run = anyio.to_thread.run_sync
        while True:
            self._file = fh = await run(_open_if_present, self._path)
            if fh is None:
                await anyio.sleep(self._poll)
                continue
            lines = _Lines(self._max_line_bytes)
            while True:
                if data := await run(fh.read, self._read_size):
                    self._touch()
                    await _put(send, lines.feed(data), None)
                    continue
                change = await run(_what_changed, fh, self._path)
                if change == _TRUNCATED:
                    # The partial line read before is gone from the file: drop it.
                    await run(fh.seek, 0)
                    lines = _Lines(self._max_line_bytes)
                    self._touch()
                elif change == _ROTATED:
                    # The old file is finished; take what the writer added to it
                    # before switching, then complete its final line.
                    while data := await run(fh.read, self._read_size):
                        self._touch()
                        await _put(send, lines.feed(data), None)
                    await _put(send, lines.finish(), None)
                    break
                else:
                    await anyio.sleep(self._poll)
            self._file = None
            fh.close()

    async def _close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def open_feed(spec: str | Sequence[str], *, poll_interval: float = 0.05,
              max_line_bytes: int = 1 << 20,
              stdin: BinaryIO | None = None, token: str | None = None,
              allow_remote: bool = False, max_connections: int = 64,
              auth_timeout: float = 10.0, idle_timeout: float | None = 300.0,
              send_timeout: float | None = 10.0) -> Feed:
    """The feed for a ``--events`` source; nothing is opened until ``async with``.

    ``spec`` is a file or directory path, ``-`` (``stdin``, default
    ``sys.stdin.buffer``), ``follow:PATH``, ``tcp://HOST:PORT`` (port 0 picks a
    free one; an empty HOST is ``127.0.0.1``) or ``unix:PATH``; or several file
    and directory paths, read one after the other as one feed. A malformed
    spec raises FeedError on entering, like every other failure to open, so
    callers handle one place.

    The rest applies to ``tcp://`` and ``unix:`` only and is ignored for the
    other sources (details in :func:`mantle_stream._sockets.open_socket_feed`):
    ``token`` that each client's first line must be, ``allow_remote`` for a
    HOST that is not loopback, ``max_connections`` open at once, and the
    seconds a client has to send the token (``auth_timeout``), may stay
    silent (``idle_timeout``) or may leave a reply unread (``send_timeout``).
    """
    if poll_interval <= 0:
        raise ValueError(f"poll_interval must be positive, not {poll_interval!r}")
    if max_line_bytes < 1:
        raise ValueError(f"max_line_bytes must be at least 1, not {max_line_bytes!r}")
    if not isinstance(spec, str):
        specs = list(spec)
        if len(specs) != 1:
            odd = [s for s in specs if s == "-" or ":" in s.split("/", 1)[0] or not s]
            if odd or not specs:
                return _Invalid(", ".join(specs), "several event sources must all be files or "
                                f"directories; `{odd[0] if odd else ''}` is not one")
            return _FileFeed(specs, None, max_line_bytes=max_line_bytes)
        spec = specs[0]
    if spec == "-":
        return _FileFeed(None, stdin, max_line_bytes=max_line_bytes)
    if spec.startswith("follow:"):
        path = spec[len("follow:"):]
        if not path:
            return _Invalid(spec, f"bad event source `{spec}`: expected `follow:PATH`")
        return _FollowFeed(spec, path, poll_interval=poll_interval,
                           max_line_bytes=max_line_bytes)
    if spec.startswith(("tcp://", "unix:")):
        # Imported here: the socket feeds build on Feed and Peer, defined above.
        from mantle_stream._sockets import open_socket_feed

        return open_socket_feed(spec, max_line_bytes=max_line_bytes, token=token,
                                allow_remote=allow_remote, max_connections=max_connections,
                                auth_timeout=auth_timeout, idle_timeout=idle_timeout,
                                send_timeout=send_timeout)
    if not spec:
        return _Invalid(spec, f"bad event source: empty; expected {_FORMS}")
    if "://" in spec:
        scheme = spec.partition("://")[0]
        return _Invalid(spec, f"bad event source `{spec}`: unknown scheme `{scheme}`; "
                              f"expected {_FORMS}")
    return _FileFeed([spec], None, max_line_bytes=max_line_bytes)
