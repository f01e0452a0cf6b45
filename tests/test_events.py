"""The event wire format: ProtoJSON as Mantle writes it, flat events, bad lines, chunking.

``data/protojson_example.jsonl`` holds the ten ProtoJSON lines of one
conversation exactly as Mantle's event broker writes them.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mantle_stream as ms
from mantle_stream.core.events.decode import EventDecoder
from mantle_stream.core.events.flat import document_lines, document_tail, is_document
from mantle_stream.core.events.model import (
    PAYLOAD_FIELDS,
    SKIPPED_KINDS,
    Bot,
    MemoryCleared,
    MemorySet,
    Skipped,
    ToolExecuted,
    User,
    buttons_of,
    metadata_field,
    parse_json_value,
    single_payload,
)
from mantle_stream.feeds.lines import LineChunker

#: One conversation's ten events as Mantle's event broker writes them (the
#: example of its event contract; docs/scenarios.md shows three of its lines).
SPEC_EXAMPLE = (Path(__file__).parent / "data" / "protojson_example.jsonl").read_bytes()


def decode(data: bytes) -> list[ms.Event]:
    return EventDecoder("feed.jsonl").decode_chunk(data)


def scenario(*assertions: dict[str, object]) -> ms.Scenario:
    return ms.load_scenario_text(
        json.dumps(
            {
                "scenario": {
                    "name": "t",
                    "simulation_context": "x",
                    "goals": {"assertions": list(assertions)},
                }
            }
        )
    )


def envelope(seq: int | None, **payload: object) -> bytes:
    """A ProtoJSON line with every unset optional field null, as Mantle writes it."""
    return json.dumps(
        {
            "conversation_id": "c",
            "timestamp": 1.5,
            "metadata": None,
            "event_id": None if seq is None else f"e{seq}",
            "sequence": seq,
            **payload,
            "user_id": None,
            "deployment_environment": None,
            "session_id": None,
        }
    ).encode()


# --------------------------------------------------------------------------
# The real format
# --------------------------------------------------------------------------


def test_every_spec_example_line_decodes() -> None:
    events = decode(SPEC_EXAMPLE)
    assert [e.sequence for e in events] == list(range(10))
    assert [e.payload.kind for e in events] == [
        "session_started",
        "user",
        "skill_activated",
        "skipped",
        "memory_set",
        "tool_executed",
        "bot",
        "skipped",
        "skill_completed",
        "session_ended",
    ]
    assert events[3].stack == Skipped() and events[7].bot_turn_ended == Skipped()
    assert events[0].metadata is None and events[0].user_id is None
    assert events[0].timestamp == 1767261600.01
    assert events[0].event_id == "0199f0c2-7a10-7000-8000-000000000001"


def test_memory_events_are_keyed_by_key_and_value_json_is_text() -> None:
    events = decode(SPEC_EXAMPLE)
    assert events[4].payload == MemorySet(
        key="card_replace.replacement_reason", value_json='"damaged"'
    )
    [cleared] = decode(envelope(1, memory_cleared={"key": "a.b"}))
    assert cleared.payload == MemoryCleared(key="a.b")


def test_a_tool_runs_skill_is_in_its_metadata() -> None:
    tool = decode(SPEC_EXAMPLE)[5]
    assert isinstance(tool.payload, ToolExecuted)
    assert (
        tool.payload.tool_name,
        tool.payload.source,
        tool.payload.is_error,
        tool.payload.error_message,
        tool.payload.mcp_server,
    ) == ("order_replacement", "local", False, None, None)
    assert tool.metadata == '{"skill_id": "card_replace"}'
    assert metadata_field(tool.metadata, "skill_id") == "card_replace"


def test_a_bot_messages_response_name_and_buttons() -> None:
    bot = decode(SPEC_EXAMPLE)[6]
    assert isinstance(bot.payload, Bot)
    assert metadata_field(bot.metadata, "utter_action") == "utter_replacement_ordered"
    assert buttons_of(bot.payload) == [("Track it", "/track")]


@pytest.mark.parametrize(
    ("data", "buttons"),
    [
        (None, []),
        ({}, []),
        ({"buttons": None}, []),
        ({"buttons": "Yes"}, []),
        ({"buttons": [{"title": "Yes"}]}, [("Yes", None)]),
        ({"buttons": [{"title": 1.0, "payload": "/y"}, "x"]}, [(1.0, "/y"), (None, None)]),
    ],
    ids=["null", "empty", "buttons-null", "buttons-str", "no-payload", "odd-items"],
)
def test_buttons_of_never_fails_on_odd_data(data: object, buttons: list[object]) -> None:
    [event] = decode(envelope(0, bot={"text": "x", "data": data, "anonymized_at": None}))
    assert buttons_of(event.payload) == buttons  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("metadata", "value"),
    [
        (None, None),
        ("{}", None),
        ('{"skill_id": "k"}', "k"),
        ("not json", None),
        ("[1, 2]", None),
        ('{"skill_id": 5}', 5),
    ],
    ids=["null", "empty", "set", "not-json", "not-object", "not-str"],
)
def test_metadata_field_reads_one_key_and_never_fails(metadata: str | None, value: object) -> None:
    assert metadata_field(metadata, "skill_id") == value


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("42", 42),
        ("42.0", 42.0),
        ('"42"', "42"),
        ("true", True),
        ("null", None),
        ('{"a": [1, 2]}', {"a": [1, 2]}),
    ],
    ids=["int", "float", "str", "bool", "null", "object"],
)
def test_value_json_is_parsed_with_its_type(text: str, value: object) -> None:
    parsed = parse_json_value(text, "value_json")
    assert parsed == value and type(parsed) is type(value)


@pytest.mark.parametrize("kind", SKIPPED_KINDS)
def test_kinds_no_check_reads_are_accepted_and_skipped(kind: str) -> None:
    evaluator = ms.Evaluator([scenario({"skill_activated": {"skill_id": "k"}})])
    lines = [
        envelope(0, session_started={}),
        envelope(1, **{kind: {"update": "[]", "text": None, "n": 1.0}}),
        envelope(2, skill_activated={"skill_id": "k"}),
    ]
    decisions = evaluator.push_chunk(b"\n".join(lines) + b"\n")
    # The skipped kind fills its place in the sequence: no gap, decided at once.
    assert [(d.verdict, d.decided_at) for d in decisions] == [("passed", 2)]
    stats = evaluator.statistics()
    assert (stats.events, stats.unknown_kinds, stats.held, stats.gaps) == (3, 0, 0, 0)


def test_a_newer_engines_kind_is_counted_by_name_and_keeps_its_place() -> None:
    evaluator = ms.Evaluator([scenario({"skill_activated": {"skill_id": "k"}})])
    lines = [
        envelope(0, session_started={}),
        envelope(1, agent_thought={"text": "hm"}),
        envelope(2, skill_activated={"skill_id": "k"}),
        envelope(3, agent_thought={"text": "x"}),
        envelope(4, plan_step={}),
    ]
    decisions = evaluator.push_chunk(b"\n".join(lines) + b"\n")
    assert [(d.verdict, d.decided_at) for d in decisions] == [("passed", 2)]
    assert evaluator.decoder.unknown == {"agent_thought": 2, "plan_step": 1}
    assert evaluator.statistics().held == 0


def test_a_newer_kind_held_for_order_keeps_its_kind_when_its_gap_fills() -> None:
    evaluator = ms.Evaluator([scenario({"skill_activated": {"skill_id": "k"}})])
    for line in (
        envelope(0, session_started={}),
        envelope(2, agent_thought={}),
        envelope(1, skill_activated={"skill_id": "k"}),
    ):
        decisions = evaluator.push_chunk(line + b"\n")  # a chunk each: no line to look at
    assert [(d.verdict, d.decided_at) for d in decisions] == [("passed", 1)]
    assert evaluator.decoder.unknown == {"agent_thought": 1}
    assert evaluator.statistics().held == 0


def test_a_newer_kind_is_counted_alike_before_and_after_it_is_learnt() -> None:
    # The first sighting is read key by key; later chunks decode it as a field.
    decoder = EventDecoder()
    for seq in range(3):
        decoder.decode_chunk(envelope(seq, agent_thought={"text": "x"}) + b"\n")
    assert decoder.unknown == {"agent_thought": 3}
    evaluator = ms.Evaluator([scenario({"skill_activated": {"skill_id": "k"}})])
    chunk = b"\n".join(envelope(i, **{"plan-step": {}, "trace": "t"}) for i in range(4))
    evaluator.push_chunk(chunk + b"\n")
    evaluator.push_chunk(chunk.replace(b'"c"', b'"d"') + b"\n")
    assert evaluator.decoder.unknown == {"plan-step": 8}  # `trace`: a newer envelope field


def test_unknown_kinds_in_one_chunk_are_each_found_on_their_own_line() -> None:
    # Each is classified from its own line (the chunk is split once, not per event).
    lines = [
        envelope(i, **({f"new_{i}": {}} if i % 3 else {"user": {"text": "hi"}})) for i in range(30)
    ]
    evaluator = ms.Evaluator([scenario({"skill_activated": {"skill_id": "k"}})])
    evaluator.push_chunk(b"\n".join(lines) + b"\n")
    assert evaluator.decoder.unknown == {f"new_{i}": 1 for i in range(30) if i % 3}
    assert evaluator.statistics().events == 30


def test_the_three_shapes_mix_in_one_feed() -> None:
    doc_cid, doc = document_lines(
        json.dumps(
            {
                "sender_id": "doc",
                "events": [
                    {"event": "session_started"},
                    {"event": "memory_set", "key": "a.b", "value": 1.0},
                ],
            }
        ).encode()
    )
    feed = (
        b"\n".join(
            [
                envelope(0, memory_set={"key": "a.b", "value_json": "1", "anonymized_at": None}),
                json.dumps(
                    {"event": "memory_set", "sender_id": "flat", "key": "a.b", "value": 1}
                ).encode(),
            ]
        )
        + b"\n"
        + doc
    )
    evaluator = ms.Evaluator([scenario({"memory_was_set": [{"name": "a.b", "value": 1}]})])
    evaluator.push_chunk(feed)
    evaluator.finish_all()
    assert {(r.conversation_id, r.verdict) for r in evaluator.results()} == {
        ("c", "passed"),
        ("flat", "passed"),
        (doc_cid, "passed"),
    }


# --------------------------------------------------------------------------
# Flat events and tracker documents
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ({"event": "user", "text": "hi", "parse_data": {"intent": None}}, User(text="hi")),
        (
            {"event": "memory_set", "key": "a.b", "value": {"x": [1, True]}},
            MemorySet(key="a.b", value_json='{"x":[1,true]}'),
        ),
        ({"event": "memory_cleared", "key": "a.b"}, MemoryCleared(key="a.b")),
        (
            {
                "event": "tool_executed",
                "tool_name": "t",
                "source": "mcp",
                "mcp_server": "bank",
                "arguments": {"n": 5},
                "result": {"ok": True},
                "is_error": False,
            },
            ToolExecuted(
                tool_name="t",
                source="mcp",
                arguments_json='{"n":5}',
                result_json='{"ok":true}',
                is_error=False,
                mcp_server="bank",
            ),
        ),
    ],
    ids=["user", "memory_set", "memory_cleared", "tool_executed"],
)
def test_flat_rows_map_to_the_same_payloads(row: dict[str, object], expected: object) -> None:
    [event] = decode(json.dumps({**row, "sender_id": "c", "timestamp": 1.0}).encode())
    assert event.payload == expected
    assert (event.conversation_id, event.sequence, event.event_id) == ("c", None, None)


def test_a_flat_bot_keeps_its_metadata_object() -> None:
    [event] = decode(
        json.dumps(
            {
                "event": "bot",
                "sender_id": "c",
                "text": "x",
                "data": {},
                "metadata": {"utter_action": "utter_x"},
            }
        ).encode()
    )
    assert metadata_field(event.metadata, "utter_action") == "utter_x"


def test_older_calm_rows_are_counted_apart_from_unknown_kinds() -> None:
    decoder = EventDecoder()
    data = (
        b'{"event":"slot","sender_id":"c","name":"a","value":1}\n'
        b'{"event":"flow_started","sender_id":"c","flow_id":"f"}\n'
        b'{"event":"action","sender_id":"c","name":"action_listen"}\n'
        b'{"event":"user","sender_id":"c","text":"hi"}\n'
    )
    events = decoder.decode_chunk(data)
    assert [e.payload.kind for e in events] == ["skipped", "user"]
    assert decoder.legacy == {"slot": 1, "flow_started": 1}
    assert decoder.unknown == {}


def test_a_tracker_document_numbers_its_events_by_position() -> None:
    cid, lines = document_lines(
        json.dumps(
            {
                "sender_id": "sim-1",
                "slots": {},
                "events": [
                    {"event": "session_started", "timestamp": 1.0},
                    {"event": "action", "name": "action_listen"},
                    {"event": "user", "text": "hi"},
                ],
            }
        ).encode()
    )
    events = decode(lines)
    assert cid == "sim-1"
    assert [(e.conversation_id, e.sequence) for e in events] == [
        ("sim-1", 0),
        ("sim-1", 1),
        ("sim-1", 2),
    ]


@pytest.mark.parametrize(
    ("head", "document"),
    [
        (b'{"sender_id": "c", "events": []}', True),
        (b'{\n  "sender_id": "c",\n  "events": [', True),
        (b'{"conversation_id":"c","sequence":0,"user":{}}\n{"conv', False),
        (b"", False),
        (b"[1]", False),
        (b'{"conversation_id":"c","sequence":0,"bot":{"text":"' + b"x" * 600_000, False),
        (b'{"conversation_id":"c",\n{"conversation_id":"c","user":{}}\n', False),
        (b'{"conversation_id":"c","user":{"text":"the \\"events\\": [ list"}}\n', False),
    ],
    ids=[
        "one-line",
        "pretty",
        "json-lines",
        "empty",
        "array",
        "long-first-line",
        "cut-first-line",
        "events-in-a-string",
    ],
)
def test_a_document_is_told_from_json_lines_by_its_start(head: bytes, document: bool) -> None:
    assert is_document(head) is document


def test_a_document_mixing_rows_with_and_without_sequence_keeps_their_own() -> None:
    _, lines = document_lines(
        json.dumps(
            {
                "sender_id": "c",
                "events": [
                    {"conversation_id": "c", "sequence": 0, "session_started": {}},
                    {"conversation_id": "c", "sequence": 1, "user": {"text": "hi"}},
                    {"conversation_id": "c", "sequence": None, "stack": {}},
                    {"conversation_id": "c", "sequence": 2, "skill_activated": {"skill_id": "k"}},
                ],
            }
        ).encode()
    )
    assert [e.sequence for e in decode(lines)] == [0, 1, None, 2]


_ROWS = [
    {"event": "session_started", "timestamp": 1.0},
    {"event": "user", "text": 'a "sequence" of words'},  # the word, not the key
    {"conversation_id": "c", "sequence": 7, "user": {"text": "hi"}},
    {"conversation_id": "c", "sequence": None, "stack": {}},
    {"event": "bot", "text": "sequence"},
]


@given(
    rows=st.lists(st.sampled_from(_ROWS), max_size=8),
    start=st.integers(min_value=0, max_value=10),
)
def test_a_documents_tail_is_the_tail_of_its_lines(
    rows: list[dict[str, object]], start: int
) -> None:
    data = json.dumps({"sender_id": "c", "events": rows}).encode()
    _, whole = document_lines(data)
    tail, count = document_tail(data, start)
    assert count == len(rows)
    assert tail.splitlines() == whole.splitlines()[start:]


def test_a_documents_tail_names_a_row_that_is_not_an_event() -> None:
    with pytest.raises(ms.EventError, match="not a tracker document"):
        document_tail(b'{"sender_id": "c", "events": [{"event": "user"}, 3]}', 1)
    assert document_tail(b'{"sender_id": "c", "events": [3, {"event": "user"}]}', 1)[1] == 2


def test_a_document_that_is_not_one_names_the_problem() -> None:
    with pytest.raises(ms.EventError, match="not a tracker document"):
        document_lines(b'{"sender_id": "c"}')


# --------------------------------------------------------------------------
# Bad lines
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            b'{"conversation_id":"c","sequence":1}',
            "no payload key (expected exactly one, such as `user`, `bot`, `tool_executed`, "
            "`memory_set`)",
        ),
        (
            b'{"conversation_id":"c","sequence":1,"user":{},"bot":{}}',
            "2 payload keys (bot, user); expected exactly one",
        ),
        (
            b'{"conversation_id":"c","sequence":1,"user":{},"stack":{}}',
            "2 payload keys (stack, user); expected exactly one",
        ),
        (
            b'{"conversation_id":"c","sequence":1,"new_kind":{},"other_kind":{}}',
            "expected exactly one payload key, found `new_kind`, `other_kind`",
        ),
        (
            b"[1, 2]",
            "a JSON array, not an event: a source holds one event (a JSON object) a line, "
            'or one tracker document (`{"sender_id": ..., "events": [...]}`)',
        ),
        (
            b'{"conversation_id":"c","sequence":"1","user":{}}',
            "Expected `int | null`, got `str` - at `$.sequence`",
        ),
        (
            b'{"conversation_id":"c","sequence":-3,"user":{}}',
            "Expected `int` >= 0 - at `$.sequence`",
        ),
        (
            b'{"conversation_id":"c","user":{"text":5}}',
            "Expected `str | null`, got `int` - at `$.user.text`",
        ),
        (
            b'{"conversation_id":"c","metadata":5,"user":{}}',
            "Expected `str | object | null`, got `int` - at `$.metadata`",
        ),
        (b'{"sequence":1,"user":{}}', "no `conversation_id`"),
        (b'{"event":"user","text":"hi"}', "flat event without `sender_id`"),
        (
            b'{"event":"memory_set","sender_id":"c","value":1}',
            "flat `memory_set` event without a string `key`",
        ),
        (b'{"conversation_id":"c",', "malformed JSON: Input data was truncated"),
        (
            b'{"conversation_id":"c","user":{}} {"conversation_id":"c","user":{}}',
            "malformed JSON: trailing characters (byte 35)",
        ),
    ],
    ids=[
        "no-payload",
        "two-payloads",
        "payload-and-skipped",
        "two-unknown",
        "not-object",
        "sequence-str",
        "sequence-negative",
        "text-int",
        "metadata-int",
        "no-conversation-id",
        "flat-no-sender",
        "flat-no-key",
        "truncated",
        "two-values-on-a-line",
    ],
)
def test_bad_lines_name_source_line_and_problem(line: bytes, message: str) -> None:
    data = b'{"conversation_id":"c","sequence":0,"user":{}}\n\n' + line + b"\n"
    with pytest.raises(ms.EventError) as info:
        EventDecoder("feed.jsonl").decode_chunk(data, first_line=10)
    err = info.value
    assert (err.source, err.line) == ("feed.jsonl", 12)
    assert err.message == message
    assert str(err).startswith(f"feed.jsonl:12: bad event: {message}")
    assert err.excerpt == line.decode()


@pytest.mark.parametrize(
    "line",
    [
        b'{"conversation_id":"c","sequence":1,"user":{},"bot":{}}',
        b'{"conversation_id":"c","user":{}} {"conversation_id":"c","user":{}}',
        b'{"sequence":1,"user":{}}',
    ],
    ids=["two-payloads", "two-values", "no-conversation-id"],
)
def test_the_engine_rejects_what_the_decoder_rejects(line: bytes) -> None:
    # One decoding path: push_chunk and decode_chunk agree on every line.
    evaluator = ms.Evaluator([scenario({"skill_activated": {"skill_id": "k"}})])
    with pytest.raises(ms.EventError) as engine:
        evaluator.push_chunk(line + b"\n")
    with pytest.raises(ms.EventError) as decoder:
        decode(line + b"\n")
    assert engine.value.message == decoder.value.message


def _minimal_payloads() -> dict[str, dict[str, object]]:
    """The smallest valid payload object of every kind, by wire key."""
    required: dict[str, dict[str, object]] = {
        "memory_set": {"key": "a.b", "value_json": "1"},
        "memory_cleared": {"key": "a.b"},
        "tool_executed": {"tool_name": "t", "source": "local"},
    }
    fields: dict[str, dict[str, object]] = {}
    for key in PAYLOAD_FIELDS:
        if key.startswith("skill_"):
            fields[key] = {"skill_id": "s"}
        elif key.startswith("ordered_block_"):
            fields[key] = {"skill_id": "s", "block_id": "b"}
        else:
            fields[key] = required.get(key, {})
    return fields


@pytest.mark.parametrize(
    "keys",
    [
        (),
        *((key,) for key in PAYLOAD_FIELDS),
        *itertools.combinations(PAYLOAD_FIELDS, 2),
        PAYLOAD_FIELDS,
    ],
    ids=lambda keys: "+".join(keys) or "none",
)
def test_exactly_one_payload_whichever_keys_are_set(keys: tuple[str, ...]) -> None:
    # The check is written twice (single_payload, and inlined in the engine's
    # hot loop): every pair of kinds goes through both, and the line decoder.
    payloads = _minimal_payloads()
    line = json.dumps(
        {"conversation_id": "c", "sequence": 0, **{key: payloads[key] for key in keys}}
    ).encode()
    event = msgspec.json.decode(line, type=ms.Event)
    single = single_payload(event)
    assert (single is not None) == (len(keys) == 1)
    if single is not None:
        assert single is getattr(event, keys[0])
    pushes: tuple[Callable[[ms.Evaluator], object], ...] = (
        lambda ev: ev.push(event),
        lambda ev: ev.push_chunk(line + b"\n"),
    )
    for push in pushes:
        evaluator = ms.Evaluator([scenario({"memory_was_set": [{"name": "a.b"}]})])
        if len(keys) == 1:
            push(evaluator)
            assert evaluator.statistics().events == 1
        else:
            with pytest.raises(ms.EventError, match="payload key"):
                push(evaluator)
            assert evaluator.statistics().events == 0


def test_value_json_that_is_not_json_is_a_bad_event_with_its_line() -> None:
    evaluator = ms.Evaluator([scenario({"memory_was_set": [{"name": "a.b"}]})], source="feed.jsonl")
    data = (
        b'{"conversation_id":"c","sequence":0,"user":{}}\n'
        b'{"conversation_id":"c","sequence":1,"memory_set":{"key":"a.b","value_json":"{x"}}\n'
    )
    with pytest.raises(ms.EventError) as info:
        evaluator.push_chunk(data)
    assert info.value.line == 2
    assert "`memory_set.value_json` is not valid JSON" in info.value.message


def test_arguments_json_null_reads_as_no_arguments() -> None:
    evaluator = ms.Evaluator([scenario({"tool_executed": {"tool_name": "t", "source": "local"}})])
    [decision] = evaluator.push_line(
        envelope(
            0,
            tool_executed={
                "tool_name": "t",
                "source": "local",
                "arguments_json": None,
                "is_error": None,
            },
        )
    )
    assert decision.verdict == "passed"


def test_unknown_top_level_key_beside_a_known_payload_is_an_envelope_field() -> None:
    # It cannot be told apart from an envelope field added by a newer Mantle,
    # so it is ignored (forward compatibility) rather than refused.
    [event] = decode(b'{"conversation_id":"c","sequence":1,"user":{},"trace_id":{"a":1}}\n')
    assert event.payload == User()


def test_crlf_blank_lines_and_missing_final_newline() -> None:
    data = (
        b'{"conversation_id":"c","sequence":0,"user":{}}\r\n\r\n   \n'
        b'{"conversation_id":"c","sequence":1,"bot":{"text":"x"}}'
    )
    assert [e.sequence for e in decode(data)] == [0, 1]


def test_overlong_line_is_refused_without_decoding_it() -> None:
    from mantle_stream.core.events.decode import MAX_LINE_BYTES

    line = b'{"conversation_id":"c","user":{"text":"' + b"x" * MAX_LINE_BYTES + b'"}}'
    with pytest.raises(ms.EventError, match="longer than the"):
        decode(line + b"\n")


@settings(max_examples=60, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=len(SPEC_EXAMPLE)), max_size=12))
def test_chunking_a_byte_stream_never_changes_the_events(cuts: list[int]) -> None:
    chunker = LineChunker()
    decoder = EventDecoder()
    events: list[ms.Event] = []
    edges = [0, *sorted(cuts), len(SPEC_EXAMPLE)]
    for start, end in itertools.pairwise(edges):
        chunk = chunker.feed(SPEC_EXAMPLE[start:end])
        if chunk:
            events.extend(decoder.decode_chunk(chunk))
    events.extend(decoder.decode_chunk(chunker.flush()))
    assert events == decode(SPEC_EXAMPLE)


def test_a_row_may_have_a_null_sequence() -> None:
    [event] = decode(envelope(None, user={"text": "hi"}))
    assert event.sequence is None and event.event_id is None
