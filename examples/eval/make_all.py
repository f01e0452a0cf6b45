#!/usr/bin/env python3
"""Regenerate events/all.jsonl: every conversation of the per-scenario event
files interleaved into one feed, as a broker would deliver them.

Rows are merged by timestamp (RFC 3339 strings or Unix seconds), but each
conversation keeps its own order exactly as in its file: the merge always
takes the head row of one conversation, never reorders inside one. Lines are
copied byte for byte.

    python examples/eval/make_all.py           # write events/all.jsonl
    python examples/eval/make_all.py --check   # exit 1 if all.jsonl is stale
"""

from __future__ import annotations

import heapq
import json
import sys
from datetime import datetime
from pathlib import Path

EVENTS = Path(__file__).resolve().parent / "events"
OUT = EVENTS / "all.jsonl"


def _when(row: dict, previous: float) -> float:
    ts = row.get("timestamp")
    if isinstance(ts, (int, float)) and not isinstance(ts, bool):
        return float(ts)
    if isinstance(ts, str):
        return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()
    return previous  # no timestamp: stay right after the row before it


def _conversation(row: dict) -> str:
    return row.get("conversation_id") or row["sender_id"]


def build() -> str:
    convs: dict[str, list[tuple[float, str]]] = {}
    for path in sorted(EVENTS.glob("*.jsonl")):
        if path == OUT:
            continue
        last: dict[str, float] = {}
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            cid = _conversation(row)
            t = _when(row, last.get(cid, 0.0))
            last[cid] = t
            convs.setdefault(cid, []).append((t, line))

    # k-way merge on the head of each conversation; ties go to the conversation
    # seen first, so the output is deterministic.
    order = {cid: i for i, cid in enumerate(convs)}
    heads = [(rows[0][0], order[cid], cid, 0) for cid, rows in convs.items()]
    heapq.heapify(heads)
    out = []
    while heads:
        _, rank, cid, i = heapq.heappop(heads)
        rows = convs[cid]
        out.append(rows[i][1])
        if i + 1 < len(rows):
            heapq.heappush(heads, (rows[i + 1][0], rank, cid, i + 1))
    return "".join(line + "\n" for line in out)


def main(argv: list[str]) -> int:
    text = build()
    if "--check" in argv:
        current = OUT.read_text(encoding="utf-8") if OUT.exists() else ""
        if current != text:
            print(f"{OUT} is out of date: run {Path(__file__).name}", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT} ({text.count(chr(10))} events)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
