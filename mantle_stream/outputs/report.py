"""The JSON report (docs/outputs.md, "JSON report") and the exit status, built from an evaluator.

An edge module: it reads the engine's snapshots and shapes them for people
and tools. Field names here are a published contract: add, never rename.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from mantle_stream.core.engine.evaluator import (
    MAX_UNNAMED_BUFFER,
    MAX_UNNAMED_BYTES,
    Evaluator,
    UnmatchedConversation,
)
from mantle_stream.core.engine.partition import JudgedConversations
from mantle_stream.core.errors import CONTROL_ESCAPES
from mantle_stream.core.recorded import RecordedRun, RunDifference, compare
from mantle_stream.core.scenario.model import Check, Scenario
from mantle_stream.core.verdicts import (
    COUNTED,
    CandidateVerdict,
    ConversationResult,
    Occurrence,
    ToolCallScores,
    ToolEntryResult,
    Verdict,
    VerdictRecord,
)

__all__ = [
    "EXIT_ERROR",
    "EXIT_FAILED",
    "EXIT_OK",
    "AmbiguousRun",
    "CandidateVerdict",
    "ExpectedToolsSummary",
    "GateReport",
    "GateScenario",
    "GroupReport",
    "Recorded",
    "Report",
    "ScenarioAssertion",
    "ScenarioResult",
    "ScenarioToolEntry",
    "Summary",
    "Warnings",
    "build_report",
    "exit_status",
    "metric_text",
    "notes",
    "report_conversation",
    "scenario_results",
    "strict_problems",
    "tools_line",
    "why_it_differs",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_ERROR = 2


class Recorded(msgspec.Struct, frozen=True):
    """What ``evaluate_agent`` recorded for this run (with ``--results``)."""

    file: str
    run_index: int | None
    differences: list[RunDifference]  # assertions whose recorded verdict differs from ours


class ReportConversation(msgspec.Struct, frozen=True, omit_defaults=True):
    conversation_id: str
    scenario: str | None
    verdict: Verdict
    events: int
    assertions: list[VerdictRecord]
    recorded: Recorded | None = None
    # From the events' timestamps: when it started (epoch seconds) and how long it ran.
    started: float | None = None
    duration: float | None = None
    # The sequence of each turn's user message: where its turns begin.
    turn_starts: list[int] = []
    # Its scenario's goals.expected_tools, scored as Rasa scores them (absent when none).
    expected_tools: ToolCallScores | None = None
    # A stop was sent for it (ConversationResult.stopped): absent when not.
    stopped_early: bool = False


class Summary(msgspec.Struct, frozen=True, omit_defaults=True):
    conversations: int
    passed: int
    failed: int
    assertions: int
    unmatched: int
    # False (and shown) only when the run stopped before its end (--fail-fast,
    # a bad event, Ctrl-C): then verdicts not yet decided are "pending".
    complete: bool = True
    # Assertions left unjudged because mantle_stream stopped their conversation.
    skipped: int = 0
    # Assertions that could not be evaluated (a regular expression out of time).
    errored: int = 0
    # With --results: assertions whose verdict differs from evaluate_agent's record.
    recorded_differences: int = 0
    # Finished conversations counted above but not listed (a live run keeps the most
    # recent ones only: see --keep-finished); --jsonl and --junit have every verdict.
    omitted: int = 0


class Warnings(msgspec.Struct, frozen=True, omit_defaults=True):
    """What the feed (or the scenarios) did wrong but did not stop the run.

    Only non-zero counts are present. Every one is also a line of the human
    summaries (:func:`notes`).
    """

    bad_events: int = 0  # skipped with --on-bad-event=skip
    duplicates: int = 0  # delivered again (or too late) and skipped
    gaps: int = 0  # missing sequences given up on after the reorder window
    late_events: int = 0  # arrived after their conversation ended, or after a given-up gap
    unknown_kinds: dict[str, int] = {}  # payload kinds this version does not know
    legacy_rows: dict[str, int] = {}  # older flat CALM rows (slot, flow_started, ...) skipped
    scenarios_without_assertions: list[str] = []  # they pass every conversation
    refused_clients: dict[str, int] = {}  # the listener turned them away, by reason
    foreign_events: int = 0  # sent for a conversation another connection owns: refused
    # Conversations that named no scenario within MAX_UNNAMED_BUFFER events or bytes.
    unnamed_given_up: int = 0
    # Conversations asked for by id that the source could not give (a Rasa server
    # that kept failing, or answered another's tracker), with why: not judged.
    unread: dict[str, str] = {}
    # What the source said about how it was read (a lock waited for, a database
    # replaced, rows it could not read), one line each.
    source: list[str] = []
    # Where each gap, late, duplicate, foreign and unknown event counted above was: its
    # conversation and sequence (the first MAX_OCCURRENCES of each warning).
    occurrences: list[Occurrence] = []
    # Missing sequences passed at once, not waited for: the source delivers each
    # conversation in order, so they were never sent (Rasa numbers events it does
    # not publish, such as the `slot` events of a scenario's initial slots).
    gaps_passed: int = 0
    # Events at a sequence already applied with another event_id (Rasa's SQL tracker
    # store renumbers in some session-restart paths): applied after the first; each
    # occurrence names both ids (`event_id`, `applied_event_id`).
    sequence_conflicts: int = 0


#: The warnings that are an evaluator's counters: each Warnings field named as a Tally
#: counter (and so as its Statistics field).
WARNING_COUNTS: tuple[str, ...] = tuple(n for n in Warnings.__struct_fields__ if n in COUNTED)


class ScenarioAssertion(msgspec.Struct, frozen=True):
    """One assertion of a scenario across its runs.

    ``verdict``: ``passed`` in every run that judged it, ``failed`` in every
    one, ``flaky`` when it passed in some and failed in others (``failed`` of
    ``judged`` runs), ``errored`` when it could only error, ``not judged``
    when no run got to it (pending or skipped everywhere).
    """

    index: int
    kind: str
    verdict: str
    judged: int  # runs where it passed or failed
    failed: int
    errored: int = 0
    skipped: int = 0
    file: str | None = None
    line: int | None = None


class ScenarioToolEntry(msgspec.Struct, frozen=True):
    """One ``expected_tools`` entry of a scenario across its runs: ``verdict`` as for
    an assertion (``passed``, ``failed``, ``flaky``, ``not judged``), and the mean of
    its recall and precision over the runs that have them (None when none does)."""

    scenario: str
    index: int
    kind: str
    gate: bool
    verdict: str
    judged: int  # runs where it passed or failed
    failed: int
    recall: float | None
    precision: float | None
    file: str | None = None
    line: int | None = None


class ScenarioResult(msgspec.Struct, frozen=True):
    """A scenario's runs: the conversations judged against it (``evaluate_agent``'s
    ``run_count``), as Mantle teams read them.

    A run is ``passed``, ``failed`` (an assertion failed), ``errored`` (none
    failed, one could not be evaluated: an error of the harness, not of the
    agent) or ``pending`` (not finished); ``stopped_early`` counts the runs
    mantle_stream stopped (they are also failed or passed). ``pass_rate`` is
    passed ÷ (passed + failed); over those ``k`` runs ``pass_hat_k`` says all
    passed (pass^k) and ``pass_at_k`` that at least one did (pass@k); all
    three are null when no run was judged.
    """

    scenario: str
    file: str | None
    runs: int
    passed: int
    failed: int
    errored: int
    pending: int
    stopped_early: int
    k: int
    pass_rate: float | None
    pass_hat_k: bool | None
    pass_at_k: bool | None
    assertions: list[ScenarioAssertion]


class GroupReport(msgspec.Struct, frozen=True):
    """A Kafka consumer group member's part (``kafka://`` sources): which group, which
    member this was, the group's members when it ended, the partitions it judged."""

    group: str
    topic: str
    member: str
    members: list[str]
    partitions: list[int]
    lag: int
    published: int  # verdict records sent to the verdicts topic
    restored: int  # conversations resumed from the state topic
    not_resumed: int = 0  # state records that did not decode or fit: judged afresh
    join_seconds: float | None = None  # from the start to its first partitions
    judge_seconds: float = 0.0  # from its first partitions to the last events applied


class AmbiguousRun(msgspec.Struct, frozen=True):
    """A run that ended with several candidate scenarios (or none): not counted as
    passed or failed; each candidate's verdict is given."""

    conversation_id: str
    candidates: list[CandidateVerdict]


class GateScenario(msgspec.Struct, frozen=True):
    scenario: str
    runs: int
    stopped: int
    turns_not_played: int  # webhook messages the gate answered instead of the agent


class GateReport(msgspec.Struct, frozen=True):
    """The gate's part of the report (``mantle-stream gate``): the runs it saw, stopped
    and the agent turns they did not play, in all and per scenario."""

    upstream: str
    runs: int
    stopped: int
    turns_not_played: int
    scenarios: list[GateScenario]
    ambiguous: list[AmbiguousRun] = []
    problems: list[str] = []  # runs whose judging failed: forwarded unchanged


class ExpectedToolsSummary(msgspec.Struct, frozen=True):
    """The ``expected_tools`` entries of the listed conversations, as one record.

    ``gated``: the run was asked to judge tool calls (``--tool-calls``): a
    ``gate: true`` entry that failed failed its conversation. ``recall``,
    ``precision``, ``accuracy``: the means of the conversations' means (as
    Rasa's report averages them), None when no conversation has the metric.
    """

    gated: bool
    conversations: int  # listed conversations whose scenario has entries
    entries: int
    passed: int
    failed: int
    gates_failed: int  # gate entries that failed (they fail the run only when gated)
    recall: float | None
    precision: float | None
    accuracy: float | None
    # Each entry of each scenario that has some, across the scenario's runs.
    scenarios: list[ScenarioToolEntry] = []


class Report(msgspec.Struct, frozen=True, omit_defaults=True):
    conversations: list[ReportConversation]
    summary: Summary
    unmatched: list[UnmatchedConversation] = []
    warnings: Warnings | None = None
    # Per scenario, its runs (the listed conversations judged against it).
    scenarios: list[ScenarioResult] = []
    kafka: GroupReport | None = None
    gate: GateReport | None = None
    # Rasa's tool-call scores of goals.expected_tools (absent when no scenario has any).
    expected_tools: ExpectedToolsSummary | None = None

    def to_json(self) -> bytes:
        return msgspec.json.format(msgspec.json.encode(self), indent=2)


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


def why_it_differs(difference: RunDifference) -> str:
    """What can explain a verdict that differs from the one evaluate_agent recorded."""
    if difference.divergences:
        return "may come from a documented divergence (docs/semantics.md): " + "; ".join(
            difference.divergences
        )
    return "not one of the documented divergences: look at the conversation's events"


def _assertion_across(
    index: int, kind: str, rows: list[VerdictRecord], file: str | None, line: int | None
) -> ScenarioAssertion:
    verdicts = [r.verdict for r in rows]
    passed, failed = verdicts.count("passed"), verdicts.count("failed")
    errored, skipped = verdicts.count("errored"), verdicts.count("skipped")
    verdict = (
        "flaky"
        if passed and failed
        else "failed"
        if failed
        else "passed"
        if passed
        else "errored"
        if errored
        else "not judged"
    )
    return ScenarioAssertion(
        index, kind, verdict, passed + failed, failed, errored, skipped, file, line
    )


def scenario_results(
    scenarios: Sequence[Scenario], conversations: Sequence[ReportConversation]
) -> list[ScenarioResult]:
    """Each scenario's runs among ``conversations``, in the order scenarios were loaded."""
    runs: dict[str, list[ReportConversation]] = {s.name: [] for s in scenarios}
    for conv in conversations:
        if conv.scenario in runs:
            runs[conv.scenario].append(conv)
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
                verdict="flaky"
                if passed and failed
                else "failed"
                if failed
                else "passed"
                if passed
                else "not judged",
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
    runs: dict[str, list[ReportConversation]] = {s.name: [] for s in scenarios}
    for conv in conversations:
        if conv.scenario in runs:
            runs[conv.scenario].append(conv)
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


def build_report(
    evaluator: Evaluator | JudgedConversations,
    recorded: Mapping[str, RecordedRun] | None = None,
    refused: Mapping[str, int] | None = None,
    *,
    scenarios: Sequence[Scenario] | None = None,
    unread: Mapping[str, str] | None = None,
    source: Sequence[str] = (),
    tool_calls: bool = False,
) -> Report:
    """The report of every judged conversation (call after ``finish_all`` for a final one).

    ``recorded`` (from :func:`~mantle_stream.core.recorded.load_results`) adds, per
    conversation, where our verdicts differ from those ``evaluate_agent``
    recorded for the run. ``refused``: the clients a listener turned away, by
    reason (``Feed.rejected``); ``unread``: the conversations the source could
    not read, with why (``Feed.unread``); ``source``: what the source said about how
    it was read (``Feed.notices``). From :class:`JudgedConversations` (the merged outcome of
    ``check --workers``) instead of an evaluator, give the ``scenarios`` too.
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
    recorded = recorded or {}
    checks = {s.name: s.assertions for s in scenarios}
    conversations = [
        report_conversation(
            r,
            recorded.get(r.conversation_id),
            checks.get(r.scenario or "", ()),
            tool_calls=tool_calls,
        )
        for r in judged.results
    ]
    unmatched = judged.unmatched
    stats = judged.statistics
    gone = judged.omitted
    warnings = Warnings(
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
    return Report(
        conversations=conversations,
        summary=Summary(
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
        ),
        unmatched=unmatched,
        warnings=warnings if warnings != Warnings() else None,
        scenarios=scenario_results(scenarios, conversations),
        expected_tools=_tools_summary(scenarios, conversations, tool_calls),
    )


def tools_line(tools: ExpectedToolsSummary, flag: str = "--tool-calls") -> str:
    """One line on a run's expected_tools: entries passed, the means, failed gates
    (``flag``: the option that makes them fail the run)."""
    line = (
        f"expected tools: {tools.passed} of {tools.entries} entries passed, "
        f"recall {metric_text(tools.recall)}, precision {metric_text(tools.precision)}, "
        f"accuracy {metric_text(tools.accuracy)}"
    )
    if tools.gates_failed:
        line += (
            f"; {tools.gates_failed} gate entr{'y' if tools.gates_failed == 1 else 'ies'} failed"
        )
        if not tools.gated:
            line += f" (metrics only: {flag} makes them fail the run)"
    return line


def metric_text(value: float | None) -> str:
    """A recall, precision or accuracy as text: two decimals, `-` when there is none."""
    return "-" if value is None else f"{value:.2f}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _named(counts: dict[str, int]) -> str:
    return ", ".join(
        f"`{name}` {n}" for name, n in sorted(counts.items(), key=lambda item: -item[1])
    )


#: Unmatched conversations listed one by one in a summary; the rest are counted.
MAX_LISTED = 20
#: Conversations named on a warning's line in a summary (the JSON report has them all).
MAX_NAMED = 5


def _where(w: Warnings, warning: str) -> str:
    """Where a warning's events were, for its line: each conversation in backticks and
    its sequences (a gap as ``36-37``), at most :data:`MAX_NAMED` conversations."""
    by_conversation: dict[str, list[str]] = {}
    ranges: set[str] = set()  # conversations with a gap of several sequences
    for o in w.occurrences:
        if o.warning != warning:
            continue
        if o.sequence is None:
            at = "(no sequence)"
        else:
            at = str(o.sequence) if o.last is None else f"{o.sequence}-{o.last}"
        if o.last is not None:
            ranges.add(o.conversation_id)
        if o.event_id is not None:
            at += f" (`{o.event_id}` after `{o.applied_event_id}`)"
        by_conversation.setdefault(o.conversation_id, []).append(at)
    if not by_conversation:
        return ""  # (a report built before they were listed, or past MAX_OCCURRENCES)
    named = []
    for cid, sequences in list(by_conversation.items())[:MAX_NAMED]:
        noun = "sequence" if len(sequences) == 1 and cid not in ranges else "sequences"
        named.append(f"`{cid}` {noun} {', '.join(sequences)}")
    more = len(by_conversation) - MAX_NAMED
    if more > 0:
        named.append(f"{_count(more, 'more conversation')} (--format json lists them)")
    return "; ".join(named)


def one_scenario_line(report: Report) -> str | None:
    """With one scenario loaded and several conversations judged, the line that says so:
    a feed of several scenarios' runs judged against one of them reads as mostly failed,
    and this says why (a conversation naming another, in a ``--results`` file or its
    metadata, is not judged: :meth:`UnmatchedConversation.why`)."""
    if len(report.scenarios) != 1 or report.summary.conversations < 2 or report.summary.unmatched:
        return None
    return (
        f"every conversation naming no other scenario was judged against "
        f"`{report.scenarios[0].scenario}`, the one scenario given"
    )


def notes(report: Report) -> list[str]:
    """What a person should know beyond the verdicts, one line each (control characters
    escaped): an incomplete run, every warning, every conversation not judged."""
    lines = []
    pending = sum(a.verdict == "pending" for c in report.conversations for a in c.assertions)
    if report.summary.omitted:
        lines.append(
            f"{_count(report.summary.omitted, 'finished conversation')} counted but "
            "not listed (only the most recent are kept; --jsonl and --junit have every "
            "verdict)"
        )
    if report.summary.errored:
        lines.append(
            f"{_count(report.summary.errored, 'assertion')} could not be evaluated "
            "(errored; see the digest)"
        )
    if not report.summary.complete:
        lines.append(
            f"incomplete: {_count(pending, 'assertion')} still pending (the run "
            "stopped before its end)"
        )
    w = report.warnings or Warnings()
    for name in w.scenarios_without_assertions:
        lines.append(
            f"scenario `{name}` has no assertions: every conversation judged against it passes"
        )
    for count, warning, noun, rest in (
        (w.bad_events, "bad_events", "bad event", "skipped"),
        (w.duplicates, "duplicates", "duplicate event", "skipped"),
        (
            w.late_events,
            "late_events",
            "late event",
            "ignored (after its conversation ended, or after its gap was given up on)",
        ),
        (
            w.gaps,
            "gaps",
            "gap",
            "in `sequence` given up on (normal when the agent's sequences skip numbers)",
        ),
        (
            w.gaps_passed,
            "gaps_passed",
            "gap",
            "in `sequence` passed at once (the source delivers each conversation in order: "
            "those events were never sent)",
        ),
        (
            w.sequence_conflicts,
            "sequence_conflicts",
            "sequence conflict",
            "(another event at a sequence already applied: applied after the first)",
        ),
        (
            w.foreign_events,
            "foreign_events",
            "event",
            "refused: its conversation belongs to another connection",
        ),
    ):
        if count:
            where = _where(w, warning)
            lines.append(f"{_count(count, noun)} {rest}" + (f": {where}" if where else ""))
    if w.unnamed_given_up:
        lines.append(
            f"{_count(w.unnamed_given_up, 'conversation')} named no scenario within "
            f"the first {MAX_UNNAMED_BUFFER:,} events or {MAX_UNNAMED_BYTES >> 20} MiB: "
            "not waited for any longer, those events not kept"
        )
    if w.unknown_kinds:
        n = sum(w.unknown_kinds.values())
        where = _where(w, "unknown_kinds")
        lines.append(
            f"{_count(n, 'event')} of kinds this version does not know skipped "
            f"({_named(w.unknown_kinds)})" + (f": {where}" if where else "")
        )
    if w.refused_clients:
        n = sum(w.refused_clients.values())
        why = ", ".join(f"{reason} {count}" for reason, count in w.refused_clients.items())
        lines.append(f"{_count(n, 'client')} refused by the listener ({why})")
    if w.legacy_rows:
        n = sum(w.legacy_rows.values())
        lines.append(f"{_count(n, 'older CALM row')} skipped ({_named(w.legacy_rows)})")
    lines += w.source
    for cid, why in list(w.unread.items())[:MAX_LISTED]:
        lines.append(f"conversation `{cid}` could not be read: {why}")
    if len(w.unread) > MAX_LISTED:
        lines.append(f"{len(w.unread) - MAX_LISTED} more conversations could not be read")
    for u in report.unmatched[:MAX_LISTED]:
        lines.append(f"not judged: `{u.conversation_id}` ({_count(u.events, 'event')}): {u.why()}")
    if len(report.unmatched) > MAX_LISTED:
        lines.append(f"not judged: {len(report.unmatched) - MAX_LISTED} more conversations")
    return [line.translate(CONTROL_ESCAPES) for line in lines]


def strict_problems(report: Report) -> list[str]:
    """What ``--strict`` fails a run for: an event or a conversation that came and was
    not judged (a conversation matching no scenario, a bad, late or foreign event, an
    event of an unknown kind).

    Not a gap given up on: Mantle's sequences may skip numbers (the example feed
    has one, ``examples/eval/expected.md``), and every event that came was applied
    in order; an event that fills it after all is late, and counted as such. Nor a
    duplicate (applied once) or an older CALM row (nothing a check reads).
    """
    w = report.warnings or Warnings()
    problems = []
    if report.unmatched:
        problems.append(_count(len(report.unmatched), "conversation") + " not judged")
    for count, warning, noun in (
        (w.bad_events, "bad_events", "bad event"),
        (w.late_events, "late_events", "late event"),
        (w.foreign_events, "foreign_events", "foreign event"),
    ):
        if count:
            where = _where(w, warning)
            problems.append(_count(count, noun) + (f" ({where})" if where else ""))
    if w.unknown_kinds:
        where = _where(w, "unknown_kinds")
        problems.append(
            _count(sum(w.unknown_kinds.values()), "event")
            + " of unknown kinds"
            + (f" ({where})" if where else "")
        )
    if w.unread:
        problems.append(_count(len(w.unread), "conversation") + " not read")
    return problems


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
