"""The gate's client to its one agent: kept-alive HTTP/1.1 connections, replies
parsed by httptools.

An edge module (asyncio, anyio's timeouts, httptools). :class:`Upstream` is the
only way the gate reaches the agent (:mod:`mantle_stream.gate.proxy` forwards
through it and reads trackers with it). It is lean on purpose: a turn's time to first text
crosses it, and on a small machine each socket write wakes the other side,
so a request's head and body leave in one write, and the reply is read as it
comes, each body chunk handed on as soon as it is read. Its connections are
asyncio protocols (uvicorn serves the gate on asyncio): what the agent
writes goes to the reply's parser as it arrives.

Theory of operation. A request is written as HTTP/1.1 bytes here (its parts
come from a request uvicorn already parsed, or from the gate itself, and are
checked for line breaks); each reply is parsed by a fresh httptools parser
(llhttp, the C parser uvicorn and Node.js use, in a small part of the time
h11, pure Python, took: a turn's first text waits on it). Idle
connections are kept on a stack (the most recently used first) for
``keepalive`` seconds, well under an agent server's own keep-alive timeout (5 s
for Sanic, Rasa's, and uvicorn). Before a kept connection is reused it is
checked for a close from the agent (a readable socket with nothing to say is
one being shut). A request sent on a reused connection that fails before a
byte of reply came back is sent again on a new connection only if its method
is idempotent (RFC 9110 9.2.2): a POST may have reached the agent, and a
webhook message played twice is a turn played twice, so it fails instead (the
gate answers 502, which Rasa's simulator retries on, as it would without the
gate). A connection is kept for the next request only when its reply ended as
HTTP/1.1 allows it to be reused (a length or chunks, no ``Connection: close``)
and nothing came after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import select
import socket
import ssl
from collections.abc import AsyncIterator, Sequence
from typing import Any
from urllib.parse import urlsplit

import anyio
import httptools

__all__ = ["IDEMPOTENT", "Reply", "Upstream", "UpstreamError", "reason"]

#: Methods a request of which may be sent twice (RFC 9110 9.2.2).
IDEMPOTENT = frozenset({b"GET", b"HEAD", b"OPTIONS", b"TRACE", b"PUT", b"DELETE"})
#: Methods whose requests carry a length even when empty (as httpx sends them).
_WITH_BODY = frozenset({b"POST", b"PUT", b"PATCH"})
#: Bytes of a reply read and not yet passed on, above which reading pauses.
_HIGH_WATER = 1 << 20
_Headers = Sequence[tuple[bytes, bytes]]


class UpstreamError(Exception):
    """The agent could not be reached, or its reply was cut off or malformed."""


class _Stale(Exception):
    """A reused connection failed before a byte of reply: the agent had closed it."""


class _Parsed:
    """One reply as httptools reports it (its callbacks), read by :class:`Reply`."""

    __slots__ = (
        "bodiless",
        "buffered",
        "chunks",
        "done",
        "extra",
        "head_done",
        "headers",
        "keep",
        "parser",
        "status",
        "to_close",
    )

    def __init__(self, *, head_only: bool) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.bodiless = head_only  # a HEAD's reply: its head is all of it
        self.headers: list[tuple[bytes, bytes]] = []
        self.chunks: list[bytes] = []
        self.buffered = 0  # bytes in chunks
        self.status = 0
        self.head_done = False
        self.done = False
        self.keep = False  # the connection may carry the next request
        self.to_close = False  # the body is what comes until the agent closes
        self.extra = False  # bytes after the reply's end that no request asked for

    def feed(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            raise UpstreamError(
                "the agent switched protocols, which the gate does not pass on"
            ) from None
        except httptools.HttpParserError as exc:
            if not self.done:
                raise UpstreamError(f"a malformed reply: {exc}") from None
            self.extra = True  # (bytes after the end: the connection is not reused)

    # httptools' callbacks

    def on_message_begin(self) -> None:
        if self.done:
            self.extra = True

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self.head_done:
            self.headers.append((name, value))  # as the agent sent them, case and all

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if 100 <= status < 200 and status != 101:  # 100 Continue and the like: skipped
            self.headers = []
            return
        self.status = status
        self.head_done = True
        self.keep = self.parser.should_keep_alive()
        framed = any(
            name.lower() in (b"content-length", b"transfer-encoding") for name, _ in self.headers
        )
        self.to_close = not framed and status not in (204, 304)
        if self.bodiless:
            self.done = True

    def on_body(self, body: bytes) -> None:
        if self.done:
            self.extra = True  # a body after a HEAD's reply: not for this request
        else:
            self.chunks.append(body)
            self.buffered += len(body)

    def on_message_complete(self) -> None:
        if self.head_done:
            self.done = True


class _Connection(asyncio.Protocol):
    """One connection to the agent, as an asyncio protocol: what is read goes to the
    reply's parser as it arrives (anyio's streams, a layer above, took a task switch
    and two changes of the loop's watch on the socket per read: about 180 µs more a
    round trip on loopback here). uvicorn runs the gate on asyncio, so this is no loss."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.socket: Any = None
        self.reply = _Parsed(head_only=False)
        self.idle_since = 0.0
        self.reused = False  # kept from an earlier request, for this one
        self.answered = False  # a byte of this request's reply came back
        self.closed = False  # the agent ended its side, or the connection was lost
        self.failure: UpstreamError | None = None  # the reply could not be parsed
        self._waiter: asyncio.Future[None] | None = None
        self._writable: asyncio.Future[None] | None = None  # set while writing is paused
        self._reading_paused = False

    # asyncio's callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.socket = transport.get_extra_info("socket")
        # A request's head and body leave at once (Nagle's algorithm would hold a
        # small write back until the last one is acknowledged).
        self.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        self.answered = True
        try:
            self.reply.feed(data)
        except UpstreamError as exc:
            self.failure = exc
        if self.reply.buffered > _HIGH_WATER and not self._reading_paused:
            self._reading_paused = True  # the reply is read faster than it is passed on
            self.transport.pause_reading()  # type: ignore[union-attr]
        self._wake()

    def eof_received(self) -> None:
        self.closed = True
        self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._wake()
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)

    def pause_writing(self) -> None:
        self._writable = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._writable is not None and not self._writable.done():
            self._writable.set_result(None)
        self._writable = None

    # the client's side

    async def write(self, data: bytes) -> None:
        if self.closed:
            raise UpstreamError("the agent closed the connection")
        self.transport.write(data)  # type: ignore[union-attr]
        if self._writable is not None:  # the agent reads slower than it is written to
            await self._writable

    async def wait(self) -> None:
        """Until more of the reply was read, or the connection ended."""
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    def settle(self) -> None:
        """Raise if the reply cannot go on: it was malformed, or the agent closed the
        connection before its end (the end of a reply read to the close is its end)."""
        if self.failure is not None:
            raise self.failure
        parsed = self.reply
        if not self.closed or parsed.done:
            return
        if not self.answered:
            raise UpstreamError("the agent closed the connection without a reply")
        if parsed.head_done and parsed.to_close:
            parsed.done, parsed.keep = True, False
            return
        raise UpstreamError("the agent closed the connection in the middle of its reply")

    def take(self) -> list[bytes]:
        """The body read so far and not yet passed on."""
        parsed = self.reply
        pieces, parsed.chunks, parsed.buffered = parsed.chunks, [], 0
        if self._reading_paused:
            self._reading_paused = False
            self.transport.resume_reading()  # type: ignore[union-attr]
        return pieces

    def closed_by_peer(self) -> bool:
        """Whether the agent closed this idle connection (or wrote to it unasked)."""
        if self.closed or self.reply.extra:
            return True
        poll = select.poll()  # (a close that arrived but was not read yet)
        poll.register(self.socket.fileno(), select.POLLIN)
        return bool(poll.poll(0))

    def close(self) -> None:
        if self.transport is not None:
            self.transport.abort()
        self.closed = True

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


class Reply:
    """A reply being read: its status and headers, then :meth:`chunks`."""

    def __init__(self, upstream: Upstream, connection: _Connection) -> None:
        self._upstream = upstream
        self._connection: _Connection | None = connection
        self.status: int = connection.reply.status
        self.headers: list[tuple[bytes, bytes]] = connection.reply.headers

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body, each piece as soon as it is read; the connection is kept for the
        next request once the reply ended cleanly."""
        connection = self._connection
        assert connection is not None
        parsed = connection.reply
        while True:
            if parsed.chunks:
                for piece in connection.take():
                    yield piece
            if parsed.done:
                self._connection = None
                self._upstream._release(connection)
                return
            connection.settle()
            if not (parsed.chunks or parsed.done):
                await self._upstream._receive(connection)

    async def read(self) -> bytes:
        """The whole body."""
        return b"".join([chunk async for chunk in self.chunks()])

    async def aclose(self) -> None:
        """Done with the reply: a connection whose reply was not read to its end is closed."""
        if self._connection is not None:
            connection, self._connection = self._connection, None
            connection.close()


class Upstream:
    """Kept-alive connections to one agent (``http://`` or ``https://`` base URL)."""

    def __init__(
        self,
        base: str,
        *,
        connect_timeout: float = 10.0,
        read_timeout: float = 300.0,
        keepalive: float = 2.0,
        max_idle: int = 200,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        """``ssl_context``: for an ``https://`` agent (default: the system's CAs)."""
        parts = urlsplit(base)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"an upstream is an http:// or https:// URL, not `{base}`")
        self.tls = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.tls else 80)
        self.netloc = parts.netloc.rpartition("@")[2].encode("ascii")  # the Host header
        self.prefix = parts.path.rstrip("/").encode("ascii")  # before every target
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.keepalive = keepalive
        self.max_idle = max_idle
        self._idle: list[_Connection] = []
        self._ssl = ssl_context

    @contextlib.asynccontextmanager
    async def request(
        self, method: bytes, target: bytes, headers: _Headers, body: bytes = b""
    ) -> AsyncIterator[Reply]:
        """Send a request (``target``: path and query, after the base URL's path) and
        give its reply once its head came; ``headers`` go as given (``Host`` among them),
        with a ``Content-Length`` added when they have none."""
        sized = any(k.lower() == b"content-length" for k, _ in headers)
        if (body or method in _WITH_BODY) and not sized:
            headers = [*headers, (b"content-length", str(len(body)).encode())]
        data = _request_bytes(method, self.prefix + target, headers) + body
        head_only = method == b"HEAD"
        try:
            try:
                connection = await self._exchange(data, head_only, fresh=False)
            except _Stale as exc:
                if method not in IDEMPOTENT:
                    raise UpstreamError(str(exc)) from None
                connection = await self._exchange(data, head_only, fresh=True)
        except UpstreamError:
            raise
        except TimeoutError:
            raise UpstreamError(f"no reply within {self.read_timeout:g} s") from None
        except OSError as exc:
            raise UpstreamError(reason(exc)) from None
        reply = Reply(self, connection)
        try:
            yield reply
        finally:
            await reply.aclose()

    async def get(self, target: bytes, headers: _Headers = ()) -> tuple[int, bytes]:
        """A GET's status and whole body."""
        async with self.request(b"GET", target, [(b"host", self.netloc), *headers]) as reply:
            return reply.status, await reply.read()

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    # ------------------------------------------------------------------ one exchange

    async def _exchange(self, data: bytes, head_only: bool, *, fresh: bool) -> _Connection:
        """Send a request on a kept connection (or a new one) and read its reply's head."""
        connection = None if fresh else self._checkout()
        if connection is None:
            connection = await self._connect()
        connection.reply = parsed = _Parsed(head_only=head_only)
        try:
            # One deadline for the write and the head (a cancel scope each costs, on a
            # turn's path): each later read of the body has one of its own.
            with anyio.fail_after(self.read_timeout):
                await connection.write(data)  # head and body in one write
                while not parsed.head_done:
                    connection.settle()
                    await connection.wait()
            if connection.failure is not None:  # (a head that switches protocols)
                raise connection.failure
            return connection
        except BaseException as exc:
            connection.close()
            if connection.reused and _no_reply_yet(connection, exc):
                raise _Stale(f"a kept connection was closed by the agent: {reason(exc)}") from None
            raise

    async def _receive(self, connection: _Connection) -> None:
        """Until more of the reply was read, within the timeout."""
        try:
            with anyio.fail_after(self.read_timeout):
                await connection.wait()
        except TimeoutError:
            raise UpstreamError(f"nothing read for {self.read_timeout:g} s") from None

    # ------------------------------------------------------------------ the pool

    def _checkout(self) -> _Connection | None:
        now = anyio.current_time()
        while self._idle:
            connection = self._idle.pop()
            if now - connection.idle_since < self.keepalive and not connection.closed_by_peer():
                connection.reused = True
                return connection
            connection.close()
        return None

    def _release(self, connection: _Connection) -> None:
        parsed = connection.reply
        if parsed.keep and not parsed.extra and not connection.closed:
            connection.idle_since = anyio.current_time()
            connection.answered = False
            self._idle.append(connection)
            if len(self._idle) > self.max_idle:
                self._idle.pop(0).close()
        else:  # the agent closes it (Connection: close, or a reply read to the end)
            connection.close()

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            with anyio.fail_after(self.connect_timeout):
                _, connection = await loop.create_connection(
                    _Connection,
                    self.host,
                    self.port,
                    ssl=self._context() if self.tls else None,
                    server_hostname=self.host if self.tls else None,
                )
        except TimeoutError:
            raise UpstreamError(f"no connection within {self.connect_timeout:g} s") from None
        except OSError as exc:  # (each address the name has was tried: one line for all)
            raise UpstreamError(f"no connection: {reason(exc)}") from None
        return connection

    def _context(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = ssl.create_default_context()
        return self._ssl


def _request_bytes(method: bytes, target: bytes, headers: _Headers) -> bytes:
    """A request's head as HTTP/1.1 puts it on the wire; a part with a line break (or a
    NUL) in it would split the request, so it is refused."""
    parts = [method, b" ", target, b" HTTP/1.1\r\n"]
    for name, value in headers:
        parts += (name, b": ", value, b"\r\n")
    parts.append(b"\r\n")
    head = b"".join(parts)
    lines = len(headers) + 2
    if head.count(b"\n") != lines or head.count(b"\r") != lines or b"\0" in head:
        raise UpstreamError("a request with a line break or a NUL in its target or a header")
    return head


def _no_reply_yet(connection: _Connection, exc: BaseException) -> bool:
    """Whether a failure came from the connection before any byte of the reply."""
    if isinstance(exc, TimeoutError) or not isinstance(exc, (OSError, UpstreamError)):
        return False  # a timeout or a cancellation: not a connection the agent closed
    return not connection.answered


def reason(exc: BaseException) -> str:
    """One line saying why a request failed (an :class:`UpstreamError` says it already)."""
    if isinstance(exc, UpstreamError):
        return str(exc)
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
