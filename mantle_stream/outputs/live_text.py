"""The live view's words and marks: the plain lines, and the pieces every part draws.

An edge module under :mod:`.live`. :func:`decision_line` and
:func:`summary_line` are the fallbacks for a stream that is not a terminal
(``watch`` into a pipe, :mod:`.plain`); the styled pieces (a count, a
verdict's glyph, a reason, the legend, items flowed onto lines) are shared
by the header (:mod:`.live`), the sections (:mod:`.live_detail`) and the
compact table (:mod:`.live_compact`), so each is drawn one way.
"""

from __future__ import annotations

from rich.text import Text

from mantle_stream.core.errors import CONTROL_ESCAPES
from mantle_stream.core.verdicts import Decision
from mantle_stream.outputs.live_snapshot import LiveSnapshot, conversation_counts
from mantle_stream.outputs.table import MARKS

__all__ = [
    "STOP_GLYPH",
    "STOP_STYLE",
    "count_text",
    "decision_line",
    "flow",
    "glyph",
    "legend_lines",
    "one_line",
    "plural",
    "rate_text",
    "reason_text",
    "summary_clauses",
    "summary_line",
]

STOP_GLYPH = "■"  # the stopped-early glyph; the header's "■ N stopped early" is its legend
STOP_STYLE = "magenta"


def decision_line(decision: Decision) -> str:
    """One plain line for a decided verdict (the non-terminal fallback)."""
    where = (
        ""
        if decision.verdict == "skipped"
        else " at end"
        if decision.decided_at is None
        else f" at seq {decision.decided_at}"
    )
    return (
        f"{one_line(decision.conversation_id)}  #{decision.index} {decision.kind:<18} "
        f"{decision.verdict.upper()}{where} (turn {decision.turn}): "
        f"{one_line(decision.reason)}"
    )


def summary_line(snapshot: LiveSnapshot) -> str:
    """The plain closing line: conversations by outcome, then the feed."""
    return "; ".join(clause.plain for clause in summary_clauses(snapshot))


def summary_clauses(snapshot: LiveSnapshot) -> list[Text]:
    """The summary's clauses (joined by ``; ``), styled for the view."""
    counts = conversation_counts(snapshot)
    outcome = Text.assemble(
        plural(len(snapshot.conversations) + sum(snapshot.omitted), "conversation") + ": ",
        (f"{counts['passed']} passed", "green"),
        ", ",
        (f"{counts['failed']} failed", "bold red" if counts["failed"] else ""),
    )
    if counts["pending"]:
        outcome.append_text(Text.assemble(", ", (f"{counts['pending']} open", "yellow")))
    stopped = len(set(snapshot.stopped_early))
    if stopped:
        outcome.append(f" ({stopped} stopped early)", style=STOP_STYLE)
    clauses = [
        outcome,
        Text(
            f"{plural(snapshot.statistics.events, 'event')} in {max(snapshot.elapsed, 0.0):.1f} s "
            f"({rate_text(snapshot.events_per_second)} events/s)"
        ),
    ]
    if snapshot.bad_events:
        clauses.append(Text(f"{plural(snapshot.bad_events, 'bad event')} skipped", style="yellow"))
    if snapshot.statistics.unmatched:
        clauses.append(
            Text(
                f"{plural(snapshot.statistics.unmatched, 'conversation')} not judged",
                style="yellow",
            )
        )
    return clauses


def one_line(text: str) -> str:
    """Control characters escaped, so a reason quoting user text stays one safe line."""
    return text.translate(CONTROL_ESCAPES)


def plural(n: int, noun: str) -> str:
    """``1 event``, ``2 events``. The rule of :func:`~mantle_stream.outputs.notes.counted`,
    written again because the view imports no module that reaches the engine (whose
    limits :mod:`.notes` names)."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def rate_text(per_second: float) -> str:
    return f"{per_second:.1f}" if 0 < per_second < 10 else f"{max(per_second, 0.0):.0f}"


def count_text(n: int, noun: str, style: str = "", *, plural: bool = True) -> Text:
    label = noun + "s" if plural and n != 1 else noun
    return Text.assemble((str(n), "bold"), " ", label, style=style)


def flow(items: list[Text], width: int, sep: str = " · ", keep: str = "") -> list[Text]:
    """Items joined by ``sep``, each moved whole onto a new line rather than split.

    Where a line breaks, ``keep`` ends it in place of the separator (``;`` for
    the summary, so its lines joined by a space give :func:`summary_line`).
    """
    lines: list[Text] = []
    line = Text(no_wrap=True, overflow="ellipsis")
    for item in items:
        if line and line.cell_len + len(sep) + item.cell_len > width:
            line.append(keep)
            lines.append(line)
            line = Text(no_wrap=True, overflow="ellipsis")
        if line:
            line.append(sep, style="dim" if sep == " · " else "")
        line.append_text(item)
    lines.append(line)
    for each in lines:
        each.truncate(width, overflow="ellipsis")
    return lines


def legend_lines(width: int, *, strip: bool) -> list[Text]:
    """What the glyphs mean, on one line where the width allows. The table's strip
    marks a pending assertion ``·`` and gives decided/total counts; a section marks
    it ``…``. (``■`` has its legend in the header: ``■ N stopped early``.)"""
    pending, skipped = (Text("·", "dim"), Text("-", "dim")) if strip else (
        glyph("pending"), glyph("skipped")
    )  # fmt: skip
    items = [
        Text.assemble(glyph("passed"), (" passed", "dim")),
        Text.assemble(glyph("failed"), (" failed", "dim")),
        Text.assemble(pending, (" pending", "dim")),
        Text.assemble(skipped, (" skipped", "dim")),
    ]
    if strip:
        items.append(Text("n/m: n of m assertions decided", "dim"))
    return flow(items, width, "  ")


def glyph(verdict: str) -> Text:
    label, style = MARKS.get(verdict, (verdict, ""))
    return Text(label.split(" ", 1)[0], style=style)


def reason_text(reason: str) -> Text:
    text = Text(one_line(reason))
    text.highlight_regex(r"`[^`]*`", "bold")  # user-supplied names stand out, as in diagnostics
    return text
