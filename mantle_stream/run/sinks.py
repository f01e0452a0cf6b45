"""Where a run's sinks are composed from its configuration: the one place.

Every execution strategy hands its decisions, stops and report to the
:class:`Composed` outputs this module builds: the one-process run and the
Kafka member as they go, the gate as it judges, ``--workers`` once the
workers' decisions are merged (:mod:`mantle_stream.run.workers`). Adding an
output is its sink (:class:`~mantle_stream.outputs.sink.Sink`) and one line
of :data:`OUTPUTS` (or :data:`CLOSING`, for one told the report after the
human output): ``tests/test_run_strategies.py`` adds one so and checks every
strategy feeds it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol, runtime_checkable

import msgspec

from mantle_stream.core.engine.evaluator import Evaluator
from mantle_stream.core.errors import FeedError
from mantle_stream.core.recorded import RecordedRun
from mantle_stream.core.verdicts import Decision
from mantle_stream.outputs.github import GithubAnnotations
from mantle_stream.outputs.html import HtmlWriter
from mantle_stream.outputs.jsonl import JsonlWriter
from mantle_stream.outputs.junit import JunitWriter
from mantle_stream.outputs.plain import DecisionLines
from mantle_stream.outputs.sink import Sink, Sinks
from mantle_stream.run.config import RunConfig

__all__ = ["CLOSING", "OUTPUTS", "Composed", "Composing", "RenderedApart", "compose_sinks"]


@runtime_checkable
class RenderedApart(Protocol):
    """A sink whose output for a conversation's decisions can be made in another
    process (a ``--workers`` worker: in parallel, not in the parent's serial tail):
    ``lines`` makes it there (a function found by name: picklable), ``write_lines``
    writes what the workers made, grouped by conversation. The JSONL sink is one;
    under ``--workers`` such a sink is told ``write_lines`` instead of
    ``on_decisions``, every other sink the decisions."""

    @staticmethod
    def lines(decisions: Iterable[Decision]) -> bytes: ...

    def write_lines(self, data: bytes) -> None: ...


class Composing(msgspec.Struct, frozen=True):
    """What an output's sink is made from: the run's configuration and its parts."""

    config: RunConfig
    evaluator: Evaluator
    #: The sinks composed so far (a sink that writes beside the run reports through it).
    sinks: Sinks
    #: ``watch`` into a pipe: a plain line per verdict.
    plain: bool
    #: ``--results``: the runs evaluate_agent saved, by conversation id.
    recorded: Mapping[str, RecordedRun]


def _jsonl(c: Composing) -> Sink | None:
    o = c.config.outputs
    return JsonlWriter.open(o.jsonl, overwrite=o.jsonl_overwrite) if o.jsonl else None


def _junit(c: Composing) -> Sink | None:
    path = c.config.outputs.junit
    if not path:
        return None
    junit = JunitWriter(path, tool_calls=c.config.judging.tool_calls, recorded=c.recorded)
    # Runs written as they leave memory (keeping their numbers), completed with the report.
    sinks = c.sinks
    c.evaluator.on_let_go = lambda conversation: sinks.attempt(junit, junit.add, conversation)
    return junit


def _html(c: Composing) -> Sink | None:
    path = c.config.outputs.html
    return HtmlWriter(path) if path else None  # written whole from the report


def _plain(c: Composing) -> Sink | None:
    return DecisionLines() if c.plain else None


def _annotations(c: Composing) -> Sink | None:
    if not c.config.outputs.annotations:
        return None
    # With --format json standard output holds the report alone: the workflow
    # commands go to standard error (the Actions runner reads both).
    return GithubAnnotations(
        sys.stderr if c.config.outputs.format == "json" else None,
        summary=os.environ.get("GITHUB_STEP_SUMMARY") or None,
    )


#: The outputs told every batch of decisions and every stop message as the run
#: goes, then the report, in this order: each makes its sink, or None when not asked for.
OUTPUTS: list[Callable[[Composing], Sink | None]] = [_jsonl, _junit, _html, _plain]

#: The outputs told the report after the human output (the table, the JSON report).
CLOSING: list[Callable[[Composing], Sink | None]] = [_annotations]


class Composed(msgspec.Struct, frozen=True):
    """A run's sinks: ``sinks`` as it goes, ``closing`` at its very end."""

    sinks: Sinks
    closing: Sinks


def compose_sinks(
    config: RunConfig,
    evaluator: Evaluator,
    *,
    plain: bool = False,
    recorded: Mapping[str, RecordedRun] | None = None,
    on_failure: Callable[[str], object] | None = None,
) -> Composed:
    """The sinks ``config`` asks for. One that cannot be opened fails on its own
    (``on_failure`` is told, :attr:`Sinks.failures` keeps it); the others are made."""
    sinks = Sinks(on_failure=on_failure)
    closing = Sinks(on_failure=sinks.fail)
    composing = Composing(config, evaluator, sinks, plain, recorded or {})
    for outputs, into in ((OUTPUTS, sinks), (CLOSING, closing)):
        for make in outputs:
            try:
                sink = make(composing)
            except FeedError as exc:
                sinks.fail(str(exc))
            else:
                if sink is not None:
                    into.append(sink)
    return Composed(sinks, closing)
