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
from collections.abc import Callable

from mantle_stream.core.engine.checkpoints import Frozen
from mantle_stream.core.engine.conversation import (
    APPLIED_IDS,
    MAX_SEQUENCE_JUMP,
    RECENT_GAPS,
    RECENT_IDS,
    Conversation,
    Irregular,
)
from mantle_stream.core.engine.notes import Notes
from mantle_stream.core.errors import EventError, UsageError
from mantle_stream.core.events.model import (
    Event,
    Payload,
)
from mantle_stream.core.verdicts import Decision, Tally

__all__ = ["Ordering"]


class Ordering:
    """Applies each conversation's events in ``sequence`` order (see the module)."""

    __slots__ = (
        "apply",
        "arrivals",
        "frozen",
        "notes",
        "ordered",
        "releasing",
        "reorder_window",
        "tally",
    )

    def __init__(
        self,
        tally: Tally,
        notes: Notes,
        frozen: Frozen,
        apply: Callable[[Event, Payload, list[Decision]], None],
        *,
        reorder_window: int,
        ordered: bool,
    ) -> None:
        if reorder_window < 0:
            raise UsageError(f"the reorder window must be >= 0, got {reorder_window}")
        self.tally = tally
        self.notes = notes
        self.frozen = frozen  # finished conversations' encodings, stale when they change
        self.apply = apply  # one event, next in order, applied by the evaluator's hot loop
        self.reorder_window = reorder_window
        # The source delivers each conversation's events in the order they were
        # numbered (Feed.ordered; the Runner sets it from its feed): a gap never
        # fills, so it is passed at once rather than waited for (gaps_passed).
        self.ordered = ordered
        self.arrivals = 0  # tie-breaker keeping held events in arrival order
        self.releasing = False  # applying held events (the hot loop asks)

    def out_of_order(
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
            if event.event_id and self.seen_id(conv, event.event_id):
                self.tally.duplicates += 1
                self.notes.note("duplicates", conv.cid, None)
                return 0
            if conv.held:
                self.hold(conv, conv.max_seen, event, payload, out)
                return 0
            return None
        if seq <= conv.last_seq:
            if self.conflict(conv, event, seq):
                return None  # another event at that sequence: applied after the first
            return self.behind(conv, seq)
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
            self.give_up(conv, conv.last_seq + 1, seq - 1, passed=True)
        elif self.reorder_window:
            self.hold(conv, seq, event, payload, out)
            return 0
        else:
            self.give_up(conv, conv.last_seq + 1, seq - 1)  # no window: no waiting
        conv.last_seq = seq
        conv.applied_ids[seq & (APPLIED_IDS - 1)] = event.event_id
        return None

    def conflict(self, conv: Conversation, event: Event, seq: int) -> bool:
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
        if applied is None or applied == event_id or self.seen_id(conv, event_id):
            return False
        self.tally.sequence_conflicts += 1
        self.notes.note("sequence_conflicts", conv.cid, seq, ids=(event_id, applied))
        return True

    def behind(self, conv: Conversation, seq: int) -> int:
        """An event at or below the last applied sequence: 1 if it was replayed."""
        if seq <= conv.replay_upto:
            self.tally.replayed += 1  # applied before the restart
            return 1
        if conv.gave_up and any(lo <= seq <= hi for lo, hi in conv.gave_up):
            self.tally.late_events += 1  # its gap was given up on before it came
            self.notes.note("late_events", conv.cid, seq)
        else:
            self.tally.duplicates += 1
            self.notes.note("duplicates", conv.cid, seq)
        return 0

    def after_end(self, conv: Conversation, event: Event) -> int:
        """An event of a conversation that has ended: 1 if it was replayed."""
        seq = event.sequence
        if seq is None:
            if conv.replay_unsequenced:
                conv.replay_unsequenced -= 1
                self.tally.replayed += 1
                return 1
            self.frozen.thaw(conv.cid)
            conv.unsequenced += 1
            if event.event_id and self.seen_id(conv, event.event_id):
                self.tally.duplicates += 1
                self.notes.note("duplicates", conv.cid, None)
            else:
                self.tally.late_events += 1
                self.notes.note("late_events", conv.cid, None)
            return 0
        if seq <= conv.last_seq:
            return self.behind(conv, seq)
        if seq <= conv.replay_late:
            self.tally.replayed += 1  # counted late before the restart
            return 1
        self.tally.late_events += 1
        self.notes.note("late_events", conv.cid, seq)
        if seq > conv.late_max:
            self.frozen.thaw(conv.cid)
            conv.late_max = seq  # saved, so a resume counts it once
        return 0

    def seen_id(self, conv: Conversation, event_id: str) -> bool:
        """Remember the ids of recent sequence-less events (at most RECENT_IDS)."""
        recent = conv.recent_ids
        if recent is None:
            recent = conv.recent_ids = deque(maxlen=RECENT_IDS)
        elif event_id in recent:
            return True
        recent.append(event_id)
        return False

    def hold(
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
        heapq.heappush(held, (key, self.arrivals, event, payload))
        self.arrivals += 1
        self.tally.held += 1
        if len(held) > self.reorder_window:
            self.release(conv, out, force=1)

    def release(self, conv: Conversation, out: list[Decision], *, force: int = 0) -> None:
        """Apply the held events that are next in order; ``force`` gaps given up on."""
        held = conv.held
        self.releasing = True
        try:
            while held and not conv.finished:
                key, _, event, payload = held[0]
                if event.sequence is None:
                    if key > conv.last_seq:  # (the events it waits behind are held too)
                        if force <= 0:
                            break  # waits behind events it arrived after
                        force -= 1
                        self.give_up(conv, conv.last_seq + 1, key)
                        conv.last_seq = key
                elif key <= conv.last_seq:
                    if not self.conflict(conv, event, key):  # held twice: the first
                        heapq.heappop(held)  # copy was applied
                        self.tally.held -= 1
                        self.tally.duplicates += 1
                        self.notes.note("duplicates", conv.cid, key)
                        continue
                    # (Another event at that sequence: applied now, after the first.)
                elif key != conv.last_seq + 1:
                    if force <= 0:
                        break
                    force -= 1
                    self.give_up(conv, conv.last_seq + 1, key - 1)
                    conv.last_seq = key - 1
                heapq.heappop(held)
                self.tally.held -= 1
                self.tally.events -= 1  # counted once already, when it arrived
                self.apply(event, payload, out)
        finally:
            self.releasing = False
        if not held:
            conv.held = None

    def release_all(self, convs: list[Conversation], out: list[Decision]) -> None:
        """Apply every event held for ``convs``, giving up on their gaps."""
        for conv in convs:
            if conv.held:
                self.release(conv, out, force=len(conv.held))

    def give_up(self, conv: Conversation, lo: int, hi: int, *, passed: bool = False) -> None:
        """Sequences ``lo`` to ``hi`` are missing for good: counted under ``gaps`` (waited
        for), or ``gaps_passed`` (``passed``: an ordered source, nothing waited for);
        one that comes after all is late."""
        if passed:
            self.tally.gaps_passed += 1
        else:
            self.tally.gaps += 1
        self.notes.note("gaps_passed" if passed else "gaps", conv.cid, lo, hi if hi != lo else None)
        ids = conv.applied_ids
        for seq in range(max(lo, hi - APPLIED_IDS + 1), hi + 1):
            ids[seq & (APPLIED_IDS - 1)] = None  # nothing applied there
        gave_up = conv.gave_up
        if gave_up is None:
            gave_up = conv.gave_up = []
        gave_up.append((lo, hi))
        if len(gave_up) > RECENT_GAPS:
            del gave_up[0]

    def drop_held(self, conv: Conversation) -> None:
        """The conversation ended: events still held came after its end (or twice)."""
        if conv.held:
            again = 0
            for key, _, e, _ in conv.held:
                twice = e.sequence is not None and key <= conv.last_seq
                again += twice
                self.notes.note("duplicates" if twice else "late_events", conv.cid, e.sequence)
            self.tally.duplicates += again
            self.tally.late_events += len(conv.held) - again
            self.tally.held -= len(conv.held)
        conv.held = None
