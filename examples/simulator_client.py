"""A minimal simulator client for mantle_stream's socket protocol.

Replays a recorded event log as if a simulator were producing it, one
conversation after another, and stops a conversation as soon as
mantle_stream says its outcome is settled:

    mantle-stream watch examples/eval/scenarios --events tcp://127.0.0.1:7400 \
        --results examples/eval/results/2026-12-01T09-00-00 &
    python examples/simulator_client.py 127.0.0.1 7400 examples/eval/events/all.jsonl

Only the standard library: this is the loop to copy into a real simulator.
"""

from __future__ import annotations

import json
import select
import socket
import sys
from collections import defaultdict


def conversations(path: str) -> dict[str, list[dict[str, object]]]:
    by_id: dict[str, list[dict[str, object]]] = defaultdict(list)
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                event = json.loads(line)
                by_id[str(event.get("conversation_id") or event.get("sender_id"))].append(event)
    return by_id


def main(host: str, port: int, path: str) -> None:
    with socket.create_connection((host, port)) as sock:
        pending = b""
        for cid, events in conversations(path).items():
            for sent, event in enumerate(events, start=1):
                sock.sendall(json.dumps(event).encode() + b"\n")
                # Before the next user turn: has mantle_stream told us to stop? A real
                # simulator spends seconds on an LLM call here; this replay waits a
                # little after each agent message so the verdict can arrive.
                wait = 0.02 if "bot" in event or event.get("event") == "bot" else 0.0
                stop = None
                while select.select([sock], [], [], wait)[0]:
                    wait = 0.0
                    data = sock.recv(65536)
                    if not data:
                        raise SystemExit("mantle-stream closed the connection")
                    pending += data
                    while b"\n" in pending:
                        line, pending = pending.split(b"\n", 1)
                        message = json.loads(line)
                        if message.get("type") == "error":  # refused: say why
                            raise SystemExit(
                                f"mantle-stream refused the connection: {message.get('error')}"
                            )
                        if message.get("stop") and message["conversation_id"] == cid:
                            stop = message
                if stop is not None:
                    print(
                        f"{cid}: stopped after {sent} of {len(events)} events: "
                        f"{stop['assertion']['reason']}"
                    )
                    # End it as Mantle would: a session_ended after the last event.
                    sequence = event.get("sequence")
                    sock.sendall(
                        json.dumps(
                            {
                                "conversation_id": cid,
                                "timestamp": event.get("timestamp"),
                                "metadata": None,
                                "event_id": None,
                                "sequence": None if sequence is None else int(str(sequence)) + 1,
                                "session_ended": {},
                                "user_id": None,
                                "deployment_environment": None,
                                "session_id": None,
                            }
                        ).encode()
                        + b"\n"
                    )
                    break


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
