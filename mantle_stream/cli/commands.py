"""What each command does: ``check``, ``watch`` and ``validate`` here; the entry of each other.

The outermost edge, below :mod:`mantle_stream.cli.parser` (which reads the
arguments). Checks the arguments, builds the run's configuration once
(:mod:`mantle_stream.cli.config`), loads scenarios and hands them to an
execution strategy (:mod:`mantle_stream.run`: one process, ``--workers``, a
Kafka member; the gate and the demo in :mod:`mantle_stream.cli.serving`);
:mod:`mantle_stream.cli.session` shows the verdicts and maps outcomes to the
exit codes the README lists: 0 all
passed, 1 an assertion failed, 2 nothing could be judged as asked. User
errors print a message, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import sys
from collections.abc import Mapping

import anyio

from mantle_stream.cli.config import run_config
from mantle_stream.cli.integrations import events_source
from mantle_stream.cli.serving import demo_command, gate_command, kafka_command
from mantle_stream.cli.session import (
    EXIT_BROKEN_PIPE,
    EXIT_INTERRUPTED,
    RunOutputs,
    after_signals,
    drop_stdout,
    finish,
    load_checked,
)
from mantle_stream.core.assertions.bot import nested_repetition
from mantle_stream.core.errors import FeedError, MantleStreamError, ScenarioError, UsageError
from mantle_stream.core.recorded import RecordedRun, load_results
from mantle_stream.core.scenario.model import Scenario
from mantle_stream.core.urls import redact, scrub, secrets_in
from mantle_stream.feeds.files import event_files
from mantle_stream.feeds.spec import expand_pattern, parse_source
from mantle_stream.outputs.report import EXIT_ERROR
from mantle_stream.outputs.state import lock_state, read_checkpoint
from mantle_stream.run.config import RunConfig
from mantle_stream.run.one import run_one, runner_for
from mantle_stream.run.sources import evaluator_for, signals_noted, user_error
from mantle_stream.run.workers import run_workers, worker_count
from mantle_stream.runner import Runner, RunOutcome

__all__ = ["EXIT_BROKEN_PIPE", "EXIT_INTERRUPTED", "run"]


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
            return demo_command(args)
        if args.command == "gate":
            return gate_command(run_config(args))
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
    drop_stdout()
    return EXIT_BROKEN_PIPE


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
    for s in load_checked(paths):
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


def _source_name(events: list[str]) -> str:
    """The source as the views and the report name it."""
    if events == ["-"]:
        return "<stdin>"
    if len(events) == 1:
        return redact(events[0])
    return f"{redact(events[0])} and {len(events) - 1} more"


def _check_or_watch(args: argparse.Namespace) -> int:
    _check_arguments(args)
    config = run_config(args)
    scenarios = load_checked(args.scenarios)
    source = _source_name(args.events)
    recorded = load_results(args.results) if args.results else {}
    evaluator = evaluator_for(config, scenarios, recorded, source)
    state_lock = lock_state(args.state) if args.state else None
    if args.state:
        saved = read_checkpoint(args.state)
        if saved is not None:
            evaluator.restore(saved)
            print(f"mantle-stream: resuming from {args.state}", file=sys.stderr)
    session = RunOutputs(config, evaluator, live=args.command == "watch", source=source,
                         recorded=recorded)  # fmt: skip
    if args.command == "check":
        session.progress_total = _feed_size(args.events)
    try:
        if parse_source(args.events[0]).scheme == "kafka":
            return kafka_command(config, session)
        return _judge(config, session, scenarios, recorded)
    finally:
        session.close()
        if state_lock is not None:
            state_lock.close()  # (the lock goes with it)


def _judge(
    config: RunConfig,
    session: RunOutputs,
    scenarios: list[Scenario],
    recorded: Mapping[str, RecordedRun],
) -> int:
    """A check or a watch in one process, or a check in several (``--workers``)."""
    fmt = config.outputs.format if config.command == "check" else "live"
    workers = worker_count(config, session.progress_total)
    noted: list[int] = []  # Ctrl-C or SIGTERM once judging was over (signals_noted)
    with contextlib.ExitStack() as finishing:
        if workers > 1:
            # (While the workers run, run_workers tells them; after, noted.)
            finishing.enter_context(signals_noted(noted))
            merged = run_workers(
                config,
                session.source,
                workers,
                session.progress_total or None,
                scenarios,
                recorded,
                session.sinks,
            )
            if merged is not None:  # (None: a bad event ended it: judged again, in one)
                session.notices = merged.notices
                status = finish(
                    session,
                    merged.outcome,
                    None,
                    fmt=fmt,
                    judged=merged.judged,
                    conversations=merged.conversations,
                )
                return after_signals(status, noted)
            finishing.close()  # judged again in one process: Ctrl-C stops it as usual

        async def go() -> tuple[RunOutcome, Runner]:
            runner = runner_for(config, session.evaluator, session.sinks)
            outcome, notes = await run_one(config, runner, recorded, session.run)
            session.refused, session.unread, session.notices = (
                notes.refused,
                notes.unread,
                notes.notices,
            )
            return outcome, runner

        outcome, runner = anyio.run(go)
        finishing.enter_context(signals_noted(noted))
        return after_signals(finish(session, outcome, runner, fmt=fmt), noted)
