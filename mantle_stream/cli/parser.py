"""The command line: ``mantle-stream check | watch | validate | demo``.

The outermost edge: the arguments. What each command does is in
:mod:`mantle_stream.cli.commands`, imported only once the arguments are read,
so ``--help`` and a usage error answer without loading the engine, msgspec,
anyio or rich.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable, Sequence

from mantle_stream.core.defaults import (
    DEFAULT_GAP_TIMEOUT,
    DEFAULT_REGEX_TIMEOUT,
    DEFAULT_REORDER_WINDOW,
    VERSION,
)

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")  # bad usage: exit status 2


def _seconds(text: str) -> float | None:
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


def _positive(text: str) -> float:
    return _number(text, float, lambda v: v > 0, "a number > 0")


def _count(text: str) -> int:
    return int(_number(text, int, lambda v: v >= 0, "a whole number >= 0"))


def _at_least_one(text: str) -> int:
    return int(_number(text, int, lambda v: v >= 1, "a whole number >= 1"))


def _add_run_options(p: argparse.ArgumentParser) -> None:
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
    p.add_argument(
        "--fail-fast",
        action="store_true",
        help="stop reading and exit 1 at the first failed assertion",
    )
    p.add_argument(
        "--on-bad-event",
        choices=("fail", "skip"),
        default="fail",
        help="a malformed event: stop with exit 2 after reporting what was judged "
        "(fail, the default), or count it and go on (skip)",
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
        type=_positive,
        default=DEFAULT_GAP_TIMEOUT,
        metavar="SECONDS",
        help="live sources (follow:, tcp://, unix:): give up on a missing "
        "sequence after waiting this long; a file is never timed "
        f"(default: {DEFAULT_GAP_TIMEOUT:g})",
    )
    p.add_argument(
        "--regex-timeout",
        type=_positive,
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
        help="exit 2 when anything was not judged as asked: conversations that "
        "match no scenario, bad or late events, sequence gaps, unknown kinds",
    )
    p.add_argument(
        "--tool-calls",
        action="store_true",
        help="judge tool calls as Rasa does with tool-call evaluation on: a "
        "`gate: true` entry of `goals.expected_tools` that fails fails its "
        "conversation (without it, every entry is a metric only)",
    )
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


def _add_live_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--idle-timeout",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="finish a conversation with no event for this long (default: never)",
    )
    p.add_argument(
        "--linger",
        type=_seconds,
        default=1.0,
        metavar="SECONDS",
        help="live sources: end this long after every conversation ended and "
        "every client left; `never` keeps listening (default: 1)",
    )
    p.add_argument(
        "--state",
        metavar="PATH",
        help="checkpoint every open conversation to PATH (atomically) and resume "
        "from it when restarted; removed when the run completes",
    )
    p.add_argument(
        "--state-interval",
        type=_positive,
        default=1.0,
        metavar="SECONDS",
        help="how often to checkpoint with --state (default: 1)",
    )
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
        type=_at_least_one,
        default=64,
        metavar="N",
        help="sockets: clients connected at once (default: 64)",
    )
    p.add_argument(
        "--connection-idle-timeout",
        type=_positive,
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
        type=_positive,
        metavar="SECONDS",
        help="kafka://: print a line of consumer lag, events/s and partitions this often",
    )
    p.add_argument(
        "--kafka-config",
        action="append",
        metavar="KEY=VALUE",
        help="kafka://: a librdkafka consumer setting, repeatable (session.timeout.ms=10000, say)",
    )
    for topic, default, what in (
        ("verdicts", "mantle_stream.verdicts", "every verdict (key: conversation id)"),
        ("stops", "mantle_stream.stops", "every stop message"),
        ("state", "mantle_stream.state.GROUP.TOPIC", "open conversations' state (compacted)"),
    ):
        p.add_argument(
            f"--{topic}-topic",
            default=None if topic == "state" else default,
            metavar="TOPIC",
            help=f"kafka://: the topic of {what} (default: {default})",
        )


EXIT_CODES = """\
exit status:
  0    every assertion of every conversation passed
  1    an assertion failed
  2    nothing could be judged as asked: a bad scenario file, an unreadable
       source, bad usage, a malformed event (under the default policy), an
       empty feed, or a problem --strict fails for
  130  interrupted with nothing failed so far
  141  standard output was closed by its reader (| head)"""


def _epilog(*examples: str) -> str:
    return "examples:\n" + "\n".join(f"  {e}" for e in examples) + "\n\n" + EXIT_CODES


def _parser() -> argparse.ArgumentParser:
    formatter = argparse.RawDescriptionHelpFormatter
    parser = _Parser(
        prog="mantle-stream",
        formatter_class=formatter,
        description="Judge Mantle scenario assertions while conversations run.",
        epilog=_epilog(
            "mantle-stream demo",
            "mantle-stream check eval/scenarios --events rasa_event.log "
            "--results eval/results/2026-12-01T09-00-00",
            "mantle-stream check eval/scenarios --results eval/results/2026-12-01T09-00-00 "
            "--integrations integrations.yml",
        )
        + "\n\n"
        "`mantle-stream COMMAND --help` describes each command.",
    )
    parser.add_argument("-V", "--version", action="version", version=f"mantle-stream {VERSION}")
    sub = parser.add_subparsers(
        dest="command", required=True, parser_class=_Parser, metavar="COMMAND"
    )
    scenarios = "a scenario file, or a directory searched for *.yml / *.yaml"
    sources = (
        "event source: a file (JSON lines or a tracker document), a directory of them, "
        "- (standard input), follow:PATH (a file still being "
        "written), tcp://HOST:PORT or unix:PATH (listen for simulators), "
        "http://HOST:PORT or https://... (a Rasa server's tracker endpoint: the "
        "conversations of --conversation or --results); several files, "
        "directories or glob patterns (given at once or --events repeated) are read "
        "one after the other as one feed; sqlite:///PATH or "
        "postgresql://USER@HOST/DB (follow: before it keeps polling) reads table "
        "events of a Rasa SQL tracker store or event broker"
    )

    integrations = (
        "instead of --events: read the agent's integrations.yml and judge the events "
        "where it keeps them (its event_broker for watch, its tracker_store for check, "
        "each falling back to the other): type file (followed) or sql (SQLite, "
        "PostgreSQL); ${VARIABLES} are expanded as Rasa does"
    )
    check = sub.add_parser(
        "check",
        help="judge an event feed and print a report",
        formatter_class=formatter,
        description="Judge every conversation of an event feed against scenarios, then "
        "print a report.",
        epilog=_epilog(
            "mantle-stream check eval/scenarios --events rasa_event.log "
            "--results eval/results/2026-12-01T09-00-00",
            "mantle-stream check eval/scenarios --results eval/results/2026-12-01T09-00-00 "
            "--integrations integrations.yml",
            "curl -s localhost:5005/conversations/sim-1/tracker | "
            "mantle-stream check eval/scenarios/card.yml --events - --format json",
        ),
    )
    check.add_argument("scenarios", nargs="+", metavar="SCENARIO", help=scenarios)
    check.add_argument("--events", metavar="SOURCE", help=sources, nargs="+", action="extend")
    check.add_argument("--integrations", metavar="PATH", help=integrations)
    check.add_argument(
        "--format",
        choices=("table", "json"),
        default="table",
        help="report format on standard output (default: table)",
    )
    check.add_argument(
        "--workers",
        type=_at_least_one,
        metavar="N",
        help="judge in N processes, each the conversations a stable hash of their id "
        "gives it; the report, JSONL and JUnit hold what one process's do (JSONL lines "
        "grouped by conversation). Default: one per core for files, directories and SQL "
        "stores of 4 MiB or more; one with --fail-fast, --state, --keep-finished and live "
        "sources",
    )
    _add_run_options(check)
    _add_live_options(check)

    watch = sub.add_parser(
        "watch",
        help="judge an event feed in a live terminal view",
        formatter_class=formatter,
        description="Judge conversations while they run, in a live terminal view (one plain "
        "line per verdict when standard output is not a terminal).",
        epilog=_epilog(
            "mantle-stream watch eval/scenarios --events follow:rasa_event.log",
            "mantle-stream watch eval/scenarios --events tcp://127.0.0.1:7400",
        ),
    )
    watch.add_argument("scenarios", nargs="+", metavar="SCENARIO", help=scenarios)
    watch.add_argument("--events", metavar="SOURCE", help=sources, nargs="+", action="extend")
    watch.add_argument("--integrations", metavar="PATH", help=integrations)
    _add_run_options(watch)
    _add_live_options(watch)

    validate = sub.add_parser(
        "validate",
        help="load and check scenario files only",
        formatter_class=formatter,
        description="Load scenario files and report every problem, like a compiler.",
        epilog=_epilog(
            "mantle-stream validate eval/scenarios",
            "mantle-stream validate eval/scenarios/card_replace.yml",
        ),
    )
    validate.add_argument("scenarios", nargs="+", metavar="SCENARIO", help=scenarios)

    demo = sub.add_parser(
        "demo",
        help="a built-in simulator streaming into the live view",
        formatter_class=formatter,
        description="Play the bundled example conversations over loopback TCP into the live "
        "view, stopping the ones that fail early.",
        epilog=_epilog("mantle-stream demo", "mantle-stream demo --speed 5 --junit demo.xml"),
    )
    demo.add_argument(
        "--speed",
        type=_positive,
        default=1.0,
        help="pace multiplier: 2 plays twice as fast (default: 1)",
    )
    demo.add_argument(
        "--concurrency",
        type=_at_least_one,
        default=5,
        help="conversations running at once (default: 5)",
    )
    demo.add_argument(
        "--jsonl", metavar="PATH", help="append one JSON line per verdict as it is decided"
    )
    demo.add_argument("--junit", metavar="PATH", help="write a JUnit XML report at the end")
    demo.add_argument(
        "--html",
        metavar="PATH",
        help="write a picture of the run at the end: one self-contained HTML file",
    )
    demo.add_argument("--fail-fast", action="store_true", help="stop at the first failed assertion")

    rekey = sub.add_parser(
        "rekey",
        help="copy a Kafka topic to one keyed by conversation id",
        formatter_class=formatter,
        description="Read a Kafka topic Rasa writes without keys (partition_by_sender: false) "
        "and produce each event, keyed by its conversation id, to TOPIC.by_conversation (an "
        "idempotent producer), so a consumer group can judge it on several members.",
        epilog=_epilog(
            "mantle-stream rekey kafka://localhost:9092/rasa_core_events",
            "mantle-stream rekey kafka://broker:9092/rasa_core_events --follow",
        ),
    )
    rekey.add_argument("source", metavar="SOURCE", help="kafka://HOST:PORT/TOPIC to read")
    rekey.add_argument(
        "--to", metavar="TOPIC", help="the keyed topic to write (default: TOPIC.by_conversation)"
    )
    rekey.add_argument(
        "--group",
        default="mantle_stream.rekey",
        help="consumer group that remembers how far it read (default: mantle_stream.rekey)",
    )
    rekey.add_argument(
        "--follow",
        action="store_true",
        help="keep copying what arrives (default: stop at the end of every partition)",
    )
    rekey.add_argument(
        "--kafka-config",
        action="append",
        metavar="KEY=VALUE",
        help="a librdkafka consumer setting, repeatable (session.timeout.ms=10000, say)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from mantle_stream.cli.commands import run  # the engine and the edges: only now

    return run(args)
