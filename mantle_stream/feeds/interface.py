"""The interface between event sources and their consumer: :class:`Feed` and :class:`Chunk`.

The runner consumes chunks -- runs of complete lines tagged with where they
came from -- and never learns whether the bytes came from a file, standard
input, a log still being written or a simulator on a socket. Every source
implements :class:`Feed`; :func:`mantle_stream.feeds.open_feed` picks one
by the ``--events`` spec.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from types import TracebackType
from typing import NamedTuple, Protocol

__all__ = ["Chunk", "Feed", "Replies"]


class Replies(Protocol):
    """The connection a chunk came from, when it can take reply lines (stop messages)."""

    @property
    def name(self) -> str: ...

    @property
    def closed(self) -> bool:
        """True once replies can no longer reach the client."""
        ...

    def post(self, line: bytes) -> None:
        """Queue one reply line; never waits (a client that does not read is dropped)."""
        ...


class Chunk(NamedTuple):
    """One or more complete lines, each ending in ``b"\\n"``, from one source.

    ``source`` names where the lines came from when that is not the feed
    itself (one file of a directory); ``ends`` is the conversation a tracker
    document holds, which ends with the document. ``line_of``, when the
    lines are not consecutive (rows of one worker's conversations, say), gives
    the line number of the chunk's i-th line (0-based); ``first_line`` is then
    that of its first.
    """

    data: bytes
    peer: Replies | None
    first_line: int
    source: str | None = None
    ends: str | None = None
    line_of: Callable[[int], int] | None = None


class Feed(Protocol):
    """An event source: an async context manager and an async iterator of :class:`Chunk`.

    Entering it (``async with``) does everything that can fail for a reason
    the user must hear about up front -- opening the file, binding the
    socket -- and raises :class:`~mantle_stream.FeedError` if it cannot.
    ``name`` is what to show in messages; ``live`` feeds (follow, tcp, unix)
    never end by themselves: the consumer decides when a live run ends by no
    longer iterating. ``address`` is the bound ``tcp://HOST:PORT`` (the real
    port when 0 was asked) or ``unix:PATH``, else None.
    """

    name: str
    live: bool
    #: Each conversation's events arrive in the order they were numbered (one
    #: file, a SQL table by id, one connection per conversation, a tracker
    #: document): a gap in ``sequence`` never fills, so the engine passes it at
    #: once (:attr:`Evaluator.ordered <mantle_stream.Evaluator>`). False where
    #: the source can reorder a conversation (several files, standard input).
    ordered: bool
    address: str | None
    #: Called with (client, reason) for every client the listener turns away.
    on_rejected: Callable[[str, str], object] | None
    #: Called with a connection once its last line has been handed out.
    on_gone: Callable[[Replies], object] | None

    @property
    def connections(self) -> int:
        """Clients admitted and not yet retired; one counts until its last line is out."""
        ...

    @property
    def last_activity(self) -> float:
        """``anyio.current_time()`` of the last byte received or connection change."""
        ...

    @property
    def rejected(self) -> dict[str, int]:
        """Connections refused or closed by the listener, by reason (a copy)."""
        ...

    @property
    def unread(self) -> dict[str, str]:
        """Conversations asked for by id that could not be read, with why (a copy)."""
        ...

    @property
    def notices(self) -> list[str]:
        """What the user should know about how the source was read, one line each
        (a lock waited for, a database replaced, rows it could not read)."""
        ...

    async def __aenter__(self) -> Feed: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None: ...

    def __aiter__(self) -> AsyncIterator[Chunk]: ...

    async def __anext__(self) -> Chunk: ...
