"""What every assertion kind is made of: a spec, a matcher, a machine, a registry row.

An assertion kind lives in one family module (:mod:`.lifecycle`,
:mod:`.memory`, :mod:`.tools`, :mod:`.bot`, :mod:`.sequencing`): its spec (a
frozen struct the scenario loader builds), how a scenario file's YAML is
validated into that spec, what matches an event (a :class:`Matcher`), the
:class:`Machine` that decides it, and an :class:`AssertionKind` row that ties
them together. :mod:`.registry` collects the rows; the loader, the compiler
and the engine know kinds only through it.

State machines: one per assertion per conversation, sans I/O.

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

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

import msgspec

from mantle_stream.core.events.model import Payload
from mantle_stream.core.scenario import checker
from mantle_stream.core.scenario.model import Check
from mantle_stream.core.scenario.source import YNode

__all__ = [
    "ARM",
    "UNTOUCHED",
    "AssertionKind",
    "Checker",
    "CompileContext",
    "Compiled",
    "FirstMatch",
    "Machine",
    "MatchTimeout",
    "Matcher",
    "Outcome",
    "Route",
    "Step",
    "Validate",
    "fmt_value",
    "quote",
    "with_near",
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


class MatchTimeout(Exception):
    """A regular expression ran out of its time on one message (catastrophic backtracking)."""


#: What a machine returns when it decides: (passed, reason).
Outcome = tuple[bool, str]


class Armed(enum.Enum):
    """What ``step`` returns to be shown the next ``user`` event instead of deciding."""

    ARM = "armed for the end of the turn"


#: Returned by ``step`` to be shown the next ``user`` event (see :class:`Armed`).
ARM = Armed.ARM

#: What ``step`` returns: still pending (None), decided, or armed.
Step = Outcome | Armed | None


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

    def step(self, payload: Payload, value: Any, turn: int) -> Step:
        raise NotImplementedError

    def finish(self) -> Outcome:
        raise NotImplementedError

    def state(self) -> list[Any]:
        return []

    def restore(self, state: list[Any]) -> None:
        if state:
            raise ValueError(f"{type(self).__name__} has no state, got {state!r}")


def with_near(text: str, near: str | None) -> str:
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

    def step(self, payload: Payload, value: Any, turn: int) -> Step:
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
        return False, with_near(self.plan.never(), self._near_text())

    def state(self) -> list[Any]:
        return [self._near_text()]

    def restore(self, state: list[Any]) -> None:
        (self.near,) = state
        self.near_value = None


def quote(text: str, limit: int = 60) -> str:
    return f'"{text}"' if len(text) <= limit else f'"{text[: limit - 1]}…"'


#: What compiling one assertion gives: its machine class, the machine's plan
#: (shared by every conversation) and the (event kind, key) routes it listens to.
Compiled = tuple[type[Machine], Any, set[Route]]

#: The checker a kind's validation is given (it knows every registered kind).
Checker: TypeAlias = "checker.Checker[AssertionKind]"

#: Validates one check's YAML: (checker, kind, the key's node, the value's node)
#: -> its spec, or None after reporting every problem on the checker.
Validate: TypeAlias = "Callable[[Checker, str, YNode, YNode], Check | None]"


@dataclass(frozen=True)
class CompileContext:
    """What compiling an assertion may need beyond its spec."""

    #: Seconds one ``text_matches`` search may take on one message.
    regex_timeout: float
    #: Every registered kind, for a check made of steps of other kinds (sequencing).
    kinds: Mapping[str, AssertionKind]


@dataclass(frozen=True)
class AssertionKind:
    """One row of the registry: everything the pipeline needs to know about a kind.

    * ``name``: the key in a scenario file (``skill_activated``, ...);
    * ``fields``: the keys the check takes under it (for hints about misplaced keys);
    * ``validate``: YAML -> spec (see :data:`Validate`);
    * ``compile``: spec -> machine class, plan and routes (see :data:`Compiled`);
    * ``step`` / ``matcher``: as a step of ``sequencing``, how the step is
      validated and what matches it; None when it cannot be a step, and then
      ``not_a_step`` says why;
    * ``wrap_hint``: for a kind whose fields are sometimes written bare (a tool
      call's ``tool_name``), the hint to wrap them, given what was being read.
    """

    name: str
    fields: tuple[str, ...]
    validate: Validate
    compile: Callable[[Any, CompileContext], Compiled]
    step: Validate | None = None
    matcher: Callable[[Any], Matcher] | None = None
    not_a_step: str | None = None
    wrap_hint: Callable[[str], str] | None = None
