"""What an ``--events`` spec names, decided once: :func:`parse_source`.

Every place that needs to know what kind of source a spec is — live or not,
a local file, whether ``--workers`` may split it, which options apply to it —
asks the :class:`Source` record instead of looking at the spec's prefix
itself. The kinds are the rows of :data:`KINDS`; a spec without a scheme is
a path (a file or directory, or a glob pattern over them), or ``-``.
Opening a source is :func:`mantle_stream.feeds.open_feed`'s (one factory per
scheme beside it); a ``kafka://`` topic is judged by a Kafka group member,
not opened as a feed.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path
from typing import NamedTuple

import msgspec

from mantle_stream.core.urls import redact

__all__ = ["KINDS", "Kind", "Source", "expand_pattern", "parse_source"]


class Kind(NamedTuple):
    """One kind of source: how its spec starts, and what that makes it."""

    name: str  # the record's `scheme`
    prefix: str  # how a spec of it starts ("" for a path)
    live: bool  # it does not end by itself: Ctrl-C, SIGTERM or --linger end it
    # Why `check --workers` reads it in one process, or None when workers split it.
    one_reader: str | None
    store: bool = False  # holds many conversations, picked by --conversation or --results


_LIVE_ONE = "a live source or standard input can be read by one process only"

#: Every kind of source, by the prefix of its spec (``follow:`` before a SQL URL
#: makes that store live: see :func:`parse_source`).
KINDS: tuple[Kind, ...] = (
    Kind("follow", "follow:", True, _LIVE_ONE),
    Kind("tcp", "tcp://", True, _LIVE_ONE),
    Kind("unix", "unix:", True, _LIVE_ONE),
    Kind(
        "kafka",
        "kafka://",
        True,
        "a Kafka topic is shared by starting more members of its consumer group",
    ),
    Kind(
        "http",
        "http://",
        False,
        "a Rasa server's trackers are fetched, 8 at a time, by one process",
        store=True,
    ),
    Kind(
        "http",
        "https://",
        False,
        "a Rasa server's trackers are fetched, 8 at a time, by one process",
        store=True,
    ),
    Kind("sqlite", "sqlite://", False, None, store=True),
    Kind("postgresql", "postgresql://", False, None, store=True),
    Kind("postgresql", "postgres://", False, None, store=True),
)
_STDIN = Kind("stdin", "-", False, _LIVE_ONE)  # it ends, but is read once
_PATH = Kind("path", "", False, None)


class Source(msgspec.Struct, frozen=True):
    """An ``--events`` spec, parsed.

    ``scheme``: ``path`` (a file, a directory or a glob pattern), ``stdin``,
    ``follow`` (a file being written), ``tcp``, ``unix``, ``http``,
    ``sqlite``, ``postgresql`` or ``kafka``; an unknown ``X://`` is
    ``unknown``. ``target``: the spec without ``follow:`` (the path, or the
    URL). ``live``: it does not end by itself (``follow:`` of a file or of a
    SQL store, a listener, Kafka). ``one_reader``: why
    ``check --workers`` reads it in one process (None: workers split it).
    ``store``: it holds many conversations, picked by ``--conversation`` or
    ``--results``. ``shown``: the spec as messages show it (no password).
    """

    spec: str
    scheme: str
    target: str
    live: bool
    one_reader: str | None
    store: bool
    shown: str

    @property
    def local(self) -> bool:
        """A file or directory path (or a pattern over them): several are read as one."""
        return self.scheme == "path"

    @property
    def sql(self) -> bool:
        return self.scheme in ("sqlite", "postgresql")


def parse_source(spec: str) -> Source:
    """The :class:`Source` record of ``spec`` (nothing is opened or checked here)."""
    if spec == "-":
        return _record(spec, _STDIN, spec)
    target = spec.removeprefix("follow:")
    followed = target != spec
    for kind in KINDS:
        if kind.prefix != "follow:" and target.startswith(kind.prefix):
            if followed and not kind.store:
                break  # follow:tcp://... is a path named so, as before: the feed says
            if followed:  # follow:sqlite:///... : a store polled for new rows
                return _record(spec, kind._replace(live=True, one_reader=_LIVE_ONE), target)
            return _record(spec, kind, target)
    if followed:
        return _record(spec, KINDS[0], target)
    if "://" in spec:
        return _record(spec, Kind("unknown", "", False, None), spec)
    return _record(spec, _PATH, spec)


def _record(spec: str, kind: Kind, target: str) -> Source:
    return Source(spec, kind.name, target, kind.live, kind.one_reader, kind.store, redact(spec))


def expand_pattern(spec: str, base: Path | None = None) -> list[str] | None:
    """A path spec with glob characters that names no existing file, expanded (sorted;
    an empty list when it matches nothing); None for any other spec (taken as it is).
    ``base``: a relative pattern is taken from there (the pytest plugin's ini file)."""
    if not parse_source(spec).local or not any(c in spec for c in "*?["):
        return None
    path = str(base / spec) if base is not None else spec
    if os.path.exists(path):
        return None
    return sorted(glob.glob(path))
