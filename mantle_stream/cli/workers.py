"""``check --workers N``: one feed judged by N processes, their outcomes merged.

Every worker reads the whole source and judges the conversations a stable
hash of their id gives it (:class:`~mantle_stream.core.engine.partition.Partition`:
lines of the others are dropped before they are decoded; a SQL store's worker
reads only its conversations' rows: :mod:`mantle_stream.feeds.sql_share`). Each
hands back what it judged (:class:`JudgedConversations`, with the verdict lines
when ``--jsonl`` asked for them) through a pipe, and counts its progress in
shared memory for the progress bar. The merge lists conversations in the order
they first appear in the feed, as one process does, so the
report, JUnit and HTML made from it are one process's; the JSONL lines come
grouped by conversation, each conversation's in the order decided.

Ctrl-C or SIGTERM reach the parent, which tells the workers (SIGTERM); each
stops as one process would and hands back what it judged. A run that a bad
event would end (the default ``--on-bad-event=fail``) is judged again in one
process, so it ends at the same event with the same report.
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any

import anyio
import msgspec

from mantle_stream.cli.sources import (
    evaluator_for,
    feed_for,
    on_signals,
    say_skipped,
    user_error,
)
from mantle_stream.core.engine.partition import JudgedConversations, Partition, merge
from mantle_stream.core.errors import FeedError, MantleStreamError, UsageError
from mantle_stream.core.recorded import RecordedRun
from mantle_stream.core.scenario.model import Scenario
from mantle_stream.core.verdicts import Decision
from mantle_stream.outputs.jsonl import JsonlWriter
from mantle_stream.outputs.progress import ReadProgress
from mantle_stream.runner import Runner, RunOutcome

__all__ = ["AUTO_MIN_BYTES", "WorkersOutcome", "cores", "run_workers"]

#: Below this many bytes of files, one process is as quick (starting more costs).
AUTO_MIN_BYTES = 4 << 20


class WorkersOutcome(msgspec.Struct, frozen=True):
    """The workers' outcomes as one run's; ``lines``: the JSONL verdict lines, grouped
    by conversation in the report's order (empty without ``--jsonl``)."""

    outcome: RunOutcome
    judged: JudgedConversations
    lines: bytes
    notices: list[str] = []  # what the workers' sources said about how they were read


class _Done(msgspec.Struct, frozen=True, tag="done"):
    outcome: RunOutcome
    judged: JudgedConversations
    lines: dict[str, bytes]  # per conversation, its JSONL lines in the order decided
    notices: list[str] = []  # Feed.notices


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
    args: argparse.Namespace,
    source: str,
    count: int,
    progress_total: int | bool | None,
    scenarios: list[Scenario],
    recorded: Mapping[str, RecordedRun],
) -> WorkersOutcome | None:
    """Judge ``args.events`` in ``count`` processes; None when a bad event ended the
    run (the caller judges it again in one process, to end where one process ends).

    Every worker judges ``scenarios`` and ``recorded`` as the parent loaded them
    (inherited when forked, else pickled): never a file read again.
    """
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
            args=(args, source, scenarios, recorded, index, count, writer, progress, os.getpid()),
            name=f"mantle-stream worker {index + 1}/{count}",
            daemon=True,
        )
        process.start()
        writer.close()
        readers.append(reader)
        processes.append(process)
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
    return _merge(received, processes, interrupted=told)


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
    cancelled = interrupted or "cancelled" in endings
    outcome = RunOutcome("cancelled" if cancelled else "end-of-input")
    lines: dict[str, bytes] = {}
    for part in done:
        lines.update(part.lines)
    # Grouped by conversation, in the report's order: bytes the workers encoded.
    grouped = b"".join(lines.get(r.conversation_id, b"") for r in judged.results)
    # Every worker reads the whole source: a notice each said is said once.
    notices = list(dict.fromkeys(n for part in done for n in part.notices))
    return WorkersOutcome(outcome, judged, grouped, notices)


def _context() -> Any:
    """Fork where it is safe (no thread started yet: nothing half-held is copied), as
    it starts a worker in milliseconds; else spawn."""
    if "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


def _work(
    args: argparse.Namespace,
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
    asked = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: asked.set())
    try:
        message: _Message = _judge(
            args, source, scenarios, recorded, Partition(index, count), progress, asked, parent
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
    args: argparse.Namespace,
    source: str,
    scenarios: list[Scenario],
    recorded: Mapping[str, RecordedRun],
    partition: Partition,
    progress: Any,
    asked: threading.Event,
    parent: int,
) -> _Done:
    evaluator = evaluator_for(args, scenarios, recorded, source, partition)
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
            if asked.is_set() or os.getppid() != parent:
                runner.stop()
                return
            await anyio.sleep(0.05)

    notices: list[str] = []

    async def go() -> RunOutcome:
        runner = Runner(
            evaluator,
            on_decisions=keep if args.jsonl else None,
            skip_bad_events=args.on_bad_event == "skip",
            on_bad=say_skipped,
            gap_timeout=args.gap_timeout,
        )
        outcome = RunOutcome("cancelled")
        async with feed_for(args, recorded, partition) as feed, anyio.create_task_group() as tg:
            with anyio.open_signal_receiver(signal.SIGTERM) as signals:

                async def forward() -> None:
                    async for _ in signals:
                        asked.set()

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
    first_seen = [partition.ordinal(r.conversation_id) for r in judged.results]
    first_seen += [partition.ordinal(u.conversation_id) for u in judged.unmatched]
    judged = msgspec.structs.replace(judged, first_seen=first_seen)
    encoded = {cid: JsonlWriter.lines(kept) for cid, kept in lines.items()}
    return _Done(outcome, judged, encoded, notices)
