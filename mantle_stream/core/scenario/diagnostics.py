"""Compiler-style diagnostics for scenario files.

Sits beside the scenario loader: every problem found while loading a file
becomes a :class:`Diagnostic` with a 1-based line and column, rendered as::

    path:line:col: error: message
        the source line
        ^
    hint: what to do instead

Rendering never writes a control character from the file as it is (see
:meth:`Diagnostic.render`); the record itself keeps the exact text.
"""

from __future__ import annotations

import difflib
import unicodedata
from collections.abc import Iterable

import msgspec

__all__ = ["WHOLE_FILE", "Diagnostic", "did_you_mean"]

#: The ``line`` (and ``col``) of a problem with the file as a whole: it cannot be read,
#: or is a directory without scenarios. Rendered ``path: error: message``, with no
#: position a user would look for in a file that may not exist.
WHOLE_FILE = 0


class Diagnostic(msgspec.Struct, frozen=True):
    """One problem in a scenario file."""

    path: str
    line: int
    col: int
    message: str
    source_line: str = ""
    hint: str | None = None
    severity: str = "error"

    def render(self) -> str:
        message = _escaped(self.message)
        where = self.path if self.line == WHOLE_FILE else f"{self.path}:{self.line}:{self.col}"
        out = [f"{where}: {self.severity}: {message}"]
        if self.source_line:
            out.append(f"    {_shown(self.source_line)}")
            # Keep tabs so the caret lines up under tab-indented text.
            pad = "".join(c if c == "\t" else " " for c in self.source_line[: self.col - 1])
            out.append(f"    {pad}^")
        if self.hint:
            out.append(f"hint: {_escaped(self.hint)}")
        return "\n".join(out)


# A file's control characters (a diagnostic may be about one) must not reach the
# terminal as they are: ESC starts escape sequences, BEL rings, a newline would
# break the one-line `path:line:col:` form that tools parse.


def _is_control(c: str) -> bool:
    return unicodedata.category(c) == "Cc"


def _shown(source_line: str) -> str:
    """The source line with control characters (but tabs) as U+FFFD: one column each."""
    if source_line.isprintable():
        return source_line
    return "".join("\ufffd" if c != "\t" and _is_control(c) else c for c in source_line)


def _escaped(text: str) -> str:
    """Message text with control characters written as escapes (``\\x1b``)."""
    if text.isprintable():
        return text
    return "".join(repr(c)[1:-1] if _is_control(c) else c for c in text)


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """A ``did you mean`` hint for a near miss, or None."""
    close = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    return f"did you mean `{close[0]}`?" if close else None
