"""The command line: ``mantle-stream check | watch | validate | demo``.

The outermost edge: the arguments. What each command does is in
:mod:`mantle_stream.cli.commands`, imported only once the arguments are read,
so ``--help`` and a usage error answer without loading the engine, msgspec,
anyio or rich.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Sequence
from typing import Any, NoReturn

from mantle_stream.cli.options import (
    add_live_options,
    add_output_options,
    add_run_options,
    at_least_one,
    positive,
    seconds,
)
from mantle_stream.core.defaults import DEFAULT_REGEX_TIMEOUT, VERSION

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


_FORMATTER = argparse.RawDescriptionHelpFormatter
_SCENARIOS = "a scenario file, or a directory searched for *.yml / *.yaml"
_SOURCES = (
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

_INTEGRATIONS = (
    "instead of --events: read the agent's integrations.yml and judge the events "
    "where it keeps them (its event_broker for watch, its tracker_store for check, "
    "each falling back to the other): type file (followed) or sql (SQLite, "
    "PostgreSQL); ${VARIABLES} are expanded as Rasa does"
)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="mantle-stream",
        formatter_class=_FORMATTER,
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
    _add_check(sub)
    _add_watch(sub)
    _add_validate(sub)
    _add_demo(sub)
    _add_gate(sub)
    _add_rekey(sub)
    return parser


def _add_check(sub: Any) -> None:
    """``check``: judge a feed, then print a report."""
    check = sub.add_parser(
        "check",
        help="judge an event feed and print a report",
        formatter_class=_FORMATTER,
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
    check.add_argument("scenarios", nargs="+", metavar="SCENARIO", help=_SCENARIOS)
    check.add_argument("--events", metavar="SOURCE", help=_SOURCES, nargs="+", action="extend")
    check.add_argument("--integrations", metavar="PATH", help=_INTEGRATIONS)
    check.add_argument(
        "--format",
        choices=("table", "json"),
        default="table",
        help="report format on standard output (default: table)",
    )
    check.add_argument(
        "--workers",
        type=at_least_one,
        metavar="N",
        help="judge in N processes, each the conversations a stable hash of their id "
        "gives it; the report, JSONL and JUnit hold what one process's do (JSONL lines "
        "grouped by conversation). Default: one per core for files, directories and SQL "
        "stores of 4 MiB or more; one with --fail-fast, --state, --keep-finished and live "
        "sources",
    )
    add_run_options(check)
    add_live_options(check)


def _add_watch(sub: Any) -> None:
    """``watch``: judge a feed in the live view."""
    watch = sub.add_parser(
        "watch",
        help="judge an event feed in a live terminal view",
        formatter_class=_FORMATTER,
        description="Judge conversations while they run, in a live terminal view (one plain "
        "line per verdict when standard output is not a terminal).",
        epilog=_epilog(
            "mantle-stream watch eval/scenarios --events follow:rasa_event.log",
            "mantle-stream watch eval/scenarios --events tcp://127.0.0.1:7400",
        ),
    )
    watch.add_argument("scenarios", nargs="+", metavar="SCENARIO", help=_SCENARIOS)
    watch.add_argument("--events", metavar="SOURCE", help=_SOURCES, nargs="+", action="extend")
    watch.add_argument("--integrations", metavar="PATH", help=_INTEGRATIONS)
    add_run_options(watch)
    add_live_options(watch)


def _add_validate(sub: Any) -> None:
    """``validate``: load scenario files only."""
    validate = sub.add_parser(
        "validate",
        help="load and check scenario files only",
        formatter_class=_FORMATTER,
        description="Load scenario files and report every problem, like a compiler.",
        epilog=_epilog(
            "mantle-stream validate eval/scenarios",
            "mantle-stream validate eval/scenarios/card_replace.yml",
        ),
    )
    validate.add_argument("scenarios", nargs="+", metavar="SCENARIO", help=_SCENARIOS)


def _add_demo(sub: Any) -> None:
    """``demo``: the bundled runs through the gate, into the live view."""
    demo = sub.add_parser(
        "demo",
        help="a built-in simulator streaming into the live view",
        formatter_class=_FORMATTER,
        description="Play the bundled example runs as Rasa's own simulator does, through "
        "`mantle-stream gate` in front of a stand-in agent, into the live view: each run "
        "that fails is ended at its next turn.",
        epilog=_epilog("mantle-stream demo", "mantle-stream demo --speed 5 --junit demo.xml"),
    )
    demo.add_argument(
        "--speed",
        type=positive,
        default=1.0,
        help="pace multiplier: 2 plays twice as fast (default: 1)",
    )
    demo.add_argument(
        "--concurrency",
        type=at_least_one,
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


def _add_gate(sub: Any) -> None:
    """``gate``: the reverse proxy in front of an agent."""
    gate = sub.add_parser(
        "gate",
        help="in front of the agent: stop Rasa's own simulator when a run fails",
        formatter_class=_FORMATTER,
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
    gate.add_argument("scenarios", nargs="+", metavar="SCENARIO", help=_SCENARIOS)
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
    _add_gate_ending(gate)
    add_output_options(gate)


def _add_gate_ending(gate: argparse.ArgumentParser) -> None:
    """How the gate reports, ends and waits."""
    gate.add_argument(
        "--format",
        choices=("live", "json"),
        default="live",
        help="live: the live view on a terminal, else a line per verdict (default); json: "
        "the JSON report on standard output when the gate ends",
    )
    gate.add_argument(
        "--linger",
        type=seconds,
        default=None,
        metavar="SECONDS",
        help="end the gate this long after the last run's tracker was read by the "
        "simulator, once no run is open (default: never: Ctrl-C or SIGTERM end it)",
    )
    gate.add_argument(
        "--ready-timeout",
        type=positive,
        default=10.0,
        metavar="SECONDS",
        help="a run's next message waits at most this long for its last exchange to be "
        "judged, then is forwarded (default: 10)",
    )
    gate.add_argument(
        "--upstream-timeout",
        type=positive,
        default=300.0,
        metavar="SECONDS",
        help="the longest wait for the agent between two pieces of a reply (default: 300)",
    )
    gate.add_argument(
        "--regex-timeout",
        type=positive,
        default=DEFAULT_REGEX_TIMEOUT,
        metavar="SECONDS",
        help=f"time limit of one text_matches search (default: {DEFAULT_REGEX_TIMEOUT})",
    )


def _add_rekey(sub: Any) -> None:
    """``rekey``: a Kafka topic copied to one keyed by conversation id."""
    rekey = sub.add_parser(
        "rekey",
        help="copy a Kafka topic to one keyed by conversation id",
        formatter_class=_FORMATTER,
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
