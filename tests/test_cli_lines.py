"""``check`` without a terminal (a CI log, a file): lines that read at any width.

One line per failed, errored, differing or flaky verdict led by its assertion's
``file:line``, then the totals; never a table wrapped at a guessed width. On a
terminal (a real pseudo-terminal here) the table stays. The whole output for the
bundled examples is ``tests/golden/check_lines.txt`` (``UPDATE_GOLDEN=1`` rewrites
it: read the diff). The golden output is that of a process writing into a pipe; the
other checks of the lines call the command line in this process (``cli.main``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from _harness import REPOSITORY, check_golden, run_cli, run_cli_in_process

EXAMPLES = "examples/eval"
RESULTS = f"{EXAMPLES}/results/2026-12-01T09-00-00"
ARGS = ("check", f"{EXAMPLES}/scenarios", "--events", f"{EXAMPLES}/events/all.jsonl",
        "--results", RESULTS)  # fmt: skip
TABLE_EDGE = "┏"  # rich's heavy box: a table was drawn


def test_into_a_file_check_prints_one_line_per_finding_then_the_totals() -> None:
    proc = run_cli(*ARGS)
    assert proc.returncode == 1, proc.stderr
    check_golden("check_lines.txt", proc.stdout)


def test_each_failed_verdict_is_one_line_led_by_its_file_and_line() -> None:
    lines = run_cli_in_process(*ARGS).stdout.splitlines()
    failed = [line for line in lines if ": failed: " in line]
    assert len(failed) == 26  # as many as the JSON report's failed verdicts
    pattern = re.compile(rf"^{EXAMPLES}/scenarios/\w+\.yml:\d+: failed: #\d+ \w+ at ")
    assert all(pattern.match(line) for line in failed), failed
    assert TABLE_EDGE not in "\n".join(lines) and "│" not in "\n".join(lines)


def test_the_summary_names_the_verdicts_that_differ_from_evaluate_agents() -> None:
    lines = run_cli_in_process(*ARGS).stdout.splitlines()
    [summary] = [line for line in lines if line.startswith("13 conversations: ")]
    assert summary.endswith(
        "; 2 differ from evaluate_agent's recorded verdicts "
        f"(#3 bot_uttered in {RESULTS}/identity_check/run_1.json, "
        f"#3 bot_uttered in {RESULTS}/identity_check/run_2.json)"
    )
    differs = [line for line in lines if ": differs: " in line]
    assert [line.split(": ", 1)[0] for line in differs] == [
        f"{EXAMPLES}/scenarios/identity_check.yml:41"
    ] * 2


def test_force_color_in_ci_does_not_bring_the_wrapped_table_back() -> None:
    env = {**os.environ, "FORCE_COLOR": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "mantle_stream", *ARGS],
        capture_output=True, text=True, cwd=REPOSITORY, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert TABLE_EDGE not in proc.stdout
    assert proc.stdout.splitlines()[0].startswith(f"{EXAMPLES}/scenarios/")


@pytest.mark.skipif(sys.platform == "win32", reason="a pseudo-terminal")
def test_on_a_terminal_check_keeps_its_table() -> None:
    import pty

    leader, follower = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k not in ("TTY_COMPATIBLE", "FORCE_COLOR")}
    with subprocess.Popen(
        [sys.executable, "-m", "mantle_stream", *ARGS],
        stdout=follower, stderr=subprocess.DEVNULL, cwd=REPOSITORY,
        env={**env, "COLUMNS": "120", "NO_COLOR": "1"},
    ) as proc:  # fmt: skip
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the other end closed (EIO on Linux)
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert proc.wait(timeout=120) == 1
    os.close(leader)
    out = b"".join(chunks).decode()
    assert TABLE_EDGE in out
    assert "26 failed assertions:" in out
