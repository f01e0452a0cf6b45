"""The engine's ordering (core/engine/ordering.py), alone: sequence order, the reorder
window, gaps, duplicates and late events, with a recording stand-in for the hot loop."""

from __future__ import annotations

from collections import deque

import msgspec
import pytest

import mantle_stream as ms
from mantle_stream.core.engine.checkpoints import Frozen
from mantle_stream.core.engine.conversation import Conversation, Irregular
from mantle_stream.core.engine.notes import Notes
from mantle_stream.core.engine.ordering import Ordering
from mantle_stream.core.events.model import Event, Payload
from mantle_stream.core.verdicts import Decision, Occurrence, Tally


class _Loop:
    """What the hot loop does with an event ordering hands back: apply it (in order)."""

    def __init__(self, conv: Conversation) -> None:
        self.conv = conv
        self.applied: list[int | None] = []

    def apply(self, event: Event, payload: Payload, out: list[Decision]) -> None:
        self.applied.append(event.sequence)
        if event.sequence is not None:
            self.conv.last_seq = event.sequence
            self.conv.max_seen = max(self.conv.max_seen, event.sequence)


def _setup(
    window: int = 8, ordered: bool = False
) -> tuple[Ordering, Conversation, _Loop, Tally, Notes, Frozen]:
    tally, notes, frozen = Tally(), Notes(), Frozen()
    conv = Conversation("c", None)
    loop = _Loop(conv)
    ordering = Ordering(tally, notes, frozen, loop.apply, reorder_window=window, ordered=ordered)
    return ordering, conv, loop, tally, notes, frozen


def _event(seq: int | None, event_id: str | None = None) -> Event:
    return Event(conversation_id="c", sequence=seq, event_id=event_id, user=ms.User(text="hi"))


def _arrive(ordering: Ordering, conv: Conversation, loop: _Loop, seq: int | None) -> None:
    """One event as the hot loop meets it: applied when next in order, else ordering's."""
    event, out = _event(seq), list[Decision]()
    next_one = seq is not None and seq == conv.last_seq + 1
    if next_one or ordering.out_of_order(conv, event, event.payload, seq, out, 0) is None:
        loop.apply(event, event.payload, out)
    if conv.held and not ordering.releasing:
        ordering.release(conv, out)


def test_an_event_after_a_gap_waits_until_the_gap_fills() -> None:
    ordering, conv, loop, tally, _, _ = _setup()
    for seq in (0, 2, 3):
        _arrive(ordering, conv, loop, seq)
    assert loop.applied == [0] and tally.held == 2
    _arrive(ordering, conv, loop, 1)
    assert loop.applied == [0, 1, 2, 3] and tally.held == 0 and conv.held is None


def test_a_full_window_gives_up_on_the_oldest_gap() -> None:
    ordering, conv, loop, tally, notes, _ = _setup(window=1)
    for seq in (0, 2, 3):
        _arrive(ordering, conv, loop, seq)
    assert loop.applied == [0, 2, 3]
    assert tally.gaps == 1 and notes.occurrences == [Occurrence("gaps", "c", 1, None)]
    _arrive(ordering, conv, loop, 1)  # its gap was given up on: late
    assert tally.late_events == 1 and loop.applied == [0, 2, 3]


def test_an_ordered_source_passes_a_gap_at_once() -> None:
    ordering, conv, loop, tally, _, _ = _setup(ordered=True)
    for seq in (0, 3):
        _arrive(ordering, conv, loop, seq)
    assert loop.applied == [0, 3] and tally.gaps_passed == 1 and tally.gaps == 0


def test_an_event_again_is_a_duplicate_and_is_not_applied() -> None:
    ordering, conv, loop, tally, notes, _ = _setup()
    for seq in (0, 1, 1):
        _arrive(ordering, conv, loop, seq)
    assert loop.applied == [0, 1] and tally.duplicates == 1
    assert notes.occurrences == [Occurrence("duplicates", "c", 1, None)]


def test_rows_without_a_sequence_are_told_apart_by_their_event_id() -> None:
    ordering, conv, _, tally, _, _ = _setup()
    first, again = _event(None, "e1"), _event(None, "e1")
    assert ordering.out_of_order(conv, first, first.payload, None, [], 0) is None
    assert ordering.out_of_order(conv, again, again.payload, None, [], 0) == 0
    assert tally.duplicates == 1 and conv.unsequenced == 2


def test_a_jump_far_beyond_the_highest_sequence_is_a_bad_event() -> None:
    ordering, conv, loop, _, _, _ = _setup()
    _arrive(ordering, conv, loop, 0)
    event = _event(10**12)
    with pytest.raises(Irregular) as caught:
        ordering.out_of_order(conv, event, event.payload, 10**12, [], 5)
    assert caught.value.position == 5 and "a wrong number, not a gap" in caught.value.error.message


def test_an_event_after_the_end_is_late_and_makes_its_checkpoint_stale() -> None:
    ordering, conv, loop, tally, _, frozen = _setup()
    _arrive(ordering, conv, loop, 0)
    conv.finished = True
    frozen.waiting = deque()
    frozen.encoded["c"] = msgspec.Raw(b"{}")
    assert ordering.after_end(conv, _event(5)) == 0
    assert tally.late_events == 1 and conv.late_max == 5
    assert list(frozen.waiting) == ["c"] and "c" not in frozen.encoded  # encoded again


def test_what_is_still_held_at_the_end_is_counted_late() -> None:
    ordering, conv, loop, tally, _, _ = _setup()
    for seq in (0, 2, 3):
        _arrive(ordering, conv, loop, seq)
    ordering.drop_held(conv)
    assert tally.late_events == 2 and tally.held == 0 and conv.held is None


def test_a_negative_window_is_refused() -> None:
    with pytest.raises(ms.UsageError, match="reorder window must be >= 0"):
        _ = Ordering(
            Tally(), Notes(), Frozen(), _Loop(Conversation("c", None)).apply,
            reorder_window=-1, ordered=False,
        )  # fmt: skip


def test_notes_keep_a_bounded_number_of_each_warnings_events() -> None:
    from mantle_stream.core.verdicts import MAX_OCCURRENCES

    notes = Notes()
    for seq in range(MAX_OCCURRENCES + 5):
        notes.note("duplicates", "c", seq)
    notes.note("gaps", "c", 1, 2)
    assert len(notes.occurrences) == MAX_OCCURRENCES + 1
    assert notes.noted == {"duplicates": MAX_OCCURRENCES, "gaps": 1}
