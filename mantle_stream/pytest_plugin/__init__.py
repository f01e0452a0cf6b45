"""The pytest plugin: a Mantle project's recorded conversations as tests.

Installed with the package (entry point ``pytest11``) and inert until
configured: with no ``mantle_scenarios`` ini value and no
``--mantle-scenarios`` option it adds its options and the
``mantle_evaluator`` fixture, and nothing else. This module imports only
pytest and the standard library; the engine is loaded once the plugin is
configured (:mod:`._session`), so a test suite that does not configure it
collects and runs as before.

Configured, each scenario file among ``mantle_scenarios`` is collected as a
file of tests: the conversations of the ``mantle_events`` sources it judged,
one item per conversation and assertion (``file::scenario::run::#5
tool_executed``). The sources are judged once per pytest run, during
collection (see :mod:`._session`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from mantle_stream.pytest_plugin._settings import PLUGIN_NAME, Settings, settings_of

if TYPE_CHECKING:
    from mantle_stream.core.engine.evaluator import Evaluator
    from mantle_stream.pytest_plugin._session import MantleSession

__all__ = ["PLUGIN_NAME", "Settings", "mantle_evaluator", "settings_of"]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mantle_stream", "mantle_stream: recorded conversations as tests")
    group.addoption(
        "--mantle-scenarios",
        action="append",
        metavar="PATH",
        help="a Mantle scenario file, or a directory of them (repeatable); "
        "replaces the mantle_scenarios ini value",
    )
    group.addoption(
        "--mantle-events",
        action="append",
        metavar="SOURCE",
        help="where the recorded conversations are, as `mantle-stream check --events` "
        "takes it: files, directories, glob patterns, sqlite:///PATH, "
        "postgresql://..., http(s):// with --mantle-results (repeatable); "
        "replaces the mantle_events ini value",
    )
    group.addoption(
        "--mantle-results",
        metavar="DIR",
        help="an evaluate_agent results folder: which scenario each conversation "
        "ran, and each run's number (run_N)",
    )
    group.addoption(
        "--mantle-stop-early",
        action="store_true",
        default=None,
        help="judge as a live run with simulators did: a conversation is stopped "
        "once an assertion failed, and what was still pending at its end is skipped",
    )
    group.addoption(
        "--mantle-tool-calls",
        action="store_true",
        default=None,
        help="judge tool calls as Rasa does with tool-call evaluation on: an item per "
        "`gate: true` entry of goals.expected_tools, failing when the entry failed",
    )
    group.addoption(
        "--mantle-regex-timeout",
        metavar="SECONDS",
        help="how long one text_matches search may take on one message (default 0.05)",
    )
    parser.addini(
        "mantle_scenarios",
        "Mantle scenario files or directories of them (relative to the ini file)",
        type="paths",
        default=[],
    )
    parser.addini(
        "mantle_events",
        "sources of recorded conversations (paths relative to the ini file)",
        type="args",
        default=[],
    )
    parser.addini("mantle_results", "an evaluate_agent results folder", type="string", default="")
    parser.addini(
        "mantle_stop_early",
        "a conversation is stopped once an assertion failed (see --mantle-stop-early)",
        type="bool",
        default=False,
    )
    parser.addini(
        "mantle_tool_calls",
        "an item per gate entry of goals.expected_tools (see --mantle-tool-calls)",
        type="bool",
        default=False,
    )
    parser.addini(
        "mantle_regex_timeout",
        "seconds one text_matches search may take on one message",
        type="string",
        default="",
    )


def pytest_configure(config: pytest.Config) -> None:
    settings = settings_of(config)
    if settings is None:
        return  # not configured: nothing registered, nothing loaded
    from mantle_stream.pytest_plugin._session import MantleSession

    session = MantleSession(config, settings)
    config.pluginmanager.register(session, PLUGIN_NAME)
    if settings.events and (
        settings.from_command_line or config.args_source != pytest.Config.ArgsSource.ARGS
    ):
        # `pytest` alone (testpaths or the current directory) and any run given
        # --mantle-scenarios collect the scenarios too; `pytest tests/` does not
        # (pytest drops an argument inside another, so none is collected twice).
        config.args.extend(settings.scenarios)


def _session_of(config: pytest.Config) -> MantleSession | None:
    plugin: MantleSession | None = config.pluginmanager.get_plugin(PLUGIN_NAME)
    return plugin


@pytest.fixture
def mantle_evaluator(request: pytest.FixtureRequest) -> Evaluator:
    """A fresh evaluator over the configured scenarios (``mantle_scenarios``),
    which a results folder (``mantle_results``) assigns conversations to, with
    the configured regex timeout: push lines with
    :func:`mantle_stream.testing.verdicts` or ``push_line``."""
    session = _session_of(request.config)
    if session is None:
        pytest.fail(
            "mantle_evaluator: no scenarios are configured: set mantle_scenarios in "
            "the ini file or pass --mantle-scenarios PATH",
            pytrace=False,
        )
    return session.evaluator()
