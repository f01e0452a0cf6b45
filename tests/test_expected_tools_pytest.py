"""``expected_tools`` in the pytest plugin (issue 23, item 2): with
``--mantle-tool-calls`` an item per ``gate: true`` entry, failing when the entry
failed; without it the entries are metrics, in the terminal summary only.
Runs a small project through ``pytester``, as tests/test_pytest_plugin.py does.
"""

from __future__ import annotations

import pytest
from test_expected_tools_report import SCENARIO, lines

pytest_plugins = ["pytester"]


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    (pytester.path / "balance.yml").write_text(SCENARIO)
    (pytester.path / "events.jsonl").write_bytes(b"\n".join(lines()) + b"\n")
    (pytester.path / "pytest.ini").write_text(
        "[pytest]\nmantle_scenarios = balance.yml\nmantle_events = events.jsonl\n"
    )
    return pytester


SUMMARY = (
    "expected tools: 2 of 4 entries passed, recall 0.62, precision 0.62, accuracy 0.50; "
    "1 gate entry failed"
)


def test_without_tool_calls_the_entries_are_a_summary_line(project: pytest.Pytester) -> None:
    result = project.runpytest("-v")
    result.assert_outcomes(passed=2)
    assert "expected_tools" not in "\n".join(line for line in result.outlines if "::" in line)
    result.stdout.fnmatch_lines(
        [f"{SUMMARY} (metrics only: --mantle-tool-calls makes them fail the run)"]
    )


def test_with_tool_calls_each_gate_entry_is_an_item(project: pytest.Pytester) -> None:
    result = project.runpytest("-v", "--mantle-tool-calls")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*balance.yml::balance::c-1::expected_tools #0 tool_called PASSED*",
            "*balance.yml::balance::c-2::expected_tools #0 tool_called FAILED*",
            "expected_tools #0 tool_called (gate) failed in c-2 (conversation c-2): "
            "`get_balance` never ran with the listed arguments",
            "  no turn, recall 0.00, precision 0.00",
            f"{SUMMARY}",
        ]
    )


def test_the_ini_value_turns_it_on(project: pytest.Pytester) -> None:
    (project.path / "pytest.ini").write_text(
        "[pytest]\nmantle_scenarios = balance.yml\nmantle_events = events.jsonl\n"
        "mantle_tool_calls = true\n"
    )
    project.runpytest().assert_outcomes(passed=3, failed=1)
