"""Order and identity as the real feeds deliver them (the engine and the runner).

Mantle numbers each tracker's events (``sequence``, 0-based), but rows may
carry none, brokers deliver at least once, and Kafka with Rasa's default
unkeyed partitioning delivers one conversation's events out of order. The
engine applies each conversation in ``sequence`` order through a reorder
window that is on by default; rows without a sequence go in arrival order and
are told apart by ``event_id``; a gap is given up on only after a count
(the window) or a real wait (the runner's ``gap_timeout``).
"""

from __future__ import annotations

import io
import json
import random
import tracemalloc
import xml.etree.ElementTree as ET
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

import mantle_stream as ms
from mantle_stream.core.verdicts import Occurrence
from mantle_stream.feeds import Feed, open_feed
from mantle_stream.outputs.junit import JunitWriter
from mantle_stream.outputs.report import build_report, notes
from mantle_stream.runner import Runner

from _harness import scenario

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def row(seq: int | None, cid: str = "c", event_id: str | None = None, **payload: Any) -> bytes:
    """A ProtoJSON line; ``event_id`` defaults to one derived from the sequence."""
    if event_id is None and seq is not None:
        event_id = f"{cid}-{seq}"
    return json.dumps(
        {
            "conversation_id": cid,
            "timestamp": 1.0,
            "metadata": None,
            "event_id": event_id,
            "sequence": seq,
            **payload,
            "user_id": None,
            "deployment_environment": None,
            "session_id": None,
        }
    ).encode()


SEQUENCE = {
    "sequencing": [
        {"memory_was_set": "a.first"},
        {"memory_was_set": "a.second"},
        {"skill_completed": {"skill_id": "k"}},
    ]
}
NOT_SET_LAST = {"memory_was_not_set": [{"name": "a.x", "value": 1}]}


def conversation(cid: str = "c") -> list[bytes]:
    return [
        row(0, cid, session_started={}),
        row(1, cid, user={"text": "hi"}),
        row(2, cid, memory_set={"key": "a.first", "value_json": "1"}),
        row(3, cid, stack={"update": "[]"}),
        row(4, cid, memory_set={"key": "a.x", "value_json": "1"}),
        row(5, cid, memory_set={"key": "a.second", "value_json": "2"}),
        row(6, cid, memory_set={"key": "a.x", "value_json": "2"}),
        row(7, cid, skill_completed={"skill_id": "k"}),
        row(8, cid, session_ended={}),
    ]


def outcomes(
    lines: list[bytes], *assertions: dict[str, Any], **options: Any
) -> tuple[list[tuple[str, int | None]], ms.Statistics]:
    evaluator = ms.Evaluator([scenario(*assertions)], **options)
    for line in lines:
        evaluator.push_line(line)
    evaluator.finish_all()
    [result] = evaluator.results()
    return [(a.verdict, a.decided_at) for a in result.assertions], evaluator.statistics()


IN_ORDER = outcomes(conversation(), SEQUENCE, NOT_SET_LAST)[0]


def test_in_order_the_verdicts_are_the_reference_ones() -> None:
    assert IN_ORDER == [("passed", 7), ("passed", None)]


@pytest.mark.parametrize("seed", range(8))
def test_out_of_order_delivery_is_applied_in_sequence_order_by_default(seed: int) -> None:
    lines = conversation()
    random.Random(seed).shuffle(lines)
    got, stats = outcomes(lines, SEQUENCE, NOT_SET_LAST)
    assert got == IN_ORDER
    assert (stats.duplicates, stats.late_events, stats.gaps, stats.held) == (0, 0, 0, 0)


def test_a_conversation_waits_for_its_first_sequence() -> None:
    evaluator = ms.Evaluator([scenario({"skill_activated": {"skill_id": "k"}})])
    assert evaluator.push_line(row(1, skill_activated={"skill_id": "k"})) == []
    assert evaluator.statistics().held == 1
    [decision] = evaluator.push_line(row(0, session_started={}))
    assert (decision.verdict, decision.decided_at) == ("passed", 1)


def test_a_duplicate_is_skipped_and_counted_apart_from_a_late_event() -> None:
    lines = conversation()
    lines.insert(4, lines[2])  # delivered twice: skipped
    got, stats = outcomes(lines, SEQUENCE, NOT_SET_LAST)
    assert got == IN_ORDER
    assert (stats.duplicates, stats.late_events) == (1, 0)


def test_an_event_after_its_gap_was_given_up_is_late() -> None:
    lines = conversation()
    late = lines.pop(5)  # a.second comes only after the window gave its place up
    got, stats = outcomes([*lines, late], SEQUENCE, NOT_SET_LAST, reorder_window=2)
    assert got == [("failed", None), ("passed", None)]
    assert (stats.gaps, stats.late_events, stats.duplicates) == (1, 1, 0)


# --------------------------------------------------------------------------
# Rows without a sequence
# --------------------------------------------------------------------------


def unsequenced(lines: list[bytes]) -> list[bytes]:
    """The same rows with ``sequence`` null (event ids kept)."""
    out = []
    for line in lines:
        obj = json.loads(line)
        obj["sequence"] = None
        out.append(json.dumps(obj).encode())
    return out


def test_rows_without_sequence_are_applied_in_arrival_order() -> None:
    got, _ = outcomes(unsequenced(conversation()), SEQUENCE, NOT_SET_LAST)
    # Decided by a row without a sequence: there is no sequence to report.
    assert got == [("passed", None), ("passed", None)]


def test_a_row_without_sequence_is_de_duplicated_by_event_id() -> None:
    lines = unsequenced(conversation())
    again = [*lines[:7], lines[4], *lines[7:]]  # a.x = 1 delivered again after a.x = 2
    got, stats = outcomes(again, NOT_SET_LAST)
    assert got == [("passed", None)]  # without the id check the last write would be 1
    assert stats.duplicates == 1


def test_rows_without_sequence_or_event_id_are_never_taken_for_duplicates() -> None:
    line = row(None, event_id=None, memory_set={"key": "a.x", "value_json": "1"})
    _, stats = outcomes([line, line, line], NOT_SET_LAST)
    assert (stats.events, stats.duplicates) == (3, 0)


def test_a_row_without_sequence_waits_behind_the_rows_that_came_before_it() -> None:
    # 2 arrives before 1; the sequence-less write of a.x = 1 arrives after 2, so it
    # is applied after 2 (and after 1, which fills the gap), never before them.
    lines = [
        row(0, session_started={}),
        row(2, memory_set={"key": "a.x", "value_json": "2"}),
        row(None, event_id="e-x", memory_set={"key": "a.x", "value_json": "1"}),
        row(1, user={"text": "hi"}),
    ]
    got, stats = outcomes(lines, NOT_SET_LAST)
    assert got == [("failed", None)]  # the last write was 1
    assert stats.held == 0 and stats.gaps == 0


# --------------------------------------------------------------------------
# The runner gives a gap up after a real wait
# --------------------------------------------------------------------------


def timed_run(gap_timeout: float) -> tuple[ms.Evaluator, Runner, list[tuple[float, ms.Decision]]]:
    """An evaluator of one skill check, and a runner over it that notes how long
    after its start each decision came."""
    evaluator = ms.Evaluator([scenario({"skill_activated": {"skill_id": "k"}})])
    decided: list[tuple[float, ms.Decision]] = []
    started = anyio.current_time()
    runner = Runner(
        evaluator,
        linger=0.1,
        gap_timeout=gap_timeout,
        on_decisions=lambda ds: decided.extend((anyio.current_time() - started, d) for d in ds),
    )
    return evaluator, runner, decided


async def play_with_a_gap(
    runner: Runner, feed: Feed, meanwhile: Callable[[], Awaitable[None]]
) -> None:
    """A simulator on ``feed`` sends sequences 0 and 2 (1 never comes), waits for
    ``meanwhile``, then ends the conversation; ``runner`` judges it."""
    host, port = feed.address.removeprefix("tcp://").rsplit(":", 1)  # type: ignore[union-attr]

    async def simulator() -> None:
        async with await anyio.connect_tcp(host, int(port)) as stream:
            await stream.send(row(0, session_started={}) + b"\n")
            await stream.send(row(2, skill_activated={"skill_id": "k"}) + b"\n")
            await meanwhile()
            await stream.send(row(3, session_ended={}) + b"\n")

    async with anyio.create_task_group() as tg:
        tg.start_soon(simulator)
        await runner.run(feed)


async def test_a_gap_is_given_up_after_the_gap_timeout_not_on_a_short_quiet() -> None:
    evaluator, runner, decided = timed_run(gap_timeout=0.8)

    async def meanwhile() -> None:
        await anyio.sleep(0.3)  # quiet, but not for long enough
        assert decided == []
        with anyio.move_on_after(1.2):  # till the gap is given up (0.8 s), 1.5 s at most
            while not decided:
                await anyio.sleep(0.01)

    async with open_feed("tcp://127.0.0.1:0") as feed:
        # A live source that can reorder a conversation (as an unkeyed Kafka topic
        # does): its gaps are waited for. (A connection itself delivers in order.)
        feed.ordered = False
        await play_with_a_gap(runner, feed, meanwhile)
    [(when, decision)] = decided
    assert (decision.verdict, decision.decided_at) == ("passed", 2)
    assert 0.7 <= when <= 1.5
    stats = evaluator.statistics()
    assert (stats.gaps, stats.held) == (1, 0)


async def test_release_held_gives_up_one_conversations_gap() -> None:
    evaluator = ms.Evaluator([scenario({"skill_activated": {"skill_id": "k"}})])
    evaluator.push_line(row(0, "a", session_started={}))
    evaluator.push_line(row(2, "a", skill_activated={"skill_id": "k"}))
    evaluator.push_line(row(2, "b", skill_activated={"skill_id": "k"}))
    assert sorted(evaluator.holding()) == ["a", "b"]
    [decision] = evaluator.release_held("a")
    assert (decision.conversation_id, decision.decided_at) == ("a", 2)
    assert evaluator.holding() == ["b"]


# --------------------------------------------------------------------------
# Sources that deliver each conversation in order: a gap is passed at once
# --------------------------------------------------------------------------


def test_an_ordered_source_passes_a_gap_at_once_and_counts_it_apart() -> None:
    # Rasa numbers events it does not publish (the flat `slot` events of a
    # scenario's initial slots): from a source that keeps a conversation's order,
    # the hole is never filled, so nothing waits for it.
    evaluator = ms.Evaluator([scenario({"skill_activated": {"skill_id": "k"}})], ordered=True)
    evaluator.push_line(row(0, session_started={}))
    [decision] = evaluator.push_line(row(3, skill_activated={"skill_id": "k"}))
    assert (decision.verdict, decision.decided_at) == ("passed", 3)
    evaluator.push_line(row(1, user={"text": "came after all"}))  # late, not applied
    stats = evaluator.statistics()
    assert (stats.held, stats.gaps, stats.gaps_passed, stats.late_events) == (0, 0, 1, 1)
    assert evaluator.judged().occurrences == [
        Occurrence("gaps_passed", "c", 1, 2),
        Occurrence("late_events", "c", 1),
    ]


def test_an_ordered_source_does_not_wait_for_sequence_0() -> None:
    evaluator = ms.Evaluator([scenario({"skill_activated": {"skill_id": "k"}})], ordered=True)
    [decision] = evaluator.push_line(row(2, skill_activated={"skill_id": "k"}))
    assert decision.decided_at == 2
    assert evaluator.judged().occurrences == [Occurrence("gaps_passed", "c", 0, 1)]


def test_an_ordered_source_still_skips_duplicates_and_refuses_wild_sequences() -> None:
    evaluator = ms.Evaluator([scenario({"skill_activated": {"skill_id": "k"}})], ordered=True)
    evaluator.push_line(row(0, session_started={}))
    evaluator.push_line(row(0, session_started={}))
    with pytest.raises(ms.EventError, match="a wrong number, not a gap"):
        evaluator.push_line(row(10**6, user={"text": "typo"}))
    stats = evaluator.statistics()
    assert (stats.duplicates, stats.gaps_passed) == (1, 0)


def test_a_source_found_ordered_while_read_reaches_the_scenarios_judged_apart() -> None:
    # A Kafka partition (or a SQL table) tells its order as it is read: a conversation
    # already judged apart under its candidate scenarios follows the word too.
    candidates = [scenario({"skill_activated": {"skill_id": "k"}}, name=n) for n in "ab"]
    evaluator = ms.Evaluator(candidates)
    evaluator.consider("c", ["a", "b"])
    evaluator.push_line(row(0, session_started={}))
    evaluator.push_line(row(1, user={"text": "hi"}))  # its candidates are judged apart
    evaluator.ordered = True
    evaluator.push_line(row(3, skill_activated={"skill_id": "k"}))
    assert [v.verdict for v in evaluator.candidate_verdicts("c")] == ["passed", "passed"]


async def test_one_connection_passes_a_gap_at_once_not_after_the_gap_timeout() -> None:
    evaluator, runner, decided = timed_run(gap_timeout=5)

    async def meanwhile() -> None:
        with anyio.fail_after(2):
            while not decided:
                await anyio.sleep(0.02)

    async with open_feed("tcp://127.0.0.1:0") as feed:
        await play_with_a_gap(runner, feed, meanwhile)
    [(when, decision)] = decided
    assert (decision.verdict, decision.decided_at) == ("passed", 2)
    assert when < 2
    stats = evaluator.statistics()
    assert (stats.gaps, stats.gaps_passed, stats.held) == (0, 1, 0)


@pytest.mark.parametrize(
    ("specs", "ordered"),
    [
        (["one.jsonl"], True),
        (["one.jsonl", "two.jsonl"], False),  # several files may split a conversation
        (["dir"], False),
        (["-"], False),  # a pipe may carry anything (a dump of an unkeyed topic)
    ],
    ids=["one file", "several files", "a directory", "stdin"],
)
async def test_files_say_whether_they_keep_each_conversations_order(
    tmp_path: Path, specs: list[str], ordered: bool
) -> None:
    (tmp_path / "dir").mkdir()
    for name in ("one.jsonl", "two.jsonl", "dir/a.jsonl"):
        (tmp_path / name).write_bytes(row(0, session_started={}) + b"\n")
    paths = [s if s == "-" else str(tmp_path / s) for s in specs]
    async with open_feed(paths, stdin=io.BytesIO(row(0, session_started={}))) as feed:
        assert feed.ordered is ordered


@pytest.mark.parametrize(
    "spec",
    ["follow:events.jsonl", "tcp://127.0.0.1:0", "sqlite:///events.db", "http://127.0.0.1:9"],
    ids=["follow", "one connection per conversation", "a SQL table by id", "tracker endpoint"],
)
def test_live_stores_and_servers_keep_each_conversations_order(spec: str) -> None:
    assert open_feed(spec).ordered


# --------------------------------------------------------------------------
# Same sequence, another event: a sequence conflict, not a duplicate
# --------------------------------------------------------------------------

RENUMBERED = row(2, event_id="renumbered", memory_set={"key": "a.x", "value_json": "2"})


def test_another_event_at_an_applied_sequence_is_applied_after_it_and_named() -> None:
    # Rasa's SQL tracker store renumbers in some session-restart paths: the broker
    # then carries two events at one sequence. The second is no duplicate.
    lines = [
        row(0, session_started={}),
        row(1, user={"text": "hi"}),
        row(2, memory_set={"key": "a.x", "value_json": "1"}),
        RENUMBERED,
    ]
    got, stats = outcomes(lines, NOT_SET_LAST)
    assert got == [("passed", None)]  # the last write was 2: applied after the first
    assert (stats.sequence_conflicts, stats.duplicates, stats.events) == (1, 0, 4)
    evaluator = ms.Evaluator([scenario(NOT_SET_LAST)])
    for line in lines:
        evaluator.push_line(line)
    assert evaluator.judged().occurrences == [
        Occurrence("sequence_conflicts", "c", 2, None, "renumbered", "c-2")
    ]


def test_a_sequence_conflict_delivered_again_is_a_duplicate() -> None:
    first = row(2, memory_set={"key": "a.x", "value_json": "1"})
    lines = [row(0, session_started={}), row(1, user={"text": "hi"}), first, RENUMBERED]
    got, stats = outcomes([*lines, RENUMBERED, first], NOT_SET_LAST)  # at least once
    assert got == [("passed", None)]  # each applied once: the last write was 2
    assert (stats.sequence_conflicts, stats.duplicates) == (1, 2)


def test_two_events_held_at_one_sequence_are_applied_in_arrival_order() -> None:
    lines = [
        row(0, session_started={}),
        row(2, memory_set={"key": "a.x", "value_json": "1"}),
        RENUMBERED,  # waits with it for sequence 1
        row(1, user={"text": "hi"}),
    ]
    got, stats = outcomes(lines, NOT_SET_LAST)
    assert got == [("passed", None)]
    assert (stats.sequence_conflicts, stats.duplicates, stats.held) == (1, 0, 0)


def test_a_row_at_an_applied_sequence_with_the_same_id_is_still_a_duplicate() -> None:
    lines = [row(0, session_started={}), row(1, user={"text": "hi"})]
    _, stats = outcomes([*lines, lines[1], lines[0]], NOT_SET_LAST, ordered=True)
    assert (stats.sequence_conflicts, stats.duplicates) == (0, 2)


# --------------------------------------------------------------------------
# Found in review: each once a wrong verdict or count
# --------------------------------------------------------------------------


def test_events_held_until_the_scenario_is_named_keep_their_kind() -> None:
    # Several scenarios, no results file: a conversation's first rows wait until
    # one names its scenario, then are applied; a newer kind among them is not a
    # bad event when it is.
    a = ms.load_scenario_text(
        json.dumps(
            {
                "scenario": {
                    "name": "a",
                    "simulation_context": "x",
                    "goals": {"assertions": [{"skill_activated": {"skill_id": "k"}}]},
                }
            }
        ),
        "a.yml",
    )
    b = ms.load_scenario_text(
        json.dumps({"scenario": {"name": "b", "simulation_context": "x"}}), "b.yml"
    )
    evaluator = ms.Evaluator([a, b])
    evaluator.push_line(row(0, brand_new_kind={}))
    evaluator.push_line(json.dumps({"event": "slot", "sender_id": "c", "sequence": 1}))
    named = json.loads(row(2, skill_activated={"skill_id": "k"}))
    named["metadata"] = json.dumps({"scenario": "a"})
    [decision] = evaluator.push_line(json.dumps(named))
    assert (decision.verdict, decision.decided_at) == ("passed", 2)
    stats = evaluator.statistics()
    assert (stats.bad_events, stats.gaps, stats.held) == (0, 0, 0)


def test_a_conversation_that_names_no_scenario_is_not_kept_waiting_beyond_a_mebibyte() -> None:
    # Several scenarios loaded: events wait until one names its scenario, but
    # 200 bot messages of 20 KB are 4 MB; the wait is given up after 1 MiB,
    # reported, and what it held is let go of.
    a = ms.load_scenario_text(
        json.dumps(
            {
                "scenario": {
                    "name": "a",
                    "simulation_context": "x",
                    "goals": {"assertions": [{"bot_uttered": {"text_matches": "x"}}]},
                }
            }
        ),
        "a.yml",
    )
    b = ms.load_scenario_text(
        json.dumps({"scenario": {"name": "b", "simulation_context": "x"}}), "b.yml"
    )
    evaluator = ms.Evaluator([a, b])
    big = "x" * 20_000
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for seq in range(200):
            evaluator.push_line(row(seq, "wordy", bot={"text": big, "data": None}))
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 2 * 2**20, grown
    assert evaluator.statistics().unnamed_given_up == 1
    # ScenarioStatus a scenario afterwards no longer starts judging it: its start is gone.
    named = json.loads(row(200, "wordy", bot={"text": "x", "data": None}))
    named["metadata"] = json.dumps({"scenario": "a"})
    evaluator.push_line(json.dumps(named))
    # A conversation that names its scenario within the limit is judged.
    evaluator.push_line(row(0, "brief", bot={"text": "hello", "data": None}))
    named = json.loads(row(1, "brief", session_ended={}))
    named["metadata"] = json.dumps({"scenario": "a"})
    evaluator.push_line(json.dumps(named))
    evaluator.finish_all()
    assert [u.conversation_id for u in evaluator.unmatched()] == ["wordy"]
    assert [r.conversation_id for r in evaluator.results()] == ["brief"]
    report = build_report(evaluator)
    assert report.warnings is not None and report.warnings.unnamed_given_up == 1
    assert any(
        "1 conversation named no scenario within the first 1,000 events or 1 MiB" in line
        for line in notes(report)
    )


def test_a_held_row_without_sequence_survives_a_checkpoint() -> None:
    wrote = {"memory_was_set": [{"name": "a.k", "value": 1}]}
    first = [
        row(0, session_started={}),
        row(2, user={"text": "hi"}),
        row(None, event_id="x", memory_set={"key": "a.k", "value_json": "1"}),
    ]
    rest = [row(1, user={"text": "hello"}), row(3, session_ended={})]
    evaluator = ms.Evaluator([scenario(wrote)])
    for line in first:
        evaluator.push_line(line)
    resumed = ms.Evaluator([scenario(wrote)])
    resumed.restore(evaluator.checkpoint())
    for line in [*first, *rest]:  # the feed read again from the start
        resumed.push_line(line)
    [result] = resumed.results()
    assert result.assertions[0].verdict == "passed"


def test_events_after_the_end_are_late_whatever_their_order() -> None:
    _, stats = outcomes(
        [
            row(0, session_started={}),
            row(1, session_ended={}),
            row(5, user={"text": "x"}),
            row(4, user={"text": "y"}),
        ],
        NOT_SET_LAST,
    )
    assert (stats.late_events, stats.duplicates) == (2, 0)


def test_a_flat_row_is_never_taken_for_a_learnt_newer_kind() -> None:
    evaluator = ms.Evaluator([scenario({"bot_uttered": {"text_matches": "hello"}})])
    evaluator.push_line(row(0, data={"x": 1}))  # a newer kind named `data`, learnt
    evaluator.push_chunk(
        b'{"event": "bot", "conversation_id": "c", "sequence": 1, "text": "hello", "data": {}}\n'
    )
    evaluator.finish_all()
    [result] = evaluator.results()
    assert result.assertions[0].verdict == "passed"


def test_a_restored_run_counts_the_events_of_unjudged_conversations_once() -> None:
    a = ms.load_scenario_text(
        json.dumps({"scenario": {"name": "a", "simulation_context": "x"}}), "a.yml"
    )
    b = ms.load_scenario_text(
        json.dumps({"scenario": {"name": "b", "simulation_context": "x"}}), "b.yml"
    )
    lines = [row(0, "u", user={"text": "hi"}), row(1, "u", user={"text": "hi"})]
    first = ms.Evaluator([a, b])
    for line in lines:
        first.push_line(line)
    resumed = ms.Evaluator([a, b])
    resumed.restore(first.checkpoint())
    for line in lines:
        resumed.push_line(line)
    assert resumed.statistics().events == first.statistics().events == 2


async def test_files_are_judged_the_same_however_slowly_they_are_read(tmp_path: Any) -> None:
    # The gap timeout is for live feeds: on files (several: they may split a
    # conversation in any order), conversation c's missing sequence 1 comes near
    # the end, and is applied in order however long the reading took to get there.
    filler = [row(i % 500, f"f{i // 500}", user={"text": "x"}) for i in range(40_000)]
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_bytes(
        b"\n".join(
            [
                row(0, session_started={}),
                row(2, memory_set={"key": "a.x", "value_json": "2"}),
                *filler,
            ]
        )
        + b"\n"
    )
    second.write_bytes(row(1, memory_set={"key": "a.x", "value_json": "1"}) + b"\n")
    evaluator = ms.Evaluator([scenario(NOT_SET_LAST)])
    async with open_feed([str(first), str(second)]) as feed:
        assert not feed.ordered
        await Runner(evaluator, gap_timeout=0.001).run(feed)
    result = next(r for r in evaluator.results() if r.conversation_id == "c")
    assert result.assertions[0].verdict == "passed"  # the last write, in order, was 2
    stats = evaluator.statistics()
    assert (stats.gaps, stats.gaps_passed, stats.late_events) == (0, 0, 0)


async def test_a_conversation_settled_by_the_gap_timeout_gets_its_stop_message() -> None:
    evaluator = ms.Evaluator(
        [
            scenario(
                {"bot_did_not_utter": {"text_matches": "sorry"}},
                {"skill_activated": {"skill_id": "k"}},
            )
        ]
    )
    async with open_feed("tcp://127.0.0.1:0") as feed:
        feed.ordered = False  # a source that can reorder: the gap is waited for
        host, port = feed.address.removeprefix("tcp://").rsplit(":", 1)  # type: ignore[union-attr]

        async def simulator() -> None:
            async with await anyio.connect_tcp(host, int(port)) as stream:
                await stream.send(row(0, session_started={}) + b"\n")
                await stream.send(row(2, bot={"text": "sorry", "data": {}}) + b"\n")
                with anyio.fail_after(5):
                    reply = json.loads((await stream.receive()).split(b"\n")[0])
                assert (reply["type"], reply["assertion"]["decided_at"]) == ("stop", 2)
                await stream.send(row(3, session_ended={}) + b"\n")

        async with anyio.create_task_group() as tg:
            tg.start_soon(simulator)
            await Runner(evaluator, linger=0.2, gap_timeout=0.3).run(feed)
    [result] = evaluator.results()
    assert [a.verdict for a in result.assertions] == ["failed", "skipped"]
    assert (
        "after assertion #0 `bot_did_not_utter` failed at sequence 2" in result.assertions[1].reason
    )


def test_a_wild_sequence_is_a_bad_event_not_a_new_high_water_mark() -> None:
    evaluator = ms.Evaluator([scenario({"skill_activated": {"skill_id": "k"}})])
    evaluator.push_line(row(0, session_started={}))
    with pytest.raises(
        ms.EventError,
        match=r"`sequence` 1000000000000 is more than 100,000 "
        r"beyond the highest this conversation has had",
    ):
        evaluator.push_line(row(10**12, user={"text": "typo"}))
    decisions = evaluator.push_line(row(1, skill_activated={"skill_id": "k"}))
    assert [(d.verdict, d.decided_at) for d in decisions] == [("passed", 1)]
    assert evaluator.push_line(row(2, session_ended={})) == []
    assert evaluator.is_open("c") is False  # it ended: the typo did not wedge it


# --------------------------------------------------------------------------
# A run that lasts: finished conversations let go of (keep_finished)
# --------------------------------------------------------------------------


def finished_conversation(cid: str, fails: bool) -> list[bytes]:
    return [
        row(0, cid, session_started={}),
        row(1, cid, skill_activated={"skill_id": "other" if fails else "k"}),
        row(2, cid, session_ended={}),
    ]


def test_only_the_most_recent_finished_conversations_are_kept() -> None:
    evaluator = ms.Evaluator([scenario({"skill_activated": {"skill_id": "k"}})], keep_finished=10)
    for n in range(1000):
        for line in finished_conversation(f"c{n}", fails=n % 4 == 0):
            evaluator.push_line(line)
    assert [r.conversation_id for r in evaluator.results()] == [f"c{n}" for n in range(990, 1000)]
    report = ms.build_report(evaluator)
    s = report.summary
    # Every conversation is counted; only the last ten are listed.
    assert (s.conversations, s.passed, s.failed, s.assertions, s.omitted) == (
        1000,
        750,
        250,
        1000,
        990,
    )
    assert evaluator.statistics().conversations == 1000
    # An event of a conversation let go of is late: it opens no new one.
    evaluator.push_line(row(3, "c5", user={"text": "late"}))
    assert evaluator.statistics().late_events == 1
    assert len(evaluator.results()) == 10


def test_a_checkpoint_keeps_the_counters_of_conversations_let_go_of() -> None:
    scen = scenario({"skill_activated": {"skill_id": "k"}})
    first = ms.Evaluator([scen], keep_finished=2)
    for n in range(5):
        for line in finished_conversation(f"c{n}", fails=False):
            first.push_line(line)
    resumed = ms.Evaluator([scen], keep_finished=2)
    resumed.restore(first.checkpoint())
    assert ms.build_report(resumed).summary == ms.build_report(first).summary
    assert len(first.checkpoint()) < 3000  # two conversations saved, not five


def test_junit_writes_conversations_as_they_are_let_go_of(tmp_path: Path) -> None:
    scen = scenario({"skill_activated": {"skill_id": "k"}})
    evaluator = ms.Evaluator([scen], keep_finished=3)
    writer = JunitWriter(str(tmp_path / "junit.xml"))
    evaluator.on_let_go = writer.add
    for n in range(50):
        for line in finished_conversation(f"c{n}", fails=n % 5 == 0):
            evaluator.push_line(line)
        if n == 10:  # written out already, to its scenario's body beside it, as they go
            assert writer.tests == 8
            assert [p.name[:11] for p in tmp_path.iterdir()] == [".junit.xml-"]
    writer.finish(ms.build_report(evaluator))
    root = ET.parse(tmp_path / "junit.xml").getroot()
    [suite] = root.findall("testsuite")  # one scenario: its fifty runs
    assert suite.get("name") == "t"
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == [f"run {n} #0 skill_activated" for n in range(1, 51)]
    ids = [c.find("properties/property[@name='conversation_id']") for c in cases]
    assert [p.get("value") for p in ids if p is not None] == [f"c{n}" for n in range(50)]
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("50", "10", "0")
    assert [p.name for p in tmp_path.iterdir()] == ["junit.xml"]


def test_conversations_that_name_no_scenario_are_let_go_of_too() -> None:
    # Several scenarios, conversations that never name one and end: they are
    # finished and counted, and keep_finished lets them go like any other.
    evaluator = ms.Evaluator(
        [scenario({"skill_activated": {"skill_id": "k"}}, name="a"),
         scenario({"skill_activated": {"skill_id": "k"}}, name="b")],
        keep_finished=2,
    )  # fmt: skip
    for n in range(100):
        evaluator.push_line(row(0, f"u{n}", session_started={}))
        evaluator.push_line(row(1, f"u{n}", session_ended={}))
    assert len(evaluator.unmatched()) == 2
    assert evaluator.statistics().unmatched == 100
    assert evaluator.open_conversations() == {}


def test_the_notes_count_in_words_that_agree() -> None:
    from mantle_stream.outputs.report import Report, Summary, Warnings

    warned = Warnings(bad_events=2, duplicates=76, late_events=1, gaps=3, foreign_events=2)
    assert notes(Report(conversations=[], summary=Summary(0, 0, 0, 0, 0), warnings=warned)) == [
        "2 bad events skipped",
        "76 duplicate events skipped",
        "1 late event ignored (after its conversation ended, or after its gap was given up on)",
        "3 gaps in `sequence` given up on (normal when the agent's sequences skip numbers)",
        "2 events refused: its conversation belongs to another connection",
    ]
