"""Reading a scenario's YAML: positions in, diagnostics out, every problem collected.

:class:`Checker` holds what every check's validation needs: the file's lines
(to quote them), the diagnostics found so far, the registered assertion kinds,
and small readers for mappings, keys, strings and booleans that report what
is wrong at the right line. Each assertion family validates its own checks
with it (see :mod:`mantle_stream.core.assertions`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Generic, Protocol, TypeVar

from mantle_stream.core.scenario.diagnostics import Diagnostic, did_you_mean
from mantle_stream.core.scenario.source import YNode, describe, source_lines

__all__ = ["EMPTY_HINT", "Checker", "KindInfo"]


class KindInfo(Protocol):
    """What the checker reads of a registered kind (an ``AssertionKind`` row)."""

    @property
    def fields(self) -> tuple[str, ...]: ...

    @property
    def wrap_hint(self) -> Callable[[str], str] | None: ...


KindT = TypeVar("KindT", bound=KindInfo)

#: What to write instead of an empty mapping where a check is expected.
EMPTY_HINT = "write the check's kind as the key, e.g. `- skill_activated: {skill_id: card_replace}`"


class Checker(Generic[KindT]):
    """Walks a scenario's node tree, collecting diagnostics; ``kinds``: every
    registered assertion kind, by name."""

    def __init__(self, path: str, text: str, kinds: Mapping[str, KindT]) -> None:
        self.path = path
        self.kinds = kinds
        self.lines = source_lines(text)
        self.problems: list[Diagnostic] = []

    # -- reporting

    def error(self, node: YNode, message: str, hint: str | None = None) -> None:
        src = self.lines[node.line - 1] if 0 < node.line <= len(self.lines) else ""
        self.problems.append(Diagnostic(self.path, node.line, node.col, message, src, hint))

    # -- shape helpers

    def mapping(self, node: YNode, what: str) -> dict[str, tuple[YNode, YNode]] | None:
        if not node.is_map:
            self.error(node, f"{what} must be a mapping, got {describe(node)}")
            return None
        value: dict[str, tuple[YNode, YNode]] = node.value
        return value

    def keys(
        self,
        owner: YNode,
        mapping: dict[str, tuple[YNode, YNode]],
        what: str,
        *,
        required: Iterable[str] = (),
        optional: Iterable[str] = (),
        rejected: dict[str, str] | None = None,
        missing_hints: dict[str, str] | None = None,
    ) -> bool:
        """Check required/optional/rejected keys; True when nothing is missing or unknown.

        A missing key is reported at ``owner``: the key whose value the mapping
        is (`tools_within_one_turn:`), or the mapping itself when no key owns
        it (the document, a list item). The mapping's own position would be
        its first key, which has nothing to do with what is missing.
        """
        required = tuple(required)
        allowed = set(required) | set(optional)
        ok = True
        for key, (key_node, _) in mapping.items():
            if key in allowed:
                continue
            ok = False
            if rejected and key in rejected:
                self.error(key_node, f"`{key}` is not allowed in {what}", rejected[key])
            else:
                hint = did_you_mean(key, allowed) or (
                    f"allowed keys: {', '.join(f'`{k}`' for k in sorted(allowed))}"
                    if allowed
                    else None
                )
                self.error(key_node, f"unknown key `{key}` in {what}", hint)
        for key in required:
            if key not in mapping:
                ok = False
                hint = (missing_hints or {}).get(key)
                self.error(owner, f"{what} is missing required key `{key}`", hint)
        return ok

    def string(self, mapping: dict[str, tuple[YNode, YNode]], key: str, what: str) -> str | None:
        if key not in mapping:
            return None
        node = mapping[key][1]
        if not isinstance(node.value, str):
            self.error(node, f"`{key}` in {what} must be a string, got {describe(node)}")
            return None
        return node.value

    def boolean(self, mapping: dict[str, tuple[YNode, YNode]], key: str, what: str) -> bool | None:
        if key not in mapping:
            return None
        node = mapping[key][1]
        if not isinstance(node.value, bool):
            hint = None
            if isinstance(node.value, str) and node.value.lower() in {"yes", "no", "on", "off"}:
                hint = (
                    "scenario files are YAML 1.2: only `true` and `false` are booleans, "
                    f"`{node.value}` is a string"
                )
            self.error(node, f"`{key}` in {what} must be true or false, got {describe(node)}", hint)
            return None
        return bool(node.value)

    # -- document

    def single_key(
        self,
        node: YNode,
        what: str,
        kinds: Iterable[str] | None = None,
        *,
        empty_hint: str = EMPTY_HINT,
    ) -> tuple[str, YNode, YNode] | None:
        """An assertion is a mapping with exactly one key, the check's kind.

        ``kinds``: those expected here (for hints); every registered one by
        default. ``empty_hint``: what to write instead of an empty mapping.
        """
        mapping = self.mapping(node, what)
        if mapping is None:
            return None
        kinds = tuple(self.kinds if kinds is None else kinds)
        if len(mapping) != 1:
            names = ", ".join(f"`{k}`" for k in mapping) or "nothing"
            self.error(
                node,
                f"{what} must have exactly one key, the check's kind; got {names}",
                self._shape_hint(mapping, what, kinds, empty_hint),
            )
            return None
        ((kind, (key_node, value_node)),) = mapping.items()
        if kind not in self.kinds:
            hint = self._wrap_hint([kind], what, kinds) or did_you_mean(kind, kinds)
            self.error(key_node, f"unknown assertion `{kind}`", hint)
            return None
        return kind, key_node, value_node

    def _shape_hint(
        self,
        mapping: dict[str, tuple[YNode, YNode]],
        what: str,
        kinds: tuple[str, ...],
        empty_hint: str,
    ) -> str | None:
        """What to do about a list item that is not one check: why it has other keys."""
        noun = what.split(" ", 1)[1]  # "an assertion" -> "assertion"
        keys = list(mapping)
        checks = [k for k in keys if k in self.kinds]
        if len(checks) >= 2:
            return f"start each {noun} with its own `- `"
        if len(checks) == 1:
            (kind,) = checks
            extra = [k for k in keys if k != kind]
            if mapping[kind][1].value is None:
                # `- skill_activated:` with its fields at the same indentation
                return f"indent the fields of `{kind}` under it"
            listed = ", ".join(f"`{k}`" for k in extra)
            if all(k in self.kinds[kind].fields for k in extra):
                return f"move {listed} into `{kind}`"
            return f"only `{kind}` belongs at this level; move {listed} into it or remove " + (
                "it" if len(extra) == 1 else "them"
            )
        wrap = self._wrap_hint(keys, what, kinds)
        if wrap is not None:
            return wrap
        if not keys:
            return empty_hint
        return did_you_mean(keys[0], kinds)

    def _wrap_hint(self, keys: list[str], what: str, kinds: tuple[str, ...]) -> str | None:
        """The hint of an expected kind whose fields ``keys`` all are, written bare."""
        for kind in kinds:
            entry = self.kinds.get(kind)
            if entry is not None and entry.wrap_hint and keys and set(keys) <= set(entry.fields):
                return entry.wrap_hint(what)
        return None
