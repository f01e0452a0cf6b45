"""Hypothesis strategies for scenario assertions and tracker-event feeds.

Everything is drawn from deliberately tiny vocabularies so that random
assertions and random conversations meet often: exact matches and near
misses (wrong type, wrong step, wrong source, a lifecycle tool, ...) are both
frequent. Assertions are generated as plain Python data, exactly as they would
be loaded from a scenario YAML file, and are always *valid* per the reference
(no ``session.`` prefix, no null values, ``mcp_server`` exactly when the source
is ``mcp``, ``step_id`` only where allowed, bot checks with at least one field,
tools_within_one_turn with 2-3 calls and an explicit ``allow_extra_calls``).

Conversations are lists of *normalized* events (``{"sequence", "kind",
**payload}``, memory values and tool arguments already parsed) which
:func:`to_wire_line` renders as ProtoJSON lines per ``events.md``.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

import reference_batch

# --------------------------------------------------------------------------
# Vocabularies
# --------------------------------------------------------------------------

SKILL_IDS = ("card_replace", "transfer")
BLOCK_IDS = ("main", "submit")
STEP_IDS = ("autonomous", "collect", "confirm")
MEMORY_NAMES = ("card_replace.reason", "project.authenticated", "system.channel")
TOOL_NAMES = ("check_balance", "search_knowledge", "complete_skill", "set_fields")
MCP_SERVERS = ("banking", "cards")
ARGUMENT_KEYS = ("shipping", "amount")
# Typed look-alikes: 5 / 5.0 / "5", true / "true" / 1, objects in two key
# orders (equal), lists in two orders (not equal).
VALUES: tuple[Any, ...] = (
    5,
    5.0,
    "5",
    True,
    "true",
    1,
    {"a": 1},
    {"a": 1, "b": 2},
    {"b": 2, "a": 1},
    [1, 2],
    [2, 1],
)
USER_TEXTS = ("my card is damaged", "hi", None)
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
)
BUTTON_TITLES = ("Yes", "No")
BUTTON_PAYLOADS = ("/affirm", "/deny")

# The same kind lists as the oracle's (both written from the reference).
SKILL_KINDS = reference_batch.SKILL_KINDS
BLOCK_KINDS = reference_batch.BLOCK_KINDS
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


# Strategy objects are built once, at import: rebuilding them inside every draw
# (as a composite with arguments does) makes generation several times slower.
values = st.sampled_from(VALUES).map(copy.deepcopy)  # copies: no dict/list is shared
skill_ids = _pick(SKILL_IDS)
block_ids = _pick(BLOCK_IDS)
step_ids = _pick(STEP_IDS)
memory_names = _pick(MEMORY_NAMES)
mcp_servers = _pick(MCP_SERVERS)
argument_keys = _pick(ARGUMENT_KEYS)
utter_names = _pick(UTTER_NAMES)
text_patterns = _pick(TEXT_PATTERNS)
button_titles = _pick(BUTTON_TITLES)
button_payloads = _pick(BUTTON_PAYLOADS)
optional_button_payloads = st.one_of(st.none(), button_payloads)
sources = _pick(("local", "mcp"))
booleans = st.booleans()
mostly_true = _pick((True, True, False))
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
expected_arguments = st.dictionaries(argument_keys, values, min_size=1, max_size=2)


@st.composite
def tool_specs(draw: st.DrawFn, names: tuple[str, ...] = TOOL_NAMES) -> dict[str, Any]:
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
# Calls of tools_within_one_turn lean toward counted tools, so the check passes often enough.
call_specs = tool_specs(("check_balance", "search_knowledge", *TOOL_NAMES))

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
    st.fixed_dictionaries({"name": memory_names}, optional={"value": values}), 1, 3
)
memory_cleared_entries = _lists_of(st.fixed_dictionaries({"name": memory_names}), 1, 3)


@st.composite
def tools_within_one_turn_checks(draw: st.DrawFn) -> dict[str, Any]:
    """tools_within_one_turn with 2-3 calls, explicit allow_extra_calls, optional ordered."""
    calls = draw(_lists_of(call_specs, 2, 3))
    spec: dict[str, Any] = {
        "calls": [{"tool_executed": call} for call in calls],
        "allow_extra_calls": draw(booleans),
    }
    ordered = draw(_pick((True, False, None)))  # None: the key is left out
    if ordered is not None:
        spec["ordered"] = ordered
    return {"tools_within_one_turn": spec}


# One step allowed inside sequencing.
sequencing_steps = st.one_of(
    skill_checks(),
    block_checks(),
    st.builds(lambda s: {"tool_executed": s}, any_tool_spec),
    st.builds(lambda s: {"bot_uttered": s}, any_bot_spec),
    st.builds(lambda n: {"memory_was_set": n}, memory_names),
    st.builds(lambda n: {"memory_was_cleared": n}, memory_names),
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
        return draw(tools_within_one_turn_checks())
    if kind in ("bot_uttered", "bot_did_not_utter"):
        return {kind: draw(any_bot_spec)}
    return {kind: draw(sequencing_bodies)}


def assertion_lists(max_size: int = 8) -> st.SearchStrategy[list[dict[str, Any]]]:
    """A scenario's goals.assertions."""
    return _lists_of(assertions(), 1, max_size)


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
# Random events (normalized, without a sequence)
# --------------------------------------------------------------------------

Payload = dict[str, Any]  # a normalized event without its sequence: {"kind": ..., **fields}

# Kinds of background events, repeated to weight the draw toward the interesting ones.
EVENT_KIND_WEIGHTS: tuple[str, ...] = (
    *(["user"] * 3),
    *(["bot"] * 3),
    *(["tool_executed"] * 6),
    *(["memory_set"] * 3),
    *(["memory_cleared"] * 2),
    *SKILL_KINDS,
    *BLOCK_KINDS,
    "session_started",
)
background_kinds = _pick(EVENT_KIND_WEIGHTS)
run_arguments = st.dictionaries(argument_keys, values, max_size=2)
message_buttons = st.fixed_dictionaries(
    {"title": button_titles, "payload": optional_button_payloads}
)
bot_buttons = st.lists(message_buttons, max_size=2)


@st.composite
def _tool_runs(draw: st.DrawFn) -> Payload:
    source = draw(sources)
    return {
        "kind": "tool_executed",
        "tool_name": draw(_pick(TOOL_NAMES)),
        "source": source,
        "mcp_server": draw(mcp_servers) if source == "mcp" else None,
        "skill_id": draw(st.one_of(st.none(), skill_ids)),
        "arguments": draw(run_arguments),
        "result_json": draw(_pick((None, '{"ok": true}', "42"))),
        "is_error": draw(booleans),
    }


@st.composite
def _bot_messages(draw: st.DrawFn) -> Payload:
    message: Payload = {
        "kind": "bot",
        "text": draw(_pick(BOT_TEXTS)),
        "utter_name": draw(st.one_of(st.none(), utter_names)),
    }
    if draw(booleans):  # absent means "no buttons"
        message["buttons"] = draw(bot_buttons)
    return message


def _lifecycle_events(kind: str) -> st.SearchStrategy[Payload]:
    fields: dict[str, st.SearchStrategy[Any]] = {"skill_id": skill_ids}
    if kind in BLOCK_KINDS:
        fields["block_id"] = block_ids
    if kind not in NO_STEP_ID:
        fields["step_id"] = step_ids
    return st.fixed_dictionaries({"kind": st.just(kind), **fields})


RANDOM_EVENTS: dict[str, st.SearchStrategy[Payload]] = {
    "user": st.fixed_dictionaries({"kind": st.just("user"), "text": _pick(USER_TEXTS)}),
    "bot": _bot_messages(),
    "tool_executed": _tool_runs(),
    "memory_set": st.fixed_dictionaries(
        {"kind": st.just("memory_set"), "name": memory_names, "value": values}
    ),
    "memory_cleared": st.fixed_dictionaries(
        {"kind": st.just("memory_cleared"), "name": memory_names}
    ),
    **{kind: _lifecycle_events(kind) for kind in (*SKILL_KINDS, *BLOCK_KINDS)},
    "session_started": st.just({"kind": "session_started"}),
    "session_ended": st.just({"kind": "session_ended"}),
}


def random_events(kind: str) -> st.SearchStrategy[Payload]:
    """A random event of ``kind``, without a sequence."""
    return RANDOM_EVENTS[kind]


# --------------------------------------------------------------------------
# Witnesses: events planted so that assertions match (or nearly match)
# --------------------------------------------------------------------------


@st.composite
def events_like(draw: st.DrawFn, kind: str, fields: Mapping[str, Any]) -> Payload:
    """An event of ``kind`` carrying ``fields``, the rest random.

    One time in five, one field is then redrawn at random: a near miss (or,
    by chance, still a match).
    """
    event = {**draw(random_events(kind)), **copy.deepcopy(dict(fields))}
    keys = sorted(key for key in event if key != "kind")
    if keys and draw(one_in_five):
        key = draw(_pick(tuple(keys)))
        fresh = draw(random_events(kind))
        if key in fresh:
            event[key] = fresh[key]
        else:  # an optional field (bot buttons) the fresh draw left out
            del event[key]
    if kind == "tool_executed":  # keep source and mcp_server consistent
        if event["source"] == "local":
            event["mcp_server"] = None
        elif event["mcp_server"] is None:
            event["mcp_server"] = draw(mcp_servers)
    return event


extra_arguments = st.dictionaries(argument_keys, values, max_size=1)


@st.composite
def tool_witnesses(draw: st.DrawFn, spec: Mapping[str, Any]) -> Payload:
    """A tool run with every field a tool_executed spec sets (plus maybe another argument)."""
    fields = {k: v for k, v in spec.items() if k != "arguments"}
    fields.setdefault("mcp_server", None)
    fields["arguments"] = {**draw(extra_arguments), **copy.deepcopy(spec.get("arguments", {}))}
    return draw(events_like("tool_executed", fields))


@st.composite
def bot_witnesses(draw: st.DrawFn, spec: Mapping[str, Any]) -> Payload:
    """A bot message carrying what a bot check asks for (a matching text when one exists)."""
    fields: dict[str, Any] = {}
    if "utter_name" in spec:
        fields["utter_name"] = spec["utter_name"]
    if "text_matches" in spec:
        texts = [t for t in BOT_TEXTS if t is not None and re.search(spec["text_matches"], t)]
        if texts:
            fields["text"] = draw(_pick(tuple(texts)))
    if "buttons" in spec:
        fields["buttons"] = []
        for button in spec["buttons"]:
            # the expected payload, or any (a near miss, or none was expected)
            keep = "payload" in button and draw(booleans)
            payload = button["payload"] if keep else draw(optional_button_payloads)
            fields["buttons"].append({"title": button["title"], "payload": payload})
        if draw(one_in_five):  # near miss: one button too many
            fields["buttons"].append(draw(message_buttons))
    return draw(events_like("bot", fields))


@st.composite
def step_witnesses(draw: st.DrawFn, step: Mapping[str, Any]) -> Payload:
    """An event meant to match one single-event check (a sequencing step or similar)."""
    ((kind, spec),) = step.items()
    if kind in SKILL_KINDS or kind in BLOCK_KINDS:
        return draw(events_like(kind, spec))
    if kind == "tool_executed":
        return draw(tool_witnesses(spec))
    if kind in ("bot_uttered", "bot_did_not_utter"):
        return draw(bot_witnesses(spec))
    if kind == "memory_was_set":
        return draw(events_like("memory_set", {"name": spec}))
    if kind == "memory_was_cleared":
        return draw(events_like("memory_cleared", {"name": spec}))
    raise ValueError(f"not a single-event check: {kind}")


fences = _pick((True, True, True, False))


@st.composite
def witnesses(draw: st.DrawFn, assertion: Mapping[str, Any]) -> list[Payload]:
    """Events, in order, that would make ``assertion`` match if nothing got in the way."""
    ((kind, spec),) = assertion.items()
    if kind in ("memory_was_set", "memory_was_not_set"):
        planted: list[Payload] = []
        for entry in spec:
            planted.append(draw(events_like("memory_set", entry)))
            if draw(booleans):  # written, then cleared
                planted.append({"kind": "memory_cleared", "name": entry["name"]})
        return planted
    if kind == "memory_was_cleared":
        return [draw(events_like("memory_cleared", entry)) for entry in spec]
    if kind == "tools_within_one_turn":
        runs = [draw(tool_witnesses(call["tool_executed"])) for call in spec["calls"]]
        # Usually fence the runs into a turn of their own with user events.
        opener = [draw(random_events("user"))] if draw(fences) else []
        closer = [draw(random_events("user"))] if draw(fences) else []
        if draw(booleans):  # sometimes one extra run, often a lifecycle tool
            runs.append(draw(random_events("tool_executed")))
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
# Conversations and feeds
# --------------------------------------------------------------------------

endings = _pick(("open", "open", "open", "ended", "ended_early"))
first_sequences = _pick((0, 0, 0, 1, 3))
sequence_steps = _pick((1, 1, 1, 1, 2, 3))


@st.composite
def conversations(
    draw: st.DrawFn, assertion_list: list[dict[str, Any]] | None = None, max_events: int = 12
) -> list[dict[str, Any]]:
    """One conversation: normalized events with increasing, sometimes gapped sequences.

    Up to ``max_events`` random background events, plus, for a random subset
    of ``assertion_list``, planted witness events (see :func:`witnesses`)
    merged in at random places (spread out, or as one contiguous run), so
    both matches and near misses are common. Often opens with
    ``session_started``; occasionally contains a ``session_ended`` at the end
    or in the middle (events after it must be ignored by any evaluator).
    """
    kinds = draw(_lists_of(background_kinds, 0, max_events))
    # Chunks of groups: a group's events stay contiguous in the conversation.
    chunks: list[list[list[Payload]]] = [[[draw(random_events(kind))] for kind in kinds]]
    for assertion in assertion_list or []:
        if draw(mostly_true):
            planted = draw(witnesses(assertion))
            contiguous = draw(mostly_true)
            chunks.append([planted] if contiguous else [[event] for event in planted])
    body = [event for _, group in draw(interleave(chunks)) for event in group]

    if draw(booleans):
        body.insert(0, {"kind": "session_started"})
    ending = draw(endings)
    if ending == "ended":
        body.append({"kind": "session_ended"})
    elif ending == "ended_early":
        body.insert(draw(st.integers(0, len(body))), {"kind": "session_ended"})
    if not body:
        body = [{"kind": "session_started"}]

    events: list[dict[str, Any]] = []
    sequence = draw(first_sequences)
    for payload in body:
        events.append({"sequence": sequence, **payload})
        sequence += draw(sequence_steps)
    return events


@dataclass(frozen=True)
class Feed:
    """A scenario plus several conversations interleaved into one event feed."""

    assertions: list[dict[str, Any]]
    conversations: dict[str, list[dict[str, Any]]]
    # Feed order: (conversation_id, normalized event), each conversation in its own order.
    lines: list[tuple[str, dict[str, Any]]]

    def wire_lines(self) -> list[bytes]:
        """The feed rendered as ProtoJSON lines, with unique event ids."""
        counters: dict[str, int] = {}
        out: list[bytes] = []
        for conversation_id, event in self.lines:
            number = counters.get(conversation_id, 0)
            counters[conversation_id] = number + 1
            out.append(to_wire_line(conversation_id, event, f"{conversation_id}-e{number}"))
        return out


@st.composite
def feeds(
    draw: st.DrawFn, max_conversations: int = 4, max_assertions: int = 8, max_events: int = 12
) -> Feed:
    """A random scenario and 1-4 random conversations interleaved into one feed."""
    assertion_list = draw(assertion_lists(max_assertions))
    count = draw(st.integers(1, max_conversations))
    convos = {f"c{i + 1}": draw(conversations(assertion_list, max_events)) for i in range(count)}
    ids = list(convos)
    merged = draw(interleave([convos[cid] for cid in ids]))
    return Feed(assertion_list, convos, [(ids[number], event) for number, event in merged])


# --------------------------------------------------------------------------
# Wire format
# --------------------------------------------------------------------------


def to_wire_payload(event: Mapping[str, Any]) -> dict[str, Any]:
    """The ProtoJSON payload object of a normalized event."""
    payload = {k: v for k, v in event.items() if k not in ("sequence", "kind")}
    if event["kind"] == "memory_set":
        payload["value_json"] = json.dumps(payload.pop("value"))
    elif event["kind"] == "tool_executed":
        payload["arguments_json"] = json.dumps(payload.pop("arguments"))
    return payload


def to_wire_line(conversation_id: str, event: Mapping[str, Any], event_id: str) -> bytes:
    """Render a normalized event as one ProtoJSON line (no trailing newline).

    Envelope ``conversation_id``, ``sequence``, ``event_id`` plus exactly one
    payload key; ``value_json`` / ``arguments_json`` are JSON strings made
    with ``json.dumps`` so ``5.0`` stays a float and ``true`` a bool.
    """
    envelope = {
        "conversation_id": conversation_id,
        "sequence": event["sequence"],
        "event_id": event_id,
        event["kind"]: to_wire_payload(event),
    }
    return json.dumps(envelope).encode("utf-8")


ENVELOPE_KEYS = frozenset(
    {
        "conversation_id",
        "timestamp",
        "event_id",
        "sequence",
        "user_id",
        "deployment_environment",
        "session_id",
        "metadata",
    }
)


def from_wire_line(line: bytes | str) -> tuple[str, dict[str, Any]]:
    """Parse a ProtoJSON line back into ``(conversation_id, normalized event)``.

    Used to check :func:`to_wire_line` and to feed the spec's literal example
    lines to the reference evaluator.
    """
    row = json.loads(line)
    (kind,) = [key for key in row if key not in ENVELOPE_KEYS]
    event: dict[str, Any] = {"sequence": row["sequence"], "kind": kind, **row[kind]}
    if kind == "memory_set":
        event["value"] = json.loads(event.pop("value_json"))
    elif kind == "tool_executed":
        event["arguments"] = json.loads(event.pop("arguments_json"))
    return row["conversation_id"], event
