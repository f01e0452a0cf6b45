"""Shared builder and driver for the assertion behaviour tests (``test_assertions_*.py``).

The behaviour tests describe a conversation as a list of :class:`Ev` (one
tracker event each, built by the small factories below) and mark the event
that must decide the assertion with :func:`D`. :func:`judge` turns the list
into ProtoJSON wire lines (docs/scenarios.md "Event format": envelope + exactly one payload key,
``value_json``/``arguments_json`` as JSON strings), pushes them one by one
through the public API (``mantle_stream.Evaluator.push_line``), finishes the
conversation and returns what the engine decided.

While driving, :func:`judge` checks the invariants every test relies on
(``docs/semantics.md``, "Verdicts"): a decision reported while pushing an event
carries that event's ``sequence`` as ``decided_at`` (None for decisions caused
by ``session_ended``), every assertion is decided exactly once, the final
results repeat the decisions, and every reason is a non-empty single line.

Its own tests are in ``test_harness.py``.
"""

from __future__ import annotations

import functools
import io
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import msgspec
import pytest

import mantle_stream as ms
from mantle_stream import testing as built
from mantle_stream.cli import main

__all__ = [
    "TYPED_VALUES",
    "D",
    "Ev",
    "Judged",
    "assert_outcome",
    "block",
    "bot",
    "call",
    "calm_slot",
    "check_golden",
    "checkpointed",
    "clear",
    "end",
    "flat",
    "http_server",
    "judge",
    "judge_lines",
    "kind_of",
    "quick_http_retries",
    "scenario",
    "setm",
    "skill",
    "started",
    "tool",
    "user",
    "within",
]


# --------------------------------------------------------------------------
# Scenarios
# --------------------------------------------------------------------------


def scenario(*assertions: dict[str, Any], name: str = "t") -> ms.Scenario:
    """A scenario holding ``assertions`` (JSON text is valid YAML 1.2)."""
    doc = {
        "scenario": {
            "name": name,
            "simulation_context": "x",
            "goals": {"assertions": list(assertions)},
        }
    }
    return ms.load_scenario_text(json.dumps(doc))


def kind_of(assertion: dict[str, Any]) -> str:
    [kind] = assertion
    return kind


def call(name: str, source: str = "local", **fields: Any) -> dict[str, Any]:
    """A ``tool_executed`` check (a listed call of ``tools_within_one_turn`` too)."""
    return {"tool_executed": {"tool_name": name, "source": source, **fields}}


def within(*calls: dict[str, Any], extras: bool, ordered: bool | None = None) -> dict[str, Any]:
    """A ``tools_within_one_turn`` check of ``calls``."""
    body: dict[str, Any] = {"allow_extra_calls": extras, "calls": list(calls)}
    if ordered is not None:
        body["ordered"] = ordered
    return {"tools_within_one_turn": body}


# --------------------------------------------------------------------------
# Events
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Ev:
    """One tracker event: a ProtoJSON payload, or a flat row when ``flat``.

    ProtoJSON rows are written as Mantle writes them: every unset
    optional envelope field ``null``, ``metadata`` a JSON *string* or null.
    """

    key: str
    payload: dict[str, Any] = field(default_factory=dict)
    decides: bool = False
    seq: int | None = None  # explicit sequence (to make gaps); else previous + 1
    flat: bool = False
    with_sequence: bool = True  # flat rows may lack `sequence`
    metadata: dict[str, Any] | None = None

    def row(self, cid: str, seq: int) -> dict[str, Any]:
        if self.flat:
            row: dict[str, Any] = {"event": self.key, "sender_id": cid, **self.payload}
            if self.metadata is not None:
                row["metadata"] = self.metadata
            if self.with_sequence:
                row["sequence"] = seq
            return row
        return {
            "conversation_id": cid,
            "timestamp": 1767261600.0 + seq,
            "metadata": None if self.metadata is None else json.dumps(self.metadata),
            "event_id": f"{cid}-{seq}",
            "sequence": seq,
            self.key: self.payload,
            "user_id": None,
            "deployment_environment": None,
            "session_id": None,
        }

    def line(self, cid: str, seq: int) -> str:
        return json.dumps(self.row(cid, seq))


def D(ev: Ev) -> Ev:
    """Mark ``ev`` as the event whose sequence must be the assertion's ``decided_at``."""
    return replace(ev, decides=True)


def _ev(event: built.TrackerEvent) -> Ev:
    """A builder of :mod:`mantle_stream.testing` (the one description of each payload
    Mantle writes) as this harness's event."""
    return Ev(event.kind, event.payload, metadata=event.metadata)


def started() -> Ev:
    return _ev(built.session_started())


def end() -> Ev:
    return _ev(built.session_ended())


def user(text: str | None = "hello") -> Ev:
    return _ev(built.user(text))


def bot(
    text: str | None = None,
    *,
    utter: str | None = None,
    buttons: list[dict[str, Any]] | None = None,
) -> Ev:
    """A ``bot`` event: the response name travels in metadata ``utter_action``."""
    return _ev(built.bot(text, utter=utter, buttons=buttons))


def setm(name: str, value: Any) -> Ev:
    """A ``memory_set`` event; ``value`` travels JSON-encoded in ``value_json``."""
    return _ev(built.memory_set(name, value))


def clear(name: str) -> Ev:
    return _ev(built.memory_cleared(name))


def skill(event: str, skill_id: str, step_id: str | None = None) -> Ev:
    """``skill(`completed`, `card_replace`)`` is a ``skill_completed`` event."""
    return _ev(built.skill(event, skill_id, step_id))


def block(event: str, skill_id: str, block_id: str, step_id: str | None = None) -> Ev:
    """``block(`entered`, `card_replace`, `main`)`` is an ``ordered_block_entered`` event."""
    return _ev(built.block(event, skill_id, block_id, step_id))


def tool(
    name: str,
    *,
    source: str = "local",
    server: str | None = None,
    skill_id: str | None = None,
    args: dict[str, Any] | None = None,
    is_error: bool = False,
    result: Any = None,
) -> Ev:
    """A ``tool_executed`` event; ``args`` travel JSON-encoded in ``arguments_json`` and
    the skill it ran for in metadata ``skill_id``."""
    return _ev(
        built.tool(
            name,
            source=source,
            server=server,
            skill_id=skill_id,
            args=args,
            is_error=is_error,
            result=result,
        )
    )


def flat(ev: Ev, *, with_sequence: bool = True) -> Ev:
    """The same event in the flat shape of a tracker document."""
    payload = dict(ev.payload)
    if ev.key == "memory_set":
        payload["value"] = json.loads(payload.pop("value_json"))
    elif ev.key == "tool_executed":
        payload["arguments"] = json.loads(payload.pop("arguments_json"))
        result = payload.pop("result_json")
        payload["result"] = None if result is None else json.loads(result)
    return replace(ev, payload=payload, flat=True, with_sequence=with_sequence)


def calm_slot(name: str, value: Any, *, with_sequence: bool = True) -> Ev:
    """An older CALM ``slot`` row: read by no check, skipped and counted."""
    return Ev("slot", {"name": name, "value": value}, flat=True, with_sequence=with_sequence)


# --------------------------------------------------------------------------
# Typed values (memory values and tool arguments alike)
# --------------------------------------------------------------------------

# (expected, written, equal?) - docs/semantics.md "Matching": numbers by value
# (JSON has one number type), booleans only equal booleans.
TYPED_VALUES = [
    pytest.param(True, True, True, id="true-eq-true"),
    pytest.param(True, "true", False, id="true-ne-str-true"),
    pytest.param("true", True, False, id="str-true-ne-true"),
    pytest.param(5, 5, True, id="5-eq-5"),
    pytest.param(5, "5", False, id="5-ne-str-5"),
    pytest.param("5", 5, False, id="str-5-ne-5"),
    pytest.param(1, True, False, id="1-ne-true"),
    pytest.param(True, 1, False, id="true-ne-1"),
    pytest.param(0, False, False, id="0-ne-false"),
    pytest.param(5, 5.0, True, id="5-eq-5.0"),
    pytest.param(5.0, 5, True, id="5.0-eq-5"),
    pytest.param(1, 1.5, False, id="1-ne-1.5"),
    pytest.param(1.0, True, False, id="1.0-ne-true"),
    pytest.param(0.0, False, False, id="0.0-ne-false"),
    pytest.param(2.5, 2.5, True, id="2.5-eq-2.5"),
    pytest.param("damaged", "Damaged", False, id="strings-exact-case"),
    pytest.param("damaged", "damaged ", False, id="strings-exact-space"),
    pytest.param("", "", True, id="empty-string"),
    pytest.param({"a": 1, "b": "x"}, {"b": "x", "a": 1}, True, id="object-any-key-order"),
    pytest.param({"a": 1}, {"a": 1, "b": 2}, False, id="object-extra-key"),
    pytest.param({"a": 1, "b": 2}, {"a": 1}, False, id="object-missing-key"),
    pytest.param({"a": 1}, {"a": "1"}, False, id="object-typed-values"),
    pytest.param({"a": {"x": [1, True]}}, {"a": {"x": [1, True]}}, True, id="nested-equal"),
    pytest.param({"a": {"x": [1, True]}}, {"a": {"x": [1, 1]}}, False, id="nested-typed"),
    pytest.param([1, 2, 3], [1, 2, 3], True, id="list-same-order"),
    pytest.param([1, 2, 3], [3, 2, 1], False, id="list-other-order"),
    pytest.param([1, 2], [1, 2, 2], False, id="list-longer"),
    pytest.param([{"b": 1, "a": 2}], [{"a": 2, "b": 1}], True, id="list-of-objects-key-order"),
    pytest.param([], {}, False, id="empty-list-ne-empty-object"),
    pytest.param("x", None, False, id="str-ne-null"),
    pytest.param({"a": 1}, {"a": 1.0}, True, id="object-int-eq-float"),
    pytest.param([1, 2], [1.0, 2.0], True, id="list-int-eq-float"),
    pytest.param([True], [1], False, id="list-true-ne-1"),
    pytest.param(12345678901234567890, 12345678901234567890, True, id="big-int"),
    pytest.param(12345678901234567890, 1.2345678901234567e19, False, id="big-int-ne-float"),
    pytest.param("café ✓", "café ✓", True, id="unicode"),
    pytest.param(-0.5, -0.5, True, id="negative-float"),
]


# --------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------

#: The behaviour tests push each conversation in order, from sequence 10 by
#: default (so that a sequence is never mistaken for a position). With the
#: default reorder window the engine would rightly wait for sequences 0-9;
#: ordering has tests of its own (test_order.py).
IN_ORDER = 0


@dataclass
class Judged:
    """What the engine decided about one conversation."""

    results: tuple[ms.AssertionResult, ...]
    decisions: list[ms.Decision]
    seqs: list[int]  # the sequence given to each event, in order
    marked: int | None  # the sequence of the event marked with D, if any
    pushed: list[list[ms.Decision]]  # decisions returned by each push, in order

    def outcome(self, index: int = 0) -> tuple[str, int | None]:
        r = self.results[index]
        return r.verdict, r.decided_at

    def reason(self, index: int = 0) -> str:
        return self.results[index].reason


def assign_sequences(events: list[Ev], first: int = 10) -> list[int]:
    seqs: list[int] = []
    nxt = first
    for ev in events:
        seq = nxt if ev.seq is None else ev.seq
        seqs.append(seq)
        nxt = seq + 1
    return seqs


def _check_decisions(
    pushed_event: Ev | None, seq: int | None, decisions: list[ms.Decision], seen: set[int]
) -> None:
    for d in decisions:
        assert d.index not in seen, f"assertion {d.index} decided twice: {d}"
        seen.add(d.index)
        assert d.verdict in ("passed", "failed"), d
        assert d.reason and "\n" not in d.reason, f"reason must be one line: {d.reason!r}"
        if pushed_event is None or pushed_event.key == "session_ended":
            assert d.decided_at is None, f"decided by the end, so decided_at is None: {d}"
        else:
            assert d.decided_at == seq, f"decided while pushing sequence {seq}: {d}"


def judge(
    assertions: dict[str, Any] | list[dict[str, Any]],
    events: list[Ev],
    *,
    cid: str = "c",
    first: int = 10,
    finish: bool = True,
) -> Judged:
    """Push ``events`` as one conversation, then (when ``finish``) end the input."""
    if isinstance(assertions, dict):
        assertions = [assertions]
    evaluator = ms.Evaluator([scenario(*assertions)], reorder_window=IN_ORDER)
    seqs = assign_sequences(events, first)
    marked = [s for ev, s in zip(events, seqs, strict=True) if ev.decides]
    assert len(marked) <= 1, "mark at most one deciding event"
    seen: set[int] = set()
    pushed: list[list[ms.Decision]] = []
    decisions: list[ms.Decision] = []
    for ev, seq in zip(events, seqs, strict=True):
        got = evaluator.push_line(ev.line(cid, seq))
        _check_decisions(ev, seq, got, seen)
        pushed.append(got)
        decisions += got
    if finish:
        got = evaluator.finish_all()
        _check_decisions(None, None, got, seen)
        decisions += got
    [result] = evaluator.results()
    assert result.conversation_id == cid
    for d in decisions:
        assert d.conversation_id == cid and d.scenario == "t"
        assert d.kind == kind_of(assertions[d.index])
        r = result.assertions[d.index]
        assert (r.verdict, r.decided_at, r.reason) == (d.verdict, d.decided_at, d.reason)
    if finish:
        assert len(seen) == len(assertions), "every assertion resolves at the end"
        assert all(r.verdict != "pending" for r in result.assertions)
    return Judged(result.assertions, decisions, seqs, marked[0] if marked else None, pushed)


def judge_lines(assertions: list[dict[str, Any]], lines: list[str]) -> list[ms.ConversationResult]:
    """Push raw wire lines (several conversations possibly), finish, return every result."""
    evaluator = ms.Evaluator([scenario(*assertions)], reorder_window=IN_ORDER)
    for line in lines:
        evaluator.push_line(line)
    evaluator.finish_all()
    return evaluator.results()


def assert_outcome(assertion: dict[str, Any], events: list[Ev], verdict: str) -> Judged:
    """One assertion over ``events``: ``verdict``, decided at the D-marked event (or the end)."""
    judged = judge(assertion, events)
    assert judged.outcome() == (verdict, judged.marked), judged.results[0].reason
    return judged


def checkpointed(
    assertions: list[dict[str, Any]], events: list[Ev], split: int, *, cid: str = "c"
) -> tuple[ms.ConversationResult, list[ms.Decision]]:
    """Run ``events[:split]``, checkpoint through msgspec JSON, restore into a fresh
    evaluator, push the rest and finish. Returns the final result and every decision."""
    scen = scenario(*assertions)
    seqs = assign_sequences(events)
    first = ms.Evaluator([scen], reorder_window=IN_ORDER)
    decisions: list[ms.Decision] = []
    for ev, seq in zip(events[:split], seqs[:split], strict=True):
        decisions += first.push_line(ev.line(cid, seq))
    data = msgspec.json.encode(first.conversation_state(cid))
    state = msgspec.json.decode(data, type=ms.ConversationState)
    second = ms.Evaluator([scen], reorder_window=IN_ORDER)
    second.restore_conversation(state)
    for ev, seq in zip(events[split:], seqs[split:], strict=True):
        decisions += second.push_line(ev.line(cid, seq))
    decisions += second.finish_all()
    [result] = second.results()
    return result, decisions


# --------------------------------------------------------------------------
# Tests of the builder itself
# --------------------------------------------------------------------------

ALL_KINDS = [
    started(),
    user("hi"),
    bot("Hello", utter="utter_greet", buttons=[{"title": "Yes"}]),
    setm("a.b", {"x": [1, 2]}),
    clear("a.b"),
    skill("activated", "k"),
    skill("completed", "k"),
    skill("cancelled", "k"),
    skill("interrupted", "k", "s1"),
    skill("resumed", "k"),
    block("entered", "k", "main"),
    block("completed", "k", "main"),
    block("cancelled", "k", "main"),
    block("interrupted", "k", "main"),
    block("resumed", "k", "main"),
    tool("t", args={"a": 1}),
    tool("t", source="mcp", server="bank", is_error=True, result={"e": 1}),
    end(),
]


def line(cid: str, seq: int, **payload: Any) -> bytes:
    """A ProtoJSON line given its payload as keywords (``bot={...}``, ...); a
    bot's ``utter_name`` travels as metadata ``utter_action``, as Mantle writes it."""
    metadata = None
    if "utter_name" in payload.get("bot", {}):
        bot = dict(payload["bot"])
        metadata = json.dumps({"utter_action": bot.pop("utter_name")})
        payload["bot"] = bot
    return (
        json.dumps(
            {"conversation_id": cid, "sequence": seq, "metadata": metadata, **payload}
        ).encode()
        + b"\n"
    )


#: The repository: where the command line runs in tests.
REPOSITORY = Path(__file__).resolve().parent.parent


def run_cli(
    *args: str, timeout: float = 120, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """``mantle-stream ARGS`` as a subprocess from the repository, its output captured
    (``stdin``: what it reads on standard input, else nothing)."""
    return subprocess.run(
        [sys.executable, "-m", "mantle_stream", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=REPOSITORY,
        timeout=timeout,
        check=False,
    )


#: Golden text: what a user reads, compared whole (``tests/golden/*.txt``).
GOLDEN = Path(__file__).resolve().parent / "golden"


def check_golden(name: str, text: str) -> None:
    """``text`` is ``tests/golden/NAME`` exactly; ``UPDATE_GOLDEN=1`` rewrites the file
    instead (read the diff before committing it)."""
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"{path.name} is missing; run with UPDATE_GOLDEN=1 and read it"
    assert text == path.read_text(encoding="utf-8")


def run_cli_in_process(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[str]:
    """``mantle-stream ARGS`` called in this process (``cli.main``), from the
    repository: the exit status, standard output and error :func:`run_cli` gives,
    without starting Python and importing the package again.

    For tests where a process of its own adds nothing: no signals, terminals,
    workers or time limits. Every command keeps tests that run it as a subprocess
    (:func:`run_cli`), the surface users have."""
    out, err = (
        io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors=errors)
        for errors in ("strict", "backslashreplace")  # as Python's own streams
    )
    saved, cwd = (sys.stdin, sys.stdout, sys.stderr), os.getcwd()
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    sys.stdout, sys.stderr = out, err
    os.chdir(REPOSITORY)
    try:
        status: int | str | None = main(list(args))
    except SystemExit as exc:  # argparse's usage errors, --help, --version
        status = exc.code
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
        os.chdir(cwd)
    if isinstance(status, str):  # as the interpreter does with SystemExit("message")
        print(status, file=err)
    code = status if isinstance(status, int) else 0 if status is None else 1
    return subprocess.CompletedProcess(["mantle-stream", *args], code, _text(out), _text(err))


def _text(stream: io.TextIOWrapper) -> str:
    """What was written to ``stream``, read as ``subprocess.run(text=True)`` reads
    a pipe (universal newlines)."""
    stream.flush()
    raw = stream.buffer
    assert isinstance(raw, io.BytesIO)
    return raw.getvalue().decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")


@contextmanager
def http_server(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A threading HTTP server on loopback answering with ``handler``, for the block:
    its ``http://127.0.0.1:PORT`` address. The serving thread polls for shutdown every
    10 ms (``serve_forever``'s default, half a second, was paid by every test's teardown)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def quick_http_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """The command line's HTTP source (in this process) retries 10 ms apart, not after
    0.5, 1 and 2 s: each attempt, and what is said of it, stay the same."""
    from mantle_stream.feeds import HttpOptions
    from mantle_stream.run import sources

    monkeypatch.setattr(sources, "HttpOptions", functools.partial(HttpOptions, backoff=0.01))
