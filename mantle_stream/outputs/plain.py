"""The plain verdict lines of ``watch`` into a pipe: a sink printing a line per verdict.

Each line is :func:`~mantle_stream.outputs.live.decision_line`, flushed as
the verdict comes, so a reader (``watch ... | grep FAILED``) sees it at once.
The closing summary line needs the run's rate and time, not only the report:
the command prints it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TextIO

from mantle_stream.core.verdicts import Decision, StopMessage
from mantle_stream.outputs.live import decision_line

if TYPE_CHECKING:
    from mantle_stream.outputs.report import Report

__all__ = ["DecisionLines"]


class DecisionLines:
    """A :class:`~mantle_stream.outputs.sink.Sink`: a :func:`decision_line` per
    verdict as it comes, flushed. ``file``: standard output (the one current at
    each write) when None."""

    def __init__(self, file: TextIO | None = None) -> None:
        self.file = file

    def on_decisions(self, decisions: list[Decision]) -> None:
        for d in decisions:
            print(decision_line(d), file=self.file, flush=True)

    def on_stop(self, message: StopMessage) -> None:
        """Its verdicts were printed as they came."""

    def on_end(self, report: Report) -> None:
        """The summary line is the command's to print (see the module's docstring)."""

    def close(self) -> None:
        """Standard output is not this sink's to close."""
