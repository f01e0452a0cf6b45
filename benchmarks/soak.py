"""Soak: ~a million events over many loopback connections, with duplicates and reordering.

    python benchmarks/soak.py                    # ~1,000,000 events over 32 connections
    python benchmarks/soak.py --quick            # ~20,000 events (smoke run, < 20 s)
    python benchmarks/soak.py --events 200000 --connections 8 --reorder-window 0
    python benchmarks/soak.py --long-lived       # 1,000,000 conversations, --state, --jsonl

Starts ``mantle-stream check SCENARIO --events tcp://127.0.0.1:0 --format json
--linger 1 --reorder-window 8`` as a subprocess and streams the generated feed
of ``_common.py`` into it, each conversation over one connection (several
conversations interleaved per connection), as an at-least-once broker would:

* **duplicates**: about ``--dup-rate`` (2 %) of the lines are sent twice, the
  copy 0-3 lines of its conversation later;
* **local reordering**: about ``--swap-rate`` (2 %) of the adjacent pairs of a
  conversation's events are swapped, with a partner at distance 1-3.

It then compares every verdict of the JSON report with the offline result
(an in-process ``Evaluator`` over the clean, in-order feed) and prints
events/s, the peak RSS of the subprocess (``VmHWM`` polled from
``/proc/PID/status``, checked against ``wait4``'s ``ru_maxrss``) and the
mismatches. Exit status: 0 every verdict equals the offline one, 1 some do
not, 2 the run itself failed.

With ``--reorder-window 0`` the option is not passed (nor when the CLI
does not know it yet: then it is dropped with a warning). Without
de-duplication and a reorder window in the engine, mismatches are expected.

``--long-lived`` runs what a monitor running for weeks sees instead:
``--conversations`` (a million) short conversations through one listener
started with ``--state`` (a checkpoint every ``--state-interval`` s) and
``--jsonl``, and the live default ``--keep-finished`` (10,000). It prints the
listener's RSS after 10⁴, 10⁵ and 10⁶ conversations were sent (it must stay
flat once 10,000 are kept), the time a probe conversation (one settling
event, every 50 ms on its own connection, from its own process) waits for
its stop message —
the worst is the longest the event loop was busy elsewhere, checkpoints
included — and compares every verdict in the JSONL with the offline one.
The scenario's assertions settle only at each conversation's end, so no
conversation is stopped early and the offline verdicts apply unchanged.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

import mantle_stream as ms

from _common import conversation_lines, machine, scenario_assertions

LISTENING = re.compile(r"mantle-stream: listening on (tcp://(\S+):(\d+))")
LINGER = 1.0


# --------------------------------------------------------------------------
# The feed: clean per conversation, then perturbed per connection
# --------------------------------------------------------------------------


def perturb(
    lines: list[bytes], rng: random.Random, dup_rate: float, swap_rate: float, distance: int = 3
) -> tuple[list[bytes], int, int]:
    """One conversation's lines with local swaps and repeated lines: (lines, swaps, dups)."""
    lines = list(lines)
    swaps = 0
    touched: set[int] = set()
    for i in range(len(lines) - 1):
        if i in touched or rng.random() >= swap_rate:
            continue
        j = i + rng.randint(1, distance)
        if j >= len(lines) or j in touched:
            continue
        lines[i], lines[j] = lines[j], lines[i]
        touched.update((i, j))
        swaps += 1
    out: list[bytes] = []
    later: list[tuple[int, bytes]] = []  # (lines still to go, copy)
    dups = 0
    for line in lines:
        out.append(line)
        due = [copy for wait, copy in later if wait == 0]
        later = [(wait - 1, copy) for wait, copy in later if wait > 0]
        out.extend(due)
        if rng.random() < dup_rate:
            dups += 1
            wait = rng.randint(0, distance)
            if wait == 0:
                out.append(line)
            else:
                later.append((wait - 1, line))
    out.extend(copy for _, copy in later)
    return out, swaps, dups


def interleave(streams: list[list[bytes]], rng: random.Random, width: int) -> Iterator[bytes]:
    """The lines of several conversations, ``width`` of them running at once."""
    waiting = list(reversed(streams))
    running: list[tuple[list[bytes], int]] = []
    while waiting or running:
        while waiting and len(running) < width:
            running.append((waiting.pop(), 0))
        k = rng.randrange(len(running))
        lines, at = running[k]
        yield lines[at]
        if at + 1 == len(lines):
            running.pop(k)
        else:
            running[k] = (lines, at + 1)


@dataclass
class Feed:
    conversations: int
    events: int = 0  # clean events
    lines: int = 0  # lines sent (duplicates included)
    bytes: int = 0
    swaps: int = 0
    dups: int = 0
    files: list[Path] = field(default_factory=list)


def generate(args: argparse.Namespace, workdir: Path, offline: ms.Evaluator) -> Feed:
    """Write one file of lines per connection; the offline evaluator sees the clean feed."""
    conversations = max(1, args.events // args.per_conversation)
    feed = Feed(conversations)
    for c in range(args.connections):
        streams = []
        for i in range(c, conversations, args.connections):
            rng = random.Random(f"{args.seed}:{i}")
            clean = list(conversation_lines(f"conv-{i}", args.per_conversation, rng))
            offline.push_chunk(b"\n".join(clean) + b"\n")
            feed.events += len(clean)
            sent, swaps, dups = perturb(clean, rng, args.dup_rate, args.swap_rate)
            feed.swaps += swaps
            feed.dups += dups
            streams.append(sent)
        path = workdir / f"connection-{c:03d}.jsonl"
        rng = random.Random(f"{args.seed}:connection:{c}")
        with path.open("wb") as fh:
            for line in interleave(streams, rng, args.interleave):
                fh.write(line + b"\n")
                feed.lines += 1
        feed.bytes += path.stat().st_size
        feed.files.append(path)
    offline.finish_all()
    return feed


# --------------------------------------------------------------------------
# The subprocess
# --------------------------------------------------------------------------


def command() -> list[str]:
    """``mantle-stream`` of this interpreter (not a shim, so its PID is the engine's)."""
    script = Path(sys.executable).with_name("mantle-stream")
    if script.exists():
        return [str(script)]
    found = shutil.which("mantle-stream")
    return [found] if found else [sys.executable, "-m", "mantle_stream"]


def _vm(pid: int, key: str) -> int:
    """A ``/proc/PID/status`` figure in KiB (0 once the process is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


class Server:
    """``mantle-stream check`` listening on a free loopback port; peak RSS watched."""

    def __init__(
        self, scenario_path: Path, reorder_window: int, argv: list[str] | None = None
    ) -> None:
        if argv is None:
            argv = [
                *command(),
                "check",
                str(scenario_path),
                "--events",
                "tcp://127.0.0.1:0",
                "--format",
                "json",
                "--linger",
                str(LINGER),
            ]
            if reorder_window:
                argv += ["--reorder-window", str(reorder_window)]
        self.argv = argv
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.stderr: list[str] = []
        self.stdout = b""
        self.vm_hwm_kib = 0
        self.ru_maxrss_kib = 0
        self.returncode: int | None = None
        self._listening = threading.Event()
        self.address: tuple[str, int] | None = None
        self._done = threading.Event()
        threads = [
            threading.Thread(target=self._read_stderr, daemon=True),
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=self._watch_rss, daemon=True),
        ]
        for t in threads:
            t.start()
        self._threads = threads

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.stderr.append(line)
            found = LISTENING.search(line)
            if found and self.address is None:
                self.address = (found.group(2), int(found.group(3)))
                self._listening.set()
        self._listening.set()  # ended without listening: wake the waiter

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        self.stdout = self.proc.stdout.read()

    def _watch_rss(self) -> None:
        while not self._done.is_set():
            self.vm_hwm_kib = max(self.vm_hwm_kib, _vm(self.proc.pid, "VmHWM:"))
            time.sleep(0.05)

    def wait_listening(self, timeout: float) -> tuple[str, int] | None:
        self._listening.wait(timeout)
        return self.address

    def wait(self, timeout: float) -> int:
        """Reap the process with wait4 (for ``ru_maxrss``); kill it after ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            pid, status, usage = os.wait4(self.proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                self.proc.kill()
                pid, status, usage = os.wait4(self.proc.pid, 0)
                self.stderr.append(f"soak: killed after {timeout:.0f} s")
                break
            time.sleep(0.02)
        self._done.set()
        self.returncode = self.proc.returncode = os.waitstatus_to_exitcode(status)
        self.ru_maxrss_kib = usage.ru_maxrss  # KiB on Linux
        for t in self._threads:
            t.join(timeout=30)
        return self.returncode

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self._done.set()


def start_server(scenario_path: Path, reorder_window: int) -> tuple[Server, tuple[str, int]]:
    server = Server(scenario_path, reorder_window)
    address = server.wait_listening(30)
    if address is not None:
        return server, address
    server.wait(10)
    text = "\n".join(server.stderr)
    if reorder_window and "--reorder-window" in text and "unrecognized" in text:
        print(
            "soak: warning: this mantle-stream has no --reorder-window yet; running without",
            file=sys.stderr,
        )
        return start_server(scenario_path, 0)
    print(
        f"soak: error: mantle-stream did not start listening (exit {server.returncode}):\n{text}",
        file=sys.stderr,
    )
    raise SystemExit(2)


# --------------------------------------------------------------------------
# The clients
# --------------------------------------------------------------------------


@dataclass
class Connection:
    path: Path
    sent_at: float = 0.0  # when its last byte was handed to the kernel
    closed_at: float = 0.0  # when the server closed it: every line consumed
    replies: Counter[str] = field(default_factory=Counter)
    error: str | None = None


def send_one(address: tuple[str, int], conn: Connection, start: threading.Event) -> None:
    try:
        sock = socket.create_connection(address, timeout=60)
    except OSError as exc:
        conn.error = f"connect: {exc}"
        return
    reader = threading.Thread(target=read_replies, args=(sock, conn), daemon=True)
    reader.start()
    start.wait()
    try:
        with conn.path.open("rb") as fh:
            sock.sendfile(fh)
        conn.sent_at = time.perf_counter()
        sock.shutdown(socket.SHUT_WR)
    except OSError as exc:
        conn.error = f"send: {exc}"
    reader.join(timeout=600)
    sock.close()


def read_replies(sock: socket.socket, conn: Connection) -> None:
    """Stop messages (and error lines) the server writes back; EOF when it is done."""
    pending = b""
    try:
        while True:
            data = sock.recv(1 << 16)
            if not data:
                break
            pending += data
            *lines, pending = pending.split(b"\n")
            for line in lines:
                try:
                    kind = json.loads(line).get("type", "?")
                except (ValueError, AttributeError):
                    kind = "unreadable"
                conn.replies[str(kind)] += 1
    except OSError as exc:
        if conn.error is None:
            conn.error = f"receive: {exc}"
    conn.closed_at = time.perf_counter()


# --------------------------------------------------------------------------
# Comparison
# --------------------------------------------------------------------------


@dataclass
class Comparison:
    conversations: int = 0
    assertions: int = 0
    verdict_mismatches: int = 0
    conversation_mismatches: int = 0
    missing: int = 0  # judged offline, absent from the report
    extra: int = 0  # in the report only
    detail_mismatches: int = 0  # same verdict, other decided_at or reason
    event_count_mismatches: int = 0
    by_kind: Counter[str] = field(default_factory=Counter)
    offline_verdicts: Counter[str] = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)


def compare(report: dict[str, Any], offline: ms.Evaluator) -> Comparison:
    got = {c["conversation_id"]: c for c in report.get("conversations", [])}
    out = Comparison()
    for expected in offline.results():
        cid = expected.conversation_id
        out.conversations += 1
        conv = got.pop(cid, None)
        if conv is None:
            out.missing += 1
            out.verdict_mismatches += len(expected.assertions)
            if len(out.examples) < 5:
                out.examples.append(f"{cid}: missing from the report")
            continue
        if conv.get("verdict") != expected.verdict:
            out.conversation_mismatches += 1
        if conv.get("events") != expected.events:
            out.event_count_mismatches += 1
        assertions = {a["index"]: a for a in conv.get("assertions", [])}
        for a in expected.assertions:
            out.assertions += 1
            out.offline_verdicts[a.verdict] += 1
            mine = assertions.get(a.index)
            if mine is None or mine.get("verdict") != a.verdict:
                out.verdict_mismatches += 1
                out.by_kind[a.kind] += 1
                if len(out.examples) < 5:
                    verdict = None if mine is None else mine.get("verdict")
                    out.examples.append(
                        f"{cid} #{a.index} {a.kind}: {verdict}, offline {a.verdict} ({a.reason})"
                    )
            elif (mine.get("decided_at"), mine.get("reason")) != (a.decided_at, a.reason):
                out.detail_mismatches += 1
    out.extra = len(got)
    return out


# --------------------------------------------------------------------------
# Long-lived mode: a million conversations through one listener
# --------------------------------------------------------------------------

#: Assertions that only settle at a conversation's end (none fails early and
#: the last passes only then), so no conversation is stopped early and every
#: verdict is the offline one; the probe's settles at once.
LONG_LIVED_ASSERTIONS: list[dict[str, Any]] = [
    {"skill_activated": {"skill_id": "card_replace"}},
    {"memory_was_set": [{"name": "card_replace.replacement_reason", "value": "damaged"}]},
    {"tool_executed": {"tool_name": "check_balance", "source": "local"}},
    {"bot_uttered": {"utter_name": "utter_goodbye"}},
    {"memory_was_not_set": [{"name": "soak.never_set"}]},
    {"bot_did_not_utter": {"utter_name": "utter_probe"}},
]
MILESTONES = (10_000, 100_000, 1_000_000)
PROBE_EVERY = 0.05  # seconds between two probe conversations


def probe(address: tuple[str, int], done: Any, out: Any) -> None:
    """A conversation whose one event settles it, every PROBE_EVERY s: the time to
    its stop message is how long the event loop was busy elsewhere. Run in its own
    process: among the senders' threads it would wait for this process's GIL too."""
    waits: list[float] = []
    try:
        sock = socket.create_connection(address, timeout=120)
        sock.settimeout(120)
        reader = sock.makefile("rb")
        n = 0
        meta = json.dumps(json.dumps({"utter_action": "utter_probe"})).encode()
        while not done.is_set():
            cid = f"probe-{n}".encode()
            started = time.perf_counter()
            sock.sendall(
                b'{"conversation_id":"%s","sequence":0,"metadata":%s,'
                b'"bot":{"text":"probe","data":null}}\n' % (cid, meta)
            )
            reader.readline()
            waits.append(time.perf_counter() - started)
            sock.sendall(
                b'{"conversation_id":"%s","sequence":1,"metadata":null,"session_ended":{}}\n' % cid
            )
            n += 1
            done.wait(PROBE_EVERY)
        sock.close()
        out.send((waits, None))
    except OSError as exc:
        out.send((waits, f"probe: {exc}"))


def long_lived(args: argparse.Namespace) -> int:
    """``--long-lived``: see the module docstring."""
    total = args.conversations
    with tempfile.TemporaryDirectory(prefix="mantle-soak-") as tmp:
        workdir = Path(tmp)
        scenario_path = workdir / "soak.yml"
        scenario_path.write_text(
            json.dumps(
                {
                    "scenario": {
                        "name": "soak",
                        "simulation_context": "soak",
                        "goals": {"assertions": LONG_LIVED_ASSERTIONS},
                    }
                }
            )
        )
        scen = ms.load_scenario_file(scenario_path)
        # Conversations are drawn from templates (their id substituted), each
        # judged once offline: the expected verdicts of conversation i are
        # those of template i % templates.
        templates: list[bytes] = []
        expected: list[list[str]] = []
        for t in range(args.templates):
            rng = random.Random(f"{args.seed}:template:{t}")
            lines = list(conversation_lines("@CID@", args.per_conversation, rng))
            offline = ms.Evaluator([scen])
            offline.push_chunk(b"\n".join(lines) + b"\n")
            offline.finish_all()
            [result] = offline.results()
            expected.append([a.verdict for a in result.assertions])
            templates.append(b"\n".join(lines) + b"\n")
        jsonl = workdir / "verdicts.jsonl"
        state = workdir / "state.json"
        argv = [
            *command(),
            "check",
            str(scenario_path),
            "--events",
            "tcp://127.0.0.1:0",
            "--format",
            "json",
            "--linger",
            str(LINGER),
            "--jsonl",
            str(jsonl),
            "--state",
            str(state),
            "--state-interval",
            str(args.state_interval),
        ]
        print(
            f"soak --long-lived: {total:,} conversations × {args.per_conversation} events "
            f"over {args.connections} connections ({args.templates:,} templates judged "
            f"offline), {len(LONG_LIVED_ASSERTIONS)} assertions"
        )
        print(f"  machine: {machine()}")
        print(f"  engine: {' '.join(argv[1:])}")
        server = Server(scenario_path, 0, argv=argv)
        address = server.wait_listening(30)
        if address is None:
            server.wait(10)
            print(
                "soak: error: mantle-stream did not start listening:\n" + "\n".join(server.stderr),
                file=sys.stderr,
            )
            return 2
        sent = [0] * args.connections  # conversations fully sent, per connection
        errors: list[str] = []

        def client(c: int) -> None:
            try:
                sock = socket.create_connection(address, timeout=120)
            except OSError as exc:
                errors.append(f"connect: {exc}")
                return
            conn = Connection(Path(f"connection-{c}"))
            reader = threading.Thread(target=read_replies, args=(sock, conn), daemon=True)
            reader.start()
            try:
                batch: list[bytes] = []
                for i in range(c, total, args.connections):
                    batch.append(
                        templates[i % args.templates].replace(b"@CID@", f"conv-{i}".encode())
                    )
                    if len(batch) == 64:
                        sock.sendall(b"".join(batch))
                        sent[c] += len(batch)
                        batch = []
                sock.sendall(b"".join(batch))
                sent[c] += len(batch)
                sock.shutdown(socket.SHUT_WR)
            except OSError as exc:
                errors.append(f"send: {exc}")
            reader.join(timeout=600)
            sock.close()
            if conn.replies:
                errors.append(f"connection {c}: unexpected replies {dict(conn.replies)}")

        done = threading.Event()

        rss: dict[int, int] = {}
        milestones = [m for m in MILESTONES if m < total] + [total]

        def watch() -> None:
            while not done.is_set():
                finished = sum(sent)
                for m in milestones:
                    if m not in rss and finished >= m:
                        rss[m] = _vm(server.proc.pid, "VmRSS:")
                time.sleep(0.05)

        # Forked before any thread of this process starts.
        context = multiprocessing.get_context("fork")
        probe_done = context.Event()
        results, probe_out = context.Pipe(duplex=False)
        prober = context.Process(target=probe, args=(address, probe_done, probe_out), daemon=True)
        prober.start()
        helpers = [threading.Thread(target=watch, daemon=True)]
        clients = [
            threading.Thread(target=client, args=(c,), daemon=True) for c in range(args.connections)
        ]
        started = time.perf_counter()
        try:
            for t in helpers + clients:
                t.start()
            for t in clients:
                t.join(timeout=args.timeout)
            consumed = time.perf_counter() - started
            time.sleep(0.2)  # the last milestone and probes
            done.set()
            probe_done.set()
            for t in helpers:
                t.join(timeout=60)
            waits, probe_error = results.recv() if results.poll(60) else ([], "probe: no answer")
            if probe_error:
                errors.append(probe_error)
            prober.join(timeout=10)
            code = server.wait(args.timeout)
        finally:
            done.set()
            probe_done.set()
            server.kill()
        print(
            f"  {sum(sent):,} conversations ({sum(sent) * args.per_conversation:,} events) "
            f"consumed in {consumed:.1f} s: {sum(sent) / consumed:,.0f} conversations/s; "
            f"exit status {code}"
        )
        for m in milestones:
            if m in rss:
                print(f"  RSS after {m:>9,} conversations sent: {rss[m] / 1024:7.1f} MiB")
        print(f"  peak RSS {server.ru_maxrss_kib / 1024:,.1f} MiB (wait4 ru_maxrss)")
        if waits:
            waits.sort()
            print(
                f"  probe (event loop busy elsewhere), {len(waits):,} probes with a checkpoint "
                f"every {args.state_interval:g} s: median {statistics.median(waits) * 1e3:.2f}"
                f" ms, p99 {waits[int(len(waits) * 0.99)] * 1e3:.2f} ms, worst "
                f"{waits[-1] * 1e3:.1f} ms"
            )
        for line in errors[:5]:
            print(f"  error: {line}")
        for line in [s for s in server.stderr if not LISTENING.search(s)][:10]:
            print(f"  mantle-stream: {line}")
        # Every conversation's verdicts in the JSONL, one by one, against its template's.
        seen = bytearray(total)
        mismatches = other = 0
        examples: list[str] = []
        with jsonl.open("rb") as fh:
            for raw in fh:
                record = json.loads(raw)
                cid = record["conversation_id"]
                if not cid.startswith("conv-"):
                    other += 1
                    continue
                i = int(cid[5:])
                seen[i] += 1
                want = expected[i % args.templates][record["index"]]
                if record["verdict"] != want:
                    mismatches += 1
                    if len(examples) < 5:
                        examples.append(
                            f"{cid} #{record['index']}: {record['verdict']}, offline {want}"
                        )
        incomplete = sum(1 for n in seen if n != len(LONG_LIVED_ASSERTIONS))
        print(
            f"  JSONL: {mismatches:,} verdicts differ from the offline ones; {incomplete:,} "
            f"conversations without exactly {len(LONG_LIVED_ASSERTIONS)} verdicts; "
            f"{other:,} probe verdicts"
        )
        for line in examples:
            print(f"    e.g. {line}")
        ok = not (mismatches or incomplete or errors or code not in (0, 1))
        print(
            "soak: OK: every verdict in the JSONL equals the offline result"
            if ok
            else "soak: MISMATCH"
        )
        return 0 if ok else 1


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000, help="clean events in all")
    parser.add_argument("--quick", action="store_true", help="~20,000 events: a smoke run")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument(
        "--per-conversation",
        type=int,
        default=None,
        help="events per conversation (default: 100; 8 with --long-lived)",
    )
    parser.add_argument(
        "--interleave",
        type=int,
        default=4,
        help="conversations running at once on one connection (default: 4)",
    )
    parser.add_argument("--dup-rate", type=float, default=0.02)
    parser.add_argument("--swap-rate", type=float, default=0.02)
    parser.add_argument(
        "--reorder-window", type=int, default=8, help="passed to mantle-stream (0: not passed)"
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--timeout", type=float, default=900, help="seconds before the subprocess is killed"
    )
    parser.add_argument(
        "--long-lived",
        action="store_true",
        help="--conversations through one listener with --state and --jsonl",
    )
    parser.add_argument(
        "--conversations",
        type=int,
        default=1_000_000,
        help="with --long-lived (default: 1,000,000; 20,000 with --quick)",
    )
    parser.add_argument(
        "--templates",
        type=int,
        default=1000,
        help="with --long-lived: distinct conversations, each judged offline",
    )
    parser.add_argument(
        "--state-interval",
        type=float,
        default=1.0,
        help="with --long-lived: seconds between checkpoints",
    )
    args = parser.parse_args()
    if args.per_conversation is None:
        args.per_conversation = 8 if args.long_lived else 100
    if args.long_lived:
        if args.quick:
            args.conversations = 20_000
        return long_lived(args)
    if args.quick:
        args.events = 20_000

    with tempfile.TemporaryDirectory(prefix="mantle-soak-") as tmp:
        workdir = Path(tmp)
        scenario_path = workdir / "bench.yml"
        body = {
            "scenario": {
                "name": "bench",
                "simulation_context": "soak",
                "goals": {"assertions": scenario_assertions()},
            }
        }
        scenario_path.write_text(json.dumps(body, indent=1))  # JSON is YAML
        offline = ms.Evaluator([ms.load_scenario_file(scenario_path)])

        t0 = time.perf_counter()
        feed = generate(args, workdir, offline)
        generated = time.perf_counter() - t0
        print(
            f"soak: {feed.events:,} events ({feed.conversations:,} conversations x "
            f"{args.per_conversation}) over {args.connections} connections, "
            f"{args.interleave} conversations at once on each"
        )
        print(
            f"  injected: {feed.dups:,} duplicate lines ({feed.dups / feed.events:.1%}), "
            f"{feed.swaps:,} swapped pairs ({feed.swaps / feed.events:.1%}); "
            f"{feed.lines:,} lines, {feed.bytes / 1e6:,.1f} MB"
        )
        print(f"  generated in {generated:.1f} s (offline verdicts included)")
        print(f"  machine: {machine()}")

        server, address = start_server(scenario_path, args.reorder_window)
        print(f"  engine: {' '.join(server.argv[1:])}")
        print(f"  listening on {address[0]}:{address[1]} (pid {server.proc.pid})")
        conns = [Connection(path) for path in feed.files]
        go = threading.Event()
        senders = [
            threading.Thread(target=send_one, args=(address, c, go), daemon=True) for c in conns
        ]
        try:
            for t in senders:
                t.start()
            time.sleep(0.2)  # every client connected and its reader running
            started = time.perf_counter()
            go.set()
            for t in senders:
                t.join(timeout=args.timeout)
            code = server.wait(args.timeout)
        finally:
            server.kill()
        ended = time.perf_counter()

        errors = [f"{c.path.name}: {c.error}" for c in conns if c.error]
        sent = max((c.sent_at for c in conns), default=started) - started
        consumed = max((c.closed_at for c in conns), default=started) - started
        replies: Counter[str] = Counter()
        for c in conns:
            replies.update(c.replies)
        print(
            f"  sent {feed.lines:,} lines in {sent:.1f} s; the engine consumed them in "
            f"{consumed:.1f} s: {feed.lines / consumed:,.0f} lines/s, "
            f"{feed.events / consumed:,.0f} events/s"
        )
        print(
            f"  run ended {ended - started:.1f} s after the first byte (linger {LINGER:g} s, "
            f"then the report: {len(server.stdout) / 1e6:,.1f} MB); exit status {code}"
        )
        print(
            f"  peak RSS of mantle-stream: {server.vm_hwm_kib / 1024:,.1f} MiB (VmHWM polled), "
            f"{server.ru_maxrss_kib / 1024:,.1f} MiB (wait4 ru_maxrss)"
        )
        print(
            f"  replies on the sockets: "
            f"{', '.join(f'{n:,} {k}' for k, n in sorted(replies.items())) or 'none'}"
        )
        for line in errors[:5]:
            print(f"  client error: {line}")
        noise = [line for line in server.stderr if not LISTENING.search(line)]
        for line in noise[:10]:
            print(f"  mantle-stream: {line}")
        if len(noise) > 10:
            print(f"  ... {len(noise) - 10} more stderr lines")

        try:
            report = msgspec.json.decode(server.stdout)
        except msgspec.DecodeError:
            print("soak: error: no JSON report on mantle-stream's standard output")
            return 2
        result = compare(report, offline)
        summary = report.get("summary", {})
        print(f"  report: {summary}")
        print(
            f"  compared {result.assertions:,} verdicts of {result.conversations:,} "
            f"conversations with the offline run: {result.verdict_mismatches:,} mismatches "
            f"({result.conversation_mismatches:,} conversation verdicts, {result.missing:,} "
            f"missing, {result.extra:,} extra); same verdict but other decided_at/reason: "
            f"{result.detail_mismatches:,}; other event counts: "
            f"{result.event_count_mismatches:,}"
        )
        print(
            "  offline verdicts: "
            + ", ".join(f"{n:,} {v}" for v, n in result.offline_verdicts.most_common())
        )
        if result.by_kind:
            print(
                "  mismatches by assertion kind: "
                + ", ".join(f"{k} {n:,}" for k, n in result.by_kind.most_common())
            )
        for line in result.examples:
            print(f"    e.g. {line}")
        ok = not (result.verdict_mismatches or result.extra or result.conversation_mismatches)
        print(
            "soak: OK: every verdict equals the offline result"
            if ok
            else "soak: MISMATCH: verdicts differ from the offline result"
        )
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
