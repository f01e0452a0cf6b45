"""Agent message checks: ``bot_uttered`` and ``bot_did_not_utter``.

A message matches when every field given holds: its response name (metadata
``utter_action``), its text against ``text_matches`` (a search bounded in
time: a pattern that backtracks catastrophically makes the assertion
``errored`` in that conversation, never a stall), its buttons by position.
Neither kind can be a step of ``sequencing`` (Mantle's schema forbids it).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import msgspec
import regex

from mantle_stream.core.assertions.base import (
    AssertionKind,
    Checker,
    CompileContext,
    Compiled,
    FirstMatch,
    Machine,
    Matcher,
    MatchTimeout,
    Outcome,
    Step,
    quote,
)
from mantle_stream.core.defaults import DEFAULT_REGEX_TIMEOUT
from mantle_stream.core.events.model import Bot, Payload, buttons_of
from mantle_stream.core.scenario.model import Check
from mantle_stream.core.scenario.source import YNode, describe

__all__ = [
    "KINDS",
    "LONG_TEXT",
    "BotCheck",
    "BotMatcher",
    "Button",
    "Forbidden",
    "compile_pattern",
    "may_backtrack",
    "nested_repetition",
]


class Button(msgspec.Struct, frozen=True):
    title: str
    payload: str | None = None  # None: any payload


class BotCheck(Check, frozen=True):
    kind: str  # bot_uttered | bot_did_not_utter
    utter_name: str | None = None
    text_matches: str | None = None
    buttons: tuple[Button, ...] | None = None


def bot(c: Checker, kind: str, key_node: YNode, node: YNode) -> BotCheck | None:
    what = f"`{kind}`"
    if node.value is None:
        node = YNode({}, node.line, node.col)
    mapping = c.mapping(node, what)
    if mapping is None:
        return None
    ok = c.keys(key_node, mapping, what, optional=("utter_name", "text_matches", "buttons"))
    if not mapping:
        c.error(
            node,
            f"{what} needs at least one of `utter_name`, `text_matches`, `buttons`",
            "a check with no field would match every message",
        )
        return None
    utter_name = c.string(mapping, "utter_name", what)
    text_matches = c.string(mapping, "text_matches", what)
    for key in ("utter_name", "text_matches"):
        if key in mapping and not isinstance(mapping[key][1].value, str):
            ok = False
    if text_matches is not None:
        try:
            re.compile(text_matches)
        except re.error as exc:
            pattern_node = mapping["text_matches"][1]
            c.error(
                pattern_node,
                f"`text_matches` is not a valid regular expression: "
                f"{exc.msg} at position {exc.pos}",
                "it is a Python regular expression; escape special characters with a backslash",
            )
            ok = False
    listed = None
    if "buttons" in mapping:
        listed = buttons(c, mapping["buttons"][1], what)
        ok = ok and listed is not None
    if not ok:
        return None
    return BotCheck(kind=kind, utter_name=utter_name, text_matches=text_matches, buttons=listed)


def buttons(c: Checker, node: YNode, what: str) -> tuple[Button, ...] | None:
    if not node.is_seq:
        c.error(node, f"`buttons` in {what} must be a list, got {describe(node)}")
        return None
    out: list[Button] = []
    ok = True
    for item in node.value:
        mapping = c.mapping(item, "a button")
        if mapping is None:
            ok = False
            continue
        ok = c.keys(item, mapping, "a button", required=("title",), optional=("payload",)) and ok
        title = c.string(mapping, "title", "a button")
        payload = c.string(mapping, "payload", "a button")
        if title is None or ("payload" in mapping and payload is None):
            ok = False
            continue
        out.append(Button(title=title, payload=payload))
    return tuple(out) if ok else None


def compile_pattern(text: str) -> Any:
    """``text_matches`` compiled with the ``regex`` package (Python's syntax), whose
    searches take a ``timeout``; ``re`` for the rare pattern only ``re`` reads."""
    try:
        return regex.compile(text)
    except regex.error:
        return re.compile(text)


#: Messages at least this long are always searched with the time limit: a
#: pattern such as ``a.*(b|c)`` takes time quadratic in the text.
LONG_TEXT = 4096


def nested_repetition(pattern: str) -> bool:
    """Whether a group that repeats without bound holds a repetition without bound,
    as in ``(a+)+`` or ``(.*x)*``: the shape that backtracks catastrophically."""
    return _repeated_group(pattern, alternation=False)


def may_backtrack(pattern: str) -> bool:
    """Whether a group that repeats without bound holds a repetition or alternatives
    (``(a+)+``, ``(a|aa)+``), or three repetitions without bound follow each other
    (``a*a*a*b``: time polynomial of that degree): such a pattern is always
    searched with the time limit."""
    return _repeated_group(pattern, alternation=True) or _unbounded_count(pattern) >= 3


def _syntax(pattern: str) -> Iterator[tuple[int, str]]:
    """(index, character) of each character of a pattern that is syntax: not
    escaped by a backslash, not inside a character class."""
    escaped = in_class = False
    for i, c in enumerate(pattern):
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        else:
            yield i, c


def _unbounded_count(pattern: str) -> int:
    """How many repetitions without bound the pattern holds."""
    return sum(1 for i, _ in _syntax(pattern) if _unbounded_at(pattern, i))


def _repeated_group(pattern: str, *, alternation: bool) -> bool:
    stack: list[bool] = []  # per open group: does it hold an unbounded repetition?
    for i, c in _syntax(pattern):
        if c == "(":
            stack.append(False)
        elif c == "|" and alternation and stack:
            stack[-1] = True
        elif c == ")" and stack:
            inner = stack.pop()
            if inner and _unbounded_at(pattern, i + 1):
                return True
            if stack:
                stack[-1] = stack[-1] or inner
        elif stack and _unbounded_at(pattern, i):
            stack[-1] = True
    return False


def _unbounded_at(pattern: str, i: int) -> bool:
    """A quantifier without an upper bound starts at ``pattern[i]``."""
    return i < len(pattern) and (
        pattern[i] in "*+" or re.match(r"\{\d*,\}", pattern[i:]) is not None
    )


class BotMatcher(Matcher):
    """``bot_uttered`` / ``bot_did_not_utter``: every given field, on one message.

    A ``text_matches`` search may take at most ``timeout`` seconds on one
    message: a pattern that backtracks catastrophically raises
    :class:`MatchTimeout`, which the engine reports as an evaluation error of
    the assertion in that conversation, never a stall for everyone.
    """

    __slots__ = ("bounded", "buttons", "pattern", "risky", "timeout", "utter_name")

    def __init__(self, check: BotCheck, timeout: float = DEFAULT_REGEX_TIMEOUT) -> None:
        self.utter_name = check.utter_name
        self.timeout = timeout
        # A search with a time limit costs about ten plain ones: a pattern that
        # cannot backtrack catastrophically (see may_backtrack) is searched in a
        # short message with `re`; anything else with the limit.
        text = check.text_matches
        self.pattern = None if text is None else re.compile(text)
        self.bounded: Any = None if text is None else compile_pattern(text)
        self.risky = text is not None and may_backtrack(text)
        self.buttons = (
            None if check.buttons is None else tuple((b.title, b.payload) for b in check.buttons)
        )
        # A check naming a response is only shown messages rendered from it.
        self.routes = (("bot", check.utter_name),)

    def matches(self, payload: Payload, value: Any) -> bool:
        if type(payload) is not Bot:  # sequencing routes other kinds here too
            return False
        p: Bot = payload
        # ``value`` is the message's response name (metadata ``utter_action``).
        if self.utter_name is not None and value != self.utter_name:
            return False
        if self.pattern is not None:
            text = p.text
            if text is None:
                return False
            if not self.risky and len(text) < LONG_TEXT:
                found = self.pattern.search(text)
            else:
                try:
                    found = (
                        self.bounded.search(text, timeout=self.timeout)
                        if type(self.bounded) is not re.Pattern
                        else self.bounded.search(text)
                    )
                except TimeoutError:
                    raise MatchTimeout(
                        f"`text_matches` `{self.pattern.pattern}` ran out of its "
                        f"{self.timeout:g} s on a message of {len(text)} "
                        "characters (catastrophic backtracking?)"
                    ) from None
            if found is None:
                return False
        if self.buttons is not None:
            # At least as many buttons as listed; at each listed position the title
            # equals, and the payload when one is given.
            carried = buttons_of(p)
            if len(carried) < len(self.buttons):
                return False
            for (title, button_payload), (want_title, want_payload) in zip(
                carried, self.buttons, strict=False
            ):
                if title != want_title:
                    return False
                if want_payload is not None and button_payload != want_payload:
                    return False
        return True

    def describe(self) -> str:
        parts = []
        if self.utter_name is not None:
            parts.append(f"response `{self.utter_name}`")
        if self.pattern is not None:
            parts.append(f"text matching `{self.pattern.pattern}`")
        if self.buttons is not None:
            parts.append(
                "buttons " + ", ".join(f"`{t}`" for t, _ in self.buttons)
                if self.buttons
                else "any buttons"
            )
        return "agent message with " + " and ".join(parts)

    def never(self) -> str:
        return f"no {self.describe()}"


class Forbidden(Machine):
    """bot_did_not_utter: fails at the first matching event; passes at the end."""

    __slots__ = ()
    plan: Matcher

    def step(self, payload: Payload, value: Any, turn: int) -> Step:
        if self.plan.matches(payload, value):
            text = f"agent uttered the forbidden message ({self.plan.describe()})"
            if getattr(payload, "text", None):
                text += f": {quote(payload.text)}"  # type: ignore[attr-defined]
            return False, text
        return None

    def finish(self) -> Outcome:
        return True, f"never said: {self.plan.describe()}"


def _compile(check: BotCheck, context: CompileContext) -> Compiled:
    matcher = BotMatcher(check, context.regex_timeout)
    machine = FirstMatch if check.kind == "bot_uttered" else Forbidden
    return machine, matcher, set(matcher.routes)


KINDS = (
    AssertionKind(
        "bot_uttered",
        ("utter_name", "text_matches", "buttons"),
        bot,
        _compile,
        not_a_step="Mantle's scenario schema allows skill, ordered-block, "
        "`tool_executed` and memory steps only; check the message with a "
        "`bot_uttered` assertion of its own",
    ),
    AssertionKind(
        "bot_did_not_utter",
        ("utter_name", "text_matches", "buttons"),
        bot,
        _compile,
        not_a_step="it can only be judged at the end, not at a point in order",
    ),
)
