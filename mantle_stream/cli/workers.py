"""``check --workers N``: one feed judged by N processes, their outcomes merged.

Every worker reads the whole source and judges the conversations a stable
hash of their id gives it (:class:`~mantle_stream.core.engine.partition.Partition`:
lines of the others are dropped before they are decoded; a SQL store skips
their rows). Each hands back what it judged (:class:`Judged`, with the
verdict lines when ``--jsonl`` asked for them) through a pipe, and counts its
progress in shared memory for the progress bar. The merge lists conversations
in the order they first appear in the feed, as one process does, so the
report, JUnit and HTML made from it are one process's; the JSONL lines come
grouped by conversation, each conversation's in the order decided.

Ctrl-C or SIGTERM reach the parent, which tells the workers (SIGTERM); each
stops as one process would and hands back what it judged. A run that a bad
event would end (the default ``--on-bad-event=fail``) is judged again in one
process, so it ends at the same event with the same report.
"""

from __future__ import annotations

import argparse
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import threading
import time
from types import FrameType
from typing import Any

import anyio
import msgspec

from mantle_stream.cli.sources import evaluator_for, feed_for, say_skipped, stop_on_signals
from mantle_stream.core.engine.partition import Judged, Partition, merge
from mantle_stream.core.errors import FeedError, MantleStreamError, UsageError
from mantle_stream.core.recorded import load_results
from mantle_stream.core.scenario.load import load_scenarios
from mantle_stream.core.verdicts import Decision
from mantle_stream.feeds.partitioned import PartitionedFeed
from mantle_stream.outputs.progress import ReadProgress
from mantle_stream.runner import Runner, RunOutcome

__all__ = ["AUTO_MIN_BYTES", "Merged", "cores", "run_workers"]

#: Below this many bytes of files, one process is as quick (starting more costs).
AUTO_MIN_BYTES = 4 << 20


class Merged(msgspec.Struct, frozen=True):
    """The workers' outcomes as one run's."""

    outcome: RunOutcome
    judged: Judged
    decisions: list[Decision]


class _Done(msgspec.Struct, frozen=True, tag="done"):
    outcome: RunOutcome
    judged: Judged
    decisions: list[Decision]


class _Failed(msgspec.Struct, frozen=True, tag="failed"):
    kind: str
    message: str


_Message = _Done | _Failed
_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(_Message).decode
_ERRORS: dict[str, type[MantleStreamError]] = {"UsageError": UsageError, "FeedError": FeedError}


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
) -> Merged | None:
    """Judge ``args.events`` in ``count`` processes; None when a bad event ended the
    run (the caller judges it again in one process, to end where one process ends)."""
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
            args=(args, source, index, count, writer, progress),
            name=f"mantle-stream worker {index + 1}/{count}",
            daemon=True,
        )
        process.start()
        writer.close()
        readers.append(reader)
        processes.append(process)

    def forward(signum: int, frame: FrameType | None) -> None:
        for process in processes:
            if process.is_alive() and process.pid is not None:
                os.kill(process.pid, signal.SIGTERM)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    received: dict[int, bytes | None] = {}
    started = time.monotonic()
    try:
        with ReadProgress(progress_total) as bar:
            waiting = dict(enumerate(readers))
            while waiting:
                for ready in multiprocessing.connection.wait(list(waiting.values()), 0.1):
                    index = readers.index(ready)
                    try:
                        received[index] = ready.recv_bytes()  # type: ignore[union-attr]
                    except EOFError:
                        received[index] = None
                    del waiting[index]
                if bar.enabled:
                    events = sum(progress[1::2])
                    elapsed = time.monotonic() - started
                    bar.update(min(progress[::2]), events, events / elapsed if elapsed else 0.0)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for process in processes:
            process.join(5)
            if process.is_alive():
                process.kill()
                process.join()
    return _merge(received, processes)


def _merge(
    received: dict[int, bytes | None], processes: list[multiprocessing.process.BaseProcess]
) -> Merged | None:
    done: list[_Done] = []
    for index in sorted(received):
        data = received[index]
        if data is None:
            code = processes[index].exitcode
            raise MantleStreamError(
                f"worker {index + 1} of {len(processes)} ended without a result "
                f"(exit status {code})"
            )
        message = _decode(data)
        if isinstance(message, _Failed):
            raise _ERRORS.get(message.kind, MantleStreamError)(message.message)
        done.append(message)
    endings = {d.outcome.ending for d in done}
    if "bad-event" in endings:
        return None
    judged = merge([d.judged for d in done])
    outcome = RunOutcome("cancelled" if "cancelled" in endings else "end-of-input")
    return Merged(outcome, judged, judged_decisions(judged, done))


def judged_decisions(judged: Judged, done: list[_Done]) -> list[Decision]:
    """Every worker's verdict lines grouped by conversation, in the merged order."""
    order = {r.conversation_id: i for i, r in enumerate(judged.results)}
    return sorted(
        (d for part in done for d in part.decisions),
        key=lambda d: order.get(d.conversation_id, len(order)),
    )


def _context() -> Any:
    """Fork where it is safe (no thread started yet: nothing half-held is copied), as
    it starts a worker in milliseconds; else spawn."""
    if "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


def _work(
    args: argparse.Namespace,
    source: str,
    index: int,
    count: int,
    pipe: multiprocessing.connection.Connection,
    progress: Any,
) -> None:
    """One worker: judge this partition's conversations, send what was judged."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent says when to stop (SIGTERM)
    try:
        message: _Message = _judge(args, source, Partition(index, count), progress)
    except MantleStreamError as exc:
        message = _Failed(type(exc).__name__, str(exc))
    pipe.send_bytes(_encode(message))
    pipe.close()


def _judge(
    args: argparse.Namespace,
    source: str,
    partition: Partition,
    progress: Any,
) -> _Done:
    scenarios = load_scenarios(args.scenarios)
    recorded = load_results(args.results) if args.results else {}
    evaluator = evaluator_for(args, scenarios, recorded, source, partition)
    decisions: list[Decision] = []
    slot = 2 * partition.index

    async def count_progress(feed: object, runner: Runner) -> None:
        while True:
            whole = feed.bytes_read if isinstance(feed, PartitionedFeed) else runner.bytes_read
            progress[slot] = whole
            progress[slot + 1] = evaluator.statistics().events
            await anyio.sleep(0.1)

    async def go() -> RunOutcome:
        runner = Runner(
            evaluator,
            on_decisions=decisions.extend if args.jsonl else None,
            skip_bad_events=args.on_bad_event == "skip",
            on_bad=say_skipped,
            gap_timeout=args.gap_timeout,
        )
        outcome = RunOutcome("cancelled")
        async with feed_for(args, recorded, partition) as feed, anyio.create_task_group() as tg:
            tg.start_soon(stop_on_signals, runner, signal.SIGTERM)
            tg.start_soon(count_progress, feed, runner)
            outcome = await runner.run(feed)
            tg.cancel_scope.cancel()
        return outcome

    outcome = anyio.run(go)
    judged = evaluator.judged()
    first_seen = [partition.ordinal(r.conversation_id) for r in judged.results]
    first_seen += [partition.ordinal(u.conversation_id) for u in judged.unmatched]
    judged = msgspec.structs.replace(judged, first_seen=first_seen)
    return _Done(outcome, judged, decisions)
