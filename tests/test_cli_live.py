"""The live commands as subprocesses: watch, demo, --junit, --jsonl while running, sockets."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema

from _harness import run_cli_in_process

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "eval"
SCENARIOS = EXAMPLES / "scenarios"
ALL_EVENTS = EXAMPLES / "events" / "all.jsonl"
CARD = SCENARIOS / "card_replace_damaged.yml"
RESULTS = EXAMPLES / "results" / "2026-12-01T09-00-00"
CARD_EXPRESS = "sim-b4802004-f8c7-4a8d-9d87-921bd4592b53"  # card_replace_damaged/run_2.json
CHATTY = "sim-3a188352-5157-450b-876a-12793410a273"  # balance_and_limits/run_3.json

pytestmark = pytest.mark.timeout(90)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mantle_stream", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=80,
        check=False,
    )


def spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "mantle_stream", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def stop(proc: subprocess.Popen[str]) -> None:
    """Kill if still running and close the pipes (no ResourceWarning either way)."""
    if proc.poll() is None:
        proc.kill()
    proc.communicate(timeout=10)


def test_watch_into_a_pipe_prints_one_line_per_verdict_then_the_summary() -> None:
    proc = run("watch", str(SCENARIOS), "--events", str(ALL_EVENTS), "--results", str(RESULTS))
    assert proc.returncode == 1, proc.stderr
    lines = proc.stdout.splitlines()
    # A line per verdict, the digest (a heading, then two lines per failure), the
    # summary, and the example's deliberate sequence gap.
    assert len(lines) == 143 + 1 + 2 * 26 + 2
    assert all(" PASSED at " in line or " FAILED at " in line for line in lines[:143])
    assert lines[143] == "26 failed assertions:"
    assert lines[-2].startswith("13 conversations: 5 passed, 8 failed")
    assert lines[-1] == (
        "1 gap in `sequence` passed at once (the source delivers each conversation in "
        "order: those events were never sent): `sim-66a038ae-b30b-47be-8eb5-64703ce5024f` "
        "sequences 36-37"
    )


@pytest.fixture(scope="module")
def demo_in_the_clone() -> subprocess.CompletedProcess[str]:
    """``mantle-stream demo --speed 25`` from the repository (2 to 3 s), for the tests
    that read it."""
    return run("demo", "--speed", "25")


def test_demo_plays_the_examples_stops_failing_conversations_and_summarizes(
    demo_in_the_clone: subprocess.CompletedProcess[str],
) -> None:
    proc = demo_in_the_clone
    assert proc.returncode == 1, proc.stderr  # some example conversations fail on purpose
    out = proc.stdout.splitlines()
    summary = next(line for line in out if line.startswith("14 conversations:"))
    assert "6 passed, 8 failed" in summary
    stopped = next(line for line in out if line.startswith("stopped early:"))
    assert CHATTY in stopped  # the long conversation is cut short
    assert "user turns the simulator did not have to play" in stopped


@pytest.mark.parametrize("inside", [True, False], ids=["in-the-clone", "elsewhere"])
def test_the_demo_digest_cites_scenario_files_the_user_can_open(
    inside: bool, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # In a clone, relative to where the user stands; elsewhere, the installed file.
    proc = (
        request.getfixturevalue("demo_in_the_clone")
        if inside
        else subprocess.run(
            [sys.executable, "-m", "mantle_stream", "demo", "--speed", "25"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=80,
            check=False,
        )
    )
    assert proc.returncode == 1, proc.stderr
    cited = re.findall(r"^  (\S+\.yml):(\d+)  #", proc.stdout, re.MULTILINE)
    assert cited
    balance = SCENARIOS / "balance_and_limits.yml"
    if inside:
        assert ("examples/eval/scenarios/balance_and_limits.yml", "58") in cited
    else:
        assert (str(balance.resolve()), "58") in cited
    for path, line in cited:
        where = Path(path) if Path(path).is_absolute() else ROOT / path
        assert where.resolve().parent == SCENARIOS.resolve()
        assert len(where.read_text().splitlines()) >= int(line)


def test_junit_is_well_formed_with_one_case_per_assertion(tmp_path: Path) -> None:
    junit = tmp_path / "report.xml"
    proc = run(
        "check",
        str(SCENARIOS),
        "--events",
        str(ALL_EVENTS),
        "--format",
        "json",
        "--results",
        str(RESULTS),
        "--junit",
        str(junit),
    )
    assert proc.returncode == 1
    root = ET.parse(junit).getroot()
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert len(suites) == 5  # a suite per scenario, its runs the 13 conversations
    cases = root.findall("testsuite/testcase")
    assert len(cases) == 143
    failures = root.findall("testsuite/testcase/failure")
    assert len(failures) == 26 == int(root.get("failures", "-1"))
    card = next(s for s in suites if s.get("file") == str(CARD))
    # From the events' own timestamps: its three runs' time, and when the first began (UTC).
    assert (card.get("time"), card.get("timestamp")) == ("221.562", "2026-12-01T09:00:00")
    # CARD_EXPRESS is the results folder's run_2.json: its run_index names its cases.
    express = {
        c.get("name"): c
        for c in card.findall("testcase")
        if c.find(f"properties/property[@value='{CARD_EXPRESS}']") is not None
    }
    tool = express["run 2 #5 tool_executed"]
    assert (tool.get("file"), tool.get("line")) == (str(CARD), "42")
    failure = tool.find("failure")
    assert failure is not None
    assert "shipping" in (failure.get("message") or "")
    assert express["run 2 #0 skill_activated"].find("failure") is None
    schema = xmlschema.XMLSchema(str(Path(__file__).parent / "data" / "junit-mantle.xsd"))
    schema.validate(str(junit))


def test_jsonl_lines_appear_while_the_feed_is_still_being_written(tmp_path: Path) -> None:
    feed = tmp_path / "live.jsonl"
    out = tmp_path / "verdicts.jsonl"
    lines = (EXAMPLES / "events" / "card_replace_damaged.jsonl").read_text().splitlines()
    first = [x for x in lines if CARD_EXPRESS in x]
    proc = spawn(
        "watch", str(CARD), "--events", f"follow:{feed}", "--jsonl", str(out), "--linger", "0.5"
    )
    try:
        with feed.open("a") as fh:
            # Up to the forbidden utterance (sequence 35), not the end of the conversation.
            for x in first[:36]:
                fh.write(x + "\n")
            fh.flush()
            deadline = time.monotonic() + 20
            seen: list[dict[str, object]] = []
            while time.monotonic() < deadline:
                if out.exists():
                    seen = [json.loads(x) for x in out.read_text().splitlines()]
                    if any(d["verdict"] == "failed" for d in seen):
                        break
                time.sleep(0.05)
            assert proc.poll() is None, "the run must still be going"
            assert [(d["index"], d["decided_at"]) for d in seen if d["verdict"] == "failed"] == [
                (8, 35)
            ]
            for x in first[36:]:
                fh.write(x + "\n")
        _, stderr = proc.communicate(timeout=30)
    finally:
        stop(proc)
    assert proc.returncode == 1, stderr
    assert len(out.read_text().splitlines()) == 12


def test_check_over_tcp_reports_listening_address_and_judges_clients() -> None:
    proc = spawn(
        "check", str(CARD), "--events", "tcp://127.0.0.1:0", "--format", "json", "--linger", "0.3"
    )
    try:
        assert proc.stderr is not None
        banner = proc.stderr.readline()
        assert banner.startswith("mantle-stream: listening on tcp://127.0.0.1:")
        port = int(banner.strip().rsplit(":", 1)[1])
        events = (EXAMPLES / "events" / "card_replace_damaged.jsonl").read_bytes()
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(events)
            sock.shutdown(socket.SHUT_WR)
            replies = b""
            while chunk := sock.recv(65536):
                replies += chunk
        stdout, _ = proc.communicate(timeout=30)
    finally:
        stop(proc)
    assert proc.returncode == 1
    report = json.loads(stdout)
    assert report["summary"]["conversations"] == 3
    # Every conversation ended inside the stream, so nothing needed stopping early,
    # except ones whose outcome was settled before their session_ended arrived.
    for reply in replies.splitlines():
        message = json.loads(reply)
        assert message["type"] == "stop" and message["stop"] is True


def test_fail_fast_over_standard_input_exits_1_promptly() -> None:
    events = ALL_EVENTS.read_bytes()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mantle_stream",
            "check",
            str(SCENARIOS),
            "--events",
            "-",
            "--fail-fast",
            "--format",
            "json",
            "--results",
            str(RESULTS),
        ],
        input=events,
        capture_output=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    verdicts = [a["verdict"] for c in report["conversations"] for a in c["assertions"]]
    assert verdicts.count("failed") == 1
    assert "pending" in verdicts


def test_the_readme_simulator_client_is_stopped_early_over_tcp() -> None:
    proc = spawn(
        "check",
        str(SCENARIOS),
        "--events",
        "tcp://127.0.0.1:0",
        "--format",
        "json",
        "--linger",
        "0.5",
        "--results",
        str(RESULTS),
    )
    try:
        assert proc.stderr is not None
        port = proc.stderr.readline().strip().rsplit(":", 1)[1]
        client = subprocess.run(
            [
                sys.executable,
                str(ROOT / "examples" / "simulator_client.py"),
                "127.0.0.1",
                port,
                str(ALL_EVENTS),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        stdout, _ = proc.communicate(timeout=30)
    finally:
        stop(proc)
    stopped = {line.split(":")[0] for line in client.stdout.splitlines()}
    # Replayed one conversation at a time, every failing example settles before its end.
    report = json.loads(stdout)
    failed = {c["conversation_id"] for c in report["conversations"] if c["verdict"] == "failed"}
    assert stopped and stopped <= failed
    assert CHATTY in stopped
    # What was still pending when a stopped conversation ended was skipped, not judged.
    skipped = [
        a
        for c in report["conversations"]
        if c["conversation_id"] in stopped
        for a in c["assertions"]
        if a["verdict"] == "skipped"
    ]
    assert skipped and all(
        a["reason"].startswith("not judged: the conversation was stopped early after assertion #")
        for a in skipped
    )
    assert report["summary"]["skipped"] == len(skipped)
    assert proc.returncode == 1


def test_the_listener_says_whom_it_refused_and_the_client_says_why(tmp_path: Path) -> None:
    proc = spawn(
        "check",
        str(CARD),
        "--events",
        "tcp://127.0.0.1:0",
        "--format",
        "json",
        "--linger",
        "0.3",
        "--token",
        "s3cret",
    )
    try:
        assert proc.stderr is not None
        port = proc.stderr.readline().strip().rsplit(":", 1)[1]
        client = subprocess.run(
            [
                sys.executable,
                str(ROOT / "examples" / "simulator_client.py"),
                "127.0.0.1",
                port,
                str(EXAMPLES / "events" / "card_replace_damaged.jsonl"),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        with socket.create_connection(("127.0.0.1", int(port)), timeout=10) as sock:
            # An admitted client with whole conversations, so the run can end.
            sock.sendall(
                b"s3cret\n" + (EXAMPLES / "events" / "card_replace_damaged.jsonl").read_bytes()
            )
        _, stderr = proc.communicate(timeout=30)
    finally:
        stop(proc)
    assert "mantle-stream refused the connection: unauthorized" in client.stderr
    assert "1 client refused by the listener (unauthorized 1)" in stderr  # --format json
    assert "mantle-stream: refused tcp 127.0.0.1:" in stderr and ": unauthorized" in stderr


def test_follow_says_it_waits_for_a_file_that_does_not_exist_yet(tmp_path: Path) -> None:
    feed = tmp_path / "later.jsonl"
    proc = spawn("watch", str(CARD), "--events", f"follow:{feed}", "--linger", "0.3")
    try:
        assert proc.stderr is not None
        waiting = proc.stderr.readline().strip()
        assert waiting == f"mantle-stream: waiting for `{feed}` to be created"
        feed.write_text((EXAMPLES / "events" / "card_replace_damaged.jsonl").read_text())
        proc.communicate(timeout=30)
    finally:
        stop(proc)
    assert proc.returncode == 1


def test_listening_remotely_without_a_token_is_warned_about() -> None:
    proc = spawn(
        "check", str(CARD), "--events", "tcp://127.0.0.1:0", "--listen-remote", "--linger", "0.2"
    )
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
    finally:
        stop(proc)
    assert first.startswith("mantle-stream: warning: --listen-remote without --token")


def _lines(path: Path) -> int:
    return len(path.read_bytes().splitlines()) if path.exists() else 0


def test_watch_on_a_followed_file_keeps_following_until_interrupted(tmp_path: Path) -> None:
    """A followed file is live: its runs having ended does not end the watch (more runs
    may be written later); Ctrl-C does, and the report holds what was judged."""
    feed = tmp_path / "rasa_event.log"
    feed.write_text((EXAMPLES / "events" / "card_replace_damaged.jsonl").read_text())
    verdicts = tmp_path / "verdicts.jsonl"
    # Every verdict of the file's runs, as `check` writes them (in this process).
    every = tmp_path / "every.jsonl"
    run_cli_in_process("check", str(CARD), "--events", str(feed), "--jsonl", str(every))
    proc = spawn("watch", str(CARD), "--events", f"follow:{feed}", "--jsonl", str(verdicts))
    try:
        deadline = time.monotonic() + 30  # (a loaded machine polls late: wait for it)
        while _lines(verdicts) < _lines(every) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _lines(verdicts) == _lines(every)  # its runs have ended
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=1)  # and it follows on
        with feed.open("a") as out:  # a run written later is judged too
            later = (EXAMPLES / "events" / "card_replace_damaged.jsonl").read_text()
            out.write(later.replace("sim-5588a28d", "sim-later-1"))
        deadline = time.monotonic() + 30  # (a loaded machine polls late: wait for it)
        while "sim-later-1" not in verdicts.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        stdout, _ = proc.communicate(timeout=30)
    finally:
        stop(proc)
    assert "sim-later-1" in stdout
    assert proc.returncode == 1  # a failed run was judged (not 130: judged, then ended)
