"""What a run builds from its configuration: the evaluator and the feed; its signals.

Shared by the one-process run (:mod:`mantle_stream.run.one`) and the worker
processes of ``check --workers`` (:mod:`mantle_stream.run.workers`), so both
judge with the same options and read the same source the same way.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from types import FrameType
from typing import Protocol

import anyio

from mantle_stream.core.engine.evaluator import Evaluator
from mantle_stream.core.engine.partition import Partition
from mantle_stream.core.errors import CONTROL_ESCAPES, EventError, MantleStreamError, UsageError
from mantle_stream.core.recorded import RecordedRun
from mantle_stream.core.scenario.model import Scenario
from mantle_stream.feeds import Feed, ListenOptions, open_feed, parse_source
from mantle_stream.feeds.http import HttpOptions
from mantle_stream.feeds.sql import SqlOptions, parse_since
from mantle_stream.run.config import RunConfig

__all__ = [
    "LIVE_KEEP_FINISHED",
    "evaluator_for",
    "feed_for",
    "keep_finished",
    "on_signals",
    "say_skipped",
    "signals_noted",
    "stop_on_signals",
    "user_error",
]

#: Finished conversations a live source keeps listed by default (see --keep-finished).
LIVE_KEEP_FINISHED = 10_000


def keep_finished(config: RunConfig) -> int | None:
    """``--keep-finished``, else: all for files, the most recent for live sources."""
    if config.judging.keep_finished is not None:
        return config.judging.keep_finished
    live = any(parse_source(e).live for e in config.sources.events)
    return LIVE_KEEP_FINISHED if live else None


def evaluator_for(
    config: RunConfig,
    scenarios: list[Scenario],
    recorded: Mapping[str, RecordedRun],
    source: str,
    partition: Partition | None = None,
) -> Evaluator:
    """The evaluator ``config`` asks for (one worker's, with ``partition``)."""
    return Evaluator(
        scenarios,
        source=source,
        reorder_window=config.judging.reorder_window,
        assignments={cid: run.scenario for cid, run in recorded.items()},
        regex_timeout=config.judging.regex_timeout,
        keep_finished=keep_finished(config),
        partition=partition,
    )


def say_skipped(error: EventError) -> None:
    """--on-bad-event=skip: say what was skipped, on standard error."""
    print(f"mantle-stream: skipped {error}", file=sys.stderr, flush=True)


def _say_missing(conversation_id: str, reason: str) -> None:
    """A Rasa server has no tracker for a conversation: it is skipped; say so."""
    message = f"mantle-stream: warning: skipped conversation `{conversation_id}`: {reason}"
    print(message.translate(CONTROL_ESCAPES), file=sys.stderr, flush=True)


def _say_notice(message: str) -> None:
    print(f"mantle-stream: warning: {message}".translate(CONTROL_ESCAPES), file=sys.stderr,
          flush=True)  # fmt: skip


def feed_for(
    config: RunConfig,
    recorded: Mapping[str, RecordedRun],
    partition: Partition | None = None,
) -> Feed:
    """The feed of ``config``'s sources, read with its options (not opened yet)."""
    sources = config.sources
    try:
        return open_feed(
            list(sources.events),
            listen=ListenOptions(
                token=sources.token or None,
                allow_remote=sources.listen_remote,
                max_connections=sources.max_connections,
                idle_timeout=sources.connection_idle_timeout,
            ),
            http=HttpOptions(
                conversations=tuple(sources.conversations or recorded),
                token=sources.rasa_token or None,
                jwt=sources.rasa_jwt or None,
                on_missing=_say_missing,
            ),
            sql=SqlOptions(
                on_notice=_say_notice,
                conversations=sources.conversations,
                since=None if sources.since is None else parse_since(sources.since),
            ),
            partition=partition,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def user_error(exc: BaseException) -> MantleStreamError | None:
    """The error to show the user, unwrapped from task groups' exception groups."""
    if isinstance(exc, MantleStreamError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = user_error(inner)
            if found is not None:
                return found
    return None


class _Stoppable(Protocol):
    def stop(self) -> None: ...


@contextlib.contextmanager
def signals_noted(noted: list[int]) -> Iterator[None]:
    """Ctrl-C and SIGTERM noted in ``noted``, not obeyed at once, while what was judged
    is put together and written (the workers' results merged, the report built and
    printed): the outputs are whole, never cut off by the signal; the caller then
    says so and exits 130. (Outside the main thread, where signals cannot be
    caught, nothing changes.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def note(signum: int, frame: FrameType | None) -> None:
        noted.append(signum)

    with on_signals(note):
        yield


@contextlib.contextmanager
def on_signals(handler: Callable[[int, FrameType | None], object]) -> Iterator[None]:
    """``handler`` for Ctrl-C (SIGINT) and SIGTERM while the block runs; then the
    handlers that were there before (main thread only)."""
    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, before in previous.items():
            signal.signal(sig, before)


async def stop_on_signals(runner: _Stoppable, *signals: signal.Signals) -> None:
    """Ctrl-C / SIGTERM end the run (a runner, a gate) cleanly: the summary still prints."""
    with anyio.open_signal_receiver(*(signals or (signal.SIGINT, signal.SIGTERM))) as received:
        async for _ in received:
            runner.stop()
            return
