"""Settling: verdicts recorded, and every assertion decided when a conversation ends.

The evaluator's hot loop routes events to machines; what a machine decides is
recorded here (:meth:`Settling.decide`), and so is everything that ends a
conversation's assertions: the end of its events (:meth:`Settling.settle`), a
stop message sent for it (:meth:`Settling.stop`: what is pending then is
skipped), a turn boundary that armed machines wait for. It counts the failed
decisions (``--fail-fast`` watches them) and the passed and failed
conversations.
"""

from __future__ import annotations

from collections.abc import Sequence

from mantle_stream.core.assertions.base import ARM, UNTOUCHED
from mantle_stream.core.assertions.compiler import Plan
from mantle_stream.core.engine.conversation import Conversation
from mantle_stream.core.errors import CONTROL_ESCAPES
from mantle_stream.core.events.model import Payload
from mantle_stream.core.verdicts import Decision, Tally

__all__ = ["Settling"]


class Settling:
    """Records decisions and settles conversations; counts into ``tally``."""

    __slots__ = ("failures", "tally")

    def __init__(self, tally: Tally) -> None:
        self.tally = tally
        self.failures = 0  # failed decisions so far (what --fail-fast watches)

    def decide(
        self,
        conv: Conversation,
        index: int,
        passed: bool | None,
        decided_at: int | None,
        reason: str,
        out: list[Decision],
    ) -> None:
        """Record a verdict: passed, failed, or (``passed`` None) errored."""
        plan = conv.plan
        assert plan is not None
        if not reason.isprintable():
            reason = reason.translate(CONTROL_ESCAPES)  # a reason is one line, whatever it quotes
        if passed is False:
            conv.failed = True
            self.failures += 1
        decision = Decision(
            conv.cid,
            plan.scenario.name,
            index,
            plan.kinds[index],
            "passed" if passed else "errored" if passed is None else "failed",
            decided_at,
            reason,
            conv.turn,
            plan.file,
            plan.lines[index],
        )
        self.record(conv, decision, out)

    def record(self, conv: Conversation, decision: Decision, out: list[Decision]) -> None:
        """Keep a decision: its machine goes, it is a result and an output."""
        conv.machines[decision.index] = None
        conv.results[decision.index] = decision
        conv.pending -= 1
        self.tally.decisions += 1
        out.append(decision)

    def end_of_turn(
        self, conv: Conversation, payload: Payload, seq: int | None, out: list[Decision]
    ) -> None:
        """A turn-starting user message: the machines that asked to see it see it."""
        armed, conv.armed = conv.armed, []
        for index in armed:
            machine = conv.machines[index]
            if machine is not None:
                outcome = machine.step(payload, None, conv.turn)
                if outcome is not None and outcome is not ARM:
                    self.decide(conv, index, outcome[0], seq, outcome[1], out)

    def took_over(self, decided: Sequence[Decision]) -> None:
        """Decisions made elsewhere (a candidate's evaluator) became this one's."""
        self.tally.decisions += len(decided)
        self.failures += sum(d.verdict == "failed" for d in decided)

    def stop(self, conv: Conversation, settled_by: Decision | None, skip_pending: bool) -> None:
        """A stop message was sent for the judged conversation (see ``Evaluator.stop``)."""
        plan = conv.plan
        if plan is None or conv.finished or conv.stopped is not None:
            return
        conv.stop_skips = skip_pending
        settled = [r for r in conv.results if r is not None]
        failures = [r for r in settled if r.verdict == "failed"]
        if settled_by is not None:
            conv.stopped = settled_by
        elif failures or settled:
            conv.stopped = (failures or settled)[0]
        else:
            conv.stopped = Decision(
                conv.cid,
                plan.scenario.name,
                -1,
                "",
                "pending",
                None,
                "stopped before any assertion was decided",
                conv.turn,
                plan.file,
            )

    def end(self, conv: Conversation, plan: Plan, out: list[Decision]) -> None:
        """The judged conversation ended: skipped (if stopped) or settled, scored, counted."""
        skips = conv.stopped is not None and conv.stop_skips
        if skips:
            self.skip_pending(conv, out)
        self.settle(conv, plan, out)
        if plan.expected_tools is not None:
            scorer = conv.tools or plan.expected_tools.scorer()
            conv.tool_scores = scorer.scores(finished=True, stopped=skips)
            conv.tools = None
        self.ended(conv)

    def ended(self, conv: Conversation) -> None:
        """Count a conversation judged to its end."""
        if conv.failed:
            self.tally.failed += 1
        else:
            self.tally.passed += 1

    def settle(self, conv: Conversation, plan: Plan, out: list[Decision]) -> None:
        """:meth:`decide` for every assertion still open at the end.

        A machine's own ``finish()`` decides a touched assertion; one no event
        ever reached takes the plan's precomputed verdict, with the same
        bookkeeping as ``decide`` done once for all of them: with many
        assertions this loop is most of a conversation's cost, so it does as
        little as it can per assertion.
        """
        verdicts, reasons, kinds = plan.fresh_verdicts, plan.fresh_reasons, plan.kinds
        cid, name, turn, results = conv.cid, plan.scenario.name, conv.turn, conv.results
        file, lines = plan.file, plan.lines
        untouched = 0
        append = out.append
        machines = conv.machines
        for index, machine in enumerate(machines):
            if machine is UNTOUCHED:
                decision = results[index] = Decision(
                    cid,
                    name,
                    index,
                    kinds[index],
                    verdicts[index],
                    None,
                    reasons[index],
                    turn,
                    file,
                    lines[index],
                )
                append(decision)
                untouched += 1
            elif machine is not None:
                passed, reason = machine.finish()
                self.decide(conv, index, passed, None, reason, out)
        if untouched:
            conv.pending -= untouched
            self.tally.decisions += untouched
            failed = sum(machines[i] is UNTOUCHED for i in plan.fresh_failures)
            if failed:
                self.failures += failed
                conv.failed = True
        conv.machines = []

    def skip_pending(self, conv: Conversation, out: list[Decision]) -> None:
        """A stopped conversation ended: what is still pending is skipped."""
        plan = conv.plan
        by = conv.stopped
        assert plan is not None and by is not None
        if by.index < 0:
            reason = "not judged: the conversation was stopped early"
        else:
            at = "" if by.decided_at is None else f" at sequence {by.decided_at}"
            reason = (
                f"not judged: the conversation was stopped early after assertion "
                f"#{by.index} `{by.kind}` {by.verdict}{at}"
            )
        for index, machine in enumerate(conv.machines):
            if machine is not None:
                decision = Decision(
                    conv.cid,
                    plan.scenario.name,
                    index,
                    plan.kinds[index],
                    "skipped",
                    None,
                    reason,
                    conv.turn,
                    plan.file,
                    plan.lines[index],
                )
                self.record(conv, decision, out)
