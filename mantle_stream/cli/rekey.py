"""``mantle-stream rekey``: an unkeyed Kafka topic copied to one keyed by conversation id.

The copying is :func:`mantle_stream.kafka.rekey.rekey`; this is the command
around it: the arguments, SIGINT and SIGTERM as a clean stop (what was copied
is committed first; a second signal interrupts at once), and standard error:
a note for each thing worth telling, a progress line (redrawn every second
on a terminal; with ``--follow`` and no terminal, one a minute) and a
summary. Standard output is not written.

Exit status: 0 when the copy ended (the end of every partition, or
``--follow`` stopped by a signal), 130 when a copy without ``--follow`` was
stopped before the end (a rerun goes on), 2 when it could not run.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
import time
from collections.abc import Iterator
from types import FrameType
from typing import TextIO

from mantle_stream.kafka.options import kafka_settings, parse_kafka_spec
from mantle_stream.kafka.rekey import RekeyStats, rekey
from mantle_stream.run.sources import on_signals

__all__ = ["run_rekey", "summary"]

EXIT_OK = 0
EXIT_INTERRUPTED = 130
#: Seconds between progress lines when standard error is not a terminal (``--follow`` only).
LOG_EVERY = 60.0
_PREFIX = "mantle-stream rekey: "


def run_rekey(args: argparse.Namespace) -> int:
    spec = parse_kafka_spec(args.source)
    stop = threading.Event()
    out = _Status(sys.stderr, follow=args.follow)
    with _stop_on_signals(stop, out):
        stats = rekey(
            spec,
            target=args.to,
            group=args.group,
            follow=args.follow,
            stop=stop,
            on_progress=out.progress,
            on_note=out.note,
            consumer_settings=kafka_settings(args.kafka_config or []) or None,
        )
    out.done(stats)
    return EXIT_INTERRUPTED if stats.stopped and not args.follow else EXIT_OK


def summary(stats: RekeyStats) -> str:
    """The line a run ends with."""
    line = (
        f"`{stats.source}` to `{stats.target}` (group `{stats.group}`): "
        f"copied {stats.copied:,} message{'' if stats.copied == 1 else 's'} "
        f"in {stats.elapsed:.1f} s"
    )
    if stats.copied:
        line += f" ({stats.per_second:,.0f}/s while copying)"
    if stats.without_id:
        line += f"; {stats.without_id:,} without a conversation id (copied with a null key)"
    if stats.keyed:
        line += f"; {stats.keyed:,} keyed already in the source"
    if stats.stopped:
        line += "; stopped: a rerun goes on from here"
    elif stats.reached_end and not stats.read:
        line += "; nothing new since the group's last commit"
    return line


def _progress_line(stats: RekeyStats, rate: float) -> str:
    if not stats.assigned:
        return f"joining group `{stats.group}`: waiting for partitions of `{stats.source}`"
    line = f"{stats.copied:,} copied, {rate:,.0f}/s now"
    if stats.without_id:
        line += f", {stats.without_id:,} without a conversation id"
    parts = ",".join(map(str, stats.assigned))
    return (
        line + f" (partition{'s' if len(stats.assigned) > 1 else ''} {parts} of `{stats.source}`)"
    )


class _Status:
    """Notes, progress and the summary on standard error."""

    def __init__(self, stream: TextIO, *, follow: bool) -> None:
        self.stream = stream
        self.terminal = stream.isatty()
        self.follow = follow
        self._drawn = False  # a progress line is on the terminal's last line
        self._logged = time.monotonic()
        self._last: RekeyStats | None = None

    def _write(self, text: str) -> None:
        if self._drawn:
            self.stream.write("\r\x1b[K")
            self._drawn = False
        self.stream.write(_PREFIX + text + "\n")
        self.stream.flush()

    def note(self, text: str) -> None:
        self._write(text)

    def progress(self, stats: RekeyStats) -> None:
        last = self._last
        if last is not None and stats.updated - last.updated < 0.5:
            return  # too soon for a rate (a commit on revoke, the last one)
        self._last = stats
        rate = (
            0.0 if last is None else (stats.copied - last.copied) / (stats.updated - last.updated)
        )
        if self.terminal:
            self.stream.write("\r\x1b[K" + _PREFIX + _progress_line(stats, rate))
            self.stream.flush()
            self._drawn = True
        elif self.follow and time.monotonic() - self._logged >= LOG_EVERY:
            self._logged = time.monotonic()
            self._write(_progress_line(stats, rate))

    def done(self, stats: RekeyStats) -> None:
        self._write(summary(stats))


@contextlib.contextmanager
def _stop_on_signals(stop: threading.Event, out: _Status) -> Iterator[None]:
    """SIGINT / SIGTERM set ``stop`` (the run commits and ends); a second one interrupts."""

    def handle(signum: int, frame: FrameType | None) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        out.note(f"{signal.Signals(signum).name}: stopping after committing what was copied")

    with on_signals(handle):
        yield
