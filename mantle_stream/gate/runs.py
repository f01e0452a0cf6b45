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
decided at the run's first real user message, when its setup is complete.
A run with one candidate is judged against it by the main evaluator, whose
decisions reach the outputs. A run with several is judged against each in
a *candidate evaluator* of that scenario (decisions kept out of the outputs:
they are provisional) until a results file names its scenario; then its
events so far are applied to the main evaluator and the others forget it.
A run that ends with several candidates is reported with each candidate's
verdict, never as passed or failed.

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
from mantle_stream.core.events.flat import document_lines
from mantle_stream.core.events.model import starts_turn
from mantle_stream.core.live import EventRate, StopRule
from mantle_stream.core.recorded import RecordedRun
from mantle_stream.core.scenario.model import Scenario
from mantle_stream.core.setup import RunSetup, candidates
from mantle_stream.core.verdicts import Decision, StopMessage
from mantle_stream.outputs.report import AmbiguousRun, CandidateVerdict, GateReport, GateScenario

__all__ = ["GateJudge", "Run", "StopPolicy"]

#: ``failed``: a run is stopped once it failed; ``never``: judged and watched only.
StopPolicy = Literal["failed", "never"]
#: The name runs are counted under while their scenario is not known.
UNKNOWN = "(not known)"


class Run:
    """One simulated conversation as the gate has seen it."""

    __slots__ = (
        "applied",
        "candidates",
        "cid",
        "ended",
        "failures",
        "lines",
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
        self.scenario: str | None = None  # judged against it by the main evaluator
        self.candidates: list[str] = []  # several: judged against each, apart
        self.lines: list[bytes] = []  # its events so far, as applied (flat, numbered)
        self.applied = 0  # lines of its tracker applied
        self.failures: dict[str, Decision] = {}  # candidate -> its first failure
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
        make_evaluator: Callable[[Scenario], Evaluator] | None = None,
        on_decisions: Callable[[list[Decision]], object] | None = None,
        on_stop: Callable[[StopMessage], object] | None = None,
        on_problem: Callable[[str, str], object] | None = None,
        upstream: str = "",
        reads_tracker: bool = True,
    ) -> None:
        self.scenarios = list(scenarios)
        self.policy = stop
        self.main = evaluator if evaluator is not None else Evaluator(self.scenarios)
        self._make = make_evaluator or (lambda s: Evaluator(s))
        self._apart: dict[str, Evaluator] = {}  # candidate evaluators, by scenario name
        self._names = {s.name: s for s in self.scenarios} | {
            s.stem: s for s in self.scenarios if not s.path.startswith("<")
        }
        self._stops = StopRule(self.main, when="failed", skip_pending=False)
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
            _, data = document_lines(document, f"tracker of {cid}")
        except EventError as exc:
            self.problem(run, f"its tracker could not be read: {exc.message}")
            return
        lines = data.split(b"\n")[:-1] if data else []
        new = lines[run.applied :]
        run.applied = len(lines)
        run.lines += new
        if run.started:
            if new:
                self._apply(run, new)
        elif final:
            self._choose(run)  # a run that never got to its first turn: all it has
        if final:
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
        if run is None or run.stop is None or run.ended or self.policy == "never":
            return False
        run.turns_not_played += 1
        if not run.stopped:
            run.stopped = True
            message, decision = run.stop
            self.stopped_early.append(cid)
            for evaluator in self._judging(run):
                evaluator.stop(cid, decision)
            if self.on_stop is not None and run.scenario is not None:
                self.on_stop(message)
        return True

    # ------------------------------------------------------------------ the end

    def finish_all(self) -> None:
        """The gate ends: every run still open ends now."""
        for run in self.runs.values():
            if not run.ended:
                if not run.started:
                    self._choose(run)
                self._end(run)
        self._emit(self.main.finish_all())

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
                ambiguous.append(
                    AmbiguousRun(
                        run.cid,
                        [
                            CandidateVerdict(c, self._apart[c].result(run.cid).verdict)
                            for c in run.candidates
                            if c in self._apart
                        ],
                    )
                )
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
        elif self.reads_tracker:
            run.candidates = [s.name for s in found]
            if run.lines:  # its opening, read before its setup was complete
                self._apply(run, run.lines)
        # (With --events, a run of several candidates waits in the main evaluator for
        # the results folder, or its events' metadata, to name its scenario.)

    def _settle_on(self, run: Run, name: str) -> None:
        """The run's scenario is known: judged by the main evaluator from its first event."""
        scenario = self._names.get(name)
        run.scenario = scenario.name if scenario is not None else name
        for candidate in run.candidates:
            if candidate in self._apart:
                self._apart[candidate].forget(run.cid)
        run.candidates, run.failures = [], {}
        self.feed_decisions(self.main.assign(run.cid, run.scenario))
        if run.lines:
            self._apply(run, run.lines, only_main=True)
        if run.stopped and run.stop is not None:
            self.main.stop(run.cid, run.stop[1])
        if run.ended and self.main.is_open(run.cid):
            self._emit(self.main.finish(run.cid))

    def _judging(self, run: Run) -> list[Evaluator]:
        if run.scenario is not None:
            return [self.main]
        return [self._apart[c] for c in run.candidates if c in self._apart]

    def _apart_for(self, name: str) -> Evaluator:
        evaluator = self._apart.get(name)
        if evaluator is None:
            evaluator = self._apart[name] = self._make(self._names[name])
        return evaluator

    def _push(self, evaluator: Evaluator, run: Run, lines: list[bytes]) -> list[Decision]:
        errors: list[EventError] = []
        decisions = evaluator.push_chunk(
            b"\n".join(lines) + b"\n", on_bad=errors.append, source=f"tracker of {run.cid}"
        )
        if errors:
            self.problem(run, f"a bad event: {errors[0]}")
        return decisions

    def _apply(self, run: Run, lines: list[bytes], *, only_main: bool = False) -> None:
        if run.scenario is not None:
            decisions = self._push(self.main, run, lines)
            self._emit(decisions)
            self._note_stops(decisions)
            return
        if only_main or not run.candidates:
            return
        for name in run.candidates:
            for decision in self._push(self._apart_for(name), run, lines):
                if decision.verdict == "failed":
                    run.failures.setdefault(name, decision)
        if run.stop is None and len(run.failures) == len(run.candidates):
            first = run.failures[run.candidates[0]]
            result = self._apart[run.candidates[0]].result(run.cid)
            run.stop = (StopMessage.of(result, first), first)

    def _note_stops(self, decisions: list[Decision]) -> None:
        for message, failure in self._stops.settling(decisions):
            self.run(message.conversation_id).stop = (message, failure)

    def _end(self, run: Run) -> None:
        run.ended = True
        for evaluator in self._judging(run):
            if evaluator.is_open(run.cid):
                decisions = evaluator.finish(run.cid)
                if evaluator is self.main:
                    self._emit(decisions)

    def _emit(self, decisions: list[Decision]) -> None:
        if decisions:
            self.latest.extend(decisions)
            if self.on_decisions is not None:
                self.on_decisions(decisions)
