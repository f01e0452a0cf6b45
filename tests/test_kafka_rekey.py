"""``mantle-stream rekey`` against a real broker on loopback (tansu, ``tests/_kafka.py``).

A topic written as Rasa writes it by default (null keys, one conversation's
events over several partitions) is copied to one keyed by conversation id:
every message once, its key the conversation's id, each conversation in one
partition in its order, value, headers and timestamp unchanged; the group's
offsets are committed, so a rerun copies only what came since, and two
members (one joining) copy each message once. Messages without a conversation
id are copied with a null key, counted and named. The in-process runs pass
``FAST_CONSUMER`` (quick group joins on tansu); the command line runs as a
subprocess with its own settings (tansu holds its first JoinGroup half the
10 s session timeout: about 5 s a run). Nothing here asserts a duration.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka import Message as KafkaMessage

from mantle_stream.core.errors import FeedError, UsageError
from mantle_stream.kafka.keys import REKEYED
from mantle_stream.kafka.options import parse_kafka_spec
from mantle_stream.kafka.rekey import RekeyStats, conversation_id, rekey, target_topic

from _kafka import FAST_CONSUMER, KafkaBroker, free_port, kafka_broker

__all__ = ["kafka_broker"]  # the fixture, for pytest

ROOT = Path(__file__).resolve().parent.parent
Headers = list[tuple[str, str | bytes | None]]
HEADERS: Headers = [("RASA_ENVIRONMENT", b"rekey-test")]
STAMP = 1_790_000_000_000  # ms: a CreateTime every copy must keep


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@dataclass
class Sent:
    """A message to produce: to ``partition`` (None: the partitioner's choice)."""

    value: bytes | None
    partition: int | None = None
    key: bytes | None = None
    timestamp: int = 0
    headers: Headers = field(default_factory=lambda: list(HEADERS))


@dataclass(frozen=True)
class Got:
    key: bytes | None
    value: bytes | None
    partition: int
    offset: int
    timestamp: int
    headers: Headers


def send(broker: KafkaBroker, topic: str, messages: Iterable[Sent]) -> None:
    """Produce in order (each to its partition, with its key, headers and timestamp)."""
    producer = Producer(broker.config(**{"linger.ms": 5}))
    errors: list[KafkaError] = []

    def delivered(err: KafkaError | None, msg: KafkaMessage) -> None:
        if err is not None:
            errors.append(err)

    for m in messages:
        producer.produce(
            topic,
            value=m.value,
            key=m.key,
            partition=-1 if m.partition is None else m.partition,
            timestamp=m.timestamp,
            headers=m.headers,
            on_delivery=delivered,
        )
        producer.poll(0)
    assert producer.flush(10) == 0 and not errors, errors


def read_all(broker: KafkaBroker, topic: str, timeout: float = 10.0) -> list[Got]:
    """Every message of ``topic`` with headers and timestamps, in partition then offset
    order, read to each partition's end (as ``KafkaBroker.consume_all``, outside a group)."""
    consumer = Consumer(
        broker.consumer_config(unique("read-all"), **{"enable.partition.eof": True})
    )
    try:
        partitions = set(range(broker.partitions(topic)))
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        got: list[Got] = []
        ended: set[int] = set()
        deadline = time.monotonic() + timeout
        while ended != partitions:
            assert time.monotonic() < deadline, f"{topic}: {len(got)} read, ended {ended}"
            msg = consumer.poll(0.1)
            if msg is None:
                continue
            err, part = msg.error(), msg.partition() or 0
            if err is not None:
                assert err.code() == KafkaError._PARTITION_EOF, err
                ended.add(part)
                continue
            ended.discard(part)
            kind, stamp = msg.timestamp()
            assert kind == TIMESTAMP_CREATE_TIME
            headers = msg.headers() or []
            assert isinstance(headers, list)
            got.append(Got(msg.key(), msg.value(), part, msg.offset() or 0, stamp, headers))
        return sorted(got, key=lambda g: (g.partition, g.offset))
    finally:
        consumer.close()


def event(cid: str, seq: int, flat: bool = False) -> bytes:
    """A ProtoJSON event of conversation ``cid``, or (``flat``) a flat row naming it."""
    if flat:
        row = {"event": "user", "sender_id": cid, "text": f"turn {seq}", "timestamp": seq}
    else:
        row = {"conversation_id": cid, "sequence": seq, "user_uttered": {"text": f"turn {seq}"}}
    return json.dumps(row).encode()


def copy(
    broker: KafkaBroker,
    topic: str,
    group: str,
    notes: list[str] | None = None,
    **options: Any,
) -> RekeyStats:
    """``rekey`` in this process, with the quick group settings."""
    spec = parse_kafka_spec(f"kafka://{broker.bootstrap}/{topic}")
    on_note: Callable[[str], object] = (notes if notes is not None else []).append
    return rekey(
        spec,
        group=group,
        consumer_settings=dict(FAST_CONSUMER),
        on_note=on_note,
        **options,
    )


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mantle_stream", "rekey", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
        check=False,
    )


def count(broker: KafkaBroker, topic: str) -> int:
    """Messages in ``topic``; 0 while it does not exist (never created by asking)."""
    if topic not in broker.admin.list_topics(timeout=5).topics:
        return 0
    return len(broker.consume_all(topic))


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not {what} after {timeout} s"
        time.sleep(0.1)


def wait_while_running(
    condition: Callable[[], bool], process: subprocess.Popen[str], what: str, timeout: float = 30
) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if process.poll() is not None:
            _, err = process.communicate()
            raise AssertionError(f"exited {process.returncode} before {what}: {err}")
        assert time.monotonic() < deadline, f"not {what} after {timeout} s"
        time.sleep(0.2)


class Follower:
    """``rekey --follow`` in a thread of this process, its latest figures at hand."""

    def __init__(
        self, broker: KafkaBroker, topic: str, group: str, commit_interval: float = 0.2
    ) -> None:
        self.stop = threading.Event()
        self.progress: list[RekeyStats] = []
        self.result: list[RekeyStats] = []
        self.errors: list[BaseException] = []

        def run() -> None:
            try:
                self.result.append(
                    copy(
                        broker,
                        topic,
                        group,
                        follow=True,
                        stop=self.stop,
                        on_progress=self.progress.append,
                        commit_interval=commit_interval,
                    )
                )
            except BaseException as exc:
                self.errors.append(exc)

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    @property
    def latest(self) -> RekeyStats | None:
        return self.progress[-1] if self.progress else None

    def wait(self, condition: Callable[[RekeyStats], bool], what: str) -> None:
        deadline = time.monotonic() + 20
        while self.latest is None or not condition(self.latest):
            assert not self.errors, self.errors
            assert time.monotonic() < deadline and self.thread.is_alive(), f"not {what}"
            time.sleep(0.05)

    def finish(self) -> RekeyStats:
        self.stop.set()
        self.thread.join(20)
        assert not self.thread.is_alive() and not self.errors, self.errors
        (stats,) = self.result
        return stats


# ---------------------------------------------------------------------- the copy


def test_an_unkeyed_topic_is_copied_keyed_by_conversation(kafka_broker: KafkaBroker) -> None:
    topic, group = unique("events"), unique("rekey")
    kafka_broker.create_topic(topic, 4)
    # 12 conversations of 8 events, interleaved as a busy agent writes them, with
    # null keys. The first 8 live each in one source partition (so their order
    # there is theirs); the last 4 are spread over all four, an event each.
    ids = [f"conv-{i:02d}" for i in range(12)]
    sent: list[Sent] = []
    for seq in range(8):
        for i, cid in enumerate(ids):
            partition = i % 4 if i < 8 else seq % 4
            sent.append(Sent(event(cid, seq, flat=i % 3 == 2), partition, timestamp=STAMP + seq))
    send(kafka_broker, topic, sent)
    source = read_all(kafka_broker, topic)
    assert len(source) == 96 and all(g.key is None for g in source)

    progress: list[RekeyStats] = []
    stats = copy(kafka_broker, topic, group, on_progress=progress.append)

    target = f"{topic}.by_conversation"
    assert stats.target == target and stats.created
    assert kafka_broker.partitions(target) == 4  # created like the source
    assert (stats.read, stats.copied, stats.without_id, stats.keyed) == (96, 96, 0, 0)
    assert stats.reached_end and not stats.stopped and stats.commits >= 1
    assert progress and progress[-1].copied == 96

    copied = read_all(kafka_broker, target)
    assert sorted(g.value or b"" for g in copied) == sorted(g.value or b"" for g in source)
    for g in copied:
        assert g.key is not None
        assert g.key.decode() == conversation_id(g.value)[0]
        # The source's headers, and rekey's mark (a member waits for the copy's gaps).
        assert g.headers == [*HEADERS, (REKEYED, b"1")]
    # The timestamp travels with the value.
    stamps = {g.value: g.timestamp for g in source}
    assert all(g.timestamp == stamps[g.value] for g in copied)

    for i, cid in enumerate(ids):
        mine = [g for g in copied if g.key == cid.encode()]
        assert len({g.partition for g in mine}) == 1, f"{cid} over several partitions"
        if i < 8:  # read from one source partition: in the order it was sent
            assert [g.value for g in mine] == [event(cid, s, flat=i % 3 == 2) for s in range(8)]
        else:  # each source partition's order is kept (what Kafka promises)
            ours = {g.value for g in mine}
            for p in range(4):
                from_p = [g.value for g in source if g.partition == p and g.value in ours]
                assert len(from_p) == 2
                assert [g.value for g in mine if g.value in from_p] == from_p
    assert len({g.partition for g in copied}) > 1  # the conversations spread over the target

    # Run again in the same group: everything was committed, nothing is copied twice.
    again = copy(kafka_broker, topic, group)
    assert (again.read, again.copied, again.created) == (0, 0, False)
    assert again.reached_end
    assert len(read_all(kafka_broker, target)) == 96

    # What arrives since is all a rerun copies.
    send(kafka_broker, topic, [Sent(event("conv-00", 8), 0), Sent(event("late", 0), 3)])
    more = copy(kafka_broker, topic, group)
    assert (more.read, more.copied) == (2, 2)
    after = read_all(kafka_broker, target)
    assert len(after) == 98
    conv0 = [g for g in after if g.key == b"conv-00"]
    assert [g.value for g in conv0] == [event("conv-00", s) for s in range(9)]


def test_messages_without_a_conversation_are_counted_named_and_kept(
    kafka_broker: KafkaBroker,
) -> None:
    topic, group = unique("bad"), unique("rekey")
    kafka_broker.create_topic(topic, 1)
    bad = [b"not json at all", b"[1, 2]", b'{"event": "user", "text": "hi"}', None]
    bad.append(b'{"conversation_id": "", "sequence": 0}')
    good = [event("ok", 0), event("ok", 1, flat=True)]
    keyed = Sent(event("ok", 2), key=b"rasa-key")
    send(kafka_broker, topic, [*(Sent(v) for v in [good[0], *bad, good[1]]), keyed])

    notes: list[str] = []
    stats = copy(kafka_broker, topic, group, notes=notes, target=unique("keyed"))

    assert (stats.read, stats.copied, stats.without_id, stats.keyed) == (8, 8, 5, 1)
    named = [n for n in notes if "no conversation id" in n]
    assert len(named) == 5
    assert f"{topic}[0]@1: no conversation id (not JSON): not json at all" in named[0]
    assert "[0]@2: no conversation id (not an event: Expected `object`, got `array`)" in named[1]
    assert (
        "[0]@3: no conversation id (no conversation_id (nor, for a flat row, sender_id))"
        in named[2]
    )
    assert "[0]@4: no conversation id (no value)" in named[3]
    assert (
        "[0]@5: no conversation id (no conversation_id (nor, for a flat row, sender_id))"
        in named[4]
    )
    assert all(n.endswith("copied with a null key") for n in named)
    assert sum("keyed messages already" in n for n in notes) == 1

    copied = read_all(kafka_broker, stats.target)
    assert [(g.key, g.value) for g in copied] == [
        (b"ok", good[0]),
        *((None, v) for v in bad),
        (b"ok", good[1]),
        (b"ok", event("ok", 2)),  # the source's key replaced by the conversation id
    ]


def test_follow_copies_what_arrives_until_stopped(kafka_broker: KafkaBroker) -> None:
    topic, group = unique("live"), unique("rekey")
    kafka_broker.create_topic(topic, 2)
    send(kafka_broker, topic, [Sent(event("a", 0), 0)])
    follower = Follower(kafka_broker, topic, group)
    try:
        follower.wait(lambda s: s.copied >= 1, "the first message copied")
        # Past the end of every partition: a run that follows goes on.
        send(kafka_broker, topic, [Sent(event("a", 1), 1), Sent(event("b", 0), 0)])
        follower.wait(lambda s: s.copied >= 3, "later messages copied")
    finally:
        stats = follower.finish()
    assert stats.stopped and (stats.read, stats.copied) == (3, 3)
    target = f"{topic}.by_conversation"
    assert sorted(g.value or b"" for g in read_all(kafka_broker, target)) == sorted(
        [event("a", 0), event("a", 1), event("b", 0)]
    )
    # Stopped cleanly: committed, so nothing is copied again.
    assert copy(kafka_broker, topic, group).read == 0


def test_two_members_share_the_source_and_copy_each_message_once(
    kafka_broker: KafkaBroker,
) -> None:
    topic, group = unique("shared"), unique("rekey")
    target = f"{topic}.by_conversation"
    kafka_broker.create_topic(topic, 4)
    send(kafka_broker, topic, [Sent(event(f"c{i % 8}", i // 8), i % 4) for i in range(40)])
    # A commits only when it must: when its partitions are revoked, and at the end.
    a = Follower(kafka_broker, topic, group, commit_interval=3600)
    b: Follower | None = None
    try:
        wait_until(lambda: count(kafka_broker, target) == 40, "A copied all 40")
        assert a.latest is None  # nothing committed yet
        # B joins: A's partitions are revoked, and what A read of them is committed
        # then, before B gets half of them: B copies none of it again.
        b = Follower(kafka_broker, topic, group)
        b.wait(lambda s: len(s.assigned) == 2, "B has 2 partitions")
        assert a.latest is not None and a.latest.commits == 1  # the revoke's
        send(kafka_broker, topic, [Sent(event(f"c{i % 8}", 5 + i // 8), i % 4) for i in range(40)])
        wait_until(lambda: count(kafka_broker, target) >= 80, "all 80 copied")
    finally:
        stats = [a.finish()] + ([b.finish()] if b is not None else [])
    assert [s.copied for s in stats] == [60, 20]  # A: 40, then its 2 partitions' 20
    copied = read_all(kafka_broker, target)
    values = [g.value for g in copied]
    assert len(values) == len(set(values)) == 80  # every message once, none twice
    for i in range(8):
        mine = [g for g in copied if g.key == f"c{i}".encode()]
        assert len({g.partition for g in mine}) == 1
        assert [g.value for g in mine] == [event(f"c{i}", s) for s in range(10)]


# ---------------------------------------------------------------------- refusals


def test_the_target_is_never_the_source() -> None:
    assert target_topic("rasa_core_events", None) == "rasa_core_events.by_conversation"
    assert target_topic("rasa_core_events", "keyed") == "keyed"
    spec = parse_kafka_spec("kafka://127.0.0.1:1/events")
    with pytest.raises(UsageError, match="the target topic is the source `events`"):
        rekey(spec, target="events")


def test_a_missing_source_topic_is_named(kafka_broker: KafkaBroker) -> None:
    kafka_broker.create_topic(unique("other"), 1)
    missing = unique("missing")
    with pytest.raises(FeedError, match=f"no topic `{missing}` on {kafka_broker.bootstrap}"):
        copy(kafka_broker, missing, unique("rekey"))
    assert missing not in kafka_broker.admin.list_topics(timeout=5).topics  # not created


def test_without_the_kafka_client_it_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "confluent_kafka", None)
    with pytest.raises(UsageError, match=r'pip install "mantle_stream\[kafka\]"'):
        rekey(parse_kafka_spec("kafka://127.0.0.1:1/events"))


# ---------------------------------------------------------------------- the command


def test_the_command_copies_and_a_follower_stops_on_sigterm(kafka_broker: KafkaBroker) -> None:
    topic = unique("cli")
    kafka_broker.create_topic(topic, 2)
    send(kafka_broker, topic, [Sent(event(f"c{i % 3}", i // 3), i % 2) for i in range(30)])
    send(kafka_broker, topic, [Sent(b"{oops")])
    source = f"kafka://{kafka_broker.bootstrap}/{topic}"

    # A follower (its own group and target) joins while the one-shot copy runs.
    followed = f"{topic}.followed"
    follow = ["--follow", "--group", unique("follow"), "--to", followed]
    follower = subprocess.Popen(
        [sys.executable, "-m", "mantle_stream", "rekey", source, *follow],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        group = unique("rekey")
        done = cli(source, "--group", group)
        assert done.returncode == 0, done.stderr
        assert done.stdout == ""
        lines = done.stderr.splitlines()
        target = f"{topic}.by_conversation"
        assert f"mantle-stream rekey: created topic `{target}` with 2 partitions" in lines
        assert any(
            x.endswith("no conversation id (not JSON): {oops; copied with a null key")
            for x in lines
        )
        assert lines[-1].startswith(
            f"mantle-stream rekey: `{topic}` to `{target}` (group `{group}`): "
            "copied 31 messages in "
        )
        assert lines[-1].endswith(
            "/s while copying); 1 without a conversation id (copied with a null key)"
        )
        assert len(read_all(kafka_broker, target)) == 31

        # The follower copies everything, then what arrives after the end, until SIGTERM.
        wait_while_running(lambda: count(kafka_broker, followed) == 31, follower, "31 followed")
        send(kafka_broker, topic, [Sent(event("c0", 10), 0)])
        wait_while_running(lambda: count(kafka_broker, followed) == 32, follower, "32 followed")
        follower.send_signal(signal.SIGTERM)
        out, err = follower.communicate(timeout=20)
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.communicate(timeout=5)
    assert follower.returncode == 0, err
    assert out == ""
    assert "mantle-stream rekey: SIGTERM: stopping after committing what was copied" in err
    assert "): copied 32 messages in " in err.splitlines()[-1]
    assert err.splitlines()[-1].endswith("; stopped: a rerun goes on from here")


def test_bad_sources_exit_2_with_a_message(kafka_broker: KafkaBroker) -> None:
    port = free_port()  # nothing listens there: refused at once, no wait
    cases = {
        f"kafka://127.0.0.1:{port}/events": f"no Kafka broker answered at 127.0.0.1:{port}: ",
        "http://localhost:9092/events": "`http://localhost:9092/events` is not a kafka:// source",
        "kafka://localhost:9092/events?acks=all": "`acks` is not a Kafka setting",
        f"kafka://{kafka_broker.bootstrap}/{(m := unique('missing'))}": f"no topic `{m}` on ",
    }
    for spec, message in cases.items():
        done = cli(spec, timeout=30)
        assert done.returncode == 2, (spec, done.stderr)
        assert done.stderr.startswith(f"mantle-stream: error: {message}"), done.stderr
        assert "Traceback" not in done.stderr
    same = cli("kafka://localhost:9092/events", "--to", "events")
    assert same.returncode == 2
    assert "the target topic is the source `events`" in same.stderr
