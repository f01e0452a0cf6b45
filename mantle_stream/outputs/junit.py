"""JUnit XML: one ``<testsuite>`` per scenario, one ``<testcase>`` per (run, assertion).

The shape Jenkins, GitLab and GitHub test reporters read, for Mantle's
scenarios run several times: a scenario's runs are the conversations judged
against it. A case is named ``run 2 #5 tool_executed`` (run, assertion index,
kind), its ``classname`` the scenario, with the assertion's ``file`` and
``line``; ``<failure>`` for failed, ``<error>`` for errored (could not be
evaluated: never a failure), ``<skipped>`` for skipped and pending; its
``<properties>`` say the conversation, ``decided_at`` and ``reason``. A
``gate: true`` entry of ``goals.expected_tools`` is a case too (``run 2
expected_tools #1 tool_group``): a ``<failure>`` when it failed and tool calls
are judged (``--tool-calls``), else ``<skipped>`` (a metric), with its turn,
recall and precision. Each
suite's ``<properties>`` give the scenario's runs, pass rate, pass^k, pass@k
and flaky assertions. Conversations judged against no scenario are errors in
a suite of their own, ``unmatched``.

Runs a long run lets go of are written as they go, to one temporary body per
scenario beside the file (:class:`JunitWriter`); at the end each suite is put
together under its totals and the file is moved into place atomically.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO

import msgspec

from mantle_stream.core.engine.evaluator import UnmatchedConversation
from mantle_stream.core.errors import FeedError
from mantle_stream.core.recorded import RecordedRun
from mantle_stream.core.verdicts import (
    ConversationResult,
    Decision,
    StopMessage,
    ToolCallScores,
    VerdictRecord,
)
from mantle_stream.outputs.atomic import atomic_file
from mantle_stream.outputs.junit_text import _attribute, _text, _valid
from mantle_stream.outputs.report import (
    Report,
    ReportConversation,
    ScenarioResult,
    report_conversation,
)

__all__ = ["UNMATCHED_SUITE", "JunitWriter", "RunCases", "junit_xml", "run_cases"]

#: The name of the suite of the conversations judged against no scenario.
UNMATCHED_SUITE = "unmatched conversations"

_DECLARATION = "<?xml version='1.0' encoding='utf-8'?>\n"


def _xml(element: ET.Element, *, declaration: bool = False) -> bytes:
    """An element as UTF-8 XML that any XML reader accepts, whatever its text holds."""
    text = ET.tostring(element, encoding="unicode")
    return _valid(_DECLARATION + text if declaration else text)


def _figure(value: float | bool | None) -> str:
    if value is None:
        return "n/a"  # no run judged
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _where(file: str | None, line: int | None) -> list[tuple[str, str]]:
    """A case's ``file`` and ``line`` attributes, those it has."""
    where = [] if file is None else [("file", file)]
    return where if line is None else [*where, ("line", str(line))]


def _decided_at(sequence: int | None, verdict: str) -> str:
    """The deciding event's ``sequence``; the end of the conversation; or nothing yet."""
    if sequence is not None:
        return str(sequence)
    return "" if verdict in ("pending", "skipped") else "end of conversation"


@dataclass
class _Tally:
    """One assertion of a scenario across the runs written so far."""

    kind: str
    passed: int = 0
    failed: int = 0


@dataclass
class _Suite:
    """A scenario's suite while it is written: its totals and its body (the cases)."""

    name: str
    body: IO[bytes]
    unmatched: bool = False  # the conversations judged against no scenario
    tests: int = 0
    failures: int = 0
    errors: int = 0
    skipped: int = 0
    # Its runs: how many, and by verdict; those mantle_stream stopped early.
    runs: int = 0
    verdicts: dict[str, int] = field(default_factory=dict)
    stopped_early: int = 0
    started: float | None = None
    duration: float = 0.0
    assertions: dict[int, _Tally] = field(default_factory=dict)

    def write(self, case: ET.Element) -> None:
        self.tests += 1
        self.failures += case.find("failure") is not None
        self.errors += case.find("error") is not None
        self.skipped += case.find("skipped") is not None
        ET.indent(case, space="  ", level=2)
        self.body.write(b"    " + _xml(case) + b"\n")

    def write_case(
        self,
        attributes: list[tuple[str, str]],
        properties: list[tuple[str, str]],
        outcome: tuple[str, list[tuple[str, str]], str | None],
    ) -> None:
        """A ``<testcase>`` as :meth:`write` would write its element, byte for byte,
        without building one (:meth:`case`)."""
        self.body.write(_valid(self.case(attributes, properties, outcome)))

    def case(
        self,
        attributes: list[tuple[str, str]],
        properties: list[tuple[str, str]],
        outcome: tuple[str, list[tuple[str, str]], str | None],
    ) -> str:
        """A ``<testcase>``'s text, counted, as :meth:`write` would write its element
        (before :func:`_valid`): a run of many thousand cases spent most of its time in
        ElementTree. ``outcome``: the one child after the properties (its tag,
        attributes and text)."""
        tag, outcome_attributes, text = outcome
        self.tests += 1
        self.failures += tag == "failure"
        self.errors += tag == "error"
        self.skipped += tag == "skipped"
        head = "".join([f' {n}="{_attribute(v)}"' for n, v in attributes])
        tail = "".join([f' {n}="{_attribute(v)}"' for n, v in outcome_attributes])
        tail += f">{_text(text)}</{tag}>" if text else " />"
        end = f"\n      <{tag}{tail}\n    </testcase>\n"
        if not properties:
            return f"    <testcase{head}>\n      <properties />{end}"
        listed = "".join(
            [
                f'\n        <property name="{_attribute(n)}" value="{_attribute(v)}" />'
                for n, v in properties
            ]
        )
        return f"    <testcase{head}>\n      <properties>{listed}\n      </properties>{end}"

    def element(self, result: ScenarioResult | None) -> ET.Element:
        """The opening of the suite: its totals and properties (its cases follow)."""
        suite = ET.Element(
            "testsuite",
            name=self.name,
            tests=str(self.tests),
            failures=str(self.failures),
            errors=str(self.errors),
            skipped=str(self.skipped),
        )
        if self.started is not None:
            # How long its runs took together, from their events' own timestamps,
            # and when the first began (UTC).
            suite.set("time", f"{self.duration:.3f}")
            suite.set(
                "timestamp",
                datetime.fromtimestamp(self.started, UTC).strftime("%Y-%m-%dT%H:%M:%S"),
            )
        if result is not None and result.file is not None:
            suite.set("file", result.file)
        if self.unmatched:
            return suite
        passed, failed = self.verdicts.get("passed", 0), self.verdicts.get("failed", 0)
        k = passed + failed
        props = ET.SubElement(suite, "properties")
        for name, value in (
            ("scenario", self.name),
            ("runs", str(self.runs)),
            ("passed", str(passed)),
            ("failed", str(failed)),
            ("errored", str(self.verdicts.get("errored", 0))),
            ("pending", str(self.verdicts.get("pending", 0))),
            ("stopped_early", str(self.stopped_early)),
            ("k", str(k)),
            ("pass_rate", _figure(round(passed / k, 4) if k else None)),
            ("pass^k", _figure(failed == 0 if k else None)),
            ("pass@k", _figure(passed > 0 if k else None)),
        ):
            ET.SubElement(props, "property", name=name, value=value)
        for index, tally in sorted(self.assertions.items()):
            if tally.passed and tally.failed:
                judged = tally.passed + tally.failed
                ET.SubElement(
                    props,
                    "property",
                    name=f"flaky #{index} {tally.kind}",
                    value=f"flaky ({tally.failed}/{judged} failed)",
                )
        return suite


#: Stands for a run's number in cases made before it is known (by a worker): a
#: character no case's name holds elsewhere (its kind is a name, its index a number).
_RUN = "\ue000"
_RUN_NAME = f' name="run {_RUN} '.encode()


class RunCases(msgspec.Struct, frozen=True):
    """One run's cases made apart (:func:`run_cases`), and how many of each."""

    cases: bytes  # valid XML, the run's number left as _RUN
    tests: int
    failures: int
    errors: int
    skipped: int


def run_cases(conv: ReportConversation, *, tool_calls: bool) -> RunCases:
    """A run's cases as :class:`JunitWriter` writes them, made where it was judged
    (a ``--workers`` worker, in parallel: not in the parent's serial tail) with
    its number left out, which counts the runs of its scenario before it: the
    writer puts it in (:meth:`JunitWriter.add_made`)."""
    suite = _Suite(conv.scenario or conv.conversation_id, io.BytesIO())
    cases = _valid("".join(_Assembly(None, tool_calls)._cases(suite, _RUN, conv)))
    return RunCases(cases, suite.tests, suite.failures, suite.errors, suite.skipped)


class _Assembly:
    """The suites being written, one body per scenario, and how they are put together.

    Memory holds each suite's counters (a few per scenario and assertion),
    never its cases: those go to its body as each run is added.
    """

    def __init__(self, path: str | None, tool_calls: bool = False) -> None:
        self.path = path  # None: the bodies are kept in memory
        self.tool_calls = tool_calls  # failed gate entries of expected_tools are failures
        # By scenario; None: the conversations judged against no scenario.
        self.suites: dict[str | None, _Suite] = {}
        self.body_paths: list[str] = []

    def _body(self) -> IO[bytes]:
        if self.path is None:
            return io.BytesIO()
        directory = os.path.dirname(os.path.abspath(self.path))
        try:
            fd, body_path = tempfile.mkstemp(
                prefix=f".{os.path.basename(self.path)}-", dir=directory
            )
        except OSError as exc:
            raise FeedError(f"cannot write `{self.path}`: {exc.strerror}") from None
        self.body_paths.append(body_path)
        return os.fdopen(fd, "w+b")

    def suite(self, scenario: str | None) -> _Suite:
        suite = self.suites.get(scenario)
        if suite is None:
            name = UNMATCHED_SUITE if scenario is None else scenario
            suite = _Suite(name, self._body(), unmatched=scenario is None)
            self.suites[scenario] = suite
        return suite

    def add_run(self, conv: ReportConversation, made: RunCases | None = None) -> None:
        """One run's cases, into its scenario's body (``made``: by a worker, with its
        number left out: :func:`run_cases`)."""
        suite = self.suite(conv.scenario or conv.conversation_id)
        suite.runs += 1
        suite.verdicts[conv.verdict] = suite.verdicts.get(conv.verdict, 0) + 1
        suite.stopped_early += conv.stopped_early
        if conv.started is not None and conv.duration is not None:
            suite.duration += conv.duration
            if suite.started is None or conv.started < suite.started:
                suite.started = conv.started
        recorded = conv.recorded.run_index if conv.recorded is not None else None
        run = suite.runs if recorded is None else recorded
        if made is None:
            # (A run's cases made valid and written at once: a case at a time cost as much.)
            suite.body.write(_valid("".join(self._cases(suite, run, conv))))
            return
        for a in conv.assertions:  # (what _case counts, from the run's verdicts)
            tally = suite.assertions.get(a.index)
            if tally is None:
                tally = suite.assertions[a.index] = _Tally(a.kind)
            tally.passed += a.verdict == "passed"
            tally.failed += a.verdict == "failed"
        suite.tests += made.tests
        suite.failures += made.failures
        suite.errors += made.errors
        suite.skipped += made.skipped
        suite.body.write(made.cases.replace(_RUN_NAME, f' name="run {run} '.encode()))

    def _cases(self, suite: _Suite, run: int | str, conv: ReportConversation) -> list[str]:
        """The cases of one run: an assertion's each, then a gate's each."""
        cases = [self._case(suite, run, conv.conversation_id, a) for a in conv.assertions]
        if conv.expected_tools is not None:
            cases += self._gates(suite, run, conv.conversation_id, conv.expected_tools)
        return cases

    @staticmethod
    def _case(suite: _Suite, run: int | str, conversation_id: str, a: VerdictRecord) -> str:
        """The case of one assertion of a run."""
        tally = suite.assertions.get(a.index)
        if tally is None:
            tally = suite.assertions[a.index] = _Tally(a.kind)
        tally.passed += a.verdict == "passed"
        tally.failed += a.verdict == "failed"
        attributes = [
            ("name", f"run {run} #{a.index} {a.kind}"),
            ("classname", suite.name),
            *_where(a.file, a.line),
        ]
        at = "end of conversation" if a.decided_at is None else f"sequence {a.decided_at}"
        properties = [
            ("conversation_id", conversation_id),
            ("verdict", a.verdict),
            ("decided_at", _decided_at(a.decided_at, a.verdict)),
            ("reason", a.reason),
        ]
        outcome: tuple[str, list[tuple[str, str]], str | None]
        if a.verdict == "failed":
            outcome = (
                "failure",
                [("message", a.reason), ("type", a.kind)],
                f"{a.reason}\n(decided at {at})",
            )
        elif a.verdict == "errored":  # could not be evaluated: not a failure
            outcome = (
                "error",
                [("message", a.reason), ("type", "errored")],
                f"{a.reason}\n(at {at})",
            )
        elif a.verdict == "pending":
            outcome = ("skipped", [("message", "still pending when the run ended")], None)
        elif a.verdict == "skipped":
            outcome = ("skipped", [("message", a.reason)], None)
        else:
            outcome = ("system-out", [], f"{a.reason} (decided at {at})")
        return suite.case(attributes, properties, outcome)

    def _gates(
        self, suite: _Suite, run: int | str, conversation_id: str, tools: ToolCallScores
    ) -> list[str]:
        """A case per ``gate: true`` entry of the run's expected_tools."""
        cases = []
        for e in tools.entries:
            if not e.gate:
                continue
            attributes = [
                ("name", f"run {run} expected_tools #{e.index} {e.kind}"),
                ("classname", suite.name),
                *_where(e.file, e.line),
            ]
            properties = [
                ("conversation_id", conversation_id),
                ("verdict", e.verdict),
                ("turn", "" if e.turn is None else str(e.turn)),
                ("decided_at", _decided_at(e.decided_at, e.verdict)),
                ("recall", _figure(e.recall)),
                ("precision", _figure(e.precision)),
                ("reason", e.reason),
            ]
            outcome: tuple[str, list[tuple[str, str]], str | None]
            if e.verdict in ("pending", "skipped"):
                outcome = ("skipped", [("message", e.reason or "still pending")], None)
            elif not self.tool_calls:
                outcome = (
                    "skipped",
                    [("message", f"{e.verdict}, a metric only: --tool-calls judges gates")],
                    None,
                )
            elif e.verdict == "failed":
                outcome = ("failure", [("message", e.reason), ("type", e.kind)], e.reason)
            else:
                outcome = ("system-out", [], e.reason)
            cases.append(suite.case(attributes, properties, outcome))
        return cases

    def add_unmatched(self, u: UnmatchedConversation) -> None:
        # Not judged is not passed: an error a CI job shows, never a silent absence.
        suite = self.suite(None)
        suite.runs += 1
        case = ET.Element("testcase", name=u.conversation_id, classname=UNMATCHED_SUITE)
        why = u.why()
        props = ET.SubElement(case, "properties")
        ET.SubElement(props, "property", name="conversation_id", value=u.conversation_id)
        ET.SubElement(props, "property", name="scenario", value=u.scenario or "")
        ET.SubElement(case, "error", message=f"not judged: {why}", type="unmatched")
        suite.write(case)

    def assemble(self, out: IO[bytes], report: Report, name: str) -> None:
        """The whole file: each scenario's suite (in the order they were loaded), then
        those of scenarios the report does not list, then the unmatched suite."""
        results = {s.scenario: s for s in report.scenarios}
        for s in report.scenarios:
            self.suite(s.scenario)
            for a in s.assertions:  # assertions no run got to, for the flaky list's kinds
                self.suites[s.scenario].assertions.setdefault(a.index, _Tally(a.kind))
        order: list[str | None] = [s.scenario for s in report.scenarios]
        order += [n for n in self.suites if n not in results and n is not None]
        if None in self.suites:
            order.append(None)
        suites = [self.suites[n] for n in order]
        root = ET.Element(
            "testsuites",
            name=name,
            tests=str(sum(s.tests for s in suites)),
            failures=str(sum(s.failures for s in suites)),
            errors=str(sum(s.errors for s in suites)),
        )
        head = _xml(root, declaration=True)
        out.write(head[: head.rindex(b" />")] + b">\n")  # the empty element, opened
        for suite in suites:
            element = suite.element(None if suite.unmatched else results.get(suite.name))
            ET.indent(element, space="  ", level=1)
            text = _xml(element)
            if text.endswith(b" />"):  # no properties: the empty element, opened
                text = text[:-3] + b">"
            else:
                text = text[: text.rindex(b"</testsuite>")].rstrip(b" \n")
            out.write(b"  " + text + b"\n")
            suite.body.flush()
            suite.body.seek(0)
            shutil.copyfileobj(suite.body, out)
            out.write(b"  </testsuite>\n")
        out.write(b"</testsuites>\n")

    def close(self) -> None:
        for suite in self.suites.values():
            suite.body.close()
        self.suites.clear()
        for path in self.body_paths:
            with contextlib.suppress(OSError):
                os.unlink(path)
        self.body_paths.clear()


class JunitWriter:
    """JUnit XML, a ``<testsuite>`` per scenario, a ``<testcase>`` per (run, assertion).

    Runs a long-lived run lets go of (``keep_finished``) are written to a
    temporary body per scenario beside ``path`` as they leave memory
    (:meth:`add`, the engine's ``on_let_go``); at the end (:meth:`finish`,
    the sink's :meth:`on_end`) the ones still kept are added, each suite is
    put together under its totals and properties, and the file is moved into
    place atomically: a reader never sees half a file, and memory holds a
    suite's counters, never its cases. ``recorded`` (``--results``) gives
    the runs let go of their ``run_index``; a run without one is numbered by
    its position among its scenario's runs as they reach the writer (let go
    of, then those the report lists, in order of first event).
    """

    def __init__(
        self,
        path: str,
        *,
        name: str = "mantle-stream",
        recorded: Mapping[str, RecordedRun] | None = None,
        tool_calls: bool = False,
    ) -> None:
        self.path = path
        self.name = name
        self.recorded = recorded
        self.tool_calls = tool_calls  # --tool-calls: failed gates are failures
        directory = os.path.dirname(os.path.abspath(path))
        # Fail at once, not at the first run let go of, when the directory is not writable.
        try:
            fd, probe = tempfile.mkstemp(prefix=f".{os.path.basename(path)}-", dir=directory)
        except OSError as exc:
            raise FeedError(f"cannot write `{path}`: {exc.strerror}") from None
        os.close(fd)
        os.unlink(probe)
        self._assembly: _Assembly | None = _Assembly(path, tool_calls)
        self._made: dict[str, RunCases] = {}  # runs' cases the workers made

    @property
    def tests(self) -> int:
        """Cases written so far."""
        return sum(s.tests for s in self._assembly.suites.values()) if self._assembly else 0

    @property
    def failures(self) -> int:
        return sum(s.failures for s in self._assembly.suites.values()) if self._assembly else 0

    @property
    def errors(self) -> int:
        return sum(s.errors for s in self._assembly.suites.values()) if self._assembly else 0

    def add(self, conversation: ConversationResult | UnmatchedConversation) -> None:
        """Write one finished conversation now (the engine's ``on_let_go``)."""
        assembly = self._assembly
        assert assembly is not None, "written after finish()"
        try:
            if isinstance(conversation, UnmatchedConversation):
                assembly.add_unmatched(conversation)
            else:
                run = (self.recorded or {}).get(conversation.conversation_id)
                assembly.add_run(report_conversation(conversation, run, tool_calls=self.tool_calls))
        except OSError as exc:
            raise FeedError(f"cannot write `{self.path}`: {exc.strerror}") from None

    def add_made(self, made: Mapping[str, RunCases]) -> None:
        """Runs' cases made apart (:func:`run_cases`, by conversation), written at the
        end in the report's order, each numbered then."""
        self._made.update(made)

    def on_decisions(self, decisions: list[Decision]) -> None:
        """Cases are written per run: from runs let go of, and at the end."""

    def on_stop(self, message: StopMessage) -> None:
        """A stopped conversation's pending assertions end skipped: written at the end."""

    def on_end(self, report: Report) -> None:
        self.finish(report)

    def finish(self, report: Report) -> None:
        """Add what the report still lists and move the whole file into place."""
        assembly = self._assembly
        assert assembly is not None, "finished twice"
        try:
            made = self._made
            for conv in report.conversations:
                assembly.add_run(conv, made.pop(conv.conversation_id, None))
            for u in report.unmatched:
                assembly.add_unmatched(u)
            with atomic_file(self.path) as out:
                assembly.assemble(out, report, self.name)
        except OSError as exc:
            raise FeedError(f"cannot write `{self.path}`: {exc.strerror}") from None
        finally:
            self.close()

    def close(self) -> None:
        """Drop the temporary bodies (also when the run ends before :meth:`finish`)."""
        if self._assembly is not None:
            self._assembly.close()
            self._assembly = None


def junit_xml(report: Report, *, name: str = "mantle-stream") -> bytes:
    """The report as JUnit XML (the whole file in memory: for small reports and tests)."""
    assembly = _Assembly(None, report.expected_tools is not None and report.expected_tools.gated)
    for conv in report.conversations:
        assembly.add_run(conv)
    for u in report.unmatched:
        assembly.add_unmatched(u)
    out = io.BytesIO()
    assembly.assemble(out, report, name)
    assembly.close()
    return out.getvalue()
