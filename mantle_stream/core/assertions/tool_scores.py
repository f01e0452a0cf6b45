"""Judging ``goals.expected_tools`` while a conversation runs: Rasa's tool-call scores.

Beside the assertion machines, not among them: an entry is no assertion (it
does not fail a conversation unless it is a gate and ``--tool-calls`` is on,
which the report decides), so its verdicts are kept apart, in
:class:`~mantle_stream.core.verdicts.ToolCallScores`. The compiler builds one
:class:`ToolsPlan` per scenario that has entries; the engine gives each
conversation's tool runs (and, when asked, the user message that ends a turn)
to that conversation's :class:`ToolScorer`.

The rules (docs/semantics.md, "Expected tools"):

* the observed calls are the tool runs, except framework tools other than
  ``search_knowledge`` and ``cannot_help`` (:data:`~.tools.FRAMEWORK_TOOLS`);
  turns are the assertions' turns;
* a call *matches* an expected tool when the name is equal, it did not error
  and every listed argument is equal (:func:`~mantle_stream.core.values.strict_equal`);
  it *is a retry of* one when it errored and would otherwise match;
* a standalone ``tool_called`` passes at the first matching call;
* a ``tool_group`` passes on the first turn where each expected tool matches a
  distinct call (a maximum matching) and no other call is left, errored
  retries of an expected tool aside; ``ordered: true``: the matches come in the
  listed order, a retry of the tool expected next skipped, a call that matches
  a later expected tool first failing the turn. It passes when that turn ends
  (the next user message, or the end);
* everything else is decided at the end, with recall and precision as Rasa
  computes them: a group's from its first perfect turn, else from the turn
  that matched the most expected tools (the earliest of equals), among turns
  with calls; a standalone entry's recall is 1 or 0 and its precision the
  matching calls over every call of the conversation.

State per conversation is bounded by the scenario's entries: counters, a
cursor or a matching (one call-mask per expected tool) for the current turn,
and the best turn so far as four numbers and a name.
"""

from __future__ import annotations

from typing import Any

from mantle_stream.core.assertions.tools import FRAMEWORK_TOOLS, augment
from mantle_stream.core.events.model import ToolExecuted
from mantle_stream.core.scenario.model import ExpectedTool, Scenario, ToolGroup
from mantle_stream.core.values import strict_equal
from mantle_stream.core.verdicts import ToolCallScores, ToolEntryResult, Verdict

__all__ = ["ToolScorer", "ToolsPlan"]

#: The masks of a call no entry names (shared: never written to).
_NO_MASKS: dict[int, int] = {}


class _Expected:
    """One expected tool: what a call with its name must also carry."""

    __slots__ = ("arguments", "tool_name")

    def __init__(self, tool: ExpectedTool) -> None:
        self.tool_name = tool.tool_name
        self.arguments = tuple((tool.arguments or {}).items())

    def identifies(self, arguments: dict[str, Any]) -> bool:
        """The call (of this name) has every listed argument, equal: a match unless it
        errored."""
        for key, expected in self.arguments:
            if key not in arguments or not strict_equal(arguments[key], expected):
                return False
        return True


def _names(tools: tuple[ExpectedTool, ...]) -> str:
    return ", ".join(f"`{t.tool_name}`" for t in tools)


class ToolsPlan:
    """A scenario's ``expected_tools``, compiled: shared by all its conversations."""

    __slots__ = ("by_name", "entries", "file", "groups", "lines", "ordered", "sizes", "standalone")

    def __init__(self, scenario: Scenario) -> None:
        self.entries = scenario.expected_tools
        self.file: str | None = (
            scenario.path
            if scenario.expected_tools_lines and not scenario.path.startswith("<")
            else None
        )
        self.lines: tuple[int | None, ...] = tuple(scenario.expected_tools_lines) + (None,) * (
            len(self.entries) - len(scenario.expected_tools_lines)
        )
        # Routing: a call's name -> (entry, bit of the expected tool in the entry, tool).
        by_name: dict[str, list[tuple[int, int, _Expected]]] = {}
        groups: list[int] = []
        standalone: list[int] = []
        sizes: list[int] = []
        for index, entry in enumerate(self.entries):
            tools = entry.tools if isinstance(entry, ToolGroup) else (entry.tool,)
            (groups if isinstance(entry, ToolGroup) else standalone).append(index)
            sizes.append(len(tools))
            for position, tool in enumerate(tools):
                by_name.setdefault(tool.tool_name, []).append(
                    (index, 1 << position, _Expected(tool))
                )
        self.by_name = {name: tuple(hits) for name, hits in by_name.items()}
        self.ordered = tuple(isinstance(e, ToolGroup) and e.ordered for e in self.entries)
        self.groups = tuple(groups)
        self.standalone = tuple(standalone)
        self.sizes = tuple(sizes)

    def scorer(self) -> ToolScorer:
        return ToolScorer(self)


class _Call:
    """A standalone entry's state: matching calls, the first one, what came close."""

    __slots__ = ("errored", "first_seq", "first_turn", "matches", "named")

    def __init__(self) -> None:
        self.matches = 0
        self.first_turn: int | None = None
        self.first_seq: int | None = None
        self.named = False  # a call of the name ran (its arguments differed, or it errored)
        self.errored = False  # a call that would have matched errored

    def state(self) -> list[Any]:
        return [self.matches, self.first_turn, self.first_seq, self.named, self.errored]

    def restore(self, state: list[Any]) -> None:
        self.matches, self.first_turn, self.first_seq, self.named, self.errored = state


class _Group:
    """A group's state: the current turn (calls, matches, why it is not perfect), the
    turn it passed on, and the best turn so far.

    ``matched`` is the ordered cursor (expected tools matched in order), or for an
    unordered group the size of the maximum matching kept in ``slots`` (the
    call-mask of the call assigned to each expected tool, see :func:`~.tools.augment`).
    """

    __slots__ = (
        "best",
        "extra",
        "failed",
        "matched",
        "n",
        "ok",
        "passed",
        "size",
        "slots",
        "turn",
    )

    def __init__(self, size: int) -> None:
        self.size = size
        self.turn = 0
        self.n = 0  # calls in this turn
        self.ok = 0  # ... that did not error
        self.matched = 0
        self.slots: list[int] | None = None
        self.extra: str | None = None  # the first call of this turn no expected tool took
        self.failed: str | None = None  # ordered: the call that came before its turn
        self.passed: tuple[int, int | None, int] | None = None  # (turn, decided_at, calls)
        self.best: tuple[int, int, int, str | None, str | None] | None = None

    def perfect(self) -> bool:
        size = self.size
        return (
            self.matched == size
            and self.failed is None
            and self.extra is None
            and (self.slots is None or self.ok == size)
        )

    def add_unordered(self, mask: int, errored: bool, name: str) -> None:
        self.n += 1
        if errored:
            if not mask and self.extra is None:  # a retry of an expected tool is no extra
                self.extra = name
            return
        self.ok += 1
        if self.slots is None:
            self.slots = [0] * self.size
        if mask and augment(self.slots, mask, 0) == -1:
            self.matched += 1
        elif self.extra is None:
            self.extra = name

    def add_ordered(self, mask: int, errored: bool, name: str) -> None:
        self.n += 1
        if self.failed is not None:
            return  # Rasa's scan of the turn stopped there
        cursor = self.matched
        if cursor < self.size:
            if mask >> cursor & 1:
                if not errored:
                    self.matched += 1
                return  # (errored: a retry of the tool expected next, skipped)
            if not errored and mask >> cursor:
                self.failed = name  # it matches a tool expected later: out of order
                return
        if self.extra is None:
            self.extra = name

    def close(self, decided_at: int | None) -> bool:
        """The turn ended: the group passed on it, or it is remembered if it came closest.
        True when it passed."""
        if self.n == 0:
            return False
        passed = self.passed is None and self.perfect()
        if passed:
            self.passed = (self.turn, decided_at, self.n)
        elif self.passed is None and (self.best is None or self.matched > self.best[0]):
            self.best = (self.matched, self.n, self.turn, self.failed, self.extra)
        self.n = self.ok = self.matched = 0
        self.slots = None
        self.extra = self.failed = None
        return passed

    def state(self) -> list[Any]:
        return [
            self.turn,
            self.n,
            self.ok,
            self.matched,
            self.slots,
            self.extra,
            self.failed,
            None if self.passed is None else list(self.passed),
            None if self.best is None else list(self.best),
        ]

    def restore(self, state: list[Any]) -> None:
        (self.turn, self.n, self.ok, self.matched, slots, self.extra, self.failed) = state[:7]
        self.slots = None if slots is None else list(slots)
        passed, best = state[7:]
        self.passed = None if passed is None else (passed[0], passed[1], passed[2])
        self.best = None if best is None else (best[0], best[1], best[2], best[3], best[4])


class ToolScorer:
    """One conversation's ``expected_tools``: fed its tool runs, asked for scores.

    ``armed``: some group's current turn is perfect, so the engine shows this
    scorer the user message that ends the turn (:meth:`end_turn`), as a tool
    window's ``ARM`` does.
    """

    __slots__ = ("armed", "calls", "groups", "plan", "states", "turn")

    def __init__(self, plan: ToolsPlan) -> None:
        self.plan = plan
        self.calls = 0  # observed calls in the conversation
        self.turn = 0
        self.armed = False
        groups = set(plan.groups)
        self.states: list[_Call | _Group] = [
            _Group(size) if i in groups else _Call() for i, size in enumerate(plan.sizes)
        ]
        # The groups' states again, with their entry and whether each is ordered.
        self.groups = [
            (state, i, plan.ordered[i])
            for i, state in enumerate(self.states)
            if isinstance(state, _Group)
        ]

    def step(
        self, run: ToolExecuted, arguments: dict[str, Any], turn: int, seq: int | None
    ) -> None:
        """One tool run (``arguments`` parsed) in user turn ``turn``."""
        name = run.tool_name
        if name in FRAMEWORK_TOOLS:  # by name, whatever the source
            return
        self.calls += 1
        plan = self.plan
        errored = bool(run.is_error)
        masks = _NO_MASKS
        hits = plan.by_name.get(name)
        if hits is not None:  # only entries that name the tool look at the call
            masks = {}
            states = self.states
            for index, bit, expected in hits:
                state = states[index]
                if type(state) is _Call:
                    state.named = True
                if expected.identifies(arguments):
                    masks[index] = masks.get(index, 0) | bit
                    if type(state) is _Call:
                        if errored:
                            state.errored = True
                        else:
                            state.matches += 1
                            if state.first_turn is None:
                                state.first_turn, state.first_seq = turn, seq
        groups = self.groups
        if not groups:
            return
        if turn != self.turn:  # turns without calls are never seen: closed lazily
            for group, _, _ in groups:
                group.close(None)
                group.turn = turn
            self.turn = turn
        # Every group counts every call (its precision, its extras); the usual call,
        # of a tool the group does not expect, is an extra, inline: no method call.
        armed = False
        for group, index, ordered in groups:
            if group.passed is not None:
                continue
            mask = masks.get(index, 0)
            if not mask:
                group.n += 1
                if not errored:
                    group.ok += 1
                if group.extra is None and group.failed is None:
                    group.extra = name
                continue
            if ordered:
                group.add_ordered(mask, errored, name)
            else:
                group.add_unordered(mask, errored, name)
            if not armed and group.extra is None and group.perfect():
                armed = True
        self.armed = armed

    def end_turn(self, seq: int | None) -> None:
        """A user message ended the turn a group is perfect in: it passes there."""
        for group, _, _ in self.groups:
            if group.passed is None and group.perfect():
                group.close(seq)
        self.armed = False

    def scores(self, *, finished: bool, stopped: bool = False) -> ToolCallScores:
        """The entries' verdicts and metrics: final once ``finished`` (call once, at the
        end: it closes the last turn); before, what has passed and nothing else.

        ``stopped``: mantle_stream stopped the conversation early; an entry that
        has not passed is ``skipped``, not failed.
        """
        plan = self.plan
        if finished:
            for group, _, _ in self.groups:
                group.close(None)
            self.armed = False
        entries = []
        for index, state in enumerate(self.states):
            entry = plan.entries[index]
            verdict: Verdict
            recall: float | None
            precision: float | None
            turn: int | None
            if isinstance(state, _Call):
                passed = state.first_turn is not None
                turn, decided_at = state.first_turn, state.first_seq
                recall = 1.0 if passed else 0.0
                precision = state.matches / self.calls if self.calls else None
                reason = self._call_reason(index, state)
            else:
                size = state.size
                if state.passed is not None:
                    passed = True
                    turn, decided_at, calls = state.passed
                    recall, precision = 1.0, size / calls
                elif state.best is not None:
                    passed = False
                    matched, calls, turn, _, _ = state.best
                    decided_at = None
                    recall, precision = matched / size, matched / calls
                else:
                    passed, turn, decided_at, recall, precision = False, None, None, 0.0, None
                reason = self._group_reason(index, state)
            if passed:
                verdict = "passed"
            elif not finished:
                verdict = "pending"
            elif stopped:
                verdict = "skipped"
                reason = "not judged: the conversation was stopped early; " + reason
            else:
                verdict = "failed"
            if not finished:
                recall = precision = None
                if not passed:
                    turn = None
                    reason = ""
            entries.append(
                ToolEntryResult(
                    index,
                    entry.kind,
                    verdict,
                    entry.gate,
                    turn,
                    decided_at,
                    reason,
                    recall,
                    precision,
                    plan.file,
                    plan.lines[index],
                )
            )
        if not finished:
            return ToolCallScores(tuple(entries))
        return ToolCallScores(
            tuple(entries),
            _mean([e.recall for e in entries]),
            _mean([e.precision for e in entries]),
            _mean([float(e.verdict == "passed") for e in entries if e.verdict != "skipped"]),
        )

    def _call_reason(self, index: int, state: _Call) -> str:
        tool = self.plan.entries[index].tool  # type: ignore[union-attr]
        name = f"`{tool.tool_name}`"
        if state.first_turn is not None:
            return f"{name} ran in turn {state.first_turn}"
        if state.errored:
            return f"{name} ran but failed (is_error) every time"
        if state.named and tool.arguments:
            return f"{name} never ran with the listed arguments"
        return f"{name} never ran"

    def _group_reason(self, index: int, group: _Group) -> str:
        entry: ToolGroup = self.plan.entries[index]  # type: ignore[assignment]
        names = _names(entry.tools)
        order = " in order" if entry.ordered else ""
        if group.passed is not None:
            return f"{names} ran{order} in turn {group.passed[0]} with no other calls"
        text = f"no turn ran {names}{order} and no other calls"
        if group.best is None:
            return text + "; no tool ran"
        matched, _, turn, failed, extra = group.best
        text += f"; turn {turn} matched {matched} of {group.size}"
        if failed is not None:
            return text + f": `{failed}` ran before its turn in the listed order"
        if extra is not None and matched == group.size:
            return text + f", but had an extra call `{extra}`"
        return text

    def state(self) -> list[Any]:
        return [self.calls, self.turn, self.armed, [s.state() for s in self.states]]

    def restore(self, state: list[Any]) -> None:
        self.calls, self.turn, self.armed, states = state
        for mine, saved in zip(self.states, states, strict=True):
            mine.restore(saved)


def _mean(values: list[float | None]) -> float | None:
    """Rasa's conversation mean: over the entries that have the metric."""
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None
