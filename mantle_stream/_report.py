"""The JSON report (README, "JSON report") and the exit status, built from an evaluator.

An edge module: it reads the engine's snapshots and shapes them for people
and tools. Field names here are a published contract: add, never rename.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from mantle_stream._engine import Evaluator, UnmatchedConversation
from mantle_stream._results import RecordedRun, RunDifference, compare
from mantle_stream._verdicts import ConversationResult

__all__ = ["EXIT_ERROR", "EXIT_FAILED", "EXIT_OK", "Recorded", "Report", "Summary", "Warnings",
           "build_report", "exit_status"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_ERROR = 2


class ReportAssertion(msgspec.Struct, frozen=True):
    index: int
    kind: str
    verdict: str
    decided_at: int | None
    reason: str


class Recorded(msgspec.Struct, frozen=True):
    """What ``evaluate_agent`` recorded for this run (with ``--results``)."""

    file: str
    run_index: int | None
    differences: list[RunDifference]  # assertions whose recorded verdict differs from ours


class ReportConversation(msgspec.Struct, frozen=True, omit_defaults=True):
    conversation_id: str
    scenario: str | None
    verdict: str
    events: int
    assertions: list[ReportAssertion]
    recorded: Recorded | None = None


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
    # With --results: assertions whose verdict differs from evaluate_agent's record.
    recorded_differences: int = 0


class Warnings(msgspec.Struct, frozen=True, omit_defaults=True):
    """What the feed did wrong but did not stop the run (only non-zero counts)."""

    bad_events: int = 0  # skipped with --on-bad-event=skip
    duplicates: int = 0  # delivered again (or too late) and skipped
    gaps: int = 0  # missing sequences given up on after the reorder window
    late_events: int = 0  # arrived after their conversation ended, or after a given-up gap
    unknown_kinds: dict[str, int] = {}  # payload kinds this version does not know
    legacy_rows: dict[str, int] = {}  # older flat CALM rows (slot, flow_started, ...) skipped


class Report(msgspec.Struct, frozen=True, omit_defaults=True):
    conversations: list[ReportConversation]
    summary: Summary
    unmatched: list[UnmatchedConversation] = []
    warnings: Warnings | None = None

    def to_json(self) -> bytes:
        return msgspec.json.format(msgspec.json.encode(self), indent=2)


def _conversation(result: ConversationResult, run: RecordedRun | None) -> ReportConversation:
    return ReportConversation(
        conversation_id=result.conversation_id,
        scenario=result.scenario,
        verdict=result.verdict,
        events=result.events,
        assertions=[ReportAssertion(a.index, a.kind, a.verdict, a.decided_at, a.reason)
                    for a in result.assertions],
        recorded=None if run is None else Recorded(run.path, run.run_index,
                                                   compare(result, run)),
    )


def build_report(evaluator: Evaluator,
                 recorded: Mapping[str, RecordedRun] | None = None) -> Report:
    """The report of every judged conversation (call after ``finish_all`` for a final one).

    ``recorded`` (from :func:`~mantle_stream._results.load_results`) adds, per
    conversation, where our verdicts differ from those ``evaluate_agent``
    recorded for the run.
    """
    recorded = recorded or {}
    conversations = [_conversation(r, recorded.get(r.conversation_id))
                     for r in evaluator.results()]
    unmatched = evaluator.unmatched()
    stats = evaluator.statistics()
    warnings = Warnings(bad_events=stats.bad_events, duplicates=stats.duplicates,
                        gaps=stats.gaps, late_events=stats.late_events,
                        unknown_kinds=dict(evaluator.decoder.unknown),
                        legacy_rows=dict(evaluator.decoder.legacy))
    return Report(
        conversations=conversations,
        summary=Summary(
            conversations=len(conversations),
            passed=sum(1 for c in conversations if c.verdict == "passed"),
            failed=sum(1 for c in conversations if c.verdict == "failed"),
            assertions=sum(len(c.assertions) for c in conversations),
            unmatched=len(unmatched),
            complete=not any(a.verdict == "pending" for c in conversations
                             for a in c.assertions),
            skipped=sum(a.verdict == "skipped" for c in conversations for a in c.assertions),
            recorded_differences=sum(len(c.recorded.differences) for c in conversations
                                     if c.recorded is not None),
        ),
        unmatched=unmatched,
        warnings=warnings if warnings != Warnings() else None,
    )


def exit_status(report: Report) -> int:
    """0 all passed, 1 something failed, 2 nothing could be judged."""
    if report.summary.failed:
        return EXIT_FAILED
    if not report.conversations:
        return EXIT_ERROR
    return EXIT_OK
