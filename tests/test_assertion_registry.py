"""Adding an assertion kind is its own module and a registry row: nothing else changes.

The toy kind below (``user_said``: the user said exactly this text) is the
whole of a family: its spec, its validation, its matcher, and the row that
ties them to a machine and the routing table. Registered in a fixture, it is
loaded from YAML with diagnostics, judged by the evaluator over real-format
events (also as a step of ``sequencing``), and gone again afterwards.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

import mantle_stream as ms
from mantle_stream.core.assertions import registry
from mantle_stream.core.assertions.base import (
    AssertionKind,
    Checker,
    CompileContext,
    Compiled,
    FirstMatch,
    Matcher,
)
from mantle_stream.core.events.model import Payload, User
from mantle_stream.core.scenario.model import Check
from mantle_stream.core.scenario.source import YNode

# ----------------------------------------------------------------- the toy family


class UserSaidCheck(Check, frozen=True):
    text: str
    kind: str = "user_said"


def validate(c: Checker, kind: str, key_node: YNode, node: YNode) -> UserSaidCheck | None:
    mapping = c.mapping(node, f"`{kind}`")
    if mapping is None:
        return None
    ok = c.keys(key_node, mapping, f"`{kind}`", required=("text",))
    text = c.string(mapping, "text", f"`{kind}`")
    return UserSaidCheck(text) if ok and text is not None else None


class UserSaidMatcher(Matcher):
    __slots__ = ("text",)

    def __init__(self, check: UserSaidCheck) -> None:
        self.text = check.text
        self.routes = (("user", None),)

    def matches(self, payload: Payload, value: Any) -> bool:
        return type(payload) is User and payload.text == self.text

    def describe(self) -> str:
        return f"the user said {self.text!r}"

    def never(self) -> str:
        return f"the user never said {self.text!r}"


def compile_check(check: UserSaidCheck, context: CompileContext) -> Compiled:
    matcher = UserSaidMatcher(check)
    return FirstMatch, matcher, set(matcher.routes)


TOY = AssertionKind(
    "user_said", ("text",), validate, compile_check, step=validate, matcher=UserSaidMatcher
)

# ----------------------------------------------------------------- the tests


@pytest.fixture
def toy() -> Iterator[AssertionKind]:
    registry.register(TOY)
    try:
        yield TOY
    finally:
        registry.unregister(TOY.name)


def scenario(*assertions: Any) -> ms.Scenario:
    text = json.dumps(
        {
            "scenario": {
                "name": "toy",
                "simulation_context": "x",
                "goals": {"assertions": assertions},
            }
        }
    )
    return ms.load_scenario_text(text, "toy.yml")


def row(seq: int, **payload: Any) -> bytes:
    return json.dumps(
        {"conversation_id": "c", "sequence": seq, "metadata": None, **payload}
    ).encode()


def verdicts(scen: ms.Scenario, lines: list[bytes]) -> list[tuple[str, int | None, str]]:
    evaluator = ms.Evaluator([scen])
    for line in lines:
        evaluator.push_line(line)
    evaluator.finish_all()
    [result] = evaluator.results()
    return [(a.verdict, a.decided_at, a.reason) for a in result.assertions]


CONVERSATION = [
    row(0, user={"text": "hello"}),
    row(1, skill_activated={"skill_id": "card", "step_id": None}),
    row(2, user={"text": "replace my card"}),
    row(3, session_ended={}),
]


def test_a_registered_kind_is_loaded_compiled_and_judged(toy: AssertionKind) -> None:
    scen = scenario({"user_said": {"text": "replace my card"}}, {"user_said": {"text": "bye"}})
    assert scen.assertions == (UserSaidCheck("replace my card"), UserSaidCheck("bye"))
    assert verdicts(scen, CONVERSATION) == [
        ("passed", 2, "the user said 'replace my card'"),
        ("failed", None, "the user never said 'bye'"),
    ]


def test_a_registered_kind_can_be_a_sequencing_step(toy: AssertionKind) -> None:
    steps = [{"user_said": {"text": "hello"}}, {"skill_activated": {"skill_id": "card"}}]
    assert verdicts(scenario({"sequencing": steps}), CONVERSATION) == [
        ("passed", 1, "all 2 steps happened in order")
    ]
    backwards = [steps[1], steps[0]]
    [(verdict, _, reason)] = verdicts(scenario({"sequencing": backwards}), CONVERSATION)
    assert verdict == "failed" and "step 2 of 2 never happened" in reason


def test_its_validation_reports_at_the_line_like_any_kind(toy: AssertionKind) -> None:
    with pytest.raises(ms.ScenarioError) as raised:
        scenario({"user_said": {"txt": "hi"}})
    messages = [d.message for d in raised.value.diagnostics]
    assert "unknown key `txt` in `user_said`" in messages
    assert "`user_said` is missing required key `text`" in messages


def test_unregistered_it_is_an_unknown_assertion_again() -> None:
    assert "user_said" not in registry.KINDS
    with pytest.raises(ms.ScenarioError) as raised:
        scenario({"user_said": {"text": "hi"}})
    assert [d.message for d in raised.value.diagnostics] == ["unknown assertion `user_said`"]


def test_a_kind_cannot_be_registered_twice_or_half_a_step() -> None:
    with pytest.raises(ValueError, match="registered already"):
        registry.register(registry.KINDS["skill_activated"])
    half = AssertionKind("half", (), validate, compile_check, step=validate)
    with pytest.raises(ValueError, match="needs both"):
        registry.register(half)
    assert "half" not in registry.KINDS
