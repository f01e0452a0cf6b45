"""Memory: peak RSS and bytes of state per open conversation.

    python benchmarks/memory.py            # 1 conversation of 10³/10⁵/10⁶ events; 10³-10⁵ open;
                                           # 10⁵ finished, all kept or the last 10³
    python benchmarks/memory.py --quick    # tiny sizes (CI smoke run)

Each row runs in fresh subprocesses, so peaks never mix, and the feed is
generated lazily, one 64 KiB chunk at a time, so it never dominates memory:

* **peak RSS** (``resource.getrusage``), and its growth over the peak the
  process had reached before the measured events (after imports and a
  short warm-up run);
* **state per conversation**: heap bytes allocated and still alive after the
  events were applied (a garbage collection before and after), divided by
  the number of open conversations. Measured twice, in separate processes:

  - with ``tracemalloc`` (bytes requested by Python), where affordable:
    tracing makes decoding 10–16× slower, so rows with more than
    ``--traced-max`` events show "—";
  - with the C allocator's own count (glibc ``mallinfo2`` under
    ``PYTHONMALLOC=malloc``), for every row: no slowdown, and it includes
    the allocator's per-block overhead, so it reads a little higher.

Automatic garbage collection is off while feeding (see ``child``). Every
conversation stays open (no ``session_ended``) except in the two "finished"
rows, where each ends and the evaluator keeps the results of all of them or
of the last ``--keep`` only (``--keep-finished``; state per conversation is
then per finished conversation seen). Judged against the 30
assertions of ``_common.scenario()``, except one row with a scenario of
``--assertions`` (10,000: the 30 repeated) whose conversations all finish.
For contrast, two rows hold the same long conversation in PostHoc
(``_baselines.py``), which keeps every event.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import ctypes
import gc
import json
import os
import random
import resource
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

import mantle_stream as ms

from _baselines import PostHoc
from _common import SKIPPED_SHARE, _payload, machine, scenario, scenario_assertions

CHUNK = 64 * 1024
_LINE = (
    b'{"conversation_id":"%s","timestamp":1767261600.25,"metadata":%s,'
    b'"sequence":%d,"event_id":"%s-%d",%s,"user_id":null,"deployment_environment":null,'
    b'"session_id":null}\n'
)


def payload_pool(size: int = 4096, seed: int = 3) -> list[tuple[bytes, bytes]]:
    """Realistic payloads (``_common``'s mix, in the real format) as (metadata, JSON
    members) pairs, drawn from per line."""
    rng = random.Random(seed)
    pool = []
    for _ in range(size):
        payload, metadata = _payload(rng, SKIPPED_SHARE, 0.0)
        pool.append(
            (
                json.dumps(metadata).encode(),
                json.dumps(payload, separators=(",", ":"))[1:-1].encode(),
            )
        )
    return pool


def lazy_feed(
    conversations: int,
    events: int,
    pool: list[tuple[bytes, bytes]],
    seed: int = 5,
    end: bool = False,
) -> Iterator[bytes]:
    """Chunks of ``conversations`` × ``events`` lines; with ``end``, the last
    event of each conversation is ``session_ended``, otherwise none ends.

    Conversations follow each other (each opens with ``session_started``);
    only one chunk exists at a time.
    """
    rng = random.Random(seed)
    lines: list[bytes] = []
    size = 0
    for c in range(conversations):
        cid = f"conv-{c}".encode() if conversations > 1 else b"long"
        for start in range(0, events, 1024):
            batch = rng.choices(pool, k=min(1024, events - start))
            if start == 0:
                batch[0] = (b"null", b'"session_started":{}')
            if end and start + len(batch) == events:
                batch[-1] = (b"null", b'"session_ended":{}')
            for seq, (metadata, payload) in enumerate(batch, start):
                line = _LINE % (cid, metadata, seq, cid, seq, payload)
                lines.append(line)
                size += len(line)
                if size >= CHUNK:
                    yield b"".join(lines)
                    lines, size = [], 0
    if lines:
        yield b"".join(lines)


def _mallinfo() -> Callable[[], int] | None:
    """Bytes the C allocator has handed out and not had back (glibc only)."""

    class MallInfo2(ctypes.Structure):
        _fields_ = [
            (name, ctypes.c_size_t)
            for name in (
                "arena",
                "ordblks",
                "smblks",
                "hblks",
                "hblkhd",
                "usmblks",
                "fsmblks",
                "uordblks",
                "fordblks",
                "keepcost",
            )
        ]

    try:
        call = ctypes.CDLL(None).mallinfo2
    except (AttributeError, OSError):
        return None
    call.restype = MallInfo2

    def in_use() -> int:
        info = call()
        return int(info.uordblks + info.hblkhd)

    return in_use


def _max_rss() -> int:
    """Peak RSS in bytes (Linux reports KiB, macOS bytes)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def child(spec: dict[str, Any]) -> dict[str, Any]:
    """One measurement in this (fresh) process; see ``run_child``."""
    many = spec.get("assertions")
    # A big scenario repeats the 30 (each copy is compiled as its own assertion).
    scen = scenario(scenario_assertions() * (many // 30 - 1)) if many else scenario()
    pool = payload_pool()
    keep = spec.get("keep")
    make: Callable[[], Any] = {
        "mantle_stream": lambda: ms.Evaluator([scen], keep_finished=keep),
        "PostHoc": lambda: PostHoc(scen),
    }[spec["engine"]]
    # Warm up first: caches filled on first use (decoders, interned names,
    # compiled patterns) are not state of the conversations measured.
    warm = make()
    for part in lazy_feed(3, 700, pool, seed=1):
        warm.push_chunk(part)
    del warm, part
    target = make()
    measure: Callable[[], int] = lambda: 0  # noqa: E731 - rss mode measures no heap
    if spec["mode"] == "tracemalloc":
        tracemalloc.start()
        measure = lambda: tracemalloc.get_traced_memory()[0]  # noqa: E731
    elif spec["mode"] == "malloc":
        found = _mallinfo()
        assert found is not None and os.environ.get("PYTHONMALLOC") == "malloc"
        measure = found
    gc.collect()
    # Automatic collection walks every live machine again and again: with 10⁵
    # open conversations it takes two thirds of the run. Off while feeding,
    # it changes no figure here: a full collection precedes both heap
    # readings, and the one after feeding reports how much cyclic garbage the
    # peak could have held (``garbage``; normally about a hundred objects).
    gc.disable()
    rss_before = _max_rss()
    before = measure()
    t0 = time.perf_counter()
    ended = keep is not None or spec.get("ended", False)
    for part in lazy_feed(spec["conversations"], spec["events"], pool, end=ended):
        target.push_chunk(part)
    elapsed = time.perf_counter() - t0
    del part
    garbage = gc.collect()
    after = measure()
    if isinstance(target, ms.Evaluator):
        stats = target.statistics()
        assert stats.open == (0 if ended else spec["conversations"]), stats
        assert stats.events == spec["conversations"] * spec["events"], stats
    return {
        "rss_before": rss_before,
        "rss_peak": _max_rss(),
        "state": after - before,
        "seconds": elapsed,
        "garbage": garbage,
    }


def run_child(spec: dict[str, Any]) -> dict[str, Any]:
    env = dict(os.environ)
    if spec["mode"] == "malloc":
        env["PYTHONMALLOC"] = "malloc"  # every object through the C allocator it counts
        # Without per-thread caches: blocks parked there count as in use.
        env["GLIBC_TUNABLES"] = "glibc.malloc.tcache_count=0"
    else:
        env.pop("PYTHONMALLOC", None)
    done = subprocess.run(
        [sys.executable, __file__, "--child", json.dumps(spec)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        raise SystemExit(f"error: child {spec} failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _mib(n: float) -> str:
    return f"{n / 2**20:,.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--long",
        type=int,
        nargs="+",
        default=[1_000, 100_000, 1_000_000],
        help="lengths of the one long conversation",
    )
    parser.add_argument(
        "--open",
        type=int,
        nargs="+",
        default=[1_000, 10_000, 100_000],
        help="numbers of open conversations",
    )
    parser.add_argument(
        "--finished",
        type=int,
        default=100_000,
        help="finished conversations, kept all or only the last --keep",
    )
    parser.add_argument(
        "--keep", type=int, default=1_000, help="--keep-finished of the bounded finished row"
    )
    parser.add_argument(
        "--assertions", type=int, default=10_000, help="assertions of the big scenario's row"
    )
    parser.add_argument(
        "--big-conversations",
        type=int,
        default=200,
        help="finished conversations (20 events each) of the big scenario's row",
    )
    parser.add_argument("--few", type=int, default=4, help="events per open conversation")
    parser.add_argument(
        "--posthoc",
        type=int,
        nargs="+",
        default=[1_000, 100_000],
        help="lengths of the long conversation held by PostHoc",
    )
    parser.add_argument(
        "--traced-max",
        type=int,
        default=20_000,
        help="most events fed to a row measured with tracemalloc",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=2,
        help="measuring processes at once (each measures only itself)",
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes for a smoke run")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    if args.quick:
        args.long, args.open, args.posthoc, args.few = [100, 1_000], [100], [100], 4
        args.finished, args.keep = 300, 10
        args.assertions, args.big_conversations = 300, 20

    # (engine, conversations, events, extra spec keys, label)
    rows: list[tuple[str, int, int, dict[str, Any], str]] = (
        [("mantle_stream", 1, n, {}, f"1 conversation × {n:,} events") for n in args.long]
        + [
            ("mantle_stream", c, args.few, {}, f"{c:,} open conversations × {args.few} events")
            for c in args.open
        ]
        + [
            (
                "mantle_stream",
                args.finished,
                args.few,
                {"ended": True},
                f"{args.finished:,} finished, all kept",
            ),
            (
                "mantle_stream",
                args.finished,
                args.few,
                {"keep": args.keep},
                f"{args.finished:,} finished, last {args.keep:,} kept",
            ),
            (
                "mantle_stream",
                args.big_conversations,
                20,
                {"ended": True, "assertions": args.assertions},
                f"{args.big_conversations:,} finished × {args.assertions:,} assertions",
            ),
        ]
        + [("PostHoc", 1, n, {}, f"PostHoc: 1 conversation × {n:,} events") for n in args.posthoc]
    )
    has_malloc = _mallinfo() is not None
    specs: list[dict[str, Any]] = []
    for engine, conversations, events, extra, _ in rows:
        spec = {"engine": engine, "conversations": conversations, "events": events, **extra}
        specs.append({**spec, "mode": "rss"})
        if has_malloc:
            specs.append({**spec, "mode": "malloc"})
        if conversations * events <= args.traced_max:
            specs.append({**spec, "mode": "tracemalloc"})
    # Longest first, so the pool does not end waiting on one big child.
    specs.sort(key=lambda s: -s["conversations"] * s["events"])
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        done = dict(zip(map(json.dumps, specs), pool.map(run_child, specs), strict=True))

    def got(
        engine: str, conversations: int, events: int, extra: dict[str, Any], mode: str
    ) -> dict[str, Any] | None:
        return done.get(
            json.dumps(
                {
                    "engine": engine,
                    "conversations": conversations,
                    "events": events,
                    **extra,
                    "mode": mode,
                }
            )
        )

    print(
        f"memory: {len(scenario().assertions)} assertions, conversations left open unless "
        "finished, feed generated lazily in 64 KiB chunks; one fresh process per figure"
    )
    print(f"machine: {machine()}")
    print()
    print(
        f"| {'case':<42} | {'peak RSS MiB':>12} | {'RSS growth MiB':>14} | "
        f"{'state B/conv (tracemalloc)':>26} | {'state B/conv (malloc)':>21} |"
    )
    print(f"|{'-' * 44}|{'-' * 14}|{'-' * 16}|{'-' * 28}|{'-' * 23}|")
    for engine, conversations, events, extra, label in rows:
        rss = got(engine, conversations, events, extra, "rss")
        heap = got(engine, conversations, events, extra, "malloc")
        traced = got(engine, conversations, events, extra, "tracemalloc")
        assert rss is not None
        t = "—" if traced is None else f"{traced['state'] / conversations:,.0f}"
        h = "—" if heap is None else f"{heap['state'] / conversations:,.0f}"
        print(
            f"| {label:<42} | {_mib(rss['rss_peak']):>12} | "
            f"{_mib(rss['rss_peak'] - rss['rss_before']):>14} | {t:>26} | {h:>21} |"
        )
    most = max(r["garbage"] for r in done.values())
    print()
    print(
        f"(automatic garbage collection off while feeding; the collection after it found "
        f"at most {most:,} unreachable objects in any run)"
    )
    if not has_malloc:
        print("(no glibc mallinfo2 here: the malloc column needs Linux with glibc ≥ 2.33)")


if __name__ == "__main__":
    main()
