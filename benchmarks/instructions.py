"""Instructions: the CPU work of judging a feed, counted by valgrind rather than timed.

    python benchmarks/instructions.py                    # 20 conversations × 200 events
    PYTHONPATH=/other/checkout python benchmarks/instructions.py   # the same, another tree
    python benchmarks/instructions.py --quick            # runs the judgings, counts nothing

On a small shared machine wall-clock figures move by more than a change to the
engine does (the decode-only floor of throughput.py moves 2× between runs at a
load of 5 on 2 cores); instructions executed do not. Each mode runs in
``valgrind --tool=callgrind`` twice, judging the feed once and ``--judgings``
times: the difference, divided by the extra judgings, is one judging's
instructions (the interpreter's start, the imports and the feed's generation
cancel out). Instructions are not time (cache misses and branches are not
counted), so a figure here backs a timing, it does not replace one.

Modes: ``push_chunk`` (64 KiB line-aligned chunks), ``push_line`` (one line per
call), ``held`` (``push_chunk`` with every other event of each conversation
swapped with the next, so about half wait in the reorder window).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict

import mantle_stream as ms

from _common import chunks, feed, machine, scenario

MODES = ("push_chunk", "push_line", "held")


def swapped(data: bytes) -> bytes:
    """Every other event of each conversation swapped with the next (its first kept)."""
    lines = data.splitlines()
    where: defaultdict[str, list[int]] = defaultdict(list)
    for i, line in enumerate(lines):
        where[json.loads(line)["conversation_id"]].append(i)
    out = list(lines)
    for positions in where.values():
        own = [lines[i] for i in positions]
        for k in range(1, len(own) - 1, 2):
            own[k], own[k + 1] = own[k + 1], own[k]
        for i, line in zip(positions, own, strict=True):
            out[i] = line
    return b"\n".join(out) + b"\n"


def child(mode: str, judgings: int, path: str) -> None:
    """Judge the feed at ``path`` ``judgings`` times (what valgrind counts)."""
    with open(path, "rb") as f:
        data = f.read()
    scen, parts, lines = scenario(), chunks(data), data.splitlines()
    for _ in range(judgings):
        evaluator = ms.Evaluator([scen])
        if mode == "push_line":
            for line in lines:
                evaluator.push_line(line)
        else:
            for part in parts:
                evaluator.push_chunk(part)
        evaluator.finish_all()


def counted(mode: str, judgings: int, path: str, valgrind: str | None) -> int | None:
    """Instructions of one child process (None: run without valgrind, nothing counted)."""
    command = [sys.executable, __file__, "--child", mode, str(judgings), path]
    if valgrind is None:
        subprocess.run(command, check=True)
        return None
    done = subprocess.run(
        [valgrind, "--tool=callgrind", "--callgrind-out-file=/dev/null", *command],
        capture_output=True,
        text=True,
        check=True,
        # One string hash for every run: with another, dicts and sets probe differently
        # and one judging's count moves by about 1% (93.1 M, 92.0 M, 91.9 M for three).
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    for line in done.stderr.splitlines():
        if "Collected :" in line:
            return int(line.split()[-1])
    raise RuntimeError(f"no instruction count in valgrind's output:\n{done.stderr}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=20)
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--judgings", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, nothing counted")
    parser.add_argument("--child", nargs=3, metavar=("MODE", "JUDGINGS", "FEED"))
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), args.child[2])
        return
    if args.quick:
        args.conversations, args.events, args.judgings = 2, 20, 2
    valgrind = None if args.quick else shutil.which("valgrind")
    data = feed(args.conversations, args.events)
    n = data.count(b"\n")
    print(
        f"instructions: {args.conversations} conversations × {args.events} events = {n:,} "
        f"events, 30 assertions; ({args.judgings} judgings − 1) ÷ {args.judgings - 1}; "
        f"mantle_stream from {os.path.dirname(os.path.dirname(ms.__file__))}"
    )
    print(f"machine: {machine()}")
    if valgrind is None:
        print("(valgrind not run: nothing counted)")
    print()
    print("| mode       | instructions per judging | per event |")
    print("|------------|--------------------------|-----------|")
    with tempfile.TemporaryDirectory() as tmp:
        for mode in MODES:
            path = os.path.join(tmp, f"{mode}.jsonl")
            with open(path, "wb") as f:
                f.write(swapped(data) if mode == "held" else data)
            once = counted(mode, 1, path, valgrind)
            more = counted(mode, args.judgings, path, valgrind)
            if once is None or more is None:
                print(f"| {mode:<10} | {'—':>24} | {'—':>9} |")
                continue
            each = (more - once) / (args.judgings - 1)
            print(f"| {mode:<10} | {each:>24,.0f} | {each / n:>9,.0f} |")


if __name__ == "__main__":
    main()
