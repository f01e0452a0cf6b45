"""Shared by every test: GitHub Actions kept out, Hypothesis profiles, the real components.

When the suite itself runs in GitHub Actions, ``GITHUB_ACTIONS=true`` would turn
on ``--annotations github`` in every ``check`` and ``watch`` the tests start, and
``GITHUB_STEP_SUMMARY`` would get their summaries. The tests that want them set
them explicitly (``test_cli_github.py``).

Hypothesis runs its ``default`` profile (its own defaults: 100 examples where a
test names no count); ``--hypothesis-profile=thorough`` runs ten times as many.
Tests that set their own count derive it from the profile's, so the profile
scales them too (``test_streaming_equals_batch.py``).

A test marked ``real_component("chromium")`` (or ``"postgresql"``) needs a
program the Python packages do not bring. Where it is missing such a test
skips, and the closing lines of the run say which did not run and the one
command that installs what they need: a pass that left them out is not silent.
Those tests, and the tests that start a server (tansu, PostgreSQL) or a
benchmark script, are marked ``integration``: ``-m "not integration"`` is the
quick inner loop (docs/getting-started.md, "Development").

Compiled bytecode is cached for the run under ``.pytest_cache/pycache`` even where
``PYTHONDONTWRITEBYTECODE`` is set (as on this project's CI machine): otherwise each
of the few hundred ``mantle-stream`` subprocesses the tests start compiles the whole
package again, and each xdist worker rewrites every test module's asserts again. The
source tree stays clean (no ``__pycache__`` beside the sources).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Generator
from pathlib import Path

import pytest
from hypothesis import settings

settings.register_profile("thorough", max_examples=1000)

#: Where the run's bytecode is cached (see the module's docstring): set before any test
#: module is imported, and inherited by the xdist workers and the CLI subprocesses.
PYCACHE = Path(__file__).resolve().parent.parent / ".pytest_cache" / "pycache"
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
os.environ.setdefault("PYTHONPYCACHEPREFIX", str(PYCACHE))
sys.dont_write_bytecode = False
sys.pycache_prefix = os.environ["PYTHONPYCACHEPREFIX"]

#: What a ``real_component`` test needs, and how to install it (Debian's packages,
#: as ``.ci/run`` does).
COMPONENTS = {
    "chromium": "chromium",
    "postgresql": "postgresql",
}
#: Fixtures that start a server for the session: a test using one is ``integration``.
SERVER_FIXTURES = {"kafka_broker", "postgres"}
#: A test on the Kafka broker takes 3 to 13 s (group joins, session timeouts): 120 s in
#: all, so they run in the slow set (.ci/run, after the README's test command).
SLOW_FIXTURES = {"kafka_broker"}
#: Where a skipped ``real_component`` test records what it needed (user_properties
#: travel from an xdist worker to the process that prints the summary).
NEEDED = "real_component"


#: pytest-timeout's limit for a ``slow`` test that sets none of its own: the long
#: property runs take 2 to 7 minutes on a busy 2-core machine (120 s is the rest's).
SLOW_TIMEOUT = 900


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if fixtures & SERVER_FIXTURES or item.get_closest_marker("real_component"):
            item.add_marker(pytest.mark.integration)
        if fixtures & SLOW_FIXTURES:
            item.add_marker(pytest.mark.slow)
        if item.get_closest_marker("slow") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT))


#: The modules holding the longest tests (3 to 10 s each, ``--durations``), longest
#: first. They are collected first: xdist hands each worker a contiguous part of the
#: collection and an idle worker takes the far end of a busy one's queue, so long
#: tests begin early and the run's end is made of short ones (a 10 s test collected
#: last kept one worker busy alone for its 10 s).
LONG_FIRST = (
    "test_html_report.py",
    "test_yaml.py",
    "test_streaming_equals_batch.py",
    "test_workers.py",
    "test_expected_tools_judging.py",
    "test_terminal.py",
    "test_fuzz.py",
    "test_http_feed.py",
    "test_benchmarks_smoke.py",
    "test_gate.py",
    "test_cli_live.py",
    "test_run.py",
)


@pytest.hookimpl(trylast=True, specname="pytest_collection_modifyitems")
def pytest_collection_modifyitems_long_first(items: list[pytest.Item]) -> None:
    """The modules of ``LONG_FIRST`` first, in its order; the rest as collected (after
    every other plugin has ordered them)."""
    rank = {name: n for n, name in enumerate(LONG_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    marker = item.get_closest_marker("real_component")
    if report.skipped and marker is not None:
        report.user_properties.append((NEEDED, str(marker.args[0])))
    return report


def pytest_unconfigure(config: pytest.Config) -> None:
    """After the line of counts, the very last lines: the real-component tests
    that skipped, and the command that installs what they need."""
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    if terminal is None:
        return
    missing: dict[str, list[str]] = {}
    for report in terminal.stats.get("skipped", []):
        for key, component in getattr(report, "user_properties", ()):
            if key == NEEDED:
                missing.setdefault(component, []).append(report.nodeid)
    if not missing:
        return
    count = sum(len(ids) for ids in missing.values())
    terminal.section("real components missing", sep="=", red=True, bold=True)
    terminal.line(
        f"{count} test{'s' if count > 1 else ''} of real components did not run "
        f"(no {' and no '.join(sorted(missing))} here):"
    )
    for component in sorted(missing):
        for nodeid in missing[component]:
            terminal.line(f"  {nodeid}  ({component})")
    packages = " ".join(COMPONENTS[c] for c in sorted(missing))
    sudo = "" if os.geteuid() == 0 else "sudo "
    terminal.line(
        "Install what they need (Debian or Ubuntu; .ci/run does) and run again:\n"
        f"  {sudo}apt-get install --no-install-recommends {packages}",
        red=True,
        bold=True,
    )


@pytest.fixture(autouse=True)
def _outside_github_actions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


@pytest.fixture(autouse=True)
def _pytester_runs_are_not_xdist_workers(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pytest run inside a test (``pytester``) is a run of its own, not a worker of
    this one: plugins that see PYTEST_XDIST_WORKER change course (pytest-benchmark,
    where installed, warns, and filterwarnings makes that an error)."""
    if "pytester" in request.fixturenames:
        for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
            monkeypatch.delenv(name, raising=False)
