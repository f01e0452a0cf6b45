"""Loading scenario files: text -> node tree -> validated :class:`Scenario`.

:mod:`.source` gives a node tree with positions; this module checks the
document's shape (``scenario``, ``name``, ``simulation_context``, ``setup``,
``goals``), reads ``goals.expected_tools`` (see
:mod:`mantle_stream.core.assertions.expected_tools`) and hands each assertion
to its kind's validation (see
:mod:`mantle_stream.core.assertions.registry`), which checks it against the
assertion reference (required, optional and rejected keys, types, ``null``
values, the ``session.`` prefix, sequencing restrictions, regular
expressions, ...). Every problem in a file is collected, never only the first.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Any

import msgspec

from mantle_stream.core.assertions.base import Checker
from mantle_stream.core.assertions.expected_tools import read_expected_tools
from mantle_stream.core.assertions.registry import KINDS
from mantle_stream.core.errors import ScenarioError
from mantle_stream.core.scenario import checker as _checker
from mantle_stream.core.scenario.diagnostics import WHOLE_FILE, Diagnostic
from mantle_stream.core.scenario.model import Check, ExpectedToolsEntry, Scenario
from mantle_stream.core.scenario.source import YamlProblem, YNode, compose, describe, to_plain

__all__ = [
    "MAX_SCENARIO_BYTES",
    "load_scenario_file",
    "load_scenario_text",
    "load_scenarios",
    "scenario_paths",
]

MAX_SCENARIO_BYTES = 1 << 20  # a scenario file is a few KiB; a MiB is a mistake or an attack


def _scenario(c: Checker, root: YNode | None) -> Scenario | None:
    if root is None:
        c.problems.append(
            Diagnostic(
                c.path,
                1,
                1,
                "the file is empty",
                hint="a scenario file starts with `scenario:`",
            )
        )
        return None
    top = c.mapping(root, "the document")
    if top is None:
        return None
    c.keys(root, top, "the document", required=("scenario",))
    if "scenario" not in top:
        return None
    scenario_key, node = top["scenario"]
    body = c.mapping(node, "`scenario`")
    if body is None:
        return None
    c.keys(
        scenario_key,
        body,
        "`scenario`",
        required=("name", "simulation_context"),
        optional=("type", "setup", "goals"),
    )
    name = c.string(body, "name", "`scenario`")
    context = c.string(body, "simulation_context", "`scenario`")
    stype = c.string(body, "type", "`scenario`")
    slots = _initial_slots(c, body)
    goals = _goals(c, body)
    if c.problems or name is None or context is None:
        return None
    return Scenario(
        name=name,
        simulation_context=context,
        assertions=goals.assertions,
        type=stype,
        initial_slots=slots,
        criteria=goals.criteria,
        path=c.path,
        lines=goals.lines,
        expected_tools=goals.expected_tools,
        expected_tools_lines=goals.expected_tools_lines,
    )


def _initial_slots(c: Checker, body: dict[str, tuple[YNode, YNode]]) -> dict[str, Any]:
    """``scenario.setup.initial_slots``, checked (empty when absent)."""
    if "setup" not in body:
        return {}
    setup_key, setup_node = body["setup"]
    setup = c.mapping(setup_node, "`setup`")
    if setup is None:
        return {}
    c.keys(setup_key, setup, "`setup`", optional=("initial_slots",))
    if "initial_slots" in setup:
        slots_node = setup["initial_slots"][1]
        if c.mapping(slots_node, "`initial_slots`") is not None:
            slots: dict[str, Any] = to_plain(slots_node)
            return slots
    return {}


class _Goals(msgspec.Struct, frozen=True):
    """What ``scenario.goals`` holds, each assertion and expected tool with its line."""

    criteria: tuple[str, ...] = ()
    assertions: tuple[Check, ...] = ()
    lines: tuple[int, ...] = ()
    expected_tools: tuple[ExpectedToolsEntry, ...] = ()
    expected_tools_lines: tuple[int, ...] = ()


def _goals(c: Checker, body: dict[str, tuple[YNode, YNode]]) -> _Goals:
    """``scenario.goals``, checked: its criteria, assertions and expected tools."""
    if "goals" not in body:
        return _Goals()
    goals_key, goals_node = body["goals"]
    goals = c.mapping(goals_node, "`goals`")
    if goals is None:
        return _Goals()
    c.keys(goals_key, goals, "`goals`", optional=("criteria", "assertions", "expected_tools"))
    criteria: list[str] = []
    tools: list[ExpectedToolsEntry] = []
    tool_lines: list[int] = []
    assertions: list[Check] = []
    lines: list[int] = []
    if "criteria" in goals:
        criteria = _criteria(c, goals["criteria"][1])
    if "expected_tools" in goals:
        tools, tool_lines = read_expected_tools(c, goals["expected_tools"][1])
    if "assertions" in goals:
        items = goals["assertions"][1]
        if items.value is None:
            items = YNode([], items.line, items.col)
        if not items.is_seq:
            c.error(items, f"`assertions` must be a list, got {describe(items)}")
        else:
            for item in items.value:
                spec = _assertion(c, item)
                if spec is not None:
                    assertions.append(spec)
                    lines.append(item.line)
    return _Goals(tuple(criteria), tuple(assertions), tuple(lines), tuple(tools), tuple(tool_lines))


def _criteria(c: Checker, node: YNode) -> list[str]:
    if node.value is None:
        return []
    if not node.is_seq:
        c.error(node, f"`criteria` must be a list, got {describe(node)}")
        return []
    out = []
    for item in node.value:
        if isinstance(item.value, str):
            out.append(item.value)
        else:
            c.error(item, f"a criterion must be a string, got {describe(item)}")
    return out


# -- assertions


def _assertion(c: Checker, node: YNode) -> Check | None:
    found = c.single_key(node, "an assertion")
    if found is None:
        return None
    kind, key_node, value = found
    return c.kinds[kind].validate(c, kind, key_node, value)


def _utf8_size(text: str) -> int:
    """The size of ``text`` in bytes, as it would be on disk."""
    if len(text) > MAX_SCENARIO_BYTES or 4 * len(text) <= MAX_SCENARIO_BYTES:
        return len(text)  # decided without encoding: too long already, or surely short enough
    # surrogatepass: a lone surrogate is the YAML reader's to report, not an error here
    return len(text.encode("utf-8", "surrogatepass"))


def _too_large(path: str, message: str) -> ScenarioError:
    return ScenarioError(
        [
            Diagnostic(
                path,
                1,
                1,
                message,
                hint="a scenario file is a few KiB of YAML; is this the right file?",
            )
        ]
    )


def load_scenario_text(text: str, path: str = "<string>") -> Scenario:
    """Load one scenario from YAML text; raise :class:`ScenarioError` listing every problem.

    The text may be at most :data:`MAX_SCENARIO_BYTES` bytes once UTF-8 encoded,
    the same limit :func:`load_scenario_file` applies to a file.
    """
    if _utf8_size(text) > MAX_SCENARIO_BYTES:
        raise _too_large(path, f"scenario file is larger than {MAX_SCENARIO_BYTES // 1024} KiB")
    try:
        root, problems = compose(text, path)
    except YamlProblem as exc:
        raise ScenarioError(exc.diagnostics) from None
    checker: Checker = _checker.Checker(path, text, KINDS)
    checker.problems.extend(problems)
    scenario = _scenario(checker, root)
    if checker.problems or scenario is None:
        diagnostics = sorted(checker.problems, key=lambda d: (d.line, d.col))
        raise ScenarioError(diagnostics)
    return scenario


def load_scenario_file(path: str | os.PathLike[str]) -> Scenario:
    """Load one scenario file (at most :data:`MAX_SCENARIO_BYTES` bytes)."""
    name = os.fspath(path)
    try:
        size = os.path.getsize(name)
        if size > MAX_SCENARIO_BYTES:
            raise _too_large(
                name,
                f"scenario file is {size} bytes, larger than the "
                f"{MAX_SCENARIO_BYTES // 1024} KiB limit",
            )
        with open(name, encoding="utf-8") as fh:
            # Bounded even when the size above says nothing (a pipe, a file still
            # growing): one character more than the limit is enough to refuse it.
            text = fh.read(MAX_SCENARIO_BYTES + 1)
    except UnicodeDecodeError as exc:
        raise ScenarioError([Diagnostic(name, 1, 1, f"not UTF-8 text: {exc.reason}")]) from None
    except OSError as exc:
        raise ScenarioError(
            [Diagnostic(name, WHOLE_FILE, WHOLE_FILE, f"cannot read: {exc.strerror}")]
        ) from None
    return load_scenario_text(text, name)


def scenario_paths(paths: Iterable[str | os.PathLike[str]]) -> Iterator[str]:
    """Expand directories into the ``*.yml`` / ``*.yaml`` files inside them, sorted.

    Raises :class:`ScenarioError` at a directory that holds no scenario file.
    """
    for path in paths:
        name = os.fspath(path)
        if os.path.isdir(name):
            found = sorted(
                os.path.join(root, f)
                for root, _, files in os.walk(name)
                for f in files
                if f.endswith((".yml", ".yaml"))
            )
            if not found:
                raise ScenarioError(
                    [
                        Diagnostic(
                            name,
                            WHOLE_FILE,
                            WHOLE_FILE,
                            "no *.yml or *.yaml files in this directory",
                        )
                    ]
                )
            yield from found
        else:
            yield name


def load_scenarios(paths: Iterable[str | os.PathLike[str]]) -> list[Scenario]:
    """Load every scenario file (directories expanded); all problems of all files at once."""
    scenarios: list[Scenario] = []
    problems: list[Diagnostic] = []
    for path in paths:
        try:
            # One argument at a time, so that an empty directory does not hide
            # the problems of the other arguments.
            files = list(scenario_paths([path]))
        except ScenarioError as exc:
            problems.extend(exc.diagnostics)
            continue
        for name in files:
            try:
                scenarios.append(load_scenario_file(name))
            except ScenarioError as exc:
                problems.extend(exc.diagnostics)
    if problems:
        raise ScenarioError(problems)
    return scenarios
