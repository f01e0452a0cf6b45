"""Scenario results: the conversations judged against a scenario are its runs.

Three runs each of five scenarios: one always passing, one flaky, one always
failing, one with a run mantle_stream stopped early, one with a run whose
regular expression ran out of time (an error of the harness, not a failure).
"""

from __future__ import annotations

from typing import Any

from rich.console import Console

import mantle_stream as ms
from mantle_stream.outputs.report import ScenarioResult
from mantle_stream.outputs.table import ReportTable

from _runs import SCENARIOS, judge_runs


def report() -> ms.Report:
    return ms.build_report(judge_runs())


def results() -> dict[str, ScenarioResult]:
    return {s.scenario: s for s in report().scenarios}


def figures(s: ScenarioResult) -> tuple[Any, ...]:
    return (s.runs, s.passed, s.failed, s.errored, s.stopped_early, s.k, s.pass_rate,
            s.pass_hat_k, s.pass_at_k)  # fmt: skip


def test_each_scenario_counts_its_runs_and_rates() -> None:
    by_name = results()
    assert list(by_name) == ["always", "flaky", "never", "stopped", "errored"]
    assert figures(by_name["always"]) == (3, 3, 0, 0, 0, 3, 1.0, True, True)
    assert figures(by_name["flaky"]) == (3, 2, 1, 0, 0, 3, 0.6667, False, True)
    assert figures(by_name["never"]) == (3, 0, 3, 0, 0, 3, 0.0, False, False)
    # The stopped run passed what it was judged on; what it did not get to is
    # skipped, and it counts as stopped early.
    assert figures(by_name["stopped"]) == (3, 3, 0, 0, 1, 3, 1.0, True, True)
    # An evaluation error is errored, never failed: out of the pass rate's runs.
    assert figures(by_name["errored"]) == (3, 2, 0, 1, 0, 2, 1.0, True, True)


def test_each_assertion_is_classed_across_runs() -> None:
    by_name = results()

    def classes(name: str) -> list[tuple[str, int, int]]:
        return [(a.verdict, a.failed, a.judged) for a in by_name[name].assertions]

    assert classes("always") == [("passed", 0, 3), ("passed", 0, 3)]
    assert classes("flaky") == [("passed", 0, 3), ("flaky", 1, 3)]
    assert classes("never") == [("failed", 3, 3)]
    # The stopped run's message check was skipped: judged in two runs only.
    assert classes("stopped") == [("passed", 0, 3), ("passed", 0, 2)]
    assert by_name["stopped"].assertions[1].skipped == 1
    assert classes("errored") == [("passed", 0, 3), ("passed", 0, 2)]
    assert by_name["errored"].assertions[1].errored == 1


def test_each_scenario_and_assertion_points_at_its_file() -> None:
    always = results()["always"]
    assert always.file is None  # loaded from text: lines, no file
    assert [a.line for a in always.assertions] == [1, 1]
    card = ms.load_scenario_file("examples/eval/scenarios/card_replace_damaged.yml")
    evaluator = ms.Evaluator([card])
    [result] = ms.build_report(evaluator).scenarios
    assert (result.runs, result.k, result.pass_rate, result.pass_hat_k) == (0, 0, None, None)
    assert result.file == "examples/eval/scenarios/card_replace_damaged.yml"
    assert [a.line for a in result.assertions] == list(card.lines)
    assert {a.verdict for a in result.assertions} == {"not judged"}


def test_the_table_has_a_row_per_scenario_and_lists_the_flaky_assertions() -> None:
    console = Console(width=160, record=True, color_system=None)
    console.print(ReportTable(report(), SCENARIOS))
    text = console.export_text()
    rows = {line.split("│")[1].strip(): line for line in text.splitlines() if line.count("│") > 8}
    # runs, passed, failed, errored, stopped early, pass rate, pass^k, pass@k
    assert (
        "│    3 │      2 │      1 │       0 │       0 │       67% │     no │    yes │"
        in (rows["flaky"])
    )
    assert "│       1 │       0 │      100% │    yes │    yes │" in rows["errored"]
    assert "│ 0% │ no │ no │" in " ".join(rows["never"].split())
    assert "1 flaky assertions:" in text
    assert "#1 bot_uttered flaky (1/3 runs failed) in flaky" in text


def test_every_output_gives_the_same_per_scenario_figures() -> None:
    # The same five scenarios through the step summary, the annotations and the HTML.
    from mantle_stream.outputs.github import step_summary, workflow_commands
    from mantle_stream.outputs.html import render_html

    judged = report()
    summary = step_summary(judged)
    assert "## mantle-stream: 10/15 runs passed across 5 scenarios" in summary
    for row in (
        "| always | 3 | 3 | 0 | 0 | 0 | 100% | yes | yes |",
        "| flaky | 3 | 2 | 1 | 0 | 0 | 66.7% | no | yes |",
        "| never | 3 | 0 | 3 | 0 | 0 | 0% | no | no |",
        "| stopped | 3 | 3 | 0 | 0 | 1 | 100% | yes | yes |",
        "| errored | 3 | 2 | 0 | 1 | 0 | 100% | yes | yes |",
    ):
        assert row in summary
    commands = workflow_commands(judged)
    assert [c.split("::")[1].split(" ", 1)[0] for c in commands] == ["error", "error", "error"]
    assert "failed in 3/3 runs" in commands[0] and "flaky: 1/3 runs failed" in commands[1]
    assert "errored #1 bot_uttered" in commands[2] and "ran out of its" in commands[2]
    page = render_html(judged)
    for s in judged.scenarios:
        cells = "".join(
            f'<td class="num">{n}</td>'
            for n in (s.runs, s.passed, s.failed, s.errored, s.stopped_early)
        )
        assert cells in page, s.scenario
