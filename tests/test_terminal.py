"""The command line on a real terminal: a pseudo-terminal of the given width.

A progress bar on standard error for a long ``check`` (only when standard
error is a terminal), ``NO_COLOR`` honoured, and every line the closing view
prints wrapped on word boundaries whatever the width.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import tempfile
import termios
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "eval"
SCENARIOS = EXAMPLES / "scenarios"
ALL_EVENTS = EXAMPLES / "events" / "all.jsonl"
RESULTS = EXAMPLES / "results" / "2026-12-01T09-00-00"
CARD = SCENARIOS / "card_replace_damaged.yml"
CARD_EVENTS = EXAMPLES / "events" / "card_replace_damaged.jsonl"
#: Select Graphic Rendition sequences that set a colour (foreground or background).
COLOUR = re.compile(rb"\x1b\[[0-9;]*(?:3[0-7]|9[0-7]|38;[25]|4[0-7])[0-9;]*m")

pytestmark = pytest.mark.timeout(120)


def terminal(
    args: list[str], *, columns: int = 110, pty_for: str = "both", env: dict[str, str] | None = None
) -> tuple[int, bytes, bytes]:
    """Run mantle-stream with standard output and/or error on a pseudo-terminal of
    ``columns`` columns: its exit status, what the terminal showed, and what went
    to the other stream (a file, so that neither side can block the other)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    environment = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    environment.update(env or {})
    with tempfile.TemporaryFile() as other:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mantle_stream", *args],
            stdin=subprocess.DEVNULL,
            stdout=slave if pty_for in ("both", "stdout") else other,
            stderr=slave if pty_for in ("both", "stderr") else other,
            cwd=ROOT,
            env=environment,
        )
        os.close(slave)
        shown = bytearray()
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every writer of the terminal has gone
                break
            if not data:
                break
            shown += data
        os.close(master)
        code = proc.wait(timeout=60)
        other.seek(0)
        return code, bytes(shown), other.read()


@pytest.fixture(scope="module")
def big_feed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One scenario's example runs 1,000 times over (distinct ids): a second or two."""
    lines = CARD_EVENTS.read_text().splitlines(keepends=True)
    path = tmp_path_factory.mktemp("big") / "big.jsonl"
    with path.open("w") as fh:
        for n in range(1000):
            fh.write("".join(line.replace('"sim-', f'"copy{n}-sim-') for line in lines))
    return path


def test_a_long_check_shows_its_progress_on_a_terminal(big_feed: Path) -> None:
    code, shown, report = terminal(
        ["check", str(CARD), "--events", str(big_feed), "--format", "json"],
        pty_for="stderr",
    )
    assert code == 1
    text = shown.decode(errors="replace")
    assert "judging" in text and "events/s" in text and "MB" in text
    assert report.startswith(b"{")  # standard output holds the report alone


def test_no_progress_when_standard_error_is_not_a_terminal(big_feed: Path) -> None:
    code, _, stderr = terminal(
        ["check", str(CARD), "--events", str(big_feed), "--format", "json"],
        pty_for="stdout",
    )
    assert code == 1
    assert b"judging" not in stderr and b"\x1b[" not in stderr


def test_no_color_is_honoured() -> None:
    args = ["check", str(SCENARIOS), "--events", str(ALL_EVENTS), "--results", str(RESULTS)]
    _, coloured, _ = terminal(args)
    assert COLOUR.search(coloured)  # a terminal gets colour by default
    _, plain, _ = terminal(args, env={"NO_COLOR": "1"})
    assert b"failed" in plain and not COLOUR.search(plain)


@pytest.mark.parametrize("columns", [60, 110])
def test_the_closing_lines_wrap_on_word_boundaries(columns: int) -> None:
    # The demo's last lines name many conversations; on a terminal they are
    # wrapped at spaces, never inside an id or a word.
    code, shown, _ = terminal(["demo", "--speed", "10"], columns=columns)
    assert code == 1
    text = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", shown.decode(errors="replace"))
    closing = text[text.rindex("stopped early:") :]
    lines = [line.rstrip() for line in closing.replace("\r", "").split("\n") if line.strip()]
    assert all(len(line) <= columns for line in lines), lines
    joined = " ".join(lines)
    # Six ids of 40 characters each, every one whole on its line.
    assert len(re.findall(r"sim-[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}", joined)) == 6
    assert "user turns the simulator did not have to play" in joined
