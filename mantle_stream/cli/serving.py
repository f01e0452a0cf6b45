"""The commands that serve or join: a Kafka group member, the gate, the demo.

Below :mod:`mantle_stream.cli.commands`: each builds its strategy from the
run's configuration (:mod:`mantle_stream.run.kafka`, :mod:`mantle_stream.run.gate`),
draws the live view while it runs and ends with :func:`~mantle_stream.cli.session.finish`.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import time
from typing import TYPE_CHECKING

import anyio
import msgspec
from rich.live import Live

from mantle_stream.cli.config import run_config
from mantle_stream.cli.session import (
    Interrupting,
    RunOutputs,
    closing_console,
    finish,
    load_checked,
    refresh,
)
from mantle_stream.core.engine.evaluator import Evaluator
from mantle_stream.core.errors import CONTROL_ESCAPES, EventError, UsageError
from mantle_stream.core.recorded import RecordedRun, load_results
from mantle_stream.core.urls import redact
from mantle_stream.feeds import open_feed
from mantle_stream.outputs.live import LiveView
from mantle_stream.outputs.report import GroupReport
from mantle_stream.outputs.table import literal
from mantle_stream.run.config import RunConfig
from mantle_stream.run.gate import check_gate, gate_for
from mantle_stream.run.kafka import member_for
from mantle_stream.run.sources import stop_on_signals
from mantle_stream.runner import Runner, RunOutcome

if TYPE_CHECKING:
    from mantle_stream.gate.standin import SimulatedRun
    from mantle_stream.kafka.member import Member

__all__ = ["demo_command", "gate_command", "kafka_command"]


def kafka_command(config: RunConfig, session: RunOutputs) -> int:
    """One member of the consumer group: until stopped (watch) or the end of its
    partitions (check); verdicts and stops also published to their topics."""
    live: Live | None = None
    drawn = 0.0

    def tick() -> None:
        nonlocal drawn
        now = time.monotonic()
        if live is not None and now - drawn >= 1 / 8:
            drawn = now
            session.source = (
                f"kafka {member.spec.topic} · group {member.options.group} · lag {member.lag():,}"
            )
            live.update(LiveView(session.snapshot(member)), refresh=True)

    member = member_for(config, session.evaluator, session.sinks, on_tick=tick)
    check = config.command == "check"
    interrupt = Interrupting(session, member.stop)
    previous = {
        sig: signal.signal(sig, lambda *_: interrupt.stop())
        for sig in (signal.SIGINT, signal.SIGTERM)
    }
    print(f"mantle-stream: joining group `{member.options.group}` on "
          f"{redact(config.sources.events[0])}", file=sys.stderr, flush=True)  # fmt: skip
    outcome = RunOutcome("end-of-input" if check else "ended")
    try:
        if session.live:
            with session.live_view(member) as live:
                member.run()
            live = None
        else:
            member.run()
    except EventError as exc:
        outcome = RunOutcome("bad-event", error=str(exc))
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    outcome = msgspec.structs.replace(outcome, stopped_early=tuple(member.stopped_early))
    fmt = config.outputs.format if check else "live"
    return finish(session, outcome, member, fmt=fmt, group=_group_report(member))


def _group_report(member: Member) -> GroupReport:
    """The report's part on a member of a consumer group."""
    stats = member.stats()
    return GroupReport(
        group=member.options.group,
        topic=member.spec.topic,
        member=stats.member,
        members=member.group_members,
        partitions=stats.partitions,
        lag=stats.lag,
        published=stats.published,
        restored=stats.restored,
        not_resumed=stats.not_resumed,
        join_seconds=stats.join_seconds,
        judge_seconds=stats.judge_seconds,
    )


def demo_command(args: argparse.Namespace) -> int:
    """The bundled runs played as Rasa's simulator plays them, through the gate (or,
    with ``--socket``, streamed to a listener that sends stop messages)."""
    if getattr(args, "socket", False):
        return _demo_socket(args)
    try:
        import httpx  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        print(
            f'mantle-stream: the gate needs {exc.name} (pip install "mantle_stream[gate]"): '
            "playing the socket demo instead",
            file=sys.stderr,
        )
        return _demo_socket(args)
    from mantle_stream.cli.demo import demo_recordings, demo_runs, demo_scenarios
    from mantle_stream.gate.proxy import GateOptions
    from mantle_stream.gate.runs import GateJudge
    from mantle_stream.gate.serve import Gate
    from mantle_stream.gate.standin import StandInAgent, serving, simulate

    scenarios = demo_scenarios()
    recorded = demo_recordings()
    runs = demo_runs(recorded)
    evaluator = Evaluator(scenarios, source="demo")
    session = RunOutputs(run_config(args), evaluator, live=True, source="demo")
    # A user takes a moment to write; the agent's lines come a little apart.
    agent = StandInAgent(recorded, pace=0.1 / args.speed)
    front: list[Gate] = []

    async def go() -> None:
        async with serving(agent) as upstream, anyio.create_task_group() as tasks:
            judge = GateJudge(
                scenarios,
                evaluator=evaluator,
                on_decisions=session.sinks.on_decisions,
                on_stop=session.sinks.on_stop,
                upstream=upstream,
            )
            gate = Gate(judge, GateOptions(upstream=upstream), listen=("127.0.0.1", 0))
            front.append(gate)
            session.source = f"demo: Rasa-style simulator → gate {gate.address} → stand-in agent"

            playing = anyio.CancelScope()

            async def play() -> None:
                with playing:
                    await simulate(gate.address, runs, concurrency=args.concurrency,
                                   think=1.2 / args.speed)  # fmt: skip
                gate.stop()

            def interrupt() -> None:
                # The simulator too: runs it would start next would find the gate closed.
                playing.cancel()
                gate.stop()

            tasks.start_soon(stop_on_signals, Interrupting(session, interrupt))
            tasks.start_soon(play)
            with session.live_view(gate) as view:
                tasks.start_soon(refresh, view, session, gate)
                await gate.run()
            tasks.cancel_scope.cancel()

    try:
        anyio.run(go)
        [gate] = front
        report = gate.judge.report()
        code = finish(session, gate.outcome(), gate, fmt="live", gate=report)
    finally:
        session.close()
    _say_saved(runs, report.turns_not_played)
    return code


def _say_saved(runs: list[SimulatedRun], turns_not_played: int) -> None:
    """The demo's closing line: the runs the gate stopped, and what that saved."""
    stopped = [r.conversation_id for r in runs if r.stopped]
    if stopped:
        closing_console().print(
            literal(
                f"stopped early: {len(stopped)} runs ({', '.join(stopped)}), at the turn after "
                f"each failed: the gate answered {turns_not_played} messages for the "
                f"agent, saving {sum(len(r.messages) - r.turns - 1 for r in runs if r.stopped)}"
                " more user turns the simulator did not have to play"
            )
        )


def _demo_socket(args: argparse.Namespace) -> int:
    from mantle_stream.cli.demo import (
        DemoStats,
        demo_assignments,
        demo_conversations,
        demo_scenarios,
        simulate,
    )

    evaluator = Evaluator(demo_scenarios(), source="demo", assignments=demo_assignments())
    session = RunOutputs(run_config(args), evaluator, live=True, source="demo simulator")
    stats = DemoStats()

    async def go() -> tuple[RunOutcome, Runner]:
        runner = session.runner(fail_fast=args.fail_fast, linger=None)
        async with open_feed("tcp://127.0.0.1:0") as feed:
            assert feed.address is not None
            address = feed.address

            def start(tg: anyio.abc.TaskGroup) -> None:
                async def play() -> None:
                    await simulate(
                        address,
                        demo_conversations(),
                        speed=args.speed,
                        concurrency=args.concurrency,
                        stats=stats,
                    )
                    await anyio.sleep(0.2)  # let the last lines arrive
                    runner.stop(finish=True)

                tg.start_soon(play)

            session.source = f"demo simulator → {address}"
            return await session.run(runner, feed, start), runner

    try:
        outcome, runner = anyio.run(go)
        code = finish(session, outcome, runner, fmt="live")
    finally:
        session.close()
    if stats.stopped:
        closing_console().print(
            literal(
                f"stopped early: {len(stats.stopped)} conversations "
                f"({', '.join(stats.stopped)}), saving {stats.saved_events} events and "
                f"{stats.saved_turns} user turns the simulator did not have to play"
            )
        )
    return code


def _say_unjudged(cid: str, why: str) -> None:
    message = f"mantle-stream: warning: run `{cid}` is forwarded unjudged: {why}"
    print(message.translate(CONTROL_ESCAPES), file=sys.stderr, flush=True)


def _results_so_far(path: str | None) -> dict[str, RecordedRun]:
    """The results folder's runs so far (it may not exist yet, or hold no run yet)."""
    if path is None:
        return {}
    with contextlib.suppress(UsageError):
        return load_results(path)
    return {}


def gate_command(config: RunConfig) -> int:
    """The gate in front of the agent until Ctrl-C, SIGTERM or --linger; then the reports
    as watch writes them, with the gate's part (runs seen, stopped, turns not played)."""
    check_gate(config)
    scenarios = load_checked(config.scenarios)
    recorded = _results_so_far(config.sources.results)
    main = Evaluator(scenarios, source="gate", regex_timeout=config.judging.regex_timeout)
    json = config.outputs.format == "json"
    session = RunOutputs(config, main, live=not json, source="gate", recorded=recorded)
    gate = gate_for(config, scenarios, main, session.sinks, recorded, on_problem=_say_unjudged)
    upstream = redact(config.gate.upstream)
    session.source = f"gate {gate.address} → {upstream}"
    print(gate.address, file=sys.stderr, flush=True)
    print(
        f"mantle-stream: gate listening on {gate.address}, forwarding to {upstream}; "
        f"point `rasa tools run --rasa-server-url` at it",
        file=sys.stderr,
        flush=True,
    )

    async def go() -> None:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(stop_on_signals, gate)
            if session.live:
                with session.live_view(gate) as view:
                    tasks.start_soon(refresh, view, session, gate)
                    await gate.run()
            else:
                await gate.run()
            tasks.cancel_scope.cancel()

    try:
        anyio.run(go)
        report = gate.judge.report()
        code = finish(session, gate.outcome(), gate, fmt=config.outputs.format, gate=report)
    finally:
        session.close()
    if not json:
        closing_console().print(
            literal(
                f"gate: {report.runs} runs, {report.stopped} stopped early, "
                f"{report.turns_not_played} agent turns not played"
                + (
                    f"; {len(report.ambiguous)} ended with several candidate scenarios"
                    if report.ambiguous
                    else ""
                )
            )
        )
    return code
