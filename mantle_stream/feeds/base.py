"""What every event source shares: a queue of chunks, line rules, connections.

:class:`QueuedFeed` implements the :class:`~mantle_stream.feeds.interface.Feed`
interface for every source: producers (a subclass's ``_produce``) put chunks
into one bounded queue that iterating the feed receives from. The sources
are :mod:`.files`, :mod:`.follow` and :mod:`.sockets`; the pure core never
imports anyio.

Theory of operation
-------------------
``open_feed(spec)`` only picks a feed by the spec's shape (:mod:`mantle_stream.feeds`); it does no
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
  per connection, in :mod:`mantle_stream.feeds.sockets`, which also decides whom
  to let in (loopback by default, a shared token, connection limits and
  timeouts) and counts whom it turned away in ``Feed.rejected``.

Producers cut bytes into complete lines (``LineChunker``, wrapped by
``Lines`` for line numbers and the overlong-line rule) and send chunks into
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
already: see :mod:`.sockets`) and ``connections`` decremented, so a client that
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

import contextlib
import os
import stat
from collections import deque
from collections.abc import AsyncIterator, Callable
from types import TracebackType
from typing import BinaryIO, TypeAlias

import anyio
from anyio.abc import ByteStream, TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from mantle_stream.core.errors import FeedError
from mantle_stream.core.events.model import count_lines
from mantle_stream.core.urls import scrub
from mantle_stream.feeds.interface import Chunk, Replies
from mantle_stream.feeds.lines import CHUNK_BYTES, READ_BYTES, LineChunker, split_lines

__all__ = [
    "BOM",
    "MAX_OUTBOX",
    "Gone",
    "Invalid",
    "Item",
    "Lines",
    "Peer",
    "QueuedFeed",
    "open_interruptibly",
    "put",
    "reason",
]

# Chunks waiting between producers and the consumer. Each is at most one read
# block (or a piece of one) plus one pending line: a few MiB at worst.
_QUEUE_SIZE = 16
# How much of an overlong line survives, so the error excerpt shows what it was.
_CUT_KEEP = 200
#: The UTF-8 byte order mark some editors put at the start of a file.
BOM = b"\xef\xbb\xbf"


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

    __slots__ = (
        "_closed",
        "_lock",
        "_on_stall",
        "_outbox",
        "_overflow",
        "_ready",
        "_send_timeout",
        "_stream",
        "name",
    )

    def __init__(
        self,
        name: str,
        stream: ByteStream,
        *,
        send_timeout: float | None = None,
        on_stall: Callable[[], object] | None = None,
    ) -> None:
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


class Gone:
    """Queued after a connection's last chunk: retire the peer when reached."""

    __slots__ = ("peer",)

    def __init__(self, peer: Peer) -> None:
        self.peer = peer


Item: TypeAlias = Chunk | Gone


class Lines:
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
            data = data[newline + 1 :]
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
                parts.append(self._cut(chunk[start : min(end, start + _CUT_KEEP)]))
            else:
                parts.append(chunk[start : end + 1])
            start = end + 1
        return b"".join(parts)

    def _cut(self, head: bytes) -> bytes:
        return b"<line cut off: longer than %d bytes> %s\n" % (self._limit, head)


class QueuedFeed:
    """A :class:`~mantle_stream.feeds.interface.Feed` whose producers fill one bounded queue.

    ``name`` is what to show in messages; ``live`` feeds (follow, tcp, unix)
    never end by themselves -- the consumer decides when a live run ends by
    no longer iterating. ``ordered``: the source delivers each conversation's
    events in the order they were numbered (see the Feed protocol). ``address``
    is the bound ``tcp://HOST:PORT`` (the real port when 0 was asked) or
    ``unix:PATH``, else None.
    """

    # ``_peers``: every open connection, closed by __aexit__ whatever happens.

    def __init__(
        self, name: str, *, live: bool, max_line_bytes: int, ordered: bool = False
    ) -> None:
        self.name = name
        self.live = live
        self.ordered = ordered
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
        self._unread: dict[str, str] = {}
        # What the user should know about how the source was read, by topic (a
        # later line on the same topic replaces the earlier: one line each).
        self._notices: dict[str, str] = {}
        # The passwords and tokens this source was given: never in a message it
        # raises, nor in a reason it gives (whatever a library or server quoted).
        self._secrets: tuple[str, ...] = ()
        #: Called with (client, reason) for every client the listener turns away.
        self.on_rejected: Callable[[str, str], object] | None = None
        #: Called with a connection once its last line has been handed out.
        self.on_gone: Callable[[Replies], object] | None = None
        self._peers: set[Peer] = set()
        self._entered = False
        self._task_group: TaskGroup | None = None
        self._send: MemoryObjectSendStream[Item] | None = None
        self._receive: MemoryObjectReceiveStream[Item] | None = None

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
        (see :mod:`mantle_stream.feeds.sockets`). Always empty for files.
        """
        return dict(self._rejected)

    @property
    def unread(self) -> dict[str, str]:
        """Conversations asked for by id that could not be read, with why (a copy):
        a Rasa server that kept failing, or answered another conversation's
        tracker. Always empty for sources not asked for conversations by id."""
        return {cid: scrub(why, self._secrets) for cid, why in self._unread.items()}

    @property
    def notices(self) -> list[str]:
        """What the user should know about how the source was read, one line each
        (a lock waited for, a database replaced, rows it could not read)."""
        return [scrub(line, self._secrets) for line in self._notices.values()]

    def _scrubbed(self, error: FeedError) -> FeedError:
        text = str(error)
        shown = scrub(text, self._secrets)
        return error if shown == text else FeedError(shown)

    async def __aenter__(self) -> QueuedFeed:
        if self._entered:
            raise RuntimeError(f"feed `{self.name}` can be entered only once")
        self._entered = True
        self._touch()
        try:
            await self._open()
        except FeedError as exc:
            raise self._scrubbed(exc) from None
        self._send, self._receive = anyio.create_memory_object_stream[Item](_QUEUE_SIZE)
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
                    raise self._scrubbed(error) from None
                raise StopAsyncIteration from None
            if isinstance(item, Chunk):
                return item
            await self._retire(item.peer)

    # -- for subclasses ---------------------------------------------------

    async def _open(self) -> None:
        """Open files or bind sockets; raise FeedError if that cannot be done."""

    async def _produce(self, send: MemoryObjectSendStream[Item]) -> None:
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


class Invalid(QueuedFeed):
    """A spec that names no source: entering it raises the reason."""

    def __init__(self, spec: str, message: str) -> None:
        super().__init__(spec, live=False, max_line_bytes=1)
        self._message = message

    async def _open(self) -> None:
        raise FeedError(self._message)


async def put(
    send: MemoryObjectSendStream[Item],
    pieces: list[tuple[bytes, int]],
    peer: Peer | None,
    source: str | None = None,
) -> None:
    for data, first in pieces:
        await send.send(Chunk(data, peer, first, source))


async def open_interruptibly(path: str, *, buffering: int = -1) -> BinaryIO:
    """``open(path, "rb", buffering)`` in a worker thread that Ctrl-C (a cancellation) ends.

    Opening a pipe (a FIFO) waits for a writer, for as long as none comes,
    and a thread cannot be interrupted: on cancellation the thread is let go
    of, and handed the writer it waits for (an open for writing that does not
    wait), so that it returns and what it opened is closed.
    """
    try:
        file = await anyio.to_thread.run_sync(_open_binary, path, buffering, abandon_on_cancel=True)
    except anyio.get_cancelled_exc_class():
        with contextlib.suppress(OSError):  # ENXIO: it was not waiting in open()
            if stat.S_ISFIFO(os.stat(path).st_mode):
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        raise
    return file


def _open_binary(path: str, buffering: int) -> BinaryIO:
    return open(path, "rb", buffering=buffering)  # the caller owns it


def reason(exc: OSError) -> str:
    return exc.strerror or str(exc)
