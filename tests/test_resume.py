"""Crash-safe resume (--state), de-duplication, reordering and the bad-event policy.

The command line runs as a process where a run is interrupted, timed or locked out
of its state file (a lock is per process), and in this process (``cli.main``) else.
"""

from __future__ import annotations

import itertools
import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import mantle_stream as ms
from mantle_stream.core.recorded import load_results
from mantle_stream.core.verdicts import MAX_OCCURRENCES
from mantle_stream.feeds.lines import split_lines

from _harness import run_cli, run_cli_in_process

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "eval"
SCENARIOS = EXAMPLES / "scenarios"
ALL_EVENTS = EXAMPLES / "events" / "all.jsonl"
RESULTS = EXAMPLES / "results" / "2026-12-01T09-00-00"
RECORDED = load_results(RESULTS)
ASSIGNMENTS = {cid: run.scenario for cid, run in RECORDED.items()}
CARD_OK = "sim-5588a28d-011b-4f0b-822a-91e1448a99c5"
#: The examples' one deliberate sequence gap (a transfer run skips two sequences).
GAP_AT = {
    "warning": "gaps",
    "conversation_id": "sim-66a038ae-b30b-47be-8eb5-64703ce5024f",
    "sequence": 36,
    "last": 37,
}
GAP = {"gaps": 1, "occurrences": [GAP_AT]}
#: ... as the command line reads it from one file, which holds each conversation in
#: order: the gap is passed at once, not waited for.
GAP_PASSED = {"gaps_passed": 1, "occurrences": [{**GAP_AT, "warning": "gaps_passed"}]}


def evaluator(**options: Any) -> ms.Evaluator:
    return ms.Evaluator(ms.load_scenarios([SCENARIOS]), assignments=ASSIGNMENTS, **options)


def report_of(ev: ms.Evaluator) -> dict[str, Any]:
    """The report as the CLI prints it with ``--results``."""
    report: dict[str, Any] = json.loads(ms.build_report(ev, RECORDED).to_json())
    return report


def uninterrupted(*, ordered: bool = False) -> dict[str, Any]:
    """The report of one reading (``ordered``: as from a source that keeps each
    conversation's order, which passes a gap at once)."""
    ev = evaluator(ordered=ordered)
    for chunk in split_lines(ALL_EVENTS.read_bytes()):
        ev.push_chunk(chunk)
    ev.finish_all()
    return report_of(ev)


LINES = ALL_EVENTS.read_bytes().splitlines(keepends=True)


@pytest.mark.parametrize("cut", [1, 57, 200, 333, len(LINES) - 1])
def test_restore_then_reread_from_the_start_gives_the_uninterrupted_report(cut: int) -> None:
    first = evaluator()
    first.push_chunk(b"".join(LINES[:cut]))
    saved = first.checkpoint()
    resumed = evaluator()
    resumed.restore(saved)
    resumed.push_chunk(b"".join(LINES))  # the whole feed again, as after a restart
    resumed.finish_all()
    assert report_of(resumed) == uninterrupted()
    # Events held in a reorder window were not applied: read again, they are new.
    assert resumed.statistics().replayed == cut - first.statistics().held


def test_a_checkpoint_from_other_scenarios_is_refused() -> None:
    saved = evaluator().checkpoint()
    other = ms.Evaluator(ms.load_scenarios([SCENARIOS / "transfer_mcp.yml"]))
    with pytest.raises(ms.UsageError, match="taken with other scenarios"):
        other.restore(saved)


def test_duplicated_events_are_applied_once() -> None:
    doubled = b"".join(line + line for line in LINES)  # at-least-once delivery
    ev = evaluator()
    ev.push_chunk(doubled)
    ev.finish_all()
    report = report_of(ev)
    warnings = report.pop("warnings")
    listed = warnings.pop("occurrences")
    assert warnings == {"duplicates": len(LINES), "gaps": 1}
    # Each named, up to the bound; the gap is not crowded out by them.
    assert sum(o["warning"] == "duplicates" for o in listed) == MAX_OCCURRENCES
    assert listed[0] == {"warning": "duplicates", "conversation_id": CARD_OK, "sequence": 0}
    assert GAP_AT in listed
    clean = uninterrupted()
    clean.pop("warnings")
    assert report == clean


def test_a_repeated_tool_run_does_not_break_a_no_extra_calls_window() -> None:
    scenario = ms.load_scenario_text(
        json.dumps(
            {
                "scenario": {
                    "name": "t",
                    "simulation_context": "x",
                    "goals": {
                        "assertions": [
                            {
                                "tools_within_one_turn": {
                                    "allow_extra_calls": False,
                                    "calls": [
                                        {"tool_executed": {"tool_name": "a", "source": "local"}},
                                        {"tool_executed": {"tool_name": "b", "source": "local"}},
                                    ],
                                }
                            }
                        ]
                    },
                }
            }
        )
    )
    ev = ms.Evaluator([scenario])
    run_a = {
        "conversation_id": "c",
        "sequence": 1,
        "tool_executed": {"tool_name": "a", "source": "local"},
    }
    for event in (
        {"conversation_id": "c", "sequence": 0, "user": {"text": "hi"}},
        run_a,
        run_a,
        {
            "conversation_id": "c",
            "sequence": 2,
            "tool_executed": {"tool_name": "b", "source": "local"},
        },
        {"conversation_id": "c", "sequence": 3, "user": {"text": "thanks"}},
    ):
        ev.push_line(json.dumps(event))
    [result] = ev.results()
    assert (result.assertions[0].verdict, result.assertions[0].decided_at) == ("passed", 3)


def swapped_feed(rng: random.Random) -> bytes:
    """Adjacent events of one conversation swapped here and there."""
    lines = list(LINES)
    by_conversation: dict[str, list[int]] = {}
    for i, line in enumerate(lines):
        row = json.loads(line)
        by_conversation.setdefault(row.get("conversation_id") or row["sender_id"], []).append(i)
    for positions in by_conversation.values():
        for a, b in itertools.pairwise(positions):
            if rng.random() < 0.1:
                lines[a], lines[b] = lines[b], lines[a]
    return b"".join(lines)


@pytest.mark.parametrize("seed", range(5))
def test_the_default_reorder_window_applies_reordered_events_in_sequence_order(seed: int) -> None:
    ev = evaluator()
    ev.push_chunk(swapped_feed(random.Random(seed)))
    ev.finish_all()
    assert report_of(ev) == uninterrupted()


def test_without_a_window_a_late_event_is_counted_not_applied() -> None:
    ev = evaluator(reorder_window=0)
    ev.push_chunk(swapped_feed(random.Random(1)))
    ev.finish_all()
    stats = ev.statistics()
    # Each swapped pair: the later event opens a gap that is given up at once, and
    # the earlier one then comes too late to apply. Late, not a duplicate.
    assert stats.late_events > 0 and stats.duplicates == 0
    assert stats.gaps == stats.late_events + 1  # and the examples' own


def test_a_gap_that_never_fills_is_released_after_the_window() -> None:
    scenario = ms.load_scenario_text(
        json.dumps(
            {
                "scenario": {
                    "name": "t",
                    "simulation_context": "x",
                    "goals": {"assertions": [{"skill_activated": {"skill_id": "s"}}]},
                }
            }
        )
    )
    ev = ms.Evaluator([scenario], reorder_window=2)
    line = '{{"conversation_id":"c","sequence":{},"user":{{}}}}'
    assert ev.push_line(line.format(0)) == []
    ev.push_line('{"conversation_id":"c","sequence":5,"skill_activated":{"skill_id":"s"}}')
    assert ev.results()[0].assertions[0].verdict == "pending"  # waiting for 1..4
    ev.push_line(line.format(6))
    decided = ev.push_line(line.format(7))  # the window (2) overflows: 5 goes through
    assert [(d.verdict, d.decided_at) for d in decided] == [("passed", 5)]
    assert ev.statistics().gaps == 1


def test_skip_policy_reports_bad_lines_and_judges_the_rest() -> None:
    bad = b'{"conversation_id": "x", "sequence": 0}\n{not json\n'
    feed = b"".join(LINES[:100]) + bad + b"".join(LINES[100:])
    errors: list[ms.EventError] = []
    ev = evaluator()
    ev.push_chunk(feed, on_bad=errors.append)
    ev.finish_all()
    assert [(e.line, e.message.split(" (")[0]) for e in errors] == [
        (101, "no payload key"),
        (102, "malformed JSON: object keys must be strings"),
    ]
    report = report_of(ev)
    assert report.pop("warnings") == {"bad_events": 2, **GAP}
    clean = uninterrupted()
    clean.pop("warnings")
    assert report == clean


def test_cli_strict_policy_prints_what_was_judged_then_exits_2(tmp_path: Path) -> None:
    feed = tmp_path / "feed.jsonl"
    feed.write_bytes(b"".join(LINES[:100]) + b"{oops\n" + b"".join(LINES[100:]))
    proc = run_cli_in_process(
        "check",
        str(SCENARIOS),
        "--events",
        str(feed),
        "--format",
        "json",
        "--results",
        str(RESULTS),
    )
    assert proc.returncode == 2
    assert f"{feed}:101: bad event: malformed JSON" in proc.stderr
    assert "--on-bad-event=skip" in proc.stderr
    report = json.loads(proc.stdout)
    verdicts = {a["verdict"] for c in report["conversations"] for a in c["assertions"]}
    assert "pending" in verdicts  # judged so far, not finished


def test_cli_skip_policy_goes_on_and_counts(tmp_path: Path) -> None:
    feed = tmp_path / "feed.jsonl"
    feed.write_bytes(b"".join(LINES[:100]) + b"{oops\n" + b"".join(LINES[100:]))
    proc = run_cli_in_process(
        "check",
        str(SCENARIOS),
        "--events",
        str(feed),
        "--format",
        "json",
        "--on-bad-event",
        "skip",
        "--results",
        str(RESULTS),
    )
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    assert report.pop("warnings") == {"bad_events": 1, **GAP_PASSED}
    clean = uninterrupted()
    clean.pop("warnings")
    assert report == clean
    assert f"mantle-stream: skipped {feed}:101: bad event: malformed JSON" in proc.stderr


def big_feed(path: Path) -> None:
    """The examples repeated under fresh conversation ids: long enough to kill mid-run.

    Each copy names its scenario in the envelope metadata (as a custom simulator
    may), and every fifth row of a conversation carries no ``sequence`` (the rest
    are renumbered so that no gap opens): the resume must skip replayed rows of
    both kinds, those without a sequence by how many of them it had seen.
    """
    out = []
    for copy in range(60):
        numbered: dict[str, int] = {}
        for line in LINES:
            row = json.loads(line)
            cid = row["conversation_id"]
            metadata = json.loads(row["metadata"] or "{}")
            metadata["scenario"] = ASSIGNMENTS[cid]
            row["metadata"] = json.dumps(metadata)
            row["conversation_id"] = f"{cid}-{copy}"
            count = numbered.get(cid, 0)
            if count % 5 == 4:
                row["sequence"] = None
                row["event_id"] = f"{row['event_id']}-{copy}"
            else:
                row["sequence"] = count - count // 5
            numbered[cid] = count + 1
            out.append(json.dumps(row))
    path.write_text("\n".join(out) + "\n")


@pytest.mark.slow  # a dozen killed and resumed runs: 20 s
@pytest.mark.timeout(240)
def test_sigkill_at_random_points_then_resume_gives_the_uninterrupted_report(
    tmp_path: Path,
) -> None:
    feed = tmp_path / "big.jsonl"
    big_feed(feed)
    args = ["check", str(SCENARIOS), "--events", str(feed), "--format", "json"]
    started = time.monotonic()
    clean = run_cli(*args)
    took = time.monotonic() - started
    assert clean.returncode == 1
    rng = random.Random(5)
    state = tmp_path / "state.json"
    kills = 0
    for attempt in range(8):
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mantle_stream",
                *args,
                "--state",
                str(state),
                "--state-interval",
                "0.02",
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        if attempt < 4:  # kill somewhere in the run (start-up included), then let it finish
            time.sleep(rng.uniform(0.3, took))
        if attempt < 4 and proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
            proc.communicate(timeout=30)
            continue
        stdout, _ = proc.communicate(timeout=30)
        assert proc.returncode == 1
        assert json.loads(stdout) == json.loads(clean.stdout)
        assert not state.exists()  # complete: nothing left to resume
        break
    else:
        pytest.fail("the run never completed")
    assert kills >= 2, "the run was not interrupted often enough to prove anything"


def test_a_repeated_row_without_sequence_is_recognised_by_its_event_id() -> None:
    scenario = ms.load_scenario_text(
        json.dumps(
            {
                "scenario": {
                    "name": "t",
                    "simulation_context": "x",
                    "goals": {
                        "assertions": [
                            {"memory_was_set": [{"name": "a.b", "value": 1}]},
                            {"memory_was_not_set": [{"name": "a.b", "value": 2}]},
                        ]
                    },
                }
            }
        )
    )
    ev = ms.Evaluator([scenario])
    row = (
        '{"conversation_id":"c","sequence":null,"event_id":"e1","metadata":null,'
        '"memory_set":{"key":"a.b","value_json":"1","anonymized_at":null}}'
    )
    two = row.replace('"e1"', '"e2"').replace('"1"', '"2"')
    for line in (row, row, two, row):
        ev.push_line(line)
    ev.finish_all()
    [result] = ev.results()
    # Without the id check the third copy of e1 would be a new last write of 1.
    assert [a.verdict for a in result.assertions] == ["passed", "failed"]
    assert ev.statistics().duplicates == 2
    assert result.events == 2


def test_a_row_without_sequence_never_takes_the_next_rows_sequence() -> None:
    # Numbering it "previous + 1" would drop the real row 1 as a duplicate, and
    # with it the session_ended: a later event could then change a verdict.
    scenario = ms.load_scenario_text(
        json.dumps(
            {
                "scenario": {
                    "name": "t",
                    "simulation_context": "x",
                    "goals": {"assertions": [{"bot_did_not_utter": {"text_matches": "oops"}}]},
                }
            }
        )
    )
    ev = ms.Evaluator([scenario])
    for line in (
        '{"conversation_id":"c","sequence":0,"session_started":{}}',
        '{"conversation_id":"c","sequence":null,"user":{"text":"hi"}}',
        '{"conversation_id":"c","sequence":1,"session_ended":{}}',
        '{"conversation_id":"c","sequence":2,"bot":{"text":"oops"}}',
    ):
        ev.push_line(line)
    [result] = ev.results()
    assert (result.verdict, result.assertions[0].decided_at) == ("passed", None)
    assert ev.statistics().late_events == 1


@pytest.mark.slow  # a run interrupted, then restarted: 7 s
@pytest.mark.timeout(60)
def test_sigterm_writes_a_final_checkpoint_and_the_restart_completes(tmp_path: Path) -> None:
    feed = tmp_path / "live.jsonl"
    state = tmp_path / "state.json"
    verdicts = tmp_path / "verdicts.jsonl"
    half = len(LINES) // 2
    feed.write_bytes(b"".join(LINES[:half]))
    args = [
        "check",
        str(SCENARIOS),
        "--events",
        f"follow:{feed}",
        "--format",
        "json",
        "--state",
        str(state),
        "--state-interval",
        "60",
        "--linger",
        "0.5",
        "--results",
        str(RESULTS),
        "--jsonl",
        str(verdicts),
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "mantle_stream", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # Verdicts of the first half written: the run is under way (a signal before
        # its handlers are in place would just end the process); the follow goes on.
        deadline = time.monotonic() + 30
        while not (verdicts.exists() and verdicts.read_bytes().count(b"\n") >= 10):
            assert time.monotonic() < deadline, "no verdict written within 30 s"
            time.sleep(0.05)
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    # Interrupted: 1 if its report holds a failure (what was read by then), else 130.
    assert proc.returncode == (1 if json.loads(stdout)["summary"]["failed"] else 130), stderr
    assert "interrupted" in stderr
    assert state.exists()  # written on the way out, though the interval is 60 s
    feed.write_bytes(b"".join(LINES))  # the simulator goes on (same file, now complete)
    resumed = run_cli(*args)
    assert "resuming from" in resumed.stderr
    assert json.loads(resumed.stdout) == uninterrupted(ordered=True)  # (one followed file)
    assert not state.exists()


def test_a_resumed_run_counts_and_names_late_events_unknown_kinds_and_bad_lines_once() -> None:
    late = b'{"conversation_id":"%s","sequence":999,"user":{}}\n' % CARD_OK.encode()
    newer = b'{"conversation_id":"%s","sequence":998,"new_kind":{}}\n' % CARD_OK.encode()
    feed = b"".join(LINES) + newer + late + b"{oops\n"
    first = evaluator()
    first.push_chunk(feed, on_bad=lambda e: None)
    clean = report_of(first)
    clean_events = first.statistics().events
    resumed = evaluator()
    resumed.restore(first.checkpoint())
    resumed.push_chunk(feed, on_bad=lambda e: None)  # the whole feed again
    assert report_of(resumed) == clean
    # (Not finished: the gap's events are still held, so no gap is counted yet.)
    assert clean["warnings"] == {
        "bad_events": 1,
        "late_events": 2,  # the newer kind came after the end too
        "unknown_kinds": {"new_kind": 1},
        "occurrences": [
            {"warning": "late_events", "conversation_id": CARD_OK, "sequence": 998},
            {"warning": "late_events", "conversation_id": CARD_OK, "sequence": 999},
            {"warning": "unknown_kinds", "conversation_id": CARD_OK, "sequence": 998},
        ],
    }
    assert resumed.statistics().events == clean_events


def test_a_scenario_name_that_is_another_files_stem_is_refused(tmp_path: Path) -> None:
    body = {"scenario": {"name": "b", "simulation_context": "x"}}
    (tmp_path / "a.yml").write_text(json.dumps(body))
    (tmp_path / "b.yml").write_text(
        json.dumps({"scenario": {"name": "other", "simulation_context": "x"}})
    )
    with pytest.raises(ms.UsageError, match="`b` names two scenarios"):
        ms.Evaluator(ms.load_scenarios([tmp_path]))
    proc = run_cli_in_process("validate", str(tmp_path))
    assert proc.returncode == 2
    assert "a results folder or metadata could not tell them apart" in proc.stderr


def test_a_report_of_a_stopped_run_says_it_is_not_complete(tmp_path: Path) -> None:
    proc = run_cli_in_process(
        "check",
        str(SCENARIOS),
        "--events",
        str(ALL_EVENTS),
        "--format",
        "json",
        "--fail-fast",
        "--results",
        str(RESULTS),
    )
    summary = json.loads(proc.stdout)["summary"]
    assert summary["complete"] is False
    assert "complete" not in uninterrupted()["summary"]


def test_a_checkpoint_of_an_edited_scenario_is_refused() -> None:
    def scen(value: int) -> ms.Scenario:
        return ms.load_scenario_text(
            json.dumps(
                {
                    "scenario": {
                        "name": "t",
                        "simulation_context": "x",
                        "goals": {
                            "assertions": [{"memory_was_set": [{"name": "a.b", "value": value}]}]
                        },
                    }
                }
            )
        )

    first = ms.Evaluator([scen(1)])
    first.push_line(
        '{"conversation_id":"c","sequence":0,"memory_set":{"key":"a.b","value_json":"1"}}'
    )
    with pytest.raises(ms.UsageError, match="taken before scenario `t` changed"):
        ms.Evaluator([scen(2)]).restore(first.checkpoint())


@pytest.mark.parametrize("damage", ["short-machines", "short-results", "bad-machine-state"])
def test_a_damaged_checkpoint_is_refused_with_a_message(damage: str) -> None:
    first = evaluator()
    first.push_chunk(b"".join(LINES[:200]))
    saved = json.loads(first.checkpoint())
    conv = next(c for c in saved["conversations"] if not c["finished"])
    if damage == "short-machines":
        conv["machines"] = conv["machines"][:-1]
    elif damage == "short-results":
        conv["results"] = conv["results"][:-1]
    else:
        index = next(i for i, m in enumerate(conv["machines"]) if m)
        conv["machines"][index] = ["x"] * 9
    with pytest.raises(ms.UsageError, match="the checkpoint is damaged"):
        evaluator().restore(json.dumps(saved).encode())


def test_two_runs_cannot_share_a_state_file_and_partial_writes_are_cleaned(tmp_path: Path) -> None:
    from mantle_stream.outputs.state import lock_state

    state = tmp_path / "state.json"
    leftover = tmp_path / ".state.json-abc123"
    leftover.write_text("half a checkpoint")
    with lock_state(str(state)):
        assert not leftover.exists()
        proc = run_cli(
            "check",
            str(SCENARIOS),
            "--events",
            str(ALL_EVENTS),
            "--state",
            str(state),
            "--results",
            str(RESULTS),
        )
        assert proc.returncode == 2
        assert f"another mantle-stream run is using the state file `{state}`" in proc.stderr


def test_periodic_checkpoints_are_written_off_the_event_loop(
    tmp_path: Path, monkeypatch: Any
) -> None:
    # Writing and fsync-ing a big checkpoint takes a tenth of a second or more;
    # the live runner takes the snapshot between chunks and writes it from a
    # worker thread, so the loop goes on serving clients meanwhile. (A spy
    # around the real writer records the thread; the file is real.)
    import threading

    import anyio

    import mantle_stream.runner as run_module
    from mantle_stream.feeds import open_feed
    from mantle_stream.outputs.state import write_checkpoint

    threads: list[bool] = []
    real = write_checkpoint  # what the runner calls, until patched below

    def spy(path: str, data: bytes) -> None:
        threads.append(threading.current_thread() is threading.main_thread())
        real(path, data)

    monkeypatch.setattr(run_module, "write_checkpoint", spy)
    state = tmp_path / "state.json"
    scenario = ms.load_scenario_text(
        json.dumps(
            {
                "scenario": {
                    "name": "s",
                    "simulation_context": "x",
                    "goals": {"assertions": [{"memory_was_set": [{"name": "a.b"}]}]},
                }
            }
        ),
        "s.yml",
    )
    evaluator = ms.Evaluator([scenario])

    def row(seq: int, **payload: Any) -> bytes:
        return (
            json.dumps(
                {"conversation_id": "c", "sequence": seq, "metadata": None, **payload}
            ).encode()
            + b"\n"
        )

    async def client(host: str, port: int) -> None:
        async with await anyio.connect_tcp(host, port) as stream:
            await stream.send(row(0, user={"text": "hi"}))
            await anyio.sleep(0.4)  # several checkpoint intervals with c open
            await stream.send(
                row(1, memory_set={"key": "a.b", "value_json": "1"}) + row(2, session_ended={})
            )

    async def main() -> None:
        async with open_feed("tcp://127.0.0.1:0") as feed:
            assert feed.address is not None
            host, port = feed.address.removeprefix("tcp://").rsplit(":", 1)
            runner = ms.Runner(evaluator, linger=0.1, state_path=str(state), state_interval=0.05)
            async with anyio.create_task_group() as tg:
                tg.start_soon(client, host, int(port))
                await runner.run(feed)

    anyio.run(main)
    assert threads and not any(threads), threads  # every periodic write off the main thread
    assert not state.exists()  # the run completed: nothing to resume
    [result] = evaluator.results()
    assert result.verdict == "passed"


def test_finished_conversations_are_encoded_for_checkpoints_in_slices() -> None:
    # A live run encodes the conversations finished since its last checkpoint a
    # few hundred at a time, serving clients in between (Runner._watchdog): the
    # checkpoint after the slices is the one taken at once, and a conversation
    # let go of before its slice is simply not there.
    sliced, whole = evaluator(keep_finished=6), evaluator(keep_finished=6)
    chunks = list(split_lines(ALL_EVENTS.read_bytes()))
    cut = len(chunks) // 2
    for ev in (sliced, whole):
        for chunk in chunks[:cut]:
            ev.push_chunk(chunk)
    waiting = [sliced.freeze_finished(2)]
    while waiting[-1]:
        waiting.append(sliced.freeze_finished(2))
    assert len(waiting) > 1 and waiting == sorted(waiting, reverse=True)
    assert sliced.checkpoint() == whole.checkpoint()
    for ev in (sliced, whole):  # more finish, some of the encoded ones are let go of
        for chunk in chunks[cut:]:
            ev.push_chunk(chunk)
    assert sliced.freeze_finished(1) > 0  # only what finished since
    assert sliced.checkpoint() == whole.checkpoint()
    resumed = evaluator(keep_finished=6)
    resumed.restore(sliced.checkpoint())
    assert report_of(resumed) == report_of(whole)


def test_an_event_after_the_end_reaches_the_next_checkpoint() -> None:
    # A finished conversation's state is encoded once for checkpoints; an event that
    # comes after its end changes it (counted late), so it is encoded again: after a
    # restart and a re-read, that event is replayed, not counted late a second time.
    scen = ms.load_scenario_text(
        json.dumps({"scenario": {"name": "s", "simulation_context": "x", "goals": {
            "assertions": [{"skill_activated": {"skill_id": "k"}}]}}})
    )  # fmt: skip

    def row(seq: int | None, **payload: Any) -> bytes:
        return json.dumps(
            {"conversation_id": "c", "sequence": seq, "metadata": None, **payload}
        ).encode()

    feed = [row(0, session_started={}), row(1, session_ended={})]
    late = [row(5, user={"text": "late"}), row(None, user={"text": "no sequence"})]
    first = ms.Evaluator([scen])
    for line in feed:
        first.push_line(line)
    first.checkpoint()  # the finished conversation encoded here
    for line in late:
        first.push_line(line)
    assert first.statistics().late_events == 2
    resumed = ms.Evaluator([scen])
    resumed.restore(first.checkpoint())
    for line in feed + late:
        resumed.push_line(line)
    assert resumed.statistics().late_events == 2
    assert resumed.statistics().replayed == 4
