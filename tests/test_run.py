"""The live runner over real feeds: stop messages, fail-fast, idle timeout, end of feed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

import mantle_stream as ms
from mantle_stream.feeds import open_feed
from mantle_stream.runner import Runner, StopMessage, run_feed

from _harness import line, scenario

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(30)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


FORBID_CANNOT_HELP = {"bot_did_not_utter": {"utter_name": "utter_cannot_help"}}
SKILL = {"skill_activated": {"skill_id": "card_replace"}}


async def read_line(stream: anyio.abc.ByteStream, buffer: bytearray) -> bytes:
    while b"\n" not in buffer:
        buffer.extend(await stream.receive())
    end = buffer.index(b"\n")
    out = bytes(buffer[:end])
    del buffer[: end + 1]
    return out


async def test_stop_message_reaches_the_client_before_it_sends_its_next_event() -> None:
    evaluator = ms.Evaluator([scenario(SKILL, FORBID_CANNOT_HELP)])
    stops: list[StopMessage] = []
    runner = Runner(evaluator, linger=0.2, on_stop=stops.append)
    async with open_feed("tcp://127.0.0.1:0") as feed:
        host, port = feed.address.removeprefix("tcp://").rsplit(":", 1)  # type: ignore[union-attr]

        async def simulator() -> None:
            async with await anyio.connect_tcp(host, int(port)) as stream:
                buffer = bytearray()
                await stream.send(line("c1", 0, user={"text": "hi"}))
                await stream.send(
                    line("c1", 1, bot={"text": "no", "utter_name": "utter_cannot_help"})
                )
                # The simulator waits for the verdict before playing another turn.
                with anyio.fail_after(5):
                    reply = json.loads(await read_line(stream, buffer))
                assert reply == {
                    "type": "stop",
                    "conversation_id": "c1",
                    "verdict": "failed",
                    "assertion": {
                        "index": 1,
                        "kind": "bot_did_not_utter",
                        "verdict": "failed",
                        "decided_at": 1,
                        "reason": reply["assertion"]["reason"],
                        # Where the assertion is written: a scenario built from
                        # text has its lines but no file.
                        "file": None,
                        "line": 1,
                    },
                    "events": 2,
                    "stop": True,
                }
                assert "utter_cannot_help" in reply["assertion"]["reason"]
                await stream.send(line("c1", 2, session_ended={}))

        async with anyio.create_task_group() as tg:
            tg.start_soon(simulator)
            outcome = await runner.run(feed)
    assert outcome.ending == "ended"
    assert outcome.stopped_early == ("c1",)
    assert [s.conversation_id for s in stops] == ["c1"]
    [result] = evaluator.results()
    # The skill check never had its chance: the simulator stopped the conversation.
    assert [a.verdict for a in result.assertions] == ["skipped", "failed"]
    assert result.assertions[0].reason == (
        "not judged: the conversation was stopped early after assertion #1 "
        "`bot_did_not_utter` failed at sequence 1"
    )
    assert result.verdict == "failed"


async def test_a_file_is_never_stopped_so_nothing_is_skipped(tmp_path: Path) -> None:
    feed_file = tmp_path / "feed.jsonl"
    feed_file.write_bytes(
        line("c", 0, bot={"utter_name": "utter_cannot_help"})
        + line("c", 1, skill_activated={"skill_id": "card_replace"})
    )
    evaluator = ms.Evaluator([scenario(SKILL, FORBID_CANNOT_HELP)])
    outcome = await run_feed(evaluator, str(feed_file))
    assert outcome.stopped_early == ()
    [result] = evaluator.results()
    assert [(a.verdict, a.decided_at) for a in result.assertions] == [("passed", 1), ("failed", 0)]


async def test_several_clients_each_get_only_their_own_stop_messages() -> None:
    evaluator = ms.Evaluator([scenario(FORBID_CANNOT_HELP)])
    received: dict[str, list[dict[str, Any]]] = {}
    async with open_feed("tcp://127.0.0.1:0") as feed:
        host, port = feed.address.removeprefix("tcp://").rsplit(":", 1)  # type: ignore[union-attr]

        async def client(cid: str, fails: bool) -> None:
            async with await anyio.connect_tcp(host, int(port)) as stream:
                utter = "utter_cannot_help" if fails else "utter_ok"
                await stream.send(line(cid, 0, bot={"text": "x", "utter_name": utter}))
                buffer = bytearray()
                if fails:
                    with anyio.fail_after(5):
                        received[cid] = [json.loads(await read_line(stream, buffer))]
                await stream.send(line(cid, 1, session_ended={}))
                await anyio.sleep(0.3)
                with anyio.move_on_after(0.2):
                    while True:
                        message = json.loads(await read_line(stream, buffer))
                        received.setdefault(cid, []).append(message)

        async with anyio.create_task_group() as tg:
            for i in range(6):
                tg.start_soon(client, f"c{i}", i % 2 == 0)
            outcome = await Runner(evaluator, linger=0.3).run(feed)
    assert outcome.ending == "ended"
    assert sorted(received) == ["c0", "c2", "c4"]
    for cid, messages in received.items():
        assert [m["conversation_id"] for m in messages] == [cid]
    verdicts = {r.conversation_id: r.verdict for r in evaluator.results()}
    assert verdicts == {f"c{i}": "failed" if i % 2 == 0 else "passed" for i in range(6)}


async def test_a_conversation_settled_as_passed_gets_a_passed_stop_message() -> None:
    evaluator = ms.Evaluator([scenario(SKILL)])
    stops: list[StopMessage] = []
    async with open_feed("tcp://127.0.0.1:0") as feed:
        host, port = feed.address.removeprefix("tcp://").rsplit(":", 1)  # type: ignore[union-attr]

        async def client() -> None:
            async with await anyio.connect_tcp(host, int(port)) as stream:
                await stream.send(line("c", 0, skill_activated={"skill_id": "card_replace"}))
                with anyio.fail_after(5):
                    reply = json.loads(await read_line(stream, bytearray()))
                assert (reply["verdict"], reply["stop"]) == ("passed", True)
                await stream.send(line("c", 1, session_ended={}))

        async with anyio.create_task_group() as tg:
            tg.start_soon(client)
            await Runner(evaluator, linger=0.2, on_stop=stops.append).run(feed)
    assert [(s.verdict, s.assertion.kind) for s in stops] == [("passed", "skill_activated")]


async def test_no_stop_message_when_the_conversation_ended_by_itself(tmp_path: Path) -> None:
    feed_file = tmp_path / "feed.jsonl"
    feed_file.write_bytes(
        line("c", 0, bot={"utter_name": "utter_cannot_help"}) + line("c", 1, session_ended={})
    )
    stops: list[StopMessage] = []
    # One chunk holds both lines: the conversation ended before anyone could stop it.
    outcome = await run_feed(
        ms.Evaluator([scenario(FORBID_CANNOT_HELP)]), str(feed_file), on_stop=stops.append
    )
    assert outcome.ending == "end-of-input"
    assert stops == []


async def test_fail_fast_ends_the_run_at_the_first_failure(tmp_path: Path) -> None:
    feed_file = tmp_path / "feed.jsonl"
    feed_file.write_bytes(
        b"".join(
            line(f"c{i}", 0, bot={"utter_name": "utter_cannot_help" if i == 3 else "ok"})
            for i in range(10)
        )
    )
    evaluator = ms.Evaluator([scenario(FORBID_CANNOT_HELP)])
    decided: list[ms.Decision] = []
    outcome = await run_feed(evaluator, str(feed_file), fail_fast=True, on_decisions=decided.extend)
    assert outcome.ending == "fail-fast"
    assert [(d.conversation_id, d.verdict) for d in decided] == [("c3", "failed")]
    assert evaluator.statistics().events == 4  # nothing after the failing event


async def test_idle_conversations_are_finished_after_the_timeout(tmp_path: Path) -> None:
    path = tmp_path / "growing.jsonl"
    path.write_bytes(line("quiet", 0, user={"text": "hello?"}))
    evaluator = ms.Evaluator([scenario(SKILL)])
    decided: list[ms.Decision] = []
    with anyio.fail_after(10):
        outcome = await run_feed(
            evaluator, f"follow:{path}", idle_timeout=0.3, linger=0.2, on_decisions=decided.extend
        )
    assert outcome.ending == "ended"
    assert [(d.conversation_id, d.verdict, d.decided_at) for d in decided] == [
        ("quiet", "failed", None)
    ]


async def test_follow_ends_once_every_conversation_ended(tmp_path: Path) -> None:
    path = tmp_path / "sim.jsonl"
    evaluator = ms.Evaluator([scenario(SKILL)])

    async def simulator() -> None:
        await anyio.sleep(0.2)  # the file does not exist yet when the run starts
        payloads: list[dict[str, Any]] = [
            {"user": {"text": "hi"}},
            {"skill_activated": {"skill_id": "card_replace"}},
            {"session_ended": {}},
        ]
        with path.open("ab") as fh:
            for seq, payload in enumerate(payloads):
                fh.write(line("c", seq, **payload))
                fh.flush()
                await anyio.sleep(0.05)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(simulator)
            outcome = await run_feed(evaluator, f"follow:{path}", linger=0.3)
    assert outcome.ending == "ended"
    assert [r.verdict for r in evaluator.results()] == ["passed"]


async def test_stop_from_outside_keeps_pending_verdicts_pending() -> None:
    evaluator = ms.Evaluator([scenario(SKILL)])
    async with open_feed("tcp://127.0.0.1:0") as feed:
        host, port = feed.address.removeprefix("tcp://").rsplit(":", 1)  # type: ignore[union-attr]
        runner = Runner(evaluator, linger=None)

        async def client_then_stop() -> None:
            async with await anyio.connect_tcp(host, int(port)) as stream:
                await stream.send(line("c", 0, user={"text": "hi"}))
                while evaluator.statistics().events < 1:
                    await anyio.sleep(0.01)
            runner.stop()

        async with anyio.create_task_group() as tg:
            tg.start_soon(client_then_stop)
            outcome = await runner.run(feed)
    assert outcome.ending == "cancelled"
    assert [a.verdict for a in evaluator.result("c").assertions] == ["pending"]


async def test_one_clients_bad_line_is_answered_there_and_the_others_go_on() -> None:
    evaluator = ms.Evaluator([scenario(SKILL)])
    answers: dict[str, list[dict[str, Any]]] = {}
    async with open_feed("tcp://127.0.0.1:0") as feed:
        host, port = feed.address.removeprefix("tcp://").rsplit(":", 1)  # type: ignore[union-attr]

        async def client(cid: str, bad: bool) -> None:
            async with await anyio.connect_tcp(host, int(port)) as stream:
                if bad:
                    await stream.send(b'{"conversation_id": "x", "sequence": 0}\n')
                    with anyio.fail_after(5):
                        answers[cid] = [json.loads(await read_line(stream, bytearray()))]
                await stream.send(line(cid, 0, skill_activated={"skill_id": "card_replace"}))
                await stream.send(line(cid, 1, session_ended={}))

        async with anyio.create_task_group() as tg:
            tg.start_soon(client, "good", False)
            tg.start_soon(client, "bad", True)
            outcome = await Runner(evaluator, linger=0.3).run(feed)
    assert outcome.ending == "ended"
    assert answers["bad"] == [
        {"type": "error", "error": "bad event", "line": 1, "message": answers["bad"][0]["message"]}
    ]
    assert "no payload key" in answers["bad"][0]["message"]
    assert {r.conversation_id: r.verdict for r in evaluator.results()} == {
        "good": "passed",
        "bad": "passed",
    }
    assert evaluator.statistics().bad_events == 1


async def test_a_client_cannot_write_into_another_clients_conversation() -> None:
    evaluator = ms.Evaluator([scenario(FORBID_CANNOT_HELP)])
    owner_got: list[dict[str, Any]] = []
    async with open_feed("tcp://127.0.0.1:0") as feed:
        host, port = feed.address.removeprefix("tcp://").rsplit(":", 1)  # type: ignore[union-attr]
        opened = anyio.Event()
        intruded = anyio.Event()

        async def owner() -> None:
            async with await anyio.connect_tcp(host, int(port)) as stream:
                await stream.send(line("c1", 0, user={"text": "hi"}))
                opened.set()
                await intruded.wait()
                await anyio.sleep(0.2)
                await stream.send(line("c1", 1, bot={"text": "ok", "utter_name": "utter_ok"}))
                await stream.send(line("c1", 2, session_ended={}))
                with anyio.move_on_after(0.3):
                    owner_got.append(json.loads(await read_line(stream, bytearray())))

        async def intruder() -> None:
            await opened.wait()
            async with await anyio.connect_tcp(host, int(port)) as stream:
                # A forbidden message and an end, in someone else's conversation.
                await stream.send(
                    line("c1", 1, bot={"text": "no", "utter_name": "utter_cannot_help"})
                )
                await stream.send(line("c1", 2, session_ended={}))
                await anyio.sleep(0.1)
                intruded.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(owner)
            tg.start_soon(intruder)
            await Runner(evaluator, linger=0.3).run(feed)
    [result] = evaluator.results()
    assert result.verdict == "passed" and owner_got == []  # judged on the owner's events
    assert evaluator.statistics().foreign_events == 2


async def test_a_reconnecting_simulator_takes_its_conversation_over() -> None:
    evaluator = ms.Evaluator([scenario(SKILL)])
    async with open_feed("tcp://127.0.0.1:0") as feed:
        host, port = feed.address.removeprefix("tcp://").rsplit(":", 1)  # type: ignore[union-attr]

        async def simulator() -> None:
            async with await anyio.connect_tcp(host, int(port)) as stream:
                await stream.send(line("c1", 0, user={"text": "hi"}))
            await anyio.sleep(0.2)  # the first connection is gone
            async with await anyio.connect_tcp(host, int(port)) as stream:
                await stream.send(line("c1", 1, skill_activated={"skill_id": "card_replace"}))
                await stream.send(line("c1", 2, session_ended={}))

        async with anyio.create_task_group() as tg:
            tg.start_soon(simulator)
            await Runner(evaluator, linger=0.5).run(feed)
    [result] = evaluator.results()
    assert result.verdict == "passed"
    assert evaluator.statistics().foreign_events == 0


async def test_a_client_that_never_reads_stalls_no_one() -> None:
    # `deaf` settles thousands of conversations and reads none of its stop
    # messages; `other`'s own stop message still arrives at once.
    evaluator = ms.Evaluator([scenario(FORBID_CANNOT_HELP, SKILL)])
    waited: list[float] = []
    async with open_feed("tcp://127.0.0.1:0") as feed:
        host, port = feed.address.removeprefix("tcp://").rsplit(":", 1)  # type: ignore[union-attr]
        flooded, judged = anyio.Event(), anyio.Event()

        async def deaf() -> None:
            async with await anyio.connect_tcp(host, int(port)) as stream:
                await stream.send(
                    b"".join(
                        line(f"d{i}", 0, bot={"text": "x" * 500, "utter_name": "utter_cannot_help"})
                        for i in range(3000)
                    )
                )
                flooded.set()
                with anyio.move_on_after(3):  # connected, reading nothing, till the end
                    await judged.wait()

        async def other() -> None:
            await flooded.wait()
            async with await anyio.connect_tcp(host, int(port)) as stream:
                started = anyio.current_time()
                await stream.send(
                    line("o", 0, bot={"text": "no", "utter_name": "utter_cannot_help"})
                )
                with anyio.fail_after(5):
                    while True:
                        message = json.loads(await read_line(stream, bytearray()))
                        if message.get("conversation_id") == "o":
                            break
                waited.append(anyio.current_time() - started)
            runner.stop(finish=True)  # the deaf client's conversations never end

        runner = Runner(evaluator, linger=0.3)
        async with anyio.create_task_group() as tg:
            tg.start_soon(deaf)
            tg.start_soon(other)
            await runner.run(feed)
            judged.set()
    assert waited and waited[0] < 2  # it used to wait for the deaf client's send timeout
    assert feed.rejected.get("send timeout", 0) == 1  # the deaf client was dropped
