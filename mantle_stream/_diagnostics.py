"""Compiler-style diagnostics for scenario files.

Sits beside the scenario loader: every problem found while loading a file
becomes a :class:`Diagnostic` with a 1-based line and column, rendered as::

    path:line:col: error: message
        the source line
        ^
    hint: what to do instead
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

import msgspec

__all__ = ["Diagnostic", "did_you_mean"]


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
        out = [f"{self.path}:{self.line}:{self.col}: {self.severity}: {self.message}"]
        if self.source_line:
            out.append(f"    {self.source_line}")
            # Keep tabs so the caret lines up under tab-indented text.
            pad = "".join(c if c == "\t" else " " for c in self.source_line[: self.col - 1])
            out.append(f"    {pad}^")
        if self.hint:
            out.append(f"hint: {self.hint}")
        return "\n".join(out)


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """A ``did you mean`` hint for a near miss, or None."""
    close = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    return f"did you mean `{close[0]}`?" if close else None
