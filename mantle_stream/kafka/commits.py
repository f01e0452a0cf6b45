"""A member's commits: verdicts delivered, then state written, then offsets.

The member (:mod:`mantle_stream.kafka.member`) commits every
``commit_interval`` when something changed, on a revoke, and at its end. A
commit flushes the producer (every verdict so far delivered), writes the
state records the ledger gives (:mod:`mantle_stream.kafka.ledger`), flushes
again, then commits the offsets the ledger allows. One that cannot be done
now (the brokers away, the member dropped from the group) is told once and
tried again at the next: what was published since the last commit is then
judged again by the partition's next owner, as after a crash. The last
commit must succeed, except when the member was told to stop (it is then
not held by the brokers) or no longer owns its partitions: both are said,
and the member's outputs are written.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from mantle_stream.core.errors import FeedError
from mantle_stream.kafka.clients import ClientErrors
from mantle_stream.kafka.ledger import Ledger
from mantle_stream.kafka.options import KafkaOptions, KafkaSpec, kafka_client
from mantle_stream.kafka.publisher import FINAL_FLUSH, Publisher

__all__ = ["Committer", "reason"]


class Committer:
    """Commits a member's partitions (its consumer's offsets, its publisher's records).

    ``within(wait)``: ``wait``, or what is left of the member's time to stop;
    ``stopping()``: whether it was told to stop."""

    def __init__(
        self,
        spec: KafkaSpec,
        options: KafkaOptions,
        ledger: Ledger,
        publisher: Publisher,
        consumer: Any,
        errors: ClientErrors,
        *,
        within: Callable[[float], float],
        stopping: Callable[[], bool],
        warn: Callable[[str], object],
    ) -> None:
        self.spec, self.options, self.ledger = spec, options, ledger
        self.publisher, self.consumer, self.errors = publisher, consumer, errors
        self.within, self.stopping, self.warn = within, stopping, warn
        self.commits = 0
        self.last = time.monotonic()  # when offsets were last committed
        self._failing = False  # the last commit could not be done (and was told)

    def commit(self, partitions: set[int], *, final: bool = False, wait: float = 1.0) -> bool:
        """Commit ``partitions`` (True once done; nothing to commit is done); a ``final``
        one waits ``FINAL_FLUSH`` for the brokers, any other ``wait`` seconds."""
        if not partitions:
            return True
        kafka = kafka_client()
        if not self._flushed(final, wait):
            return False
        offsets = self.ledger.offsets(partitions)
        for record in self.ledger.states(partitions, offsets):
            self.publisher.produce(
                self.options.state_topic,
                record.conversation_id,
                record.value,
                partition=record.partition,
            )
        if not self._flushed(final, wait):
            return False
        if not offsets:
            return True
        try:
            self.consumer.commit(
                offsets=[kafka.TopicPartition(self.spec.topic, p, o) for p, o in offsets.items()],
                asynchronous=False,
            )
        except kafka.KafkaException as exc:
            error = exc.args[0] if exc.args else exc
            fenced = hasattr(error, "code") and error.code() in _fenced(kafka)
            if final and (self.stopping() or fenced):
                # Told to stop, or no longer the partitions' owner (dropped from the
                # group, not rejoined yet): their next owner judges again what came
                # since the last commit, as after a crash; the outputs are written.
                self._not_committed_at_end(reason(exc))
                return False
            if final or (hasattr(error, "fatal") and error.fatal()):
                raise FeedError(
                    f"Kafka: {reason(exc)}; the offsets read were not committed"
                ) from None
            self._not_committed(reason(exc))
            return False
        self.commits += 1
        self.last = time.monotonic()
        self.errors.recovered()
        if self._failing:
            self._failing = False
            self.warn(f"Kafka: committing again (group `{self.options.group}`)")
        return True

    def _flushed(self, final: bool, wait: float) -> bool:
        """Everything produced so far delivered: within 30 s when ``final`` (else
        :class:`FeedError`; told to stop, what is left of its time, else said), else
        within ``wait`` (else False, and told once that lasts past ``FINAL_FLUSH``
        seconds): a periodic commit waits a second, so the loop goes on reading while
        the brokers are away."""
        if final and self.stopping():  # told to stop: not held by the brokers
            wait = self.within(FINAL_FLUSH)
            if self.publisher.delivered(wait):
                return True
            self._not_committed_at_end(f"verdicts or state not delivered within {wait:.0f} s")
            return False
        if self.publisher.delivered(FINAL_FLUSH if final else wait, final=final):
            return True
        waited = time.monotonic() - self.last
        if waited > FINAL_FLUSH:
            self._not_committed(f"verdicts or state not delivered for {waited:.0f} s")
        return False

    def _not_committed(self, why: str) -> None:
        if not self._failing:
            self._failing = True
            self.warn(f"Kafka: not committed ({why}); trying again every commit interval")

    def _not_committed_at_end(self, why: str) -> None:
        self.warn(
            f"Kafka: not committed at the end ({why}): what was read since the last "
            "commit is judged again by the partitions' next owner"
        )


def _fenced(kafka: Any) -> set[int]:
    """The codes of a commit refused because the member no longer owns its partitions."""
    error = kafka.KafkaError
    return {
        error.UNKNOWN_MEMBER_ID,
        error.ILLEGAL_GENERATION,
        error.REBALANCE_IN_PROGRESS,
        error.FENCED_INSTANCE_ID,
        error._ASSIGNMENT_LOST,
    }


def reason(exc: Exception) -> str:
    """What a KafkaException says (its KafkaError's text)."""
    error = exc.args[0] if exc.args else exc
    return str(error.str() if hasattr(error, "str") else error)
