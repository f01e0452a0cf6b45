"""A command's run as the user sees it: its sinks, its live view or progress, its end.

Between :mod:`mantle_stream.cli.commands` (what each command does) and the
execution strategies (:mod:`mantle_stream.run`): :class:`RunOutputs` holds
one run's sinks (composed by :mod:`mantle_stream.run.sinks`), draws the live
view or the progress bar while the run lasts, and :func:`finish` builds the
report, prints it and maps the outcome to the exit status.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Concatenate, ParamSpec, Protocol

import anyio
import msgspec
from rich.console import Console
from rich.live import Live

from mantle_stream.core.engine.evaluator import Evaluator
from mantle_stream.core.engine.partition import JudgedConversations
from mantle_stream.core.recorded import RecordedRun
from mantle_stream.core.scenario.load import load_scenarios
from mantle_stream.core.scenario.model import Scenario
from mantle_stream.core.verdicts import Decision
from mantle_stream.feeds import Feed
from mantle_stream.outputs.live import LiveSnapshot, LiveView, summary_line
from mantle_stream.outputs.progress import ReadProgress
from mantle_stream.outputs.report import (
    EXIT_ERROR,
    EXIT_FAILED,
    EXIT_OK,
    GateReport,
    GroupReport,
    Report,
    ReportConversation,
    build_report,
    exit_status,
    notes,
    strict_problems,
)
from mantle_stream.outputs.table import failure_lines, literal, print_report
from mantle_stream.run.config import RunConfig
from mantle_stream.run.sinks import compose_sinks
from mantle_stream.run.sources import stop_on_signals
from mantle_stream.runner import Runner, RunOutcome

__all__ = [
    "EXIT_BROKEN_PIPE",
    "EXIT_INTERRUPTED",
    "RunOutputs",
    "after_signals",
    "closing_console",
    "drop_stdout",
    "finish",
    "load_checked",
    "refresh",
]

EXIT_INTERRUPTED = 130
#: Standard output was closed by its reader (a pipe into `head`): 128 + SIGPIPE.
EXIT_BROKEN_PIPE = 141

#: The arguments of what _outputs_outrank wraps, after the session.
_P = ParamSpec("_P")


def drop_stdout() -> None:
    """Standard output to the null device: what is still buffered for it cannot be
    written, and the interpreter's final flush must not fail on it again."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def load_checked(paths: Sequence[str]) -> list[Scenario]:
    """The scenarios of ``paths``, their names and file stems unambiguous."""
    scenarios = load_scenarios(list(paths))
    Evaluator(scenarios)  # refuses names and file stems that would be ambiguous
    return scenarios


class _Progress(Protocol):
    """What the live view reads of a run: a Runner's, or a Kafka member's."""

    @property
    def elapsed(self) -> float: ...

    def events_per_second(self) -> float: ...

    @property
    def latest(self) -> deque[Decision]: ...

    @property
    def stopped_early(self) -> Sequence[str]: ...


class RunOutputs:
    """One run's outputs: its sinks (JSONL, JUnit, plain lines), the live view, the report."""

    def __init__(
        self,
        config: RunConfig,
        evaluator: Evaluator,
        *,
        live: bool,
        source: str,
        recorded: dict[str, RecordedRun] | None = None,
    ) -> None:
        self.config = config
        self.evaluator = evaluator
        self.source = source
        self.console = Console(highlight=False)
        self.live = live and self.console.is_terminal
        self.plain = live and not self.live  # watch into a pipe: one line per verdict
        # A check's progress bar: the feed's size in bytes, None when unknown,
        # False for no bar (watch and demo have their live view).
        self.progress_total: int | bool | None = False
        self.recorded = recorded or {}  # --results: the runs evaluate_agent saved
        # Every batch of decisions and every stop message goes to each sink, in
        # the order composed; the final report too (finish), then they are closed
        # (close). An output that cannot be written fails on its own, with a line
        # saying so; the others are written, and the exit status says one failed.
        composed = compose_sinks(
            config,
            evaluator,
            plain=self.plain,
            recorded=self.recorded,
            on_failure=_say_output_failed,
        )
        self.sinks = composed.sinks
        self.closing = composed.closing  # told the report after the human output
        self.refused: dict[str, int] = {}  # clients the listener turned away, by reason
        self.unread: dict[str, str] = {}  # conversations the source could not read, why
        self.interrupted = False  # Ctrl-C or SIGTERM ended the run: the closing view says so
        self.notices: list[str] = []  # what the source said about how it was read

    def runner(self, **options: Any) -> Runner:
        """A runner over the evaluator that tells every sink what it decides and stops.

        The sinks only hear the stop messages sent to simulators on connections:
        a conversation read from a file or pipe is never stopped.
        """
        return Runner(
            self.evaluator,
            on_decisions=self.sinks.on_decisions,
            on_stop=self.sinks.on_stop,
            stop_unconnected=False,
            **options,
        )

    def snapshot(self, runner: _Progress, *, final: bool = False) -> LiveSnapshot:
        statistics = self.evaluator.statistics()
        omitted = self.evaluator.omitted()
        return LiveSnapshot(
            conversations=tuple(self.evaluator.results()),
            statistics=statistics,
            elapsed=runner.elapsed,
            events_per_second=runner.events_per_second(),
            latest=tuple(runner.latest),
            stopped_early=tuple(runner.stopped_early),
            source=self.source,
            bad_events=statistics.bad_events,
            final=final,
            interrupted=final and self.interrupted,
            omitted=(omitted["passed"], omitted["failed"]),
            command=self.config.command,
        )

    async def run(
        self, runner: Runner, feed: Feed, extra: Callable[[anyio.abc.TaskGroup], Any] | None = None
    ) -> RunOutcome:
        outcome: RunOutcome | None = None

        async def drive(tg: anyio.abc.TaskGroup) -> None:
            nonlocal outcome
            outcome = await runner.run(feed)
            self.interrupted = outcome.ending == "cancelled"
            tg.cancel_scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(stop_on_signals, runner)
            if extra is not None:
                extra(tg)
            if self.live:
                with self.live_view(runner) as view:
                    tg.start_soon(refresh, view, self, runner)
                    await drive(tg)
            elif self.progress_total is not False and not self.plain:
                # A check: its progress on standard error when that is a terminal.
                with ReadProgress(self.progress_total) as bar:
                    if bar.enabled:
                        tg.start_soon(_progress, bar, runner)
                    await drive(tg)
            else:
                await drive(tg)
        assert outcome is not None
        return outcome

    @contextlib.contextmanager
    def live_view(self, run: _Progress) -> Iterator[Live]:
        """The live view of ``run`` while it lasts, redrawn by the caller; then its final
        frame. The frames are drawn on the terminal's alternate screen: after a
        resize, or a view taller than the terminal, no stale frame is left above the
        live area. The final view is printed to the normal screen."""
        with Live(
            LiveView(self.snapshot(run)),
            console=self.console,
            auto_refresh=False,
            transient=True,
            screen=True,
            redirect_stdout=False,
            redirect_stderr=False,
        ) as view:
            yield view
        self.console.print(LiveView(self.snapshot(run, final=True)))

    def close(self) -> None:
        # (JUnit's temporary file goes too, when the run ended before finish.)
        self.sinks.close()


class Interrupting:
    """What Ctrl-C does to a gate or a Kafka member: ``stop`` it, and the session's
    closing view says it was interrupted (a runner's outcome says so itself; a gate
    or a member stops the same way whoever asks)."""

    def __init__(self, session: RunOutputs, stop: Callable[[], None]) -> None:
        self.session = session
        self._stop = stop

    def stop(self) -> None:
        self.session.interrupted = True
        self._stop()


def _say_output_failed(message: str) -> None:
    print(f"mantle-stream: error: {message}", file=sys.stderr, flush=True)


def closing_console() -> Console:
    """Where the closing lines go: on a terminal wrapped at spaces to its width (never
    inside a word or an id); into a pipe or a file one line each, whatever the length."""
    return Console(highlight=False, soft_wrap=not sys.stdout.isatty())


async def _progress(bar: ReadProgress, runner: Runner) -> None:
    """Redraw a check's progress from the runner's counters, ten times a second."""
    while True:
        bar.update(
            runner.bytes_read, runner.evaluator.statistics().events, runner.events_per_second()
        )
        await anyio.sleep(0.1)


async def refresh(view: Live, session: RunOutputs, runner: _Progress) -> None:
    """Redraw from a fresh snapshot at a steady rate (no flicker, no torn state)."""
    while True:
        await anyio.sleep(1 / 8)
        view.update(LiveView(session.snapshot(runner)), refresh=True)


def _outputs_outrank(
    finish: Callable[Concatenate[RunOutputs, _P], int],
) -> Callable[Concatenate[RunOutputs, _P], int]:
    """The exit status ``finish`` gives, or 2 when an output could not be written:
    a file CI reads is missing, which outranks every verdict."""

    @functools.wraps(finish)
    def finished(session: RunOutputs, /, *args: _P.args, **kwargs: _P.kwargs) -> int:
        status = finish(session, *args, **kwargs)
        return EXIT_ERROR if session.sinks.failures else status

    return finished


@_outputs_outrank
def finish(
    session: RunOutputs,
    outcome: RunOutcome,
    runner: _Progress | None,
    *,
    fmt: str,
    judged: JudgedConversations | None = None,
    conversations: list[ReportConversation] | None = None,
    group: GroupReport | None = None,
    gate: GateReport | None = None,
) -> int:
    """The report (of ``judged``, the workers' merged outcome, when given, with the
    ``conversations`` they made; with a Kafka member's ``group``), the closing lines
    and the exit status."""
    report = build_report(
        session.evaluator if judged is None else judged,
        session.recorded,
        session.refused,
        scenarios=session.evaluator.scenarios,
        unread=session.unread,
        source=session.notices,
        tool_calls=session.config.judging.tool_calls,
        conversations=conversations,
    )
    if group is not None:
        report = msgspec.structs.replace(report, kafka=group)
    if gate is not None:
        report = msgspec.structs.replace(report, gate=gate)
    session.sinks.on_end(report)
    _show(session, report, runner, fmt)
    session.closing.on_end(report)
    return _status(session, report, outcome, group)


def _show(session: RunOutputs, report: Report, runner: _Progress | None, fmt: str) -> None:
    """The human output of ``report``: the JSON report, the table, or closing lines."""
    if fmt == "json":
        try:
            _write_out(report.to_json() + b"\n")
        except BrokenPipeError:
            raise
        except OSError as exc:  # a full disk: the other outputs are written all the same
            session.sinks.fail(f"cannot write the JSON report to standard output: {exc.strerror}")
            drop_stdout()
        for line in notes(report):  # standard output holds the report alone
            print(f"mantle-stream: warning: {line}", file=sys.stderr)
    elif fmt == "table":
        # The digest and the notes included: a table on a terminal, else lines.
        print_report(report, session.evaluator.scenarios)
    else:
        console = closing_console()
        digest = failure_lines(report, session.evaluator.scenarios)
        if digest:
            console.print(*digest, sep="\n")
        if session.plain and runner is not None:
            print(summary_line(session.snapshot(runner, final=True)), flush=True)
        for line in notes(report):
            console.print(literal(line))


def _write_out(data: bytes) -> None:
    """``data`` to standard output as it is, not decoded to be encoded again (32 MB
    written to a file: 0.145 s as text, 0.012 s as bytes); as text where standard
    output is not a byte stream (a StringIO)."""
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:
        sys.stdout.write(data.decode())
        sys.stdout.flush()
        return
    sys.stdout.flush()  # (what was written as text first)
    buffer.write(data)
    buffer.flush()


def _status(
    session: RunOutputs, report: Report, outcome: RunOutcome, group: GroupReport | None
) -> int:
    """The exit status of a run that ended so, saying why on standard error."""
    if outcome.ending == "bad-event":
        print(f"mantle-stream: error: {outcome.error}", file=sys.stderr)
        # An error with a hint of its own (a JSON array: skipping it judges nothing)
        # says what to do; only the others are worth going past.
        skip = (
            ""
            if "\nhint: " in (outcome.error or "")
            else " (use --on-bad-event=skip to go on past bad events)"
        )
        print(
            "mantle-stream: stopped at the bad event; the report holds what was judged "
            f"before it{skip}",
            file=sys.stderr,
        )
        return EXIT_ERROR
    if outcome.ending == "fail-fast":
        return EXIT_FAILED
    if outcome.ending == "cancelled":
        print("mantle-stream: interrupted; verdicts still pending were not judged", file=sys.stderr)
        return EXIT_FAILED if report.summary.failed else EXIT_INTERRUPTED
    nothing = not report.summary.conversations and not report.summary.unmatched
    if group is not None and nothing:
        # A member of a group may be given nothing new: the others judged it.
        print(f"mantle-stream: nothing new for this member of group `{group.group}`",
              file=sys.stderr)  # fmt: skip
        return EXIT_OK
    if not report.conversations:
        print("mantle-stream: error: the feed held no conversation to judge", file=sys.stderr)
    problems = strict_problems(report) if session.config.judging.strict else []
    if problems:
        print(f"mantle-stream: error: --strict: {', '.join(problems)}", file=sys.stderr)
        return EXIT_ERROR
    return exit_status(report)


def after_signals(status: int, noted: list[int]) -> int:
    """The exit status once the outputs are written: 130 when Ctrl-C or SIGTERM came
    while they were (unless something failed, which outranks it)."""
    if not noted:
        return status
    print(
        "mantle-stream: interrupted after judging; the outputs hold what was judged",
        file=sys.stderr,
    )
    return status if status in (EXIT_FAILED, EXIT_ERROR) else EXIT_INTERRUPTED
