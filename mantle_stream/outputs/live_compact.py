"""The live view's compact table: a row per conversation, and a row per scenario.

An edge module under :mod:`.live`, which draws this table once the
conversations are too many (or their sections too tall) for
:mod:`.live_detail`. Rows are capped to the height left, with a ``+N more``
line saying what was left out; columns give way in order of importance when
narrow (:func:`_compact_columns`).
"""

from __future__ import annotations

from collections import Counter

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from mantle_stream.core.verdicts import AssertionResult, ConversationResult, Decision
from mantle_stream.outputs.live_snapshot import LiveSnapshot, pending_word, verdict_tally
from mantle_stream.outputs.live_text import STOP_GLYPH, STOP_STYLE, glyph, reason_text
from mantle_stream.outputs.table import literal

__all__ = [
    "MAX_ID_WIDTH",
    "MAX_SCENARIO_ROWS",
    "MIN_LATEST_WIDTH",
    "MIN_SCENARIO_WIDTH",
    "STRIP_CELLS",
    "WIDE_LATEST_WIDTH",
    "compact_table",
    "scenario_rows",
]

#: The compact table's glyph strip shows one glyph per assertion up to this many.
STRIP_CELLS = 8
#: Compact columns: ids ellipsized past this; the scenario shown only this wide or more.
MAX_ID_WIDTH = 24
MIN_SCENARIO_WIDTH = 12
#: Compact columns give way until the latest movement has this many cells.
MIN_LATEST_WIDTH = 24
#: The scenario's whole name is shown when the latest movement keeps this many cells.
WIDE_LATEST_WIDTH = 40
_RANK = {"pending": 0, "failed": 1, "passed": 2}  # compact order: running, failed, passed


def compact_table(snap: LiveSnapshot, width: int, rows: int) -> list[RenderableType]:
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
                        glyph(conv.verdict),
                        (STOP_GLYPH if conv.conversation_id in stopped else " ", STOP_STYLE),
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
        tally = verdict_tally(c.verdict for c in hidden)
        said = ", ".join(
            f"{tally[v]} {pending_word(snap) if v == 'pending' else v}"
            for v in ("pending", "failed", "passed")
            if tally[v]
        )
        parts.append(Text(f"+{len(hidden)} more: {said}", style="dim"))
    return parts


#: Scenarios listed with their runs above the compact table, at most.
MAX_SCENARIO_ROWS = 8


def scenario_rows(snap: LiveSnapshot, width: int, budget: int) -> list[RenderableType]:
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
    numbers = ("runs", pending_word(snap), "passed", "failed", "errored", "rate")
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
    counts = verdict_tally(a.verdict for a in assertions)
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
    return Text.assemble(glyph(verdict), f" #{index} ", reason_text(reason))
