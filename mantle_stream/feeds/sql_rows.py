"""A row of a SQL source as the JSON line the engine reads.

A row's ``data`` column (:func:`_raw`: text, bytes or a decoded json/jsonb
value) becomes one line that names its conversation (:func:`_line`: a flat
row that names none is given its ``sender_id`` column), and
:func:`_conversation` finds the conversation that line will name without
decoding it whole (a worker's share, :mod:`mantle_stream.feeds.sql`).
"""

from __future__ import annotations

from typing import Any

import msgspec

from mantle_stream.core.events.decode import conversations_of, line_names

__all__ = ["_conversation", "_line", "_raw", "named_lines", "plain_lines"]

_CUT_KEEP = 200

_encode = msgspec.json.Encoder().encode


def _raw(data: Any) -> bytes:
    """A row's ``data`` column as JSON bytes."""
    if isinstance(data, str):
        return data.encode()
    if isinstance(data, bytes | bytearray | memoryview):
        return bytes(data)
    return _encode(data)  # a json/jsonb column comes decoded, NULL as None


def _conversation(raw: bytes, sender_id: Any, limit: int) -> str | None:
    """The conversation the row's line (:func:`_line`) will name, found without decoding
    it whole; None when the line will not be an event that names one (a bad row)."""
    if len(raw) > limit:
        return None  # cut off: a bad event
    names = line_names(raw)
    if names is None:
        return None  # not an object of these types: judged bad, or looked at whole
    # What it names (the one rule), else the row's sender_id, which _line gives it.
    return names.conversation() or (sender_id if isinstance(sender_id, str) and sender_id else None)


def _line(raw: bytes, sender_id: Any, limit: int) -> bytes:
    """One row's ``data`` (:func:`_raw`) as one JSON line naming its conversation."""
    if len(raw) <= limit and b"\n" not in raw and b"\r" not in raw:
        names = line_names(raw)  # None: not an object of these types: looked at whole below
        if names is not None and names.conversation():
            return raw + b"\n"  # names its conversation: as it is
    try:
        row = msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        row = None  # the decoder says what is wrong with it, at this row
    if isinstance(row, dict) and isinstance(sender_id, str):
        if "event" in row and not row.get("sender_id") and not row.get("conversation_id"):
            row["sender_id"] = sender_id
            raw = _encode(row)
        elif "event" not in row and not row.get("conversation_id"):
            row["conversation_id"] = sender_id
            raw = _encode(row)
    if b"\n" in raw or b"\r" in raw:  # pretty-printed: one line of its own
        raw = _encode(row) if row is not None else raw.replace(b"\r", b" ").replace(b"\n", b" ")
    if len(raw) > limit:
        raw = b"<line cut off: longer than %d bytes> %s" % (limit, raw[:_CUT_KEEP])
    return raw + b"\n"


def plain_lines(datas: list[Any], limit: int) -> tuple[bytes, list[str]] | None:
    """The ``data`` of a batch of rows as its lines (:func:`_line` of each), and the
    conversation each names, when every row is text or bytes of one line that names
    its conversation, within ``limit`` (a store Mantle wrote): found in one pass of
    the decoder, not row by row. None when one is not: then each row is looked at."""
    kinds = set(map(type, datas))
    if kinds == {bytes}:
        raws: list[bytes] = datas
    elif kinds == {str}:
        raws = [d.encode() for d in datas]
    else:
        return None
    lines = b"\n".join([*raws, b""])  # (one newline after each)
    return named_lines(lines, len(raws), max(map(len, raws)), limit)


def named_lines(
    lines: bytes, count: int, longest: int, limit: int
) -> tuple[bytes, list[str]] | None:
    """``lines``, the ``data`` of ``count`` rows each followed by a newline (the
    longest ``longest`` bytes), and the conversation each names, when every row is
    one line that names its conversation, within ``limit``; else None."""
    if lines.count(b"\n") != count or b"\r" in lines or longest > limit:
        return None
    names = conversations_of(lines, count)
    if None in names:  # (a flat row given its sender_id, or a bad row)
        return None
    return lines, names  # type: ignore[return-value]
