"""One member of a Kafka consumer group that judges Rasa's event topic.

Kafka is the distributed engine: the broker assigns the topic's partitions
to the members of group ``--group``, and a conversation's state belongs to
the partition its events come from (with ``partition_by_sender: true`` the
message key is the conversation id, so a conversation lives in one
partition). A member:

* consumes its partitions up to ``BATCH`` messages at a time and applies each
  partition's share to its evaluator as chunks of about ``CHUNK_BYTES``, as a
  file's lines (the reorder window orders a burst out of order;
  :mod:`~mantle_stream.kafka.reading`);
* publishes every decision to the verdicts topic (key = conversation id; the
  JSONL verdict record) and every stop message to the stops topic (each
  when named: a ``check`` names none unless asked), lingering 5 ms for the
  batches of a heavy load, sent at once at a light one
  (:mod:`~mantle_stream.kafka.publisher`);
* **commits** every ``commit_interval`` seconds when something was read or
  published since the last commit, on revoke and at shutdown,
  in this order: the producer is flushed (every verdict so far delivered);
  the state of each of the partition's open conversations that changed is
  written to the compacted state topic (key = conversation id, into the
  partition of the same number; a tombstone once a conversation has finished);
  that is flushed; then the partition's offset is committed -- never past an
  event held in a reorder window, which would then be lost
  (:mod:`~mantle_stream.kafka.ledger` keeps what a commit needs,
  :mod:`~mantle_stream.kafka.commits` makes it);
* **on assign**, restores the partition's open conversations from the state
  topic (read by :func:`~mantle_stream.kafka.group.read_states`); events
  after the committed offset are read again, and those the restored state
  already applied are skipped as replayed (by ``sequence``, or by count for
  rows without one), so each is applied once;
* **on revoke**, commits the partition, then lets go of its open
  conversations: the next owner resumes them.

Guarantee: no verdict is lost, and each (conversation, assertion) has one
verdict, whichever member decides it. A verdict decided after the last commit
by a member that then crashes is decided again by the next owner and
published a second time, the same record with the same key: consumers
de-duplicate by (conversation id, assertion index). A clean stop (SIGTERM,
a revoke) commits first, so a restart publishes nothing twice.

A topic written without keys (Rasa's default) spreads a conversation over
partitions: one member may judge it (it owns every partition), two may not;
``mantle-stream rekey`` copies it to a keyed topic.
"""

from __future__ import annotations

import sys
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import msgspec

from mantle_stream.core.engine.checkpoints import ConversationState
from mantle_stream.core.engine.evaluator import Evaluator
from mantle_stream.core.errors import CONTROL_ESCAPES, EventError, FeedError, UsageError
from mantle_stream.core.live import EventRate, GapTimer, StopRule
from mantle_stream.core.verdicts import Decision, DecisionRecord, StopMessage
from mantle_stream.kafka.clients import ClientErrors, settings
from mantle_stream.kafka.commits import Committer, reason
from mantle_stream.kafka.group import group_members, group_stable, prepare_topics, read_states
from mantle_stream.kafka.ledger import Ledger
from mantle_stream.kafka.options import KafkaOptions, KafkaSpec, kafka_client
from mantle_stream.kafka.publisher import FINAL_FLUSH, Publisher
from mantle_stream.kafka.reading import Reading

__all__ = ["Member", "MemberStats"]

#: Messages taken from the consumer's queue at a time: each partition's share is
#: one chunk for the engine, so the cost per chunk is spread over many events.
BATCH = 5000
#: Caught up, and fewer messages than this come at a time: a light load, where
#: what is produced is sent at once rather than after linger.ms.
LIGHT = 100
#: Seconds a member told to stop (SIGINT, SIGTERM) spends leaving, at most: its last
#: commit waits for the brokers that long and is then given up on, said (what came
#: since the commit before is judged again by the next owner, as after a crash),
#: rather than holding the stop for FINAL_FLUSH while no broker answers.
STOP_WITHIN = 10.0

_encode = msgspec.json.Encoder().encode
_state = msgspec.json.Decoder(ConversationState).decode


class MemberStats(msgspec.Struct, frozen=True):
    """What a member is doing: for the live view, the stats line and the report."""

    group: str
    member: str
    partitions: list[int]  # every partition it was given
    lag: int  # messages of its partitions not read yet (as of the last fetch)
    events: int
    events_per_second: float
    published: int  # verdict records
    commits: int
    restored: int  # conversations resumed from the state topic
    not_resumed: int  # state records that did not decode or fit: judged afresh
    join_seconds: float | None  # start to its first partitions, state restored (None: none)
    judge_seconds: float  # from its first partitions to the last events it applied


class Member:
    """Consumes ``spec.topic`` as a member of ``options.group`` into ``evaluator``."""

    def __init__(
        self,
        evaluator: Evaluator,
        spec: KafkaSpec,
        options: KafkaOptions,
        *,
        on_decisions: Callable[[list[Decision]], object] | None = None,
        on_stop: Callable[[StopMessage], object] | None = None,
        on_bad: Callable[[EventError], object] | None = None,
        on_tick: Callable[[], object] | None = None,
    ) -> None:
        kafka_client()  # a missing client is said before anything starts
        self.evaluator = evaluator
        self.spec = spec
        self.options = options
        self.on_decisions = on_decisions
        self.on_stop = on_stop
        self.on_bad = on_bad
        self.on_tick = on_tick
        self.member_id = ""
        self.started = time.monotonic()
        self.ended: float | None = None
        self.latest: deque[Decision] = deque(maxlen=20)
        # Join time and steady state told apart (the benchmark reports both).
        self.assigned_at: float | None = None  # when it first had partitions (state restored)
        # Something was read or published since the last commit: an idle member
        # commits nothing (a commit flushes and waits for the group coordinator).
        self._changed = False
        # Stop messages are published; the conversation itself is judged on as events
        # come, so the verdicts are those of a replay of the topic, whether or not its
        # simulator stops it.
        self._stops = StopRule(evaluator, skip_pending=False, remember=10_000)
        self._stopping = False
        self._stop_asked: float | None = None  # when stop() was called
        self._final_tried = False  # the last commit was tried (the revoke on leaving skips it)
        self._gaps = GapTimer(options.gap_timeout)
        # Each conversation's partition and last offset: what a commit writes and commits.
        self._ledger = Ledger(evaluator, on_forget=self._forget)
        self._reading = Reading(
            evaluator,
            spec,
            options,
            self._ledger,
            self._gaps,
            emit=self._emit,
            publish=lambda topic, key, value, headers: self._publisher_now().produce(
                topic, key, value, headers=headers
            ),
            warn=_warn,
            on_bad=on_bad,
        )
        self._closing = False
        self._joined = False  # the group has given it an assignment (maybe empty)
        self._empty_since: float | None = None  # given none, the group stable, since
        self._last_look = 0.0
        self._final_lag = 0
        self._assigned: set[int] = set()
        self.judged_partitions: set[int] = set()  # every partition it was given
        self._last_tried = self.started  # when a periodic commit was last tried
        self._last_stats = self.started
        self._consumer_errors_said: set[int] = set()  # codes of errors consume gave, told
        self._published = 0
        self._restored = 0
        self._not_resumed = 0  # state records that did not decode or fit
        self._rate = EventRate(20)
        self._consumer: Any = None
        self._publisher: Publisher | None = None
        self._committer: Committer | None = None
        self._error: Exception | None = None  # raised in a rebalance callback
        self._errors = ClientErrors()  # every client's error_cb
        self.group_members: list[str] = []  # as the broker described them at the end

    # ------------------------------------------------------------------ outside

    def stop(self) -> None:
        """End the run at the next poll, within ``STOP_WITHIN`` seconds (a signal
        handler may call it)."""
        if self._stop_asked is None:
            self._stop_asked = time.monotonic()
        self._stopping = True

    def _within(self, wait: float) -> float:
        """``wait``, or what is left of ``STOP_WITHIN`` once told to stop."""
        if self._stop_asked is None:
            return wait
        return max(min(wait, STOP_WITHIN - (time.monotonic() - self._stop_asked)), 0.0)

    @property
    def elapsed(self) -> float:
        return (self.ended or time.monotonic()) - self.started

    @property
    def stopped_early(self) -> deque[str]:
        return self._stops.stopped

    def events_per_second(self) -> float:
        return self._rate.per_second() or 0.0

    def stats(self) -> MemberStats:
        return MemberStats(
            group=self.options.group,
            member=self.member_id,
            partitions=sorted(self.judged_partitions),
            lag=self.lag(),
            events=self.evaluator.statistics().events,
            events_per_second=self.events_per_second(),
            published=self._published,
            commits=0 if self._committer is None else self._committer.commits,
            restored=self._restored,
            not_resumed=self._not_resumed,
            join_seconds=None if self.assigned_at is None else self.assigned_at - self.started,
            judge_seconds=(
                0.0
                if self.assigned_at is None or self._reading.applied_at is None
                else max(self._reading.applied_at - self.assigned_at, 0.0)
            ),
        )

    def members(self) -> list[str]:
        """The group's members (client id and host of each), as the broker describes
        them; this member alone when it cannot (tansu lists none)."""
        wait = self._within(5.0)
        members = group_members(self.spec, self.options.group, self._errors, wait) if wait else []
        return members or ([self.member_id] if self.member_id else [])

    def lag(self) -> int:
        """Messages of the assigned partitions not read yet, from the high watermarks the
        last fetches brought (cached: no request to the broker)."""
        consumer = self._consumer
        if consumer is None:
            return self._final_lag
        kafka = kafka_client()
        lag = 0
        for p in self._assigned:
            try:
                _, high = consumer.get_watermark_offsets(
                    kafka.TopicPartition(self.spec.topic, p), cached=True
                )
            except kafka.KafkaException:
                continue
            if high >= 0:
                lag += max(high - self._ledger.next.get(p, 0), 0)
        return lag

    # ------------------------------------------------------------------ running

    def run(self) -> None:
        """Consume until :meth:`stop` (or, with ``until_end``, the end of every
        partition); commit and leave the group cleanly."""
        consumer = self._open()
        try:
            self._loop(consumer)
            if self.options.until_end:
                self._emit(self.evaluator.finish_all())
            self._final_tried = True
            self._commit(set(self._assigned), final=True)
        finally:
            self._close(consumer)
        if self._error is not None:  # in the last revoke
            raise self._error

    def _open(self) -> Any:
        """The producer and the consumer, subscribed; the topics checked and made."""
        kafka = kafka_client()
        options = self.options
        try:
            self._publisher = Publisher(self.spec, self._errors)
            self._reading.partition_count = prepare_topics(self.spec, options, self._errors)
            consumer = self._consumer = kafka.Consumer(
                {
                    **settings(self.spec, self._errors),
                    "group.id": options.group,
                    "enable.auto.commit": False,
                    "auto.offset.reset": options.offsets,
                    "enable.partition.eof": True,
                    **options.consumer,
                }
            )
        except kafka.KafkaException as exc:  # a setting librdkafka refuses, say
            raise UsageError(f"Kafka: {reason(exc)}") from None
        self._committer = Committer(
            self.spec,
            options,
            self._ledger,
            self._publisher,
            consumer,
            self._errors,
            within=self._within,
            stopping=lambda: self._stop_asked is not None,
            warn=_warn,
        )
        consumer.subscribe(
            [self.spec.topic],
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_lost,
        )
        return consumer

    def _loop(self, consumer: Any) -> None:
        publisher = self._publisher
        assert publisher is not None
        self._last_stats = time.monotonic()
        while not self._stopping:
            # What has been fetched, at once; else the next message as soon as it
            # comes (a batch call would wait out its whole timeout), then the rest.
            messages = consumer.consume(BATCH, 0)
            waited = not messages  # nothing was fetched: caught up
            if waited:
                messages = consumer.consume(1, 0.1)
                if messages:
                    messages += consumer.consume(BATCH - 1, 0)
            if self._error is not None:
                raise self._error
            self.member_id = self.member_id or consumer.memberid() or ""
            self._say_client_errors()
            if self._reading.apply(messages, self._assigned, self._consumer_error):
                self._changed = True
            if publisher.queued and waited and len(messages) < LIGHT:
                publisher.send_now()  # a light load: not after linger.ms
            else:
                publisher.poll()
            if self._tick(time.monotonic()):
                break

    def _tick(self, now: float) -> bool:
        """The loop's timed work after each batch: gaps given up on, the rate, a commit
        every interval, stats; True when a ``check`` is done."""
        options = self.options
        self._give_up_gaps(now)
        self._rate.add(now, self.evaluator.statistics().events)
        if self._changed and now - self._last_tried >= options.commit_interval and self._assigned:
            # Not done: tried again next interval.
            self._changed = not self._commit(set(self._assigned))
            self._last_tried = now
        if options.stats_interval is not None and now - self._last_stats >= options.stats_interval:
            self._last_stats = now
            self._say_stats()
        if self.on_tick is not None:
            self.on_tick()
        if not options.until_end:
            return False
        if self._assigned and self._reading.eof >= self._assigned:
            return bool(now - self._reading.last_message >= options.linger)
        return self._left_out(now)

    def _close(self, consumer: Any) -> None:
        """Leave the group: the last revoke commits, and keeps the report's conversations."""
        self.group_members = self.members()
        self._final_lag = self.lag()
        self._closing = True
        try:
            consumer.close()
        finally:
            self._consumer = None
            if self._publisher is not None:
                self._publisher.producer.flush(self._within(10.0))
            self.ended = time.monotonic()

    def _left_out(self, now: float) -> bool:
        """A check member the group gives no partition (more members than partitions):
        given none, with the group stable, for ``linger`` seconds on end. (An empty
        assignment alone is not enough: a member is given one while the group
        rebalances.)"""
        if self._assigned or not self._joined:
            self._empty_since = None
            return False
        if now - self._last_look < 0.5:
            return False
        self._last_look = now
        stable = group_stable(self.spec, self.options.group, self._errors)
        if stable is None:  # a broker that cannot say: wait until stopped
            return False
        if not stable:
            self._empty_since = None
            return False
        if self._empty_since is None:
            self._empty_since = now
        return now - self._empty_since >= self.options.linger

    def _give_up_gaps(self, now: float) -> None:
        """A missing sequence that has not come for ``gap_timeout`` seconds is given up
        on, as the runner does (the engine reads no clock)."""
        if not self._gaps:
            return
        for cid in self._gaps.expired(self.evaluator.holding(), now):
            self._emit(self.evaluator.release_held(cid))

    def _publisher_now(self) -> Publisher:
        assert self._publisher is not None  # (made before the consumer, so before any read)
        return self._publisher

    def _emit(self, decisions: list[Decision]) -> None:
        if not decisions:
            return
        self._changed = True
        topic = self.options.verdicts_topic
        if topic is not None:
            self._publisher_now().produce_many(
                topic,
                [(d.conversation_id.encode(), _encode(DecisionRecord.of(d))) for d in decisions],
            )
            self._published += len(decisions)
        self.latest.extend(decisions)
        if self.on_decisions is not None:
            self.on_decisions(decisions)
        self._stop_settled(decisions)

    def _stop_settled(self, decisions: list[Decision]) -> None:
        """A stop message for each conversation this batch settled before its end,
        published for the simulators (and alerting) that subscribe."""
        topic = self.options.stops_topic
        for message in self._stops.settled(decisions):
            if topic is not None:
                self._publisher_now().produce(topic, message.conversation_id, _encode(message))
            if self.on_stop is not None:
                self.on_stop(message)

    # ------------------------------------------------------------------ commits

    def _commit(self, partitions: set[int], *, final: bool = False, wait: float = 1.0) -> bool:
        """True once committed (:mod:`mantle_stream.kafka.commits`)."""
        if self._committer is None:  # (none before the consumer is made)
            return False
        return self._committer.commit(partitions, final=final, wait=wait)

    def _forget(self, cid: str) -> None:
        """A conversation let go of by the ledger: its timers too."""
        self._gaps.forget(cid)
        self._stops.forget(cid)

    # ------------------------------------------------------------------ rebalances

    def _callback(self, work: Callable[[], object]) -> None:
        """A rebalance callback's work: an exception is raised after ``consume``
        returns (raised through librdkafka's C code it is a ``SystemError``)."""
        try:
            work()
        except Exception as exc:
            self._stopping = True
            if self._error is None:
                self._error = exc

    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        self._callback(lambda: self._assign(partitions))

    def _on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        self._callback(lambda: self._revoke(partitions))

    def _assign(self, partitions: list[Any]) -> None:
        new = {tp.partition for tp in partitions}
        self._joined = True
        self._assigned |= new
        self.judged_partitions |= new
        self._reading.refuse_unkeyed(self._assigned)
        self._restore(new)
        if new and self.assigned_at is None:  # joined: given partitions, their state read
            self.assigned_at = time.monotonic()

    def _revoke(self, partitions: list[Any]) -> None:
        gone = {tp.partition for tp in partitions} & self._assigned
        try:
            # A handover: worth waiting for, so the next owner publishes nothing twice.
            # (Leaving after the last commit was tried: nothing more to commit.)
            if not (self._closing and self._final_tried):
                self._commit(gone, wait=self._within(FINAL_FLUSH))
        finally:
            if not self._closing:  # (leaving: its conversations stay in its report)
                self._let_go(gone)

    def _on_lost(self, consumer: Any, partitions: list[Any]) -> None:
        # No longer a member: nothing may be committed; the next owner resumes from the
        # last commit (this member too, once it has rejoined).
        lost = {tp.partition for tp in partitions} & self._assigned
        if lost and not self._closing:
            _warn(
                f"Kafka: partitions {sorted(lost)} lost (the session timed out): rejoining "
                f"group `{self.options.group}`; what came since the last commit is judged again"
            )
        self._let_go(lost)

    def _let_go(self, partitions: set[int]) -> None:
        self._ledger.let_go(partitions)
        self._assigned -= partitions
        self._reading.forget(partitions)

    def _restore(self, partitions: set[int]) -> None:
        """The open conversations of ``partitions``, from the state topic: the last
        record of each key, read to the end of each partition."""
        if not partitions:
            return
        states = read_states(self.spec, self.options, self._errors, partitions)
        for cid, (partition, offset, value) in states.items():
            if value is None or self.evaluator.naming(cid) is not None:
                continue  # gone, or known here already
            try:
                state = _state(value)
                if state.conversation_id != cid:
                    raise ValueError(f"the record is `{state.conversation_id}`'s")
                self.evaluator.restore_conversation(state)
            except (msgspec.DecodeError, UsageError, ValueError) as exc:
                # Junk, or another scenario set's state: judged afresh from its events
                # read from the committed offset on, never the end of the member.
                self._not_resumed += 1
                where = f"{self.options.state_topic}[{partition}]@{offset}"
                _warn(
                    f"state of `{cid}` in {where} not resumed ({exc}): judged afresh from "
                    "its events from here on"
                )
                continue
            self._ledger.restored(cid, partition, state)
            self._changed = True  # (a finished one is tombstoned at the next commit)
            self._restored += 1

    def _consumer_error(self, error: Any) -> None:
        """An error ``consume`` gave: a fatal one (or one no retry mends: a topic or
        group the credentials may not read) ends the run; any other is told once and
        librdkafka retries (a broker that went away, a coordinator moving)."""
        kafka = kafka_client()
        permanent = {
            kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED,
            kafka.KafkaError.GROUP_AUTHORIZATION_FAILED,
        }
        if error.fatal() or error.code() in permanent:
            raise FeedError(f"Kafka: {error.str()}")
        if error.code() not in self._consumer_errors_said:
            self._consumer_errors_said.add(error.code())
            _warn(f"Kafka: {error.str()} (retrying)")

    def _say_client_errors(self) -> None:
        """A fatal client error ends the run; every broker down is said once an outage."""
        down = self._errors.take(self.spec.bootstrap)
        if down is not None:
            _warn(down)

    def _say_stats(self) -> None:
        s = self.stats()
        print(
            f"mantle-stream: kafka group {s.group}: partitions {s.partitions}, lag {s.lag:,}, "
            f"{s.events_per_second:,.0f} events/s, {s.events:,} events, "
            f"{s.published:,} verdicts published, {len(self._ledger):,} conversations open",
            file=sys.stderr,
            flush=True,
        )


def _warn(text: str) -> None:
    print(f"mantle-stream: warning: {text}".translate(CONTROL_ESCAPES), file=sys.stderr, flush=True)
