"""Matchers: does one event satisfy one check? Pure predicates, no state.

Shared by the single-event machines, the sequencing cursor and the tool
windows, so that "what matches" is written once. Each matcher also knows its
*route*: the event kind and key (skill id, memory name, tool name) the engine
indexes it under, and how to explain a near miss in words a person can act
on.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import msgspec
import regex

from mantle_stream.core.defaults import DEFAULT_REGEX_TIMEOUT
from mantle_stream.core.events.model import (
    Bot,
    MemorySet,
    OrderedBlockEvent,
    Payload,
    SkillEvent,
    ToolExecuted,
    buttons_of,
    metadata_field,
)
from mantle_stream.core.scenario.model import (
    BotCheck,
    LifecycleCheck,
    MemoryStep,
    Step,
    ToolCall,
    ToolExecutedCheck,
)
from mantle_stream.core.values import strict_equal

__all__ = [
    "BotMatcher",
    "LifecycleMatcher",
    "MatchTimeout",
    "Matcher",
    "MemoryMatcher",
    "Route",
    "ToolMatcher",
    "compile_pattern",
    "fmt_value",
    "matcher_for",
    "may_backtrack",
    "nested_repetition",
]

# What the engine passes as ``value`` with each payload (see .machines):
# memory_set: the parsed value; tool_executed: (parsed arguments, the event's
# metadata, unparsed); bot: the response name from the metadata (when a loaded
# check names one), else None; other kinds: None.

#: (event kind, key or None for "every event of this kind")
Route = tuple[str, "str | None"]

_encode = msgspec.json.Encoder().encode


def fmt_value(value: Any) -> str:
    """A value as JSON in backticks with its type, so `5` and `"5"` read differently."""
    text = _encode(value).decode()
    if len(text) > 60:
        text = text[:59] + "…"
    kind = {
        bool: "boolean",
        int: "integer",
        float: "number",
        str: "string",
        list: "list",
        dict: "object",
    }.get(type(value), type(value).__name__)
    return f"`{text}` ({kind})"


class Matcher:
    """Base: a predicate over (payload, parsed value) plus routing and wording."""

    __slots__ = ("routes",)
    routes: tuple[Route, ...]

    def matches(self, payload: Payload, value: Any) -> bool:
        raise NotImplementedError

    def describe(self) -> str:
        """What is expected, for reasons ("skill `x` activated")."""
        raise NotImplementedError

    def never(self) -> str:
        """The failure, when nothing matched ("skill `x` was never activated")."""
        raise NotImplementedError

    def near_miss(self, payload: Payload, value: Any) -> str | None:
        """Why a routed event did not match, or None when it is unrelated."""
        return None


class LifecycleMatcher(Matcher):
    __slots__ = ("block_id", "check", "kind", "skill_id", "step_id", "verb")

    def __init__(self, check: LifecycleCheck) -> None:
        self.check = check
        self.kind = check.kind
        self.verb = check.kind.rsplit("_", 1)[1]  # skill_cancelled -> "cancelled"
        self.skill_id = check.skill_id
        self.block_id = check.block_id
        self.step_id = check.step_id
        self.routes = ((check.kind, check.skill_id),)

    def matches(self, payload: Payload, value: Any) -> bool:
        if payload.kind != self.kind:
            return False
        p: SkillEvent | OrderedBlockEvent = payload  # type: ignore[assignment]
        if p.skill_id != self.skill_id:
            return False
        if self.block_id is not None and p.block_id != self.block_id:  # type: ignore[union-attr]
            return False
        return self.step_id is None or p.step_id == self.step_id

    def _sentence(self, verb: str) -> str:
        if self.block_id is None:
            text = f"skill `{self.skill_id}` {verb}"
        else:
            text = f"ordered block `{self.block_id}` of skill `{self.skill_id}` {verb}"
        if self.step_id is not None:
            text += f" at step `{self.step_id}`"
        return text

    def describe(self) -> str:
        return self._sentence(self.verb)

    def never(self) -> str:
        return self._sentence(f"was never {self.verb}")

    def near_miss(self, payload: Payload, value: Any) -> str | None:
        if payload.kind != self.kind:
            return None
        block_id = getattr(payload, "block_id", None)
        if self.block_id is not None and block_id != self.block_id:
            return f"block `{block_id}` was {self.verb}, not `{self.block_id}`"
        step = getattr(payload, "step_id", None)
        if self.step_id is not None and step != self.step_id:
            return f"it was {self.verb} at step `{step}`, expected `{self.step_id}`"
        return None


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


class ToolMatcher(Matcher):
    __slots__ = ("arguments", "call", "is_error", "mcp_server", "skill_id", "source", "tool_name")

    def __init__(self, call: ToolCall) -> None:
        self.call = call
        self.tool_name = call.tool_name
        self.source = call.source
        self.mcp_server = call.mcp_server if call.source == "mcp" else None
        self.skill_id = call.skill_id
        self.is_error = call.is_error
        self.arguments = tuple((call.arguments or {}).items())
        self.routes = (("tool_executed", call.tool_name),)

    def matches(self, payload: Payload, value: Any) -> bool:
        if type(payload) is not ToolExecuted:  # sequencing routes other kinds here too
            return False
        p: ToolExecuted = payload
        if p.tool_name != self.tool_name or p.source != self.source:
            return False
        if self.mcp_server is not None and p.mcp_server != self.mcp_server:
            return False
        if self.is_error is not None and bool(p.is_error) is not self.is_error:
            return False
        arguments, metadata = value
        for key, expected in self.arguments:
            if key not in arguments or not strict_equal(arguments[key], expected):
                return False
        # The skill a run was made for is in the event's metadata: parsed last, and
        # only for checks that name one.
        return self.skill_id is None or metadata_field(metadata, "skill_id") == self.skill_id

    def _name(self) -> str:
        text = f"tool `{self.tool_name}`"
        if self.source == "mcp":
            text += f" on MCP server `{self.mcp_server}`"
        return text

    def describe(self) -> str:
        return f"{self._name()} ran"

    def never(self) -> str:
        return f"{self._name()} never ran" + (
            " as specified"
            if self.skill_id or self.is_error is not None or self.arguments or self.source == "mcp"
            else ""
        )

    def near_miss(self, payload: Payload, value: Any) -> str | None:
        p: ToolExecuted = payload  # type: ignore[assignment]
        if not isinstance(p, ToolExecuted) or p.tool_name != self.tool_name:
            return None
        name = f"tool `{p.tool_name}`"
        if p.source != self.source:
            return f"{name} ran with source `{p.source}`, expected `{self.source}`"
        if self.mcp_server is not None and p.mcp_server != self.mcp_server:
            return f"{name} ran on MCP server `{p.mcp_server}`, expected `{self.mcp_server}`"
        if self.is_error is not None and bool(p.is_error) is not self.is_error:
            got = "failed" if p.is_error else "succeeded"
            return f"{name} {got}, expected is_error={str(self.is_error).lower()}"
        arguments, metadata = value
        for key, expected in self.arguments:
            if key not in arguments:
                return f"{name} ran without argument `{key}`, expected {fmt_value(expected)}"
            if not strict_equal(arguments[key], expected):
                return (
                    f"{name} ran with {key}={fmt_value(arguments[key])}, expected "
                    f"{fmt_value(expected)}"
                )
        skill = metadata_field(metadata, "skill_id")
        if self.skill_id is not None and skill != self.skill_id:
            if skill is None:
                return f"{name} ran for no skill, expected skill `{self.skill_id}`"
            return f"{name} ran for skill {fmt_value(skill)}, expected `{self.skill_id}`"
        return None


class MatchTimeout(Exception):
    """A regular expression ran out of its time on one message (catastrophic backtracking)."""


def compile_pattern(text: str) -> Any:
    """``text_matches`` compiled with the ``regex`` package (Python's syntax), whose
    searches take a ``timeout``; ``re`` for the rare pattern only ``re`` reads."""
    try:
        return regex.compile(text)
    except regex.error:
        return re.compile(text)


#: Messages at least this long are always searched with the time limit: a
#: pattern such as ``a.*(b|c)`` takes time quadratic in the text.
LONG_TEXT = 4096


def nested_repetition(pattern: str) -> bool:
    """Whether a group that repeats without bound holds a repetition without bound,
    as in ``(a+)+`` or ``(.*x)*``: the shape that backtracks catastrophically."""
    return _repeated_group(pattern, alternation=False)


def may_backtrack(pattern: str) -> bool:
    """Whether a group that repeats without bound holds a repetition or alternatives
    (``(a+)+``, ``(a|aa)+``), or three repetitions without bound follow each other
    (``a*a*a*b``: time polynomial of that degree): such a pattern is always
    searched with the time limit."""
    return _repeated_group(pattern, alternation=True) or _unbounded_count(pattern) >= 3


def _syntax(pattern: str) -> Iterator[tuple[int, str]]:
    """(index, character) of each character of a pattern that is syntax: not
    escaped by a backslash, not inside a character class."""
    escaped = in_class = False
    for i, c in enumerate(pattern):
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        else:
            yield i, c


def _unbounded_count(pattern: str) -> int:
    """How many repetitions without bound the pattern holds."""
    return sum(1 for i, _ in _syntax(pattern) if _unbounded_at(pattern, i))


def _repeated_group(pattern: str, *, alternation: bool) -> bool:
    stack: list[bool] = []  # per open group: does it hold an unbounded repetition?
    for i, c in _syntax(pattern):
        if c == "(":
            stack.append(False)
        elif c == "|" and alternation and stack:
            stack[-1] = True
        elif c == ")" and stack:
            inner = stack.pop()
            if inner and _unbounded_at(pattern, i + 1):
                return True
            if stack:
                stack[-1] = stack[-1] or inner
        elif stack and _unbounded_at(pattern, i):
            stack[-1] = True
    return False


def _unbounded_at(pattern: str, i: int) -> bool:
    """A quantifier without an upper bound starts at ``pattern[i]``."""
    return i < len(pattern) and (
        pattern[i] in "*+" or re.match(r"\{\d*,\}", pattern[i:]) is not None
    )


class BotMatcher(Matcher):
    """``bot_uttered`` / ``bot_did_not_utter``: every given field, on one message.

    A ``text_matches`` search may take at most ``timeout`` seconds on one
    message: a pattern that backtracks catastrophically raises
    :class:`MatchTimeout`, which the engine reports as an evaluation error of
    the assertion in that conversation, never a stall for everyone.
    """

    __slots__ = ("bounded", "buttons", "pattern", "risky", "timeout", "utter_name")

    def __init__(self, check: BotCheck, timeout: float = DEFAULT_REGEX_TIMEOUT) -> None:
        self.utter_name = check.utter_name
        self.timeout = timeout
        # A search with a time limit costs about ten plain ones: a pattern that
        # cannot backtrack catastrophically (see may_backtrack) is searched in a
        # short message with `re`; anything else with the limit.
        text = check.text_matches
        self.pattern = None if text is None else re.compile(text)
        self.bounded: Any = None if text is None else compile_pattern(text)
        self.risky = text is not None and may_backtrack(text)
        self.buttons = (
            None if check.buttons is None else tuple((b.title, b.payload) for b in check.buttons)
        )
        # A check naming a response is only shown messages rendered from it.
        self.routes = (("bot", check.utter_name),)

    def matches(self, payload: Payload, value: Any) -> bool:
        if type(payload) is not Bot:  # sequencing routes other kinds here too
            return False
        p: Bot = payload
        # ``value`` is the message's response name (metadata ``utter_action``).
        if self.utter_name is not None and value != self.utter_name:
            return False
        if self.pattern is not None:
            text = p.text
            if text is None:
                return False
            if not self.risky and len(text) < LONG_TEXT:
                found = self.pattern.search(text)
            else:
                try:
                    found = (
                        self.bounded.search(text, timeout=self.timeout)
                        if type(self.bounded) is not re.Pattern
                        else self.bounded.search(text)
                    )
                except TimeoutError:
                    raise MatchTimeout(
                        f"`text_matches` `{self.pattern.pattern}` ran out of its "
                        f"{self.timeout:g} s on a message of {len(text)} "
                        "characters (catastrophic backtracking?)"
                    ) from None
            if found is None:
                return False
        if self.buttons is not None:
            # At least as many buttons as listed; at each listed position the title
            # equals, and the payload when one is given.
            carried = buttons_of(p)
            if len(carried) < len(self.buttons):
                return False
            for (title, button_payload), (want_title, want_payload) in zip(
                carried, self.buttons, strict=False
            ):
                if title != want_title:
                    return False
                if want_payload is not None and button_payload != want_payload:
                    return False
        return True

    def describe(self) -> str:
        parts = []
        if self.utter_name is not None:
            parts.append(f"response `{self.utter_name}`")
        if self.pattern is not None:
            parts.append(f"text matching `{self.pattern.pattern}`")
        if self.buttons is not None:
            parts.append(
                "buttons " + ", ".join(f"`{t}`" for t, _ in self.buttons)
                if self.buttons
                else "any buttons"
            )
        return "agent message with " + " and ".join(parts)

    def never(self) -> str:
        return f"no {self.describe()}"


def matcher_for(step: Step) -> Matcher:
    """The matcher of a single-event check (also a sequencing step)."""
    if isinstance(step, LifecycleCheck):
        return LifecycleMatcher(step)
    if isinstance(step, ToolExecutedCheck):
        return ToolMatcher(step.call)
    if isinstance(step, MemoryStep):
        event_kind = "memory_set" if step.kind == "memory_was_set" else "memory_cleared"
        return MemoryMatcher(event_kind, step.name)
    raise TypeError(f"not a single-event check: {step!r}")
