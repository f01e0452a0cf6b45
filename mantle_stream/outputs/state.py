"""The state file of ``--state``: evaluator checkpoints, written atomically and durably.

One run holds ``PATH.lock`` for its whole length; left-over temporary files
of a run killed mid-write are removed when the next one starts.
"""

from __future__ import annotations

import contextlib
import os
from typing import IO

from mantle_stream.core.errors import FeedError
from mantle_stream.outputs.atomic import write_atomically

__all__ = ["lock_state", "read_checkpoint", "remove_checkpoint", "write_checkpoint"]


def write_checkpoint(path: str, data: bytes) -> None:
    """Save an evaluator checkpoint (``--state``) atomically and durably."""
    write_atomically(path, data, durable=True)


def lock_state(path: str) -> IO[bytes]:
    """Hold ``PATH.lock`` for the whole run: two runs with one ``--state`` would
    overwrite each other's checkpoints. Left-over temporary files of a run that
    was killed mid-write are removed (no other run can be writing them now)."""
    import fcntl  # POSIX; imported here so that the module loads elsewhere too

    try:
        lock = open(path + ".lock", "ab")  # noqa: SIM115 - held for the run, closed by the caller
    except OSError as exc:
        raise FeedError(f"cannot lock the state file `{path}`: {exc.strerror}") from None
    try:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        raise FeedError(f"another mantle-stream run is using the state file `{path}`") from None
    directory = os.path.dirname(os.path.abspath(path))
    prefix = f".{os.path.basename(path)}-"
    for name in os.listdir(directory):
        if name.startswith(prefix):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(directory, name))
    return lock


def read_checkpoint(path: str) -> bytes | None:
    """The saved checkpoint, or None when there is none yet."""
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise FeedError(f"cannot read the state file `{path}`: {exc.strerror}") from None


def remove_checkpoint(path: str) -> None:
    """The run completed: a later run with the same ``--state`` starts afresh."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise FeedError(f"cannot remove the state file `{path}`: {exc.strerror}") from None
