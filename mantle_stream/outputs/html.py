"""A picture of a run: the report as one self-contained HTML file (``--html PATH``).

The page holds the run's totals, each scenario's runs and rates (pass rate,
pass^k, pass@k, its assertions across runs) and, per conversation, a verdict
timeline drawn in inline SVG: the ``sequence`` axis, the turns' boundaries,
one lane per assertion with a mark where it was decided, and where the
conversation was stopped early. Failures come first.

Self-contained by construction: inline CSS, no script, no font, image or
link to fetch, and a Content-Security-Policy that forbids any of them.
Everything taken from the report (ids, scenario names, reasons quoting user
and agent text, file names) is escaped. A report of many conversations stays
bounded: the first :data:`MAX_TIMELINES` (failures first) get a timeline,
the next ones up to :data:`MAX_ROWS` a row each, and the rest are counted
(the page says so).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from mantle_stream.core.verdicts import Decision, StopMessage, ToolCallScores, VerdictRecord
from mantle_stream.outputs.atomic import write_atomically
from mantle_stream.outputs.html_text import escaped, reason_html, where_text
from mantle_stream.outputs.html_timeline import MARKS, legend, stopped_at, timeline
from mantle_stream.outputs.notes import counted, gates_failed
from mantle_stream.outputs.report import (
    ExpectedToolsSummary,
    Report,
    ReportConversation,
    ScenarioResult,
    metric_text,
    notes,
    why_it_differs,
)

__all__ = ["CSP", "MAX_ROWS", "MAX_TIMELINES", "HtmlWriter", "render_html", "stopped_at"]

#: Conversations drawn with a timeline (failures first); the next ones get a row each.
MAX_TIMELINES = 100
#: Conversations listed at all (a timeline or a row); the rest are only counted.
MAX_ROWS = 1000

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"

#: Conversations in the order a reader wants them: failures first.
ORDER = {"failed": 0, "errored": 1, "pending": 2, "skipped": 3, "passed": 4}

_CSS = """
:root { color-scheme: light; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial,
  sans-serif; margin: 0 auto; max-width: 1100px; padding: 16px 24px 48px; color: #1f2328;
  background: #ffffff; }
h1 { font-size: 22px; margin: 8px 0 4px; }
h2 { font-size: 18px; margin: 28px 0 8px; border-bottom: 1px solid #d0d7de; padding-bottom: 4px; }
h3 { font-size: 15px; margin: 18px 0 6px; }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
  font-size: 12.5px; }
.tiles { display: flex; flex-wrap: wrap; gap: 10px; margin: 12px 0; }
.tile { border: 1px solid #d0d7de; border-radius: 6px; padding: 8px 14px; min-width: 96px;
  background: #f6f8fa; }
.tile .n { display: block; font-size: 24px; font-weight: 600; }
.tile.passed { border-left: 6px solid #1a7f37; }
.tile.failed { border-left: 6px solid #cf222e; }
.tile.errored { border-left: 6px solid #bc4c00; }
.tile.skipped { border-left: 6px solid #6e7781; }
table { border-collapse: collapse; margin: 6px 0 12px; }
th, td { border: 1px solid #d0d7de; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f6f8fa; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.badge { display: inline-block; min-width: 1.4em; padding: 0 6px; border-radius: 10px;
  color: #ffffff; font-weight: 600; font-size: 12px; text-align: center; }
.badge.passed { background: #1a7f37; }
.badge.failed { background: #cf222e; }
.badge.errored { background: #bc4c00; }
.badge.skipped, .badge.not-judged { background: #6e7781; }
.badge.pending { background: #8250df; }
.badge.flaky { background: #9a6700; }
.conv { border: 1px solid #d0d7de; border-radius: 6px; padding: 8px 12px; margin: 14px 0; }
.conv.failed { border-left: 6px solid #cf222e; }
.conv.errored { border-left: 6px solid #bc4c00; }
.conv.passed { border-left: 6px solid #1a7f37; }
.conv.pending { border-left: 6px solid #8250df; }
.conv h3 { margin: 2px 0 4px; word-break: break-all; }
.meta { color: #59636e; font-size: 13px; }
.reasons { margin: 4px 0 0; padding-left: 20px; }
.reasons li { margin: 2px 0; white-space: pre-wrap; word-break: break-word; }
svg { display: block; max-width: 100%; height: auto; }
svg text { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
.legend { display: flex; flex-wrap: wrap; gap: 14px; align-items: center; margin: 6px 0; }
.legend span { display: inline-flex; align-items: center; gap: 4px; }
.note { background: #fff8c5; border: 1px solid #d4a72c; border-radius: 6px; padding: 6px 10px;
  margin: 8px 0; }
ul.notes { padding-left: 20px; }
details.scenario { margin: 4px 0; }
details.scenario summary { cursor: pointer; }
a { color: #0969da; }
"""


def _badge(verdict: str) -> str:
    cls = verdict.replace(" ", "-")
    letter = {"flaky": "~", "not judged": "-"}.get(verdict) or MARKS.get(verdict, ("", "?", ""))[1]
    return f'<span class="badge {cls}">{letter} {escaped(verdict)}</span>'


def _rate(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.0f}%"


def _yes(value: bool | None) -> str:
    return "—" if value is None else ("yes" if value else "no")


def _scenario_row(s: ScenarioResult, number: int) -> str:
    """A scenario's runs and rates: one row of the scenarios table."""
    return (
        f'<tr><td><a href="#scenario-{number}">{escaped(s.scenario)}</a></td>'
        f'<td class="num">{s.runs}</td><td class="num">{s.passed}</td>'
        f'<td class="num">{s.failed}</td><td class="num">{s.errored}</td>'
        f'<td class="num">{s.stopped_early}</td><td class="num">{_rate(s.pass_rate)}</td>'
        f'<td class="num">{_yes(s.pass_hat_k)}</td><td class="num">{_yes(s.pass_at_k)}</td>'
        f"<td>{_across(s)}</td></tr>"
    )


def _across(s: ScenarioResult) -> str:
    counts = Counter(a.verdict for a in s.assertions)
    order = ("failed", "flaky", "errored", "not judged", "passed")
    return " ".join(f"{_badge(v)}&nbsp;{counts[v]}" for v in order if counts[v])


def _scenario(s: ScenarioResult, number: int) -> str:
    """A scenario's assertions across its runs (folded: open it to read)."""
    rows = []
    for a in s.assertions:
        rows.append(
            f'<tr><td class="num">{a.index}</td><td><code>{escaped(a.kind)}</code></td>'
            f"<td>{_badge(a.verdict)}</td>"
            f'<td class="num">{a.judged - a.failed}</td>'
            f'<td class="num">{a.failed} of {a.judged}</td>'
            f'<td class="num">{a.errored}</td><td class="num">{a.skipped}</td>'
            f"<td><code>{escaped(where_text(a.file, a.line))}</code></td></tr>"
        )
    where = f' <span class="meta">{escaped(s.file)}</span>' if s.file else ""
    return (
        f'<details class="scenario" id="scenario-{number}"><summary><strong>'
        f"{escaped(s.scenario)}</strong>{where}: {counted(len(s.assertions), 'assertion')} "
        f"across {counted(s.runs, 'run')}</summary>"
        '<table class="assertions"><tr><th>#</th><th>assertion</th><th>across runs</th>'
        "<th>passed</th><th>failed</th><th>errored</th><th>not judged</th><th>where</th></tr>"
        + "".join(rows)
        + "</table></details>"
    )


def _counts(assertions: Iterable[VerdictRecord]) -> str:
    counts: Counter[str] = Counter(a.verdict for a in assertions)
    return ", ".join(f"{counts[v]} {v}" for v in MARKS if counts[v])


def _problem(a: VerdictRecord) -> str:
    """A failed or errored assertion of a conversation: where it was decided, and why."""
    where = where_text(a.file, a.line)
    return (
        f"<li>{_badge(a.verdict)} <code>#{a.index} {escaped(a.kind)}</code> "
        f"{'at the end' if a.decided_at is None else f'at sequence {a.decided_at}'}"
        f"{' (' + escaped(where) + ')' if where else ''}: "
        f'<span class="reason">{reason_html(a.reason)}</span></li>'
    )


def _conversation(conv: ReportConversation) -> str:
    meta = [escaped(conv.scenario or "no scenario"), counted(conv.events, "event")]
    meta.append(counted(len(conv.turn_starts), "turn"))
    if conv.duration is not None:
        meta.append(f"{conv.duration:.1f} s")
    meta.append(_counts(conv.assertions))
    stop = stopped_at(conv)
    if conv.stopped_early:
        meta.append("stopped early" + ("" if stop is None else f" at sequence {stop}"))
    problems = [a for a in conv.assertions if a.verdict in ("failed", "errored")]
    listed = "".join(_problem(a) for a in problems)
    if conv.recorded is not None and conv.recorded.differences:
        listed += "".join(
            f"<li>differs from <code>{escaped(conv.recorded.file)}</code>: "
            f"<code>#{d.index} {escaped(d.kind)}</code> is {escaped(d.verdict)} here, "
            f"{escaped(d.recorded)} there: {escaped(why_it_differs(d))}</li>"
            for d in conv.recorded.differences
        )
    return (
        f'<section class="conv {escaped(conv.verdict)}" data-verdict="{escaped(conv.verdict)}">'
        f"<h3>{_badge(conv.verdict)} <code>{escaped(conv.conversation_id)}</code></h3>"
        f'<div class="meta">{" · ".join(meta)}</div>'
        + timeline(conv)
        + (f'<ul class="reasons">{listed}</ul>' if listed else "")
        + ("" if conv.expected_tools is None else _tools(conv.expected_tools))
        + "</section>"
    )


def _entry_cell(kind: str, gate: bool) -> str:
    return f"<td><code>{escaped(kind)}</code>{' gate' if gate else ''}</td>"


def _metric_cells(recall: float | None, precision: float | None) -> str:
    return (
        f'<td class="num">{metric_text(recall)}</td><td class="num">{metric_text(precision)}</td>'
    )


def _tools(scores: ToolCallScores) -> str:
    """A conversation's expected_tools entries: verdict, turn, recall, precision, reason."""
    rows = "".join(
        f'<tr><td class="num">{e.index}</td>{_entry_cell(e.kind, e.gate)}'
        f'<td>{_badge(e.verdict)}</td><td class="num">{"—" if e.turn is None else e.turn}</td>'
        f"{_metric_cells(e.recall, e.precision)}"
        f'<td class="reason">{reason_html(e.reason)}</td></tr>'
        for e in scores.entries
    )
    return (
        f'<div class="meta">expected tools: recall {metric_text(scores.recall)}, precision '
        f"{metric_text(scores.precision)}, accuracy {metric_text(scores.accuracy)}</div>"
        '<table class="assertions tools"><tr><th>#</th><th>entry</th><th>verdict</th>'
        "<th>turn</th><th>recall</th><th>precision</th><th>reason</th></tr>" + rows + "</table>"
    )


def _tools_section(tools: ExpectedToolsSummary) -> str:
    """Every scenario's expected_tools entries across its runs, and the run's means."""
    rows = "".join(
        f'<tr><td>{escaped(e.scenario)}</td><td class="num">{e.index}</td>'
        f"{_entry_cell(e.kind, e.gate)}"
        f'<td>{_badge(e.verdict)}</td><td class="num">{e.failed} of {e.judged}</td>'
        f"{_metric_cells(e.recall, e.precision)}"
        f"<td><code>{escaped(where_text(e.file, e.line))}</code></td></tr>"
        for e in tools.scenarios
    )
    gates = gates_failed(tools) if tools.gates_failed else "no gate entry failed"
    return (
        '<section id="expected-tools"><h2>Expected tools</h2>'
        f'<p class="meta">{tools.passed} of {tools.entries} entries passed in '
        f"{counted(tools.conversations, 'conversation')} · recall {metric_text(tools.recall)} · "
        f"precision {metric_text(tools.precision)} · accuracy {metric_text(tools.accuracy)} · "
        f"{escaped(gates)}</p>"
        '<table class="assertions tools"><tr><th>scenario</th><th>#</th><th>entry</th>'
        "<th>across runs</th><th>failed</th><th>recall</th><th>precision</th><th>where</th></tr>"
        + rows
        + "</table></section>"
    )


def _row(conv: ReportConversation) -> str:
    return (
        f"<tr><td>{_badge(conv.verdict)}</td><td><code>{escaped(conv.conversation_id)}</code></td>"
        f'<td>{escaped(conv.scenario or "")}</td><td class="num">{conv.events}</td>'
        f"<td>{_counts(conv.assertions)}</td></tr>"
    )


def _tile(name: str, value: object, cls: str = "") -> str:
    key = name.replace(" ", "-")
    return (
        f'<div class="tile {cls}"><span class="n" id="total-{key}">{escaped(value)}</span>'
        f"{escaped(name)}</div>"
    )


def render_html(report: Report, *, title: str = "mantle-stream run") -> str:
    """The report as one self-contained HTML document (a string)."""
    parts = _header(report, title)
    lines = notes(report)
    if lines:
        parts.append(
            '<section id="notes"><h2>Notes</h2><ul class="notes">'
            + "".join(f"<li>{escaped(line)}</li>" for line in lines)
            + "</ul></section>"
        )
    if report.scenarios:
        parts += _scenarios_section(report.scenarios)
    if report.expected_tools is not None:
        parts.append(_tools_section(report.expected_tools))
    parts += _conversations_section(report)
    if report.unmatched:
        parts.append(
            f'<section id="unmatched"><h2>Not judged ({len(report.unmatched)})</h2><ul>'
            + "".join(
                f"<li><code>{escaped(u.conversation_id)}</code> ({counted(u.events, 'event')})"
                f": {escaped(u.why())}</li>"
                for u in report.unmatched[:MAX_ROWS]
            )
            + "</ul></section>"
        )
    parts.append("</body></html>\n")
    return "".join(parts)


def _header(report: Report, title: str) -> list[str]:
    """The document's head and the page's header: the run's totals as tiles and a line."""
    s = report.summary
    errored = sum(1 for c in report.conversations if c.verdict == "errored")
    runs = sorted({r.runs for r in report.scenarios})
    per_scenario = (
        "—" if not runs else str(runs[0]) if len(runs) == 1 else f"{runs[0]} to {runs[-1]}"
    )
    stopped = sum(c.stopped_early for c in report.conversations)
    return [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escaped(title)}</title><style>{_CSS}</style></head><body>",
        f"<header><h1>{escaped(title)}</h1>",
        '<div class="tiles">',
        _tile("conversations", s.conversations),
        _tile("passed", s.passed, "passed"),
        _tile("failed", s.failed, "failed"),
        _tile("errored", errored, "errored"),
        _tile("skipped", s.skipped, "skipped"),
        _tile("runs per scenario", per_scenario),
        "</div>",
        f'<p class="meta">{counted(s.assertions, "assertion")} · '
        f"{counted(len(report.scenarios), 'scenario')} · "
        f"{counted(stopped, 'conversation')} stopped early (their undecided assertions "
        f"skipped) · {s.errored} errored {'assertion' if s.errored == 1 else 'assertions'} · "
        f"{s.unmatched} not judged"
        + ("" if s.complete else " · <strong>incomplete run</strong>")
        + "</p></header>",
    ]


def _scenarios_section(scenarios: list[ScenarioResult]) -> list[str]:
    """Each scenario's runs and rates as a table, then its assertions across its runs."""
    return [
        '<section id="scenarios"><h2>Scenarios</h2>',
        '<p class="meta">pass rate: passed ÷ (passed + failed) runs; pass^k: all k '
        "judged runs passed; pass@k: at least one did. Per assertion: passed in all "
        "judged runs, failed in all, flaky (failed of judged), errored, or not judged.</p>",
        '<table class="rates"><tr><th>scenario</th><th>runs</th><th>passed</th>'
        "<th>failed</th><th>errored</th><th>stopped early</th><th>pass rate</th>"
        "<th>pass^k</th><th>pass@k</th><th>assertions across runs</th></tr>"
        + "".join(_scenario_row(r, n) for n, r in enumerate(scenarios, 1))
        + "</table>",
        *(_scenario(r, n) for n, r in enumerate(scenarios, 1)),
        "</section>",
    ]


def _conversations_section(report: Report) -> list[str]:
    """The conversations, failures first: the first :data:`MAX_TIMELINES` drawn, the
    next ones up to :data:`MAX_ROWS` a row each, the rest counted (the page says so)."""
    s = report.summary
    convs = sorted(report.conversations, key=lambda c: ORDER.get(c.verdict, 5))
    parts = [f'<section id="conversations"><h2>Conversations ({len(convs)})</h2>']
    if convs:
        parts.append(legend())
    full, rows, rest = convs[:MAX_TIMELINES], convs[MAX_TIMELINES:MAX_ROWS], convs[MAX_ROWS:]
    if rows or rest or s.omitted:
        said = [f"Timelines for the first {len(full)} conversations (failures first)"]
        if rows:
            said.append(f"the next {len(rows)} one row each")
        if rest:
            counted = Counter(c.verdict for c in rest)
            said.append(
                f"{len(rest)} more only counted ("
                + ", ".join(f"{n} {v}" for v, n in sorted(counted.items()))
                + ")"
            )
        if s.omitted:
            said.append(
                f"{s.omitted} finished conversations were let go of during the run and are "
                "only in the totals"
            )
        parts.append(f'<p class="note" id="bounded">{"; ".join(said)}.</p>')
    parts.extend(_conversation(c) for c in full)
    if rows:
        parts.append(
            '<table class="more"><tr><th>verdict</th><th>conversation</th><th>scenario</th>'
            "<th>events</th><th>assertions</th></tr>" + "".join(_row(c) for c in rows) + "</table>"
        )
    parts.append("</section>")
    return parts


class HtmlWriter:
    """``--html PATH``: the picture of the run, written whole at the end (a ``Sink``)."""

    def __init__(self, path: str, *, title: str = "mantle-stream run") -> None:
        self.path = path
        self.title = title

    def on_decisions(self, decisions: list[Decision]) -> None:
        pass

    def on_stop(self, message: StopMessage) -> None:
        pass

    def on_end(self, report: Report) -> None:
        write_atomically(self.path, render_html(report, title=self.title).encode("utf-8"))

    def close(self) -> None:
        pass
