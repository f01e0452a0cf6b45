"""The JSONL verdict stream: one JSON object per decided verdict.

Appended and flushed after each batch of decisions (whole lines only), so
another process can tail the file while the run goes on. Fields: see the
README, "Command line" (conversation_id, scenario, index, kind, verdict,
decided_at, reason).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import IO

import msgspec

from mantle_stream.core.errors import FeedError
from mantle_stream.core.verdicts import Decision

__all__ = ["JsonlRecord", "JsonlWriter"]


class JsonlRecord(msgspec.Struct, frozen=True):
    conversation_id: str
    scenario: str
    index: int
    kind: str
    verdict: str
    decided_at: int | None
    reason: str


_encode = msgspec.json.Encoder().encode


class JsonlWriter:
    def __init__(self, fh: IO[bytes]) -> None:
        self._fh = fh

    @classmethod
    def open(cls, path: str, *, overwrite: bool = False) -> JsonlWriter:
        """``path``, appended to (or emptied first, with ``overwrite``); ``-`` is
        standard output."""
        if path == "-":
            return cls(os.fdopen(os.dup(sys.stdout.fileno()), "wb"))
        try:
            return cls(open(path, "wb" if overwrite else "ab"))
        except OSError as exc:
            raise FeedError(f"cannot write `{path}`: {exc.strerror}") from None

    def write(self, decisions: Iterable[Decision]) -> None:
        lines = [
            _encode(
                JsonlRecord(
                    d.conversation_id,
                    d.scenario,
                    d.index,
                    d.kind,
                    d.verdict,
                    d.decided_at,
                    d.reason,
                )
            )
            + b"\n"
            for d in decisions
        ]
        if lines:
            self._fh.write(b"".join(lines))
            self._fh.flush()

    def close(self) -> None:
        self._fh.close()
