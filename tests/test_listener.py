"""The socket listener under abuse: who gets in, for how long, and what the rest see.

Real loopback TCP and Unix sockets throughout; every client is a separate
connection opened with anyio, nothing is mocked. Timeouts are shortened to
tenths of a second so the whole file runs in a few seconds.
"""

from __future__ import annotations

import re
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from anyio.abc import ByteStream, SocketAttribute, SocketStream

from mantle_stream import FeedError
from mantle_stream.feeds import Feed, ListenOptions, open_feed
from mantle_stream.feeds.base import Peer
from mantle_stream.feeds.sockets import _is_loopback

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(10)]

TOKEN = "s3cret-token"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# -- helpers ----------------------------------------------------------------


class Consumer:
    """Iterates a feed, records every line under its peer and acknowledges it."""

    def __init__(self, feed: Feed, reply: Callable[[bytes], bytes] | None = None) -> None:
        self.feed = feed
        self.lines: list[tuple[str, int, bytes]] = []  # (peer name, line number, line)
        self._reply = reply or (lambda line: b"ack " + line.rstrip(b"\r\n"))

    async def run(self) -> None:
        async for chunk in self.feed:
            assert isinstance(chunk.peer, Peer)  # a socket's peer: it can send(), not only post()
            for offset, line in enumerate(chunk.data.splitlines(keepends=True)):
                self.lines.append((chunk.peer.name, chunk.first_line + offset, line))
                await chunk.peer.send(self._reply(line))

    def of(self, name: str) -> list[tuple[int, bytes]]:
        return [(number, line) for peer, number, line in self.lines if peer == name]


@asynccontextmanager
async def serving(
    spec: str = "tcp://127.0.0.1:0", reply: Callable[[bytes], bytes] | None = None, **options: Any
) -> AsyncIterator[tuple[Feed, Consumer]]:
    async with (
        open_feed(spec, listen=ListenOptions(**options)) as feed,
        anyio.create_task_group() as tg,
    ):
        consumer = Consumer(feed, reply)
        tg.start_soon(consumer.run)
        yield feed, consumer
        tg.cancel_scope.cancel()


async def connect(feed: Feed) -> SocketStream:
    assert feed.address is not None
    if feed.address.startswith("unix:"):
        return await anyio.connect_unix(feed.address.removeprefix("unix:"))
    host, port = feed.address.removeprefix("tcp://").rsplit(":", 1)
    return await anyio.connect_tcp("127.0.0.1" if host == "0.0.0.0" else host, int(port))


def name_of(client: SocketStream) -> str:
    """The name the feed gives the peer at the other end of ``client`` (TCP)."""
    return f"tcp 127.0.0.1:{client.extra(SocketAttribute.local_port)}"


async def read_line(stream: ByteStream, buffer: bytearray) -> bytes:
    with anyio.fail_after(5):
        while b"\n" not in buffer:
            buffer += await stream.receive()
    line, _, rest = bytes(buffer).partition(b"\n")
    buffer[:] = rest
    return line + b"\n"


async def read_lines(stream: ByteStream, count: int) -> list[bytes]:
    buffer = bytearray()
    return [await read_line(stream, buffer) for _ in range(count)]


async def refused_with(stream: ByteStream) -> str:
    """The reason in the one error line the listener sent before hanging up."""
    buffer = bytearray()
    line = await read_line(stream, buffer)
    assert not buffer
    await assert_hung_up(stream)
    message = msgspec.json.decode(line)
    assert message.keys() == {"type", "error"} and message["type"] == "error"
    assert isinstance(message["error"], str)
    return message["error"]


async def assert_hung_up(stream: ByteStream) -> None:
    with anyio.fail_after(5), pytest.raises((anyio.EndOfStream, anyio.BrokenResourceError)):
        while True:
            assert await stream.receive() == b"", "more bytes after the last line"


async def wait_until(condition: Callable[[], bool]) -> None:
    with anyio.fail_after(5):
        while not condition():
            await anyio.sleep(0.005)


# -- token ------------------------------------------------------------------


@pytest.mark.parametrize(
    "writes",
    [
        [b's3cret-token\n{"n":1}\n{"n":2}\n'],
        [b"s3cret-token\r\n", b'{"n":1}\n{"n":2}\n'],
        [b"s3c", b"ret-tok", b'en\n{"n":1}\n{"n', b'":2}\n'],
    ],
    ids=["token-and-events-at-once", "token-with-crlf-then-events", "token-in-pieces"],
)
async def test_a_client_that_sends_the_token_first_is_admitted_from_line_2(
    writes: list[bytes],
) -> None:
    async with serving(token=TOKEN) as (feed, consumer), await connect(feed) as client:
        for data in writes:
            await client.send(data)
            await anyio.sleep(0.01)
        assert await read_lines(client, 2) == [b'ack {"n":1}\n', b'ack {"n":2}\n']
        assert feed.connections == 1
        assert consumer.of(name_of(client)) == [(2, b'{"n":1}\n'), (3, b'{"n":2}\n')]
        assert feed.rejected == {}


async def test_the_token_guards_a_unix_socket_too(tmp_path: Path) -> None:
    async with serving(f"unix:{tmp_path}/feed.sock", token=TOKEN) as (feed, consumer):
        async with await connect(feed) as wrong:
            await wrong.send(b'guess\n{"n":0}\n')
            assert await refused_with(wrong) == "unauthorized"
        async with await connect(feed) as right:
            await right.send(b's3cret-token\n{"n":1}\n')
            assert await read_lines(right, 1) == [b'ack {"n":1}\n']
        assert consumer.lines == [("unix #2", 2, b'{"n":1}\n')]
        assert feed.rejected == {"unauthorized": 1}


@pytest.mark.parametrize(
    "first",
    [
        b'wrong-token\n{"n":0}\n',
        b"s3cret-token-and-more\n",
        b"s3cret-toke\n",
        b" s3cret-token\n",
        b"\n",
        b'{"conversation_id":"c-1","sequence":1}\n',
        b"x" * 5000,  # no newline: longer than any token line, refused without waiting
        b"",  # the client half-closes without sending anything
    ],
    ids=[
        "wrong",
        "longer",
        "shorter",
        "leading-space",
        "blank-line",
        "missing-event-first",
        "overlong-no-newline",
        "end-of-stream",
    ],
)
async def test_a_client_without_the_right_token_is_refused_and_none_of_its_bytes_get_through(
    first: bytes,
) -> None:
    async with serving(token=TOKEN) as (feed, consumer):
        quiet_since = feed.last_activity
        async with await connect(feed) as intruder:
            if first:
                await intruder.send(first)
            else:
                await intruder.send_eof()
            assert await refused_with(intruder) == "unauthorized"
        assert (feed.connections, feed.last_activity) == (0, quiet_since)
        async with await connect(feed) as friend:
            await friend.send(b's3cret-token\n{"n":1}\n')
            assert await read_lines(friend, 1) == [b'ack {"n":1}\n']
            assert consumer.lines == [(name_of(friend), 2, b'{"n":1}\n')]
        assert feed.rejected == {"unauthorized": 1}


async def test_a_refused_client_that_keeps_streaming_gets_no_broken_pipe_and_reads_why() -> None:
    # Closing a socket with unread input sends a reset: the client's next
    # writes fail and, over a real network, the error line in flight can be
    # lost. So the listener half-closes and reads on until the client closes
    # (for a second at most), dropping what it reads.
    events = b"".join(
        b'{"conversation_id":"c-%d","sequence":%d}\n' % (n % 9, n) for n in range(1000)
    )
    async with serving(token=TOKEN) as (feed, consumer), await connect(feed) as intruder:
        await intruder.send(b"guess\n")
        await wait_until(lambda: feed.rejected == {"unauthorized": 1})
        for _ in range(20):
            await anyio.sleep(0.005)
            await intruder.send(events)
        assert await refused_with(intruder) == "unauthorized"
        assert consumer.lines == []


@pytest.mark.parametrize("sent", [b"", b"s3cret-"], ids=["nothing", "part-of-the-token"])
async def test_a_token_that_does_not_arrive_within_auth_timeout_is_refused(sent: bytes) -> None:
    async with (
        serving(token=TOKEN, auth_timeout=0.2) as (feed, consumer),
        await connect(feed) as late,
    ):
        started = anyio.current_time()
        if sent:
            await late.send(sent)
        assert await refused_with(late) == "auth timeout"
        assert 0.2 <= anyio.current_time() - started < 2
        assert (feed.rejected, feed.connections, consumer.lines) == ({"auth timeout": 1}, 0, [])


async def test_a_client_with_a_wrong_token_does_not_disturb_the_admitted_ones() -> None:
    async with serving(token=TOKEN) as (feed, consumer):
        clients = [await connect(feed) for _ in range(3)]
        try:
            for client in clients:
                await client.send(b"s3cret-token\n")
            await wait_until(lambda: feed.connections == 3)
            sent = {i: [b'{"client":%d,"n":%d}\n' % (i, n) for n in range(20)] for i in range(3)}
            async with await connect(feed) as intruder:
                for n in range(20):
                    for i, client in enumerate(clients):
                        await client.send(sent[i][n][:6])
                    if n == 5:
                        await intruder.send(b"guess\n" + sent[0][0])
                    for i, client in enumerate(clients):
                        await client.send(sent[i][n][6:])
                assert await refused_with(intruder) == "unauthorized"
            for i, client in enumerate(clients):
                acks = await read_lines(client, 20)
                assert acks == [b"ack " + line for line in sent[i]]
                assert consumer.of(name_of(client)) == list(enumerate(sent[i], start=2))
            assert len(consumer.lines) == 60
            assert feed.rejected == {"unauthorized": 1}
        finally:
            for client in clients:
                await client.aclose()


# -- connection limit -------------------------------------------------------


async def test_clients_past_max_connections_are_refused_until_a_place_frees_up() -> None:
    async with serving(max_connections=3) as (feed, consumer):
        admitted = [await connect(feed) for _ in range(3)]
        try:
            await wait_until(lambda: feed.connections == 3)
            for _ in range(2):
                async with await connect(feed) as extra:
                    assert await refused_with(extra) == "too many connections"
            assert feed.rejected == {"too many connections": 2}
            for n, client in enumerate(admitted):
                await client.send(b'{"n":%d}\n' % n)
                assert await read_lines(client, 1) == [b'ack {"n":%d}\n' % n]

            await admitted.pop().aclose()
            await wait_until(lambda: feed.connections == 2)
            admitted.append(await connect(feed))
            await admitted[-1].send(b'{"n":9}\n')
            assert await read_lines(admitted[-1], 1) == [b'ack {"n":9}\n']
            assert feed.connections == 3
            assert feed.rejected == {"too many connections": 2}
        finally:
            for client in admitted:
                await client.aclose()
        assert len(consumer.lines) == 4


async def test_connections_still_authenticating_count_toward_the_limit() -> None:
    async with (
        serving(token=TOKEN, max_connections=2) as (feed, _),
        await connect(feed) as one,
        await connect(feed),
    ):
        async with await connect(feed) as third:
            assert await refused_with(third) == "too many connections"
        assert feed.connections == 0  # neither of the two has been admitted yet
        await one.send(b's3cret-token\n{"n":1}\n')
        assert await read_lines(one, 1) == [b'ack {"n":1}\n']
        assert feed.connections == 1
        assert feed.rejected == {"too many connections": 1}


# -- slow and silent clients ------------------------------------------------


async def test_a_client_silent_for_idle_timeout_is_closed_while_an_active_one_stays() -> None:
    async with (
        serving(idle_timeout=0.3) as (feed, consumer),
        await connect(feed) as silent,
        await connect(feed) as active,
    ):
        await silent.send(b'{"silent":1}\n')
        buffer = bytearray()
        assert await read_line(silent, buffer) == b'ack {"silent":1}\n'
        for n in range(9):  # 0.9 s in all, never 0.3 s apart
            await active.send(b'{"active":%d}\n' % n)
            assert await read_lines(active, 1) == [b'ack {"active":%d}\n' % n]
            await anyio.sleep(0.1)
        assert buffer == b""
        assert await refused_with(silent) == "idle timeout"
        await wait_until(lambda: feed.connections == 1)
        assert feed.rejected == {"idle timeout": 1}
        assert len(consumer.of(name_of(active))) == 9


async def test_a_client_that_stops_reading_replies_is_cut_off_and_does_not_stall_the_rest() -> None:
    big = b"r" * (1 << 20)  # replies this large fill the socket buffers in a few lines

    def reply(line: bytes) -> bytes:
        return big if line.startswith(b'{"deaf"') else b"ack " + line.rstrip(b"\n")

    async with (
        serving(reply=reply, send_timeout=0.3) as (feed, consumer),
        await connect(feed) as deaf,
        await connect(feed) as other,
    ):
        await wait_until(lambda: feed.connections == 2)
        await deaf.send(b"".join(b'{"deaf":%d}\n' % n for n in range(100)))  # never reads
        await wait_until(lambda: feed.rejected == {"send timeout": 1})
        await other.send(b'{"other":1}\n')
        assert await read_lines(other, 1) == [b'ack {"other":1}\n']
        await wait_until(lambda: feed.connections == 1)
        assert 1 < len(consumer.of(name_of(deaf))) <= 100


# -- where it listens -------------------------------------------------------


REMOTE_HINT = (
    "is not a loopback address (127.0.0.0/8, ::1, localhost), so anyone who can "
    "reach this machine could send events\nhint: to accept remote simulators, "
    "pass `--listen-remote` (`allow_remote=True` from Python) and set a token "
    "with `--token` or `MANTLE_STREAM_TOKEN`"
)


@pytest.mark.parametrize(
    ("spec", "host"),
    [
        ("tcp://0.0.0.0:0", "0.0.0.0"),
        ("tcp://[::]:0", "::"),
        ("tcp://192.0.2.7:7400", "192.0.2.7"),
        ("tcp://example.com:7400", "example.com"),
        ("tcp://localhost.example.com:7400", "localhost.example.com"),
    ],
    ids=["all-ipv4", "all-ipv6", "an-address", "a-name", "a-name-like-localhost"],
)
async def test_a_host_that_is_not_loopback_is_refused_with_the_way_to_allow_it(
    spec: str, host: str
) -> None:
    with pytest.raises(FeedError) as raised:
        async with open_feed(spec, listen=ListenOptions(token=TOKEN)):
            pass
    assert str(raised.value) == f"cannot listen on `{spec}`: `{host}` {REMOTE_HINT}"


async def test_allow_remote_binds_exactly_the_host_given() -> None:
    async with serving("tcp://0.0.0.0:0", allow_remote=True) as (feed, _):
        assert feed.address is not None
        assert re.fullmatch(r"tcp://0\.0\.0\.0:[1-9]\d*", feed.address)
        async with await connect(feed) as client:
            await client.send(b'{"n":1}\n')
            assert await read_lines(client, 1) == [b'ack {"n":1}\n']


async def test_an_empty_host_listens_on_127_0_0_1_only() -> None:
    async with serving("tcp://:0") as (feed, _):
        assert feed.address is not None
        match = re.fullmatch(r"tcp://127\.0\.0\.1:([1-9]\d*)", feed.address)
        assert match
        async with await anyio.connect_tcp("127.0.0.1", int(match[1])) as client:
            await client.send(b'{"n":1}\n')
            assert await read_lines(client, 1) == [b'ack {"n":1}\n']
        if (other := _non_loopback_ipv4()) is not None:
            with pytest.raises(OSError):
                await anyio.connect_tcp(other, int(match[1]))


def _non_loopback_ipv4() -> str | None:
    """An address of this machine off loopback, if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent; picks the outgoing address
        except OSError:
            return None
        address: str = probe.getsockname()[0]
    return None if address.startswith("127.") or address == "0.0.0.0" else address


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        ("localhost", True),
        ("LocalHost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.0.0.1", False),
        ("::ffff:10.0.0.1", False),
        ("128.0.0.1", False),
        ("localhost.", False),
        ("example.com", False),
        ("127.1", False),
    ],
    ids=lambda value: str(value),
)
def test_what_counts_as_loopback(host: str, loopback: bool) -> None:
    assert _is_loopback(host) is loopback


# -- settings ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_connections": 0}, "max_connections must be at least 1, not 0"),
        ({"auth_timeout": 0}, "auth_timeout must be positive, not 0"),
        ({"idle_timeout": -1.0}, "idle_timeout must be positive, not -1.0"),
        ({"send_timeout": 0.0}, "send_timeout must be positive, not 0.0"),
        ({"token": ""}, "token must be a non-empty string without line breaks"),
        ({"token": "two\nlines"}, "token must be a non-empty string without line breaks"),
    ],
    ids=[
        "max-connections",
        "auth-timeout",
        "idle-timeout",
        "send-timeout",
        "empty-token",
        "token-with-newline",
    ],
)
def test_impossible_listener_settings_raise_value_error(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError) as raised:
        open_feed("tcp://127.0.0.1:0", listen=ListenOptions(**options))
    assert str(raised.value) == message


async def test_listener_settings_are_ignored_by_other_sources(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"n":1}\n')
    listen = ListenOptions(token=TOKEN, max_connections=1, idle_timeout=0.01)
    async with open_feed(str(path), listen=listen) as feed:
        assert [chunk.data async for chunk in feed] == [b'{"n":1}\n']
        assert feed.rejected == {}
