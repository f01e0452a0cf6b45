"""The command line: ``mantle-stream check | watch | validate | demo``.

The outermost edge: the arguments. What each command does is in
:mod:`mantle_stream.cli.commands`, imported only once the arguments are read,
so ``--help`` and a usage error answer without loading the engine, msgspec,
anyio or rich.
"""

from __future__ import annotations

import argparse
import difflib
import math
import os
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from mantle_stream.core.defaults import (
    DEFAULT_GAP_TIMEOUT,
    DEFAULT_REGEX_TIMEOUT,
    DEFAULT_REORDER_WINDOW,
    LINGER_UNSET,
    VERSION,
)

__all__ = ["main"]


# Why an option of another command is not one of this one, where there is more to say
# than "it is an option of `check`" (README, "Every core": `watch` is always one process).
_WHY_NOT_HERE = {
    "--workers": "`{command}` always judges in one process",
}


class _Parser(argparse.ArgumentParser):
    """A parser whose usage errors are the line that matters and where to read more.

    argparse would print the whole usage (30 wrapped lines for ``check``) before the
    message; here the message comes first, then ``see: PROG --help``. Long options
    must be written whole: a prefix (``--event`` for ``--events``) would change
    meaning the day an option sharing it is added. Every subcommand is built with
    this class (``parser_class``), so both hold for each of them.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)
        self.siblings: dict[str, argparse.ArgumentParser] = {}  # every command, by name
        self._given: list[str] = []  # the arguments this parser was last asked to read

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self._given = list(args) if args is not None else []
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        # argparse says what is missing before what it does not know: a misspelled
        # `--upstrem` would read as "--upstream is required". The misspelling first.
        unknown = [
            a
            for a in self._given
            if a.startswith("-")
            and a != "-"
            and not a.lstrip("-")[:1].isdigit()
            and a.split("=", 1)[0] not in self._option_string_actions
        ]
        if unknown and message.startswith("the following arguments are required"):
            self.refuse(unknown, self.siblings)
        self.exit(2, f"{self.prog}: error: {message}\nsee: {self.prog} --help\n")

    def usage_line(self) -> str:
        """One line of usage: the command and its positionals, the options left to --help."""
        words = [self.prog]
        for action in self._actions:
            if not action.option_strings and action.nargs != argparse.SUPPRESS:
                name = str(action.metavar or action.dest)
                words.append(f"{name}..." if action.nargs in ("+", "*") else name)
        return "usage: " + " ".join([*words, "[options]"])

    def refuse(self, extras: list[str], siblings: dict[str, argparse.ArgumentParser]) -> NoReturn:
        """Arguments this command does not take: name the first and what was probably meant."""
        option = next((e.split("=", 1)[0] for e in extras if e.startswith("-")), None)
        if option is None:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        command = self.prog.rsplit(" ", 1)[-1]
        owners = [
            name
            for name, parser in siblings.items()
            if parser is not self and option in parser._option_string_actions
        ]
        if owners:
            named = [f"`{o}`" for o in owners]
            them = named[0] if len(named) == 1 else f"{', '.join(named[:-1])} and {named[-1]}"
            message = f"`{option}` is an option of {them}, not of `{command}`"
            why = _WHY_NOT_HERE.get(option)
            if why:
                message += f": {why.format(command=command)}"
        else:
            message = f"unknown option `{option}`"
            close = difflib.get_close_matches(option, list(self._option_string_actions), n=1)
            if close:
                message += f"; did you mean `{close[0]}`?"
        self.exit(
            2, f"{self.prog}: error: {message}\n{self.usage_line()}\nsee: {self.prog} --help\n"
        )


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
    _add_output_options(p)
    _add_judging_options(p)


def _add_output_options(p: argparse.ArgumentParser) -> None:
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
        description="Play the bundled example runs as Rasa's own simulator does, through "
        "`mantle-stream gate` in front of a stand-in agent, into the live view: each run "
        "that fails is ended at its next turn.",
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
    demo.add_argument(
        "--socket",
        action="store_true",
        help="the earlier demo: a simulator streaming events to a tcp:// listener that "
        "sends it stop messages (default: Rasa's protocol, through the gate)",
    )

    gate = sub.add_parser(
        "gate",
        help="in front of the agent: stop Rasa's own simulator when a run fails",
        formatter_class=formatter,
        description="An HTTP reverse proxy in front of the agent, for Rasa's evaluate_agent: "
        "point `rasa tools run --rasa-server-url` at it. Every request is forwarded to "
        "--upstream unchanged and its reply streamed back; each run is judged from the "
        "agent's tracker endpoint after every exchange, and a run that failed gets `[]` "
        "for its next message, which ends it. The reports are written when the gate ends "
        "(Ctrl-C, SIGTERM, or --linger).",
        epilog=_epilog(
            "mantle-stream gate eval/scenarios --upstream http://localhost:5005",
            "rasa tools run --rasa-server-url http://127.0.0.1:5006   # then, elsewhere",
            "mantle-stream gate eval/scenarios --upstream http://localhost:5005 "
            "--results eval/results/2026-12-01T09-00-00 --linger 30 --junit gate.xml",
        ),
    )
    gate.add_argument("scenarios", nargs="+", metavar="SCENARIO", help=scenarios)
    gate.add_argument(
        "--upstream",
        required=True,
        metavar="URL",
        help="the agent's base URL, as evaluate_agent would be given it "
        "(http://localhost:5005, say); the only address the gate ever contacts",
    )
    gate.add_argument(
        "--listen",
        default="127.0.0.1:5006",
        metavar="HOST:PORT",
        help="where the simulator reaches the gate (default: 127.0.0.1:5006; port 0 picks "
        "a free port); the address is printed on standard error",
    )
    gate.add_argument(
        "--stop",
        choices=("failed", "never"),
        default="failed",
        help="failed: answer a failed run's next message with [] so the simulator ends it "
        "(default); never: judge and watch only",
    )
    gate.add_argument(
        "--results",
        metavar="DIR",
        help="the evaluate_agent results folder of this batch (it may not exist yet): a "
        "run file names its run's scenario, when several scenarios are loaded",
    )
    gate.add_argument(
        "--events",
        metavar="SOURCE",
        nargs="+",
        action="extend",
        help="judge from this source instead of the agent's tracker endpoint, for an "
        "agent that streams its events: follow:rasa_event.log (a file broker), "
        "follow:sqlite:///rasa.db, kafka:// is not supported here; the gate then does "
        "not wait for an exchange's events before the next message",
    )
    gate.add_argument(
        "--format",
        choices=("live", "json"),
        default="live",
        help="live: the live view on a terminal, else a line per verdict (default); json: "
        "the JSON report on standard output when the gate ends",
    )
    gate.add_argument(
        "--linger",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="end the gate this long after the last run's tracker was read by the "
        "simulator, once no run is open (default: never: Ctrl-C or SIGTERM end it)",
    )
    gate.add_argument(
        "--ready-timeout",
        type=_positive,
        default=10.0,
        metavar="SECONDS",
        help="a run's next message waits at most this long for its last exchange to be "
        "judged, then is forwarded (default: 10)",
    )
    gate.add_argument(
        "--upstream-timeout",
        type=_positive,
        default=300.0,
        metavar="SECONDS",
        help="the longest wait for the agent between two pieces of a reply (default: 300)",
    )
    gate.add_argument(
        "--regex-timeout",
        type=_positive,
        default=DEFAULT_REGEX_TIMEOUT,
        metavar="SECONDS",
        help=f"time limit of one text_matches search (default: {DEFAULT_REGEX_TIMEOUT})",
    )
    _add_output_options(gate)

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


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Each subcommand's parser by its name."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    commands = _commands(parser)
    for each in commands.values():
        assert isinstance(each, _Parser)
        each.siblings = commands
    # Known arguments first, so that an unknown one is refused by its own command (with
    # that command's options to suggest from), not by the top level with its usage.
    args, extras = parser.parse_known_args(argv)
    if extras:
        command = commands.get(getattr(args, "command", None) or "", parser)
        assert isinstance(command, _Parser)
        command.refuse(extras, commands)
    from mantle_stream.cli.commands import run  # the engine and the edges: only now

    return run(args)
