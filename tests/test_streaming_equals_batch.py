"""The streaming engine must agree with the reference batch evaluator.

docs/semantics.md: "A verdict equals the one Rasa's own evaluator reaches on the
finished conversation, except where that evaluator contradicts the
reference's explicit text [...] Streaming changes only *when* a verdict is
known, never *what* it is."

* property tests: random scenarios and 1-4 random conversations in real wire
  shapes (ProtoJSON with nulls, flat rows), interleaved into one feed with
  re-sent duplicates and slightly reordered rows; the engine's final
  verdicts and ``decided_at`` equal :mod:`reference_batch`'s on each
  conversation's intended order, every decision is reported exactly once,
  never changes, and is reported while pushing the line that let the engine
  apply the deciding event (by the streaming contract's reorder buffer);
* example tests of the oracle itself on the reference's examples and on the
  decisions written down in docs/semantics.md (each divergence, the turn rule,
  the framework-tool list, the numeric rule, the buttons rule); the same
  examples then go through the engine, one test each, so a disagreement
  names its rule.

The engine is used only through its public API (``mantle_stream``'s
``load_scenario_text``, ``Evaluator``, ``Decision``, ``ConversationResult``).
"""

from __future__ import annotations

import contextlib
import importlib
import itertools
import json
import random
import warnings
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from reference_batch import (
    BLOCK_KINDS,
    ENVELOPE_KEYS,
    FRAMEWORK_TOOLS,
    SKILL_KINDS,
    SKIPPED_KINDS,
    assignment_exists,
    brute_force_assignment_exists,
    evaluate,
    evaluate_positions,
    matches_buttons,
    normalize,
    split_turns,
    starts_turn,
    values_equal,
)
from strategies import (
    ASSERTION_KINDS,
    FRAMEWORK_TOOL_NAMES,
    NON_TURN_TEXTS,
    OTHER_KINDS,
    TURN_TEXTS,
    Feed,
    abstract_conversations,
    call_specs,
    conversations,
    feeds,
    other_payload,
    render_flat,
    render_proto,
    scenario_text,
)

# When a property fails, Hypothesis's pytest plugin imports libcst (to suggest a
# patch), and libcst's import raises a DeprecationWarning (mypy_extensions.TypedDict)
# that this project's ``filterwarnings = ["error"]`` turns into a pytest
# INTERNALERROR which hides the falsifying example. Import it once, quietly.
with warnings.catch_warnings(), contextlib.suppress(ImportError):
    warnings.simplefilter("ignore", DeprecationWarning)
    importlib.import_module("hypothesis.extra._patching")

HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]
# Example counts follow the Hypothesis profile (tests/conftest.py): 50 and 25 in
# the test command's run (an example costs 50 to 600 ms, most of it drawing the
# feed), ten times as many with --hypothesis-profile=thorough; the ``slow``
# variants below run 2,000 (``pytest -m slow``). Shrinking a failure can take
# minutes, hence SHRINK_TIMEOUT: a pytest-timeout during shrinking would hide
# the falsifying example.
EXAMPLES = settings().max_examples  # the loaded profile's: 100 unless told
ORACLE_SETTINGS = settings(max_examples=EXAMPLES // 2, deadline=None, suppress_health_check=HEALTH)
PROPERTY_SETTINGS = settings(ORACLE_SETTINGS, max_examples=EXAMPLES // 4)
LONG_SETTINGS = settings(ORACLE_SETTINGS, max_examples=2000)

SHRINK_TIMEOUT = pytest.mark.timeout(900)  # 2,000 examples took 7 min (-m slow, busy machine)

Outcome = tuple[str, int | None]
FINISH = -1  # "reported by finish_all", in place of a line index


def engine() -> Any:
    """Import the engine lazily, so the oracle's own tests run without it."""
    import mantle_stream

    return mantle_stream


def slow(test: Callable[..., None]) -> Callable[..., None]:
    """Marked ``slow`` and skipped unless asked for with ``-m slow``."""
    test = pytest.mark.skipif(
        "'slow' not in config.getoption('markexpr')",
        reason="long run: pytest -m slow tests/test_streaming_equals_batch.py",
    )(test)
    marked: Callable[..., None] = pytest.mark.slow(test)
    return marked


# --------------------------------------------------------------------------
# Engine driver
# --------------------------------------------------------------------------


class Run:
    """One engine run over a feed: what each push reported, what finish_all did, the results.

    Line by line (``push_line``) unless ``chunk_sizes`` is given: then the
    lines go in chunks of that many complete lines (``push_chunk``).
    """

    def __init__(
        self,
        assertions: list[dict[str, Any]],
        lines: list[bytes],
        chunk_sizes: list[int] | None = None,
    ) -> None:
        ms = engine()
        scenario = ms.load_scenario_text(scenario_text(assertions), path="<generated>")
        evaluator = ms.Evaluator([scenario])
        self.per_push: list[list[Any]] = []
        if chunk_sizes is None:
            self.per_push = [list(evaluator.push_line(line)) for line in lines]
        else:
            start = 0
            for size in itertools.chain(chunk_sizes, itertools.repeat(len(lines))):
                if start >= len(lines):
                    break
                chunk = b"".join(line + b"\n" for line in lines[start : start + size])
                self.per_push.append(list(evaluator.push_chunk(chunk)))
                start += size
        self.at_finish: list[Any] = list(evaluator.finish_all())
        self.results = {result.conversation_id: result for result in evaluator.results()}

    def outcomes(self, conversation_id: str) -> list[tuple[int, str, str, int | None]]:
        """(index, kind, verdict, decided_at) of one conversation's final results."""
        result = self.results[conversation_id]
        return sorted((a.index, a.kind, a.verdict, a.decided_at) for a in result.assertions)


def expected_outcomes(
    assertions: list[dict[str, Any]], events: list[dict[str, Any]]
) -> list[tuple[int, str, str, int | None]]:
    """The oracle's (index, kind, verdict, decided_at) for one conversation."""
    verdicts = evaluate(assertions, events)
    return [
        (index, next(iter(assertion)), verdict, decided_at)
        for index, (assertion, (verdict, decided_at)) in enumerate(
            zip(assertions, verdicts, strict=True)
        )
    ]


def describe(feed: Feed) -> str:
    """The feed as a person reads it: the scenario's assertions and the JSON lines."""
    lines = "\n".join(line.decode() for line in feed.lines)
    return f"assertions: {json.dumps(feed.assertions)}\nlines:\n{lines}"


# --------------------------------------------------------------------------
# a. streaming == batch
# --------------------------------------------------------------------------

chunk_sizes = st.lists(st.integers(1, 40), max_size=8)


def check_final_results(feed: Feed, sizes: list[int] | None) -> None:
    run = Run(feed.assertions, feed.lines, sizes)
    assert set(run.results) == set(feed.conversations), describe(feed)
    for conversation_id in feed.conversations:
        expected = expected_outcomes(feed.assertions, feed.events(conversation_id))
        got = run.outcomes(conversation_id)
        assert got == expected, f"{conversation_id}\n{describe(feed)}"
        overall = "passed" if all(e[2] == "passed" for e in expected) else "failed"
        assert run.results[conversation_id].verdict == overall
        assert run.results[conversation_id].scenario == "gen"


@SHRINK_TIMEOUT
@ORACLE_SETTINGS
@given(feeds(), st.one_of(st.none(), chunk_sizes))
def test_final_results_equal_batch(feed: Feed, sizes: list[int] | None) -> None:
    """Final verdict and decided_at of every assertion of every conversation match."""
    check_final_results(feed, sizes)


@SHRINK_TIMEOUT
@PROPERTY_SETTINGS  # (test_final_results_equal_batch_longer draws these 2,000 times, -m slow)
@given(feeds(max_assertions=3, focus=True), st.one_of(st.none(), chunk_sizes))
def test_final_results_equal_batch_tools_within_one_turn(
    feed: Feed, sizes: list[int] | None
) -> None:
    """The same, on scenarios of tools_within_one_turn checks only, whose calls often suit
    the same runs (a greedy first fit would miss assignments) and whose windows often hold
    framework runs: the densest rules get examples of their own."""
    check_final_results(feed, sizes)


@SHRINK_TIMEOUT
@slow
@LONG_SETTINGS
@given(
    st.one_of(feeds(max_events=16), feeds(max_assertions=3, focus=True)),
    st.one_of(st.none(), chunk_sizes),
)
def test_final_results_equal_batch_longer(feed: Feed, sizes: list[int] | None) -> None:
    """The same, many more and longer feeds."""
    check_final_results(feed, sizes)


# --------------------------------------------------------------------------
# b. decisions are final, reported once, and reported when decided
# --------------------------------------------------------------------------


def check_reported_once(feed: Feed) -> None:
    run = Run(feed.assertions, feed.lines)
    reported: dict[tuple[str, int], Any] = {}
    for decision in itertools.chain(*run.per_push, run.at_finish):
        key = (decision.conversation_id, decision.index)
        assert key not in reported, f"reported twice: {key}\n{describe(feed)}"
        reported[key] = decision

    every_key = {(cid, i) for cid in feed.conversations for i in range(len(feed.assertions))}
    assert set(reported) == every_key, describe(feed)
    for (conversation_id, index), decision in reported.items():
        final = run.results[conversation_id].assertions
        (result,) = [a for a in final if a.index == index]
        assert (decision.verdict, decision.decided_at) == (result.verdict, result.decided_at)
        assert decision.kind == result.kind == next(iter(feed.assertions[index]))
        assert decision.scenario == "gen"
        assert decision.verdict in ("passed", "failed")


@SHRINK_TIMEOUT
@PROPERTY_SETTINGS
@given(feeds())
def test_decisions_reported_once_and_never_change(feed: Feed) -> None:
    """Each (conversation, index) is reported exactly once, equal to its final result."""
    check_reported_once(feed)


def application_points(feed: Feed, conversation_id: str, wait_for_zero: bool) -> dict[int, int]:
    """When the engine applies each row of one conversation, by the streaming contract.

    Returns row index -> index of the feed line whose push applies it
    (:data:`FINISH`: applied by finish_all). Sequenced rows go through a
    reorder buffer and are applied in sequence order: one at or below the
    last applied sequence (or already held) is a duplicate; a row without a
    sequence is applied on arrival unless rows are held, then placed right
    after the highest sequence that had arrived before it; one whose
    event_id was seen is a duplicate. Everything still held is applied at
    the end. The contract does not say where the buffer starts:
    ``wait_for_zero`` waits for sequence 0, otherwise the first sequenced
    row to arrive starts it (the feeds never move that row).
    """
    rows = feed.conversations[conversation_id].rows
    points: dict[int, int] = {}
    last: int | None = -1 if wait_for_zero else None
    held: list[tuple[int, int, int]] = []  # (sequence or placement, 0 sequenced / n, row)
    highest: int | None = None
    seen_ids: set[str] = set()
    placed = 0

    def release(line: int) -> None:
        nonlocal last
        while held:
            key, rank, row = min(held)
            if rank == 0:  # a sequenced row: the next one only
                if last is not None and key != last + 1:
                    return
                last = key
            elif last is None or key > last:  # placed after a sequence not applied yet
                return
            held.remove((key, rank, row))
            points[row] = line

    for line, (cid, row_index) in enumerate(feed.order):
        if cid != conversation_id:
            continue
        row = rows[row_index]
        if row.sequence is not None:
            if (last is not None and row.sequence <= last) or any(
                rank == 0 and key == row.sequence for key, rank, _ in held
            ):
                continue  # a duplicate
            held.append((row.sequence, 0, row_index))
            highest = row.sequence if highest is None else max(highest, row.sequence)
            release(line)
        else:
            if row.event_id is not None:
                if row.event_id in seen_ids:
                    continue  # a duplicate
                seen_ids.add(row.event_id)
            if not held:
                points[row_index] = line
            else:
                assert highest is not None
                placed += 1
                held.append((highest, placed, row_index))
    for _, _, row_index in sorted(held):
        points[row_index] = FINISH
    return points


def expected_report_points(feed: Feed, conversation_id: str, wait_for_zero: bool) -> dict[int, int]:
    """Assertion index -> the line (or FINISH) whose push must report its decision."""
    points = application_points(feed, conversation_id, wait_for_zero)
    events = feed.events(conversation_id)
    end = FINISH
    for position, raw in enumerate(events):
        event = normalize(raw)
        if event is not None and event["kind"] == "session_ended":
            end = points[position]
            break
    expected: dict[int, int] = {}
    for index, (_, deciding) in enumerate(evaluate_positions(feed.assertions, events)):
        expected[index] = end if deciding is None else points[deciding]
    return expected


def check_reported_at_deciding_event(feed: Feed) -> None:
    run = Run(feed.assertions, feed.lines)
    got: dict[str, dict[int, int]] = {cid: {} for cid in feed.conversations}
    for line, decisions in enumerate(run.per_push):
        for decision in decisions:
            assert decision.conversation_id == feed.order[line][0], describe(feed)
            got[decision.conversation_id][decision.index] = line
    for decision in run.at_finish:
        got[decision.conversation_id][decision.index] = FINISH
    for conversation_id, reported in got.items():
        models = [expected_report_points(feed, conversation_id, w) for w in (False, True)]
        assert reported in models, (
            f"{conversation_id}: reported at lines {reported}, expected {models[0]}"
            f" (or {models[1]})\n{describe(feed)}"
        )


@SHRINK_TIMEOUT
@PROPERTY_SETTINGS
@given(feeds())
def test_decisions_reported_at_the_deciding_event(feed: Feed) -> None:
    """A decision is reported by the push that applies its deciding event (by the reorder
    buffer's rules), or, decided by the end, by the push that applies session_ended or by
    finish_all."""
    check_reported_at_deciding_event(feed)


@SHRINK_TIMEOUT
@slow
@LONG_SETTINGS
@given(feeds(max_events=16))
def test_decisions_longer(feed: Feed) -> None:
    """Reported once, never changed, reported when decided: many more feeds."""
    check_reported_once(feed)
    check_reported_at_deciding_event(feed)


# --------------------------------------------------------------------------
# Hand-written events in the real wire shapes
# --------------------------------------------------------------------------

CID = "sim-7c1e"


def proto(
    sequence: int | None,
    kind: str,
    payload: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
    event_id: str | None = None,
) -> dict[str, Any]:
    """A ProtoJSON event: the whole envelope, unset fields null, metadata a JSON string."""
    return {
        "conversation_id": CID,
        "timestamp": 1767261600.0,
        "sequence": sequence,
        "event_id": event_id if event_id is not None else f"id-{sequence}",
        "metadata": None if metadata is None else json.dumps(metadata),
        "user_id": None,
        "session_id": None,
        "deployment_environment": None,
        kind: payload or {},
    }


def user(sequence: int | None, text: str | None) -> dict[str, Any]:
    return proto(sequence, "user", {"text": text, "parse_data": {}, "input_channel": "rest",
                                    "message_id": None, "anonymized_at": None})  # fmt: skip


def bot(
    sequence: int | None,
    text: str | None = None,
    utter: str | None = None,
    buttons: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    data = {} if buttons is None else {"buttons": buttons}
    metadata = None if utter is None else {"utter_action": utter}
    return proto(sequence, "bot", {"text": text, "data": data, "anonymized_at": None}, metadata)


def mset(sequence: int | None, key: str, value_json: str) -> dict[str, Any]:
    """A memory_set; the value as JSON text, exactly as written on the wire."""
    return proto(sequence, "memory_set", {"key": key, "value_json": value_json,
                                          "anonymized_at": None})  # fmt: skip


def mclear(sequence: int | None, key: str) -> dict[str, Any]:
    return proto(sequence, "memory_cleared", {"key": key})


def skill(sequence: int | None, kind: str, skill_id: str, **fields: str) -> dict[str, Any]:
    return proto(sequence, kind, {"skill_id": skill_id, **fields})


def run(
    sequence: int | None,
    name: str,
    source: str = "local",
    mcp_server: str | None = None,
    skill_id: str | None = None,
    arguments: str = "{}",
    is_error: bool = False,
) -> dict[str, Any]:
    """A tool_executed; arguments as JSON text; the skill in metadata."""
    payload = {"tool_name": name, "source": source, "arguments_json": arguments,
               "result_json": None, "is_error": is_error, "error_message": None,
               "mcp_server": mcp_server}  # fmt: skip
    metadata = None if skill_id is None else {"skill_id": skill_id}
    return proto(sequence, "tool_executed", payload, metadata)


def other(sequence: int | None, kind: str) -> dict[str, Any]:
    """An event of a kind no check reads."""
    return proto(sequence, kind, other_payload(kind, random.Random(0)))


def tool(name: str, source: str = "local", **fields: Any) -> dict[str, Any]:
    """A tool_executed call inside tools_within_one_turn."""
    return {"tool_executed": {"tool_name": name, "source": source, **fields}}


def within(*calls: dict[str, Any], extra: bool, ordered: bool | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"calls": list(calls), "allow_extra_calls": extra}
    if ordered is not None:
        spec["ordered"] = ordered
    return {"tools_within_one_turn": spec}


def check(assertion: dict[str, Any], events: list[dict[str, Any]]) -> Outcome:
    """The oracle's outcome for a single assertion."""
    (outcome,) = evaluate([assertion], events)
    return outcome


def wire_lines(events: list[dict[str, Any]]) -> list[bytes]:
    """Hand-written events as feed lines (flat ones get the conversation id as sender_id)."""
    return [
        json.dumps({**event, "sender_id": CID} if "event" in event else event).encode()
        for event in events
    ]


def engine_outcomes(
    assertions: list[dict[str, Any]], events: list[dict[str, Any]]
) -> list[Outcome]:
    """The engine's (verdict, decided_at) per assertion, over one conversation."""
    result = Run(assertions, wire_lines(events))
    return [(verdict, at) for _, _, verdict, at in result.outcomes(CID)]


# --------------------------------------------------------------------------
# The spec's literal example feed and the reference's examples
# --------------------------------------------------------------------------

# Verbatim: the example conversation of Mantle's event contract.
SPEC_EXAMPLE_LINES = [
    b'{"conversation_id":"sim-7c1e","timestamp":1767261600.01,"metadata":null,"event_id":"0199f0c2-7a10-7000-8000-000000000001","sequence":0,"session_started":{},"user_id":null,"deployment_environment":null,"session_id":null}',
    b'{"conversation_id":"sim-7c1e","timestamp":1767261601.20,"metadata":null,"event_id":"0199f0c2-7a10-7000-8000-000000000002","sequence":1,"user":{"text":"my card is damaged","parse_data":{},"input_channel":"rest","message_id":"m1","anonymized_at":null},"user_id":null,"deployment_environment":null,"session_id":null}',  # noqa: E501
    b'{"conversation_id":"sim-7c1e","timestamp":1767261601.90,"metadata":null,"event_id":"0199f0c2-7a10-7000-8000-000000000003","sequence":2,"skill_activated":{"skill_id":"card_replace"},"user_id":null,"deployment_environment":null,"session_id":null}',
    b'{"conversation_id":"sim-7c1e","timestamp":1767261601.91,"metadata":null,"event_id":"0199f0c2-7a10-7000-8000-000000000004","sequence":3,"stack":{"update":"[{\\"op\\": \\"add\\"}]"},"user_id":null,"deployment_environment":null,"session_id":null}',  # noqa: E501
    b'{"conversation_id":"sim-7c1e","timestamp":1767261602.40,"metadata":null,"event_id":"0199f0c2-7a10-7000-8000-000000000005","sequence":4,"memory_set":{"key":"card_replace.replacement_reason","value_json":"\\"damaged\\"","anonymized_at":null},"user_id":null,"deployment_environment":null,"session_id":null}',
    b'{"conversation_id":"sim-7c1e","timestamp":1767261603.10,"metadata":"{\\"skill_id\\": \\"card_replace\\"}","event_id":"0199f0c2-7a10-7000-8000-000000000006","sequence":5,"tool_executed":{"tool_name":"order_replacement","arguments_json":"{\\"shipping\\": \\"standard\\"}","source":"local","result_json":"{\\"ok\\": true}","is_error":false,"error_message":null,"mcp_server":null},"user_id":null,"deployment_environment":null,"session_id":null}',  # noqa: E501
    b'{"conversation_id":"sim-7c1e","timestamp":1767261603.50,"metadata":"{\\"utter_action\\": \\"utter_replacement_ordered\\"}","event_id":"0199f0c2-7a10-7000-8000-000000000007","sequence":6,"bot":{"text":"Your replacement card was ordered.","data":{"buttons":[{"title":"Track it","payload":"/track"}]},"anonymized_at":null},"user_id":null,"deployment_environment":null,"session_id":null}',  # noqa: E501
    b'{"conversation_id":"sim-7c1e","timestamp":1767261603.60,"metadata":null,"event_id":"0199f0c2-7a10-7000-8000-000000000008","sequence":7,"bot_turn_ended":{},"user_id":null,"deployment_environment":null,"session_id":null}',
    b'{"conversation_id":"sim-7c1e","timestamp":1767261610.00,"metadata":null,"event_id":"0199f0c2-7a10-7000-8000-000000000009","sequence":8,"skill_completed":{"skill_id":"card_replace"},"user_id":null,"deployment_environment":null,"session_id":null}',
    b'{"conversation_id":"sim-7c1e","timestamp":1767261611.00,"metadata":null,"event_id":"0199f0c2-7a10-7000-8000-00000000000a","sequence":9,"session_ended":{},"user_id":null,"deployment_environment":null,"session_id":null}',
]  # fmt: skip

# Every example assertion in Mantle's assertion reference, in order.
REFERENCE_EXAMPLES: list[dict[str, Any]] = [
    {"skill_activated": {"skill_id": "card_replace"}},
    {"skill_completed": {"skill_id": "card_replace"}},
    {"ordered_block_entered": {"skill_id": "card_replace", "block_id": "main"}},
    {
        "memory_was_set": [
            {"name": "card_replace.replacement_reason", "value": "damaged"},
            {"name": "card_replace.selected_card_id"},
        ]
    },
    {"memory_was_not_set": [{"name": "card_replace.fraud_review"}]},
    {"memory_was_cleared": [{"name": "card_replace.draft_order_id"}]},
    {
        "tool_executed": {
            "tool_name": "order_replacement",
            "source": "local",
            "skill_id": "card_replace",
            "arguments": {"shipping": "standard"},
        }
    },
    {"tool_executed": {"tool_name": "submit_transfer", "source": "mcp", "mcp_server": "banking"}},
    within(tool("check_balance"), tool("order_replacement"), extra=False, ordered=True),
    {"bot_uttered": {"text_matches": "replacement.*(ordered|placed)"}},
    {"bot_did_not_utter": {"utter_name": "utter_cannot_help"}},
    {
        "sequencing": [
            {"memory_was_set": "card_replace.replacement_reason"},
            {"tool_executed": {"tool_name": "order_replacement", "source": "local"}},
            {"skill_completed": {"skill_id": "card_replace"}},
        ]
    },
]

# The reference examples, plus the buttons and utter_name of its bot message,
# over the README's example conversation.
SPEC_EXAMPLE_ASSERTIONS = [
    *REFERENCE_EXAMPLES,
    {
        "bot_uttered": {
            "utter_name": "utter_replacement_ordered",
            "buttons": [{"title": "Track it"}],
        }
    },
]
SPEC_EXAMPLE_EXPECTED: list[Outcome] = [
    ("passed", 2),  # skill_activated
    ("passed", 8),  # skill_completed
    ("failed", None),  # no ordered_block_entered event
    ("failed", None),  # selected_card_id never written
    ("passed", None),  # fraud_review never written
    ("failed", None),  # draft_order_id never cleared
    ("passed", 5),  # order_replacement, local, skill card_replace (metadata), standard
    ("failed", None),  # no MCP run
    ("failed", None),  # check_balance never ran
    ("passed", 6),  # "Your replacement card was ordered."
    ("passed", None),  # utter_cannot_help never uttered
    ("passed", 8),  # memory 4 -> tool 5 -> skill_completed 8
    ("passed", 6),  # utter_action and data.buttons of that message
]


def test_oracle_on_spec_example_feed() -> None:
    """The oracle on the literal example feed and the reference's examples."""
    events = [json.loads(line) for line in SPEC_EXAMPLE_LINES]
    assert evaluate(SPEC_EXAMPLE_ASSERTIONS, events) == SPEC_EXAMPLE_EXPECTED


def test_engine_on_spec_example_feed() -> None:
    """The engine on the literal example feed agrees with the oracle."""
    result = Run(SPEC_EXAMPLE_ASSERTIONS, SPEC_EXAMPLE_LINES)
    got = [(verdict, decided_at) for _, _, verdict, decided_at in result.outcomes(CID)]
    assert got == SPEC_EXAMPLE_EXPECTED
    assert result.at_finish == []  # session_ended already decided everything
    assert result.results[CID].verdict == "failed"


# A conversation on which every reference example passes.
ALL_PASS_CONVERSATION = [
    proto(0, "session_started"),
    mset(1, "session_started_metadata", '{"is_simulation": true}'),
    user(2, "my card is damaged"),
    other(3, "stack"),
    skill(4, "skill_activated", "card_replace"),
    skill(5, "ordered_block_entered", "card_replace", block_id="main"),
    mset(6, "card_replace.replacement_reason", '"damaged"'),
    mset(7, "card_replace.selected_card_id", '"c-1"'),
    run(8, "check_balance"),
    run(9, "set_fields"),  # framework: not counted in tools_within_one_turn
    run(10, "order_replacement", skill_id="card_replace", arguments='{"shipping": "standard"}'),
    bot(11, "Your replacement was placed.", utter="utter_done"),
    other(12, "bot_turn_ended"),
    user(13, "thanks"),
    run(14, "submit_transfer", source="mcp", mcp_server="banking"),
    mclear(15, "card_replace.draft_order_id"),
    skill(16, "skill_completed", "card_replace"),
]
ALL_PASS_EXPECTED: list[Outcome] = [
    ("passed", 4),
    ("passed", 16),
    ("passed", 5),
    ("passed", 7),  # AND of entries: the later of 6 and 7
    ("passed", None),
    ("passed", 15),
    ("passed", 10),
    ("passed", 14),
    ("passed", 13),  # the turn holds exactly the two counted calls; the user at 13 ends it
    ("passed", 11),
    ("passed", None),
    ("passed", 16),
]


def flat(raw: dict[str, Any]) -> dict[str, Any]:
    """A ProtoJSON event re-written as a flat tracker event (by hand, not by the oracle)."""
    (kind,) = [key for key in raw if key not in ENVELOPE_KEYS]
    body = dict(raw[kind])
    body.pop("anonymized_at", None)
    if "result_json" in body:
        result = body.pop("result_json")
        body["result"] = None if result is None else json.loads(result)
    if "value_json" in body:
        body["value"] = json.loads(body.pop("value_json"))
    if "arguments_json" in body:
        body["arguments"] = json.loads(body.pop("arguments_json"))
        if body["mcp_server"] is None:
            del body["mcp_server"]
    event = {"event": kind, "timestamp": raw["timestamp"], **body}
    if raw["metadata"] is not None and json.loads(raw["metadata"]):
        event["metadata"] = json.loads(raw["metadata"])
    return event


def test_oracle_reference_examples_all_pass() -> None:
    """Every reference example passes, each at the event that decides it."""
    assert evaluate(REFERENCE_EXAMPLES, ALL_PASS_CONVERSATION) == ALL_PASS_EXPECTED


def test_oracle_flat_events_judge_like_protojson() -> None:
    """The same conversation as flat tracker events: same verdicts, no sequences."""
    events = [flat(event) for event in ALL_PASS_CONVERSATION]
    assert evaluate(REFERENCE_EXAMPLES, events) == [(v, None) for v, _ in ALL_PASS_EXPECTED]


def test_oracle_reads_a_tracker_document() -> None:
    """A tracker document's events, older CALM rows mixed in, judge like the rest; the
    end of the list ends the conversation."""
    legacy = [
        {"event": "action", "timestamp": 1.0, "name": "action_listen", "policy": None},
        {"event": "slot", "timestamp": 1.0, "name": "requested_slot", "value": None},
        {"event": "flow_started", "timestamp": 1.0, "flow_id": "transfer_money"},
        {"event": "stack", "timestamp": 1.0, "update": "[]"},
    ]
    events = [flat(event) for event in ALL_PASS_CONVERSATION]
    document: dict[str, Any] = {
        "sender_id": CID,
        "events": [*legacy[:2], *events[:9], *legacy[2:], *events[9:]],
    }
    assert evaluate(REFERENCE_EXAMPLES, document["events"]) == [
        (v, None) for v, _ in ALL_PASS_EXPECTED
    ]


def test_engine_reference_examples_all_pass() -> None:
    assert engine_outcomes(REFERENCE_EXAMPLES, ALL_PASS_CONVERSATION) == ALL_PASS_EXPECTED


def test_engine_flat_events_one_per_line() -> None:
    events = [flat(event) for event in ALL_PASS_CONVERSATION]
    assert engine_outcomes(REFERENCE_EXAMPLES, events) == [(v, None) for v, _ in ALL_PASS_EXPECTED]


# --------------------------------------------------------------------------
# c. the rules of docs/semantics.md, example by example (oracle, then engine)
# --------------------------------------------------------------------------

SK = "card_replace"
# (name, assertion, events, expected outcome)
RULE_EXAMPLES: list[tuple[str, dict[str, Any], list[dict[str, Any]], Outcome]] = [
    # --- numbers by value, booleans only booleans (Value equality; divergence 1)
    ("memory 1 == 1.0", {"memory_was_set": [{"name": "k.a", "value": 1}]},
     [mset(0, "k.a", "1.0")], ("passed", 0)),
    ("memory 42.0 == 42", {"memory_was_set": [{"name": "k.a", "value": 42.0}]},
     [mset(0, "k.a", "42")], ("passed", 0)),
    ("divergence: memory true != 1", {"memory_was_set": [{"name": "k.a", "value": 1}]},
     [mset(0, "k.a", "true")], ("failed", None)),
    ("memory false != 0", {"memory_was_set": [{"name": "k.a", "value": 0}]},
     [mset(0, "k.a", "false")], ("failed", None)),
    ("memory 5 != '5'", {"memory_was_set": [{"name": "k.a", "value": 5}]},
     [mset(0, "k.a", '"5"')], ("failed", None)),
    ("memory true != 'true'", {"memory_was_set": [{"name": "k.a", "value": True}]},
     [mset(0, "k.a", '"true"')], ("failed", None)),
    ("memory nested numbers by value",
     {"memory_was_set": [{"name": "k.a", "value": {"a": [1, {"b": 2}]}}]},
     [mset(0, "k.a", '{"a": [1.0, {"b": 2.0}]}')], ("passed", 0)),
    ("memory nested true != 1", {"memory_was_set": [{"name": "k.a", "value": {"a": [1]}}]},
     [mset(0, "k.a", '{"a": [true]}')], ("failed", None)),
    ("memory object key order", {"memory_was_set": [{"name": "k.a", "value": {"a": 1, "b": 2}}]},
     [mset(0, "k.a", '{"b": 2, "a": 1}')], ("passed", 0)),
    ("memory list order", {"memory_was_set": [{"name": "k.a", "value": [1, 2]}]},
     [mset(0, "k.a", "[2, 1]")], ("failed", None)),
    ("not_set value: last write 1.0 equals 1",
     {"memory_was_not_set": [{"name": "k.a", "value": 1}]},
     [mset(0, "k.a", '"x"'), mset(1, "k.a", "1.0")], ("failed", None)),
    ("not_set value: last write true is not 1",
     {"memory_was_not_set": [{"name": "k.a", "value": 1}]},
     [mset(0, "k.a", "1"), mset(1, "k.a", "true")], ("passed", None)),
    ("not_set value: clears do not count as writes",
     {"memory_was_not_set": [{"name": "k.a", "value": 1}]},
     [mset(0, "k.a", "1"), mclear(1, "k.a")], ("failed", None)),
    ("not_set no value: the first write fails it",
     {"memory_was_not_set": [{"name": "k.b", "value": 1}, {"name": "k.a"}]},
     [mset(0, "k.b", "2"), mset(1, "k.a", "null"), mset(2, "k.a", "3")], ("failed", 1)),
    ("session_started_metadata is a key like any other",
     {"memory_was_set": [{"name": "session_started_metadata"}]},
     [mset(0, "session_started_metadata", '{"is_simulation": true}')], ("passed", 0)),
    ("tool argument 5 == 5.0",
     {"tool_executed": {"tool_name": "pay", "source": "local", "arguments": {"amount": 5}}},
     [run(0, "pay", arguments='{"amount": 5.0}')], ("passed", 0)),
    ("tool argument true != 1",
     {"tool_executed": {"tool_name": "pay", "source": "local", "arguments": {"ok": True}}},
     [run(0, "pay", arguments='{"ok": 1}')], ("failed", None)),
    # --- divergence: bot checks with several fields need one message meeting all
    ("divergence: bot_uttered fields on different messages",
     {"bot_uttered": {"utter_name": "utter_a", "text_matches": "hello"}},
     [bot(0, "hello there"), bot(1, "bye", utter="utter_a")], ("failed", None)),
    ("bot_uttered fields on one message",
     {"bot_uttered": {"utter_name": "utter_a", "text_matches": "hello"}},
     [bot(0, "hello there"), bot(1, "bye", utter="utter_a"), bot(2, "oh hello", utter="utter_a")],
     ("passed", 2)),
    ("divergence: bot_did_not_utter fields on different messages",
     {"bot_did_not_utter": {"utter_name": "utter_a", "text_matches": "hello"}},
     [bot(0, "hello there"), bot(1, "bye", utter="utter_a")], ("passed", None)),
    ("bot_did_not_utter fields on one message",
     {"bot_did_not_utter": {"utter_name": "utter_a", "text_matches": "hello"}},
     [bot(0, "bye", utter="utter_a"), bot(1, "hello", utter="utter_a")], ("failed", 1)),
    ("utter_name is metadata.utter_action", {"bot_uttered": {"utter_name": "utter_a"}},
     [bot(0, "utter_a"), bot(1, None, utter="utter_a")], ("passed", 1)),
    # --- divergence: a regular expression never matches a message without text
    ("divergence: regex on a message with no text", {"bot_uttered": {"text_matches": ".*"}},
     [bot(0, None, utter="utter_a")], ("failed", None)),
    ("divergence: bot_did_not_utter regex, no text", {"bot_did_not_utter": {"text_matches": ".*"}},
     [bot(0, None)], ("passed", None)),
    ("regex on an empty text", {"bot_uttered": {"text_matches": "^$"}},
     [bot(0, None), bot(1, "")], ("passed", 1)),
    ("regex searched anywhere", {"bot_uttered": {"text_matches": "card"}},
     [bot(0, "Your card is on its way")], ("passed", 0)),
    # --- buttons: at least as many carried; title equals; payload when listed
    ("divergence: more buttons listed than carried",
     {"bot_uttered": {"buttons": [{"title": "Yes"}, {"title": "No"}]}},
     [bot(0, "?", buttons=[{"title": "Yes", "payload": "/affirm"}])], ("failed", None)),
    ("more buttons carried than listed", {"bot_uttered": {"buttons": [{"title": "Yes"}]}},
     [bot(0, "?", buttons=[{"title": "Yes", "payload": "/a"}, {"title": "No", "payload": "/d"}])],
     ("passed", 0)),
    ("divergence: payload omitted matches any payload",
     {"bot_uttered": {"buttons": [{"title": "Yes"}]}},
     [bot(0, "?", buttons=[{"title": "Yes", "payload": "/affirm"}])], ("passed", 0)),
    ("payload listed must equal",
     {"bot_uttered": {"buttons": [{"title": "Yes", "payload": "/affirm"}]}},
     [bot(0, "?", buttons=[{"title": "Yes", "payload": "/deny"}]),
      bot(1, "?", buttons=[{"title": "Yes", "payload": ""}])], ("failed", None)),
    ("buttons at their positions", {"bot_uttered": {"buttons": [{"title": "No"}]}},
     [bot(0, "?", buttons=[{"title": "Yes", "payload": ""}, {"title": "No", "payload": ""}])],
     ("failed", None)),
    ("no data.buttons carries no buttons", {"bot_uttered": {"buttons": [{"title": "Yes"}]}},
     [bot(0, "Yes")], ("failed", None)),
    ("divergence: bot_did_not_utter buttons elsewhere do not match",
     {"bot_did_not_utter": {"buttons": [{"title": "No"}]}},
     [bot(0, "?", buttons=[{"title": "Yes", "payload": ""}, {"title": "No", "payload": ""}])],
     ("passed", None)),
    ("bot_did_not_utter buttons at their positions",
     {"bot_did_not_utter": {"buttons": [{"title": "No"}]}},
     [bot(0, "?", buttons=[{"title": "No", "payload": "/deny"}, {"title": "Yes", "payload": ""}])],
     ("failed", 0)),
    # --- divergence: a listed null argument needs the key
    ("divergence: arguments {k: null}, run without k",
     {"tool_executed": {"tool_name": "t", "source": "local", "arguments": {"k": None}}},
     [run(0, "t", arguments='{"j": null}')], ("failed", None)),
    ("arguments {k: null}, run with k null",
     {"tool_executed": {"tool_name": "t", "source": "local", "arguments": {"k": None}}},
     [run(0, "t", arguments='{"j": 1}'), run(1, "t", arguments='{"k": null, "j": 1}')],
     ("passed", 1)),
    # --- tool_executed fields
    ("skill_id from metadata; a run without one never matches",
     {"tool_executed": {"tool_name": "t", "source": "local", "skill_id": SK}},
     [run(0, "t"), run(1, "t", skill_id="other"), run(2, "t", skill_id=SK)], ("passed", 2)),
    ("mcp: server equals",
     {"tool_executed": {"tool_name": "t", "source": "mcp", "mcp_server": "banking"}},
     [run(0, "t"), run(1, "t", source="mcp", mcp_server="cards"),
      run(2, "t", source="mcp", mcp_server="banking")], ("passed", 2)),
    ("is_error equals", {"tool_executed": {"tool_name": "t", "source": "local", "is_error": True}},
     [run(0, "t"), run(1, "t", is_error=True)], ("passed", 1)),
    ("a standalone check sees framework runs",
     {"tool_executed": {"tool_name": "complete_skill", "source": "mcp", "mcp_server": "m"}},
     [run(0, "complete_skill"), run(1, "complete_skill", source="mcp", mcp_server="m")],
     ("passed", 1)),
    # --- divergence: maximum matching, not greedy first fit
    ("divergence: unordered needs a maximum matching",
     within(tool("lookup"), tool("lookup", arguments={"id": 1}), extra=True),
     [user(0, "hi"), run(1, "lookup", arguments='{"id": 1}'), run(2, "set_fields"),
      run(3, "lookup", arguments='{"id": 2}')], ("passed", 3)),
    ("maximum matching without extra calls",
     within(tool("lookup"), tool("lookup", arguments={"id": 1}), extra=False),
     [run(0, "lookup", arguments='{"id": 1}'), run(1, "lookup", arguments='{"id": 2}'),
      user(2, "next")], ("passed", 2)),
    ("ordered: runs in the listed order", within(tool("a"), tool("b"), extra=True, ordered=True),
     [run(0, "b"), run(1, "a"), run(2, "x"), run(3, "b")], ("passed", 3)),
    ("unordered: any order", within(tool("a"), tool("b"), extra=True, ordered=False),
     [run(0, "b"), run(1, "a"), run(2, "x"), run(3, "b")], ("passed", 1)),
    ("ordered without extra calls",
     within(tool("a"), tool("b"), extra=False, ordered=True),
     [run(0, "b"), run(1, "a"), user(2, "next"), run(3, "a"), run(4, "b")], ("passed", None)),
    ("no extra calls: an extra counted run fails the turn",
     within(tool("a"), tool("b"), extra=False),
     [run(0, "a"), run(1, "search_knowledge"), run(2, "b"), user(3, "next"),
      run(4, "a"), run(5, "cannot_help"), run(6, "b")], ("failed", None)),
    ("each run counts toward one call", within(tool("a"), tool("a"), extra=True),
     [run(0, "a"), user(1, "next"), run(2, "a"), run(3, "a")], ("passed", 3)),
    # --- divergence: complete_skill (and every framework tool) is not counted
    ("divergence: complete_skill is not an extra call",
     within(tool("a"), tool("b"), extra=False),
     [user(0, "go"), run(1, "a"), run(2, "complete_skill"), run(3, "b"), user(4, "next")],
     ("passed", 4)),
    ("a framework tool never satisfies a listed call",
     within(tool("a"), tool("complete_skill"), extra=True),
     [run(0, "a"), run(1, "complete_skill")], ("failed", None)),
    # --- the user-turn rule
    ("turn rule: empty, blank, null and /commands stay in the turn",
     within(tool("a"), tool("b"), extra=False),
     [user(0, "hi"), run(1, "a"), user(2, ""), user(3, "/session_start"), user(4, "  \n"),
      user(5, None), user(6, " /restart"), run(7, "b"), user(8, "next")], ("passed", 8)),
    ("turn rule: a real message starts a turn", within(tool("a"), tool("b"), extra=True),
     [user(0, "hi"), run(1, "a"), user(2, "a/b"), run(3, "b")], ("failed", None)),
    ("turn rule: text is stripped first", within(tool("a"), tool("b"), extra=True),
     [run(0, "a"), user(1, "  ok  "), run(2, "b")], ("failed", None)),
    ("turn 0 counts as a turn", within(tool("a"), tool("b"), extra=False),
     [other(0, "stack"), run(1, "a"), run(2, "b"), user(3, "hi"), run(4, "c")], ("passed", 3)),
    ("no extra calls: the last turn is judged at the end",
     within(tool("a"), tool("b"), extra=False),
     [user(0, "hi"), run(1, "b"), run(2, "a"), bot(3, "done"), user(4, "/stop")],
     ("passed", None)),
    # --- skills and blocks
    ("step_id narrows", {"skill_cancelled": {"skill_id": SK, "step_id": "collect"}},
     [skill(0, "skill_cancelled", SK, step_id=""), skill(1, "skill_cancelled", SK,
      step_id="autonomous"), skill(2, "skill_cancelled", SK, step_id="collect")], ("passed", 2)),
    ("a block event is not a skill event", {"skill_completed": {"skill_id": SK}},
     [skill(0, "ordered_block_completed", SK, block_id="main", step_id="")], ("failed", None)),
    ("block id and skill id", {"ordered_block_resumed": {"skill_id": SK, "block_id": "main"}},
     [skill(0, "ordered_block_resumed", "other", block_id="main", step_id=""),
      skill(1, "ordered_block_resumed", SK, block_id="submit", step_id=""),
      skill(2, "ordered_block_resumed", SK, block_id="main", step_id="s1")], ("passed", 2)),
    # --- memory writes and clears
    ("written then cleared: was_cleared passes", {"memory_was_cleared": [{"name": "k.a"}]},
     [mset(0, "k.a", "1"), mclear(2, "k.a")], ("passed", 2)),
    ("written then cleared: was_not_set fails", {"memory_was_not_set": [{"name": "k.a"}]},
     [mset(0, "k.a", "1"), mclear(2, "k.a")], ("failed", 0)),
    ("several entries: AND, at the latest first match",
     {"memory_was_cleared": [{"name": "k.b"}, {"name": "k.a"}]},
     [mclear(0, "k.a"), mclear(1, "k.a"), mclear(2, "k.b"), mclear(3, "k.b")], ("passed", 2)),
    # --- sequencing
    ("sequencing: each step strictly after the previous one",
     {"sequencing": [{"memory_was_set": "k.a"}, {"memory_was_set": "k.a"}]},
     [mset(0, "k.a", "1"), skill(1, "skill_completed", SK), mset(3, "k.a", "2"),
      mset(5, "k.a", "3")], ("passed", 3)),
    ("sequencing: order matters",
     {"sequencing": [{"memory_was_cleared": "k.a"}, {"skill_completed": {"skill_id": SK}}]},
     [skill(0, "skill_completed", SK), mclear(1, "k.a")], ("failed", None)),
    ("sequencing: tool steps see framework runs",
     {"sequencing": [{"tool_executed": {"tool_name": "listen", "source": "local"}},
                     {"skill_activated": {"skill_id": SK}}]},
     [run(0, "listen"), skill(1, "skill_activated", SK)], ("passed", 1)),
    # --- what is not read, and the end
    ("skipped, unknown and legacy kinds are ignored", {"bot_did_not_utter": {"text_matches": ".*"}},
     [other(i, kind) for i, kind in enumerate(OTHER_KINDS)], ("passed", None)),
    ("events after session_ended are ignored", {"skill_activated": {"skill_id": SK}},
     [user(0, "hi"), proto(1, "session_ended"), skill(2, "skill_activated", SK)],
     ("failed", None)),
    ("a deciding event without a sequence: decided_at null",
     {"skill_activated": {"skill_id": SK}},
     [user(0, "hi"), skill(None, "skill_activated", SK)], ("passed", None)),
    ("turn ended by a user event without a sequence",
     within(tool("a"), tool("b"), extra=False),
     [user(0, "hi"), run(1, "a"), run(2, "b"), {**user(None, "next"), "event_id": "u-x"},
      run(3, "c")], ("passed", None)),
]  # fmt: skip
RULE_IDS = [name for name, *_ in RULE_EXAMPLES]


@pytest.mark.parametrize(("name", "assertion", "events", "expected"), RULE_EXAMPLES, ids=RULE_IDS)
def test_oracle_rule(
    name: str, assertion: dict[str, Any], events: list[dict[str, Any]], expected: Outcome
) -> None:
    """The oracle on one written-down rule of docs/semantics.md."""
    assert check(assertion, events) == expected


@pytest.mark.parametrize(("name", "assertion", "events", "expected"), RULE_EXAMPLES, ids=RULE_IDS)
def test_engine_rule(
    name: str, assertion: dict[str, Any], events: list[dict[str, Any]], expected: Outcome
) -> None:
    """The engine on the same example (through push_line, then finish_all)."""
    assert engine_outcomes([assertion], events) == [expected]


# The streaming contract's delivery rules, example by example: (name, assertion,
# rows in delivery order, the intended (de-duplicated) order, expected outcome).
A_THEN_B = within(tool("a"), tool("b"), extra=True)
SLOT_ROW = {"event": "slot", "timestamp": 1.0, "name": "requested_slot", "value": None}
DELIVERY_EXAMPLES: list[
    tuple[str, dict[str, Any], list[dict[str, Any]], list[dict[str, Any]], Outcome]
] = [
    ("a re-sent sequenced row is applied once", within(tool("a"), tool("b"), extra=False),
     [user(0, "hi"), run(1, "a"), run(2, "b"), run(2, "b"), user(3, "next")],
     [user(0, "hi"), run(1, "a"), run(2, "b"), user(3, "next")], ("passed", 3)),
    ("a re-sent row without a sequence is applied once (event_id)",
     within(tool("a"), tool("b"), extra=False),
     [user(0, "hi"), {**run(None, "a"), "event_id": "x"}, {**run(None, "a"), "event_id": "x"},
      run(1, "b"), user(2, "next")],
     [user(0, "hi"), {**run(None, "a"), "event_id": "x"}, run(1, "b"), user(2, "next")],
     ("passed", 2)),
    ("rows out of order are applied in sequence order",
     {"sequencing": [{"memory_was_set": "k.a"}, {"skill_completed": {"skill_id": SK}}]},
     [user(0, "hi"), skill(2, "skill_completed", SK), mset(1, "k.a", "1")],
     [user(0, "hi"), mset(1, "k.a", "1"), skill(2, "skill_completed", SK)], ("passed", 2)),
    ("a row without a sequence waits behind a gap", A_THEN_B,
     [user(0, "hi"), run(1, "a"), run(3, "b"), {**user(None, "next"), "event_id": "n"}],
     [user(0, "hi"), run(1, "a"), run(3, "b"), {**user(None, "next"), "event_id": "n"}],
     ("passed", 3)),
    ("a flat row waits behind a gap", A_THEN_B,
     [user(0, "hi"), run(1, "a"), run(3, "b"), {"event": "user", "text": "next"}],
     [user(0, "hi"), run(1, "a"), run(3, "b"), {"event": "user", "text": "next"}],
     ("passed", 3)),
    ("an unknown kind held behind a gap is skipped", {"skill_activated": {"skill_id": SK}},
     [user(0, "hi"), other(2, "agent_handoff"), skill(3, "skill_activated", SK)],
     [user(0, "hi"), other(2, "agent_handoff"), skill(3, "skill_activated", SK)],
     ("passed", 3)),
    ("an unknown kind arriving early is skipped", {"skill_activated": {"skill_id": SK}},
     [user(0, "hi"), other(2, "agent_handoff"), skill(1, "skill_activated", SK)],
     [user(0, "hi"), skill(1, "skill_activated", SK), other(2, "agent_handoff")],
     ("passed", 1)),
    ("a legacy flat row held behind a gap is skipped", {"skill_activated": {"skill_id": SK}},
     [user(0, "hi"), other(2, "stack"), SLOT_ROW, skill(3, "skill_activated", SK)],
     [user(0, "hi"), other(2, "stack"), SLOT_ROW, skill(3, "skill_activated", SK)],
     ("passed", 3)),
]  # fmt: skip
DELIVERY_IDS = [name for name, *_ in DELIVERY_EXAMPLES]


@pytest.mark.parametrize(
    ("name", "assertion", "delivered", "intended", "expected"), DELIVERY_EXAMPLES, ids=DELIVERY_IDS
)
def test_oracle_delivery(
    name: str,
    assertion: dict[str, Any],
    delivered: list[dict[str, Any]],
    intended: list[dict[str, Any]],
    expected: Outcome,
) -> None:
    """The oracle judges the intended order."""
    assert check(assertion, intended) == expected


@pytest.mark.parametrize(
    ("name", "assertion", "delivered", "intended", "expected"), DELIVERY_EXAMPLES, ids=DELIVERY_IDS
)
def test_engine_delivery(
    name: str,
    assertion: dict[str, Any],
    delivered: list[dict[str, Any]],
    intended: list[dict[str, Any]],
    expected: Outcome,
) -> None:
    """The engine, given the rows in delivery order, judges the intended order."""
    assert engine_outcomes([assertion], delivered) == [expected]


@pytest.mark.parametrize("name", FRAMEWORK_TOOL_NAMES)
@pytest.mark.parametrize("source", ["local", "mcp"])
def test_oracle_framework_tools_are_not_counted(name: str, source: str) -> None:
    """Every framework tool, whatever its source, is neither an extra call nor a listed one;
    search_knowledge and cannot_help are counted like any tool."""
    server = "m" if source == "mcp" else None
    events = [user(0, "go"), run(1, "a"), run(2, name, source, server), run(3, "b"),
              user(4, "next")]  # fmt: skip
    assert check(within(tool("a"), tool("b"), extra=False), events) == ("passed", 4)
    listed = tool(name, source, **({"mcp_server": server} if server else {}))
    assert check(within(tool("a"), listed, extra=True), events) == ("failed", None)
    assert check({"tool_executed": listed["tool_executed"]}, events) == ("passed", 2)
    for counted in ("search_knowledge", "cannot_help"):
        extra = [*events[:2], run(2, counted, source, server), *events[3:]]
        assert check(within(tool("a"), tool("b"), extra=False), extra) == ("failed", None)
    assert set(FRAMEWORK_TOOL_NAMES) == FRAMEWORK_TOOLS


@pytest.mark.parametrize("name", FRAMEWORK_TOOL_NAMES)
def test_engine_framework_tools_are_not_counted(name: str) -> None:
    for source, server in (("local", None), ("mcp", "m")):
        events = [user(0, "go"), run(1, "a"), run(2, name, source, server), run(3, "b"),
                  user(4, "next")]  # fmt: skip
        listed = tool(name, source, **({"mcp_server": server} if server else {}))
        assertions = [
            within(tool("a"), tool("b"), extra=False),
            within(tool("a"), listed, extra=True),
            {"tool_executed": listed["tool_executed"]},
        ]
        expected = [("passed", 4), ("failed", None), ("passed", 2)]
        assert engine_outcomes(assertions, events) == expected, (name, source)


@pytest.mark.parametrize("text", TURN_TEXTS)
def test_oracle_turn_texts(text: str) -> None:
    assert starts_turn(normalize(user(0, text)) or {})


@pytest.mark.parametrize("text", NON_TURN_TEXTS)
def test_oracle_non_turn_texts(text: str | None) -> None:
    events = [run(0, "a"), user(1, text), run(2, "b")]
    assert not starts_turn(normalize(events[1]) or {})
    assert len(split_turns([normalize(e) or {} for e in events])) == 1


@pytest.mark.parametrize(
    ("expected", "actual", "equal"),
    [
        (True, "true", False),
        (5, "5", False),
        (1, True, False),
        (True, 1, False),
        (0, False, False),
        (1.0, True, False),
        (5, 5.0, True),
        (5.0, 5, True),
        (5, 5, True),
        (0, 0.0, True),
        (True, True, True),
        (False, False, True),
        (None, None, True),
        (None, 0, False),
        ("", None, False),
        ("damaged", "damaged", True),
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}, True),
        ({"a": 1}, {"a": 1.0}, True),
        ({"a": 1}, {"a": 1, "b": 2}, False),
        ({"a": 1}, {"a": True}, False),
        ([1, 2], [1, 2], True),
        ([1, 2], [1.0, 2.0], True),
        ([1, 2], [2, 1], False),
        ([1, 2], [1, 2, 3], False),
        ([1], [True], False),
        ([], {}, False),
    ],
)
def test_oracle_value_equality(expected: Any, actual: Any, equal: bool) -> None:
    """Numbers by value, booleans only booleans (docs/semantics.md, Value equality)."""
    assert values_equal(expected, actual) is equal
    assert values_equal(actual, expected) is equal


@pytest.mark.parametrize(
    ("listed", "carried", "match"),
    [
        ([{"title": "Yes"}], [{"title": "Yes", "payload": "/a"}], True),
        ([{"title": "Yes"}], [{"title": "Yes", "payload": ""}], True),
        ([{"title": "Yes", "payload": "/a"}], [{"title": "Yes", "payload": "/a"}], True),
        ([{"title": "Yes", "payload": "/a"}], [{"title": "Yes", "payload": "/b"}], False),
        ([{"title": "Yes"}], [{"title": "No", "payload": ""}, {"title": "Yes", "payload": ""}],
         False),
        ([{"title": "Yes"}, {"title": "No"}], [{"title": "Yes", "payload": ""}], False),
        ([{"title": "Yes"}], [{"title": "Yes", "payload": ""}, {"title": "No", "payload": ""}],
         True),
        ([{"title": "Yes"}], [], False),
    ],
)  # fmt: skip
def test_oracle_buttons_rule(
    listed: list[dict[str, str]], carried: list[dict[str, str]], match: bool
) -> None:
    assert matches_buttons(listed, carried) is match


@settings(max_examples=200, deadline=None, suppress_health_check=HEALTH)
@given(
    st.lists(call_specs, min_size=2, max_size=3),
    abstract_conversations(max_events=10),
    st.booleans(),
)
def test_oracle_matching_equals_brute_force(
    calls: list[dict[str, Any]], abstract: list[dict[str, Any]], ordered: bool
) -> None:
    """The oracle's maximum matching (and ordered greedy) agrees with trying every choice."""
    events = [
        normalize(render_proto("c", event, 0, "e", 0.0, random.Random(0))) for event in abstract
    ]
    runs = [e for e in events if e is not None and e["kind"] == "tool_executed"]
    assert assignment_exists(calls, runs, ordered) == brute_force_assignment_exists(
        calls, runs, ordered
    )


# --------------------------------------------------------------------------
# The generators themselves
# --------------------------------------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=HEALTH)
@given(abstract_conversations(max_events=10), st.randoms(use_true_random=False))
def test_wire_shapes_normalize_to_the_drawn_event(abstract: list[dict[str, Any]], rnd: Any) -> None:
    """ProtoJSON and flat renderings of an event normalize to the event drawn: the
    strategies and the oracle read the wire shapes the same way."""
    for event in abstract:
        as_proto = render_proto("c", event, 7, "e-7", 1.5, rnd)
        as_flat = render_flat(event, 1.5, rnd, sender_id="c")
        # ProtoJSON: one payload key, every envelope field present, metadata a string or null.
        assert len(as_proto) == 9
        assert as_proto["metadata"] is None or isinstance(as_proto["metadata"], str)
        got_proto, got_flat = normalize(as_proto), normalize(as_flat)
        if event["kind"] in OTHER_KINDS:
            assert got_proto is None and got_flat is None
            continue
        assert got_proto is not None and got_flat is not None
        assert got_proto["sequence"] == 7 and got_flat["sequence"] is None
        for got in (got_proto, got_flat):
            for key, value in event.items():
                if key == "buttons":
                    assert got[key] == (value or [])
                else:
                    assert values_equal(got[key], value), (key, got, event)
                    assert json.dumps(got[key]) == json.dumps(value)  # 1 stays 1, 1.0 stays 1.0


def feed_features(feed: Feed) -> set[tuple[Any, ...]]:
    """What a feed exercises: assertion kinds and options, event kinds and wire shapes."""
    found: set[tuple[Any, ...]] = set()
    for assertion in feed.assertions:
        ((kind, body),) = assertion.items()
        found.add((kind,))
        if isinstance(body, dict):
            found.update((kind, field) for field in body)
        if kind == "tool_executed":
            found.add((kind, "source", body["source"]))
            found.add((kind, "tool_name", body["tool_name"]))
            found.update((kind, "argument", repr(v)) for v in body.get("arguments", {}).values())
        if kind in ("memory_was_set", "memory_was_not_set", "memory_was_cleared"):
            found.add((kind, "entries", len(body)))
            found.update((kind, field) for entry in body for field in entry)
        if kind == "tools_within_one_turn":
            found.add((kind, "calls", len(body["calls"])))
            found.add((kind, "allow_extra_calls", body["allow_extra_calls"]))
            found.add((kind, "ordered", body.get("ordered")))
            found.update((kind, "source", c["tool_executed"]["source"]) for c in body["calls"])
        if kind == "sequencing":
            found.add((kind, "steps", len(body)))
            for step in body:
                (step_kind,) = step
                if step_kind in SKILL_KINDS:
                    step_kind = "skill_*"
                elif step_kind in BLOCK_KINDS:
                    step_kind = "ordered_block_*"
                found.add((kind, step_kind))
    if len(feed.conversations) > 1:
        found.add(("interleaved",))
    for conversation in feed.conversations.values():
        rows = conversation.rows
        for row in rows:
            found.add(("event", row.kind))
            found.add(("shape", "flat" if row.flat else "seq" if row.sequence is not None
                       else "null seq"))  # fmt: skip
            if not row.flat and row.event_id is None:
                found.add(("shape", "null event_id"))
            if not row.flat:
                found.add(("metadata", type(row.raw["metadata"]).__name__))
            event = normalize(row.raw)
            if event is None:
                continue
            if event["kind"] == "user":
                text = event["text"]
                if starts_turn(event):
                    found.add(("user", "turn"))
                elif text and text.strip().startswith("/"):
                    found.add(("user", "command"))
                else:
                    found.add(("user", repr(text)))
            if event["kind"] == "tool_executed" and event["tool_name"] in FRAMEWORK_TOOLS:
                found.add(("framework run", event["tool_name"], event["source"]))
            if event["kind"] == "memory_set":
                found.add(("value", type(event["value"]).__name__))
            if event["kind"] == "bot":
                found.add(("bot", bool(event["buttons"]), event["text"] is None))
        kinds = [row.kind for row in rows]
        if "session_ended" in kinds[:-1]:
            found.add(("events after session_ended",))
        sequences = [row.sequence for row in rows if row.sequence is not None]
        if any(b - a > 1 for a, b in itertools.pairwise(sequences)):
            found.add(("sequence gap",))
        if sum(kind in SKIPPED_KINDS for kind in kinds) * 4 >= len(kinds):
            found.add(("a quarter skipped",))
    delivered = [(cid, index) for cid, index in feed.order]
    for cid, index in delivered:
        row = feed.conversations[cid].rows[index]
        if delivered.count((cid, index)) > 1:
            found.add(("duplicate", "seq" if row.sequence is not None else "null seq"))
    for cid in feed.conversations:
        order = [index for c, index in delivered if c == cid]
        firsts = sorted(set(order), key=order.index)
        if firsts != sorted(firsts):
            found.add(("reordered",))
    return found


WANTED_FEATURES: set[tuple[Any, ...]] = {
    *((kind,) for kind in ASSERTION_KINDS),
    *(("skill_" + k, "step_id") for k in ("cancelled", "interrupted", "resumed")),
    *(("ordered_block_" + k, "step_id")
      for k in ("completed", "cancelled", "interrupted", "resumed")),
    *((kind, "entries", n) for kind in ("memory_was_set", "memory_was_not_set") for n in (1, 2, 3)),
    ("memory_was_cleared", "entries", 3),
    ("memory_was_set", "value"),
    ("memory_was_not_set", "value"),
    *(("tool_executed", field) for field in ("mcp_server", "skill_id", "arguments", "is_error")),
    ("tool_executed", "source", "local"),
    ("tool_executed", "source", "mcp"),
    ("tool_executed", "tool_name", "complete_skill"),
    ("tool_executed", "argument", "None"),
    *(("tools_within_one_turn", "calls", n) for n in (2, 3)),
    *(("tools_within_one_turn", "allow_extra_calls", b) for b in (True, False)),
    *(("tools_within_one_turn", "ordered", o) for o in (True, False, None)),
    ("tools_within_one_turn", "source", "mcp"),
    *((kind, field) for kind in ("bot_uttered", "bot_did_not_utter")
      for field in ("utter_name", "text_matches", "buttons")),
    *(("sequencing", "steps", n) for n in (1, 2, 3, 4)),
    *(("sequencing", step) for step in ("skill_*", "ordered_block_*", "tool_executed",
                                        "memory_was_set", "memory_was_cleared")),
    ("interleaved",),
    *(("event", kind) for kind in ("user", "bot", "tool_executed", "memory_set",
      "memory_cleared", *SKILL_KINDS, *BLOCK_KINDS, "session_started", "session_ended",
      *OTHER_KINDS)),
    *(("shape", shape) for shape in ("flat", "seq", "null seq", "null event_id")),
    ("metadata", "str"), ("metadata", "NoneType"),
    ("user", "turn"), ("user", "command"), ("user", "''"), ("user", "None"), ("user", "'   '"),
    *(("framework run", name, source) for name in FRAMEWORK_TOOL_NAMES
      for source in ("local", "mcp")),
    *(("value", t) for t in ("int", "float", "bool", "str", "dict", "list", "NoneType")),
    *(("bot", buttons, no_text) for buttons in (True, False) for no_text in (True, False)),
    ("events after session_ended",),
    ("sequence gap",),
    ("a quarter skipped",),
    ("duplicate", "seq"), ("duplicate", "null seq"),
    ("reordered",),
}  # fmt: skip


@slow  # 2,400 draws, about 50 s, and no product code run
def test_strategies_cover_every_kind_and_option() -> None:
    """A few hundred draws reach every assertion kind, option, event kind and wire shape."""
    seen: set[tuple[Any, ...]] = set()

    # Fixed seeds: a reproducible sample. The rarest features can take more than
    # one sample of 300 to show (which ones depends on what ran before in the same
    # process: three seeds were not always enough when a subset of the tests ran),
    # so further seeds run only while something is missing.
    for fixed in range(8):

        @seed(fixed)
        @settings(max_examples=300, database=None, deadline=None,
                  suppress_health_check=HEALTH)  # fmt: skip
        @given(feeds())
        def collect(feed: Feed) -> None:
            seen.update(feed_features(feed))

        collect()
        if not WANTED_FEATURES - seen:
            break
    missing = WANTED_FEATURES - seen
    assert not missing, sorted(missing, key=repr)


@settings(max_examples=30, deadline=None, suppress_health_check=HEALTH)
@given(conversations(max_events=6, number=3))
def test_event_ids_unique_and_sequences_increasing(conversation: Any) -> None:
    """Rows with a sequence are numbered in increasing order; event ids never repeat."""
    sequences = [row.sequence for row in conversation.rows if row.sequence is not None]
    assert sequences == sorted(set(sequences))
    ids = [row.event_id for row in conversation.rows if row.event_id is not None]
    assert len(ids) == len(set(ids))
    assert all(row.sequence is None and row.event_id is None for row in conversation.rows
               if row.flat)  # fmt: skip
