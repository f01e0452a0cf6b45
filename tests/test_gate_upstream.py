"""The gate's HTTP on both sides: its client to the agent (gate/upstream.py) and when
its replies leave (gate/wire.py), against scripted servers on loopback.

Each agent here is a real TCP server on loopback that reads requests with h11
and writes its replies as raw bytes, so it can do what a well-behaved server
would not: close a kept-alive connection between two requests, or as a
request arrives, answer with a malformed head. The cases go through a real
gate (``Gate`` served by uvicorn) where the gate's answer is what counts, and
through :class:`Upstream` alone where the connections are. The simulator's
side is read as raw bytes where what counts is which bytes arrive together.
"""

from __future__ import annotations

import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.abc
import anyio.lowlevel
import h11
import httpx
import pytest
from anyio.streams.tls import TLSListener

from mantle_stream.core.scenario.load import load_scenarios
from mantle_stream.gate import wire
from mantle_stream.gate.proxy import GateOptions
from mantle_stream.gate.runs import GateJudge
from mantle_stream.gate.serve import Gate
from mantle_stream.gate.upstream import Upstream, UpstreamError

from _harness import REPOSITORY

pytestmark = pytest.mark.anyio

SCENARIO = REPOSITORY / "examples" / "eval" / "scenarios" / "identity_check.yml"
OK = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 2\r\n\r\nok"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Agent:
    """A scripted agent: ``reply(request, number)`` gives the bytes to answer the
    ``number``-th request (from 0, over all connections) with (a list: written apart,
    ``between()`` awaited before each but the first), or None to close the connection
    without answering. After each reply, the connection is closed when ``close_after``
    says so (as a server whose keep-alive timeout ran out)."""

    def __init__(
        self,
        reply: Callable[[h11.Request, int], bytes | list[bytes] | None] = lambda _r, _n: OK,
        *,
        close_after: bool = False,
        between: Callable[[], Awaitable[None]] = anyio.lowlevel.checkpoint,
    ) -> None:
        self.reply = reply
        self.close_after = close_after
        self.between = between
        self.connections = 0
        self.requests: list[tuple[h11.Request, bytes]] = []

    async def handle(self, stream: anyio.abc.ByteStream) -> None:
        self.connections += 1
        reader = h11.Connection(h11.SERVER)
        async with stream:
            while True:
                request, body = await _read_request(reader, stream)
                if request is None:
                    return
                number = len(self.requests)
                self.requests.append((request, body))
                answer = self.reply(request, number)
                if answer is None:
                    return
                for position, part in enumerate([answer] if isinstance(answer, bytes) else answer):
                    if position:
                        await self.between()
                    await stream.send(part)
                if self.close_after:
                    return
                reader = h11.Connection(h11.SERVER)  # the next request, whatever was answered


async def _read_request(
    reader: h11.Connection, stream: anyio.abc.ByteStream
) -> tuple[h11.Request | None, bytes]:
    request: h11.Request | None = None
    body = b""
    while True:
        event = reader.next_event()
        if event is h11.NEED_DATA:
            try:
                reader.receive_data(await stream.receive())
            except (anyio.EndOfStream, anyio.BrokenResourceError):
                return None, b""
        elif isinstance(event, h11.Request):
            request = event
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            return request, body
        else:
            return None, b""


@asynccontextmanager
async def serving(agent: Agent) -> AsyncIterator[str]:
    """The agent on a free loopback port for as long as the block lasts; its base URL."""
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as tasks:
        tasks.start_soon(listener.serve, agent.handle)
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            tasks.cancel_scope.cancel()


@asynccontextmanager
async def gate_before(agent: Agent) -> AsyncIterator[str]:
    """A gate in front of the agent; the gate's base URL."""
    async with serving(agent) as upstream:
        # The gate reads no tracker: the agent sees only the requests sent through it.
        judge = GateJudge(
            load_scenarios([str(SCENARIO)]), stop="never", upstream=upstream, reads_tracker=False
        )
        gate = Gate(judge, GateOptions(upstream=upstream), listen=("127.0.0.1", 0))
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(gate.run)
            try:
                yield gate.address
            finally:
                gate.stop()


async def _twice(
    base: str, call: Callable[[httpx.AsyncClient, str], Awaitable[httpx.Response]]
) -> list[httpx.Response]:
    """The same call twice, a pause between them (the agent's close arrives)."""
    async with httpx.AsyncClient(trust_env=False) as client:
        first = await call(client, base)
        await anyio.sleep(0.05)
        return [first, await call(client, base)]


def _post(client: httpx.AsyncClient, base: str) -> Awaitable[httpx.Response]:
    return client.post(f"{base}/webhooks/rest/webhook", json={"sender": "s", "message": "hi"})


# ---------------------------------------------------------------------------- through the gate


async def test_connections_to_the_agent_are_reused_from_one_turn_to_the_next() -> None:
    agent = Agent()
    async with gate_before(agent) as base:
        responses = await _twice(base, _post)
    assert [r.text for r in responses] == ["ok", "ok"]
    assert agent.connections == 1 and len(agent.requests) == 2


async def test_a_connection_the_agent_closed_between_turns_is_not_used_again() -> None:
    agent = Agent(close_after=True)  # as when the agent's keep-alive timeout ran out
    async with gate_before(agent) as base:
        responses = await _twice(base, _post)
    assert [r.status_code for r in responses] == [200, 200]
    assert agent.connections == 2 and len(agent.requests) == 2  # each message sent once


async def test_a_reply_with_a_content_length_passes_through_with_it() -> None:
    body = b'[{"recipient_id": "s", "text": "hello"}]'
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
    agent = Agent(lambda _r, _n: head + b"content-length: %d\r\n\r\n" % len(body) + body)
    async with gate_before(agent) as base, httpx.AsyncClient(trust_env=False) as client:
        response = await _post(client, base)
    assert response.content == body
    assert response.headers["content-length"] == str(len(body))
    assert "transfer-encoding" not in response.headers


async def test_a_chunked_reply_passes_through_chunk_by_chunk() -> None:
    lines = [b'{"text": "one"}\n', b'{"text": "two"}\n']
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(line), line) for line in lines) + b"0\r\n\r\n"
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/x-ndjson\r\n"
    agent = Agent(lambda _r, _n: head + b"transfer-encoding: chunked\r\n\r\n" + chunked)
    async with gate_before(agent) as base, httpx.AsyncClient(trust_env=False) as client:
        response = await _post(client, base)
    assert response.content == b"".join(lines)
    assert response.headers["transfer-encoding"] == "chunked"


async def test_a_reply_read_to_the_close_passes_through_whole() -> None:
    agent = Agent(
        lambda _r, _n: b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nto the end", close_after=True
    )
    async with gate_before(agent) as base:
        responses = await _twice(base, _post)
    assert [r.text for r in responses] == ["to the end", "to the end"]
    assert agent.connections == 2


async def test_a_head_request_gets_the_heads_reply_and_the_connection_is_kept() -> None:
    def reply(request: h11.Request, _number: int) -> bytes:
        if request.method == b"HEAD":  # the length of the body a GET would get, no body
            return b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n"
        return OK

    agent = Agent(reply)
    async with gate_before(agent) as base, httpx.AsyncClient(trust_env=False) as client:
        head = await client.head(f"{base}/status")
        after = await client.get(f"{base}/status")
    assert head.status_code == 200 and head.headers["content-length"] == "10"
    assert head.content == b"" and after.text == "ok"
    assert agent.connections == 1


@pytest.mark.parametrize(
    "answer",
    [b"HTTP/1.1 200 OK\r\nbroken header line\r\n\r\n", b"not http at all\r\n\r\n"],
    ids=["bad-header", "not-http"],
)
async def test_a_malformed_reply_gives_502_with_one_line(answer: bytes) -> None:
    agent = Agent(lambda _r, _n: answer)
    async with gate_before(agent) as base, httpx.AsyncClient(trust_env=False) as client:
        response = await client.get(f"{base}/status")
    assert response.status_code == 502
    assert response.text.startswith("mantle-stream gate: the agent at ")
    assert "malformed reply" in response.text and response.text.count("\n") == 1


async def test_an_agent_that_closes_without_replying_gives_502() -> None:
    agent = Agent(lambda _r, _n: None)
    async with gate_before(agent) as base, httpx.AsyncClient(trust_env=False) as client:
        response = await _post(client, base)
    assert response.status_code == 502
    assert response.text.endswith("the agent closed the connection without a reply\n")
    assert len(agent.requests) == 1


# ---------------------------------------------------------------------------- the simulator's side

NDJSON_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: application/x-ndjson\r\ncontent-length: 32\r\n\r\n"
LINES = [b'{"text": "one"}\n', b'{"text": "two"}\n']


async def _first_read(base: str) -> bytes:
    """What the first read of a webhook message's reply gets, on a raw socket."""
    host, port = base.removeprefix("http://").split(":")
    async with await anyio.connect_tcp(host, int(port)) as sock:
        await sock.send(
            b"POST /webhooks/rest/webhook?stream=true HTTP/1.1\r\nhost: gate\r\n"
            b"content-length: 2\r\n\r\n{}"
        )
        with anyio.fail_after(10):
            return await sock.receive()


async def test_a_replys_head_leaves_with_its_first_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wire, "HOLD", 5.0)  # however slow the machine: the line comes first
    agent = Agent(lambda _r, _n: [NDJSON_HEAD, *LINES], between=lambda: anyio.sleep(0.05))
    async with gate_before(agent) as base:
        first = await _first_read(base)
    assert first.startswith(b"HTTP/1.1 200 OK\r\n") and first.endswith(b"\r\n\r\n" + LINES[0])


async def test_a_replys_head_waits_for_its_first_line_a_moment_only() -> None:
    line_asked = anyio.Event()
    agent = Agent(lambda _r, _n: [NDJSON_HEAD, *LINES], between=line_asked.wait)
    async with gate_before(agent) as base:
        first = await _first_read(base)  # the agent writes no line until it is read
        line_asked.set()
    assert first.startswith(b"HTTP/1.1 200 OK\r\n") and first.endswith(b"\r\n\r\n")


# ---------------------------------------------------------------------------- the client alone


def _closes_the_second(_request: h11.Request, number: int) -> bytes | None:
    """The agent takes the second request on the kept connection and closes it unanswered
    (its keep-alive timeout ran out as the request arrived)."""
    return None if number == 1 else OK


async def test_a_post_on_a_kept_connection_the_agent_closed_unanswered_is_not_sent_again() -> None:
    agent = Agent(_closes_the_second)
    async with serving(agent) as base:
        upstream = Upstream(base)
        headers = [(b"host", upstream.netloc)]
        async with upstream.request(b"POST", b"/webhooks/rest/webhook", headers, b"{}") as reply:
            assert await reply.read() == b"ok"
        with pytest.raises(UpstreamError, match="kept connection was closed by the agent"):
            async with upstream.request(b"POST", b"/webhooks/rest/webhook", headers, b"{}"):
                pass
        await upstream.aclose()
    assert len(agent.requests) == 2  # it may have been played: never a second time


async def test_a_get_on_a_kept_connection_the_agent_closed_unanswered_is_sent_again() -> None:
    agent = Agent(_closes_the_second)
    async with serving(agent) as base:
        upstream = Upstream(base)
        assert await upstream.get(b"/status") == (200, b"ok")
        assert await upstream.get(b"/status") == (200, b"ok")  # on a new connection
        await upstream.aclose()
    assert len(agent.requests) == 3 and agent.connections == 2


async def test_a_kept_connection_idle_past_the_keepalive_is_not_used_again() -> None:
    agent = Agent()
    async with serving(agent) as base:
        upstream = Upstream(base, keepalive=0.05)
        assert await upstream.get(b"/status") == (200, b"ok")
        await anyio.sleep(0.1)
        assert await upstream.get(b"/status") == (200, b"ok")
        await upstream.aclose()
    assert agent.connections == 2


async def test_a_request_goes_with_its_length_and_the_base_urls_path() -> None:
    agent = Agent()
    async with serving(agent) as base:
        upstream = Upstream(base + "/agent/")
        headers = [(b"host", upstream.netloc)]
        async with upstream.request(b"POST", b"/x?a=1", headers) as reply:
            await reply.read()
        await upstream.aclose()
    [(request, body)] = agent.requests
    assert request.target == b"/agent/x?a=1" and body == b""
    assert dict(request.headers)[b"content-length"] == b"0"


async def test_an_informational_reply_before_the_final_one_is_skipped() -> None:
    agent = Agent(lambda _r, _n: b"HTTP/1.1 100 Continue\r\n\r\n" + OK)
    async with serving(agent) as base:
        upstream = Upstream(base)
        assert await upstream.get(b"/status") == (200, b"ok")
        assert await upstream.get(b"/status") == (200, b"ok")
        await upstream.aclose()
    assert agent.connections == 1  # the final reply's end is where the connection is free


async def test_bytes_after_a_reply_end_the_connection_not_the_reply() -> None:
    agent = Agent(lambda _r, _n: OK + b"HTTP/1.1 200 OK\r\n")  # more than was asked for
    async with serving(agent) as base:
        upstream = Upstream(base)
        assert await upstream.get(b"/status") == (200, b"ok")
        assert await upstream.get(b"/status") == (200, b"ok")
        await upstream.aclose()
    assert agent.connections == 2  # what followed was no reply to the next request


async def test_a_reply_cut_off_mid_body_is_an_error_and_its_connection_closed() -> None:
    cut = b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nonly"
    agent = Agent(lambda _r, _n: cut if _n == 0 else OK, close_after=True)
    async with serving(agent) as base:
        upstream = Upstream(base)
        with pytest.raises(UpstreamError, match="closed the connection in the middle"):
            await upstream.get(b"/status")
        assert await upstream.get(b"/status") == (200, b"ok")
        await upstream.aclose()


async def test_a_reply_that_switches_protocols_is_refused() -> None:
    switch = b"HTTP/1.1 101 Switching Protocols\r\nupgrade: h2c\r\nconnection: upgrade\r\n\r\n"
    agent = Agent(lambda _r, _n: switch)
    async with serving(agent) as base:
        upstream = Upstream(base)
        with pytest.raises(UpstreamError, match="switched protocols"):
            await upstream.get(b"/status")
        await upstream.aclose()


async def test_a_reply_read_faster_than_it_is_passed_on_is_held_to_a_bound() -> None:
    from mantle_stream.gate import upstream as client

    size = 8 * client._HIGH_WATER
    body = bytes(range(256)) * (size // 256)
    big = b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % size + body
    agent = Agent(lambda _r, n: big if n == 0 else OK)
    async with serving(agent) as base:
        upstream = Upstream(base)
        async with upstream.request(b"GET", b"/big", [(b"host", upstream.netloc)]) as reply:
            await anyio.sleep(0.3)  # the agent writes on; nobody takes the body
            held = reply._connection.reply.buffered  # type: ignore[union-attr]
            assert held <= client._HIGH_WATER + 256 * 1024
            assert await reply.read() == body  # all of it, in order, once taken
        assert await upstream.get(b"/status") == (200, b"ok")  # and the connection kept
        await upstream.aclose()
    assert agent.connections == 1


@pytest.mark.parametrize(
    "parts, message",
    [([b"", OK], "no reply within 0.2 s"), ([OK[:-2], b"ok"], "nothing read for 0.2 s")],
    ids=["head", "body"],
)
async def test_an_agent_that_stops_writing_is_given_up_on_after_the_read_timeout(
    parts: list[bytes], message: str
) -> None:
    agent = Agent(lambda _r, _n: parts, between=lambda: anyio.sleep(5))
    async with serving(agent) as base:
        upstream = Upstream(base, read_timeout=0.2)
        with anyio.fail_after(3), pytest.raises(UpstreamError, match=message):
            await upstream.get(b"/status")
        await upstream.aclose()


@pytest.mark.parametrize(
    "target, header",
    [(b"/x HTTP/1.1\r\nx: y", b"v"), (b"/x", b"v\r\nx: y"), (b"/x", b"v\nx: y"), (b"/x", b"v\0")],
    ids=["target", "crlf", "lf", "nul"],
)
async def test_a_request_that_would_split_on_the_wire_is_refused(
    target: bytes, header: bytes
) -> None:
    agent = Agent()
    async with serving(agent) as base:
        upstream = Upstream(base)
        with pytest.raises(UpstreamError, match="line break"):
            await upstream.get(target, [(b"x-test", header)])
        await upstream.aclose()
    assert agent.requests == []


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
async def test_an_https_agent_is_reached_over_tls_and_its_connection_kept(
    tmp_path: Path,
) -> None:
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(cert, key)
    client = ssl.create_default_context(cafile=str(cert))
    agent = Agent()
    tcp = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = tcp.extra(anyio.abc.SocketAttribute.local_port)
    listener = TLSListener(tcp, server, standard_compatible=False)
    async with listener, anyio.create_task_group() as tasks:
        tasks.start_soon(listener.serve, agent.handle)
        upstream = Upstream(f"https://127.0.0.1:{port}", ssl_context=client)
        assert await upstream.get(b"/status") == (200, b"ok")
        assert await upstream.get(b"/status") == (200, b"ok")
        await upstream.aclose()
        tasks.cancel_scope.cancel()
    assert agent.connections == 1 and len(agent.requests) == 2
