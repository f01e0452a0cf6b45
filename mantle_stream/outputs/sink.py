"""Where verdicts go, as one interface: :class:`Sink`, and :class:`Sinks` to fan out.

A run tells every sink the same things in the same order: each batch of
decisions as it is decided (:meth:`Sink.on_decisions`), each stop message as
the runner sends it (:meth:`Sink.on_stop`), then the final report once
(:meth:`Sink.on_end`); :meth:`Sink.close` releases what a sink holds, also
when the run ended before its report. The JSONL stream
(:class:`~mantle_stream.outputs.jsonl.JsonlWriter`), the JUnit file
(:class:`~mantle_stream.outputs.junit.JunitWriter`) and the plain verdict lines
(:class:`~mantle_stream.outputs.plain.DecisionLines`) are sinks;
:mod:`mantle_stream.run.sinks` composes the ones a run asks for.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from mantle_stream.core.errors import FeedError
from mantle_stream.core.verdicts import Decision, StopMessage

if TYPE_CHECKING:
    from mantle_stream.outputs.report import Report

__all__ = ["Sink", "Sinks"]


class Sink(Protocol):
    """An output a run feeds as it goes (structural: no base class to inherit)."""

    def on_decisions(self, decisions: list[Decision]) -> None:
        """A batch of verdicts just decided, in the order they were decided."""

    def on_stop(self, message: StopMessage) -> None:
        """A conversation settled before its end was told to stop."""

    def on_end(self, report: Report) -> None:
        """The run is over: its final report (called once, not after a crash)."""

    def close(self) -> None:
        """Release files and the like; safe to call after :meth:`on_end`, and again."""


class Sinks:
    """Several sinks as one (itself a :class:`Sink`): each call goes to every
    sink, in the order they were added.

    An output fails on its own: a sink that raises :class:`FeedError` (``cannot
    write `PATH`: reason``: a full disk, a directory in its place) is closed and
    dropped, its message kept in :attr:`failures` and told to ``on_failure``;
    the other sinks go on, and the final report still reaches them.
    """

    def __init__(
        self,
        sinks: Iterable[Sink] = (),
        *,
        on_failure: Callable[[str], object] | None = None,
    ) -> None:
        self.sinks: list[Sink] = list(sinks)
        self.on_failure = on_failure
        #: What each output that failed said, in the order they failed.
        self.failures: list[str] = []

    def append(self, sink: Sink) -> None:
        self.sinks.append(sink)

    def attempt(self, sink: Sink, action: Callable[..., object], *args: Any) -> None:
        """``action(*args)``, a call on ``sink``; if it fails to write, the sink is dropped."""
        try:
            action(*args)
        except FeedError as exc:
            self.fail(str(exc))
            if sink in self.sinks:
                self.sinks.remove(sink)
            with contextlib.suppress(Exception):  # (what it failed at, it fails at again)
                sink.close()

    def fail(self, message: str) -> None:
        """An output failed (this list's sinks, or one written beside them)."""
        self.failures.append(message)
        if self.on_failure is not None:
            self.on_failure(message)

    def on_decisions(self, decisions: list[Decision]) -> None:
        for sink in list(self.sinks):
            self.attempt(sink, sink.on_decisions, decisions)

    def on_stop(self, message: StopMessage) -> None:
        for sink in list(self.sinks):
            self.attempt(sink, sink.on_stop, message)

    def on_end(self, report: Report) -> None:
        for sink in list(self.sinks):
            self.attempt(sink, sink.on_end, report)

    def close(self) -> None:
        """Close every sink, in order, even when one of them fails."""
        with contextlib.ExitStack() as stack:
            for sink in reversed(self.sinks):  # the stack unwinds last-in first
                stack.callback(sink.close)
