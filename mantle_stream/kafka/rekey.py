"""An unkeyed topic copied to one keyed by conversation id (``mantle-stream rekey``).

Rasa's Kafka event broker keys a message by its conversation id only with
``partition_by_sender: true``; by default the key is null and one
conversation's events are spread over every partition, so a consumer group
cannot share the topic among members. :func:`rekey` reads such a topic as
consumer group ``group`` (from the earliest offset the first time, then from
the group's committed offsets) and produces every message to the target
topic (``TOPIC.by_conversation`` by default) keyed by the conversation id
its value names, the value, headers and timestamp unchanged, and one header
added (``mantle-stream-rekeyed: 1``: the copy keeps the source's disorder, so a
member waits for its gaps, :mod:`mantle_stream.kafka.keys`): a conversation
then lives in one partition of the target, in the order its events were read.

Guarantees:

* **Nothing lost.** The producer is idempotent (``enable.idempotence``,
  ``acks=all``: no duplicate and no reordering from its own retries), and a
  source offset is committed only after every message read up to it was
  delivered (the producer flushed): every second, when partitions are
  revoked, and at the end. A run that stops (the end of the topic, SIGINT,
  SIGTERM) commits first, so the next run of the same group goes on where it
  ended, copying nothing twice.
* **Duplicates only after a crash.** A process killed, a delivery or commit
  that fails, or partitions lost (the member missed its session timeout)
  leaves messages delivered but not committed: the next run copies them
  again, the same key and value, in the same partition.

A message whose conversation cannot be found (no value, not JSON, no
``conversation_id``, nor a flat row's ``sender_id``: the rule the engine reads
it by, :class:`~mantle_stream.core.events.decode.LineNames`) is copied with a **null key** and
counted (``without_id``; each of the first ones is named, with its partition
and offset, through ``on_note``): the keyed topic holds every message of the
source, and the judge reports a bad event there as it would have here. A
source whose messages have keys already is copied too (with a note: a group
can scale on it as it is).

The target is created when missing, with the source's partition count (the
brokers' default replication and settings); an existing one is appended to.
The group's committed offsets are what a rerun resumes from: another
``group`` copies the whole topic again. The brokers must answer within
:data:`CONNECT_TIMEOUT` (10 s); one that refuses the connection, a host that
does not resolve or credentials refused end the wait at once.

The end of a partition is the fetch's high watermark (librdkafka's
``enable.partition.eof``), never a listed offset (tansu, the test broker,
lists the wrong one). Without ``follow``, the run ends once each partition
assigned to it has been read to its end (later messages of a partition read
before the last one ended are copied too); with ``follow`` it runs until
``stop`` is set.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from mantle_stream.core.errors import CONTROL_ESCAPES, FeedError, UsageError
from mantle_stream.core.events.decode import LineNames, line_names
from mantle_stream.kafka.clients import CONNECT_TIMEOUT, ClientErrors, connect, settings
from mantle_stream.kafka.keys import marked
from mantle_stream.kafka.options import KafkaSpec, kafka_client

if TYPE_CHECKING:
    from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

__all__ = ["CONNECT_TIMEOUT", "RekeyStats", "rekey", "target_topic"]

#: The consumer's session timeout: Kafka's default before 3.0, not librdkafka's
#: 45 s. The loop polls ten times a second, so a member is never slow to answer,
#: and a member that died is replaced after 10 s; tansu (the test broker) also
#: holds a first JoinGroup for half of it (22 s with 45 s).
SESSION_TIMEOUT_MS = 10_000
#: Seconds between commits (each after the producer is flushed).
COMMIT_INTERVAL = 1.0
#: Seconds a final flush waits for the broker to confirm what was produced.
FLUSH_TIMEOUT = 30.0
#: Messages without a conversation id named one by one; the rest only counted.
NAMED_WITHOUT_ID = 10
#: Seconds without any partition assigned before saying so (once).
UNASSIGNED_NOTE = 30.0

_BATCH = 1000  # messages taken from the consumer at a time
_EXCERPT = 80


@dataclasses.dataclass
class RekeyStats:
    """How far a run got: what it read, what the broker confirmed, and when."""

    source: str
    target: str
    group: str
    partitions: int = 0  # of the source
    created: bool = False  # the target was created by this run
    read: int = 0  # messages consumed
    copied: int = 0  # messages the broker confirmed in the target
    without_id: int = 0  # of those read: no conversation id (copied with a null key)
    keyed: int = 0  # of those read: already had a key in the source
    commits: int = 0
    assigned: tuple[int, ...] = ()  # the source's partitions this member reads now
    reached_end: bool = False  # every assigned partition was read to its end
    stopped: bool = False  # ended by ``stop``, not by reaching the end
    started: float = dataclasses.field(default_factory=time.monotonic)
    first_read: float | None = None  # when the first message came (after joining the group)
    last_copied: float | None = None  # when the broker confirmed the last one
    updated: float = dataclasses.field(default_factory=time.monotonic)

    @property
    def elapsed(self) -> float:
        return self.updated - self.started

    @property
    def copying(self) -> float:
        """Seconds from the first message read to the last one confirmed (no group join,
        no waiting for more at the end)."""
        if self.first_read is None or self.last_copied is None:
            return 0.0
        return self.last_copied - self.first_read

    @property
    def per_second(self) -> float:
        """Messages copied per second of copying."""
        return self.copied / self.copying if self.copying > 0 else 0.0


def target_topic(source: str, target: str | None) -> str:
    """The topic written: ``target``, or ``SOURCE.by_conversation``; never the source."""
    name = target if target is not None else f"{source}.by_conversation"
    if not name:
        raise UsageError("--to needs a topic name")
    if name == source:
        raise UsageError(f"the target topic is the source `{source}`: name another with --to")
    return name


def conversation_id(value: bytes | None) -> tuple[str | None, str]:
    """The conversation a message's value names, or None and why not."""
    if value is None:
        return None, "no value"
    names = line_names(value)
    if names is None:
        try:  # (only to say why)
            msgspec.json.decode(value, type=LineNames)
        except msgspec.ValidationError as exc:
            return None, f"not an event: {exc}"
        except (msgspec.DecodeError, RecursionError):
            pass
        return None, "not JSON"
    cid = names.conversation()  # the rule the engine reads it by
    if not cid:
        return None, "no conversation_id (nor, for a flat row, sender_id)"
    return cid, ""


def _excerpt(value: bytes | None) -> str:
    if value is None:
        return ""
    text = value[:_EXCERPT].decode("utf-8", "replace").translate(CONTROL_ESCAPES)
    return text + ("..." if len(value) > _EXCERPT else "")


def rekey(
    spec: KafkaSpec,
    *,
    target: str | None = None,
    group: str = "mantle_stream.rekey",
    follow: bool = False,
    stop: threading.Event | None = None,
    on_progress: Callable[[RekeyStats], object] | None = None,
    on_note: Callable[[str], object] | None = None,
    consumer_settings: dict[str, Any] | None = None,
    producer_settings: dict[str, Any] | None = None,
    connect_timeout: float = CONNECT_TIMEOUT,
    commit_interval: float = COMMIT_INTERVAL,
) -> RekeyStats:
    """Copy ``spec.topic`` to ``target`` keyed by conversation id; the run's figures.

    ``on_progress`` gets the figures after every commit (about once a second)
    and at the end; ``on_note`` a line for each thing worth telling (the
    target created, a keyed source, a message without a conversation id).
    ``consumer_settings`` and ``producer_settings`` add librdkafka settings.
    Raises :class:`UsageError` (bad arguments, no client library) or
    :class:`FeedError` (no broker, no such topic, a delivery or commit that
    failed); ``stop`` set from another thread or a signal handler ends the
    run cleanly.
    """
    name = target_topic(spec.topic, target)
    if not group:
        raise UsageError("--group needs a consumer group name")
    copier = _Copier(
        spec,
        name,
        group,
        follow=follow,
        stop=stop or threading.Event(),
        on_progress=on_progress,
        on_note=on_note,
        consumer_settings=consumer_settings or {},
        producer_settings=producer_settings or {},
        connect_timeout=connect_timeout,
        commit_interval=commit_interval,
    )
    return copier.run()


class _Copier:
    def __init__(
        self,
        spec: KafkaSpec,
        target: str,
        group: str,
        *,
        follow: bool,
        stop: threading.Event,
        on_progress: Callable[[RekeyStats], object] | None,
        on_note: Callable[[str], object] | None,
        consumer_settings: dict[str, Any],
        producer_settings: dict[str, Any],
        connect_timeout: float,
        commit_interval: float,
    ) -> None:
        self.ck = kafka_client()
        self.spec = spec
        self.source = spec.topic
        self.target = target
        self.follow = follow
        self.stop = stop
        self.on_progress = on_progress
        self.on_note = on_note
        self.consumer_settings = consumer_settings
        self.producer_settings = producer_settings
        self.connect_timeout = connect_timeout
        self.commit_interval = commit_interval
        self.stats = RekeyStats(spec.topic, target, group)
        self._errors = ClientErrors()
        self._delivery_errors: list[tuple[KafkaError, Message]] = []
        self._assigned: set[int] = set()
        self._ended: set[int] = set()
        self._pending: dict[int, int] = {}  # partition -> offset to commit (last read + 1)
        self._callback_error: BaseException | None = None
        self._failing = False  # closing after an error: nothing more is committed
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None

    # ------------------------------------------------------------------ setup

    def _settings(self, **extra: Any) -> dict[str, Any]:
        return settings(self.spec, self._errors, **extra)

    def _note(self, text: str) -> None:
        if self.on_note is not None:
            self.on_note(text)

    def _partitions(self, metadata: Any, topic: str) -> int | None:
        meta = metadata.topics.get(topic)
        if meta is None:
            return None
        if meta.error is not None:
            raise FeedError(f"topic `{topic}` on {self.spec.bootstrap}: {meta.error.str()}")
        return len(meta.partitions)

    def _prepare(self) -> None:
        """Check the source, and create the target like it when it is not there."""
        ck = self.ck
        from confluent_kafka.admin import (  # type: ignore[attr-defined]  # public, not in __all__
            AdminClient,
            NewTopic,
        )

        admin = AdminClient(self._settings())
        metadata = connect(admin, self.spec, self._errors, self.connect_timeout)
        partitions = self._partitions(metadata, self.source)
        if partitions is None:
            topics = sorted(t for t in metadata.topics if not t.startswith("__"))
            known = ", ".join(topics[:10]) + (", ..." if len(topics) > 10 else "")
            raise FeedError(
                f"no topic `{self.source}` on {self.spec.bootstrap}"
                + (f" (topics there: {known})" if known else " (it has no topics)")
            )
        self.stats.partitions = partitions
        if self._partitions(metadata, self.target) is not None:
            return
        topic = NewTopic(self.target, num_partitions=partitions, replication_factor=-1)
        try:
            admin.create_topics([topic], operation_timeout=10)[self.target].result(timeout=15)
        except ck.KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if getattr(err, "code", lambda: None)() != ck.KafkaError.TOPIC_ALREADY_EXISTS:
                raise FeedError(
                    f"could not create topic `{self.target}` ({partitions} partitions, like "
                    f"`{self.source}`): {err.str() if err is not None else exc}; create it "
                    "yourself, or name an existing one with --to"
                ) from None
        else:
            self.stats.created = True
            self._note(f"created topic `{self.target}` with {partitions} partitions")
        deadline = time.monotonic() + 10
        while self._partitions(admin.list_topics(timeout=5), self.target) is None:
            if time.monotonic() > deadline:
                raise FeedError(f"topic `{self.target}` is not in the metadata after 10 s")
            time.sleep(0.05)

    # ------------------------------------------------------------------ callbacks

    def _on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self._delivery_errors.append((err, msg))
        else:
            self.stats.copied += 1
            self.stats.last_copied = time.monotonic()

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._assigned.update(tp.partition for tp in partitions)
        self._ended.difference_update(tp.partition for tp in partitions)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Another member gets them: what was read of them is delivered and
        # committed first, so it goes on from there and copies nothing twice.
        if not self._failing:
            try:
                self._checkpoint()
            except BaseException as exc:  # raised from consume(), after the callback
                self._callback_error = exc
        self._forget(partitions)

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Already another member's: too late to commit (what was copied since
        # the last commit is copied again by the new owner).
        self._forget(partitions)
        self._note(
            f"partitions {sorted(tp.partition for tp in partitions)} were lost (session "
            "timed out): messages copied since the last commit will be copied again"
        )

    def _forget(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self._assigned.discard(tp.partition)
            self._ended.discard(tp.partition)
            self._pending.pop(tp.partition, None)

    # ------------------------------------------------------------------ the run

    def run(self) -> RekeyStats:
        ck = self.ck
        self._prepare()
        producer = ck.Producer(
            self._settings(
                **{
                    "enable.idempotence": True,
                    "acks": "all",
                    "linger.ms": 10,
                    "on_delivery": self._on_delivery,
                    **self.producer_settings,
                }
            )
        )
        consumer = ck.Consumer(
            self._settings(
                **{
                    "group.id": self.stats.group,
                    "auto.offset.reset": "earliest",
                    "enable.auto.commit": False,
                    "enable.auto.offset.store": False,
                    "enable.partition.eof": True,
                    "session.timeout.ms": SESSION_TIMEOUT_MS,
                    **self.consumer_settings,
                }
            )
        )
        self._producer, self._consumer = producer, consumer
        try:
            consumer.subscribe(
                [self.source],
                on_assign=self._on_assign,
                on_revoke=self._on_revoke,
                on_lost=self._on_lost,
            )
            self._loop()
            self._checkpoint(final=True)
            consumer.close()  # leaves the group; its revoke has nothing left to commit
            self._raise_callback_error()
        except BaseException:
            # Failing: nothing more is committed (a rerun copies the rest again).
            self._failing = True
            with contextlib.suppress(Exception):
                consumer.close()
            raise
        finally:
            # The clients hold this object's methods as callbacks: let them go now
            # (their connections close), not when the garbage collector finds the cycle.
            self._producer = self._consumer = None
            self.stats.updated = time.monotonic()
        return self.stats

    def _loop(self) -> None:
        assert self._consumer is not None and self._producer is not None
        consumer, producer = self._consumer, self._producer
        eof = self.ck.KafkaError._PARTITION_EOF
        last_commit = time.monotonic()
        noted = False  # that no partition is assigned
        while not self.stop.is_set():
            messages = consumer.consume(_BATCH, timeout=0.1)
            self._raise_callback_error()
            for msg in messages:
                err = msg.error()
                if err is None:
                    self._copy(msg)
                elif err.code() == eof:
                    self._ended.add(msg.partition() or 0)
                else:
                    self._consumer_error(err)
            producer.poll(0)
            self._raise_delivery_errors()
            self._check_client_errors()
            now = time.monotonic()
            end = not self.follow and bool(self._assigned) and self._ended >= self._assigned
            if end or now - last_commit >= self.commit_interval:
                self._checkpoint()
                last_commit = time.monotonic()
            if end:
                self.stats.reached_end = True
                return
            if not self._assigned and not noted and now - self.stats.started > UNASSIGNED_NOTE:
                noted = True
                self._note(
                    f"no partition of `{self.source}` assigned after {UNASSIGNED_NOTE:g} s: "
                    f"do other members of group `{self.stats.group}` hold them all?"
                )
        self.stats.stopped = True

    def _copy(self, msg: Message) -> None:
        assert self._producer is not None
        partition, offset = msg.partition() or 0, msg.offset() or 0
        stats = self.stats
        if stats.first_read is None:
            stats.first_read = time.monotonic()
        stats.read += 1
        value = msg.value()
        cid, why = conversation_id(value)
        if cid is None:
            stats.without_id += 1
            if stats.without_id <= NAMED_WITHOUT_ID:
                excerpt = _excerpt(value)
                self._note(
                    f"{self.source}[{partition}]@{offset}: no conversation id ({why})"
                    + (f": {excerpt}" if excerpt else "")
                    + "; copied with a null key"
                )
                if stats.without_id == NAMED_WITHOUT_ID:
                    self._note("more messages without a conversation id are only counted")
        if msg.key() is not None:
            stats.keyed += 1
            if stats.keyed == 1:
                self._note(
                    f"`{self.source}` has keyed messages already (Rasa's partition_by_sender: "
                    "true?): a consumer group can scale on it as it is; copying anyway, "
                    "keyed by the conversation id of each value"
                )
        kind, timestamp = msg.timestamp()
        key = cid.encode() if cid is not None else None
        stamp = timestamp if kind != self.ck.TIMESTAMP_NOT_AVAILABLE else 0
        headers = marked(msg.headers())  # (its gaps are waited for: kafka/keys.py)
        while True:
            try:
                self._producer.produce(
                    self.target, value=value, key=key, timestamp=stamp, headers=headers
                )
                break
            except BufferError:  # the producer's queue is full: let it deliver
                self._producer.poll(0.1)
                self._raise_delivery_errors()
        self._pending[partition] = offset + 1

    def _consumer_error(self, err: KafkaError) -> None:
        if err.fatal() or not err.retriable():
            raise FeedError(f"reading `{self.source}`: {err.str()}")
        self._note(f"reading `{self.source}`: {err.str()} (retrying)")

    def _check_client_errors(self) -> None:
        down = self._errors.take(self.spec.bootstrap)
        if down is not None:
            self._note(down)

    def _raise_callback_error(self) -> None:
        if self._callback_error is not None:
            exc, self._callback_error = self._callback_error, None
            raise exc

    def _raise_delivery_errors(self) -> None:
        if self._delivery_errors:
            err, _ = self._delivery_errors[0]
            raise FeedError(
                f"writing to `{self.target}`: {err.str()}; offsets since the last commit are "
                "not committed: a rerun copies those messages again (some may then be twice "
                "in the target)"
            )

    def _checkpoint(self, final: bool = False) -> None:
        """Flush the producer, then commit the offsets of everything it delivered."""
        assert self._producer is not None and self._consumer is not None
        left = self._producer.flush(FLUSH_TIMEOUT if final else 10.0)
        self._raise_delivery_errors()
        if left:
            raise FeedError(
                f"{left} messages not confirmed by the broker after "
                f"{FLUSH_TIMEOUT if final else 10.0:g} s: offsets since the last commit are "
                "not committed (a rerun copies them again)"
            )
        if not self._pending:
            self._publish_progress()
            return
        offsets = [self.ck.TopicPartition(self.source, p, o) for p, o in self._pending.items()]
        try:
            self._consumer.commit(offsets=offsets, asynchronous=False)
        except self.ck.KafkaException as exc:
            err = exc.args[0] if exc.args else exc
            text = err.str() if hasattr(err, "str") else str(err)
            if final:
                raise FeedError(
                    f"the messages read were copied, but committing the offsets failed "
                    f"({text}): a rerun copies them again"
                ) from None
            self._note(f"commit failed ({text}); trying again at the next one")
        else:
            self._pending.clear()
            self.stats.commits += 1
        self._publish_progress()

    def _publish_progress(self) -> None:
        self.stats.updated = time.monotonic()
        self.stats.assigned = tuple(sorted(self._assigned))
        if self.on_progress is not None:
            self.on_progress(dataclasses.replace(self.stats))
