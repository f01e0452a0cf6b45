"""JUnit XML: a suite per scenario, a case per (run, assertion), as CI reads it.

The feed is the shared one of ``_runs.py``: three runs each of an
always passing scenario, a flaky one, an always failing one, one with a run
mantle_stream stopped early and one with a run whose regular expression ran
out of time (an error of the harness, never a failure). Every file is
validated against ``tests/data/junit-mantle.xsd`` and read back with
``junitparser``, the library CI tooling uses.
"""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from pathlib import Path

import junitparser
import pytest
import xmlschema
from hypothesis import given, settings
from hypothesis import strategies as st

import mantle_stream as ms
from mantle_stream.core.recorded import RecordedRun
from mantle_stream.outputs.junit import (
    UNMATCHED_SUITE,
    JunitWriter,
    _Suite,
    junit_xml,
    run_cases,
)
from mantle_stream.outputs.junit_text import (
    _ESCAPED,
    _ESCAPED_MOST,
    _FORBIDDEN,
    _attribute,
    _escape,
    _valid,
)
from mantle_stream.outputs.report import Report

from _harness import line
from _runs import ACTIVATED, NAMES, SCENARIOS, judge_runs

SCHEMA = xmlschema.XMLSchema(str(Path(__file__).parent / "data" / "junit-mantle.xsd"))


def feed(keep_finished: int | None = None, writer: JunitWriter | None = None) -> ms.Evaluator:
    """The five scenarios' three runs each, and one conversation of a scenario not loaded."""
    return judge_runs(
        keep_finished=keep_finished,
        on_let_go=None if writer is None else writer.add,
        stray=True,
    )


def read(xml: bytes) -> junitparser.JUnitXml:
    SCHEMA.validate(ET.fromstring(xml))
    parsed = junitparser.JUnitXml.fromstring(xml.decode())
    assert isinstance(parsed, junitparser.JUnitXml)
    return parsed


def suites(xml: bytes) -> dict[str, junitparser.TestSuite]:
    return {s.name: s for s in read(xml)}


def properties(element: ET.Element) -> dict[str, str]:
    return {p.get("name", ""): p.get("value", "") for p in element.findall("properties/property")}


def test_a_suite_per_scenario_with_its_counts() -> None:
    by_name = suites(junit_xml(ms.build_report(feed())))
    assert list(by_name) == [*NAMES, UNMATCHED_SUITE]

    def counts(name: str) -> tuple[int, int, int, int]:
        s = by_name[name]
        return (s.tests, s.failures, s.errors, s.skipped)

    assert counts("always") == (6, 0, 0, 0)  # three runs of two assertions
    assert counts("flaky") == (6, 1, 0, 0)
    assert counts("never") == (3, 3, 0, 0)
    assert counts("stopped") == (6, 0, 0, 1)  # what the stopped run did not get to
    assert counts("errored") == (6, 0, 1, 0)  # an error, never a failure
    assert counts(UNMATCHED_SUITE) == (1, 0, 1, 0)


def test_a_case_per_run_and_assertion_with_a_stable_name() -> None:
    by_name = suites(junit_xml(ms.build_report(feed())))
    flaky = list(by_name["flaky"])
    assert [c.name for c in flaky] == [
        f"run {n} #{i} {kind}"
        for n in (1, 2, 3)
        for i, kind in enumerate(("skill_activated", "bot_uttered"))
    ]
    assert {c.classname for c in flaky} == {"flaky"}
    [failed] = [c for c in flaky if c.is_failure]
    assert failed.name == "run 2 #1 bot_uttered"
    [failure] = failed.result
    assert isinstance(failure, junitparser.Failure)
    assert failure.message == "no agent message with text matching `done`"
    assert failure.type == "bot_uttered"
    # Where the assertion is written (a scenario from text: its line, no file).
    assert (failed._elem.get("file"), failed._elem.get("line")) == (None, "1")
    assert properties(failed._elem) == {
        "conversation_id": "flaky-1",
        "verdict": "failed",
        "decided_at": "end of conversation",
        "reason": "no agent message with text matching `done`",
    }
    assert properties(flaky[0]._elem)["decided_at"] == "0"  # the deciding event's sequence

    [errored] = [c for c in by_name["errored"] if c.is_error]
    assert errored.name == "run 3 #1 bot_uttered"
    assert not errored.is_failure
    assert [type(r) for r in errored.result] == [junitparser.Error]
    assert properties(errored._elem)["conversation_id"] == "errored-2"
    assert "ran out of its 0.01 s" in properties(errored._elem)["reason"]

    [skipped] = [c for c in by_name["stopped"] if c.is_skipped]
    assert skipped.name == "run 1 #1 bot_uttered"
    [result] = skipped.result
    assert isinstance(result, junitparser.Skipped)
    assert (result.message or "").startswith("not judged: the conversation was stopped early")
    assert properties(skipped._elem)["decided_at"] == ""

    [stray] = by_name[UNMATCHED_SUITE]
    assert (stray.name, stray.is_error) == ("stray", True)
    assert "its scenario `nope` is not loaded" in (stray.result[0].message or "")


def test_each_suite_carries_its_scenario_figures_and_flaky_assertions() -> None:
    report = ms.build_report(feed())
    root = ET.fromstring(junit_xml(report))
    figures = {s.get("name"): properties(s) for s in root.findall("testsuite")}
    keys: tuple[str, ...] = ("runs", "passed", "failed", "errored", "stopped_early", "k")
    keys += ("pass_rate", "pass^k", "pass@k")
    rows = {name: tuple(figures[name][k] for k in keys) for name in NAMES}
    assert rows == {
        "always": ("3", "3", "0", "0", "0", "3", "1.0", "true", "true"),
        "flaky": ("3", "2", "1", "0", "0", "3", "0.6667", "false", "true"),
        "never": ("3", "0", "3", "0", "0", "3", "0.0", "false", "false"),
        "stopped": ("3", "3", "0", "0", "1", "3", "1.0", "true", "true"),
        "errored": ("3", "2", "0", "1", "0", "2", "1.0", "true", "true"),
    }
    flaky = {k: v for k, v in figures["flaky"].items() if k.startswith("flaky ")}
    assert flaky == {"flaky #1 bot_uttered": "flaky (1/3 failed)"}
    assert not any(k.startswith("flaky ") for n in NAMES if n != "flaky" for k in figures[n])
    # The same figures as the JSON report's scenarios.
    for s in report.scenarios:
        expected = (s.runs, s.passed, s.failed, s.errored, s.stopped_early, s.k)
        assert tuple(int(figures[s.scenario][k]) for k in keys[:6]) == expected
        assert figures[s.scenario]["pass_rate"] == str(s.pass_rate)
    assert properties(root.find("testsuite[@name='unmatched conversations']") or root) == {}
    totals = (root.get("tests"), root.get("failures"), root.get("errors"))
    assert totals == ("28", "4", "2")


def test_runs_are_numbered_by_their_recorded_run_index() -> None:
    evaluator = feed()
    recorded = {
        f"flaky-{n}": RecordedRun(f"flaky/run_{n + 7}.json", f"flaky-{n}", "flaky", n + 7, {})
        for n in range(3)
    }
    by_name = suites(junit_xml(ms.build_report(evaluator, recorded)))
    assert [c.name for c in by_name["flaky"]][::2] == [
        "run 7 #0 skill_activated",
        "run 8 #0 skill_activated",
        "run 9 #0 skill_activated",
    ]
    assert [c.name for c in by_name["always"]][::2][-1] == "run 3 #0 skill_activated"


def test_pending_assertions_of_an_incomplete_run_are_skipped() -> None:
    evaluator = ms.Evaluator(SCENARIOS[:1])
    evaluator.push_line(line("c", 0, **ACTIVATED))  # no end: the run stopped here
    report = ms.build_report(evaluator)
    assert not report.summary.complete
    [suite] = suites(junit_xml(report)).values()
    assert (suite.tests, suite.failures, suite.errors, suite.skipped) == (2, 0, 0, 1)
    [pending] = [c for c in suite if c.is_skipped]
    assert pending.result[0].message == "still pending when the run ended"
    assert properties(pending._elem)["verdict"] == "pending"


def test_runs_let_go_of_are_written_as_they_go_and_all_appear(tmp_path: Path) -> None:
    path = tmp_path / "junit.xml"
    writer = JunitWriter(str(path))
    evaluator = feed(keep_finished=1, writer=writer)
    # A body per scenario beside the file, and the runs it let go of written there:
    # every one, since the last conversation to end (the one of a scenario not
    # loaded, still listed) is the one kept.
    assert len([p for p in tmp_path.iterdir() if p.name.startswith(".junit.xml-")]) == 5
    assert writer.tests == 27
    report = ms.build_report(evaluator)
    assert report.conversations == [] and [u.conversation_id for u in report.unmatched] == ["stray"]
    assert report.summary.omitted == 15
    writer.finish(report)
    assert [p.name for p in tmp_path.iterdir()] == ["junit.xml"]
    # The same file as one written from a run that kept every conversation.
    assert path.read_bytes() == junit_xml(ms.build_report(feed()))
    by_name = suites(path.read_bytes())
    assert sum(s.tests for s in by_name.values()) == 28


def test_a_writer_closed_before_its_end_leaves_nothing(tmp_path: Path) -> None:
    writer = JunitWriter(str(tmp_path / "junit.xml"))
    feed(keep_finished=0, writer=writer)
    assert any(tmp_path.iterdir())
    writer.close()
    assert list(tmp_path.iterdir()) == []


def test_scenarios_without_runs_are_empty_suites_and_no_scenario_no_suite() -> None:
    report = ms.build_report(ms.Evaluator(SCENARIOS))
    by_name = suites(junit_xml(report))
    assert list(by_name) == list(NAMES)
    assert {s.tests for s in by_name.values()} == {0}
    root = ET.fromstring(junit_xml(report))
    assert properties(root[0])["pass_rate"] == "n/a"
    empty = Report(conversations=[], summary=report.summary)
    assert list(read(junit_xml(empty))) == []


def test_control_characters_in_data_never_make_the_file_unreadable(tmp_path: Path) -> None:
    evaluator = ms.Evaluator(SCENARIOS[:1])
    hostile = "a\x01b<&\x1b[31m"
    evaluator.push_line(line(hostile, 0, **ACTIVATED))
    evaluator.push_line(line(hostile, 1, session_ended={}))
    writer = JunitWriter(str(tmp_path / "j.xml"))
    writer.on_end(ms.build_report(evaluator))
    xml = (tmp_path / "j.xml").read_bytes()
    parsed = read(xml)  # well-formed, valid, and read by junitparser
    assert "a\\x01b<&\\x1b[31m" in xml.decode().replace("&lt;", "<").replace("&amp;", "&")
    assert sum(1 for _ in parsed) == 1


@pytest.mark.parametrize(
    "hostile",
    ["run\ufffe", "run\uffff", "\ufffe\uffff<&\x00", "a\x7f\ufffdb"],
    ids=["U+FFFE", "U+FFFF", "both-and-controls", "allowed-neighbours"],
)
def test_every_character_xml_forbids_is_written_as_text(tmp_path: Path, hostile: str) -> None:
    # U+FFFE and U+FFFF are no XML characters at all: written raw, a CI parser
    # rejects the whole file. As for C0 controls, each is written as its escape.
    evaluator = ms.Evaluator(SCENARIOS[:1])
    evaluator.push_line(line(hostile, 0, **ACTIVATED))
    evaluator.push_line(line(hostile, 1, session_ended={}))
    writer = JunitWriter(str(tmp_path / "j.xml"))
    writer.on_end(ms.build_report(evaluator))
    xml = (tmp_path / "j.xml").read_bytes()
    read(xml)  # well-formed, valid, and read by junitparser
    ids = {p.get("value") for p in ET.fromstring(xml).iter("property")
           if p.get("name") == "conversation_id"}  # fmt: skip
    escaped = (
        hostile.replace("\ufffe", "\\ufffe").replace("\uffff", "\\uffff")
        .replace("\x00", "\\x00")
    )  # fmt: skip
    assert ids == {escaped}


def test_a_lone_surrogate_in_a_file_name_is_written_as_text() -> None:
    # A file name that is not UTF-8 reaches Python as lone surrogates
    # (os.fsdecode): they cannot be encoded at all, so they are escaped too.
    case = ET.Element("testcase", name="x", file="scen\udcff.yml")
    out = io.BytesIO()
    _Suite("s", out).write(case)
    assert ET.fromstring(out.getvalue()).get("file") == "scen\\udcff.yml"


# Any text a reason, a file name or an id may hold: markup, quotes, whitespace
# ElementTree escapes in attributes, characters XML forbids, and beyond the BMP.
_ODD = st.text(
    alphabet=st.sampled_from(list("aZ &<>\"'\t\r\n\x00\x01\x1f\x7f é€😀]]>\ufffe\uffff\ud800")),
    max_size=30,
)


@settings(deadline=None)  # examples: the Hypothesis profile's (tests/conftest.py)
@given(
    attributes=st.lists(
        st.tuples(st.sampled_from(["name", "classname", "file"]), _ODD), max_size=3
    ),
    properties=st.lists(st.tuples(_ODD, _ODD), max_size=4),
    tag=st.sampled_from(["failure", "error", "skipped", "system-out"]),
    outcome_attributes=st.lists(st.tuples(st.sampled_from(["message", "type"]), _ODD), max_size=2),
    text=st.none() | _ODD,
)
def test_a_case_is_written_as_elementtree_writes_it(
    attributes: list[tuple[str, str]],
    properties: list[tuple[str, str]],
    tag: str,
    outcome_attributes: list[tuple[str, str]],
    text: str | None,
) -> None:
    # The fast writer (no element built) against the element ElementTree serialises.
    attributes = list(dict(attributes).items())  # an attribute once
    outcome_attributes = list(dict(outcome_attributes).items())
    case = ET.Element("testcase", dict(attributes))
    props = ET.SubElement(case, "properties")
    for name, value in properties:
        ET.SubElement(props, "property", name=name, value=value)
    ET.SubElement(case, tag, dict(outcome_attributes)).text = text
    reference, fast = io.BytesIO(), io.BytesIO()
    _Suite("s", reference).write(case)
    _Suite("s", fast).write_case(attributes, properties, (tag, outcome_attributes, text))
    assert fast.getvalue() == reference.getvalue()


@settings(deadline=None)
@given(texts=st.lists(_ODD, max_size=5))
def test_text_is_made_valid_as_the_pattern_makes_it_whatever_it_is_joined_with(
    texts: list[str],
) -> None:
    # A run's cases are made valid at once, through a scan of the bytes that finds
    # nothing in nearly every text: the same bytes as the pattern's, case by case.
    expected = b"".join(_FORBIDDEN.sub(_escape, t).encode() for t in texts)
    assert _valid("".join(texts)) == expected


def test_attribute_values_are_escaped_alike_however_many_were_seen() -> None:
    # The escapes of recent values are kept (a bounded dict): the first, the last
    # and one seen again after the dict was emptied all come out as ElementTree's.
    values = [f'v{i} &<>"\t\r\n' if i % 2 else f"v{i}" for i in range(3 * _ESCAPED_MOST)]
    for value in [*values, *values[:10]]:
        case = ET.Element("testcase", name=value)
        assert f' name="{_attribute(value)}"' in ET.tostring(case, encoding="unicode")
    assert len(_ESCAPED) <= _ESCAPED_MOST


def _written(report: Report, tmp_path: Path, *, made: bool, tool_calls: bool = False) -> bytes:
    """The JUnit file of ``report``, its runs' cases made apart (as a ``--workers``
    worker makes them) or by the writer."""
    path = tmp_path / ("made.xml" if made else "whole.xml")
    writer = JunitWriter(str(path), tool_calls=tool_calls)
    if made:
        writer.add_made(
            {c.conversation_id: run_cases(c, tool_calls=tool_calls) for c in report.conversations}
        )
    writer.finish(report)
    return path.read_bytes()


def test_runs_cases_made_apart_are_written_as_the_writer_makes_them(tmp_path: Path) -> None:
    # A worker makes its runs' cases without their numbers (it does not know how
    # many runs of the scenario come before): the writer numbers them, recorded
    # run indexes (flaky) and positions (the others) alike.
    recorded = {
        f"flaky-{n}": RecordedRun(f"flaky/run_{n + 7}.json", f"flaky-{n}", "flaky", n + 7, {})
        for n in range(3)
    }
    report = ms.build_report(feed(), recorded)
    whole = _written(report, tmp_path, made=False)
    assert _written(report, tmp_path, made=True) == whole
    assert b"run 8 #0 skill_activated" in whole and b"\xee\x80\x80" not in whole
    read(whole)
