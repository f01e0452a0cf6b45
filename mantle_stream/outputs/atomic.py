"""Files written whole or not at all: write to a temporary file, then rename."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from typing import IO

from mantle_stream.core.errors import FeedError

__all__ = ["atomic_file", "write_atomically"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_file(path: str, *, durable: bool = False) -> Iterator[IO[bytes]]:
    """Write-then-rename: a reader (or a restart) never sees half a file.

    ``durable``: the data is fsync-ed before the rename and the directory
    after it, so the new file, whole, is what a restart after a power cut finds.

    The file gets the permissions a plain ``open`` would give it (0666 less
    the umask), not ``mkstemp``'s 0600. A path that is a device or a pipe is
    written in place.
    """
    if os.path.exists(path) and not os.path.isfile(path) and not os.path.isdir(path):
        # A device or a pipe (/dev/stdout, /dev/null): written in place, since a
        # rename over it would replace it (with a file, for whoever may).
        try:
            with open(path, "wb") as device:
                yield device
        except OSError as exc:
            raise FeedError(f"cannot write `{path}`: {exc.strerror}") from None
        return
    directory = os.path.dirname(os.path.abspath(path))
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}-", dir=directory)
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as fh:
            yield fh
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
        tmp = None
        if durable:  # the rename itself survives a crash once its directory is synced
            directory_fd = os.open(directory, os.O_RDONLY)
            try:
                os.fsync(directory_fd)
            finally:
                os.close(directory_fd)
    except OSError as exc:
        raise FeedError(f"cannot write `{path}`: {exc.strerror}") from None
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


def write_atomically(path: str, data: bytes, *, durable: bool = False) -> None:
    with atomic_file(path, durable=durable) as fh:
        fh.write(data)
