"""The command line: ``mantle-stream check | watch | validate | demo``.

The outermost edge. Parses arguments, loads scenarios, drives an evaluator
from a source, prints the report and maps outcomes to the exit codes of
``cli.md``: 0 all passed, 1 an assertion failed, 2 nothing could be judged
as asked. User errors print a message, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import IO

from mantle_stream import __version__
from mantle_stream._engine import Evaluator
from mantle_stream._errors import MantleStreamError, ScenarioError, UsageError
from mantle_stream._outputs import JsonlWriter
from mantle_stream._report import EXIT_ERROR, EXIT_FAILED, build_report, exit_status
from mantle_stream._scenario import Scenario, load_scenarios
from mantle_stream._sources import read_chunks

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="mantle-stream",
                     description="Judge Mantle scenario assertions while conversations run.")
    parser.add_argument("--version", action="version", version=f"mantle-stream {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    check = sub.add_parser("check", help="judge an event feed against scenarios")
    check.add_argument("scenarios", nargs="+", metavar="SCENARIO",
                       help="scenario file or directory of *.yml / *.yaml")
    check.add_argument("--events", required=True, metavar="SOURCE",
                       help="event source: a file, - for standard input")
    check.add_argument("--format", choices=("table", "json"), default="table",
                       help="report format on standard output (default: table)")
    check.add_argument("--jsonl", metavar="PATH",
                       help="append one JSON line per verdict as it is decided")
    check.add_argument("--fail-fast", action="store_true",
                       help="stop reading and exit 1 at the first failed assertion")

    validate = sub.add_parser("validate", help="load and check scenario files only")
    validate.add_argument("scenarios", nargs="+", metavar="SCENARIO")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "validate":
            return _validate(args.scenarios)
        if args.command == "check":
            return _check(args)
    except ScenarioError as exc:
        _print_diagnostics(exc)
        return EXIT_ERROR
    except MantleStreamError as exc:
        print(f"mantle-stream: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("mantle-stream: interrupted", file=sys.stderr)
        return 130
    raise UsageError(f"unknown command {args.command}")  # pragma: no cover - argparse guards


def _print_diagnostics(exc: ScenarioError) -> None:
    for diagnostic in exc.diagnostics:
        print(diagnostic.render(), file=sys.stderr)
    files = len({d.path for d in exc.diagnostics})
    count = len(exc.diagnostics)
    print(f"{count} error{'s' if count != 1 else ''} in {files} file{'s' if files != 1 else ''}",
          file=sys.stderr)


def _validate(paths: list[str]) -> int:
    scenarios = load_scenarios(paths)
    for s in scenarios:
        n = len(s.assertions)
        print(f"{s.path}: ok: `{s.name}`, {n} assertion{'s' if n != 1 else ''}")
    return 0


def _load(paths: list[str]) -> list[Scenario]:
    scenarios = load_scenarios(paths)
    names: dict[str, str] = {}
    for s in scenarios:
        if s.name in names and len(scenarios) > 1:
            raise UsageError(f"two scenarios are named `{s.name}`: {names[s.name]} and {s.path}; "
                             "metadata.scenario could not tell them apart")
        names[s.name] = s.path
    return scenarios


def _check(args: argparse.Namespace) -> int:
    scenarios = _load(args.scenarios)
    evaluator = Evaluator(scenarios, source="<stdin>" if args.events == "-" else args.events)
    jsonl: JsonlWriter | None = JsonlWriter.open(args.jsonl) if args.jsonl else None
    stopped_early = False
    try:
        for chunk in read_chunks(args.events):
            decisions = evaluator.push_chunk(chunk, stop_at_failure=args.fail_fast)
            if jsonl is not None and decisions:
                jsonl.write(decisions)
            if args.fail_fast and any(d.verdict == "failed" for d in decisions):
                stopped_early = True
                break
        if not stopped_early:
            decisions = evaluator.finish_all()
            if jsonl is not None:
                jsonl.write(decisions)
    finally:
        if jsonl is not None:
            jsonl.close()
    report = build_report(evaluator)
    _emit(report, args.format, sys.stdout)
    for u in report.unmatched:
        what = f"names scenario `{u.scenario}`, which is not loaded" if u.scenario else \
            "names no scenario in metadata.scenario"
        print(f"mantle-stream: warning: conversation `{u.conversation_id}` {what}; not judged",
              file=sys.stderr)
    if stopped_early:
        return EXIT_FAILED
    if not report.conversations:
        print("mantle-stream: error: the feed held no conversation to judge", file=sys.stderr)
    return exit_status(report)


def _emit(report: object, fmt: str, out: IO[str]) -> None:
    from mantle_stream._report import Report

    assert isinstance(report, Report)
    if fmt == "json":
        out.write(report.to_json().decode() + "\n")
        out.flush()
        return
    from rich.console import Console

    from mantle_stream._table import ReportTable

    Console(file=out, highlight=False).print(ReportTable(report))
