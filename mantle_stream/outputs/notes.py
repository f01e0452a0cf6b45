"""The report in words: the lines a person reads beyond the verdicts.

An edge module between :mod:`.records` and the outputs that print text (the
table, the HTML page, the pytest plugin's summary, ``--strict``'s reasons):
each warning, an incomplete run, what was not judged, the expected_tools
line and what can explain a verdict that differs from a recorded one. Every
line is written here once, so the outputs say it alike.
"""

from __future__ import annotations

from mantle_stream.core.engine.evaluator import MAX_UNNAMED_BUFFER, MAX_UNNAMED_BYTES
from mantle_stream.core.errors import CONTROL_ESCAPES
from mantle_stream.core.recorded import RunDifference
from mantle_stream.outputs.records import ExpectedToolsSummary, Report, Warnings

__all__ = [
    "MAX_LISTED",
    "MAX_NAMED",
    "counted",
    "gates_failed",
    "metric_text",
    "notes",
    "one_scenario_line",
    "strict_problems",
    "tools_line",
    "why_it_differs",
]


def why_it_differs(difference: RunDifference) -> str:
    """What can explain a verdict that differs from the one evaluate_agent recorded."""
    if difference.divergences:
        return "may come from a documented divergence (docs/semantics.md): " + "; ".join(
            difference.divergences
        )
    return "not one of the documented divergences: look at the conversation's events"


def tools_line(tools: ExpectedToolsSummary, flag: str = "--tool-calls") -> str:
    """One line on a run's expected_tools: entries passed, the means, failed gates
    (``flag``: the option that makes them fail the run)."""
    line = (
        f"expected tools: {tools.passed} of {tools.entries} entries passed, "
        f"recall {metric_text(tools.recall)}, precision {metric_text(tools.precision)}, "
        f"accuracy {metric_text(tools.accuracy)}"
    )
    if tools.gates_failed:
        line += "; " + gates_failed(tools, flag)
    return line


def gates_failed(tools: ExpectedToolsSummary, flag: str = "--tool-calls") -> str:
    """How many gate entries failed, and, when tool calls were not judged, that they
    fail nothing (``flag``: the option that makes them fail the run)."""
    n = tools.gates_failed
    said = f"{n} gate entr{'y' if n == 1 else 'ies'} failed"
    return said if tools.gated else said + f" (metrics only: {flag} makes them fail the run)"


def metric_text(value: float | None) -> str:
    """A recall, precision or accuracy as text: two decimals, `-` when there is none."""
    return "-" if value is None else f"{value:.2f}"


def counted(n: int, noun: str) -> str:
    """``1 event``, ``2 events``: a count and its noun (plural by adding ``s``)."""
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
        named.append(f"{counted(more, 'more conversation')} (--format json lists them)")
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


#: The counted warnings that read "N <noun>s <what happened>", each with where its
#: events were: (the Warnings field, its noun, the rest of the line), in this order.
COUNTED_LINES: tuple[tuple[str, str, str], ...] = (
    ("bad_events", "bad event", "skipped"),
    ("duplicates", "duplicate event", "skipped"),
    (
        "late_events",
        "late event",
        "ignored (after its conversation ended, or after its gap was given up on)",
    ),
    ("gaps", "gap", "in `sequence` given up on (normal when the agent's sequences skip numbers)"),
    (
        "gaps_passed",
        "gap",
        "in `sequence` passed at once (the source delivers each conversation in order: "
        "those events were never sent)",
    ),
    (
        "sequence_conflicts",
        "sequence conflict",
        "(another event at a sequence already applied: applied after the first)",
    ),
    ("foreign_events", "event", "refused: its conversation belongs to another connection"),
)


def notes(report: Report) -> list[str]:
    """What a person should know beyond the verdicts, one line each (control characters
    escaped): an incomplete run, every warning, every conversation not judged."""
    w = report.warnings or Warnings()
    lines = [*_run_lines(report), *_warning_lines(w), *_unjudged_lines(report, w)]
    return [line.translate(CONTROL_ESCAPES) for line in lines]


def _run_lines(report: Report) -> list[str]:
    """What a person should know of the run itself: conversations counted but not
    listed, assertions that errored, a run that stopped before its end."""
    lines = []
    pending = sum(a.verdict == "pending" for c in report.conversations for a in c.assertions)
    if report.summary.omitted:
        lines.append(
            f"{counted(report.summary.omitted, 'finished conversation')} counted but "
            "not listed (only the most recent are kept; --jsonl and --junit have every "
            "verdict)"
        )
    if report.summary.errored:
        lines.append(
            f"{counted(report.summary.errored, 'assertion')} could not be evaluated "
            "(errored; see the digest)"
        )
    if not report.summary.complete:
        lines.append(
            f"incomplete: {counted(pending, 'assertion')} still pending (the run "
            "stopped before its end)"
        )
    return lines


def _warning_lines(w: Warnings) -> list[str]:
    """A line per warning the feed or the scenarios gave, in a fixed order."""
    lines = []
    for name in w.scenarios_without_assertions:
        lines.append(
            f"scenario `{name}` has no assertions: every conversation judged against it passes"
        )
    for warning, noun, rest in COUNTED_LINES:
        count: int = getattr(w, warning)
        if count:
            where = _where(w, warning)
            lines.append(f"{counted(count, noun)} {rest}" + (f": {where}" if where else ""))
    if w.unnamed_given_up:
        lines.append(
            f"{counted(w.unnamed_given_up, 'conversation')} named no scenario within "
            f"the first {MAX_UNNAMED_BUFFER:,} events or {MAX_UNNAMED_BYTES >> 20} MiB: "
            "not waited for any longer, those events not kept"
        )
    if w.unknown_kinds:
        n = sum(w.unknown_kinds.values())
        where = _where(w, "unknown_kinds")
        lines.append(
            f"{counted(n, 'event')} of kinds this version does not know skipped "
            f"({_named(w.unknown_kinds)})" + (f": {where}" if where else "")
        )
    if w.refused_clients:
        n = sum(w.refused_clients.values())
        why = ", ".join(f"{reason} {count}" for reason, count in w.refused_clients.items())
        lines.append(f"{counted(n, 'client')} refused by the listener ({why})")
    if w.legacy_rows:
        n = sum(w.legacy_rows.values())
        lines.append(f"{counted(n, 'older CALM row')} skipped ({_named(w.legacy_rows)})")
    return lines + w.source


def _unjudged_lines(report: Report, w: Warnings) -> list[str]:
    """The conversations not judged: those the source could not read, and those that
    matched no scenario (the first :data:`MAX_LISTED` of each named)."""
    lines = []
    for cid, why in list(w.unread.items())[:MAX_LISTED]:
        lines.append(f"conversation `{cid}` could not be read: {why}")
    if len(w.unread) > MAX_LISTED:
        lines.append(f"{len(w.unread) - MAX_LISTED} more conversations could not be read")
    for u in report.unmatched[:MAX_LISTED]:
        lines.append(f"not judged: `{u.conversation_id}` ({counted(u.events, 'event')}): {u.why()}")
    if len(report.unmatched) > MAX_LISTED:
        lines.append(f"not judged: {len(report.unmatched) - MAX_LISTED} more conversations")
    return lines


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
        problems.append(counted(len(report.unmatched), "conversation") + " not judged")
    for count, warning, noun in (
        (w.bad_events, "bad_events", "bad event"),
        (w.late_events, "late_events", "late event"),
        (w.foreign_events, "foreign_events", "foreign event"),
    ):
        if count:
            where = _where(w, warning)
            problems.append(counted(count, noun) + (f" ({where})" if where else ""))
    if w.unknown_kinds:
        where = _where(w, "unknown_kinds")
        problems.append(
            counted(sum(w.unknown_kinds.values()), "event")
            + " of unknown kinds"
            + (f" ({where})" if where else "")
        )
    if w.unread:
        problems.append(counted(len(w.unread), "conversation") + " not read")
    return problems
