"""mantle-stream as a Kafka consumer group member, against a real broker on loopback.

The broker is tansu (``tests/_kafka.py``), started by the fixture; members are
the command line run as subprocesses. Every test compares what the verdicts
topic holds, de-duplicated by (conversation, assertion), with the offline
report of the same events read from a file.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

import mantle_stream as ms
from mantle_stream.kafka.member import Member
from mantle_stream.kafka.options import KafkaOptions, KafkaSpec

from _harness import run_cli, run_cli_in_process
from _kafka import FAST_CONSUMER, KafkaBroker, Outage, free_port, kafka_broker, start_tansu

__all__ = ["kafka_broker"]

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "examples/eval/scenarios/card_replace_damaged.yml"
EVENTS = ROOT / "examples/eval/events/all.jsonl"
FAST = [f"--kafka-config={k}={v}" for k, v in FAST_CONSUMER.items()]


def _conversations(copies: int) -> list[list[dict[str, Any]]]:
    """The examples' conversations, ``copies`` times over with fresh ids."""
    by_id: dict[str, list[dict[str, Any]]] = {}
    for line in EVENTS.read_text().splitlines():
        row = json.loads(line)
        by_id.setdefault(row["conversation_id"], []).append(row)
    out = []
    for copy in range(copies):
        for cid, rows in by_id.items():
            new = f"{cid}-{copy}"
            out.append([{**row, "conversation_id": new} for row in rows])
    return out


def _interleaved(conversations: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Round robin over the conversations, as a busy agent writes them."""
    queues = [list(c) for c in conversations]
    rows = []
    while any(queues):
        for queue in queues:
            if queue:
                rows.append(queue.pop(0))
    return rows


def _offline(tmp: Path, rows: list[dict[str, Any]]) -> dict[tuple[str, int], dict[str, Any]]:
    """Verdicts of one process over the same events, read from a file."""
    feed = tmp / f"offline-{uuid.uuid4().hex}.jsonl"
    feed.write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = run_cli("check", str(SCENARIO), "--events", str(feed), "--format", "json")
    assert done.returncode == 1, done.stderr  # 12 of the 13 examples fail this scenario
    return {
        (c["conversation_id"], a["index"]): _verdict(a)
        for c in json.loads(done.stdout)["conversations"]
        for a in c["assertions"]
    }


def _verdict(record: dict[str, Any]) -> dict[str, Any]:
    return {k: record.get(k) for k in ("verdict", "decided_at", "reason")}


def _published(broker: KafkaBroker, topic: str) -> list[dict[str, Any]]:
    return [json.loads(value) for _, value, _, _ in broker.consume_all(topic) if value]


def _by_key(records: list[dict[str, Any]]) -> dict[tuple[str, int], dict[str, Any]]:
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for r in records:
        key = (r["conversation_id"], r["index"])
        assert out.get(key, _verdict(r)) == _verdict(r), f"{key} published two verdicts"
        out[key] = _verdict(r)
    return out


def _start(*args: str) -> subprocess.Popen[str]:
    """``mantle-stream ARGS`` running, its output captured."""
    return subprocess.Popen(
        [sys.executable, "-m", "mantle_stream", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip


def _member(broker: KafkaBroker, topic: str, group: str, *extra: str) -> subprocess.Popen[str]:
    """A `watch` member of ``group`` on ``topic``, from its earliest event."""
    source = f"kafka://{broker.bootstrap}/{topic}"
    return _start("watch", str(SCENARIO), "--events", source, "--group", group,
                  "--offsets", "earliest", *_topics(topic), *FAST, *extra)  # fmt: skip


def _check(broker: KafkaBroker, topic: str, *extra: str, scenario: Path = SCENARIO) -> list[str]:
    """The arguments of a `check` member of group ``g-TOPIC`` on ``topic``."""
    source = f"kafka://{broker.bootstrap}/{topic}"
    return ["check", str(scenario), "--events", source, "--group", f"g-{topic}",
            *_topics(topic), *FAST, "--format", "json", *extra]  # fmt: skip


def _status(out: str) -> int:
    """The exit status of a `check --format json` member that printed ``out``: 1 if
    a conversation it judged failed, else 0 (also when the group gave it nothing)."""
    return 1 if out.strip() and json.loads(out)["summary"]["failed"] else 0


def _stopped_status(out: str) -> int:
    """The exit status of a `watch` member stopped by SIGTERM that printed the
    verdict lines ``out``: 1 if one failed, else 130 (interrupted, none failed)."""
    return 1 if " FAILED " in out else 130


def _together(args: list[str], members: int = 2) -> list[tuple[str, str]]:
    """``members`` processes of ``args`` started at once; each one's (stdout, stderr),
    every one having ended with the status its own report gives."""
    running = [_start(*args) for _ in range(members)]
    outputs = []
    for member in running:
        out, err = member.communicate(timeout=120)
        assert member.returncode == _status(out), err
        outputs.append((out, err))
    return outputs


def _topics(topic: str) -> list[str]:
    """Verdict, stop and state topics of this test's own."""
    return [f"--{t}-topic={topic}.{t}" for t in ("verdicts", "stops", "state")]


def _produce(broker: KafkaBroker, topic: str, rows: list[dict[str, Any]]) -> None:
    broker.produce(topic, [(r["conversation_id"], json.dumps(r)) for r in rows])


def _wait_for(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.25)


def _every_verdict_then_stopped(
    broker: KafkaBroker,
    topic: str,
    member: subprocess.Popen[str],
    rows: list[dict[str, Any]],
    tmp_path: Path,
    ends_within: float = 60,
) -> str:
    """Once a running `watch` ``member`` has published every verdict an event of ``rows``
    decides (equal to the offline ones; duplicates agree), SIGTERM: it ends within
    ``ends_within`` seconds, with a stopped status and no traceback. Its stderr."""
    offline = {k: v for k, v in _offline(tmp_path, rows).items() if v["decided_at"]}

    def complete() -> bool:
        assert member.poll() is None, member.communicate()[1]
        return set(_by_key(_published(broker, f"{topic}.verdicts"))) >= set(offline)

    _wait_for(complete, 90, "every verdict decided by an event")
    member.send_signal(signal.SIGTERM)
    told = time.monotonic()
    out, err = member.communicate(timeout=120)
    assert time.monotonic() - told < ends_within, err
    assert member.returncode == _stopped_status(out), err
    assert "Traceback" not in err, err
    published = _by_key(_published(broker, f"{topic}.verdicts"))
    assert {k: v for k, v in published.items() if k in offline} == offline
    return err


def test_one_member_publishes_the_offline_verdicts(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    topic = f"keyed-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, 4)
    rows = _interleaved(_conversations(2))
    _produce(kafka_broker, topic, rows)
    done = run_cli(*_check(kafka_broker, topic))
    assert done.returncode == 1, done.stderr  # alone in the group: every conversation
    report = json.loads(done.stdout)
    offline = _offline(tmp_path, rows)
    published = _published(kafka_broker, f"{topic}.verdicts")
    assert len(published) == len(offline)  # each once
    assert _by_key(published) == offline
    assert {
        (c["conversation_id"], a["index"]): _verdict(a)
        for c in report["conversations"]
        for a in c["assertions"]
    } == offline
    group = report["kafka"]
    assert group["group"] == f"g-{topic}" and group["partitions"] == [0, 1, 2, 3]
    assert group["published"] == len(offline)
    # Stop messages for the conversations settled before their end.
    stops = _published(kafka_broker, f"{topic}.stops")
    assert {s["conversation_id"] for s in stops} <= {c for c, _ in offline}


def _across_a_restart(
    broker: KafkaBroker, tmp_path: Path, topic: str, key: Callable[[dict[str, Any]], str]
) -> tuple[str, list[dict[str, Any]], subprocess.CompletedProcess[str]]:
    """Half of the examples' events (each keyed by ``key``) judged by a `watch` member
    of group ``g-TOPIC`` stopped by SIGTERM, then the rest by a `check` of that group
    resuming from its commits: the member's stderr, the verdicts published before the
    restart, and the check. Fails if a verdict is published twice or the verdicts are
    not the offline run's."""
    broker.create_topic(topic, 2)
    rows = _interleaved(_conversations(1))
    half = len(rows) // 2

    def produce(part: list[dict[str, Any]]) -> None:
        broker.produce(topic, [(key(r), json.dumps(r)) for r in part])

    produce(rows[:half])
    # `watch` leaves open conversations open (their state is saved): stopped by SIGTERM.
    member = _member(broker, topic, f"g-{topic}", "--gap-timeout", "0.5")
    _wait_for(lambda: len(_published(broker, f"{topic}.verdicts")) > 0, 60, "verdicts")
    time.sleep(2)  # a commit or two
    member.send_signal(signal.SIGTERM)
    out, err = member.communicate(timeout=60)
    assert member.returncode == _stopped_status(out), err
    first = _published(broker, f"{topic}.verdicts")
    # The rest of the events arrive; a new run of the group resumes from its commits.
    produce(rows[half:])
    done = run_cli(*_check(broker, topic))
    assert done.returncode == 1, done.stderr  # the restored conversations end, failing
    everything = _published(broker, f"{topic}.verdicts")
    keys = [(r["conversation_id"], r["index"]) for r in everything]
    assert len(keys) == len(set(keys)), "a verdict was published twice"
    assert _by_key(everything) == _offline(tmp_path, rows)
    assert len(first) < len(everything)
    return err, first, done


def test_a_restart_from_committed_offsets_publishes_nothing_twice(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    topic = f"restart-{uuid.uuid4().hex[:8]}"
    _, _, done = _across_a_restart(kafka_broker, tmp_path, topic, lambda r: r["conversation_id"])
    group = json.loads(done.stdout)["kafka"]
    assert group["restored"] > 0 and group["members"] == [group["member"]]  # tansu lists none


def test_keys_other_than_the_conversation_id_keep_verdicts_across_a_restart(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    # Messages keyed by something else than their event's conversation_id: the state is
    # still saved under the conversation, so a restart resumes it, and a verdict that
    # passed before the stop is neither decided again nor changed.
    topic = f"otherkey-{uuid.uuid4().hex[:8]}"
    err, first, done = _across_a_restart(
        kafka_broker, tmp_path, topic, lambda r: f"session:{r['conversation_id']}"
    )
    assert "is keyed by something other than the conversation id" in err
    assert "passed" in {r["verdict"] for r in first}
    assert json.loads(done.stdout)["kafka"]["restored"] > 0


def test_a_member_killed_mid_feed_loses_no_verdict(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    topic = f"kill-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, 4)
    rows = _interleaved(_conversations(3))
    group = f"g-{topic}"
    first = _member(kafka_broker, topic, group, "--stats-interval", "0.5")
    second = _member(kafka_broker, topic, group)
    third = len(rows) // 3
    _produce(kafka_broker, topic, rows[:third])
    _wait_for(lambda: len(_published(kafka_broker, f"{topic}.verdicts")) > 0, 60, "verdicts")
    time.sleep(1.5)  # commits with state
    second.kill()  # SIGKILL: no revoke, no commit
    second.communicate(timeout=30)
    _produce(kafka_broker, topic, rows[third:])
    offline = _offline(tmp_path, rows)

    def complete() -> bool:
        return set(_by_key(_published(kafka_broker, f"{topic}.verdicts"))) >= set(offline)

    # Only verdicts decided at a conversation's end come at the end: the survivor
    # finishes none (watch), so compare those decided by events.
    offline = {k: v for k, v in offline.items() if v["decided_at"] is not None}
    _wait_for(complete, 90, "every verdict decided by an event")
    first.send_signal(signal.SIGTERM)
    out, err = first.communicate(timeout=60)
    assert first.returncode == _stopped_status(out), err
    assert f"mantle-stream: kafka group {group}: partitions [" in err and ", lag " in err
    published = _by_key(_published(kafka_broker, f"{topic}.verdicts"))  # duplicates agree
    assert {k: v for k, v in published.items() if k in offline} == offline


@pytest.mark.slow
@pytest.mark.parametrize("outage", ["port-down", "process-stopped"])
def test_a_broker_outage_longer_than_the_session_is_ridden_out(outage: str, tmp_path: Path) -> None:
    # The broker is away for 5 s, over three times the 1.5 s session timeout: its port
    # goes dark (every connection reset, new ones refused, as when its process is gone),
    # or its process is stopped (SIGSTOP: connections open, nothing answered). The
    # member is dropped from the group, rejoins when the broker is back, and publishes
    # the verdicts of what comes after. (tansu keeps its data in memory only, so its
    # process is never restarted here: the relay plays a process gone and back.)
    port = free_port()
    relay = Outage(port)
    broker = start_tansu(tmp_path, port=port, advertised=relay.port)
    try:
        topic = f"outage-{uuid.uuid4().hex[:8]}"
        broker.create_topic(topic, 2)
        rows = _interleaved(_conversations(2))
        half = len(rows) // 2
        _produce(broker, topic, rows[:half])
        relayed = KafkaBroker(f"127.0.0.1:{relay.port}", broker.process, 0.0, tmp_path)
        member = _member(relayed, topic, f"g-{topic}", "--gap-timeout", "0.5")
        _wait_for(lambda: len(_published(broker, f"{topic}.verdicts")) > 0, 60, "verdicts")
        time.sleep(1.5)  # commits
        if outage == "port-down":
            relay.down()
        else:
            broker.process.send_signal(signal.SIGSTOP)
        time.sleep(5)
        assert member.poll() is None, member.communicate()[1]
        if outage == "port-down":
            relay.up()
        else:
            broker.process.send_signal(signal.SIGCONT)
        _produce(broker, topic, rows[half:])
        err = _every_verdict_then_stopped(broker, topic, member, rows, tmp_path)
        assert _raw_librdkafka(err) == []
        if outage == "port-down":
            assert f"warning: every Kafka broker at {relayed.bootstrap} is down" in err
        assert "lost (the session timed out): rejoining group" in err
    finally:
        broker.process.send_signal(signal.SIGCONT)
        relay.down()
        broker.close()


def test_two_members_refuse_an_unkeyed_topic_and_share_it_once_rekeyed(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    topic = f"unkeyed-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, 4)
    rows = _interleaved(_conversations(1))
    kafka_broker.produce(topic, [(None, json.dumps(r)) for r in rows])
    group = f"g-{topic}"
    first = _member(kafka_broker, topic, group)
    time.sleep(3)  # the first owns every partition, and reads
    second = _member(kafka_broker, topic, group)
    # When the second joins, the first is given half the partitions: it stops, saying
    # why (and the second, then alone with every partition, may go on: stopped here).
    _, first_err = first.communicate(timeout=60)
    second.send_signal(signal.SIGTERM)
    second.communicate(timeout=60)
    assert first.returncode == 2, first_err
    text = first_err
    assert "is not keyed by conversation" in text and "mantle-stream rekey" in text
    # After rekey, two members share the keyed copy and publish the offline verdicts.
    rekeyed = run_cli("rekey", f"kafka://{kafka_broker.bootstrap}/{topic}", *FAST)
    assert rekeyed.returncode == 0, rekeyed.stderr
    keyed = f"{topic}.by_conversation"
    _together(_check(kafka_broker, keyed))
    assert _by_key(_published(kafka_broker, f"{keyed}.verdicts")) == _offline(tmp_path, rows)


def _with_a_bad_message(
    broker: KafkaBroker, topic: str, partitions: int, key: str | None
) -> list[dict[str, Any]]:
    """``topic`` created with the examples' events, ``{broken`` (keyed ``key``, else as
    the event after it) halfway through; the events."""
    broker.create_topic(topic, partitions)
    rows = _interleaved(_conversations(1))
    cut = len(rows) // 2
    messages = [(r["conversation_id"], json.dumps(r)) for r in rows]
    messages.insert(cut, (key or rows[cut]["conversation_id"], "{broken"))
    broker.produce(topic, messages)
    return rows


def test_a_bad_event_loses_no_verdict_of_the_events_before_it(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    # `--on-bad-event fail` stops at the bad event: what came before it is published and
    # committed; a run that skips bad events goes on from there, and nothing is lost.
    topic = f"bad-{uuid.uuid4().hex[:8]}"
    rows = _with_a_bad_message(kafka_broker, topic, 1, None)
    argv = _check(kafka_broker, topic)
    stopped = run_cli(*argv, "--on-bad-event", "fail")
    assert stopped.returncode == 2 and "bad event" in stopped.stderr
    assert len(_published(kafka_broker, f"{topic}.verdicts")) > 0
    done = run_cli(*argv, "--on-bad-event", "skip")
    assert done.returncode == 1, done.stderr
    everything = _published(kafka_broker, f"{topic}.verdicts")
    assert _by_key(everything) == _offline(tmp_path, rows)


def test_a_poison_message_is_skipped_by_default_and_dead_lettered(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    # A member's default: a message that does not decode is counted, named, published
    # to the dead-letter topic when one is named, and passed over; the rest is judged.
    topic = f"poison-{uuid.uuid4().hex[:8]}"
    rows = _with_a_bad_message(kafka_broker, topic, 2, "poisoned")
    done = run_cli(*_check(kafka_broker, topic), "--dead-letter-topic", f"{topic}.dead")
    assert done.returncode == 1, done.stderr  # failed verdicts, not a stop
    skipped = [line for line in done.stderr.splitlines() if "mantle-stream: skipped" in line]
    assert len(skipped) == 1 and skipped[0].startswith(f"mantle-stream: skipped {topic}[")
    assert skipped[0].endswith(": bad event: malformed JSON: object keys must be strings (byte 1)")
    assert json.loads(done.stdout)["warnings"]["bad_events"] == 1
    [(key, value, partition, offset)] = kafka_broker.consume_all(f"{topic}.dead")
    assert (key, value) == (b"poisoned", b"{broken")
    reader = Consumer(kafka_broker.consumer_config(f"dead-{topic}"))
    try:
        reader.assign([TopicPartition(f"{topic}.dead", partition, offset)])
        message = None
        while message is None:
            message = reader.poll(1)
        headers = {h[0]: h[1] for h in message.headers() or [] if isinstance(h[1], bytes)}
    finally:
        reader.close()
    source = headers["mantle_stream.source"].decode()
    assert source.startswith(f"{topic}[") and f"] (offset):{source.split('@')[1]}" in skipped[0]
    assert headers["mantle_stream.error"].decode() in skipped[0]
    assert _by_key(_published(kafka_broker, f"{topic}.verdicts")) == _offline(tmp_path, rows)


def test_several_scenarios_and_a_junk_row_in_a_keyed_topic(kafka_broker: KafkaBroker) -> None:
    # Conversations that name no scenario are not judged (nor saved); a row that names
    # no conversation, copied unkeyed, is a bad event, not a reason to refuse the group.
    topic = f"multi-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, 2)
    rows = [json.loads(line) for line in EVENTS.read_text().splitlines()]  # the results' ids
    kafka_broker.produce(
        topic, [(r["conversation_id"], json.dumps(r)) for r in rows] + [(None, "{junk")]
    )
    results = str(ROOT / "examples/eval/results/2026-12-01T09-00-00")
    argv = _check(kafka_broker, topic, "--on-bad-event", "skip", "--results", results,
                  scenario=SCENARIO.parent)  # fmt: skip
    judged = 0
    for out, err in _together(argv):
        assert "Traceback" not in err and "is not keyed" not in err
        judged += len(json.loads(out)["conversations"]) if out.strip() else 0
    assert judged == 13
    unnamed = _member(kafka_broker, topic, f"w-{topic}")  # no --results: none judged
    time.sleep(3)
    unnamed.send_signal(signal.SIGTERM)
    _, err = unnamed.communicate(timeout=60)
    assert "Traceback" not in err


def test_more_members_than_partitions_end_their_check(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    # One partition, two members: the one given none ends once the group is stable;
    # the other judges everything.
    topic = f"one-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, 1)
    rows = _interleaved(_conversations(1))
    _produce(kafka_broker, topic, rows)
    _together(_check(kafka_broker, topic))
    assert _by_key(_published(kafka_broker, f"{topic}.verdicts")) == _offline(tmp_path, rows)


def test_a_junk_state_record_is_reported_and_its_conversation_judged_afresh(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    # A record of the state topic that does not decode (not JSON; JSON of another
    # shape): counted, named, and its conversation judged from its events as read.
    topic = f"junkstate-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, 1)
    kafka_broker.create_topic(f"{topic}.state", 1, compact=True)
    rows = _interleaved(_conversations(1))
    _produce(kafka_broker, topic, rows)
    victim = rows[0]["conversation_id"]
    kafka_broker.produce(f"{topic}.state", [(victim, "{junk"), ("another", "[1, 2]")])
    done = run_cli(*_check(kafka_broker, topic))
    assert done.returncode == 1, done.stderr  # 12 of the 13 fail this scenario
    assert "Traceback" not in done.stderr and "SystemError" not in done.stderr
    said = [line for line in done.stderr.splitlines() if "not resumed" in line]
    assert said == [
        f"mantle-stream: warning: state of `{victim}` in {topic}.state[0]@0 not resumed "
        "(JSON is malformed: object keys must be strings (byte 1)): judged afresh from its "
        "events from here on",
        f"mantle-stream: warning: state of `another` in {topic}.state[0]@1 not resumed "
        "(Expected `object`, got `array`): judged afresh from its events from here on",
    ]
    assert json.loads(done.stdout)["kafka"]["not_resumed"] == 2
    assert _by_key(_published(kafka_broker, f"{topic}.verdicts")) == _offline(tmp_path, rows)


def test_a_check_publishes_no_verdict_or_stop_unless_asked(kafka_broker: KafkaBroker) -> None:
    # Re-judging a topic must not republish into what live consumers read: only the
    # check's own state topic is created.
    topic = f"quietcheck-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, 2)
    _produce(kafka_broker, topic, _interleaved(_conversations(1)))
    before = set(kafka_broker.admin.list_topics(timeout=5).topics)
    source = f"kafka://{kafka_broker.bootstrap}/{topic}"
    done = run_cli("check", str(SCENARIO), "--events", source, *FAST, "--format", "json")
    assert done.returncode == 1, done.stderr
    group = json.loads(done.stdout)["kafka"]
    assert group["published"] == 0
    created = set(kafka_broker.admin.list_topics(timeout=5).topics) - before
    assert created == {f"mantle_stream.state.{group['group']}.{topic}"}


def test_watch_topics_are_named_from_the_group(kafka_broker: KafkaBroker) -> None:
    # Two groups on one topic publish apart: `mantle_stream.KIND.GROUP.TOPIC`.
    topic = f"twogroups-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, 2)
    _produce(kafka_broker, topic, _interleaved(_conversations(1)))
    source = f"kafka://{kafka_broker.bootstrap}/{topic}"
    groups = [f"a-{topic}", f"b-{topic}"]
    argv = ["watch", str(SCENARIO), "--events", source, "--offsets", "earliest", *FAST]
    members = [_start(*argv, "--group", group) for group in groups]

    def published(group: str) -> dict[tuple[str, int], dict[str, Any]]:
        name = f"mantle_stream.verdicts.{group}.{topic}"
        if name not in kafka_broker.admin.list_topics(timeout=5).topics:
            return {}
        return _by_key(_published(kafka_broker, name))

    try:
        for group in groups:
            _wait_for(lambda g=group: len(published(g)) > 0, 60, f"verdicts of {group}")
        _wait_for(lambda: published(groups[0]) == published(groups[1]), 30, "the same verdicts")
    finally:
        for member in members:
            member.send_signal(signal.SIGTERM)
            member.communicate(timeout=60)
    stops = [f"mantle_stream.stops.{group}.{topic}" for group in groups]
    assert set(stops) <= set(kafka_broker.admin.list_topics(timeout=5).topics)


# ---------------------------------------------------------------------- what a user reads


def _raw_librdkafka(err: str) -> list[str]:
    """librdkafka's own log lines (``%LEVEL|TIME|FACILITY|...``) in ``err``."""
    return [line for line in err.splitlines() if line.startswith("%")]


def test_librdkafka_s_own_log_lines_never_reach_the_terminal(kafka_broker: KafkaBroker) -> None:
    # librdkafka says `%6|...|BGQUEUE|...` as a run's clients close: not actionable.
    topic = f"quiet-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, 2)
    _produce(kafka_broker, topic, _interleaved(_conversations(1)))
    done = run_cli(*_check(kafka_broker, topic))
    assert done.returncode == 1, done.stderr
    assert _raw_librdkafka(done.stderr) == []


@pytest.mark.parametrize("command", ["check", "watch"])
def test_no_broker_at_the_address_is_one_line_naming_it(command: str) -> None:
    port = free_port()  # nothing listens there: refused at once
    source = f"kafka://127.0.0.1:{port}/events"
    done = run_cli(command, str(SCENARIO), "--events", source, "--group", "g", timeout=60)
    assert done.returncode == 2, done.stderr
    joining, error = done.stderr.splitlines()  # (librdkafka's own lines: none)
    assert joining == f"mantle-stream: joining group `g` on {source}"
    assert error.startswith(f"mantle-stream: error: no Kafka broker answered at 127.0.0.1:{port}: ")
    assert error.endswith("Connection refused (after 0ms in state CONNECT)")


def test_a_missing_kafka_client_is_said_before_joining_the_group(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "confluent_kafka", None)
    done = run_cli_in_process("watch", str(SCENARIO), "--events", "kafka://127.0.0.1:1/events")
    assert done.returncode == 2
    assert done.stderr == (
        'mantle-stream: error: Kafka needs its client: pip install "mantle_stream[kafka]" '
        "(confluent-kafka)\n"
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--events", "kafka://127.0.0.1:1/events", "--on-bad-event", "fail"],
            "--dead-letter-topic takes the messages skipped: not with --on-bad-event fail",
        ),
        (["--events", str(EVENTS)], "--dead-letter-topic is for kafka:// sources"),
    ],
    ids=["fail", "not-kafka"],
)
def test_a_dead_letter_topic_where_nothing_would_go_is_a_usage_error(
    extra: list[str], message: str
) -> None:
    done = run_cli_in_process("check", str(SCENARIO), *extra, "--dead-letter-topic", "dead")
    assert done.returncode == 2
    assert done.stderr == f"mantle-stream: error: {message}\n"


def test_the_report_tells_joining_the_group_from_judging(kafka_broker: KafkaBroker) -> None:
    """The seconds until the group gave the member partitions and from then to its
    last events applied: the benchmark's steady-state rate is events ÷ the second."""
    topic = f"timed-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, 4)
    _produce(kafka_broker, topic, _interleaved(_conversations(2)))
    started = time.monotonic()
    done = run_cli(*_check(kafka_broker, topic))
    took = time.monotonic() - started
    group = json.loads(done.stdout)["kafka"]
    assert 0 < group["join_seconds"] < took, done.stderr
    assert 0 <= group["judge_seconds"] < took - group["join_seconds"]


def test_an_idle_member_does_not_commit_again(kafka_broker: KafkaBroker) -> None:
    """A commit flushes the producer and waits for the group coordinator: a member
    with nothing read or published since its last commit makes none."""
    topic = f"idle-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, 1)
    _produce(kafka_broker, topic, _interleaved(_conversations(1)))
    spec = KafkaSpec(bootstrap=kafka_broker.bootstrap, topic=topic, settings={})
    options = KafkaOptions(
        group=f"g-{topic}",
        offsets="earliest",
        state_topic=f"{topic}.state",
        commit_interval=0.2,
        consumer={k: str(v) for k, v in FAST_CONSUMER.items()},
    )
    member = Member(ms.Evaluator(ms.load_scenarios([SCENARIO])), spec, options)
    running = threading.Thread(target=member.run)
    running.start()
    try:
        _wait_for(lambda: member.stats().commits >= 1 and member.lag() == 0, 30, "read, commit")
        time.sleep(0.5)  # a commit of the last events read
        commits = member.stats().commits
        time.sleep(1.5)  # 7 commit intervals, nothing read
        assert member.stats().commits == commits
    finally:
        member.stop()
        running.join(30)
