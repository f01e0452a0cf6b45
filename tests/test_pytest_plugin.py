"""The pytest plugin: recorded conversations as tests (docs/pytest.md).

Most tests run a small project through ``pytester`` (pytest's own fixture
for testing plugins): two scenario files, four recorded conversations (three
numbered by a results folder, one named by its metadata), with a passing,
failing (at an event and at the end), skipped (``mantle_stop_early``: the
conversation was stopped after its first failure) and errored (a regular
expression out of time) assertion. They check each item's outcome, the
failure text (golden), ``reportinfo``, ``-k``/``-m``, ``--lf``, ``-x``,
JUnit XML and pytest-xdist; that sources are judged once; the
``mantle_evaluator`` fixture with :mod:`mantle_stream.testing`; and that an
unconfigured project is left alone (nothing collected, no engine loaded).

Regenerate the goldens with ``UPDATE_GOLDEN=1 python -m pytest tests/test_pytest_plugin.py``.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import sqlite3
import sys
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

import mantle_stream.pytest_plugin._session as plugin_session
from mantle_stream.core.recorded import RecordedRun
from mantle_stream.core.verdicts import ConversationResult
from mantle_stream.feeds import Chunk
from mantle_stream.pytest_plugin._judge import Judgement, RecentLinesFeed, judge, run_names
from mantle_stream.pytest_plugin._text import MAX_SNIPPET_LINES, snippet
from mantle_stream.testing import (
    TrackerEvent,
    bot,
    conversation,
    session_ended,
    session_started,
    skill,
    tool,
    user,
)

from _stores import make_db

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "eval"
GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"
PLUGIN = ROOT / "mantle_stream" / "pytest_plugin"

CARD = """\
# A damaged card is replaced.
scenario:
  name: card
  simulation_context: A customer replaces a damaged card.
  goals:
    assertions:
      - skill_activated:
          skill_id: card_replace
      - tool_executed:
          tool_name: order_replacement
          source: local
          arguments:
            shipping: standard
      - bot_did_not_utter:
          utter_name: utter_cannot_help
"""
GREETING = """\
scenario:
  name: greeting
  simulation_context: A customer says hello.
  goals:
    assertions:
      - skill_activated:
          skill_id: greet
      - bot_uttered:
          text_matches: "(a+)+$"
"""
INI = """\
[pytest]
mantle_scenarios = eval/scenarios
mantle_events = eval/events/all.jsonl
mantle_results = eval/results/2026-01-01T09-00-00
mantle_stop_early = true
"""


def order(shipping: str) -> TrackerEvent:
    return tool("order_replacement", skill_id="card_replace", args={"shipping": shipping})


#: The card scenario's three runs (results folder: run_1, run_2, run_3).
CARD_RUNS = {
    # Every assertion passes.
    "sim-1": [
        session_started(),
        user("my card is cracked"),
        skill("activated", "card_replace"),
        order("standard"),
        bot("Your new card is on its way.", utter="utter_order_placed"),
        session_ended(),
    ],
    # #2 fails at sequence 3; the conversation is stopped there and ends before any
    # order: #1, still pending, is skipped.
    "sim-2": [
        session_started(),
        user("my card is cracked"),
        skill("activated", "card_replace"),
        bot("I can't help with that.", utter="utter_cannot_help"),
        session_ended(),
    ],
    # #1 fails at the end (ordered with express shipping): nothing settles it before.
    "sim-3": [
        session_started(),
        user("my card is cracked"),
        skill("activated", "card_replace"),
        order("express"),
        session_ended(),
    ],
}
#: The greeting's one run, named by its metadata: its pattern backtracks for ever.
HELLO = [
    session_started(),
    user("hello"),
    skill("activated", "greet"),
    bot("a" * 5000 + "!"),
    session_ended(),
]

CARD_FILE = "eval/scenarios/card.yml"
GREETING_FILE = "eval/scenarios/greeting.yml"
EXPECTED = {
    f"{CARD_FILE}::card::run_1::#0 skill_activated": "passed",
    f"{CARD_FILE}::card::run_1::#1 tool_executed": "passed",
    f"{CARD_FILE}::card::run_1::#2 bot_did_not_utter": "passed",
    f"{CARD_FILE}::card::run_2::#0 skill_activated": "passed",
    f"{CARD_FILE}::card::run_2::#1 tool_executed": "skipped",
    f"{CARD_FILE}::card::run_2::#2 bot_did_not_utter": "failed",
    f"{CARD_FILE}::card::run_3::#0 skill_activated": "passed",
    f"{CARD_FILE}::card::run_3::#1 tool_executed": "failed",
    f"{CARD_FILE}::card::run_3::#2 bot_did_not_utter": "passed",
    f"{GREETING_FILE}::greeting::sim-hello::#0 skill_activated": "passed",
    f"{GREETING_FILE}::greeting::sim-hello::#1 bot_uttered": "error",
}
COUNTS = {"passed": 7, "failed": 2, "skipped": 1, "errors": 1}


def write_project(root: Path, ini: str = INI) -> None:
    """The small project: scenarios, events, a results folder, and the ini file."""
    (root / "eval" / "scenarios").mkdir(parents=True)
    (root / "eval" / "events").mkdir()
    (root / CARD_FILE).write_text(CARD)
    (root / GREETING_FILE).write_text(GREETING)
    lines = [
        line
        for cid, events in CARD_RUNS.items()
        for line in conversation(*events, conversation_id=cid)
    ]
    lines += conversation(*HELLO, conversation_id="sim-hello", scenario="greeting")
    (root / "eval" / "events" / "all.jsonl").write_bytes(b"".join(lines))
    results = root / "eval" / "results" / "2026-01-01T09-00-00" / "card"
    results.mkdir(parents=True)
    for number, cid in enumerate(CARD_RUNS, 1):
        run = {"conversation_id": cid, "scenario_slug": "card", "run_index": number}
        (results / f"run_{number}.json").write_text(json.dumps(run))
    (root / "pytest.ini").write_text(ini)


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.setenv("COLUMNS", "100")  # the terminal's width, for the golden text
    monkeypatch.delenv("CI", raising=False)  # pytest shortens less on CI
    write_project(pytester.path)
    return pytester


_VERBOSE = re.compile(r"(eval/scenarios/\S+\.yml::.+?::#\d+ \w+)")
_WORDS = {"PASSED": "passed", "FAILED": "failed", "SKIPPED": "skipped", "ERROR": "error"}


def outcomes(result: pytest.RunResult) -> dict[str, str]:
    """Each item's outcome, from the lines of a ``-v`` run (with or without xdist)."""
    found: dict[str, str] = {}
    for line in result.outlines:
        item = _VERBOSE.search(line)
        words = [w for w in _WORDS if re.search(rf"\b{w}\b", line)]
        if item and words and not line.startswith(("FAILED ", "ERROR ")):
            found[item.group(1)] = _WORDS[words[0]]
    return found


def selected(result: pytest.RunResult) -> set[str]:
    """The node ids a ``--collect-only -q`` run lists."""
    return {line for line in result.outlines if line.startswith("eval/")}


# ---------------------------------------------------------------------- inert


def test_an_unconfigured_project_collects_nothing_and_loads_no_engine(
    pytester: pytest.Pytester,
) -> None:
    # A scenario file and events where a test suite lives, but no configuration.
    (pytester.path / "card.yml").write_text(CARD)
    (pytester.path / "events.jsonl").write_bytes(b"".join(conversation(*CARD_RUNS["sim-1"])))
    pytester.makepyfile(test_a="def test_a():\n    pass\n")
    pytester.makeconftest(
        """
        import json, sys

        def pytest_sessionfinish(session):
            with open("modules.json", "w") as fh:
                json.dump(sorted(m for m in sys.modules if m.startswith("mantle_stream")), fh)
        """
    )
    result = pytester.runpytest_subprocess("-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*collected 1 item*"])
    assert "mantle_stream:" not in result.stdout.str()  # no header line, no summary
    modules = json.loads((pytester.path / "modules.json").read_text())
    assert "mantle_stream.pytest_plugin" in modules  # installed and loaded ...
    assert not [m for m in modules if m.startswith("mantle_stream.core.engine")]  # ... inert
    assert "mantle_stream.runner" not in modules
    assert "mantle_stream.pytest_plugin._session" not in modules


def test_the_plugins_entry_module_imports_only_pytest_and_the_standard_library() -> None:
    # What every pytest run imports: the entry module and the settings it reads.
    for name in ("__init__.py", "_settings.py"):
        tree = ast.parse((PLUGIN / name).read_text())
        roots = set()
        for node in tree.body:  # the top level; the engine is imported in functions
            if isinstance(node, ast.Import):
                roots |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                roots.add(node.module)
        allowed = set(sys.stdlib_module_names) | {"pytest", "__future__"}
        own = {"mantle_stream.pytest_plugin._settings"}
        bad = {r for r in roots if r.split(".")[0] not in allowed and r not in own}
        assert not bad, f"{name} imports {sorted(bad)} at its top level"


def test_an_ini_file_without_the_plugin_options_is_not_configured(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_a="def test_a():\n    pass\n")
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)
    assert "mantle_stream:" not in result.stdout.str()
    assert "= mantle_stream =" not in result.stdout.str()


# ---------------------------------------------------------------------- outcomes


def test_each_assertion_of_each_conversation_is_an_item_with_its_verdicts_outcome(
    project: pytest.Pytester,
) -> None:
    result = project.runpytest("-v")
    result.assert_outcomes(**COUNTS)
    assert outcomes(result) == EXPECTED
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "mantle_stream: scenarios eval/scenarios; events eval/events/all.jsonl; "
            "results eval/results/2026-01-01T09-00-00; stop early",
            "*= mantle_stream =*",
            "judged 4 conversations (21 events of eval/events/all.jsonl) in * s: "
            "11 assertions, 2 conversations failed, 1 assertion skipped, 1 assertion errored",
        ]
    )


def test_items_are_named_and_ordered_the_same_way_every_time(project: pytest.Pytester) -> None:
    first = project.runpytest("--collect-only", "-q").outlines
    again = project.runpytest("--collect-only", "-q").outlines
    ids = [line for line in first if line.startswith("eval/")]
    assert ids == list(EXPECTED)  # files, then runs by number, then assertions by index
    assert ids == [line for line in again if line.startswith("eval/")]


def test_a_failure_shows_the_reason_the_deciding_event_and_the_assertions_yaml(
    project: pytest.Pytester,
) -> None:
    result = project.runpytest("-rfEs")
    text = result.stdout.str()
    sections = text[text.index("= ERRORS =") : text.index("= mantle_stream =")]
    start = sections.index("\n") + 1  # from the first section's header on
    body = sections[start : sections.rindex("\n")].replace(str(project.path), "<project>")
    check_golden("failures", body + "\n")
    # The short summary and a skip name the reason (a skip its file too).
    result.stdout.fnmatch_lines(
        [
            "FAILED eval/scenarios/card.yml::card::run_2::#2 bot_did_not_utter - agent uttered*",
            "ERROR eval/scenarios/greeting.yml::greeting::sim-hello::#1 bot_uttered - "
            "could not be evaluated: *",
            "SKIPPED [[]1[]] eval/scenarios/card.yml: not judged: the conversation was "
            "stopped early after assertion #2 `bot_did_not_utter` failed at sequence 3",
        ]
    )


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / f"pytest_{name}.txt"
    if UPDATE:
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"{path.name} is missing; run with UPDATE_GOLDEN=1 and read it"
    assert text == path.read_text(encoding="utf-8")


def test_reportinfo_points_at_each_assertions_line(project: pytest.Pytester) -> None:
    items = project.getitems(project.path / "eval" / "scenarios")
    assert [item.nodeid for item in items] == list(EXPECTED)
    for item in items:
        path, lineno, domain = item.reportinfo()
        file = CARD_FILE if "card.yml" in item.nodeid else GREETING_FILE
        source = (project.path / file).read_text().splitlines()
        kind = item.name.split(" ", 1)[1]
        index = int(item.name[1:].split(" ", 1)[0])
        # The index-th line that lists an assertion (`      - kind:`) of the file.
        listed = [n for n, line in enumerate(source) if re.match(r"^      - \w+:", line)]
        assert Path(path) == project.path / file
        assert lineno == listed[index]
        assert source[listed[index]].strip() == f"- {kind}:"
        assert domain == item.nodeid.split("::", 1)[1]
        assert item.location == (file, listed[index], domain)


# ---------------------------------------------------------------------- selection


def test_k_selects_by_scenario_run_and_kind(project: pytest.Pytester) -> None:
    def k(expression: str) -> set[str]:
        return selected(project.runpytest("--collect-only", "-q", "-k", expression))

    assert k("greeting") == {i for i in EXPECTED if "greeting" in i}
    assert k("run_2") == {i for i in EXPECTED if "::run_2::" in i}
    assert k("card and tool_executed") == {i for i in EXPECTED if "#1 tool_executed" in i}
    assert k("not skill_activated and not card") == {
        f"{GREETING_FILE}::greeting::sim-hello::#1 bot_uttered"
    }


def test_m_selects_by_kind_by_scenario_file_and_by_the_mantle_markers_fields(
    project: pytest.Pytester,
) -> None:
    def m(expression: str) -> set[str]:
        result = project.runpytest("--collect-only", "-q", "--strict-markers", "-m", expression)
        assert result.ret == pytest.ExitCode.OK, result.stdout.str()
        return selected(result)

    assert m("tool_executed") == {i for i in EXPECTED if i.endswith("tool_executed")}
    assert m("greeting") == {i for i in EXPECTED if "greeting" in i}
    assert m("card and not bot_did_not_utter") == {
        i for i in EXPECTED if "card.yml" in i and "bot_did_not_utter" not in i
    }
    assert m("mantle(scenario='card', run='run_3')") == {i for i in EXPECTED if "run_3" in i}
    assert m("mantle(conversation='sim-hello', kind='bot_uttered')") == {
        f"{GREETING_FILE}::greeting::sim-hello::#1 bot_uttered"
    }
    assert m("mantle") == set(EXPECTED)


def test_last_failed_reruns_the_failed_and_errored_items_only(project: pytest.Pytester) -> None:
    project.runpytest().assert_outcomes(**COUNTS)
    result = project.runpytest("--lf", "-v")
    result.assert_outcomes(failed=2, errors=1, deselected=8)
    assert outcomes(result) == {i: o for i, o in EXPECTED.items() if o in ("failed", "error")}


def test_exitfirst_stops_at_the_first_failure(project: pytest.Pytester) -> None:
    result = project.runpytest("-x", "-v")
    result.assert_outcomes(passed=4, skipped=1, failed=1)
    assert f"{CARD_FILE}::card::run_3::#1 tool_executed" not in outcomes(result)


def test_junit_xml_has_each_item_with_its_file_line_and_reason(project: pytest.Pytester) -> None:
    project.runpytest("--junitxml=junit.xml", "-o", "junit_family=xunit1")
    cases = junit_cases(project.path / "junit.xml")
    assert len(cases) == len(EXPECTED)
    by_name = {(c["classname"], c["name"]): c for c in cases}
    failed = by_name[("eval.scenarios.card.yml.card.run_2", "#2 bot_did_not_utter")]
    assert (failed["file"], failed["line"]) == (CARD_FILE, "13")
    assert failed["outcome"] == "failure"
    assert failed["message"].startswith("agent uttered the forbidden message")
    assert "deciding event: sequence 3, turn 1" in failed["text"]
    errored = by_name[("eval.scenarios.greeting.yml.greeting.sim-hello", "#1 bot_uttered")]
    assert errored["outcome"] == "error"
    assert "could not be evaluated: `text_matches` `(a+)+$` ran out" in errored["message"]
    skipped = by_name[("eval.scenarios.card.yml.card.run_2", "#1 tool_executed")]
    assert skipped["outcome"] == "skipped"
    assert skipped["message"].startswith("not judged: the conversation was stopped early")
    passed = by_name[("eval.scenarios.card.yml.card.run_1", "#0 skill_activated")]
    assert (passed["outcome"], passed["file"], passed["line"]) == ("passed", CARD_FILE, "6")


def junit_cases(path: Path) -> list[dict[str, str]]:
    """Each test case of a JUnit file: its attributes, outcome, message and text."""
    cases = []
    for case in ET.parse(path).getroot().iter("testcase"):
        found = {k: v for k, v in case.attrib.items() if k != "time"}
        found["outcome"], found["message"], found["text"] = "passed", "", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                found["outcome"] = child.tag
                found["message"] = child.get("message", "")
                found["text"] = child.text or ""
        cases.append(found)
    return cases


@pytest.mark.slow  # two inner pytest runs, one of them with xdist workers: 30 s
def test_pytest_xdist_gives_the_same_outcomes_and_junit(project: pytest.Pytester) -> None:
    project.runpytest("--junitxml=alone.xml").assert_outcomes(**COUNTS)
    result = project.runpytest_subprocess("-n", "2", "-v", "--junitxml=xdist.xml")
    result.assert_outcomes(**COUNTS)
    assert outcomes(result) == EXPECTED
    result.stdout.fnmatch_lines(["*= mantle_stream =*", "judged 4 conversations *"])

    def key(case: dict[str, str]) -> tuple[str, str]:
        return case["classname"], case["name"]

    alone = sorted(junit_cases(project.path / "alone.xml"), key=key)
    xdist = sorted(junit_cases(project.path / "xdist.xml"), key=key)
    assert alone == xdist


# ---------------------------------------------------------------------- judging once


def test_the_sources_are_judged_once_per_run(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []

    def counted(*args: Any, **kwargs: Any) -> Judgement:
        calls.append(args)
        return judge(*args, **kwargs)

    monkeypatch.setattr(plugin_session, "judge", counted)
    project.runpytest().assert_outcomes(**COUNTS)  # two files, four runs, eleven items
    assert len(calls) == 1


def test_examples_events_and_tracker_documents_with_their_results_folder(
    pytester: pytest.Pytester,
) -> None:
    # The bundled examples: a JSON lines file and a directory of tracker documents
    # read as one feed, each conversation's scenario and run from the results folder.
    for folder in ("scenarios", "events", "trackers", "results"):
        shutil.copytree(EXAMPLES / folder, pytester.path / "eval" / folder)
    pytester.makeini(
        """
        [pytest]
        mantle_scenarios = eval/scenarios
        mantle_events = eval/events/all.jsonl eval/trackers
        mantle_results = eval/results/2026-12-01T09-00-00
        """
    )
    result = pytester.runpytest("-q")
    # examples/eval/expected.md: 14 conversations, 153 verdicts, 26 failed.
    result.assert_outcomes(passed=127, failed=26)
    result.stdout.fnmatch_lines(
        ["judged 14 conversations (1,100 events of eval/events/all.jsonl and 1 more)*"]
    )


def test_a_sqlite_tracker_store_is_a_source(pytester: pytest.Pytester) -> None:
    write_project(pytester.path, INI.replace("mantle_events = eval/events/all.jsonl", ""))
    lines = (pytester.path / "eval" / "events" / "all.jsonl").read_text().splitlines()
    make_db(pytester.path / "rasa.db", lines)
    result = pytester.runpytest("-v", "--mantle-events", "sqlite:///rasa.db")
    result.assert_outcomes(**COUNTS)
    assert outcomes(result) == EXPECTED


# ---------------------------------------------------------------------- configuration


def test_command_line_options_configure_a_project_without_ini_values(
    project: pytest.Pytester,
) -> None:
    (project.path / "pytest.ini").write_text("[pytest]\ntestpaths = tests\n")
    project.mkpydir("tests")
    (project.path / "tests" / "test_a.py").write_text("def test_a():\n    pass\n")
    result = project.runpytest(
        "-v",
        "--mantle-scenarios",
        "eval/scenarios",
        "--mantle-events",
        "eval/events/*.jsonl",  # a glob pattern, expanded as the CLI does
        "--mantle-results",
        "eval/results/2026-01-01T09-00-00",
        "--mantle-stop-early",
    )
    # The scenarios given on the command line are collected beside the testpaths.
    result.assert_outcomes(passed=COUNTS["passed"] + 1, failed=2, skipped=1, errors=1)
    assert outcomes(result) == EXPECTED


def test_without_stop_early_a_recorded_conversation_is_judged_in_full(
    project: pytest.Pytester,
) -> None:
    (project.path / "pytest.ini").write_text(INI.replace("mantle_stop_early = true\n", ""))
    result = project.runpytest("-v")
    result.assert_outcomes(passed=7, failed=3, errors=1)  # run_2's #1 fails at the end
    assert outcomes(result)[f"{CARD_FILE}::card::run_2::#1 tool_executed"] == "failed"


def test_naming_test_paths_leaves_the_configured_scenarios_out(project: pytest.Pytester) -> None:
    project.mkpydir("tests")
    (project.path / "tests" / "test_a.py").write_text("def test_a():\n    pass\n")
    project.runpytest("tests").assert_outcomes(passed=1)
    project.runpytest("tests", CARD_FILE).assert_outcomes(passed=7, failed=2, skipped=1)
    project.runpytest().assert_outcomes(**{**COUNTS, "passed": COUNTS["passed"] + 1})


@pytest.mark.parametrize(
    ("ini", "message"),
    [
        (
            "[pytest]\nmantle_events = eval/events/all.jsonl\n",
            "*events are configured but no scenarios to judge them against*",
        ),
        (
            "[pytest]\nmantle_scenarios = eval/scenarios\nmantle_events = tcp://127.0.0.1:0\n",
            "*a pytest run judges recorded conversations*live sources*",
        ),
        (
            "[pytest]\nmantle_scenarios = eval/scenarios\nmantle_events = nothing/*.jsonl\n",
            "*mantle_events `nothing/*.jsonl` matches no file*",
        ),
        (
            "[pytest]\nmantle_scenarios = eval/scenarios\nmantle_regex_timeout = soon\n",
            "*the regex timeout must be a number of seconds above 0, not `soon`*",
        ),
    ],
    ids=["events-without-scenarios", "a-live-source", "a-glob-matching-nothing", "bad-timeout"],
)
def test_a_configuration_error_is_a_usage_error(
    project: pytest.Pytester, ini: str, message: str
) -> None:
    (project.path / "pytest.ini").write_text(ini)
    result = project.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (
            lambda root: (root / CARD_FILE).write_text(
                CARD.replace("skill_id: card", "skil_id: c")
            ),
            [
                f"{CARD_FILE}:8:11: error: unknown key `skil_id` in `skill_activated`",
                "*ERROR collecting eval/scenarios/greeting.yml*",
                f"mantle_stream: not judged: {CARD_FILE} could not be loaded",
            ],
        ),
        (
            lambda root: (root / "eval" / "events" / "all.jsonl").write_bytes(
                (root / "eval" / "events" / "all.jsonl").read_bytes() + b"{not json\n"
            ),
            ["*all.jsonl:22: bad event*", "*stopped at the bad event*"],
        ),
    ],
    ids=["a-scenario-with-a-problem", "a-bad-event"],
)
def test_what_check_stops_at_is_a_collection_error(
    project: pytest.Pytester, damage: Callable[[Path], object], message: list[str]
) -> None:
    damage(project.path)
    result = project.runpytest()
    assert result.ret == pytest.ExitCode.INTERRUPTED  # collection errors stop the run
    result.stdout.fnmatch_lines(["*ERROR collecting eval/scenarios/card.yml*", *message])


def test_scenarios_without_events_only_configure_the_fixture(project: pytest.Pytester) -> None:
    (project.path / "pytest.ini").write_text("[pytest]\nmantle_scenarios = eval/scenarios\n")
    project.makepyfile(test_a="def test_a():\n    pass\n")
    result = project.runpytest()
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["mantle_stream: no events configured*"])


# ---------------------------------------------------------------------- hand-written tests


def test_the_mantle_evaluator_fixture_judges_hand_written_conversations(
    project: pytest.Pytester,
) -> None:
    project.makepyfile(
        test_card="""
        from mantle_stream.testing import (
            bot, conversation, session_ended, skill, tool, user, verdicts,
        )

        def order(shipping):
            return tool("order_replacement", skill_id="card_replace", args={"shipping": shipping})

        def test_a_standard_order_passes(mantle_evaluator):
            lines = conversation(
                user("my card is cracked"),
                skill("activated", "card_replace"),
                order("standard"),
                session_ended(),
                scenario="card",
            )
            assert verdicts(mantle_evaluator, lines) == ["passed", "passed", "passed"]

        def test_cannot_help_fails_at_once(mantle_evaluator):
            lines = conversation(
                user("my card is cracked"),
                bot("Sorry.", utter="utter_cannot_help"),
                conversation_id="c2",
                scenario="card",
            )
            assert verdicts(mantle_evaluator, lines) == ["failed", "failed", "failed"]

        def test_the_results_folder_names_the_scenario(mantle_evaluator):
            lines = conversation(skill("activated", "card_replace"), conversation_id="sim-1")
            assert verdicts(mantle_evaluator, lines)[0] == "passed"
        """
    )
    project.runpytest("test_card.py").assert_outcomes(passed=3)


def test_the_fixture_says_what_to_configure_when_nothing_is(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_a="def test_a(mantle_evaluator):\n    pass\n")
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*mantle_evaluator: no scenarios are configured*"])


def test_the_testing_builders_write_what_mantle_writes() -> None:
    from mantle_stream.testing import memory_set, scenario, verdicts

    [line] = conversation(memory_set("card.reason", "damaged"), conversation_id="c", first=7)
    row = json.loads(line)
    assert row["sequence"] == 7 and row["conversation_id"] == "c"
    assert row["memory_set"] == {
        "key": "card.reason",
        "value_json": '"damaged"',
        "anonymized_at": None,
    }
    assert row["metadata"] is None and line.endswith(b"\n")
    check = scenario({"memory_was_set": [{"name": "card.reason", "value": "damaged"}]})
    assert verdicts(check, [line]) == ["passed"]
    with pytest.raises(ValueError, match="carries no step_id"):
        skill("activated", "k", "s1")


# ---------------------------------------------------------------------- pieces


def test_runs_are_numbered_by_their_results_file_then_named_by_id_each_name_unique() -> None:
    def result(cid: str) -> ConversationResult:
        return ConversationResult(cid, "card", "passed", 1)

    def recorded(cid: str, index: int | None) -> RecordedRun:
        return RecordedRun(f"{cid}.json", cid, "card", index, {})

    runs = run_names(
        [result(c) for c in ("b", "a", "x::y", "two-1", "two-2", "ten", "run_1")],
        {
            "ten": recorded("ten", 10),
            "b": recorded("b", 1),
            "two-1": recorded("two-1", 2),  # two results files say run 2
            "two-2": recorded("two-2", 2),
            "a": recorded("a", None),
        },
    )
    assert [(r.name, r.result.conversation_id) for r in runs] == [
        ("run_1", "b"),
        ("run_10", "ten"),
        ("a", "a"),
        ("run_1 (2)", "run_1"),  # an id that looks like a run number
        ("two-1", "two-1"),
        ("two-2", "two-2"),
        ("x:_:y", "x::y"),  # `::` separates the parts of a node id
    ]


def test_the_snippet_is_the_assertions_lines_with_a_caret_under_its_kind() -> None:
    source = (EXAMPLES / "scenarios" / "card_replace_damaged.yml").read_text().splitlines()
    line = next(n for n, text in enumerate(source, 1) if "- sequencing:" in text)
    shown = snippet(source, line, "sequencing")
    assert shown[0] == f"{line} |       - sequencing:"
    assert shown[1] == f"{'':>{len(str(line))}} |         ^"
    assert shown[-1].endswith("skill_id: card_replace")  # to its last line, no further
    long = ["    - sequencing:"] + [f"        - step{n}: x" for n in range(20)] + ["    - next:"]
    cut = snippet(long, 1, "sequencing")
    assert len(cut) == MAX_SNIPPET_LINES + 2 and cut[-1].endswith("| ...")
    assert snippet(long, 99, "x") == []


def test_a_deciding_event_is_found_in_the_chunks_last_read_only() -> None:
    old, new = conversation(user("hi"), bot("yes"), conversation_id="caf\u00e9")

    class Feed:  # the part of a feed RecentLinesFeed reads
        name, live, address = "f", False, None

        async def __aiter__(self) -> AsyncIterator[Chunk]:
            yield Chunk(old, None, 1)
            yield Chunk(new, None, 2)

    async def read_all(remembering: RecentLinesFeed) -> None:
        async for _ in remembering:
            pass

    feed: Any = Feed()
    remembering = RecentLinesFeed(feed, keep=len(new))  # room for the last chunk only
    anyio.run(read_all, remembering)
    assert remembering.find("caf\u00e9", 1) == new.strip()
    assert remembering.find("caf\u00e9", 0) is None  # read before: no longer at hand
    assert remembering.find("other", 1) is None


@pytest.mark.parametrize(
    "cid",
    ["sim-[1]", "sim-[x", "sim-]y", "a b[c]::d"],
    ids=["brackets", "open-bracket", "close-bracket", "brackets-and-colons"],
)
def test_an_id_with_brackets_is_selected_and_rerun_by_last_failed(
    pytester: pytest.Pytester, cid: str
) -> None:
    """Items named after a conversation id holding ``[...]`` (which pytest reads as a
    parametrization) keep node ids that ``--lf`` and the command line select exactly."""
    write_project(pytester.path)
    lines = [
        line
        for name, events in CARD_RUNS.items()
        for line in conversation(
            *events, conversation_id=cid if name == "sim-3" else name, scenario="card"
        )
    ]
    (pytester.path / "eval" / "events" / "all.jsonl").write_bytes(b"".join(lines))
    (pytester.path / "pytest.ini").write_text(INI.replace("mantle_results", "# mantle_results"))
    pytester.runpytest().assert_outcomes(passed=6, failed=2, skipped=1)
    result = pytester.runpytest("--lf", "-v")
    result.assert_outcomes(failed=2, deselected=7)
    failed = [line for line in result.outlines if line.startswith("FAILED ")]
    (nodeid,) = [
        line.removeprefix("FAILED ").split(" - ")[0] for line in failed if "tool_executed" in line
    ]
    # The node id it printed selects that item alone.
    again = pytester.runpytest("-v", nodeid)
    again.assert_outcomes(failed=1)


def test_what_a_sql_source_says_about_its_rows_is_in_the_summary(
    pytester: pytest.Pytester,
) -> None:
    write_project(pytester.path, INI.replace("mantle_events = eval/events/all.jsonl", ""))
    lines = (pytester.path / "eval" / "events" / "all.jsonl").read_text().splitlines()
    make_db(pytester.path / "rasa.db", lines)
    with sqlite3.connect(pytester.path / "rasa.db") as db:
        db.execute("DROP TABLE events")
        db.execute("CREATE TABLE events (id INTEGER, sender_id TEXT, data TEXT)")
        db.executemany(
            "INSERT INTO events VALUES (?, ?, ?)",
            [(None if n == 0 else n, json.loads(line)["conversation_id"], line)
             for n, line in enumerate(lines)],
        )  # fmt: skip
    db.close()
    result = pytester.runpytest("--mantle-events", "sqlite:///rasa.db")
    result.stdout.fnmatch_lines(
        ["`sqlite:///*/rasa.db`: 1 row with no id (NULL) was not read: no place in id order "
         "(conversations `sim-1`)"]
    )  # fmt: skip
