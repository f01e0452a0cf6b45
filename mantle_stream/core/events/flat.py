"""Flat events and tracker documents: the shape of Rasa's HTTP tracker endpoint.

Part of the event wire format (next to :mod:`mantle_stream.core.events.model`).
``GET /conversations/{id}/tracker`` returns ``{"sender_id": ..., "events":
[...]}`` with each event flat: ``{"event": "memory_set", "key": ...,
"value": ...}``; older assistants write such rows one per line with
``sender_id`` beside them. :func:`flat_event` maps one flat row onto the same
:class:`~mantle_stream.core.events.model.Event` a ProtoJSON line decodes to, so there
is one judging path; :func:`document_lines` turns a tracker document into
JSON lines, each row numbered by its position (a tracker's ``sequence`` is
that position); :func:`document_tail` the rows of a document read again from
a position on.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

import msgspec

from mantle_stream.core.errors import EventError
from mantle_stream.core.events import model as ev

__all__ = ["document_lines", "document_tail", "flat_event", "is_document"]


class _Flat(msgspec.Struct, gc=False):
    """Every field a flat row of a kind some check reads may carry."""

    event: str
    sender_id: str | None = None
    conversation_id: str | None = None
    sequence: Annotated[int, msgspec.Meta(ge=0)] | None = None
    event_id: str | None = None
    timestamp: float | str | None = None
    metadata: dict[str, Any] | None = None
    text: str | None = None
    data: dict[str, Any] | None = None
    key: str | None = None
    value: Any = None
    skill_id: str | None = None
    block_id: str | None = None
    step_id: str | None = None
    tool_name: str | None = None
    source: str | None = None
    arguments: dict[str, Any] | None = None
    result: Any = None
    is_error: bool | None = None
    error_message: str | None = None
    mcp_server: str | None = None


_decode_flat = msgspec.json.Decoder(_Flat).decode
_encode = msgspec.json.Encoder().encode


def _text(value: Any) -> str:
    return _encode(value).decode()


def _need(row: _Flat, *names: str) -> list[str]:
    values = [getattr(row, name) for name in names]
    missing = [f"`{n}`" for n, v in zip(names, values, strict=True) if not isinstance(v, str)]
    if missing:
        raise EventError(f"flat `{row.event}` event without a string {', '.join(missing)}")
    return values


def _payload(row: _Flat) -> ev.Payload:
    kind = row.event
    if kind == "user":
        return ev.User(text=row.text)
    if kind == "bot":
        return ev.Bot(text=row.text, data=row.data)
    if kind == "memory_set":
        [key] = _need(row, "key")
        return ev.MemorySet(key=key, value_json=_text(row.value))
    if kind == "memory_cleared":
        [key] = _need(row, "key")
        return ev.MemoryCleared(key=key)
    if kind == "tool_executed":
        name, source = _need(row, "tool_name", "source")
        return ev.ToolExecuted(
            tool_name=name,
            source=source,
            arguments_json=_text(row.arguments if row.arguments is not None else {}),
            result_json=None if row.result is None else _text(row.result),
            is_error=bool(row.is_error),
            error_message=row.error_message,
            mcp_server=row.mcp_server,
        )
    cls = ev.PAYLOAD_TYPES[kind]
    if issubclass(cls, ev.OrderedBlockEvent):
        skill_id, block_id = _need(row, "skill_id", "block_id")
        return cls(skill_id=skill_id, block_id=block_id, step_id=row.step_id)
    if issubclass(cls, ev.SkillEvent):
        [skill_id] = _need(row, "skill_id")
        return cls(skill_id=skill_id, step_id=row.step_id)
    return cls()  # session_started, session_ended


def flat_event(line: bytes) -> tuple[ev.Event, ev.Payload]:
    """The event a flat row stands for, and its payload.

    A kind no check reads comes back with :data:`~mantle_stream.core.events.model.LEGACY`
    (an older CALM row: its kind in the event's ``event`` field, for the decoder
    to count) or a skipped payload (``action``, ``stack``, ...: normal traffic).
    """
    try:
        row = _decode_flat(line)
    except msgspec.ValidationError as exc:
        raise EventError(f"flat event: {exc}") from None
    except (msgspec.DecodeError, RecursionError) as exc:
        raise EventError(f"flat event: {ev.malformed(exc)}") from None
    cid = row.conversation_id or row.sender_id
    if not cid:
        raise EventError("flat event without `sender_id`")
    envelope: dict[str, Any] = {
        "conversation_id": cid,
        "sequence": row.sequence,
        "event_id": row.event_id,
        "timestamp": row.timestamp,
        "metadata": row.metadata,
    }
    kind = row.event
    payload: ev.Payload
    if kind in ev.PAYLOAD_TYPES:
        payload = _payload(row)
    elif kind in ev.SKIPPED_KINDS:
        payload = ev.Skipped()
    else:
        return ev.Event(**envelope, event=kind), ev.LEGACY
    fields: dict[str, Any] = {kind: payload, **envelope}
    return ev.Event(**fields), payload


class _Document(msgspec.Struct):
    sender_id: str
    events: list[dict[str, Any]]


_decode_document = msgspec.json.Decoder(_Document).decode


class _RawDocument(msgspec.Struct):
    sender_id: str
    events: list[msgspec.Raw]  # each event's bytes, found but not decoded


_decode_raw_document = msgspec.json.Decoder(_RawDocument).decode
_decode_row = msgspec.json.Decoder(dict[str, Any]).decode


_EVENTS_KEY = re.compile(rb'(?:^|[{,\s])"events"\s*:\s*\[')


def is_document(head: bytes) -> bool:
    """Whether a file or stream starting with ``head`` is a tracker document, not JSON lines.

    A document is one JSON object with an ``events`` list: pretty-printed, its
    first line is a lone ``{``; on one line, an ``"events": [`` key stands in
    it (as a key: inside a JSON string its quotes would be escaped). An event
    line never has either, so neither a long nor a cut or malformed first line,
    nor a first read that ends mid-line, is taken for a document.
    """
    first = head.lstrip()
    if not first.startswith(b"{"):
        return False
    line = first.split(b"\n", 1)[0].strip()
    return line == b"{" or _EVENTS_KEY.search(line) is not None


def document_lines(data: bytes, source: str = "<document>") -> tuple[str, bytes]:
    """A tracker document as (its conversation id, JSON lines of its events).

    Each event is given the document's ``sender_id`` and, when no event of it
    has a ``sequence`` (as in Rasa's tracker endpoint), its 0-based position
    in the list as one; the rows stay in the shape they came in (flat or
    ProtoJSON).
    """
    doc = _decoded(_decode_document, data, source)
    # Positions stand in for sequences only when no row has one: a position
    # could otherwise repeat another row's real sequence.
    numbered = not any(row.get("sequence") is not None for row in doc.events)
    return doc.sender_id, _lines(doc.events, doc.sender_id, numbered, 0)


def document_tail(data: bytes, start: int, source: str = "<document>") -> tuple[bytes, int]:
    """The JSON lines of a tracker document's events from position ``start`` on, as
    :func:`document_lines` gives them, and how many events it has in all.

    For a tracker read again as it grows (the gate reads a run's after each
    turn): the events before ``start`` are only scanned, not decoded (a row
    naming a ``sequence`` is decoded, to tell whether positions stand in for
    sequences, as for the whole document).
    """
    doc = _decoded(_decode_raw_document, data, source)
    rows = [_row(raw, source) for raw in doc.events[start:]]
    numbered = (
        not any(row.get("sequence") is not None for row in rows)
        and (
            b'"sequence"' not in data  # (Rasa's tracker endpoint: no row has one)
            or not any(
                b'"sequence"' in bytes(raw) and _row(raw, source).get("sequence") is not None
                for raw in doc.events[:start]
            )
        )
    )
    return _lines(rows, doc.sender_id, numbered, start), len(doc.events)


def _decoded(decode: Any, data: bytes, source: str) -> Any:
    try:
        return decode(data)
    except msgspec.ValidationError as exc:
        raise EventError(f"not a tracker document: {exc}", source=source) from None
    except (msgspec.DecodeError, RecursionError) as exc:
        raise EventError(f"tracker document: {ev.malformed(exc)}", source=source) from None


def _row(raw: msgspec.Raw, source: str) -> dict[str, Any]:
    try:
        row: dict[str, Any] = _decode_row(raw)
    except msgspec.ValidationError as exc:
        raise EventError(f"not a tracker document: {exc} (an event)", source=source) from None
    return row


def _lines(rows: list[dict[str, Any]], sender_id: str, numbered: bool, start: int) -> bytes:
    lines = []
    for position, row in enumerate(rows, start):
        if "event" in row:
            row.setdefault("sender_id", sender_id)
        else:
            row.setdefault("conversation_id", sender_id)
        if numbered:
            row["sequence"] = position
        lines.append(_encode(row))
    return b"\n".join(lines) + b"\n" if lines else b""
