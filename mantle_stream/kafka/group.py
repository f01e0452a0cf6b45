"""A member's questions to the brokers outside its consumer: topics, the group, state.

The member (:mod:`mantle_stream.kafka.member`) asks them with clients of its
own, built as every client is (:func:`~mantle_stream.kafka.clients.settings`):
that its source exists and its output topics do (created when missing), who
the group's members are and whether the group is stable, and the last state
record of each conversation in the state topic's partitions it was given.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from mantle_stream.core.errors import FeedError
from mantle_stream.kafka.clients import CONNECT_TIMEOUT, ClientErrors, connect, settings
from mantle_stream.kafka.options import KafkaOptions, KafkaSpec, kafka_client

__all__ = ["STATE_READ_TIMEOUT", "group_members", "group_stable", "prepare_topics", "read_states"]

#: Seconds the state topic's partitions may take to be read to their end.
STATE_READ_TIMEOUT = 60.0


def prepare_topics(spec: KafkaSpec, options: KafkaOptions, errors: ClientErrors) -> int:
    """The source's partition count. The source must exist; the verdicts, stops,
    state (compacted) and dead-letter topics are created with as many partitions
    when missing."""
    kafka = kafka_client()
    admin = kafka.admin.AdminClient(settings(spec, errors))
    metadata = connect(admin, spec, errors, CONNECT_TIMEOUT)
    topic = metadata.topics.get(spec.topic)
    if topic is None or topic.error is not None:
        raise FeedError(f"Kafka topic `{spec.topic}` does not exist on {spec.bootstrap}")
    count = len(topic.partitions)
    wanted = []
    for name, compact in (
        (options.verdicts_topic, False),
        (options.stops_topic, False),
        (options.state_topic, True),
        (options.dead_letter_topic, False),
    ):
        if name is not None and name not in metadata.topics:
            config = {"cleanup.policy": "compact"} if compact else {}
            wanted.append(kafka.admin.NewTopic(name, count, config=config))
    if wanted:
        for name, future in admin.create_topics(wanted).items():
            try:
                future.result(10)
            except kafka.KafkaException as exc:
                if exc.args[0].code() != kafka.KafkaError.TOPIC_ALREADY_EXISTS:
                    raise FeedError(f"cannot create Kafka topic `{name}`: {exc}") from None
    return count


def _describe(spec: KafkaSpec, group: str, errors: ClientErrors, wait: float = 5.0) -> Any:
    kafka = kafka_client()
    admin = kafka.admin.AdminClient(settings(spec, errors))
    [future] = admin.describe_consumer_groups([group], request_timeout=wait).values()
    return future.result(wait)


def group_members(
    spec: KafkaSpec, group: str, errors: ClientErrors, wait: float = 5.0
) -> list[str]:
    """The group's members (client id and host of each), as the broker describes them
    within ``wait`` seconds; empty when it cannot (a broker without DescribeGroups, or
    away: not worth failing)."""
    try:
        described = _describe(spec, group, errors, wait)
    except Exception:
        return []
    return sorted(f"{m.client_id}@{m.host} ({m.member_id})" for m in described.members)


def group_stable(spec: KafkaSpec, group: str, errors: ClientErrors) -> bool | None:
    """Whether the group is stable (not rebalancing); None when the broker cannot say."""
    try:
        described = _describe(spec, group, errors)
    except Exception:
        return None
    return bool(described.state == kafka_client().ConsumerGroupState.STABLE)


def read_states(
    spec: KafkaSpec, options: KafkaOptions, errors: ClientErrors, partitions: set[int]
) -> dict[str, tuple[int, int, bytes | None]]:
    """The last record of each key in ``partitions`` of the state topic, read to their
    end by a throwaway reader outside the group: conversation -> (partition, offset,
    value; None for a tombstone)."""
    kafka = kafka_client()
    reader = kafka.Consumer(
        {
            **settings(spec, errors),
            "group.id": f"mantle_stream.restore.{uuid.uuid4().hex}",  # never commits
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",  # offset 0 deleted: the first there is
            "enable.partition.eof": True,
            **options.consumer,
        }
    )
    states: dict[str, tuple[int, int, bytes | None]] = {}
    try:
        reader.assign([kafka.TopicPartition(options.state_topic, p, 0) for p in partitions])
        done: set[int] = set()
        deadline = time.monotonic() + STATE_READ_TIMEOUT
        while done < partitions:
            if time.monotonic() > deadline:
                raise FeedError(
                    f"Kafka: the state topic `{options.state_topic}` could not be read to "
                    f"its end within {STATE_READ_TIMEOUT:g} s"
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
    return states
