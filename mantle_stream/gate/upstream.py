"""The gate's client to its one agent: kept-alive HTTP/1.1 connections on h11.

An edge module (anyio, h11). :class:`Upstream` is the only way the gate
reaches the agent (:mod:`mantle_stream.gate.proxy` forwards through it and
reads trackers with it). It is lean on purpose: a turn's time to first text
crosses it, and on a small machine each socket write wakes the other side,
so a request's head and body leave in one write, and the reply is read as it
comes, each body chunk handed on as soon as it is read.

Theory of operation. h11 (the HTTP/1.1 state machine httpx itself runs on)
turns events into bytes and bytes into events; this module moves the bytes
over anyio sockets. Idle connections are kept on a stack (the most recently
used first) for ``keepalive`` seconds, well under an agent server's own
keep-alive timeout (5 s for Sanic, Rasa's, and uvicorn). Before a kept
connection is reused it is checked for a close from the agent (a readable
socket with nothing to say is one being shut). A request sent on a reused
connection that fails before a byte of reply came back is sent again on a
new connection only if its method is idempotent (RFC 9110 9.2.2): a POST may
have reached the agent, and a webhook message played twice is a turn played
twice, so it fails instead (the gate answers 502, which Rasa's simulator
retries on, as it would without the gate).
"""

from __future__ import annotations

import contextlib
import select
import socket
import ssl
from collections.abc import AsyncIterator, Sequence
from typing import Any
from urllib.parse import urlsplit

import anyio
import anyio.abc
import h11

__all__ = ["IDEMPOTENT", "Reply", "Upstream", "UpstreamError", "reason"]

#: Methods a request of which may be sent twice (RFC 9110 9.2.2).
IDEMPOTENT = frozenset({b"GET", b"HEAD", b"OPTIONS", b"TRACE", b"PUT", b"DELETE"})
#: Methods whose requests carry a length even when empty (as httpx sends them).
_WITH_BODY = frozenset({b"POST", b"PUT", b"PATCH"})
_READ = 65536
_Headers = Sequence[tuple[bytes, bytes]]


class UpstreamError(Exception):
    """The agent could not be reached, or its reply was cut off or malformed."""


class _Stale(Exception):
    """A reused connection failed before a byte of reply: the agent had closed it."""


class _Connection:
    __slots__ = ("answered", "h11", "idle_since", "reused", "stream")

    def __init__(self, stream: anyio.abc.ByteStream) -> None:
        self.stream = stream
        self.h11 = h11.Connection(h11.CLIENT)
        self.idle_since = 0.0
        self.reused = False  # kept from an earlier request, for this one
        self.answered = False  # a byte of this request's reply came back

    def closed_by_peer(self) -> bool:
        """Whether the agent closed this idle connection (or wrote to it unasked)."""
        sock = self.stream.extra(anyio.abc.SocketAttribute.raw_socket, None)
        if sock is None:
            return False
        poll = select.poll()
        poll.register(sock.fileno(), select.POLLIN)
        return bool(poll.poll(0))  # the end of the stream, or bytes no request asked for

    async def close(self) -> None:
        await anyio.aclose_forcefully(self.stream)


class Reply:
    """A reply being read: its status and headers, then :meth:`chunks`."""

    def __init__(self, upstream: Upstream, connection: _Connection, head: h11.Response) -> None:
        self._upstream = upstream
        self._connection: _Connection | None = connection
        self.status: int = head.status_code
        # As the agent sent them (h11 keeps the names' case in raw_items).
        self.headers: list[tuple[bytes, bytes]] = list(head.headers.raw_items())

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body, each piece as soon as it is read; the connection is kept for the
        next request once the reply ended cleanly."""
        connection = self._connection
        assert connection is not None
        while True:
            event = await self._upstream._next_event(connection)
            if isinstance(event, h11.Data):
                yield bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                self._connection = None
                await self._upstream._release(connection)
                return
            else:
                raise UpstreamError(f"unexpected {type(event).__name__} in a reply")

    async def read(self) -> bytes:
        """The whole body."""
        return b"".join([chunk async for chunk in self.chunks()])

    async def aclose(self) -> None:
        """Done with the reply: a connection whose reply was not read to its end is closed."""
        if self._connection is not None:
            connection, self._connection = self._connection, None
            await connection.close()


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
        head = h11.Request(method=method, target=self.prefix + target, headers=list(headers))
        try:
            try:
                connection, response = await self._exchange(head, body, fresh=False)
            except _Stale as exc:
                if method not in IDEMPOTENT:
                    raise UpstreamError(str(exc)) from None
                connection, response = await self._exchange(head, body, fresh=True)
        except UpstreamError:
            raise
        except (OSError, anyio.BrokenResourceError, anyio.EndOfStream, TimeoutError) as exc:
            raise UpstreamError(reason(exc)) from None
        reply = Reply(self, connection, response)
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
            await connection.close()

    # ------------------------------------------------------------------ one exchange

    async def _exchange(
        self, head: h11.Request, body: bytes, *, fresh: bool
    ) -> tuple[_Connection, h11.Response]:
        """Send a request on a kept connection (or a new one) and read its reply's head."""
        connection = None if fresh else await self._checkout()
        if connection is None:
            connection = await self._connect()
        try:
            data = connection.h11.send(head) or b""
            if body:
                data += connection.h11.send(h11.Data(data=body)) or b""
            data += connection.h11.send(h11.EndOfMessage()) or b""
            with anyio.fail_after(self.read_timeout):
                await connection.stream.send(data)  # head and body in one write
            while True:
                event = await self._next_event(connection)
                if isinstance(event, h11.Response):
                    return connection, event
                if not isinstance(event, h11.InformationalResponse):  # 100 Continue: skipped
                    raise UpstreamError(f"unexpected {type(event).__name__} for a reply's head")
        except BaseException as exc:
            await connection.close()
            if connection.reused and _no_reply_yet(connection, exc):
                raise _Stale(f"a kept connection was closed by the agent: {reason(exc)}") from None
            raise

    async def _next_event(self, connection: _Connection) -> Any:
        """The next h11 event of a reply, reading from the socket as needed."""
        while True:
            try:
                event = connection.h11.next_event()
            except h11.RemoteProtocolError as exc:
                raise UpstreamError(f"a malformed reply: {exc}") from None
            if event is not h11.NEED_DATA:
                return event
            try:
                with anyio.fail_after(self.read_timeout):
                    data = await connection.stream.receive(_READ)
            except anyio.EndOfStream:
                data = b""  # h11 decides: the end of a reply read to the close, or cut off
            except (OSError, anyio.BrokenResourceError, TimeoutError) as exc:
                raise UpstreamError(reason(exc)) from None
            if not data and not connection.answered:
                raise UpstreamError("the agent closed the connection without a reply")
            connection.answered = True
            connection.h11.receive_data(data)

    # ------------------------------------------------------------------ the pool

    async def _checkout(self) -> _Connection | None:
        now = anyio.current_time()
        while self._idle:
            connection = self._idle.pop()
            if now - connection.idle_since < self.keepalive and not connection.closed_by_peer():
                connection.reused = True
                return connection
            await connection.close()
        return None

    async def _release(self, connection: _Connection) -> None:
        state = connection.h11
        if state.our_state is h11.DONE and state.their_state is h11.DONE:
            state.start_next_cycle()
            connection.idle_since = anyio.current_time()
            connection.answered = False
            self._idle.append(connection)
            if len(self._idle) > self.max_idle:
                await self._idle.pop(0).close()
        else:  # the agent closes it (Connection: close, or a reply read to the end)
            await connection.close()

    async def _connect(self) -> _Connection:
        try:
            with anyio.fail_after(self.connect_timeout):
                stream: anyio.abc.ByteStream = await anyio.connect_tcp(self.host, self.port)
                # A reply's head and its first line go out at once (Nagle's algorithm
                # would hold a small write back until the last one is acknowledged).
                stream.extra(anyio.abc.SocketAttribute.raw_socket).setsockopt(
                    socket.IPPROTO_TCP, socket.TCP_NODELAY, 1
                )
                if self.tls:
                    from anyio.streams.tls import TLSStream

                    stream = await TLSStream.wrap(
                        stream, hostname=self.host, ssl_context=self._context()
                    )
        except TimeoutError:
            raise UpstreamError(f"no connection within {self.connect_timeout:g} s") from None
        except (OSError, anyio.BrokenResourceError) as exc:
            # anyio tries each address the name has: the last one's refusal says why.
            why: BaseException = exc.__cause__ or exc
            if isinstance(why, BaseExceptionGroup):
                why = why.exceptions[-1]
            raise UpstreamError(f"no connection: {reason(why)}") from None
        return _Connection(stream)

    def _context(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = ssl.create_default_context()
        return self._ssl


def _no_reply_yet(connection: _Connection, exc: BaseException) -> bool:
    """Whether a failure came from the connection before any byte of the reply."""
    if isinstance(exc, TimeoutError) or not isinstance(
        exc, (OSError, anyio.BrokenResourceError, anyio.EndOfStream, UpstreamError)
    ):
        return False  # a timeout or a cancellation: not a connection the agent closed
    return not connection.answered


def reason(exc: BaseException) -> str:
    """One line saying why a request failed (an :class:`UpstreamError` says it already)."""
    if isinstance(exc, UpstreamError):
        return str(exc)
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
