"""Execution strategies: how a run's configuration is judged, and where its sinks come from.

Below the command line and beside the pytest plugin, above the runner, the
feeds, the outputs, the Kafka member and the gate: :mod:`~mantle_stream.run.config`
(:class:`RunConfig`, the typed configuration every strategy takes),
:mod:`~mantle_stream.run.sinks` (the one place the outputs are composed),
:mod:`~mantle_stream.run.sources` (the evaluator and the feed a configuration
names; signals), and one module per strategy: :mod:`~mantle_stream.run.one`
(one process), :mod:`~mantle_stream.run.workers` (``check --workers``),
:mod:`~mantle_stream.run.kafka` (a consumer group member),
:mod:`~mantle_stream.run.gate` (the gate in front of an agent).
"""

from mantle_stream.run.config import (
    GateConfig,
    JudgingConfig,
    KafkaConfig,
    LiveConfig,
    OutputsConfig,
    RunConfig,
    SourcesConfig,
)
from mantle_stream.run.gate import gate_for
from mantle_stream.run.kafka import member_for
from mantle_stream.run.one import run_one, runner_for
from mantle_stream.run.sinks import Composed, compose_sinks
from mantle_stream.run.workers import run_workers, worker_count

__all__ = [
    "Composed",
    "GateConfig",
    "JudgingConfig",
    "KafkaConfig",
    "LiveConfig",
    "OutputsConfig",
    "RunConfig",
    "SourcesConfig",
    "compose_sinks",
    "gate_for",
    "member_for",
    "run_one",
    "run_workers",
    "runner_for",
    "worker_count",
]
