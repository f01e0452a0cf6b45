"""Hypothesis strategies: random scenarios and random real-format event feeds.

Everything is drawn from deliberately tiny vocabularies so that random
assertions and random conversations meet often: exact matches and near
misses (wrong type, wrong step, wrong source, a framework tool, a number
that equals and a boolean that does not, a `/command` that is not a turn,
...) are both frequent.

Assertions are plain Python data, exactly as loaded from a scenario YAML
file, and always *valid* per the reference (no ``session.`` prefix, no null
memory values, ``mcp_server`` exactly when the source is ``mcp``, ``step_id``
only where allowed, bot checks with at least one field,
tools_within_one_turn with 2-3 calls and an explicit ``allow_extra_calls``,
sequencing with only its allowed steps).

Conversations are first drawn as *abstract* events (``{"kind", **fields}``:
memory values and tool arguments typed, ``utter_name``, ``buttons`` and the
tool run's ``skill_id`` beside the rest), then rendered in the wire shapes of
the event format of docs/scenarios.md: ProtoJSON rows (every unset optional field ``null``,
``metadata`` a JSON string or null, keys in random order, sometimes no
``sequence`` or no ``event_id``) or flat rows one per line with
``sender_id``. :class:`Feed` delivers several conversations interleaved,
with re-sent duplicates and sequenced rows slightly out of order, as the
streaming contract allows; the oracle judges each conversation's intended
order.
"""

from __future__ import annotations

import copy
import functools
import json
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from reference_batch import (
    BLOCK_KINDS,
    FRAMEWORK_TOOLS,
    SKILL_KINDS,
    SKIPPED_KINDS,
)

# --------------------------------------------------------------------------
# Vocabularies
# --------------------------------------------------------------------------

SKILL_IDS = ("card_replace", "transfer")
BLOCK_IDS = ("main", "submit")
STEP_IDS = ("autonomous", "collect", "confirm")
# The engine's own session_started_metadata is a key like any other.
MEMORY_KEYS = ("card_replace.reason", "project.authenticated", "session_started_metadata")
COUNTED_TOOLS = ("check_balance", "search_knowledge", "cannot_help")
FRAMEWORK_TOOL_NAMES = tuple(sorted(FRAMEWORK_TOOLS))
# Names a tool check asks for: mostly counted tools, some framework ones.
SPEC_TOOL_NAMES = ("check_balance", "search_knowledge", "complete_skill", "complete", "listen")
CALL_TOOL_NAMES = (*(["check_balance", "search_knowledge", "cannot_help"] * 3), "complete_skill",
                   "hangup")  # fmt: skip
# Names of runs: counted tools weighted up, every framework tool present.
RUN_TOOL_NAMES = (*(["check_balance", "search_knowledge"] * 4), "cannot_help",
                  *FRAMEWORK_TOOL_NAMES)  # fmt: skip
MCP_SERVERS = ("banking", "cards")
ARGUMENT_KEYS = ("shipping", "amount")
# Typed look-alikes: numbers equal by value (5 / 5.0, 1 / 1.0, in objects and
# lists too), booleans equal only booleans (true / 1, false / 0), strings only
# strings ("5", "true"); objects in two key orders (equal), lists in two
# orders (not equal).
EXPECTED_VALUES: tuple[Any, ...] = (
    5,
    5.0,
    "5",
    True,
    False,
    "true",
    1,
    1.0,
    0,
    "damaged",
    {"a": 1},
    {"a": 1.0},
    {"a": True},
    {"a": 1, "b": 2},
    {"b": 2, "a": 1},
    [1, 2],
    [1.0, 2],
    [2, 1],
    [True],
    [1],
)
EVENT_VALUES: tuple[Any, ...] = (*EXPECTED_VALUES, None)  # a write of null is a value too
# Expected tool arguments may be null (memory values may not).
ARGUMENT_VALUES = (*EVENT_VALUES, None)
TURN_TEXTS = ("my card is damaged", "hi", "  hello \n", "a/b")
NON_TURN_TEXTS = ("", "   ", "/session_start", " /restart", "\t\n", "/", None)
USER_TEXTS = (*TURN_TEXTS, *NON_TURN_TEXTS)
BOT_TEXTS = (
    "Your replacement was ordered.",
    "I cannot help with that.",
    "Your balance is 42",
    "",
    None,
)
UTTER_NAMES = ("utter_replacement_ordered", "utter_cannot_help")
# Simple, always-valid Python regular expressions.
TEXT_PATTERNS = (
    "replacement.*(ordered|placed)",
    "^Your",
    "help",
    "[0-9]+",
    r"ordered\.$",
    "cannot|can't",
    "^$",
)
BUTTON_TITLES = ("Yes", "No")
BUTTON_PAYLOADS = ("/affirm", "/deny")
CARRIED_PAYLOADS = ("/affirm", "/deny", "")
# Kinds no check reads: ProtoJSON's skipped kinds, a newer engine's kind, legacy CALM rows.
OTHER_KINDS = (*SKIPPED_KINDS, "agent_handoff", "slot", "flow_started")
# Checks (and events) that reject / do not carry a step_id.
NO_STEP_ID = frozenset({"skill_activated", "skill_completed", "ordered_block_entered"})

ASSERTION_KINDS = (
    *SKILL_KINDS,
    *BLOCK_KINDS,
    "memory_was_set",
    "memory_was_not_set",
    "memory_was_cleared",
    "tool_executed",
    "tools_within_one_turn",
    "bot_uttered",
    "bot_did_not_utter",
    "sequencing",
)


def _pick(options: tuple[Any, ...]) -> st.SearchStrategy[Any]:
    """Sample from a vocabulary of immutable values."""
    return st.sampled_from(options)


def _lists_of(
    elements: st.SearchStrategy[Any], min_size: int, max_size: int
) -> st.SearchStrategy[list[Any]]:
    """Lists whose length is uniform in [min_size, max_size] (st.lists favours short ones)."""
    return _pick(tuple(range(min_size, max_size + 1))).flatmap(
        lambda size: st.lists(elements, min_size=size, max_size=size)
    )


def numeric_twin(value: Any) -> Any:
    """The same JSON value with every int a float and every float an int (booleans kept)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return float(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: numeric_twin(item) for key, item in value.items()}
    if isinstance(value, list):
        return [numeric_twin(item) for item in value]
    return value


# Strategy objects are built once, at import: rebuilding them inside every draw
# (as a composite with arguments does) makes generation several times slower.
expected_values = st.sampled_from(EXPECTED_VALUES).map(copy.deepcopy)  # no shared dicts
event_values = st.sampled_from(EVENT_VALUES).map(copy.deepcopy)
argument_values = st.sampled_from(ARGUMENT_VALUES).map(copy.deepcopy)
skill_ids = _pick(SKILL_IDS)
block_ids = _pick(BLOCK_IDS)
step_ids = _pick(STEP_IDS)
event_step_ids = _pick((*STEP_IDS, ""))  # "" when the event has none
memory_keys = _pick(MEMORY_KEYS)
mcp_servers = _pick(MCP_SERVERS)
argument_keys = _pick(ARGUMENT_KEYS)
utter_names = _pick(UTTER_NAMES)
text_patterns = _pick(TEXT_PATTERNS)
button_titles = _pick(BUTTON_TITLES)
button_payloads = _pick(BUTTON_PAYLOADS)
sources = _pick(("local", "mcp"))
booleans = st.booleans()
mostly_true = _pick((True, True, False))
one_in_three = _pick((True, False, False))
one_in_five = _pick((True, False, False, False, False))

# --------------------------------------------------------------------------
# Assertions
# --------------------------------------------------------------------------


@st.composite
def skill_checks(draw: st.DrawFn, kinds: tuple[str, ...] = SKILL_KINDS) -> dict[str, Any]:
    """A skill_* check, with an optional step_id where the reference allows it."""
    kind = draw(_pick(kinds))
    spec: dict[str, Any] = {"skill_id": draw(skill_ids)}
    if kind not in NO_STEP_ID and draw(booleans):
        spec["step_id"] = draw(step_ids)
    return {kind: spec}


@st.composite
def block_checks(draw: st.DrawFn, kinds: tuple[str, ...] = BLOCK_KINDS) -> dict[str, Any]:
    """An ordered_block_* check, with an optional step_id where allowed."""
    kind = draw(_pick(kinds))
    spec: dict[str, Any] = {"skill_id": draw(skill_ids), "block_id": draw(block_ids)}
    if kind not in NO_STEP_ID and draw(booleans):
        spec["step_id"] = draw(step_ids)
    return {kind: spec}


SKILL_CHECKS = {kind: skill_checks((kind,)) for kind in SKILL_KINDS}
BLOCK_CHECKS = {kind: block_checks((kind,)) for kind in BLOCK_KINDS}
expected_arguments = st.dictionaries(argument_keys, argument_values, min_size=1, max_size=2)


@st.composite
def tool_specs(draw: st.DrawFn, names: tuple[str, ...] = SPEC_TOOL_NAMES) -> dict[str, Any]:
    """The body of a tool_executed check (also used for tools_within_one_turn calls)."""
    source = draw(sources)
    spec: dict[str, Any] = {"tool_name": draw(_pick(names)), "source": source}
    if source == "mcp":
        spec["mcp_server"] = draw(mcp_servers)
    if draw(booleans):
        spec["skill_id"] = draw(skill_ids)
    if draw(booleans):
        spec["arguments"] = draw(expected_arguments)
    if draw(booleans):
        spec["is_error"] = draw(booleans)
    return spec


any_tool_spec = tool_specs()
call_specs = tool_specs(CALL_TOOL_NAMES)


@st.composite
def _focused_call_specs(draw: st.DrawFn) -> dict[str, Any]:
    """A call that often shares its name and source with another and differs only in
    arguments, so that one run can suit several calls: a greedy first fit then misses
    assignments that a maximum matching finds."""
    spec: dict[str, Any] = {
        "tool_name": draw(_pick(("check_balance", "check_balance", "search_knowledge"))),
        "source": "local",
    }
    if draw(booleans):
        spec["arguments"] = draw(expected_arguments)
    if draw(one_in_five):
        spec["is_error"] = draw(booleans)
    return spec


focused_call_specs = _focused_call_specs()

BOT_FIELDS = ("utter_name", "text_matches", "buttons")
bot_field_sets = st.sets(_pick(BOT_FIELDS), min_size=1)
expected_buttons = st.lists(
    st.fixed_dictionaries({"title": button_titles}, optional={"payload": button_payloads}),
    min_size=1,
    max_size=2,
)


@st.composite
def bot_specs(draw: st.DrawFn) -> dict[str, Any]:
    """The body of a bot check: a non-empty subset of utter_name/text_matches/buttons."""
    fields = draw(bot_field_sets)
    spec: dict[str, Any] = {}
    if "utter_name" in fields:
        spec["utter_name"] = draw(utter_names)
    if "text_matches" in fields:
        spec["text_matches"] = draw(text_patterns)
    if "buttons" in fields:
        spec["buttons"] = draw(expected_buttons)
    return spec


any_bot_spec = bot_specs()
memory_set_entries = _lists_of(
    st.fixed_dictionaries({"name": memory_keys}, optional={"value": expected_values}), 1, 3
)
memory_cleared_entries = _lists_of(st.fixed_dictionaries({"name": memory_keys}), 1, 3)


@st.composite
def tools_within_one_turn_checks(
    draw: st.DrawFn, calls_from: st.SearchStrategy[dict[str, Any]] = call_specs
) -> dict[str, Any]:
    """tools_within_one_turn with 2-3 calls, explicit allow_extra_calls, optional ordered."""
    calls = draw(_lists_of(calls_from, 2, 3))
    spec: dict[str, Any] = {
        "calls": [{"tool_executed": call} for call in calls],
        "allow_extra_calls": draw(booleans),
    }
    ordered = draw(_pick((True, False, None)))  # None: the key is left out
    if ordered is not None:
        spec["ordered"] = ordered
    return {"tools_within_one_turn": spec}


WITHIN_CHECKS = tools_within_one_turn_checks()
FOCUSED_WITHIN_CHECKS = tools_within_one_turn_checks(focused_call_specs)

# One step allowed inside sequencing (no bot checks, memory keys as plain strings).
sequencing_steps = st.one_of(
    skill_checks(),
    block_checks(),
    st.builds(lambda s: {"tool_executed": s}, any_tool_spec),
    st.builds(lambda n: {"memory_was_set": n}, memory_keys),
    st.builds(lambda n: {"memory_was_cleared": n}, memory_keys),
)
sequencing_bodies = _lists_of(sequencing_steps, 1, 4)
# Every kind, with the stateful ones (memory, tools, bot, sequencing) weighted up.
assertion_kinds = _pick(
    (
        *SKILL_KINDS,
        *BLOCK_KINDS,
        *(["memory_was_set", "memory_was_not_set", "memory_was_cleared"] * 2),
        *(["tool_executed", "bot_uttered", "bot_did_not_utter"] * 2),
        *(["tools_within_one_turn", "sequencing"] * 3),
    )
)


@st.composite
def assertions(draw: st.DrawFn) -> dict[str, Any]:
    """Any one valid assertion, of any kind."""
    kind = draw(assertion_kinds)
    if kind in SKILL_KINDS:
        return draw(SKILL_CHECKS[kind])
    if kind in BLOCK_KINDS:
        return draw(BLOCK_CHECKS[kind])
    if kind in ("memory_was_set", "memory_was_not_set"):
        return {kind: draw(memory_set_entries)}
    if kind == "memory_was_cleared":
        return {kind: draw(memory_cleared_entries)}
    if kind == "tool_executed":
        return {kind: draw(any_tool_spec)}
    if kind == "tools_within_one_turn":
        return draw(WITHIN_CHECKS)
    if kind in ("bot_uttered", "bot_did_not_utter"):
        return {kind: draw(any_bot_spec)}
    return {kind: draw(sequencing_bodies)}


def assertion_lists(
    max_size: int = 8, focus: bool = False
) -> st.SearchStrategy[list[dict[str, Any]]]:
    """A scenario's goals.assertions; with ``focus``, tools_within_one_turn checks only."""
    return _lists_of(FOCUSED_WITHIN_CHECKS if focus else assertions(), 1, max_size)


def scenario_text(assertion_list: list[dict[str, Any]], name: str = "gen") -> str:
    """A full scenario file (JSON text, which is valid YAML 1.2)."""
    return json.dumps(
        {
            "scenario": {
                "name": name,
                "simulation_context": "x",
                "goals": {"assertions": assertion_list},
            }
        }
    )


# --------------------------------------------------------------------------
# Random abstract events
# --------------------------------------------------------------------------

Abstract = dict[str, Any]  # {"kind": ..., **fields}: an event before it has a wire shape

# Kinds of background events, repeated to weight the draw toward the interesting ones.
EVENT_KIND_WEIGHTS: tuple[str, ...] = (
    *(["user"] * 4),
    *(["bot"] * 3),
    *(["tool_executed"] * 6),
    *(["memory_set"] * 3),
    *(["memory_cleared"] * 2),
    *SKILL_KINDS,
    *BLOCK_KINDS,
    "session_started",
)
background_kinds = _pick(EVENT_KIND_WEIGHTS)
other_kinds = _pick(OTHER_KINDS)
run_arguments = st.dictionaries(argument_keys, event_values, max_size=2)
one_carried_button = st.fixed_dictionaries(
    {"title": button_titles, "payload": _pick(CARRIED_PAYLOADS)}
)
carried_buttons = st.lists(one_carried_button, max_size=3)


@st.composite
def _tool_runs(draw: st.DrawFn) -> Abstract:
    source = draw(sources)
    return {
        "kind": "tool_executed",
        "tool_name": draw(_pick(RUN_TOOL_NAMES)),
        "source": source,
        "mcp_server": draw(mcp_servers) if source == "mcp" else None,
        "skill_id": draw(st.one_of(st.none(), skill_ids)),
        "arguments": draw(run_arguments),
        "is_error": draw(booleans),
    }


@st.composite
def _bot_messages(draw: st.DrawFn) -> Abstract:
    return {
        "kind": "bot",
        "text": draw(_pick(BOT_TEXTS)),
        "utter_name": draw(st.one_of(st.none(), utter_names)),
        "buttons": draw(st.one_of(st.none(), carried_buttons)),  # None: no "buttons" in data
    }


def _lifecycle_events(kind: str) -> st.SearchStrategy[Abstract]:
    fields: dict[str, st.SearchStrategy[Any]] = {"skill_id": skill_ids}
    if kind in BLOCK_KINDS:
        fields["block_id"] = block_ids
    if kind not in NO_STEP_ID:
        fields["step_id"] = event_step_ids
    return st.fixed_dictionaries({"kind": st.just(kind), **fields})


RANDOM_EVENTS: dict[str, st.SearchStrategy[Abstract]] = {
    "user": st.fixed_dictionaries({"kind": st.just("user"), "text": _pick(USER_TEXTS)}),
    "bot": _bot_messages(),
    "tool_executed": _tool_runs(),
    "memory_set": st.fixed_dictionaries(
        {"kind": st.just("memory_set"), "key": memory_keys, "value": event_values}
    ),
    "memory_cleared": st.fixed_dictionaries(
        {"kind": st.just("memory_cleared"), "key": memory_keys}
    ),
    **{kind: _lifecycle_events(kind) for kind in (*SKILL_KINDS, *BLOCK_KINDS)},
    "session_started": st.just({"kind": "session_started"}),
    "session_ended": st.just({"kind": "session_ended"}),
}
turn_users = st.fixed_dictionaries({"kind": st.just("user"), "text": _pick(TURN_TEXTS)})
non_turn_users = st.fixed_dictionaries({"kind": st.just("user"), "text": _pick(NON_TURN_TEXTS)})


def random_events(kind: str) -> st.SearchStrategy[Abstract]:
    """A random event of ``kind``."""
    return RANDOM_EVENTS[kind]


# --------------------------------------------------------------------------
# Witnesses: events planted so that assertions match (or nearly match)
# --------------------------------------------------------------------------


@st.composite
def events_like(draw: st.DrawFn, kind: str, fields: Mapping[str, Any]) -> Abstract:
    """An event of ``kind`` carrying ``fields``, the rest random.

    One time in five, one field is then redrawn at random: a near miss (or,
    by chance, still a match).
    """
    event = {**draw(random_events(kind)), **copy.deepcopy(dict(fields))}
    keys = sorted(key for key in event if key != "kind")
    if keys and draw(one_in_five):
        key = draw(_pick(tuple(keys)))
        event[key] = draw(random_events(kind))[key]
    if kind == "tool_executed":  # keep source and mcp_server consistent
        if event["source"] == "local":
            event["mcp_server"] = None
        elif event["mcp_server"] is None:
            event["mcp_server"] = draw(mcp_servers)
    return event


extra_arguments = st.dictionaries(argument_keys, event_values, max_size=1)


@st.composite
def tool_witnesses(draw: st.DrawFn, spec: Mapping[str, Any]) -> Abstract:
    """A tool run with every field a tool_executed spec sets (plus maybe another argument).

    Expected numbers sometimes arrive as their int/float twin (still equal);
    a key expected to be null is sometimes left out (then it must not match).
    """
    fields = {k: v for k, v in spec.items() if k != "arguments"}
    fields.setdefault("mcp_server", None)
    expected = copy.deepcopy(spec.get("arguments", {}))
    if draw(one_in_three):
        expected = numeric_twin(expected)
    for key in [k for k, v in expected.items() if v is None]:
        if draw(one_in_three):
            del expected[key]
    fields["arguments"] = {**draw(extra_arguments), **expected}
    return draw(events_like("tool_executed", fields))


@st.composite
def bot_witnesses(draw: st.DrawFn, spec: Mapping[str, Any]) -> Abstract:
    """A bot message carrying what a bot check asks for (a matching text when one exists)."""
    fields: dict[str, Any] = {}
    if "utter_name" in spec:
        fields["utter_name"] = spec["utter_name"]
    if "text_matches" in spec:
        texts = [t for t in BOT_TEXTS if t is not None and re.search(spec["text_matches"], t)]
        if texts:
            fields["text"] = draw(_pick(tuple(texts)))
    if "buttons" in spec:
        buttons = []
        for button in spec["buttons"]:
            # the expected payload, or any (a near miss, or none was expected)
            keep = "payload" in button and draw(booleans)
            payload = button["payload"] if keep else draw(_pick(CARRIED_PAYLOADS))
            buttons.append({"title": button["title"], "payload": payload})
        if draw(one_in_three):  # one button more (still matches) or one fewer (does not)
            if draw(booleans):
                buttons.append(draw(one_carried_button))
            else:
                buttons.pop()
        fields["buttons"] = buttons
    return draw(events_like("bot", fields))


@st.composite
def memory_writes(draw: st.DrawFn, entry: Mapping[str, Any]) -> Abstract:
    """A write of an entry's key, with its value (or the value's numeric twin) if it has one."""
    fields: dict[str, Any] = {"key": entry["name"]}
    if "value" in entry:
        fields["value"] = copy.deepcopy(entry["value"])
        if draw(one_in_three):
            fields["value"] = numeric_twin(fields["value"])
    return draw(events_like("memory_set", fields))


@st.composite
def step_witnesses(draw: st.DrawFn, step: Mapping[str, Any]) -> Abstract:
    """An event meant to match one single-event check (a sequencing step or similar)."""
    ((kind, spec),) = step.items()
    if kind in SKILL_KINDS or kind in BLOCK_KINDS:
        return draw(events_like(kind, spec))
    if kind == "tool_executed":
        return draw(tool_witnesses(spec))
    if kind in ("bot_uttered", "bot_did_not_utter"):
        return draw(bot_witnesses(spec))
    if kind == "memory_was_set":
        return draw(events_like("memory_set", {"key": spec}))
    if kind == "memory_was_cleared":
        return draw(events_like("memory_cleared", {"key": spec}))
    raise ValueError(f"not a single-event check: {kind}")


fences = _pick((True, True, True, False))
framework_runs = st.builds(
    lambda name, source, server: {
        "kind": "tool_executed",
        "tool_name": name,
        "source": source,
        "mcp_server": server if source == "mcp" else None,
        "skill_id": None,
        "arguments": {},
        "is_error": False,
    },
    _pick(FRAMEWORK_TOOL_NAMES),
    sources,
    mcp_servers,
)


extra_runs = st.one_of(framework_runs, framework_runs, random_events("tool_executed"))


@st.composite
def witnesses(draw: st.DrawFn, assertion: Mapping[str, Any]) -> list[Abstract]:
    """Events, in order, that would make ``assertion`` match if nothing got in the way."""
    ((kind, spec),) = assertion.items()
    if kind in ("memory_was_set", "memory_was_not_set"):
        planted: list[Abstract] = []
        for entry in spec:
            planted.append(draw(memory_writes(entry)))
            if draw(booleans):  # written, then cleared
                planted.append({"kind": "memory_cleared", "key": entry["name"]})
        return planted
    if kind == "memory_was_cleared":
        return [draw(events_like("memory_cleared", {"key": e["name"]})) for e in spec]
    if kind == "tools_within_one_turn":
        runs = [draw(tool_witnesses(call["tool_executed"])) for call in spec["calls"]]
        # Usually fence the runs into a turn of their own with turn-starting user events.
        opener = [draw(turn_users)] if draw(fences) else []
        closer = [draw(turn_users)] if draw(fences) else []
        for _ in range(draw(_pick((0, 1, 1, 2)))):  # extra runs: mostly framework tools
            runs.append(draw(extra_runs))
        if draw(one_in_three):  # a user event that does not start a turn, inside
            runs.insert(draw(st.integers(0, len(runs))), draw(non_turn_users))
        if draw(booleans):  # else keep the listed order
            runs = draw(st.permutations(runs))
        return [*opener, *runs, *closer]
    if kind == "sequencing":
        return [draw(step_witnesses(step)) for step in spec]
    return [draw(step_witnesses(assertion))]


@st.composite
def interleave(draw: st.DrawFn, sequences: list[list[Any]]) -> list[tuple[int, Any]]:
    """Merge sequences into one random order that keeps each one's own order.

    Returns ``(index of the source sequence, item)`` pairs.
    """
    tokens = [number for number, items in enumerate(sequences) for _ in items]
    cursors = [0] * len(sequences)
    merged: list[tuple[int, Any]] = []
    for number in draw(st.permutations(tokens)):
        merged.append((number, sequences[number][cursors[number]]))
        cursors[number] += 1
    return merged


# --------------------------------------------------------------------------
# Wire shapes
# --------------------------------------------------------------------------


def _shuffled(mapping: Mapping[str, Any], rnd: random.Random) -> dict[str, Any]:
    """The same object with its keys in a random order (the serializer keeps none)."""
    keys = list(mapping)
    rnd.shuffle(keys)
    return {key: mapping[key] for key in keys}


def _json_text(value: Any, rnd: random.Random) -> str:
    """JSON text of a value, compact or with spaces (both are what producers write)."""
    if rnd.random() < 0.5:
        return json.dumps(value)
    return json.dumps(value, separators=(",", ":"))


def _metadata(event: Mapping[str, Any], rnd: random.Random) -> dict[str, Any]:
    """The (parsed) metadata of an event: what checks read plus keys nobody reads."""
    kind = event["kind"]
    metadata: dict[str, Any] = {}
    if kind == "bot":
        if event["utter_name"] is not None:
            metadata["utter_action"] = event["utter_name"]
        if rnd.random() < 0.3:
            metadata["rephrase"] = rnd.random() < 0.5
    elif kind == "tool_executed":
        if event["skill_id"] is not None:
            metadata["skill_id"] = event["skill_id"]
    elif kind == "skill_interrupted" and rnd.random() < 0.5:
        metadata["digression"] = True
    elif kind == "user" and rnd.random() < 0.2:
        metadata["is_simulation"] = True
    return metadata


def other_payload(kind: str, rnd: random.Random) -> dict[str, Any]:
    """A payload of a kind no check reads."""
    if kind == "stack":
        return {"update": '[{"op": "add", "path": "/0", "value": {}}]'}
    if kind == "action":
        return {"name": rnd.choice(("action_listen", "utter_greet")), "policy": None,
                "confidence": None, "action_text": None, "hide_rule_turn": False}  # fmt: skip
    if kind == "slot":
        return {"name": "requested_slot", "value": None}
    if kind == "flow_started":
        return {"flow_id": "transfer_money", "metadata": {}}
    if kind == "user_barge_in":
        return {"text": "wait", "interrupted_text": None}
    return {}


def proto_payload(event: Mapping[str, Any], rnd: random.Random) -> dict[str, Any]:
    """The ProtoJSON payload object of an abstract event (every field, unset ones null)."""
    kind = event["kind"]
    if kind == "user":
        parse_data = rnd.choice(({}, {"intent": {"name": "greet", "confidence": 1.0}}))
        return {"text": event["text"], "parse_data": parse_data,
                "input_channel": rnd.choice(("rest", None)),
                "message_id": rnd.choice(("m1", None)), "anonymized_at": None}  # fmt: skip
    if kind == "bot":
        data: dict[str, Any] = {} if event["buttons"] is None else {"buttons": event["buttons"]}
        return {"text": event["text"], "data": data, "anonymized_at": None}
    if kind == "memory_set":
        return {"key": event["key"], "value_json": _json_text(event["value"], rnd),
                "anonymized_at": None}  # fmt: skip
    if kind == "memory_cleared":
        return {"key": event["key"]}
    if kind in SKILL_KINDS or kind in BLOCK_KINDS:
        return {k: event[k] for k in ("skill_id", "block_id", "step_id") if k in event}
    if kind == "tool_executed":
        error = event["is_error"]
        return {
            "tool_name": event["tool_name"],
            "source": event["source"],
            "arguments_json": _json_text(event["arguments"], rnd),
            "result_json": None if error else rnd.choice((None, '{"ok": true}', "42")),
            "is_error": error,
            "error_message": "boom" if error else None,
            "mcp_server": event["mcp_server"],
        }
    if kind in ("session_started", "session_ended"):
        return {}
    return other_payload(kind, rnd)


def render_proto(
    conversation_id: str,
    event: Mapping[str, Any],
    sequence: int | None,
    event_id: str | None,
    timestamp: float,
    rnd: random.Random,
) -> dict[str, Any]:
    """One ProtoJSON row: the envelope (unset fields null) plus exactly one payload key."""
    metadata = _metadata(event, rnd)
    if metadata:
        metadata_text: str | None = _json_text(metadata, rnd)
    else:
        metadata_text = rnd.choice((None, None, "{}"))
    row = {
        "conversation_id": conversation_id,
        "timestamp": timestamp,
        "sequence": sequence,
        "event_id": event_id,
        "metadata": metadata_text,
        "user_id": rnd.choice((None, "u-1")),
        "session_id": None,
        "deployment_environment": rnd.choice((None, "dev")),
        event["kind"]: _shuffled(proto_payload(event, rnd), rnd),
    }
    return _shuffled(row, rnd)


def render_flat(
    event: Mapping[str, Any], timestamp: float, rnd: random.Random, sender_id: str | None
) -> dict[str, Any]:
    """One flat event, as in a tracker document (with ``sender_id`` when one per line)."""
    kind = event["kind"]
    row: dict[str, Any] = {"event": kind, "timestamp": timestamp}
    if sender_id is not None:
        row["sender_id"] = sender_id
    if kind == "user":
        row.update(text=event["text"], parse_data={}, input_channel="rest", message_id="m1")
    elif kind == "bot":
        row["text"] = event["text"]
        row["data"] = {} if event["buttons"] is None else {"buttons": event["buttons"]}
    elif kind == "memory_set":
        row.update(key=event["key"], value=event["value"])
    elif kind == "memory_cleared":
        row["key"] = event["key"]
    elif kind in SKILL_KINDS or kind in BLOCK_KINDS:
        row.update({k: event[k] for k in ("skill_id", "block_id", "step_id") if k in event})
    elif kind == "tool_executed":
        row.update(
            tool_name=event["tool_name"],
            arguments=event["arguments"],
            source=event["source"],
            result=None if event["is_error"] else {"ok": True},
            is_error=event["is_error"],
            error_message="boom" if event["is_error"] else None,
        )
        if event["mcp_server"] is not None:
            row["mcp_server"] = event["mcp_server"]
    elif kind not in ("session_started", "session_ended"):
        row.update(other_payload(kind, rnd))
    metadata = _metadata(event, rnd)
    if metadata:  # present only when non-empty
        row["metadata"] = metadata
    return _shuffled(row, rnd)


# --------------------------------------------------------------------------
# Conversations
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    """One event of a conversation as it goes on the wire."""

    kind: str
    raw: dict[str, Any]  # the wire object (ProtoJSON or flat)
    sequence: int | None
    event_id: str | None
    flat: bool

    @functools.cached_property
    def line(self) -> bytes:
        return json.dumps(self.raw).encode("utf-8")


@dataclass(frozen=True)
class Conversation:
    conversation_id: str
    rows: list[Row]

    @property
    def events(self) -> list[dict[str, Any]]:
        """The wire objects in intended order: what the oracle judges."""
        return [row.raw for row in self.rows]


endings = _pick(("open", "open", "open", "ended", "ended_early"))
first_sequences = _pick((0, 0, 0, 1, 3))
sequence_steps = _pick((1, 1, 1, 1, 1, 2, 3))
conversation_modes = _pick(("proto", "proto", "proto", "proto", "mixed", "flat"))
# Row shapes: ProtoJSON with/without a sequence, with/without an event_id; flat.
PROTO_SHAPES = (*(["seq"] * 12), "seq_noid", "null", "null", "null_noid")
MIXED_SHAPES = (*PROTO_SHAPES, "flat", "flat", "flat")
SHAPES = {"proto": _pick(PROTO_SHAPES), "mixed": _pick(MIXED_SHAPES), "flat": st.just("flat")}
READ_KINDS = frozenset(RANDOM_EVENTS)


@st.composite
def abstract_conversations(
    draw: st.DrawFn,
    assertion_list: list[dict[str, Any]] | None = None,
    max_events: int = 10,
    planted_runs: Sequence[list[Abstract]] = (),
) -> list[Abstract]:
    """One conversation's abstract events, in order.

    Up to ``max_events`` random background events, plus, for a random subset
    of ``assertion_list``, planted witness events (see :func:`witnesses`)
    merged in at random places (spread out, or as one contiguous run), so
    both matches and near misses are common (``planted_runs``: more such runs of
    events, each kept contiguous); then events of kinds no check
    reads, about a third of all. Often opens with ``session_started``;
    sometimes holds a ``session_ended`` at the end or in the middle (what
    follows it must be ignored).
    """
    kinds = draw(_lists_of(background_kinds, 0, max_events))
    # Chunks of groups: a group's events stay contiguous in the conversation.
    chunks: list[list[list[Abstract]]] = [[[draw(random_events(kind))] for kind in kinds]]
    for assertion in assertion_list or []:
        if draw(mostly_true):
            planted = draw(witnesses(assertion))
            contiguous = draw(mostly_true)
            chunks.append([planted] if contiguous else [[event] for event in planted])
    chunks.extend([[list(run)] for run in planted_runs])
    body = [event for _, group in draw(interleave(chunks)) for event in group]

    if draw(booleans):
        body.insert(0, {"kind": "session_started"})
    ending = draw(endings)
    if ending == "ended":
        body.append({"kind": "session_ended"})
    elif ending == "ended_early":
        body.insert(draw(st.integers(0, len(body))), {"kind": "session_ended"})
    for _ in range(draw(st.integers(0, len(body) * 6 // 5 + 1))):  # ~a third: skipped kinds
        body.insert(draw(st.integers(0, len(body))), {"kind": draw(other_kinds)})
    if not any(event["kind"] in READ_KINDS for event in body):
        body.insert(0, {"kind": "session_started"})
    return body


@st.composite
def conversations(
    draw: st.DrawFn,
    assertion_list: list[dict[str, Any]] | None = None,
    max_events: int = 10,
    number: int = 1,
    planted: Sequence[list[Abstract]] = (),
) -> Conversation:
    """One conversation rendered in wire shapes, ready to deliver.

    Mostly ProtoJSON; some conversations mix in flat rows, some are all flat
    (one per line, with ``sender_id``). Sequenced ProtoJSON rows get
    increasing sequences, with gaps; some rows have none (they do not use a
    number). Event ids are unique, sometimes null.
    """
    conversation_id = f"sim-{number:04x}"
    body = draw(abstract_conversations(assertion_list, max_events, planted))
    rnd = draw(st.randoms(use_true_random=False))
    shapes = SHAPES[draw(conversation_modes)]
    sequence = draw(first_sequences)
    rows: list[Row] = []
    for position, event in enumerate(body):
        shape = draw(shapes)
        timestamp = 1767261600.0 + position / 8
        if shape == "flat":
            raw = render_flat(event, timestamp, rnd, sender_id=conversation_id)
            rows.append(Row(event["kind"], raw, None, None, flat=True))
            continue
        row_sequence = None
        if shape.startswith("seq"):
            row_sequence = sequence
            sequence += draw(sequence_steps)
        event_id = None
        if not shape.endswith("noid"):
            event_id = f"0199f0c2-{number:04x}-7000-8000-{position:012x}"
        raw = render_proto(conversation_id, event, row_sequence, event_id, timestamp, rnd)
        rows.append(Row(event["kind"], raw, row_sequence, event_id, flat=False))
    return Conversation(conversation_id, rows)


# --------------------------------------------------------------------------
# Delivery: duplicates, slight reordering, interleaving
# --------------------------------------------------------------------------

REORDER_BLOCK = 8  # sequenced rows move only within blocks of this many (distance < 8)
DUPLICATE_DISTANCE = 16  # a re-sent row follows its original within this many rows


def _sequenced_segments(rows: list[Row]) -> list[list[int]]:
    """Runs of consecutive sequenced rows (split at every row without a sequence)."""
    segments: list[list[int]] = [[]]
    for index, row in enumerate(rows):
        if row.sequence is None:
            segments.append([])
        else:
            segments[-1].append(index)
    return [segment for segment in segments if segment]


@st.composite
def deliveries(draw: st.DrawFn, conversation: Conversation) -> list[int]:
    """The order one conversation's rows are sent in (row indices, re-sent ones repeated).

    Sequenced rows are reordered only within a segment between two rows
    without a sequence, inside blocks of at most :data:`REORDER_BLOCK`, and
    the conversation's first sequenced row is never moved. Some rows are
    re-sent later (same bytes): never flat rows, never rows with neither a
    sequence nor an event_id; a re-sent row follows its original within
    :data:`DUPLICATE_DISTANCE` rows.
    """
    rows = conversation.rows
    order = list(range(len(rows)))
    segments = _sequenced_segments(rows)
    if segments:
        segments[0] = segments[0][1:]  # the first sequenced row stays first
    for segment in segments:
        for start in range(0, len(segment), REORDER_BLOCK):
            block = segment[start : start + REORDER_BLOCK]
            if len(block) > 1 and draw(one_in_three):
                for slot, index in zip(block, draw(st.permutations(block)), strict=True):
                    order[slot] = index
    resendable = [i for i, row in enumerate(rows) if row.sequence is not None or row.event_id]
    if resendable:
        for _ in range(draw(_pick((0, 0, 1, 1, 2, 3)))):
            index = draw(_pick(tuple(resendable)))
            at = order.index(index)
            distance = draw(st.integers(1, DUPLICATE_DISTANCE))
            order.insert(min(at + distance, len(order)), index)
    return order


@dataclass(frozen=True)
class Feed:
    """A scenario plus several conversations interleaved into one event feed."""

    assertions: list[dict[str, Any]]
    conversations: dict[str, Conversation]
    # Feed order: (conversation_id, row index); a re-sent row appears twice.
    order: list[tuple[str, int]]

    @property
    def lines(self) -> list[bytes]:
        return [self.conversations[cid].rows[index].line for cid, index in self.order]

    def events(self, conversation_id: str) -> list[dict[str, Any]]:
        """One conversation's wire objects in intended order, each once."""
        return self.conversations[conversation_id].events


@st.composite
def feeds(
    draw: st.DrawFn,
    max_conversations: int = 4,
    max_assertions: int = 8,
    max_events: int = 10,
    focus: bool = False,
) -> Feed:
    """A random scenario and 1-4 random conversations interleaved into one feed.

    With ``focus``, the scenario holds only tools_within_one_turn checks whose
    calls often suit the same runs (see :data:`focused_call_specs`).
    """
    assertion_list = draw(assertion_lists(max_assertions, focus))
    count = draw(st.integers(1, max_conversations))
    convos = [draw(conversations(assertion_list, max_events, number)) for number in range(count)]
    streams = [[(c.conversation_id, index) for index in draw(deliveries(c))] for c in convos]
    merged = draw(interleave(streams))
    return Feed(
        assertion_list,
        {c.conversation_id: c for c in convos},
        [item for _, item in merged],
    )
