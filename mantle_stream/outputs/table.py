"""The end-of-run table: a rich rendering of a report (``--format table``).

An edge module. On a terminal, a table per conversation (:class:`ReportTable`,
rendered through ``__rich_console__`` so tests can print it into a fixed-width,
colourless console and compare text). Without one (a CI log, a file), a table
wrapped at some guessed width reads badly, so :func:`report_lines` gives the same
findings as lines that read at any width: one per failed, errored, differing or
flaky verdict, each starting with the ``file:line`` of its assertion as a
compiler's would, then the totals. :func:`print_report` picks one.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import TextIO

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.table import Table
from rich.text import Text

from mantle_stream.core.errors import CONTROL_ESCAPES
from mantle_stream.core.scenario.model import Scenario
from mantle_stream.core.verdicts import ToolCallScores, ToolEntryResult, VerdictRecord
from mantle_stream.outputs.report import (
    ExpectedToolsSummary,
    Report,
    ReportConversation,
    metric_text,
    notes,
    one_scenario_line,
    tools_line,
    why_it_differs,
)

__all__ = [
    "MARKS",
    "MAX_DETAILED",
    "MAX_LINES",
    "ReportTable",
    "failure_lines",
    "literal",
    "print_report",
    "report_lines",
    "summary_text",
    "verdict_text",
]

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
#: Failed and errored verdicts listed one a line without a terminal; the rest counted.
MAX_LINES = 1000
#: Differing verdicts named on the summary line; the rest counted.
MAX_NAMED_DIFFERENCES = 5


def _source(conv: ReportConversation, a: VerdictRecord, where: dict[str, Scenario]) -> str | None:
    """``file:line`` of the assertion behind a verdict, when the scenario is a file."""
    if a.file and a.line:
        return f"{a.file}:{a.line}"
    scenario = where.get(conv.scenario or "")
    if scenario is not None and a.index < len(scenario.lines):
        return f"{scenario.path}:{scenario.lines[a.index]}"
    return None


def failure_lines(report: Report, scenarios: Iterable[Scenario] = ()) -> list[Text]:
    """The failure digest: each failed or errored assertion with its whole reason, its
    deciding event and the assertion's ``file:line`` (when the scenario is known)."""
    where = {s.name: s for s in scenarios}
    failed = _failed(report)
    gates = _failed_gates(report)
    if not failed and not gates:
        return []
    lines = (
        [
            Text(
                f"{len(failed)} failed assertion{'' if len(failed) == 1 else 's'}:",
                style="bold red",
            )
        ]
        if failed
        else []
    )
    for conv, a in failed[:MAX_DIGEST]:
        at = "at the end" if a.decided_at is None else f"at sequence {a.decided_at}"
        found = _source(conv, a, where)
        source = f"{found}  " if found else ""
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
    if gates:
        lines.append(
            Text(
                f"{len(gates)} failed gate entr{'y' if len(gates) == 1 else 'ies'} of "
                "expected_tools (--tool-calls):",
                style="bold red",
            )
        )
    for conv_id, e in gates[:MAX_DIGEST]:
        source = f"{e.file}:{e.line}  " if e.file and e.line else ""
        lines.append(
            Text.assemble(
                "  ",
                literal(source, "bold"),
                (f"expected_tools #{e.index} {e.kind}", "cyan"),
                " ",
                verdict_text(e.verdict),
                " in ",
                literal(conv_id, "bold"),
            )
        )
        lines.append(Text.assemble("    ", literal(e.reason)))
    return lines


def _failed(report: Report) -> list[tuple[ReportConversation, VerdictRecord]]:
    return [
        (conv, a)
        for conv in report.conversations
        for a in conv.assertions
        if a.verdict in ("failed", "errored")
    ]


def summary_text(report: Report) -> Text:
    """The totals line; differing verdicts named by assertion and results file."""
    s = report.summary
    differ = ""
    if s.recorded_differences:
        named = [
            f"#{d.index} {d.kind} in {conv.recorded.file}"
            for conv in report.conversations
            if conv.recorded is not None
            for d in conv.recorded.differences
        ]
        more = len(named) - MAX_NAMED_DIFFERENCES
        listed = ", ".join(named[:MAX_NAMED_DIFFERENCES]) + (f", +{more} more" if more > 0 else "")
        differ = f"; {s.recorded_differences} differ from evaluate_agent's recorded verdicts"
        if named:  # (none listed when the conversations were let go of: --keep-finished)
            differ += f" ({listed})"
    return Text.assemble(
        f"{s.conversations} conversation{'' if s.conversations == 1 else 's'}: ",
        (f"{s.passed} passed", "green"),
        ", ",
        (f"{s.failed} failed", "bold red" if s.failed else ""),
        f"; {s.assertions} assertions",
        f", {s.skipped} skipped (stopped early)" if s.skipped else "",
        (differ.translate(CONTROL_ESCAPES), "yellow"),
    )


def report_lines(report: Report, scenarios: Iterable[Scenario] = ()) -> list[str]:
    """The report without a terminal: one line per failed or errored verdict, then per
    verdict that differs from evaluate_agent's and per flaky assertion, each led by
    its assertion's ``file:line``; then a line per scenario run several times, the
    totals and the notes. No line is wrapped: a CI log or an editor shows it whole."""
    where = {s.name: s for s in scenarios}
    lines: list[str] = []
    failed = _failed(report)
    for conv, a in failed[:MAX_LINES]:
        at = "at the end" if a.decided_at is None else f"at sequence {a.decided_at}"
        source = _source(conv, a, where) or conv.scenario or "(no scenario)"
        lines.append(
            f"{source}: {a.verdict}: #{a.index} {a.kind} {at} in {conv.conversation_id}: {a.reason}"
        )
    if len(failed) > MAX_LINES:
        lines.append(
            f"+{len(failed) - MAX_LINES} more failed assertions (every one is in "
            "--format json and --jsonl)"
        )
    for conv in report.conversations:
        if conv.recorded is None:
            continue
        for d in conv.recorded.differences:
            found = conv.assertions[d.index] if d.index < len(conv.assertions) else None
            source = (_source(conv, found, where) if found else None) or conv.recorded.file
            lines.append(
                f"{source}: differs: #{d.index} {d.kind} in {conv.conversation_id}: "
                f"{d.verdict} here, {d.recorded} in evaluate_agent's {conv.recorded.file}: "
                f"{why_it_differs(d)}"
            )
    for s in report.scenarios:
        for sa in s.assertions:
            if sa.verdict == "flaky":
                source = f"{sa.file}:{sa.line}" if sa.file and sa.line else s.scenario
                lines.append(
                    f"{source}: flaky: #{sa.index} {sa.kind} of `{s.scenario}`: "
                    f"{sa.failed}/{sa.judged} runs failed"
                )
    for s in report.scenarios:
        if s.runs > 1:
            rate = "-" if s.pass_rate is None else f"{s.pass_rate:.0%}"
            lines.append(
                f"scenario `{s.scenario}`: {s.runs} runs, {s.passed} passed, {s.failed} "
                f"failed, {s.errored} errored; pass rate {rate}, pass^k "
                f"{_yes_no(s.pass_hat_k).plain}, pass@k {_yes_no(s.pass_at_k).plain}"
            )
    lines.append(summary_text(report).plain)
    lines.extend(filter(None, [one_scenario_line(report)]))
    lines.extend(notes(report))
    return [line.translate(CONTROL_ESCAPES) for line in lines]


def on_terminal(file: TextIO | None = None) -> bool:
    """Whether the report is for a terminal: ``file`` (standard output) is one, or rich
    is told so (``TTY_COMPATIBLE=1``; ``0`` says it is not). Not ``FORCE_COLOR``, which
    CI sets for colours in logs that have no width to wrap a table to."""
    told = os.environ.get("TTY_COMPATIBLE", "")
    if told in ("0", "1"):
        return told == "1"
    stream = sys.stdout if file is None else file
    try:
        return stream.isatty()
    except ValueError:  # closed
        return False


def print_report(report: Report, scenarios: Iterable[Scenario] = ()) -> None:
    """The end-of-run report on standard output: the table on a terminal, else lines."""
    if on_terminal():
        Console(highlight=False).print(ReportTable(report, scenarios))
    else:
        lines = report_lines(report, scenarios)
        sys.stdout.write("\n".join(lines) + "\n")
        sys.stdout.flush()


def _failed_gates(report: Report) -> list[tuple[str, ToolEntryResult]]:
    """With --tool-calls, the gate entries that failed their conversation."""
    if report.expected_tools is None or not report.expected_tools.gated:
        return []
    return [
        (conv.conversation_id, e)
        for conv in report.conversations
        if conv.expected_tools is not None
        for e in conv.expected_tools.entries
        if e.gate and e.verdict == "failed"
    ]


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
            by_scenario = self._tools_by_scenario()
            if by_scenario is not None:
                parts.extend([Text(""), by_scenario])
        else:
            parts.extend(self._by_conversation())
            if any(s.runs > 1 for s in self.report.scenarios):
                parts.extend([Text(""), self._by_scenario()])  # scenarios run several times
        flaky = self._flaky()
        if flaky:
            parts.extend([Text(""), *flaky])
        digest = failure_lines(self.report, self.scenarios)
        if digest:
            parts.extend([Text(""), *digest, Text("")])
        parts.append(summary_text(self.report))
        one = one_scenario_line(self.report)
        if one is not None:
            parts.append(Text(one, style="dim"))
        tools = self.report.expected_tools
        if tools is not None:
            parts.append(_tools_line(tools))
        parts.extend(Text(line, style="yellow") for line in notes(self.report))
        yield Group(*parts)

    def _by_scenario(self) -> Table:
        """A row per scenario: its runs, how they went, and the rates over them."""
        table = Table(title="by scenario", title_justify="left")
        columns = ("scenario", "runs", "passed", "failed", "errored", "stopped",
                   "pass rate", "pass^k", "pass@k", "failed assertions")  # fmt: skip
        for name in columns:
            table.add_column(name, justify="left" if name == "scenario" else "right")
        by_name = {c.scenario: 0 for c in self.report.conversations}
        for conv in self.report.conversations:
            by_name[conv.scenario] += sum(a.verdict == "failed" for a in conv.assertions)
        for s in self.report.scenarios:
            if not s.runs:
                continue
            table.add_row(
                literal(s.scenario),
                str(s.runs),
                Text(str(s.passed), style="green"),
                Text(str(s.failed), style="bold red" if s.failed else ""),
                Text(str(s.errored), style="magenta" if s.errored else ""),
                str(s.stopped_early),
                "-" if s.pass_rate is None else f"{s.pass_rate:.0%}",
                _yes_no(s.pass_hat_k),
                _yes_no(s.pass_at_k),
                str(by_name.get(s.scenario, 0)),
            )
        return table

    def _tools_by_scenario(self) -> Table | None:
        """A row per expected_tools entry of each scenario, across its runs."""
        tools = self.report.expected_tools
        if tools is None or not tools.scenarios:
            return None
        table = Table(title="expected tools by scenario", title_justify="left")
        for name in ("scenario", "#", "entry", "verdict", "failed runs", "recall", "precision"):
            table.add_column(name, justify="left" if name in ("scenario", "entry") else "right")
        for e in tools.scenarios:
            table.add_row(
                literal(e.scenario),
                str(e.index),
                _entry_label(e.kind, e.gate),
                verdict_text(e.verdict) if e.verdict in MARKS else Text(e.verdict, style="yellow"),
                f"{e.failed}/{e.judged}",
                metric_text(e.recall),
                metric_text(e.precision),
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
            if conv.expected_tools is not None:
                parts.append(_tools_table(conv.expected_tools))
            if conv.recorded is not None:
                for d in conv.recorded.differences:
                    parts.append(
                        literal(
                            f"  #{d.index} {d.kind}: {d.verdict} here, {d.recorded} in "
                            f"evaluate_agent's {conv.recorded.file}: {why_it_differs(d)}",
                            "yellow",
                        )
                    )
        return parts

    def _flaky(self) -> list[Text]:
        """The assertions that passed in some runs and failed in others."""
        lines = []
        for s in self.report.scenarios:
            for a in s.assertions:
                if a.verdict == "flaky":
                    where = f"{a.file}:{a.line}  " if a.file and a.line else ""
                    lines.append(
                        Text.assemble(
                            "  ",
                            literal(where, "bold"),
                            (f"#{a.index} {a.kind}", "cyan"),
                            (f" flaky ({a.failed}/{a.judged} runs failed)", "yellow"),
                            " in ",
                            literal(s.scenario, "bold"),
                        )
                    )
        if lines:
            lines.insert(0, Text(f"{len(lines)} flaky assertions:", style="bold yellow"))
        return lines


def _entry_label(kind: str, gate: bool) -> str:
    """``tool_group`` as ``group``, ``tool_called`` as ``called``; ``gate`` marked."""
    return kind.removeprefix("tool_") + (" gate" if gate else "")


def _tools_table(scores: ToolCallScores) -> Table:
    """A conversation's expected_tools entries: Rasa's tool-call scores."""
    table = Table(
        title=Text.assemble(
            "  expected tools: ",
            f"recall {metric_text(scores.recall)}, precision {metric_text(scores.precision)}, ",
            f"accuracy {metric_text(scores.accuracy)}",
        ),
        title_justify="left",
        expand=False,
    )
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("entry", no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    table.add_column("turn", justify="right", no_wrap=True)
    table.add_column("recall", justify="right", no_wrap=True)
    table.add_column("precision", justify="right", no_wrap=True)
    table.add_column("reason", overflow="fold")
    for e in scores.entries:
        table.add_row(
            str(e.index),
            _entry_label(e.kind, e.gate),
            verdict_text(e.verdict),
            "-" if e.turn is None else str(e.turn),
            metric_text(e.recall),
            metric_text(e.precision),
            literal(e.reason),
        )
    return table


def _tools_line(tools: ExpectedToolsSummary) -> Text:
    """The summary of expected_tools (:func:`tools_line`), failed gates in colour."""
    return Text(tools_line(tools), style="bold red" if tools.gated and tools.gates_failed else "")


def _yes_no(value: bool | None) -> Text:
    if value is None:
        return Text("-")
    return Text("yes", style="green") if value else Text("no", style="red")
