"""The JSON report of ``cli.md`` and the exit status, built from an evaluator.

An edge module: it reads the engine's snapshots and shapes them for people
and tools. Field names here are a published contract: add, never rename.
"""

from __future__ import annotations

import msgspec

from mantle_stream._engine import Evaluator, UnmatchedConversation
from mantle_stream._verdicts import ConversationResult

__all__ = ["EXIT_ERROR", "EXIT_FAILED", "EXIT_OK", "Report", "Summary", "Warnings",
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


class ReportConversation(msgspec.Struct, frozen=True):
    conversation_id: str
    scenario: str | None
    verdict: str
    events: int
    assertions: list[ReportAssertion]


class Summary(msgspec.Struct, frozen=True, omit_defaults=True):
    conversations: int
    passed: int
    failed: int
    assertions: int
    unmatched: int
    # False (and shown) only when the run stopped before its end (--fail-fast,
    # a bad event, Ctrl-C): then verdicts not yet decided are "pending".
    complete: bool = True


class Warnings(msgspec.Struct, frozen=True, omit_defaults=True):
    """What the feed did wrong but did not stop the run (only non-zero counts)."""

    bad_events: int = 0  # skipped with --on-bad-event=skip
    duplicates: int = 0  # delivered again (or too late) and skipped
    gaps: int = 0  # missing sequences given up on after the reorder window
    late_events: int = 0  # arrived after their conversation ended
    unknown_kinds: dict[str, int] = {}  # payload kinds this version does not know


class Report(msgspec.Struct, frozen=True, omit_defaults=True):
    conversations: list[ReportConversation]
    summary: Summary
    unmatched: list[UnmatchedConversation] = []
    warnings: Warnings | None = None

    def to_json(self) -> bytes:
        return msgspec.json.format(msgspec.json.encode(self), indent=2)


def _conversation(result: ConversationResult) -> ReportConversation:
    return ReportConversation(
        conversation_id=result.conversation_id,
        scenario=result.scenario,
        verdict=result.verdict,
        events=result.events,
        assertions=[ReportAssertion(a.index, a.kind, a.verdict, a.decided_at, a.reason)
                    for a in result.assertions],
    )


def build_report(evaluator: Evaluator) -> Report:
    """The report of every judged conversation (call after ``finish_all`` for a final one)."""
    conversations = [_conversation(r) for r in evaluator.results()]
    unmatched = evaluator.unmatched()
    stats = evaluator.statistics()
    warnings = Warnings(bad_events=stats.bad_events, duplicates=stats.duplicates,
                        gaps=stats.gaps, late_events=stats.late_events,
                        unknown_kinds=dict(evaluator.decoder.unknown))
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
