"""Reference batch evaluator: the test oracle for the streaming engine.

Written from ``/work/shared/spec`` alone (``assertions-reference.txt``,
``semantics.md``, ``events.md``) and deliberately independent of
``mantle_stream``. It looks at one *finished* conversation at a time and
evaluates every assertion with plain loops over the whole event list: no
state machines, no incremental tricks, clarity over speed.

Inputs
------
``assertions``
    The scenario's ``goals.assertions`` exactly as loaded from YAML: a list
    of one-key dicts such as ``{"skill_activated": {"skill_id": "x"}}``.
``events``
    One conversation's events in order, *normalized*: ``{"sequence": int,
    "kind": "<payload key>", **payload fields}``, where a ``memory_set``
    carries its parsed value as ``"value"`` and a ``tool_executed`` its
    parsed arguments as ``"arguments"`` (a dict).

Output
------
One ``(verdict, decided_at)`` per assertion: ``verdict`` is ``"passed"`` or
``"failed"``; ``decided_at`` is the ``sequence`` of the event that decided it,
or ``None`` when the end of the conversation decided it.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

Event = Mapping[str, Any]
Result = tuple[str, int | None]
Predicate = Callable[[Event], bool]

PASSED = "passed"
FAILED = "failed"

SKILL_KINDS = (
    "skill_activated",
    "skill_completed",
    "skill_cancelled",
    "skill_interrupted",
    "skill_resumed",
)
BLOCK_KINDS = (
    "ordered_block_entered",
    "ordered_block_completed",
    "ordered_block_cancelled",
    "ordered_block_interrupted",
    "ordered_block_resumed",
)
# Runs with source ``local`` and one of these names are Mantle's own lifecycle
# tools: tools_within_one_turn neither counts them nor lets them satisfy a call.
LIFECYCLE_TOOLS = frozenset({"complete_skill", "set_fields", "listen", "hangup"})


# --------------------------------------------------------------------------
# Conversation helpers
# --------------------------------------------------------------------------


def conversation_events(events: Sequence[Event]) -> list[Event]:
    """Return the events of the conversation proper.

    The conversation ends at its first ``session_ended`` event; that event and
    everything after it are dropped (nothing can match ``session_ended``).
    """
    kept: list[Event] = []
    for event in events:
        if event["kind"] == "session_ended":
            break
        kept.append(event)
    return kept


def split_turns(events: Sequence[Event]) -> list[list[Event]]:
    """Split events into user turns.

    A turn starts at each ``user`` event (the user event belongs to the turn
    it starts); events before the first ``user`` event form turn 0, which may
    be empty.
    """
    turns: list[list[Event]] = [[]]
    for event in events:
        if event["kind"] == "user":
            turns.append([])
        turns[-1].append(event)
    return turns


def is_counted_run(event: Event) -> bool:
    """True for a tool run that tools_within_one_turn counts (not a lifecycle tool)."""
    if event["kind"] != "tool_executed":
        return False
    return not (event["source"] == "local" and event["tool_name"] in LIFECYCLE_TOOLS)


# --------------------------------------------------------------------------
# Value equality
# --------------------------------------------------------------------------


def values_equal(expected: Any, actual: Any) -> bool:
    """Strict, typed JSON equality.

    Types must match exactly (``True`` != ``"true"``, ``5`` != ``"5"``,
    ``1`` != ``True``, ``5`` != ``5.0``); objects compare by keys and values in
    any key order; lists element by element in the same order.
    """
    if type(expected) is not type(actual):
        return False
    if isinstance(expected, dict):
        if set(expected) != set(actual):
            return False
        return all(values_equal(expected[key], actual[key]) for key in expected)
    if isinstance(expected, list):
        if len(expected) != len(actual):
            return False
        return all(values_equal(e, a) for e, a in zip(expected, actual, strict=True))
    return bool(expected == actual)


# --------------------------------------------------------------------------
# Single-event matchers
# --------------------------------------------------------------------------


def matches_skill(kind: str, spec: Mapping[str, Any], event: Event) -> bool:
    """Does ``event`` match a skill check of ``kind`` (e.g. ``skill_cancelled``)?"""
    if event["kind"] != kind:
        return False
    if event["skill_id"] != spec["skill_id"]:
        return False
    return "step_id" not in spec or event["step_id"] == spec["step_id"]


def matches_block(kind: str, spec: Mapping[str, Any], event: Event) -> bool:
    """Does ``event`` match an ordered-block check of ``kind``?"""
    if event["kind"] != kind:
        return False
    if event["skill_id"] != spec["skill_id"] or event["block_id"] != spec["block_id"]:
        return False
    return "step_id" not in spec or event["step_id"] == spec["step_id"]


def matches_tool(spec: Mapping[str, Any], event: Event) -> bool:
    """Does ``event`` match a ``tool_executed`` spec (every field that is set)?"""
    if event["kind"] != "tool_executed":
        return False
    if event["tool_name"] != spec["tool_name"] or event["source"] != spec["source"]:
        return False
    if spec["source"] == "mcp" and event.get("mcp_server") != spec["mcp_server"]:
        return False
    if "skill_id" in spec and event.get("skill_id") != spec["skill_id"]:
        return False
    if "is_error" in spec and event["is_error"] != spec["is_error"]:
        return False
    if "arguments" in spec:
        called_with = event["arguments"]
        for key, expected in spec["arguments"].items():
            if key not in called_with:
                return False
            if not values_equal(expected, called_with[key]):
                return False
    return True


def matches_bot(spec: Mapping[str, Any], event: Event) -> bool:
    """Does ``event`` match a bot check (every given field, on this same message)?"""
    if event["kind"] != "bot":
        return False
    if "utter_name" in spec and event.get("utter_name") != spec["utter_name"]:
        return False
    if "text_matches" in spec:
        text = event.get("text")
        if text is None or re.search(spec["text_matches"], text) is None:
            return False
    if "buttons" in spec:
        expected_buttons = spec["buttons"]
        actual_buttons = event.get("buttons") or []
        if len(expected_buttons) != len(actual_buttons):
            return False
        for expected, actual in zip(expected_buttons, actual_buttons, strict=True):
            if expected["title"] != actual["title"]:
                return False
            if "payload" in expected and expected["payload"] != actual.get("payload"):
                return False
    return True


def matches_step(step: Mapping[str, Any], event: Event) -> bool:
    """Does ``event`` match one sequencing step (a one-key dict)?"""
    ((kind, spec),) = step.items()
    if kind in SKILL_KINDS:
        return matches_skill(kind, spec, event)
    if kind in BLOCK_KINDS:
        return matches_block(kind, spec, event)
    if kind == "tool_executed":
        return matches_tool(spec, event)
    if kind == "bot_uttered":
        return matches_bot(spec, event)
    if kind == "memory_was_set":
        return bool(event["kind"] == "memory_set" and event["name"] == spec)
    if kind == "memory_was_cleared":
        return bool(event["kind"] == "memory_cleared" and event["name"] == spec)
    raise ValueError(f"not a sequencing step: {kind}")


def first_match(events: Sequence[Event], predicate: Predicate) -> int | None:
    """Sequence of the first event satisfying ``predicate``, or None."""
    for event in events:
        if predicate(event):
            return int(event["sequence"])
    return None


def passed_at_first(events: Sequence[Event], predicate: Predicate) -> Result:
    """Positive check: passed at the first match, else failed at the end."""
    seq = first_match(events, predicate)
    if seq is None:
        return (FAILED, None)
    return (PASSED, seq)


# --------------------------------------------------------------------------
# Assertion evaluators
# --------------------------------------------------------------------------


def eval_memory_was_set(entries: Sequence[Mapping[str, Any]], events: Sequence[Event]) -> Result:
    """AND of entries; passed at the latest of the entries' first matching writes."""
    firsts: list[int] = []
    for entry in entries:

        def is_write(event: Event, entry: Mapping[str, Any] = entry) -> bool:
            if event["kind"] != "memory_set" or event["name"] != entry["name"]:
                return False
            return "value" not in entry or values_equal(entry["value"], event["value"])

        seq = first_match(events, is_write)
        if seq is None:
            return (FAILED, None)
        firsts.append(seq)
    return (PASSED, max(firsts))


def eval_memory_was_cleared(
    entries: Sequence[Mapping[str, Any]], events: Sequence[Event]
) -> Result:
    """AND of entries; passed at the latest of the entries' first clears."""
    firsts: list[int] = []
    for entry in entries:

        def is_clear(event: Event, entry: Mapping[str, Any] = entry) -> bool:
            return bool(event["kind"] == "memory_cleared" and event["name"] == entry["name"])

        seq = first_match(events, is_clear)
        if seq is None:
            return (FAILED, None)
        firsts.append(seq)
    return (PASSED, max(firsts))


def eval_memory_was_not_set(
    entries: Sequence[Mapping[str, Any]], events: Sequence[Event]
) -> Result:
    """No listed key written (or, with a value, last written with that value).

    Entries without a value fail at the key's first write; entries with a
    value are judged at the end on the key's last write (clears ignored).
    """
    # Early failure: the earliest write of any key listed without a value.
    for event in events:
        if event["kind"] != "memory_set":
            continue
        for entry in entries:
            if "value" not in entry and entry["name"] == event["name"]:
                return (FAILED, int(event["sequence"]))
    # End of conversation: compare each valued entry with its key's last write.
    for entry in entries:
        if "value" not in entry:
            continue
        writes = [e for e in events if e["kind"] == "memory_set" and e["name"] == entry["name"]]
        if writes and values_equal(entry["value"], writes[-1]["value"]):
            return (FAILED, None)
    return (PASSED, None)


def assignment_exists(
    calls: Sequence[Mapping[str, Any]], runs: Sequence[Event], ordered: bool
) -> bool:
    """Can every listed call be given its own run?

    Brute force over all choices, which is obviously a maximum matching:
    unordered tries every injective map calls -> runs; ordered only those in
    which the chosen runs appear in the listed order.
    """
    if len(runs) < len(calls):
        return False
    choices: Iterable[tuple[int, ...]]
    if ordered:
        choices = itertools.combinations(range(len(runs)), len(calls))
    else:
        choices = itertools.permutations(range(len(runs)), len(calls))
    for chosen in choices:
        if all(matches_tool(call, runs[i]) for call, i in zip(calls, chosen, strict=True)):
            return True
    return False


def eval_tools_within_one_turn(spec: Mapping[str, Any], events: Sequence[Event]) -> Result:
    """Some single user turn holds every listed call (see semantics.md)."""
    calls = [call["tool_executed"] for call in spec["calls"]]
    ordered = bool(spec.get("ordered", False))
    turns = split_turns(events)

    if spec["allow_extra_calls"]:
        # Passed at the run after which some turn's runs so far first suffice.
        for turn in turns:
            runs_so_far: list[Event] = []
            for event in turn:
                if not is_counted_run(event):
                    continue
                runs_so_far.append(event)
                if assignment_exists(calls, runs_so_far, ordered):
                    return (PASSED, int(event["sequence"]))
        return (FAILED, None)

    # No extra calls: a whole turn is judged, so the verdict is known when the
    # turn ends (at the next user event) or, for the last turn, at the end.
    for number, turn in enumerate(turns):
        runs = [event for event in turn if is_counted_run(event)]
        if len(runs) == len(calls) and assignment_exists(calls, runs, ordered):
            if number + 1 < len(turns):
                next_user = turns[number + 1][0]
                return (PASSED, int(next_user["sequence"]))
            return (PASSED, None)
    return (FAILED, None)


def eval_bot_did_not_utter(spec: Mapping[str, Any], events: Sequence[Event]) -> Result:
    """Failed at the first matching message, else passed at the end."""
    seq = first_match(events, lambda event: matches_bot(spec, event))
    if seq is None:
        return (PASSED, None)
    return (FAILED, seq)


def eval_sequencing(steps: Sequence[Mapping[str, Any]], events: Sequence[Event]) -> Result:
    """Greedy earliest match of each step strictly after the previous one."""
    position = 0  # index into events where the next step may start matching
    matched_seq: int | None = None
    for step in steps:
        matched_seq = None
        while position < len(events):
            event = events[position]
            position += 1
            if matches_step(step, event):
                matched_seq = int(event["sequence"])
                break
        if matched_seq is None:
            return (FAILED, None)
    return (PASSED, matched_seq)


def evaluate_one(assertion: Mapping[str, Any], events: Sequence[Event]) -> Result:
    """Evaluate one assertion (a one-key dict) over conversation events."""
    ((kind, spec),) = assertion.items()
    if kind in SKILL_KINDS:
        return passed_at_first(events, lambda event: matches_skill(kind, spec, event))
    if kind in BLOCK_KINDS:
        return passed_at_first(events, lambda event: matches_block(kind, spec, event))
    if kind == "memory_was_set":
        return eval_memory_was_set(spec, events)
    if kind == "memory_was_not_set":
        return eval_memory_was_not_set(spec, events)
    if kind == "memory_was_cleared":
        return eval_memory_was_cleared(spec, events)
    if kind == "tool_executed":
        return passed_at_first(events, lambda event: matches_tool(spec, event))
    if kind == "tools_within_one_turn":
        return eval_tools_within_one_turn(spec, events)
    if kind == "bot_uttered":
        return passed_at_first(events, lambda event: matches_bot(spec, event))
    if kind == "bot_did_not_utter":
        return eval_bot_did_not_utter(spec, events)
    if kind == "sequencing":
        return eval_sequencing(spec, events)
    raise ValueError(f"unknown assertion kind: {kind}")


def evaluate(assertions: Sequence[Mapping[str, Any]], events: Sequence[Event]) -> list[Result]:
    """Evaluate every assertion of a scenario over one whole conversation."""
    conversation = conversation_events(events)
    return [evaluate_one(assertion, conversation) for assertion in assertions]
