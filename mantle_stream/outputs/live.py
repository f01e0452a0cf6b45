"""The live terminal view of ``mantle-stream watch`` (and gate, demo): pure rendering.

An edge module, like :mod:`.table`. The runner builds a :class:`LiveSnapshot` on
the event-loop thread (results, statistics, the newest decisions) and hands
it to :class:`LiveView`; the view reads nothing else -- no engine, no clock,
no terminal state beyond the ``ConsoleOptions`` rich passes in -- so it can
never see an evaluator half-way through an event, and the same snapshot
always renders the same text. :func:`decision_line` and :func:`summary_line`
are the plain fallbacks for a stream that is not a terminal.

This module lays the view out (the header panel, which body, the footer);
the parts are their own modules: the snapshot and its counts
(:mod:`.live_snapshot`), the words and marks every part draws and the plain
lines (:mod:`.live_text`), the sections (:mod:`.live_detail`) and the
compact table (:mod:`.live_compact`).

Theory of the layout
--------------------
Top to bottom, every part sized from ``options.max_width`` before rich lays
it out, so nothing depends on how rich would shrink an over-wide table:

1. **Header panel**, two lines of items: the feed (source, elapsed
   ``mm:ss.s``, events, events/s, bad events) and the conversations (running,
   passed, failed, stopped early, not judged). Items flow onto another line
   rather than split when the terminal is narrow. The conversation counts are
   taken from the rows, so the header always agrees with what is shown:
   *running* means the verdict is still pending; a conversation with a failed
   assertion is *failed* at once (its outcome cannot change any more). Once
   the run has ended nothing runs: the closing view calls those conversations
   *open* (header, ``+N more``, per-scenario rows and summary alike), and its
   title says *interrupted* when Ctrl-C or SIGTERM ended it, else *finished*.
2. **Body.** With at most ``detail_limit`` conversations, and when their
   sections fit in the height left (a terminal would cut the rest off with
   nothing to say what is missing), one section each,
   in order of first event so sections never jump while watched: a heading
   (mark, id, scenario; events, turns, the ``■ stopped early`` badge) and one
   line per assertion (verdict label, ``#index kind``, the ``seq`` and turn
   that decided it or ``end``, the reason folded to at most
   :data:`REASON_LINES` lines). Otherwise a compact table, one row per
   conversation: running first (what is still moving), then failed (what
   needs reading), then passed; rows are capped to the height available with
   a ``+N more`` line saying what was left out, and a legend of the marks
   ends the view (:func:`legend_lines`; sections marked by glyphs alone get one
   too). Its columns give way in order
   of importance when narrow (see :mod:`.live_compact`): the latest
   movement is what a watcher reads, so the scenario yields first.
3. **Summary** (``final`` only): :func:`summary_line`, coloured.

Marks are the end-of-run table's (:data:`~mantle_stream.outputs.table.MARKS`), so
``✔``/``✘``/``…`` read the same live and at the end; every distinction made
by colour is also made by a glyph or a word, so a colourless terminal (and
the golden tests) lose nothing.
"""

from __future__ import annotations

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from mantle_stream.outputs.live_compact import (
    MAX_ID_WIDTH,
    MIN_LATEST_WIDTH,
    MIN_SCENARIO_WIDTH,
    STRIP_CELLS,
    WIDE_LATEST_WIDTH,
    compact_table,
    scenario_rows,
)
from mantle_stream.outputs.live_detail import (
    MIN_REASON_WIDTH,
    REASON_LINES,
    WIDE_REASON_WIDTH,
    detail_sections,
)
from mantle_stream.outputs.live_snapshot import LiveSnapshot, conversation_counts, pending_word
from mantle_stream.outputs.live_text import (
    STOP_GLYPH,
    STOP_STYLE,
    count_text,
    decision_line,
    flow,
    legend_lines,
    rate_text,
    summary_clauses,
    summary_line,
)
from mantle_stream.outputs.table import literal

__all__ = [
    "DEFAULT_HEIGHT",
    "MAX_ID_WIDTH",
    "MIN_LATEST_WIDTH",
    "MIN_REASON_WIDTH",
    "MIN_SCENARIO_WIDTH",
    "REASON_LINES",
    "STRIP_CELLS",
    "WIDE_LATEST_WIDTH",
    "WIDE_REASON_WIDTH",
    "LiveSnapshot",
    "LiveView",
    "decision_line",
    "summary_line",
]

#: Row budget for the compact table when the console gives no usable height.
DEFAULT_HEIGHT = 30


class LiveView:
    """A rich renderable of one :class:`LiveSnapshot` (see the module docstring)."""

    def __init__(self, snapshot: LiveSnapshot, *, detail_limit: int = 6) -> None:
        self.snapshot = snapshot
        self.detail_limit = detail_limit

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        snap = self.snapshot
        width = options.max_width
        lines = _header_lines(snap, max(width - 4, 1))  # two borders, two cells of padding
        title = Text.assemble(
            (f"mantle-stream {snap.command}", "bold"),
            " · ",
            ("interrupted", "bold yellow")
            if snap.final and snap.interrupted
            else ("finished", "bold")
            if snap.final
            else ("● live", "green"),
        )
        parts: list[RenderableType] = [
            Panel(
                Group(*lines),
                title=title,
                title_align="left",
                box=box.ROUNDED,
                expand=True,
                border_style="dim",
            ),
        ]
        footer: list[RenderableType] = []
        if snap.final:
            footer = [Text(""), *flow(summary_clauses(snap), width, "; ", ";")]
        if not snap.conversations:
            parts.append(
                Text(
                    "no conversation was judged"
                    if snap.final
                    else "waiting for the first conversation…",
                    style="dim",
                )
            )
        else:
            height = options.height if options.height is not None else options.max_height
            if height <= 0:
                height = DEFAULT_HEIGHT
            # What is left once the panel and the footer are drawn.
            room = height - (len(lines) + 2) - len(footer)
            details = (
                detail_sections(snap, width) if len(snap.conversations) <= self.detail_limit else []
            )
            if details and _height(console, options, details) <= room:
                yield Group(*parts, *details, *footer)
                return
            # Sections taller than the screen would be cut off mid-list by the
            # terminal, with nothing to say what is missing: the table instead,
            # whose rows are capped with a "+N more" line.
            legend = legend_lines(width, strip=True)
            rows = room - 1 - len(legend)  # the table's header row, the legend
            by_scenario = scenario_rows(snap, width, max(rows // 3, 1))
            if by_scenario:
                parts.extend(by_scenario)
                table = by_scenario[0]
                assert isinstance(table, Table)
                rows -= table.row_count + 1 + (len(by_scenario) - 1)  # rows, header, "+N"
            parts.extend(compact_table(snap, width, rows))
            parts.extend(legend)
        yield Group(*parts, *footer)


def _height(console: Console, options: ConsoleOptions, parts: list[RenderableType]) -> int:
    """Lines ``parts`` take at the view's width, whatever the screen's height."""
    unbounded = options.reset_height()
    return sum(len(console.render_lines(part, unbounded, pad=False)) for part in parts)


def _header_lines(snap: LiveSnapshot, width: int) -> list[Text]:
    feed: list[Text] = []
    if snap.source:
        feed.append(literal(snap.source, "bold cyan"))
    feed += [
        Text(_clock(snap.elapsed), style="bold"),
        count_text(snap.statistics.events, "event"),
        Text.assemble((rate_text(snap.events_per_second), "bold"), " events/s"),
    ]
    if snap.bad_events:
        feed.append(count_text(snap.bad_events, "bad event", "yellow"))
    counts = conversation_counts(snap)
    convs = [
        count_text(len(snap.conversations) + sum(snap.omitted), "conversation"),
        count_text(counts["pending"], pending_word(snap), "yellow", plural=False),
        count_text(counts["passed"], "passed", "green", plural=False),
        count_text(
            counts["failed"], "failed", "bold red" if counts["failed"] else "", plural=False
        ),
    ]
    stopped = len(set(snap.stopped_early))
    if stopped:
        convs.append(Text(f"{STOP_GLYPH} {stopped} stopped early", style=STOP_STYLE))
    if snap.statistics.unmatched:
        convs.append(count_text(snap.statistics.unmatched, "not judged", "yellow", plural=False))
    return [*flow(feed, width), *flow(convs, width)]


def _clock(seconds: float) -> str:
    """``mm:ss.s``; minutes keep counting past 59 rather than wrap."""
    minutes, tenths = divmod(round(max(seconds, 0.0) * 10), 600)
    whole, tenth = divmod(tenths, 10)
    return f"{minutes:02d}:{whole:02d}.{tenth}"
