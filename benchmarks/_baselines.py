"""Two baseline evaluators to compare mantle_stream's architecture against.

Both decode the same chunks with the same ``msgspec.json.Decoder(Event)`` and
judge with the same per-assertion machines from ``mantle_stream.core.assertions.machines``
(compiled by ``mantle_stream.core.assertions.compiler``), so a difference in the figures is a
difference in *architecture*, not in parsing or matching code:

* :class:`PostHoc` is what existing tools do: keep every event of a
  conversation; when it ends, judge each assertion by scanning the whole
  stored list with a fresh machine. No routing index: each assertion looks at
  every event and skips the ones it cannot react to (a broadcast plus a
  filter, as a loop per check does). Memory grows with the conversation and
  no verdict exists before the end.
* :class:`NaiveLive` is a live evaluator without incremental state: on every
  event it runs the PostHoc judgement again over the history so far (without
  ``finish()``, which only the end of the conversation may call) and reports
  the verdicts that appeared. Its cost per event grows with the length of the
  conversation.

They are given the benefit of the doubt: ``value_json``/``arguments_json``
are parsed once per event, an assertion's scan stops at the event that
decides it, and the relevance filter is two set lookups. They assume a clean
feed (one known payload per event, no legacy rows): error handling is the
engine's business, not the comparison's.

``verdicts(evaluator)`` turns mantle_stream's results into the baselines'
form, so a benchmark can check that all three reach the same verdicts.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

import mantle_stream as ms
from mantle_stream.core.assertions import base as _base
from mantle_stream.core.assertions.compiler import compile_assertion
from mantle_stream.core.events.model import (
    PAYLOAD_TYPES,
    MemoryCleared,
    MemorySet,
    OrderedBlockEvent,
    SkillEvent,
    Skipped,
    ToolExecuted,
    User,
    metadata_field,
    single_payload,
)

__all__ = ["NaiveLive", "PostHoc", "verdicts"]

#: (passed, decided_at or None when the end decided it, reason); None: pending.
Verdict = tuple[bool, "int | None", str]
#: One event as the baselines judge it: (kind, (kind, key), payload, value, seq, turn).
Prepared = tuple[str, tuple[str, Any], Any, Any, int, int]

_ARM = _base.ARM  # a machine asking to be shown the next user event
_parse = msgspec.json.Decoder().decode

#: The attribute an assertion's route key is compared with, per payload kind
#: (the same keys the compiler indexes by; None: routed by kind alone).
_KEY_ATTR: dict[str, str | None] = {
    kind: (
        "tool_name"
        if cls is ToolExecuted
        else "key"
        if cls in (MemorySet, MemoryCleared)
        else "skill_id"
        if issubclass(cls, (SkillEvent, OrderedBlockEvent))
        else None
    )
    for kind, cls in PAYLOAD_TYPES.items()
}


class _Check:
    """One compiled assertion: machine class, shared plan, and what it reacts to."""

    __slots__ = ("cls", "keyed", "plan", "wild")

    def __init__(self, assertion: Any) -> None:
        self.cls, self.plan, routes = compile_assertion(assertion)
        self.wild = frozenset(kind for kind, key in routes if key is None)
        self.keyed = frozenset((kind, key) for kind, key in routes if key is not None)


def _checks(scenario: ms.Scenario) -> list[_Check]:
    return [_Check(a) for a in scenario.assertions]


def prepare(event: ms.Event, position: int, turn: int) -> Prepared | None:
    """Payload, parsed value, route key, seq: what every judge needs of an event.

    ``turn`` is the user turn the conversation is in after this event. None for
    a kind no check reads.
    """
    payload = single_payload(event)
    if payload is None:
        raise ValueError(f"not exactly one payload: {event!r}")
    if type(payload) is Skipped:
        return None
    kind = payload.kind
    value = None
    attr = _KEY_ATTR.get(kind)
    key = None if attr is None else getattr(payload, attr)
    if type(payload) is MemorySet:
        value = _parse(payload.value_json)
    elif type(payload) is ToolExecuted:
        value = (_parse(payload.arguments_json or "{}"), event.metadata)
    elif kind == "bot":
        value = key = metadata_field(event.metadata, "utter_action")
    seq = event.sequence if event.sequence is not None else position
    return kind, (kind, key), payload, value, seq, turn


def _starts_turn(payload: User) -> bool:
    text = "" if payload.text is None else payload.text.strip()
    return bool(text) and not text.startswith("/")


def _turns(event: ms.Event) -> bool:
    """A user message that starts a turn: non-empty stripped text, not a /command."""
    return event.user is not None and _starts_turn(event.user)


def prepare_all(events: list[ms.Event]) -> list[Prepared]:
    history = []
    turn = 0
    for position, event in enumerate(events):
        if _turns(event):
            turn += 1
        prepared = prepare(event, position, turn)
        if prepared is not None:
            history.append(prepared)
    return history


def judge(checks: list[_Check], history: list[Prepared], final: bool) -> list[Verdict | None]:
    """Every assertion over the whole history, each with a fresh machine."""
    out: list[Verdict | None] = []
    for check in checks:
        machine = check.cls(check.plan)
        step = machine.step
        wild, keyed = check.wild, check.keyed
        verdict: Verdict | None = None
        armed = False
        for kind, pair, payload, value, seq, arg in history:
            if armed and kind == "user" and _starts_turn(payload):  # asked to see this one
                armed = False
                outcome = step(payload, None, arg)
                if outcome is not None and outcome is not _ARM:
                    verdict = (outcome[0], seq, outcome[1])
                    break
            if kind in wild or pair in keyed:
                outcome = step(payload, value, arg)
                if outcome is not None:
                    if outcome is _ARM:
                        armed = True
                    else:
                        verdict = (outcome[0], seq, outcome[1])
                        break
        if verdict is None and final:
            passed, reason = machine.finish()
            verdict = (passed, None, reason)
        out.append(verdict)
    return out


class PostHoc:
    """Store each conversation's events; judge them all when it ends."""

    def __init__(self, scenario: ms.Scenario) -> None:
        self._checks = _checks(scenario)
        self._decode = msgspec.json.Decoder(ms.Event).decode_lines
        self._open: dict[str, list[ms.Event]] = {}
        self._done: dict[str, list[Verdict | None]] = {}

    def push_chunk(self, chunk: bytes) -> None:
        stored_by_cid, done = self._open, self._done
        for event in self._decode(chunk):
            cid = event.conversation_id
            if cid in done:
                continue  # late: the conversation was judged already
            stored = stored_by_cid.get(cid)
            if stored is None:
                stored = stored_by_cid[cid] = []
            stored.append(event)
            if event.session_ended is not None:
                self._judge(cid)

    def finish_all(self) -> None:
        for cid in list(self._open):
            self._judge(cid)

    def _judge(self, cid: str) -> None:
        events = self._open.pop(cid)
        self._done[cid] = judge(self._checks, prepare_all(events), final=True)

    def results(self) -> dict[str, list[Verdict | None]]:
        return dict(self._done)


class _Conv:
    __slots__ = ("finished", "history", "turn", "verdicts")

    def __init__(self, size: int) -> None:
        self.history: list[Prepared] = []
        self.turn = 0
        self.verdicts: list[Verdict | None] = [None] * size
        self.finished = False

    def append(self, event: ms.Event) -> None:
        if _turns(event):
            self.turn += 1
        prepared = prepare(event, len(self.history), self.turn)
        if prepared is not None:
            self.history.append(prepared)


class NaiveLive:
    """Live verdicts by re-judging the whole history on every event."""

    def __init__(self, scenario: ms.Scenario) -> None:
        self._checks = _checks(scenario)
        self._decode = msgspec.json.Decoder(ms.Event).decode_lines
        self._convs: dict[str, _Conv] = {}

    def _conv(self, cid: str) -> _Conv:
        conv = self._convs.get(cid)
        if conv is None:
            conv = self._convs[cid] = _Conv(len(self._checks))
        return conv

    def push_chunk(self, chunk: bytes) -> list[tuple[str, int, Verdict]]:
        """Apply a chunk; return the (conversation, index, verdict) that appeared."""
        out: list[tuple[str, int, Verdict]] = []
        checks = self._checks
        for event in self._decode(chunk):
            conv = self._conv(event.conversation_id)
            if conv.finished:
                continue
            conv.append(event)
            ended = event.session_ended is not None
            now = judge(checks, conv.history, final=ended)
            for index, (old, new) in enumerate(zip(conv.verdicts, now, strict=True)):
                if old is None and new is not None:
                    out.append((event.conversation_id, index, new))
            conv.verdicts = now
            if ended:
                conv.finished = True
                conv.history = []
        return out

    def load(self, chunks: Iterable[bytes]) -> None:
        """Append events to the history without judging them.

        Sets up a long conversation in linear time: the state after is what
        judging every event would leave, apart from which verdicts were
        already reported (the next event reports them).
        """
        for chunk in chunks:
            for event in self._decode(chunk):
                conv = self._conv(event.conversation_id)
                conv.append(event)

    def finish_all(self) -> None:
        for conv in self._convs.values():
            if not conv.finished:
                conv.verdicts = judge(self._checks, conv.history, final=True)
                conv.finished = True
                conv.history = []

    def results(self) -> dict[str, list[Verdict | None]]:
        return {cid: list(conv.verdicts) for cid, conv in self._convs.items()}


def verdicts(evaluator: ms.Evaluator) -> dict[str, list[Verdict | None]]:
    """mantle_stream's results in the baselines' form (None for pending)."""
    return {
        r.conversation_id: [
            None if a.verdict == "pending" else (a.verdict == "passed", a.decided_at, a.reason)
            for a in r.assertions
        ]
        for r in evaluator.results()
    }
