"""A member's producer: verdicts, stop messages, state records and dead letters.

One idempotent producer (``acks=all``) per member
(:mod:`mantle_stream.kafka.member`), lingering 5 ms for the batches of a heavy
load; the member sends a light load's records at once (:meth:`Publisher.send_now`).
Only failed deliveries are reported back, and the first one fails the next
commit: a commit is made only after :meth:`Publisher.delivered`.
"""

from __future__ import annotations

from typing import Any

from mantle_stream.core.errors import FeedError
from mantle_stream.kafka.clients import ClientErrors, settings
from mantle_stream.kafka.options import KafkaSpec, kafka_client

__all__ = ["FINAL_FLUSH", "LIGHT_FLUSH", "Publisher"]

#: Seconds the last commit waits for the brokers to confirm what was produced.
FINAL_FLUSH = 30.0
#: Seconds a light load's records are waited for (a broker away: no longer).
LIGHT_FLUSH = 0.05


class Publisher:
    """Queues records and tells whether every one so far was delivered."""

    def __init__(self, spec: KafkaSpec, errors: ClientErrors) -> None:
        kafka = kafka_client()
        self.producer: Any = kafka.Producer(
            {
                **settings(spec, errors),
                "enable.idempotence": True,
                "linger.ms": 5,
                "acks": "all",
                # Only failures are reported; one fails the next commit.
                "delivery.report.only.error": True,
                "on_delivery": self._delivered,
            }
        )
        self.queued = 0  # records produced since the producer was last flushed
        self.delivery_error: str | None = None

    def produce(
        self,
        topic: str,
        key: str | bytes | None,
        value: bytes | None,
        *,
        headers: list[tuple[str, bytes]] | None = None,
        partition: int | None = None,
    ) -> None:
        """Queue one record; when the producer's queue is full, wait for room."""
        extra: dict[str, Any] = {} if headers is None else {"headers": headers}
        if partition is not None:
            extra["partition"] = partition
        raw = key.encode() if isinstance(key, str) else key
        while True:
            try:
                self.producer.produce(topic, key=raw, value=value, **extra)
                self.queued += 1
                return
            except BufferError:
                self.producer.poll(0.1)

    def produce_many(self, topic: str, records: list[tuple[bytes, bytes]]) -> None:
        """Queue (key, value) records in order: :meth:`produce` without its cost per
        record (a member publishes a verdict every few events)."""
        produce = self.producer.produce
        for key, value in records:
            try:
                produce(topic, value, key)
            except BufferError:
                self.produce(topic, key, value)  # the queue is full: wait for room
                self.queued -= 1  # (counted below)
        self.queued += len(records)

    def poll(self) -> None:
        """Serve the producer's callbacks (delivery failures), without waiting."""
        self.producer.poll(0)

    def send_now(self) -> None:
        """What was queued, sent now rather than after linger.ms. ``flush(0)`` alone
        may return before librdkafka's threads see it; this waits for the brokers'
        acknowledgement, a few ms on a network, at most ``LIGHT_FLUSH`` (a broker away)."""
        self.producer.flush(LIGHT_FLUSH)
        self.queued = 0

    def delivered(self, wait: float, *, final: bool = False) -> bool:
        """Everything produced so far delivered within ``wait`` seconds: False if not
        (a :class:`FeedError` when ``final``), and a :class:`FeedError` for a record
        that failed."""
        if self.producer.flush(wait):
            if final:
                raise FeedError(
                    f"Kafka: verdicts or state not delivered within {wait:g} s; not committed"
                )
            return False
        self.queued = 0
        if self.delivery_error is not None:
            raise FeedError(
                f"Kafka: a record was not delivered ({self.delivery_error}); nothing committed"
            )
        return True

    def _delivered(self, error: Any, message: Any) -> None:
        if error is not None and self.delivery_error is None:
            self.delivery_error = f"{message.topic()}: {error.str()}"
