"""The event wire format: the one module that knows field names on the wire.

Mantle writes each tracker event as ProtoJSON (its event broker and tracker
store): an envelope (``conversation_id``, ``sequence``, ``event_id``,
``metadata`` as a JSON *string*, ...) plus exactly one payload key such as
``{"user": {...}}``, with every unset optional field printed as ``null``.
Rasa's HTTP tracker endpoint and older assistants write *flat* events
(``{"event": "user", ...}``); :mod:`mantle_stream._flat` maps those onto the
same :class:`Event`. See the README's "Events" section.

Decoding strategy (the hot path of the whole tool):

* :class:`Event` is one msgspec Struct with one optional field per payload
  kind: the 17 kinds some check reads, then the nine kinds no check reads
  (``stack``, ``action``, ...), which decode to one empty :class:`Skipped`
  struct so that skipping them costs no more than reading any other kind.
  "Exactly one payload" is checked by :func:`single_payload` with two ``or``
  chains over the payload fields, in opposite orders: the first set field
  from the front and the first from the back are the same object only when
  exactly one is set.
* A line with no payload this version knows is a flat event (its ``event``
  field is set), a newer engine's kind (counted by name and skipped), or a
  bad event; :meth:`EventDecoder.classify` tells which, from that line alone.
* ``metadata`` stays the string it came as; :func:`metadata_field` parses it
  only for the events and keys a loaded check reads.
* Every struct is ``gc=False``: events hold no cycles, and keeping millions of
  them out of the garbage collector's reach keeps collections short.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

import msgspec

from mantle_stream._errors import EventError

__all__ = [
    "LEGACY",
    "MAX_LINE_BYTES",
    "MAX_UNKNOWN_KINDS",
    "PAYLOAD_FIELDS",
    "PAYLOAD_TYPES",
    "SKIPPED_KINDS",
    "UNKNOWN",
    "Bot",
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
    "Skipped",
    "ToolExecuted",
    "User",
    "buttons_of",
    "count_lines",
    "metadata_field",
    "parse_json_value",
    "payload_of",
    "single_payload",
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
    """A user message. ``parse_data``, ``input_channel``, ... are read by no check."""

    text: str | None = None
    kind: ClassVar[str] = "user"


class Bot(Payload, frozen=True, gc=False):
    """An agent message; ``data.buttons`` holds its buttons (see :func:`buttons_of`)."""

    text: str | None = None
    data: dict[str, Any] | None = None
    kind: ClassVar[str] = "bot"


class MemorySet(Payload, frozen=True, gc=False):
    """A memory write; ``value_json`` is the value as JSON text."""

    key: str
    value_json: str
    kind: ClassVar[str] = "memory_set"


class MemoryCleared(Payload, frozen=True, gc=False):
    key: str
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
    """A tool run. The skill it ran for is ``skill_id`` in the envelope's metadata."""

    tool_name: str
    source: str
    arguments_json: str | None = None
    result_json: str | None = None
    is_error: bool | None = False
    error_message: str | None = None
    mcp_server: str | None = None
    kind: ClassVar[str] = "tool_executed"


class Skipped(Payload, frozen=True, gc=False):
    """A payload no check reads (``stack``, ``action``, ...): its fields are not decoded."""

    kind: ClassVar[str] = "skipped"


#: Payload kinds Mantle emits that no check reads: accepted and skipped.
SKIPPED_KINDS = ("stack", "action", "bot_turn_ended", "inactive", "user_barge_in",
                 "tts_finished", "user_silence_timeout", "user_input_suppressed",
                 "unsupported_request_classified")


class Event(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """One tracker event: envelope plus exactly one payload field set.

    Build one in Python as ``Event(conversation_id="c1", sequence=0,
    user=User(text="hi"))``. ``sequence`` is None on rows that carry none
    (they are applied in arrival order). ``metadata`` is the JSON text Mantle
    writes (a dict when the event came in the flat shape).
    """

    # Payload fields first (PAYLOAD_FIELDS), the most frequent kinds first.
    stack: Skipped | None = None
    action: Skipped | None = None
    bot: Bot | None = None
    user: User | None = None
    tool_executed: ToolExecuted | None = None
    memory_set: MemorySet | None = None
    bot_turn_ended: Skipped | None = None
    memory_cleared: MemoryCleared | None = None
    skill_activated: SkillActivated | None = None
    skill_completed: SkillCompleted | None = None
    skill_interrupted: SkillInterrupted | None = None
    skill_resumed: SkillResumed | None = None
    skill_cancelled: SkillCancelled | None = None
    ordered_block_entered: OrderedBlockEntered | None = None
    ordered_block_completed: OrderedBlockCompleted | None = None
    ordered_block_interrupted: OrderedBlockInterrupted | None = None
    ordered_block_resumed: OrderedBlockResumed | None = None
    ordered_block_cancelled: OrderedBlockCancelled | None = None
    session_started: SessionStarted | None = None
    session_ended: SessionEnded | None = None
    inactive: Skipped | None = None
    user_barge_in: Skipped | None = None
    tts_finished: Skipped | None = None
    user_silence_timeout: Skipped | None = None
    user_input_suppressed: Skipped | None = None
    unsupported_request_classified: Skipped | None = None
    # Envelope.
    conversation_id: str = ""
    sequence: Annotated[int, msgspec.Meta(ge=0)] | None = None
    event_id: str | None = None
    timestamp: float | str | None = None
    metadata: str | dict[str, Any] | None = None
    session_id: str | None = None
    user_id: str | None = None
    deployment_environment: str | None = None
    # Set on a flat event ({"event": "user", ...}): decoded by _flat, not here.
    event: Any = None

    @property
    def payload(self) -> Payload:
        """The one payload that is set (raises :class:`EventError` otherwise)."""
        return payload_of(self)


PAYLOAD_FIELDS: tuple[str, ...] = Event.__struct_fields__[:26]
#: The payload types some check reads, by wire key.
PAYLOAD_TYPES: dict[str, type[Payload]] = {
    cls.kind: cls
    for cls in (User, Bot, ToolExecuted, MemorySet, MemoryCleared, SkillActivated,
                SkillCompleted, SkillCancelled, SkillInterrupted, SkillResumed,
                OrderedBlockEntered, OrderedBlockCompleted, OrderedBlockCancelled,
                OrderedBlockInterrupted, OrderedBlockResumed, SessionStarted, SessionEnded)
}
assert set(PAYLOAD_FIELDS) == set(PAYLOAD_TYPES) | set(SKIPPED_KINDS)
ENVELOPE_KEYS = frozenset(Event.__struct_fields__[26:]) - {"event"}
_WIRE_KEYS = frozenset(Event.__struct_fields__)  # every key this version knows


def single_payload(event: Event) -> Payload | None:
    """The payload when exactly one is set; None for zero or several.

    The first set field searched from the front and from the back are the
    same object only when one field is set: every payload struct is truthy
    and two fields never hold the same object. That is 27 attribute reads
    whatever the kind. The engine's hot loop inlines these two chains (a test
    runs every pair of kinds through both copies).
    """
    front = (event.stack or event.action or event.bot or event.user or event.tool_executed
             or event.memory_set or event.bot_turn_ended or event.memory_cleared
             or event.skill_activated or event.skill_completed or event.skill_interrupted
             or event.skill_resumed or event.skill_cancelled or event.ordered_block_entered
             or event.ordered_block_completed or event.ordered_block_interrupted
             or event.ordered_block_resumed or event.ordered_block_cancelled
             or event.session_started or event.session_ended or event.inactive
             or event.user_barge_in or event.tts_finished or event.user_silence_timeout
             or event.user_input_suppressed or event.unsupported_request_classified)
    back = (event.unsupported_request_classified or event.user_input_suppressed
            or event.user_silence_timeout or event.tts_finished or event.user_barge_in
            or event.inactive or event.session_ended or event.session_started
            or event.ordered_block_cancelled or event.ordered_block_resumed
            or event.ordered_block_interrupted or event.ordered_block_completed
            or event.ordered_block_entered or event.skill_cancelled or event.skill_resumed
            or event.skill_interrupted or event.skill_completed or event.skill_activated
            or event.memory_cleared or event.bot_turn_ended or event.memory_set
            or event.tool_executed or event.user or event.bot or event.action or event.stack)
    return front if front is back else None


def payload_of(event: Event) -> Payload:
    """The single payload of an event; :class:`EventError` for zero or several."""
    payload = single_payload(event)
    if payload is None:
        keys = [name for name in PAYLOAD_FIELDS if getattr(event, name) is not None]
        if not keys:
            raise EventError("no payload key (expected exactly one, such as `user`, `bot`, "
                             "`tool_executed`, `memory_set`)")
        raise EventError(f"{len(keys)} payload keys ({', '.join(keys)}); expected exactly one")
    if not event.conversation_id:
        raise EventError("no `conversation_id`")
    return payload


def count_lines(data: bytes) -> int:
    """Newlines in ``data``. Length minus the length without them: ``replace``
    finds them with memchr, several times faster than ``bytes.count``."""
    return len(data) - len(data.replace(b"\n", b""))


_json_decode = msgspec.json.Decoder().decode


def parse_json_value(text: str, what: str) -> Any:
    """Parse ``value_json`` / ``arguments_json`` once (integers stay integers)."""
    try:
        return _json_decode(text)
    except msgspec.DecodeError as exc:
        raise EventError(f"{what} is not valid JSON ({exc}): {excerpt(text)}") from None
    except RecursionError:
        raise EventError(f"{what} is nested too deeply") from None


class _Metadata:
    """A one-entry cache of the last metadata string parsed.

    Several checks may read the same event's metadata (a tool run seen by a
    `tool_executed` check and a tool window): the string object is the same,
    so an identity test finds it.
    """

    __slots__ = ("last",)

    def __init__(self) -> None:
        # (text, parsed) in one slot: replaced in one step, so two threads
        # sharing the cache never pair one text with another's parse.
        self.last: tuple[object, dict[str, Any]] = (None, {})

    def get(self, metadata: str | dict[str, Any] | None, key: str) -> Any:
        if metadata is None:
            return None
        if type(metadata) is dict:
            return metadata.get(key)
        text, parsed = self.last
        if metadata is not text:
            try:
                value = _json_decode(metadata)  # type: ignore[arg-type]
            except (msgspec.DecodeError, RecursionError):
                value = None
            # Not a JSON object: no key Mantle writes is there to read.
            parsed = value if type(value) is dict else {}
            self.last = (metadata, parsed)
        return parsed.get(key)


metadata_field = _Metadata().get
"""``metadata_field(event.metadata, "utter_action")``: one key of an event's
metadata, or None (also when the metadata is not a JSON object)."""


def buttons_of(bot: Bot) -> list[tuple[Any, Any]]:
    """A bot message's buttons as (title, payload) pairs; odd data reads as no button."""
    data = bot.data
    buttons = data.get("buttons") if data else None
    if type(buttons) is not list:
        return []
    return [(b.get("title"), b.get("payload")) if type(b) is dict else (None, None)
            for b in buttons]


def malformed(exc: Exception) -> str:
    """msgspec's words for bad JSON, said once: ``malformed JSON: trailing characters``."""
    return "malformed JSON: " + str(exc).removeprefix("JSON is malformed: ")


def excerpt(text: str | bytes, limit: int = 120) -> str:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


_keys_of = msgspec.json.Decoder(dict[str, msgspec.Raw]).decode
#: The payload of an event of a kind this version does not know (skipped, counted).
UNKNOWN = Skipped()
#: The payload of an older flat CALM row (``slot``, ``flow_started``, ...): skipped, counted.
LEGACY = Skipped()


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

    def decode_line(self, line: bytes, line_no: int | None = None
                    ) -> tuple[Event, Payload] | None:
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
            raise self._error(f"line is {len(line)} bytes, longer than the "
                              f"{MAX_LINE_BYTES}-byte limit", line_no, line[:200])
        if not line.strip():
            return None
        try:
            event: Event = self._decoder.decode(line)
        except msgspec.ValidationError as exc:
            raise self._error(str(exc), line_no, line) from None
        except msgspec.DecodeError as exc:
            raise self._error(malformed(exc), line_no, line) from None
        except RecursionError:
            raise self._error("JSON nested too deeply", line_no, line) from None
        return event

    def classify(self, event: Event, line: bytes, line_no: int | None,
                 unset: bool = False) -> tuple[Event, Payload]:
        """A line without exactly one payload field set: decoded again from ``line``.

        A flat event becomes the :class:`Event` it stands for; a newer
        engine's kind is counted and comes back with :data:`UNKNOWN`; anything
        else is a bad event (:class:`EventError`). ``unset``: the caller knows
        no payload field is set (then they are not counted again).
        """
        if event.event is not None:
            from mantle_stream._flat import flat_event  # the rare shape, loaded on use

            try:
                return flat_event(line, self)
            except EventError as exc:
                raise self._error(exc.message, line_no, line) from None
        if not unset:
            known = [k for k in PAYLOAD_FIELDS if getattr(event, k) is not None]
            if known:
                raise self._error(f"{len(known)} payload keys ({', '.join(known)}); "
                                  "expected exactly one", line_no, line)
        if self._learned and self.learned_kind(event):
            return event, UNKNOWN
        kind = self._unknown_kind(line, line_no, learn=bool(event.conversation_id))
        if kind is not None and event.conversation_id:
            self.count(self.unknown, kind)
            return event, UNKNOWN
        # Not one: say why, from the line's keys.
        keys = self._keys(line, line_no)
        objects = [k for k, v in keys.items() if k not in _WIRE_KEYS and bytes(v)[:1] == b"{"]
        if len(objects) == 1:
            raise self._error("no `conversation_id`", line_no, line)
        if not objects:
            raise self._error("no payload key (expected exactly one, such as `user`, `bot`, "
                              "`tool_executed`, `memory_set`)", line_no, line)
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
        objects = [k for k, v in keys.items() if k not in _WIRE_KEYS and bytes(v)[:1] == b"{"]
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
            "Event", [(attr, Skipped | None, None) for attr, _ in self._learned],
            bases=(Event,), rename=dict(self._learned), kw_only=True, frozen=True, gc=False,
            module=__name__)
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

    def _error(self, message: str, line_no: int | None, line: bytes) -> EventError:
        return EventError(message, source=self.source, line=line_no, excerpt=excerpt(line))
