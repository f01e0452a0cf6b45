"""The one-process run: one evaluator judging one feed through a runner, into the sinks.

The strategy ``check`` (one worker) and ``watch`` use; ``--workers``
(:mod:`mantle_stream.run.workers`) falls back to it to end a run at a bad
event where one process ends it. What a caller shows meanwhile (a live view,
a progress bar) it does in ``drive``, which runs the runner over the opened feed.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable, Mapping

import msgspec

from mantle_stream.core.defaults import LINGER_UNSET
from mantle_stream.core.engine.evaluator import Evaluator
from mantle_stream.core.errors import CONTROL_ESCAPES
from mantle_stream.core.recorded import RecordedRun
from mantle_stream.feeds import Feed, parse_source
from mantle_stream.outputs.sink import Sink
from mantle_stream.run.config import RunConfig
from mantle_stream.run.sources import feed_for, say_skipped
from mantle_stream.runner import Runner, RunOutcome

__all__ = ["FeedNotes", "linger", "run_one", "runner_for"]

#: Sources that, followed, may get more runs later (a listener's clients leave instead).
_FOLLOWED = ("follow", "sqlite", "postgresql")


class FeedNotes(msgspec.Struct, frozen=True):
    """What the feed said about how it was read, for the report."""

    refused: dict[str, int]  # clients the listener turned away, by reason
    unread: dict[str, str]  # conversations the source could not read, why
    notices: list[str]  # Feed.notices


def linger(config: RunConfig) -> float | None:
    """``--linger``, else: never for a followed file or store (a live source that
    ends only when told: runs may be written to it later), 1 s for listeners (a
    simulator leaves when it is done)."""
    if config.live.linger != LINGER_UNSET:
        return config.live.linger
    followed = (parse_source(e) for e in config.sources.events)
    return None if any(s.live and s.scheme in _FOLLOWED for s in followed) else 1.0


def runner_for(config: RunConfig, evaluator: Evaluator, sinks: Sink) -> Runner:
    """The runner of ``config`` over ``evaluator``, telling ``sinks`` what it decides and
    stops. The sinks only hear the stop messages sent to simulators on connections: a
    conversation read from a file or pipe is never stopped."""
    return Runner(
        evaluator,
        on_decisions=sinks.on_decisions,
        on_stop=sinks.on_stop,
        stop_unconnected=False,
        fail_fast=config.judging.fail_fast,
        idle_timeout=config.live.idle_timeout,
        linger=linger(config),
        skip_bad_events=config.judging.on_bad_event == "skip",
        on_bad=say_skipped,
        state_path=config.live.state,
        state_interval=config.live.state_interval,
        gap_timeout=config.live.gap_timeout,
    )


def _say_refused(client: str, reason: str) -> None:
    """The listener turned a client away: say whom and why, on standard error."""
    message = f"mantle-stream: refused {client}: {reason}"
    print(message.translate(CONTROL_ESCAPES), file=sys.stderr, flush=True)


async def run_one(
    config: RunConfig,
    runner: Runner,
    recorded: Mapping[str, RecordedRun],
    drive: Callable[[Runner, Feed], Awaitable[RunOutcome]] | None = None,
) -> tuple[RunOutcome, FeedNotes]:
    """Open ``config``'s feed and run ``runner`` over it (through ``drive``, when given);
    the outcome and what the feed said."""
    async with feed_for(config, recorded) as feed:
        feed.on_rejected = _say_refused
        first = parse_source(config.sources.events[0])
        if first.scheme == "follow" and not os.path.exists(first.target):
            print(f"mantle-stream: waiting for `{first.target}` to be created",
                  file=sys.stderr, flush=True)  # fmt: skip
        if feed.address and feed.live:
            print(f"mantle-stream: listening on {feed.address}", file=sys.stderr, flush=True)
        outcome = await (runner.run(feed) if drive is None else drive(runner, feed))
        return outcome, FeedNotes(feed.rejected, feed.unread, feed.notices)
