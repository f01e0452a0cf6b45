"""Skill and ordered-block lifecycle checks: ``skill_activated`` ... ``ordered_block_resumed``.

Each passes at the first event of its kind for its skill (and block, and
step when given) and fails at the end of the conversation otherwise; each may
also be a step of ``sequencing``.
"""

from __future__ import annotations

from typing import Any

from mantle_stream.core.assertions.base import (
    AssertionKind,
    Checker,
    CompileContext,
    Compiled,
    FirstMatch,
    Matcher,
)
from mantle_stream.core.events.model import OrderedBlockEvent, Payload, SkillEvent
from mantle_stream.core.scenario.model import Check
from mantle_stream.core.scenario.source import YNode

__all__ = ["BLOCK_KINDS", "KINDS", "SKILL_KINDS", "LifecycleCheck", "LifecycleMatcher"]

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


class LifecycleCheck(Check, frozen=True):
    """``skill_*`` and ``ordered_block_*`` checks (``block_id`` is None for skills)."""

    kind: str
    skill_id: str
    block_id: str | None = None
    step_id: str | None = None


def lifecycle(c: Checker, kind: str, key_node: YNode, node: YNode) -> LifecycleCheck | None:
    what = f"`{kind}`"
    mapping = c.mapping(node, what)
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
    ok = c.keys(
        key_node,
        mapping,
        what,
        required=required,
        optional=("step_id",) if takes_step else (),
        rejected=rejected,
    )
    skill_id = c.string(mapping, "skill_id", what)
    block_id = c.string(mapping, "block_id", what) if is_block else None
    step_id = c.string(mapping, "step_id", what) if takes_step else None
    if not ok or skill_id is None or (is_block and block_id is None):
        return None
    if "step_id" in mapping and step_id is None:
        return None
    return LifecycleCheck(kind=kind, skill_id=skill_id, block_id=block_id, step_id=step_id)


class LifecycleMatcher(Matcher):
    __slots__ = ("block_id", "kind", "skill_id", "step_id", "verb")

    def __init__(self, check: LifecycleCheck) -> None:
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


def _compile(check: LifecycleCheck, context: CompileContext) -> Compiled:
    matcher = LifecycleMatcher(check)
    return FirstMatch, matcher, set(matcher.routes)


KINDS = tuple(
    AssertionKind(
        name=kind,
        fields=("skill_id", "block_id", "step_id")
        if kind in BLOCK_KINDS
        else ("skill_id", "step_id"),
        validate=lifecycle,
        compile=_compile,
        step=lifecycle,
        matcher=LifecycleMatcher,
    )
    for kind in (*SKILL_KINDS, *BLOCK_KINDS)
)
