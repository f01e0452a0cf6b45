"""The options the commands share, in groups (what --help lists, in its order).

Below :mod:`mantle_stream.cli.parser`, which builds each command from these
groups; standard library only, so ``--help`` stays quick.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable

from mantle_stream.core.defaults import (
    DEFAULT_GAP_TIMEOUT,
    DEFAULT_REGEX_TIMEOUT,
    DEFAULT_REORDER_WINDOW,
    LINGER_UNSET,
)

__all__ = [
    "add_live_options",
    "add_output_options",
    "add_run_options",
    "at_least_one",
    "positive",
    "seconds",
]


def seconds(text: str) -> float | None:
    """A duration in seconds; ``never`` (or ``inf``) for no limit."""
    if text in ("never", "inf"):
        return None
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds or `never`, got `{text}`") from None
    if value < 0 or math.isnan(value):
        raise argparse.ArgumentTypeError(f"expected a duration >= 0, got `{text}`")
    return value


def _number(
    text: str, kind: Callable[[str], float], ok: Callable[[float], bool], what: str
) -> float:
    """Parse a command-line number, with the same message for every way it can be wrong."""
    try:
        value = kind(text)
    except ValueError:
        value = math.nan
    if not ok(value):
        raise argparse.ArgumentTypeError(f"expected {what}, got `{text}`")
    return value


def positive(text: str) -> float:
    return _number(text, float, lambda v: v > 0, "a number > 0")


def _count(text: str) -> int:
    return int(_number(text, int, lambda v: v >= 0, "a whole number >= 0"))


def at_least_one(text: str) -> int:
    return int(_number(text, int, lambda v: v >= 1, "a whole number >= 1"))


def add_run_options(p: argparse.ArgumentParser) -> None:
    add_output_options(p)
    _add_judging_options(p)


def add_output_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--jsonl",
        metavar="PATH",
        help="append one JSON line per verdict as it is decided (`-`: standard output)",
    )
    p.add_argument(
        "--jsonl-mode",
        choices=("append", "overwrite"),
        default="append",
        help="add to an existing --jsonl file (default) or start it afresh",
    )
    p.add_argument("--junit", metavar="PATH", help="write a JUnit XML report at the end")
    p.add_argument(
        "--html",
        metavar="PATH",
        help="write a picture of the run at the end: one self-contained HTML file",
    )
    in_actions = os.environ.get("GITHUB_ACTIONS") == "true"
    p.add_argument(
        "--annotations",
        choices=("github", "none"),
        default="github" if in_actions else "none",
        help="github: at the end, print GitHub Actions annotations for failing, flaky "
        "and errored assertions, and append a Markdown summary to $GITHUB_STEP_SUMMARY "
        "when it is set (default: github when $GITHUB_ACTIONS is `true`, else none)",
    )


def _add_judging_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--fail-fast",
        action="store_true",
        help="stop reading and exit 1 at the first failed assertion",
    )
    p.add_argument(
        "--on-bad-event",
        choices=("fail", "skip"),
        default=None,  # fail; skip for kafka:// (one bad message would stop every member)
        help="a malformed event: stop with exit 2 after reporting what was judged "
        "(fail, the default), or count it and go on (skip, the default for kafka://)",
    )
    p.add_argument(
        "--reorder-window",
        type=_count,
        default=DEFAULT_REORDER_WINDOW,
        metavar="N",
        help="hold up to N events of a conversation that arrive after a gap in "
        "`sequence`, to apply them in order; 0 applies events on arrival "
        f"(default: {DEFAULT_REORDER_WINDOW})",
    )
    p.add_argument(
        "--gap-timeout",
        type=positive,
        default=DEFAULT_GAP_TIMEOUT,
        metavar="SECONDS",
        help="live sources (follow:, tcp://, unix:): give up on a missing "
        "sequence after waiting this long; a file is never timed "
        f"(default: {DEFAULT_GAP_TIMEOUT:g})",
    )
    p.add_argument(
        "--regex-timeout",
        type=positive,
        default=DEFAULT_REGEX_TIMEOUT,
        metavar="SECONDS",
        help="the time one `text_matches` search may take on one message; past it "
        f"the assertion is errored (default: {DEFAULT_REGEX_TIMEOUT:g})",
    )
    p.add_argument(
        "--keep-finished",
        type=_count,
        default=None,
        metavar="N",
        help="list only the N most recently finished conversations in the views "
        "and the report (the others are counted; --jsonl and --junit have every "
        "verdict), so a long run holds what is open now (default: all for "
        "files, 10000 for follow:, tcp:// and unix:)",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="exit 2 when an event or a conversation came and was not judged: "
        "conversations that match no scenario, bad, late or foreign events, unknown "
        "kinds (not a gap in `sequence`: Mantle's may skip numbers)",
    )
    p.add_argument(
        "--tool-calls",
        action="store_true",
        help="judge tool calls as Rasa does with tool-call evaluation on: a "
        "`gate: true` entry of `goals.expected_tools` that fails fails its "
        "conversation (without it, every entry is a metric only)",
    )
    _add_selection_options(p)


def _add_selection_options(p: argparse.ArgumentParser) -> None:
    """Which conversations of a source are judged, and against which scenario."""
    p.add_argument(
        "--conversation",
        action="append",
        metavar="ID",
        help="read only this conversation (a sender_id) from a source that holds "
        "many: sqlite://, postgresql:// or a Rasa server's http(s)://; repeat for several",
    )
    p.add_argument(
        "--since",
        metavar="TIME",
        help="sqlite:// and postgresql:// tracker stores: only rows whose timestamp "
        "is at or after TIME (ISO 8601, or seconds since the epoch)",
    )
    p.add_argument(
        "--results",
        metavar="DIR",
        help="an evaluate_agent results folder: judge each conversation against "
        "the scenario its run_N.json names, and report where our verdicts "
        "differ from the recorded ones",
    )


def add_live_options(p: argparse.ArgumentParser) -> None:
    """What a live source is read with: timers, checkpoints, connections, Kafka."""
    _add_loop_options(p)
    _add_connection_options(p)
    _add_kafka_options(p)


def _add_loop_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--idle-timeout",
        type=seconds,
        default=None,
        metavar="SECONDS",
        help="finish a conversation with no event for this long (default: never)",
    )
    p.add_argument(
        "--linger",
        type=seconds,
        default=LINGER_UNSET,
        metavar="SECONDS",
        help="live sources: end this long after every conversation ended and "
        "every client left; `never` keeps listening (default: 1 for tcp:// and unix: "
        "listeners, whose simulators leave when done; never for follow: sources, which "
        "Ctrl-C or SIGTERM end: a file or store being written may get more runs later)",
    )
    p.add_argument(
        "--state",
        metavar="PATH",
        help="checkpoint every open conversation to PATH (atomically) and resume "
        "from it when restarted; removed when the run completes",
    )
    p.add_argument(
        "--state-interval",
        type=positive,
        default=1.0,
        metavar="SECONDS",
        help="how often to checkpoint with --state (default: 1)",
    )


def _add_connection_options(p: argparse.ArgumentParser) -> None:
    """Listeners' and a Rasa server's connections."""
    p.add_argument(
        "--token",
        default=os.environ.get("MANTLE_STREAM_TOKEN"),
        help="sockets: a shared secret every client must send as its first line "
        "(default: $MANTLE_STREAM_TOKEN)",
    )
    p.add_argument(
        "--listen-remote",
        action="store_true",
        help="allow tcp:// on a non-loopback address (set a --token too)",
    )
    p.add_argument(
        "--max-connections",
        type=at_least_one,
        default=64,
        metavar="N",
        help="sockets: clients connected at once (default: 64)",
    )
    p.add_argument(
        "--connection-idle-timeout",
        type=positive,
        default=300.0,
        metavar="SECONDS",
        help="sockets: close a client that sent nothing for this long (default: 300)",
    )
    p.add_argument(
        "--rasa-token",
        default=os.environ.get("RASA_TOKEN"),
        metavar="TOKEN",
        help="http(s)://: Rasa's token auth, the server's --auth-token, sent as "
        "?token= (default: $RASA_TOKEN)",
    )
    p.add_argument(
        "--rasa-jwt",
        default=os.environ.get("RASA_JWT"),
        metavar="JWT",
        help="http(s)://: a JWT signed with the server's --jwt-secret, sent as "
        "`Authorization: Bearer JWT` (default: $RASA_JWT)",
    )


def _add_kafka_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--group",
        help="kafka://: the consumer group this process joins (default: mantle_stream for "
        "watch; for check a group of its own, so it reads the whole topic)",
    )
    p.add_argument(
        "--offsets",
        choices=("earliest", "latest"),
        help="kafka://: where a partition the group has not read yet starts (default: "
        "earliest for check, latest for watch)",
    )
    p.add_argument(
        "--stats-interval",
        type=positive,
        metavar="SECONDS",
        help="kafka://: print a line of consumer lag, events/s and partitions this often",
    )
    p.add_argument(
        "--kafka-config",
        action="append",
        metavar="KEY=VALUE",
        help="kafka://: a librdkafka consumer setting, repeatable (session.timeout.ms=10000, say)",
    )
    p.add_argument(
        "--dead-letter-topic",
        metavar="TOPIC",
        help="kafka://: where a message that is not an event goes (key, value and headers "
        "as read) when it is skipped",
    )
    for topic, what, check in (
        ("verdicts", "every verdict (key: conversation id)", "; check publishes none unless named"),
        ("stops", "every stop message", "; check publishes none unless named"),
        ("state", "open conversations' state (compacted)", ""),
    ):
        p.add_argument(
            f"--{topic}-topic",
            metavar="TOPIC",
            help=f"kafka://: the topic of {what} (default: mantle_stream.{topic}.GROUP.TOPIC"
            f"{check})",
        )
