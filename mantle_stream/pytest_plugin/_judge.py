"""Judging the configured sources once: the verdicts the plugin's items show.

The configured scenarios and sources are judged exactly as ``mantle-stream
check`` judges them: the sources opened by :func:`~mantle_stream.feeds.open_feed`
(files and directories read as one feed, or one SQL store or Rasa server),
streamed through a :class:`~mantle_stream.runner.Runner` into one
:class:`~mantle_stream.core.engine.evaluator.Evaluator`. While it runs, the
line of the event that decided each failed or errored assertion is looked up
among the chunks read most recently, so a failure can show it.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import NamedTuple

import anyio
from msgspec.structs import replace

from mantle_stream.core.defaults import DEFAULT_REGEX_TIMEOUT
from mantle_stream.core.engine.evaluator import Evaluator
from mantle_stream.core.errors import CONTROL_ESCAPES, MantleStreamError, UsageError
from mantle_stream.core.recorded import RecordedRun, load_results
from mantle_stream.core.scenario.load import load_scenarios
from mantle_stream.core.scenario.model import Scenario
from mantle_stream.core.verdicts import ConversationResult, Decision, StopMessage
from mantle_stream.feeds import Chunk, Feed, HttpOptions, Replies, open_feed
from mantle_stream.feeds.sql import redact
from mantle_stream.outputs.report import Report, build_report, notes, tools_line
from mantle_stream.runner import Runner, RunOutcome

__all__ = ["Judgement", "Run", "judge", "node_name", "run_names"]

#: How much of the input stays at hand to find deciding events in (the chunks
#: read last): a deciding event is normally in the chunk being judged, or in one
#: shortly before when it waited for a missing earlier sequence.
KEEP_BYTES = 8 << 20


class Run(NamedTuple):
    """A conversation judged by a scenario, under its node name (``run_2`` or its id)."""

    name: str
    result: ConversationResult


@dataclass
class Judgement:
    """Every configured source judged: the runs of each scenario, ready to collect."""

    scenarios: dict[Path, Scenario]  # by resolved file
    runs: dict[str, list[Run]]  # by scenario name, in node order
    events: dict[tuple[str, int], bytes]  # (conversation, index) -> its deciding event's line
    summary: list[str] = field(default_factory=list)  # for the terminal summary


#: Brackets as pytest does not read them: it takes everything from a node id's first
#: ``[`` on as a parametrization, so an id holding one could not be selected again
#: (on the command line, by ``--lf``).
_BRACKETS = str.maketrans({"[": "\\x5b", "]": "\\x5d"})


def node_name(text: str) -> str:
    """``text`` as a part of a node id: one line, no ``::`` (which separates parts)
    and no brackets (which start a parametrization)."""
    return text.translate(CONTROL_ESCAPES).translate(_BRACKETS).replace("::", ":_:") or "_"


def run_names(results: Iterable[ConversationResult], recorded: dict[str, RecordedRun]) -> list[Run]:
    """A scenario's runs in node order: ``run_N`` by the run index of its results
    file (N ascending), then the others by conversation id, each name unique."""
    numbered: list[tuple[int, ConversationResult]] = []
    named: list[ConversationResult] = []
    for result in results:
        run = recorded.get(result.conversation_id)
        if run is not None and run.run_index is not None:
            numbered.append((run.run_index, result))
        else:
            named.append(result)
    twice = {i for i, n in Counter(i for i, _ in numbered).items() if n > 1}
    out: list[Run] = []
    for index, result in sorted(numbered, key=lambda pair: (pair[0], pair[1].conversation_id)):
        if index in twice:  # two results files say run N: their ids tell them apart
            named.append(result)
        else:
            out.append(Run(f"run_{index}", result))
    for result in sorted(named, key=lambda r: r.conversation_id):
        out.append(Run(node_name(result.conversation_id), result))
    seen: Counter[str] = Counter()
    unique = []
    for name, result in out:
        seen[name] += 1
        unique.append(Run(name if seen[name] == 1 else f"{name} ({seen[name]})", result))
    return unique


_SEQUENCE = re.compile(rb'"sequence"\s*:\s*(\d+)')


class RecentLinesFeed:
    """A feed that keeps the chunks it handed out last (about :data:`KEEP_BYTES`),
    to find the line of an event by its conversation and sequence.

    With ``by_line`` it hands each chunk on one line at a time, so that the
    runner stops a conversation right after the event that settled it, as it
    would a simulator's (it acts between chunks): which conversations are
    stopped then never depends on where the feed cut its chunks.
    """

    def __init__(self, feed: Feed, keep: int = KEEP_BYTES, *, by_line: bool = False) -> None:
        self.feed = feed
        self.name = feed.name
        self.live = feed.live
        self.address = feed.address
        self.keep = keep
        self.by_line = by_line
        self._recent: deque[bytes] = deque()
        self._bytes = 0
        self._iterator: AsyncIterator[Chunk] | None = None
        self._pieces: deque[Chunk] = deque()

    @property
    def ordered(self) -> bool:
        return self.feed.ordered  # (a file knows once it is opened)

    @ordered.setter
    def ordered(self, value: bool) -> None:
        self.feed.ordered = value

    @property
    def on_rejected(self) -> Callable[[str, str], object] | None:
        return self.feed.on_rejected

    @on_rejected.setter
    def on_rejected(self, value: Callable[[str, str], object] | None) -> None:
        self.feed.on_rejected = value

    @property
    def on_gone(self) -> Callable[[Replies], object] | None:
        return self.feed.on_gone

    @on_gone.setter
    def on_gone(self, value: Callable[[Replies], object] | None) -> None:
        self.feed.on_gone = value

    @property
    def connections(self) -> int:
        return self.feed.connections

    @property
    def last_activity(self) -> float:
        return self.feed.last_activity

    @property
    def rejected(self) -> dict[str, int]:
        return self.feed.rejected

    @property
    def unread(self) -> dict[str, str]:
        return self.feed.unread

    @property
    def notices(self) -> list[str]:
        return self.feed.notices

    async def __aenter__(self) -> RecentLinesFeed:
        return self  # the feed it wraps is entered (and left) by its opener

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        return None

    def __aiter__(self) -> RecentLinesFeed:
        self._iterator = self.feed.__aiter__()
        return self

    async def __anext__(self) -> Chunk:
        if self._pieces:
            return self._pieces.popleft()
        assert self._iterator is not None
        chunk = await self._iterator.__anext__()
        self._recent.append(chunk.data)
        self._bytes += len(chunk.data)
        while self._bytes > self.keep and len(self._recent) > 1:
            self._bytes -= len(self._recent.popleft())
        if not self.by_line or getattr(chunk, "line_of", None) is not None:
            return chunk
        lines = chunk.data.split(b"\n")
        if lines and not lines[-1]:
            lines.pop()
        if len(lines) < 2:
            return chunk
        for offset, line in enumerate(lines):
            last = offset == len(lines) - 1
            self._pieces.append(
                chunk._replace(
                    data=line + b"\n",
                    first_line=chunk.first_line + offset,
                    ends=chunk.ends if last else None,  # a tracker document ends at its end
                )
            )
        return self._pieces.popleft()

    def find(self, conversation_id: str, sequence: int) -> bytes | None:
        """The line of the event of ``conversation_id`` at ``sequence``, if still at hand."""
        needles = {
            json.dumps(conversation_id).encode(),
            json.dumps(conversation_id, ensure_ascii=False).encode(),
        }
        for data in reversed(self._recent):
            for needle in needles:
                found = _line_in(data, needle, conversation_id, sequence)
                if found is not None:
                    return found
        return None


def _line_in(data: bytes, needle: bytes, conversation_id: str, sequence: int) -> bytes | None:
    start = 0
    while (hit := data.find(needle, start)) >= 0:
        begin = data.rfind(b"\n", 0, hit) + 1
        end = data.find(b"\n", hit)
        end = len(data) if end < 0 else end
        line = data[begin:end]
        if any(int(m) == sequence for m in _SEQUENCE.findall(line)):
            try:
                row = json.loads(line)
            except ValueError:
                row = None
            if (
                isinstance(row, dict)
                and row.get("sequence") == sequence
                and conversation_id in (row.get("conversation_id"), row.get("sender_id"))
            ):
                return line.strip()
        start = end + 1
    return None


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def judge(
    scenario_paths: Iterable[str],
    sources: Iterable[str],
    *,
    results: str | None = None,
    stop_early: bool = False,
    regex_timeout: float | None = None,
    shown: str | None = None,
    tool_calls: bool = False,
) -> Judgement:
    """Judge every conversation of ``sources`` against the scenarios, once.

    Raises :class:`~mantle_stream.MantleStreamError` for what ``check`` would
    stop at: a scenario file with problems, a source it cannot read, a bad
    event (a run needs every event judged), a feed with no conversation.
    ``shown`` names the sources in messages (by default the first, redacted).
    ``tool_calls``: failed gate entries of expected_tools fail their conversation.
    """
    started = time.perf_counter()
    sources = list(sources)
    scenarios = load_scenarios(list(scenario_paths))
    recorded = load_results(results) if results else {}
    if shown is None:
        shown = redact(sources[0]) if len(sources) == 1 else f"{len(sources)} sources"
    evaluator = Evaluator(
        scenarios,
        source=shown,
        assignments={cid: run.scenario for cid, run in recorded.items()},
        regex_timeout=DEFAULT_REGEX_TIMEOUT if regex_timeout is None else regex_timeout,
    )
    outcome, read = _read(evaluator, sources, recorded, stop_early=stop_early)
    if outcome.ending == "bad-event":
        raise MantleStreamError(
            f"{outcome.error}\nmantle_stream: stopped at the bad event: a pytest run "
            "judges every event (`mantle-stream check --on-bad-event=skip` shows the rest)"
        )
    report = build_report(evaluator, recorded, source=read.notices, tool_calls=tool_calls)
    if not report.conversations and not report.unmatched:
        raise MantleStreamError(f"the events of {shown} hold no conversation to judge")
    by_name: dict[str, list[ConversationResult]] = {s.name: [] for s in scenarios}
    for result in evaluator.results():
        if result.scenario in by_name:
            by_name[result.scenario].append(result)
    runs = {name: run_names(results, recorded) for name, results in by_name.items()}
    seconds = time.perf_counter() - started
    events = f"{_count(evaluator.statistics().events, 'event')} of {shown}"
    return Judgement(
        scenarios={Path(s.path).resolve(): s for s in scenarios},
        runs=runs,
        events=read.deciding,
        summary=_summary(report, scenarios, runs, read.missing, f"({events}) in {seconds:.2f} s"),
    )


def _summary(
    report: Report,
    scenarios: list[Scenario],
    runs: dict[str, list[Run]],
    missing: list[str],
    read: str,
) -> list[str]:
    """The terminal summary's lines: what was judged (``read``: which events, how fast),
    the scenarios that judged none, the expected_tools line, the conversations the
    source could not give (``missing``) and the report's notes."""
    summary = report.summary
    counts = [
        _count(summary.assertions, "assertion"),
        f"{_count(summary.failed, 'conversation')} failed",
    ]
    if summary.skipped:
        counts.append(f"{_count(summary.skipped, 'assertion')} skipped")
    if summary.errored:
        counts.append(f"{_count(summary.errored, 'assertion')} errored")
    lines = [f"judged {_count(summary.conversations, 'conversation')} {read}: " + ", ".join(counts)]
    lines += [
        f"scenario `{s.name}` ({os.path.basename(s.path)}) judged no conversation"
        for s in scenarios
        if not runs[s.name]
    ]
    if report.expected_tools is not None:
        lines.append(tools_line(report.expected_tools, "--mantle-tool-calls"))
    lines += [line.translate(CONTROL_ESCAPES) for line in missing]
    # Errored assertions are errors of their items: not a note pointing at check's digest.
    lines += notes(replace(report, summary=replace(summary, errored=0)))
    return lines


@dataclass
class _Read:
    """What reading the sources gave beside the evaluator's verdicts."""

    deciding: dict[tuple[str, int], bytes] = field(default_factory=dict)  # as Judgement.events
    missing: list[str] = field(default_factory=list)  # conversations the source could not give
    notices: list[str] = field(default_factory=list)  # what the source said (Feed.notices)


def _read(
    evaluator: Evaluator,
    sources: list[str],
    recorded: dict[str, RecordedRun],
    *,
    stop_early: bool,
) -> tuple[RunOutcome, _Read]:
    """Stream ``sources`` through a runner into ``evaluator``, keeping the line of the
    event that decided each failed or errored assertion."""
    read = _Read()

    def on_missing(conversation_id: str, reason: str) -> None:
        read.missing.append(f"skipped conversation `{conversation_id}`: {reason}")

    def ignore(message: StopMessage) -> None:
        return None

    async def go() -> RunOutcome:
        try:
            opened = open_feed(
                sources,
                http=HttpOptions(
                    conversations=tuple(recorded),
                    token=os.environ.get("RASA_TOKEN") or None,
                    jwt=os.environ.get("RASA_JWT") or None,
                    on_missing=on_missing,
                ),
            )
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        async with opened as feed:
            remembering = RecentLinesFeed(feed, by_line=stop_early)

            def on_decisions(decisions: list[Decision]) -> None:
                for d in decisions:
                    if d.verdict in ("failed", "errored") and d.decided_at is not None:
                        line = remembering.find(d.conversation_id, d.decided_at)
                        if line is not None:
                            read.deciding[(d.conversation_id, d.index)] = line

            runner = Runner(
                evaluator,
                on_decisions=on_decisions,
                # A stopped conversation's stop message has no simulator to go to.
                on_stop=ignore if stop_early else None,
                stop_unconnected=stop_early,
            )
            try:
                return await runner.run(remembering)
            finally:
                read.notices[:] = feed.notices  # (a writer's lock waited for, rows not read)

    return anyio.run(go), read
