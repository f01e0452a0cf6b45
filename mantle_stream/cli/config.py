"""The run configuration a command line asks for: built once from its arguments.

Below :mod:`mantle_stream.cli.commands`: the parsed arguments (an
``argparse.Namespace``, whose attributes depend on the command) become one
typed :class:`~mantle_stream.run.config.RunConfig`; nothing below ``cli/``
sees the namespace. An option a command does not take keeps the record's
default.
"""

from __future__ import annotations

import argparse
from typing import Any

import msgspec

from mantle_stream.core.defaults import LINGER_UNSET
from mantle_stream.run.config import (
    GateConfig,
    JudgingConfig,
    KafkaConfig,
    LiveConfig,
    OutputsConfig,
    RunConfig,
    SourcesConfig,
)

__all__ = ["run_config"]


def run_config(args: argparse.Namespace) -> RunConfig:
    """``args`` as a :class:`RunConfig` (after the usage checks that complete them)."""
    given = {k: v for k, v in vars(args).items() if v is not None}

    def pick(record: type[Any], **renamed: str) -> Any:
        """The fields of ``record`` the command line gave (``renamed``: field → option)."""
        fields = {}
        for name in record.__struct_fields__:
            option = renamed.get(name, name)
            if option in given:
                fields[name] = given[option]
        return msgspec.convert(fields, record)

    # (None is an answer for these: `--linger never`.)
    given["linger"] = getattr(args, "linger", LINGER_UNSET)
    given["jsonl_overwrite"] = getattr(args, "jsonl_mode", "") == "overwrite"
    given["annotations"] = getattr(args, "annotations", "none") == "github"
    given.setdefault("format", "live")  # watch and demo: the live view, else lines
    return RunConfig(
        command=args.command,
        scenarios=tuple(getattr(args, "scenarios", ())),
        sources=pick(SourcesConfig, conversations="conversation"),
        judging=pick(JudgingConfig),
        outputs=pick(OutputsConfig),
        live=pick(LiveConfig),
        kafka=pick(KafkaConfig, settings="kafka_config"),
        gate=pick(GateConfig),
        workers=getattr(args, "workers", None),
    )
