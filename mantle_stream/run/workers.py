"""``check --workers N``: one feed judged by N processes, their outcomes merged.

Every worker reads the whole source and judges the conversations a stable
hash of their id gives it (:class:`~mantle_stream.core.engine.partition.Partition`:
lines of the others are dropped before they are decoded; a SQL store's worker
reads only its conversations' rows: :mod:`mantle_stream.feeds.sql_share`). Each
hands back what it judged (:class:`JudgedConversations`, with the
verdict lines when ``--jsonl`` asked for them) through a pipe, and counts its
progress in shared memory for the progress bar. The merge lists conversations
in the order they first appear in the feed, as one process does, so the
report, JUnit and HTML made from it are one process's. Every worker hands back
its decisions too: the parent tells them to every sink (:mod:`mantle_stream.run.sinks`)
at once, grouped by conversation in the report's order, each conversation's
in the order decided. A sink whose output can be made apart
(:class:`~mantle_stream.run.sinks.RenderedApart`: the JSONL lines) has it
made by the workers, per conversation, and is handed the bytes.

The workers also make their conversations as the report lists them
(:func:`~mantle_stream.outputs.report.report_conversations`), sent in place of
what they judged of each: the parent puts them in order and builds the report
around them, rather than making every one in its serial tail.

Ctrl-C or SIGTERM reach the parent, which tells the workers (SIGTERM); each
stops as one process would and hands back what it judged. A run that a bad
event would end (the default ``--on-bad-event=fail``) is judged again in one
process, so it ends at the same event with the same report.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import anyio
import msgspec

from mantle_stream.core.engine.partition import JudgedConversations, Partition, in_order, merge
from mantle_stream.core.errors import FeedError, MantleStreamError, UsageError
from mantle_stream.core.recorded import RecordedRun
from mantle_stream.core.scenario.model import Scenario
from mantle_stream.core.verdicts import Decision
from mantle_stream.feeds.spec import parse_source
from mantle_stream.outputs.junit import JunitWriter, RunCases, run_cases
from mantle_stream.outputs.progress import ReadProgress
from mantle_stream.outputs.report import ReportConversation, report_conversations
from mantle_stream.outputs.sink import Sink, Sinks
from mantle_stream.run.config import RunConfig
from mantle_stream.run.sinks import RenderedApart
from mantle_stream.run.sources import (
    evaluator_for,
    feed_for,
    on_signals,
    say_skipped,
    user_error,
)
from mantle_stream.runner import Runner, RunOutcome

__all__ = [
    "AUTO_MIN_BYTES",
    "WorkersOutcome",
    "cores",
    "one_process_only",
    "run_workers",
    "worker_count",
]

#: Below this many bytes of files, one process is as quick (starting more costs).
AUTO_MIN_BYTES = 4 << 20


class WorkersOutcome(msgspec.Struct, frozen=True):
    """The workers' outcomes as one run's; ``decisions``: every worker's, grouped by
    conversation in the report's order, each conversation's in the order decided.
    ``judged``: their counters and unmatched conversations, its ``results`` empty:
    the judged conversations are ``conversations``, as the report lists them, in
    order (:func:`~mantle_stream.outputs.report.build_report` takes both)."""

    outcome: RunOutcome
    judged: JudgedConversations
    decisions: list[Decision]
    conversations: list[ReportConversation] = []
    notices: list[str] = []  # what the workers' sources said about how they were read
    #: Per sink rendered apart (in the order given), its bytes, grouped likewise.
    rendered: list[bytes] = []
    #: The JUnit cases of each run, by conversation, made by the workers (--junit).
    junit: dict[str, RunCases] = {}


class _Done(msgspec.Struct, frozen=True, tag="done"):
    outcome: RunOutcome
    judged: JudgedConversations  # its results: `conversations`, numbered by `listed`
    conversations: list[ReportConversation]
    listed: list[int]  # each conversation's number in order of first appearance
    decisions: dict[str, list[Decision]]  # per conversation, in the order decided
    notices: list[str] = []  # Feed.notices
    rendered: list[dict[str, bytes]] = []  # per renderer, per conversation
    junit: dict[str, RunCases] = {}  # per conversation: its run's JUnit cases


class _Failed(msgspec.Struct, frozen=True, tag="failed"):
    kind: str
    message: str


_Message = _Done | _Failed
_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(_Message).decode
_ERRORS: dict[str, type[MantleStreamError]] = {
    "UsageError": UsageError,
    "FeedError": FeedError,
    "EventError": FeedError,  # (its message names the source, the line and the event)
}


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def run_workers(
    config: RunConfig,
    source: str,
    count: int,
    progress_total: int | bool | None,
    scenarios: list[Scenario],
    recorded: Mapping[str, RecordedRun],
    sinks: Sinks | None = None,
) -> WorkersOutcome | None:
    """Judge ``config``'s sources in ``count`` processes, their decisions told to
    ``sinks`` once merged; None when a bad event ended the run (the caller judges it
    again in one process, to end where one process ends; ``sinks`` are told nothing).

    Every worker judges ``scenarios`` and ``recorded`` as the parent loaded them
    (inherited when forked, else pickled): never a file read again.
    """
    apart = [s for s in (sinks.sinks if sinks else ()) if isinstance(s, RenderedApart)]
    others = [s for s in (sinks.sinks if sinks else ()) if s not in apart]
    # What each worker makes of its decisions: the lines of each sink rendered apart,
    # and the decisions themselves only when another sink will hear them.
    junit = [s for s in others if isinstance(s, JunitWriter)]
    asked = _Asked(
        [type(s).lines for s in apart],
        keep=bool(others),
        junit=junit[0].tool_calls if junit else None,
    )
    readers, processes, progress = _start(count, config, asked, source, scenarios, recorded)
    told = False

    def tell_all() -> None:
        """SIGTERM to every worker still running, once: each stops and reports."""
        nonlocal told
        if told:
            return
        told = True
        for process in processes:
            if process.is_alive() and process.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(process.pid, signal.SIGTERM)

    received: dict[int, _Message | None] = {}
    started = time.monotonic()
    try:
        with on_signals(lambda *_: tell_all()), ReadProgress(progress_total or None) as bar:
            waiting = dict(enumerate(readers))
            while waiting:
                for ready in multiprocessing.connection.wait(list(waiting.values()), 0.1):
                    index = readers.index(ready)
                    try:
                        message: _Message | None = _decode(ready.recv_bytes())  # type: ignore[union-attr]
                    except (EOFError, OSError):
                        message = None  # it died before it could say
                    received[index] = message
                    del waiting[index]
                    if not isinstance(message, _Done) or message.outcome.ending == "bad-event":
                        tell_all()  # the outcome is settled: the others need not go on
                if bar.enabled:
                    events = sum(progress[1::2])
                    elapsed = time.monotonic() - started
                    bar.update(min(progress[::2]), events, events / elapsed if elapsed else 0.0)
    finally:
        for process in processes:
            process.join(5)
            if process.is_alive():
                process.kill()
                process.join()
    merged = _merge(received, processes, interrupted=told)
    if merged is not None and sinks is not None:
        _tell(sinks, merged, apart, others)
    return merged


def _start(
    count: int,
    config: RunConfig,
    asked: _Asked,
    source: str,
    scenarios: list[Scenario],
    recorded: Mapping[str, RecordedRun],
) -> tuple[list[Any], list[multiprocessing.process.BaseProcess], Any]:
    """``count`` workers started: the pipes their results come through, the
    processes, and the shared memory they count their progress in."""
    context = _context()
    progress = context.Array("q", 2 * count, lock=False)
    sys.stdout.flush()
    sys.stderr.flush()
    readers = []
    processes = []
    for index in range(count):
        reader, writer = context.Pipe(duplex=False)
        process = context.Process(
            target=_work,
            args=(
                config,
                asked,
                source,
                scenarios,
                recorded,
                index,
                count,
                writer,
                progress,
                os.getpid(),
            ),
            name=f"mantle-stream worker {index + 1}/{count}",
            daemon=True,
        )
        process.start()
        writer.close()
        readers.append(reader)
        processes.append(process)
    return readers, processes, progress


def _tell(
    sinks: Sinks, merged: WorkersOutcome, apart: Sequence[RenderedApart], others: list[Sink]
) -> None:
    """Every sink told the merged decisions: the lines the workers made for those
    rendered apart, the decisions themselves for the others."""
    for renders, data in zip(apart, merged.rendered, strict=True):
        sinks.attempt(renders, renders.write_lines, data)  # type: ignore[arg-type]
    for sink in others:
        if merged.decisions and sink in sinks.sinks:  # (not dropped meanwhile)
            sinks.attempt(sink, sink.on_decisions, merged.decisions)
        if merged.junit and isinstance(sink, JunitWriter) and sink in sinks.sinks:
            sinks.attempt(sink, sink.add_made, merged.junit)


def _merge(
    received: dict[int, _Message | None],
    processes: list[multiprocessing.process.BaseProcess],
    *,
    interrupted: bool,
) -> WorkersOutcome | None:
    done: list[_Done] = []
    if any(isinstance(m, _Failed) and m.kind == "OneProcessNeeded" for m in received.values()):
        return None  # a SQL store's share could not be read apart: judged in one process
    for index in sorted(received):
        message = received[index]
        if isinstance(message, _Failed):
            raise _ERRORS.get(message.kind, MantleStreamError)(message.message)
    if any(isinstance(m, _Done) and m.outcome.ending == "bad-event" for m in received.values()):
        return None  # judged again in one process, to end where it ends
    for index in sorted(received):
        message = received[index]
        if message is None:
            code = processes[index].exitcode
            raise MantleStreamError(
                f"worker {index + 1} of {len(processes)} ended without a result "
                f"(exit status {code})"
            )
        assert isinstance(message, _Done)
        done.append(message)
    endings = {d.outcome.ending for d in done}
    judged = merge([d.judged for d in done])
    _, conversations = in_order((d.listed, d.conversations) for d in done)
    cancelled = interrupted or "cancelled" in endings
    outcome = RunOutcome("cancelled" if cancelled else "end-of-input")
    decided: dict[str, list[Decision]] = {}
    for part in done:
        decided.update(part.decisions)
    # Grouped by conversation, in the report's order.
    order = [c.conversation_id for c in conversations]
    grouped = [d for cid in order for d in decided.get(cid, ())]
    rendered = []
    for each in range(len(done[0].rendered) if done else 0):
        made: dict[str, bytes] = {}
        for part in done:
            made.update(part.rendered[each])
        rendered.append(b"".join(made.get(cid, b"") for cid in order))
    junit: dict[str, RunCases] = {}
    for part in done:
        junit.update(part.junit)
    # Every worker reads the whole source: a notice each said is said once.
    notices = list(dict.fromkeys(n for part in done for n in part.notices))
    return WorkersOutcome(outcome, judged, grouped, conversations, notices, rendered, junit)


def _context() -> Any:
    """Fork where it is safe (no thread started yet: nothing half-held is copied), as
    it starts a worker in milliseconds; else spawn."""
    if "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


class _Asked(msgspec.Struct, frozen=True):
    """What a worker makes of its decisions besides its judging."""

    renderers: list[Callable[[Iterable[Decision]], bytes]]  # RenderedApart.lines
    keep: bool  # send the decisions themselves
    junit: bool | None = None  # make each run's JUnit cases (with --tool-calls: True)


def _work(
    config: RunConfig,
    asked: _Asked,
    source: str,
    scenarios: list[Scenario],
    recorded: Mapping[str, RecordedRun],
    index: int,
    count: int,
    pipe: multiprocessing.connection.Connection,
    progress: Any,
    parent: int,
) -> None:
    """One worker: judge this partition's conversations, send what was judged.

    The parent says when to stop (SIGTERM; Ctrl-C reaches it alone): from the
    first instant a SIGTERM is noted, then handed to the runner, and ignored
    while the result is put together and sent, so it always arrives.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        message: _Message = _judge(
            config,
            asked,
            source,
            scenarios,
            recorded,
            Partition(index, count),
            progress,
            stop,
            parent,
        )
    except BaseException as exc:
        error = user_error(exc)
        if error is None:
            raise
        message = _Failed(type(error).__name__, str(error))
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    pipe.send_bytes(_encode(message))
    pipe.close()


def _judge(
    config: RunConfig,
    asked: _Asked,
    source: str,
    scenarios: list[Scenario],
    recorded: Mapping[str, RecordedRun],
    partition: Partition,
    progress: Any,
    stop: threading.Event,
    parent: int,
) -> _Done:
    evaluator = evaluator_for(config, scenarios, recorded, source, partition)
    lines: dict[str, list[Decision]] = {}
    slot = 2 * partition.index

    def keep(decisions: list[Decision]) -> None:
        for d in decisions:
            lines.setdefault(d.conversation_id, []).append(d)

    async def watch(runner: Runner) -> None:
        """Progress into shared memory; a stop asked for (or the parent gone) obeyed."""
        while True:
            progress[slot] = runner.bytes_read
            progress[slot + 1] = evaluator.statistics().events
            if stop.is_set() or os.getppid() != parent:
                runner.stop()
                return
            await anyio.sleep(0.05)

    notices: list[str] = []

    async def go() -> RunOutcome:
        runner = Runner(
            evaluator,
            on_decisions=keep if asked.keep or asked.renderers else None,
            skip_bad_events=config.judging.on_bad_event == "skip",
            on_bad=say_skipped,
            gap_timeout=config.live.gap_timeout,
        )
        outcome = RunOutcome("cancelled")
        async with feed_for(config, recorded, partition) as feed, anyio.create_task_group() as tg:
            with anyio.open_signal_receiver(signal.SIGTERM) as signals:

                async def forward() -> None:
                    async for _ in signals:
                        stop.set()

                tg.start_soon(forward)
                tg.start_soon(watch, runner)
                try:
                    outcome = await runner.run(feed)
                finally:
                    notices[:] = feed.notices
                tg.cancel_scope.cancel()
        return outcome

    outcome = anyio.run(go)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the result goes out whatever comes
    judged = evaluator.judged()
    listed = [partition.ordinal(r.conversation_id) for r in judged.results]
    unmatched = [partition.ordinal(u.conversation_id) for u in judged.unmatched]
    # Made here, in parallel, rather than in the parent's serial tail: the report's
    # conversations (sent in place of the results), the JSONL lines, the JUnit cases.
    conversations = report_conversations(
        judged.results, recorded, scenarios, tool_calls=config.judging.tool_calls
    )
    judged = msgspec.structs.replace(judged, results=[], first_seen=unmatched)
    rendered = [{cid: render(kept) for cid, kept in lines.items()} for render in asked.renderers]
    junit: dict[str, RunCases] = {}
    if asked.junit is not None:
        for c in conversations:
            junit[c.conversation_id] = run_cases(c, tool_calls=asked.junit)
    decisions = lines if asked.keep else {}
    return _Done(outcome, judged, conversations, listed, decisions, notices, rendered, junit)


def _regular(path: str) -> bool:
    """A file or a directory: something every worker can read whole."""
    return os.path.isfile(path) or os.path.isdir(path)


def worker_count(config: RunConfig, size: int | bool | None) -> int:
    """How many processes judge: ``--workers``, else one per core for a replay of files
    of ``AUTO_MIN_BYTES`` or more (``size``: their bytes) or of a SQL store; one when
    only one can."""
    if config.command != "check":
        return 1
    why_not = one_process_only(config)
    if config.workers is not None:
        if config.workers > 1 and why_not:
            raise UsageError(f"--workers {config.workers}: {why_not}; give --workers 1")
        return config.workers
    if why_not:
        return 1
    sql = all(parse_source(e).sql for e in config.sources.events)
    if not sql and not (isinstance(size, int) and size >= AUTO_MIN_BYTES):
        return 1
    return cores()


def one_process_only(config: RunConfig) -> str | None:
    """Why this run can be judged by one process only, if it can."""
    if config.judging.fail_fast:
        return "--fail-fast stops at the first failure in the feed's order, which one process sees"
    if config.live.state:
        return "--state checkpoints one process's evaluator"
    if config.judging.keep_finished is not None:
        return "--keep-finished keeps the conversations one process finished last"
    for source in map(parse_source, config.sources.events):
        if source.one_reader is not None:
            return source.one_reader
        # A pipe (<(...)) or a device: each worker would read a part of it.
        if source.local and os.path.exists(source.target) and not _regular(source.target):
            return f"`{source.spec}` is not a regular file: one process reads it"
    return None
