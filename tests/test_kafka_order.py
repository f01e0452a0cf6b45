"""The order of a conversation's events on a Kafka topic, keyed or not.

Rasa's default producer spreads one conversation over partitions; Kafka keeps
order within a partition only, and a row without a sequence can be applied
only in arrival order. A member merges its partitions by record timestamp
(``mantle_stream/kafka/stamped.py``). A topic keyed by conversation holds each
in one partition in order, so a hole in its sequence is passed at once; one
``rekey`` copied keeps the unkeyed topic's disorder and waits
(``mantle_stream/kafka/keys.py``). Against a real broker on loopback (tansu,
``tests/_kafka.py``), the command line as a subprocess where it is the surface.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

import mantle_stream as ms
from mantle_stream.core.verdicts import Decision
from mantle_stream.kafka.member import Member
from mantle_stream.kafka.options import KafkaOptions, KafkaSpec, parse_kafka_spec
from mantle_stream.kafka.rekey import rekey
from mantle_stream.kafka.stamped import StampedOrder

from _harness import run_cli
from _kafka import FAST_CONSUMER, KafkaBroker, kafka_broker

__all__ = ["kafka_broker"]

FAST = [f"--kafka-config={k}={v}" for k, v in FAST_CONSUMER.items()]
SCENARIO = """\
scenario:
  name: last_write
  simulation_context: x
  goals:
    assertions:
      - memory_was_not_set:
          - name: a.x
            value: 1
"""


def _row(cid: str, n: int, **payload: Any) -> bytes:
    """A ProtoJSON row without a sequence (an older row, an identity-less prefix)."""
    return json.dumps(
        {"conversation_id": cid, "timestamp": 1.0, "metadata": None,
         "event_id": f"{cid}-{n}", "sequence": None, **payload}
    ).encode()  # fmt: skip


def _conversation(cid: str, first: int, second: int, at: int) -> list[tuple[int, int, bytes]]:
    """(partition, timestamp ms, row) from time ``at``: written 1 then 2, spread over two
    partitions so that reading either partition first sees 2 before 1 (or the end
    before both)."""
    return [
        (first, at, _row(cid, 0, session_started={})),
        (second, at + 1, _row(cid, 1, user={"text": "hi"})),
        (second, at + 2, _row(cid, 2, memory_set={"key": "a.x", "value_json": "1"})),
        (first, at + 3, _row(cid, 3, memory_set={"key": "a.x", "value_json": "2"})),
        (second, at + 4, _row(cid, 4, session_ended={})),
    ]


def test_rows_without_sequence_across_partitions_go_by_record_timestamp(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    topic = f"unsequenced-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, 2)
    producer = Producer(kafka_broker.config())
    # Mirrored: whichever partition a member reads first, one of them is out of order.
    # (One producer: each partition's timestamps go up, as a real producer's do.)
    rows = _conversation("a", 0, 1, at=1000) + _conversation("b", 1, 0, at=1010)
    for partition, stamp, value in rows:
        producer.produce(topic, value=value, partition=partition, timestamp=stamp)
    assert producer.flush(10) == 0
    scenario = tmp_path / "last_write.yml"
    scenario.write_text(SCENARIO)
    proc = run_cli(
        "check", str(scenario), "--events", f"kafka://{kafka_broker.bootstrap}/{topic}",
        "--group", f"g-{topic}", *[f"--{t}-topic={topic}.{t}" for t in ("verdicts", "stops",
        "state")], *FAST, "--format", "json",
    )  # fmt: skip
    report = json.loads(proc.stdout)
    verdicts = {c["conversation_id"]: c["verdict"] for c in report["conversations"]}
    # In record-time order the last write of a.x is 2 in both.
    assert verdicts == {"a": "passed", "b": "passed"}, (proc.stderr, report)
    assert "warnings" not in report  # nothing late: each ended after its last row


#: Fails at the first write of a.x: decided by the event after a hole.
NOT_WRITTEN = SCENARIO.replace("name: last_write", "name: not_written").replace(
    "            value: 1\n", ""
)


def _holed(cid: str) -> list[bytes]:
    """A conversation as Rasa publishes it: sequence 2 (an initial slot's flat event,
    which the broker's format cannot carry) never sent; 3 writes a.x, failing."""
    payloads: list[tuple[int, dict[str, Any]]] = [
        (0, {"session_started": {}}),
        (1, {"user": {"text": "hi"}}),
        (3, {"memory_set": {"key": "a.x", "value_json": "1"}}),
    ]
    return [
        json.dumps({"conversation_id": cid, "timestamp": 1.0, "metadata": None,
                    "event_id": f"{cid}-{seq}", "sequence": seq, **payload}).encode()
        for seq, payload in payloads
    ]  # fmt: skip


def _watching(
    broker: KafkaBroker, topic: str, tmp_path: Path
) -> tuple[Member, list[Decision], threading.Thread]:
    """A `watch` member on ``topic`` from its start, waiting 60 s for a gap."""
    scenario = tmp_path / "not_written.yml"
    scenario.write_text(NOT_WRITTEN)
    options = KafkaOptions(
        group=f"g-{topic}", offsets="earliest", state_topic=f"{topic}.state",
        gap_timeout=60.0, consumer={k: str(v) for k, v in FAST_CONSUMER.items()},
    )  # fmt: skip
    decided: list[Decision] = []
    member = Member(
        ms.Evaluator(ms.load_scenarios([scenario])),
        KafkaSpec(bootstrap=broker.bootstrap, topic=topic, settings={}),
        options,
        on_decisions=decided.extend,
    )
    running = threading.Thread(target=member.run)
    running.start()
    return member, decided, running


def _until(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.1)


def test_a_keyed_topic_passes_a_hole_at_once(kafka_broker: KafkaBroker, tmp_path: Path) -> None:
    topic = f"keyed-hole-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, 2)
    kafka_broker.produce(topic, [("a", value) for value in _holed("a")])
    member, decided, running = _watching(kafka_broker, topic, tmp_path)
    try:
        # The verdict when its event is read, not after --gap-timeout (60 s).
        _until(lambda: decided, 30, "the verdict")
        assert [d.verdict for d in decided] == ["failed"]
        stats = member.evaluator.statistics()
        assert (stats.gaps_passed, stats.gaps, stats.held) == (1, 0, 0)
    finally:
        member.stop()
        running.join(30)
    # The report counts it apart from the gaps waited for.
    proc = run_cli(
        "check", str(tmp_path / "not_written.yml"), "--events",
        f"kafka://{kafka_broker.bootstrap}/{topic}", "--group", f"check-{topic}",
        f"--state-topic={topic}.check-state", *FAST, "--gap-timeout", "60", "--format", "json",
    )  # fmt: skip
    report = json.loads(proc.stdout)
    assert report["warnings"]["gaps_passed"] == 1 and "gaps" not in report["warnings"], report


def test_a_rekeyed_topic_still_waits_for_a_hole(kafka_broker: KafkaBroker, tmp_path: Path) -> None:
    source = f"unkeyed-hole-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(source, 2)
    producer = Producer(kafka_broker.config())
    for value in _holed("a"):  # one partition, so in order: the copy cannot tell
        producer.produce(source, value=value, partition=1)
    assert producer.flush(10) == 0
    spec = parse_kafka_spec(f"kafka://{kafka_broker.bootstrap}/{source}")
    copied = rekey(spec, group=f"rekey-{source}", consumer_settings=dict(FAST_CONSUMER))
    assert copied.copied == 3
    member, decided, running = _watching(kafka_broker, copied.target, tmp_path)
    try:
        _until(lambda: member.evaluator.statistics().held == 1, 30, "the event after the hole")
        time.sleep(1)
        assert decided == []  # held for --gap-timeout: the copy may have its gap later
    finally:
        member.stop()
        running.join(30)


class _Message:
    """What StampedOrder reads of a confluent-kafka message: its record timestamp."""

    def __init__(self, name: str, stamp: int) -> None:
        self.name, self.stamp = name, stamp

    def timestamp(self) -> tuple[int, int]:
        return 1, self.stamp  # TIMESTAMP_CREATE_TIME


def _names(runs: list[tuple[int, list[Any]]]) -> list[tuple[int, list[str]]]:
    return [(p, [m.name for m in run]) for p, run in runs]


def test_a_message_waits_until_every_partition_read_has_passed_its_time() -> None:
    order = StampedOrder(window=1000)
    order.add(0, [_Message("a", 10), _Message("c", 30)])
    assert order.ready({0, 1}) == []  # partition 1 not read yet: it may hold anything
    order.add(1, [_Message("b", 20)])
    assert _names(order.ready({0, 1})) == [(0, ["a"]), (1, ["b"])]  # c waits for 1
    assert _names(order.ready({0})) == [(0, ["c"])]  # partition 1 read to its end
    assert len(order) == 0


def test_past_the_window_the_oldest_go_and_a_partition_keeps_its_own_order() -> None:
    order = StampedOrder(window=2)
    order.add(0, [_Message("late clock", 50), _Message("a", 10), _Message("b", 11)])
    # One partition's messages never overtake each other, whatever their stamps.
    assert _names(order.ready({0, 1})) == [(0, ["late clock"])]
    order.forget({0})  # given to another member: its messages are its to read
    assert len(order) == 0
