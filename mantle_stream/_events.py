"""The event wire format: the one module that knows field names on the wire.

Mantle publishes tracker events as ProtoJSON: an envelope (``conversation_id``,
``sequence``, ``event_id``, ...) plus exactly one payload key such as
``{"user": {"text": "hi"}}``. Older flat rows (``{"event": "user", ...}``) are
read too ("dual-read"). See ``spec/events.md``.

Decoding strategy (the hot path of the whole tool):

* :class:`Event` is one msgspec Struct with one optional field per payload kind
  (the fastest shape for an external-tag payload). "Exactly one payload" is
  checked by :func:`single_payload` with two ``or`` chains over the payload
  fields, in opposite orders: the first set field from the front and the
  first from the back are the same object only when exactly one is set.
  That is 18 attribute reads, about half the cost of ``astuple`` plus
  counting the ``None`` items (which compares every envelope value with None).
* The engine (``Evaluator.push_chunk``) decodes a whole chunk of lines at
  once with :meth:`EventDecoder.decode_lines`. A line that is not one regular
  event (a legacy row, an unknown kind, a bad event) is decoded again on its
  own with :meth:`EventDecoder.decode_line`, which names the exact line and
  maps legacy rows; :meth:`EventDecoder.decode_chunk` is that slow path for a
  whole chunk, for callers that want events without an evaluator.
* Every struct is ``gc=False``: events hold no cycles, and keeping millions of
  them out of the garbage collector's reach keeps collections short.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

import msgspec

from mantle_stream._errors import EventError

__all__ = [
    "MAX_LINE_BYTES",
    "MAX_UNKNOWN_KINDS",
    "PAYLOAD_TYPES",
    "Bot",
    "BotButton",
    "Event",
    "EventDecoder",
    "MemoryCleared",
    "MemorySet",
    "OrderedBlockCancelled",
    "OrderedBlockCompleted",
    "OrderedBlockEntered",
    "OrderedBlockEvent",
    "OrderedBlockInterrupted",
    "OrderedBlockResumed",
    "Payload",
    "SessionEnded",
    "SessionStarted",
    "SkillActivated",
    "SkillCancelled",
    "SkillCompleted",
    "SkillEvent",
    "SkillInterrupted",
    "SkillResumed",
    "ToolExecuted",
    "User",
    "parse_json_value",
]

#: Longest line accepted; a longer one is a bad event (memory stays bounded).
MAX_LINE_BYTES = 1 << 20
#: Distinct unknown payload kinds counted by name; the rest count as "(others)".
MAX_UNKNOWN_KINDS = 100


class Payload(msgspec.Struct, frozen=True, gc=False):
    """Base of every payload; ``kind`` is its wire key."""

    kind: ClassVar[str]


class SessionStarted(Payload, frozen=True, gc=False):
    kind: ClassVar[str] = "session_started"


class SessionEnded(Payload, frozen=True, gc=False):
    kind: ClassVar[str] = "session_ended"


class User(Payload, frozen=True, gc=False):
    text: str | None = None
    kind: ClassVar[str] = "user"


class BotButton(msgspec.Struct, frozen=True, gc=False):
    title: str
    payload: str | None = None


class Bot(Payload, frozen=True, gc=False):
    text: str | None = None
    utter_name: str | None = None
    buttons: tuple[BotButton, ...] = ()
    kind: ClassVar[str] = "bot"


class MemorySet(Payload, frozen=True, gc=False):
    name: str
    value_json: str
    kind: ClassVar[str] = "memory_set"


class MemoryCleared(Payload, frozen=True, gc=False):
    name: str
    kind: ClassVar[str] = "memory_cleared"


class SkillEvent(Payload, frozen=True, gc=False):
    skill_id: str
    step_id: str | None = None


class SkillActivated(SkillEvent, frozen=True, gc=False):
    kind: ClassVar[str] = "skill_activated"


class SkillCompleted(SkillEvent, frozen=True, gc=False):
    kind: ClassVar[str] = "skill_completed"


class SkillCancelled(SkillEvent, frozen=True, gc=False):
    kind: ClassVar[str] = "skill_cancelled"


class SkillInterrupted(SkillEvent, frozen=True, gc=False):
    kind: ClassVar[str] = "skill_interrupted"


class SkillResumed(SkillEvent, frozen=True, gc=False):
    kind: ClassVar[str] = "skill_resumed"


class OrderedBlockEvent(Payload, frozen=True, gc=False):
    skill_id: str
    block_id: str
    step_id: str | None = None


class OrderedBlockEntered(OrderedBlockEvent, frozen=True, gc=False):
    kind: ClassVar[str] = "ordered_block_entered"


class OrderedBlockCompleted(OrderedBlockEvent, frozen=True, gc=False):
    kind: ClassVar[str] = "ordered_block_completed"


class OrderedBlockCancelled(OrderedBlockEvent, frozen=True, gc=False):
    kind: ClassVar[str] = "ordered_block_cancelled"


class OrderedBlockInterrupted(OrderedBlockEvent, frozen=True, gc=False):
    kind: ClassVar[str] = "ordered_block_interrupted"


class OrderedBlockResumed(OrderedBlockEvent, frozen=True, gc=False):
    kind: ClassVar[str] = "ordered_block_resumed"


class ToolExecuted(Payload, frozen=True, gc=False):
    tool_name: str
    source: Literal["local", "mcp"]
    mcp_server: str | None = None
    skill_id: str | None = None
    arguments_json: str = "{}"
    result_json: str | None = None
    is_error: bool = False
    kind: ClassVar[str] = "tool_executed"


class Event(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """One tracker event: envelope plus exactly one payload field set.

    Build one in Python as ``Event(conversation_id="c1", sequence=0,
    user=User(text="hi"))``. ``sequence`` is -1 when a legacy row carried
    none (the engine then uses arrival order).
    """

    # Payload fields first (PAYLOAD_FIELDS is the first 17 names).
    user: User | None = None
    bot: Bot | None = None
    tool_executed: ToolExecuted | None = None
    memory_set: MemorySet | None = None
    memory_cleared: MemoryCleared | None = None
    skill_activated: SkillActivated | None = None
    skill_completed: SkillCompleted | None = None
    skill_cancelled: SkillCancelled | None = None
    skill_interrupted: SkillInterrupted | None = None
    skill_resumed: SkillResumed | None = None
    ordered_block_entered: OrderedBlockEntered | None = None
    ordered_block_completed: OrderedBlockCompleted | None = None
    ordered_block_cancelled: OrderedBlockCancelled | None = None
    ordered_block_interrupted: OrderedBlockInterrupted | None = None
    ordered_block_resumed: OrderedBlockResumed | None = None
    session_started: SessionStarted | None = None
    session_ended: SessionEnded | None = None
    # Envelope.
    conversation_id: str
    # Required on the wire (>= 0); only legacy rows without one get -1 (arrival order).
    sequence: Annotated[int, msgspec.Meta(ge=0)]
    event_id: str = ""
    timestamp: str | float = ""
    session_id: str = ""
    user_id: str = ""
    deployment_environment: str = ""
    metadata: dict[str, Any] = {}

    @property
    def payload(self) -> Payload:
        """The one payload that is set (raises :class:`EventError` otherwise)."""
        return payload_of(self)


PAYLOAD_FIELDS: tuple[str, ...] = Event.__struct_fields__[:17]
PAYLOAD_TYPES: dict[str, type[Payload]] = {
    cls.kind: cls
    for cls in (User, Bot, ToolExecuted, MemorySet, MemoryCleared, SkillActivated,
                SkillCompleted, SkillCancelled, SkillInterrupted, SkillResumed,
                OrderedBlockEntered, OrderedBlockCompleted, OrderedBlockCancelled,
                OrderedBlockInterrupted, OrderedBlockResumed, SessionStarted, SessionEnded)
}
assert tuple(PAYLOAD_TYPES) == PAYLOAD_FIELDS
_ENVELOPE_KEYS = frozenset(Event.__struct_fields__[17:])


def single_payload(event: Event) -> Payload | None:
    """The payload when exactly one is set; None for zero or several.

    The first set field searched from the front (most frequent kinds first)
    and from the back are the same object only when one field is set; every
    payload struct is truthy and two fields never hold the same object. The
    engine's hot loop inlines these two chains (tests check they agree).
    """
    front = (event.tool_executed or event.bot or event.memory_set or event.user
             or event.memory_cleared or event.skill_activated or event.skill_completed
             or event.skill_interrupted or event.skill_resumed or event.skill_cancelled
             or event.ordered_block_entered or event.ordered_block_completed
             or event.ordered_block_interrupted or event.ordered_block_resumed
             or event.ordered_block_cancelled or event.session_started or event.session_ended)
    back = (event.session_ended or event.session_started or event.ordered_block_cancelled
            or event.ordered_block_resumed or event.ordered_block_interrupted
            or event.ordered_block_completed or event.ordered_block_entered
            or event.skill_cancelled or event.skill_resumed or event.skill_interrupted
            or event.skill_completed or event.skill_activated or event.memory_cleared
            or event.user or event.memory_set or event.bot or event.tool_executed)
    return front if front is back else None


def payload_of(event: Event) -> Payload:
    """The single payload of an event; :class:`EventError` for zero or several."""
    payload = single_payload(event)
    if payload is None:
        keys = [name for name in PAYLOAD_FIELDS if getattr(event, name) is not None]
        if not keys:
            raise EventError("no payload key (expected exactly one of "
                             f"{', '.join(PAYLOAD_FIELDS)})")
        raise EventError(f"{len(keys)} payload keys ({', '.join(keys)}); expected exactly one")
    return payload


def count_lines(data: bytes) -> int:
    """Newlines in ``data``. Length minus the length without them: ``replace``
    finds them with memchr, several times faster than ``bytes.count``."""
    return len(data) - len(data.replace(b"\n", b""))


_json_decode = msgspec.json.Decoder().decode
_json_encode = msgspec.json.Encoder().encode


def parse_json_value(text: str, what: str) -> Any:
    """Parse ``value_json`` / ``arguments_json`` once (integers stay integers)."""
    try:
        return _json_decode(text)
    except msgspec.DecodeError as exc:
        raise EventError(f"{what} is not valid JSON ({exc}): {_excerpt(text)}") from None
    except RecursionError:
        raise EventError(f"{what} is nested too deeply") from None


def _excerpt(text: str | bytes, limit: int = 120) -> str:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _Legacy(msgspec.Struct, gc=False):
    """An older flat row: ``{"event": "user", "sender_id": ..., ...}``."""

    event: str
    sender_id: str | None = None
    conversation_id: str | None = None
    sequence: int | None = None
    text: str | None = None
    name: str | None = None
    value: Any = None
    data: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    timestamp: str | float | None = None
    event_id: str | None = None


_LEGACY_KINDS = frozenset({"user", "bot", "slot", "session_started"})


class EventDecoder:
    """Decodes JSON lines from one source into :class:`Event` values.

    ``source`` names the source in error messages; ``unknown`` counts payload
    kinds (and legacy row kinds) this version does not know, which are
    skipped for forward compatibility.
    """

    def __init__(self, source: str = "<events>") -> None:
        self.source = source
        self.unknown: dict[str, int] = {}
        self._decoder = msgspec.json.Decoder(Event)
        self._legacy = msgspec.json.Decoder(_Legacy)
        self._generic = msgspec.json.Decoder()

    def decode_lines(self, chunk: bytes) -> list[Event]:
        """Raw ``decode_lines``: no payload checks, no legacy rows (the engine's fast path)."""
        events: list[Event] = self._decoder.decode_lines(chunk)
        return events

    def decode_chunk(self, chunk: bytes, first_line: int = 1) -> list[Event]:
        """Decode complete lines; ``first_line`` is the 1-based number of the first."""
        try:
            events = self._decoder.decode_lines(chunk)
        except (msgspec.DecodeError, RecursionError):
            return self._slow(chunk, first_line)
        for event in events:
            if single_payload(event) is None:
                return self._slow(chunk, first_line)
        if len(chunk) > MAX_LINE_BYTES and max(map(len, chunk.split(b"\n"))) > MAX_LINE_BYTES:
            return self._slow(chunk, first_line)
        return events

    def _slow(self, chunk: bytes, first_line: int) -> list[Event]:
        out: list[Event] = []
        for offset, line in enumerate(chunk.split(b"\n")):
            event = self.decode_line(line, first_line + offset)
            if event is not None:
                out.append(event)
        return out

    def decode_line(self, line: bytes, line_no: int | None = None) -> Event | None:
        """Decode one line; None for a blank line or a skipped unknown kind."""
        if len(line) > MAX_LINE_BYTES:
            raise self._error(f"line is {len(line)} bytes, longer than the "
                              f"{MAX_LINE_BYTES}-byte limit", line_no, line[:200])
        if not line.strip():
            return None
        try:
            event = self._decoder.decode(line)
        except msgspec.ValidationError as exc:
            if str(exc).startswith("Object missing required field `conversation_id`"):
                raw = self._raw(line, line_no)
                if isinstance(raw, dict) and "event" in raw:
                    return self._legacy_row(line, line_no)
            raise self._error(str(exc), line_no, line) from None
        except msgspec.DecodeError as exc:
            raise self._error(f"malformed JSON: {exc}", line_no, line) from None
        except RecursionError:
            raise self._error("JSON nested too deeply", line_no, line) from None
        if single_payload(event) is not None:
            return event
        return self._irregular(event, line, line_no)

    def _irregular(self, event: Event, line: bytes, line_no: int | None) -> Event | None:
        """No known payload, or several: a legacy row, an unknown kind, or a bad event."""
        raw = self._raw(line, line_no)
        if not isinstance(raw, dict):
            raise self._error(f"expected a JSON object, got {type(raw).__name__}", line_no, line)
        if "event" in raw and not any(getattr(event, f) is not None for f in PAYLOAD_FIELDS):
            return self._legacy_row(line, line_no)
        known = [k for k in PAYLOAD_FIELDS if k in raw]
        if len(known) > 1:
            raise self._error(f"{len(known)} payload keys ({', '.join(known)}); expected "
                              "exactly one", line_no, line)
        others = [k for k in raw if k not in _ENVELOPE_KEYS and k not in PAYLOAD_FIELDS]
        if not known and not others:
            raise self._error("no payload key (expected exactly one, such as `user`, `bot`, "
                              "`tool_executed`, `memory_set`)", line_no, line)
        if not known and len(others) == 1:
            self._count_unknown(others[0])
            return None
        names = ", ".join(f"`{k}`" for k in [*known, *others])
        raise self._error(f"expected exactly one payload key, found {names}", line_no, line)

    def _legacy_row(self, line: bytes, line_no: int | None) -> Event | None:
        try:
            row = self._legacy.decode(line)
        except msgspec.ValidationError as exc:
            raise self._error(f"legacy row: {exc}", line_no, line) from None
        except (msgspec.DecodeError, RecursionError) as exc:
            raise self._error(f"legacy row: malformed JSON: {exc}", line_no, line) from None
        conversation_id = row.conversation_id or row.sender_id
        if not conversation_id:
            raise self._error("legacy row without `sender_id`", line_no, line)
        if row.event not in _LEGACY_KINDS:
            self._count_unknown(f"legacy:{row.event}")
            return None
        envelope: dict[str, Any] = {
            "conversation_id": conversation_id,
            "sequence": -1 if row.sequence is None else row.sequence,
            "event_id": row.event_id or "",
            "metadata": row.metadata or {},  # metadata.scenario names the scenario
        }
        if row.timestamp is not None:
            envelope["timestamp"] = row.timestamp
        if row.event == "user":
            return Event(user=User(text=row.text), **envelope)
        if row.event == "bot":
            utter = (row.metadata or {}).get("utter_action")
            raw_buttons = (row.data or {}).get("buttons") or []
            try:
                buttons = msgspec.convert(raw_buttons, tuple[BotButton, ...])
            except msgspec.ValidationError as exc:
                raise self._error(f"legacy bot row buttons: {exc}", line_no, line) from None
            return Event(bot=Bot(text=row.text, utter_name=utter if isinstance(utter, str)
                                 else None, buttons=buttons), **envelope)
        if row.event == "session_started":
            return Event(session_started=SessionStarted(), **envelope)
        # slot
        if not isinstance(row.name, str):
            raise self._error("legacy slot row without a string `name`", line_no, line)
        if row.value is None:
            return Event(memory_cleared=MemoryCleared(name=row.name), **envelope)
        value_json = _json_encode(row.value).decode()
        return Event(memory_set=MemorySet(name=row.name, value_json=value_json), **envelope)

    def _count_unknown(self, kind: str) -> None:
        # Bounded: a hostile feed could invent a new key on every line.
        if kind not in self.unknown and len(self.unknown) >= MAX_UNKNOWN_KINDS:
            kind = "(others)"
        self.unknown[kind] = self.unknown.get(kind, 0) + 1

    def _raw(self, line: bytes, line_no: int | None) -> Any:
        """The line as plain JSON values, for the slow path's questions."""
        try:
            return self._generic.decode(line)
        except msgspec.DecodeError as exc:
            raise self._error(f"malformed JSON: {exc}", line_no, line) from None
        except RecursionError:
            raise self._error("JSON nested too deeply", line_no, line) from None

    def _error(self, message: str, line_no: int | None, line: bytes) -> EventError:
        return EventError(message, source=self.source, line=line_no, excerpt=_excerpt(line))
