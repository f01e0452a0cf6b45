"""A member's consumed messages applied to its evaluator, as a file's lines are.

The member (:mod:`mantle_stream.kafka.member`) hands each batch it consumed
here: messages are grouped by partition (the end of a partition noted, a
message of a partition revoked meanwhile left to its next owner), an unkeyed
topic's merged across partitions by record time first
(:mod:`~mantle_stream.kafka.stamped`), and each partition's share pushed as
chunks of about ``CHUNK_BYTES`` of lines, one decode call each. Before each
chunk the engine is told whether that partition delivers its conversations in
order (:mod:`~mantle_stream.kafka.keys`); after it, the ledger notes the
conversations applied (:mod:`~mantle_stream.kafka.ledger`). Decisions go to
``emit``; a skipped message to the dead-letter topic through ``publish``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from mantle_stream.core.defaults import CHUNK_BYTES
from mantle_stream.core.engine.evaluator import Evaluator
from mantle_stream.core.errors import EventError, FeedError
from mantle_stream.core.events.decode import conversation_of, conversations_of
from mantle_stream.core.live import GapTimer
from mantle_stream.core.verdicts import Decision
from mantle_stream.kafka.keys import PartitionOrder
from mantle_stream.kafka.ledger import Ledger
from mantle_stream.kafka.options import KafkaOptions, KafkaSpec, kafka_client
from mantle_stream.kafka.stamped import StampedOrder

__all__ = ["Reading"]

#: ``publish(topic, key, value, headers)``: a record queued on the member's producer.
Publish = Callable[[str, bytes | None, bytes | None, list[tuple[str, bytes]]], object]


class Reading:
    """Messages of the partitions assigned, applied in each partition's order."""

    def __init__(
        self,
        evaluator: Evaluator,
        spec: KafkaSpec,
        options: KafkaOptions,
        ledger: Ledger,
        gaps: GapTimer,
        *,
        emit: Callable[[list[Decision]], object],
        publish: Publish,
        warn: Callable[[str], object],
        on_bad: Callable[[EventError], object] | None,
    ) -> None:
        self.evaluator = evaluator
        self.spec = spec
        self.options = options
        self.ledger = ledger
        self.gaps = gaps
        self.emit = emit
        self.publish = publish
        self.warn = warn
        self.on_bad = on_bad
        self.partition_count = 0  # of the topic (once the member has looked)
        self.eof: set[int] = set()  # partitions read to their end (until more comes)
        self.unkeyed = False  # a message without a key names a conversation
        self.applied_at: float | None = None  # when events were last applied
        self.last_message = time.monotonic()  # when a message was last read
        # Partitions keyed by conversation, not copied by rekey: their gaps are passed.
        self._order = PartitionOrder()
        self._foreign_key_said = False
        # An unkeyed topic's messages, merged across partitions by record timestamp.
        self._stamped = StampedOrder(evaluator.reorder_window)

    def apply(
        self, messages: list[Any], assigned: set[int], on_error: Callable[[Any], object]
    ) -> bool:
        """Each partition's messages of ``messages`` applied; True if any was read.
        ``on_error``: an error ``consume`` gave (other than a partition's end)."""
        by_partition: dict[int, list[Any]] = {}
        eof_code = kafka_client().KafkaError._PARTITION_EOF
        for message in messages:
            error = message.error()
            if error is not None:
                if error.code() == eof_code:
                    self.eof.add(message.partition())
                else:
                    on_error(error)
                continue
            partition = message.partition()
            if partition not in assigned:
                continue  # fetched before a revoke: the next owner reads it
            batch = by_partition.get(partition)
            if batch is None:
                batch = by_partition[partition] = []
                self.eof.discard(partition)
            batch.append(message)
            # (A row naming no conversation, which rekey copies unkeyed, is a bad event.)
            if (
                message.key() is None
                and not self.unkeyed
                and conversation_of(message.value() or b"") is not None
            ):
                self.unkeyed = True
                self.refuse_unkeyed(assigned)
        if not by_partition:
            return False
        self.last_message = time.monotonic()
        if self.unkeyed:  # a conversation over several partitions: by record time
            for partition, batch in by_partition.items():
                self._stamped.add(partition, batch)
            # Every partition of the topic: one not assigned yet may hold older rows.
            every = set(range(self.partition_count)) or assigned
            for partition, run in self._stamped.ready(every - self.eof):
                self._apply_partition(partition, run)
            return True
        for partition, batch in by_partition.items():
            self._apply_partition(partition, batch)
        self.applied_at = time.monotonic()
        return True

    def forget(self, partitions: set[int]) -> None:
        """Partitions given to another member."""
        self.eof -= partitions
        self._stamped.forget(partitions)

    def refuse_unkeyed(self, assigned: set[int]) -> None:
        """An unkeyed topic shared by several members: a :class:`FeedError` saying so."""
        if self.unkeyed and assigned and len(assigned) < self.partition_count:
            topic = self.spec.topic
            raise FeedError(
                f"Kafka topic `{topic}` is not keyed by conversation (Rasa's default, "
                "partition_by_sender: false): one conversation is spread over partitions, "
                "so only one member can judge it, and this group has several. Run one "
                "member, or copy it to a keyed topic with `mantle-stream rekey "
                f"kafka://{self.spec.bootstrap}/{topic}` and judge "
                f"`{topic}.by_conversation` with as many members as it has partitions"
            )

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
            self.ledger.next[partition] = offsets[bad]
            self.emit(exc.decisions)
            raise exc.at(offsets[bad]) from None
        self._own(partition, cids, offsets)
        self.ledger.next[partition] = offsets[-1] + 1
        self.emit(decisions)

    def _own(self, partition: int, cids: list[str | None], offsets: list[int]) -> None:
        """The ledger notes the conversations applied; one holding events after a gap is
        timed."""
        self.ledger.own(partition, cids, offsets)
        if offsets and self.evaluator.statistics().held:
            self.gaps.note(self.ledger.holding(partition, offsets[0]), time.monotonic())

    def _say_foreign_key(self) -> None:
        foreign = self._order.foreign
        if foreign is None or self._foreign_key_said:
            return
        self._foreign_key_said = True
        self.warn(
            f"`{self.spec.topic}` is keyed by something other than the conversation id "
            f"(key `{foreign.key.decode(errors='replace')}` on an event of "
            f"`{foreign.conversation}`, [{foreign.partition}]@{foreign.offset}): its state "
            "is kept by the conversation each event names; members may share the topic "
            "only if each conversation's messages have one key"
        )

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
                self.publish(dead, message.key(), message.value(), headers)
            on_bad(error)

        return skip
