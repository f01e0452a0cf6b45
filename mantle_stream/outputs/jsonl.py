"""The JSONL verdict stream: one JSON object per decided verdict.

Appended and flushed after each batch of decisions (whole lines only), so
another process can tail the file while the run goes on. Each line is a
:class:`~mantle_stream.core.verdicts.DecisionRecord` — a Decision without its
turn: conversation_id, scenario, index, kind, verdict, decided_at, reason
(see docs/outputs.md, "JSONL").
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import IO, TYPE_CHECKING

import msgspec

from mantle_stream.core.errors import FeedError
from mantle_stream.core.verdicts import Decision, DecisionRecord, StopMessage

if TYPE_CHECKING:
    from mantle_stream.outputs.report import Report

__all__ = ["JsonlRecord", "JsonlWriter"]

#: A line of the stream (the family's record; the name kept for existing imports).
JsonlRecord = DecisionRecord

_encode = msgspec.json.Encoder().encode
_record = DecisionRecord.of


class JsonlWriter:
    """A :class:`~mantle_stream.outputs.sink.Sink`: the verdicts, a line each."""

    def __init__(self, fh: IO[bytes], path: str = "<jsonl>") -> None:
        self._fh = fh
        self.path = path  # what a message names when writing fails

    @classmethod
    def open(cls, path: str, *, overwrite: bool = False) -> JsonlWriter:
        """``path``, appended to (or emptied first, with ``overwrite``); ``-`` is
        standard output."""
        if path == "-":
            return cls(os.fdopen(os.dup(sys.stdout.fileno()), "wb"), "<stdout>")
        try:
            return cls(open(path, "wb" if overwrite else "ab"), path)
        except OSError as exc:
            raise FeedError(f"cannot write `{path}`: {exc.strerror}") from None

    @staticmethod
    def lines(decisions: Iterable[Decision]) -> bytes:
        """The lines of ``decisions``, as :meth:`write` writes them."""
        return b"".join([_encode(_record(d)) + b"\n" for d in decisions])

    def write(self, decisions: Iterable[Decision]) -> None:
        self.write_lines(self.lines(decisions))

    def write_lines(self, data: bytes) -> None:
        """Lines made by :meth:`lines` (by another process, say), written and flushed."""
        if data:
            try:
                self._fh.write(data)
                self._fh.flush()
            except OSError as exc:  # a full disk: FeedError, so the other outputs go on
                raise FeedError(f"cannot write `{self.path}`: {exc.strerror}") from None

    def on_decisions(self, decisions: list[Decision]) -> None:
        self.write(decisions)

    def on_stop(self, message: StopMessage) -> None:
        """Stop messages are not verdicts: the stream has none."""

    def on_end(self, report: Report) -> None:
        """Every verdict was written as it came: nothing is left to add."""

    def close(self) -> None:
        try:
            self._fh.close()
        except OSError as exc:  # what was still buffered could not be written
            raise FeedError(f"cannot write `{self.path}`: {exc.strerror}") from None
