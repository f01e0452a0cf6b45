"""Checkpoints (core/engine/checkpoints.py), alone: conversations and counters
saved and restored, finished conversations encoded once, a checkpoint of other
scenarios refused."""

from __future__ import annotations

import pytest

import mantle_stream as ms
from mantle_stream.core.assertions.compiler import Plan, compile_scenario
from mantle_stream.core.engine.checkpoints import Checkpoints, Frozen
from mantle_stream.core.engine.conversation import Conversation, Conversations
from mantle_stream.core.engine.notes import Notes
from mantle_stream.core.engine.retention import OMITTED
from mantle_stream.core.verdicts import Tally

from _harness import scenario

_PLAN = compile_scenario(scenario({"skill_activated": {"skill_id": "k"}}, name="booking"))


def _checkpoints(plan: Plan = _PLAN) -> tuple[Checkpoints, Conversations, Tally, Notes]:
    book, tally, notes = Conversations(), Tally(), Notes()
    omitted = dict.fromkeys(OMITTED, 0)
    names = {plan.scenario.name: plan}
    return Checkpoints([plan], names, book, tally, notes, omitted, Frozen()), book, tally, notes


def _judged(book: Conversations, cid: str, *, finished: bool = False) -> Conversation:
    conv = Conversation(cid, _PLAN)
    conv.events, conv.last_seq, conv.turn = 3, 2, 1
    conv.finished = finished
    book.add(conv)
    return conv


def test_conversations_and_counters_come_back_as_they_were() -> None:
    saving, book, tally, notes = _checkpoints()
    _judged(book, "open")
    _judged(book, "done", finished=True)
    tally.events, tally.duplicates = 6, 2
    notes.note("duplicates", "open", 1)
    data = saving.checkpoint()
    restoring, again, counted, noted = _checkpoints()
    restoring.restore(data)
    assert list(again.all) == ["open", "done"] and list(again.open) == ["open"]
    assert again.judged == 2 and (counted.events, counted.duplicates) == (6, 2)
    assert noted.occurrences == notes.occurrences
    assert restoring.conversation_state("open") == saving.conversation_state("open")
    assert again.all["open"].replay_upto == 2  # its events seen again are replayed


def test_a_finished_conversation_is_encoded_once_in_slices() -> None:
    saving, book, _, _ = _checkpoints()
    for cid in "abc":
        _judged(book, cid, finished=True)
    assert saving.freeze_finished(2) == 1  # one still waiting
    assert set(saving.frozen.encoded) == {"a", "b"}
    assert saving.freeze_finished(5) == 0 and set(saving.frozen.encoded) == {"a", "b", "c"}


def test_a_checkpoint_of_other_scenarios_is_refused() -> None:
    saving, book, _, _ = _checkpoints()
    _judged(book, "c")
    other = compile_scenario(scenario({"skill_activated": {"skill_id": "k"}}, name="refund"))
    restoring, _, _, _ = _checkpoints(other)
    with pytest.raises(ms.UsageError, match="taken with other scenarios"):
        restoring.restore(saving.checkpoint())


def test_an_edited_scenario_of_the_same_name_is_refused() -> None:
    saving, _, _, _ = _checkpoints()
    edited = compile_scenario(scenario({"skill_activated": {"skill_id": "z"}}, name="booking"))
    restoring, _, _, _ = _checkpoints(edited)
    with pytest.raises(ms.UsageError, match="before scenario `booking` changed"):
        restoring.restore(saving.checkpoint())


def test_a_checkpoint_restores_only_into_a_fresh_book() -> None:
    saving, book, _, _ = _checkpoints()
    _judged(book, "c")
    with pytest.raises(ms.UsageError, match="restore into a fresh evaluator"):
        saving.restore(saving.checkpoint())
