"""Mantle's events as Python values: the payload structs and the one table of kinds.

Mantle writes each tracker event as ProtoJSON (its event broker and tracker
store): an envelope (``conversation_id``, ``sequence``, ``event_id``,
``metadata`` as a JSON *string*, ...) plus exactly one payload key such as
``{"user": {...}}``, with every unset optional field printed as ``null``.
See docs/scenarios.md, "Event format".

:class:`Event` is the table of payload kinds: one optional field per kind, the
most frequent first, typed with the kind's struct (:class:`Skipped` for the
kinds no check reads, which decode to one empty struct so that skipping them
costs no more than reading any other kind). Everything else that lists kinds
is derived from it: :data:`PAYLOAD_FIELDS`, :data:`PAYLOAD_TYPES`,
:data:`SKIPPED_KINDS` and the "exactly one payload" check
:func:`single_payload`, generated from the field order. Adding a payload kind
is a struct and a field of :class:`Event`.

Every struct is ``gc=False``: events hold no cycles, and keeping millions of
them out of the garbage collector's reach keeps collections short.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Annotated, Any, ClassVar

import msgspec

from mantle_stream.core.errors import EventError

__all__ = [
    "ENVELOPE_KEYS",
    "LEGACY",
    "PAYLOAD_FIELDS",
    "PAYLOAD_TYPES",
    "SKIPPED_KINDS",
    "UNKNOWN",
    "WIRE_KEYS",
    "Bot",
    "Event",
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
    "excerpt",
    "malformed",
    "metadata_field",
    "parse_json_value",
    "payload_of",
    "single_payload",
    "starts_turn",
]


class Payload(msgspec.Struct, frozen=True, gc=False):
    """Base of every payload; ``kind`` is its wire key.

    ``route_key`` names the field a check selects events of this kind by (a
    skill id, a memory key, a tool name), ``route_metadata`` a key of the
    event's metadata instead (a bot message's response name); the compiler
    indexes assertions by it, so an event reaches only the checks naming it.
    """

    kind: ClassVar[str]
    route_key: ClassVar[str | None] = None
    route_metadata: ClassVar[str | None] = None


class SessionStarted(Payload, frozen=True, gc=False):
    kind: ClassVar[str] = "session_started"


class SessionEnded(Payload, frozen=True, gc=False):
    kind: ClassVar[str] = "session_ended"


class User(Payload, frozen=True, gc=False):
    """A user message. ``parse_data``, ``input_channel``, ... are read by no check."""

    text: str | None = None
    kind: ClassVar[str] = "user"


def starts_turn(text: str | None) -> bool:
    """Whether a user message with this text starts a new turn: a real message, not
    ``""`` or a ``/command`` such as ``/session_start``. (The evaluator's hot loop
    writes the same test inline.)"""
    stripped = (text or "").strip()
    return bool(stripped) and stripped[0] != "/"


class Bot(Payload, frozen=True, gc=False):
    """An agent message; ``data.buttons`` holds its buttons (see :func:`buttons_of`)."""

    text: str | None = None
    data: dict[str, Any] | None = None
    kind: ClassVar[str] = "bot"
    route_metadata: ClassVar[str | None] = "utter_action"


class MemorySet(Payload, frozen=True, gc=False):
    """A memory write; ``value_json`` is the value as JSON text."""

    key: str
    value_json: str
    kind: ClassVar[str] = "memory_set"
    route_key: ClassVar[str | None] = "key"


class MemoryCleared(Payload, frozen=True, gc=False):
    key: str
    kind: ClassVar[str] = "memory_cleared"
    route_key: ClassVar[str | None] = "key"


class SkillEvent(Payload, frozen=True, gc=False):
    skill_id: str
    step_id: str | None = None
    route_key: ClassVar[str | None] = "skill_id"


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
    route_key: ClassVar[str | None] = "skill_id"


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
    route_key: ClassVar[str | None] = "tool_name"


class Skipped(Payload, frozen=True, gc=False):
    """A payload no check reads (``stack``, ``action``, ...): its fields are not decoded."""

    kind: ClassVar[str] = "skipped"


class Event(msgspec.Struct, frozen=True, gc=False, kw_only=True):
    """One tracker event: envelope plus exactly one payload field set.

    Build one in Python as ``ms.Event(conversation_id="c1", sequence=0,
    user=ms.User(text="hi"))`` (every payload struct is exported).
    ``sequence`` is None on rows that carry none (they are applied in arrival
    order). ``metadata`` is the JSON text Mantle writes (a dict when the event
    came in the flat shape).
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
    # Set on a flat event ({"event": "user", ...}): decoded by core.events.flat, not here.
    event: Any = None

    @property
    def payload(self) -> Payload:
        """The one payload that is set (raises :class:`EventError` otherwise)."""
        return payload_of(self)


def _payload_type(annotation: Any) -> type[Payload] | None:
    """``X`` of a field typed ``X | None`` when ``X`` is a payload struct."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if len(args) == 1 and isinstance(args[0], type) and issubclass(args[0], Payload):
        return args[0]
    return None


_FIELD_TYPES = {f.name: _payload_type(f.type) for f in msgspec.structs.fields(Event)}
#: Every payload field of :class:`Event`, in its order (the most frequent kinds first).
PAYLOAD_FIELDS: tuple[str, ...] = tuple(name for name, t in _FIELD_TYPES.items() if t)
#: Payload kinds Mantle emits that no check reads: accepted and skipped.
SKIPPED_KINDS: tuple[str, ...] = tuple(
    name for name in PAYLOAD_FIELDS if _FIELD_TYPES[name] is Skipped
)
#: The payload types some check reads, by wire key.
PAYLOAD_TYPES: dict[str, type[Payload]] = {
    name: t for name, t in _FIELD_TYPES.items() if t is not None and t is not Skipped
}
assert all(t.kind == name for name, t in PAYLOAD_TYPES.items()), "a struct's kind is its field"
ENVELOPE_KEYS = frozenset(Event.__struct_fields__) - set(PAYLOAD_FIELDS) - {"event"}
WIRE_KEYS = frozenset(Event.__struct_fields__)  # every key this version knows


def _generate_single_payload() -> Callable[[Event], Payload | None]:
    """:func:`single_payload`, written out from :data:`PAYLOAD_FIELDS`.

    The first set field searched from the front and from the back are the
    same object only when exactly one is set: every payload struct is truthy
    and two fields never hold the same object. Two ``or`` chains of attribute
    reads are the fastest way CPython has to say so (a loop over the names
    costs several times more per event); generated, they can never disagree
    with the table.
    """
    front = " or ".join(f"event.{name}" for name in PAYLOAD_FIELDS)
    back = " or ".join(f"event.{name}" for name in reversed(PAYLOAD_FIELDS))
    source = (
        f"def single_payload(event):\n    front = {front}\n"
        f"    return front if front is ({back}) else None\n"
    )
    namespace: dict[str, Any] = {}
    exec(compile(source, "<mantle_stream single_payload>", "exec"), namespace)
    function: Callable[[Event], Payload | None] = namespace["single_payload"]
    function.__doc__ = "The payload when exactly one is set; None for zero or several."
    function.__module__ = __name__
    return function


single_payload = _generate_single_payload()


def payload_of(event: Event) -> Payload:
    """The single payload of an event; :class:`EventError` for zero or several."""
    payload = single_payload(event)
    if payload is None:
        keys = [name for name in PAYLOAD_FIELDS if getattr(event, name) is not None]
        if not keys:
            raise EventError(
                "no payload key (expected exactly one, such as `user`, `bot`, "
                "`tool_executed`, `memory_set`)"
            )
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
    return [
        (b.get("title"), b.get("payload")) if type(b) is dict else (None, None) for b in buttons
    ]


def malformed(exc: Exception) -> str:
    """msgspec's words for bad JSON, said once: ``malformed JSON: trailing characters``."""
    return "malformed JSON: " + str(exc).removeprefix("JSON is malformed: ")


def excerpt(text: str | bytes, limit: int = 120) -> str:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


#: The payload of an event of a kind this version does not know (skipped, counted).
UNKNOWN = Skipped()
#: The payload of an older flat CALM row (``slot``, ``flow_started``, ...): skipped, counted.
LEGACY = Skipped()
