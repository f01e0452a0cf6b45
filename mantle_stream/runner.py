"""The live runner: drives an evaluator from a feed, tells simulators to stop.

An edge module (anyio). It sits between :mod:`mantle_stream.feeds.base` (bytes
from files, pipes and sockets) and the pure engine, and adds what only a
live run has:

* **early stop per conversation**: when a conversation's outcome is settled
  before it ends (an assertion failed, or every assertion is decided), a
  :class:`StopMessage` is delivered once — as a JSON line on the socket
  connection that sent the conversation's events, and to the ``on_stop``
  callback — so the simulator can end it without spending more turns (a
  conversation read from a file or pipe has no connection: it is stopped
  only when ``on_stop`` is given, unless ``stop_unconnected`` says otherwise);
* **fail-fast** for the whole run;
* **idle timeout**: a conversation with no event for ``idle_timeout`` seconds
  is finished (its pending assertions resolve, ``decided_at`` null);
* **gap timeout**: a conversation whose events have waited ``gap_timeout``
  seconds for a missing earlier ``sequence`` applies them across the gap (the
  engine reads no clock, so the runner keeps the time);
* **end of a live feed**: ``follow:`` and socket feeds never end by
  themselves; the run ends once every conversation seen has ended, no client
  is connected and nothing has arrived for ``linger`` seconds (``linger=None``
  keeps listening until cancelled).

All engine calls happen on the event loop's thread between awaits, so a
snapshot taken by a refresh task never sees a half-applied chunk.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Callable
from typing import Literal

import anyio
import msgspec

from mantle_stream.core.defaults import DEFAULT_GAP_TIMEOUT
from mantle_stream.core.engine.evaluator import Evaluator
from mantle_stream.core.errors import EventError
from mantle_stream.core.live import EventRate, GapTimer, IdleTimer, StopRule
from mantle_stream.core.verdicts import Decision, StopMessage, VerdictRecord
from mantle_stream.feeds import Chunk, Feed, Replies, open_feed
from mantle_stream.outputs.state import remove_checkpoint, write_checkpoint

__all__ = [
    "DEFAULT_GAP_TIMEOUT",
    "RunOutcome",
    "Runner",
    "StopAssertion",
    "StopMessage",
    "run_feed",
]

Ending = Literal["end-of-input", "ended", "fail-fast", "cancelled", "bad-event"]

#: Finished conversations encoded for a checkpoint between two turns of the
#: event loop (~2 ms of work: see Runner._watchdog).
FREEZE_SLICE = 500


#: A stop message's ``assertion`` (the family's record; the name kept for existing
#: imports). :class:`StopMessage` itself lives in :mod:`mantle_stream.core.verdicts`.
StopAssertion = VerdictRecord


class RunOutcome(msgspec.Struct, frozen=True):
    ending: Ending
    stopped_early: tuple[str, ...] = ()
    error: str | None = None  # the bad event that ended the run ("bad-event")


_encode = msgspec.json.Encoder().encode


def _relocated(
    on_bad: Callable[[EventError], object], line_of: Callable[[int], int], error: EventError
) -> None:
    """Tell ``on_bad`` of a bad event at its line in the feed (``Chunk.line_of``)."""
    on_bad(error.at(line_of(error.line or 0)))


class Runner:
    """Runs one evaluator over one feed. Create, then ``await run(feed)``."""

    def __init__(
        self,
        evaluator: Evaluator,
        *,
        fail_fast: bool = False,
        idle_timeout: float | None = None,
        linger: float | None = 1.0,
        on_decisions: Callable[[list[Decision]], object] | None = None,
        on_stop: Callable[[StopMessage], object] | None = None,
        on_bad: Callable[[EventError], object] | None = None,
        skip_bad_events: bool = False,
        state_path: str | None = None,
        state_interval: float = 1.0,
        gap_timeout: float = DEFAULT_GAP_TIMEOUT,
        stop_unconnected: bool | None = None,
    ) -> None:
        """``stop_unconnected``: whether a settled conversation read from a file or
        pipe (no connection to answer on) is stopped too, its stop message given to
        ``on_stop`` alone; by default, when ``on_stop`` is given (the caller is then
        the simulator to tell). False makes ``on_stop`` an observer of the stop
        messages sent on connections."""
        self._gaps = GapTimer(gap_timeout)
        self.evaluator = evaluator
        self.on_bad = on_bad
        self.skip_bad_events = skip_bad_events
        self.state_path = state_path
        self.state_interval = state_interval
        self._error: EventError | None = None
        self.fail_fast = fail_fast
        self.idle_timeout = idle_timeout
        self.linger = linger
        self.on_decisions = on_decisions
        self.on_stop = on_stop
        self.stop_unconnected = (
            on_stop is not None if stop_unconnected is None else stop_unconnected
        )
        self.started = anyio.current_time()
        self.ended: float | None = None  # loop time when the run ended
        self.latest: deque[Decision] = deque(maxlen=20)
        self._stops = StopRule(evaluator)
        self.stopped_early: deque[str] = self._stops.stopped
        self.bytes_read = 0  # of the feed, handed to the evaluator so far (progress)
        self._held_peers: dict[str, Replies] = {}  # conversations holding events: their peer
        self._rate = EventRate()
        self._ending: Ending = "end-of-input"
        self._scope: anyio.CancelScope | None = None

    # ------------------------------------------------------------------ reading

    @property
    def elapsed(self) -> float:
        """Seconds the run has taken (frozen once it ended)."""
        end = self.ended if self.ended is not None else anyio.current_time()
        return end - self.started

    def events_per_second(self) -> float:
        """Recent rate (over the last few seconds), or the average so far."""
        events = self.evaluator.statistics().events
        recent = self._rate.per_second() if self.ended is None else None
        if recent is not None:
            return recent
        return events / self.elapsed if self.elapsed > 0 else 0.0

    # ------------------------------------------------------------------ running

    def stop(self, *, finish: bool = False) -> None:
        """End the run from outside (a signal, a UI, a finished simulator).

        With ``finish`` every open conversation is finished (as at the end of
        input); without, pending verdicts stay pending.
        """
        self._ending = "ended" if finish else "cancelled"
        self._cancel()

    async def run(self, feed: Feed) -> RunOutcome:
        self.started = anyio.current_time()
        with anyio.CancelScope() as scope:
            self._scope = scope
            async with anyio.create_task_group() as tg:
                # Always: a pipe may be a live simulator too, with gaps to time out.
                tg.start_soon(self._watchdog, feed)
                try:
                    await self._consume(feed)
                except EventError as exc:  # strict policy: stop, keep what was judged
                    self._emit(exc.decisions)
                    self._error = exc
                    self._ending = "bad-event"
                tg.cancel_scope.cancel()
        if self._ending in ("end-of-input", "ended"):
            self._emit(self.evaluator.finish_all())
        if self.state_path is not None:
            if self._ending in ("end-of-input", "ended"):
                remove_checkpoint(self.state_path)  # complete: nothing to resume
            else:
                write_checkpoint(self.state_path, self.evaluator.checkpoint())
        self.ended = anyio.current_time()
        return RunOutcome(
            self._ending,
            tuple(self.stopped_early),
            None if self._error is None else str(self._error),
        )

    def _bad(self, error: EventError) -> None:
        if self.on_bad is not None:
            self.on_bad(error)

    async def _consume(self, feed: Feed) -> None:
        evaluator = self.evaluator
        on_bad = self._bad if self.skip_bad_events else None
        refused: list[EventError] = []
        # A connection owns the conversations it opens; once it is gone, a
        # reconnecting simulator takes them over.
        feed.on_gone = evaluator.release_owner
        async for chunk in feed:
            # The source's word, which it may learn as it reads (a SQL table's ids):
            # where each conversation comes in order, a gap never fills.
            evaluator.ordered = feed.ordered
            self.bytes_read += len(chunk.data)
            peer = chunk.peer
            line_of = chunk.line_of
            bad: Callable[[EventError], object] | None = on_bad
            if peer is not None:
                # On a listener, one client's bad line is that client's problem: it
                # is answered there, counted and skipped; the others' runs go on.
                bad = refused.append
            elif on_bad is not None and line_of is not None:
                bad = functools.partial(_relocated, on_bad, line_of)
            try:
                decisions = evaluator.push_chunk(
                    chunk.data,
                    stop_at_failure=self.fail_fast,
                    on_bad=bad,
                    # Lines not consecutive: numbered from 0 here, named by line_of.
                    first_line=chunk.first_line if line_of is None else 0,
                    source=chunk.source if peer is None else peer.name,
                    owner=peer,
                )
            except EventError as exc:
                if line_of is None:
                    raise
                raise exc.at(line_of(exc.line or 0)) from None
            if refused:
                assert peer is not None
                for error in refused:
                    self._bad(error)
                    peer.post(
                        _encode(
                            {
                                "type": "error",
                                "error": "bad event",
                                "line": error.line,
                                "message": error.message,
                            }
                        )
                    )
                refused.clear()
            if chunk.ends is not None and evaluator.is_open(chunk.ends):
                decisions += evaluator.finish(chunk.ends)  # a tracker document: all of it
            if peer is not None and evaluator.statistics().held:
                # Whose events wait for a gap: if the gap timeout releases them and
                # that settles the conversation, the stop message goes there.
                for cid in evaluator.holding():
                    self._held_peers.setdefault(cid, peer)
            if decisions:
                await self._handle(decisions, chunk)
                if self.fail_fast and any(d.verdict == "failed" for d in decisions):
                    self._ending = "fail-fast"
                    self._cancel()
                    return

    def _cancel(self) -> None:
        if self._scope is not None:
            self._scope.cancel()

    async def _handle(self, decisions: list[Decision], chunk: Chunk | None) -> None:
        self._emit(decisions)
        for message in self._settled(decisions, chunk):
            if chunk is not None and chunk.peer is not None:
                chunk.peer.post(_encode(message))  # never waits for a slow client

    def _emit(self, decisions: list[Decision]) -> None:
        if not decisions:
            return
        self.latest.extend(decisions)
        if self.on_decisions is not None:
            self.on_decisions(decisions)

    def _settled(self, decisions: list[Decision], chunk: Chunk | None) -> list[StopMessage]:
        """Stop messages for conversations this batch settled before their end."""
        # One from a file or pipe has no simulator to tell.
        if not self.stop_unconnected and (chunk is None or chunk.peer is None):
            return []
        messages = self._stops.settled(decisions)
        if self.on_stop is not None:
            for message in messages:
                self.on_stop(message)
        return messages

    async def _watchdog(self, feed: Feed) -> None:
        """The live loop's timers: gaps, checkpoints, idle conversations, the rate
        window, and the end of a live feed."""
        tick = min(0.1, self._gaps.timeout / 4)
        if self.idle_timeout is not None:
            tick = min(tick, self.idle_timeout / 4)
        idle = None if self.idle_timeout is None else IdleTimer(self.idle_timeout)
        saved = anyio.current_time()
        while True:
            await anyio.sleep(tick)
            now = anyio.current_time()
            stats = self.evaluator.statistics()
            self._rate.add(now, stats.events)
            if feed.live and (stats.held or self._gaps):
                # Only a live feed waits for time: on a file (or a pipe) every
                # gap is resolved by its end, whatever the reading speed.
                await self._give_up_gaps(now)
            if self.state_path is not None and now - saved >= self.state_interval:
                await self._save_checkpoint(self.state_path)
                saved = now
            if idle is not None:
                for cid in idle.expired(self.evaluator.open_conversations(), now):
                    await self._handle(self.evaluator.finish(cid), None)
            if self._feed_over(feed, now, stats.conversations):
                self._ending = "ended"
                self._cancel()
                return

    async def _give_up_gaps(self, now: float) -> None:
        """A missing sequence that has not come for ``gap_timeout`` seconds is given up
        on (counted as a gap; it is late if it comes)."""
        holding = self.evaluator.holding()
        for cid in [c for c in self._held_peers if c not in holding]:
            del self._held_peers[cid]
        for cid in self._gaps.expired(holding, now):
            peer = self._held_peers.pop(cid, None)
            await self._handle(
                self.evaluator.release_held(cid),
                None if peer is None else Chunk(b"", peer, 0),
            )

    async def _save_checkpoint(self, path: str) -> None:
        """Conversations finished since the last checkpoint are encoded in slices, the
        loop serving clients between them (10,000 at once held it ~40 ms); the
        snapshot is then taken here, between chunks, so it is whole; writing and
        fsync-ing it (178 ms for 63 MB) happens in a worker thread while the loop
        goes on. Not cancellable: a stopping run waits for it, then writes its
        final checkpoint after it."""
        evaluator = self.evaluator
        # At most as many slices as were waiting at the start: conversations
        # finishing meanwhile must not postpone the checkpoint for ever
        # (checkpoint() encodes whatever is left).
        slices = -(-evaluator.freeze_finished(0) // FREEZE_SLICE)
        for _ in range(slices):
            if not evaluator.freeze_finished(FREEZE_SLICE):
                break
            await anyio.sleep(0)
        await anyio.to_thread.run_sync(write_checkpoint, path, evaluator.checkpoint())

    def _feed_over(self, feed: Feed, now: float, conversations: int) -> bool:
        """A live feed has ended: every conversation seen has ended, no client is
        connected and nothing arrived for ``linger`` seconds."""
        return (
            feed.live
            and self.linger is not None
            and conversations > 0
            and not self.evaluator.open_conversations()
            and feed.connections == 0
            and now - feed.last_activity >= self.linger
        )


async def run_feed(
    evaluator: Evaluator,
    source: str,
    *,
    fail_fast: bool = False,
    idle_timeout: float | None = None,
    linger: float | None = 1.0,
    on_decisions: Callable[[list[Decision]], object] | None = None,
    on_stop: Callable[[StopMessage], object] | None = None,
) -> RunOutcome:
    """Judge a source (path, ``-``, ``follow:PATH``, ``tcp://HOST:PORT``, ``unix:PATH``).

    ``on_decisions`` receives every batch of decisions as they happen;
    ``on_stop`` every :class:`StopMessage` (also written back on sockets).
    """
    runner = Runner(
        evaluator,
        fail_fast=fail_fast,
        idle_timeout=idle_timeout,
        linger=linger,
        on_decisions=on_decisions,
        on_stop=on_stop,
    )
    async with open_feed(source) as feed:
        return await runner.run(feed)
