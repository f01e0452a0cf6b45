"""Retention: which finished conversations an evaluator keeps, and what it keeps of the rest.

With ``keep_finished=None`` every finished conversation stays for ``results()``;
with N only the N most recent do, the older ones folded into the ``omitted()``
counters, so a listener that runs for weeks holds what is open now. Of each
conversation let go of, its id is kept for a while (a *tombstone*), so an
event that comes after is counted late and opens no new conversation.
"""

from __future__ import annotations

from collections import deque

from mantle_stream.core.engine.conversation import MAX_TOMBSTONES, Conversation, Conversations
from mantle_stream.core.errors import UsageError

__all__ = ["OMITTED", "Retention"]

#: The counters of the conversations let go of (``Evaluator.omitted``).
OMITTED = ("conversations", "passed", "failed", "assertions", "skipped", "errored", "unmatched")


class Retention:
    """Lets go of the oldest finished conversations beyond ``keep_finished``."""

    __slots__ = (
        "book",
        "finished_order",
        "keep_finished",
        "omitted",
        "tombstone_order",
        "tombstones",
    )

    def __init__(self, book: Conversations, keep_finished: int | None) -> None:
        if keep_finished is not None and keep_finished < 0:
            raise UsageError(f"keep_finished must be >= 0, got {keep_finished}")
        self.book = book
        self.keep_finished = keep_finished
        self.finished_order: deque[str] = deque()  # finished and kept, oldest first
        # Ids of conversations let go (late if seen again), oldest first in the
        # deque. (A dict used as a queue would rescan the deleted slots at its
        # front on every eviction: quadratic over a long run.)
        self.tombstones: set[str] = set()
        self.tombstone_order: deque[str] = deque()
        self.omitted = dict.fromkeys(OMITTED, 0)

    def finished(self, cid: str) -> None:
        """A conversation finished: let go of once it is old (:meth:`let_go`)."""
        if self.keep_finished is not None:
            self.finished_order.append(cid)

    def let_go(self) -> list[Conversation]:
        """Fold the oldest finished conversations beyond ``keep_finished`` into the
        ``omitted`` counters and return them (most calls: none).

        Their decisions were all reported when made; what is kept of each is
        its id, for a while, so an event that comes after is counted late.
        """
        order = self.finished_order
        keep = self.keep_finished
        gone: list[Conversation] = []
        while keep is not None and len(order) > keep:
            cid = order.popleft()
            conv = self.book.all.pop(cid, None)
            if conv is None:
                continue
            gone.append(conv)
            omitted = self.omitted
            if conv.plan is None:
                omitted["unmatched"] += 1
            else:
                self.book.judged -= 1  # (judged = those listed; unmatched = the others)
                verdicts = [r.verdict for r in conv.results if r is not None]
                omitted["conversations"] += 1
                omitted["passed"] += not conv.failed and "errored" not in verdicts
                omitted["failed"] += conv.failed
                omitted["assertions"] += len(conv.results)
                omitted["skipped"] += verdicts.count("skipped")
                omitted["errored"] += verdicts.count("errored")
            if cid not in self.tombstones:
                self.tombstones.add(cid)
                self.tombstone_order.append(cid)
                if len(self.tombstone_order) > MAX_TOMBSTONES:
                    self.tombstones.discard(self.tombstone_order.popleft())
        return gone
