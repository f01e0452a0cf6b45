"""``--html PATH``: the picture of a run, one self-contained HTML file.

The structure is checked without a browser (parsed with ``html.parser``); the
page as a browser draws it is checked with headless chromium (Debian's
``chromium``, which ``.ci/run`` installs), skipped where there is none, and
the skip named in the closing lines of the run.
"""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
import sys
import time
import zlib
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from mantle_stream.core.errors import CONTROL_ESCAPES
from mantle_stream.core.verdicts import VerdictRecord
from mantle_stream.outputs.html import (
    CSP,
    MAX_ROWS,
    MAX_TIMELINES,
    HtmlWriter,
    render_html,
    stopped_at,
)
from mantle_stream.outputs.report import Report, ReportConversation, Summary

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "eval"
CHECK = (
    str(EXAMPLES / "scenarios"),
    "--events",
    str(EXAMPLES / "events" / "all.jsonl"),
    "--results",
    str(EXAMPLES / "results" / "2026-12-01T09-00-00"),
)
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
URL = re.compile(r"https?://", re.IGNORECASE)


class Page(HTMLParser):
    """What a test needs of a page: its text, its tags' attributes, its CSP."""

    def __init__(self, source: str) -> None:
        super().__init__(convert_charrefs=True)
        self.text: list[str] = []
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.markup: list[str] = []  # tags, declarations, comments: everything but text
        self.source = source
        self.feed(source)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))
        self.markup.append(self.get_starttag_text() or "")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def handle_decl(self, decl: str) -> None:
        self.markup.append(decl)

    def handle_comment(self, data: str) -> None:
        self.markup.append(data)

    @property
    def all_text(self) -> str:
        return " ".join(" ".join(self.text).split())

    def by_id(self, tag_id: str) -> str:
        """The text of the element with this id (one whose content is text only)."""
        found = re.search(rf'id="{re.escape(tag_id)}">([^<]*)<', self.source)
        assert found is not None, tag_id
        return found.group(1)

    def csp(self) -> str | None:
        for tag, attrs in self.tags:
            if tag == "meta" and attrs.get("http-equiv", "").lower() == "content-security-policy":
                return attrs.get("content")
        return None


def _check_html(tmp_path: Path) -> tuple[dict[str, Any], Path]:
    """``mantle-stream check`` on the example runs with ``--html``: the report and the file."""
    out = tmp_path / "out.html"
    command = [sys.executable, "-m", "mantle_stream", "check", *CHECK]
    proc = subprocess.run(
        [*command, "--format", "json", "--html", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr  # some example runs fail on purpose
    assert proc.stdout.startswith("{"), proc.stderr
    return json.loads(proc.stdout), out


def _norm(text: str) -> str:
    return " ".join(text.translate(CONTROL_ESCAPES).split())


def _holds_the_report(page: Page, report: dict[str, Any]) -> None:
    """Every conversation, scenario, failure reason and count of the report is on the page."""
    text = page.all_text
    for conv in report["conversations"]:
        assert conv["conversation_id"] in text
        for a in conv["assertions"]:
            if a["verdict"] in ("failed", "errored"):
                assert _norm(a["reason"]) in text, a
    for scen in report["scenarios"]:
        assert _norm(scen["scenario"]) in text
    summary = report["summary"]
    for name in ("conversations", "passed", "failed", "skipped"):
        assert page.by_id(f"total-{name}") == str(summary.get(name, 0))
    verdicts = [attrs.get("data-verdict") for _, attrs in page.tags if "data-verdict" in attrs]
    for verdict in ("passed", "failed", "errored"):
        expected = sum(1 for c in report["conversations"] if c["verdict"] == verdict)
        assert verdicts.count(verdict) == expected
    # Failures first.
    order = {"failed": 0, "errored": 1, "pending": 2, "passed": 4}
    assert verdicts == sorted(verdicts, key=lambda v: order.get(v or "", 5))


def _fetches_nothing(page: Page) -> None:
    assert page.csp() == CSP
    for markup in page.markup:  # a URL may be quoted in text, never in markup
        assert not URL.search(markup), markup
    assert not any(tag in ("script", "link", "img", "iframe", "object") for tag, _ in page.tags)


def test_the_example_runs_as_a_page(tmp_path: Path) -> None:
    report, out = _check_html(tmp_path)
    page = Page(out.read_text(encoding="utf-8"))
    _holds_the_report(page, report)
    _fetches_nothing(page)
    # A timeline per conversation, a lane (a mark) per assertion, the legend.
    marks = [a for t, a in page.tags if t == "g" and "mark" in a.get("class", "").split()]
    assert len(marks) == sum(len(c["assertions"]) for c in report["conversations"])
    assert sum(1 for t, _ in page.tags if t == "svg" and _.get("class") == "timeline") == len(
        report["conversations"]
    )
    assert "Legend:" in page.all_text
    # Each scenario's rates: pass rate, pass^k, pass@k.
    assert "pass^k" in page.all_text and "pass@k" in page.all_text


def _conv(cid: str, verdict: str, assertions: list[VerdictRecord], **kw: Any) -> ReportConversation:
    return ReportConversation(
        conversation_id=cid,
        scenario=kw.pop("scenario", "s"),
        verdict=verdict,  # type: ignore[arg-type]
        events=kw.pop("events", 10),
        assertions=assertions,
        **kw,
    )


def _report(convs: list[ReportConversation]) -> Report:
    return Report(
        conversations=convs,
        summary=Summary(
            conversations=len(convs),
            passed=sum(c.verdict == "passed" for c in convs),
            failed=sum(c.verdict == "failed" for c in convs),
            assertions=sum(len(c.assertions) for c in convs),
            unmatched=0,
        ),
    )


def test_everything_from_the_report_is_escaped() -> None:
    hostile = '</title><script>alert("x")</script><img src="https://evil.example/a.png">'
    conv = _conv(
        hostile,
        "failed",
        [VerdictRecord(0, "bot_uttered", "failed", 3, f"agent said {hostile}\x1b[31m", hostile, 2)],
        scenario=hostile,
    )
    source = render_html(_report([conv]), title=hostile)
    page = Page(source)
    _fetches_nothing(page)  # no script, no img: the text stays text
    assert "<script>" not in source and "\x1b" not in source
    assert hostile in page.all_text
    assert "agent said " + hostile + "\\x1b[31m" in page.all_text


def test_stops_and_positions() -> None:
    decided = [
        VerdictRecord(0, "a", "passed", 4),
        VerdictRecord(1, "b", "failed", 9),
        VerdictRecord(2, "c", "failed", 7),
        VerdictRecord(3, "d", "skipped", None),
    ]
    stopped = {"stopped_early": True}
    assert stopped_at(_conv("x", "failed", decided, **stopped)) == 7  # the earliest failure
    assert stopped_at(_conv("x", "failed", decided[:1], **stopped)) == 4  # the last decided
    assert stopped_at(_conv("x", "failed", decided)) is None  # not stopped
    page = Page(
        render_html(_report([_conv("x", "failed", decided, turn_starts=[1, 5], **stopped)]))
    )
    stops = [a for t, a in page.tags if t == "g" and a.get("class") == "stop"]
    assert len(stops) == 1
    assert "stopped early at sequence 7" in page.all_text
    assert "turn 2 begins at sequence 5" in page.all_text


def test_ten_thousand_conversations_stay_bounded() -> None:
    marks = [VerdictRecord(i, "tool_executed", "passed", i + 1, "ran") for i in range(10)]
    convs = [
        _conv(f"c-{n}", "failed" if n % 7 == 0 else "passed", marks, turn_starts=[1, 4, 8])
        for n in range(10_000)
    ]
    started = time.perf_counter()
    source = render_html(_report(convs))
    assert time.perf_counter() - started < 10
    assert len(source) < 8_000_000
    page = Page(source)
    assert source.count('class="timeline"') == MAX_TIMELINES
    assert "c-0" in page.all_text and f"c-{10_000 - 1}" not in page.all_text
    bounded = page.by_id("bounded")
    assert f"first {MAX_TIMELINES} conversations (failures first)" in bounded
    assert f"{10_000 - MAX_ROWS} more only counted" in bounded
    # Failures first: every drawn conversation failed (there are 1,429 failures).
    drawn = [a["data-verdict"] for t, a in page.tags if "data-verdict" in a]
    assert drawn == ["failed"] * MAX_TIMELINES


def test_the_sink_writes_the_file_at_the_end(tmp_path: Path) -> None:
    path = tmp_path / "run.html"
    sink = HtmlWriter(str(path))
    sink.on_decisions([])
    assert not path.exists()
    sink.on_end(_report([_conv("c-1", "passed", [VerdictRecord(0, "a", "passed", 1, "ok")])]))
    sink.close()
    assert "c-1" in Page(path.read_text(encoding="utf-8")).all_text
    assert [p.name for p in tmp_path.iterdir()] == ["run.html"]  # no temporary file left


def _pixels(png: bytes) -> tuple[int, int, set[bytes]]:
    """Width, height and the distinct RGB colours of a PNG (8-bit RGB or RGBA, not
    interlaced), decoded with the standard library: the chunks, zlib, the row filters."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, [], b""
    while pos < len(png):
        (size,) = struct.unpack(">I", png[pos : pos + 4])
        kind, body = png[pos + 4 : pos + 8], png[pos + 8 : pos + 8 + size]
        pos += 12 + size
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat.append(body)
    width, height, depth, colour_type, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and colour_type in (2, 6) and interlace == 0
    bpp = 3 if colour_type == 2 else 4
    raw = zlib.decompress(b"".join(idat))
    stride = width * bpp
    low = int.from_bytes(b"\x7f" * stride, "big")
    high = int.from_bytes(b"\x80" * stride, "big")
    prev, colours = bytes(stride), set[bytes]()
    for y in range(height):
        start = y * (stride + 1)
        kind_of_filter, line = raw[start], raw[start + 1 : start + 1 + stride]
        if kind_of_filter == 0:
            cur = bytes(line)
        elif kind_of_filter == 2:  # up: bytewise addition without carries, all at once
            a, b = int.from_bytes(line, "big"), int.from_bytes(prev, "big")
            cur = (((a & low) + (b & low)) ^ ((a ^ b) & high)).to_bytes(stride, "big")
        else:
            row = bytearray(line)
            for i in range(stride):
                left = row[i - bpp] if i >= bpp else 0
                up = prev[i]
                if kind_of_filter == 1:
                    row[i] = (row[i] + left) & 0xFF
                elif kind_of_filter == 3:
                    row[i] = (row[i] + ((left + up) >> 1)) & 0xFF
                else:  # paeth
                    corner = prev[i - bpp] if i >= bpp else 0
                    p = left + up - corner
                    pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                    best = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                    row[i] = (row[i] + best) & 0xFF
            cur = bytes(row)
        colours.update(cur[i : i + 3] for i in range(0, stride, bpp))
        prev = cur
    return width, height, colours


def _chromium(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={cwd / 'profile'}",
            *args,
        ],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
        check=False,
    )


@pytest.mark.real_component("chromium")  # a skip is named at the end of the run
@pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium binary on PATH (.ci/run installs Debian's chromium)"
)
def test_chromium_draws_the_page_and_its_dom_holds_the_report(tmp_path: Path) -> None:
    report, out = _check_html(tmp_path)
    source = Page(out.read_text(encoding="utf-8"))
    _fetches_nothing(source)

    # One browser draws the page and prints its DOM (a launch is a second or two).
    shot = tmp_path / "shot.png"
    dumped = _chromium(
        f"--screenshot={shot}", "--window-size=1280,2000", "--dump-dom", out.as_uri(), cwd=tmp_path
    )
    assert shot.exists(), dumped.stderr
    width, height, colours = _pixels(shot.read_bytes())
    assert (width, height) == (1280, 2000)
    assert len(colours) >= 8  # not blank: text, tiles, marks
    for colour in ("ffffff", "1a7f37", "cf222e"):  # the page, a passed mark, a failed one
        assert bytes.fromhex(colour) in colours, colour

    assert dumped.returncode == 0, dumped.stderr
    dom = Page(dumped.stdout)
    _holds_the_report(dom, report)
    assert dom.csp() == CSP
