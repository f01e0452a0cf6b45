"""The live view's sections: one per conversation, a line per assertion.

An edge module under :mod:`.live`, which chooses the sections while the
conversations are few and their sections fit the screen (else
:mod:`.live_compact`'s table). Every section shares one set of column widths,
so the columns line up down the screen and nothing moves as verdicts land.
"""

from __future__ import annotations

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from mantle_stream.core.verdicts import AssertionResult, ConversationResult
from mantle_stream.outputs.live_snapshot import LiveSnapshot
from mantle_stream.outputs.live_text import (
    STOP_GLYPH,
    STOP_STYLE,
    count_text,
    glyph,
    legend_lines,
    reason_text,
)
from mantle_stream.outputs.table import MARKS, literal, verdict_text

__all__ = ["MIN_REASON_WIDTH", "REASON_LINES", "WIDE_REASON_WIDTH", "detail_sections"]

#: At most this many lines of one assertion's reason in the detail view.
REASON_LINES = 3
#: Reasons get at least this wide a column before the marks shrink to a glyph (``✔``).
WIDE_REASON_WIDTH = 40
#: Narrower than this, a reason goes on its own lines under its assertion.
MIN_REASON_WIDTH = 24


def detail_sections(snap: LiveSnapshot, width: int) -> list[RenderableType]:
    stopped = set(snap.stopped_early)
    facts = {
        conv.conversation_id: [_facts(a) for a in conv.assertions] for conv in snap.conversations
    }
    every = [row for rows in facts.values() for row in rows]
    # One set of widths for every section, so columns line up down the screen; the
    # mark column is as wide as its widest mark, so nothing moves as verdicts land.
    widths = [max((len(row[i]) for row in every), default=0) for i in range(4)]
    inner = width - 2 - len(widths) - 1  # indent, one separator after each column
    label_width = max(len(label) for label, _ in MARKS.values())
    labels = inner - sum(widths) - label_width >= WIDE_REASON_WIDTH
    mark_width = label_width if labels else 1
    reason_width = inner - sum(widths) - mark_width
    parts: list[RenderableType] = []
    for conv in snap.conversations:
        parts.append(Text(""))
        parts.extend(_heading(conv, conv.conversation_id in stopped, width))
        if not conv.assertions:
            parts.append(Text("  no assertions", style="dim"))
            continue
        lines: list[RenderableType] = []
        grid = _assertion_grid(mark_width, widths)
        for a, row in zip(conv.assertions, facts[conv.conversation_id], strict=True):
            mark = verdict_text(a.verdict) if labels else glyph(a.verdict)
            reason = _Clamped(reason_text(a.reason), REASON_LINES)
            if reason_width >= MIN_REASON_WIDTH:
                grid.add_row(mark, *map(literal, row), reason)
                continue
            # Too narrow for a reason column: the reason goes under its assertion.
            grid.add_row(mark, *map(literal, row), "")
            lines.append(grid)
            if a.reason:
                lines.append(Padding(reason, (0, 0, 0, mark_width + 1)))
            grid = _assertion_grid(mark_width, widths)
        if grid.row_count:
            lines.append(grid)
        parts.append(Padding(Group(*lines), (0, 0, 0, 2)))
    if not labels:  # glyphs alone: say what they mean
        parts.extend([Text(""), *legend_lines(width, strip=False)])
    return parts


def _assertion_grid(mark_width: int, widths: list[int]) -> Table:
    grid = Table.grid(padding=(0, 1))
    grid.add_column(width=mark_width, no_wrap=True)
    grid.add_column(width=widths[0], justify="right", no_wrap=True)
    grid.add_column(width=widths[1], no_wrap=True, overflow="ellipsis", style="cyan")
    grid.add_column(width=widths[2], no_wrap=True)
    grid.add_column(width=widths[3], no_wrap=True, style="dim")
    grid.add_column()  # the reason: whatever is left
    return grid


def _facts(a: AssertionResult) -> tuple[str, str, str, str]:
    """``#index``, kind, what decided it (``seq N`` or ``end``), the turn."""
    if a.verdict == "pending":
        return f"#{a.index}", a.kind, "", ""
    return (
        f"#{a.index}",
        a.kind,
        "end" if a.decided_at is None else f"seq {a.decided_at}",
        "" if a.turn is None else f"turn {a.turn}",
    )


def _heading(conv: ConversationResult, stopped: bool, width: int) -> list[RenderableType]:
    """The mark, id and scenario; events, turns and the stopped-early badge on the right.
    A scenario that does not fit whole beside them goes on a line of its own, under
    the id, rather than be cut to a few letters."""
    mark = verdict_text(conv.verdict)
    left = Text.assemble(mark, "  ", literal(conv.conversation_id, "bold"))
    scenario = literal(conv.scenario or "—", "dim")
    right = Text.assemble(count_text(conv.events, "event"), " · ", count_text(conv.turns, "turn"))
    if stopped:
        right.append_text(Text.assemble(" · ", (f"{STOP_GLYPH} stopped early", STOP_STYLE)))
    beside = left.cell_len + 2 + scenario.cell_len + 1 + right.cell_len <= width
    if beside:
        left.append_text(Text.assemble("  ", scenario))
    grid = Table.grid(padding=(0, 1), expand=True)
    grid.add_column(ratio=1, no_wrap=True, overflow="ellipsis")
    grid.add_column(justify="right", no_wrap=True)
    grid.add_row(left, right)
    if beside:
        return [grid]
    scenario.no_wrap, scenario.overflow = True, "ellipsis"
    return [grid, Padding(scenario, (0, 0, 0, mark.cell_len + 2))]


class _Clamped:
    """Text folded to the cell's width, cut to ``max_lines`` lines ending in ``…``."""

    def __init__(self, text: Text, max_lines: int) -> None:
        self.text = text
        self.max_lines = max_lines

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.text)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = max(options.max_width, 1)
        lines = list(self.text.wrap(console, width, overflow="fold"))
        if len(lines) > self.max_lines:
            del lines[self.max_lines :]
            last = lines[-1]
            last.rstrip()
            last.truncate(width - 1)
            last.append("…", style="dim")
        joined = Text("\n").join(lines)
        joined.no_wrap = True
        yield joined
