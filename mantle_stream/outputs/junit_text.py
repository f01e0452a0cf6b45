"""The text of a JUnit file: what XML forbids escaped, and what it must escape.

:mod:`~mantle_stream.outputs.junit` writes its cases as text, without building
elements (ElementTree took most of a run's time): :func:`_valid` makes any
text UTF-8 that every XML reader accepts, :func:`_attribute` and
:func:`_text` escape as ElementTree does (``tests/test_junit.py`` compares
them, case by case).
"""

from __future__ import annotations

import re

__all__ = ["_attribute", "_text", "_valid"]

#: Characters XML 1.0 forbids: C0 controls but tab, newline and return; lone
#: surrogates (a file name that is not UTF-8, through ``os.fsdecode``); U+FFFE
#: and U+FFFF. Each is written as its escape in text (``\\x01``, ``\\ufffe``),
#: so that data quoting them never makes the file unreadable.
_FORBIDDEN = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


#: The C0 controls XML forbids (all but tab, newline and return), as UTF-8 bytes.
_C0 = bytes(c for c in range(0x20) if c not in b"\t\n\r")


def _valid(text: str) -> bytes:
    """``text`` as UTF-8 that any XML reader accepts: what XML forbids, escaped."""
    # (Looked for in the bytes first: a scan in C, where the pattern costs ten
    # times as much on text that holds none, as nearly all does.)
    try:
        data = text.encode()
    except UnicodeEncodeError:  # a lone surrogate
        return _FORBIDDEN.sub(_escape, text).encode()
    if len(data.translate(None, _C0)) == len(data) and (
        text.isascii() or (b"\xef\xbf\xbe" not in data and b"\xef\xbf\xbf" not in data)
    ):
        return data  # (U+FFFE and U+FFFF are EF BF BE and EF BF BF)
    return _FORBIDDEN.sub(_escape, text).encode()


#: What ElementTree escapes in an attribute value and in text, alike.
_IN_ATTRIBUTE = str.maketrans(
    {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "\r": "&#13;", "\n": "&#10;",
     "\t": "&#09;"}
)  # fmt: skip
_IN_TEXT = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


_ESCAPES_ATTRIBUTE = re.compile('[&<>"\r\n\t]')
_ESCAPES_TEXT = re.compile("[&<>]")
#: Values escaped lately, as attributes: kinds, reasons, file and scenario names
#: recur from run to run (a dict look-up costs a twentieth of an escape).
_ESCAPED: dict[str, str] = {}
_ESCAPED_MOST = 4096


def _attribute(value: str) -> str:
    escaped = _ESCAPED.get(value)
    if escaped is None:
        escaped = value.translate(_IN_ATTRIBUTE) if _ESCAPES_ATTRIBUTE.search(value) else value
        if len(_ESCAPED) >= _ESCAPED_MOST:
            _ESCAPED.clear()  # (bounded: a long run's reasons are many)
        _ESCAPED[value] = escaped
    return escaped


def _text(value: str) -> str:
    return value.translate(_IN_TEXT) if _ESCAPES_TEXT.search(value) else value
