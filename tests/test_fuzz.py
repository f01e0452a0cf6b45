"""Fuzzing the event decoder and the evaluator with hostile input.

Whatever a broken or hostile producer sends, reading it must end in a verdict
or in a :class:`~mantle_stream.MantleStreamError`, never in a traceback of
another type. The properties, each over random bytes, over token soup and
over valid event lines of ``examples/eval/events`` mutated in every way a
producer could get them wrong (flipped, inserted and deleted bytes, cut
lines, duplicate keys, fields of the wrong type or missing, payload keys
swapped, doubled or unknown, ``value_json`` / ``arguments_json`` that are
not JSON or not objects, deep nesting, huge numbers, NaN-like tokens,
invalid UTF-8, lone surrogates, CR/LF variants, very long strings, legacy
rows):

1. ``EventDecoder.decode_chunk``, ``Evaluator.push_chunk`` (cut at random
   byte boundaries) and ``Evaluator.push_line`` (bytes and str) raise
   nothing but ``MantleStreamError``; an ``EventError`` names a line inside
   the input it was given, says what is wrong on one line and follows it
   with an excerpt of that very line;
2. a bad event costs no other conversation anything: after an
   ``EventError`` the evaluator still judges valid events, and every clean
   conversation ends with exactly the results of a run that never saw the
   bad input;
3. cutting the same lines into chunks differently never changes what is
   decided (the chunk fast path agrees with the line-by-line slow path).

Known engine bugs
-----------------
Inputs that broke a property are minimized into ``HOSTILE_CASES`` below;
those whose bug is still open are strict xfails naming it (``KNOWN_BUGS``),
the others regression tests. While a bug is open the properties recognise
its signature (``_known_crash`` and the ``_hit`` calls) and let the example
pass, counting it as a Hypothesis ``event`` (``--hypothesis-show-statistics``),
so the suite stays green and a *new* failure still fails. Once a bug is
fixed its case XPASSes, which fails the run: then drop its bug (the case
stays as a regression test) and its signature.

The ``*_longer`` tests are the long run (about 2 minutes): marked ``slow``
and skipped unless asked for with ``pytest -m slow tests/test_fuzz.py``.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import itertools
import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

import mantle_stream as ms
from mantle_stream.core.events.decode import MAX_LINE_BYTES, EventDecoder
from mantle_stream.core.events.model import PAYLOAD_TYPES
from mantle_stream.core.recorded import load_results

# As in test_streaming_equals_batch: a failing property makes Hypothesis import
# libcst, whose DeprecationWarning would become an INTERNALERROR under
# ``filterwarnings = error`` and hide the falsifying example.
with warnings.catch_warnings(), contextlib.suppress(ImportError):
    warnings.simplefilter("ignore", DeprecationWarning)
    importlib.import_module("hypothesis.extra._patching")

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "eval"
SOURCE = "fuzz.jsonl"

# Sorted for a stable order: Hypothesis replays examples by index.
EXAMPLE_LINES: tuple[bytes, ...] = tuple(
    sorted(
        {
            line
            for path in sorted((EXAMPLES / "events").glob("*.jsonl"))
            for line in path.read_bytes().splitlines()
            if line.strip()
        }
    )
)
SCENARIOS = ms.load_scenarios([str(EXAMPLES / "scenarios")])
# Which scenario each example conversation ran (its evaluate_agent results file),
# also under the `clean/` ids the resilience properties give them.
ASSIGNMENTS = {
    prefix + cid: run.scenario
    for cid, run in load_results(EXAMPLES / "results" / "2026-12-01T09-00-00").items()
    for prefix in ("", "clean/")
}
ONE_SCENARIO = next(s for s in SCENARIOS if s.stem == "card_replace_damaged")

# Example counts: the Hypothesis profile's (tests/conftest.py; 100 in the test
# command's run, 1,000 with --hypothesis-profile=thorough), and LONG in the slow set.
FUZZ = settings(
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
)
FEW = settings(FUZZ, max_examples=settings().max_examples * 4 // 5)  # 80 of 100
LONG = settings(FUZZ, max_examples=5000)


# The reorder window is new in the engine: fuzzed too where the engine has it.
HAS_REORDER_WINDOW = "reorder_window" in inspect.signature(ms.Evaluator).parameters
KINDS = ["several", "one", *(["reordering"] if HAS_REORDER_WINDOW else [])]


def evaluator(kind: str) -> ms.Evaluator:
    """``several``: paired with scenarios by the results folder; ``one``: every
    conversation against one scenario; ``reordering``: several, with a small reorder
    window (the default is large)."""
    if kind == "reordering":
        return ms.Evaluator(SCENARIOS, source=SOURCE, reorder_window=8, assignments=ASSIGNMENTS)
    if kind == "several":
        return ms.Evaluator(SCENARIOS, source=SOURCE, assignments=ASSIGNMENTS)
    return ms.Evaluator([ONE_SCENARIO], source=SOURCE)


evaluator_kinds = st.sampled_from(KINDS)
_RAW = EventDecoder(SOURCE)  # its raw ``decode_lines``: the engine's fast path
_ONE_EVENT = msgspec.json.Decoder(ms.Event)

# --------------------------------------------------------------------------
# Known engine bugs: signatures, and one minimized input each
# --------------------------------------------------------------------------

# Every bug found so far is fixed; their minimized inputs stay in HOSTILE_CASES
# as regression tests. Add an open one here (name -> description) with its
# signature in _known_crash while it is being fixed.
KNOWN_BUGS: dict[str, str] = {}


def _last_frame(exc: BaseException) -> tuple[str, str]:
    """(file name, function) where ``exc`` was raised."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return "", ""
    return Path(tb.tb_frame.f_code.co_filename).name, tb.tb_frame.f_code.co_name


def _known_crash(exc: BaseException) -> str | None:
    """The open known bug an escaping non-MantleStreamError exception is, if any."""
    del exc  # no open bug: every escape fails the property
    return None


class KnownBug(Exception):
    """A known bug, outside a property (so that its xfail case fails as expected)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def _hit(name: str) -> None:
    """A known bug: inside a property, count it and carry on; elsewhere, fail.

    A fixed bug's check stays in place: if it comes back, it fails the run.
    """
    if name not in KNOWN_BUGS:
        raise AssertionError(f"regression of a fixed engine bug: {name}")
    if currently_in_test_context():
        event(f"known engine bug: {name}")
    else:
        raise KnownBug(name)


def _tolerating(check: Callable[[], None]) -> None:
    """Run a check that cannot go on past a known bug; count the bug if it hit one."""
    try:
        check()
    except KnownBug as known:
        event(f"known engine bug: {known.name}")


NESTED = b"[" * 100_000 + b"]" * 100_000
TWO_VALUES_THEN_A_BAD_TOOL_RUN = (
    b'{"conversation_id":"c","user":{}}%s{"conversation_id":"c","future_kind":{}}\n'
    b'{"conversation_id":"c","tool_executed":{"tool_name":"t","source":"local",'
    b'"arguments_json":"x"}}\n'
)
# (name, entry point, input, open bug or None). Every one of them once let an
# exception other than MantleStreamError out, or broke an EventError's form;
# those with a bug still do (strict xfail), the rest are regression tests.
HOSTILE_CASES: list[tuple[str, str, bytes, str | None]] = [
    (
        "deep-metadata",
        "push_chunk",
        b'{"conversation_id":"c","metadata":{"a":' + NESTED + b'},"user":{}}',
        None,
    ),
    (
        "deep-unknown-field",
        "push_chunk",
        b'{"conversation_id":"c","x":' + NESTED + b',"user":{}}',
        None,
    ),
    (
        "deep-unknown-field",
        "decode_chunk",
        b'{"conversation_id":"c","x":' + NESTED + b',"user":{}}',
        None,
    ),
    (
        "deep-value-json",
        "push_line",
        b'{"conversation_id":"c","memory_set":{"name":"n","value_json":"' + NESTED + b'"}}',
        None,
    ),
    ("deep-legacy-row", "push_line", b'{"event":"slot","value":' + NESTED + b"}", None),
    ("trailing-characters", "decode_chunk", b"{}{", None),
    (
        "out-of-range-in-unknown-kind",
        "push_chunk",
        b'{"conversation_id":"c","x":1e400,"future_kind":{}}',
        None,
    ),
    ("out-of-range-in-legacy-row", "push_line", b'{"event":"user","x":1e400}', None),
    ("surrogateescape-str", "push_line_str", b'{"conversation_id":"c\xff","user":{}}', None),
    (
        "line-break-in-unknown-key",
        "decode_chunk",
        b'{"conversation_id":"c","a\\nb":{},"future_kind":{}}',
        None,
    ),
    (
        "line-break-in-value-json",
        "push_line",
        b'{"conversation_id":"c","memory_set":{"name":"n","value_json":"1\\n2"}}',
        None,
    ),
    ("cr-inside-a-line", "push_chunk", b'{"conversation_id":"c","user":{}}\r{"x"\n', None),
    ("two-values-on-a-line", "push_chunk", TWO_VALUES_THEN_A_BAD_TOOL_RUN % b" ", None),
    ("cr-separated-values", "push_chunk", TWO_VALUES_THEN_A_BAD_TOOL_RUN % b"\r", None),
]

# --------------------------------------------------------------------------
# The checks
# --------------------------------------------------------------------------


ESCAPES = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))}
ESCAPES.update({ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t"})


def _check_event_error(exc: ms.EventError, lines: list[bytes], first: int) -> None:
    """One line saying where and what, then an excerpt of the line it names, then
    the hint (one line) when the error has one.

    ``lines`` are the physical lines of the input (split at LF), ``first``
    the number of ``lines[0]``.
    """
    assert exc.source == SOURCE
    assert exc.line is not None, f"bad event without a line number: {exc}"
    assert first <= exc.line < first + len(lines), (exc.line, first, len(lines))
    where = f"{SOURCE}:{exc.line}"
    text = f"{where}: bad event: {exc.message}"
    if exc.excerpt:
        text += f"\n    {exc.excerpt}"
    if exc.hint:
        text += f"\nhint: {exc.hint}"
    assert str(exc) == text
    for part in (exc.message, exc.excerpt, exc.hint):
        assert "\n" not in part and "\r" not in part, f"not one line: {part!r}"
    named = lines[exc.line - first].decode("utf-8", "replace").strip()
    excerpt = exc.excerpt.removesuffix("…").rstrip("\ufffd")
    # Control characters may be written as escapes (`\x13`, `\r`).
    assert named.startswith(excerpt) or named.translate(ESCAPES).startswith(excerpt), (
        f"excerpt {excerpt!r} is not line {exc.line}: {named!r}"
    )


def _guarded(call: Callable[[], object], lines: list[bytes], first: int) -> str:
    """Call: ``ok``, ``error`` (a MantleStreamError, checked if an EventError), ``known``."""
    try:
        call()
    except ms.EventError as exc:
        _check_event_error(exc, lines, first)
        return "error"
    except ms.MantleStreamError:
        return "error"
    except Exception as exc:
        known = _known_crash(exc)
        if known is None:
            raise
        _hit(known)
        return "known"
    return "ok"


def _line_count(chunk: bytes) -> int:
    """Lines as the evaluator counts them: a trailing partial line is a line."""
    return chunk.count(b"\n") + (0 if chunk.endswith(b"\n") or not chunk else 1)


def decode_chunk_raises_only_event_errors(data: bytes, first: int) -> None:
    decoder = EventDecoder(SOURCE)
    lines = data.split(b"\n")
    _guarded(lambda: decoder.decode_chunk(data, first), lines, first)


def push_chunk_raises_only_event_errors(
    ev: ms.Evaluator, pieces: list[bytes], stop_at_failure: bool = False
) -> None:
    for piece in pieces:
        before = ev.lines_read
        outcome = _guarded(
            functools.partial(ev.push_chunk, piece, stop_at_failure=stop_at_failure),
            piece.split(b"\n"),
            before + 1,
        )
        if outcome != "known":
            assert ev.lines_read == before + _line_count(piece)


def push_line_raises_only_event_errors(
    ev: ms.Evaluator, lines: list[bytes], as_text: bool = False
) -> None:
    for line in lines:
        before = ev.lines_read
        arg: bytes | str = line.decode("utf-8", "surrogateescape") if as_text else line
        if _guarded(functools.partial(ev.push_line, arg), [line], before + 1) == "known":
            continue
        if ev.lines_read == before and isinstance(arg, str) and not arg.isascii():
            try:
                arg.encode()
            except UnicodeEncodeError:
                _hit("unencodable-line-not-counted")
                continue
        assert ev.lines_read == before + 1


def _cut(data: bytes, cuts: list[int]) -> list[bytes]:
    """``data`` cut at the given offsets (any byte, not only line ends)."""
    bounds = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    return [data[a:b] for a, b in itertools.pairwise(bounds)] or [data]


def exercise_every_entry_point(
    data: bytes, cuts: list[int], kind: str, first: int, as_text: bool, stop_at_failure: bool
) -> None:
    decode_chunk_raises_only_event_errors(data, first)
    push_chunk_raises_only_event_errors(evaluator(kind), _cut(data, cuts), stop_at_failure)
    push_line_raises_only_event_errors(evaluator(kind), data.split(b"\n"), as_text)
    # Whole, then finished: the final snapshot must build too.
    ev = evaluator(kind)
    push_chunk_raises_only_event_errors(ev, [data])
    ev.finish_all()
    ms.build_report(ev).to_json()


# --------------------------------------------------------------------------
# Generators: raw bytes, token soup, mutated event lines
# --------------------------------------------------------------------------

# Raw JSON (or almost-JSON) values of every type and trouble.
RAW_VALUES: tuple[bytes, ...] = (
    b"null",
    b"true",
    b"false",
    b"0",
    b"-1",
    b"1.5",
    b"-0",
    b"1e400",
    b"-1e400",
    b"1e-400",
    b"123456789012345678901234567890",
    b"18446744073709551616",
    b"9223372036854775808",
    b"-9223372036854775809",
    b'""',
    b'"x"',
    b"[]",
    b"{}",
    b'[1,"a",null]',
    b'{"a":1}',
    b"NaN",
    b"Infinity",
    b"-Infinity",
    b"nan",
    b"inf",
    b"+1",
    b"01",
    b".5",
    b'"\\ud800"',
    b'"\\udc00"',
    b'"\\ud800\\ud800"',
    b'"\\udbff\\udfff"',
    b'"\\u0000"',
    b'"\xff\xfe"',
    b'"\xed\xa0\x80"',
    b'"\xc0\x80"',
    b'"\xc3"',
    b'"\xf4\x90\x80\x80"',
    b'"a\\nb"',
    b'"\\r\\n"',
    b'"\xe2\x80\xa8"',
    b'"\x1b[31m"',
    b'"\\u001b[31m"',
    b'"a\tb"',
)
# Contents of value_json / arguments_json / result_json (JSON-encoded as strings).
JSON_TEXTS: tuple[str, ...] = (
    "",
    " ",
    "{",
    "}",
    "[1]",
    '"x"',
    "1e400",
    "-1e400",
    "NaN",
    "Infinity",
    "nul",
    '{"a":',
    "1 2",
    "{}{}",
    "\ud800",
    "42",
    "null",
    "true",
    "{}",
    '{"shipping":"standard"}',
    "123456789012345678901234567890",
    "-0",
    "1.0",
    "1\n2",
    "{\r}",
    '{"a":1,"a":2}',
    "[" * 50 + "]" * 50,
    "[" * 3000 + "]" * 3000,
    '{"a":' * 2000 + "1" + "}" * 2000,
)
DEPTHS = (8, 64, 500, 999, 1_000, 3_000, 50_000)
LENGTHS = (300, 5_000, 70_000, MAX_LINE_BYTES)
KEYS: tuple[str, ...] = (
    "conversation_id",
    "sequence",
    "event_id",
    "timestamp",
    "metadata",
    "session_id",
    "event",
    "sender_id",
    "text",
    "name",
    "value",
    "value_json",
    "arguments_json",
    "tool_name",
    "source",
    "skill_id",
    "buttons",
    "scenario",
    *PAYLOAD_TYPES,
    "future_kind",
    "",
)
TOKENS: tuple[bytes, ...] = (
    b"{",
    b"}",
    b"[",
    b"]",
    b":",
    b",",
    b'"',
    b"\\",
    b" ",
    b"\n",
    b"\r",
    b"\t",
    *(json.dumps(k).encode() for k in KEYS),
    *RAW_VALUES,
)
SENTINEL = "\x00RAW\x00"
_SENTINEL_JSON = json.dumps(SENTINEL).encode()
Draw = Callable[[st.SearchStrategy[Any]], Any]


def _loads(line: bytes) -> Any:
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        return None


def _dumps(obj: Any, raw: bytes | None = None) -> bytes:
    """Encode; ``raw`` replaces the value SENTINEL, so any bytes can stand as a value."""
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode(
        "utf-8", "surrogatepass"
    )
    return text if raw is None else text.replace(_SENTINEL_JSON, raw, 1)


def _slots(obj: Any, depth: int = 0) -> list[tuple[Any, Any]]:
    """Every (container, key) of a parsed line, down to payload fields and buttons."""
    out: list[tuple[Any, Any]] = []
    items = (
        obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    )
    for key, value in items:
        out.append((obj, key))
        if depth < 3 and isinstance(value, dict | list):
            out.extend(_slots(value, depth + 1))
    return out


def _payload_key(obj: dict[str, Any]) -> str | None:
    return next((k for k in obj if k in PAYLOAD_TYPES), None)


# Byte-level mutations work on anything.


def flip_byte(draw: Draw, line: bytes) -> bytes:
    if not line:
        return b"\x80"
    at = draw(st.integers(0, len(line) - 1))
    return line[:at] + bytes([line[at] ^ draw(st.integers(1, 255))]) + line[at + 1 :]


def insert_bytes(draw: Draw, line: bytes) -> bytes:
    at = draw(st.integers(0, len(line)))
    what: bytes = draw(st.one_of(st.sampled_from(TOKENS), st.binary(min_size=1, max_size=8)))
    return line[:at] + what + line[at:]


def delete_bytes(draw: Draw, line: bytes) -> bytes:
    at = draw(st.integers(0, len(line)))
    return line[:at] + line[at + draw(st.integers(1, 16)) :]


def truncate(draw: Draw, line: bytes) -> bytes:
    return line[: draw(st.integers(0, len(line)))]


def duplicate_slice(draw: Draw, line: bytes) -> bytes:
    a = draw(st.integers(0, len(line)))
    b = draw(st.integers(a, min(len(line), a + 64)))
    at = draw(st.integers(0, len(line)))
    return line[:at] + line[a:b] + line[at:]


def line_breaks(draw: Draw, line: bytes) -> bytes:
    at = draw(st.integers(0, len(line)))
    what: bytes = draw(st.sampled_from([b"\r", b"\r\n", b"\n", b"\n\n", b"\r\r\n"]))
    where = draw(st.sampled_from(["end", "start", "inside"]))
    if where == "end":
        return line + what
    if where == "start":
        return what + line
    return line[:at] + what + line[at:]


def glue_lines(draw: Draw, line: bytes) -> bytes:
    """Two events on one line: `{...} {...}`, `{...}\\r{...}`, `{...}{...}`."""
    other: bytes = draw(st.sampled_from(EXAMPLE_LINES))
    glue: bytes = draw(st.sampled_from([b"", b" ", b"\r", b"\t", b"\x0c"]))
    return line + glue + other


def odd_whitespace(draw: Draw, line: bytes) -> bytes:
    what: bytes = draw(
        st.sampled_from([b" \t", b"\x0b", b"\x0c", b"\xc2\xa0", b"\xef\xbb\xbf", b"\x00", b"\x1c"])
    )
    return what + line if draw(st.booleans()) else line + what


def duplicate_key(draw: Draw, line: bytes) -> bytes:
    """A key twice in the same object: `{"sequence":"x","sequence":3,...}`."""
    key = draw(st.sampled_from(KEYS))
    value: bytes = draw(st.sampled_from(RAW_VALUES))
    brace = line.find(b"{")
    at = brace + 1 if brace >= 0 and draw(st.booleans()) else max(line.rfind(b"}"), 0)
    pair = json.dumps(key).encode() + b":" + value
    pair = pair + b"," if at == brace + 1 else b"," + pair
    return line[:at] + pair + line[at:]


# Structural mutations parse the line first (falling back to a byte-level one).


def _structural(fn: Callable[[Draw, Any], bytes | None]) -> Callable[[Draw, bytes], bytes]:
    @functools.wraps(fn)
    def mutate(draw: Draw, line: bytes) -> bytes:
        obj = _loads(line)
        out = fn(draw, obj) if isinstance(obj, dict) else None
        return insert_bytes(draw, line) if out is None else out

    return mutate


@_structural
def retype_field(draw: Draw, obj: Any) -> bytes | None:
    slots = _slots(obj)
    if not slots:
        return None
    parent, key = draw(st.sampled_from(slots))
    parent[key] = SENTINEL
    return _dumps(obj, draw(st.sampled_from(RAW_VALUES)))


@_structural
def drop_field(draw: Draw, obj: Any) -> bytes | None:
    if draw(st.booleans()):
        for key in draw(
            st.sets(
                st.sampled_from(["conversation_id", "sequence", "sender_id", "metadata"]),
                min_size=1,
            )
        ):
            obj.pop(key, None)
        return _dumps(obj)
    slots = [(p, k) for p, k in _slots(obj) if isinstance(p, dict)]
    if not slots:
        return None
    parent, key = draw(st.sampled_from(slots))
    del parent[key]
    return _dumps(obj)


@_structural
def swap_payload(draw: Draw, obj: Any) -> bytes | None:
    """Rename, double, drop or make unknown the payload key."""
    current = _payload_key(obj)
    body = obj.pop(current) if current else {}
    how = draw(st.sampled_from(["rename", "second", "none", "unknown", "legacy"]))
    if how == "rename":
        obj[draw(st.sampled_from(sorted(PAYLOAD_TYPES)))] = body
    elif how == "second":
        obj[current or "user"] = body
        obj[draw(st.sampled_from(sorted(PAYLOAD_TYPES)))] = draw(
            st.sampled_from([{}, body, None, [], "x"])
        )
    elif how == "unknown":
        obj[draw(st.sampled_from(["future_kind", "event", "", "a\nb", "Bot"]))] = body
        if draw(st.booleans()):
            obj["another_future_kind"] = {}
    elif how == "legacy":
        obj = {
            "event": draw(
                st.sampled_from(["user", "bot", "slot", "session_started", "action", "restart", ""])
            ),
            "sender_id": obj.get("conversation_id", obj.get("sender_id")),
            "sequence": obj.get("sequence"),
            "metadata": obj.get("metadata"),
            **(body if isinstance(body, dict) else {}),
        }
        if draw(st.booleans()):
            obj[
                draw(
                    st.sampled_from(
                        ["text", "name", "value", "data", "timestamp", "sender_id", "sequence"]
                    )
                )
            ] = SENTINEL
            return _dumps(obj, draw(st.sampled_from(RAW_VALUES)))
    return _dumps(obj)


@_structural
def bad_json_string(draw: Draw, obj: Any) -> bytes | None:
    """value_json / arguments_json / result_json that are not JSON, or not objects."""
    key = _payload_key(obj)
    if (
        key not in ("memory_set", "tool_executed")
        or not isinstance(obj[key], dict)
        or draw(st.integers(0, 3)) == 0
    ):
        for k in [k for k in obj if k in PAYLOAD_TYPES]:
            del obj[k]
        if draw(st.booleans()):
            key = "memory_set"
            obj[key] = {"name": "card_replace.replacement_reason"}
        else:
            key = "tool_executed"
            obj[key] = {"tool_name": "order_replacement", "source": "local"}
    field = (
        "value_json"
        if key == "memory_set"
        else draw(st.sampled_from(["arguments_json", "result_json"]))
    )
    obj[key][field] = draw(st.sampled_from(JSON_TEXTS))
    return _dumps(obj)


@_structural
def nest_deeply(draw: Draw, obj: Any) -> bytes | None:
    slots = _slots(obj)
    if not slots:
        return None
    parent, key = draw(st.sampled_from(slots))
    parent[key] = SENTINEL
    depth = draw(st.sampled_from(DEPTHS))
    raw = (
        b"[" * depth + b"]" * depth
        if draw(st.booleans())
        else b'{"a":' * depth + b"1" + b"}" * depth
    )
    return _dumps(obj, raw)


@_structural
def long_string(draw: Draw, obj: Any) -> bytes | None:
    slots = [(p, k) for p, k in _slots(obj) if isinstance(p[k], str)]
    if not slots:
        return None
    parent, key = draw(st.sampled_from(slots))
    parent[key] = draw(st.sampled_from("xé€\U0001f600")) * draw(st.sampled_from(LENGTHS))
    return _dumps(obj)


@_structural
def odd_string(draw: Draw, obj: Any) -> bytes | None:
    """Invalid UTF-8, lone surrogates, control characters in a string field."""
    slots = [(p, k) for p, k in _slots(obj) if isinstance(p[k], str)]
    if not slots:
        return None
    parent, key = draw(st.sampled_from(slots))
    parent[key] = SENTINEL
    raw = draw(st.sampled_from([v for v in RAW_VALUES if v.startswith(b'"')]))
    return _dumps(obj, raw[:-1] + b"tail" + raw[-1:] if draw(st.booleans()) else raw)


MUTATIONS = (
    flip_byte,
    insert_bytes,
    delete_bytes,
    truncate,
    duplicate_slice,
    line_breaks,
    glue_lines,
    odd_whitespace,
    duplicate_key,
    retype_field,
    drop_field,
    swap_payload,
    bad_json_string,
    nest_deeply,
    long_string,
    odd_string,
)


@st.composite
def mutated_lines(draw: Draw) -> bytes:
    line: bytes = draw(st.sampled_from(EXAMPLE_LINES))
    for _ in range(draw(st.integers(1, 3))):
        line = draw(st.sampled_from(MUTATIONS))(draw, line)
    return line


token_soup = st.lists(st.sampled_from(TOKENS), max_size=40).map(b"".join)
hostile_lines = st.one_of(
    mutated_lines(),
    mutated_lines(),
    st.sampled_from(EXAMPLE_LINES),
    st.binary(max_size=120),
    token_soup,
)


@st.composite
def feeds(draw: Draw, lines: st.SearchStrategy[bytes] = hostile_lines, max_lines: int = 8) -> bytes:
    """Lines joined by LF mostly, sometimes CRLF, a blank line or a lone CR."""
    parts: list[bytes] = draw(st.lists(lines, min_size=1, max_size=max_lines))
    out = b""
    for part in parts:
        out += part + draw(st.sampled_from([b"\n", b"\n", b"\n", b"\r\n", b"\n\n", b"\r"]))
    return out if draw(st.booleans()) else out.rstrip(b"\n")


cut_lists = st.lists(st.integers(0, 1 << 20), max_size=6)

# --------------------------------------------------------------------------
# 1. Only MantleStreamError escapes
# --------------------------------------------------------------------------


@FUZZ
@given(
    data=st.one_of(st.binary(max_size=400), token_soup),
    cuts=cut_lists,
    kind=evaluator_kinds,
    first=st.integers(1, 10_000),
    as_text=st.booleans(),
)
def test_random_bytes_raise_only_event_errors(
    data: bytes, cuts: list[int], kind: str, first: int, as_text: bool
) -> None:
    exercise_every_entry_point(data, cuts, kind, first, as_text, False)


@FUZZ
@given(
    data=feeds(),
    cuts=cut_lists,
    kind=evaluator_kinds,
    first=st.integers(1, 10_000),
    as_text=st.booleans(),
    stop_at_failure=st.booleans(),
)
def test_mutated_event_lines_raise_only_event_errors(
    data: bytes, cuts: list[int], kind: str, first: int, as_text: bool, stop_at_failure: bool
) -> None:
    exercise_every_entry_point(data, cuts, kind, first, as_text, stop_at_failure)


def _guarded_push(ev: ms.Evaluator, e: ms.Event) -> None:
    """``push`` raises EventError without a line (there is none): one line of text."""
    try:
        ev.push(e)
    except ms.EventError as exc:
        # The source is `<events>`, not the evaluator's: a small inconsistency.
        assert exc.line is None and not exc.excerpt
        assert str(exc) == f"{exc.source}: bad event: {exc.message}"
        assert "\n" not in exc.message and "\r" not in exc.message
    except ms.MantleStreamError:
        pass
    except Exception as exc:
        known = _known_crash(exc)
        if known is None:
            raise
        _hit(known)


@FEW
@given(data=feeds(max_lines=6), kind=evaluator_kinds)
def test_events_built_in_python_raise_only_event_errors(data: bytes, kind: str) -> None:
    """``push(Event)`` with whatever the raw decoder lets through (0 or 2 payloads, ...)."""
    events: list[ms.Event] = []
    for line in data.split(b"\n"):
        with contextlib.suppress(msgspec.DecodeError, RecursionError):
            events += _RAW.decode_lines(line)
    event(f"decoded events: {min(len(events), 2)}{'+' if len(events) > 2 else ''}")
    ev = evaluator(kind)

    for e in events:
        _guarded_push(ev, e)
    ev.finish_all()


# --------------------------------------------------------------------------
# 2. A bad event costs the other conversations nothing
# --------------------------------------------------------------------------


def _clean_line(line: bytes) -> bytes:
    """An example line moved to conversation `clean/<id>` (no mutation can reach it)."""
    obj = json.loads(line)
    for key in ("conversation_id", "sender_id"):
        if key in obj:
            obj[key] = "clean/" + obj[key]
    return _dumps(obj)


CLEAN_LINES: tuple[bytes, ...] = tuple(
    _clean_line(line)
    for line in (EXAMPLES / "events" / "all.jsonl").read_bytes().splitlines()
    if line.strip()
)


@functools.cache
def offline(kind: str) -> tuple[dict[str, ms.ConversationResult], list[Any]]:
    """Results of the clean feed alone, in one go."""
    ev = evaluator(kind)
    ev.push_chunk(b"\n".join(CLEAN_LINES) + b"\n")
    ev.finish_all()
    return {r.conversation_id: r for r in ev.results()}, ev.unmatched()


def _clean_results(ev: ms.Evaluator) -> tuple[dict[str, ms.ConversationResult], list[Any]]:
    return (
        {r.conversation_id: r for r in ev.results() if r.conversation_id.startswith("clean/")},
        [u for u in ev.unmatched() if u.conversation_id.startswith("clean/")],
    )


def test_the_clean_feed_judges_every_conversation() -> None:
    """The resilience property below is only as strong as this baseline."""
    for kind in KINDS:
        results, _ = offline(kind)
        assert len(results) >= 10
        assert {r.verdict for r in results.values()} == {"passed", "failed"}


INTERRUPTED_FEEDS = {
    "kind": evaluator_kinds,
    "split": st.integers(0, len(CLEAN_LINES)),
    "garbage": st.lists(
        st.tuples(hostile_lines, st.sampled_from(["chunk", "line"])), min_size=1, max_size=6
    ),
}


@FUZZ
@given(**INTERRUPTED_FEEDS)
def test_a_bad_event_costs_no_other_conversation_its_verdicts(
    kind: str, split: int, garbage: list[tuple[bytes, str]]
) -> None:
    """Clean conversations, interrupted by hostile lines, end exactly as without them."""
    clean_conversations_survive(kind, split, garbage)


def clean_conversations_survive(kind: str, split: int, garbage: list[tuple[bytes, str]]) -> None:
    ev = evaluator(kind)
    if split:
        ev.push_chunk(b"\n".join(CLEAN_LINES[:split]) + b"\n")
    errors = 0
    for line, how in garbage:
        try:
            if how == "chunk":
                ev.push_chunk(line + b"\n")
            else:
                ev.push_line(line)
        except ms.MantleStreamError:
            errors += 1
        except Exception as exc:
            known = _known_crash(exc)
            if known is None:
                raise
            event(f"known engine bug: {known}")
    event(f"bad lines: {min(errors, 2)}{'+' if errors > 2 else ''}")
    if split < len(CLEAN_LINES):
        ev.push_chunk(b"\n".join(CLEAN_LINES[split:]) + b"\n")
    ev.finish_all()
    assert _clean_results(ev) == offline(kind)


# --------------------------------------------------------------------------
# 3. Chunking never changes what is decided
# --------------------------------------------------------------------------


def _lenient(chunk: bytes) -> bool:
    """True when the fast path takes a chunk whose lines are not each one value."""
    try:
        _RAW.decode_lines(chunk)
    except (msgspec.DecodeError, RecursionError):
        return False
    for line in chunk.split(b"\n"):
        if line.strip():
            try:
                _ONE_EVENT.decode(line)
            except msgspec.ValidationError:
                pass
            except (msgspec.DecodeError, RecursionError):
                return True
    return False


Outcome = tuple[list[ms.Decision], tuple[int | None, str] | None, Any, Any, Any]


def _run(kind: str, pieces: list[bytes], by_line: bool) -> Outcome:
    """Decisions up to the first error, that error, and the state after finishing."""
    ev = evaluator(kind)
    decisions: list[ms.Decision] = []
    error: tuple[int | None, str] | None = None
    try:
        for piece in pieces:
            if by_line:
                decisions += ev.push_line(piece)
            else:
                decisions += ev.push_chunk(piece)
    except ms.EventError as exc:
        # The line, not the message: push_line strips a CR that push_chunk sees.
        error = (exc.line, type(exc).__name__)
        decisions += exc.decisions  # made by the events before the bad one
    except ms.MantleStreamError as exc:
        error = (None, type(exc).__name__)
    except Exception as exc:
        known = _known_crash(exc)
        if known is None:
            raise
        raise KnownBug(known) from exc
    decisions += ev.finish_all()
    return decisions, error, ev.results(), ev.unmatched(), ev.statistics()


def _is_subsequence(short: list[Any], long: list[Any]) -> bool:
    it = iter(long)
    return all(any(x == y for y in it) for x in short)


def _join(lines: list[bytes]) -> bytes:
    return b"".join(line + b"\n" for line in lines)


CHUNKED_FEEDS = {
    "kind": evaluator_kinds,
    "lines": st.lists(
        st.one_of(
            st.sampled_from(EXAMPLE_LINES),
            st.sampled_from(EXAMPLE_LINES),
            st.sampled_from(EXAMPLE_LINES),
            mutated_lines(),
        ),
        min_size=1,
        max_size=30,
    ),
    "cuts": st.lists(st.integers(0, 30), max_size=5),
}


@FUZZ
@given(**CHUNKED_FEEDS)
def test_chunking_never_changes_what_is_decided(
    kind: str, lines: list[bytes], cuts: list[int]
) -> None:
    """One chunk, line by line, or chunks at random line ends: the same outcome."""
    chunking_changes_nothing(kind, lines, cuts)


def _values_on(line: bytes) -> int:
    try:
        return len(msgspec.json.Decoder().decode_lines(line))
    except (msgspec.DecodeError, RecursionError):
        return 1


def _fragment(line: bytes) -> bool:
    """A line that holds no whole JSON value (a part of one spread over lines)."""
    try:
        msgspec.json.Decoder().decode_lines(line)
        return False
    except (msgspec.DecodeError, RecursionError):
        return True


def chunking_changes_nothing(kind: str, lines: list[bytes], cuts: list[int]) -> None:
    lines = [part for line in lines for part in line.split(b"\n")]
    # The documented limit of the chunk fast path (see Evaluator.push_chunk): a chunk
    # with lines of several JSON values *and* blank lines, or a value spread over
    # lines (lines that decode as a whole but not one by one), is not checked.
    assume(
        not (
            any(_values_on(line) > 1 for line in lines)
            and (
                any(not line.strip() for line in lines)
                or (any(_fragment(line) for line in lines) and not _fragment(_join(lines)))
            )
        )
    )

    def check() -> None:
        bounds = sorted({0, len(lines), *(min(c, len(lines)) for c in cuts)})
        chunked = [_join(lines[a:b]) for a, b in itertools.pairwise(bounds)]
        by_line = _run(kind, lines, by_line=True)
        for pieces in ([_join(lines)], chunked):
            decisions, *rest = _run(kind, pieces, by_line=False)
            assert rest == list(by_line[1:])
            if decisions != by_line[0]:
                # Reported line by line, lost with the chunk that raised.
                assert rest[0] is not None, "decisions differ without an error"
                assert _is_subsequence(decisions, by_line[0])
                _hit("decisions-lost-on-error")

    _tolerating(check)


# --------------------------------------------------------------------------
# Known bugs, minimized (strict xfail: they fail the run once fixed)
# --------------------------------------------------------------------------


def _entry(entry: str, data: bytes) -> None:
    """Feed ``data`` to one entry point; raise only if a property is broken."""
    if entry == "decode_chunk":
        decode_chunk_raises_only_event_errors(data, 1)
    elif entry == "push_chunk":
        push_chunk_raises_only_event_errors(evaluator("one"), [data])
    elif entry == "push_line":
        push_line_raises_only_event_errors(evaluator("one"), [data])
    else:
        push_line_raises_only_event_errors(evaluator("one"), [data], as_text=True)


@pytest.mark.parametrize(
    ("entry", "data"),
    [
        pytest.param(
            entry,
            data,
            id=f"{name}:{entry}",
            marks=()
            if bug is None
            else pytest.mark.xfail(
                strict=True, raises=KnownBug, reason=f"engine bug: {KNOWN_BUGS[bug]}"
            ),
        )
        for name, entry, data, bug in HOSTILE_CASES
    ],
)
def test_hostile_input(entry: str, data: bytes) -> None:
    _entry(entry, data)


def _rejected(chunk: bytes) -> ms.EventError | None:
    try:
        evaluator("one").push_chunk(chunk)
    except ms.EventError as exc:
        return exc
    return None


def test_two_values_on_one_line_are_refused_in_any_chunk() -> None:
    # Was: accepted (and applied twice) when the rest of the chunk was clean.
    line = b'{"conversation_id":"c","user":{}} {"conversation_id":"c","user":{}}'
    with_a_bad_line = _rejected(_join([line, b'{"conversation_id":"c"']))
    assert with_a_bad_line is not None and with_a_bad_line.line == 1  # trailing characters
    assert _rejected(_join([line])) is not None, "the same line alone is applied, twice"


def test_decisions_before_a_bad_line_travel_with_the_error() -> None:
    # Was: applied, but never reported to the caller.
    ev = evaluator("one")
    good = b'{"conversation_id":"c","sequence":0,"skill_activated":{"skill_id":"card_replace"}}'
    with pytest.raises(ms.EventError) as info:
        ev.push_chunk(_join([good, b"{"]))
    (result,) = ev.results()
    decided = [a.index for a in result.assertions if a.verdict != "pending"]
    assert decided == [0]  # applied...
    reported = getattr(info.value, "decisions", [])  # (one possible fix)
    assert [d.index for d in reported] == decided, "...but never reported to the caller"


# --------------------------------------------------------------------------
# The long run
# --------------------------------------------------------------------------


def slow(test: Callable[..., None]) -> Callable[..., None]:
    """Marked ``slow``, and skipped unless asked for (``-m slow``): pyproject.toml's
    addopts do not deselect ``slow`` by themselves."""
    test = pytest.mark.skipif(
        "'slow' not in config.getoption('markexpr')",
        reason="long fuzz run: pytest -m slow tests/test_fuzz.py",
    )(test)
    marked: Callable[..., None] = pytest.mark.slow(test)
    return marked


@slow
@LONG
@given(
    data=st.one_of(feeds(), feeds(max_lines=30), st.binary(max_size=2000), token_soup),
    cuts=st.lists(st.integers(0, 1 << 20), max_size=20),
    kind=evaluator_kinds,
    first=st.integers(1, 10_000),
    as_text=st.booleans(),
    stop_at_failure=st.booleans(),
)
def test_everything_longer(
    data: bytes, cuts: list[int], kind: str, first: int, as_text: bool, stop_at_failure: bool
) -> None:
    exercise_every_entry_point(data, cuts, kind, first, as_text, stop_at_failure)


@slow
@settings(LONG, max_examples=2000)
@given(**INTERRUPTED_FEEDS)
def test_a_bad_event_costs_no_other_conversation_its_verdicts_longer(
    kind: str, split: int, garbage: list[tuple[bytes, str]]
) -> None:
    clean_conversations_survive(kind, split, garbage)


@slow
@settings(LONG, max_examples=2000)
@given(**CHUNKED_FEEDS)
def test_chunking_never_changes_what_is_decided_longer(
    kind: str, lines: list[bytes], cuts: list[int]
) -> None:
    chunking_changes_nothing(kind, lines, cuts)
