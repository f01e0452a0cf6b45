"""The JSON report (docs/outputs.md, "JSON report") and the exit status, built from an evaluator.

An edge module: it reads the engine's snapshots (or the merged outcome of
``check --workers``) and shapes them into the records of :mod:`.records`:
each conversation, the summary, the warnings, each scenario's runs across
them, the expected_tools scores. :mod:`.notes` puts a report in words. The
records and the lines are re-exported here, where callers have always
imported them from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from mantle_stream.core.engine.evaluator import Evaluator, UnmatchedConversation
from mantle_stream.core.engine.partition import JudgedConversations
from mantle_stream.core.recorded import RecordedRun, compare
from mantle_stream.core.scenario.model import Check, Scenario
from mantle_stream.core.verdicts import (
    CandidateVerdict,
    ConversationResult,
    ToolEntryResult,
    Verdict,
    VerdictRecord,
)
from mantle_stream.outputs.notes import (
    metric_text,
    notes,
    one_scenario_line,
    strict_problems,
    tools_line,
    why_it_differs,
)
from mantle_stream.outputs.records import (
    WARNING_COUNTS,
    AmbiguousRun,
    ExpectedToolsSummary,
    GateReport,
    GateScenario,
    GroupReport,
    Recorded,
    Report,
    ReportConversation,
    ScenarioAssertion,
    ScenarioResult,
    ScenarioToolEntry,
    Summary,
    Warnings,
)

__all__ = [
    "EXIT_ERROR",
    "EXIT_FAILED",
    "EXIT_OK",
    "WARNING_COUNTS",
    "AmbiguousRun",
    "CandidateVerdict",
    "ExpectedToolsSummary",
    "GateReport",
    "GateScenario",
    "GroupReport",
    "Recorded",
    "Report",
    "ReportConversation",
    "ScenarioAssertion",
    "ScenarioResult",
    "ScenarioToolEntry",
    "Summary",
    "Warnings",
    "build_report",
    "exit_status",
    "gated_verdict",
    "metric_text",
    "notes",
    "one_scenario_line",
    "report_conversation",
    "report_conversations",
    "scenario_results",
    "strict_problems",
    "tools_line",
    "why_it_differs",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_ERROR = 2


def gated_verdict(result: ConversationResult) -> Verdict:
    """A conversation's verdict when tool calls are judged (``--tool-calls``): failed
    when a ``gate: true`` entry of its ``expected_tools`` failed."""
    tools = result.expected_tools
    if tools is not None and tools.gates_failed and result.verdict in ("passed", "errored"):
        return "failed"
    return result.verdict


def report_conversation(
    result: ConversationResult,
    run: RecordedRun | None = None,
    checks: Sequence[Check] = (),
    *,
    tool_calls: bool = False,
) -> ReportConversation:
    """One judged conversation as the report lists it (``checks``: its scenario's
    assertions, to name the divergences a recorded verdict that differs can come from;
    ``tool_calls``: its failed gate entries fail it)."""
    return ReportConversation(
        conversation_id=result.conversation_id,
        scenario=result.scenario,
        verdict=gated_verdict(result) if tool_calls else result.verdict,
        events=result.events,
        assertions=[VerdictRecord.of(a) for a in result.assertions],
        recorded=None
        if run is None
        else Recorded(run.path, run.run_index, compare(result, run, checks)),
        started=result.started,
        duration=result.duration,
        turn_starts=list(result.turn_starts),
        expected_tools=result.expected_tools,
        stopped_early=result.stopped,
    )


def _assertion_across(
    index: int, kind: str, rows: list[VerdictRecord], file: str | None, line: int | None
) -> ScenarioAssertion:
    verdicts = [r.verdict for r in rows]
    passed, failed = verdicts.count("passed"), verdicts.count("failed")
    errored, skipped = verdicts.count("errored"), verdicts.count("skipped")
    verdict = _across_runs(passed, failed, errored)
    return ScenarioAssertion(
        index, kind, verdict, passed + failed, failed, errored, skipped, file, line
    )


def _across_runs(passed: int, failed: int, errored: int = 0) -> str:
    """An assertion's (or expected_tools entry's) verdict across a scenario's runs, from
    how many runs it passed, failed and errored in (see :class:`ScenarioAssertion`)."""
    if passed and failed:
        return "flaky"
    if failed:
        return "failed"
    if passed:
        return "passed"
    return "errored" if errored else "not judged"


def _runs_by_scenario(
    scenarios: Sequence[Scenario], conversations: Sequence[ReportConversation]
) -> dict[str, list[ReportConversation]]:
    """Each scenario's runs among ``conversations`` (every scenario has a list)."""
    runs: dict[str, list[ReportConversation]] = {s.name: [] for s in scenarios}
    for conv in conversations:
        if conv.scenario in runs:
            runs[conv.scenario].append(conv)
    return runs


def scenario_results(
    scenarios: Sequence[Scenario], conversations: Sequence[ReportConversation]
) -> list[ScenarioResult]:
    """Each scenario's runs among ``conversations``, in the order scenarios were loaded."""
    runs = _runs_by_scenario(scenarios, conversations)
    out = []
    for scen in scenarios:
        convs = runs[scen.name]
        verdicts = [c.verdict for c in convs]
        passed, failed = verdicts.count("passed"), verdicts.count("failed")
        k = passed + failed
        lines = list(scen.lines) + [None] * (len(scen.assertions) - len(scen.lines))
        file = scen.path if scen.lines and not scen.path.startswith("<") else None
        out.append(
            ScenarioResult(
                scenario=scen.name,
                file=file,
                runs=len(convs),
                passed=passed,
                failed=failed,
                errored=verdicts.count("errored"),
                pending=verdicts.count("pending"),
                stopped_early=sum(c.stopped_early for c in convs),
                k=k,
                pass_rate=round(passed / k, 4) if k else None,
                pass_hat_k=failed == 0 if k else None,
                pass_at_k=passed > 0 if k else None,
                assertions=[
                    _assertion_across(
                        i,
                        a.kind,
                        [c.assertions[i] for c in convs if i < len(c.assertions)],
                        file,
                        lines[i],
                    )
                    for i, a in enumerate(scen.assertions)
                ],
            )
        )
    return out


def _tool_entries_across(
    scenario: Scenario, conversations: Sequence[ReportConversation]
) -> list[ScenarioToolEntry]:
    """Each expected_tools entry of ``scenario`` across its runs."""
    rows: list[list[ToolEntryResult]] = [[] for _ in scenario.expected_tools]
    for conv in conversations:
        for e in conv.expected_tools.entries if conv.expected_tools else ():
            if e.index < len(rows):
                rows[e.index].append(e)
    lines = list(scenario.expected_tools_lines) + [None] * len(rows)
    file = (
        scenario.path
        if scenario.expected_tools_lines and not scenario.path.startswith("<")
        else None
    )
    out = []
    for index, (entry, results) in enumerate(zip(scenario.expected_tools, rows, strict=True)):
        verdicts = [r.verdict for r in results]
        passed, failed = verdicts.count("passed"), verdicts.count("failed")
        out.append(
            ScenarioToolEntry(
                scenario=scenario.name,
                index=index,
                kind=entry.kind,
                gate=entry.gate,
                verdict=_across_runs(passed, failed),
                judged=passed + failed,
                failed=failed,
                recall=_mean([r.recall for r in results]),
                precision=_mean([r.precision for r in results]),
                file=file,
                line=lines[index],
            )
        )
    return out


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return round(sum(present) / len(present), 4) if present else None


def _tools_summary(
    scenarios: Sequence[Scenario], conversations: Sequence[ReportConversation], gated: bool
) -> ExpectedToolsSummary | None:
    if not any(s.expected_tools for s in scenarios):
        return None
    scored = [c.expected_tools for c in conversations if c.expected_tools is not None]
    runs = _runs_by_scenario(scenarios, conversations)
    entries = [e for s in scored for e in s.entries]
    return ExpectedToolsSummary(
        gated=gated,
        conversations=len(scored),
        entries=len(entries),
        passed=sum(e.verdict == "passed" for e in entries),
        failed=sum(e.verdict == "failed" for e in entries),
        gates_failed=sum(s.gates_failed for s in scored),
        recall=_mean([s.recall for s in scored]),
        precision=_mean([s.precision for s in scored]),
        accuracy=_mean([s.accuracy for s in scored]),
        scenarios=[
            row for scen in scenarios for row in _tool_entries_across(scen, runs[scen.name])
        ],
    )


def report_conversations(
    results: Sequence[ConversationResult],
    recorded: Mapping[str, RecordedRun] | None,
    scenarios: Sequence[Scenario],
    *,
    tool_calls: bool = False,
) -> list[ReportConversation]:
    """Judged conversations as the report lists them (:func:`report_conversation` of
    each, with its recorded run and its scenario's assertions)."""
    recorded = recorded or {}
    checks = {s.name: s.assertions for s in scenarios}
    return [
        report_conversation(
            r,
            recorded.get(r.conversation_id),
            checks.get(r.scenario or "", ()),
            tool_calls=tool_calls,
        )
        for r in results
    ]


def build_report(
    evaluator: Evaluator | JudgedConversations,
    recorded: Mapping[str, RecordedRun] | None = None,
    refused: Mapping[str, int] | None = None,
    *,
    scenarios: Sequence[Scenario] | None = None,
    unread: Mapping[str, str] | None = None,
    source: Sequence[str] = (),
    tool_calls: bool = False,
    conversations: list[ReportConversation] | None = None,
) -> Report:
    """The report of every judged conversation (call after ``finish_all`` for a final one).

    ``recorded`` (from :func:`~mantle_stream.core.recorded.load_results`) adds, per
    conversation, where our verdicts differ from those ``evaluate_agent``
    recorded for the run. ``refused``: the clients a listener turned away, by
    reason (``Feed.rejected``); ``unread``: the conversations the source could
    not read, with why (``Feed.unread``); ``source``: what the source said about how
    it was read (``Feed.notices``). From :class:`JudgedConversations` (the merged outcome of
    ``check --workers``) instead of an evaluator, give the ``scenarios`` too, and
    the ``conversations`` when they are made already (:func:`report_conversations`,
    by the workers: then ``judged.results`` is not read).
    ``tool_calls`` (``--tool-calls``): a failed ``gate: true`` entry of
    ``expected_tools`` fails its conversation, as in Rasa with tool-call
    evaluation on; otherwise the entries are metrics only.
    """
    if isinstance(evaluator, Evaluator):
        judged, scenarios = evaluator.judged(), evaluator.scenarios
    elif scenarios is None:
        raise TypeError("build_report(judged) needs the scenarios it was judged against")
    else:
        judged = evaluator
    if conversations is None:
        conversations = report_conversations(
            judged.results, recorded, scenarios, tool_calls=tool_calls
        )
    gone = judged.omitted
    warnings = _warnings(judged, scenarios, refused, unread, source)
    return Report(
        conversations=conversations,
        summary=_summary(conversations, judged.unmatched, gone),
        unmatched=judged.unmatched,
        warnings=warnings if warnings != Warnings() else None,
        scenarios=scenario_results(scenarios, conversations),
        expected_tools=_tools_summary(scenarios, conversations, tool_calls),
    )


def _summary(
    conversations: Sequence[ReportConversation],
    unmatched: Sequence[UnmatchedConversation],
    gone: Mapping[str, int],
) -> Summary:
    """The totals of the listed conversations and of those let go of (``gone``)."""
    return Summary(
        conversations=len(conversations) + gone["conversations"],
        passed=sum(1 for c in conversations if c.verdict == "passed") + gone["passed"],
        failed=sum(1 for c in conversations if c.verdict == "failed") + gone["failed"],
        assertions=sum(len(c.assertions) for c in conversations) + gone["assertions"],
        unmatched=len(unmatched) + gone["unmatched"],
        complete=not any(a.verdict == "pending" for c in conversations for a in c.assertions),
        skipped=sum(a.verdict == "skipped" for c in conversations for a in c.assertions)
        + gone["skipped"],
        errored=sum(a.verdict == "errored" for c in conversations for a in c.assertions)
        + gone["errored"],
        omitted=gone["conversations"] + gone["unmatched"],
        recorded_differences=sum(
            len(c.recorded.differences) for c in conversations if c.recorded is not None
        ),
    )


def _warnings(
    judged: JudgedConversations,
    scenarios: Sequence[Scenario],
    refused: Mapping[str, int] | None,
    unread: Mapping[str, str] | None,
    source: Sequence[str],
) -> Warnings:
    """What the feed and the scenarios did wrong, in an order that does not depend on
    how many workers judged it."""
    stats = judged.statistics
    return Warnings(
        # The counted warnings, by name (see WARNING_COUNTS).
        **{name: getattr(stats, name) for name in WARNING_COUNTS},
        # In a defined order: what several workers counted reads the same.
        unknown_kinds=dict(sorted(judged.unknown_kinds.items())),
        legacy_rows=dict(sorted(judged.legacy_rows.items())),
        scenarios_without_assertions=[s.name for s in scenarios if not s.assertions],
        refused_clients=dict(refused or {}),
        unread=dict(unread or {}),
        source=list(source),
        # In a defined order, as the counts: what several workers listed reads the same.
        occurrences=sorted(
            judged.occurrences,
            key=lambda o: (o.warning, o.conversation_id, -1 if o.sequence is None else o.sequence),
        ),
    )


def exit_status(report: Report) -> int:
    """0 all passed, 1 something failed, 2 something could not be judged (an
    assertion errored, a conversation could not be read, none was judged)."""
    if report.summary.failed:
        return EXIT_FAILED
    if report.summary.errored or (report.warnings is not None and report.warnings.unread):
        return EXIT_ERROR
    if not report.conversations:
        return EXIT_ERROR
    return EXIT_OK
