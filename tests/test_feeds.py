"""Every event source delivers complete, numbered lines through one interface.

Real files, pipes, sockets and writer tasks throughout; nothing is mocked.
"""

from __future__ import annotations

import io
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, cast

import anyio
import pytest
from anyio.abc import ByteStream, SocketAttribute

from mantle_stream import EventError, FeedError
from mantle_stream.core.events.decode import EventDecoder
from mantle_stream.feeds import Chunk, Feed, FollowOptions, open_feed
from mantle_stream.feeds.base import Peer
from mantle_stream.feeds.files import _read_waiting
from mantle_stream.feeds.lines import CHUNK_BYTES, READ_BYTES, split_lines

pytestmark = pytest.mark.anyio
live = pytest.mark.timeout(20)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# -- helpers ----------------------------------------------------------------


def numbered(chunk: Chunk) -> list[tuple[int, bytes]]:
    """The chunk's lines, each with its 1-based number in its source."""
    lines = chunk.data.splitlines(keepends=True)
    return [(chunk.first_line + offset, line) for offset, line in enumerate(lines)]


async def read_all(feed: Feed) -> list[Chunk]:
    with anyio.fail_after(10):
        return [chunk async for chunk in feed]


class LineReader:
    """Takes numbered lines from a live feed, as many as a step needs."""

    def __init__(self, feed: Feed) -> None:
        self._chunks = feed.__aiter__()
        self._ready: list[tuple[int, bytes]] = []

    async def take(self, count: int) -> list[tuple[int, bytes]]:
        with anyio.fail_after(5):
            while len(self._ready) < count:
                self._ready.extend(numbered(await self._chunks.__anext__()))
        taken, self._ready = self._ready[:count], self._ready[count:]
        return taken


async def wait_until(condition: Callable[[], bool]) -> None:
    with anyio.fail_after(5):
        while not condition():
            await anyio.sleep(0.005)


async def receive_exactly(stream: ByteStream, size: int) -> bytes:
    data = b""
    with anyio.fail_after(5):
        while len(data) < size:
            data += await stream.receive()
    return data


def event(n: int, width: int = 10) -> bytes:
    return b'{"conversation_id":"c-%d","sequence":%d,"user":{"text":"%s"}}' % (
        n % 7,
        n,
        b"x" * width,
    )


def cut(line: bytes, limit: int) -> bytes:
    """What the feed delivers instead of a line longer than ``limit``."""
    return b"<line cut off: longer than %d bytes> %s\n" % (limit, line[:200])


# -- files ------------------------------------------------------------------


async def test_file_feed_delivers_every_line_in_numbered_chunks_of_whole_lines(
    tmp_path: Path,
) -> None:
    parts = []
    for n in range(10_000):
        ending = b"\r\n" if n % 5 == 0 else b"\n"
        parts.append(event(n, width=n * 37 % 300) + ending)
        if n % 11 == 0:
            parts.append([b"\n", b"\r\n", b"   \n"][n % 3])
    parts.append(event(10_000))  # final line without a newline
    content = b"".join(parts)
    assert len(content) > 3 * READ_BYTES  # several large reads, each split in chunks
    path = tmp_path / "events.jsonl"
    path.write_bytes(content)

    async with open_feed(str(path)) as feed:
        assert (feed.name, feed.live, feed.address, feed.connections) == (str(path), False, None, 0)
        chunks = await read_all(feed)

    assert len(chunks) > 8
    assert b"".join(chunk.data for chunk in chunks) == content + b"\n"
    line = 1
    for chunk in chunks:
        assert chunk.data.endswith(b"\n")
        assert len(chunk.data) <= CHUNK_BYTES + 400  # what the engine decodes best, plus a line
        assert chunk.peer is None
        assert chunk.first_line == line
        line += chunk.data.count(b"\n")


@pytest.mark.parametrize(
    ("chunk", "size", "pieces"),
    [
        (b"", 4, []),
        (b"ab\n", 4, [b"ab\n"]),
        (b"ab\ncd\nef\n", 4, [b"ab\n", b"cd\n", b"ef\n"]),
        (b"ab\ncd\nef\n", 6, [b"ab\ncd\n", b"ef\n"]),
        (b"a\nbcdefgh\ni\n", 4, [b"a\n", b"bcdefgh\n", b"i\n"]),  # a long line stays whole
        (b"abcdefgh\n", 4, [b"abcdefgh\n"]),
        (b"ab\ncd\nef", 4, [b"ab\n", b"cd\n", b"ef"]),  # a final partial line is its own piece
    ],
    ids=["empty", "one", "one-per-piece", "two-per-piece", "long-line", "only-long", "partial-end"],
)
def test_split_lines_cuts_at_line_ends(chunk: bytes, size: int, pieces: list[bytes]) -> None:
    assert list(split_lines(chunk, size)) == pieces
    assert b"".join(split_lines(chunk, size)) == chunk


@live  # a read that waited for more would hang here
def test_a_stdin_read_takes_what_is_waiting_and_never_waits_for_more() -> None:
    read_fd, write_fd = os.pipe()
    try:
        os.write(write_fd, b"a" * 5000)
        # More than is waiting was asked for; the writer is still there. The
        # read returns what there is instead of waiting for the rest.
        assert _read_waiting(read_fd, 1 << 20) == b"a" * 5000
        os.write(write_fd, b"b" * 5000)
        assert _read_waiting(read_fd, 3000) == b"b" * 3000  # never more than asked
        assert _read_waiting(read_fd, 3000) == b"b" * 2000
    finally:
        os.close(write_fd)
    try:
        assert _read_waiting(read_fd, 1000) == b""  # the end
    finally:
        os.close(read_fd)


@live
def test_a_stdin_read_of_a_pipe_being_written_loses_and_reorders_nothing() -> None:
    data = bytes(range(256)) * 8192  # 2 MiB
    read_fd, write_fd = os.pipe()

    def write() -> None:
        with os.fdopen(write_fd, "wb", buffering=0) as pipe:
            for start in range(0, len(data), 4096):
                pipe.write(data[start : start + 4096])

    writer = threading.Thread(target=write)
    writer.start()
    got = []
    try:
        while block := _read_waiting(read_fd, READ_BYTES):
            assert len(block) <= READ_BYTES
            got.append(block)
    finally:
        writer.join()
        os.close(read_fd)
    assert b"".join(got) == data


async def test_stdin_feed_reads_a_pipe_without_blocking_the_event_loop() -> None:
    content = b"".join(event(n) + b"\n" for n in range(200)) + b"\r\n" + event(200)
    read_fd, write_fd = os.pipe()

    def write() -> None:
        time.sleep(0.3)  # the feed waits on an empty pipe meanwhile
        with os.fdopen(write_fd, "wb", buffering=0) as pipe:
            for start in range(0, len(content), 777):  # pieces that split lines
                pipe.write(content[start : start + 777])
                time.sleep(0.001)

    writer = threading.Thread(target=write)
    writer.start()
    ticks = 0
    ticks_before_data = -1

    async def tick() -> None:
        nonlocal ticks
        while True:
            await anyio.sleep(0.01)
            ticks += 1

    try:
        with os.fdopen(read_fd, "rb") as stdin:
            async with open_feed("-", stdin=stdin) as feed, anyio.create_task_group() as tg:
                tg.start_soon(tick)
                assert (feed.name, feed.live) == ("<stdin>", False)
                chunks = []
                with anyio.fail_after(10):
                    async for chunk in feed:
                        if ticks_before_data < 0:
                            ticks_before_data = ticks
                        chunks.append(chunk)
                tg.cancel_scope.cancel()
    finally:
        writer.join()

    assert ticks_before_data >= 10
    assert b"".join(chunk.data for chunk in chunks) == content + b"\n"
    assert [chunk.first_line for chunk in chunks] == [
        1 + sum(c.data.count(b"\n") for c in chunks[:i]) for i in range(len(chunks))
    ]


async def test_stdin_feed_reads_a_stream_without_a_file_descriptor() -> None:
    async with open_feed("-", stdin=io.BytesIO(b'{"n":1}\n\n{"n":2}')) as feed:
        chunks = await read_all(feed)
    assert [line for chunk in chunks for line in numbered(chunk)] == [
        (1, b'{"n":1}\n'),
        (2, b"\n"),
        (3, b'{"n":2}\n'),
    ]


class Descriptor:
    """The least a stdin needs: a file descriptor (here one that cannot be read)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def fileno(self) -> int:
        return self._fd


async def test_a_stdin_read_error_ends_the_feed_with_feed_error(tmp_path: Path) -> None:
    fd = os.open(tmp_path, os.O_RDONLY)  # reading a directory fails with EISDIR
    try:
        async with open_feed("-", stdin=cast(BinaryIO, Descriptor(fd))) as feed:
            with pytest.raises(FeedError) as raised:
                await read_all(feed)
    finally:
        os.close(fd)
    assert str(raised.value) == "cannot read events from `<stdin>`: Is a directory"


STOP_AFTER_ONE_CHUNK = """
import anyio
from mantle_stream.feeds import open_feed

async def main() -> None:
    async with open_feed("-") as feed:
        async for chunk in feed:
            print(chunk.first_line, chunk.data.decode().strip(), flush=True)
            break

anyio.run(main)
"""


@live
def test_a_process_that_stops_reading_stdin_exits_while_the_writer_is_still_there() -> None:
    with subprocess.Popen(
        [sys.executable, "-c", STOP_AFTER_ONE_CHUNK], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    ) as child:
        assert child.stdin is not None and child.stdout is not None
        child.stdin.write(b'{"n":1}\n')
        child.stdin.flush()  # and keep the pipe open: the feed's read never returns
        try:
            assert child.wait(timeout=15) == 0
        finally:
            child.stdin.close()
        assert child.stdout.read() == b'1 {"n":1}\n'


# -- follow -----------------------------------------------------------------


@live
async def test_follow_waits_for_the_file_and_reads_lines_as_they_are_appended(
    tmp_path: Path,
) -> None:
    path = tmp_path / "events.jsonl"
    lines = [event(n) + b"\n" for n in range(40)]

    async def write() -> None:
        await anyio.sleep(0.1)  # the feed started before the file exists
        with path.open("ab", buffering=0) as fh:
            for line in lines:
                fh.write(line)
                await anyio.sleep(0.002)

    async with (
        open_feed(f"follow:{path}", follow=FollowOptions(poll_interval=0.01)) as feed,
        anyio.create_task_group() as tg,
    ):
        assert (feed.name, feed.live, feed.address) == (f"follow:{path}", True, None)
        tg.start_soon(write)
        assert await LineReader(feed).take(40) == list(enumerate(lines, start=1))


@live
async def test_follow_joins_a_line_written_in_two_pieces(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"n":1}\n')
    async with open_feed(f"follow:{path}", follow=FollowOptions(poll_interval=0.01)) as feed:
        reader = LineReader(feed)
        assert await reader.take(1) == [(1, b'{"n":1}\n')]
        with path.open("ab", buffering=0) as fh:
            fh.write(b'{"n":')
            await anyio.sleep(0.1)  # several polls see only the first piece
            fh.write(b"2}\r\n")
        assert await reader.take(1) == [(2, b'{"n":2}\r\n')]


@live
async def test_follow_starts_again_from_the_top_after_truncation(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"a":1}\n{"a":2}\n{"a":3}\n{"a":')
    async with open_feed(f"follow:{path}", follow=FollowOptions(poll_interval=0.01)) as feed:
        reader = LineReader(feed)
        assert [line for _, line in await reader.take(3)] == [
            b'{"a":1}\n',
            b'{"a":2}\n',
            b'{"a":3}\n',
        ]
        await anyio.sleep(0.05)
        path.write_bytes(b'{"b":1}\n')  # truncates, then writes less than was there
        assert await reader.take(1) == [(1, b'{"b":1}\n')]
        with path.open("ab") as fh:
            fh.write(b'{"b":2}\n')
        assert await reader.take(1) == [(2, b'{"b":2}\n')]


@live
async def test_follow_finishes_the_rotated_file_then_reads_the_new_one(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"old":1}\n')
    async with open_feed(f"follow:{path}", follow=FollowOptions(poll_interval=0.01)) as feed:
        reader = LineReader(feed)
        assert await reader.take(1) == [(1, b'{"old":1}\n')]
        with path.open("ab") as fh:
            fh.write(b'{"old":2}\n{"old":3}')  # the last line of the old file has no newline
        path.rename(tmp_path / "events.jsonl.1")
        path.write_bytes(b'{"new":1}\n')
        assert await reader.take(3) == [
            (2, b'{"old":2}\n'),
            (3, b'{"old":3}\n'),
            (1, b'{"new":1}\n'),
        ]
        with path.open("ab") as fh:
            fh.write(b'{"new":2}\n')
        assert await reader.take(1) == [(2, b'{"new":2}\n')]


@live
async def test_follow_never_ends_by_itself(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"n":1}\n')
    async with open_feed(f"follow:{path}", follow=FollowOptions(poll_interval=0.01)) as feed:
        reader = LineReader(feed)
        await reader.take(1)
        with anyio.move_on_after(0.2) as waited:
            await reader.take(1)
        assert waited.cancelled_caught


# -- sockets ----------------------------------------------------------------


async def reply_to_every_line(feed: Feed, seen: dict[Peer, list[tuple[int, bytes]]]) -> None:
    """A consumer: records each line under its peer and acknowledges it."""
    async for chunk in feed:
        assert isinstance(chunk.peer, Peer)  # a socket's peer: it can send(), not only post()
        for number, line in numbered(chunk):
            seen.setdefault(chunk.peer, []).append((number, line))
            await chunk.peer.send(b"ack " + line.rstrip(b"\r\n"))


@live
async def test_tcp_feed_serves_concurrent_clients_and_replies_to_each() -> None:
    seen: dict[Peer, list[tuple[int, bytes]]] = {}
    async with open_feed("tcp://127.0.0.1:0") as feed, anyio.create_task_group() as tg:
        assert feed.address is not None
        match = re.fullmatch(r"tcp://127\.0\.0\.1:(\d+)", feed.address)
        assert match and int(match[1]) != 0
        assert (feed.name, feed.live, feed.connections) == (feed.address, True, 0)
        tg.start_soon(reply_to_every_line, feed, seen)
        clients = [await anyio.connect_tcp("127.0.0.1", int(match[1])) for _ in range(3)]
        try:
            await wait_until(lambda: feed.connections == 3)
            sent = {i: [b'{"client":%d,"n":%d}\r\n' % (i, n) for n in range(20)] for i in range(3)}
            for n in range(20):  # every client is mid-line while the others write
                for i, client in enumerate(clients):
                    await client.send(sent[i][n][:7])
                for i, client in enumerate(clients):
                    await client.send(sent[i][n][7:])
            for i, client in enumerate(clients):
                expected = b"".join(b"ack " + line[:-2] + b"\n" for line in sent[i])
                assert await receive_exactly(client, len(expected)) == expected
            names = {
                f"tcp 127.0.0.1:{client.extra(SocketAttribute.local_port)}": i
                for i, client in enumerate(clients)
            }
            assert {peer.name: lines for peer, lines in seen.items()} == {
                name: list(enumerate(sent[i], start=1)) for name, i in names.items()
            }
        finally:
            for client in clients:
                await client.aclose()
        await wait_until(lambda: feed.connections == 0)
        assert all(peer.closed for peer in seen)
        tg.cancel_scope.cancel()


@live
async def test_a_client_that_disconnects_mid_line_loses_only_that_line() -> None:
    seen: dict[Peer, list[tuple[int, bytes]]] = {}
    async with open_feed("tcp://127.0.0.1:0") as feed, anyio.create_task_group() as tg:
        assert feed.address is not None
        port = int(feed.address.rpartition(":")[2])
        tg.start_soon(reply_to_every_line, feed, seen)
        quiet_since = feed.last_activity
        async with await anyio.connect_tcp("127.0.0.1", port) as stays:
            leaves = await anyio.connect_tcp("127.0.0.1", port)
            leaves_port = leaves.extra(SocketAttribute.local_port)
            await wait_until(lambda: feed.connections == 2)
            assert feed.last_activity > quiet_since
            await leaves.send(b'{"leaves":1}\n{"leaves":2')
            await receive_exactly(leaves, len(b'ack {"leaves":1}\n'))
            await leaves.aclose()
            await wait_until(lambda: feed.connections == 1)

            await stays.send(b'{"stays":1}\n')
            assert await receive_exactly(stays, 16) == b'ack {"stays":1}\n'
            by_name = {peer.name.partition(":")[2]: (peer, lines) for peer, lines in seen.items()}
            gone, gone_lines = by_name[str(leaves_port)]
            assert gone_lines == [(1, b'{"leaves":1}\n')]
            assert gone.closed
            await gone.send(b"too late")  # dropped, not raised
            assert by_name[str(stays.extra(SocketAttribute.local_port))][1] == [
                (1, b'{"stays":1}\n')
            ]
        await wait_until(lambda: feed.connections == 0)
        tg.cancel_scope.cancel()


@live
async def test_a_client_that_sends_garbage_and_vanishes_leaves_the_others_lines_in_order() -> None:
    seen: dict[Peer, list[tuple[int, bytes]]] = {}
    async with open_feed("tcp://127.0.0.1:0") as feed, anyio.create_task_group() as tg:
        assert feed.address is not None
        port = int(feed.address.rpartition(":")[2])
        tg.start_soon(reply_to_every_line, feed, seen)
        good = [await anyio.connect_tcp("127.0.0.1", port) for _ in range(3)]
        try:
            bad = await anyio.connect_tcp("127.0.0.1", port)
            await wait_until(lambda: feed.connections == 4)
            sent = {i: [b'{"client":%d,"n":%d}\n' % (i, n) for n in range(30)] for i in range(3)}
            for n in range(30):
                for i, client in enumerate(good):
                    await client.send(sent[i][n][:5])  # everyone is mid-line ...
                if n == 10:
                    await bad.send(b'{"bad":' + b"\x00\xff garbage " * 500)  # ... no newline
                if n == 12:
                    await bad.aclose()  # ... and it vanishes
                for i, client in enumerate(good):
                    await client.send(sent[i][n][5:])
            for i, client in enumerate(good):
                expected = b"".join(b"ack " + line for line in sent[i])
                assert await receive_exactly(client, len(expected)) == expected
            await wait_until(lambda: feed.connections == 3)
            ports = {
                f"tcp 127.0.0.1:{client.extra(SocketAttribute.local_port)}": i
                for i, client in enumerate(good)
            }
            assert {peer.name: lines for peer, lines in seen.items()} == {
                name: list(enumerate(sent[i], start=1)) for name, i in ports.items()
            }
        finally:
            for client in good:
                await client.aclose()
        assert feed.rejected == {}
        tg.cancel_scope.cancel()


@live
async def test_a_consumer_that_falls_behind_slows_the_sender_down() -> None:
    line = b'{"pad":"' + b"x" * 1000 + b'"}\n'
    block = line * 64
    sent = 0
    async with open_feed("tcp://127.0.0.1:0") as feed:
        assert feed.address is not None
        port = int(feed.address.rpartition(":")[2])
        async with await anyio.connect_tcp("127.0.0.1", port) as client:
            with anyio.move_on_after(0.5):  # nobody iterates the feed meanwhile
                while sent < 64 << 20:
                    await client.send(block)
                    sent += len(block)
            assert 1 << 20 < sent < 32 << 20  # the queue and socket buffers, no more
            chunk = await feed.__anext__()
            assert chunk.first_line == 1
            assert chunk.data.startswith(line)


@live
async def test_a_sender_that_was_ahead_from_the_start_is_slowed_down_too() -> None:
    # The client's first bytes are waiting before the listener's first read,
    # and the consumer takes every chunk, slowly. anyio's asyncio stream then
    # never paused reading: its queue took all the sender could send (491 MiB
    # at 300,000 conversations). The backlog must stay in the socket buffers.
    line = b'{"pad":"' + b"x" * 1000 + b'"}\n'
    block = line * 256
    sent = [0]
    stop = threading.Event()

    def sender(port: int) -> None:  # its own thread: it never waits on the loop
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.settimeout(0.2)
            while not stop.is_set() and sent[0] < 512 << 20:
                try:
                    sock.sendall(block)
                except (TimeoutError, OSError):
                    continue
                sent[0] += len(block)

    async with open_feed("tcp://127.0.0.1:0") as feed:
        assert feed.address is not None
        port = int(feed.address.rpartition(":")[2])
        thread = threading.Thread(target=sender, args=(port,), daemon=True)
        thread.start()
        await anyio.sleep(0.05)  # its bytes are waiting before the first read
        with anyio.move_on_after(1.0):
            async for _ in feed:
                await anyio.sleep(0.002)
        stop.set()
        await anyio.to_thread.run_sync(thread.join, 5)
    assert sent[0] < 64 << 20, f"{sent[0] >> 20} MiB taken in by a consumer of ~30 MiB/s"


@live
async def test_unix_feed_replaces_a_stale_socket_serves_clients_and_cleans_up(
    tmp_path: Path,
) -> None:
    path = tmp_path / "feed.sock"
    with socket.socket(socket.AF_UNIX) as stale:
        stale.bind(str(path))  # left behind: nobody listens on it any more
    assert path.is_socket()
    seen: dict[Peer, list[tuple[int, bytes]]] = {}

    async with open_feed(f"unix:{path}") as feed, anyio.create_task_group() as tg:
        assert (feed.address, feed.live) == (f"unix:{path}", True)
        tg.start_soon(reply_to_every_line, feed, seen)
        async with await anyio.connect_unix(path) as one, await anyio.connect_unix(path) as two:
            await wait_until(lambda: feed.connections == 2)
            for n in range(5):
                await one.send(b'{"one":%d}\n' % n)
                await two.send(b'{"two":%d}\n' % n)
            for client, who in ((one, b"one"), (two, b"two")):
                expected = b"".join(b'ack {"%s":%d}\n' % (who, n) for n in range(5))
                assert await receive_exactly(client, len(expected)) == expected
        await wait_until(lambda: feed.connections == 0)
        tg.cancel_scope.cancel()

    assert sorted(peer.name for peer in seen) == ["unix #1", "unix #2"]
    assert sorted(lines for lines in seen.values()) == [
        [(n + 1, b'{"one":%d}\n' % n) for n in range(5)],
        [(n + 1, b'{"two":%d}\n' % n) for n in range(5)],
    ]
    assert not path.exists()


# -- errors and overlong lines ----------------------------------------------


FORMS = (
    "a file, a directory, `-`, `follow:PATH`, `tcp://HOST:PORT`, `unix:PATH`, "
    "`sqlite:///PATH`, `postgresql://HOST/DB` or `http(s)://HOST:PORT`"
)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            "{tmp}/missing.jsonl",
            "cannot read events from `{tmp}/missing.jsonl`: No such file or directory",
        ),
        (
            "{tmp}",
            "no event files in directory `{tmp}` (expected *.json, *.jsonl, *.ndjson, *.log)",
        ),
        ("follow:{tmp}", "cannot follow `{tmp}`: Is a directory"),
        (
            "tcp://127.0.0.1",
            "bad event source `tcp://127.0.0.1`: expected `tcp://HOST:PORT`, "
            "e.g. `tcp://127.0.0.1:7777`",
        ),
        (
            "tcp://127.0.0.1:99999",
            "bad event source `tcp://127.0.0.1:99999`: "
            "port `99999` is not a number from 0 to 65535",
        ),
        ("follow:", "bad event source `follow:`: expected `follow:PATH`"),
        ("unix:", "bad event source `unix:`: expected `unix:PATH`"),
        (
            "udp://127.0.0.1:7777",
            f"bad event source `udp://127.0.0.1:7777`: unknown scheme `udp`; expected {FORMS}",
        ),
        ("", f"bad event source: empty; expected {FORMS}"),
    ],
    ids=[
        "missing-file",
        "directory",
        "follow-directory",
        "tcp-no-port",
        "tcp-bad-port",
        "follow-no-path",
        "unix-no-path",
        "unknown-scheme",
        "empty",
    ],
)
async def test_a_source_that_cannot_be_opened_raises_feed_error_on_entering(
    spec: str, message: str, tmp_path: Path
) -> None:
    feed = open_feed(spec.format(tmp=tmp_path))  # constructing never fails
    with pytest.raises(FeedError) as raised:
        async with feed:
            pass
    assert str(raised.value) == message.format(tmp=tmp_path)


async def test_a_port_in_use_raises_feed_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(FeedError) as raised:
            async with open_feed(f"tcp://127.0.0.1:{port}"):
                pass
    assert str(raised.value) == (
        f"cannot listen on `tcp://127.0.0.1:{port}`: Address already in use"
    )


async def test_a_unix_path_that_is_a_regular_file_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"precious\n")
    with pytest.raises(FeedError) as raised:
        async with open_feed(f"unix:{path}"):
            pass
    assert str(raised.value) == (
        f"cannot listen on `unix:{path}`: the path exists and is "
        f"not a socket; refusing to replace it"
    )
    assert path.read_bytes() == b"precious\n"


async def test_a_unix_socket_with_a_live_listener_is_not_taken_over(tmp_path: Path) -> None:
    path = tmp_path / "feed.sock"
    async with open_feed(f"unix:{path}"):
        with pytest.raises(FeedError) as raised:
            async with open_feed(f"unix:{path}"):
                pass
        assert path.is_socket()
    assert str(raised.value) == (
        f"cannot listen on `unix:{path}`: another process is listening on it"
    )


async def test_overlong_lines_become_lines_the_decoder_rejects(tmp_path: Path) -> None:
    medium = event(1, width=150)  # too long, arrives whole in one read
    huge = event(2, width=300_000)  # too long, spans several reads
    last = event(3, width=150)  # too long, and no newline at the end
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"ok":1}\n' + medium + b'\n{"ok":2}\r\n' + huge + b'\n{"ok":3}\n' + last)

    async with open_feed(str(path), max_line_bytes=100) as feed:
        lines = [line for chunk in await read_all(feed) for line in numbered(chunk)]

    assert lines == [
        (1, b'{"ok":1}\n'),
        (2, cut(medium, 100)),
        (3, b'{"ok":2}\r\n'),
        (4, cut(huge, 100)),
        (5, b'{"ok":3}\n'),
        (6, cut(last, 100)),
    ]
    decoder = EventDecoder(str(path))
    for number in (2, 4, 6):
        with pytest.raises(
            EventError, match=rf":{number}: bad event: malformed JSON.*\n    <line cut off"
        ):
            decoder.decode_line(lines[number - 1][1], number)


@live
async def test_an_overlong_line_is_reported_before_its_end_arrives() -> None:
    read_fd, write_fd = os.pipe()
    reported = threading.Event()

    def write() -> None:
        with os.fdopen(write_fd, "wb", buffering=0) as pipe:
            pipe.write(b"x" * (1 << 20))  # far past the limit, no newline yet
            reported.wait(10)
            pipe.write(b'yyy\n{"ok":1}\n')

    writer = threading.Thread(target=write)
    writer.start()
    try:
        with os.fdopen(read_fd, "rb") as stdin:
            async with open_feed("-", stdin=stdin, max_line_bytes=1000) as feed:
                reader = LineReader(feed)
                assert await reader.take(1) == [(1, cut(b"x" * 200, 1000))]
                reported.set()
                assert await reader.take(1) == [(2, b'{"ok":1}\n')]
                # To the end, so the reader thread is done before its pipe closes.
                assert await read_all(feed) == []
    finally:
        reported.set()
        writer.join()


@pytest.mark.parametrize(
    "spec",
    [
        "{tmp}/events.jsonl",
        "follow:{tmp}/events.jsonl",
        "tcp://127.0.0.1:0",
        "unix:{tmp}/feed.sock",
    ],
    ids=["file", "follow", "tcp", "unix"],
)
async def test_an_error_raised_while_consuming_leaves_the_feed_unwrapped(
    spec: str, tmp_path: Path
) -> None:
    (tmp_path / "events.jsonl").write_bytes(b"{}\n")
    error = EventError("consumer gave up", source="x", line=1)
    with pytest.raises(EventError) as raised:
        async with open_feed(spec.format(tmp=tmp_path)):
            raise error
    assert raised.value is error


async def test_a_feed_is_iterated_only_inside_async_with(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"{}\n")
    feed = open_feed(str(path))
    with pytest.raises(RuntimeError, match="inside `async with`"):
        await feed.__aiter__().__anext__()
