"""What a Kafka partition's keys and headers say about the order of its conversations.

Kafka keeps order within a partition. A topic Rasa's producer keyed by
conversation (``partition_by_sender: true``) holds each conversation in one
partition, in the order Rasa numbered its events: a hole in a conversation's
``sequence`` there is an event Rasa never published (docs/semantics.md), so
the member passes it at once (the engine's ``ordered``) instead of waiting
``--gap-timeout`` for it. A topic ``mantle-stream rekey`` wrote is keyed the
same way but keeps the disorder of the unkeyed topic it was copied from (one
conversation read from several source partitions): rekey marks every record
it writes with the :data:`REKEYED` header, and such a partition's gaps are
waited for. So are those of a partition with a record keyed by something
other than its conversation (nothing says one key holds one conversation) or
with no key.
"""

from __future__ import annotations

from typing import Any

__all__ = ["REKEYED", "ForeignKey", "Headers", "PartitionOrder", "marked"]

#: The header rekey puts on every record it writes (value ``1``).
REKEYED = "mantle-stream-rekeyed"


Headers = list[tuple[str, str | bytes | None]]


def marked(headers: Headers | dict[str, str | bytes | None] | None) -> Headers:
    """A record's headers with the :data:`REKEYED` mark (once, however often copied)."""
    listed: Headers = list(headers.items() if isinstance(headers, dict) else headers or [])
    if not any(name == REKEYED for name, _ in listed):
        listed.append((REKEYED, b"1"))
    return listed


class ForeignKey:
    """The first record seen keyed by other than the conversation its event names."""

    __slots__ = ("conversation", "key", "offset", "partition")

    def __init__(self, key: bytes, conversation: str, partition: int, offset: int) -> None:
        self.key, self.conversation = key, conversation
        self.partition, self.offset = partition, offset


class PartitionOrder:
    """Which partitions deliver each of their conversations in order: until one of
    its records says otherwise (no key, another key, rekey's mark), for good."""

    __slots__ = ("_disordered", "foreign")

    def __init__(self) -> None:
        self._disordered: set[int] = set()
        self.foreign: ForeignKey | None = None  # the first, once seen (told once)

    def ordered(self, partition: int, messages: list[Any], cids: list[str | None]) -> bool:
        """True while every record read from ``partition`` (``messages`` now, each
        naming conversation ``cids[i]``) was keyed by its conversation and not
        copied by rekey. A record naming no conversation (a bad event) says
        nothing either way."""
        if partition in self._disordered:
            if self.foreign is None:  # (a rekeyed partition: keys still looked at)
                self._foreign(partition, messages, cids)
            return False
        keyed = self._foreign(partition, messages, cids)
        if not keyed or any(
            headers is not None and any(name == REKEYED for name, _ in headers)
            for headers in [m.headers() for m in messages]
        ):
            self._disordered.add(partition)
            return False
        return True

    def _foreign(self, partition: int, messages: list[Any], cids: list[str | None]) -> bool:
        """True when each record is keyed by its conversation; the first record keyed
        by another is kept in :attr:`foreign`. Each distinct (key, conversation) is
        looked at once (the sets are built in C)."""
        keys = [m.key() for m in messages]
        pairs = list(zip(keys, cids, strict=True))
        wrong = {
            (key, cid)
            for key, cid in set(pairs)
            if cid is not None and (key is None or key != cid.encode())
        }
        if not wrong:
            return True
        if self.foreign is None:
            for message, (key, cid) in zip(messages, pairs, strict=True):
                if key is not None and cid is not None and (key, cid) in wrong:
                    self.foreign = ForeignKey(key, cid, partition, message.offset())
                    break
        return False
