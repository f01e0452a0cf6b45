"""Memory checks: ``memory_was_set``, ``memory_was_not_set``, ``memory_was_cleared``.

Memory keys are compared as Mantle stores them (without ``session.``);
values by JSON type and value (see :mod:`mantle_stream.core.values`). A write
or a clear of one key may also be a step of ``sequencing`` (written
``- memory_was_set: scope.field``, without a value).
"""

from __future__ import annotations

from typing import Any

import msgspec

from mantle_stream.core.assertions.base import (
    AssertionKind,
    Checker,
    CompileContext,
    Compiled,
    Machine,
    Matcher,
    Outcome,
    Step,
    fmt_value,
    with_near,
)
from mantle_stream.core.events.model import MemorySet, Payload
from mantle_stream.core.scenario.model import Check
from mantle_stream.core.scenario.source import YNode, describe, to_plain
from mantle_stream.core.values import strict_equal

__all__ = [
    "KINDS",
    "MemoryAll",
    "MemoryCheck",
    "MemoryEntry",
    "MemoryMatcher",
    "MemoryNotSet",
    "MemoryStep",
]


class MemoryEntry(msgspec.Struct, frozen=True):
    name: str
    has_value: bool = False
    value: Any = None


class MemoryCheck(Check, frozen=True):
    kind: str  # memory_was_set | memory_was_not_set | memory_was_cleared
    entries: tuple[MemoryEntry, ...]


class MemoryStep(Check, frozen=True):
    """A sequencing step ``memory_was_set: key`` or ``memory_was_cleared: key``."""

    kind: str
    name: str


def memory_name(c: Checker, node: YNode, what: str) -> str | None:
    if not isinstance(node.value, str):
        c.error(node, f"`name` in {what} must be a string, got {describe(node)}")
        return None
    name: str = node.value
    if name.startswith("session."):
        c.error(
            node,
            f"memory key `{name}` starts with `session.` and can never match",
            f"the tracker stores keys without it: write `{name[len('session.') :]}`",
        )
        return None
    if not name:
        c.error(node, f"`name` in {what} must not be empty")
        return None
    return name


def memory(c: Checker, kind: str, node: YNode) -> MemoryCheck | None:
    what = f"`{kind}`"
    if not node.is_seq:
        hint = "write a list of entries: `- name: scope.field`"
        if isinstance(node.value, str):
            hint = (
                f"write `{kind}: [{{name: {node.value}}}]`; the bare key form is only "
                "for steps inside `sequencing`"
            )
        c.error(node, f"{what} takes a list of entries, got {describe(node)}", hint)
        return None
    if not node.value:
        c.error(node, f"{what} needs at least one entry")
        return None
    entries: list[MemoryEntry] = []
    ok = True
    for entry_node in node.value:
        entry = memory_entry(c, kind, entry_node)
        if entry is None:
            ok = False
        else:
            entries.append(entry)
    return MemoryCheck(kind=kind, entries=tuple(entries)) if ok else None


def memory_entry(c: Checker, kind: str, node: YNode) -> MemoryEntry | None:
    what = f"an entry of `{kind}`"
    mapping = c.mapping(node, what)
    if mapping is None:
        return None
    rejected = None
    optional: tuple[str, ...] = ("value",)
    if kind == "memory_was_cleared":
        optional = ()
        rejected = {"value": "a clear has no value; remove `value`"}
    ok = c.keys(node, mapping, what, required=("name",), optional=optional, rejected=rejected)
    name = memory_name(c, mapping["name"][1], what) if "name" in mapping else None
    if "value" in mapping and kind != "memory_was_cleared":
        value_node = mapping["value"][1]
        if value_node.value is None:
            c.error(
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


def memory_step(c: Checker, kind: str, node: YNode) -> MemoryStep | None:
    if not isinstance(node.value, str):
        shape = "list" if node.is_seq else "mapping" if node.is_map else None
        hint = f"write `- {kind}: scope.field`"
        if shape:
            hint += "; inside `sequencing` a memory step cannot carry a value"
        c.error(
            node,
            f"inside `sequencing`, `{kind}` takes the key name as a string, got {describe(node)}",
            hint,
        )
        return None
    name = memory_name(c, node, f"`{kind}`")
    return None if name is None else MemoryStep(kind=kind, name=name)


class MemoryMatcher(Matcher):
    """A write (``memory_set``) or a clear (``memory_cleared``) of one key."""

    __slots__ = ("event_kind", "has_value", "name", "value")

    def __init__(
        self, event_kind: str, name: str, has_value: bool = False, value: Any = None
    ) -> None:
        self.event_kind = event_kind
        self.name = name
        self.has_value = has_value
        self.value = value
        self.routes = ((event_kind, name),)

    def matches(self, payload: Payload, value: Any) -> bool:
        if payload.kind != self.event_kind or payload.key != self.name:  # type: ignore[attr-defined]
            return False
        return not self.has_value or strict_equal(value, self.value)

    def describe(self) -> str:
        if self.event_kind == "memory_cleared":
            return f"memory `{self.name}` cleared"
        if self.has_value:
            return f"memory `{self.name}` set to {fmt_value(self.value)}"
        return f"memory `{self.name}` set"

    def never(self) -> str:
        if self.event_kind == "memory_cleared":
            return f"memory `{self.name}` was never cleared"
        if self.has_value:
            return f"memory `{self.name}` was never set to {fmt_value(self.value)}"
        return f"memory `{self.name}` was never set"

    def near_miss(self, payload: Payload, value: Any) -> str | None:
        if self.has_value and isinstance(payload, MemorySet) and payload.key == self.name:
            return (
                f"memory `{self.name}` was set to {fmt_value(value)}, expected "
                f"{fmt_value(self.value)}"
            )
        return None


class MemoryAllPlan:
    """memory_was_set / memory_was_cleared with one or more entries (AND)."""

    __slots__ = ("by_name", "full", "matchers")

    def __init__(self, matchers: list[MemoryMatcher]) -> None:
        self.matchers = matchers
        self.full = (1 << len(matchers)) - 1
        by_name: dict[str, list[tuple[int, MemoryMatcher]]] = {}
        for i, m in enumerate(matchers):
            by_name.setdefault(m.name, []).append((1 << i, m))
        self.by_name = {k: tuple(v) for k, v in by_name.items()}


class MemoryAll(Machine):
    __slots__ = ("done", "near")
    plan: MemoryAllPlan

    def __init__(self, plan: MemoryAllPlan) -> None:
        self.plan = plan
        self.done = 0  # bit i: entry i has matched
        # The last miss, as (matcher, payload, value), worded only on failure.
        self.near: tuple[MemoryMatcher, Payload, Any] | str | None = None

    def step(self, payload: Payload, value: Any, turn: int) -> Step:
        plan = self.plan
        for bit, matcher in plan.by_name[payload.key]:  # type: ignore[attr-defined]
            if self.done & bit:
                continue
            if matcher.matches(payload, value):
                self.done |= bit
            else:
                self.near = (matcher, payload, value)
        if self.done == plan.full:
            return True, "; ".join(m.describe() for m in plan.matchers)
        return None

    def _near_text(self) -> str | None:
        near = self.near
        if near is None or isinstance(near, str):
            return near
        matcher, payload, value = near
        return matcher.near_miss(payload, value)

    def finish(self) -> Outcome:
        missing = [m.never() for i, m in enumerate(self.plan.matchers) if not self.done & (1 << i)]
        return False, with_near("; ".join(missing), self._near_text())

    def state(self) -> list[Any]:
        return [self.done, self._near_text()]

    def restore(self, state: list[Any]) -> None:
        self.done, self.near = state


class MemoryNotSetPlan:
    """memory_was_not_set: entries without a value fail on any write of the key;
    entries with a value are judged on the last write at the end."""

    __slots__ = ("by_name", "entries")

    def __init__(self, entries: list[tuple[str, bool, Any]]) -> None:
        self.entries = entries
        by_name: dict[str, list[tuple[int, bool, Any]]] = {}
        for i, (name, has_value, value) in enumerate(entries):
            by_name.setdefault(name, []).append((1 << i, has_value, value))
        self.by_name = {k: tuple(v) for k, v in by_name.items()}


class MemoryNotSet(Machine):
    __slots__ = ("last_equal",)
    plan: MemoryNotSetPlan

    def __init__(self, plan: MemoryNotSetPlan) -> None:
        self.plan = plan
        self.last_equal = 0  # bit i: the last write of entry i's key equalled its value

    def step(self, payload: Payload, value: Any, turn: int) -> Step:
        name: str = payload.key  # type: ignore[attr-defined]
        for bit, has_value, expected in self.plan.by_name[name]:
            if not has_value:
                return False, f"memory `{name}` was set to {fmt_value(value)}"
            if strict_equal(value, expected):
                self.last_equal |= bit
            else:
                self.last_equal &= ~bit
        return None

    def finish(self) -> Outcome:
        bad = [
            (name, value)
            for i, (name, has_value, value) in enumerate(self.plan.entries)
            if has_value and self.last_equal & (1 << i)
        ]
        if bad:
            name, value = bad[0]
            return False, f"the last write of memory `{name}` was {fmt_value(value)}"
        names = ", ".join(f"`{name}`" for name, _, _ in self.plan.entries)
        return True, f"memory {names} never ended with a forbidden write"

    def state(self) -> list[Any]:
        return [self.last_equal]

    def restore(self, state: list[Any]) -> None:
        (self.last_equal,) = state


def _event_kind(kind: str) -> str:
    return "memory_set" if kind == "memory_was_set" else "memory_cleared"


def _compile(check: MemoryCheck, context: CompileContext) -> Compiled:
    names = {entry.name for entry in check.entries}
    if check.kind == "memory_was_not_set":
        entries = [(e.name, e.has_value, e.value) for e in check.entries]
        return MemoryNotSet, MemoryNotSetPlan(entries), {("memory_set", n) for n in names}
    event_kind = _event_kind(check.kind)
    matchers = [MemoryMatcher(event_kind, e.name, e.has_value, e.value) for e in check.entries]
    return MemoryAll, MemoryAllPlan(matchers), {(event_kind, n) for n in names}


def _step_matcher(step: MemoryStep) -> Matcher:
    return MemoryMatcher(_event_kind(step.kind), step.name)


def _validate(c: Checker, kind: str, key_node: YNode, node: YNode) -> MemoryCheck | None:
    return memory(c, kind, node)


def _step(c: Checker, kind: str, key_node: YNode, node: YNode) -> MemoryStep | None:
    return memory_step(c, kind, node)


KINDS = (
    AssertionKind("memory_was_set", ("name", "value"), _validate, _compile, _step, _step_matcher),
    AssertionKind(
        "memory_was_not_set",
        ("name", "value"),
        _validate,
        _compile,
        not_a_step="it can only be judged at the end, not at a point in order",
    ),
    AssertionKind(
        "memory_was_cleared", ("name", "value"), _validate, _compile, _step, _step_matcher
    ),
)
