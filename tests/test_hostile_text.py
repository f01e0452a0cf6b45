"""Text from scenarios and events reaches people as text: no markup, no escapes, no tracebacks.

A valid regular expression such as ``https?://[/\\w.-]+``, bot text like
``type [/help]`` or a skill id ``[bold red]x[/]`` are rich markup to rich;
a conversation id holding ``\\x1b[31m`` is a terminal control sequence. Every
user- or event-supplied string is shown as it is, in the end-of-run table,
the live view and plain lines; and a reader that goes away (``| head``)
ends the run quietly.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

import mantle_stream as ms
from mantle_stream.outputs.live import LiveSnapshot, LiveView
from mantle_stream.outputs.table import ReportTable

ROOT = Path(__file__).resolve().parent.parent
HOSTILE_ID = "c-\x1b[31mred\x1b[0m-[bold]x[/]"
REGEX = r"https?://[/\w.-]+"


def scenario_text() -> str:
    return json.dumps(
        {
            "scenario": {
                "name": "[bold red]markup[/] name",
                "simulation_context": "x",
                "goals": {
                    "assertions": [
                        {"bot_uttered": {"text_matches": REGEX}},
                        {"skill_activated": {"skill_id": "[bold red]x[/]"}},
                    ]
                },
            }
        }
    )


def feed() -> bytes:
    rows = [
        {
            "conversation_id": HOSTILE_ID,
            "sequence": 0,
            "metadata": None,
            "bot": {"text": "type [/help] or see https://x.test/[red]", "data": {}},
        },
        {
            "conversation_id": HOSTILE_ID,
            "sequence": 1,
            "metadata": None,
            "skill_activated": {"skill_id": "[bold red]y[/]"},
        },
    ]
    return b"".join(json.dumps(r).encode() + b"\n" for r in rows)


def judged() -> ms.Evaluator:
    evaluator = ms.Evaluator([ms.load_scenario_text(scenario_text())])
    evaluator.push_chunk(feed())
    evaluator.finish_all()
    return evaluator


def rendered(renderable: object) -> str:
    out = io.StringIO()
    Console(width=200, file=out, color_system=None, legacy_windows=False).print(renderable)
    return out.getvalue()


def test_the_table_shows_markup_as_text_and_escapes_control_characters() -> None:
    text = rendered(ReportTable(ms.build_report(judged())))
    assert REGEX in text
    assert "skill `[bold red]x[/]` was never activated" in text
    assert "\x1b" not in text and "c-\\x1b[31mred\\x1b[0m-[bold]x[/]" in text


def test_the_live_view_shows_markup_as_text_and_escapes_control_characters() -> None:
    evaluator = judged()
    snapshot = LiveSnapshot(
        conversations=tuple(evaluator.results()),
        statistics=evaluator.statistics(),
        elapsed=1.0,
        events_per_second=2.0,
        source="feed [red].jsonl",
        final=True,
    )
    text = rendered(LiveView(snapshot))
    assert "\x1b" not in text
    assert "[bold red]markup[/] name" in text and "feed [red].jsonl" in text
    assert REGEX in text


def run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "mantle_stream", *args],
        input=stdin,
        capture_output=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )


def test_check_and_watch_print_hostile_text_without_a_traceback(tmp_path: Path) -> None:
    scen = tmp_path / "s.yml"
    scen.write_text(scenario_text())
    for command in ("check", "watch"):
        proc = run(command, str(scen), "--events", "-", stdin=feed())
        assert proc.returncode == 1, proc.stderr
        assert b"Traceback" not in proc.stderr and b"\x1b" not in proc.stdout
        # Markup as text, control characters escaped: in watch's line per verdict and
        # in check's line per failure (the passed one, with REGEX, is watch's only).
        assert b"c-\\x1b[31mred\\x1b[0m-[bold]x[/]" in proc.stdout
        assert b"skill `[bold red]x[/]` was never activated" in proc.stdout
        if command == "watch":
            assert REGEX.encode() in proc.stdout


def test_check_into_a_file_shows_markup_as_text_and_escapes_control_characters() -> None:
    from mantle_stream.outputs.table import report_lines

    text = "\n".join(report_lines(ms.build_report(judged())))
    assert "\x1b" not in text
    assert (
        "in c-\\x1b[31mred\\x1b[0m-[bold]x[/]: skill `[bold red]x[/]` was never activated" in text
    )


@pytest.mark.parametrize(
    "args",
    [
        [
            "watch",
            "examples/eval/scenarios",
            "--events",
            "examples/eval/events/all.jsonl",
            "--results",
            "examples/eval/results/2026-12-01T09-00-00",
        ],
        ["demo", "--speed", "50"],
    ],
    ids=["watch", "demo"],
)
def test_a_reader_that_goes_away_ends_the_run_quietly(args: list[str]) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "mantle_stream", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    proc.stdout.readline()
    proc.stdout.close()  # as `| head -1` does
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 141
    assert stderr == b""
