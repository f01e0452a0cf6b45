"""Blocking line-chunk readers for files and standard input.

An edge module: turns a byte stream into chunks that end at a line boundary,
so the engine's chunked decoder never sees half a line. Reads in 64 KiB
blocks: large enough to amortize decoding, small enough that the garbage
collector never walks a huge batch of retained objects.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator

from mantle_stream._errors import FeedError

__all__ = ["CHUNK_BYTES", "LineChunker", "read_chunks"]

CHUNK_BYTES = 64 * 1024


class LineChunker:
    """Accumulates bytes and hands out complete lines in chunks.

    ``feed(data)`` returns the complete lines so far (possibly ``b""``);
    ``flush()`` returns the final line when the stream ended without a
    newline. A partial line is kept only up to ``max_pending`` bytes.
    """

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, data: bytes) -> bytes:
        cut = data.rfind(b"\n")
        if cut < 0:
            self._pending += data
            return b""
        chunk = self._pending + data[: cut + 1] if self._pending else data[: cut + 1]
        self._pending = data[cut + 1:]
        return chunk

    def flush(self) -> bytes:
        rest, self._pending = self._pending, b""
        return rest + b"\n" if rest.strip() else b""

    @property
    def pending(self) -> int:
        return len(self._pending)


def _chunks(read: Callable[[int], bytes]) -> Iterator[bytes]:
    chunker = LineChunker()
    while True:
        data = read(CHUNK_BYTES)
        if not data:
            break
        chunk = chunker.feed(data)
        if chunk:
            yield chunk
    tail = chunker.flush()
    if tail:
        yield tail


def read_chunks(source: str) -> Iterator[bytes]:
    """Chunks of complete lines from a file path or ``-`` (standard input)."""
    if source == "-":
        stdin = sys.stdin.buffer
        read = getattr(stdin, "read1", stdin.read)
        yield from _chunks(read)
        return
    if source.startswith(("follow:", "tcp://", "unix:")):
        raise FeedError(f"`{source}` is a live source; use `mantle-stream watch` or a file")
    try:
        fh = open(source, "rb")  # noqa: SIM115 - closed in finally, generator-friendly
    except OSError as exc:
        raise FeedError(f"cannot read events from `{source}`: {exc.strerror}") from None
    try:
        yield from _chunks(fh.read)
    finally:
        fh.close()
