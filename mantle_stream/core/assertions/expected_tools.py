"""``goals.expected_tools``: Rasa's tool-call expectations, read from a scenario file.

Not assertions: Rasa scores these entries (recall, precision, accuracy) beside
the assertions, and a ``gate: true`` entry fails a run only when tool-call
evaluation is on (``--tool-calls``). This module reads them into the
scenario model (:class:`~mantle_stream.core.scenario.model.ToolCalled`,
:class:`~mantle_stream.core.scenario.model.ToolGroup`) with the same
diagnostics as assertions: every problem at its line, with a hint.
:mod:`.tool_scores` judges them.

The shapes, as Rasa's scenario schema has them::

    expected_tools:
      - tool_called: check_balance             # a name ...
      - tool_called:                           # ... or a name and arguments
          tool_name: order_replacement
          arguments: {shipping: standard}
        gate: true                             # optional
      - tool_group:                            # these, and no other, in one turn
          - tool_called: check_balance
          - tool_called: {tool_name: order_replacement}
          - ordered: true                      # optional
          - gate: true                         # optional
"""

from __future__ import annotations

from mantle_stream.core.assertions.base import Checker
from mantle_stream.core.scenario.diagnostics import did_you_mean
from mantle_stream.core.scenario.model import (
    ExpectedTool,
    ExpectedToolsEntry,
    ToolCalled,
    ToolGroup,
)
from mantle_stream.core.scenario.source import YNode, describe, to_plain

__all__ = ["read_expected_tools"]

_ENTRY_KINDS = ("tool_called", "tool_group")
_GROUP_ITEMS = ("tool_called", "ordered", "gate")
_ENTRY = "an entry of `expected_tools`"
_ENTRY_HINT = (
    "an entry is `- tool_called: NAME` (a tool that must run) or `- tool_group: [...]` "
    "(tools that must run together in one turn)"
)
_TOOL_HINT = "write `tool_called: NAME` or `tool_called: {tool_name: NAME, arguments: {...}}`"
_FLAG_ITEM_HINT = "in a group, `{}` is an item of its own: `- {}: true`"
_CALL_FIELD_HINT = "`{}` belongs under `tool_called:`; indent it below that key"


def read_expected_tools(c: Checker, node: YNode) -> tuple[list[ExpectedToolsEntry], list[int]]:
    """The entries of ``expected_tools`` (``node``: its value) and the line of each.

    Every problem is reported on ``c``; an entry with a problem is left out.
    """
    entries: list[ExpectedToolsEntry] = []
    lines: list[int] = []
    if node.value is None:  # `expected_tools:` with nothing under it: none
        return entries, lines
    if not node.is_seq:
        c.error(node, f"`expected_tools` must be a list, got {describe(node)}", _ENTRY_HINT)
        return entries, lines
    for item in node.value:
        entry = _entry(c, item)
        if entry is not None:
            entries.append(entry)
            lines.append(item.line)
    return entries, lines


def _entry(c: Checker, item: YNode) -> ExpectedToolsEntry | None:
    if isinstance(item.value, str):
        c.error(
            item,
            f"{_ENTRY} must be a mapping, got {describe(item)}",
            f"write `- tool_called: {item.value}`",
        )
        return None
    mapping = c.mapping(item, _ENTRY)
    if mapping is None:
        return None
    kinds = [k for k in _ENTRY_KINDS if k in mapping]
    if len(kinds) == 2:
        c.error(
            item,
            f"{_ENTRY} is either `tool_called` or `tool_group`, not both",
            "start each entry with its own `- `",
        )
        return None
    if not kinds:
        if not mapping:
            c.error(item, f"{_ENTRY} is empty", _ENTRY_HINT)
            return None
        key, (key_node, _) = next(iter(mapping.items()))
        hint = (
            "write the call under `tool_called:` (`- tool_called: {tool_name: ..., "
            "arguments: ...}`)"
            if key in ("tool_name", "arguments")
            else did_you_mean(key, _ENTRY_KINDS) or _ENTRY_HINT
        )
        c.error(key_node, f"{_ENTRY} must be `tool_called` or `tool_group`, got `{key}`", hint)
        return None
    (kind,) = kinds
    key_node, value = mapping[kind]
    if kind == "tool_group":
        ok = c.keys(
            item,
            mapping,
            "a `tool_group` entry",
            optional=("tool_group",),
            rejected={flag: _FLAG_ITEM_HINT.format(flag, flag) for flag in ("gate", "ordered")},
        )
        group = _group(c, key_node, value)
        return group if ok else None
    what = "a `tool_called` entry"
    ok = c.keys(
        item,
        mapping,
        what,
        optional=("tool_called", "gate"),
        rejected={
            "ordered": "only a `tool_group` has an order",
            **{field: _CALL_FIELD_HINT.format(field) for field in ("tool_name", "arguments")},
        },
    )
    gate = c.boolean(mapping, "gate", what)
    tool = _tool(c, key_node, value)
    if not ok or tool is None or ("gate" in mapping and gate is None):
        return None
    return ToolCalled(tool, gate=bool(gate))


def _tool(c: Checker, key_node: YNode, node: YNode) -> ExpectedTool | None:
    """The value of a ``tool_called`` key: a name, or ``{tool_name, arguments}``."""
    what = "`tool_called`"
    value = node.value
    if isinstance(value, str):
        # Rasa strips the name; a name of blanks names nothing.
        if not value.strip():
            c.error(node, f"{what} must name a tool, got {describe(node)}", _TOOL_HINT)
            return None
        return ExpectedTool(value.strip())
    if value is None or not node.is_map:
        c.error(
            key_node if value is None else node,
            f"{what} must be a tool name or a mapping with `tool_name`, got {describe(node)}",
            _TOOL_HINT,
        )
        return None
    mapping = c.mapping(node, what)
    assert mapping is not None
    ok = c.keys(key_node, mapping, what, required=("tool_name",), optional=("arguments",))
    name = c.string(mapping, "tool_name", what)
    if name is not None and not name.strip():
        c.error(mapping["tool_name"][1], f"`tool_name` in {what} must not be empty", _TOOL_HINT)
        name = None
    arguments = None
    if "arguments" in mapping:
        arg_node = mapping["arguments"][1]
        # `arguments:` left empty reads as none, as Rasa reads it.
        if arg_node.value is not None:
            if c.mapping(arg_node, f"`arguments` in {what}") is None:
                ok = False
            else:
                arguments = to_plain(arg_node)
    if not ok or name is None:
        return None
    return ExpectedTool(name.strip(), arguments)


def _group(c: Checker, key_node: YNode, node: YNode) -> ToolGroup | None:
    what = "`tool_group`"
    if not node.is_seq or not node.value:
        got = "an empty list" if node.is_seq else describe(node)
        c.error(
            node if node.value is not None else key_node,
            f"{what} must be a non-empty list of `- tool_called: ...` items, got {got}",
            "list the tools of the group, one `- tool_called: NAME` each",
        )
        return None
    ok = True
    tools: list[ExpectedTool] = []
    ordered = gate = False
    for item in node.value:
        mapping = c.mapping(item, f"an item of {what}")
        if mapping is None:
            ok = False
            continue
        if len(mapping) != 1:
            keys = list(mapping)
            names = ", ".join(f"`{k}`" for k in keys) or "nothing"
            flags = [k for k in keys if k in ("ordered", "gate")]
            if flags and "tool_called" in keys:
                hint = _FLAG_ITEM_HINT.format(flags[0], flags[0])
            elif keys and set(keys) <= {"tool_name", "arguments"}:
                hint = "wrap the call in `tool_called:` (`- tool_called: {tool_name: ...}`)"
            else:
                hint = (
                    "each item is one of `- tool_called: NAME`, `- ordered: true`, `- gate: true`"
                )
            c.error(item, f"an item of {what} must have exactly one key; got {names}", hint)
            ok = False
            continue
        if not c.keys(item, mapping, f"an item of {what}", optional=_GROUP_ITEMS):
            ok = False
            continue
        ((key, (item_key, value)),) = mapping.items()
        if key == "tool_called":
            tool = _tool(c, item_key, value)
            if tool is None:
                ok = False
            else:
                tools.append(tool)
            continue
        flag = c.boolean(mapping, key, what)
        if flag is None:
            ok = False
        elif key == "ordered":
            ordered = flag  # given twice, the last one counts (as in Rasa)
        else:
            gate = flag
    if not tools and ok:
        c.error(
            key_node,
            f"{what} needs at least one `tool_called` item",
            "list the tools of the group, one `- tool_called: NAME` each",
        )
        return None
    if not ok:
        return None
    return ToolGroup(tuple(tools), ordered=ordered, gate=gate)
