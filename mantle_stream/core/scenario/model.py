"""Scenario files: the typed model and every validation rule of the reference.

Second stage of the scenario pipeline: :mod:`mantle_stream.core.scenario.source` gives a node
tree with positions; this module checks it against the assertion reference
(required, optional and rejected keys per check, types, ``null`` values, the
``session.`` prefix, sequencing restrictions, regular expressions, ...) and
builds frozen :class:`msgspec.Struct` specs that the compiler turns into
machines. Every problem in a file is collected, never only the first.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import msgspec

from mantle_stream.core.errors import ScenarioError
from mantle_stream.core.scenario.diagnostics import Diagnostic, did_you_mean
from mantle_stream.core.scenario.source import (
    YamlProblem,
    YNode,
    compose,
    describe,
    source_lines,
    to_plain,
)

__all__ = [
    "BLOCK_KINDS",
    "FRAMEWORK_TOOLS",
    "MAX_SCENARIO_BYTES",
    "SKILL_KINDS",
    "Assertion",
    "BotCheck",
    "Button",
    "LifecycleCheck",
    "MemoryCheck",
    "MemoryEntry",
    "MemoryStep",
    "Scenario",
    "SequencingCheck",
    "Step",
    "ToolCall",
    "ToolExecutedCheck",
    "ToolsWithinOneTurnCheck",
    "load_scenario_file",
    "load_scenario_text",
    "load_scenarios",
    "scenario_paths",
]

MAX_SCENARIO_BYTES = 1 << 20  # a scenario file is a few KiB; a MiB is a mistake or an attack

#: skill lifecycle kinds → may the check narrow by ``step_id``?
SKILL_KINDS: dict[str, bool] = {
    "skill_activated": False,
    "skill_completed": False,
    "skill_cancelled": True,
    "skill_interrupted": True,
    "skill_resumed": True,
}
BLOCK_KINDS: dict[str, bool] = {
    "ordered_block_entered": False,
    "ordered_block_completed": True,
    "ordered_block_cancelled": True,
    "ordered_block_interrupted": True,
    "ordered_block_resumed": True,
}
MEMORY_KINDS = ("memory_was_set", "memory_was_not_set", "memory_was_cleared")
BOT_KINDS = ("bot_uttered", "bot_did_not_utter")
ALL_KINDS = (
    *SKILL_KINDS,
    *BLOCK_KINDS,
    *MEMORY_KINDS,
    "tool_executed",
    "tools_within_one_turn",
    *BOT_KINDS,
    "sequencing",
)
#: Mantle's framework tools, recognised by name whatever their source (the engine
#: forbids these names for builder tools): tools_within_one_turn neither counts
#: nor matches them. ``complete_skill`` is the reference's name, ``complete`` the
#: engine's; ``search_knowledge`` and ``cannot_help`` are counted like any tool.
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


# --------------------------------------------------------------------------- model


class LifecycleCheck(msgspec.Struct, frozen=True):
    """``skill_*`` and ``ordered_block_*`` checks (``block_id`` is None for skills)."""

    kind: str
    skill_id: str
    block_id: str | None = None
    step_id: str | None = None


class MemoryEntry(msgspec.Struct, frozen=True):
    name: str
    has_value: bool = False
    value: Any = None


class MemoryCheck(msgspec.Struct, frozen=True):
    kind: str  # memory_was_set | memory_was_not_set | memory_was_cleared
    entries: tuple[MemoryEntry, ...]


class MemoryStep(msgspec.Struct, frozen=True):
    """A sequencing step ``memory_was_set: key`` or ``memory_was_cleared: key``."""

    kind: str
    name: str


class ToolCall(msgspec.Struct, frozen=True):
    tool_name: str
    source: str
    mcp_server: str | None = None
    skill_id: str | None = None
    arguments: dict[str, Any] | None = None
    is_error: bool | None = None


class ToolExecutedCheck(msgspec.Struct, frozen=True):
    call: ToolCall
    kind: ClassVar[str] = "tool_executed"


class ToolsWithinOneTurnCheck(msgspec.Struct, frozen=True):
    calls: tuple[ToolCall, ...]
    allow_extra_calls: bool
    ordered: bool = False
    kind: ClassVar[str] = "tools_within_one_turn"


class Button(msgspec.Struct, frozen=True):
    title: str
    payload: str | None = None  # None: any payload


class BotCheck(msgspec.Struct, frozen=True):
    kind: str  # bot_uttered | bot_did_not_utter
    utter_name: str | None = None
    text_matches: str | None = None
    buttons: tuple[Button, ...] | None = None


Step = LifecycleCheck | ToolExecutedCheck | MemoryStep


class SequencingCheck(msgspec.Struct, frozen=True):
    steps: tuple[Step, ...]
    kind: ClassVar[str] = "sequencing"


Assertion = (
    LifecycleCheck
    | MemoryCheck
    | ToolExecutedCheck
    | ToolsWithinOneTurnCheck
    | BotCheck
    | SequencingCheck
)


class Scenario(msgspec.Struct, frozen=True):
    """A loaded, valid scenario file."""

    name: str
    simulation_context: str
    assertions: tuple[Assertion, ...] = ()
    type: str | None = None
    initial_slots: dict[str, Any] = {}
    criteria: tuple[str, ...] = ()
    path: str = "<string>"
    lines: tuple[int, ...] = ()  # 1-based line of each assertion, for reports

    @property
    def stem(self) -> str:
        """The file name without extension: a second name a feed may use."""
        return Path(self.path).stem


# --------------------------------------------------------------------------- validation

_TOOL_FIELDS = ("tool_name", "source", "mcp_server", "skill_id", "arguments", "is_error")
_WRAP_HINT = "wrap each call in `tool_executed:` (`- tool_executed: {tool_name: ..., source: ...}`)"
_TOOL_HINT = "write `- tool_executed:` and indent the fields of the call under it"


def _fields(kind: str) -> tuple[str, ...]:
    """The keys a check of ``kind`` takes under it (for shape hints)."""
    if kind in SKILL_KINDS:
        return ("skill_id", "step_id")
    if kind in BLOCK_KINDS:
        return ("skill_id", "block_id", "step_id")
    if kind in MEMORY_KINDS:
        return ("name", "value")
    if kind == "tool_executed":
        return _TOOL_FIELDS
    if kind == "tools_within_one_turn":
        return ("calls", "allow_extra_calls", "ordered")
    if kind in BOT_KINDS:
        return ("utter_name", "text_matches", "buttons")
    return ()


def _shape_hint(
    mapping: dict[str, tuple[YNode, YNode]], what: str, kinds: tuple[str, ...]
) -> str | None:
    """What to do about a list item that is not one check: why it has other keys."""
    noun = what.split(" ", 1)[1]  # "an assertion" -> "assertion"
    keys = list(mapping)
    checks = [k for k in keys if k in ALL_KINDS]
    if len(checks) >= 2:
        return f"start each {noun} with its own `- `"
    if len(checks) == 1:
        (kind,) = checks
        extra = [k for k in keys if k != kind]
        if mapping[kind][1].value is None:
            # `- skill_activated:` with its fields at the same indentation
            return f"indent the fields of `{kind}` under it"
        listed = ", ".join(f"`{k}`" for k in extra)
        if all(k in _fields(kind) for k in extra):
            return f"move {listed} into `{kind}`"
        return f"only `{kind}` belongs at this level; move {listed} into it or remove " + (
            "it" if len(extra) == 1 else "them"
        )
    if keys and "tool_executed" in kinds and all(k in _TOOL_FIELDS for k in keys):
        return _WRAP_HINT if what == "a call" else _TOOL_HINT
    if not keys:
        return (
            "write each call as `- tool_executed: {tool_name: ..., source: ...}`"
            if what == "a call"
            else "write the check's kind as the key, e.g. "
            "`- skill_activated: {skill_id: card_replace}`"
        )
    return did_you_mean(keys[0], kinds)


class _Checker:
    """Walks a scenario's node tree, collecting diagnostics."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.lines = source_lines(text)
        self.problems: list[Diagnostic] = []

    # -- reporting

    def error(self, node: YNode, message: str, hint: str | None = None) -> None:
        src = self.lines[node.line - 1] if 0 < node.line <= len(self.lines) else ""
        self.problems.append(Diagnostic(self.path, node.line, node.col, message, src, hint))

    # -- shape helpers

    def mapping(self, node: YNode, what: str) -> dict[str, tuple[YNode, YNode]] | None:
        if not node.is_map:
            self.error(node, f"{what} must be a mapping, got {describe(node)}")
            return None
        value: dict[str, tuple[YNode, YNode]] = node.value
        return value

    def keys(
        self,
        owner: YNode,
        mapping: dict[str, tuple[YNode, YNode]],
        what: str,
        *,
        required: Iterable[str] = (),
        optional: Iterable[str] = (),
        rejected: dict[str, str] | None = None,
        missing_hints: dict[str, str] | None = None,
    ) -> bool:
        """Check required/optional/rejected keys; True when nothing is missing or unknown.

        A missing key is reported at ``owner``: the key whose value the mapping
        is (`tools_within_one_turn:`), or the mapping itself when no key owns
        it (the document, a list item). The mapping's own position would be
        its first key, which has nothing to do with what is missing.
        """
        required = tuple(required)
        allowed = set(required) | set(optional)
        ok = True
        for key, (key_node, _) in mapping.items():
            if key in allowed:
                continue
            ok = False
            if rejected and key in rejected:
                self.error(key_node, f"`{key}` is not allowed in {what}", rejected[key])
            else:
                hint = did_you_mean(key, allowed) or (
                    f"allowed keys: {', '.join(f'`{k}`' for k in sorted(allowed))}"
                    if allowed
                    else None
                )
                self.error(key_node, f"unknown key `{key}` in {what}", hint)
        for key in required:
            if key not in mapping:
                ok = False
                hint = (missing_hints or {}).get(key)
                self.error(owner, f"{what} is missing required key `{key}`", hint)
        return ok

    def string(self, mapping: dict[str, tuple[YNode, YNode]], key: str, what: str) -> str | None:
        if key not in mapping:
            return None
        node = mapping[key][1]
        if not isinstance(node.value, str):
            self.error(node, f"`{key}` in {what} must be a string, got {describe(node)}")
            return None
        return node.value

    def boolean(self, mapping: dict[str, tuple[YNode, YNode]], key: str, what: str) -> bool | None:
        if key not in mapping:
            return None
        node = mapping[key][1]
        if not isinstance(node.value, bool):
            hint = None
            if isinstance(node.value, str) and node.value.lower() in {"yes", "no", "on", "off"}:
                hint = (
                    "scenario files are YAML 1.2: only `true` and `false` are booleans, "
                    f"`{node.value}` is a string"
                )
            self.error(node, f"`{key}` in {what} must be true or false, got {describe(node)}", hint)
            return None
        return bool(node.value)

    # -- document

    def scenario(self, root: YNode | None) -> Scenario | None:
        if root is None:
            self.problems.append(
                Diagnostic(
                    self.path,
                    1,
                    1,
                    "the file is empty",
                    hint="a scenario file starts with `scenario:`",
                )
            )
            return None
        top = self.mapping(root, "the document")
        if top is None:
            return None
        self.keys(root, top, "the document", required=("scenario",))
        if "scenario" not in top:
            return None
        scenario_key, node = top["scenario"]
        body = self.mapping(node, "`scenario`")
        if body is None:
            return None
        self.keys(
            scenario_key,
            body,
            "`scenario`",
            required=("name", "simulation_context"),
            optional=("type", "setup", "goals"),
        )
        name = self.string(body, "name", "`scenario`")
        context = self.string(body, "simulation_context", "`scenario`")
        stype = self.string(body, "type", "`scenario`")
        slots: dict[str, Any] = {}
        if "setup" in body:
            setup_key, setup_node = body["setup"]
            setup = self.mapping(setup_node, "`setup`")
            if setup is not None:
                self.keys(setup_key, setup, "`setup`", optional=("initial_slots",))
                if "initial_slots" in setup:
                    slots_node = setup["initial_slots"][1]
                    if self.mapping(slots_node, "`initial_slots`") is not None:
                        slots = to_plain(slots_node)
        criteria: list[str] = []
        assertions: list[Assertion] = []
        lines: list[int] = []
        if "goals" in body:
            goals_key, goals_node = body["goals"]
            goals = self.mapping(goals_node, "`goals`")
            if goals is not None:
                self.keys(goals_key, goals, "`goals`", optional=("criteria", "assertions"))
                if "criteria" in goals:
                    criteria = self.criteria(goals["criteria"][1])
                if "assertions" in goals:
                    items = goals["assertions"][1]
                    if items.value is None:
                        items = YNode([], items.line, items.col)
                    if not items.is_seq:
                        self.error(items, f"`assertions` must be a list, got {describe(items)}")
                    else:
                        for item in items.value:
                            spec = self.assertion(item)
                            if spec is not None:
                                assertions.append(spec)
                                lines.append(item.line)
        if self.problems or name is None or context is None:
            return None
        return Scenario(
            name=name,
            simulation_context=context,
            assertions=tuple(assertions),
            type=stype,
            initial_slots=slots,
            criteria=tuple(criteria),
            path=self.path,
            lines=tuple(lines),
        )

    def criteria(self, node: YNode) -> list[str]:
        if node.value is None:
            return []
        if not node.is_seq:
            self.error(node, f"`criteria` must be a list, got {describe(node)}")
            return []
        out = []
        for item in node.value:
            if isinstance(item.value, str):
                out.append(item.value)
            else:
                self.error(item, f"a criterion must be a string, got {describe(item)}")
        return out

    # -- assertions

    def single_key(
        self, node: YNode, what: str, kinds: Iterable[str] = ALL_KINDS
    ) -> tuple[str, YNode, YNode] | None:
        """An assertion is a mapping with exactly one key, the check's kind."""
        mapping = self.mapping(node, what)
        if mapping is None:
            return None
        kinds = tuple(kinds)
        if len(mapping) != 1:
            names = ", ".join(f"`{k}`" for k in mapping) or "nothing"
            self.error(
                node,
                f"{what} must have exactly one key, the check's kind; got {names}",
                _shape_hint(mapping, what, kinds),
            )
            return None
        ((kind, (key_node, value_node)),) = mapping.items()
        if kind not in ALL_KINDS:
            hint = did_you_mean(kind, kinds)
            if kind in _TOOL_FIELDS and "tool_executed" in kinds:
                hint = _WRAP_HINT if what == "a call" else _TOOL_HINT
            self.error(key_node, f"unknown assertion `{kind}`", hint)
            return None
        return kind, key_node, value_node

    def assertion(self, node: YNode) -> Assertion | None:
        found = self.single_key(node, "an assertion")
        if found is None:
            return None
        kind, key_node, value = found
        if kind in SKILL_KINDS or kind in BLOCK_KINDS:
            return self.lifecycle(kind, key_node, value)
        if kind in MEMORY_KINDS:
            return self.memory(kind, value)
        if kind == "tool_executed":
            call = self.tool_call(key_node, value, "`tool_executed`")
            return None if call is None else ToolExecutedCheck(call)
        if kind == "tools_within_one_turn":
            return self.tools_within_one_turn(key_node, value)
        if kind in BOT_KINDS:
            return self.bot(kind, key_node, value)
        return self.sequencing(key_node, value)

    def lifecycle(self, kind: str, key_node: YNode, node: YNode) -> LifecycleCheck | None:
        what = f"`{kind}`"
        mapping = self.mapping(node, what)
        if mapping is None:
            return None
        is_block = kind in BLOCK_KINDS
        takes_step = (BLOCK_KINDS if is_block else SKILL_KINDS)[kind]
        required = ("skill_id", "block_id") if is_block else ("skill_id",)
        rejected = (
            None
            if takes_step
            else {
                "step_id": f"{what} is recorded without a step; only the cancel, interrupt and "
                "resume checks (and completed, for ordered blocks) take `step_id`"
            }
        )
        ok = self.keys(
            key_node,
            mapping,
            what,
            required=required,
            optional=("step_id",) if takes_step else (),
            rejected=rejected,
        )
        skill_id = self.string(mapping, "skill_id", what)
        block_id = self.string(mapping, "block_id", what) if is_block else None
        step_id = self.string(mapping, "step_id", what) if takes_step else None
        if not ok or skill_id is None or (is_block and block_id is None):
            return None
        if "step_id" in mapping and step_id is None:
            return None
        return LifecycleCheck(kind=kind, skill_id=skill_id, block_id=block_id, step_id=step_id)

    def memory_name(self, node: YNode, what: str) -> str | None:
        if not isinstance(node.value, str):
            self.error(node, f"`name` in {what} must be a string, got {describe(node)}")
            return None
        name: str = node.value
        if name.startswith("session."):
            self.error(
                node,
                f"memory key `{name}` starts with `session.` and can never match",
                f"the tracker stores keys without it: write `{name[len('session.') :]}`",
            )
            return None
        if not name:
            self.error(node, f"`name` in {what} must not be empty")
            return None
        return name

    def memory(self, kind: str, node: YNode) -> MemoryCheck | None:
        what = f"`{kind}`"
        if not node.is_seq:
            hint = "write a list of entries: `- name: scope.field`"
            if isinstance(node.value, str):
                hint = (
                    f"write `{kind}: [{{name: {node.value}}}]`; the bare key form is only "
                    "for steps inside `sequencing`"
                )
            self.error(node, f"{what} takes a list of entries, got {describe(node)}", hint)
            return None
        if not node.value:
            self.error(node, f"{what} needs at least one entry")
            return None
        entries: list[MemoryEntry] = []
        ok = True
        for entry_node in node.value:
            entry = self.memory_entry(kind, entry_node)
            if entry is None:
                ok = False
            else:
                entries.append(entry)
        return MemoryCheck(kind=kind, entries=tuple(entries)) if ok else None

    def memory_entry(self, kind: str, node: YNode) -> MemoryEntry | None:
        what = f"an entry of `{kind}`"
        mapping = self.mapping(node, what)
        if mapping is None:
            return None
        rejected = None
        optional: tuple[str, ...] = ("value",)
        if kind == "memory_was_cleared":
            optional = ()
            rejected = {"value": "a clear has no value; remove `value`"}
        ok = self.keys(
            node, mapping, what, required=("name",), optional=optional, rejected=rejected
        )
        name = self.memory_name(mapping["name"][1], what) if "name" in mapping else None
        if "value" in mapping and kind != "memory_was_cleared":
            value_node = mapping["value"][1]
            if value_node.value is None:
                self.error(
                    value_node,
                    f"`value` in {what} must not be null",
                    "null is not accepted as a memory value; to check that the key was "
                    "cleared use `memory_was_cleared`",
                )
                return None
            if not ok or name is None:
                return None
            return MemoryEntry(name=name, has_value=True, value=to_plain(value_node))
        if not ok or name is None:
            return None
        return MemoryEntry(name=name)

    def tool_call(self, key_node: YNode, node: YNode, what: str) -> ToolCall | None:
        mapping = self.mapping(node, what)
        if mapping is None:
            return None
        ok = self.keys(
            key_node,
            mapping,
            what,
            required=("tool_name", "source"),
            optional=("mcp_server", "skill_id", "arguments", "is_error"),
        )
        tool_name = self.string(mapping, "tool_name", what)
        source = self.string(mapping, "source", what)
        if source is not None and source not in ("local", "mcp"):
            self.error(
                mapping["source"][1],
                f"`source` in {what} must be `local` or `mcp`, got `{source}`",
                did_you_mean(source, ("local", "mcp")),
            )
            ok = False
        mcp_server = self.string(mapping, "mcp_server", what)
        if source == "local" and "mcp_server" in mapping:
            self.error(
                mapping["mcp_server"][0],
                f"`mcp_server` is not allowed in {what} with source `local`",
                "a local run has no MCP server; remove `mcp_server` or set `source: mcp`",
            )
            ok = False
        if source == "mcp" and "mcp_server" not in mapping:
            self.error(
                key_node,
                f"{what} with source `mcp` is missing required key `mcp_server`",
                "the server is not inferred from the tool name",
            )
            ok = False
        skill_id = self.string(mapping, "skill_id", what)
        is_error = self.boolean(mapping, "is_error", what)
        arguments = None
        if "arguments" in mapping:
            arg_node = mapping["arguments"][1]
            if self.mapping(arg_node, f"`arguments` in {what}") is None:
                ok = False
            else:
                arguments = to_plain(arg_node)
        for key in ("tool_name", "source", "mcp_server", "skill_id"):
            if key in mapping and not isinstance(mapping[key][1].value, str):
                ok = False
        if "is_error" in mapping and is_error is None:
            ok = False
        if not ok or tool_name is None or source is None:
            return None
        return ToolCall(
            tool_name=tool_name,
            source=source,
            mcp_server=mcp_server,
            skill_id=skill_id,
            arguments=arguments,
            is_error=is_error,
        )

    def tools_within_one_turn(self, key_node: YNode, node: YNode) -> ToolsWithinOneTurnCheck | None:
        what = "`tools_within_one_turn`"
        mapping = self.mapping(node, what)
        if mapping is None:
            return None
        ok = self.keys(
            key_node,
            mapping,
            what,
            required=("calls", "allow_extra_calls"),
            optional=("ordered",),
            missing_hints={
                "allow_extra_calls": "say `true` to allow other tool runs in the "
                "turn, `false` to forbid them"
            },
        )
        allow = self.boolean(mapping, "allow_extra_calls", what)
        ordered = self.boolean(mapping, "ordered", what)
        calls: list[ToolCall] = []
        if "calls" in mapping:
            calls_node = mapping["calls"][1]
            if not calls_node.is_seq:
                self.error(
                    calls_node,
                    "`calls` must be a list of `tool_executed` entries, got "
                    f"{describe(calls_node)}",
                )
                ok = False
            else:
                if len(calls_node.value) < 2:
                    self.error(
                        calls_node,
                        f"{what} needs at least two calls, got {len(calls_node.value)}",
                        "for a single tool run use `tool_executed`",
                    )
                    ok = False
                for item in calls_node.value:
                    found = self.single_key(item, "a call", ("tool_executed",))
                    if found is None:
                        ok = False
                        continue
                    kind, call_key, value = found
                    if kind != "tool_executed":
                        self.error(
                            call_key, f"a call in {what} must be `tool_executed`, got `{kind}`"
                        )
                        ok = False
                        continue
                    call = self.tool_call(call_key, value, "`tool_executed`")
                    if call is None:
                        ok = False
                    else:
                        calls.append(call)
        if not ok or allow is None or ("ordered" in mapping and ordered is None):
            return None
        return ToolsWithinOneTurnCheck(
            calls=tuple(calls), allow_extra_calls=allow, ordered=bool(ordered)
        )

    def bot(self, kind: str, key_node: YNode, node: YNode) -> BotCheck | None:
        what = f"`{kind}`"
        if node.value is None:
            node = YNode({}, node.line, node.col)
        mapping = self.mapping(node, what)
        if mapping is None:
            return None
        ok = self.keys(key_node, mapping, what, optional=("utter_name", "text_matches", "buttons"))
        if not mapping:
            self.error(
                node,
                f"{what} needs at least one of `utter_name`, `text_matches`, `buttons`",
                "a check with no field would match every message",
            )
            return None
        utter_name = self.string(mapping, "utter_name", what)
        text_matches = self.string(mapping, "text_matches", what)
        for key in ("utter_name", "text_matches"):
            if key in mapping and not isinstance(mapping[key][1].value, str):
                ok = False
        if text_matches is not None:
            try:
                re.compile(text_matches)
            except re.error as exc:
                pattern_node = mapping["text_matches"][1]
                self.error(
                    pattern_node,
                    f"`text_matches` is not a valid regular expression: "
                    f"{exc.msg} at position {exc.pos}",
                    "it is a Python regular expression; escape special characters with a backslash",
                )
                ok = False
        buttons = None
        if "buttons" in mapping:
            buttons = self.buttons(mapping["buttons"][1], what)
            ok = ok and buttons is not None
        if not ok:
            return None
        return BotCheck(
            kind=kind, utter_name=utter_name, text_matches=text_matches, buttons=buttons
        )

    def buttons(self, node: YNode, what: str) -> tuple[Button, ...] | None:
        if not node.is_seq:
            self.error(node, f"`buttons` in {what} must be a list, got {describe(node)}")
            return None
        out: list[Button] = []
        ok = True
        for item in node.value:
            mapping = self.mapping(item, "a button")
            if mapping is None:
                ok = False
                continue
            ok = (
                self.keys(item, mapping, "a button", required=("title",), optional=("payload",))
                and ok
            )
            title = self.string(mapping, "title", "a button")
            payload = self.string(mapping, "payload", "a button")
            if title is None or ("payload" in mapping and payload is None):
                ok = False
                continue
            out.append(Button(title=title, payload=payload))
        return tuple(out) if ok else None

    def sequencing(self, key_node: YNode, node: YNode) -> SequencingCheck | None:
        what = "`sequencing`"
        if not node.is_seq:
            self.error(node, f"{what} takes a list of steps, got {describe(node)}")
            return None
        if not node.value:
            self.error(node, f"{what} needs at least one step")
            return None
        allowed = (
            *SKILL_KINDS,
            *BLOCK_KINDS,
            "tool_executed",
            "memory_was_set",
            "memory_was_cleared",
        )
        not_allowed = {
            "memory_was_not_set": "it can only be judged at the end, not at a point in order",
            "tools_within_one_turn": "it spans a whole turn, not one event",
            "bot_uttered": "Mantle's scenario schema allows skill, ordered-block, "
            "`tool_executed` and memory steps only; check the message with a "
            "`bot_uttered` assertion of its own",
            "bot_did_not_utter": "it can only be judged at the end, not at a point in order",
            "sequencing": "sequencing cannot be nested; list the steps in one sequence",
        }
        steps: list[Step] = []
        ok = True
        for item in node.value:
            found = self.single_key(item, "a sequencing step", allowed)
            if found is None:
                ok = False
                continue
            kind, step_key, value = found
            if kind in not_allowed:
                self.error(step_key, f"`{kind}` is not allowed inside {what}", not_allowed[kind])
                ok = False
                continue
            step: Step | None
            if kind in ("memory_was_set", "memory_was_cleared"):
                step = self.memory_step(kind, value)
            elif kind == "tool_executed":
                call = self.tool_call(step_key, value, "`tool_executed`")
                step = None if call is None else ToolExecutedCheck(call)
            else:
                step = self.lifecycle(kind, step_key, value)
            if step is None:
                ok = False
            else:
                steps.append(step)
        return SequencingCheck(steps=tuple(steps)) if ok else None

    def memory_step(self, kind: str, node: YNode) -> MemoryStep | None:
        if not isinstance(node.value, str):
            shape = "list" if node.is_seq else "mapping" if node.is_map else None
            hint = f"write `- {kind}: scope.field`"
            if shape:
                hint += "; inside `sequencing` a memory step cannot carry a value"
            self.error(
                node,
                f"inside `sequencing`, `{kind}` takes the key name as a string, "
                f"got {describe(node)}",
                hint,
            )
            return None
        name = self.memory_name(node, f"`{kind}`")
        return None if name is None else MemoryStep(kind=kind, name=name)


# --------------------------------------------------------------------------- loading


def _utf8_size(text: str) -> int:
    """The size of ``text`` in bytes, as it would be on disk."""
    if len(text) > MAX_SCENARIO_BYTES or 4 * len(text) <= MAX_SCENARIO_BYTES:
        return len(text)  # decided without encoding: too long already, or surely short enough
    # surrogatepass: a lone surrogate is the YAML reader's to report, not an error here
    return len(text.encode("utf-8", "surrogatepass"))


def _too_large(path: str, message: str) -> ScenarioError:
    return ScenarioError(
        [
            Diagnostic(
                path,
                1,
                1,
                message,
                hint="a scenario file is a few KiB of YAML; is this the right file?",
            )
        ]
    )


def load_scenario_text(text: str, path: str = "<string>") -> Scenario:
    """Load one scenario from YAML text; raise :class:`ScenarioError` listing every problem.

    The text may be at most :data:`MAX_SCENARIO_BYTES` bytes once UTF-8 encoded,
    the same limit :func:`load_scenario_file` applies to a file.
    """
    if _utf8_size(text) > MAX_SCENARIO_BYTES:
        raise _too_large(path, f"scenario file is larger than {MAX_SCENARIO_BYTES // 1024} KiB")
    try:
        root, problems = compose(text, path)
    except YamlProblem as exc:
        raise ScenarioError(exc.diagnostics) from None
    checker = _Checker(path, text)
    checker.problems.extend(problems)
    scenario = checker.scenario(root)
    if checker.problems or scenario is None:
        diagnostics = sorted(checker.problems, key=lambda d: (d.line, d.col))
        raise ScenarioError(diagnostics)
    return scenario


def load_scenario_file(path: str | os.PathLike[str]) -> Scenario:
    """Load one scenario file (at most :data:`MAX_SCENARIO_BYTES` bytes)."""
    name = os.fspath(path)
    try:
        size = os.path.getsize(name)
        if size > MAX_SCENARIO_BYTES:
            raise _too_large(
                name,
                f"scenario file is {size} bytes, larger than the "
                f"{MAX_SCENARIO_BYTES // 1024} KiB limit",
            )
        with open(name, encoding="utf-8") as fh:
            # Bounded even when the size above says nothing (a pipe, a file still
            # growing): one character more than the limit is enough to refuse it.
            text = fh.read(MAX_SCENARIO_BYTES + 1)
    except UnicodeDecodeError as exc:
        raise ScenarioError([Diagnostic(name, 1, 1, f"not UTF-8 text: {exc.reason}")]) from None
    except OSError as exc:
        raise ScenarioError([Diagnostic(name, 1, 1, f"cannot read: {exc.strerror}")]) from None
    return load_scenario_text(text, name)


def scenario_paths(paths: Iterable[str | os.PathLike[str]]) -> Iterator[str]:
    """Expand directories into the ``*.yml`` / ``*.yaml`` files inside them, sorted.

    Raises :class:`ScenarioError` at a directory that holds no scenario file.
    """
    for path in paths:
        name = os.fspath(path)
        if os.path.isdir(name):
            found = sorted(
                os.path.join(root, f)
                for root, _, files in os.walk(name)
                for f in files
                if f.endswith((".yml", ".yaml"))
            )
            if not found:
                raise ScenarioError(
                    [Diagnostic(name, 1, 1, "no *.yml or *.yaml files in this directory")]
                )
            yield from found
        else:
            yield name


def load_scenarios(paths: Iterable[str | os.PathLike[str]]) -> list[Scenario]:
    """Load every scenario file (directories expanded); all problems of all files at once."""
    scenarios: list[Scenario] = []
    problems: list[Diagnostic] = []
    for path in paths:
        try:
            # One argument at a time, so that an empty directory does not hide
            # the problems of the other arguments.
            files = list(scenario_paths([path]))
        except ScenarioError as exc:
            problems.extend(exc.diagnostics)
            continue
        for name in files:
            try:
                scenarios.append(load_scenario_file(name))
            except ScenarioError as exc:
                problems.extend(exc.diagnostics)
    if problems:
        raise ScenarioError(problems)
    return scenarios
