"""The gate in front of an agent, started from a run's configuration.

The gate (:mod:`mantle_stream.gate`) keeps its own loop; this module gives it
what ``config`` names: the upstream, where to listen, the stop policy, the
sources it judges from instead of the agent's tracker, and the sinks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from mantle_stream.core.engine.evaluator import Evaluator
from mantle_stream.core.errors import UsageError
from mantle_stream.core.recorded import RecordedRun
from mantle_stream.core.scenario.model import Scenario
from mantle_stream.core.urls import redact
from mantle_stream.feeds.spec import parse_source
from mantle_stream.outputs.sink import Sink
from mantle_stream.run.config import RunConfig

if TYPE_CHECKING:
    from mantle_stream.gate.serve import Gate

__all__ = ["check_gate", "gate_for"]


def check_gate(config: RunConfig) -> None:
    """Usage errors of a gate's configuration, before anything is loaded."""
    upstream = config.gate.upstream
    if not upstream.startswith(("http://", "https://")):
        raise UsageError(f"--upstream `{upstream}`: expected the agent's http:// or https:// URL")
    if any(parse_source(e).scheme == "kafka" for e in config.sources.events):
        raise UsageError("gate --events: a kafka:// source is judged by `watch`, not the gate")


def gate_for(
    config: RunConfig,
    scenarios: list[Scenario],
    evaluator: Evaluator,
    sinks: Sink,
    recorded: Mapping[str, RecordedRun],
    on_problem: Callable[[str, str], object] | None = None,
) -> Gate:
    """The gate ``config`` asks for (bound, not serving yet: ``await gate.run()``),
    judging into ``evaluator`` and telling ``sinks``; uvicorn and h11 imported only now."""
    from mantle_stream.gate.proxy import GateOptions
    from mantle_stream.gate.runs import GateJudge
    from mantle_stream.gate.serve import Gate, parse_listen

    check_gate(config)
    upstream = config.gate.upstream
    events = list(config.sources.events)
    judge = GateJudge(
        scenarios,
        stop=config.gate.stop,
        evaluator=evaluator,
        on_decisions=sinks.on_decisions,
        on_stop=sinks.on_stop,
        on_problem=on_problem,
        upstream=redact(upstream),
        reads_tracker=not events,
    )
    judge.recorded = recorded
    options = GateOptions(
        upstream=upstream,
        ready_timeout=config.gate.ready_timeout,
        upstream_timeout=config.gate.upstream_timeout,
    )
    linger = config.live.linger
    return Gate(
        judge,
        options,
        listen=parse_listen(config.gate.listen),
        linger=None if linger is None or linger < 0 else linger,
        results=config.sources.results,
        events=events or None,
    )
