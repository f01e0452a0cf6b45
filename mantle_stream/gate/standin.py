"""A stand-in agent and a stand-in simulator that speak Rasa's protocol, for the demo.

An edge module (anyio, httpx). Both follow the protocol of Rasa's own
``evaluate_agent`` as mantle_stream's docs state it, and nothing of Rasa
is imported:

* :class:`StandInAgent` is an ASGI application that replays recorded
  conversations turn by turn: ``/session_start`` plays what a recording holds
  before its first real user message, each later message the recording's next
  turn. A webhook reply is NDJSON (``?stream=true``, one ``{"recipient_id",
  "text"}`` object per line, ``pace`` seconds apart) or a JSON array; slot
  events posted to ``tracker/events`` are kept; ``GET
  /conversations/{id}/tracker`` returns what was played so far as a tracker
  document of flat events; ``GET /status`` answers.
* :func:`simulate` plays runs the way the simulator does: session start
  (metadata ``is_simulation``), the initial slots posted, then each user
  message of the run until a reply holds no text (the gate stopped it) or
  the messages run out, then the tracker read.

The recordings are ProtoJSON lines (:func:`recordings`), turned into the flat
events a Rasa server's tracker endpoint returns (:func:`flat_row`).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import anyio

from mantle_stream.core.events.model import PAYLOAD_FIELDS, starts_turn

__all__ = [
    "SimulatedRun",
    "StandInAgent",
    "flat_row",
    "read_body",
    "recordings",
    "runs_of",
    "serving",
    "simulate",
]

_ENVELOPE = {"conversation_id", "timestamp", "sequence", "event_id", "metadata"}
_JSON_TEXTS = {"value_json": "value", "arguments_json": "arguments", "result_json": "result"}


def flat_row(row: dict[str, Any]) -> dict[str, Any]:
    """A ProtoJSON event as a Rasa server's tracker endpoint shows it: ``{"event":
    kind, "timestamp", ...fields}``, JSON texts parsed, metadata an object when set."""
    kind = next(
        k for k in row if k in PAYLOAD_FIELDS or (k not in _ENVELOPE and isinstance(row[k], dict))
    )
    flat: dict[str, Any] = {"event": kind, "timestamp": row.get("timestamp")}
    metadata = row.get("metadata")
    if isinstance(metadata, str) and metadata:
        flat["metadata"] = json.loads(metadata)
    for key, value in (row.get(kind) or {}).items():
        if key in _JSON_TEXTS:
            flat[_JSON_TEXTS[key]] = None if value is None else json.loads(value or "{}")
        else:
            flat[key] = value
    return flat


def recordings(lines: Iterable[bytes]) -> dict[str, list[dict[str, Any]]]:
    """ProtoJSON lines as each conversation's flat events, in ``sequence`` order."""
    rows: dict[str, list[dict[str, Any]]] = {}
    for line in lines:
        if line.strip():
            row = json.loads(line)
            rows.setdefault(row["conversation_id"], []).append(row)
    return {
        cid: [flat_row(r) for r in sorted(group, key=lambda r: r.get("sequence") or 0)]
        for cid, group in rows.items()
    }


def _turns(events: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """A recording cut before each real user message: the opening, then one per turn."""
    turns: list[list[dict[str, Any]]] = [[]]
    for event in events:
        if event["event"] == "user" and starts_turn(event.get("text")):
            turns.append([])
        turns[-1].append(event)
    return turns


async def read_body(receive: Any) -> bytes:
    """An ASGI request's whole body."""
    body = b""
    while True:
        message = await receive()
        body += bytes(message.get("body", b""))
        if not message.get("more_body"):
            return body


@dataclass
class _Played:
    turns: list[list[dict[str, Any]]]
    events: list[dict[str, Any]] = field(default_factory=list)
    next: int = 0  # the next turn to play


Scope = dict[str, Any]


class StandInAgent:
    """An ASGI app playing recorded conversations as a Rasa server would."""

    def __init__(
        self,
        recorded: dict[str, list[dict[str, Any]]],
        *,
        pace: float = 0.0,
        broker: str | None = None,
    ) -> None:
        self.recorded = recorded
        self.pace = pace  # seconds between two NDJSON lines of a reply
        # A file event broker: each event played is appended as a line (flat, with
        # its conversation and position), as the agent plays it.
        self.broker = broker
        self.played: dict[str, _Played] = {}
        self.messages = 0  # webhook messages handled

    def _run(self, cid: str) -> _Played:
        played = self.played.get(cid)
        if played is None:
            played = self.played[cid] = _Played(_turns(self.recorded.get(cid, [])))
        return played

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = await read_body(receive)
        path, method = scope["path"], scope["method"]
        if path == "/webhooks/rest/webhook" and method == "POST":
            await self._webhook(json.loads(body), b"stream=true" in scope["query_string"], send)
        elif path == "/status":
            await _json(send, {"version": "stand-in", "engine_version": "mantle"})
        elif path.startswith("/conversations/") and path.endswith("/tracker/events"):
            cid = unquote(path.split("/")[2])
            for event in json.loads(body):
                self._run(cid).events.append({**event, "timestamp": time.time()})
            await _json(send, {"sender_id": cid, "events": self._run(cid).events})
        elif path.startswith("/conversations/") and path.endswith("/tracker"):
            cid = unquote(path.split("/")[2])
            await _json(send, {"sender_id": cid, "events": self._run(cid).events})
        else:
            await _json(send, {"error": "not found"}, 404)

    async def _webhook(self, payload: dict[str, Any], stream: bool, send: Any) -> None:
        self.messages += 1
        cid = payload["sender"]
        played = self._run(cid)
        opening = payload.get("message") == "/session_start"
        turn: list[dict[str, Any]] = []
        if (opening and played.next == 0) or (not opening and played.next < len(played.turns)):
            turn = played.turns[played.next]
            played.next += 1
        texts = [e["text"] for e in turn if e["event"] == "bot" and e.get("text")]
        if not stream:
            self._save(cid, played, turn)
            await _json(send, [{"recipient_id": cid, "text": t} for t in texts])
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/x-ndjson")],
            }
        )
        for text in texts:
            if self.pace:
                await anyio.sleep(self.pace)
            line = json.dumps({"recipient_id": cid, "text": text}).encode() + b"\n"
            await send({"type": "http.response.body", "body": line, "more_body": True})
        self._save(cid, played, turn)  # with the turn, as Rasa saves the tracker
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    def _save(self, cid: str, played: _Played, turn: list[dict[str, Any]]) -> None:
        first = len(played.events)
        played.events += turn
        if self.broker is not None and turn:
            with open(self.broker, "ab") as out:
                for position, event in enumerate(turn, first):
                    row = {**event, "sender_id": cid, "sequence": position}
                    out.write(json.dumps(row).encode() + b"\n")


async def _json(send: Any, value: Any, status: int = 200) -> None:
    data = json.dumps(value).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": data})


@dataclass
class SimulatedRun:
    """One run to play: its id, its user messages, the setup it starts with."""

    conversation_id: str
    messages: list[str]
    initial_slots: dict[str, Any] = field(default_factory=dict)
    seed: dict[str, Any] = field(default_factory=dict)  # session-start metadata
    turns: int = 0  # messages the agent answered with text
    stopped: bool = False  # a reply held no text: the run ended there
    first_text: list[float] = field(default_factory=list)  # seconds to each reply's first text
    tracker: bytes = b""  # the tracker read at the end


def runs_of(recorded: dict[str, list[dict[str, Any]]]) -> list[SimulatedRun]:
    """The runs that replay recordings: each recording's real user messages."""
    return [
        SimulatedRun(
            cid,
            [e["text"] for e in events if e["event"] == "user" and starts_turn(e.get("text"))],
        )
        for cid, events in recorded.items()
    ]


async def _send(
    client: Any, base: str, run: SimulatedRun, text: str, metadata: dict[str, Any]
) -> list[str]:
    """One message, as the simulator sends it; the texts of the reply."""
    body = {"sender": run.conversation_id, "message": text, "metadata": metadata}
    started = time.perf_counter()
    texts: list[str] = []
    async with client.stream(
        "POST", f"{base}/webhooks/rest/webhook", params={"stream": "true"}, json=body
    ) as response:
        response.raise_for_status()
        kind = response.headers.get("content-type", "")
        if kind.startswith(("application/json", "text/json")):
            data = json.loads(await response.aread())
            return [e["text"] for e in data if isinstance(e, dict) and e.get("text")]
        async for line in response.aiter_lines():
            if line.strip():
                entry = json.loads(line)
                if entry.get("text"):
                    if not texts:
                        run.first_text.append(time.perf_counter() - started)
                    texts.append(entry["text"])
    return texts


async def simulate(
    base: str, runs: list[SimulatedRun], *, concurrency: int = 8, think: float = 0.0
) -> None:
    """Play ``runs`` against the agent at ``base`` (a gate, say), ``concurrency`` at a
    time, ``think`` seconds between a reply and the next message."""
    import httpx

    limit = anyio.Semaphore(concurrency)
    async with httpx.AsyncClient(timeout=30.0, trust_env=False) as client:

        async def play(run: SimulatedRun) -> None:
            async with limit:
                metadata = {"is_simulation": True}
                await _send(client, base, run, "/session_start", {**run.seed, **metadata})
                if run.initial_slots:
                    slots = [
                        {"event": "slot", "name": k, "value": v}
                        for k, v in run.initial_slots.items()
                    ]
                    response = await client.post(
                        f"{base}/conversations/{run.conversation_id}/tracker/events", json=slots
                    )
                    response.raise_for_status()
                for text in run.messages:
                    if think:
                        await anyio.sleep(think)
                    if not await _send(client, base, run, text, metadata):
                        run.stopped = True
                        break
                    run.turns += 1
                response = await client.get(f"{base}/conversations/{run.conversation_id}/tracker")
                run.tracker = response.content

        async with anyio.create_task_group() as tasks:
            for run in runs:
                tasks.start_soon(play, run)


@contextlib.asynccontextmanager
async def serving(app: Any, host: str = "127.0.0.1") -> AsyncIterator[str]:
    """Serve an ASGI app with uvicorn on a free loopback port, in this event loop, for
    as long as the block lasts; its base URL."""
    import uvicorn

    from mantle_stream.gate.serve import listening_socket, quiet_server

    sock = listening_socket(host, 0)
    port = sock.getsockname()[1]
    server = quiet_server(
        uvicorn.Config(app, lifespan="off", log_level="warning", access_log=False)
    )
    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(server.serve, [sock])
            while not server.started:
                await anyio.sleep(0.005)
            try:
                yield f"http://{host}:{port}"
            finally:
                server.should_exit = True
    finally:
        sock.close()
