"""Tool checks: ``tool_executed`` and ``tools_within_one_turn``.

A tool run is matched by name, source, MCP server, error flag, the arguments
given (by JSON type and value) and the skill it ran for (from the event's
metadata). ``tool_executed`` may also be a step of ``sequencing``.
``tools_within_one_turn`` keeps a per-turn window over counted runs (Mantle's
framework tools are neither counted nor matched).
"""

from __future__ import annotations

from typing import Any, ClassVar

import msgspec

from mantle_stream.core.assertions.base import (
    ARM,
    AssertionKind,
    Checker,
    CompileContext,
    Compiled,
    FirstMatch,
    Machine,
    Matcher,
    Outcome,
    Route,
    Step,
    fmt_value,
)
from mantle_stream.core.events.model import Payload, ToolExecuted, User, metadata_field
from mantle_stream.core.scenario.diagnostics import did_you_mean
from mantle_stream.core.scenario.model import Check
from mantle_stream.core.scenario.source import YNode, describe, to_plain
from mantle_stream.core.values import strict_equal

__all__ = [
    "FRAMEWORK_TOOLS",
    "KINDS",
    "ToolCall",
    "ToolExecutedCheck",
    "ToolMatcher",
    "ToolWindow",
    "ToolsWithinOneTurnCheck",
    "augment",
]

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

_TOOL_FIELDS = ("tool_name", "source", "mcp_server", "skill_id", "arguments", "is_error")
_CALL_HINT = "write each call as `- tool_executed: {tool_name: ..., source: ...}`"


def _wrap_hint(what: str) -> str:
    """A call's fields written without ``tool_executed:`` above them."""
    if what == "a call":
        return (
            "wrap each call in `tool_executed:` (`- tool_executed: {tool_name: ..., source: ...}`)"
        )
    return "write `- tool_executed:` and indent the fields of the call under it"


class ToolCall(msgspec.Struct, frozen=True):
    tool_name: str
    source: str
    mcp_server: str | None = None
    skill_id: str | None = None
    arguments: dict[str, Any] | None = None
    is_error: bool | None = None


class ToolExecutedCheck(Check, frozen=True):
    call: ToolCall
    kind: ClassVar[str] = "tool_executed"


class ToolsWithinOneTurnCheck(Check, frozen=True):
    calls: tuple[ToolCall, ...]
    allow_extra_calls: bool
    ordered: bool = False
    kind: ClassVar[str] = "tools_within_one_turn"


def tool_call(c: Checker, key_node: YNode, node: YNode, what: str) -> ToolCall | None:
    mapping = c.mapping(node, what)
    if mapping is None:
        return None
    ok = c.keys(
        key_node,
        mapping,
        what,
        required=("tool_name", "source"),
        optional=("mcp_server", "skill_id", "arguments", "is_error"),
    )
    tool_name = c.string(mapping, "tool_name", what)
    source = c.string(mapping, "source", what)
    if source is not None and source not in ("local", "mcp"):
        c.error(
            mapping["source"][1],
            f"`source` in {what} must be `local` or `mcp`, got `{source}`",
            did_you_mean(source, ("local", "mcp")),
        )
        ok = False
    mcp_server = c.string(mapping, "mcp_server", what)
    if source == "local" and "mcp_server" in mapping:
        c.error(
            mapping["mcp_server"][0],
            f"`mcp_server` is not allowed in {what} with source `local`",
            "a local run has no MCP server; remove `mcp_server` or set `source: mcp`",
        )
        ok = False
    if source == "mcp" and "mcp_server" not in mapping:
        c.error(
            key_node,
            f"{what} with source `mcp` is missing required key `mcp_server`",
            "the server is not inferred from the tool name",
        )
        ok = False
    skill_id = c.string(mapping, "skill_id", what)
    is_error = c.boolean(mapping, "is_error", what)
    arguments = None
    if "arguments" in mapping:
        arg_node = mapping["arguments"][1]
        if c.mapping(arg_node, f"`arguments` in {what}") is None:
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


def tools_within_one_turn(
    c: Checker, key_node: YNode, node: YNode
) -> ToolsWithinOneTurnCheck | None:
    what = "`tools_within_one_turn`"
    mapping = c.mapping(node, what)
    if mapping is None:
        return None
    ok = c.keys(
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
    allow = c.boolean(mapping, "allow_extra_calls", what)
    ordered = c.boolean(mapping, "ordered", what)
    calls: list[ToolCall] = []
    if "calls" in mapping:
        calls_node = mapping["calls"][1]
        if not calls_node.is_seq:
            c.error(
                calls_node,
                f"`calls` must be a list of `tool_executed` entries, got {describe(calls_node)}",
            )
            ok = False
        else:
            if len(calls_node.value) < 2:
                c.error(
                    calls_node,
                    f"{what} needs at least two calls, got {len(calls_node.value)}",
                    "for a single tool run use `tool_executed`",
                )
                ok = False
            for item in calls_node.value:
                found = c.single_key(item, "a call", ("tool_executed",), empty_hint=_CALL_HINT)
                if found is None:
                    ok = False
                    continue
                kind, call_key, value = found
                if kind != "tool_executed":
                    c.error(call_key, f"a call in {what} must be `tool_executed`, got `{kind}`")
                    ok = False
                    continue
                call = tool_call(c, call_key, value, "`tool_executed`")
                if call is None:
                    ok = False
                else:
                    calls.append(call)
    if not ok or allow is None or ("ordered" in mapping and ordered is None):
        return None
    return ToolsWithinOneTurnCheck(
        calls=tuple(calls), allow_extra_calls=allow, ordered=bool(ordered)
    )


class ToolMatcher(Matcher):
    __slots__ = ("arguments", "is_error", "mcp_server", "skill_id", "source", "tool_name")

    def __init__(self, call: ToolCall) -> None:
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


class ToolWindowPlan:
    """tools_within_one_turn: the listed calls, how to judge a turn."""

    __slots__ = ("allow_extra", "by_name", "full", "matchers", "names", "ordered")

    def __init__(self, matchers: list[ToolMatcher], ordered: bool, allow_extra: bool) -> None:
        self.matchers = matchers
        self.ordered = ordered
        self.allow_extra = allow_extra
        self.full = len(matchers)
        # Only calls naming the run's tool can match it; a window that forbids
        # extra calls sees every run, most of them of other tools.
        by_name: dict[str, list[tuple[int, ToolMatcher]]] = {}
        for i, matcher in enumerate(matchers):
            by_name.setdefault(matcher.tool_name, []).append((1 << i, matcher))
        self.by_name = {name: tuple(calls) for name, calls in by_name.items()}
        self.names = ", ".join(f"`{m.tool_name}`" for m in matchers)


class ToolWindow(Machine):
    """Per-turn window over counted tool runs.

    State, all bounded by the number of listed calls k:

    * ``turn``: the user turn the window below belongs to. The window is reset
      lazily, when a run arrives in a later turn, so turns without tool runs
      cost nothing; user events are never routed here except after
      :data:`ARM`;
    * ``runs``: counted runs in this turn (only compared with k);
    * ``matched``: listed calls satisfied in this turn so far;
    * ``slots``: for unordered checks, ``slots[i]`` is the call-mask of the
      run currently assigned to listed call i, or 0 (None until the turn's
      first matching run). New runs extend this maximum matching by one
      augmenting-path search; a run left unmatched can never help later (any
      augmenting path would have to start at the newest run), so it is not
      remembered;
    * ``broken``: why the turn can no longer satisfy a no-extra-calls check, as
      (tool, call number) worded only for a failure reason (see :func:`_why`);
    * ``best``: the most listed calls a past turn satisfied, in which turn and
      why it fell short, for the failure reason.

    For ordered checks ``matched`` doubles as the cursor into the listed calls.
    Without extra calls, the run that makes the turn exactly right returns
    :data:`ARM`; the next user event then passes the check (or not, if an
    extra run broke the turn meanwhile).
    """

    __slots__ = ("best", "broken", "matched", "runs", "slots", "turn")
    plan: ToolWindowPlan

    def __init__(self, plan: ToolWindowPlan) -> None:
        self.plan = plan
        self.turn = 0
        self.runs = 0
        self.matched = 0
        self.slots: list[int] | None = None
        self.broken: tuple[str, int] | str | None = None  # see _why
        self.best: tuple[int, int, tuple[str, int] | str | None] | None = None

    def step(self, payload: Payload, value: Any, turn: int) -> Step:
        # Every tool run reaches a window that forbids extra calls, so the
        # common paths (a lifecycle tool, a turn already broken, a tool not
        # listed) return before any matching, and reasons are worded lazily.
        if type(payload) is User:  # only after ARM: the armed turn has just ended
            return self._end_turn()
        run: ToolExecuted = payload  # type: ignore[assignment]
        name = run.tool_name
        if name in FRAMEWORK_TOOLS:  # by name, whatever the source
            return None
        if turn != self.turn:
            if self.runs:
                self._close_turn()
            self.turn = turn
        runs = self.runs = self.runs + 1
        if self.broken is not None:
            return None
        plan = self.plan
        mask = 0
        calls = plan.by_name.get(name)
        if calls is not None:
            for bit, matcher in calls:
                if matcher.matches(run, value):
                    mask |= bit
        full = plan.full
        if plan.ordered:
            if plan.allow_extra:
                if mask >> self.matched & 1:
                    self.matched += 1
            elif runs <= full and mask >> (runs - 1) & 1:
                self.matched += 1
            else:
                # (tool, call number): out of the listed order; (tool, 0): an extra call
                self.broken = (name, runs if runs <= full and mask else 0)
                return None
        elif not plan.allow_extra and (runs > full or not mask):
            self.broken = (name, 0)
            return None
        elif mask:
            if self.slots is None:
                self.slots = [0] * full
            if augment(self.slots, mask, 0) == -1:
                self.matched += 1
        if self.matched == full:
            if plan.allow_extra:
                return True, f"{plan.names} all ran within turn {self.turn}"
            if runs == full:
                return ARM
        return None

    def _end_turn(self) -> Outcome | None:
        plan = self.plan
        if self.broken is None and self.runs == plan.full and self.matched == plan.full:
            return True, f"{plan.names} ran within turn {self.turn} with no other calls"
        return None

    def _close_turn(self) -> None:
        """Remember how close this turn came, then start an empty one."""
        best = self.best
        if (
            best is None
            or self.matched > best[0]
            or (self.matched == best[0] and best[2] is None and self.broken is not None)
        ):
            self.best = (self.matched, self.turn, self.broken)
        self.runs = 0
        self.matched = 0
        self.slots = None
        self.broken = None

    def finish(self) -> Outcome:
        if not self.plan.allow_extra:
            verdict = self._end_turn()
            if verdict is not None:
                return verdict
        if self.runs:
            self._close_turn()
        text = f"no user turn ran all of {self.plan.names}"
        if self.best is not None:
            got, turn, broken = self.best
            why = _why(broken)
            if got:
                text += f"; turn {turn} ran {got} of {self.plan.full}"
                if why:
                    text += f", but {why}"
            elif why:
                text += f"; turn {turn}: {why}"
        return False, text

    def state(self) -> list[Any]:
        best = None if self.best is None else [self.best[0], self.best[1], _why(self.best[2])]
        return [
            self.turn,
            self.runs,
            self.matched,
            _why(self.broken),
            None if self.slots is None else list(self.slots),
            best,
        ]

    def restore(self, state: list[Any]) -> None:
        self.turn, self.runs, self.matched, self.broken, slots, best = state
        self.slots = None if slots is None else list(slots)
        self.best = None if best is None else (best[0], best[1], best[2])


def _why(broken: tuple[str, int] | str | None) -> str | None:
    """Words for why a turn broke a window: kept as (tool, call number) until needed."""
    if broken is None or isinstance(broken, str):
        return broken  # restored from a checkpoint already worded
    name, call = broken
    if call:
        return f"`{name}` ran as call {call} of the turn, out of the listed order"
    return f"the turn had an extra call `{name}`"


def augment(slots: list[int], mask: int, seen: int) -> int:
    """Kuhn's augmenting path: place a run with call-mask ``mask`` into ``slots``.

    Returns the updated ``seen`` bitmask of calls visited, or -1 on success.
    ``slots`` has one entry per listed call (k <= a handful), so recursion is
    shallow.
    """
    i = 0
    m = mask
    while m:
        if m & 1 and not seen >> i & 1:
            seen |= 1 << i
            holder = slots[i]
            if not holder:
                slots[i] = mask
                return -1
            slots[i] = 0
            result = augment(slots, holder, seen)
            if result == -1:
                slots[i] = mask
                return -1
            slots[i] = holder
            seen = result
        m >>= 1
        i += 1
    return seen


def _validate_call(c: Checker, kind: str, key_node: YNode, node: YNode) -> ToolExecutedCheck | None:
    call = tool_call(c, key_node, node, "`tool_executed`")
    return None if call is None else ToolExecutedCheck(call)


def _compile_call(check: ToolExecutedCheck, context: CompileContext) -> Compiled:
    matcher = ToolMatcher(check.call)
    return FirstMatch, matcher, set(matcher.routes)


def _compile_window(check: ToolsWithinOneTurnCheck, context: CompileContext) -> Compiled:
    calls = [ToolMatcher(call) for call in check.calls]
    routes: set[Route] = set()  # user events only after ARM (see .base)
    if check.allow_extra_calls:
        routes |= {r for m in calls for r in m.routes}
    else:
        routes.add(("tool_executed", None))  # every counted run matters
    return ToolWindow, ToolWindowPlan(calls, check.ordered, check.allow_extra_calls), routes


def _validate_window(
    c: Checker, kind: str, key_node: YNode, node: YNode
) -> ToolsWithinOneTurnCheck | None:
    return tools_within_one_turn(c, key_node, node)


def _step_matcher(step: ToolExecutedCheck) -> Matcher:
    return ToolMatcher(step.call)


KINDS = (
    AssertionKind(
        "tool_executed",
        _TOOL_FIELDS,
        _validate_call,
        _compile_call,
        step=_validate_call,
        matcher=_step_matcher,
        wrap_hint=_wrap_hint,
    ),
    AssertionKind(
        "tools_within_one_turn",
        ("calls", "allow_extra_calls", "ordered"),
        _validate_window,
        _compile_window,
        not_a_step="it spans a whole turn, not one event",
    ),
)
