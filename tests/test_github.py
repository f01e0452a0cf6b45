"""GitHub Actions output: workflow-command annotations (golden) and the step summary.

Reports are built the way ``test_scenario_results.py`` builds them — several
runs per scenario through a real evaluator — except where a test needs what
the engine never writes (a newline in a reason, a file name with ``:``):
there the report is written by hand.

Regenerate the goldens with ``UPDATE_GOLDEN=1 python -m pytest tests/test_github.py``
and read the difference before committing it.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

import mantle_stream as ms
from mantle_stream.core.verdicts import VerdictRecord
from mantle_stream.outputs.github import (
    MAX_PER_LEVEL,
    SUMMARY_LIMIT,
    GithubAnnotations,
    escape_data,
    escape_property,
    ranked,
    step_summary,
    workflow_commands,
)
from mantle_stream.outputs.report import (
    Report,
    ReportConversation,
    ScenarioAssertion,
    ScenarioResult,
    Summary,
)
from mantle_stream.outputs.sink import Sink

from _harness import check_golden as golden
from _harness import line, scenario


def check_golden(name: str, text: str) -> None:
    golden(f"github_{name}.txt", text)


# ------------------------------------------------------------------ feeds


def skill(name: str) -> dict[str, Any]:
    return {"skill_activated": {"skill_id": name}}


SAID = {"bot_uttered": {"text_matches": "done"}}
EVIL = {"bot_uttered": {"text_matches": r"(a+)+$"}}


def activated(name: str) -> dict[str, Any]:
    return {"skill_activated": {"skill_id": name, "step_id": None}}


DONE = {"bot": {"text": "all done", "data": None}}
SILENT = {"bot": {"text": "hmm", "data": None}}
EVIL_TEXT = {"bot": {"text": "a" * 5000 + "!", "data": None}}  # backtracks for ever


def run(cid: str, *payloads: dict[str, Any]) -> list[bytes]:
    rows = [line(cid, seq, **payload) for seq, payload in enumerate(payloads)]
    return [*rows, line(cid, len(payloads), session_ended={})]


def judge(scenarios: list[ms.Scenario], runs: dict[str, list[bytes]]) -> Report:
    """Each run (conversation id → its lines) judged against the scenario its id
    starts with (``<scenario>-<n>``)."""
    evaluator = ms.Evaluator(
        scenarios,
        assignments={cid: cid.rsplit("-", 1)[0] for cid in runs},
        regex_timeout=0.01,
    )
    for rows in runs.values():
        for row in rows:
            evaluator.push_line(row)
    evaluator.finish_all()
    return ms.build_report(evaluator)


ODD = "50%: off, now"  # a skill id that puts %, : and , into a reason


def mixed() -> Report:
    """Always passing; flaky (2 of 10 runs fail); failing in every run; errored in
    every run that got to it; and a scenario named with ``%``, ``:`` and ``,``."""
    scenarios = [
        scenario(skill("card"), SAID, name="always"),
        scenario(skill("card"), SAID, name="flaky"),
        scenario(skill("card"), name="never"),
        scenario(skill("card"), EVIL, name="errored"),
        scenario(skill(ODD), name="Cards: 100%, now"),
    ]
    runs: dict[str, list[bytes]] = {}
    for n in range(3):
        runs[f"always-{n}"] = run(f"always-{n}", activated("card"), DONE)
        runs[f"never-{n}"] = run(f"never-{n}", activated("other"))
    for n in range(10):
        runs[f"flaky-{n}"] = run(f"flaky-{n}", activated("card"), SILENT if n in (3, 7) else DONE)
    for n in range(2):
        runs[f"errored-{n}"] = run(f"errored-{n}", activated("card"), EVIL_TEXT)
        runs[f"Cards: 100%, now-{n}"] = run(f"Cards: 100%, now-{n}", activated("card"))
    return judge(scenarios, runs)


def many() -> Report:
    """12 assertions failing in every run, 13 flaky ones (seven failing 2 of 3 runs,
    six 1 of 3) and one errored: more than GitHub shows per level."""
    scenarios = [
        scenario(skill("card"), EVIL, name="errored"),  # first: ranked last all the same
        scenario(*(skill(f"s{i}") for i in range(12)), name="many"),
        scenario(*(skill(f"w{i}") for i in range(13)), name="wobbly"),
    ]
    runs = {
        "errored-0": run("errored-0", activated("card"), EVIL_TEXT),
        "many-0": run("many-0", activated("card")),
        "many-1": run("many-1", activated("card")),
        "wobbly-0": run("wobbly-0", *(activated(f"w{i}") for i in range(13))),
        "wobbly-1": run("wobbly-1", activated("card")),
        "wobbly-2": run("wobbly-2", *(activated(f"w{i}") for i in range(6))),
    }
    return judge(scenarios, runs)


def by_hand() -> Report:
    """What the engine never writes: a newline and ``%`` in a reason, ``:``, ``,``
    and ``%`` in a file name and a title, a scenario without a file."""
    name = "Cards: 50% off,\nnow"
    odd = "eval/odd: name, 100%.yml"
    reason = "line one\r\nline two: 100%, done"
    scenarios = [
        ScenarioResult(
            name, odd, 2, 0, 2, 0, 0, 0, 2, 0.0, False, False,
            [ScenarioAssertion(0, "tool_executed", "failed", 2, 2, 0, 0, odd, 7)],
        ),
        ScenarioResult(
            "from text", None, 2, 1, 1, 0, 0, 0, 2, 0.5, False, True,
            [ScenarioAssertion(0, "bot_uttered", "flaky", 2, 1, 0, 0, None, 3)],
        ),
    ]  # fmt: skip
    conversations = [
        ReportConversation(
            "c-1", name, "failed", 3, [VerdictRecord(0, "tool_executed", "failed", 2, reason)]
        ),
        ReportConversation(
            "c-2", "from text", "failed", 3, [VerdictRecord(0, "bot_uttered", "failed", None, "no")]
        ),
    ]
    return Report(conversations, Summary(4, 1, 3, 4, 0), scenarios=scenarios)


# ------------------------------------------------------------------ annotations


def test_escaping_follows_the_workflow_command_format() -> None:
    assert escape_data("50%\r\nnext: a, b") == "50%25%0D%0Anext: a, b"
    assert escape_property("50%\r\nnext: a, b") == "50%25%0D%0Anext%3A a%2C b"
    assert escape_data("%0A") == "%250A"  # an escape in the text stays text


def test_golden_mixed_runs() -> None:
    text = "\n".join(workflow_commands(mixed())) + "\n"
    check_golden("mixed", text)
    assert "flaky: 2/10 runs failed" in text
    assert "title=Cards%3A 100%25%2C now #0 skill_activated::" in text
    assert "(no file)" not in text and "file=" not in text  # loaded from text: no file


def test_golden_escaping_of_titles_files_and_messages() -> None:
    commands = workflow_commands(by_hand())
    check_golden("escaping", "\n".join(commands) + "\n")
    assert commands[0] == (
        "::error file=eval/odd%3A name%2C 100%25.yml,line=7,"
        "title=Cards%3A 50%25 off%2C%0Anow #0 tool_executed::"
        "failed in 2/2 runs (in c-1): line one%0D%0Aline two: 100%25, done"
    )
    assert commands[1].startswith("::error title=from text #0 bot_uttered (flaky)::flaky: 1/2")
    assert all("\n" not in c and "\r" not in c for c in commands)


def test_golden_cap_of_ten_per_level_then_one_notice() -> None:
    commands = workflow_commands(many())
    check_golden("capped", "\n".join(commands) + "\n")
    levels = [c.split(" ", 1)[0].split("::")[1] for c in commands]
    assert levels == ["error"] * MAX_PER_LEVEL + ["notice"]
    assert commands[-1] == (
        "::notice title=mantle-stream::16 more annotations left out (16 errors): "
        "GitHub shows 10 per level; the step summary and the report list every one"
    )


def test_failed_rank_before_flaky_before_errored_and_larger_flaky_shares_first() -> None:
    found = ranked(many())
    classes = [a.cls for a in found]
    assert classes == ["failed"] * 12 + ["flaky"] * 13 + ["errored"]
    shares = [a.failed / a.judged for a in found if a.cls == "flaky"]
    assert shares == [2 / 3] * 7 + [1 / 3] * 6
    # Otherwise in the order of the scenarios and their assertions.
    assert [a.index for a in found if a.cls == "failed"] == list(range(12))
    assert found[-1].scenario == "errored" and found[-1].level == "error"
    assert "errored in 1 run, could not be evaluated" in found[-1].message


def test_an_assertion_that_failed_in_any_run_is_an_error_flaky_in_its_title() -> None:
    # Each of them fails the job (exit 1, or 2 when it could only error): a warning
    # would leave a failed job whose annotations show no error.
    commands = workflow_commands(mixed())
    assert [c.split(" ", 1)[0] for c in commands] == ["::error"] * 4
    titles = [c.split("title=", 1)[1].split("::", 1)[0] for c in commands]
    assert titles == [
        "never #0 skill_activated",
        "Cards%3A 100%25%2C now #0 skill_activated",
        "flaky #1 bot_uttered (flaky)",
        "errored #1 bot_uttered (errored)",
    ]


def test_nothing_to_annotate_prints_nothing() -> None:
    report = judge([scenario(skill("card"), name="ok")], {"ok-0": run("ok-0", activated("card"))})
    assert workflow_commands(report) == []


def test_the_sink_acts_at_the_end_only(tmp_path: Path) -> None:
    out = io.StringIO()
    summary = tmp_path / "summary.md"
    sink: Sink = GithubAnnotations(out, summary=str(summary))
    sink.on_decisions([])
    assert out.getvalue() == "" and not summary.exists()
    report = mixed()
    sink.on_end(report)
    sink.close()
    assert out.getvalue().splitlines() == workflow_commands(report)
    assert summary.read_text(encoding="utf-8") == step_summary(report)


# ------------------------------------------------------------------ step summary


def test_step_summary_is_appended_with_rows_and_assertions(tmp_path: Path) -> None:
    path = tmp_path / "step_summary.md"
    path.write_text("# an earlier step\n", encoding="utf-8")
    GithubAnnotations(io.StringIO(), summary=str(path)).on_end(mixed())
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# an earlier step\n\n## mantle-stream: 11/20 runs passed across 5 ")
    check_golden("summary", text)
    assert (
        "| flaky | 10 | 8 | 2 | 0 | 0 | 80% | no | yes |" in text.splitlines()
    )  # runs, passed, failed, errored, stopped early, pass rate, pass^k, pass@k
    assert "| errored | 2 | 0 | 0 | 2 | 0 | — | — | — |" in text.splitlines()
    assert "### Failing assertions (failed in every run)" in text
    assert "- `(no file)` flaky #1 bot_uttered: flaky: 2/10 runs failed in `flaky-3`" in text


def test_step_summary_names_files_and_lines_and_keeps_a_table_whole() -> None:
    text = step_summary(by_hand())
    assert "| Cards: 50% off, now | 2 | 0 | 2 |" in text  # the newline folded
    assert "- `eval/odd: name, 100%.yml:7` Cards: 50% off, now #0 tool_executed:" in text
    assert "line one line two: 100%, done" in text


def _huge(scenarios: int) -> Report:
    rows = [
        ScenarioResult(
            f"scenario {n:05d} " + "x" * 300, f"eval/s{n}.yml", 2, 1, 1, 0, 0, 0, 2, 0.5,
            False, True,
            [ScenarioAssertion(0, "skill_activated", "flaky", 2, 1, 0, 0, f"eval/s{n}.yml", 9)],
        )
        for n in range(scenarios)
    ]  # fmt: skip
    return Report([], Summary(2 * scenarios, scenarios, scenarios, scenarios, 0), scenarios=rows)


def test_step_summary_stays_under_one_mib_and_says_what_it_left_out(tmp_path: Path) -> None:
    path = tmp_path / "step_summary.md"
    earlier = "earlier step\n" * 10_000  # 130,000 bytes already there
    path.write_text(earlier, encoding="utf-8")
    report = _huge(3000)
    GithubAnnotations(io.StringIO(), summary=str(path)).on_end(report)
    data = path.read_bytes()
    assert SUMMARY_LIMIT - 2000 < len(data) <= SUMMARY_LIMIT
    assert data.startswith(earlier.encode())
    last = data.decode().splitlines()[-1]
    assert last.startswith("*Summary cut to stay under GitHub's 1 MiB limit: ")
    rows = data.decode().count("\n| scenario 0")
    asserts = data.decode().count("\n- `eval/s")
    left_rows = 3000 - rows
    assert f"{left_rows} scenario rows and 3000 assertions left out" in last
    assert asserts == 0  # the rows came first and took the room
    # A summary that fits is not cut.
    assert "Summary cut" not in step_summary(_huge(10))


def test_a_full_step_summary_is_left_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "step_summary.md"
    path.write_bytes(b"x" * SUMMARY_LIMIT)
    GithubAnnotations(io.StringIO(), summary=str(path)).on_end(mixed())
    assert path.stat().st_size == SUMMARY_LIMIT
    assert "no room left in the step summary" in capsys.readouterr().err
