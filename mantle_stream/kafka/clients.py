"""librdkafka clients built one way, for the member and for rekey.

Every client (consumer, producer, admin client) of a ``kafka://`` source gets
the spec's settings plus two callbacks: a ``logger`` that keeps librdkafka's
own log lines (``%3|...|FAIL|...``, ``%6|...|BGQUEUE|...``) off the terminal,
and an ``error_cb`` (:class:`ClientErrors`) that collects the errors those
lines repeat. What is actionable reaches the user as one line of ours: no
broker answering at the address (:func:`connect`, at start), every broker
down while running (a warning, once per outage), a fatal error (the end of
the run, with librdkafka's reason).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from mantle_stream.core.errors import FeedError
from mantle_stream.kafka.options import KafkaSpec, client_settings, kafka_client

__all__ = ["CONNECT_TIMEOUT", "ClientErrors", "connect", "settings"]

#: Seconds to wait for a broker to answer before giving up. A broker that
#: refuses the connection, a host that does not resolve or a failed
#: authentication ends the wait at once (librdkafka reports every broker down).
CONNECT_TIMEOUT = 10.0

_KEPT = 20  # errors kept for the reason of a failed connection


def _quiet_logger() -> logging.Logger:
    """librdkafka's log, kept off standard error: its errors come through ``error_cb``."""
    logger = logging.getLogger("mantle_stream.kafka.librdkafka")
    logger.propagate = False
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
    return logger


class ClientErrors:
    """The ``error_cb`` of a run's clients: the last errors, and the fatal one."""

    def __init__(self) -> None:
        self.recent: list[Any] = []  # KafkaError, newest last
        self.fatal: Any = None
        self._down_said = False

    def __call__(self, error: Any) -> None:
        self.recent.append(error)
        del self.recent[:-_KEPT]
        if error.fatal() and self.fatal is None:
            self.fatal = error

    def take(self, bootstrap: str) -> str | None:
        """Raise :class:`FeedError` on a fatal error; else a line to tell when every
        broker went down (once, until :meth:`recovered`); the errors are cleared."""
        if self.fatal is not None:
            raise FeedError(f"Kafka client failed: {self.fatal.str()}")
        down_code = kafka_client().KafkaError._ALL_BROKERS_DOWN
        down = any(e.code() == down_code for e in self.recent)
        self.recent.clear()
        if down and not self._down_said:
            self._down_said = True
            return f"every Kafka broker at {bootstrap} is down: retrying"
        return None

    def recovered(self) -> None:
        """The brokers answered again: a next outage is told again."""
        self._down_said = False


def settings(spec: KafkaSpec, errors: ClientErrors, **extra: Any) -> dict[str, Any]:
    """A client's settings: the spec's, the log kept quiet, errors to ``errors``."""
    return {
        **client_settings(spec),
        "error_cb": errors,
        "logger": _quiet_logger(),
        **extra,
    }


def connect(admin: Any, spec: KafkaSpec, errors: ClientErrors, timeout: float) -> Any:
    """The cluster's metadata (every topic: naming one could create it), or
    :class:`FeedError` naming the address when no broker answers there."""
    kafka = kafka_client()
    deadline = time.monotonic() + timeout
    while True:
        try:
            return admin.list_topics(timeout=min(0.5, timeout))
        except kafka.KafkaException as exc:
            last: Any = exc.args[0] if exc.args else exc
        admin.poll(0)  # serves error_cb
        codes = {err.code() for err in errors.recent}
        given_up = codes & {kafka.KafkaError._ALL_BROKERS_DOWN, kafka.KafkaError._AUTHENTICATION}
        if given_up or errors.fatal is not None or time.monotonic() >= deadline:
            reasons = [
                err.str()
                for err in errors.recent
                if err.code() != kafka.KafkaError._ALL_BROKERS_DOWN
            ]
            why = reasons[-1] if reasons else (last.str() if hasattr(last, "str") else str(last))
            if kafka.KafkaError._AUTHENTICATION in codes:
                raise FeedError(f"Kafka at {spec.bootstrap} refused to log in: {why}")
            waited = "" if given_up else f" within {timeout:g} s"
            raise FeedError(f"no Kafka broker answered at {spec.bootstrap}{waited}: {why}")
