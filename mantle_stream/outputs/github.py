"""GitHub Actions: workflow-command annotations and a Markdown step summary, from the report.

A sink that acts once, at :meth:`GithubAnnotations.on_end`: per scenario
assertion across its runs (not per run) it prints an ``::error`` for one
that failed in any run that judged it (``flaky`` in its title when it passed
in others: ``flaky: 2/10 runs failed``) and, ranked after those, one that
errored in a run (an error of the harness, not of the agent: ``errored`` in
its title); each at the assertion's file and line, with the reason from one
failing run. Each of them fails the job (exit 1, or 2 for an errored one), so
each is an error: a ``::warning`` would leave a failed job whose annotations
show no error.
GitHub shows at most ten annotations of a level per step and drops the rest
silently, so at most :data:`MAX_PER_LEVEL` are printed per level, then one
``::notice`` says how many were left out.

With a summary path (``$GITHUB_STEP_SUMMARY``) it appends a Markdown summary:
a headline, a row per scenario, the failing and flaky assertions with their
``file:line``; kept under GitHub's 1 MiB limit for the whole file.

Escaping follows the workflow command format (actions/toolkit ``command.ts``):
message data ``%`` → ``%25``, CR → ``%0D``, LF → ``%0A``; property values
(file, title) also ``:`` → ``%3A`` and ``,`` → ``%2C``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TextIO

from mantle_stream.core.verdicts import Decision, StopMessage

if TYPE_CHECKING:
    from mantle_stream.outputs.report import Report, ScenarioAssertion, ScenarioResult

__all__ = [
    "MAX_PER_LEVEL",
    "SUMMARY_LIMIT",
    "Annotation",
    "GithubAnnotations",
    "escape_data",
    "escape_property",
    "ranked",
    "step_summary",
    "workflow_commands",
    "write_summary",
]

#: Annotations of one level GitHub shows per step (it drops the others silently).
MAX_PER_LEVEL = 10
#: The most a step summary file may hold: GitHub refuses the whole summary above it.
SUMMARY_LIMIT = 1 << 20
#: A reason quoted in the summary is cut to this many characters.
MAX_SUMMARY_REASON = 500


def escape_data(text: str) -> str:
    """A workflow command's message (after ``::``)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value (``file=``, ``title=``)."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


#: ``warning`` is for what does not fail the job: no assertion annotation is one.
Level = Literal["error", "warning"]
#: Ranked in this order: failed before errored, deterministic before flaky.
Class = Literal["failed", "flaky", "errored"]
_CLASS_RANK = {"failed": 0, "flaky": 1, "errored": 2}


@dataclass(frozen=True)
class Annotation:
    """One scenario assertion worth a look, across the scenario's runs."""

    level: Level
    cls: Class
    scenario: str
    index: int
    kind: str
    file: str | None
    line: int | None
    failed: int  # runs where it failed (errored, for an errored one)
    judged: int  # runs where it passed or failed (errored: runs where it errored)
    conversation_id: str | None  # the run the reason comes from
    reason: str

    @property
    def name(self) -> str:
        """The assertion: its scenario, index and kind."""
        return f"{self.scenario} #{self.index} {self.kind}"

    @property
    def title(self) -> str:
        """The annotation's title: the assertion, and whether it failed only sometimes
        or could not be evaluated (the job's list of errors shows titles only)."""
        return self.name if self.cls == "failed" else f"{self.name} ({self.cls})"

    @property
    def headline(self) -> str:
        runs = "run" if self.judged == 1 else "runs"
        if self.cls == "failed":
            return f"failed in {self.judged}/{self.judged} {runs}"
        if self.cls == "flaky":
            return f"flaky: {self.failed}/{self.judged} runs failed"
        return (
            f"errored in {self.failed} {'run' if self.failed == 1 else 'runs'}, "
            "could not be evaluated: an error of the harness, not a failure"
        )

    @property
    def message(self) -> str:
        where = f" (in {self.conversation_id})" if self.conversation_id else ""
        return f"{self.headline}{where}: {self.reason}" if self.reason else self.headline

    @property
    def where(self) -> str:
        """``file:line``, or ``(no file)`` for a scenario loaded from text."""
        if self.file is None:
            return "(no file)"
        return self.file if self.line is None else f"{self.file}:{self.line}"

    def command(self) -> str:
        props = []
        if self.file is not None:
            props.append(f"file={escape_property(self.file)}")
            if self.line is not None:
                props.append(f"line={self.line}")
        props.append(f"title={escape_property(self.title)}")
        return f"::{self.level} {','.join(props)}::{escape_data(self.message)}"


def _reasons(report: Report) -> dict[tuple[str, int, str], tuple[str, str]]:
    """(scenario, index, verdict) → (conversation_id, reason) of the first such run."""
    found: dict[tuple[str, int, str], tuple[str, str]] = {}
    for conv in report.conversations:
        if conv.scenario is None:
            continue
        for a in conv.assertions:
            if a.verdict in ("failed", "errored"):
                found.setdefault(
                    (conv.scenario, a.index, a.verdict), (conv.conversation_id, a.reason)
                )
    return found


def _annotation(
    scenario: ScenarioResult,
    a: ScenarioAssertion,
    reasons: dict[tuple[str, int, str], tuple[str, str]],
) -> Annotation | None:
    if a.verdict in ("failed", "flaky"):
        cls: Class = "failed" if a.verdict == "failed" else "flaky"
        failed, judged = a.failed, a.judged
        cid, reason = reasons.get((scenario.scenario, a.index, "failed"), (None, ""))
    elif a.errored:  # could not be evaluated in some run (whatever the others did)
        cls, failed, judged = "errored", a.errored, a.errored
        cid, reason = reasons.get((scenario.scenario, a.index, "errored"), (None, ""))
    else:
        return None
    file = a.file if a.file is not None else scenario.file
    return Annotation(
        "error", cls, scenario.scenario, a.index, a.kind, file, a.line if file else None,
        failed, judged, cid, reason,
    )  # fmt: skip


def ranked(report: Report) -> list[Annotation]:
    """Every scenario assertion that failed, was flaky or errored, ranked: deterministic
    failures, then flaky ones (the larger share of failed runs first), then errored
    ones; otherwise in the order of the scenarios and their assertions."""
    reasons = _reasons(report)
    found = [
        ann
        for scenario in report.scenarios
        for a in scenario.assertions
        if (ann := _annotation(scenario, a, reasons)) is not None
    ]
    return sorted(
        found,
        key=lambda n: (
            _CLASS_RANK[n.cls],
            -n.failed / n.judged if n.cls == "flaky" and n.judged else 0.0,
        ),
    )


def workflow_commands(report: Report) -> list[str]:
    """The annotations as workflow commands, at most :data:`MAX_PER_LEVEL` per level,
    then one ``::notice`` saying how many were left out."""
    shown: list[str] = []
    left: dict[Level, int] = {"error": 0, "warning": 0}
    per_level: dict[Level, int] = {"error": 0, "warning": 0}
    for ann in ranked(report):
        if per_level[ann.level] < MAX_PER_LEVEL:
            per_level[ann.level] += 1
            shown.append(ann.command())
        else:
            left[ann.level] += 1
    if any(left.values()):
        parts = [
            f"{n} {'error' if level == 'error' else 'warning'}{'s' if n != 1 else ''}"
            for level, n in left.items()
            if n
        ]
        total = sum(left.values())
        shown.append(
            f"::notice title={escape_property('mantle-stream')}::"
            + escape_data(
                f"{total} more {'annotation' if total == 1 else 'annotations'} left out "
                f"({', '.join(parts)}): GitHub shows {MAX_PER_LEVEL} per level; the step "
                "summary and the report list every one"
            )
        )
    return shown


# ------------------------------------------------------------------ step summary


def _md(text: str, *, cell: bool = False) -> str:
    """Text for a Markdown list item (or table cell): one line, no HTML (a cell: no
    column break either)."""
    text = " ".join(text.split()).replace("<", "&lt;")
    return text.replace("|", "\\|") if cell else text


def _cut(text: str, limit: int = MAX_SUMMARY_REASON) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _yes_no(value: bool | None) -> str:
    return "—" if value is None else "yes" if value else "no"


def _rate(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f}".removesuffix(".0") + "%"


#: A summary line: its text and what it lists ("scenario", "assertion", or None).
_Line = tuple[str, str | None]


def _summary_lines(report: Report) -> list[_Line]:
    runs = sum(s.runs for s in report.scenarios)
    passed = sum(s.passed for s in report.scenarios)
    n = len(report.scenarios)
    lines: list[_Line] = [
        (
            f"## mantle-stream: {passed}/{runs} {'run' if runs == 1 else 'runs'} passed "
            f"across {n} {'scenario' if n == 1 else 'scenarios'}",
            None,
        ),
        ("", None),
    ]
    if report.summary.unmatched:
        lines += [(f"{report.summary.unmatched} conversations matched no scenario.", None)]
        lines += [("", None)]
    if not report.summary.complete:
        lines += [("The run stopped before its end: some verdicts are still pending.", None)]
        lines += [("", None)]
    lines += [
        (
            "| scenario | runs | passed | failed | errored | stopped early | pass rate "
            "| pass^k | pass@k |",
            None,
        ),
        ("|---|--:|--:|--:|--:|--:|--:|:-:|:-:|", None),
    ]
    for s in report.scenarios:
        cells = [
            _md(s.scenario, cell=True),
            str(s.runs),
            str(s.passed),
            str(s.failed),
            str(s.errored),
            str(s.stopped_early),
            _rate(s.pass_rate),
            _yes_no(s.pass_hat_k),
            _yes_no(s.pass_at_k),
        ]
        lines.append(("| " + " | ".join(cells) + " |", "scenario"))
    found = ranked(report)
    for cls, heading in (
        ("failed", "Failing assertions (failed in every run)"),
        ("flaky", "Flaky assertions"),
        ("errored", "Errored assertions (not evaluated: an error of the harness)"),
    ):
        these = [a for a in found if a.cls == cls]
        if not these:
            continue
        lines += [("", None), (f"### {heading}", None), ("", None)]
        for a in these:
            reason = f" — {_md(_cut(a.reason))}" if a.reason else ""
            where = f" in `{_md(a.conversation_id)}`" if a.conversation_id else ""
            lines.append(
                (
                    f"- `{_md(a.where)}` {_md(a.name)}: {_md(a.headline)}{where}{reason}",
                    "assertion",
                )
            )
    return lines


def step_summary(report: Report, limit: int = SUMMARY_LIMIT) -> str:
    """The Markdown summary, at most ``limit`` bytes (UTF-8): lines that do not fit are
    left out, and a last line says how many scenario rows and assertions they held."""
    lines = _summary_lines(report)
    reserve = 300  # room for the line saying what was left out
    out: list[str] = []
    size = 0
    for i, (text, _what) in enumerate(lines):
        cost = len(text.encode()) + 1
        if size + cost > limit - reserve:
            rest = [what for _, what in lines[i:]]
            rows, asserts = rest.count("scenario"), rest.count("assertion")
            out += [
                "",
                f"*Summary cut to stay under GitHub's {SUMMARY_LIMIT >> 20} MiB limit: "
                f"{rows} scenario {'row' if rows == 1 else 'rows'} and {asserts} "
                f"{'assertion' if asserts == 1 else 'assertions'} left out; the JSON report "
                "(`--format json`) lists them all.*",
            ]
            break
        out.append(text)
        size += cost
    return "\n".join(out) + "\n"


def write_summary(report: Report, path: str) -> None:
    """Append the summary to ``path``, within what is left of the 1 MiB limit."""
    try:
        used = os.path.getsize(path)
    except OSError:
        used = 0
    room = SUMMARY_LIMIT - used
    if room < 1024:
        print(
            f"mantle-stream: warning: no room left in the step summary `{path}` "
            f"({used} bytes of {SUMMARY_LIMIT}): not written",
            file=sys.stderr,
        )
        return
    text = step_summary(report, room - 1)  # the separating newline
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(("\n" if used else "") + text)
    except OSError as exc:
        print(
            f"mantle-stream: warning: cannot write the step summary `{path}`: {exc.strerror}",
            file=sys.stderr,
        )


class GithubAnnotations:
    """A :class:`~mantle_stream.outputs.sink.Sink` that acts at the end: workflow
    commands on ``file`` (standard output, the one current at the end, when None) and,
    with ``summary`` (a path: ``$GITHUB_STEP_SUMMARY``), the Markdown summary appended.
    """

    def __init__(self, file: TextIO | None = None, summary: str | None = None) -> None:
        self.file = file
        self.summary = summary

    def on_decisions(self, decisions: list[Decision]) -> None:
        """Annotations are per scenario across runs: only the report has them."""

    def on_stop(self, message: StopMessage) -> None:
        """See :meth:`on_decisions`."""

    def on_end(self, report: Report) -> None:
        _print(workflow_commands(report), self.file)
        if self.summary:
            write_summary(report, self.summary)

    def close(self) -> None:
        """Standard output is not this sink's to close."""


def _print(lines: Iterable[str], file: TextIO | None) -> None:
    stream = sys.stdout if file is None else file
    for line in lines:
        stream.write(line + "\n")
    stream.flush()
