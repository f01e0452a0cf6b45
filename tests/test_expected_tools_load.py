"""Loading ``goals.expected_tools`` (issue 23, item 1): every shape Rasa's scenario
schema accepts loads into the model; every other shape is an error at its line.

Sources: Rasa's scenario schema as the issue states it (a list of standalone
``tool_called`` entries, a tool name or ``{tool_name, arguments}`` with an
optional boolean ``gate``, and ``tool_group`` entries, a non-empty list of
single-key items: ``tool_called`` ones, at least one, and optional
``ordered`` and ``gate`` booleans), and the diagnostics rules of
docs/semantics.md (every problem at once, 1-based positions, a hint).

Positions in the tables are relative to the snippet written under
``expected_tools:`` (line 1, column 1 is its first character).
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from mantle_stream import ScenarioError, load_scenario_text
from mantle_stream.core.scenario.model import ExpectedTool, Scenario, ToolCalled, ToolGroup

from _harness import REPOSITORY, run_cli

HEADER = """\
scenario:
  name: Test scenario
  simulation_context: You are a test customer.
  goals:
    expected_tools:
"""
HEADER_LINES = 5
INDENT = 6

Problem = tuple[int, int, str, "str | None"]

TOOL_HINT = "write `tool_called: NAME` or `tool_called: {tool_name: NAME, arguments: {...}}`"
ENTRY_HINT = (
    "an entry is `- tool_called: NAME` (a tool that must run) or `- tool_group: [...]` "
    "(tools that must run together in one turn)"
)
GROUP_HINT = "list the tools of the group, one `- tool_called: NAME` each"


def with_tools(snippet: str) -> str:
    body = textwrap.dedent(snippet).strip("\n") + "\n"
    return HEADER + textwrap.indent(body, " " * INDENT)


def load(snippet: str) -> Scenario:
    return load_scenario_text(with_tools(snippet), "scenario.yml")


def problems(snippet: str) -> list[Problem]:
    with pytest.raises(ScenarioError) as info:
        load(snippet)
    return [
        (d.line - HEADER_LINES, d.col - INDENT, d.message, d.hint) for d in info.value.diagnostics
    ]


EVERY_SHAPE = """\
- tool_called: check_balance
- tool_called:
    tool_name: order_replacement
    arguments: {shipping: standard, express: false, count: 1}
  gate: true
- tool_called: {tool_name: get_card_limits}
  gate: false
- tool_called: {tool_name: get_card_limits, arguments: }
- tool_group:
    - tool_called: check_balance
    - tool_called: {tool_name: order_replacement, arguments: {shipping: standard}}
- tool_group:
    - ordered: true
    - tool_called: a
    - gate: true
    - tool_called: b
- tool_group:
    - tool_called: a
    - ordered: false
    - gate: false
"""


def test_every_shape_loads_into_the_model() -> None:
    scenario = load(EVERY_SHAPE)
    assert scenario.expected_tools == (
        ToolCalled(ExpectedTool("check_balance")),
        ToolCalled(
            ExpectedTool(
                "order_replacement", {"shipping": "standard", "express": False, "count": 1}
            ),
            gate=True,
        ),
        ToolCalled(ExpectedTool("get_card_limits")),
        ToolCalled(ExpectedTool("get_card_limits")),
        ToolGroup(
            (
                ExpectedTool("check_balance"),
                ExpectedTool("order_replacement", {"shipping": "standard"}),
            )
        ),
        ToolGroup((ExpectedTool("a"), ExpectedTool("b")), ordered=True, gate=True),
        ToolGroup((ExpectedTool("a"),)),
    )
    assert scenario.expected_tools_lines == tuple(HEADER_LINES + n for n in (1, 2, 6, 8, 9, 12, 17))
    assert scenario.assertions == ()


def test_the_entries_are_frozen_records() -> None:
    entry = load("- tool_called: a").expected_tools[0]
    with pytest.raises(AttributeError):
        entry.gate = True  # type: ignore[misc]


@pytest.mark.parametrize("value", ["", " []"], ids=["null", "empty-list"])
def test_no_entries(value: str) -> None:
    text = HEADER.rstrip("\n") + value + "\n"
    assert load_scenario_text(text).expected_tools == ()


def test_a_tool_name_is_stripped_as_rasa_strips_it() -> None:
    assert load("- tool_called: ' get_balance '").expected_tools == (
        ToolCalled(ExpectedTool("get_balance")),
    )


def test_expected_tools_beside_assertions_and_criteria() -> None:
    text = (
        HEADER.replace("    expected_tools:\n", "")
        + "    criteria: [Agent answers]\n"
        + "    assertions:\n      - skill_activated: {skill_id: s}\n"
        + "    expected_tools:\n      - tool_called: a\n"
    )
    scenario = load_scenario_text(text)
    assert (len(scenario.assertions), scenario.criteria, scenario.expected_tools) == (
        1,
        ("Agent answers",),
        (ToolCalled(ExpectedTool("a")),),
    )


INVALID: list[tuple[str, str, list[Problem]]] = [
    (
        "not-a-list",
        "{tool_called: a}",
        [(1, 1, "`expected_tools` must be a list, got a mapping", ENTRY_HINT)],
    ),
    (
        "bare-name",
        "- check_balance",
        [
            (
                1,
                3,
                "an entry of `expected_tools` must be a mapping, got a string `check_balance`",
                "write `- tool_called: check_balance`",
            )
        ],
    ),
    (
        "number-entry",
        "- 3",
        [(1, 3, "an entry of `expected_tools` must be a mapping, got an integer `3`", None)],
    ),
    ("empty-entry", "- {}", [(1, 3, "an entry of `expected_tools` is empty", ENTRY_HINT)]),
    (
        "near-miss-kind",
        "- tool_caled: a",
        [
            (
                1,
                3,
                "an entry of `expected_tools` must be `tool_called` or `tool_group`, "
                "got `tool_caled`",
                "did you mean `tool_called`?",
            )
        ],
    ),
    (
        "other-kind",
        "- skill_activated: {skill_id: s}",
        [
            (
                1,
                3,
                "an entry of `expected_tools` must be `tool_called` or `tool_group`, "
                "got `skill_activated`",
                ENTRY_HINT,
            )
        ],
    ),
    (
        "call-fields-unwrapped",
        "- tool_name: a",
        [
            (
                1,
                3,
                "an entry of `expected_tools` must be `tool_called` or `tool_group`, "
                "got `tool_name`",
                "write the call under `tool_called:` (`- tool_called: {tool_name: ..., "
                "arguments: ...}`)",
            )
        ],
    ),
    (
        "both-kinds",
        "- tool_called: a\n  tool_group: [{tool_called: b}]",
        [
            (
                1,
                3,
                "an entry of `expected_tools` is either `tool_called` or `tool_group`, not both",
                "start each entry with its own `- `",
            )
        ],
    ),
    (
        "null-tool",
        "- tool_called:",
        [
            (
                1,
                3,
                "`tool_called` must be a tool name or a mapping with `tool_name`, got null",
                TOOL_HINT,
            )
        ],
    ),
    (
        "blank-name",
        "- tool_called: '  '",
        [(1, 16, "`tool_called` must name a tool, got a string `  `", TOOL_HINT)],
    ),
    (
        "list-tool",
        "- tool_called: [a]",
        [
            (
                1,
                16,
                "`tool_called` must be a tool name or a mapping with `tool_name`, got a list",
                TOOL_HINT,
            )
        ],
    ),
    (
        "boolean-tool",
        "- tool_called: true",
        [
            (
                1,
                16,
                "`tool_called` must be a tool name or a mapping with `tool_name`, "
                "got a boolean `true`",
                TOOL_HINT,
            )
        ],
    ),
    (
        "missing-tool-name",
        "- tool_called: {arguments: {a: 1}}",
        [(1, 3, "`tool_called` is missing required key `tool_name`", None)],
    ),
    (
        "near-miss-tool-name",
        "- tool_called: {tool_nam: a}",
        [
            (1, 3, "`tool_called` is missing required key `tool_name`", None),
            (1, 17, "unknown key `tool_nam` in `tool_called`", "did you mean `tool_name`?"),
        ],
    ),
    (
        "empty-tool-name",
        "- tool_called: {tool_name: ''}",
        [(1, 28, "`tool_name` in `tool_called` must not be empty", TOOL_HINT)],
    ),
    (
        "number-tool-name",
        "- tool_called: {tool_name: 5}",
        [(1, 28, "`tool_name` in `tool_called` must be a string, got an integer `5`", None)],
    ),
    (
        "arguments-list",
        "- tool_called: {tool_name: a, arguments: [1]}",
        [(1, 42, "`arguments` in `tool_called` must be a mapping, got a list", None)],
    ),
    (
        "arguments-beside",
        "- tool_called: a\n  arguments: {x: 1}",
        [
            (
                2,
                3,
                "`arguments` is not allowed in a `tool_called` entry",
                "`arguments` belongs under `tool_called:`; indent it below that key",
            )
        ],
    ),
    (
        "ordered-standalone",
        "- tool_called: a\n  ordered: true",
        [
            (
                2,
                3,
                "`ordered` is not allowed in a `tool_called` entry",
                "only a `tool_group` has an order",
            )
        ],
    ),
    (
        "gate-yes",
        "- tool_called: a\n  gate: yes",
        [
            (
                2,
                9,
                "`gate` in a `tool_called` entry must be true or false, got a string `yes`",
                "scenario files are YAML 1.2: only `true` and `false` are booleans, "
                "`yes` is a string",
            )
        ],
    ),
    (
        "unknown-beside",
        "- tool_called: a\n  gatee: true",
        [(2, 3, "unknown key `gatee` in a `tool_called` entry", "did you mean `gate`?")],
    ),
    (
        "empty-group",
        "- tool_group: []",
        [
            (
                1,
                15,
                "`tool_group` must be a non-empty list of `- tool_called: ...` items, "
                "got an empty list",
                GROUP_HINT,
            )
        ],
    ),
    (
        "null-group",
        "- tool_group:",
        [
            (
                1,
                3,
                "`tool_group` must be a non-empty list of `- tool_called: ...` items, got null",
                GROUP_HINT,
            )
        ],
    ),
    (
        "mapping-group",
        "- tool_group: {tool_called: a}",
        [
            (
                1,
                15,
                "`tool_group` must be a non-empty list of `- tool_called: ...` items, "
                "got a mapping",
                GROUP_HINT,
            )
        ],
    ),
    (
        "group-flags-only",
        "- tool_group:\n    - ordered: true\n    - gate: true",
        [(1, 3, "`tool_group` needs at least one `tool_called` item", GROUP_HINT)],
    ),
    (
        "group-item-string",
        "- tool_group:\n    - a",
        [(2, 7, "an item of `tool_group` must be a mapping, got a string `a`", None)],
    ),
    (
        "group-item-two-keys",
        "- tool_group:\n    - tool_called: a\n      gate: true",
        [
            (
                2,
                7,
                "an item of `tool_group` must have exactly one key; got `tool_called`, `gate`",
                "in a group, `gate` is an item of its own: `- gate: true`",
            )
        ],
    ),
    (
        "group-item-unwrapped",
        "- tool_group:\n    - {tool_name: a, arguments: {x: 1}}",
        [
            (
                2,
                7,
                "an item of `tool_group` must have exactly one key; got `tool_name`, `arguments`",
                "wrap the call in `tool_called:` (`- tool_called: {tool_name: ...}`)",
            )
        ],
    ),
    (
        "group-item-unknown",
        "- tool_group:\n    - tool_called: a\n    - ordred: true",
        [(3, 7, "unknown key `ordred` in an item of `tool_group`", "did you mean `ordered`?")],
    ),
    (
        "group-flag-not-boolean",
        "- tool_group:\n    - tool_called: a\n    - ordered: 1",
        [(3, 16, "`ordered` in `tool_group` must be true or false, got an integer `1`", None)],
    ),
    (
        "group-tool-null",
        "- tool_group:\n    - tool_called:",
        [
            (
                2,
                7,
                "`tool_called` must be a tool name or a mapping with `tool_name`, got null",
                TOOL_HINT,
            )
        ],
    ),
    (
        "gate-beside-group",
        "- tool_group: [{tool_called: a}]\n  gate: true",
        [
            (
                2,
                3,
                "`gate` is not allowed in a `tool_group` entry",
                "in a group, `gate` is an item of its own: `- gate: true`",
            )
        ],
    ),
]


@pytest.mark.parametrize(
    ("snippet", "expected"), [(s, e) for _, s, e in INVALID], ids=[i for i, _, _ in INVALID]
)
def test_an_invalid_shape_is_an_error_at_its_line(snippet: str, expected: list[Problem]) -> None:
    assert problems(snippet) == expected


def test_every_problem_is_reported_at_once() -> None:
    snippet = "\n".join(
        [
            "- tool_called: a",
            "- check_balance",
            "- tool_called: {tool_nam: x}",
            "- tool_group: []",
            "- tool_called: b",
            "  gate: on",
        ]
    )
    assert [(line, message) for line, _, message, _ in problems(snippet)] == [
        (2, "an entry of `expected_tools` must be a mapping, got a string `check_balance`"),
        (3, "`tool_called` is missing required key `tool_name`"),
        (3, "unknown key `tool_nam` in `tool_called`"),
        (
            4,
            "`tool_group` must be a non-empty list of `- tool_called: ...` items, "
            "got an empty list",
        ),
        (6, "`gate` in a `tool_called` entry must be true or false, got a string `on`"),
    ]


def test_a_diagnostic_quotes_the_line_with_a_caret() -> None:
    with pytest.raises(ScenarioError) as info:
        load("- tool_called: a\n  gate: yes")
    assert info.value.diagnostics[0].render().splitlines() == [
        "scenario.yml:7:15: error: `gate` in a `tool_called` entry must be true or false, "
        "got a string `yes`",
        "            gate: yes",
        "                  ^",
        "hint: scenario files are YAML 1.2: only `true` and `false` are booleans, "
        "`yes` is a string",
    ]


# -- the command line


def _with_expected_tools(tmp_path: Path) -> Path:
    """The balance example scenario with every shape of ``expected_tools`` added."""
    source = REPOSITORY / "examples/eval/scenarios/balance_and_limits.yml"
    text = source.read_text(encoding="utf-8").replace(
        "  goals:\n", "  goals:\n    expected_tools:\n" + textwrap.indent(EVERY_SHAPE, " " * 6), 1
    )
    path = tmp_path / "balance_and_limits.yml"
    path.write_text(text, encoding="utf-8")
    return path


def test_validate_accepts_a_file_with_expected_tools(tmp_path: Path) -> None:
    path = _with_expected_tools(tmp_path)
    proc = run_cli("validate", str(path))
    assert (proc.returncode, proc.stderr) == (0, "")


def test_check_judges_the_assertions_of_a_file_with_expected_tools(tmp_path: Path) -> None:
    events = REPOSITORY / "examples/eval/events/balance_and_limits.jsonl"
    runs = []
    for path in (
        REPOSITORY / "examples/eval/scenarios/balance_and_limits.yml",
        _with_expected_tools(tmp_path),
    ):
        proc = run_cli("check", str(path), "--events", str(events), "--format", "json")
        report = json.loads(proc.stdout)
        verdicts = [
            [(a["index"], a["verdict"], a["decided_at"]) for a in c["assertions"]]
            for c in report["conversations"]
        ]
        runs.append((proc.returncode, proc.stderr, report["summary"]["conversations"], verdicts))
    without, with_tools = runs
    assert with_tools == without
    assert with_tools[2] == 3


def test_the_readme_scenario_example_loads_with_its_expected_tools() -> None:
    readme = (REPOSITORY / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Scenario files") :]
    example = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert load_scenario_text(example).expected_tools == (
        ToolCalled(ExpectedTool("order_replacement", {"shipping": "standard"}), gate=True),
        ToolGroup((ExpectedTool("check_balance"), ExpectedTool("order_replacement")), ordered=True),
    )
