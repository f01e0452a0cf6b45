"""Small builders of real-format events, for tests of a team's own assertions.

A conversation is written as a list of events, each built by a function
named after its kind; :func:`conversation` turns them into the ProtoJSON
lines Mantle's event broker and tracker store write (an envelope with
exactly one payload key, ``value_json`` / ``arguments_json`` JSON-encoded
strings, ``metadata`` a JSON string or null), numbered by ``sequence`` from
0. :func:`verdicts` and :func:`results` push such lines through an
evaluator, end the input and say what it decided::

    from mantle_stream.testing import conversation, session_ended, skill, tool, user, verdicts

    def test_the_replacement_is_ordered(mantle_evaluator):  # the pytest plugin's fixture
        lines = conversation(
            user("my card is cracked"),
            skill("activated", "card_replace"),
            tool("order_replacement", skill_id="card_replace", args={"shipping": "standard"}),
            session_ended(),
            scenario="card_replace_damaged",
        )
        assert verdicts(mantle_evaluator, lines)[5] == "passed"

Without the pytest plugin, :func:`scenario` builds a scenario from its
assertions as a scenario file writes them (``verdicts(scenario({...}),
lines)``). Only the core is imported: nothing here opens a file or a socket.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mantle_stream.core.engine.evaluator import Evaluator
from mantle_stream.core.errors import UsageError
from mantle_stream.core.scenario.load import load_scenario_text
from mantle_stream.core.scenario.model import Scenario
from mantle_stream.core.verdicts import ConversationResult, Verdict

__all__ = [
    "TrackerEvent",
    "block",
    "bot",
    "conversation",
    "memory_cleared",
    "memory_set",
    "results",
    "scenario",
    "session_ended",
    "session_started",
    "skill",
    "tool",
    "user",
    "verdicts",
]

#: The timestamp of sequence 0 (2026-01-01 10:00 UTC); each next event one second later.
EPOCH = 1767261600.0


@dataclass(frozen=True)
class TrackerEvent:
    """One tracker event before it has a conversation: its kind, payload and metadata.

    ``sequence`` gives it a sequence of its own (to write a gap or a
    duplicate); by default it follows the event before it.
    """

    kind: str
    payload: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] | None = None
    sequence: int | None = None

    def row(
        self, conversation_id: str, sequence: int, scenario: str | None = None
    ) -> dict[str, Any]:
        """The event as Mantle writes it (``scenario``: put into its metadata, as a
        custom simulator names the scenario it plays)."""
        metadata = dict(self.metadata or {})
        if scenario is not None:
            metadata["scenario"] = scenario
        return {
            "conversation_id": conversation_id,
            "timestamp": EPOCH + sequence,
            "metadata": json.dumps(metadata) if metadata else None,
            "event_id": f"{conversation_id}-{sequence}",
            "sequence": sequence,
            self.kind: self.payload,
            "user_id": None,
            "deployment_environment": None,
            "session_id": None,
        }


def conversation(
    *events: TrackerEvent,
    conversation_id: str = "c",
    scenario: str | None = None,
    first: int = 0,
) -> list[bytes]:
    """The events as one conversation's ProtoJSON lines (each ending in a newline),
    numbered from ``first``; ``scenario`` names the scenario that judges it in
    every event's metadata (needed only when several are loaded and no results
    folder assigns it)."""
    lines = []
    sequence = first
    for event in events:
        if event.sequence is not None:
            sequence = event.sequence
        row = event.row(conversation_id, sequence, scenario)
        lines.append(json.dumps(row).encode() + b"\n")
        sequence += 1
    return lines


# --------------------------------------------------------------------- the kinds


def session_started() -> TrackerEvent:
    return TrackerEvent("session_started")


def session_ended() -> TrackerEvent:
    """Ends the conversation: what is still pending is decided."""
    return TrackerEvent("session_ended")


def user(text: str | None = "hello") -> TrackerEvent:
    """A user message; one whose text is not empty and does not start with ``/``
    starts a turn."""
    return TrackerEvent(
        "user",
        {
            "text": text,
            "parse_data": {},
            "input_channel": "rest",
            "message_id": None,
            "anonymized_at": None,
        },
    )


def bot(
    text: str | None = None,
    *,
    utter: str | None = None,
    buttons: list[dict[str, Any]] | None = None,
) -> TrackerEvent:
    """A bot message; ``utter`` is the response it was rendered from (metadata
    ``utter_action``), ``buttons`` its buttons (``{"title": ..., "payload": ...}``)."""
    return TrackerEvent(
        "bot",
        {
            "text": text,
            "data": {} if buttons is None else {"buttons": buttons},
            "anonymized_at": None,
        },
        metadata=None if utter is None else {"utter_action": utter},
    )


def memory_set(name: str, value: Any) -> TrackerEvent:
    """A memory write; ``value`` travels JSON-encoded in ``value_json``."""
    return TrackerEvent(
        "memory_set", {"key": name, "value_json": json.dumps(value), "anonymized_at": None}
    )


def memory_cleared(name: str) -> TrackerEvent:
    return TrackerEvent("memory_cleared", {"key": name})


def skill(event: str, skill_id: str, step_id: str | None = None) -> TrackerEvent:
    """``skill("activated", "card_replace")`` is a ``skill_activated`` event (also
    ``completed``, ``cancelled``, ``interrupted``, ``resumed``; the last three
    carry a ``step_id``, ``autonomous`` by default)."""
    payload: dict[str, Any] = {"skill_id": skill_id}
    if event in ("cancelled", "interrupted", "resumed"):
        payload["step_id"] = step_id if step_id is not None else "autonomous"
    elif step_id is not None:
        raise ValueError(f"skill_{event} carries no step_id")
    return TrackerEvent(f"skill_{event}", payload)


def block(event: str, skill_id: str, block_id: str, step_id: str | None = None) -> TrackerEvent:
    """``block("entered", "card_replace", "main")`` is an ``ordered_block_entered``
    event (also ``completed``, ``cancelled``, ``interrupted``, ``resumed``, which
    carry a ``step_id``, ``step_1`` by default)."""
    payload: dict[str, Any] = {"skill_id": skill_id, "block_id": block_id}
    if event != "entered":
        payload["step_id"] = step_id if step_id is not None else "step_1"
    elif step_id is not None:
        raise ValueError("ordered_block_entered carries no step_id")
    return TrackerEvent(f"ordered_block_{event}", payload)


def tool(
    name: str,
    *,
    source: str = "local",
    server: str | None = None,
    skill_id: str | None = None,
    args: dict[str, Any] | None = None,
    is_error: bool = False,
    result: Any = None,
) -> TrackerEvent:
    """A tool run; ``args`` travel JSON-encoded in ``arguments_json``, the skill it
    ran for in metadata ``skill_id``; an ``mcp`` run names its ``server``
    (``banking`` by default)."""
    if source == "mcp" and server is None:
        server = "banking"
    return TrackerEvent(
        "tool_executed",
        {
            "tool_name": name,
            "arguments_json": json.dumps(args or {}),
            "source": source,
            "result_json": None if result is None else json.dumps(result),
            "is_error": is_error,
            "error_message": "failed" if is_error else None,
            "mcp_server": server,
        },
        metadata=None if skill_id is None else {"skill_id": skill_id},
    )


# --------------------------------------------------------------------- judging


def scenario(*assertions: dict[str, Any], name: str = "t") -> Scenario:
    """A scenario of ``assertions``, each written as in a scenario file
    (``{"tool_executed": {"tool_name": "order_replacement", "source": "local"}}``)."""
    doc = {
        "scenario": {
            "name": name,
            "simulation_context": "a test",
            "goals": {"assertions": list(assertions)},
        }
    }
    return load_scenario_text(json.dumps(doc))


JudgeWith = Evaluator | Scenario | Sequence[Scenario]


def results(
    judge_with: JudgeWith, *conversations: Iterable[bytes | str]
) -> list[ConversationResult]:
    """Every conversation's result, once the lines of ``conversations`` are pushed,
    in order, into ``judge_with`` (an evaluator, or a fresh one over these
    scenarios) and the input has ended."""
    evaluator = judge_with if isinstance(judge_with, Evaluator) else Evaluator(judge_with)
    for lines in conversations:
        for line in lines:
            evaluator.push_line(line)
    evaluator.finish_all()
    return evaluator.results()


def verdicts(judge_with: JudgeWith, lines: Iterable[bytes | str]) -> list[Verdict]:
    """One conversation's verdicts, in the order of its scenario's assertions.

    ``lines`` hold one conversation not pushed into ``judge_with`` before.
    Raises :class:`~mantle_stream.UsageError` when they hold no conversation
    that was judged, or several, saying why (a conversation no loaded scenario
    judges is named with the reason).
    """
    evaluator = judge_with if isinstance(judge_with, Evaluator) else Evaluator(judge_with)
    before = {r.conversation_id for r in evaluator.results()}
    unmatched_before = {u.conversation_id for u in evaluator.unmatched()}
    judged = [r for r in results(evaluator, lines) if r.conversation_id not in before]
    if len(judged) == 1:
        return [a.verdict for a in judged[0].assertions]
    if judged:
        ids = ", ".join(f"`{r.conversation_id}`" for r in judged)
        raise UsageError(f"verdicts() judges one conversation; these lines hold {ids}")
    for u in evaluator.unmatched():
        if u.conversation_id in unmatched_before:
            continue
        why = (
            f"it names scenario `{u.scenario}`, which is not loaded"
            if u.scenario
            else "several scenarios are loaded and nothing names one: pass "
            "conversation(..., scenario=NAME)"
        )
        raise UsageError(f"conversation `{u.conversation_id}` was not judged: {why}")
    raise UsageError(
        "verdicts() judged no new conversation: no events, or a conversation id "
        "this evaluator had judged already (give each conversation its own)"
    )
