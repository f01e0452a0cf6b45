"""The plugin's settings: the ini values and command-line options, read and checked.

Only pytest and the standard library: read at ``pytest_configure`` of every
run, configured or not.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["PLUGIN_NAME", "Settings", "settings_of"]

#: The name the configured plugin object is registered under.
PLUGIN_NAME = "mantle_stream-session"


@dataclass(frozen=True)
class Settings:
    """What the plugin was configured with: paths absolute, sources as open_feed takes them."""

    scenarios: tuple[str, ...]
    events: tuple[str, ...]
    results: str | None = None
    stop_early: bool = False
    regex_timeout: float | None = None
    #: An item per gate entry of expected_tools (--mantle-tool-calls).
    tool_calls: bool = False
    #: Scenario paths given on the command line (--mantle-scenarios): they are
    #: collected whatever else the command line names.
    from_command_line: bool = False


def _ini_base(config: pytest.Config) -> Path:
    return config.inipath.parent if config.inipath is not None else config.rootpath


def _source(spec: str, base: Path, origin: str) -> list[str]:
    """One events source made absolute against ``base`` (glob patterns expanded)."""
    from mantle_stream.feeds.spec import expand_pattern, parse_source  # (configured runs only)

    source = parse_source(spec)
    if source.scheme == "stdin" or source.live:
        raise pytest.UsageError(
            f"{origin} `{source.shown}`: a pytest run judges recorded conversations; "
            "standard input is read by the terminal's process, and live sources (follow:, "
            "tcp://, unix:, kafka://) never end by themselves (use `mantle-stream watch` "
            "for those)"
        )
    if spec.startswith("sqlite:///") and not spec.startswith("sqlite:////"):
        return [f"sqlite:///{base / spec.removeprefix('sqlite:///')}"]  # sqlite:////...
    if not source.local:
        return [spec]
    matches = expand_pattern(spec, base)
    if matches == []:
        raise pytest.UsageError(f"{origin} `{spec}` matches no file")
    return [str(base / spec)] if matches is None else matches


def settings_of(config: pytest.Config) -> Settings | None:
    """The plugin's settings, or None when it is not configured (no scenarios)."""
    options = config.option
    here = config.invocation_params.dir
    base = _ini_base(config)
    cli_scenarios: list[str] | None = options.mantle_scenarios
    if cli_scenarios:
        scenarios = [str(here / p) for p in cli_scenarios]
    else:
        scenarios = [str(p) for p in config.getini("mantle_scenarios")]
    cli_events: list[str] | None = options.mantle_events
    if cli_events:
        events = [s for e in cli_events for s in _source(e, here, "--mantle-events")]
    else:
        events = [
            s for e in config.getini("mantle_events") for s in _source(e, base, "mantle_events")
        ]
    if not scenarios:
        if events:
            raise pytest.UsageError(
                "mantle_stream: events are configured but no scenarios to judge them "
                "against: set mantle_scenarios or pass --mantle-scenarios PATH"
            )
        return None
    results: str | None = None
    if options.mantle_results:
        results = str(here / options.mantle_results)
    elif config.getini("mantle_results"):
        results = str(base / config.getini("mantle_results"))
    stop_early = options.mantle_stop_early
    if stop_early is None:
        stop_early = bool(config.getini("mantle_stop_early"))
    tool_calls = options.mantle_tool_calls
    if tool_calls is None:
        tool_calls = bool(config.getini("mantle_tool_calls"))
    timeout_text = options.mantle_regex_timeout or config.getini("mantle_regex_timeout")
    regex_timeout: float | None = None
    if timeout_text:
        try:
            regex_timeout = float(timeout_text)
        except ValueError:
            regex_timeout = -1.0
        if not regex_timeout > 0:
            raise pytest.UsageError(
                f"mantle_stream: the regex timeout must be a number of seconds above 0, "
                f"not `{timeout_text}`"
            )
    for folder in [results] if results else []:
        if not os.path.isdir(folder):
            raise pytest.UsageError(f"mantle_stream: results folder `{folder}` is not a directory")
    return Settings(
        scenarios=tuple(scenarios),
        events=tuple(events),
        results=results,
        stop_early=stop_early,
        regex_timeout=regex_timeout,
        tool_calls=tool_calls,
        from_command_line=bool(cli_scenarios),
    )
