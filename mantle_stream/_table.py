"""The end-of-run table: a rich rendering of a report (``--format table``).

An edge module. Renders through ``__rich_console__`` so tests can print it
into a fixed-width, colourless console and compare text.
"""

from __future__ import annotations

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.table import Table
from rich.text import Text

from mantle_stream._errors import CONTROL_ESCAPES
from mantle_stream._report import Report, notes

__all__ = ["MARKS", "ReportTable", "literal", "verdict_text"]

MARKS = {"passed": ("✔ passed", "green"), "failed": ("✘ failed", "bold red"),
         "pending": ("… pending", "yellow"), "skipped": ("- skipped", "dim"),
         "errored": ("! errored", "magenta")}


def literal(text: str, style: str = "") -> Text:
    """User- or event-supplied text as it is: never read as rich markup (``[bold]`` and
    ``[/help]`` stay text) and never a terminal control sequence (escaped)."""
    return Text(text.translate(CONTROL_ESCAPES), style=style)


def verdict_text(verdict: str) -> Text:
    label, style = MARKS.get(verdict, (verdict, ""))
    return Text(label, style=style)


class ReportTable:
    """One table per conversation, then a summary line."""

    def __init__(self, report: Report) -> None:
        self.report = report

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        parts: list[Table | Text] = []
        for conv in self.report.conversations:
            table = Table(
                title=Text.assemble(literal(conv.conversation_id, "bold"), "  ",
                                    literal(conv.scenario or "", "dim"), "  ",
                                    verdict_text(conv.verdict)),
                title_justify="left", expand=False, show_edge=True,
            )
            table.add_column("#", justify="right", no_wrap=True)
            table.add_column("assertion", no_wrap=True)
            table.add_column("verdict", no_wrap=True)
            table.add_column("at", justify="right", no_wrap=True)
            table.add_column("reason", overflow="fold")
            for a in conv.assertions:
                at = "—" if a.verdict in ("skipped", "pending") else \
                    "end" if a.decided_at is None else str(a.decided_at)
                table.add_row(str(a.index), literal(a.kind), verdict_text(a.verdict), at,
                              literal(a.reason))
            parts.append(table)
            if conv.recorded is not None:
                for d in conv.recorded.differences:
                    parts.append(literal(
                        f"  #{d.index} {d.kind}: {d.verdict} here, {d.recorded} in "
                        f"evaluate_agent's {conv.recorded.file} (see Divergences in "
                        "docs/semantics.md)", "yellow"))
        s = self.report.summary
        parts.append(Text.assemble(
            f"{s.conversations} conversation{'' if s.conversations == 1 else 's'}: ",
            (f"{s.passed} passed", "green"), ", ",
            (f"{s.failed} failed", "bold red" if s.failed else ""),
            f"; {s.assertions} assertions",
            f", {s.skipped} skipped (stopped early)" if s.skipped else "",
            (f"; {s.recorded_differences} differ from evaluate_agent's recorded verdicts"
             if s.recorded_differences else "", "yellow"),
        ))
        parts.extend(Text(line, style="yellow") for line in notes(self.report))
        yield Group(*parts)
