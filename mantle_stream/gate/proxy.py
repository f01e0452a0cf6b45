"""The gate's HTTP side: a reverse proxy in front of one agent, as an ASGI application.

An edge module (anyio). :class:`GateProxy` is served by uvicorn
(:mod:`mantle_stream.gate.serve`); every request goes to the one configured
upstream (through :class:`~mantle_stream.gate.upstream.Upstream`) — the request
target only ever supplies the path and query, so the gate is not an open
proxy — with its method, path, query string, headers and
body unchanged but for ``Host`` (and the hop-by-hop headers a proxy must not
pass on), and the reply comes back unchanged, its body streamed as it
arrives (an agent's NDJSON lines reach the simulator as it writes them).

What it reads on the way (simulator.md's protocol), for
:class:`~mantle_stream.gate.runs.GateJudge`:

* ``POST /webhooks/rest/webhook``: a run's message (``sender``, ``message``,
  ``metadata``). Before forwarding, it waits (at most ``ready_timeout``
  seconds) until the run's previous exchange has been judged; a run that
  failed gets ``200 []`` instead, which ends it. After the reply, the run's
  tracker is read and judged in the background.
* ``POST /conversations/{id}/tracker/events``: the run's initial slots.
* ``GET /conversations/{id}/tracker``: the simulator reads the finished run:
  the gate reads it too and ends the run.

It fails open: whatever goes wrong in judging, the run is forwarded
unchanged and the problem reported. Request bodies are bounded
(``max_body``, 413 beyond); an upstream that cannot be reached gives 502 with
a one-line reason, which Rasa's simulator retries as it would without the gate.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Awaitable, Callable, Coroutine, MutableMapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import anyio
import msgspec

from mantle_stream.core.urls import redact
from mantle_stream.gate.runs import GateJudge
from mantle_stream.gate.upstream import Upstream, UpstreamError
from mantle_stream.gate.upstream import reason as _reason
from mantle_stream.gate.wire import HOLD_HEAD

__all__ = ["GateOptions", "GateProxy"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

#: Headers that belong to one hop (RFC 9110 7.6.1), never passed on by a proxy.
HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
    }
)
WEBHOOK = "/webhooks/rest/webhook"
_CONVERSATION = re.compile(r"^/conversations/([^/]+)/tracker(/events)?$")
_decode = msgspec.json.Decoder().decode


@dataclass(frozen=True)
class GateOptions:
    """How the gate forwards and waits."""

    upstream: str  # the agent's base URL
    max_body: int = 1 << 20  # bytes of a request body (the socket listener's line cap)
    ready_timeout: float = 10.0  # a message waits this long for its run's last judging
    upstream_timeout: float = 300.0  # seconds an upstream read may take (per read)
    tracker_timeout: float = 10.0  # seconds a tracker read of the gate's may take


class _TooLarge(Exception):
    pass


class _Aborted(Exception):
    """A reply cut off mid-way (the agent went away): the server closes the connection."""


class GateProxy:
    """The ASGI application: forwards everything, stops failed runs."""

    def __init__(
        self,
        options: GateOptions,
        judge: GateJudge,
        upstream: Upstream,
        spawn: Callable[[Callable[[], Coroutine[Any, Any, None]]], None],
    ) -> None:
        self.options = options
        self.judge = judge
        self.upstream = upstream
        self.spawn = spawn  # starts a background task in the gate's task group
        self._ready: dict[str, anyio.Event] = {}  # runs whose last exchange is being judged
        self.tracker_reads = 0  # by the simulator, each the end of a run
        self.last_end = 0.0  # loop time of the last run's end
        self.in_flight = 0

    def pending_judging(self) -> bool:
        """Whether a run's tracker is being read or judged now."""
        return bool(self._ready)

    # ------------------------------------------------------------------ ASGI

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan is off; websockets are not Rasa's
            return
        self.in_flight += 1
        started: list[bool] = []

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                started.append(True)
            await send(message)

        try:
            await self._http(scope, receive, sending)
        except Exception as exc:  # never a traceback: the simulator gets a reason
            self.judge.request_failed(_reason(exc))
            if not started:
                await _answer(send, 502, f"mantle-stream gate: {_reason(exc)}\n")
            else:  # mid-reply: the connection is closed, the reply left incomplete
                raise _Aborted from None
        finally:
            self.in_flight -= 1

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            body = await self._body(receive)
        except _TooLarge:
            await _answer(
                send,
                413,
                f"mantle-stream gate: request body over {self.options.max_body} bytes\n",
            )
            return
        method: str = scope["method"]
        path = _target_path(scope).decode("latin-1")  # still percent-encoded
        webhook = method == "POST" and path == WEBHOOK
        cid: str | None = None
        ends_run = False
        if webhook:
            cid = self._message(body)
            if cid is not None:
                await self._wait_ready(cid)
                if self.judge.stop_now(cid):
                    await _answer(send, 200, b"[]", "application/json")
                    return
        else:
            found = _CONVERSATION.match(path)
            if found is not None:
                target = unquote(found.group(1))
                if found.group(2) and method == "POST":
                    self._slots(target, body)
                elif not found.group(2) and method == "GET" and target in self.judge.runs:
                    cid, ends_run = target, True  # (another reader's trackers are not runs)
        complete = await self._forward(scope, body, send)
        if cid is not None and complete:
            if ends_run:
                self.tracker_reads += 1
                self.last_end = anyio.current_time()
            if self.judge.reads_tracker:
                self._judge_later(cid, final=ends_run)
            elif ends_run:
                self.judge.ended(cid)

    async def _body(self, receive: Receive) -> bytes:
        parts = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.options.max_body:
                raise _TooLarge
            parts.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(parts)

    # ------------------------------------------------------------------ reading the run

    def _message(self, body: bytes) -> str | None:
        """The run a webhook message is of, told to the judge; None if it names none."""
        try:
            payload = _decode(body)
        except (msgspec.DecodeError, RecursionError):
            return None
        if not isinstance(payload, dict) or not isinstance(payload.get("sender"), str):
            return None
        cid: str = payload["sender"]
        self.judge.message(cid, payload.get("message"), payload.get("metadata"))
        return cid

    def _slots(self, cid: str, body: bytes) -> None:
        try:
            events = _decode(body)
        except (msgspec.DecodeError, RecursionError):
            return
        self.judge.slots(cid, events)

    async def _wait_ready(self, cid: str) -> None:
        """A run's next message waits for its last exchange's events to be applied, at
        most ``ready_timeout`` seconds (then it goes on: the gate fails open)."""
        ready = self._ready.get(cid)
        if ready is not None:
            with anyio.move_on_after(self.options.ready_timeout):
                await ready.wait()

    def _judge_later(self, cid: str, *, final: bool) -> None:
        ready = self._ready[cid] = anyio.Event()

        async def judge() -> None:
            try:
                await self._read_tracker(cid, final=final)
            except BrokenPipeError:
                raise  # the outputs' reader went away: the command ends quietly
            except Exception as exc:  # fail open: the run goes on unjudged, reported
                self.judge.problem(self.judge.run(cid), f"judging it failed: {_reason(exc)}")
            finally:
                ready.set()
                if self._ready.get(cid) is ready:
                    del self._ready[cid]

        self.spawn(judge)

    async def _read_tracker(self, cid: str, *, final: bool) -> None:
        run = self.judge.run(cid)
        # The id as one path segment, whatever it holds.
        segment = quote(cid, safe="").replace(".", "%2E").encode()
        try:
            with anyio.fail_after(self.options.tracker_timeout):
                status, body = await self.upstream.get(b"/conversations/" + segment + b"/tracker")
        except (UpstreamError, TimeoutError) as exc:
            self.judge.problem(run, f"its tracker could not be read: {_reason(exc)}")
            if final:
                self.judge.tracker(cid, b'{"sender_id": "", "events": []}', final=True)
            return
        if status != 200:
            self.judge.problem(run, f"its tracker could not be read: HTTP {status}")
            return
        self.judge.tracker(cid, body, final=final)

    # ------------------------------------------------------------------ forwarding

    async def _forward(self, scope: Scope, body: bytes, send: Send) -> bool:
        """Send the request upstream and stream the reply back; True when the whole
        reply was passed on."""
        query: bytes = scope.get("query_string") or b""
        target = _target_path(scope) + (b"?" + query if query else b"")
        headers = _forwarded(scope["headers"], self.upstream.netloc)
        async with contextlib.AsyncExitStack() as exchange:
            try:
                reply = await exchange.enter_async_context(
                    self.upstream.request(scope["method"].encode(), target, headers, body)
                )
            except UpstreamError as exc:
                await _answer(
                    send,
                    502,
                    f"mantle-stream gate: the agent at {redact(self.options.upstream)} "
                    f"did not answer: {_reason(exc)}\n",
                )
                return False
            # A reply with a body to come: its head may go with the body's first bytes.
            hold = HOLD_HEAD.set(scope["method"] != "HEAD" and reply.status not in (204, 304))
            try:
                await send(
                    {
                        "type": "http.response.start",
                        "status": reply.status,
                        "headers": [
                            (k, v) for k, v in reply.headers if k.lower() not in HOP_BY_HOP
                        ],
                    }
                )
            finally:
                HOLD_HEAD.reset(hold)
            async for chunk in reply.chunks():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        return 200 <= reply.status < 300


def _target_path(scope: Scope) -> bytes:
    """The request target's path, as sent (still percent-encoded). A target in absolute
    form (``GET http://elsewhere/x``, as to a forward proxy) gives its path only: the
    gate forwards to its upstream and nowhere else."""
    raw: bytes = scope.get("raw_path") or scope["path"].encode()
    raw = raw.split(b"?", 1)[0]
    if not raw.startswith(b"/"):
        raw = urlsplit(raw).path or b"/"
    return raw


def _forwarded(headers: list[tuple[bytes, bytes]], host: bytes) -> list[tuple[bytes, bytes]]:
    """The request's headers as the upstream gets them: ``Host`` rewritten, hop-by-hop
    headers (and those ``Connection`` names) left out, the rest unchanged, in order."""
    named = {
        token.strip().lower()
        for key, value in headers
        if key.lower() == b"connection"
        for token in value.split(b",")
    }
    out = [(b"host", host)]
    for key, value in headers:
        lower = key.lower()
        if lower == b"host" or lower in HOP_BY_HOP or lower in named:
            continue
        out.append((key, value))
    return out


async def _answer(send: Send, status: int, body: str | bytes, kind: str = "text/plain") -> None:
    data = body.encode() if isinstance(body, str) else body
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (
                    b"content-type",
                    kind.encode() + (b"; charset=utf-8" if kind == "text/plain" else b""),
                ),
                (b"content-length", str(len(data)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": data, "more_body": False})
