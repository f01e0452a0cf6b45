"""``check --workers N``: conversations split over processes, the same outcome as one.

The partition is checked in process first (every worker's evaluator over the
same odd feed, merged, against one evaluator), then the command line as a
subprocess over each kind of replayable source.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

import mantle_stream as ms
from mantle_stream.core.engine.partition import Partition, merge, partition_of
from mantle_stream.core.events.decode import conversation_of, conversations_of

from _harness import (
    Ev,
    bot,
    calm_slot,
    end,
    flat,
    run_cli,
    scenario,
    setm,
    skill,
    started,
    tool,
    user,
)
from _stores import EVENTS, RESULTS, ROOT, SCENARIOS, example_lines, make_db

# --------------------------------------------------------------------------
# The partition
# --------------------------------------------------------------------------


def test_the_partition_of_an_id_is_fixed_for_ever() -> None:
    # BLAKE2b of the UTF-8 id: the same in every process and run (Python's hash is
    # salted per process). Pinned: changing it would move conversations between
    # workers from one version to the next.
    assert [partition_of(f"sim-{i}", 4) for i in range(8)] == [0, 0, 0, 3, 1, 1, 2, 1]
    assert partition_of("sim-5588a28d-011b-4f0b-822a-91e1448a99c5", 2) == 0
    assert partition_of("übung-7", 3) == 2
    script = "from mantle_stream.core.engine.partition import partition_of as p; print(p('x', 5))"
    other = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "123"},
    )
    assert int(other.stdout) == partition_of("x", 5)


@pytest.mark.parametrize(
    "lines",
    [
        [b'{"conversation_id": "a"}', b'{"sender_id": "b", "event": "x"}', b'{"sender_id": "c"}'],
        [b'{"conversation_id": "a"}', b"not json", b"", b"[1]", b'{"conversation_id": ""}'],
    ],
    ids=["every-shape", "bad-and-blank-lines"],
)
def test_the_conversations_of_a_chunk_are_those_of_its_lines(lines: list[bytes]) -> None:
    """Decoded in one call (a Kafka batch), line by line where one is not JSON."""
    chunk = b"\n".join(lines) + b"\n"
    assert conversations_of(chunk, len(lines)) == [conversation_of(line) for line in lines]


def test_conversations_spread_over_the_workers() -> None:
    counts = [0, 0, 0]
    for i in range(3000):
        counts[partition_of(f"sim-{i:08x}-0000-4000-8000-000000000000", 3)] += 1
    assert all(800 < n < 1200 for n in counts), counts


def test_a_worker_selects_its_events_and_numbers_every_conversation() -> None:
    events = [ms.Event(conversation_id=f"c{i % 5}", sequence=i // 5) for i in range(20)]
    shares = [Partition(i, 2) for i in range(2)]
    picked = [p.select(events, lambda i: b"") for p in shares]
    assert sorted(e for kept, _ in picked for e in map(id, kept)) == sorted(map(id, events))
    for (kept, where), p in zip(picked, shares, strict=True):
        positions = where if where is not None else list(range(len(events)))
        assert [events[i] for i in positions] == kept
        assert all(p.owns(e.conversation_id) for e in kept)
        # Every worker numbers every conversation alike, in order of first appearance.
        assert p.ordinals == {f"c{i}": i for i in range(5)}


def test_a_batch_of_the_workers_own_conversations_is_kept_whole_and_new_ones_numbered() -> None:
    """The one-pass path (a SQL share's batches) keeps what the full pass keeps."""
    p = Partition(0, 2)
    own = [c for c in (f"c{i}" for i in range(20)) if partition_of(c, 2) == 0]
    other = next(c for c in (f"c{i}" for i in range(20)) if partition_of(c, 2) == 1)
    assert p.place_all(own[:2], [10, 11]) and p.ordinals == {own[0]: 10, own[1]: 11}
    assert p.place_all([own[1], own[0], own[1]], [12, 13, 14])
    assert p.ordinals == {own[0]: 10, own[1]: 11}  # numbered by their first rows only
    assert not p.place_all([own[0], other], [15, 16])  # another worker's row: refused
    assert p.ordinals[other] == 16 and not p.place_all([other], [17])
    events = [ms.Event(conversation_id=c, sequence=0) for c in (own[0], own[1], own[0])]
    assert p.select(events, lambda i: b"") == (events, None)
    # A conversation not numbered yet, one of another worker, one named by its line
    # alone: the full pass, which numbers the new in order and drops the other's.
    events += [ms.Event(conversation_id=c, sequence=0) for c in (own[2], other, "")]
    kept, where = p.select(events, lambda i: b'{"conversation_id": "%s"}' % own[3].encode())
    assert where == [0, 1, 2, 3, 5] and kept == [events[i] for i in where]
    assert list(p.ordinals)[-2:] == [own[2], own[3]]


def test_a_line_naming_no_conversation_goes_to_its_sender_or_to_worker_0() -> None:
    first, second = Partition(0, 2), Partition(1, 2)
    owner = next(p for p in (first, second) if p.owns("s1"))
    row = json.dumps({"event": "user", "sender_id": "s1", "text": "hi"}).encode()
    assert owner.keeps_line(row)
    assert not (second if owner is first else first).keeps_line(row)
    assert first.keeps_line(b"{not json") and not second.keeps_line(b"{not json")
    assert first.keeps_line(b"{}") and not second.keeps_line(b"{}")


# --------------------------------------------------------------------------
# In process: N workers merged == one evaluator, on an odd feed
# --------------------------------------------------------------------------

ASSERTIONS: list[dict[str, object]] = [
    {"skill_activated": {"skill_id": "card"}},
    {"memory_was_set": [{"name": "project.pin", "value": 1234}]},
    {"tool_executed": {"tool_name": "lookup", "source": "local"}},
    {"bot_uttered": {"utter_name": "utter_bye"}},
]


def _conversation(rng: random.Random, cid: str) -> list[str]:
    events: list[Ev] = [started(), user("hi")]
    for _ in range(rng.randint(1, 8)):
        events.append(
            rng.choice(
                [
                    skill("activated", rng.choice(["card", "other"])),
                    setm("project.pin", rng.choice([1234, 99])),
                    tool(rng.choice(["lookup", "other"])),
                    bot("bye", utter=rng.choice(["utter_bye", "utter_hi"])),
                    user("more"),
                ]
            )
        )
    events.append(end())
    lines = []
    for seq, ev in enumerate(events):
        if rng.random() < 0.15 and ev.key in ("user", "memory_set", "skill_activated"):
            ev = flat(ev)  # a flat row: names its conversation as sender_id
        lines.append(ev.line(cid, seq))
    if rng.random() < 0.2:
        lines.insert(2, calm_slot("x", 1).line(cid, 99))  # counted, read by no check
    if rng.random() < 0.2:  # an older CALM row opens it: numbered where it stands
        lines.insert(0, calm_slot("y", 2, with_sequence=False).line(cid, 0))
    if rng.random() < 0.2:
        lines.insert(3, lines[2])  # a duplicate
    return lines


def _odd_feed(seed: int) -> list[bytes]:
    rng = random.Random(seed)
    conversations = {f"conv-{seed}-{i}": _conversation(rng, f"conv-{seed}-{i}") for i in range(40)}
    out: list[str] = []
    while conversations:  # interleaved, a few at a time
        cid = rng.choice(list(conversations)[:5])
        out.append(conversations[cid].pop(0))
        if not conversations[cid]:
            del conversations[cid]
        if rng.random() < 0.02:
            odd = ['{"conversation_id": 5}', "{broken", "", '{"no": "id"}']
            # Not a flat row: its sender_id names nothing; "no conversation_id", once.
            odd.append('{"sender_id": "conv-x", "session_started": {}}')
            out.append(rng.choice(odd))
    return [line.encode() + b"\n" for line in out]


def _chunks(lines: list[bytes], rng: random.Random) -> list[bytes]:
    chunks, at = [], 0
    while at < len(lines):
        n = rng.randint(1, 30)
        chunks.append(b"".join(lines[at : at + n]))
        at += n
    return chunks


def _judge(
    chunks: list[bytes], partition: Partition | None
) -> tuple[ms.Evaluator, list[tuple[int | None, str]]]:
    evaluator = ms.Evaluator(scenario(*ASSERTIONS), partition=partition)
    bad: list[tuple[int | None, str]] = []
    for chunk in chunks:
        evaluator.push_chunk(chunk, on_bad=lambda e: bad.append((e.line, e.message)))
    evaluator.finish_all()
    return evaluator, bad


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("workers", [2, 3])
def test_workers_merged_judge_what_one_evaluator_judges(seed: int, workers: int) -> None:
    lines = _odd_feed(seed)
    chunks = _chunks(lines, random.Random(seed))
    one, one_bad = _judge(chunks, None)
    parts, bad = [], []
    for index in range(workers):
        partition = Partition(index, workers)
        evaluator, errors = _judge(chunks, partition)
        judged = evaluator.judged()
        ids = [r.conversation_id for r in judged.results] + [
            u.conversation_id for u in judged.unmatched
        ]
        first_seen = [partition.ordinal(c) for c in ids]
        parts.append(msgspec.structs.replace(judged, first_seen=first_seen))
        bad += errors
    merged = merge(parts)
    expected = one.judged()
    assert merged.results == expected.results  # in the same order
    assert merged.unmatched == expected.unmatched
    assert merged.omitted == expected.omitted
    assert merged.unknown_kinds == dict(sorted(expected.unknown_kinds.items()))
    assert merged.legacy_rows == dict(sorted(expected.legacy_rows.items()))
    assert merged.statistics == expected.statistics
    assert sorted(bad, key=str) == sorted(one_bad, key=str)  # each reported once, same line
    assert one_bad, "the feed is meant to hold bad events"


# --------------------------------------------------------------------------
# The command line
# --------------------------------------------------------------------------


def _outputs(
    tmp_path: Path, name: str, *args: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    out = tmp_path / name
    out.mkdir()
    done = run_cli(
        "check",
        str(SCENARIOS),
        *args,
        "--results",
        str(RESULTS),
        "--format",
        "json",
        "--jsonl",
        str(out / "v.jsonl"),
        "--junit",
        str(out / "j.xml"),
        "--html",
        str(out / "r.html"),
    )
    return done, {p.name: p.read_text() for p in out.iterdir()}


def _same_run(one: dict[str, str], many: dict[str, str]) -> None:
    assert many["j.xml"] == one["j.xml"]
    assert many["r.html"] == one["r.html"]
    one_lines, many_lines = one["v.jsonl"].splitlines(), many["v.jsonl"].splitlines()
    assert sorted(many_lines) == sorted(one_lines)
    # Grouped by conversation, in the report's order, each one's lines as decided.
    order: list[str] = []
    for line in many_lines:
        cid = json.loads(line)["conversation_id"]
        if not order or order[-1] != cid:
            assert cid not in order, "a conversation's lines are together"
            order.append(cid)
    for cid in order:
        mine = [x for x in one_lines if json.loads(x)["conversation_id"] == cid]
        assert [x for x in many_lines if json.loads(x)["conversation_id"] == cid] == mine


@pytest.mark.parametrize(
    ("source", "workers"),
    [("file", 2), ("trackers", 2), ("sqlite", 2), ("broker", 2), ("sqlite", 3), ("broker", 3)],
)
def test_workers_give_one_process_s_report_junit_html_and_jsonl(
    tmp_path: Path, source: str, workers: int
) -> None:
    # (A SQL store's workers each read their own conversations' rows: test_sql_share.py.)
    if source == "file":
        events = str(EVENTS)
    elif source == "trackers":  # a directory of tracker documents, one per conversation
        folder = tmp_path / "trackers"
        folder.mkdir()
        by_id: dict[str, list[object]] = {}
        for line in example_lines():
            row = json.loads(line)
            by_id.setdefault(row["conversation_id"], []).append(row)
        for cid, rows in by_id.items():
            (folder / f"{cid}.json").write_text(json.dumps({"sender_id": cid, "events": rows}))
        events = str(folder)
    else:
        db = make_db(tmp_path / "rasa.db", example_lines(), broker=source == "broker")
        events = f"sqlite:///{db}"
    one, one_files = _outputs(tmp_path, "one", "--events", events, "--workers", "1")
    two, two_files = _outputs(tmp_path, "two", "--events", events, "--workers", str(workers))
    assert one.returncode == 1, one.stderr  # 8 of the 13 recorded runs fail
    assert two.returncode == one.returncode, two.stderr
    assert json.loads(two.stdout)["summary"]["conversations"] == 13
    assert two.stdout == one.stdout
    assert two.stderr == one.stderr
    _same_run(one_files, two_files)


def test_a_bad_event_ends_the_run_where_one_process_ends_it(tmp_path: Path) -> None:
    lines = EVENTS.read_text().splitlines(keepends=True)
    feed = tmp_path / "events.jsonl"
    feed.write_text("".join(lines[:300]) + "{broken\n" + "".join(lines[300:]))
    runs = [
        run_cli("check", str(SCENARIOS), "--events", str(feed), "--results", str(RESULTS),
            "--format", "json", "--workers", str(n))
        for n in (1, 2)
    ]  # fmt: skip
    assert runs[0].returncode == 2
    assert f"{feed}:301: bad event" in runs[0].stderr
    assert (runs[1].returncode, runs[1].stdout, runs[1].stderr) == (
        runs[0].returncode,
        runs[0].stdout,
        runs[0].stderr,
    )


def test_bad_events_skipped_are_named_once_at_their_line(tmp_path: Path) -> None:
    lines = EVENTS.read_text().splitlines(keepends=True)
    feed = tmp_path / "events.jsonl"
    feed.write_text(
        "".join(lines[:100]) + "{broken\n" + "".join(lines[100:500]) + '{"x": 1}\n'
        + "".join(lines[500:])
    )  # fmt: skip
    runs = [
        run_cli("check", str(SCENARIOS), "--events", str(feed), "--results", str(RESULTS),
            "--format", "json", "--on-bad-event", "skip", "--workers", str(n))
        for n in (1, 2, 3)
    ]  # fmt: skip
    skipped = [sorted(x for x in r.stderr.splitlines() if "skipped " in x) for r in runs]
    assert len(skipped[0]) == 2, skipped[0]
    assert f"{feed}:101: bad event" in skipped[0][0] and f"{feed}:502: bad event" in skipped[0][1]
    assert skipped[1] == skipped[0] == skipped[2]
    assert runs[1].stdout == runs[0].stdout == runs[2].stdout
    assert "warning: 2 bad events skipped" in runs[1].stderr


@pytest.mark.parametrize(
    ("option", "why"),
    [
        (["--fail-fast"], "--fail-fast"),
        (["--keep-finished", "5"], "--keep-finished"),
        (["--state", "STATE"], "--state"),
    ],
)
def test_options_that_need_one_process_refuse_more(
    tmp_path: Path, option: list[str], why: str
) -> None:
    option = [str(tmp_path / "s.json") if o == "STATE" else o for o in option]
    done = run_cli("check", str(SCENARIOS), "--events", str(EVENTS), "--workers", "2", *option)
    assert done.returncode == 2
    assert f"--workers 2: {why}" in done.stderr and "give --workers 1" in done.stderr


def test_a_live_source_refuses_more_than_one_worker(tmp_path: Path) -> None:
    done = run_cli("check", str(SCENARIOS), "--events", f"follow:{EVENTS}", "--workers", "2")
    assert done.returncode == 2
    assert "a live source or standard input can be read by one process only" in done.stderr
    http = run_cli("check", str(SCENARIOS), "--events", "http://127.0.0.1:9", "--conversation",
               "c1", "--workers", "2")  # fmt: skip
    assert http.returncode == 2 and "a Rasa server's trackers are fetched" in http.stderr
    assert (
        run_cli("check", str(SCENARIOS), "--events", str(EVENTS), "--workers", "0").returncode == 2
    )


def _slow_run(tmp_path: Path) -> tuple[Path, Path]:
    """A scenario and 400 conversations slow enough to interrupt, whatever the machine:
    each conversation's bot message costs a regex search cut off after --regex-timeout."""
    scenario = tmp_path / "slow.yml"
    scenario.write_text(
        "scenario:\n  name: slow\n  simulation_context: x\n  goals:\n    assertions:\n"
        "      - bot_uttered:\n          text_matches: '(a+)+$'\n"
    )
    feed = tmp_path / "events.jsonl"
    text = "a" * 5000 + "!"
    with feed.open("w") as fh:
        for i in range(400):
            for seq, ev in enumerate([started(), bot(text), end()]):
                fh.write(ev.line(f"c{i}", seq) + "\n")
    return scenario, feed


def _slow_check(tmp_path: Path, *options: str, text: bool = True) -> subprocess.Popen[Any]:
    """``check --workers 2 --format json`` of :func:`_slow_run`'s scenario and events,
    started as a process with its output piped (``options``: more of them)."""
    scenario, feed = _slow_run(tmp_path)
    return subprocess.Popen(
        [sys.executable, "-m", "mantle_stream", "check", str(scenario), "--events", str(feed),
         "--workers", "2", "--regex-timeout", "0.05", "--format", "json", *options],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=text, cwd=ROOT,
    )  # fmt: skip


@pytest.mark.slow  # a 10 s run interrupted after 4 s: timed, and slow
def test_ctrl_c_stops_every_worker_and_reports_what_was_judged(tmp_path: Path) -> None:
    process = _slow_check(tmp_path)
    # 400 regex searches of 0.05 s over two workers take 10 s at the least: 4 s
    # leave the workers time to start on a busy machine (other tests in parallel).
    time.sleep(4)
    assert process.poll() is None, "the run ended before it could be interrupted"
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    assert "interrupted; verdicts still pending were not judged" in err
    report = json.loads(out)
    judged = report["summary"]["conversations"]
    assert 0 < judged < 400 or not report["summary"]["complete"]


def test_sql_rows_go_by_the_conversation_their_data_names(tmp_path: Path) -> None:
    # A row filed under c0 whose data names c1, and one that is not JSON: the worker
    # of the conversation the line names judges it; a bad row is worker 0's.
    db = make_db(tmp_path / "rasa.db", example_lines(), broker=True)
    lines = example_lines()
    other = json.loads(lines[0])
    moved = {**other, "conversation_id": "moved-elsewhere", "sequence": 0}
    with sqlite3.connect(db) as connection:
        connection.execute(
            "INSERT INTO events (sender_id, data) VALUES (?, ?), (?, ?)",
            (other["conversation_id"], json.dumps(moved), other["conversation_id"], "{broken"),
        )
    connection.close()
    for policy in ("fail", "skip"):
        runs = [
            run_cli("check", str(SCENARIOS), "--events", f"sqlite:///{db}", "--results",
                    str(RESULTS), "--format", "json", "--on-bad-event", policy, "--workers", str(n))
            for n in (1, 2)
        ]  # fmt: skip
        assert (runs[1].returncode, runs[1].stdout) == (runs[0].returncode, runs[0].stdout)
        assert sorted(runs[1].stderr.splitlines()) == sorted(runs[0].stderr.splitlines())
        assert "bad event" in runs[0].stderr
    assert "moved-elsewhere" in runs[0].stdout


def test_a_pipe_is_read_by_one_process(tmp_path: Path) -> None:
    fifo = tmp_path / "events.fifo"
    os.mkfifo(fifo)
    done = run_cli("check", str(SCENARIOS), "--events", str(fifo), "--workers", "2")
    assert done.returncode == 2
    assert "is not a regular file: one process reads it" in done.stderr


def test_workers_judge_the_scenarios_the_parent_loaded() -> None:
    # A scenario given as a pipe can be read once only: the workers never read it again.
    scenario = ROOT / "examples/eval/scenarios/card_replace_damaged.yml"
    done = subprocess.run(
        ["bash", "-c", f'"{sys.executable}" -m mantle_stream check <(cat "{scenario}") '
         f'--events "{EVENTS}" --workers 2 --format json'],
        capture_output=True, text=True, cwd=ROOT, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr  # 12 of the 13 examples fail
    assert json.loads(done.stdout)["summary"]["conversations"] == 13


def test_a_feed_error_in_a_worker_is_one_clear_error(tmp_path: Path) -> None:
    folder = tmp_path / "trackers"
    folder.mkdir()
    (folder / "a.json").write_text(json.dumps({"sender_id": "c5", "events": [1]}))
    runs = [
        run_cli("check", str(SCENARIOS), "--events", str(folder), "--workers", str(n))
        for n in (1, 2)
    ]
    assert runs[0].returncode == runs[1].returncode == 2
    assert runs[1].stderr == runs[0].stderr
    assert "Traceback" not in runs[1].stderr


def _children(pid: int) -> list[int]:
    """The processes ``pid`` started (Linux's /proc)."""
    found: list[int] = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as fh:
            found += [int(p) for p in fh.read().split()]
    return found


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="reads Linux's /proc")
def test_a_worker_killed_is_one_clear_error_with_its_exit_status(tmp_path: Path) -> None:
    # Killed (the kernel's OOM killer, a user): no result comes; the run ends with one
    # line that says which worker and how, not with a partial report.
    process = _slow_check(tmp_path)
    deadline = time.monotonic() + 60
    while len(workers := _children(process.pid)) < 2 and time.monotonic() < deadline:
        assert process.poll() is None, "the run ended before a worker could be killed"
        time.sleep(0.02)
    os.kill(workers[0], signal.SIGKILL)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 2, err
    assert out == ""
    assert "ended without a result (exit status -9)" in err
    assert "Traceback" not in err


@pytest.mark.slow  # a signal every 5 ms through a run: 6 s each
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_signals_after_the_workers_finished_leave_the_report_whole(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """Signals sent again and again from while the workers judge until the process
    ends: those after judging (while the results are merged and the report, JUnit
    and HTML written) are noted, so every output is whole and holds what was judged."""
    junit, html = tmp_path / "junit.xml", tmp_path / "report.html"
    process = _slow_check(tmp_path, "--junit", str(junit), "--html", str(html), text=False)
    out = bytearray()

    def read() -> None:
        while chunk := process.stdout.read1(1 << 16):  # type: ignore[union-attr]
            out.extend(chunk)

    def reported() -> bool:
        try:
            json.loads(out)
        except ValueError:
            return False
        return True

    reader = threading.Thread(target=read)
    time.sleep(4)  # (the workers are judging: see the test above)
    assert process.poll() is None, "the run ended before it could be interrupted"
    reader.start()
    deadline = time.monotonic() + 60
    # Until the report is out (after that the process only says why it ends, and ends).
    while reader.is_alive() and not reported() and time.monotonic() < deadline:
        process.send_signal(sig)
        time.sleep(0.005)
    reader.join(30)
    err = process.stderr.read()  # type: ignore[union-attr]
    process.stdout.close()  # type: ignore[union-attr]
    process.stderr.close()  # type: ignore[union-attr]
    # 130; or ended by the signal itself when the last one came once everything was
    # written and the process was on its way out (the loop above sees the report late).
    assert process.wait(30) in (130, -sig), err.decode()
    assert b"interrupted" in err and b"Traceback" not in err
    report = json.loads(out)  # whole
    assert 0 < report["summary"]["conversations"] <= 400
    assert junit.read_bytes().rstrip().endswith(b"</testsuites>")
    assert html.read_bytes().rstrip().endswith(b"</html>")


def test_runs_of_several_candidates_are_reported_alike_by_two_workers(tmp_path: Path) -> None:
    """Twin scenarios (equal setups): each card run is judged apart under both, by
    whichever worker holds it; the report is one process's."""
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    card = (SCENARIOS / "card_replace_damaged.yml").read_text()
    (scenarios / "card.yml").write_text(card)
    (scenarios / "twin.yml").write_text(
        card.replace("name: Customer replaces a damaged card", "name: A twin")
    )
    (scenarios / "fraud.yml").write_text((SCENARIOS / "fraud_report.yml").read_text())
    reports = [
        run_cli(
            "check",
            str(scenarios),
            "--events",
            str(EVENTS),
            "--format",
            "json",
            "--workers",
            workers,
        )
        for workers in ("1", "2")
    ]
    assert [r.returncode for r in reports] == [1, 1]
    assert reports[0].stdout == reports[1].stdout
    unmatched = json.loads(reports[0].stdout)["unmatched"]
    judged_apart = [u for u in unmatched if u.get("candidate_verdicts")]
    assert len(judged_apart) == 3
    for u in judged_apart:
        assert [c["scenario"] for c in u["candidate_verdicts"]] == [
            "Customer replaces a damaged card",
            "A twin",
        ]
        assert len({c["verdict"] for c in u["candidate_verdicts"]}) == 1  # twins agree
