"""Retention (core/engine/retention.py), alone: finished conversations beyond
``keep_finished`` let go of, counted, and remembered by id."""

from __future__ import annotations

import pytest

import mantle_stream as ms
from mantle_stream.core.assertions.compiler import compile_scenario
from mantle_stream.core.engine.conversation import Conversation, Conversations
from mantle_stream.core.engine.retention import Retention
from mantle_stream.core.verdicts import Decision

from _harness import scenario

_PLAN = compile_scenario(scenario({"skill_activated": {"skill_id": "k"}}))


def _finished(book: Conversations, retention: Retention, cid: str, verdict: str) -> None:
    conv = Conversation(cid, None if verdict == "unmatched" else _PLAN)
    book.add(conv)
    conv.finished = True
    book.open.pop(cid)
    if conv.plan is not None:
        conv.results = [Decision(cid, "t", 0, "skill_activated", verdict, None, "", 0, "", 1)]  # type: ignore[arg-type]
        conv.failed = verdict == "failed"
    retention.finished(cid)


def test_only_the_most_recent_finished_are_kept_the_rest_counted() -> None:
    book = Conversations()
    retention = Retention(book, keep_finished=1)
    for cid, verdict in [("a", "passed"), ("b", "failed"), ("u", "unmatched"), ("d", "passed")]:
        _finished(book, retention, cid, verdict)
    gone = retention.let_go()
    assert [c.cid for c in gone] == ["a", "b", "u"] and list(book.all) == ["d"]
    assert book.judged == 1
    assert retention.omitted == {
        "conversations": 2,
        "passed": 1,
        "failed": 1,
        "assertions": 2,
        "skipped": 0,
        "errored": 0,
        "unmatched": 1,
    }
    assert retention.tombstones == {"a", "b", "u"}  # an event for one of them is late
    assert retention.let_go() == []


def test_without_a_bound_every_finished_conversation_stays() -> None:
    book = Conversations()
    retention = Retention(book, keep_finished=None)
    for cid in "abc":
        _finished(book, retention, cid, "passed")
    assert retention.let_go() == [] and list(book.all) == ["a", "b", "c"]
    assert not retention.finished_order  # nothing queued to let go of


def test_a_negative_bound_is_refused() -> None:
    with pytest.raises(ms.UsageError, match="keep_finished must be >= 0, got -1"):
        Retention(Conversations(), keep_finished=-1)
