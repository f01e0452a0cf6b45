"""The end-of-run table: a rich rendering of a report (``--format table``).

An edge module. Renders through ``__rich_console__`` so tests can print it
into a fixed-width, colourless console and compare text.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.table import Table
from rich.text import Text

from mantle_stream.core.errors import CONTROL_ESCAPES
from mantle_stream.core.scenario.model import Scenario
from mantle_stream.outputs.report import Report, notes

__all__ = ["MARKS", "MAX_DETAILED", "ReportTable", "failure_lines", "literal", "verdict_text"]

MARKS = {
    "passed": ("✔ passed", "green"),
    "failed": ("✘ failed", "bold red"),
    "pending": ("… pending", "yellow"),
    "skipped": ("- skipped", "dim"),
    "errored": ("! errored", "magenta"),
}


def literal(text: str, style: str = "") -> Text:
    """User- or event-supplied text as it is: never read as rich markup (``[bold]`` and
    ``[/help]`` stay text) and never a terminal control sequence (escaped)."""
    return Text(text.translate(CONTROL_ESCAPES), style=style)


def verdict_text(verdict: str) -> Text:
    label, style = MARKS.get(verdict, (verdict, ""))
    return Text(label, style=style)


#: Above this many conversations the table shows one row per scenario, not a table
#: per conversation: a big replay's failures are in the digest.
MAX_DETAILED = 50
#: Failures listed in the digest; the rest are counted (the JSON report has all).
MAX_DIGEST = 50


def failure_lines(report: Report, scenarios: Iterable[Scenario] = ()) -> list[Text]:
    """The failure digest: each failed or errored assertion with its whole reason, its
    deciding event and the assertion's ``file:line`` (when the scenario is known)."""
    where = {s.name: s for s in scenarios}
    failed = [
        (conv, a)
        for conv in report.conversations
        for a in conv.assertions
        if a.verdict in ("failed", "errored")
    ]
    if not failed:
        return []
    lines = [
        Text(f"{len(failed)} failed assertion{'' if len(failed) == 1 else 's'}:", style="bold red")
    ]
    for conv, a in failed[:MAX_DIGEST]:
        scenario = where.get(conv.scenario or "")
        at = "at the end" if a.decided_at is None else f"at sequence {a.decided_at}"
        source = ""
        if scenario is not None and a.index < len(scenario.lines):
            source = f"{scenario.path}:{scenario.lines[a.index]}  "
        lines.append(
            Text.assemble(
                "  ",
                literal(source, "bold"),
                (f"#{a.index} {a.kind}", "cyan"),
                " ",
                verdict_text(a.verdict),
                " ",
                at,
                " in ",
                literal(conv.conversation_id, "bold"),
            )
        )
        lines.append(Text.assemble("    ", literal(a.reason)))
    if len(failed) > MAX_DIGEST:
        lines.append(
            Text(
                f"  +{len(failed) - MAX_DIGEST} more (every one is in --format json and --jsonl)",
                style="dim",
            )
        )
    return lines


class ReportTable:
    """A table per conversation (a row per scenario for a big replay), the failure
    digest, then the summary and what else a person should know."""

    def __init__(self, report: Report, scenarios: Iterable[Scenario] = ()) -> None:
        self.report = report
        self.scenarios = list(scenarios)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        parts: list[Table | Text] = []
        if len(self.report.conversations) > MAX_DETAILED:
            parts.append(self._by_scenario())
        else:
            parts.extend(self._by_conversation())
        digest = failure_lines(self.report, self.scenarios)
        if digest:
            parts.extend([Text(""), *digest, Text("")])
        s = self.report.summary
        parts.append(
            Text.assemble(
                f"{s.conversations} conversation{'' if s.conversations == 1 else 's'}: ",
                (f"{s.passed} passed", "green"),
                ", ",
                (f"{s.failed} failed", "bold red" if s.failed else ""),
                f"; {s.assertions} assertions",
                f", {s.skipped} skipped (stopped early)" if s.skipped else "",
                (
                    f"; {s.recorded_differences} differ from evaluate_agent's recorded verdicts"
                    if s.recorded_differences
                    else "",
                    "yellow",
                ),
            )
        )
        parts.extend(Text(line, style="yellow") for line in notes(self.report))
        yield Group(*parts)

    def _by_scenario(self) -> Table:
        rows: dict[str, list[int]] = {}
        for conv in self.report.conversations:
            row = rows.setdefault(conv.scenario or "", [0, 0, 0, 0])
            row[0] += 1
            row[1] += conv.verdict == "passed"
            row[2] += conv.verdict == "failed"
            row[3] += sum(a.verdict == "failed" for a in conv.assertions)
        table = Table(title="by scenario", title_justify="left")
        for name in ("scenario", "conversations", "passed", "failed", "failed assertions"):
            table.add_column(name, justify="left" if name == "scenario" else "right")
        for name, (total, passed, failed, assertions) in rows.items():
            table.add_row(
                literal(name),
                str(total),
                Text(str(passed), style="green"),
                Text(str(failed), style="bold red" if failed else ""),
                str(assertions),
            )
        return table

    def _by_conversation(self) -> list[Table | Text]:
        parts: list[Table | Text] = []
        for conv in self.report.conversations:
            table = Table(
                title=Text.assemble(
                    literal(conv.conversation_id, "bold"),
                    "  ",
                    literal(conv.scenario or "", "dim"),
                    "  ",
                    verdict_text(conv.verdict),
                ),
                title_justify="left",
                expand=False,
                show_edge=True,
            )
            table.add_column("#", justify="right", no_wrap=True)
            table.add_column("assertion", no_wrap=True)
            table.add_column("verdict", no_wrap=True)
            table.add_column("at", justify="right", no_wrap=True)
            table.add_column("reason", overflow="fold")
            for a in conv.assertions:
                at = (
                    "—"
                    if a.verdict in ("skipped", "pending")
                    else "end"
                    if a.decided_at is None
                    else str(a.decided_at)
                )
                table.add_row(
                    str(a.index), literal(a.kind), verdict_text(a.verdict), at, literal(a.reason)
                )
            parts.append(table)
            if conv.recorded is not None:
                for d in conv.recorded.differences:
                    parts.append(
                        literal(
                            f"  #{d.index} {d.kind}: {d.verdict} here, {d.recorded} in "
                            f"evaluate_agent's {conv.recorded.file} (see Divergences in "
                            "docs/semantics.md)",
                            "yellow",
                        )
                    )
        return parts
