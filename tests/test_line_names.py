"""One rule for the conversation a line names (core/events/decode.py, LineNames), used
by the engine, the SQL source and its workers, the Kafka member and rekey. Before,
rekey keyed a ProtoJSON row with only `sender_id` by it, while the engine rejected it."""

from __future__ import annotations

import pytest

from mantle_stream.core.engine.evaluator import Evaluator
from mantle_stream.core.errors import EventError
from mantle_stream.core.events.decode import conversation_of
from mantle_stream.feeds.sql_rows import _conversation, _line
from mantle_stream.testing import scenario

CASES = [
    # (line, what it names)
    (b'{"conversation_id": "a", "sequence": 0, "user": {"text": "hi"}}', "a"),
    (b'{"event": "user", "sender_id": "b", "text": "hi"}', "b"),
    (b'{"event": "user", "sender_id": "b", "conversation_id": "c", "text": "hi"}', "c"),
    (b'{"sender_id": "d", "sequence": 0, "user": {"text": "hi"}}', None),  # ProtoJSON: none
    (b'{"event": "user", "text": "hi"}', None),
    (b"not json", None),
    (b'{"conversation_id": 7, "user": {"text": "hi"}}', None),
]


@pytest.mark.parametrize(("line", "named"), CASES)
def test_every_reader_finds_the_same_conversation(line: bytes, named: str | None) -> None:
    assert conversation_of(line) == named
    # The engine: it judges the line under that conversation, or rejects it.
    evaluator = Evaluator(scenario({"skill_activated": {"skill_id": "x"}}))
    try:
        evaluator.push_chunk(line + b"\n")
    except EventError:
        assert named is None
    else:
        assert named is not None and evaluator.open_conversations().keys() == {named}
    # A SQL row: what the line names, else the row's sender_id column (which _line
    # writes into it), and the line handed on names that conversation.
    found = _conversation(line, "column", 1 << 20)
    if found is not None:
        assert found == (named or "column")
        assert conversation_of(_line(line, "column", 1 << 20).rstrip(b"\n")) == found


def test_rekey_keys_a_message_by_the_same_rule() -> None:
    pytest.importorskip("confluent_kafka")
    from mantle_stream.kafka.rekey import conversation_id

    for line, named in CASES:
        assert conversation_id(line)[0] == named
