"""Reference batch evaluator: the test oracle for the streaming engine.

Written from the specification alone (Mantle's assertion reference,
``docs/semantics.md``, the event format of docs/scenarios.md) and deliberately independent of
``mantle_stream``. It looks at one *finished* conversation at a time and
evaluates every assertion with plain loops over the whole event list: no
state machines, no incremental tricks, clarity over speed.

Inputs
------
``assertions``
    The scenario's ``goals.assertions`` exactly as loaded from YAML: a list
    of one-key dicts such as ``{"skill_activated": {"skill_id": "x"}}``.
``events``
    One conversation's events, in order, de-duplicated, in the *real* wire
    shapes of the event format of docs/scenarios.md: each one either a ProtoJSON object as decoded
    from a JSON line (envelope plus exactly one payload key, ``metadata`` a
    JSON string or null, ``value_json`` / ``arguments_json`` JSON texts), or
    a flat event ``{"event": kind, ...}`` as in a tracker document
    (``metadata`` an object, ``value`` / ``arguments`` already typed).
    :func:`normalize` turns each into ``{"sequence", "kind", **fields}``;
    skipped, unknown and legacy kinds are dropped, and so is everything from
    the first ``session_ended`` on.

Output
------
One ``(verdict, decided_at)`` per assertion: ``verdict`` is ``"passed"`` or
``"failed"``; ``decided_at`` is the ``sequence`` of the event that decided it
(None when that event has no sequence, as flat events never do), or ``None``
when the end of the conversation decided it. :func:`evaluate_positions`
gives the deciding event's position in the input list instead.

Where Rasa 3.21's evaluator and the reference disagree, this oracle follows
the mantle_stream column of docs/semantics.md's "Divergences" table.
"""

from __future__ import annotations

import functools
import itertools
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

Event = Mapping[str, Any]  # a normalized event: {"sequence", "kind", "position", **fields}
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
# Kinds some check reads (everything else is skipped).
READ_KINDS = frozenset(
    {
        "session_started",
        "session_ended",
        "user",
        "bot",
        "memory_set",
        "memory_cleared",
        "tool_executed",
        *SKILL_KINDS,
        *BLOCK_KINDS,
    }
)
# ProtoJSON kinds no check reads (the event format of docs/scenarios.md): accepted and skipped.
SKIPPED_KINDS = (
    "stack",
    "action",
    "bot_turn_ended",
    "inactive",
    "user_barge_in",
    "tts_finished",
    "user_silence_timeout",
    "user_input_suppressed",
    "unsupported_request_classified",
)
ENVELOPE_KEYS = frozenset(
    {
        "conversation_id",
        "timestamp",
        "sequence",
        "event_id",
        "metadata",
        "user_id",
        "session_id",
        "deployment_environment",
    }
)
# Mantle's framework tools, whatever their source: tools_within_one_turn neither
# counts them nor lets them satisfy a listed call (docs/semantics.md, Framework tools).
FRAMEWORK_TOOLS = frozenset(
    {
        "activate",
        "complete",
        "complete_skill",
        "cancel",
        "set_fields",
        "correct",
        "resolve_tool_confirmation",
        "listen",
        "hangup",
    }
)


# --------------------------------------------------------------------------
# Wire shapes -> normalized events
# --------------------------------------------------------------------------


def _object(value: Any) -> dict[str, Any]:
    """A metadata / data value as a dict: JSON strings parsed, null and absent as {}."""
    if isinstance(value, str):
        value = json.loads(value)
    return value if isinstance(value, dict) else {}


def normalize(raw: Mapping[str, Any]) -> dict[str, Any] | None:
    """One wire event (ProtoJSON or flat) as ``{"sequence", "kind", **fields}``.

    None for what no check reads: skipped kinds, unknown (newer) kinds and
    legacy CALM rows. Fields: ``user`` text; ``bot`` text, utter_name,
    buttons; ``memory_set`` key, value; ``memory_cleared`` key; skill and
    block events skill_id, block_id, step_id; ``tool_executed`` tool_name,
    source, mcp_server, skill_id, arguments, is_error.
    """
    if "event" in raw:  # flat: kind in "event", fields beside it, no sequence
        kind = raw["event"]
        body: Mapping[str, Any] = raw
        metadata = _object(raw.get("metadata"))
        sequence = None
        flat = True
    else:
        payload_keys = [key for key in raw if key not in ENVELOPE_KEYS]
        if len(payload_keys) != 1:
            raise ValueError(f"not one payload key: {payload_keys}")
        (kind,) = payload_keys
        body = raw[kind] or {}
        metadata = _object(raw.get("metadata"))
        sequence = raw.get("sequence")
        flat = False
    if kind not in READ_KINDS:
        return None

    event: dict[str, Any] = {"sequence": sequence, "kind": kind}
    if kind == "user":
        event["text"] = body.get("text")
    elif kind == "bot":
        event["text"] = body.get("text")
        event["utter_name"] = metadata.get("utter_action")
        event["buttons"] = _object(body.get("data")).get("buttons") or []
    elif kind == "memory_set":
        event["key"] = body["key"]
        event["value"] = body["value"] if flat else json.loads(body["value_json"])
    elif kind == "memory_cleared":
        event["key"] = body["key"]
    elif kind in SKILL_KINDS or kind in BLOCK_KINDS:
        event["skill_id"] = body["skill_id"]
        event["block_id"] = body.get("block_id")
        event["step_id"] = body.get("step_id")
    elif kind == "tool_executed":
        event["tool_name"] = body["tool_name"]
        event["source"] = body["source"]
        event["mcp_server"] = body.get("mcp_server")
        event["skill_id"] = metadata.get("skill_id")
        if flat:
            event["arguments"] = body.get("arguments") or {}
        else:
            event["arguments"] = json.loads(body["arguments_json"])
        event["is_error"] = body.get("is_error", False)
    return event


def conversation_events(events: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Normalize a conversation; keep what checks read, up to its first ``session_ended``.

    Each kept event also gets ``position``: its index in the input list.
    """
    kept: list[dict[str, Any]] = []
    for position, raw in enumerate(events):
        event = normalize(raw)
        if event is None:
            continue
        if event["kind"] == "session_ended":
            break
        event["position"] = position
        kept.append(event)
    return kept


def starts_turn(event: Event) -> bool:
    """A ``user`` event whose text, stripped, is non-empty and not a ``/command``."""
    if event["kind"] != "user":
        return False
    text = event.get("text")
    if not isinstance(text, str):
        return False
    stripped = text.strip()
    return bool(stripped) and not stripped.startswith("/")


def split_turns(events: Sequence[Event]) -> list[list[Event]]:
    """Split events into user turns.

    A turn starts at each turn-starting ``user`` event (which belongs to the
    turn it starts); other events, other ``user`` events included, stay in
    the current turn. Events before the first one form turn 0 (maybe empty).
    """
    turns: list[list[Event]] = [[]]
    for event in events:
        if starts_turn(event):
            turns.append([])
        turns[-1].append(event)
    return turns


def is_counted_run(event: Event) -> bool:
    """True for a tool run that tools_within_one_turn counts (not a framework tool)."""
    return event["kind"] == "tool_executed" and event["tool_name"] not in FRAMEWORK_TOOLS


# --------------------------------------------------------------------------
# Value equality
# --------------------------------------------------------------------------


def values_equal(expected: Any, actual: Any) -> bool:
    """JSON equality by type and value (docs/semantics.md, Value equality).

    Strings equal strings exactly; numbers equal numbers by value (``1`` ==
    ``1.0``); booleans equal only booleans (``True`` != ``1``); ``None`` only
    ``None``; objects by keys and values in any key order; lists element by
    element in order.
    """
    if isinstance(expected, bool) or isinstance(actual, bool):
        return type(expected) is bool and type(actual) is bool and expected == actual
    if isinstance(expected, int | float) and isinstance(actual, int | float):
        return expected == actual
    if isinstance(expected, str) and isinstance(actual, str):
        return expected == actual
    if expected is None or actual is None:
        return expected is None and actual is None
    if isinstance(expected, dict) and isinstance(actual, dict):
        if set(expected) != set(actual):
            return False
        return all(values_equal(expected[key], actual[key]) for key in expected)
    if isinstance(expected, list) and isinstance(actual, list):
        if len(expected) != len(actual):
            return False
        return all(values_equal(e, a) for e, a in zip(expected, actual, strict=True))
    return False


# --------------------------------------------------------------------------
# Single-event matchers
# --------------------------------------------------------------------------


def matches_skill(kind: str, spec: Mapping[str, Any], event: Event) -> bool:
    """Does ``event`` match a skill check of ``kind`` (e.g. ``skill_cancelled``)?"""
    if event["kind"] != kind or event["skill_id"] != spec["skill_id"]:
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
    if spec["source"] == "mcp" and event["mcp_server"] != spec["mcp_server"]:
        return False
    if "skill_id" in spec and event["skill_id"] != spec["skill_id"]:
        return False  # a run without a skill_id never matches a check naming one
    if "is_error" in spec and event["is_error"] is not spec["is_error"]:
        return False
    called_with = event["arguments"]
    for key, expected in spec.get("arguments", {}).items():
        if key not in called_with:  # even when the expected value is null
            return False
        if not values_equal(expected, called_with[key]):
            return False
    return True


def matches_buttons(expected: Sequence[Mapping[str, Any]], carried: Sequence[Any]) -> bool:
    """At least as many buttons carried as listed; at each listed position the
    title equals, and the payload equals when one is listed."""
    if len(carried) < len(expected):
        return False
    for want, have in zip(expected, carried, strict=False):
        if not isinstance(have, Mapping) or have.get("title") != want["title"]:
            return False
        if "payload" in want and have.get("payload") != want["payload"]:
            return False
    return True


def matches_bot(spec: Mapping[str, Any], event: Event) -> bool:
    """Does ``event`` match a bot check (every given field, on this same message)?"""
    if event["kind"] != "bot":
        return False
    if "utter_name" in spec and event["utter_name"] != spec["utter_name"]:
        return False
    if "text_matches" in spec:
        text = event["text"]
        if not isinstance(text, str) or re.search(spec["text_matches"], text) is None:
            return False
    return "buttons" not in spec or matches_buttons(spec["buttons"], event["buttons"])


def matches_step(step: Mapping[str, Any], event: Event) -> bool:
    """Does ``event`` match one sequencing step (a one-key dict)?"""
    ((kind, spec),) = step.items()
    if kind in SKILL_KINDS:
        return matches_skill(kind, spec, event)
    if kind in BLOCK_KINDS:
        return matches_block(kind, spec, event)
    if kind == "tool_executed":
        return matches_tool(spec, event)
    if kind == "memory_was_set":
        return bool(event["kind"] == "memory_set" and event["key"] == spec)
    if kind == "memory_was_cleared":
        return bool(event["kind"] == "memory_cleared" and event["key"] == spec)
    raise ValueError(f"not a sequencing step: {kind}")


# --------------------------------------------------------------------------
# Assertion evaluators. Each returns (verdict, index into the normalized
# events of the deciding event, or None when the end decided it).
# --------------------------------------------------------------------------

Decided = tuple[str, int | None]


def first_match(events: Sequence[Event], predicate: Predicate) -> int | None:
    """Index of the first event satisfying ``predicate``, or None."""
    for index, event in enumerate(events):
        if predicate(event):
            return index
    return None


def passed_at_first(events: Sequence[Event], predicate: Predicate) -> Decided:
    """Positive check: passed at the first match, else failed at the end."""
    index = first_match(events, predicate)
    return (FAILED, None) if index is None else (PASSED, index)


def eval_memory_was_set(entries: Sequence[Mapping[str, Any]], events: Sequence[Event]) -> Decided:
    """AND of entries; passed at the latest of the entries' first matching writes."""
    firsts: list[int] = []
    for entry in entries:

        def is_write(event: Event, entry: Mapping[str, Any] = entry) -> bool:
            if event["kind"] != "memory_set" or event["key"] != entry["name"]:
                return False
            return "value" not in entry or values_equal(entry["value"], event["value"])

        index = first_match(events, is_write)
        if index is None:
            return (FAILED, None)
        firsts.append(index)
    return (PASSED, max(firsts))


def eval_memory_was_cleared(
    entries: Sequence[Mapping[str, Any]], events: Sequence[Event]
) -> Decided:
    """AND of entries; passed at the latest of the entries' first clears."""
    firsts: list[int] = []
    for entry in entries:

        def is_clear(event: Event, entry: Mapping[str, Any] = entry) -> bool:
            return bool(event["kind"] == "memory_cleared" and event["key"] == entry["name"])

        index = first_match(events, is_clear)
        if index is None:
            return (FAILED, None)
        firsts.append(index)
    return (PASSED, max(firsts))


def eval_memory_was_not_set(
    entries: Sequence[Mapping[str, Any]], events: Sequence[Event]
) -> Decided:
    """No listed key written (or, with a value, last written with that value).

    Entries without a value fail at the key's first write; entries with a
    value are judged at the end on the key's last write (clears ignored).
    """
    valueless = {entry["name"] for entry in entries if "value" not in entry}
    for index, event in enumerate(events):
        if event["kind"] == "memory_set" and event["key"] in valueless:
            return (FAILED, index)
    for entry in entries:
        if "value" not in entry:
            continue
        writes = [e for e in events if e["kind"] == "memory_set" and e["key"] == entry["name"]]
        if writes and values_equal(entry["value"], writes[-1]["value"]):
            return (FAILED, None)
    return (PASSED, None)


def maximum_matching(calls: Sequence[Mapping[str, Any]], runs: Sequence[Event]) -> int:
    """Size of a maximum matching between listed calls and runs (Kuhn's augmenting paths)."""
    owner: dict[int, int] = {}  # run index -> call index

    def augment(call: int, visited: set[int]) -> bool:
        for run, event in enumerate(runs):
            if run in visited or not matches_tool(calls[call], event):
                continue
            visited.add(run)
            if run not in owner or augment(owner[run], visited):
                owner[run] = call
                return True
        return False

    return sum(augment(call, set()) for call in range(len(calls)))


def ordered_assignment_exists(calls: Sequence[Mapping[str, Any]], runs: Sequence[Event]) -> bool:
    """Runs i1 < i2 < ... each matching the listed call of its rank (earliest-first greedy,
    which is exact for a subsequence)."""
    position = 0
    for call in calls:
        while position < len(runs) and not matches_tool(call, runs[position]):
            position += 1
        if position == len(runs):
            return False
        position += 1
    return True


def assignment_exists(
    calls: Sequence[Mapping[str, Any]], runs: Sequence[Event], ordered: bool
) -> bool:
    """Can every listed call be given its own run (in the listed order if ``ordered``)?"""
    if ordered:
        return ordered_assignment_exists(calls, runs)
    return maximum_matching(calls, runs) == len(calls)


def brute_force_assignment_exists(
    calls: Sequence[Mapping[str, Any]], runs: Sequence[Event], ordered: bool
) -> bool:
    """The same question by trying every injective choice (for testing the fast one)."""
    choices: Iterable[tuple[int, ...]]
    if ordered:
        choices = itertools.combinations(range(len(runs)), len(calls))
    else:
        choices = itertools.permutations(range(len(runs)), len(calls))
    return any(
        all(matches_tool(call, runs[i]) for call, i in zip(calls, chosen, strict=True))
        for chosen in choices
    )


def eval_tools_within_one_turn(spec: Mapping[str, Any], events: Sequence[Event]) -> Decided:
    """Some single user turn holds every listed call (see docs/semantics.md)."""
    calls = [call["tool_executed"] for call in spec["calls"]]
    ordered = bool(spec.get("ordered", False))
    index_of = {id(event): index for index, event in enumerate(events)}
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
                    return (PASSED, index_of[id(event)])
        return (FAILED, None)

    # No extra calls: a whole turn is judged, so the verdict is known when the
    # turn ends (at the user event that starts the next turn) or, for the
    # last turn, at the end.
    for number, turn in enumerate(turns):
        runs = [event for event in turn if is_counted_run(event)]
        if len(runs) == len(calls) and assignment_exists(calls, runs, ordered):
            if number + 1 < len(turns):
                return (PASSED, index_of[id(turns[number + 1][0])])
            return (PASSED, None)
    return (FAILED, None)


def eval_bot_did_not_utter(spec: Mapping[str, Any], events: Sequence[Event]) -> Decided:
    """Failed at the first message matching every given field, else passed at the end."""
    index = first_match(events, lambda event: matches_bot(spec, event))
    return (PASSED, None) if index is None else (FAILED, index)


def eval_sequencing(steps: Sequence[Mapping[str, Any]], events: Sequence[Event]) -> Decided:
    """Earliest match of each step strictly after the previous step's match."""
    start = 0
    matched: int | None = None
    for step in steps:
        matched = first_match(events[start:], functools.partial(matches_step, step))
        if matched is None:
            return (FAILED, None)
        matched += start
        start = matched + 1
    return (PASSED, matched)


def evaluate_one(assertion: Mapping[str, Any], events: Sequence[Event]) -> Decided:
    """Evaluate one assertion (a one-key dict) over normalized conversation events."""
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


def evaluate_positions(
    assertions: Sequence[Mapping[str, Any]], events: Sequence[Mapping[str, Any]]
) -> list[tuple[str, int | None]]:
    """Like :func:`evaluate`, but naming the deciding event by its position in ``events``
    (None: the end of the conversation decided it)."""
    conversation = conversation_events(events)
    results: list[tuple[str, int | None]] = []
    for assertion in assertions:
        verdict, index = evaluate_one(assertion, conversation)
        results.append((verdict, None if index is None else conversation[index]["position"]))
    return results


def evaluate(
    assertions: Sequence[Mapping[str, Any]], events: Sequence[Mapping[str, Any]]
) -> list[Result]:
    """Evaluate every assertion of a scenario over one whole conversation (wire events)."""
    conversation = conversation_events(events)
    results: list[Result] = []
    for assertion in assertions:
        verdict, index = evaluate_one(assertion, conversation)
        results.append((verdict, None if index is None else conversation[index]["sequence"]))
    return results
