"""``mantle-stream demo``: the bundled example runs played live, into the live view.

By default the way Rasa's own simulator plays them (:func:`demo_runs`): a
stand-in agent replays the recordings turn by turn over HTTP, a stand-in
simulator sends each run's messages through ``mantle-stream gate``, and the
gate ends each run at its next turn once it has failed
(:mod:`mantle_stream.gate.standin`).

With ``--socket``, the earlier demo: it replays the bundled example
conversations (the package's ``_demo_data`` is ``examples/eval/`` itself, one
copy: ProtoJSON event files and a flat tracker document) the way a Mantle simulator would: several
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
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from mantle_stream.core.events.flat import document_lines
from mantle_stream.core.recorded import load_results
from mantle_stream.core.scenario.load import load_scenario_text
from mantle_stream.core.scenario.model import Scenario

if TYPE_CHECKING:
    from mantle_stream.gate.standin import SimulatedRun

__all__ = [
    "DemoConversation",
    "DemoStats",
    "demo_assignments",
    "demo_conversations",
    "demo_recordings",
    "demo_runs",
    "demo_scenarios",
    "simulate",
]

#: Seconds before an event of each kind is "recorded", at speed 1.
PACE = {"user": 0.7, "bot": 0.3, "tool_executed": 0.15}
OTHER_PACE = 0.05


def _data(folder: str, suffix: str) -> list[Path]:
    root = Path(str(resources.files("mantle_stream") / "_demo_data" / folder))
    return sorted(p for p in root.iterdir() if p.suffix == suffix)


def demo_scenarios() -> list[Scenario]:
    """The bundled example scenarios, each named by a path the user can open (the
    failure digest cites ``path:line``): see :func:`_shown`."""
    return [
        load_scenario_text(p.read_text(encoding="utf-8"), _shown(p))
        for p in _data("scenarios", ".yml")
    ]


def _shown(path: Path) -> str:
    """The file's real path: relative to the current directory when inside it
    (``examples/eval/scenarios/...`` in a clone, where ``_demo_data`` is a link to
    ``examples/eval``), else absolute (the installed package's copy)."""
    real = path.resolve()
    try:
        return str(real.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(real)


def demo_assignments() -> dict[str, str]:
    """Which scenario each bundled conversation ran: from its evaluate_agent results folder."""
    root = resources.files("mantle_stream") / "_demo_data" / "results"
    return {cid: run.scenario for cid, run in load_results(str(root)).items()}


@dataclass
class DemoConversation:
    conversation_id: str
    lines: list[bytes]
    kinds: list[str]

    @property
    def turns(self) -> int:
        return self.kinds.count("user")


def demo_conversations() -> list[DemoConversation]:
    """Every bundled conversation, in file order, as raw lines (a tracker document's
    events as flat lines, each with the document's ``sender_id``)."""
    out: dict[str, DemoConversation] = {}
    sources = [p.read_bytes() for p in _data("events", ".jsonl") if p.name != "all.jsonl"]
    sources += [document_lines(p.read_bytes(), str(p))[1] for p in _data("trackers", ".json")]
    for data in sources:
        for raw in data.splitlines():
            if not raw.strip():
                continue
            row = json.loads(raw)
            cid = row.get("conversation_id") or row.get("sender_id")
            kind = row.get("event") or next(
                (k for k in row if isinstance(row[k], dict) and k != "metadata"), "other"
            )
            conv = out.setdefault(cid, DemoConversation(cid, [], []))
            conv.lines.append(raw + b"\n")
            conv.kinds.append(kind)
    return list(out.values())


@dataclass
class DemoStats:
    """What the simulated clients did; read by the CLI for its closing line."""

    saved_events: int = 0
    saved_turns: int = 0
    stopped: list[str] = field(default_factory=list)


def _ending_line(conv: DemoConversation, sent: int) -> bytes:
    """A ``session_ended`` right after the last event the client sent, as Mantle writes it."""
    last = json.loads(conv.lines[sent - 1])
    sequence = last.get("sequence")
    ending = {
        "conversation_id": conv.conversation_id,
        "timestamp": last.get("timestamp"),
        "metadata": None,
        "event_id": f"{conv.conversation_id}-stopped",
        "sequence": sent if sequence is None else sequence + 1,
        "session_ended": {},
        "user_id": None,
        "deployment_environment": None,
        "session_id": None,
    }
    return json.dumps(ending).encode() + b"\n"


async def _client(
    host: str, port: int, conv: DemoConversation, speed: float, rng: random.Random, stats: DemoStats
) -> None:
    stream = await anyio.connect_tcp(host, port)
    stopped = anyio.Event()

    async def listen() -> None:
        buffer = b""
        async for data in stream:
            buffer += data
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                message = json.loads(line)
                if message.get("stop") and message.get("conversation_id") == conv.conversation_id:
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
            if sent == len(conv.lines):
                break
        if stopped.is_set() and sent < len(conv.lines):
            await stream.send(_ending_line(conv, sent))
            stats.stopped.append(conv.conversation_id)
            stats.saved_events += len(conv.lines) - sent
            stats.saved_turns += conv.kinds[sent:].count("user")
        tg.cancel_scope.cancel()


async def simulate(
    address: str,
    conversations: list[DemoConversation],
    *,
    speed: float = 1.0,
    concurrency: int = 5,
    seed: int = 11,
    stats: DemoStats | None = None,
) -> DemoStats:
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
    return stats


# ------------------------------------------------------------------ through the gate


def demo_recordings() -> dict[str, list[dict[str, Any]]]:
    """Every bundled conversation as the flat events a Rasa server's tracker shows, for
    the stand-in agent to replay."""
    from mantle_stream.gate.standin import recordings

    lines = [
        line
        for p in _data("events", ".jsonl")
        if p.name != "all.jsonl"
        for line in p.read_bytes().splitlines()
    ]
    out = recordings(lines)
    for path in _data("trackers", ".json"):
        document = json.loads(path.read_bytes())
        out[document["sender_id"]] = document["events"]
    return out


def demo_runs(recorded: dict[str, list[dict[str, Any]]]) -> list[SimulatedRun]:
    """The bundled runs as Rasa's simulator plays them: each recording's user messages,
    after its scenario's initial slots are posted (that is how the gate tells the five
    scenarios apart: nothing else on the wire names them)."""
    from mantle_stream.gate.standin import runs_of

    scenarios = {s.stem: s for s in demo_scenarios()}
    assigned = demo_assignments()
    runs = runs_of(recorded)
    for run in runs:
        scenario = scenarios.get(assigned.get(run.conversation_id, ""))
        if scenario is not None:
            run.initial_slots = dict(scenario.initial_slots)
    return runs
