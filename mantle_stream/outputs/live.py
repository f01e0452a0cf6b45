"""The live terminal view of ``mantle-stream watch`` (and gate, demo): pure rendering.

An edge module, like :mod:`.table`. The runner builds a :class:`LiveSnapshot` on
the event-loop thread (results, statistics, the newest decisions) and hands
it to :class:`LiveView`; the view reads nothing else -- no engine, no clock,
no terminal state beyond the ``ConsoleOptions`` rich passes in -- so it can
never see an evaluator half-way through an event, and the same snapshot
always renders the same text. :func:`decision_line` and :func:`summary_line`
are the plain fallbacks for a stream that is not a terminal.

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
   ends the view (:func:`_legend`; sections marked by glyphs alone get one
   too). Its columns give way in order
   of importance when narrow (see :func:`_compact_columns`): the latest
   movement is what a watcher reads, so the scenario yields first.
3. **Summary** (``final`` only): :func:`summary_line`, coloured.

Marks are the end-of-run table's (:data:`~mantle_stream.outputs.table.MARKS`), so
``✔``/``✘``/``…`` read the same live and at the end; every distinction made
by colour is also made by a glyph or a word, so a colourless terminal (and
the golden tests) lose nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import msgspec
from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from mantle_stream.core.errors import CONTROL_ESCAPES
from mantle_stream.core.verdicts import AssertionResult, ConversationResult, Decision, Statistics
from mantle_stream.outputs.table import MARKS, literal, verdict_text

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

#: At most this many lines of one assertion's reason in the detail view.
REASON_LINES = 3
#: Reasons get at least this wide a column before the marks shrink to a glyph (``✔``).
WIDE_REASON_WIDTH = 40
#: Narrower than this, a reason goes on its own lines under its assertion.
MIN_REASON_WIDTH = 24
#: The compact table's glyph strip shows one glyph per assertion up to this many.
STRIP_CELLS = 8
#: Compact columns: ids ellipsized past this; the scenario shown only this wide or more.
MAX_ID_WIDTH = 24
MIN_SCENARIO_WIDTH = 12
#: Compact columns give way until the latest movement has this many cells.
MIN_LATEST_WIDTH = 24
#: The scenario's whole name is shown when the latest movement keeps this many cells.
WIDE_LATEST_WIDTH = 40
#: Row budget for the compact table when the console gives no usable height.
DEFAULT_HEIGHT = 30

_STOP = "■"  # the stopped-early glyph; the header's "■ N stopped early" is its legend
_STOP_STYLE = "magenta"
_RANK = {"pending": 0, "failed": 1, "passed": 2}  # compact order: running, failed, passed


class LiveSnapshot(msgspec.Struct, frozen=True):
    """Everything the live view shows, taken at one instant on the loop thread."""

    conversations: tuple[ConversationResult, ...]  # judged, in order of first event
    statistics: Statistics
    elapsed: float  # seconds since the run started
    events_per_second: float
    latest: tuple[Decision, ...] = ()  # newest decisions, newest last
    stopped_early: tuple[str, ...] = ()  # ids settled before their end
    source: str = ""
    bad_events: int = 0  # skipped bad lines
    final: bool = False  # the closing render: feed ended or Ctrl-C
    interrupted: bool = False  # (final) Ctrl-C or SIGTERM ended the run, not its feed
    omitted: tuple[int, int] = (0, 0)  # finished conversations let go of: passed, failed
    command: str = "watch"  # the command drawing it (watch, gate, demo): the title's


# ---------------------------------------------------------------- plain text


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
        f"{_one_line(decision.conversation_id)}  #{decision.index} {decision.kind:<18} "
        f"{decision.verdict.upper()}{where} (turn {decision.turn}): "
        f"{_one_line(decision.reason)}"
    )


def summary_line(snapshot: LiveSnapshot) -> str:
    """The plain closing line: conversations by outcome, then the feed."""
    return "; ".join(clause.plain for clause in _summary_clauses(snapshot))


def _summary_clauses(snapshot: LiveSnapshot) -> list[Text]:
    """The summary's clauses (joined by ``; ``), styled for the view."""
    counts = _counts(snapshot)
    outcome = Text.assemble(
        _plural(len(snapshot.conversations) + sum(snapshot.omitted), "conversation") + ": ",
        (f"{counts['passed']} passed", "green"),
        ", ",
        (f"{counts['failed']} failed", "bold red" if counts["failed"] else ""),
    )
    if counts["pending"]:
        outcome.append_text(Text.assemble(", ", (f"{counts['pending']} open", "yellow")))
    stopped = len(set(snapshot.stopped_early))
    if stopped:
        outcome.append(f" ({stopped} stopped early)", style=_STOP_STYLE)
    clauses = [
        outcome,
        Text(
            f"{_plural(snapshot.statistics.events, 'event')} in {max(snapshot.elapsed, 0.0):.1f} s "
            f"({_rate(snapshot.events_per_second)} events/s)"
        ),
    ]
    if snapshot.bad_events:
        clauses.append(Text(f"{_plural(snapshot.bad_events, 'bad event')} skipped", style="yellow"))
    if snapshot.statistics.unmatched:
        clauses.append(
            Text(
                f"{_plural(snapshot.statistics.unmatched, 'conversation')} not judged",
                style="yellow",
            )
        )
    return clauses


def _open(snap: LiveSnapshot) -> str:
    """What a conversation whose verdict is pending is called: *running* while the
    run lasts; once it has ended (Ctrl-C, --fail-fast) nothing runs any more, and it
    is *open*, everywhere the closing view counts it."""
    return "open" if snap.final else "running"


def _one_line(text: str) -> str:
    """Control characters escaped, so a reason quoting user text stays one safe line."""
    return text.translate(CONTROL_ESCAPES)


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _rate(per_second: float) -> str:
    return f"{per_second:.1f}" if 0 < per_second < 10 else f"{max(per_second, 0.0):.0f}"


def _clock(seconds: float) -> str:
    """``mm:ss.s``; minutes keep counting past 59 rather than wrap."""
    minutes, tenths = divmod(round(max(seconds, 0.0) * 10), 600)
    whole, tenth = divmod(tenths, 10)
    return f"{minutes:02d}:{whole:02d}.{tenth}"


def _counts(snap: LiveSnapshot) -> dict[str, int]:
    """Conversations by verdict, those let go of (keep_finished) included."""
    counts = _tally(c.verdict for c in snap.conversations)
    counts["passed"] += snap.omitted[0]
    counts["failed"] += snap.omitted[1]
    return counts


def _tally(verdicts: Iterable[str]) -> dict[str, int]:
    counts = {"pending": 0, "passed": 0, "failed": 0, "skipped": 0}
    for verdict in verdicts:
        counts[verdict] = counts.get(verdict, 0) + 1
    return counts


# ---------------------------------------------------------------- rich view


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
            footer = [Text(""), *_flow(_summary_clauses(snap), width, "; ", ";")]
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
            details = _details(snap, width) if len(snap.conversations) <= self.detail_limit else []
            if details and _height(console, options, details) <= room:
                yield Group(*parts, *details, *footer)
                return
            # Sections taller than the screen would be cut off mid-list by the
            # terminal, with nothing to say what is missing: the table instead,
            # whose rows are capped with a "+N more" line.
            legend = _legend(width, strip=True)
            rows = room - 1 - len(legend)  # the table's header row, the legend
            by_scenario = _scenario_rows(snap, width, max(rows // 3, 1))
            if by_scenario:
                parts.extend(by_scenario)
                table = by_scenario[0]
                assert isinstance(table, Table)
                rows -= table.row_count + 1 + (len(by_scenario) - 1)  # rows, header, "+N"
            parts.extend(_compact(snap, width, rows))
            parts.extend(legend)
        yield Group(*parts, *footer)


def _legend(width: int, *, strip: bool) -> list[Text]:
    """What the glyphs mean, on one line where the width allows. The table's strip
    marks a pending assertion ``·`` and gives decided/total counts; a section marks
    it ``…``. (``■`` has its legend in the header: ``■ N stopped early``.)"""
    pending, skipped = (Text("·", "dim"), Text("-", "dim")) if strip else (
        _glyph("pending"), _glyph("skipped")
    )  # fmt: skip
    items = [
        Text.assemble(_glyph("passed"), (" passed", "dim")),
        Text.assemble(_glyph("failed"), (" failed", "dim")),
        Text.assemble(pending, (" pending", "dim")),
        Text.assemble(skipped, (" skipped", "dim")),
    ]
    if strip:
        items.append(Text("n/m: n of m assertions decided", "dim"))
    return _flow(items, width, "  ")


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
        _count(snap.statistics.events, "event"),
        Text.assemble((_rate(snap.events_per_second), "bold"), " events/s"),
    ]
    if snap.bad_events:
        feed.append(_count(snap.bad_events, "bad event", "yellow"))
    counts = _counts(snap)
    convs = [
        _count(len(snap.conversations) + sum(snap.omitted), "conversation"),
        _count(counts["pending"], _open(snap), "yellow", plural=False),
        _count(counts["passed"], "passed", "green", plural=False),
        _count(counts["failed"], "failed", "bold red" if counts["failed"] else "", plural=False),
    ]
    stopped = len(set(snap.stopped_early))
    if stopped:
        convs.append(Text(f"{_STOP} {stopped} stopped early", style=_STOP_STYLE))
    if snap.statistics.unmatched:
        convs.append(_count(snap.statistics.unmatched, "not judged", "yellow", plural=False))
    return [*_flow(feed, width), *_flow(convs, width)]


def _count(n: int, noun: str, style: str = "", *, plural: bool = True) -> Text:
    label = noun + "s" if plural and n != 1 else noun
    return Text.assemble((str(n), "bold"), " ", label, style=style)


def _flow(items: list[Text], width: int, sep: str = " · ", keep: str = "") -> list[Text]:
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


# ---------------------------------------------------------------- detail


def _details(snap: LiveSnapshot, width: int) -> list[RenderableType]:
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
            mark = verdict_text(a.verdict) if labels else _glyph(a.verdict)
            reason = _Clamped(_reason(a.reason), REASON_LINES)
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
        parts.extend([Text(""), *_legend(width, strip=False)])
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


def _glyph(verdict: str) -> Text:
    label, style = MARKS.get(verdict, (verdict, ""))
    return Text(label.split(" ", 1)[0], style=style)


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
    right = Text.assemble(_count(conv.events, "event"), " · ", _count(conv.turns, "turn"))
    if stopped:
        right.append_text(Text.assemble(" · ", (f"{_STOP} stopped early", _STOP_STYLE)))
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


def _reason(reason: str) -> Text:
    text = Text(_one_line(reason))
    text.highlight_regex(r"`[^`]*`", "bold")  # user-supplied names stand out, as in diagnostics
    return text


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


# ---------------------------------------------------------------- compact


def _compact(snap: LiveSnapshot, width: int, rows: int) -> list[RenderableType]:
    order = sorted(snap.conversations, key=lambda c: _RANK.get(c.verdict, 0))  # stable
    # Past the budget one row gives way to the "+N more" line; one row always shows.
    cut = len(order) if len(order) <= rows else max(rows - 1, 1)
    shown, hidden = order[:cut], order[cut:]
    stopped = set(snap.stopped_early)
    newest = {d.conversation_id: d for d in snap.latest}  # newest last, so it wins
    columns = _compact_columns(shown, width)
    table = Table.grid(padding=(0, 1))
    table.show_header = True
    table.header_style = "bold"
    for name, column_width in columns.items():
        table.add_column(
            "" if name == "mark" else name,
            width=column_width,
            no_wrap=True,
            overflow="ellipsis",
            justify="right" if name == "events" else "left",
            style="dim" if name == "scenario" else "",
        )
    cells = min(max(len(c.assertions) for c in shown), STRIP_CELLS)
    for conv in shown:
        row: list[RenderableType] = []
        for name in columns:
            if name == "mark":
                row.append(
                    Text.assemble(
                        _glyph(conv.verdict),
                        (_STOP if conv.conversation_id in stopped else " ", _STOP_STYLE),
                    )
                )
            elif name == "conversation":
                row.append(literal(_middle(conv.conversation_id, columns[name])))
            elif name == "scenario":
                row.append(literal(conv.scenario or "—"))
            elif name == "assertions":
                progress = _strip(conv.assertions, cells)
                if columns[name] > cells:  # room for the counts, right-aligned
                    progress.append(
                        _decided_of(conv).rjust(columns[name] - progress.cell_len), style="dim"
                    )
                row.append(progress)
            elif name == "events":
                row.append(str(conv.events))
            else:
                row.append(_movement(conv, newest.get(conv.conversation_id)))
        table.add_row(*row)
    parts: list[RenderableType] = [table]
    if hidden:
        tally = _tally(c.verdict for c in hidden)
        said = ", ".join(
            f"{tally[v]} {_open(snap) if v == 'pending' else v}"
            for v in ("pending", "failed", "passed")
            if tally[v]
        )
        parts.append(Text(f"+{len(hidden)} more: {said}", style="dim"))
    return parts


#: Scenarios listed with their runs above the compact table, at most.
MAX_SCENARIO_ROWS = 8


def _scenario_rows(snap: LiveSnapshot, width: int, budget: int) -> list[RenderableType]:
    """With many conversations over several scenarios, a compact row per scenario:
    its runs so far (running, passed, failed, errored) and the pass rate of those
    judged; the scenarios with failures first."""
    runs: dict[str, Counter[str]] = {}
    for conv in snap.conversations:
        runs.setdefault(conv.scenario or "—", Counter())[conv.verdict] += 1
    if len(runs) < 2:
        return []
    limit = max(min(MAX_SCENARIO_ROWS, budget), 1)
    table = Table.grid(padding=(0, 1))
    table.show_header = True
    table.header_style = "bold"
    numbers = ("runs", _open(snap), "passed", "failed", "errored", "rate")
    # The counts keep their width; the scenario's name gives way (ellipsized).
    room = width - sum(len(name) + 1 for name in numbers) - 1
    table.add_column(
        "scenario", width=max(min(room, max(len(n) for n in runs)), 8), no_wrap=True,
        overflow="ellipsis",
    )  # fmt: skip
    for name in numbers:
        table.add_column(name, justify="right", width=len(name), no_wrap=True)
    ordered = sorted(runs.items(), key=lambda item: -item[1]["failed"])
    for name, tally in ordered[:limit]:
        judged = tally["passed"] + tally["failed"]
        table.add_row(
            literal(name),
            str(tally.total()),
            Text(str(tally["pending"]), style="yellow" if tally["pending"] else ""),
            Text(str(tally["passed"]), style="green"),
            Text(str(tally["failed"]), style="bold red" if tally["failed"] else ""),
            Text(str(tally["errored"]), style="magenta" if tally["errored"] else ""),
            f"{tally['passed'] / judged:.0%}" if judged else "-",
        )
    parts: list[RenderableType] = [table]
    if len(ordered) > limit:
        parts.append(Text(f"+{len(ordered) - limit} more scenarios", style="dim"))
    return parts


def _compact_columns(shown: list[ConversationResult], width: int) -> dict[str, int]:
    """Column widths for ``width`` cells, in order; what matters least gives way first.

    The latest movement keeps at least :data:`MIN_LATEST_WIDTH`. To make room the
    decided/total counts go first, then the glyph strip, then the id is
    ellipsized; the scenario is shown only when, after all that, it can be at
    least :data:`MIN_SCENARIO_WIDTH` wide (narrower it is a few letters anyway).
    It gets its whole name when the latest movement still keeps
    :data:`WIDE_LATEST_WIDTH`, else two fifths of what is left.
    """
    cells = min(max(len(c.assertions) for c in shown), STRIP_CELLS)
    ident = min(max(len("conversation"), *(len(c.conversation_id) for c in shown)), MAX_ID_WIDTH)
    progress = max(cells + 1 + max(len(_decided_of(c)) for c in shown), len("assertions"))
    events = max(len("events"), *(len(str(c.events)) for c in shown))

    def left() -> int:  # for the latest movement: what the others and separators leave
        return width - (2 + ident + progress + events) - (4 if progress else 3)

    if left() < MIN_LATEST_WIDTH:
        progress = cells
    if left() < MIN_LATEST_WIDTH:
        progress = 0
    if left() < MIN_LATEST_WIDTH:
        ident = max(ident - (MIN_LATEST_WIDTH - left()), len("conversation"))
    scenario = 0
    if left() - 1 - MIN_LATEST_WIDTH >= MIN_SCENARIO_WIDTH:
        longest = max(len(c.scenario or "—") for c in shown)
        # Its whole name when the latest movement keeps WIDE_LATEST_WIDTH; else a share.
        share = max(MIN_SCENARIO_WIDTH, (left() - 1) * 2 // 5, left() - 1 - WIDE_LATEST_WIDTH)
        scenario = min(longest, share)
    latest = max(left() - (scenario + 1 if scenario else 0), 8)
    columns = {
        "mark": 2,
        "conversation": ident,
        "scenario": scenario,
        "assertions": progress,
        "events": events,
        "latest": latest,
    }
    return {name: cells for name, cells in columns.items() if cells}


def _decided_of(conv: ConversationResult) -> str:
    return f"{sum(a.verdict != 'pending' for a in conv.assertions)}/{len(conv.assertions)}"


def _strip(assertions: tuple[AssertionResult, ...], cells: int) -> Text:
    """One glyph per assertion, ``✔`` then ``✘`` then ``-`` (skipped) then ``·``.

    Past ``cells``, a bar: every failure keeps its own ``✘`` while there is
    room (they are what a watcher counts), and passed and the rest (skipped,
    pending) share the remainder in proportion, each keeping one glyph if it
    occurs at all.
    """
    counts = _tally(a.verdict for a in assertions)
    passed, failed = counts["passed"], counts["failed"]
    skipped, pending = counts.get("skipped", 0), counts["pending"]
    if len(assertions) > cells:
        rest = skipped + pending
        failed = min(failed, cells - (passed > 0) - (rest > 0))
        room = cells - failed
        if passed + rest:
            share = int(room * passed / (passed + rest) + 0.5)
            passed = max(min(share, room - (rest > 0)), 1 if passed else 0)
            left = room - passed
            if rest:
                skipped = min(
                    max(int(left * skipped / rest + 0.5), 1 if skipped else 0), left - (pending > 0)
                )
            pending = left - skipped
    text = Text(no_wrap=True)
    text.append("✔" * passed, style="green")
    text.append("✘" * failed, style="bold red")
    text.append("-" * skipped, style="dim")
    text.append("·" * pending, style="dim")
    return text


def _movement(conv: ConversationResult, newest: Decision | None) -> Text:
    """A failed conversation's first failure (what a watcher needs to see); else the
    newest decision, else the last verdict decided."""
    if newest is not None and (conv.verdict != "failed" or newest.verdict == "failed"):
        return _decided(newest.verdict, newest.index, newest.reason)
    decided = [a for a in conv.assertions if a.verdict not in ("pending", "skipped")]
    failed = [a for a in decided if a.verdict == "failed"]

    def when(a: AssertionResult) -> tuple[bool, int, int]:
        return (a.decided_at is None, a.decided_at or 0, a.index)

    if failed:
        first = min(failed, key=when)
        return _decided(first.verdict, first.index, first.reason)
    if decided:
        last = max(decided, key=when)
        return _decided(last.verdict, last.index, last.reason)
    return Text("no assertions" if not conv.assertions else "no verdict yet", style="dim")


def _middle(text: str, width: int) -> str:
    """``text`` cut to ``width`` in the middle: ids such as ``sim-<uuid>`` share their
    start, and their tail tells them apart."""
    if len(text) <= width or width < 5:
        return text
    head = (width - 1) // 3
    return f"{text[:head]}…{text[len(text) - (width - 1 - head) :]}"


def _decided(verdict: str, index: int, reason: str) -> Text:
    return Text.assemble(_glyph(verdict), f" #{index} ", _reason(reason))
