"""Order: events applied in ``sequence`` order, whatever order they arrive in.

The evaluator's hot loop applies an event that is the next in its
conversation at once; everything else comes here: rows without a sequence
(arrival order, de-duplicated by ``event_id``), events after a gap (held in
the reorder window until the gap fills or is given up on; passed at once when
the source is ``ordered``), duplicates, late events, and events seen again
after a restore.
"""

from __future__ import annotations

import heapq
from collections import deque

import msgspec

from mantle_stream.core.engine.conversation import (
    APPLIED_IDS,
    MAX_SEQUENCE_JUMP,
    RECENT_GAPS,
    RECENT_IDS,
    Conversation,
    Irregular,
)
from mantle_stream.core.errors import EventError
from mantle_stream.core.events.model import (
    Event,
    Payload,
)
from mantle_stream.core.verdicts import (
    MAX_OCCURRENCES,
    Decision,
    Occurrence,
    Tally,
)

__all__ = ["Ordering"]


class Ordering:
    """The evaluator's ordering: a mixin of :class:`~.evaluator.Evaluator`."""

    reorder_window: int
    ordered: bool
    tally: Tally
    _occurrences: list[Occurrence]
    _noted: dict[str, int]  # occurrences kept, per warning
    _arrivals: int
    _releasing: bool
    _frozen: dict[str, msgspec.Raw]  # finished conversations' encoded states (checkpoints)
    _unfrozen: deque[str] | None

    def _run(
        self, events: list[Event], out: list[Decision], *, known: Payload | None = None
    ) -> None:
        """Apply events (the evaluator's hot loop)."""
        raise NotImplementedError

    def _note(
        self,
        warning: str,
        cid: str,
        seq: int | None,
        last: int | None = None,
        ids: tuple[str, str] | None = None,
    ) -> None:
        """Remember where a warning's event was (the report names it), up to a bound per
        warning: a hostile feed could send a million duplicates. ``ids``: a sequence
        conflict's event and the one applied before it at that sequence."""
        n = self._noted.get(warning, 0)
        if n < MAX_OCCURRENCES:
            self._noted[warning] = n + 1
            if ids is None:
                self._occurrences.append(Occurrence(warning, cid, seq, last))
            else:
                self._occurrences.append(Occurrence(warning, cid, seq, last, *ids))

    def _out_of_order(
        self,
        conv: Conversation,
        event: Event,
        payload: Payload,
        seq: int | None,
        out: list[Decision],
        position: int,
    ) -> int | None:
        """An event without a sequence, or not the next one: None to apply it now, else
        how many events it counts as replayed (0 or 1) once held, skipped or counted.

        A row without a sequence is applied in arrival order (its ``event_id`` is
        the only way to know it was seen before); one after a gap is held in the
        reorder window; one at or below the last applied is a duplicate, late,
        or replayed after a restore; one far beyond any before is a bad event.
        """
        if seq is None:
            if conv.replay_unsequenced:
                conv.replay_unsequenced -= 1  # seen before the restore
                self.tally.replayed += 1
                return 1
            conv.unsequenced += 1
            if event.event_id and self._seen_id(conv, event.event_id):
                self.tally.duplicates += 1
                self._note("duplicates", conv.cid, None)
                return 0
            if conv.held:
                self._hold(conv, conv.max_seen, event, payload, out)
                return 0
            return None
        if seq <= conv.last_seq:
            if self._conflict(conv, event, seq):
                return None  # another event at that sequence: applied after the first
            return self._behind(conv, seq)
        if seq > conv.max_seen:
            if conv.max_seen >= 0 and seq - conv.max_seen > MAX_SEQUENCE_JUMP:
                # A typo of 10**12 would otherwise become the high-water mark and
                # make every later event a duplicate.
                raise Irregular(
                    EventError(
                        f"`sequence` {seq} is more than {MAX_SEQUENCE_JUMP:,} beyond the "
                        f"highest this conversation has had ({conv.max_seen}): a wrong "
                        "number, not a gap"
                    ),
                    position,
                )
            conv.max_seen = seq
        if self.ordered:  # what is missing was never sent: nothing to wait for
            self._give_up(conv, conv.last_seq + 1, seq - 1, passed=True)
        elif self.reorder_window:
            self._hold(conv, seq, event, payload, out)
            return 0
        else:
            self._give_up(conv, conv.last_seq + 1, seq - 1)  # no window: no waiting
        conv.last_seq = seq
        conv.applied_ids[seq & (APPLIED_IDS - 1)] = event.event_id
        return None

    def _conflict(self, conv: Conversation, event: Event, seq: int) -> bool:
        """True when ``event``, at or below the last applied sequence, is another event
        than the one applied at ``seq`` (its ``event_id`` differs): a sequence
        conflict, counted and named, to be applied after the first. Rasa's SQL
        tracker store renumbers in some session-restart paths, so the broker can
        carry two events at one sequence. A conflict delivered again is a duplicate
        (its id is remembered with those of rows without a sequence)."""
        event_id = event.event_id
        if not event_id or seq <= conv.last_seq - APPLIED_IDS or seq <= conv.replay_upto:
            return False  # nothing to tell it by, or too far back to know
        applied = conv.applied_ids[seq & (APPLIED_IDS - 1)]
        if applied is None or applied == event_id or self._seen_id(conv, event_id):
            return False
        self.tally.sequence_conflicts += 1
        self._note("sequence_conflicts", conv.cid, seq, ids=(event_id, applied))
        return True

    def _behind(self, conv: Conversation, seq: int) -> int:
        """An event at or below the last applied sequence: 1 if it was replayed."""
        if seq <= conv.replay_upto:
            self.tally.replayed += 1  # applied before the restart
            return 1
        if conv.gave_up and any(lo <= seq <= hi for lo, hi in conv.gave_up):
            self.tally.late_events += 1  # its gap was given up on before it came
            self._note("late_events", conv.cid, seq)
        else:
            self.tally.duplicates += 1
            self._note("duplicates", conv.cid, seq)
        return 0

    def _after_end(self, conv: Conversation, event: Event) -> int:
        """An event of a conversation that has ended: 1 if it was replayed."""
        seq = event.sequence
        if seq is None:
            if conv.replay_unsequenced:
                conv.replay_unsequenced -= 1
                self.tally.replayed += 1
                return 1
            self._thaw(conv)
            conv.unsequenced += 1
            if event.event_id and self._seen_id(conv, event.event_id):
                self.tally.duplicates += 1
                self._note("duplicates", conv.cid, None)
            else:
                self.tally.late_events += 1
                self._note("late_events", conv.cid, None)
            return 0
        if seq <= conv.last_seq:
            return self._behind(conv, seq)
        if seq <= conv.replay_late:
            self.tally.replayed += 1  # counted late before the restart
            return 1
        self.tally.late_events += 1
        self._note("late_events", conv.cid, seq)
        if seq > conv.late_max:
            self._thaw(conv)
            conv.late_max = seq  # saved, so a resume counts it once
        return 0

    def _thaw(self, conv: Conversation) -> None:
        """A finished conversation's state changes (what came after its end): its
        encoding for checkpoints is stale, so it is encoded again for the next one."""
        if self._frozen.pop(conv.cid, None) is not None and self._unfrozen is not None:
            self._unfrozen.append(conv.cid)

    def _seen_id(self, conv: Conversation, event_id: str) -> bool:
        """Remember the ids of recent sequence-less events (at most RECENT_IDS)."""
        recent = conv.recent_ids
        if recent is None:
            recent = conv.recent_ids = deque(maxlen=RECENT_IDS)
        elif event_id in recent:
            return True
        recent.append(event_id)
        return False

    def _hold(
        self, conv: Conversation, key: int, event: Event, payload: Payload, out: list[Decision]
    ) -> None:
        """Keep an event that arrived after a gap, in sequence order.

        ``key`` is its sequence, or for a row without one the highest sequence
        that had arrived before it. When the window overflows, the oldest gap
        is given up on.
        """
        held = conv.held
        if held is None:
            held = conv.held = []
        heapq.heappush(held, (key, self._arrivals, event, payload))
        self._arrivals += 1
        self.tally.held += 1
        if len(held) > self.reorder_window:
            self._release(conv, out, force=1)

    def _release(self, conv: Conversation, out: list[Decision], *, force: int = 0) -> None:
        """Apply the held events that are next in order; ``force`` gaps given up on."""
        held = conv.held
        self._releasing = True
        try:
            while held and not conv.finished:
                key, _, event, payload = held[0]
                if event.sequence is None:
                    if key > conv.last_seq:  # (the events it waits behind are held too)
                        if force <= 0:
                            break  # waits behind events it arrived after
                        force -= 1
                        self._give_up(conv, conv.last_seq + 1, key)
                        conv.last_seq = key
                elif key <= conv.last_seq:
                    if not self._conflict(conv, event, key):  # held twice: the first
                        heapq.heappop(held)  # copy was applied
                        self.tally.held -= 1
                        self.tally.duplicates += 1
                        self._note("duplicates", conv.cid, key)
                        continue
                    # (Another event at that sequence: applied now, after the first.)
                elif key != conv.last_seq + 1:
                    if force <= 0:
                        break
                    force -= 1
                    self._give_up(conv, conv.last_seq + 1, key - 1)
                    conv.last_seq = key - 1
                heapq.heappop(held)
                self.tally.held -= 1
                self.tally.events -= 1  # counted once already, when it arrived
                self._run([event], out, known=payload)
        finally:
            self._releasing = False
        if not held:
            conv.held = None

    def _give_up(self, conv: Conversation, lo: int, hi: int, *, passed: bool = False) -> None:
        """Sequences ``lo`` to ``hi`` are missing for good: counted under ``gaps`` (waited
        for), or ``gaps_passed`` (``passed``: an ordered source, nothing waited for);
        one that comes after all is late."""
        if passed:
            self.tally.gaps_passed += 1
        else:
            self.tally.gaps += 1
        self._note("gaps_passed" if passed else "gaps", conv.cid, lo, hi if hi != lo else None)
        ids = conv.applied_ids
        for seq in range(max(lo, hi - APPLIED_IDS + 1), hi + 1):
            ids[seq & (APPLIED_IDS - 1)] = None  # nothing applied there
        gave_up = conv.gave_up
        if gave_up is None:
            gave_up = conv.gave_up = []
        gave_up.append((lo, hi))
        if len(gave_up) > RECENT_GAPS:
            del gave_up[0]

    def _drop_held(self, conv: Conversation) -> None:
        """The conversation ended: events still held came after its end (or twice)."""
        if conv.held:
            again = 0
            for key, _, e, _ in conv.held:
                twice = e.sequence is not None and key <= conv.last_seq
                again += twice
                self._note("duplicates" if twice else "late_events", conv.cid, e.sequence)
            self.tally.duplicates += again
            self.tally.late_events += len(conv.held) - again
            self.tally.held -= len(conv.held)
        conv.held = None
