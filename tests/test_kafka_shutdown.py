"""A Kafka member ends when told, whatever the broker and the group do meanwhile.

Against a real broker (tansu, ``tests/_kafka.py``) of each test's own, behind a
relay that can play its process gone (:class:`~_kafka.Outage`); members are the
command line run as subprocesses.
"""

from __future__ import annotations

import signal
import time
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from test_kafka_member import (
    _by_key,
    _check,
    _conversations,
    _every_verdict_then_stopped,
    _interleaved,
    _member,
    _offline,
    _produce,
    _published,
    _start,
    _status,
    _wait_for,
)

from _kafka import KafkaBroker, Outage, free_port, kafka_broker, start_tansu

__all__ = ["kafka_broker"]

#: Seconds a member told to stop may take when no broker answers: the last commit
#: is given up on after a few seconds (what was not committed is judged again by
#: the next owner, as after a crash), and leaving the group waits for nobody.
ENDS_WITHIN = 20.0


@pytest.mark.slow  # a broker of its own: 20 s
def test_sigterm_ends_a_member_whose_broker_is_gone(tmp_path: Path) -> None:
    port = free_port()
    relay = Outage(port)
    broker = start_tansu(tmp_path, port=port, advertised=relay.port)
    try:
        topic = f"gone-{uuid.uuid4().hex[:8]}"
        broker.create_topic(topic, 2)
        _produce(broker, topic, _interleaved(_conversations(2)))
        relayed = KafkaBroker(f"127.0.0.1:{relay.port}", broker.process, 0.0, tmp_path)
        junit = tmp_path / "junit.xml"
        member = _member(relayed, topic, f"g-{topic}", "--junit", str(junit))
        _wait_for(lambda: len(_published(broker, f"{topic}.verdicts")) > 0, 60, "verdicts")
        relay.down()  # the broker's process is gone, and stays gone
        time.sleep(1)
        member.send_signal(signal.SIGTERM)
        told = time.monotonic()
        out, err = member.communicate(timeout=120)
        took = time.monotonic() - told
        assert took < ENDS_WITHIN, (took, err)
        assert "Traceback" not in err, err
        assert "not committed" in err, err  # said, not hidden
        # Its outputs are written: the verdicts it decided, in the report at the end.
        assert junit.exists(), (took, member.returncode, err)
        cases = ET.parse(junit).getroot().iter("testcase")
        assert len(list(cases)) > 0
        assert " FAILED " in out
    finally:
        relay.down()
        broker.close()


def test_a_member_fenced_from_its_group_rejoins_and_ends(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    # A member that does not poll for longer than the session timeout (a long batch, a
    # paused process) is dropped by the group coordinator; its next commit is refused
    # (`Unknown member`). It rejoins, judges what comes after, and ends when told.
    topic = f"fenced-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, 2)
    rows = _interleaved(_conversations(2))
    half = len(rows) // 2
    _produce(kafka_broker, topic, rows[:half])
    member = _member(kafka_broker, topic, f"g-{topic}", "--gap-timeout", "0.5")
    try:
        _wait_for(lambda: len(_published(kafka_broker, f"{topic}.verdicts")) > 0, 60, "verdicts")
        time.sleep(1.5)  # commits
        member.send_signal(signal.SIGSTOP)
        time.sleep(5)  # over three times the 1.5 s session timeout
        member.send_signal(signal.SIGCONT)
        _produce(kafka_broker, topic, rows[half:])
        _every_verdict_then_stopped(kafka_broker, topic, member, rows, tmp_path, ENDS_WITHIN)
    finally:
        member.send_signal(signal.SIGCONT)
        if member.poll() is None:
            member.kill()
            member.communicate()


def test_two_check_members_end_when_one_was_fenced_midway(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    # Two `check` members share four partitions; one stops answering for longer than
    # its session in the middle of the topic, so the other is given every partition
    # and the paused one's commits are refused (`Unknown member`) until it rejoins;
    # if it reaches its end first, its last commit is refused too: said, and what it
    # read since its last commit is judged again by the other. Both end at the end of
    # the topic, each with its report, and every verdict is the offline one.
    topic = f"fenced-check-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, 4)
    rows = _interleaved(_conversations(40))
    _produce(kafka_broker, topic, rows)
    running = [_start(*_check(kafka_broker, topic)) for _ in range(2)]
    try:
        _wait_for(lambda: len(_published(kafka_broker, f"{topic}.verdicts")) > 0, 60, "verdicts")
        running[0].send_signal(signal.SIGSTOP)
        time.sleep(4)
        running[0].send_signal(signal.SIGCONT)
        for member in running:
            out, err = member.communicate(timeout=90)
            assert member.returncode == _status(out), err
            assert "Traceback" not in err, err
        assert _by_key(_published(kafka_broker, f"{topic}.verdicts")) == _offline(tmp_path, rows)
    finally:
        for member in running:
            member.send_signal(signal.SIGCONT)
            if member.poll() is None:
                member.kill()
                member.communicate()
