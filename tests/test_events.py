"""The event wire format: ProtoJSON envelopes, legacy rows, bad lines, chunking."""

from __future__ import annotations

import itertools
import json

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mantle_stream as ms
from mantle_stream._events import (
    PAYLOAD_FIELDS,
    Bot,
    BotButton,
    MemoryCleared,
    MemorySet,
    SessionStarted,
    ToolExecuted,
    User,
    parse_json_value,
    single_payload,
)
from mantle_stream._sources import LineChunker

# The example of spec/events.md, verbatim (long lines on purpose).
SPEC_EXAMPLE = b"""\
{"conversation_id":"c-17","sequence":0,"event_id":"e0","timestamp":"2026-12-02T10:00:00Z","session_started":{}}
{"conversation_id":"c-17","sequence":1,"event_id":"e1","user":{"text":"my card is damaged"}}
{"conversation_id":"c-17","sequence":2,"event_id":"e2","skill_activated":{"skill_id":"card_replace"}}
{"conversation_id":"c-17","sequence":3,"event_id":"e3","memory_set":{"name":"card_replace.replacement_reason","value_json":"\\"damaged\\""}}
{"conversation_id":"c-17","sequence":4,"event_id":"e4","tool_executed":{"tool_name":"order_replacement","source":"local","mcp_server":null,"skill_id":"card_replace","arguments_json":"{\\"shipping\\":\\"standard\\"}","result_json":"{\\"ok\\":true}","is_error":false}}
{"conversation_id":"c-17","sequence":5,"event_id":"e5","bot":{"text":"Your replacement was ordered.","utter_name":"utter_replacement_ordered","buttons":[]}}
{"conversation_id":"c-17","sequence":6,"event_id":"e6","skill_completed":{"skill_id":"card_replace"}}
{"conversation_id":"c-17","sequence":7,"event_id":"e7","session_ended":{}}
"""


def decode(data: bytes) -> list[ms.Event]:
    return ms.EventDecoder("feed.jsonl").decode_chunk(data)


def test_spec_example_decodes_into_typed_payloads() -> None:
    events = decode(SPEC_EXAMPLE)
    assert [e.sequence for e in events] == list(range(8))
    assert [e.payload.kind for e in events] == [
        "session_started", "user", "skill_activated", "memory_set", "tool_executed", "bot",
        "skill_completed", "session_ended"]
    tool = events[4].payload
    assert isinstance(tool, ToolExecuted)
    assert (tool.tool_name, tool.source, tool.skill_id, tool.is_error) == (
        "order_replacement", "local", "card_replace", False)
    assert events[0].timestamp == "2026-12-02T10:00:00Z"


@pytest.mark.parametrize(("text", "value"), [
    ("42", 42), ("42.0", 42.0), ('"42"', "42"), ("true", True), ("null", None),
    ('{"a": [1, 2]}', {"a": [1, 2]}),
], ids=["int", "float", "string", "bool", "null", "object"])
def test_value_json_is_parsed_with_its_type(text: str, value: object) -> None:
    parsed = parse_json_value(text, "value_json")
    assert parsed == value and type(parsed) is type(value)


def test_numeric_timestamp_is_accepted() -> None:
    [event] = decode(b'{"conversation_id":"c","sequence":0,"timestamp":1733130000,"user":{}}\n')
    assert event.timestamp == 1733130000


@pytest.mark.parametrize(("line", "expected"), [
    (b'{"event":"user","sender_id":"c","text":"hi"}', User(text="hi")),
    (b'{"event":"bot","sender_id":"c","text":"ok","metadata":{"utter_action":"utter_ok"},'
     b'"data":{"buttons":[{"title":"Yes","payload":"/affirm"}]}}',
     Bot(text="ok", utter_name="utter_ok", buttons=(BotButton("Yes", "/affirm"),))),
    (b'{"event":"slot","sender_id":"c","name":"a.b","value":5}',
     MemorySet(name="a.b", value_json="5")),
    (b'{"event":"slot","sender_id":"c","name":"a.b","value":null}', MemoryCleared(name="a.b")),
    (b'{"event":"session_started","sender_id":"c"}', SessionStarted()),
], ids=["user", "bot", "slot-set", "slot-null-clears", "session-started"])
def test_legacy_rows_map_to_payloads(line: bytes, expected: object) -> None:
    [event] = decode(line + b"\n")
    assert event.conversation_id == "c"
    assert event.sequence == -1  # no sequence: arrival order
    assert event.payload == expected


def test_legacy_rows_mix_with_protojson_rows() -> None:
    data = (b'{"conversation_id":"c","sequence":0,"user":{"text":"a"}}\n'
            b'{"event":"user","sender_id":"c","text":"b"}\n')
    assert [e.payload for e in decode(data)] == [User(text="a"), User(text="b")]


def test_unmapped_legacy_rows_and_unknown_payloads_are_counted_and_skipped() -> None:
    decoder = ms.EventDecoder()
    data = (b'{"event":"action","sender_id":"c","name":"action_listen"}\n'
            b'{"conversation_id":"c","sequence":1,"agent_thought":{"text":"hm"}}\n'
            b'{"conversation_id":"c","sequence":2,"user":{}}\n')
    events = decoder.decode_chunk(data)
    assert [e.sequence for e in events] == [2]
    assert decoder.unknown == {"legacy:action": 1, "agent_thought": 1}


@pytest.mark.parametrize(("line", "message"), [
    (b'{"conversation_id":"c","sequence":1}',
     "no payload key (expected exactly one, such as `user`, `bot`, `tool_executed`, "
     "`memory_set`)"),
    (b'{"conversation_id":"c","sequence":1,"user":{},"bot":{}}',
     "2 payload keys (user, bot); expected exactly one"),
    (b'[1, 2]', "Expected `object`, got `array`"),
    (b'{"conversation_id":"c","sequence":"1","user":{}}',
     "Expected `int`, got `str` - at `$.sequence`"),
    (b'{"conversation_id":"c","user":{"text":5}}',
     "Expected `str | null`, got `int` - at `$.user.text`"),
    (b'{"conversation_id":"c","tool_executed":{"tool_name":"t","source":"remote"}}',
     "Invalid enum value 'remote' - at `$.tool_executed.source`"),
    (b'{"sequence":1,"user":{}}', "Object missing required field `conversation_id`"),
    (b'{"conversation_id":"c",', "malformed JSON: Input data was truncated"),
], ids=["no-payload", "two-payloads", "not-object", "sequence-str",
        "text-int", "bad-source", "no-conversation-id", "truncated"])
def test_bad_lines_name_source_line_and_problem(line: bytes, message: str) -> None:
    data = b'{"conversation_id":"c","sequence":0,"user":{}}\n\n' + line + b"\n"
    with pytest.raises(ms.EventError) as info:
        ms.EventDecoder("feed.jsonl").decode_chunk(data, first_line=10)
    err = info.value
    assert (err.source, err.line) == ("feed.jsonl", 12)
    assert err.message == message
    assert str(err).startswith(f"feed.jsonl:12: bad event: {message}")
    assert err.excerpt == line.decode()


def _minimal_payloads() -> dict[str, dict[str, object]]:
    """The smallest valid payload object of every kind, by wire key."""
    required = {"memory_set": {"name": "a.b", "value_json": "1"}, "memory_cleared": {"name": "a.b"},
                "tool_executed": {"tool_name": "t", "source": "local"}}
    fields: dict[str, dict[str, object]] = {}
    for key in PAYLOAD_FIELDS:
        if key.startswith("skill_"):
            fields[key] = {"skill_id": "s"}
        elif key.startswith("ordered_block_"):
            fields[key] = {"skill_id": "s", "block_id": "b"}
        else:
            fields[key] = required.get(key, {})
    return fields


@pytest.mark.parametrize("keys", [
    (), *((key,) for key in PAYLOAD_FIELDS), *itertools.combinations(PAYLOAD_FIELDS, 2),
    PAYLOAD_FIELDS,
], ids=lambda keys: "+".join(keys) or "none")
def test_exactly_one_payload_whichever_keys_are_set(keys: tuple[str, ...]) -> None:
    # The check is written twice (single_payload, and inlined in the engine's
    # hot loop): every pair of kinds goes through both, and the line decoder.
    payloads = _minimal_payloads()
    line = json.dumps({"conversation_id": "c", "sequence": 0,
                       **{key: payloads[key] for key in keys}}).encode()
    event = msgspec.json.decode(line, type=ms.Event)
    single = single_payload(event)
    assert (single is not None) == (len(keys) == 1)
    if single is not None:
        assert single.kind == keys[0]
    scenario = ms.load_scenario_text(json.dumps({"scenario": {
        "name": "t", "simulation_context": "x",
        "goals": {"assertions": [{"memory_was_set": [{"name": "a.b"}]}]}}}))
    for push in (lambda ev: ev.push(event), lambda ev: ev.push_chunk(line + b"\n")):
        evaluator = ms.Evaluator([scenario])
        if len(keys) == 1:
            push(evaluator)
            assert evaluator.statistics().events == 1
        else:
            with pytest.raises(ms.EventError, match="payload key"):
                push(evaluator)
            assert evaluator.statistics().events == 0


def test_value_json_that_is_not_json_is_a_bad_event_with_its_line() -> None:
    scenario = ms.load_scenario_text(json.dumps({"scenario": {
        "name": "t", "simulation_context": "x",
        "goals": {"assertions": [{"memory_was_set": [{"name": "a.b"}]}]}}}))
    evaluator = ms.Evaluator([scenario], source="feed.jsonl")
    data = (b'{"conversation_id":"c","sequence":0,"user":{}}\n'
            b'{"conversation_id":"c","sequence":1,"memory_set":{"name":"a.b","value_json":"{x"}}\n')
    with pytest.raises(ms.EventError) as info:
        evaluator.push_chunk(data)
    assert info.value.line == 2
    assert "`memory_set.value_json` is not valid JSON" in info.value.message


def test_unknown_top_level_key_beside_a_known_payload_is_an_envelope_field() -> None:
    # It cannot be told apart from an envelope field added by a newer Mantle,
    # so it is ignored (forward compatibility) rather than refused.
    [event] = decode(b'{"conversation_id":"c","sequence":1,"user":{},"trace_id":{"a":1}}\n')
    assert event.payload == User()


def test_crlf_blank_lines_and_missing_final_newline() -> None:
    data = (b'{"conversation_id":"c","sequence":0,"user":{}}\r\n\r\n   \n'
            b'{"conversation_id":"c","sequence":1,"bot":{"text":"x"}}')
    assert [e.sequence for e in decode(data)] == [0, 1]


def test_overlong_line_is_refused_without_decoding_it() -> None:
    from mantle_stream._events import MAX_LINE_BYTES

    line = b'{"conversation_id":"c","user":{"text":"' + b"x" * MAX_LINE_BYTES + b'"}}'
    with pytest.raises(ms.EventError, match="longer than the"):
        decode(line + b"\n")


@settings(max_examples=60, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=len(SPEC_EXAMPLE)), max_size=12))
def test_chunking_a_byte_stream_never_changes_the_events(cuts: list[int]) -> None:
    chunker = LineChunker()
    decoder = ms.EventDecoder()
    events: list[ms.Event] = []
    edges = [0, *sorted(cuts), len(SPEC_EXAMPLE)]
    for start, end in itertools.pairwise(edges):
        chunk = chunker.feed(SPEC_EXAMPLE[start:end])
        if chunk:
            events.extend(decoder.decode_chunk(chunk))
    events.extend(decoder.decode_chunk(chunker.flush()))
    assert events == decode(SPEC_EXAMPLE)


@pytest.mark.parametrize(("line", "message"), [
    (b'{"conversation_id":"c","user":{}}', "Object missing required field `sequence`"),
    (b'{"conversation_id":"c","sequence":-3,"user":{}}',
     "Expected `int` >= 0 - at `$.sequence`"),
], ids=["missing", "negative"])
def test_a_protojson_event_needs_a_sequence_of_zero_or_more(line: bytes, message: str) -> None:
    with pytest.raises(ms.EventError) as info:
        decode(line + b"\n")
    assert info.value.message == message


def test_legacy_rows_keep_their_metadata_so_they_can_name_a_scenario() -> None:
    [event] = decode(b'{"event":"user","sender_id":"c","text":"hi",'
                     b'"metadata":{"scenario":"Card"}}\n')
    assert event.metadata == {"scenario": "Card"}
