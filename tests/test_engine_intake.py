"""Intake (core/engine/intake.py), alone: chunks decoded at once or line by line,
lines counted, bad events named by source and line, with a recording stand-in
for the hot loop."""

from __future__ import annotations

import json

import pytest

import mantle_stream as ms
from mantle_stream.core.engine.conversation import LineFinder
from mantle_stream.core.engine.intake import Context, Intake
from mantle_stream.core.engine.notes import Notes
from mantle_stream.core.events.model import Event
from mantle_stream.core.verdicts import Decision, Tally


class _Loop:
    """The hot loop's stand-in: records each call's events and context."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[int | None], int, int]] = []

    def run(self, events: list[Event], out: list[Decision], c: Context) -> None:
        self.calls.append(([e.sequence for e in events], c.first, c.offset))


def _intake() -> tuple[Intake, _Loop, Tally]:
    loop, tally = _Loop(), Tally()
    return Intake("feed.jsonl", tally, Notes(), None, loop.run), loop, tally


def _line(seq: int) -> bytes:
    return json.dumps({"conversation_id": "c", "sequence": seq, "user": {"text": "hi"}}).encode()


def test_a_chunk_of_one_event_per_line_goes_to_the_loop_at_once() -> None:
    intake, loop, _ = _intake()
    intake.push_chunk(b"\n".join(_line(i) for i in range(3)) + b"\n", False, None, None, None, None)
    assert loop.calls == [([0, 1, 2], 1, 0)] and intake.line == 3


def test_a_chunk_with_a_blank_line_goes_line_by_line_with_each_lines_number() -> None:
    intake, loop, _ = _intake()
    intake.push_chunk(_line(0) + b"\n\n" + _line(1) + b"\n", False, None, None, None, None)
    assert loop.calls == [([0], 1, 0), ([1], 3, 0)] and intake.line == 3


def test_lines_are_counted_across_chunks() -> None:
    intake, loop, _ = _intake()
    intake.push_chunk(_line(0) + b"\n", False, None, None, None, None)
    intake.push_chunk(_line(1) + b"\n" + _line(2), False, None, None, None, None)  # no final \n
    assert [first for _, first, _ in loop.calls] == [1, 2] and intake.line == 3


def test_a_bad_line_raises_named_by_its_source_and_line() -> None:
    intake, _, _ = _intake()
    chunk = _line(0) + b"\n{oops\n"
    with pytest.raises(ms.EventError) as caught:
        intake.push_chunk(chunk, False, None, 7, "conn 1", None)
    assert (caught.value.source, caught.value.line) == ("conn 1", 8)


def test_a_bad_line_reported_to_on_bad_is_counted_and_the_rest_applied() -> None:
    intake, loop, tally = _intake()
    bad: list[ms.EventError] = []
    chunk = _line(0) + b"\n{oops\n" + _line(2) + b"\n"
    intake.push_chunk(chunk, False, bad.append, None, None, None)
    assert [e.line for e in bad] == [2] and tally.bad_events == 1
    assert [seqs for seqs, _, _ in loop.calls] == [[0], [2]]


def test_a_blank_line_on_its_own_applies_nothing() -> None:
    intake, loop, _ = _intake()
    intake.push_one(b"", 4, [])
    intake.push_one(_line(0), 5, [])
    assert loop.calls == [([0], 5, 0)]


def test_a_flat_row_is_made_sense_of_from_its_line() -> None:
    intake, _, _ = _intake()
    row = b'{"conversation_id": "c", "sequence": 0, "event": "user", "text": "hi"}'
    event = intake.decoder.decode_raw(row, 1)
    assert event is not None
    event, payload = intake.irregular(event, None, LineFinder(row), 0, 1, 0)
    assert payload == ms.User(text="hi")
