"""Defaults the command line shows in ``--help`` and the engine and runner use.

A leaf module with no imports, so that reading the arguments (and answering
``--help``) does not load the engine.
"""

from __future__ import annotations

__all__ = [
    "CHUNK_BYTES",
    "DEFAULT_GAP_TIMEOUT",
    "DEFAULT_REGEX_TIMEOUT",
    "DEFAULT_REORDER_WINDOW",
    "LINGER_UNSET",
    "VERSION",
]

VERSION = "0.1.0"
#: Events of one conversation held back waiting for a missing earlier sequence:
#: Kafka with Rasa's default (unkeyed) partitioning delivers a turn's burst out
#: of order routinely. Past this many, the oldest gap is given up on.
DEFAULT_REORDER_WINDOW = 1000
#: Seconds a conversation's events wait for a missing earlier sequence (live runs).
DEFAULT_GAP_TIMEOUT = 5.0
#: Seconds one `text_matches` search may take on one message.
DEFAULT_REGEX_TIMEOUT = 0.05

#: --linger not given: each live source's own default (see run.one.linger).
LINGER_UNSET = -1.0

#: The size of the chunks handed to the engine: large enough to amortize decoding,
#: small enough that the garbage collector never walks a huge batch (files, sockets
#: and the Kafka member all cut their input so).
CHUNK_BYTES = 64 * 1024
