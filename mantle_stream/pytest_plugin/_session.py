"""The configured plugin: scenario files collected as tests of recorded conversations.

Registered by :func:`mantle_stream.pytest_plugin.pytest_configure` only when
scenarios are configured. A scenario file among them is a
:class:`ScenarioFile`; it holds one :class:`ScenarioNode` (its scenario), a
:class:`RunNode` per conversation the scenario judged, and an
:class:`AssertionItem` per assertion::

    eval/scenarios/card.yml::Customer replaces a damaged card::run_2::#5 tool_executed

The sources are judged once per pytest run, the first time a scenario file is
collected (:meth:`MantleSession.judgement`); every item then only reports its
verdict: ``passed`` passes, ``failed`` fails with the reason, the deciding
event and the assertion's YAML, ``skipped`` (a conversation stopped early,
``mantle_stop_early``) is a skip, ``errored`` is an error in setup.

Under pytest-xdist every worker collects, and so judges the sources itself:
collection is deterministic (runs named and ordered by their results file's
run index, else by conversation id), so the workers' items are the same.
The controller collects nothing; each worker hands it the summary lines
(``workeroutput``), which it prints once.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest
from msgspec.structs import replace

from mantle_stream.core.assertions.registry import KINDS
from mantle_stream.core.defaults import DEFAULT_REGEX_TIMEOUT
from mantle_stream.core.engine.evaluator import Evaluator
from mantle_stream.core.errors import MantleStreamError, ScenarioError
from mantle_stream.core.recorded import RecordedRun, load_results
from mantle_stream.core.scenario.load import load_scenarios, scenario_paths
from mantle_stream.core.scenario.model import Scenario
from mantle_stream.core.verdicts import AssertionResult, ConversationResult, ToolEntryResult
from mantle_stream.feeds.sql import redact
from mantle_stream.outputs.report import metric_text
from mantle_stream.pytest_plugin._judge import Judgement, judge, node_name
from mantle_stream.pytest_plugin._settings import PLUGIN_NAME, Settings
from mantle_stream.pytest_plugin._text import failure_text

if TYPE_CHECKING:
    from _pytest._code.code import TerminalRepr
    from _pytest._io import TerminalWriter

__all__ = ["AssertionItem", "MantleSession", "RunNode", "ScenarioFile", "ScenarioNode"]

#: Marker names an assertion kind or a scenario's file stem must never take:
#: pytest and its common plugins give them a meaning.
RESERVED_MARKERS = frozenset(
    {
        "filterwarnings",
        "mantle",
        "parametrize",
        "skip",
        "skipif",
        "timeout",
        "usefixtures",
        "xfail",
        "tryfirst",
        "trylast",
        "asyncio",
        "anyio",
        "flaky",
        "django_db",
    }
)


def _marker_names(config: pytest.Config) -> set[str]:
    return {line.split(":")[0].split("(")[0].strip() for line in config.getini("markers")}


class MantleSession:
    """The plugin object of a configured run: claims scenario files, judges once."""

    def __init__(self, config: pytest.Config, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        try:
            self.files = {Path(p).resolve() for p in scenario_paths(settings.scenarios)}
        except ScenarioError as exc:
            raise pytest.UsageError(f"mantle_stream: {exc}") from None
        self._judgement: Judgement | None = None
        self._error: MantleStreamError | None = None
        self._scenarios: list[Scenario] | None = None
        self._summary: list[str] | None = None  # from the workers, under xdist
        self._recorded: dict[str, RecordedRun] | None = None
        # Markers named after kinds and file stems, unless something else owns the name.
        config.addinivalue_line(
            "markers",
            "mantle(scenario, file, run, conversation, kind): an assertion of a "
            "recorded conversation (mantle_stream)",
        )
        self.kind_markers = set(KINDS) - _marker_names(config) - RESERVED_MARKERS
        for kind in sorted(self.kind_markers):
            config.addinivalue_line(
                "markers",
                f"{kind}: the `{kind}` assertions of recorded conversations (mantle_stream)",
            )
        self._stems: set[str] = set()  # scenario file stems registered as markers

    # ------------------------------------------------------------------ judging

    def judgement(self) -> Judgement:
        """Every source judged, the first time it is asked for (then kept)."""
        if self._error is not None:
            raise self._error
        if self._judgement is None:
            s = self.settings
            try:
                here = self.config.invocation_params.dir
                shown = [_shown(e, here) if "://" not in e else redact(e) for e in s.events]
                self._judgement = judge(
                    s.scenarios,
                    s.events,
                    results=s.results,
                    stop_early=s.stop_early,
                    regex_timeout=s.regex_timeout,
                    tool_calls=s.tool_calls,
                    shown=shown[0] if len(shown) == 1 else f"{shown[0]} and {len(shown) - 1} more",
                )
            except MantleStreamError as exc:
                self._error = exc
                raise
        return self._judgement

    def evaluator(self) -> Evaluator:
        """A fresh evaluator over the configured scenarios (loaded once), with the
        results folder's assignments and the regex timeout."""
        s = self.settings
        if self._scenarios is None:
            self._scenarios = load_scenarios(s.scenarios)
            self._recorded = load_results(s.results) if s.results else {}
        assert self._recorded is not None
        return Evaluator(
            self._scenarios,
            assignments={cid: run.scenario for cid, run in self._recorded.items()},
            regex_timeout=DEFAULT_REGEX_TIMEOUT if s.regex_timeout is None else s.regex_timeout,
        )

    def scenario_marker(self, scenario: Scenario) -> str | None:
        """A marker named after the scenario's file stem (``-m card_replace_damaged``),
        unless the name is not one or something else means it (a kind, a marker)."""
        stem = scenario.stem
        if stem in self._stems:
            return stem
        if not stem.isidentifier() or stem in ("and", "or", "not"):
            return None
        if stem in _marker_names(self.config) | RESERVED_MARKERS | set(KINDS):
            return None
        self._stems.add(stem)
        self.config.addinivalue_line(
            "markers", f"{stem}: the assertions of scenario file {stem} (mantle_stream)"
        )
        return stem

    # ------------------------------------------------------------------ hooks

    def pytest_collect_file(self, file_path: Path, parent: pytest.Collector) -> ScenarioFile | None:
        if not self.settings.events or file_path.suffix not in (".yml", ".yaml"):
            return None
        if file_path.resolve() not in self.files:
            return None
        node: ScenarioFile = ScenarioFile.from_parent(parent, path=file_path)
        return node

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        # pytest reports an error in setup with a traceback (repr_failure is for
        # the call): an errored assertion is reported by its text, as a failure is.
        if (
            isinstance(item, AssertionItem)
            and call.excinfo is not None
            and isinstance(call.excinfo.value, AssertionErrored)
        ):
            report.longrepr = item.failure_repr(str(call.excinfo.value))
        return report

    @pytest.hookimpl(wrapper=True)
    def pytest_report_to_serializable(
        self, config: pytest.Config, report: pytest.CollectReport | pytest.TestReport
    ) -> Generator[None, dict[str, Any] | None, dict[str, Any] | None]:
        data = yield
        # pytest-xdist sends a worker's reports to the controller: a failure's
        # report goes as its text; where and why go beside it, so that JUnit and
        # the short summary say what they say without xdist.
        crash = getattr(report.longrepr, "reprcrash", None)
        if data is not None and isinstance(crash, _Crash):
            data["mantle_stream_crash"] = [crash.path, crash.lineno, crash.message]
        return data

    @pytest.hookimpl(wrapper=True)
    def pytest_report_from_serializable(
        self, config: pytest.Config, data: dict[str, Any]
    ) -> Generator[None, Any, Any]:
        report = yield
        crash = data.get("mantle_stream_crash")
        if crash is not None and isinstance(getattr(report, "longrepr", None), str):
            report.longrepr = FailureRepr(report.longrepr, _Crash(*crash))
        return report

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        s = self.settings
        if not s.events:
            return [
                "mantle_stream: no events configured (mantle_events, --mantle-events): "
                "no recorded conversation is collected"
            ]
        here = config.invocation_params.dir
        shown = [_shown(p, here) for p in s.scenarios]
        sources = [_shown(e, here) if "://" not in e else redact(e) for e in s.events]
        line = f"mantle_stream: scenarios {', '.join(shown)}; events {', '.join(sources)}"
        if s.results:
            line += f"; results {_shown(s.results, here)}"
        if s.stop_early:
            line += "; stop early"
        return [line]

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        output = getattr(session.config, "workeroutput", None)
        if output is not None and self._judgement is not None:
            output["mantle_stream"] = self._judgement.summary  # to the xdist controller

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        lines = getattr(node, "workeroutput", {}).get("mantle_stream")
        if lines is not None and self._summary is None:
            self._summary = list(lines)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        lines = self._judgement.summary if self._judgement is not None else self._summary
        if not lines:
            return
        terminalreporter.section("mantle_stream")
        for line in lines:
            terminalreporter.line(line)


def _shown(path: str, here: Path) -> str:
    try:
        return os.path.relpath(path, here)
    except ValueError:
        return path


def _session_of(node: pytest.Collector | pytest.Item) -> MantleSession:
    session = node.config.pluginmanager.get_plugin(PLUGIN_NAME)
    assert isinstance(session, MantleSession)  # the nodes exist only when it is registered
    return session


# ---------------------------------------------------------------------- nodes


class ScenarioFile(pytest.File):
    """A configured scenario file: its scenario, as judged from the sources."""

    def collect(self) -> Iterator[ScenarioNode]:
        mantle = _session_of(self)
        try:
            judgement = mantle.judgement()
        except ScenarioError as exc:
            raise self.CollectError(self._problems(exc)) from None
        except MantleStreamError as exc:
            raise self.CollectError(f"mantle_stream: {exc}") from None
        scenario = judgement.scenarios.get(self.path.resolve())
        if scenario is None:  # pragma: no cover - claimed files are the loaded ones
            return
        node: ScenarioNode = ScenarioNode.from_parent(
            self, name=node_name(scenario.name), scenario=scenario
        )
        marker = mantle.scenario_marker(scenario)
        if marker is not None:
            node.add_marker(marker)
        yield node

    def _problems(self, exc: ScenarioError) -> str:
        """This file's problems, with paths as the user named them; or which file
        kept it from being judged."""
        here = self.config.invocation_params.dir
        own = [d for d in exc.diagnostics if Path(d.path).resolve() == self.path.resolve()]
        if own:
            return "\n".join(replace(d, path=_shown(d.path, here)).render() for d in own)
        others = sorted({_shown(d.path, here) for d in exc.diagnostics})
        return f"mantle_stream: not judged: {', '.join(others)} could not be loaded"


class ScenarioNode(pytest.Collector):
    """One scenario: a run per conversation it judged."""

    def __init__(self, *, scenario: Scenario, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scenario = scenario

    def collect(self) -> Iterator[RunNode]:
        judgement = _session_of(self).judgement()
        for run in judgement.runs.get(self.scenario.name, []):
            node: RunNode = RunNode.from_parent(
                self, name=run.name, scenario=self.scenario, result=run.result
            )
            yield node

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, 0, self.name


class RunNode(pytest.Collector):
    """One conversation judged by the scenario: an item per assertion."""

    def __init__(self, *, scenario: Scenario, result: ConversationResult, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.scenario = scenario
        self.result = result

    def collect(self) -> Iterator[AssertionItem | ToolGateItem]:
        session = _session_of(self)
        kinds = session.kind_markers
        result = self.result
        for assertion in result.assertions:
            item: AssertionItem = AssertionItem.from_parent(
                self, name=f"#{assertion.index} {assertion.kind}", assertion=assertion
            )
            item.add_marker(self._marker(assertion.kind))
            if assertion.kind in kinds:
                item.add_marker(assertion.kind)
            if assertion.verdict == "skipped":
                item.add_marker(pytest.mark.skip(reason=assertion.reason))
            yield item
        tools = result.expected_tools
        if session.settings.tool_calls and tools is not None:
            for entry in tools.entries:
                if not entry.gate:
                    continue  # a metric only, in the terminal summary
                gate: ToolGateItem = ToolGateItem.from_parent(
                    self, name=f"expected_tools #{entry.index} {entry.kind}", entry=entry
                )
                gate.add_marker(self._marker(entry.kind))
                if entry.verdict == "skipped":
                    gate.add_marker(pytest.mark.skip(reason=entry.reason))
                yield gate

    def _marker(self, kind: str) -> pytest.MarkDecorator:
        """The ``mantle`` marker of an item of this run (``-m`` selects by its fields)."""
        return pytest.mark.mantle(
            scenario=self.scenario.name,
            file=self.scenario.stem,
            run=self.name,
            conversation=self.result.conversation_id,
            kind=kind,
        )

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, 0, self.name


class AssertionFailed(Exception):
    """An assertion of a recorded conversation failed (its text is the report)."""


class AssertionErrored(Exception):
    """An assertion of a recorded conversation could not be evaluated (raised in setup)."""


class _Crash:
    """Where and why, as pytest's short summary and JUnit's ``message`` read it."""

    def __init__(self, path: str, lineno: int, message: str) -> None:
        self.path = path
        self.lineno = lineno
        self.message = message

    def __str__(self) -> str:
        return f"{self.path}:{self.lineno}: {self.message}"


class FailureRepr:
    """A failed item's report: the text as it is, no traceback (a ``TerminalRepr``
    to pytest; under pytest-xdist it travels as its text)."""

    def __init__(self, text: str, crash: _Crash) -> None:
        self.text = text
        self.reprcrash = crash
        self.sections: list[tuple[str, str, str]] = []

    def toterminal(self, tw: TerminalWriter) -> None:
        for line in self.text.splitlines():
            tw.line(line)

    def __str__(self) -> str:
        return self.text


class _VerdictItem(pytest.Item):
    """An item whose verdict was decided when the sources were judged: reported as its
    text, at its line in the scenario file, never with a traceback."""

    parent: RunNode

    @property
    def line(self) -> int:
        raise NotImplementedError

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, self.line - 1, self.nodeid.split("::", 1)[-1]

    def failure_repr(self, text: str) -> TerminalRepr:
        """The report of a failed or errored verdict: ``text``, no traceback."""
        crash = _Crash(self.location[0], self.line, text.split("\n", 1)[0])
        failure: Any = FailureRepr(text, crash)
        return cast("TerminalRepr", failure)  # one by its methods

    def repr_failure(
        self,
        excinfo: pytest.ExceptionInfo[BaseException],
        style: Any = None,
    ) -> str | TerminalRepr:
        if isinstance(excinfo.value, AssertionFailed):
            return self.failure_repr(str(excinfo.value))
        return super().repr_failure(excinfo, style)


class AssertionItem(_VerdictItem):
    """One assertion of one conversation: its verdict, decided when the sources were judged."""

    def __init__(self, *, assertion: AssertionResult, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.assertion = assertion

    @property
    def line(self) -> int:
        """The assertion's 1-based line in the scenario file."""
        scenario, index = self.parent.scenario, self.assertion.index
        if self.assertion.line is not None:
            return self.assertion.line
        return scenario.lines[index] if index < len(scenario.lines) else 1

    def text(self) -> str:
        """What a failed or errored verdict says."""
        run = self.parent
        event = (
            _session_of(self)
            .judgement()
            .events.get((run.result.conversation_id, self.assertion.index))
        )
        return failure_text(
            self.assertion,
            conversation_id=run.result.conversation_id,
            run=run.name,
            path=run.scenario.path,
            shown_path=self.location[0],
            event=event,
        )

    def setup(self) -> None:
        # An error of the harness, not of the agent: an error, not a failure.
        if self.assertion.verdict in ("errored", "pending"):
            raise AssertionErrored(self.text())

    def runtest(self) -> None:
        if self.assertion.verdict == "failed":
            raise AssertionFailed(self.text())


class ToolGateItem(_VerdictItem):
    """A ``gate: true`` entry of ``goals.expected_tools`` in one conversation, with
    ``--mantle-tool-calls``: it fails when the entry failed (Rasa's gated tool calls)."""

    def __init__(self, *, entry: ToolEntryResult, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.entry = entry

    @property
    def line(self) -> int:
        return self.entry.line or 1

    def text(self) -> str:
        e, run = self.entry, self.parent
        turn = "no turn" if e.turn is None else f"turn {e.turn}"
        return (
            f"expected_tools #{e.index} {e.kind} (gate) {e.verdict} in {run.name} "
            f"(conversation {run.result.conversation_id}): {e.reason}\n"
            f"  {turn}, recall {metric_text(e.recall)}, precision {metric_text(e.precision)}\n"
            f"  {self.location[0]}:{self.line}"
        )

    def setup(self) -> None:
        if self.entry.verdict == "pending":
            raise AssertionErrored(self.text())

    def runtest(self) -> None:
        if self.entry.verdict == "failed":
            raise AssertionFailed(self.text())
