"""Shared pieces of the benchmarks: a generated scenario and feed, timing, machine facts.

The scenario has 30 assertions covering every assertion kind; the feed is a
deterministic (seeded) interleaving of realistic conversations in the wire
format Mantle writes (ProtoJSON: every unset field null, metadata a JSON
string), a third of whose events are kinds no check reads (``stack``,
``action``, ``bot_turn_ended``), as in real traffic. Nothing here is
imported by the package.
"""

from __future__ import annotations

import json
import os
import platform
import random
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import mantle_stream as ms
from mantle_stream.feeds.lines import CHUNK_BYTES, split_lines

SKILLS = ["card_replace", "transfer", "identity", "balance"]
TOOLS = [
    "check_balance",
    "order_replacement",
    "check_address",
    "get_limits",
    "lookup_payee",
    "search_knowledge",
    "set_fields",
    "complete",
    "listen",
]
MEMORY = [
    "card_replace.replacement_reason",
    "card_replace.selected_card_id",
    "transfer.amount",
    "transfer.payee",
    "project.customer_authenticated",
    "identity.failed_attempts",
    "card_replace.draft_order_id",
    "card_replace.fraud_review",
]
UTTERS = [
    "utter_greet",
    "utter_ask_reason",
    "utter_replacement_ordered",
    "utter_confirm",
    "utter_cannot_help",
    "utter_goodbye",
]


def scenario_assertions() -> list[dict[str, Any]]:
    """30 assertions, every kind at least once."""
    return [
        {"skill_activated": {"skill_id": "card_replace"}},
        {"skill_completed": {"skill_id": "card_replace"}},
        {"skill_cancelled": {"skill_id": "transfer", "step_id": "autonomous"}},
        {"skill_interrupted": {"skill_id": "card_replace"}},
        {"skill_resumed": {"skill_id": "card_replace"}},
        {"ordered_block_entered": {"skill_id": "card_replace", "block_id": "main"}},
        {
            "ordered_block_completed": {
                "skill_id": "card_replace",
                "block_id": "main",
                "step_id": "confirm",
            }
        },
        {"ordered_block_cancelled": {"skill_id": "identity", "block_id": "verify"}},
        {"ordered_block_interrupted": {"skill_id": "card_replace", "block_id": "main"}},
        {"ordered_block_resumed": {"skill_id": "card_replace", "block_id": "main"}},
        {
            "memory_was_set": [
                {"name": "card_replace.replacement_reason", "value": "damaged"},
                {"name": "card_replace.selected_card_id"},
            ]
        },
        {"memory_was_set": [{"name": "transfer.amount", "value": 250}]},
        {"memory_was_not_set": [{"name": "card_replace.fraud_review"}]},
        {"memory_was_not_set": [{"name": "identity.failed_attempts", "value": 3}]},
        {"memory_was_cleared": [{"name": "card_replace.draft_order_id"}]},
        {
            "tool_executed": {
                "tool_name": "order_replacement",
                "source": "local",
                "skill_id": "card_replace",
                "arguments": {"shipping": "standard"},
            }
        },
        {"tool_executed": {"tool_name": "lookup_payee", "source": "mcp", "mcp_server": "banking"}},
        {"tool_executed": {"tool_name": "check_balance", "source": "local", "is_error": False}},
        {
            "tools_within_one_turn": {
                "allow_extra_calls": False,
                "calls": [
                    {"tool_executed": {"tool_name": "check_address", "source": "local"}},
                    {"tool_executed": {"tool_name": "order_replacement", "source": "local"}},
                ],
            }
        },
        {
            "tools_within_one_turn": {
                "allow_extra_calls": True,
                "ordered": True,
                "calls": [
                    {"tool_executed": {"tool_name": "check_balance", "source": "local"}},
                    {"tool_executed": {"tool_name": "get_limits", "source": "local"}},
                ],
            }
        },
        {
            "tools_within_one_turn": {
                "allow_extra_calls": True,
                "calls": [
                    {"tool_executed": {"tool_name": "check_balance", "source": "local"}},
                    {"tool_executed": {"tool_name": "check_balance", "source": "local"}},
                    {"tool_executed": {"tool_name": "get_limits", "source": "local"}},
                ],
            }
        },
        {"bot_uttered": {"text_matches": "replacement.*(ordered|placed)"}},
        {
            "bot_uttered": {
                "utter_name": "utter_confirm",
                "buttons": [{"title": "Yes"}, {"title": "No", "payload": "/deny"}],
            }
        },
        {"bot_did_not_utter": {"utter_name": "utter_cannot_help"}},
        {"bot_did_not_utter": {"text_matches": "(?i)please wait"}},
        {
            "sequencing": [
                {"memory_was_set": "card_replace.replacement_reason"},
                {"tool_executed": {"tool_name": "order_replacement", "source": "local"}},
                {"skill_completed": {"skill_id": "card_replace"}},
            ]
        },
        {
            "sequencing": [
                {"skill_activated": {"skill_id": "card_replace"}},
                {"tool_executed": {"tool_name": "check_address", "source": "local"}},
                {"memory_was_cleared": "card_replace.draft_order_id"},
            ]
        },
        {"skill_activated": {"skill_id": "balance"}},
        {"memory_was_set": [{"name": "project.customer_authenticated", "value": True}]},
        {"bot_uttered": {"utter_name": "utter_goodbye"}},
    ]


def scenario(extra: list[dict[str, Any]] | None = None) -> ms.Scenario:
    body = {
        "scenario": {
            "name": "bench",
            "simulation_context": "benchmark",
            "goals": {"assertions": scenario_assertions() + (extra or [])},
        }
    }
    return ms.load_scenario_text(json.dumps(body), "bench.yml")


#: Rasa's SQL tracker store table on SQLite, with the index on sender_id SQLAlchemy
#: creates for it (``index=True``): two statements, for ``executescript``.
TRACKER_STORE = """CREATE TABLE events (
    id INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    sender_id VARCHAR(255) NOT NULL,
    type_name VARCHAR(255) NOT NULL,
    timestamp FLOAT,
    intent_name VARCHAR(255),
    action_name VARCHAR(255),
    data TEXT
);
CREATE INDEX ix_events_sender_id ON events (sender_id);"""
#: Share of events of the kinds no check reads, as in real Mantle traffic.
SKIPPED_SHARE = 1 / 3
_SKIPPED = [
    ({"stack": {"update": '[{"op": "replace", "path": "/0/step_id", "value": "collect"}]'}}, None),
    (
        {
            "action": {
                "name": "action_listen",
                "policy": None,
                "confidence": None,
                "action_text": None,
                "hide_rule_turn": False,
            }
        },
        None,
    ),
    ({"bot_turn_ended": {}}, None),
]


def _meta(**fields: Any) -> str:
    return json.dumps(fields)


def _payload(
    rng: random.Random, skipped: float, unknown: float
) -> tuple[dict[str, Any], str | None]:
    """One event's payload and envelope metadata (a JSON string or None).

    The same draws are made whatever the shares, so feeds of different mixes
    hold the same known events at the same places, some of them replaced: a
    comparison of two mixes is one of the replaced events alone.
    """
    known = _known_payload(rng)
    r_unknown, r_skipped, which = rng.random(), rng.random(), rng.choice(_SKIPPED)
    if r_unknown < unknown:
        return {"agent_reflection": {"text": "hm", "score": 0.5}}, None
    if r_skipped < skipped:
        return which
    return known


def _known_payload(rng: random.Random) -> tuple[dict[str, Any], str | None]:
    """A payload of a kind some check reads, with its metadata."""
    r = rng.random()
    if r < 0.14:
        return {
            "user": {
                "text": rng.choice(
                    ["my card is damaged", "yes please", "how much can I spend?", "thanks, bye"]
                ),
                "parse_data": {},
                "input_channel": "rest",
                "message_id": None,
                "anonymized_at": None,
            }
        }, None
    if r < 0.30:
        buttons = (
            [{"title": "Yes", "payload": "/affirm"}, {"title": "No", "payload": "/deny"}]
            if rng.random() < 0.2
            else None
        )
        return (
            {
                "bot": {
                    "text": rng.choice(
                        [
                            "Your replacement was ordered.",
                            "Anything else?",
                            "Please wait a moment.",
                            "Sure.",
                        ]
                    ),
                    "data": {} if buttons is None else {"buttons": buttons},
                    "anonymized_at": None,
                }
            },
            _meta(utter_action=rng.choice(UTTERS)),
        )
    if r < 0.55:
        name = rng.choice(TOOLS)
        mcp = name == "lookup_payee"
        error = rng.random() < 0.05
        return (
            {
                "tool_executed": {
                    "tool_name": name,
                    "arguments_json": json.dumps(
                        {"shipping": rng.choice(["standard", "express"]), "card_id": "c-123"}
                    ),
                    "source": "mcp" if mcp else "local",
                    "result_json": '{"ok": true}',
                    "is_error": error,
                    "error_message": "timeout" if error else None,
                    "mcp_server": "banking" if mcp else None,
                }
            },
            _meta(skill_id=rng.choice(SKILLS)),
        )
    if r < 0.72:
        value = rng.choice(["damaged", "lost", 250, "250", True, 3, {"a": 1}])
        return {
            "memory_set": {
                "key": rng.choice(MEMORY),
                "value_json": json.dumps(value),
                "anonymized_at": None,
            }
        }, None
    if r < 0.76:
        return {"memory_cleared": {"key": rng.choice(MEMORY)}}, None
    if r < 0.88:
        kind = rng.choice(
            [
                "skill_activated",
                "skill_completed",
                "skill_interrupted",
                "skill_resumed",
                "skill_cancelled",
            ]
        )
        body: dict[str, Any] = {"skill_id": rng.choice(SKILLS)}
        if kind in ("skill_interrupted", "skill_resumed", "skill_cancelled"):
            body["step_id"] = rng.choice(["autonomous", "confirm"])
        return {kind: body}, None
    kind = rng.choice(
        [
            "ordered_block_entered",
            "ordered_block_completed",
            "ordered_block_interrupted",
            "ordered_block_resumed",
            "ordered_block_cancelled",
        ]
    )
    body = {"skill_id": rng.choice(SKILLS), "block_id": rng.choice(["main", "verify"])}
    if kind != "ordered_block_entered":
        body["step_id"] = rng.choice(["confirm", "collect"])
    return {kind: body}, None


def conversation_lines(
    cid: str,
    n_events: int,
    rng: random.Random,
    *,
    skipped: float = SKIPPED_SHARE,
    unknown: float = 0.0,
) -> Iterator[bytes]:
    """One conversation: session_started, n-2 events, session_ended, as Mantle writes them.

    ``skipped`` is the share of events of kinds no check reads, ``unknown`` the
    share of a kind this version does not know (a newer engine's).
    """
    for seq in range(n_events):
        metadata: str | None = None
        if seq == 0:
            payload: dict[str, Any] = {"session_started": {}}
        elif seq == n_events - 1:
            payload = {"session_ended": {}}
        else:
            payload, metadata = _payload(rng, skipped, unknown)
        row = {
            "conversation_id": cid,
            "timestamp": 1767261600.0 + seq * 0.37,
            "metadata": metadata,
            "event_id": f"0199f0c2-7a10-7000-8000-{seq:012x}",
            "sequence": seq,
            **payload,
            "user_id": None,
            "deployment_environment": None,
            "session_id": None,
        }
        yield json.dumps(row, separators=(",", ":")).encode()


def conversation_id(i: int) -> str:
    """The ``i``-th conversation's id, shaped like evaluate_agent's ``sim-<uuid4>``."""
    return f"sim-{i:08x}-0000-4000-8000-000000000000"


def feed(
    conversations: int,
    events: int,
    *,
    interleave: int = 50,
    seed: int = 7,
    skipped: float = SKIPPED_SHARE,
    unknown: float = 0.0,
) -> bytes:
    """``conversations`` × ``events`` lines; ``interleave`` conversations run at once."""
    rng = random.Random(seed)
    lines: list[bytes] = []
    for start in range(0, conversations, interleave):
        streams = [
            conversation_lines(conversation_id(i), events, rng, skipped=skipped, unknown=unknown)
            for i in range(start, min(start + interleave, conversations))
        ]
        while streams:
            for stream in list(streams):
                line = next(stream, None)
                if line is None:
                    streams.remove(stream)
                else:
                    lines.append(line)
    return b"\n".join(lines) + b"\n"


def chunks(data: bytes, size: int = CHUNK_BYTES) -> list[bytes]:
    """Split at line boundaries into ~size-byte chunks, as the feeds do."""
    return list(split_lines(data, size))


def best_after(scen: ms.Scenario, before: list[bytes], timed: list[bytes], repeat: int) -> float:
    """Best seconds to push ``timed`` into a fresh evaluator that has taken ``before``."""
    best = float("inf")
    for _ in range(repeat):
        evaluator = ms.Evaluator([scen])
        for part in before:
            evaluator.push_chunk(part)
        t0 = time.perf_counter()
        for part in timed:
            evaluator.push_chunk(part)
        best = min(best, time.perf_counter() - t0)
    return best


def best_of(fn: Callable[[], object], repeat: int) -> float:
    """Best wall time of ``repeat`` runs (the least disturbed by the machine)."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def machine() -> str:
    return (
        f"{platform.python_implementation()} {platform.python_version()} on "
        f"{platform.machine()}, {os.cpu_count()} cores, {platform.system()}; "
        f"msgspec {__import__('msgspec').__version__}; argv {' '.join(sys.argv[1:]) or '-'}"
    )
