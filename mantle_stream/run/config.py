"""A run's configuration as typed records: what every execution strategy takes.

The command line builds one :class:`RunConfig` from its arguments
(:mod:`mantle_stream.cli.config`), once; the one-process run, ``--workers``,
the Kafka member and the gate read it, and so can the pytest plugin and a
library user, who build it by hand. Defaults are the command line's.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from mantle_stream.core.defaults import (
    DEFAULT_GAP_TIMEOUT,
    DEFAULT_REGEX_TIMEOUT,
    DEFAULT_REORDER_WINDOW,
    LINGER_UNSET,
)

__all__ = [
    "GateConfig",
    "JudgingConfig",
    "KafkaConfig",
    "LiveConfig",
    "OutputsConfig",
    "RunConfig",
    "SourcesConfig",
]


class SourcesConfig(msgspec.Struct, frozen=True, kw_only=True):
    """Where the events are, and how each kind of source is read."""

    #: Source specs as ``parse_source`` takes them (glob patterns already expanded).
    events: tuple[str, ...] = ()
    #: ``--conversation``: only these conversations of a store of many.
    conversations: tuple[str, ...] = ()
    #: ``--since``: a SQL store's rows from this time on (ISO 8601 or epoch seconds).
    since: str | None = None
    #: ``--results``: an evaluate_agent results folder.
    results: str | None = None
    #: Listeners: the token every client sends first, and who may connect.
    token: str | None = None
    listen_remote: bool = False
    max_connections: int = 64
    connection_idle_timeout: float = 300.0
    #: A Rasa server's tracker endpoint: its token or JWT.
    rasa_token: str | None = None
    rasa_jwt: str | None = None


class JudgingConfig(msgspec.Struct, frozen=True, kw_only=True):
    """How the evaluator judges, and what ends a run early."""

    reorder_window: int = DEFAULT_REORDER_WINDOW
    regex_timeout: float = DEFAULT_REGEX_TIMEOUT
    #: ``--keep-finished``; None: all for files, the most recent for live sources.
    keep_finished: int | None = None
    #: ``--on-bad-event``; None: fail, except for kafka:// (skip).
    on_bad_event: Literal["fail", "skip"] | None = None
    fail_fast: bool = False
    strict: bool = False
    tool_calls: bool = False


class OutputsConfig(msgspec.Struct, frozen=True, kw_only=True):
    """The outputs asked for (composed into sinks by :mod:`mantle_stream.run.sinks`)."""

    #: The report on standard output: ``table``, ``json`` or ``live``.
    format: str = "table"
    jsonl: str | None = None
    jsonl_overwrite: bool = False
    junit: str | None = None
    html: str | None = None
    #: ``--annotations github``.
    annotations: bool = False


class LiveConfig(msgspec.Struct, frozen=True, kw_only=True):
    """A live source's timers and checkpoints."""

    idle_timeout: float | None = None
    #: ``--linger`` in seconds; None: never; LINGER_UNSET: the source's default.
    linger: float | None = LINGER_UNSET
    gap_timeout: float = DEFAULT_GAP_TIMEOUT
    state: str | None = None
    state_interval: float = 1.0


class KafkaConfig(msgspec.Struct, frozen=True, kw_only=True):
    """A consumer group member's options (kafka:// sources)."""

    group: str | None = None
    offsets: Literal["earliest", "latest"] | None = None
    stats_interval: float | None = None
    #: ``--kafka-config KEY=VALUE``, as given.
    settings: tuple[str, ...] = ()
    dead_letter_topic: str | None = None
    verdicts_topic: str | None = None
    stops_topic: str | None = None
    state_topic: str | None = None


class GateConfig(msgspec.Struct, frozen=True, kw_only=True):
    """The gate in front of an agent."""

    upstream: str = ""
    listen: str = "127.0.0.1:5006"
    stop: Literal["failed", "never"] = "failed"
    ready_timeout: float = 10.0
    upstream_timeout: float = 300.0


class RunConfig(msgspec.Struct, frozen=True, kw_only=True):
    """One run: its command, scenarios, sources, judging, outputs and live options."""

    #: ``check`` (judge to the end, then report) or ``watch`` (live); also ``gate``, ``demo``.
    command: str = "check"
    scenarios: tuple[str, ...] = ()
    sources: SourcesConfig = SourcesConfig()
    judging: JudgingConfig = JudgingConfig()
    outputs: OutputsConfig = OutputsConfig()
    live: LiveConfig = LiveConfig()
    kafka: KafkaConfig = KafkaConfig()
    gate: GateConfig = GateConfig()
    #: ``--workers``; None: decided from the sources (:func:`mantle_stream.run.workers.count`).
    workers: int | None = None
