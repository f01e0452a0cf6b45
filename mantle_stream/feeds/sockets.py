"""Socket feeds: the ``tcp://`` and ``unix:`` listeners, and whom they let in.

An edge module (docs/architecture.md), split from :mod:`mantle_stream.feeds.base`, which
defines the :class:`~mantle_stream.feeds.base.QueuedFeed` machinery used here
and stays the one entry point: ``open_feed`` hands ``tcp://`` and ``unix:``
specs to :func:`open_socket_feed`. Everything in this module is about a
listener exposed to clients that may be buggy, slow or hostile.

Theory of operation
-------------------
One accept loop per listening socket, one task per connection. A connection
is *accepted*, maybe *authenticating*, then *admitted* (its lines reach the
consumer), and finally *gone*; or it is *refused* on the way. Each row is
one transition; a refusal writes one line ``{"type":"error","error":REASON}``
and closes the connection, and every refusal or forced close adds one to
``Feed.rejected[REASON]``.

=============== ================================= ===================================
state           event                             what happens
=============== ================================= ===================================
accepted        ``max_connections`` sockets open  refused ``too many connections``,
                                                  closed at once by the accept loop
accepted        no token configured               admitted
accepted        a token configured                authenticating
authenticating  first line equals the token       admitted; bytes after it are lines
authenticating  another first line, end of        refused ``unauthorized``
                stream, or a first line longer
                than any token could be
authenticating  no full line in ``auth_timeout``  refused ``auth timeout``
admitted        bytes                             complete lines go to the consumer
admitted        end of stream or reset            gone; a partial last line is lost
admitted        nothing for ``idle_timeout``      line ``idle timeout``, socket
                                                  closed, gone
admitted        a reply blocked ``send_timeout``  counted ``send timeout``, socket
                (the client stopped reading)      closed, gone
=============== ================================= ===================================

Nothing a client sends before it is admitted reaches the consumer. Only
admitted clients count in ``Feed.connections`` and move
``Feed.last_activity``, so refused connections, however many, cannot keep a
live run from ending. ``max_connections`` counts every open socket, also
those still authenticating and admitted ones whose last lines are still
queued, because each holds a file descriptor and buffers.

A refusal's error line is written within ``_SAY_GRACE`` seconds or not at
all, so a client that does not read cannot hold a task. After an
authentication refusal the listener half-closes and reads what the client
still sends (for ``_SAY_GRACE`` at most) before closing: closing a socket
with unread input makes the kernel send a reset, which can destroy the error
line before the client reads it. A client refused for ``too many
connections`` is closed at once instead (the accept loop must not wait on
it), so one that already sent data may see a reset rather than the line.

Who may connect
---------------
* ``tcp://HOST:PORT`` binds exactly HOST; ``tcp://:PORT`` means
  ``127.0.0.1``. A HOST that is not loopback (``127.0.0.0/8``, ``::1``,
  ``localhost``) is refused unless ``allow_remote=True`` (CLI:
  ``--listen-remote``).
* ``unix:PATH`` is guarded by the socket file's permissions (the process
  umask).
* With a ``token``, a client's first line must be exactly the token; a CR
  before the LF is tolerated, as on every other line. It is compared with
  :func:`hmac.compare_digest`, and counts as line 1 of the connection, so
  the first event is line 2 in messages. The CLI takes it from ``--token`` or,
  better (a command line is visible to every local user), from the
  environment variable ``MANTLE_STREAM_TOKEN``. The token crosses the network
  in clear text: off loopback, use it on a trusted network or a tunnel.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hmac
import ipaddress
import os
import stat
from collections.abc import Sequence
from typing import NamedTuple

import anyio
import msgspec
from anyio.abc import SocketAttribute, SocketListener, SocketStream, TaskGroup
from anyio.streams.memory import MemoryObjectSendStream

from mantle_stream.core.errors import FeedError
from mantle_stream.feeds.base import Gone, Invalid, Item, Lines, Peer, QueuedFeed, put, reason
from mantle_stream.feeds.lines import CHUNK_BYTES

__all__ = [
    "AUTH_TIMEOUT",
    "IDLE_TIMEOUT",
    "SEND_TIMEOUT",
    "TOO_MANY_CONNECTIONS",
    "UNAUTHORIZED",
    "Admission",
    "ListenOptions",
    "open_socket_feed",
]

# Reasons: the ``error`` of the line a refused client receives, and the keys
# of ``Feed.rejected``.
TOO_MANY_CONNECTIONS = "too many connections"
UNAUTHORIZED = "unauthorized"
AUTH_TIMEOUT = "auth timeout"
IDLE_TIMEOUT = "idle timeout"
SEND_TIMEOUT = "send timeout"  # counted only: a client that does not read gets no line

# Pause before accepting again after the process ran out of file descriptors.
_ACCEPT_RETRY = 0.1
# How long a refused client is given to take its error line.
_SAY_GRACE = 1.0
# A first line longer than this (or than the token) cannot be the token: no
# need to wait for its end, and the refusal does not depend on the token's length.
_TOKEN_LINE_MAX = 1024


class Admission(NamedTuple):
    """Who a socket feed lets in and for how long (see the module docstring)."""

    token: bytes | None
    max_connections: int
    auth_timeout: float
    idle_timeout: float | None
    send_timeout: float | None


def _error_line(reason: str) -> bytes:
    return msgspec.json.encode({"type": "error", "error": reason}) + b"\n"


class _SocketFeed(QueuedFeed):
    """Listens and serves up to ``max_connections`` clients at once; never ends."""

    def __init__(self, spec: str, *, max_line_bytes: int, admission: Admission) -> None:
        # A conversation belongs to one connection at a time (the evaluator refuses
        # another's events: `owner`), and a connection delivers in the order sent.
        super().__init__(spec, live=True, max_line_bytes=max_line_bytes, ordered=True)
        self._listeners: Sequence[SocketListener] = ()
        self._admission = admission
        # ``_peers`` (the base class's) holds every open connection, admitted
        # or not, so __aexit__ closes them all; ``connections`` counts admitted ones.

    def _peer_name(self, stream: SocketStream) -> str:
        raise NotImplementedError

    async def _produce(self, send: MemoryObjectSendStream[Item]) -> None:
        # ``send`` is shared by every connection and closed by __aexit__:
        # a socket feed never ends by itself, so no end-of-stream counting.
        async with anyio.create_task_group() as task_group:
            for listener in self._listeners:
                task_group.start_soon(self._accept, listener, send, task_group)

    async def _accept(
        self, listener: SocketListener, send: MemoryObjectSendStream[Item], task_group: TaskGroup
    ) -> None:
        rules = self._admission
        while True:
            try:
                stream = await listener.accept()
            except OSError:
                # Out of file descriptors or an aborted handshake: the listener
                # itself is fine, so wait a little and accept again.
                await anyio.sleep(_ACCEPT_RETRY)
                continue
            name = self._peer_name(stream)
            peer = Peer(
                name,
                stream,
                send_timeout=rules.send_timeout,
                on_stall=functools.partial(self._count, SEND_TIMEOUT, name),
            )
            if len(self._peers) >= rules.max_connections:
                # Here rather than in a task: a flood of connections then costs
                # one short write each and never piles up tasks or sockets.
                await self._refuse(peer, stream, TOO_MANY_CONNECTIONS, drain=False)
                continue
            # Registered before its task starts, so __aexit__ closes it whatever happens.
            self._peers.add(peer)
            if rules.token is None:
                self._admit()
            task_group.start_soon(self._serve, peer, stream, send)
            task_group.start_soon(peer.pump)  # its replies, written by a task of its own

    def _admit(self) -> None:
        self._connections += 1
        self._touch()

    async def _serve(
        self, peer: Peer, stream: SocketStream, send: MemoryObjectSendStream[Item]
    ) -> None:
        rules = self._admission
        lines = Lines(self._max_line_bytes)
        if rules.token is not None:
            after = await self._authenticate(stream, rules.token, rules.auth_timeout)
            if isinstance(after, str):
                await self._refuse(peer, stream, after, drain=True)
                return
            self._admit()
            lines = Lines(self._max_line_bytes, first_line=2)  # the token was line 1
            await put(send, lines.feed(after), peer)
        try:
            while True:
                with anyio.move_on_after(rules.idle_timeout) as idle:
                    data = await stream.receive(CHUNK_BYTES)
                if idle.cancelled_caught:
                    await self._idle_out(peer)
                    break
                self._touch()
                _hold_back(stream)
                await put(send, lines.feed(data), peer)
        except anyio.EndOfStream:
            pass  # a partial line left in ``lines`` is dropped (see mantle_stream.feeds.base)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            peer._closed = True  # reset: replies cannot arrive either
        self._touch()
        await send.send(Gone(peer))

    async def _authenticate(
        self, stream: SocketStream, token: bytes, timeout: float
    ) -> bytes | str:
        """The bytes that followed the token line, or the reason to refuse."""
        received = b""
        longest = max(len(token), _TOKEN_LINE_MAX) + 1  # + 1 for a CR
        with anyio.move_on_after(timeout):
            try:
                while (newline := received.find(b"\n")) < 0:
                    if len(received) > longest:
                        return UNAUTHORIZED
                    received += await stream.receive(CHUNK_BYTES)
            except (
                anyio.EndOfStream,
                anyio.BrokenResourceError,
                anyio.ClosedResourceError,
                OSError,
            ):
                return UNAUTHORIZED  # left without naming the token
            line = received[:newline].removesuffix(b"\r")
            if not hmac.compare_digest(line, token):
                return UNAUTHORIZED
            return received[newline + 1 :]
        return AUTH_TIMEOUT

    async def _refuse(self, peer: Peer, stream: SocketStream, reason: str, *, drain: bool) -> None:
        """Count, write the error line, close. Never seen by the consumer."""
        self._count(reason, peer.name)
        try:
            with anyio.move_on_after(_SAY_GRACE):
                await stream.send(_error_line(reason))
                if drain:
                    await stream.send_eof()
                    while True:  # until the client closes (EndOfStream) or time is up
                        await stream.receive(CHUNK_BYTES)
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
        finally:
            self._peers.discard(peer)
            await peer._close()

    async def _idle_out(self, peer: Peer) -> None:
        """Tell a client that sent nothing for ``idle_timeout`` why, then hang up."""
        self._count(IDLE_TIMEOUT, peer.name)
        with anyio.move_on_after(_SAY_GRACE):
            await peer.send(_error_line(IDLE_TIMEOUT))  # serialized with replies
        # Closed now, so the line above is the last the client reads; the
        # consumer retires the peer when it reaches the gone marker.
        await peer._close()

    async def _close(self) -> None:
        for listener in self._listeners:
            await listener.aclose()
        self._listeners = ()


def _parse_tcp(spec: str) -> tuple[str, int] | str:
    """``(host, port)`` from ``tcp://HOST:PORT``, or why it is not one."""
    rest = spec[len("tcp://") :]
    usage = "expected `tcp://HOST:PORT`, e.g. `tcp://127.0.0.1:7777`"
    if rest.startswith("["):
        host, bracket, tail = rest[1:].partition("]")
        if not bracket or not tail.startswith(":"):
            return usage
        port_text = tail[1:]
    else:
        host, colon, port_text = rest.rpartition(":")
        if not colon:
            return usage
        if ":" in host:
            return usage + "; an IPv6 host goes in brackets: `tcp://[::1]:7777`"
    if not (port_text.isascii() and port_text.isdigit()) or int(port_text) > 65535:
        return f"port `{port_text}` is not a number from 0 to 65535"
    return host or "127.0.0.1", int(port_text)


def _is_loopback(host: str) -> bool:
    """True for ``localhost`` and 127.0.0.0/8 or ::1 (also IPv4-mapped); names never."""
    if host.lower() == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False  # any other name could resolve anywhere, now or later
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


class _TcpFeed(_SocketFeed):
    def __init__(
        self, spec: str, host: str, port: int, *, max_line_bytes: int, admission: Admission
    ) -> None:
        super().__init__(spec, max_line_bytes=max_line_bytes, admission=admission)
        self._host = host
        self._port = port

    async def _open(self) -> None:
        try:
            listener = await anyio.create_tcp_listener(local_host=self._host, local_port=self._port)
        except OSError as exc:
            raise FeedError(f"cannot listen on `{self.name}`: {reason(exc)}") from None
        self._listeners = [item for item in listener.listeners if isinstance(item, SocketListener)]
        port = self._listeners[0].extra(SocketAttribute.local_port)
        host = f"[{self._host}]" if ":" in self._host else self._host
        self.address = self.name = f"tcp://{host}:{port}"

    def _peer_name(self, stream: SocketStream) -> str:
        address = stream.extra(SocketAttribute.remote_address)
        if isinstance(address, tuple):
            host, port = address[0], address[1]
            return f"tcp [{host}]:{port}" if ":" in host else f"tcp {host}:{port}"
        return f"tcp {address}"


def _hold_back(stream: SocketStream) -> None:
    """Stop the kernel-to-memory copy while what was read waits to be judged.

    anyio's asyncio stream pauses reading only after a ``receive`` that had
    to wait; one whose first ``receive`` finds data waiting, from a client
    that sends faster than events are judged, is never paused, and its
    read queue grows without bound (491 MiB at 300,000 conversations,
    measured). Pausing while the queue still holds data keeps the backlog in
    the kernel's socket buffer, so the sender slows down; the next
    ``receive`` that finds the queue empty resumes reading. Elsewhere (trio,
    or a stream without these attributes) this does nothing.
    """
    protocol = getattr(stream, "_protocol", None)
    transport = getattr(stream, "_transport", None)
    if protocol is not None and transport is not None and getattr(protocol, "read_queue", None):
        with contextlib.suppress(AttributeError, RuntimeError):
            transport.pause_reading()


async def _someone_listens(path: str) -> bool:
    try:
        with anyio.fail_after(1):
            stream = await anyio.connect_unix(path)
    except TimeoutError:
        return True  # a listener too busy to answer is still a listener
    except OSError:
        return False
    await stream.aclose()
    return True


class _UnixFeed(_SocketFeed):
    def __init__(self, spec: str, path: str, *, max_line_bytes: int, admission: Admission) -> None:
        super().__init__(spec, max_line_bytes=max_line_bytes, admission=admission)
        self._path = path
        self._clients = 0
        self._socket_id: tuple[int, int] | None = None

    async def _open(self) -> None:
        path = self._path
        where = f"cannot listen on `unix:{path}`"
        try:
            found: os.stat_result | None = os.stat(path)
        except FileNotFoundError:
            found = None
        except OSError as exc:
            raise FeedError(f"{where}: {reason(exc)}") from None
        if found is not None:
            if not stat.S_ISSOCK(found.st_mode):
                raise FeedError(
                    f"{where}: the path exists and is not a socket; refusing to replace it"
                )
            if await _someone_listens(path):
                raise FeedError(f"{where}: another process is listening on it")
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)  # stale: left behind by a listener that is gone
        try:
            listener = await anyio.create_unix_listener(path)
        except OSError as exc:
            raise FeedError(f"{where}: {reason(exc)}") from None
        self._listeners = [listener]
        made = os.stat(path)
        self._socket_id = (made.st_dev, made.st_ino)
        self.address = f"unix:{path}"

    def _peer_name(self, stream: SocketStream) -> str:
        self._clients += 1
        return f"unix #{self._clients}"

    async def _close(self) -> None:
        await super()._close()
        if self._socket_id is None:
            return
        # Remove the socket file only if it is still ours, not a successor's.
        with contextlib.suppress(OSError):
            found = os.stat(self._path)
            if (found.st_dev, found.st_ino) == self._socket_id:
                os.unlink(self._path)
        self._socket_id = None


@dataclasses.dataclass(frozen=True)
class ListenOptions:
    """How a ``tcp://`` or ``unix:`` listener admits and keeps clients.

    * ``token``: a client's first line must be exactly this (no line breaks);
    * ``allow_remote``: allow a ``tcp://`` HOST that is not loopback;
    * ``max_connections``: open sockets at once (at least 1); more are refused;
    * ``auth_timeout``: seconds a client has to send the token line;
    * ``idle_timeout``: a client that sends nothing for this long is
      disconnected (None: never);
    * ``send_timeout``: a reply that cannot be written for this long (the
      client stopped reading) disconnects it (None: wait for ever).
    """

    token: str | None = None
    allow_remote: bool = False
    max_connections: int = 64
    auth_timeout: float = 10.0
    idle_timeout: float | None = 300.0
    send_timeout: float | None = 10.0


def open_socket_feed(spec: str, options: ListenOptions, *, max_line_bytes: int) -> QueuedFeed:
    """The feed for a ``tcp://`` or ``unix:`` spec (see :func:`mantle_stream.feeds.open_feed`).

    Bad option values raise ValueError (a programming error); a bad or refused
    spec gives a feed that raises FeedError on entering.
    """
    token, max_connections = options.token, options.max_connections
    auth_timeout, idle_timeout = options.auth_timeout, options.idle_timeout
    send_timeout, allow_remote = options.send_timeout, options.allow_remote
    if max_connections < 1:
        raise ValueError(f"max_connections must be at least 1, not {max_connections!r}")
    for name, value in (
        ("auth_timeout", auth_timeout),
        ("idle_timeout", idle_timeout),
        ("send_timeout", send_timeout),
    ):
        if value is not None and value <= 0:
            raise ValueError(f"{name} must be positive, not {value!r}")
    if token is not None and (not token or "\n" in token or "\r" in token):
        raise ValueError("token must be a non-empty string without line breaks")
    admission = Admission(
        # surrogateescape: a token taken from the environment keeps its bytes.
        token=None if token is None else token.encode("utf-8", "surrogateescape"),
        max_connections=max_connections,
        auth_timeout=auth_timeout,
        idle_timeout=idle_timeout,
        send_timeout=send_timeout,
    )
    if spec.startswith("unix:"):
        path = spec[len("unix:") :]
        if not path:
            return Invalid(spec, f"bad event source `{spec}`: expected `unix:PATH`")
        return _UnixFeed(spec, path, max_line_bytes=max_line_bytes, admission=admission)
    parsed = _parse_tcp(spec)
    if isinstance(parsed, str):
        return Invalid(spec, f"bad event source `{spec}`: {parsed}")
    host, port = parsed
    if not allow_remote and not _is_loopback(host):
        return Invalid(
            spec,
            f"cannot listen on `{spec}`: `{host}` is not a loopback address "
            f"(127.0.0.0/8, ::1, localhost), so anyone who can reach this "
            f"machine could send events\n"
            f"hint: to accept remote simulators, pass `--listen-remote` "
            f"(`allow_remote=True` from Python) and set a token with "
            f"`--token` or `MANTLE_STREAM_TOKEN`",
        )
    return _TcpFeed(spec, host, port, max_line_bytes=max_line_bytes, admission=admission)
