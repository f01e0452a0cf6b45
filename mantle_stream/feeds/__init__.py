"""Where events come from: files, directories, standard input, followed files, sockets.

:func:`open_feed` turns an ``--events`` spec into a
:class:`~mantle_stream.feeds.interface.Feed`. What kind of source a spec is
is decided once, by :func:`~mantle_stream.feeds.spec.parse_source` (a row of
its ``KINDS``); how to open each kind is a row of :data:`SCHEMES`, by the
kind's name: adding a source is its module, a row in each, and its options
record (:class:`FollowOptions`, :class:`ListenOptions`, :class:`SqlOptions`,
:class:`HttpOptions`) if only it reads them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import BinaryIO, NamedTuple

from mantle_stream.core.engine.partition import Partition
from mantle_stream.core.urls import malformed_url, redact
from mantle_stream.feeds.base import Invalid
from mantle_stream.feeds.files import FileFeed
from mantle_stream.feeds.follow import FollowFeed, FollowOptions
from mantle_stream.feeds.http import HttpFeed, HttpOptions
from mantle_stream.feeds.interface import Chunk, Feed, Replies
from mantle_stream.feeds.sockets import ListenOptions, open_socket_feed
from mantle_stream.feeds.spec import Source, parse_source
from mantle_stream.feeds.sql import SqlFeed, SqlOptions

__all__ = [
    "MAX_LINE_BYTES",
    "SCHEMES",
    "Chunk",
    "Feed",
    "FollowOptions",
    "HttpOptions",
    "ListenOptions",
    "Replies",
    "Source",
    "SqlOptions",
    "open_feed",
    "parse_source",
]

#: The longest line a feed hands on whole; a longer one becomes a bad event.
MAX_LINE_BYTES = 1 << 20
_FORMS = (
    "a file, a directory, `-`, `follow:PATH`, `tcp://HOST:PORT`, `unix:PATH`, "
    "`sqlite:///PATH`, `postgresql://HOST/DB` or `http(s)://HOST:PORT`"
)


class Options(NamedTuple):
    """Every option record, for a source to take its own."""

    max_line_bytes: int
    follow: FollowOptions
    listen: ListenOptions
    sql: SqlOptions
    http: HttpOptions = HttpOptions()


def _follow(source: Source, options: Options) -> Feed:
    if not source.target:
        return Invalid(source.spec, f"bad event source `{source.spec}`: expected `follow:PATH`")
    return FollowFeed(
        source.spec, source.target, options.follow, max_line_bytes=options.max_line_bytes
    )


def _listen(source: Source, options: Options) -> Feed:
    return open_socket_feed(source.spec, options.listen, max_line_bytes=options.max_line_bytes)


def _sql(source: Source, options: Options) -> Feed:
    return SqlFeed(
        source.spec,
        source.target,
        options.sql,
        live=source.live,
        max_line_bytes=options.max_line_bytes,
    )


def _http(source: Source, options: Options) -> Feed:
    return HttpFeed(source.spec, options.http, max_line_bytes=options.max_line_bytes)


def _kafka(source: Source, options: Options) -> Feed:
    return Invalid(
        source.shown,
        f"`{source.shown}`: a Kafka topic is judged by a member of its consumer group "
        "(`mantle-stream check` or `watch` with it as --events), not read as a feed",
    )


#: How to open each kind of source (feeds.spec.KINDS), by its name.
SCHEMES: dict[str, Callable[[Source, Options], Feed]] = {
    "follow": _follow,
    "tcp": _listen,
    "unix": _listen,
    "http": _http,
    "sqlite": _sql,
    "postgresql": _sql,
    "kafka": _kafka,
}


def open_feed(
    spec: str | Sequence[str],
    *,
    max_line_bytes: int = MAX_LINE_BYTES,
    stdin: BinaryIO | None = None,
    follow: FollowOptions | None = None,
    listen: ListenOptions | None = None,
    http: HttpOptions | None = None,
    sql: SqlOptions | None = None,
    partition: Partition | None = None,
) -> Feed:
    """The feed for a ``--events`` source (see :func:`_open`); with ``partition``
    (``check --workers``), a SQL store and a Rasa server are asked for only that
    worker's conversations. Other sources are read whole: the worker's evaluator
    keeps its own events (:meth:`Partition.select`)."""
    if partition is None:
        return _open(spec, max_line_bytes, stdin, follow, listen, http, sql)
    sql = dataclasses.replace(sql or SqlOptions(), partition=partition)
    if not isinstance(spec, str) and len(spec) == 1:
        spec = spec[0]
    if http is not None and isinstance(spec, str) and parse_source(spec).scheme == "http":
        # (Numbered in the order the trackers are handed on.)
        mine = tuple(c for c in http.conversations if partition.owns(c))
        http = dataclasses.replace(http, conversations=mine)
    return _open(spec, max_line_bytes, stdin, follow, listen, http, sql)


def _open(
    spec: str | Sequence[str],
    max_line_bytes: int,
    stdin: BinaryIO | None,
    follow: FollowOptions | None,
    listen: ListenOptions | None,
    http: HttpOptions | None,
    sql: SqlOptions | None,
) -> Feed:
    """The feed for a ``--events`` source; nothing is opened until ``async with``.

    ``spec`` is a file or directory path, ``-`` (``stdin``, default
    ``sys.stdin.buffer``), ``follow:PATH``, ``tcp://HOST:PORT`` (port 0 picks a
    free one; an empty HOST is ``127.0.0.1``), ``unix:PATH``, ``sqlite:///PATH``
    or ``postgresql://USER[:PASSWORD]@HOST[:PORT]/DB`` (table ``events`` of a
    Rasa SQL tracker store or event broker; with ``follow:`` before it, polled
    for new rows); or several file and directory paths, read one after the
    other as one feed. A malformed spec raises FeedError on entering, like
    every other failure to open, so callers handle one place. ``follow``,
    ``listen`` and ``sql`` are read only by the sources they name.
    An ``http://`` or ``https://`` spec is a Rasa server's base URL: the
    trackers of ``http.conversations`` from its tracker endpoint.
    """
    if max_line_bytes < 1:
        raise ValueError(f"max_line_bytes must be at least 1, not {max_line_bytes!r}")
    if not isinstance(spec, str):
        specs = list(spec)
        if len(specs) != 1:
            odd = [s for s in specs if not parse_source(s).local or not s]
            if odd or not specs:
                return Invalid(
                    ", ".join(redact(spec) for spec in specs),
                    "several event sources must all be files or "
                    f"directories; `{redact(odd[0]) if odd else ''}` is not one",
                )
            return FileFeed(specs, None, max_line_bytes=max_line_bytes)
        spec = specs[0]
    if spec == "-":
        return FileFeed(None, stdin, max_line_bytes=max_line_bytes)
    why = malformed_url(spec.removeprefix("follow:")) if "://" in spec else None
    if why is not None:  # before any source takes it apart (urlsplit raises ValueError)
        return Invalid(redact(spec), f"bad event source `{redact(spec)}`: {why}")
    source = parse_source(spec)
    factory = SCHEMES.get(source.scheme)
    if factory is not None:
        return factory(
            source,
            Options(
                max_line_bytes,
                follow or FollowOptions(),
                listen or ListenOptions(),
                sql or SqlOptions(),
                http or HttpOptions(),
            ),
        )
    if not spec:
        return Invalid(spec, f"bad event source: empty; expected {_FORMS}")
    if "://" in spec:
        scheme, shown = spec.partition("://")[0], redact(spec)
        return Invalid(
            shown, f"bad event source `{shown}`: unknown scheme `{scheme}`; expected {_FORMS}"
        )
    return FileFeed([spec], None, max_line_bytes=max_line_bytes)
