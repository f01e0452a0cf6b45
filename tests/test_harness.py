"""Tests of the shared assertion-test harness (``_harness.py``): its wire lines and driver."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

import mantle_stream as ms

from _harness import ALL_KINDS, Ev, assign_sequences, scenario, setm, tool, user


@pytest.mark.parametrize("ev", ALL_KINDS, ids=[e.key for e in ALL_KINDS])
def test_builder_lines_have_the_envelope_and_exactly_one_payload_key(ev: Ev) -> None:
    row = json.loads(ev.line("c-1", 7))
    envelope = {
        "conversation_id",
        "sequence",
        "event_id",
        "timestamp",
        "metadata",
        "user_id",
        "session_id",
        "deployment_environment",
    }
    assert row["conversation_id"] == "c-1" and row["sequence"] == 7
    assert set(row) - envelope == {ev.key}


@pytest.mark.parametrize("ev", ALL_KINDS, ids=[e.key for e in ALL_KINDS])
def test_builder_lines_are_accepted_by_the_evaluator(ev: Ev) -> None:
    evaluator = ms.Evaluator([scenario({"skill_activated": {"skill_id": "never"}})])
    evaluator.push_line(ev.line("c", 3))
    assert evaluator.statistics().events == 1
    assert evaluator.statistics().unknown_kinds == 0


def test_builder_encodes_values_and_arguments_as_json_strings() -> None:
    assert json.loads(setm("a.b", 5).line("c", 0))["memory_set"]["value_json"] == "5"
    row = json.loads(tool("t", args={"n": 5.0}).line("c", 0))
    assert row["tool_executed"]["arguments_json"] == '{"n": 5.0}'


def test_judge_gives_consecutive_sequences_from_ten_unless_told() -> None:
    assert assign_sequences([user(), user(), replace(user(), seq=40), user()]) == [10, 11, 40, 41]
