"""``kafka://`` sources: the spec, and Rasa's Kafka broker settings as librdkafka's.

A spec is ``kafka://[USER[:PASSWORD]@]HOST:PORT[,HOST:PORT...]/TOPIC[?SETTINGS]``
(the topic defaults to Rasa's ``rasa_core_events``). ``SETTINGS`` are the keys
of Rasa's ``event_broker: {type: kafka}`` block, as query parameters:
``security_protocol``, ``sasl_mechanism``, ``ssl_cafile``, ``ssl_certfile``,
``ssl_keyfile``, ``ssl_check_hostname``, ``client_id``; the SASL user and
password are the URL's (so every message hides the password, as for SQL
URLs). ``--integrations`` writes such a spec from the agent's block.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

from mantle_stream.core.errors import UsageError
from mantle_stream.core.urls import malformed_url, redact

__all__ = [
    "DEFAULT_TOPIC",
    "KafkaOptions",
    "KafkaSpec",
    "client_settings",
    "group_topic",
    "is_kafka_spec",
    "kafka_client",
    "kafka_settings",
    "parse_kafka_spec",
    "spec_from_broker",
]

DEFAULT_TOPIC = "rasa_core_events"

#: Rasa's setting → librdkafka's; each a query parameter of the spec.
_SETTINGS = {
    "security_protocol": "security.protocol",
    "sasl_mechanism": "sasl.mechanism",
    "ssl_cafile": "ssl.ca.location",
    "ssl_certfile": "ssl.certificate.location",
    "ssl_keyfile": "ssl.key.location",
    "client_id": "client.id",
}
_FLAGS = ("ssl_check_hostname",)


@dataclasses.dataclass(frozen=True)
class KafkaSpec:
    """A parsed ``kafka://`` spec."""

    bootstrap: str
    topic: str
    settings: dict[str, str]  # librdkafka's names: security, SASL, SSL, client id


@dataclasses.dataclass(frozen=True)
class KafkaOptions:
    """How a member of the consumer group runs (see :mod:`mantle_stream.kafka.member`).

    ``offsets``: where a partition without a committed offset starts
    (``earliest``: replay; ``latest``: what arrives from now). The three
    topics: verdicts (key = conversation id) and stop messages, each None to
    publish none, and the conversations' state (compacted: key = conversation
    id, a tombstone once one finishes); :func:`group_topic` names them from
    the group. ``commit_interval``: seconds between commits (verdicts
    flushed, then state, then offsets). ``until_end``: end once every
    partition was read to its end and nothing came for ``linger`` seconds
    (``check``); else run until stopped (``watch``).
    """

    group: str = "mantle_stream"
    offsets: str = "latest"
    verdicts_topic: str | None = None
    stops_topic: str | None = None
    state_topic: str = "mantle_stream.state"
    commit_interval: float = 1.0
    gap_timeout: float = 5.0  # seconds a missing sequence is waited for (--gap-timeout)
    stats_interval: float | None = None
    until_end: bool = False
    linger: float = 1.0
    consumer: dict[str, Any] = dataclasses.field(default_factory=dict)  # extra settings
    dead_letter_topic: str | None = None  # skipped messages go there, as read


def group_topic(kind: str, group: str, source: str) -> str:
    """The topic of ``kind`` (verdicts, stops, state) a member of ``group`` writes for
    the ``source`` topic: ``mantle_stream.KIND.GROUP.SOURCE``, so nothing two groups
    (or one group on two topics) write shares a topic by accident."""
    return f"mantle_stream.{kind}.{group}.{source}"


def kafka_client() -> Any:
    """confluent-kafka (its admin client too), imported when a Kafka source is used."""
    try:
        import confluent_kafka
        import confluent_kafka.admin
    except ImportError:
        raise UsageError(
            'Kafka needs its client: pip install "mantle_stream[kafka]" (confluent-kafka)'
        ) from None
    return confluent_kafka


def is_kafka_spec(spec: str) -> bool:
    return spec.startswith("kafka://")


def parse_kafka_spec(spec: str) -> KafkaSpec:
    """The brokers, the topic and the client settings a spec names; UsageError if bad."""
    if not is_kafka_spec(spec):
        raise UsageError(f"`{redact(spec)}` is not a kafka:// source")
    why = malformed_url(spec)
    if why is not None:
        raise UsageError(f"bad event source `{redact(spec)}`: {why}")
    parts = urlsplit(spec)
    netloc = parts.netloc
    settings: dict[str, str] = {}
    if "@" in netloc:
        userinfo, netloc = netloc.rsplit("@", 1)
        user, _, password = userinfo.partition(":")
        settings["sasl.username"] = unquote(user)
        if password:
            settings["sasl.password"] = unquote(password)
    if not netloc:
        raise UsageError(f"`{redact(spec)}`: expected kafka://HOST:PORT/TOPIC")
    topic = unquote(parts.path.strip("/")) or DEFAULT_TOPIC
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key in _SETTINGS:
            settings[_SETTINGS[key]] = value
        elif key in _FLAGS:
            check = value.lower() in ("1", "true", "yes")
            settings["ssl.endpoint.identification.algorithm"] = "https" if check else "none"
        else:
            known = ", ".join(sorted((*_SETTINGS, *_FLAGS)))
            raise UsageError(f"`{key}` is not a Kafka setting this source reads; known: {known}")
    return KafkaSpec(netloc, topic, settings)


def kafka_settings(pairs: list[str]) -> dict[str, str]:
    """``--kafka-config KEY=VALUE`` options as librdkafka settings."""
    settings = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key.strip():
            # Up to a `:` or a space only: `sasl.password:s3cret` holds a secret.
            shown = re.split(r"[:\s]", pair.strip(), maxsplit=1)[0]
            shown += "..." if len(shown) < len(pair.strip()) else ""
            raise UsageError(f"--kafka-config `{shown}`: expected KEY=VALUE")
        settings[key.strip()] = value.strip()
    return settings


def client_settings(spec: KafkaSpec) -> dict[str, str]:
    """librdkafka's settings for a client of the spec's brokers."""
    return {"bootstrap.servers": spec.bootstrap, **spec.settings}


def spec_from_broker(section: dict[str, Any]) -> str:
    """The ``kafka://`` spec of Rasa's ``event_broker: {type: kafka, ...}`` block."""
    url = section.get("url") or "localhost:9092"
    hosts = ",".join(str(u) for u in url) if isinstance(url, list) else str(url)
    auth = ""
    if section.get("sasl_username"):
        auth = quote(str(section["sasl_username"]), safe="")
        if section.get("sasl_password"):
            auth += ":" + quote(str(section["sasl_password"]), safe="")
        auth += "@"
    query = {
        key: str(section[key])
        for key in (*_SETTINGS, *_FLAGS)
        if section.get(key) is not None and section.get(key) != ""
    }
    topic = quote(str(section.get("topic") or DEFAULT_TOPIC), safe="")
    return f"kafka://{auth}{hosts}/{topic}" + (f"?{urlencode(query)}" if query else "")
