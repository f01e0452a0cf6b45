"""Throughput: bytes → verdicts for a generated feed, against plain msgspec decoding.

    python benchmarks/throughput.py            # 1,000 conversations × 200 events
    python benchmarks/throughput.py --quick    # tiny sizes (CI smoke run)

Every figure comes from the same process and the same bytes, so the ratios
are meaningful even on a noisy machine: the floor is msgspec decoding the
lines into the typed event structs, chunked exactly as the pipeline does.
"""

from __future__ import annotations

import argparse

import msgspec

import mantle_stream as ms
from _common import best_of, chunks, feed, machine, scenario


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--conversations", type=int, default=1000)
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="tiny sizes for a smoke run")
    args = parser.parse_args()
    if args.quick:
        args.conversations, args.events, args.repeat = 20, 50, 1

    data = feed(args.conversations, args.events)
    parts = chunks(data)
    n = args.conversations * args.events
    scen = scenario()

    decoder = msgspec.json.Decoder(ms.Event)

    def decode_only() -> None:
        for part in parts:
            decoder.decode_lines(part)

    def pipeline() -> None:
        evaluator = ms.Evaluator([scen])
        for part in parts:
            evaluator.push_chunk(part)
        evaluator.finish_all()

    floor = best_of(decode_only, args.repeat)
    full = best_of(pipeline, args.repeat)

    print(f"throughput: {args.conversations} conversations × {args.events} events "
          f"= {n:,} events, {len(data) / n:.0f} bytes/event, "
          f"{len(scen.assertions)} assertions")
    print(f"machine: {machine()}")
    print()
    print(f"| {'stage':<38} | {'events/s':>12} | {'µs/event':>9} | {'× decode':>8} |")
    print(f"|{'-' * 40}|{'-' * 14}|{'-' * 11}|{'-' * 10}|")
    for name, seconds in (("msgspec decode only (floor)", floor),
                          ("mantle_stream: bytes → verdicts", full)):
        print(f"| {name:<38} | {n / seconds:>12,.0f} | {seconds / n * 1e6:>9.3f} | "
              f"{seconds / floor:>8.2f} |")


if __name__ == "__main__":
    main()
