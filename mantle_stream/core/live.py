"""The rules of a live run, without a clock: which conversation to stop, and timers.

Pure core (no I/O, no clock): every live loop — the runner over a feed, the
Kafka group member, the gate in front of an agent — keeps the time itself and
passes ``now`` in, so these rules are written once and tested without waiting.

* :class:`StopRule` — which conversations a batch of decisions settles before
  they end, each named once, with the :class:`StopMessage` that tells it;
* :class:`GapTimer` — conversations whose events have waited ``timeout``
  seconds for a missing earlier ``sequence`` (their gaps are then given up on);
* :class:`IdleTimer` — open conversations that had no event for ``timeout``
  seconds (they are then finished);
* :class:`EventRate` — events per second over the last few observations.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Literal

from mantle_stream.core.verdicts import Decision, StopMessage, settling

if TYPE_CHECKING:
    from mantle_stream.core.engine.evaluator import Evaluator

__all__ = ["EventRate", "GapTimer", "IdleTimer", "StopRule", "StopWhen"]

#: ``settled``: stop once the outcome can no longer change (an assertion failed,
#: or every assertion is decided); ``failed``: only once an assertion failed.
StopWhen = Literal["settled", "failed"]


class StopRule:
    """Which conversations to stop, each once, and the message that tells it.

    Each conversation a message is returned for is recorded as stopped in the
    evaluator (:meth:`Evaluator.stop`): stopped early, in every output. With
    ``skip_pending`` what is still pending when it ends is ``skipped``; a
    Kafka member, which judges on whatever its simulator does, leaves it
    out. ``record=False``: the caller sends the stop later, or not at all
    (the gate answers the run's next message), and records it then.
    """

    def __init__(
        self,
        evaluator: Evaluator,
        *,
        when: StopWhen = "settled",
        skip_pending: bool = True,
        record: bool = True,
        remember: int | None = None,
    ) -> None:
        self.evaluator = evaluator
        self.when = when
        self.skip_pending = skip_pending
        self.record = record
        self.notified: set[str] = set()  # open conversations told to stop
        # The conversations told, in order: the last ``remember`` of them.
        self.stopped: deque[str] = deque(maxlen=remember)

    def forget(self, conversation_id: str) -> None:
        """The conversation is judged elsewhere from now on (its stop is not ours)."""
        self.notified.discard(conversation_id)

    def settled(self, decisions: Iterable[Decision]) -> list[StopMessage]:
        """Stop messages for the conversations this batch settled before their end."""
        return [message for message, _ in self.settling(decisions)]

    def settling(self, decisions: Iterable[Decision]) -> list[tuple[StopMessage, Decision]]:
        """:meth:`settled`, each message with the decision it names."""
        evaluator = self.evaluator
        out = []
        for cid, decision in settling(decisions).items():
            # A conversation that ended by itself has nothing left to save.
            if cid in self.notified or not evaluator.is_open(cid):
                continue
            if not evaluator.is_settled(cid):
                continue
            if self.when == "failed" and decision.verdict != "failed":
                continue
            result = evaluator.result(cid)
            self.notified.add(cid)
            self.stopped.append(cid)
            if self.record:
                evaluator.stop(cid, decision, skip_pending=self.skip_pending)
            # Settled now, so this batch holds the first failure, or (all passed)
            # the last decision.
            out.append((StopMessage.of(result, decision), decision))
        return out


class GapTimer:
    """Conversations holding events for a missing sequence, and since when."""

    def __init__(self, timeout: float) -> None:
        if timeout <= 0:
            raise ValueError(f"gap_timeout must be positive, not {timeout!r}")
        self.timeout = timeout
        self._since: dict[str, float] = {}

    def __bool__(self) -> bool:
        return bool(self._since)

    def forget(self, conversation_id: str) -> None:
        self._since.pop(conversation_id, None)

    def note(self, holding: Iterable[str], now: float) -> None:
        """These conversations hold events now (a wait already timed goes on)."""
        for cid in holding:
            self._since.setdefault(cid, now)

    def expired(self, holding: Iterable[str], now: float) -> list[str]:
        """Of the conversations holding events now, those that have waited ``timeout``
        seconds: forgotten here, their gaps to be given up on. Conversations no
        longer holding are forgotten too."""
        holding = set(holding)
        self._since = {cid: self._since.get(cid, now) for cid in holding}
        due = [cid for cid, since in self._since.items() if now - since >= self.timeout]
        for cid in due:
            del self._since[cid]
        return due


class IdleTimer:
    """Open conversations that have had no event for ``timeout`` seconds."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._seen: dict[str, tuple[int, float]] = {}  # -> (events, when that count came)

    def expired(self, open_now: Mapping[str, int], now: float) -> list[str]:
        """``open_now``: each open conversation's event count (the evaluator's
        ``open_conversations()``)."""
        for cid in [c for c in self._seen if c not in open_now]:
            del self._seen[cid]
        due = []
        for cid, count in open_now.items():
            seen = self._seen.get(cid)
            if seen is None or seen[0] != count:
                self._seen[cid] = (count, now)
            elif now - seen[1] >= self.timeout:
                del self._seen[cid]
                due.append(cid)
        return due


class EventRate:
    """Events per second over the last ``window`` observations."""

    def __init__(self, window: int = 12) -> None:
        self._points: deque[tuple[float, int]] = deque(maxlen=window)

    def add(self, now: float, events: int) -> None:
        self._points.append((now, events))

    def per_second(self) -> float | None:
        """The recent rate; None before two observations a moment apart."""
        if len(self._points) >= 2:
            (t0, e0), (t1, e1) = self._points[0], self._points[-1]
            if t1 > t0:
                return (e1 - e0) / (t1 - t0)
        return None
