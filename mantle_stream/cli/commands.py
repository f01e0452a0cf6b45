"""What each command of the command line does: ``check``, ``watch``, ``validate``, ``demo``.

The outermost edge, below :mod:`mantle_stream.cli.parser` (which reads the
arguments). Loads scenarios, runs an evaluator over a feed through
:class:`~mantle_stream.runner.Runner`, shows verdicts (report, live view or
plain lines) and maps outcomes to the exit codes the README lists: 0 all
passed, 1 an assertion failed, 2 nothing could be judged as asked. User
errors print a message, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import os
import signal
import sys
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Concatenate, ParamSpec, Protocol

import anyio
import msgspec
from rich.console import Console
from rich.live import Live

from mantle_stream.cli.integrations import events_source
from mantle_stream.cli.sources import (
    evaluator_for,
    feed_for,
    say_skipped,
    signals_noted,
    stop_on_signals,
    user_error,
)
from mantle_stream.cli.workers import AUTO_MIN_BYTES, cores, run_workers
from mantle_stream.core.assertions.bot import nested_repetition
from mantle_stream.core.defaults import LINGER_UNSET
from mantle_stream.core.engine.evaluator import Evaluator
from mantle_stream.core.engine.partition import JudgedConversations
from mantle_stream.core.errors import (
    CONTROL_ESCAPES,
    EventError,
    FeedError,
    MantleStreamError,
    ScenarioError,
    UsageError,
)
from mantle_stream.core.recorded import RecordedRun, load_results
from mantle_stream.core.scenario.load import load_scenarios
from mantle_stream.core.scenario.model import Scenario
from mantle_stream.core.urls import scrub, secrets_in
from mantle_stream.core.verdicts import Decision
from mantle_stream.feeds import Feed, open_feed
from mantle_stream.feeds.files import event_files
from mantle_stream.feeds.spec import expand_pattern, parse_source
from mantle_stream.feeds.sql import redact
from mantle_stream.kafka.options import kafka_settings
from mantle_stream.outputs.github import GithubAnnotations
from mantle_stream.outputs.html import HtmlWriter
from mantle_stream.outputs.jsonl import JsonlWriter
from mantle_stream.outputs.junit import JunitWriter
from mantle_stream.outputs.live import LiveSnapshot, LiveView, summary_line
from mantle_stream.outputs.plain import DecisionLines
from mantle_stream.outputs.progress import ReadProgress
from mantle_stream.outputs.report import (
    EXIT_ERROR,
    EXIT_FAILED,
    EXIT_OK,
    GateReport,
    GroupReport,
    build_report,
    exit_status,
    notes,
    strict_problems,
)
from mantle_stream.outputs.sink import Sinks
from mantle_stream.outputs.state import lock_state, read_checkpoint
from mantle_stream.outputs.table import failure_lines, literal, print_report
from mantle_stream.runner import Runner, RunOutcome

__all__ = ["EXIT_BROKEN_PIPE", "EXIT_INTERRUPTED", "run"]

EXIT_INTERRUPTED = 130
#: Standard output was closed by its reader (a pipe into `head`): 128 + SIGPIPE.
EXIT_BROKEN_PIPE = 141


#: The arguments of what _outputs_outrank wraps, after the session.
_P = ParamSpec("_P")


def _tune_gc() -> None:
    """Fewer, cheaper garbage collections for a long-running evaluator.

    Events and verdicts are untracked msgspec structs and the per-conversation
    objects form no cycles, yet with many open conversations CPython's default
    thresholds spend most of the time re-walking them (benchmarks/memory.py).
    Objects that live for the whole run are frozen out of the walk, and the
    youngest generation is collected less often.
    """
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)


def run(args: argparse.Namespace) -> int:
    """Carry out a parsed command line; the exit status."""
    _tune_gc()
    try:
        if args.command == "validate":
            return _validate(args.scenarios)
        if args.command == "demo":
            return _demo(args)
        if args.command == "gate":
            return _gate(args)
        if args.command == "rekey":
            from mantle_stream.cli.rekey import run_rekey  # confluent-kafka: only now

            return run_rekey(args)
        return _check_or_watch(args)
    except BrokenPipeError:
        return _output_gone()
    except (MantleStreamError, BaseExceptionGroup) as exc:
        if _found(exc, BrokenPipeError):
            return _output_gone()
        error = user_error(exc)
        if error is None:
            raise
        if isinstance(error, ScenarioError):
            _print_diagnostics(error)
        else:
            print(f"mantle-stream: error: {scrub(str(error), _secrets(args))}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:  # only before the run started: the run handles its own
        print("mantle-stream: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def _secrets(args: argparse.Namespace) -> list[str]:
    """The passwords and tokens the command line holds: never in an error it prints."""
    specs = [*(getattr(args, "events", None) or []), getattr(args, "source", None) or ""]
    found = [s for spec in specs for s in secrets_in(spec)]
    found += [getattr(args, "rasa_token", None) or "", getattr(args, "rasa_jwt", None) or ""]
    for pair in getattr(args, "kafka_config", None) or []:
        key, _, value = pair.partition("=")
        if any(word in key.lower() for word in ("password", "secret", "token")):
            found.append(value.strip())
    return found


def _found(exc: BaseException, kind: type[BaseException]) -> bool:
    """Whether ``exc`` is, or a task group's exception group holds, a ``kind``."""
    if isinstance(exc, kind):
        return True
    return isinstance(exc, BaseExceptionGroup) and any(_found(e, kind) for e in exc.exceptions)


def _output_gone() -> int:
    """Standard output's reader went away (``watch ... | head``): end quietly.

    What is still buffered is dropped (pointing standard output at the null
    device keeps the interpreter's final flush from failing again), and the
    exit status is the one a process ended by SIGPIPE has, as ``yes | head``.
    """
    _drop_stdout()
    return EXIT_BROKEN_PIPE


def _drop_stdout() -> None:
    """Standard output to the null device: what is still buffered for it cannot be
    written, and the interpreter's final flush must not fail on it again."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _print_diagnostics(exc: ScenarioError) -> None:
    for diagnostic in exc.diagnostics:
        print(diagnostic.render(), file=sys.stderr)
    files = len({d.path for d in exc.diagnostics})
    count = len(exc.diagnostics)
    print(
        f"{count} error{'s' if count != 1 else ''} in {files} file{'s' if files != 1 else ''}",
        file=sys.stderr,
    )


def _validate(paths: list[str]) -> int:
    for s in _load(paths):
        n = len(s.assertions)
        print(f"{s.path}: ok: `{s.name}`, {n} assertion{'s' if n != 1 else ''}")
        if not n:
            print(
                f"{s.path}: warning: `{s.name}` has no assertions: every conversation "
                "judged against it passes",
                file=sys.stderr,
            )
        for index, assertion in enumerate(s.assertions):
            pattern = getattr(assertion, "text_matches", None)
            if pattern is not None and nested_repetition(pattern):
                line = s.lines[index] if index < len(s.lines) else 1
                print(
                    f"{s.path}:{line}: warning: `text_matches` `{pattern}` repeats a "
                    "repetition without bound, which can backtrack catastrophically; each "
                    "search is cut off after --regex-timeout and the assertion errored",
                    file=sys.stderr,
                )
    return 0


def _load(paths: list[str]) -> list[Scenario]:
    scenarios = load_scenarios(paths)
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


class _RunOutputs:
    """One run's outputs: its sinks (JSONL, JUnit, plain lines), the live view, the report."""

    def __init__(
        self, args: argparse.Namespace, evaluator: Evaluator, *, live: bool, source: str
    ) -> None:
        self.args = args
        self.evaluator = evaluator
        self.source = source
        self.console = Console(highlight=False)
        self.live = live and self.console.is_terminal
        self.plain = live and not self.live  # watch into a pipe: one line per verdict
        # A check's progress bar: the feed's size in bytes, None when unknown,
        # False for no bar (watch and demo have their live view).
        self.progress_total: int | bool | None = False
        # Every batch of decisions and every stop message goes to each sink, in
        # this order; the final report too (_finish), then they are closed (close).
        # An output that cannot be written fails on its own, with a line saying so;
        # the others are written, and the exit status says one failed (_finish).
        self.sinks = Sinks(on_failure=_say_output_failed)
        self.jsonl: JsonlWriter | None = None
        if args.jsonl:
            overwrite = getattr(args, "jsonl_mode", "") == "overwrite"
            try:
                self.jsonl = JsonlWriter.open(args.jsonl, overwrite=overwrite)
                self.sinks.append(self.jsonl)
            except FeedError as exc:
                self.sinks.fail(str(exc))
        self.junit: JunitWriter | None = None
        if args.junit:
            try:
                junit = self.junit = JunitWriter(
                    args.junit, tool_calls=getattr(args, "tool_calls", False)
                )
            except FeedError as exc:
                self.sinks.fail(str(exc))
            else:
                # Written as conversations leave memory, completed with the report.
                sinks = self.sinks
                evaluator.on_let_go = lambda c: sinks.attempt(junit, junit.add, c)
                self.sinks.append(junit)
        if getattr(args, "html", None):
            self.sinks.append(HtmlWriter(args.html))  # written whole from the report
        if self.plain:
            self.sinks.append(DecisionLines())
        # --annotations github: told the report after the human output (_finish), not
        # among the sinks above. With --format json standard output holds the report
        # alone, so the workflow commands go to standard error (the runner reads both).
        self.annotations: GithubAnnotations | None = None
        if getattr(args, "annotations", "none") == "github":
            self.annotations = GithubAnnotations(
                sys.stderr if getattr(args, "format", None) == "json" else None,
                summary=os.environ.get("GITHUB_STEP_SUMMARY") or None,
            )
        self.recorded: dict[str, RecordedRun] = {}  # --results: the runs evaluate_agent saved
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
            command=str(getattr(self.args, "command", None) or "watch"),
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
                    tg.start_soon(_refresh, view, self, runner)
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
        # (JUnit's temporary file goes too, when the run ended before _finish.)
        self.sinks.close()


class _Interrupting:
    """What Ctrl-C does to a gate or a Kafka member: ``stop`` it, and the session's
    closing view says it was interrupted (a runner's outcome says so itself; a gate
    or a member stops the same way whoever asks)."""

    def __init__(self, session: _RunOutputs, stop: Callable[[], None]) -> None:
        self.session = session
        self._stop = stop

    def stop(self) -> None:
        self.session.interrupted = True
        self._stop()


def _say_output_failed(message: str) -> None:
    print(f"mantle-stream: error: {message}", file=sys.stderr, flush=True)


def _closing_console() -> Console:
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


async def _refresh(view: Live, session: _RunOutputs, runner: _Progress) -> None:
    """Redraw from a fresh snapshot at a steady rate (no flicker, no torn state)."""
    while True:
        await anyio.sleep(1 / 8)
        view.update(LiveView(session.snapshot(runner)), refresh=True)


def _outputs_outrank(
    finish: Callable[Concatenate[_RunOutputs, _P], int],
) -> Callable[Concatenate[_RunOutputs, _P], int]:
    """The exit status ``finish`` gives, or 2 when an output could not be written:
    a file CI reads is missing, which outranks every verdict."""

    @functools.wraps(finish)
    def finished(session: _RunOutputs, /, *args: _P.args, **kwargs: _P.kwargs) -> int:
        status = finish(session, *args, **kwargs)
        return EXIT_ERROR if session.sinks.failures else status

    return finished


@_outputs_outrank
def _finish(
    session: _RunOutputs,
    outcome: RunOutcome,
    runner: _Progress | None,
    *,
    fmt: str,
    judged: JudgedConversations | None = None,
    group: GroupReport | None = None,
    gate: GateReport | None = None,
) -> int:
    """The report (of ``judged``, the workers' merged outcome, when given; with a Kafka
    member's ``group``), the closing lines and the exit status."""
    report = build_report(
        session.evaluator if judged is None else judged,
        session.recorded,
        session.refused,
        scenarios=session.evaluator.scenarios,
        unread=session.unread,
        source=session.notices,
        tool_calls=getattr(session.args, "tool_calls", False),
    )
    if group is not None:
        report = msgspec.structs.replace(report, kafka=group)
    if gate is not None:
        report = msgspec.structs.replace(report, gate=gate)
    session.sinks.on_end(report)
    if fmt == "json":
        try:
            sys.stdout.write(report.to_json().decode() + "\n")
            sys.stdout.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:  # a full disk: the other outputs are written all the same
            session.sinks.fail(f"cannot write the JSON report to standard output: {exc.strerror}")
            _drop_stdout()
        for line in notes(report):  # standard output holds the report alone
            print(f"mantle-stream: warning: {line}", file=sys.stderr)
    elif fmt == "table":
        # The digest and the notes included: a table on a terminal, else lines.
        print_report(report, session.evaluator.scenarios)
    else:
        console = _closing_console()
        digest = failure_lines(report, session.evaluator.scenarios)
        if digest:
            console.print(*digest, sep="\n")
        if session.plain and runner is not None:
            print(summary_line(session.snapshot(runner, final=True)), flush=True)
        for line in notes(report):
            console.print(literal(line))
    if session.annotations is not None:
        session.annotations.on_end(report)
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
    problems = strict_problems(report) if getattr(session.args, "strict", False) else []
    if problems:
        print(f"mantle-stream: error: --strict: {', '.join(problems)}", file=sys.stderr)
        return EXIT_ERROR
    return exit_status(report)


def _feed_size(sources: list[str]) -> int | None:
    """The bytes a check will read, when its sources are files and directories."""
    if not all(parse_source(s).local for s in sources):
        return None
    try:
        files = [f for s in sources for f in (event_files(s) if os.path.isdir(s) else [s])]
        return sum(os.path.getsize(f) for f in files) or None
    except (OSError, FeedError):
        return None  # the feed will say why it cannot read it


def _expand(sources: list[str]) -> list[str]:
    """Glob patterns among the file sources, expanded (a path that exists is taken as
    it is; a source with a scheme, a URL's `?` or `[` included, is never a pattern)."""
    out = []
    for source in sources:
        matches = expand_pattern(source)
        if matches == []:
            raise UsageError(f"--events `{source}` matches no file")
        out += [source] if matches is None else matches
    return out


def _check_arguments(args: argparse.Namespace) -> None:
    """Usage errors found before anything is read or started (exit 2)."""
    if args.integrations and args.events:
        raise UsageError("give --events or --integrations, not both")
    if args.integrations:
        # The agent's own integrations.yml names where its events are.
        args.events = [events_source(args.integrations, live=args.command == "watch")]
        print(f"mantle-stream: reading {redact(args.events[0])} (from {args.integrations})",
              file=sys.stderr)  # fmt: skip
    if not args.events:
        raise UsageError("where are the events? give --events SOURCE or --integrations PATH")
    args.events = _expand(args.events)
    sources = [parse_source(e) for e in args.events]
    if any(s.scheme == "kafka" for s in sources):
        if len(args.events) > 1:
            raise UsageError("a kafka:// source is read on its own, not with other sources")
        if args.state:
            raise UsageError(
                "--state: a Kafka member keeps its conversations' state in the state topic "
                "(--state-topic), which moves with its partitions"
            )
        if args.dead_letter_topic and args.on_bad_event == "fail":
            raise UsageError(
                "--dead-letter-topic takes the messages skipped: not with --on-bad-event fail"
            )
        if args.fail_fast or args.idle_timeout is not None:
            option = "--fail-fast" if args.fail_fast else "--idle-timeout"
            raise UsageError(
                f"{option} is not for kafka:// sources: a group member judges what its "
                "partitions hold for as long as it runs"
            )
    elif args.dead_letter_topic:
        raise UsageError("--dead-letter-topic is for kafka:// sources")
    if args.since and not any(s.sql for s in sources):
        raise UsageError("--since filters rows of a SQL store (sqlite:///, postgresql://) only")
    if args.conversation and not any(s.store for s in sources):
        raise UsageError(
            "--conversation picks conversations from a store that holds many "
            "(sqlite:///, postgresql://, a Rasa server's http(s)://), not from this source"
        )
    rasa = [s for s in sources if s.scheme == "http"]
    if rasa and not (args.conversation or args.results):
        raise UsageError(
            f"--events `{rasa[0].shown}`: which conversations? give --conversation ID "
            "(repeatable) or --results DIR"
        )
    if getattr(args, "listen_remote", False) and not args.token:
        print(
            "mantle-stream: warning: --listen-remote without --token: anyone who can reach "
            "this port can write events into any conversation",
            file=sys.stderr,
        )
    if args.state:
        folder = os.path.dirname(os.path.abspath(args.state))
        if not os.path.isdir(folder):
            raise UsageError(f"--state `{args.state}`: the directory `{folder}` does not exist")
    if args.jsonl == "-" and (args.command == "watch" or args.format == "json"):
        what = "the live view" if args.command == "watch" else "the JSON report"
        raise UsageError(
            f"--jsonl - would mix verdict lines into {what} on standard output; give --jsonl a file"
        )
    for events in args.events:
        if events.endswith((".yml", ".yaml")) and os.path.isfile(events):
            with open(events, "rb") as fh:
                head = fh.read(4096).lstrip(b"\xef\xbb\xbf").lstrip()
            if head.startswith((b"scenario:", b"#", b"---")):
                raise UsageError(
                    f"`{events}` looks like a scenario file, not events: were "
                    "SCENARIO and --events swapped?"
                )


#: Sources that, followed, may get more runs later (a listener's clients leave instead).
_FOLLOWED = ("follow", "sqlite", "postgresql")


def _linger(args: argparse.Namespace) -> float | None:
    """``--linger``, else: never for a followed file or store (a live source that
    ends only when told: runs may be written to it later), 1 s for listeners (a
    simulator leaves when it is done)."""
    if args.linger != LINGER_UNSET:
        return float(args.linger) if args.linger is not None else None
    followed = (parse_source(e) for e in args.events)
    return None if any(s.live and s.scheme in _FOLLOWED for s in followed) else 1.0


def _say_refused(client: str, reason: str) -> None:
    """The listener turned a client away: say whom and why, on standard error."""
    message = f"mantle-stream: refused {client}: {reason}"
    print(message.translate(CONTROL_ESCAPES), file=sys.stderr, flush=True)


def _check_or_watch(args: argparse.Namespace) -> int:
    _check_arguments(args)
    scenarios = _load(args.scenarios)
    source = (
        "<stdin>"
        if args.events == ["-"]
        else redact(args.events[0])
        if len(args.events) == 1
        else f"{redact(args.events[0])} and {len(args.events) - 1} more"
    )
    recorded = load_results(args.results) if args.results else {}
    evaluator = evaluator_for(args, scenarios, recorded, source)
    state_lock = lock_state(args.state) if args.state else None
    if args.state:
        saved = read_checkpoint(args.state)
        if saved is not None:
            evaluator.restore(saved)
            print(f"mantle-stream: resuming from {args.state}", file=sys.stderr)
    session = _RunOutputs(args, evaluator, live=args.command == "watch", source=source)
    session.recorded = recorded
    if session.junit is not None:  # runs it writes as they leave memory keep their numbers
        session.junit.recorded = recorded
    if args.command == "check":
        session.progress_total = _feed_size(args.events)

    async def go() -> tuple[RunOutcome, Runner]:
        runner = session.runner(
            fail_fast=args.fail_fast,
            idle_timeout=args.idle_timeout,
            linger=_linger(args),
            skip_bad_events=args.on_bad_event == "skip",
            on_bad=say_skipped,
            state_path=args.state,
            state_interval=args.state_interval,
            gap_timeout=args.gap_timeout,
        )
        feed_cm = feed_for(args, recorded)
        async with feed_cm as feed:
            feed.on_rejected = _say_refused
            first = parse_source(args.events[0])
            if first.scheme == "follow" and not os.path.exists(first.target):
                print(
                    f"mantle-stream: waiting for `{first.target}` to be created",
                    file=sys.stderr,
                    flush=True,
                )
            if feed.address and feed.live:
                print(f"mantle-stream: listening on {feed.address}", file=sys.stderr, flush=True)
            try:
                return await session.run(runner, feed), runner
            finally:
                session.refused, session.unread = feed.rejected, feed.unread
                session.notices = feed.notices

    workers = _workers(args, session.progress_total)
    noted: list[int] = []  # Ctrl-C or SIGTERM once judging was over (signals_noted)
    with contextlib.ExitStack() as finishing:
        try:
            if parse_source(args.events[0]).scheme == "kafka":
                return _kafka(args, session)
            if workers > 1:
                # (While the workers run, run_workers tells them; after, noted.)
                finishing.enter_context(signals_noted(noted))
                merged = run_workers(
                    args, source, workers, session.progress_total or None, scenarios, recorded
                )
                if merged is not None:  # (None: a bad event ended it: judged again, in one)
                    session.notices = merged.notices
                    jsonl = session.jsonl
                    if jsonl is not None and jsonl in session.sinks.sinks:  # (a check's only
                        # sink of decisions)
                        session.sinks.attempt(jsonl, jsonl.write_lines, merged.lines)
                    status = _finish(
                        session, merged.outcome, None, fmt=args.format, judged=merged.judged
                    )
                    return _after_signals(status, noted)
                finishing.close()  # judged again in one process: Ctrl-C stops it as usual
            outcome, runner = anyio.run(go)
            finishing.enter_context(signals_noted(noted))
            status = _finish(
                session, outcome, runner, fmt=args.format if args.command == "check" else "live"
            )
            return _after_signals(status, noted)
        finally:
            session.close()
            if state_lock is not None:
                state_lock.close()  # (the lock goes with it)


def _after_signals(status: int, noted: list[int]) -> int:
    """The exit status once the outputs are written: 130 when Ctrl-C or SIGTERM came
    while they were (unless something failed, which outranks it)."""
    if not noted:
        return status
    print(
        "mantle-stream: interrupted after judging; the outputs hold what was judged",
        file=sys.stderr,
    )
    return status if status in (EXIT_FAILED, EXIT_ERROR) else EXIT_INTERRUPTED


def _kafka(args: argparse.Namespace, session: _RunOutputs) -> int:
    """One member of the consumer group: until stopped (watch) or the end of its
    partitions (check); verdicts and stops also published to their topics."""
    from mantle_stream.kafka.member import Member
    from mantle_stream.kafka.options import KafkaOptions, group_topic, parse_kafka_spec

    spec = parse_kafka_spec(args.events[0])
    check = args.command == "check"
    # A check re-judges the whole topic: a group of its own unless told to share one
    # (the live group's committed offsets would have it read only what is new).
    group = args.group or (
        "mantle_stream.check." + uuid.uuid4().hex[:12] if check else "mantle_stream"
    )

    # Each group's own topics: another group's (or topic's) conversations are not its to
    # resume, nor its verdicts and stops another's to read. A check publishes none
    # unless a topic is named: re-judging must not publish into the live ones.
    def published(kind: str, named: str | None) -> str | None:
        return named or (None if check else group_topic(kind, group, spec.topic))

    options = KafkaOptions(
        group=group,
        offsets=args.offsets or ("earliest" if check else "latest"),
        verdicts_topic=published("verdicts", args.verdicts_topic),
        stops_topic=published("stops", args.stops_topic),
        state_topic=args.state_topic or group_topic("state", group, spec.topic),
        stats_interval=args.stats_interval,
        until_end=check,
        linger=args.linger if args.linger not in (None, LINGER_UNSET) else 1.0,
        gap_timeout=args.gap_timeout,
        consumer=kafka_settings(args.kafka_config or []),
        dead_letter_topic=args.dead_letter_topic,
    )
    live: Live | None = None
    drawn = 0.0

    def tick() -> None:
        nonlocal drawn
        now = time.monotonic()
        if live is not None and now - drawn >= 1 / 8:
            drawn = now
            session.source = f"kafka {spec.topic} · group {group} · lag {member.lag():,}"
            live.update(LiveView(session.snapshot(member)), refresh=True)

    member = Member(
        session.evaluator,
        spec,
        options,
        on_decisions=session.sinks.on_decisions,
        on_stop=session.sinks.on_stop,
        on_bad=None if args.on_bad_event == "fail" else say_skipped,  # skip by default
        on_tick=tick,
    )
    interrupt = _Interrupting(session, member.stop)
    previous = {
        sig: signal.signal(sig, lambda *_: interrupt.stop())
        for sig in (signal.SIGINT, signal.SIGTERM)
    }
    print(f"mantle-stream: joining group `{group}` on {redact(args.events[0])}",
          file=sys.stderr, flush=True)  # fmt: skip
    outcome = RunOutcome("end-of-input" if check else "ended")
    try:
        if session.live:
            with session.live_view(member) as live:
                member.run()
            live = None
        else:
            member.run()
    except EventError as exc:
        outcome = RunOutcome("bad-event", error=str(exc))
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    stats = member.stats()
    report_group = GroupReport(
        group=group,
        topic=spec.topic,
        member=stats.member,
        members=member.group_members,
        partitions=stats.partitions,
        lag=stats.lag,
        published=stats.published,
        restored=stats.restored,
        not_resumed=stats.not_resumed,
        join_seconds=stats.join_seconds,
        judge_seconds=stats.judge_seconds,
    )
    outcome = msgspec.structs.replace(outcome, stopped_early=tuple(member.stopped_early))
    fmt = args.format if check else "live"
    return _finish(session, outcome, member, fmt=fmt, group=report_group)


def _regular(path: str) -> bool:
    """A file or a directory: something every worker can read whole."""
    return os.path.isfile(path) or os.path.isdir(path)


def _workers(args: argparse.Namespace, size: int | bool | None) -> int:
    """How many processes judge: ``--workers``, else one per core for a replay of files
    of ``AUTO_MIN_BYTES`` or more or of a SQL store; one when only one can."""
    if args.command != "check":
        return 1
    why_not = _one_process_only(args)
    if args.workers is not None:
        if args.workers > 1 and why_not:
            raise UsageError(f"--workers {args.workers}: {why_not}; give --workers 1")
        return int(args.workers)
    if why_not:
        return 1
    sql = all(parse_source(e).sql for e in args.events)
    if not sql and not (isinstance(size, int) and size >= AUTO_MIN_BYTES):
        return 1
    return cores()


def _one_process_only(args: argparse.Namespace) -> str | None:
    """Why this run can be judged by one process only, if it can."""
    if args.fail_fast:
        return "--fail-fast stops at the first failure in the feed's order, which one process sees"
    if args.state:
        return "--state checkpoints one process's evaluator"
    if args.keep_finished is not None:
        return "--keep-finished keeps the conversations one process finished last"
    for source in map(parse_source, args.events):
        if source.one_reader is not None:
            return source.one_reader
        # A pipe (<(...)) or a device: each worker would read a part of it.
        if source.local and os.path.exists(source.target) and not _regular(source.target):
            return f"`{source.spec}` is not a regular file: one process reads it"
    return None


def _demo(args: argparse.Namespace) -> int:
    """The bundled runs played as Rasa's simulator plays them, through the gate (or,
    with ``--socket``, streamed to a listener that sends stop messages)."""
    if getattr(args, "socket", False):
        return _demo_socket(args)
    try:
        import httpx  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        print(
            f'mantle-stream: the gate needs {exc.name} (pip install "mantle_stream[gate]"): '
            "playing the socket demo instead",
            file=sys.stderr,
        )
        return _demo_socket(args)
    from mantle_stream.cli.demo import demo_recordings, demo_runs, demo_scenarios
    from mantle_stream.gate.proxy import GateOptions
    from mantle_stream.gate.runs import GateJudge
    from mantle_stream.gate.serve import Gate
    from mantle_stream.gate.standin import StandInAgent, serving, simulate

    scenarios = demo_scenarios()
    recorded = demo_recordings()
    runs = demo_runs(recorded)
    evaluator = Evaluator(scenarios, source="demo")
    session = _RunOutputs(args, evaluator, live=True, source="demo")
    # A user takes a moment to write; the agent's lines come a little apart.
    agent = StandInAgent(recorded, pace=0.1 / args.speed)
    front: list[Gate] = []

    async def go() -> None:
        async with serving(agent) as upstream, anyio.create_task_group() as tasks:
            judge = GateJudge(
                scenarios,
                evaluator=evaluator,
                on_decisions=session.sinks.on_decisions,
                on_stop=session.sinks.on_stop,
                upstream=upstream,
            )
            gate = Gate(judge, GateOptions(upstream=upstream), listen=("127.0.0.1", 0))
            front.append(gate)
            session.source = f"demo: Rasa-style simulator → gate {gate.address} → stand-in agent"

            playing = anyio.CancelScope()

            async def play() -> None:
                with playing:
                    await simulate(gate.address, runs, concurrency=args.concurrency,
                                   think=1.2 / args.speed)  # fmt: skip
                gate.stop()

            def interrupt() -> None:
                # The simulator too: runs it would start next would find the gate closed.
                playing.cancel()
                gate.stop()

            tasks.start_soon(stop_on_signals, _Interrupting(session, interrupt))
            tasks.start_soon(play)
            with session.live_view(gate) as view:
                tasks.start_soon(_refresh, view, session, gate)
                await gate.run()
            tasks.cancel_scope.cancel()

    try:
        anyio.run(go)
        [gate] = front
        report = gate.judge.report()
        outcome = gate.outcome()
        code = _finish(session, outcome, gate, fmt="live", gate=report)
    finally:
        session.close()
    stopped = [r.conversation_id for r in runs if r.stopped]
    if stopped:
        _closing_console().print(
            literal(
                f"stopped early: {len(stopped)} runs ({', '.join(stopped)}), at the turn after "
                f"each failed: the gate answered {report.turns_not_played} messages for the "
                f"agent, saving {sum(len(r.messages) - r.turns - 1 for r in runs if r.stopped)}"
                " more user turns the simulator did not have to play"
            )
        )
    return code


def _demo_socket(args: argparse.Namespace) -> int:
    from mantle_stream.cli.demo import (
        DemoStats,
        demo_assignments,
        demo_conversations,
        demo_scenarios,
        simulate,
    )

    evaluator = Evaluator(demo_scenarios(), source="demo", assignments=demo_assignments())
    session = _RunOutputs(args, evaluator, live=True, source="demo simulator")
    stats = DemoStats()

    async def go() -> tuple[RunOutcome, Runner]:
        runner = session.runner(fail_fast=args.fail_fast, linger=None)
        async with open_feed("tcp://127.0.0.1:0") as feed:
            assert feed.address is not None
            address = feed.address

            def start(tg: anyio.abc.TaskGroup) -> None:
                async def play() -> None:
                    await simulate(
                        address,
                        demo_conversations(),
                        speed=args.speed,
                        concurrency=args.concurrency,
                        stats=stats,
                    )
                    await anyio.sleep(0.2)  # let the last lines arrive
                    runner.stop(finish=True)

                tg.start_soon(play)

            session.source = f"demo simulator → {address}"
            return await session.run(runner, feed, start), runner

    try:
        outcome, runner = anyio.run(go)
        code = _finish(session, outcome, runner, fmt="live")
    finally:
        session.close()
    if stats.stopped:
        _closing_console().print(
            literal(
                f"stopped early: {len(stats.stopped)} conversations "
                f"({', '.join(stats.stopped)}), saving {stats.saved_events} events and "
                f"{stats.saved_turns} user turns the simulator did not have to play"
            )
        )
    return code


def _say_unjudged(cid: str, why: str) -> None:
    message = f"mantle-stream: warning: run `{cid}` is forwarded unjudged: {why}"
    print(message.translate(CONTROL_ESCAPES), file=sys.stderr, flush=True)


def _results_so_far(path: str | None) -> dict[str, RecordedRun]:
    """The results folder's runs so far (it may not exist yet, or hold no run yet)."""
    if path is None:
        return {}
    with contextlib.suppress(UsageError):
        return load_results(path)
    return {}


def _gate(args: argparse.Namespace) -> int:
    """The gate in front of the agent until Ctrl-C, SIGTERM or --linger; then the reports
    as watch writes them, with the gate's part (runs seen, stopped, turns not played)."""
    from mantle_stream.gate.proxy import GateOptions
    from mantle_stream.gate.runs import GateJudge
    from mantle_stream.gate.serve import Gate, parse_listen

    upstream = args.upstream
    if not upstream.startswith(("http://", "https://")):
        raise UsageError(f"--upstream `{upstream}`: expected the agent's http:// or https:// URL")
    scenarios = _load(args.scenarios)
    recorded = _results_so_far(args.results)

    main = Evaluator(scenarios, source="gate", regex_timeout=args.regex_timeout)
    session = _RunOutputs(args, main, live=args.format != "json", source="gate")
    session.recorded = recorded
    if session.junit is not None:
        session.junit.recorded = recorded
    events = args.events or []
    if any(parse_source(e).scheme == "kafka" for e in events):
        raise UsageError("gate --events: a kafka:// source is judged by `watch`, not the gate")
    judge = GateJudge(
        scenarios,
        stop=args.stop,
        evaluator=main,
        on_decisions=session.sinks.on_decisions,
        on_stop=session.sinks.on_stop,
        on_problem=_say_unjudged,
        upstream=redact(upstream),
        reads_tracker=not events,
    )
    judge.recorded = recorded
    options = GateOptions(
        upstream=upstream,
        ready_timeout=args.ready_timeout,
        upstream_timeout=args.upstream_timeout,
    )
    gate = Gate(
        judge,
        options,
        listen=parse_listen(args.listen),
        linger=args.linger,
        results=args.results,
        events=events or None,
    )
    session.source = f"gate {gate.address} → {redact(upstream)}"
    print(gate.address, file=sys.stderr, flush=True)
    print(
        f"mantle-stream: gate listening on {gate.address}, forwarding to {redact(upstream)}; "
        f"point `rasa tools run --rasa-server-url` at it",
        file=sys.stderr,
        flush=True,
    )

    async def go() -> None:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(stop_on_signals, gate)
            if session.live:
                with session.live_view(gate) as view:
                    tasks.start_soon(_refresh, view, session, gate)
                    await gate.run()
            else:
                await gate.run()
            tasks.cancel_scope.cancel()

    try:
        anyio.run(go)
        report = judge.report()
        outcome = gate.outcome()
        code = _finish(session, outcome, gate, fmt=args.format, gate=report)
    finally:
        session.close()
    if args.format != "json":
        _closing_console().print(
            literal(
                f"gate: {report.runs} runs, {report.stopped} stopped early, "
                f"{report.turns_not_played} agent turns not played"
                + (
                    f"; {len(report.ambiguous)} ended with several candidate scenarios"
                    if report.ambiguous
                    else ""
                )
            )
        )
    return code
