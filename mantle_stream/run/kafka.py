"""A Kafka consumer group member started from a run's configuration.

The member (:mod:`mantle_stream.kafka.member`) runs its own loop; this
module only gives it the options ``config`` names: a ``check`` re-judges the
whole topic in a group of its own unless told to share one, and publishes
no verdict or stop unless a topic is named.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from mantle_stream.core.engine.evaluator import Evaluator
from mantle_stream.outputs.sink import Sink
from mantle_stream.run.config import RunConfig
from mantle_stream.run.sources import say_skipped

if TYPE_CHECKING:
    from mantle_stream.kafka.member import Member

__all__ = ["member_for"]


def member_for(
    config: RunConfig,
    evaluator: Evaluator,
    sinks: Sink,
    on_tick: Callable[[], object] | None = None,
) -> Member:
    """The member ``config`` asks for (not started: :meth:`Member.run`), its decisions
    and stops told to ``sinks``. confluent-kafka is imported only now."""
    from mantle_stream.core.defaults import LINGER_UNSET
    from mantle_stream.kafka.member import Member
    from mantle_stream.kafka.options import (
        KafkaOptions,
        group_topic,
        kafka_settings,
        parse_kafka_spec,
    )

    spec = parse_kafka_spec(config.sources.events[0])
    kafka = config.kafka
    check = config.command == "check"
    # A check re-judges the whole topic: a group of its own unless told to share one
    # (the live group's committed offsets would have it read only what is new).
    group = kafka.group or (
        "mantle_stream.check." + uuid.uuid4().hex[:12] if check else "mantle_stream"
    )

    # Each group's own topics: another group's (or topic's) conversations are not its to
    # resume, nor its verdicts and stops another's to read. A check publishes none
    # unless a topic is named: re-judging must not publish into the live ones.
    def published(kind: str, named: str | None) -> str | None:
        return named or (None if check else group_topic(kind, group, spec.topic))

    linger = config.live.linger
    options = KafkaOptions(
        group=group,
        offsets=kafka.offsets or ("earliest" if check else "latest"),
        verdicts_topic=published("verdicts", kafka.verdicts_topic),
        stops_topic=published("stops", kafka.stops_topic),
        state_topic=kafka.state_topic or group_topic("state", group, spec.topic),
        stats_interval=kafka.stats_interval,
        until_end=check,
        linger=linger if linger not in (None, LINGER_UNSET) else 1.0,
        gap_timeout=config.live.gap_timeout,
        consumer=kafka_settings(list(kafka.settings)),
        dead_letter_topic=kafka.dead_letter_topic,
    )
    return Member(
        evaluator,
        spec,
        options,
        on_decisions=sinks.on_decisions,
        on_stop=sinks.on_stop,
        # skip by default: one bad message would stop every member
        on_bad=None if config.judging.on_bad_event == "fail" else say_skipped,
        on_tick=on_tick,
    )
