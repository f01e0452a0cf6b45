"""``mantle-stream rekey``: an unkeyed Kafka topic copied to one keyed by conversation id."""

from __future__ import annotations

import argparse

from mantle_stream.core.errors import UsageError

__all__ = ["run_rekey"]


def run_rekey(args: argparse.Namespace) -> int:
    raise UsageError("rekey is not built yet")
