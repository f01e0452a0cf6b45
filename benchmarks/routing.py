"""Routing: throughput with 30 assertions vs the same 30 plus 1,000 about things never seen.

    python benchmarks/routing.py            # 500 conversations × 200 events
    python benchmarks/routing.py --quick    # tiny sizes (CI smoke run)

The extra assertions name skills, ordered blocks, tools, memory keys and
responses that the feed never mentions. The engine indexes machines by event
kind and key, so no event of the feed is ever routed to them; what they can
still cost is per *conversation*: a machine each when a conversation opens,
and a verdict each (``finish()``) when it ends. A second feed with ten times
longer conversations separates the two: per-conversation costs are spread
over ten times as many events there.
"""

from __future__ import annotations

import argparse
import time
from functools import partial
from typing import Any

import mantle_stream as ms
from mantle_stream.core.assertions import lifecycle

from _common import best_after, best_of, chunks, feed, machine, scenario

# Every lifecycle kind, as the assertion family lists them.
SKILL_KINDS = list(lifecycle.SKILL_KINDS)
BLOCK_KINDS = list(lifecycle.BLOCK_KINDS)


def unused_assertion(i: int) -> dict[str, Any]:
    """Assertion ``i`` of a cycle through every kind that the engine routes by key."""
    skill, tool, key = f"unused_skill_{i}", f"unused_tool_{i}", f"unused_{i}.slot"
    kinds = len(SKILL_KINDS) + len(BLOCK_KINDS)
    which = i % (kinds + 8)
    if which < len(SKILL_KINDS):
        return {SKILL_KINDS[which]: {"skill_id": skill}}
    if which < kinds:
        return {BLOCK_KINDS[which - len(SKILL_KINDS)]: {"skill_id": skill, "block_id": "main"}}
    others: list[dict[str, Any]] = [
        {"tool_executed": {"tool_name": tool, "source": "local"}},
        {"tool_executed": {"tool_name": tool, "source": "mcp", "mcp_server": "banking"}},
        {"memory_was_set": [{"name": key, "value": i}]},
        {"memory_was_not_set": [{"name": key}]},
        {"memory_was_cleared": [{"name": key}]},
        {"bot_uttered": {"utter_name": f"utter_unused_{i}"}},
        {"bot_did_not_utter": {"utter_name": f"utter_unused_{i}"}},
        {
            "sequencing": [
                {"skill_activated": {"skill_id": skill}},
                {"memory_was_set": key},
                {"tool_executed": {"tool_name": tool, "source": "local"}},
            ]
        },
    ]
    return others[which - kinds]


def unused_assertions(count: int) -> list[dict[str, Any]]:
    """``count`` assertions about ids the feed never mentions."""
    return [unused_assertion(i) for i in range(count)]


def judge(scen: ms.Scenario, parts: list[bytes]) -> None:
    evaluator = ms.Evaluator([scen])
    for part in parts:
        evaluator.push_chunk(part)
    evaluator.finish_all()


def split_first(data: bytes) -> tuple[list[bytes], list[bytes]]:
    """The feed as chunks of every conversation's first event, and of the events
    after it up to (not including) its ``session_ended``."""
    first, middle = [], []
    for line in data.splitlines(keepends=True):
        if b'"sequence":0,' in line:
            first.append(line)
        elif b'"session_ended"' not in line:
            middle.append(line)
    return chunks(b"".join(first)), chunks(b"".join(middle))


def lifecycle(scen: ms.Scenario, count: int, repeat: int) -> tuple[float, float]:
    """µs to open a conversation, and to end it with every assertion still pending."""

    def lines(payload: str, seq: int) -> list[bytes]:
        return chunks(
            b"".join(
                b'{"conversation_id":"c-%d","sequence":%d,%s}\n' % (i, seq, payload.encode())
                for i in range(count)
            )
        )

    opens, ends = lines('"session_started":{}', 0), lines('"session_ended":{}', 1)
    best_open = best_end = float("inf")
    for _ in range(repeat):
        evaluator = ms.Evaluator([scen])
        t0 = time.perf_counter()
        for part in opens:
            evaluator.push_chunk(part)
        t1 = time.perf_counter()
        for part in ends:
            evaluator.push_chunk(part)
        t2 = time.perf_counter()
        best_open, best_end = min(best_open, t1 - t0), min(best_end, t2 - t1)
    return best_open / count * 1e6, best_end / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--conversations", type=int, default=500)
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--extra", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="tiny sizes for a smoke run")
    args = parser.parse_args()
    if args.quick:
        args.conversations, args.events, args.extra, args.repeat = 20, 50, 100, 1

    base = scenario()
    loaded = scenario(unused_assertions(args.extra))
    # Same number of events, conversations ten times as long.
    feeds = [
        (args.conversations, args.events),
        (max(1, args.conversations // 10), args.events * 10),
    ]

    results = []
    for conversations, events in feeds:
        data = feed(conversations, events)
        parts = chunks(data)
        # Alternate, so a disturbance of the machine hits both alike.
        plain = loaded_s = float("inf")
        for _ in range(args.repeat):
            plain = min(plain, best_of(partial(judge, base, parts), 1))
            loaded_s = min(loaded_s, best_of(partial(judge, loaded, parts), 1))
        results.append(
            (
                f"{conversations:,} convs × {events:,} events",
                conversations * events,
                plain,
                loaded_s,
            )
        )
    # The per-event cost alone: conversations are opened before the clock starts
    # and never ended, so their one-off costs (above) are left out.
    conversations, events = feeds[0]
    opening, middle = split_first(feed(conversations, events))
    plain = loaded_s = float("inf")
    for _ in range(args.repeat):
        plain = min(plain, best_after(base, opening, middle, 1))
        loaded_s = min(loaded_s, best_after(loaded, opening, middle, 1))
    results.append(("  same, events between ends", conversations * (events - 2), plain, loaded_s))
    short = 200 if args.quick else 500
    per_conv = [lifecycle(s, short, args.repeat) for s in (base, loaded)]

    print(
        f"routing: {len(base.assertions)} assertions vs {len(loaded.assertions)} "
        f"({args.extra:,} about skills, blocks, tools, memory keys and responses "
        "the feed never mentions)"
    )
    print(f"machine: {machine()}")
    print()
    print(
        f"| {'feed':<28} | {'assertions':>10} | {'events/s':>12} | {'µs/event':>9} | {'cost':>7} |"
    )
    print(f"|{'-' * 30}|{'-' * 12}|{'-' * 14}|{'-' * 11}|{'-' * 9}|")
    for what, n, plain, loaded_s in results:
        for count, seconds in ((len(base.assertions), plain), (len(loaded.assertions), loaded_s)):
            cost = "—" if seconds is plain else f"{(seconds / plain - 1) * 100:+.0f}%"
            print(
                f"| {what:<28} | {count:>10,} | {n / seconds:>12,.0f} | "
                f"{seconds / n * 1e6:>9.3f} | {cost:>7} |"
            )
    print()
    print(f"per conversation ({short:,} conversations of just session_started, session_ended)")
    print()
    print(
        f"| {'µs per conversation':<44} | {len(base.assertions):>14,} | "
        f"{len(loaded.assertions):>14,} |"
    )
    print(f"|{'-' * 46}|{'-' * 16}|{'-' * 16}|")
    for i, what in enumerate(
        ("open: create one machine per assertion", "end: finish() + verdict for every pending")
    ):
        print(f"| {what:<44} | {per_conv[0][i]:>14,.1f} | {per_conv[1][i]:>14,.1f} |")


if __name__ == "__main__":
    main()
