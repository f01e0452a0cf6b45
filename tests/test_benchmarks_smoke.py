"""Every benchmark script runs in its ``--quick`` smoke mode and prints its table.

No thresholds on time: CI machines are too noisy for that, and the figures
are read by people (benchmarks/README.md). This only keeps the scripts from
rotting while the engine changes under them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration  # each one a script in its own process

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"

# script → a column heading of each table it prints
TABLES = {
    "throughput.py": ["stage", "NaiveLive µs/event"],
    "latency.py": ["median", "an evil-pattern client"],
    "memory.py": ["state B/conv (tracemalloc)"],
    "routing.py": ["assertions", "µs per conversation"],
    "feeds.py": ["path", "in memory"],
    "sql_store.py": ["conversations", "peak RSS MiB"],
    "workers.py": ["source", "speed-up"],
    "kafka.py": ["members", "produce → verdict record"],
    "gate.py": ["think (s)", "added median / p99 (ms)", "gate CPU / turn (ms)"],
}

# Scripts deliberately not run here, with the reason.
NOT_HERE = {
    "soak.py": "its classic quick run takes up to 20 s; its --long-lived quick run is tested below",
}


def test_every_benchmark_script_is_smoke_tested_or_excused() -> None:
    scripts = {p.name for p in BENCHMARKS.glob("*.py") if not p.name.startswith("_")}
    assert scripts - NOT_HERE.keys() == set(TABLES)


# Each of these takes 10 to 45 s even in --quick mode: run in the slow set
# (.ci/run runs it after the main command), so the test command stays short.
SLOW = {"workers.py", "memory.py", "sql_store.py", "kafka.py", "gate.py"}


@pytest.mark.parametrize(
    "script",
    [pytest.param(s, marks=pytest.mark.slow) if s in SLOW else s for s in sorted(TABLES)],
    ids=lambda s: s.removesuffix(".py"),
)
def test_benchmark_runs_quick_and_prints_its_tables(script: str) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), "--quick"],
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1].startswith("machine: ")
    headers = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    for heading in TABLES[script]:
        assert any(heading in line for line in headers), f"no `{heading}` in:\n{done.stdout}"


@pytest.mark.slow
def test_the_long_lived_soak_runs_quick_and_every_verdict_equals_the_offline_one() -> None:
    # 20,000 conversations through one real listener with --state and --jsonl.
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "soak.py"), "--long-lived", "--quick"],
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "RSS after    20,000 conversations sent" in done.stdout
    assert "probe (event loop busy elsewhere)" in done.stdout
    assert "soak: OK" in done.stdout
