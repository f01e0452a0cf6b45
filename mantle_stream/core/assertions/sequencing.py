"""``sequencing``: steps that must happen in this order, each at its earliest later event.

A step is a check of another kind that decides on one event (a skill or
block lifecycle event, a tool run, a memory write or clear): each kind says
in its registry row whether it can be a step (``step``, ``matcher``) or why
not (``not_a_step``).
"""

from __future__ import annotations

from typing import Any, ClassVar

from mantle_stream.core.assertions.base import (
    AssertionKind,
    Checker,
    CompileContext,
    Compiled,
    Machine,
    Matcher,
    Outcome,
    Step,
)
from mantle_stream.core.events.model import Payload
from mantle_stream.core.scenario.model import Check
from mantle_stream.core.scenario.source import YNode, describe

__all__ = ["KINDS", "Sequence", "SequencingCheck"]


class SequencingCheck(Check, frozen=True):
    steps: tuple[Check, ...]
    kind: ClassVar[str] = "sequencing"


def sequencing(c: Checker, kind: str, key_node: YNode, node: YNode) -> SequencingCheck | None:
    what = "`sequencing`"
    if not node.is_seq:
        c.error(node, f"{what} takes a list of steps, got {describe(node)}")
        return None
    if not node.value:
        c.error(node, f"{what} needs at least one step")
        return None
    allowed = [name for name, entry in c.kinds.items() if entry.step is not None]
    steps: list[Check] = []
    ok = True
    for item in node.value:
        found = c.single_key(item, "a sequencing step", allowed)
        if found is None:
            ok = False
            continue
        step_kind, step_key, value = found
        validate = c.kinds[step_kind].step
        if validate is None:
            why = c.kinds[step_kind].not_a_step
            c.error(step_key, f"`{step_kind}` is not allowed inside {what}", why)
            ok = False
            continue
        step = validate(c, step_kind, step_key, value)
        if step is None:
            ok = False
        else:
            steps.append(step)
    return SequencingCheck(steps=tuple(steps)) if ok else None


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

    def step(self, payload: Payload, value: Any, turn: int) -> Step:
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


def _compile(check: SequencingCheck, context: CompileContext) -> Compiled:
    steps: list[Matcher] = []
    for step in check.steps:
        matcher = context.kinds[step.kind].matcher
        assert matcher is not None, f"`{step.kind}` cannot be a step"
        steps.append(matcher(step))
    return Sequence, SequencePlan(steps), {r for m in steps for r in m.routes}


KINDS = (
    AssertionKind(
        "sequencing",
        (),
        sequencing,
        _compile,
        not_a_step="sequencing cannot be nested; list the steps in one sequence",
    ),
)
