"""``mantle-stream demo``: an embedded simulator streaming into the live view.

An edge module. It replays the bundled example conversations (the same data
as ``examples/eval/``) the way a Mantle simulator would: several
conversations at once over real loopback TCP connections, with believable
pacing (users take a while to type, tools return quickly), reading the
evaluator's stop messages on the same connection. When a conversation is
settled early the simulated client ends it on the spot — with a
``session_ended`` — and the turns and events it did not have to play are
counted as saved.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import anyio
import anyio.abc

from mantle_stream._scenario import Scenario, load_scenario_text

__all__ = ["DemoConversation", "DemoStats", "demo_conversations", "demo_scenarios", "simulate"]

#: Seconds before an event of each kind is "recorded", at speed 1.
PACE = {"user": 0.7, "bot": 0.3, "tool_executed": 0.15}
OTHER_PACE = 0.05


def _data() -> list[Path]:
    root = resources.files("mantle_stream") / "_demo_data"
    return sorted(Path(str(p)) for p in root.iterdir())


def demo_scenarios() -> list[Scenario]:
    """The bundled example scenarios."""
    return [load_scenario_text(p.read_text(encoding="utf-8"), f"demo/{p.name}")
            for p in _data() if p.suffix == ".yml"]


@dataclass
class DemoConversation:
    conversation_id: str
    lines: list[bytes]
    kinds: list[str]

    @property
    def turns(self) -> int:
        return self.kinds.count("user")


def demo_conversations() -> list[DemoConversation]:
    """Every bundled conversation, in file order, as raw lines."""
    out: dict[str, DemoConversation] = {}
    for path in _data():
        if path.suffix != ".jsonl":
            continue
        for raw in path.read_bytes().splitlines():
            if not raw.strip():
                continue
            row = json.loads(raw)
            cid = row.get("conversation_id") or row.get("sender_id")
            kind = row.get("event") or next(
                (k for k in row if isinstance(row[k], dict) and k != "metadata"), "other")
            conv = out.setdefault(cid, DemoConversation(cid, [], []))
            conv.lines.append(raw + b"\n")
            conv.kinds.append(kind)
    return list(out.values())


@dataclass
class DemoStats:
    """What the simulated clients did; read by the CLI for its closing line."""

    sent: int = 0
    saved_events: int = 0
    saved_turns: int = 0
    stopped: list[str] = field(default_factory=list)


def _ending_line(conv: DemoConversation, sent: int) -> bytes:
    """A ``session_ended`` right after the last event the client sent."""
    last = json.loads(conv.lines[sent - 1])
    ending = {"conversation_id": conv.conversation_id,
              "sequence": int(last.get("sequence", sent - 1)) + 1,
              "event_id": f"{conv.conversation_id}-stopped",
              "metadata": last.get("metadata", {}), "session_ended": {}}
    return json.dumps(ending).encode() + b"\n"


async def _client(host: str, port: int, conv: DemoConversation, speed: float,
                  rng: random.Random, stats: DemoStats) -> None:
    stream = await anyio.connect_tcp(host, port)
    stopped = anyio.Event()

    async def listen() -> None:
        buffer = b""
        async for data in stream:
            buffer += data
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                message = json.loads(line)
                if message.get("stop") and message.get("conversation_id") == \
                        conv.conversation_id:
                    stopped.set()
                    return

    async with stream, anyio.create_task_group() as tg:
        tg.start_soon(listen)
        sent = 0
        for line, kind in zip(conv.lines, conv.kinds, strict=True):
            delay = PACE.get(kind, OTHER_PACE) * rng.uniform(0.6, 1.4) / speed
            with anyio.move_on_after(delay):
                await stopped.wait()
            if stopped.is_set():
                break
            await stream.send(line)
            sent += 1
            stats.sent += 1
            if sent == len(conv.lines):
                break
        if stopped.is_set() and sent < len(conv.lines):
            await stream.send(_ending_line(conv, sent))
            stats.stopped.append(conv.conversation_id)
            stats.saved_events += len(conv.lines) - sent
            stats.saved_turns += conv.kinds[sent:].count("user")
        tg.cancel_scope.cancel()


async def simulate(address: str, conversations: list[DemoConversation], *, speed: float = 1.0,
                   concurrency: int = 5, seed: int = 11, stats: DemoStats | None = None,
                   on_done: Callable[[], object] | None = None) -> DemoStats:
    """Play ``conversations`` against a ``tcp://host:port`` listener, a few at a time."""
    host, _, port = address.removeprefix("tcp://").rpartition(":")
    stats = stats if stats is not None else DemoStats()
    rng = random.Random(seed)
    limit = anyio.Semaphore(concurrency)

    async def one(conv: DemoConversation, start_delay: float) -> None:
        await anyio.sleep(start_delay)
        async with limit:
            await _client(host, int(port), conv, speed, random.Random(rng.random()), stats)

    async with anyio.create_task_group() as tg:
        for i, conv in enumerate(conversations):
            tg.start_soon(one, conv, i * 0.4 / speed)
    if on_done is not None:
        on_done()
    return stats
