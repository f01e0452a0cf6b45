"""Report data as HTML: escaped, control characters shown, long reasons cut.

An edge module under :mod:`.html` and :mod:`.html_timeline`: everything
taken from a report (ids, scenario names, reasons quoting user and agent
text, file names) reaches the page through :func:`escaped`, the one rule
that keeps report data out of the markup.
"""

from __future__ import annotations

import html

from mantle_stream.core.errors import CONTROL_ESCAPES

__all__ = ["MAX_REASON", "escaped", "reason_html", "where_text"]

#: The longest reason shown in full; longer ones are cut (the JSON report has them whole).
MAX_REASON = 2000


def escaped(value: object) -> str:
    """Report data as HTML text or attribute value: control characters shown, all escaped."""
    return html.escape(str(value).translate(CONTROL_ESCAPES), quote=True)


def reason_html(reason: str) -> str:
    if len(reason) > MAX_REASON:
        reason = reason[:MAX_REASON] + f"… ({len(reason) - MAX_REASON} more characters)"
    return escaped(reason)


def where_text(file: str | None, line: int | None) -> str:
    if file is None:
        return "" if line is None else f"line {line}"
    return file if line is None else f"{file}:{line}"
