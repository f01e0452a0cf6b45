"""State machines: one per assertion per conversation, sans I/O.

Theory of operation. The engine routes an event to a machine only when the
machine's plan is indexed under the event's (kind, key). ``step(payload,
value, turn)`` (``turn``: the conversation's current user turn) then returns
``None`` while the assertion is still pending or a ``(passed, reason)`` pair
exactly once; the engine records it with the event's ``sequence`` as
``decided_at`` and never calls the machine again. A machine may instead
return :data:`ARM` to be shown the next ``user`` event (and only that one) —
how a tool window hears that a satisfying turn has ended without being
called at every turn. ``finish()`` resolves a pending machine at the end of
the conversation (``decided_at`` null).

Each machine is two objects: an immutable *plan* built once per scenario by
the compiler (matchers, bit masks, wording) and shared by every conversation,
and a tiny per-conversation instance with ``__slots__`` holding only state
whose size is bounded by the assertion — a bitmask, a cursor, a counter, the
last near miss — never by the conversation's length. ``state()`` and
``restore()`` expose that state as plain data for checkpoints.

When a machine decides, as a table (see docs/semantics.md):

=====================================  ======================  =====================
machine                                decides early            at finish
=====================================  ======================  =====================
FirstMatch (skill/block/tool/bot)      pass on first match      fail
MemoryAll (was_set / was_cleared)      pass when all entries    fail
MemoryNotSet                           fail on a no-value write pass, or fail if a
                                                                last write equalled
Forbidden (bot_did_not_utter)          fail on first match      pass
Sequence                               pass on the last step    fail
ToolWindow (allow_extra_calls true)    pass when a turn holds   fail
                                       every listed call
ToolWindow (allow_extra_calls false)   pass at the user event   judge the last turn
                                       ending a satisfying turn
=====================================  ======================  =====================
"""

from __future__ import annotations

from typing import Any

from mantle_stream.core.assertions.match import Matcher, MemoryMatcher, ToolMatcher, fmt_value
from mantle_stream.core.events.model import Payload, ToolExecuted, User
from mantle_stream.core.scenario.model import FRAMEWORK_TOOLS
from mantle_stream.core.values import strict_equal

__all__ = [
    "ARM",
    "UNTOUCHED",
    "FirstMatch",
    "Forbidden",
    "Machine",
    "MemoryAll",
    "MemoryNotSet",
    "Outcome",
    "Sequence",
    "ToolWindow",
]

#: What a machine returns when it decides: (passed, reason).
Outcome = tuple[bool, str]

#: Returned by ``step`` to be shown the next ``user`` event (compared by identity).
ARM: Outcome = (False, "armed for the end of the turn")


class _Untouched:
    """Stands in for a machine no event has reached yet in this conversation.

    Most assertions see no event for most of a conversation (and some never
    do): the engine creates a machine on its first routed event, and ends an
    untouched one with the plan's precomputed outcome. Conversations then
    cost a list slot per assertion, not an object.
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNTOUCHED"


UNTOUCHED = _Untouched()


class Machine:
    """Base class. Subclasses set ``__slots__`` for their state."""

    __slots__ = ("plan",)

    def __init__(self, plan: Any) -> None:
        self.plan = plan

    def step(self, payload: Payload, value: Any, turn: int) -> Outcome | None:
        raise NotImplementedError

    def finish(self) -> Outcome:
        raise NotImplementedError

    def state(self) -> list[Any]:
        return []

    def restore(self, state: list[Any]) -> None:
        if state:
            raise ValueError(f"{type(self).__name__} has no state, got {state!r}")


def _with_near(text: str, near: str | None) -> str:
    return text if near is None else f"{text}; closest: {near}"


class FirstMatch(Machine):
    """Passes at the first matching event; fails at the end. Plan: a Matcher.

    The last routed event that did not match is kept by reference (``near``,
    ``near_value``) and only put into words if the check fails: formatting
    on every miss would cost more than the matching itself.
    """

    __slots__ = ("near", "near_value")
    plan: Matcher

    def __init__(self, plan: Matcher) -> None:
        self.plan = plan
        self.near: Payload | str | None = None
        self.near_value: Any = None

    def step(self, payload: Payload, value: Any, turn: int) -> Outcome | None:
        if self.plan.matches(payload, value):
            return True, self.plan.describe()
        self.near = payload
        self.near_value = value
        return None

    def _near_text(self) -> str | None:
        near = self.near
        if near is None or isinstance(near, str):
            return near
        return self.plan.near_miss(near, self.near_value)

    def finish(self) -> Outcome:
        return False, _with_near(self.plan.never(), self._near_text())

    def state(self) -> list[Any]:
        return [self._near_text()]

    def restore(self, state: list[Any]) -> None:
        (self.near,) = state
        self.near_value = None


class Forbidden(Machine):
    """bot_did_not_utter: fails at the first matching event; passes at the end."""

    __slots__ = ()
    plan: Matcher

    def step(self, payload: Payload, value: Any, turn: int) -> Outcome | None:
        if self.plan.matches(payload, value):
            text = f"agent uttered the forbidden message ({self.plan.describe()})"
            if getattr(payload, "text", None):
                text += f": {_quote(payload.text)}"  # type: ignore[attr-defined]
            return False, text
        return None

    def finish(self) -> Outcome:
        return True, f"never said: {self.plan.describe()}"


def _quote(text: str, limit: int = 60) -> str:
    return f'"{text}"' if len(text) <= limit else f'"{text[: limit - 1]}…"'


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

    def step(self, payload: Payload, value: Any, turn: int) -> Outcome | None:
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
        return False, _with_near("; ".join(missing), self._near_text())

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

    def step(self, payload: Payload, value: Any, turn: int) -> Outcome | None:
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


class SequencePlan:
    __slots__ = ("matchers",)

    def __init__(self, matchers: list[Matcher]) -> None:
        self.matchers = matchers


class Sequence(Machine):
    """A cursor over the steps; each step matched at the earliest later event."""

    __slots__ = ("cursor",)
    plan: SequencePlan

    def __init__(self, plan: SequencePlan) -> None:
        self.plan = plan
        self.cursor = 0

    def step(self, payload: Payload, value: Any, turn: int) -> Outcome | None:
        matchers = self.plan.matchers
        if matchers[self.cursor].matches(payload, value):
            self.cursor += 1
            if self.cursor == len(matchers):
                return True, f"all {len(matchers)} steps happened in order"
        return None

    def finish(self) -> Outcome:
        matchers = self.plan.matchers
        done = self.cursor
        after = f" after step {done}" if done else ""
        return False, (
            f"step {done + 1} of {len(matchers)} never happened{after}: expected "
            f"{matchers[done].describe()}"
        )

    def state(self) -> list[Any]:
        return [self.cursor]

    def restore(self, state: list[Any]) -> None:
        (self.cursor,) = state


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

    def step(self, payload: Payload, value: Any, turn: int) -> Outcome | None:
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
            if _augment(self.slots, mask, 0) == -1:
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


def _augment(slots: list[int], mask: int, seen: int) -> int:
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
            result = _augment(slots, holder, seen)
            if result == -1:
                slots[i] = mask
                return -1
            slots[i] = holder
            seen = result
        m >>= 1
        i += 1
    return seen
