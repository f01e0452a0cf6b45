"""A Rasa server's HTTP tracker endpoint as a source, against a real server on loopback.

The server (``http.server.ThreadingHTTPServer`` in a thread) serves
``/conversations/{id}/tracker`` for the example conversations: the flat
tracker document of ``examples/eval/trackers/`` as it is, and the others as
tracker documents holding their ProtoJSON rows from ``examples/eval/events/``.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import threading
import time
import tracemalloc
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import anyio
import pytest

from mantle_stream import FeedError
from mantle_stream.core.recorded import load_results
from mantle_stream.feeds import Chunk, HttpOptions, open_feed
from mantle_stream.feeds.http import HttpFeed

from _harness import http_server, quick_http_retries, run_cli, run_cli_in_process

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "eval"
SCENARIOS = EXAMPLES / "scenarios"
EVENTS = EXAMPLES / "events" / "all.jsonl"
TRACKER = next((EXAMPLES / "trackers").glob("*.json"))
RESULTS = EXAMPLES / "results" / "2026-12-01T09-00-00"
IDS = tuple(load_results(RESULTS))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _documents() -> dict[str, bytes]:
    """Every example conversation as the tracker document a Rasa server would answer."""
    rows: dict[str, list[dict[str, Any]]] = {}
    for line in EVENTS.read_bytes().splitlines():
        if line.strip():
            row = json.loads(line)
            rows.setdefault(row["conversation_id"], []).append(row)
    docs = {cid: json.dumps({"sender_id": cid, "events": r}).encode() for cid, r in rows.items()}
    docs[json.loads(TRACKER.read_bytes())["sender_id"]] = TRACKER.read_bytes()
    return docs


DOCUMENTS = _documents()


@dataclass
class Rasa:
    """What the fake Rasa server serves and what it saw."""

    documents: dict[str, bytes]
    token: str | None = None  # required as ?token= when set (or the JWT)
    jwt: str | None = None  # accepted as Authorization: Bearer when set
    fail: dict[str, int] = field(default_factory=dict)  # 500s still to answer, by id
    # Ids answered with another conversation's tracker (a misrouting proxy, say).
    answer_with: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    requests: list[tuple[str, dict[str, list[str]], str | None]] = field(default_factory=list)
    in_flight: int = 0
    most_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    url: str = ""


def _handler(rasa: Rasa) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            with rasa.lock:
                rasa.in_flight += 1
                rasa.most_in_flight = max(rasa.most_in_flight, rasa.in_flight)
            try:
                time.sleep(rasa.delay)
                self._answer()
            finally:
                with rasa.lock:
                    rasa.in_flight -= 1

        def _answer(self) -> None:
            parts = urlsplit(self.path)
            query = parse_qs(parts.query)
            auth = self.headers.get("Authorization")
            with rasa.lock:
                rasa.requests.append((parts.path, query, auth))
            segments = parts.path.split("/")
            if len(segments) != 4 or segments[1] != "conversations" or segments[3] != "tracker":
                return self._send(404, b'{"message": "no such route"}')
            cid = unquote(segments[2])
            if rasa.token or rasa.jwt:
                ok = (rasa.token is not None and query.get("token") == [rasa.token]) or (
                    rasa.jwt is not None and auth == f"Bearer {rasa.jwt}"
                )
                if not ok:
                    return self._send(401, b'{"message": "User is not authenticated."}')
            with rasa.lock:
                failing = rasa.fail.get(cid, 0)
                if failing:
                    rasa.fail[cid] = failing - 1
            if failing:
                return self._send(500, b'{"message": "boom"}')
            cid = rasa.answer_with.get(cid, cid)
            if cid not in rasa.documents:
                return self._send(404, b'{"message": "conversation not found"}')
            self._send(200, rasa.documents[cid])

        def _send(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


@pytest.fixture
def rasa() -> Iterator[Rasa]:
    state = Rasa(dict(DOCUMENTS))
    with http_server(_handler(state)) as state.url:
        yield state


async def read(url: str, options: HttpOptions) -> list[Chunk]:
    with anyio.fail_after(20):
        async with open_feed(url, http=options) as feed:
            return [chunk async for chunk in feed]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The command line called in this process (the server is a thread of it)."""
    return run_cli_in_process(*args)


def _comparable(report: dict[str, Any]) -> dict[str, Any]:
    """The report without what depends on the source: conversations by id."""
    report = dict(report)
    report["conversations"] = sorted(report["conversations"], key=lambda c: c["conversation_id"])
    return report


# -- tests ------------------------------------------------------------------


def test_the_report_over_http_equals_the_report_from_the_same_conversations_in_files(
    rasa: Rasa,
) -> None:
    over_http = cli(
        "check",
        str(SCENARIOS),
        "--events",
        rasa.url,
        "--results",
        str(RESULTS),
        "--format",
        "json",
    )
    from_files = cli(
        "check",
        str(SCENARIOS),
        "--events",
        str(EVENTS),
        str(TRACKER),
        "--results",
        str(RESULTS),
        "--format",
        "json",
    )
    assert over_http.returncode == from_files.returncode == 1, over_http.stderr
    http_report, file_report = json.loads(over_http.stdout), json.loads(from_files.stdout)
    assert http_report["summary"]["conversations"] == len(IDS) == 14
    # A tracker document is its conversation in order: the example's gap is passed at
    # once; two files may split a conversation in any order, so there it was waited for.
    passed, waited = http_report["warnings"], file_report["warnings"]
    assert (passed.pop("gaps_passed"), waited.pop("gaps")) == (1, 1)
    assert passed.pop("occurrences") == [
        {**o, "warning": "gaps_passed"} for o in waited.pop("occurrences")
    ]
    assert _comparable(http_report) == _comparable(file_report)
    # One request per conversation, for every event, none retried.
    assert sorted(unquote(p.split("/")[2]) for p, _, _ in rasa.requests) == sorted(IDS)
    assert all(q.get("include_events") == ["ALL"] for _, q, _ in rasa.requests)


async def test_chunks_end_their_conversation_in_the_order_the_ids_were_given(rasa: Rasa) -> None:
    chunks = await read(rasa.url + "/", HttpOptions(conversations=IDS))
    assert [c.ends for c in chunks] == list(IDS)
    for chunk in chunks:
        assert chunk.source == f"{rasa.url}/conversations/{chunk.ends}/tracker#events"
        assert chunk.first_line == 1 and chunk.data.endswith(b"\n")


async def test_the_token_and_the_jwt_reach_the_server(rasa: Rasa) -> None:
    rasa.token, rasa.jwt = "s3cret", "a.b.c"
    [chunk] = await read(rasa.url, HttpOptions(conversations=IDS[:1], token="s3cret"))
    assert chunk.ends == IDS[0]
    [chunk] = await read(rasa.url, HttpOptions(conversations=IDS[1:2], jwt="a.b.c"))
    assert chunk.ends == IDS[1]
    (_, first, auth1), (_, second, auth2) = rasa.requests
    assert first["token"] == ["s3cret"] and auth1 is None
    assert "token" not in second and auth2 == "Bearer a.b.c"


async def test_a_401_says_which_credentials_to_give(rasa: Rasa) -> None:
    rasa.token = "s3cret"
    with pytest.raises(FeedError) as caught:
        await read(rasa.url, HttpOptions(conversations=IDS[:3]))
    message = str(caught.value)
    assert f"conversation `{IDS[0]}`" in message and "401" in message
    assert "--rasa-token" in message and "--rasa-jwt" in message
    with pytest.raises(FeedError, match="--rasa-token not accepted"):
        await read(rasa.url, HttpOptions(conversations=IDS[:1], token="wrong"))


def test_the_cli_reads_the_token_from_rasa_token_and_fails_clearly_without_it(
    rasa: Rasa,
) -> None:
    rasa.token = "s3cret"
    args = ("check", str(SCENARIOS), "--events", rasa.url, "--results", str(RESULTS))
    # As processes: RASA_TOKEN is read from the environment the command is started in.
    denied = run_cli(*args)
    assert denied.returncode == 2
    assert "401" in denied.stderr and "--rasa-token" in denied.stderr
    with pytest.MonkeyPatch.context() as env:
        env.setenv("RASA_TOKEN", "s3cret")
        allowed = run_cli(*args, "--format", "json")
    assert allowed.returncode == 1, allowed.stderr
    assert json.loads(allowed.stdout)["summary"]["conversations"] == 14


async def test_a_server_that_fails_twice_then_answers_is_retried(rasa: Rasa) -> None:
    rasa.fail = {IDS[0]: 2}
    [chunk] = await read(rasa.url, HttpOptions(conversations=IDS[:1], backoff=0.01))
    assert chunk.ends == IDS[0]
    assert len(rasa.requests) == 3


async def test_a_tracker_the_server_keeps_failing_on_is_unread_and_the_rest_are_read(
    rasa: Rasa,
) -> None:
    rasa.fail = {IDS[1]: 10}
    async with open_feed(
        rasa.url, http=HttpOptions(conversations=IDS[:3], retries=2, backoff=0.01)
    ) as feed:
        chunks = [chunk async for chunk in feed]
        unread = feed.unread
    assert [c.ends for c in chunks] == [IDS[0], IDS[2]]
    why = "the server answered 500 Internal Server Error (gave up after 3 attempts)"
    assert unread == {IDS[1]: why}


def test_the_cli_judges_the_rest_and_writes_every_output_when_one_tracker_keeps_failing(
    rasa: Rasa, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    quick_http_retries(monkeypatch)
    rasa.fail = {PASSING[1]: 100}
    outputs = ["--junit", str(tmp_path / "j.xml"), "--html", str(tmp_path / "r.html")]
    outputs += ["--jsonl", str(tmp_path / "v.jsonl")]
    args = ["check", str(SCENARIOS), "--events", rasa.url, "--results", str(RESULTS)]
    ids = [a for cid in PASSING for a in ("--conversation", cid)]
    proc = cli(*args, *ids, "--format", "json", *outputs)
    assert proc.returncode == 2, proc.stderr
    report = json.loads(proc.stdout)
    assert [c["conversation_id"] for c in report["conversations"]] == [PASSING[0], PASSING[2]]
    why = "the server answered 500 Internal Server Error (gave up after 4 attempts)"
    assert report["warnings"]["unread"] == {PASSING[1]: why}
    assert f"warning: conversation `{PASSING[1]}` could not be read: {why}" in proc.stderr
    assert all((tmp_path / name).stat().st_size for name in ("j.xml", "r.html", "v.jsonl"))


async def test_a_server_that_is_not_there_is_retried_then_named() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(FeedError, match=r"conversation `c1`.*ConnectError.*2 attempts"):
        await read(f"http://127.0.0.1:{port}", HttpOptions(conversations=("c1",), retries=1))


async def test_a_conversation_the_server_does_not_have_is_skipped_and_named(rasa: Rasa) -> None:
    skipped: list[tuple[str, str]] = []
    rasa.documents["empty"] = b'{"sender_id": "empty", "events": []}'
    options = HttpOptions(
        conversations=(IDS[0], "nobody", "empty", IDS[1]),
        on_missing=lambda cid, why: skipped.append((cid, why)),
    )
    async with open_feed(rasa.url, http=options) as feed:
        chunks = [chunk async for chunk in feed]
        assert isinstance(feed, HttpFeed)
        assert set(feed.missing) == {"nobody", "empty"}
    assert [c.ends for c in chunks] == [IDS[0], IDS[1]]
    assert sorted(skipped) == [
        ("empty", "the server's tracker for it has no events"),
        ("nobody", "the server has no such conversation (404)"),
    ]


def test_the_cli_warns_about_a_skipped_conversation(rasa: Rasa) -> None:
    proc = cli(
        "check",
        str(SCENARIOS / "card_replace_damaged.yml"),
        "--events",
        rasa.url,
        "--conversation",
        "sim-5588a28d-011b-4f0b-822a-91e1448a99c5",
        "--conversation",
        "nobody",
        "--format",
        "json",
    )
    assert proc.returncode == 0, proc.stderr  # the one conversation passes
    assert "warning: skipped conversation `nobody`" in proc.stderr and "404" in proc.stderr
    report = json.loads(proc.stdout)
    assert [c["conversation_id"] for c in report["conversations"]] == [
        "sim-5588a28d-011b-4f0b-822a-91e1448a99c5"
    ]


async def test_requests_in_flight_stay_within_the_bound(rasa: Rasa) -> None:
    # Each answer takes 0.2 s, for requests to overlap on a busy machine too (at 0.05 s
    # it failed once in about 15 runs with other suites beside it).
    rasa.delay = 0.2
    chunks = await read(rasa.url, HttpOptions(conversations=IDS, concurrency=3))
    assert [c.ends for c in chunks] == list(IDS)
    assert 2 <= rasa.most_in_flight <= 3, rasa.most_in_flight


def test_the_cli_asks_which_conversations() -> None:
    proc = cli("check", str(SCENARIOS), "--events", "http://127.0.0.1:5005")
    assert proc.returncode == 2
    assert "--conversation" in proc.stderr and "--results" in proc.stderr


async def test_a_bad_url_or_no_conversations_fail_on_entering() -> None:
    with pytest.raises(FeedError, match="--conversation"):
        await read("http://127.0.0.1:5005", HttpOptions())
    with pytest.raises(FeedError, match="base URL"):
        await read("http://", HttpOptions(conversations=("c",)))
    with pytest.raises(FeedError, match="without `\\?`"):
        await read("http://h:5005/?token=x", HttpOptions(conversations=("c",)))


async def test_without_httpx_the_error_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "httpx", None)
    with pytest.raises(FeedError, match=r'pip install "mantle_stream\[http\]"'):
        await read("http://127.0.0.1:5005", HttpOptions(conversations=("c",)))


def test_options_are_checked() -> None:
    for bad in (
        {"concurrency": 0},
        {"retries": -1},
        {"timeout": 0.0},
        {"backoff": -1.0},
        {"max_document_bytes": 0},
    ):
        with pytest.raises(ValueError):
            HttpOptions(**bad)


# Ids that are dot segments or hold what a path reserves: each must reach its own tracker.
ODD_IDS = ("..", ".", "a/b", "../x", "q?token=x", "h#1", "50%", "%2E%2E", " sp ")


async def test_every_id_reaches_its_own_tracker_whatever_it_holds(rasa: Rasa) -> None:
    # `..` was asked for as `/tracker` and `.` as `/conversations/tracker`: a client
    # removes dot segments. Each id is one path segment, percent-encoded.
    for cid in ODD_IDS:
        rasa.documents[cid] = _with_id(DOCUMENTS[IDS[0]], cid)
    chunks = await read(rasa.url, HttpOptions(conversations=ODD_IDS))
    assert [c.ends for c in chunks] == list(ODD_IDS)
    asked = [unquote(path.split("/")[2]) for path, _, _ in rasa.requests]
    assert sorted(asked) == sorted(ODD_IDS)
    assert all(len(path.split("/")) == 4 for path, _, _ in rasa.requests)


def _with_id(document: bytes, cid: str) -> bytes:
    doc = json.loads(document)
    doc["sender_id"] = cid
    for row in doc["events"]:
        row.pop("conversation_id", None)
        row.pop("sender_id", None)
    return json.dumps(doc).encode()


async def test_a_tracker_of_another_conversation_is_reported_not_judged(rasa: Rasa) -> None:
    rasa.answer_with = {IDS[1]: IDS[2]}
    async with open_feed(rasa.url, http=HttpOptions(conversations=IDS[:3])) as feed:
        chunks = [chunk async for chunk in feed]
        unread = feed.unread
    # IDS[1] is not judged under IDS[2]'s events, and IDS[2] is judged once.
    assert [c.ends for c in chunks] == [IDS[0], IDS[2]]
    why = f"the server answered with the tracker of another conversation, `{IDS[2]}`"
    assert unread == {IDS[1]: why}


# Three conversations whose every assertion passes: an exit status of 2 is
# then the unread one's alone.
PASSING = (IDS[0], IDS[3], IDS[6])


def cli_json(rasa: Rasa, *ids: str) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    args = ["check", str(SCENARIOS), "--events", rasa.url, "--results", str(RESULTS)]
    proc = cli(*args, "--format", "json", *(a for cid in ids for a in ("--conversation", cid)))
    return proc, json.loads(proc.stdout)


def test_the_cli_reports_a_conversation_it_could_not_read(rasa: Rasa) -> None:
    rasa.answer_with = {PASSING[1]: PASSING[2]}
    proc, report = cli_json(rasa, *PASSING)
    assert proc.returncode == 2, proc.stderr  # a conversation could not be judged
    assert [c["conversation_id"] for c in report["conversations"]] == [PASSING[0], PASSING[2]]
    why = f"the server answered with the tracker of another conversation, `{PASSING[2]}`"
    assert report["warnings"]["unread"] == {PASSING[1]: why}
    assert f"warning: conversation `{PASSING[1]}` could not be read: {why}" in proc.stderr


def _raw(answer: Any) -> type[BaseHTTPRequestHandler]:
    """A one-route server's handler whose answer a test writes byte by byte
    (``answer(handler)``)."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            with contextlib.suppress(OSError):
                answer(self)

    return Handler


async def test_a_server_that_trickles_its_body_is_cut_off_at_the_timeout() -> None:
    # One byte every 0.2 s: each read is within a 1 s timeout, the whole never is.
    body = DOCUMENTS[IDS[0]]

    def trickle(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        for byte in body:
            handler.wfile.write(bytes((byte,)))
            handler.wfile.flush()
            time.sleep(0.2)

    with http_server(_raw(trickle)) as url:
        started = time.monotonic()
        options = HttpOptions(conversations=IDS[:1], timeout=1.0, retries=0)
        with anyio.fail_after(10):
            async with open_feed(url, http=options) as feed:
                assert [chunk async for chunk in feed] == []
                unread = feed.unread
        assert time.monotonic() - started < 3
    assert unread == {IDS[0]: "no whole answer within 1 s (gave up after 1 attempt)"}


async def test_a_gzip_body_stops_being_inflated_at_the_size_limit() -> None:
    # 64 MiB of inflated text from 64 KiB on the wire, against a 1 MiB limit: what
    # is inflated is counted as it comes, never held whole.
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = b'{"sender_id": "c", "events": [' + b" " * (1 << 20)
    bomb = packer.compress(block) + b"".join(packer.compress(b" " * (1 << 20)) for _ in range(63))
    bomb += packer.flush()

    def gzip(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Encoding", "gzip")
        handler.send_header("Content-Length", str(len(bomb)))
        handler.end_headers()
        handler.wfile.write(bomb)

    with http_server(_raw(gzip)) as url:
        options = HttpOptions(conversations=("c",), max_document_bytes=1 << 20)
        tracemalloc.start()
        try:
            with anyio.fail_after(20):
                async with open_feed(url, http=options) as feed:
                    assert [chunk async for chunk in feed] == []
                    unread = feed.unread
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    why = "its tracker document is more than the 1048576-byte limit (stopped reading there)"
    assert unread == {"c": why}
    assert peak < 8 << 20, f"{peak} bytes at the peak"
