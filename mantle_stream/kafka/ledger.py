"""What a Kafka member owes the state topic and its committed offsets.

Between two commits the member (:mod:`mantle_stream.kafka.member`) notes here,
per conversation it judges, the partition its events come from and the offset
of its last one, and which conversations must be read again after a restart
(holding events in a reorder window, or buffered until they name their
scenario). A commit asks the ledger two things, in this order: the offset
each partition may commit (never past the first event of a conversation that
must be read again), and the state records to write before it (the changed
state of each open conversation; a finished one's final state while the
offset is still below its last event, so what is read again is skipped; a
tombstone once the offset has passed it). Nothing here talks to a broker.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import msgspec

from mantle_stream.core.engine.checkpoints import ConversationState
from mantle_stream.core.engine.conversation import ScenarioStatus
from mantle_stream.core.engine.evaluator import Evaluator

__all__ = ["Ledger", "StateRecord"]

_encode = msgspec.json.Encoder().encode


class StateRecord(msgspec.Struct, frozen=True):
    """A record for the state topic: a conversation's encoded state, or a tombstone."""

    conversation_id: str
    partition: int
    value: bytes | None


class Ledger:
    """The conversations a member judges, by partition, and what their commit needs.

    ``on_forget`` is called for each conversation let go of (the member's own
    per-conversation timers forget it too)."""

    def __init__(self, evaluator: Evaluator, on_forget: Callable[[str], object]) -> None:
        self.evaluator = evaluator
        self.on_forget = on_forget
        self.owner: dict[str, int] = {}  # conversation -> its partition (until let go of)
        self.last: dict[str, int] = {}  # conversation -> offset of its last message
        self.written: dict[str, int] = {}  # conversation -> events in the state written
        self.ended: set[str] = set()  # finished, its final state written, not tombstoned
        # Conversations whose events must be read again after a restart: holding events
        # in a reorder window, or buffered until they name their scenario.
        self.hold_from: dict[str, tuple[int, int]] = {}  # -> (partition, offset)
        self.next: dict[int, int] = {}  # partition -> offset after the last applied

    def __len__(self) -> int:
        return len(self.owner)

    def own(self, partition: int, cids: list[str | None], offsets: list[int]) -> None:
        """Note the conversations of messages applied (``cids`` the conversation each
        names, at ``offsets``): their partition, their last offset, and which must be
        read again from here after a restart.

        Per conversation, not per message: the dictionaries below are built in C."""
        if not offsets:
            return
        evaluator = self.evaluator
        owner, last = self.owner, self.last
        latest: dict[str | None, int] = dict(zip(cids, offsets, strict=True))  # -> last offset
        latest.pop(None, None)
        for cid, offset in cast(dict[str, int], latest).items():
            if cid not in owner:
                naming = evaluator.naming(cid)
                if naming in (
                    ScenarioStatus.WAITING,
                    ScenarioStatus.CANDIDATES,
                ):  # buffered: read again until it is named
                    first = offsets[cids.index(cid)]
                    self.hold_from.setdefault(cid, (partition, first))
                elif naming != ScenarioStatus.JUDGED:
                    continue  # never judged here: nothing to save
                owner[cid] = partition
            last[cid] = offset

    def holding(self, partition: int, offset: int) -> list[str]:
        """The conversations holding events in a reorder window now, each read again
        from ``offset`` of ``partition`` at the latest."""
        holding = self.evaluator.holding()
        for cid in holding:
            self.hold_from.setdefault(cid, (partition, offset))
        return holding

    def offsets(self, partitions: set[int]) -> dict[int, int]:
        """The offset each of ``partitions`` may commit: after the last message applied,
        never past the first of a conversation that must be read again."""
        evaluator = self.evaluator
        holding = set(evaluator.holding())
        for cid in list(self.hold_from):
            if cid not in holding and evaluator.naming(cid) != ScenarioStatus.WAITING:
                del self.hold_from[cid]
        offsets: dict[int, int] = {}
        for partition in partitions:
            if partition in self.next:
                pins = [o for p, o in self.hold_from.values() if p == partition]
                offsets[partition] = min([self.next[partition], *pins])
        return offsets

    def states(self, partitions: set[int], offsets: dict[int, int]) -> list[StateRecord]:
        """The state records to write before ``offsets`` are committed (see the module);
        taken as written. A finished conversation never read again is let go of."""
        evaluator = self.evaluator
        records: list[StateRecord] = []
        for cid, partition in list(self.owner.items()):
            if partition not in partitions:
                continue
            committed = offsets.get(partition, 0)
            if evaluator.is_open(cid):
                if evaluator.naming(cid) != ScenarioStatus.JUDGED:
                    continue  # waiting for its scenario: read again, not saved
                state = evaluator.conversation_state(cid)
                if committed == self.next.get(partition):
                    # Nothing of it is read again: no row without a sequence to skip.
                    state = msgspec.structs.replace(state, unsequenced=0)
                if self.written.get(cid) != state.events:
                    records.append(StateRecord(cid, partition, _encode(state)))
                    self.written[cid] = state.events
            elif (
                self.last.get(cid, -1) >= committed
                and evaluator.naming(cid) == ScenarioStatus.JUDGED
            ):
                if cid not in self.ended:  # read again: its final state skips it all
                    state = evaluator.conversation_state(cid)
                    records.append(StateRecord(cid, partition, _encode(state)))
                    self.ended.add(cid)
                    self.written[cid] = state.events
            else:  # finished, and never read again: its state is no longer needed
                if cid in self.written:
                    records.append(StateRecord(cid, partition, None))
                self.forget(cid)
        return records

    def restored(self, cid: str, partition: int, state: ConversationState) -> None:
        """A conversation resumed from the state topic's record of it."""
        self.owner[cid] = partition
        self.written[cid] = state.events
        if state.finished:
            self.ended.add(cid)
            self.last[cid] = -1  # tombstoned once the member commits past it

    def forget(self, cid: str) -> None:
        """Let go of a conversation's bookkeeping."""
        self.owner.pop(cid, None)
        self.last.pop(cid, None)
        self.written.pop(cid, None)
        self.ended.discard(cid)
        self.hold_from.pop(cid, None)
        self.on_forget(cid)

    def let_go(self, partitions: set[int]) -> None:
        """Partitions given to another member: their conversations are its to judge."""
        for cid, partition in list(self.owner.items()):
            if partition in partitions:
                if self.evaluator.is_open(cid):
                    self.evaluator.forget(cid)
                self.forget(cid)
        for partition in partitions:
            self.next.pop(partition, None)
