"""One member of a Kafka consumer group that judges Rasa's event topic.

Kafka is the distributed engine: the broker assigns the topic's partitions
to the members of group ``--group``, and a conversation's state belongs to
the partition its events come from (with ``partition_by_sender: true`` the
message key is the conversation id, so a conversation lives in one
partition). A member:

* consumes its partitions up to ``BATCH`` messages at a time and applies each
  partition's share to its evaluator as chunks of about ``CHUNK_BYTES``, as a
  file's lines (the reorder window orders a burst out of order);
* publishes every decision to the verdicts topic (key = conversation id; the
  JSONL verdict record) and every stop message to the stops topic (each
  when named: a ``check`` names none unless asked), lingering 5 ms for the
  batches of a heavy load, sent at once at a light one;
* **commits** every ``commit_interval`` seconds when something was read or
  published since the last commit, on revoke and at shutdown,
  in this order: the producer is flushed (every verdict so far delivered);
  the state of each of the partition's open conversations that changed is
  written to the compacted state topic (key = conversation id, into the
  partition of the same number; a tombstone once a conversation has finished);
  that is flushed; then the partition's offset is committed -- never past an
  event held in a reorder window, which would then be lost;
* **on assign**, restores the partition's open conversations from the state
  topic; events after the committed offset are read again, and those the
  restored state already applied are skipped as replayed (by ``sequence``,
  or by count for rows without one), so each is applied once;
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
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any, cast

import msgspec

from mantle_stream.core.defaults import CHUNK_BYTES
from mantle_stream.core.engine.checkpoints import ConversationState
from mantle_stream.core.engine.conversation import ScenarioStatus
from mantle_stream.core.engine.evaluator import Evaluator
from mantle_stream.core.errors import CONTROL_ESCAPES, EventError, FeedError, UsageError
from mantle_stream.core.events.decode import conversation_of, conversations_of
from mantle_stream.core.live import EventRate, GapTimer, StopRule
from mantle_stream.core.verdicts import Decision, DecisionRecord, StopMessage
from mantle_stream.kafka.clients import CONNECT_TIMEOUT, ClientErrors, connect, settings
from mantle_stream.kafka.keys import PartitionOrder
from mantle_stream.kafka.options import KafkaOptions, KafkaSpec, kafka_client
from mantle_stream.kafka.stamped import StampedOrder

__all__ = ["Member", "MemberStats"]

#: Seconds the last commit waits for the brokers to confirm what was produced.
FINAL_FLUSH = 30.0

#: Messages taken from the consumer's queue at a time: each partition's share is
#: one chunk for the engine, so the cost per chunk is spread over many events.
BATCH = 5000
#: Caught up, and fewer messages than this come at a time: a light load, where
#: what is produced is sent at once rather than after linger.ms (waiting for it
#: ``LIGHT_FLUSH`` seconds at most).
LIGHT = 100
LIGHT_FLUSH = 0.05

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
    join_seconds: float | None  # from the start to its first partitions (None: given none)
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
        self.assigned_at: float | None = None  # when it was first given partitions
        self.applied_at: float | None = None  # when it last applied events
        # Something was read or published since the last commit: an idle member
        # commits nothing (a commit flushes and waits for the group coordinator).
        self._changed = False
        self._queued = 0  # records produced since the producer was last flushed
        # Stop messages are published; the conversation itself is judged on as events
        # come, so the verdicts are those of a replay of the topic, whether or not its
        # simulator stops it.
        self._stops = StopRule(evaluator, skip_pending=False, remember=10_000)
        self._stopping = False
        self._owner: dict[str, int] = {}  # conversation -> its partition (until let go of)
        self._last: dict[str, int] = {}  # conversation -> offset of its last message
        self._written: dict[str, int] = {}  # conversation -> events in the state written
        self._ended: set[str] = set()  # finished, its final state written, not tombstoned
        # Conversations whose events must be read again after a restart: holding events
        # in a reorder window, or buffered until they name their scenario (offset, time).
        self._hold_from: dict[str, tuple[int, int]] = {}  # -> (partition, offset)
        self._gaps = GapTimer(options.gap_timeout)
        self._closing = False
        self._joined = False  # the group has given it an assignment (maybe empty)
        self._empty_since: float | None = None  # given none, the group stable, since
        self._last_look = 0.0
        self._final_lag = 0
        self._delivery_error: str | None = None
        self._next: dict[int, int] = {}  # partition -> offset after the last applied
        self._assigned: set[int] = set()
        self.judged_partitions: set[int] = set()  # every partition it was given
        self._eof: set[int] = set()
        self._partition_count = 0
        self._unkeyed = False
        self._foreign_key_said = False  # a message keyed by other than its conversation
        # Partitions keyed by conversation, not copied by rekey: their gaps are passed.
        self._order = PartitionOrder()
        self._commit_failing = False  # the last commit could not be done (and was told)
        self._last_commit = self.started  # when offsets were last committed
        self._consumer_errors_said: set[int] = set()  # codes of errors consume gave, told
        # An unkeyed topic's messages, merged across partitions by record timestamp.
        self._stamped = StampedOrder(evaluator.reorder_window)
        self._published = 0
        self._commits = 0
        self._restored = 0
        self._not_resumed = 0  # state records that did not decode or fit
        self._rate = EventRate(20)
        self._last_message = time.monotonic()
        self._consumer: Any = None
        self._producer: Any = None
        self._error: Exception | None = None  # raised in a rebalance callback
        self._errors = ClientErrors()  # every client's error_cb
        self.group_members: list[str] = []  # as the broker described them at the end

    # ------------------------------------------------------------------ outside

    def stop(self) -> None:
        """End the run at the next poll (a signal handler may call it)."""
        self._stopping = True

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
            commits=self._commits,
            restored=self._restored,
            not_resumed=self._not_resumed,
            join_seconds=None if self.assigned_at is None else self.assigned_at - self.started,
            judge_seconds=(
                0.0
                if self.assigned_at is None or self.applied_at is None
                else max(self.applied_at - self.assigned_at, 0.0)
            ),
        )

    def members(self) -> list[str]:
        """The group's members (client id and host of each), as the broker describes
        them; this member alone when it cannot."""
        kafka = kafka_client()
        try:
            admin = kafka.admin.AdminClient(settings(self.spec, self._errors))
            [future] = admin.describe_consumer_groups([self.options.group]).values()
            group = future.result(5)
            members = sorted(f"{m.client_id}@{m.host} ({m.member_id})" for m in group.members)
        except Exception:  # a broker without DescribeGroups, say: not worth failing
            members = []
        # A broker that describes none (tansu lists no members) still had this one.
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
                lag += max(high - self._next.get(p, 0), 0)
        return lag

    # ------------------------------------------------------------------ running

    def run(self) -> None:
        """Consume until :meth:`stop` (or, with ``until_end``, the end of every
        partition); commit and leave the group cleanly."""
        kafka = kafka_client()
        options = self.options
        base = settings(self.spec, self._errors)
        try:
            self._producer = kafka.Producer(
                {
                    **base,
                    "enable.idempotence": True,
                    "linger.ms": 5,
                    "acks": "all",
                    # Only failures are reported; one fails the next commit.
                    "delivery.report.only.error": True,
                    "on_delivery": self._delivered,
                }
            )
            self._prepare_topics(kafka, base)
            consumer = self._consumer = kafka.Consumer(
                {
                    **base,
                    "group.id": options.group,
                    "enable.auto.commit": False,
                    "auto.offset.reset": options.offsets,
                    "enable.partition.eof": True,
                    **options.consumer,
                }
            )
        except kafka.KafkaException as exc:  # a setting librdkafka refuses, say
            error = exc.args[0] if exc.args else exc
            reason = error.str() if hasattr(error, "str") else str(error)
            raise UsageError(f"Kafka: {reason}") from None
        consumer.subscribe(
            [self.spec.topic],
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_lost,
        )
        last_commit = last_stats = time.monotonic()
        try:
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
                self._apply(messages, kafka)
                if self._queued and waited and len(messages) < LIGHT:
                    # A light load: what this batch produced is sent now, not after
                    # linger.ms (kept for the batches of a heavy load). flush(0) alone
                    # may return before librdkafka's threads see it; this waits for
                    # the brokers' acknowledgement, a few ms on a network, and at
                    # most LIGHT_FLUSH (a broker away).
                    self._producer.flush(LIGHT_FLUSH)
                    self._queued = 0
                else:
                    self._producer.poll(0)
                now = time.monotonic()
                self._give_up_gaps(now)
                self._rate.add(now, self.evaluator.statistics().events)
                if (
                    self._changed
                    and now - last_commit >= options.commit_interval
                    and self._assigned
                ):
                    commits, self._changed = self._commits, False
                    self._commit(set(self._assigned))
                    if self._commits == commits:  # not done: tried again next interval
                        self._changed = True
                    last_commit = now
                if (
                    options.stats_interval is not None
                    and now - last_stats >= options.stats_interval
                ):
                    last_stats = now
                    self._say_stats()
                if self.on_tick is not None:
                    self.on_tick()
                if (
                    options.until_end
                    and self._assigned
                    and self._eof >= self._assigned
                    and now - self._last_message >= options.linger
                ):
                    break
                if options.until_end and self._left_out(now):
                    break
            if options.until_end:
                self._emit(self.evaluator.finish_all())
            self._commit(set(self._assigned), final=True)
        finally:
            self.group_members = self.members()
            self._final_lag = self.lag()
            self._closing = True  # the last revoke commits, and keeps the report's conversations
            try:
                consumer.close()  # leaves the group
            finally:
                self._consumer = None
                self._producer.flush(10)
                self.ended = time.monotonic()
        if self._error is not None:  # in the last revoke
            raise self._error

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
        kafka = kafka_client()
        try:
            admin = kafka.admin.AdminClient(settings(self.spec, self._errors))
            [future] = admin.describe_consumer_groups([self.options.group]).values()
            stable = future.result(5).state == kafka.ConsumerGroupState.STABLE
        except Exception:  # a broker that cannot say: wait until stopped
            return False
        if not stable:
            self._empty_since = None
            return False
        if self._empty_since is None:
            self._empty_since = now
        return now - self._empty_since >= self.options.linger

    def _prepare_topics(self, kafka: Any, base: dict[str, Any]) -> None:
        """The source must exist; the verdicts, stops and state topics are created with
        as many partitions (the state topic compacted) when missing."""
        admin = kafka.admin.AdminClient(base)
        metadata = connect(admin, self.spec, self._errors, CONNECT_TIMEOUT)
        topic = metadata.topics.get(self.spec.topic)
        if topic is None or topic.error is not None:
            raise FeedError(
                f"Kafka topic `{self.spec.topic}` does not exist on {self.spec.bootstrap}"
            )
        self._partition_count = len(topic.partitions)
        wanted = []
        for name, compact in (
            (self.options.verdicts_topic, False),
            (self.options.stops_topic, False),
            (self.options.state_topic, True),
            (self.options.dead_letter_topic, False),
        ):
            if name is not None and name not in metadata.topics:
                config = {"cleanup.policy": "compact"} if compact else {}
                wanted.append(kafka.admin.NewTopic(name, self._partition_count, config=config))
        if wanted:
            for name, future in admin.create_topics(wanted).items():
                try:
                    future.result(10)
                except kafka.KafkaException as exc:
                    if exc.args[0].code() != kafka.KafkaError.TOPIC_ALREADY_EXISTS:
                        raise FeedError(f"cannot create Kafka topic `{name}`: {exc}") from None

    def _apply(self, messages: list[Any], kafka: Any) -> None:
        """Each partition's messages as one chunk; their decisions and stops published."""
        by_partition: dict[int, list[Any]] = {}
        assigned = self._assigned
        for message in messages:
            error = message.error()
            if error is not None:
                if error.code() == kafka.KafkaError._PARTITION_EOF:
                    self._eof.add(message.partition())
                else:
                    self._consumer_error(error)
                continue
            partition = message.partition()
            if partition not in assigned:
                continue  # fetched before a revoke: the next owner reads it
            batch = by_partition.get(partition)
            if batch is None:
                batch = by_partition[partition] = []
                self._eof.discard(partition)
            batch.append(message)
            # (A row naming no conversation, which rekey copies unkeyed, is a bad event.)
            if (
                message.key() is None
                and not self._unkeyed
                and conversation_of(message.value() or b"") is not None
            ):
                self._unkeyed = True
                self._refuse_unkeyed()
        if by_partition:
            self._changed = True
            self._last_message = time.monotonic()
        if self._unkeyed:  # a conversation over several partitions: by record time
            for partition, batch in by_partition.items():
                self._stamped.add(partition, batch)
            # Every partition of the topic: one not assigned yet may hold older rows.
            every = set(range(self._partition_count)) or self._assigned
            for partition, run in self._stamped.ready(every - self._eof):
                self._apply_partition(partition, run)
            return
        for partition, batch in by_partition.items():
            self._apply_partition(partition, batch)
        if by_partition:
            self.applied_at = time.monotonic()

    def _apply_partition(self, partition: int, batch: list[Any]) -> None:
        """The batch as chunks of lines (a message one line, as in a file) of about
        ``CHUNK_BYTES`` each, the size the engine decodes fastest, each decoded and
        applied in one call; then the conversations it touched noted."""
        values = [message.value() or b"" for message in batch]
        start = size = 0
        for end, value in enumerate(values, 1):
            size += len(value) + 1
            if size >= CHUNK_BYTES or end == len(values):
                self._apply_chunk(partition, batch[start:end], values[start:end])
                start, size = end, 0

    def _apply_chunk(self, partition: int, batch: list[Any], values: list[bytes]) -> None:
        chunk = b"\n".join(values)
        if b"\r" in chunk or chunk.count(b"\n") != len(values) - 1:  # a value of lines
            chunk = b"\n".join(v.replace(b"\n", b" ").replace(b"\r", b" ") for v in values)
        chunk += b"\n"
        offsets = [message.offset() for message in batch]
        # The conversation each event names, never the message's key: its state is
        # saved and restored under it (a key of another kind left it unsaved).
        cids = conversations_of(chunk, len(values))
        self.evaluator.ordered = self._order.ordered(partition, batch, cids)
        self._say_foreign_key()
        where = f"{self.spec.topic}[{partition}] (offset)"
        on_bad = None if self.on_bad is None else self._bad(batch)
        try:
            decisions = self.evaluator.push_chunk(chunk, on_bad=on_bad, first_line=0, source=where)
        except EventError as exc:
            # The events before it were applied: their verdicts go out, and the commit
            # (on leaving) covers them, not the bad one, which a restart reads again.
            bad = exc.line or 0
            self._own(partition, cids[:bad], offsets[:bad])
            self._next[partition] = offsets[bad]
            self._emit(exc.decisions)
            raise exc.at(offsets[bad]) from None
        self._own(partition, cids, offsets)
        self._next[partition] = offsets[-1] + 1
        self._emit(decisions)

    def _say_foreign_key(self) -> None:
        foreign = self._order.foreign
        if foreign is None or self._foreign_key_said:
            return
        self._foreign_key_said = True
        _warn(
            f"`{self.spec.topic}` is keyed by something other than the conversation id "
            f"(key `{foreign.key.decode(errors='replace')}` on an event of "
            f"`{foreign.conversation}`, [{foreign.partition}]@{foreign.offset}): its state "
            "is kept by the conversation each event names; members may share the topic "
            "only if each conversation's messages have one key"
        )

    def _own(self, partition: int, cids: list[str | None], offsets: list[int]) -> None:
        """Note the conversations of messages applied (``cids`` the conversation each
        names, at ``offsets``): their partition, their last offset, and which must be
        read again from here after a restart.

        Per conversation, not per message: the dictionaries below are built in C."""
        if not offsets:
            return
        evaluator = self.evaluator
        owner, last = self._owner, self._last
        latest: dict[str | None, int] = dict(zip(cids, offsets, strict=True))  # -> last offset
        latest.pop(None, None)
        for cid, offset in cast(dict[str, int], latest).items():
            if cid not in owner:
                naming = evaluator.naming(cid)
                if naming in (
                    ScenarioStatus.WAITING,
                    ScenarioStatus.CANDIDATES,
                ):  # buffered: read again until it is named
                    first = offsets[cids.index(cid)]
                    self._hold_from.setdefault(cid, (partition, first))
                elif naming != ScenarioStatus.JUDGED:
                    continue  # never judged here: nothing to save
                owner[cid] = partition
            last[cid] = offset
        if evaluator.statistics().held:
            now = time.monotonic()
            holding = evaluator.holding()
            for cid in holding:
                self._hold_from.setdefault(cid, (partition, offsets[0]))
            self._gaps.note(holding, now)

    def _give_up_gaps(self, now: float) -> None:
        """A missing sequence that has not come for ``gap_timeout`` seconds is given up
        on, as the runner does (the engine reads no clock)."""
        if not self._gaps:
            return
        for cid in self._gaps.expired(self.evaluator.holding(), now):
            self._emit(self.evaluator.release_held(cid))

    def _delivered(self, error: Any, message: Any) -> None:
        if error is not None and self._delivery_error is None:
            self._delivery_error = f"{message.topic()}: {error.str()}"

    def _bad(self, batch: list[Any]) -> Callable[[EventError], object]:
        """A skipped message: to the dead-letter topic (if named) as read, with where it
        was and why in two headers; then told. The next commit delivers it before the
        offset passes it."""
        assert self.on_bad is not None
        on_bad, dead = self.on_bad, self.options.dead_letter_topic

        def skip(error: EventError) -> None:
            message = batch[error.line or 0]
            error = error.at(message.offset())
            if dead is not None:
                where = f"{self.spec.topic}[{message.partition()}]@{message.offset()}"
                headers = [
                    *(message.headers() or []),
                    ("mantle_stream.source", where.encode()),
                    ("mantle_stream.error", str(error).split("\n", 1)[0].encode(errors="replace")),
                ]
                self._produce(dead, message.key(), message.value(), headers=headers)
            on_bad(error)

        return skip

    def _produce(
        self,
        topic: str,
        key: str | bytes | None,
        value: bytes | None,
        *,
        headers: list[tuple[str, bytes]] | None = None,
        **partition: int,
    ) -> None:
        """Queue one record; when the producer's queue is full, wait for room."""
        extra: dict[str, Any] = {"headers": headers} if headers is not None else {}
        raw = key.encode() if isinstance(key, str) else key
        while True:
            try:
                self._producer.produce(topic, key=raw, value=value, **extra, **partition)
                self._queued += 1
                return
            except BufferError:
                self._producer.poll(0.1)

    def _emit(self, decisions: list[Decision]) -> None:
        if not decisions:
            return
        self._changed = True
        topic = self.options.verdicts_topic
        if topic is not None:
            for d in decisions:
                self._produce(topic, d.conversation_id, _encode(DecisionRecord.of(d)))
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
                self._produce(topic, message.conversation_id, _encode(message))
            if self.on_stop is not None:
                self.on_stop(message)

    # ------------------------------------------------------------------ commits

    def _commit(self, partitions: set[int], *, final: bool = False, wait: float = 1.0) -> None:
        """Verdicts delivered, then the partitions' state written, then their offsets.

        A partition's offset stops at the first event of a conversation that must be
        read again (held in a reorder window, or waiting for its scenario); the
        conversations that finished after it keep their final state (not a
        tombstone) until the offset passes their last event, so what is read again
        for them is skipped.

        Only a ``final`` commit (the member stopping) must succeed; the others wait
        ``wait`` seconds for the brokers to confirm what was produced. One that
        cannot be done now (the brokers down, the member dropped from the group
        while they were) is told once and tried again at the next: what was
        published since the last commit is then judged again by the partition's next
        owner, the same records, as after a crash."""
        if not partitions:
            return
        kafka = kafka_client()
        evaluator = self.evaluator
        if not self._flushed(final, wait):
            return
        holding = set(evaluator.holding())
        for cid in list(self._hold_from):
            if cid not in holding and evaluator.naming(cid) != ScenarioStatus.WAITING:
                del self._hold_from[cid]
        offsets: dict[int, int] = {}
        for partition in partitions:
            if partition in self._next:
                pins = [o for p, o in self._hold_from.values() if p == partition]
                offsets[partition] = min([self._next[partition], *pins])
        state_topic = self.options.state_topic
        for cid, partition in list(self._owner.items()):
            if partition not in partitions:
                continue
            committed = offsets.get(partition, 0)
            if evaluator.is_open(cid):
                if evaluator.naming(cid) != ScenarioStatus.JUDGED:
                    continue  # waiting for its scenario: read again, not saved
                state = evaluator.conversation_state(cid)
                if committed == self._next.get(partition):
                    # Nothing of it is read again: no row without a sequence to skip.
                    state = msgspec.structs.replace(state, unsequenced=0)
                if self._written.get(cid) != state.events:
                    self._produce(state_topic, cid, _encode(state), partition=partition)
                    self._written[cid] = state.events
            elif (
                self._last.get(cid, -1) >= committed
                and evaluator.naming(cid) == ScenarioStatus.JUDGED
            ):
                if cid not in self._ended:  # read again: its final state skips it all
                    state = evaluator.conversation_state(cid)
                    self._produce(state_topic, cid, _encode(state), partition=partition)
                    self._ended.add(cid)
                    self._written[cid] = state.events
            else:  # finished, and never read again: its state is no longer needed
                if cid in self._written:
                    self._produce(state_topic, cid, None, partition=partition)
                self._forget(cid)
        if not self._flushed(final, wait) or not offsets:
            return
        try:
            self._consumer.commit(
                offsets=[kafka.TopicPartition(self.spec.topic, p, o) for p, o in offsets.items()],
                asynchronous=False,
            )
        except kafka.KafkaException as exc:
            error = exc.args[0] if exc.args else exc
            reason = error.str() if hasattr(error, "str") else str(error)
            if final or (hasattr(error, "fatal") and error.fatal()):
                raise FeedError(f"Kafka: {reason}; the offsets read were not committed") from None
            self._not_committed(reason)
            return
        self._commits += 1
        self._last_commit = time.monotonic()
        self._errors.recovered()
        if self._commit_failing:
            self._commit_failing = False
            _warn(f"Kafka: committing again (group `{self.options.group}`)")

    def _flushed(self, final: bool, wait: float) -> bool:
        """Everything produced so far delivered: within 30 s when ``final`` (else
        :class:`FeedError`), else within ``wait`` (else False, and told once that
        lasts past ``FINAL_FLUSH`` seconds): a periodic commit waits a second, so the
        loop goes on reading while the brokers are away."""
        wait = FINAL_FLUSH if final else wait
        if self._producer.flush(wait):
            if final:
                raise FeedError(
                    f"Kafka: verdicts or state not delivered within {wait:g} s; not committed"
                )
            waited = time.monotonic() - self._last_commit
            if waited > FINAL_FLUSH:
                self._not_committed(f"verdicts or state not delivered for {waited:.0f} s")
            return False
        self._check_delivered()
        return True

    def _not_committed(self, reason: str) -> None:
        if not self._commit_failing:
            self._commit_failing = True
            _warn(f"Kafka: not committed ({reason}); trying again every commit interval")

    def _check_delivered(self) -> None:
        if self._delivery_error is not None:
            raise FeedError(
                f"Kafka: a record was not delivered ({self._delivery_error}); nothing committed"
            )

    def _forget(self, cid: str) -> None:
        """Let go of a conversation's bookkeeping."""
        self._owner.pop(cid, None)
        self._last.pop(cid, None)
        self._written.pop(cid, None)
        self._ended.discard(cid)
        self._hold_from.pop(cid, None)
        self._gaps.forget(cid)
        self._stops.forget(cid)

    # ------------------------------------------------------------------ rebalances

    def _refuse_unkeyed(self) -> None:
        if self._assigned and len(self._assigned) < self._partition_count:
            self._stopping = True
            raise FeedError(self._unkeyed_message())

    def _unkeyed_message(self) -> str:
        topic = self.spec.topic
        return (
            f"Kafka topic `{topic}` is not keyed by conversation (Rasa's default, "
            "partition_by_sender: false): one conversation is spread over partitions, so "
            "only one member can judge it, and this group has several. Run one member, or "
            f"copy it to a keyed topic with `mantle-stream rekey kafka://{self.spec.bootstrap}/"
            f"{topic}` and judge `{topic}.by_conversation` with as many members as it has "
            "partitions"
        )

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
        if new and self.assigned_at is None:
            self.assigned_at = time.monotonic()
        self._assigned |= new
        self.judged_partitions |= new
        if self._unkeyed and len(self._assigned) < self._partition_count:
            self._stopping = True
            self._error = FeedError(self._unkeyed_message())
        self._restore(new)

    def _revoke(self, partitions: list[Any]) -> None:
        gone = {tp.partition for tp in partitions} & self._assigned
        try:
            # A handover: worth waiting for, so the next owner publishes nothing twice.
            self._commit(gone, wait=FINAL_FLUSH)
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
        for cid, partition in list(self._owner.items()):
            if partition in partitions:
                if self.evaluator.is_open(cid):
                    self.evaluator.forget(cid)
                self._forget(cid)
        self._assigned -= partitions
        self._eof -= partitions
        self._stamped.forget(partitions)
        for partition in partitions:
            self._next.pop(partition, None)

    def _restore(self, partitions: set[int]) -> None:
        """The open conversations of ``partitions``, from the state topic: the last
        record of each key, read to the end of each partition."""
        if not partitions:
            return
        kafka = kafka_client()
        reader = kafka.Consumer(
            {
                **settings(self.spec, self._errors),
                "group.id": f"mantle_stream.restore.{uuid.uuid4().hex}",  # never commits
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",  # offset 0 deleted: the first there is
                "enable.partition.eof": True,
                **self.options.consumer,
            }
        )
        states: dict[str, tuple[int, int, bytes | None]] = {}  # -> (partition, offset, value)
        try:
            reader.assign(
                [kafka.TopicPartition(self.options.state_topic, p, 0) for p in partitions]
            )
            done: set[int] = set()
            deadline = time.monotonic() + 60
            while done < partitions:
                if time.monotonic() > deadline:
                    raise FeedError(
                        f"Kafka: the state topic `{self.options.state_topic}` could not be "
                        "read to its end within 60 s"
                    )
                for message in reader.consume(500, 0.2):
                    error = message.error()
                    if error is not None:
                        if error.code() == kafka.KafkaError._PARTITION_EOF:
                            done.add(message.partition())
                            continue
                        raise FeedError(f"Kafka: reading the state topic: {error.str()}")
                    key = message.key()
                    if key is not None:
                        states[key.decode(errors="replace")] = (
                            message.partition(),
                            message.offset(),
                            message.value(),
                        )
        finally:
            reader.close()
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
            self._owner[cid] = partition
            self._written[cid] = state.events
            self._changed = True  # (a finished one is tombstoned at the next commit)
            if state.finished:
                self._ended.add(cid)
                self._last[cid] = -1  # tombstoned once this member commits past it
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
            f"{s.published:,} verdicts published, {len(self._owner):,} conversations open",
            file=sys.stderr,
            flush=True,
        )


def _warn(text: str) -> None:
    print(f"mantle-stream: warning: {text}".translate(CONTROL_ESCAPES), file=sys.stderr, flush=True)
