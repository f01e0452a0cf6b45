"""Decoding JSON lines into :class:`~mantle_stream.core.events.model.Event` values.

The hot path of the whole tool: a chunk of lines is decoded in one msgspec
call (:meth:`EventDecoder.decode_lines`), payloads unchecked; a line with no
payload this version knows is a flat event (its ``event`` field is set), a
newer engine's kind (counted by name and skipped), or a bad event:
:meth:`EventDecoder.classify` tells which, from that line alone.
"""

from __future__ import annotations

import contextlib

import msgspec

from mantle_stream.core.errors import EventError
from mantle_stream.core.events.flat import flat_event
from mantle_stream.core.events.model import (
    LEGACY,
    PAYLOAD_FIELDS,
    UNKNOWN,
    WIRE_KEYS,
    Event,
    Payload,
    Skipped,
    excerpt,
    malformed,
    single_payload,
)

__all__ = [
    "MAX_LINE_BYTES",
    "MAX_UNKNOWN_KINDS",
    "EventDecoder",
    "LineNames",
    "conversation_of",
    "conversations_of",
    "decode_events",
    "line_names",
]

#: Longest line accepted; a longer one is a bad event (memory stays bounded).
MAX_LINE_BYTES = 1 << 20
#: Distinct unknown payload kinds counted by name; the rest count as "(others)".
MAX_UNKNOWN_KINDS = 100

_keys_of = msgspec.json.Decoder(dict[str, msgspec.Raw]).decode


class LineNames(msgspec.Struct):
    """The fields of a JSON line that say which conversation it belongs to, decoded
    alone (the rest of the line is skipped, not decoded).

    **The rule**, the one every reader applies (the engine, the SQL source and its
    workers, the Kafka member, ``rekey``): a ProtoJSON event names its conversation
    by ``conversation_id``; a flat tracker row (it has ``event``) by ``sender_id``,
    or ``conversation_id`` if it carries one. A ProtoJSON event with only
    ``sender_id`` names none (the engine rejects it).
    """

    conversation_id: str | None = None
    sender_id: str | None = None
    event: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET  # set: a flat row

    @property
    def flat(self) -> bool:
        return self.event is not msgspec.UNSET

    def conversation(self) -> str | None:
        """The conversation the line names (the rule above), None when it names none."""
        return self.conversation_id or (self.sender_id if self.flat else None) or None


_line_names = msgspec.json.Decoder(LineNames).decode


def line_names(line: bytes) -> LineNames | None:
    """:class:`LineNames` of a JSON line; None when it is not a JSON object whose
    naming fields have those types (a bad event, for the decoder to word)."""
    try:
        return _line_names(line)
    except (msgspec.DecodeError, RecursionError):
        return None


def conversation_of(line: bytes) -> str | None:
    """The conversation a JSON line names (:class:`LineNames`' rule), decoding only
    those fields; None when it names none or is not JSON."""
    names = line_names(line)
    return None if names is None else names.conversation()


_lines_names = msgspec.json.Decoder(LineNames).decode_lines


def conversations_of(chunk: bytes, count: int) -> list[str | None]:
    """:func:`conversation_of` of each of the ``count`` lines of ``chunk`` (``\\n``
    between them), decoded in one call; line by line when one is not JSON."""
    names: list[LineNames] | None = None
    with contextlib.suppress(msgspec.DecodeError, RecursionError):
        names = _lines_names(chunk)
    if names is None or len(names) != count:  # a bad or a blank line: find which
        return [conversation_of(line) for line in chunk.split(b"\n")[:count]]
    unset = msgspec.UNSET  # (LineNames.conversation inlined: a call per line costs as
    return [  # much as the decoding)
        n.conversation_id or (n.sender_id if n.event is not unset else None) or None for n in names
    ]


def decode_events(data: bytes | str, *, source: str = "<events>") -> list[Event]:
    """Every event of JSON lines in any shape Mantle writes (ProtoJSON with or without
    its envelope, flat tracker rows), in order: the library's one call to read events.

    A newer engine's kinds and older CALM rows are left out; a line that is not an
    event raises :class:`~mantle_stream.core.errors.EventError` naming ``source`` and
    the line. (A tracker document, ``{"sender_id", "events": [...]}``, is read by
    the feeds: :func:`mantle_stream.open_feed`.)
    """
    return EventDecoder(source).decode_chunk(data.encode() if isinstance(data, str) else data)


class EventDecoder:
    """Decodes JSON lines from one source into :class:`Event` values.

    ``source`` names the source in error messages. ``unknown`` counts payload
    kinds this version does not know (a newer engine's), ``legacy`` the older
    flat CALM rows no check reads (``slot``, ``flow_started``, ...); both are
    skipped.
    """

    def __init__(self, source: str = "<events>") -> None:
        self.source = source
        self.unknown: dict[str, int] = {}
        self.legacy: dict[str, int] = {}
        self._decoder = msgspec.json.Decoder(Event)
        # A newer engine's kinds, once seen, become fields of the decoded type
        # (see _learn): (attribute, kind) of each.
        self._learned: list[tuple[str, str]] = []

    def decode_lines(self, chunk: bytes) -> list[Event]:
        """Raw ``decode_lines``: no payload checks (the engine's fast path)."""
        events: list[Event] = self._decoder.decode_lines(chunk)
        return events

    def decode_chunk(self, chunk: bytes, first_line: int = 1) -> list[Event]:
        """Every event of complete JSON lines, line by line, for callers without an engine.

        Flat rows come back as the :class:`Event` they stand for; a newer
        engine's kinds and older CALM rows are counted and left out; a line
        that is not one event raises :class:`EventError` naming it.
        """
        out = []
        for offset, line in enumerate(chunk.split(b"\n")):
            decoded = self.decode_line(line, first_line + offset)
            if decoded is not None and decoded[1] is not UNKNOWN and decoded[1] is not LEGACY:
                out.append(decoded[0])
        return out

    def decode_line(self, line: bytes, line_no: int | None = None) -> tuple[Event, Payload] | None:
        """Decode one line into (event, payload); None for a blank line.

        The payload is :data:`UNKNOWN` for a kind this version does not know
        and :data:`LEGACY` for an older CALM row: the engine still orders
        such events (they may carry a ``sequence``) but routes them nowhere.
        """
        event = self.decode_raw(line, line_no)
        if event is None:
            return None
        payload = single_payload(event)
        if payload is None:
            unset = all(getattr(event, k) is None for k in PAYLOAD_FIELDS)
            return self.classify(event, line, line_no, unset)
        if not event.conversation_id:
            raise self._error("no `conversation_id`", line_no, line)
        return event, payload

    def decode_raw(self, line: bytes, line_no: int | None = None) -> Event | None:
        """One line as an :class:`Event`, payloads unchecked; None for a blank line."""
        if len(line) > MAX_LINE_BYTES:
            raise self._error(
                f"line is {len(line)} bytes, longer than the {MAX_LINE_BYTES}-byte limit",
                line_no,
                line[:200],
            )
        if not line.strip():
            return None
        try:
            event: Event = self._decoder.decode(line)
        except msgspec.ValidationError as exc:
            if line.lstrip()[:1] == b"[":
                raise self._array(line, line_no) from None
            raise self._error(str(exc), line_no, line) from None
        except msgspec.DecodeError as exc:
            raise self._error(malformed(exc), line_no, line) from None
        except RecursionError:
            raise self._error("JSON nested too deeply", line_no, line) from None
        return event

    def classify(
        self, event: Event, line: bytes, line_no: int | None, unset: bool = False
    ) -> tuple[Event, Payload]:
        """A line without exactly one payload field set: decoded again from ``line``.

        A flat event becomes the :class:`Event` it stands for; a newer
        engine's kind is counted and comes back with :data:`UNKNOWN`; anything
        else is a bad event (:class:`EventError`). ``unset``: the caller knows
        no payload field is set (then they are not counted again).
        """
        if event.event is not None:
            try:
                event, payload = flat_event(line)
            except EventError as exc:
                raise self._error(exc.message, line_no, line) from None
            if payload is LEGACY:
                self.count(self.legacy, event.event)
            return event, payload
        if not unset:
            known = [k for k in PAYLOAD_FIELDS if getattr(event, k) is not None]
            if known:
                raise self._error(
                    f"{len(known)} payload keys ({', '.join(known)}); expected exactly one",
                    line_no,
                    line,
                )
        if self._learned and self.learned_kind(event):
            return event, UNKNOWN
        kind = self._unknown_kind(line, line_no, learn=bool(event.conversation_id))
        if kind is not None and event.conversation_id:
            self.count(self.unknown, kind)
            return event, UNKNOWN
        # Not one: say why, from the line's keys.
        keys = self._keys(line, line_no)
        objects = [k for k, v in keys.items() if k not in WIRE_KEYS and bytes(v)[:1] == b"{"]
        if len(objects) == 1:
            raise self._error("no `conversation_id`", line_no, line)
        if not objects:
            raise self._error(
                "no payload key (expected exactly one, such as `user`, `bot`, "
                "`tool_executed`, `memory_set`)",
                line_no,
                line,
            )
        names = ", ".join(f"`{k}`" for k in objects)
        raise self._error(f"expected exactly one payload key, found {names}", line_no, line)

    def learned_kind(self, event: Event) -> bool:
        """Count ``event`` if it is of a newer kind decoded as a field of its own (see
        :meth:`_learn`): then its line need not be looked at again."""
        if not event.conversation_id:
            return False
        for attr, kind in self._learned:
            if getattr(event, attr, None) is not None:
                self.count(self.unknown, kind)
                return True
        return False

    def _unknown_kind(self, line: bytes, line_no: int | None, *, learn: bool) -> str | None:
        """The one payload key of ``line`` that this version does not know, or None.

        A payload is a JSON object: other unknown keys with plain values are
        envelope fields of a newer engine, and ignored like known ones.
        """
        keys = self._keys(line, line_no)
        objects = [k for k, v in keys.items() if k not in WIRE_KEYS and bytes(v)[:1] == b"{"]
        if len(objects) != 1:
            return None
        if learn:  # (a line that is a bad event anyway teaches nothing)
            self._learn(objects[0])
        return objects[0]

    def _learn(self, kind: str) -> None:
        """Decode ``kind`` as a field of its own from now on.

        A newer kind usually comes again and again: as a field (an empty
        :class:`Skipped`, like the kinds no check reads) the next chunks name
        it without a second parse of its line, so skipping it costs no more
        than applying a known event. At most ``MAX_UNKNOWN_KINDS`` are learnt.
        """
        if len(self._learned) >= MAX_UNKNOWN_KINDS or any(k == kind for _, k in self._learned):
            return  # (the rest of a chunk decoded before it was learnt comes here again)
        if not kind.isprintable() or '"' in kind or "\\" in kind:
            return  # not a name msgspec can decode as a field: read from its line each time
        self._learned.append((f"_new_kind_{len(self._learned)}", kind))
        learned = msgspec.defstruct(
            "Event",
            [(attr, Skipped | None, None) for attr, _ in self._learned],
            bases=(Event,),
            rename=dict(self._learned),
            kw_only=True,
            frozen=True,
            gc=False,
            module=__name__,
        )
        self._decoder = msgspec.json.Decoder(learned)

    def _keys(self, line: bytes, line_no: int | None) -> dict[str, msgspec.Raw]:
        try:
            keys: dict[str, msgspec.Raw] = _keys_of(line)
        except (msgspec.DecodeError, RecursionError) as exc:
            raise self._error(malformed(exc), line_no, line) from None
        return keys

    @staticmethod
    def count(counter: dict[str, int], kind: str) -> None:
        # Bounded: a hostile feed could invent a new key on every line.
        if kind not in counter and len(counter) >= MAX_UNKNOWN_KINDS:
            kind = "(others)"
        counter[kind] = counter.get(kind, 0) + 1

    def _array(self, line: bytes, line_no: int | None) -> EventError:
        """A JSON array where an event was expected: most likely a tracker's ``events``
        (``jq .events``), whose flat rows carry no conversation id of their own.
        Skipping it would judge nothing, so the hint says how to give it instead."""
        return EventError(
            "a JSON array, not an event: a source holds one event (a JSON object) a "
            'line, or one tracker document (`{"sender_id": ..., "events": [...]}`)',
            source=self.source,
            line=line_no,
            excerpt=excerpt(line),
            hint="give the whole tracker document rather than its `events` (what "
            "`jq .events` prints), or write one event a line with its conversation id: "
            "jq -c '.sender_id as $id | .events[] | .sender_id //= $id' TRACKER.json",
        )

    def _error(self, message: str, line_no: int | None, line: bytes) -> EventError:
        return EventError(message, source=self.source, line=line_no, excerpt=excerpt(line))
