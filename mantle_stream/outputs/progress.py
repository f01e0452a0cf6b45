"""Progress of a long ``check`` on standard error: a bar when it is a terminal, else nothing.

Bytes of the feed read of its total where the total is known (files and
directories), events judged, events per second and the time left; a feed of
unknown size (standard input) shows what was read and the rate. Drawn by
rich on standard error, so standard output (the report, ``--format json``)
is never touched, and ``NO_COLOR`` is honoured as everywhere else.
"""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

__all__ = ["ReadProgress"]


class ReadProgress:
    """``with ReadProgress(total) as bar: bar.update(bytes_read, events, rate)``.

    ``total``: the feed's size in bytes, or None when unknown. ``console``:
    where to draw (standard error by default); nothing is drawn when it is
    not a terminal.
    """

    def __init__(self, total: int | None, console: Console | None = None) -> None:
        self.console = console if console is not None else Console(stderr=True)
        self.enabled = self.console.is_terminal
        columns = [
            TextColumn("[bold]judging"),
            BarColumn(),
            DownloadColumn(),
            TextColumn("{task.fields[events]:,} events · {task.fields[rate]:,.0f} events/s"),
            TimeRemainingColumn() if total else TimeElapsedColumn(),
        ]
        self._progress = Progress(*columns, console=self.console, transient=True)
        self._total = total
        self._task: TaskID | None = None

    def __enter__(self) -> ReadProgress:
        if self.enabled:
            self._progress.start()
            self._task = self._progress.add_task("judging", total=self._total, events=0, rate=0.0)
        return self

    def update(self, bytes_read: int, events: int, rate: float) -> None:
        if self._task is not None:
            self._progress.update(self._task, completed=bytes_read, events=events, rate=rate)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.enabled:
            self._progress.stop()
