"""Line chunking for the feeds: partial lines across reads, reads cut at line ends.

An edge module: turns a byte stream into chunks that end at a line boundary,
so the engine's chunked decoder never sees half a line. The engine gets
chunks of about 64 KiB: large enough to amortize decoding, small enough that
the garbage collector never walks a huge batch of retained objects. Regular
files are read in larger blocks (:data:`READ_BYTES`) and split with
:func:`split_lines`, since each read is a hand-off from a reader thread.
"""

from __future__ import annotations

from collections.abc import Iterator

from mantle_stream.core.defaults import CHUNK_BYTES

__all__ = ["CHUNK_BYTES", "READ_BYTES", "LineChunker", "split_lines"]

#: One read of a regular file (then split into chunks): a thread hand-off per
#: read costs about as much as judging a few hundred events.
READ_BYTES = 512 * 1024


def split_lines(chunk: bytes, size: int = CHUNK_BYTES) -> Iterator[bytes]:
    """Complete lines cut into pieces of about ``size`` bytes, at line ends.

    A line longer than ``size`` stays whole in its piece.
    """
    start, end = 0, len(chunk)
    while end - start > size:
        cut = chunk.rfind(b"\n", start, start + size)
        if cut < 0:
            cut = chunk.find(b"\n", start + size)
            if cut < 0:
                break
        yield chunk[start : cut + 1]
        start = cut + 1
    if start < end:
        yield chunk[start:] if start else chunk


class LineChunker:
    """Accumulates bytes and hands out complete lines in chunks.

    ``feed(data)`` returns the complete lines so far (possibly ``b""``);
    ``flush()`` returns the final line when the stream ended without a
    newline. The partial line is held whole (``pending`` says how long it
    is): the feeds cut a line longer than their limit (see ``feeds.base.Lines``).
    """

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, data: bytes) -> bytes:
        cut = data.rfind(b"\n")
        if cut < 0:
            self._pending += data
            return b""
        if self._pending:  # one copy: join reads the slice through a memoryview
            chunk = b"".join((self._pending, memoryview(data)[: cut + 1]))
        else:
            chunk = data if cut + 1 == len(data) else data[: cut + 1]
        self._pending = data[cut + 1 :]
        return chunk

    def flush(self) -> bytes:
        rest, self._pending = self._pending, b""
        return rest + b"\n" if rest.strip() else b""

    @property
    def pending(self) -> int:
        return len(self._pending)
