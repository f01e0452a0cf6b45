"""The compiler: scenario assertions → machine plans and a routing table.

Third stage of the pipeline. :func:`compile_scenario` turns a validated
:class:`~mantle_stream.core.scenario.model.Scenario` into a :class:`Plan`: for each
assertion a machine class and its immutable plan, and one routing table
that maps an event's payload type and key (skill id, memory name, tool name)
to the assertion indices that can react to it, and the scenario's
``expected_tools`` as a :class:`~.tool_scores.ToolsPlan`. A Plan is built once per
scenario and shared by every conversation judged against it.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

from mantle_stream.core.assertions.base import UNTOUCHED, CompileContext, Compiled, Machine, Route
from mantle_stream.core.assertions.registry import KINDS
from mantle_stream.core.assertions.tool_scores import ToolsPlan
from mantle_stream.core.defaults import DEFAULT_REGEX_TIMEOUT
from mantle_stream.core.errors import CONTROL_ESCAPES
from mantle_stream.core.events import model as ev
from mantle_stream.core.scenario.model import Check, Scenario
from mantle_stream.core.verdicts import Verdict

__all__ = ["BY_VALUE", "Plan", "RouteEntry", "compile_assertion", "compile_scenario"]

#: Routes a bot message by its response name: the ``value`` the engine passes
#: with it (read from the metadata only when some check names a response).
BY_VALUE: Any = object()

#: The attribute each payload type is routed by (see Payload.route_key); None
#: routes by kind alone; BY_VALUE, by a metadata key the engine reads.
_ROUTE_KEY: dict[type[ev.Payload], Any] = {
    cls: BY_VALUE if cls.route_metadata else cls.route_key for cls in ev.PAYLOAD_TYPES.values()
}
_KIND_TYPE = {cls.kind: cls for cls in ev.PAYLOAD_TYPES.values()}

#: (key getter or None, {key: assertion indices}, indices for any other key)
RouteEntry = tuple["Callable[[Any], str] | None", dict[str, tuple[int, ...]], tuple[int, ...]]


class Plan:
    """A compiled scenario: shared, immutable after construction."""

    __slots__ = (
        "expected_tools",
        "factories",
        "file",
        "fresh_failures",
        "fresh_reasons",
        "fresh_states",
        "fresh_verdicts",
        "kinds",
        "lines",
        "routes",
        "scenario",
        "untouched",
    )

    def __init__(self, scenario: Scenario, compiled: list[Compiled]) -> None:
        self.scenario = scenario
        self.kinds = tuple(a.kind for a in scenario.assertions)
        # Where each assertion is written, for every verdict to point at it.
        self.file: str | None = (
            scenario.path if scenario.lines and not scenario.path.startswith("<") else None
        )  # (a scenario loaded from text has lines but no file: "<string>")
        self.lines: tuple[int | None, ...] = tuple(scenario.lines) + (None,) * (
            len(self.kinds) - len(scenario.lines)
        )
        self.factories = tuple((cls, plan) for cls, plan, _ in compiled)
        self.routes = _route_table([routes for _, _, routes in compiled])
        # What an assertion whose machine never saw an event ends as, and its
        # state: the same for every conversation, so worked out once here.
        fresh = [cls(plan) for cls, plan in self.factories]
        outcomes = [m.finish() for m in fresh]
        self.fresh_verdicts: tuple[Verdict, ...] = tuple(
            "passed" if passed else "failed" for passed, _ in outcomes
        )
        self.fresh_reasons = tuple(reason.translate(CONTROL_ESCAPES) for _, reason in outcomes)
        self.fresh_failures = tuple(i for i, (passed, _) in enumerate(outcomes) if not passed)
        self.fresh_states = tuple(m.state() for m in fresh)
        self.untouched: tuple[Any, ...] = (UNTOUCHED,) * len(fresh)
        # `goals.expected_tools`, judged beside the assertions (see .tool_scores).
        self.expected_tools = ToolsPlan(scenario) if scenario.expected_tools else None

    def machine(self, index: int) -> Machine:
        """A fresh machine for one assertion (created on its first routed event)."""
        cls, plan = self.factories[index]
        return cls(plan)


def _route_table(per_assertion: list[set[Route]]) -> dict[type[ev.Payload], RouteEntry]:
    keyed: dict[str, dict[str, set[int]]] = {}
    wild: dict[str, set[int]] = {}
    for index, routes in enumerate(per_assertion):
        for kind, key in routes:
            if key is None:
                wild.setdefault(kind, set()).add(index)
            else:
                keyed.setdefault(kind, {}).setdefault(key, set()).add(index)
    table: dict[type[ev.Payload], RouteEntry] = {}
    for kind in set(keyed) | set(wild):
        cls = _KIND_TYPE[kind]
        any_key = wild.get(kind, set())
        attr = _ROUTE_KEY[cls]
        by_key = {key: tuple(sorted(ids | any_key)) for key, ids in keyed.get(kind, {}).items()}
        if attr is None or not by_key:
            getter = None  # no check names a key: every event of the kind goes to `wild`
        else:
            getter = attr if attr is BY_VALUE else operator.attrgetter(attr)
        table[cls] = (getter, by_key, tuple(sorted(any_key)))
    return table


def compile_assertion(
    assertion: Check, *, regex_timeout: float = DEFAULT_REGEX_TIMEOUT
) -> Compiled:
    """The machine class, its plan and its routes for one assertion (by its kind's row)."""
    kind = KINDS.get(assertion.kind)
    if kind is None:
        raise TypeError(f"unknown assertion {assertion!r}")
    return kind.compile(assertion, CompileContext(regex_timeout, KINDS))


def compile_scenario(scenario: Scenario, *, regex_timeout: float = DEFAULT_REGEX_TIMEOUT) -> Plan:
    """Compile every assertion of a scenario (``regex_timeout``: seconds one
    ``text_matches`` search may take on one message)."""
    return Plan(
        scenario, [compile_assertion(a, regex_timeout=regex_timeout) for a in scenario.assertions]
    )
