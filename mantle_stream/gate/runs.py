"""The gate's judging: each run's setup, its scenario, its events, whether to stop it.

Below the proxy (:mod:`mantle_stream.gate.proxy`), which tells a
:class:`GateJudge` what passes through it: a webhook message of a run (its
text and metadata), the slot events posted before the run's first turn, a
tracker document read after an exchange. No HTTP and no clock here: what
the judge decides is data the proxy acts on (answer ``[]`` instead of
forwarding), so the rules are tested without a server.

**Which scenario** (nothing on the wire names it): with one loaded, that
one; else the one ``"scenario"`` in the message metadata or the results
folder names; else the *candidates* of :func:`~mantle_stream.core.setup.candidates`,
decided at the run's first real user message, when its setup is complete,
and handed to the evaluator (:meth:`Evaluator.consider`), which judges a
run of one candidate against it and a run of several against each apart
(provisionally: those decisions reach no output) until a results file
names its scenario (:meth:`Evaluator.assign`). A run that ends with several
candidates is reported with each candidate's verdict, never as passed or
failed.

**Stopping**: a run judged against its scenario is stopped once an
assertion failed (:class:`~mantle_stream.core.live.StopRule`), a run with
several candidates once it failed under every one. The proxy asks
:meth:`GateJudge.stop_now` when the run's next message arrives; the run is
then stopped in its evaluator (pending assertions end ``skipped``) and its
stop message goes to ``on_stop``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from mantle_stream.core.engine.evaluator import Evaluator
from mantle_stream.core.errors import EventError
from mantle_stream.core.events.flat import document_tail
from mantle_stream.core.events.model import starts_turn
from mantle_stream.core.live import EventRate, StopRule
from mantle_stream.core.recorded import RecordedRun
from mantle_stream.core.scenario.model import Scenario
from mantle_stream.core.setup import RunSetup, candidates
from mantle_stream.core.verdicts import Decision, StopMessage
from mantle_stream.outputs.report import AmbiguousRun, GateReport, GateScenario

__all__ = ["GateJudge", "Run", "StopPolicy"]

#: ``failed``: a run is stopped once it failed; ``never``: judged and watched only.
StopPolicy = Literal["failed", "never"]
#: The name runs are counted under while their scenario is not known.
UNKNOWN = "(not known)"


class Run:
    """One simulated conversation as the gate has seen it."""

    __slots__ = (
        "applied",
        "cid",
        "ended",
        "named",
        "problem",
        "scenario",
        "setup",
        "started",
        "stop",
        "stopped",
        "turns_not_played",
    )

    def __init__(self, cid: str) -> None:
        self.cid = cid
        self.setup = RunSetup()
        self.started = False  # a real user message was sent: the setup is complete
        self.named: str | None = None  # the scenario its metadata named
        self.scenario: str | None = None  # the one it is judged against
        self.applied = 0  # lines of its tracker applied
        self.stop: tuple[StopMessage, Decision] | None = None  # to be stopped, with this
        self.stopped = False  # the gate answered a message of it with []
        self.turns_not_played = 0
        self.ended = False  # its tracker was read by the simulator (or the gate ended)
        self.problem: str | None = None  # why judging it failed


class GateJudge:
    """Judges the runs passing through a gate; tells the proxy which to stop."""

    def __init__(
        self,
        scenarios: Sequence[Scenario],
        *,
        stop: StopPolicy = "failed",
        evaluator: Evaluator | None = None,
        on_decisions: Callable[[list[Decision]], object] | None = None,
        on_stop: Callable[[StopMessage], object] | None = None,
        on_problem: Callable[[str, str], object] | None = None,
        upstream: str = "",
        reads_tracker: bool = True,
    ) -> None:
        self.scenarios = list(scenarios)
        self.policy = stop
        self.main = evaluator if evaluator is not None else Evaluator(self.scenarios)
        self._names = {s.name: s for s in self.scenarios} | {
            s.stem: s for s in self.scenarios if not s.path.startswith("<")
        }
        self._stops = StopRule(self.main, when="failed", record=False)
        self.on_decisions = on_decisions
        self.on_stop = on_stop
        self.on_problem = on_problem
        self.upstream = upstream
        # False: the events come from another source (--events) through a runner over
        # the main evaluator (feed_decisions); the tracker is not read.
        self.reads_tracker = reads_tracker
        self.runs: dict[str, Run] = {}
        self._failed_requests = 0
        self._request_failures: list[str] = []  # the first few reasons
        self.recorded: Mapping[str, RecordedRun] = {}
        self.latest: deque[Decision] = deque(maxlen=20)
        self.stopped_early: list[str] = []
        self.rate = EventRate()

    # ------------------------------------------------------------------ what passes

    def run(self, cid: str) -> Run:
        run = self.runs.get(cid)
        if run is None:
            run = self.runs[cid] = Run(cid)
        return run

    def message(self, cid: str, text: Any, metadata: Any) -> Run:
        """A webhook message of run ``cid`` arrived (before it is forwarded)."""
        run = self.run(cid)
        if isinstance(metadata, dict):
            named = metadata.get("scenario")
            if isinstance(named, str) and run.named is None:
                run.named = named
            if not run.started and text == "/session_start":
                run.setup.session_start(metadata)
        if not run.started and isinstance(text, str) and starts_turn(text):
            run.started = True
            self._choose(run)
        return run

    def slots(self, cid: str, events: Any) -> None:
        """A body posted to the run's ``tracker/events`` (before it is forwarded)."""
        run = self.run(cid)
        if not run.started and isinstance(events, list):
            run.setup.slot_events(events)

    def tracker(self, cid: str, document: bytes, *, final: bool = False) -> None:
        """The run's tracker document, read after an exchange; ``final`` when the
        simulator has read it to judge the run (the run is over)."""
        run = self.run(cid)
        try:
            data, run.applied = document_tail(document, run.applied, f"tracker of {cid}")
        except EventError as exc:
            self.problem(run, f"its tracker could not be read: {exc.message}")
            return
        if data:
            self._apply(run, data.split(b"\n")[:-1])
        if final:
            if not run.started:
                self._choose(run)  # a run that never got to its first turn: all it has
            self._end(run)

    def feed_decisions(self, decisions: list[Decision]) -> None:
        """Decisions the main evaluator made on events from another source (--events)."""
        self._emit(decisions)
        self._note_stops(decisions)

    def ended(self, cid: str) -> None:
        """The simulator read the run's tracker: the run is over (with --events, its
        events may still be on their way: the main evaluator ends it at
        ``session_ended`` or when the gate ends)."""
        self.run(cid).ended = True

    def request_failed(self, why: str) -> None:
        """A request the gate could not serve (answered 502, or its reply cut off)."""
        self._failed_requests += 1
        if len(self._request_failures) < 10:
            self._request_failures.append(why)

    def problem(self, run: Run, why: str) -> None:
        """Judging the run failed: it is forwarded unchanged from now on."""
        if run.problem is None:
            run.problem = why
            if self.on_problem is not None:
                self.on_problem(run.cid, why)

    def results_changed(self, recorded: Mapping[str, RecordedRun]) -> None:
        """The results folder has more run files: a run it names is judged against
        that scenario."""
        self.recorded = recorded
        for cid, entry in recorded.items():
            run = self.runs.get(cid)
            if run is not None and run.scenario is None and run.started:
                self._settle_on(run, entry.scenario)

    # ------------------------------------------------------------------ stopping

    def stop_now(self, cid: str) -> bool:
        """The run's next message arrived: True when the gate answers it (``[]``) in
        the agent's place, because the run failed."""
        run = self.runs.get(cid)
        if run is None or run.ended or self.policy == "never":
            return False
        if run.stop is None and run.scenario is None:
            failed = self.main.failed_under_every_candidate(cid)  # several candidates
            if failed is not None:
                result, first = failed
                run.stop = (StopMessage.of(result, first), first)
        if run.stop is None:
            return False
        run.turns_not_played += 1
        if not run.stopped:
            run.stopped = True
            message, decision = run.stop
            self.stopped_early.append(cid)
            self.main.stop(cid, decision)  # (under each candidate, for a run of several)
            if self.on_stop is not None and run.scenario is not None:
                self.on_stop(message)
        return True

    # ------------------------------------------------------------------ the end

    def finish_all(self, *, cut_short: bool = False) -> list[str]:
        """The gate ends: every run still open ends now, and the runs left open are
        returned. ``cut_short`` (Ctrl-C or SIGTERM, not ``--linger``): a run the
        simulator has not finished is left open, its undecided verdicts ``pending``
        (never failed for what it had no time to do, as ``watch`` leaves them)."""
        left = []
        for run in self.runs.values():
            if not run.ended:
                if cut_short:
                    left.append(run.cid)
                    continue
                if not run.started:
                    self._choose(run)
                self._end(run)
        if not cut_short:
            self._emit(self.main.finish_all())
        return left

    def report(self) -> GateReport:
        counts: dict[str, list[int]] = {}
        ambiguous = []
        for run in self.runs.values():
            name = run.scenario or UNKNOWN
            count = counts.setdefault(name, [0, 0, 0])
            count[0] += 1
            count[1] += run.stopped
            count[2] += run.turns_not_played
            if run.scenario is None and run.started:
                ambiguous.append(AmbiguousRun(run.cid, self.main.candidate_verdicts(run.cid)))
        order = {s.name: i for i, s in enumerate(self.scenarios)}
        scenarios = [
            GateScenario(name, *count)
            for name, count in sorted(counts.items(), key=lambda kv: order.get(kv[0], len(order)))
        ]
        return GateReport(
            upstream=self.upstream,
            runs=len(self.runs),
            stopped=sum(r.stopped for r in self.runs.values()),
            turns_not_played=sum(r.turns_not_played for r in self.runs.values()),
            scenarios=scenarios,
            ambiguous=ambiguous,
            problems=[f"{r.cid}: {r.problem}" for r in self.runs.values() if r.problem]
            + (
                [
                    f"{self._failed_requests} requests the gate could not serve: "
                    + "; ".join(self._request_failures)
                ]
                if self._failed_requests
                else []
            ),
        )

    # ------------------------------------------------------------------ the live view

    def events_per_second(self) -> float:
        return self.rate.per_second() or 0.0

    # ------------------------------------------------------------------ inside

    def _choose(self, run: Run) -> None:
        """The run's setup is complete: its scenario, or its candidates."""
        if len(self.scenarios) == 1:
            self._settle_on(run, self.scenarios[0].name)
            return
        entry = self.recorded.get(run.cid)
        named = entry.scenario if entry is not None else run.named
        if named is not None:
            self._settle_on(run, named)
            return
        found = candidates(self.scenarios, run.setup)
        if len(found) == 1:
            self._settle_on(run, found[0].name)
        else:
            self.main.consider(run.cid, [s.name for s in found])

    def _settle_on(self, run: Run, name: str) -> None:
        """The run's scenario is known: judged against it from its first event."""
        scenario = self._names.get(name)
        run.scenario = scenario.name if scenario is not None else name
        self.feed_decisions(self.main.assign(run.cid, run.scenario))
        if run.stopped and run.stop is not None:
            self.main.stop(run.cid, run.stop[1])
        if run.ended and self.main.is_open(run.cid):
            self._emit(self.main.finish(run.cid))

    def _apply(self, run: Run, lines: list[bytes]) -> None:
        errors: list[EventError] = []
        decisions = self.main.push_chunk(
            b"\n".join(lines) + b"\n", on_bad=errors.append, source=f"tracker of {run.cid}"
        )
        if errors:
            self.problem(run, f"a bad event: {errors[0]}")
        self._emit(decisions)
        self._note_stops(decisions)

    def _note_stops(self, decisions: list[Decision]) -> None:
        for message, failure in self._stops.settling(decisions):
            self.run(message.conversation_id).stop = (message, failure)

    def _end(self, run: Run) -> None:
        run.ended = True
        if self.main.is_open(run.cid):
            self._emit(self.main.finish(run.cid))

    def _emit(self, decisions: list[Decision]) -> None:
        if decisions:
            self.latest.extend(decisions)
            if self.on_decisions is not None:
                self.on_decisions(decisions)
