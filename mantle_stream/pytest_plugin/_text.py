"""What a failed or errored item says: the reason, the deciding event, the assertion.

Plain text, one piece of data per line, control characters escaped::

    the bot uttered `utter_cannot_help` (sequence 41) ...
    conversation sim-b4802004-... (run_2), turn 4

    deciding event: sequence 41, turn 4
      {
        "conversation_id": "sim-b4802004-...",
        ...
      }

    assertion #8 bot_did_not_utter: eval/scenarios/card_replace_damaged.yml:66
      66 |       - bot_did_not_utter:
         |         ^
      67 |           utter_name: utter_cannot_help
"""

from __future__ import annotations

import functools
import json
from typing import Any

from mantle_stream.core.errors import CONTROL_ESCAPES
from mantle_stream.core.verdicts import AssertionResult

__all__ = ["failure_text", "snippet"]

#: The most lines of an assertion's YAML shown (a long sequencing is cut).
MAX_SNIPPET_LINES = 12
#: The longest string of an event shown whole; a longer one is cut and measured.
MAX_SHOWN_STRING = 200


def _clean(text: str) -> str:
    return text.translate(CONTROL_ESCAPES)


def _shortened(value: Any) -> Any:
    """``value`` with every string longer than :data:`MAX_SHOWN_STRING` cut."""
    if isinstance(value, str) and len(value) > MAX_SHOWN_STRING:
        return f"{value[:MAX_SHOWN_STRING]}… ({len(value):,} characters)"
    if isinstance(value, dict):
        return {k: _shortened(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shortened(v) for v in value]
    return value


def pretty_event(line: bytes) -> list[str]:
    """An event's line as indented JSON, one line each, long strings cut (the line
    as it was when it is not JSON)."""
    try:
        text = json.dumps(_shortened(json.loads(line)), indent=2, ensure_ascii=False)
    except ValueError:
        return [_clean(line.decode("utf-8", "replace"))]
    return [_clean(part) for part in text.splitlines()]


@functools.lru_cache(maxsize=64)
def _source_lines(path: str) -> tuple[str, ...]:
    try:
        with open(path, encoding="utf-8") as fh:
            return tuple(fh.read().splitlines())
    except (OSError, UnicodeDecodeError):
        return ()


def snippet(lines: tuple[str, ...] | list[str], line: int, kind: str) -> list[str]:
    """The assertion written at ``line`` (1-based) of a scenario file's ``lines``:
    that line and the more indented ones after it, a caret under its kind."""
    if not 1 <= line <= len(lines):
        return []
    first = lines[line - 1]
    indent = len(first) - len(first.lstrip())
    numbers = [line]
    for number in range(line + 1, len(lines) + 1):
        text = lines[number - 1]
        if text.strip() and len(text) - len(text.lstrip()) <= indent:
            break
        numbers.append(number)
    while len(numbers) > 1 and not lines[numbers[-1] - 1].strip():
        numbers.pop()
    cut = len(numbers) > MAX_SNIPPET_LINES
    numbers = numbers[:MAX_SNIPPET_LINES]
    width = len(str(numbers[-1]))
    column = first.find(kind)
    if column < 0:
        column = indent
    out = []
    for number in numbers:
        out.append(f"{number:>{width}} | {_clean(lines[number - 1])}".rstrip())
        if number == line:
            out.append(f"{'':>{width}} | {' ' * column}^")
    if cut:
        out.append(f"{'':>{width}} | ...")
    return out


def failure_text(
    assertion: AssertionResult,
    *,
    conversation_id: str,
    run: str,
    path: str,
    shown_path: str,
    event: bytes | None,
) -> str:
    """The text of a failed or errored item (``path``: the scenario file to quote,
    ``shown_path``: how to name it)."""
    a = assertion
    where = f"conversation {conversation_id}" + (f" ({run})" if run != conversation_id else "")
    reason = a.reason or a.verdict
    if a.verdict == "errored":
        reason = f"could not be evaluated: {reason}"
    out = [_clean(reason), _clean(where)]
    out.append("")
    if a.decided_at is None:
        out.append(f"deciding event: none, the end of the conversation decided it (turn {a.turn})")
    else:
        out.append(f"deciding event: sequence {a.decided_at}, turn {a.turn}")
        if event is None:
            out.append("  (no longer at hand to show: read long before it decided)")
        else:
            out += [f"  {part}" for part in pretty_event(event)]
    line = a.line
    if line is not None:
        out.append("")
        out.append(f"assertion #{a.index} {a.kind}: {_clean(shown_path)}:{line}")
        out += [f"  {part}" for part in snippet(_source_lines(path), line, a.kind)]
    return "\n".join(out)
