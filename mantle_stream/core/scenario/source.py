"""YAML loading with positions, YAML 1.2 core-schema scalars and safety limits.

First stage of the scenario pipeline. PyYAML composes a node tree (it never
constructs Python objects, so no tag can run code); this module converts it to
:class:`YNode` values that keep 1-based line and column for diagnostics.

Why not ``yaml.safe_load``: PyYAML implements YAML 1.1, where ``yes``/``on``
are booleans and ``1_000`` or ``1:30`` are integers. Scenario files are YAML
1.2 core schema, so the implicit resolvers are replaced here, and a scalar
with an explicit core tag (``!!int``, ``!!bool``, ...) must match the same
patterns. Duplicate keys and unknown tags are reported as errors instead of
being silently accepted.

Every way a text can fail to load ends as a :class:`Diagnostic`, never as a
traceback: syntax errors (with PyYAML's "while scanning ..." context),
characters YAML forbids, an alias inside the node it names (an infinite
value), nesting deeper than :data:`MAX_DEPTH` and documents of more than
:data:`MAX_NODES` nodes once aliases are expanded ("billion laughs").
"""

from __future__ import annotations

import math
import re
from typing import Any, cast

import yaml

from mantle_stream.core.scenario.diagnostics import Diagnostic

__all__ = [
    "MAX_DEPTH",
    "MAX_NODES",
    "YNode",
    "YamlProblem",
    "compose",
    "describe",
    "source_lines",
    "to_plain",
]

# A scenario file has at most a few thousand nodes; a million means an alias bomb.
MAX_NODES = 100_000
# A scenario nests about ten levels deep. The limit keeps every recursive walk
# (PyYAML's composer, the converter, the checker) far below Python's recursion
# limit, whatever the input.
MAX_DEPTH = 100

_STR = "tag:yaml.org,2002:str"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_BOOL = "tag:yaml.org,2002:bool"
_NULL = "tag:yaml.org,2002:null"
_SEQ = "tag:yaml.org,2002:seq"
_MAP = "tag:yaml.org,2002:map"
_STANDARD_PREFIX = "tag:yaml.org,2002:"

#: The core schema's pattern for each scalar type: used to resolve plain
#: scalars and to check scalars that carry the type's tag explicitly.
_CORE_PATTERNS: dict[str, re.Pattern[str]] = {
    _BOOL: re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
    _NULL: re.compile(r"^(?:~|null|Null|NULL|)$"),
    _INT: re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"),
    _FLOAT: re.compile(
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
}
_FIRST_CHARS: dict[str, list[str]] = {
    _BOOL: list("tTfF"),
    _NULL: ["~", "n", "N", ""],
    _INT: list("-+0123456789"),
    _FLOAT: list("-+0123456789."),
}
_NOT_A = {_INT: "an integer", _FLOAT: "a number", _BOOL: "a boolean", _NULL: "null"}

# The line breaks PyYAML counts (YAML 1.1 also breaks at NEL, LS and PS), so
# that source lines and PyYAML's marks always agree.
_LINE_BREAK = re.compile("\r\n|[\r\n\x85\u2028\u2029]")


def source_lines(text: str) -> list[str]:
    """The lines of ``text`` as PyYAML numbers them (index 0 is line 1)."""
    lines = _LINE_BREAK.split(text)
    if lines[-1] == "":
        lines.pop()  # the break that ends the last line does not start another
    return lines


class _CoreResolver(yaml.resolver.Resolver):
    """Implicit resolvers of the YAML 1.2 core schema (and nothing else)."""


_CoreResolver.yaml_implicit_resolvers = {}
for _tag, _pattern in _CORE_PATTERNS.items():
    _CoreResolver.add_implicit_resolver(_tag, _pattern, _FIRST_CHARS[_tag])


class _Refused(Exception):
    """A document PyYAML could compose but that must not be: where, what, what to do."""

    def __init__(self, mark: Any, message: str, hint: str | None) -> None:
        super().__init__(message)
        self.mark = mark
        self.message = message
        self.hint = hint


class _Loader(
    yaml.reader.Reader,
    yaml.scanner.Scanner,
    yaml.parser.Parser,
    yaml.composer.Composer,
    _CoreResolver,
):
    def __init__(self, stream: str) -> None:
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        yaml.composer.Composer.__init__(self)
        _CoreResolver.__init__(self)
        self.aliases = 0  # alias events seen: whether a large tree may be an alias bomb
        self.depth = 0
        self.open_anchors: set[str] = set()  # anchors of the collections being composed

    def compose_node(self, parent: Any, index: Any) -> Any:
        # PyYAML's composer recurses once per level and lets an alias name a
        # collection that is still open (`&a [*a]`: a cyclic node graph).
        # Both are refused here, before they can recurse without end.
        event: Any = cast(Any, self).peek_event()  # untyped in PyYAML's stubs
        if isinstance(event, yaml.AliasEvent):
            self.aliases += 1
            if event.anchor in self.open_anchors:
                raise _Refused(
                    event.start_mark,
                    f"alias `*{event.anchor}` is inside the node `&{event.anchor}` it refers to",
                    "a value cannot contain itself; repeat the content instead of the alias",
                )
            return super().compose_node(parent, index)
        if not isinstance(event, yaml.CollectionStartEvent):
            return super().compose_node(parent, index)
        if self.depth >= MAX_DEPTH:
            raise _Refused(
                event.start_mark,
                f"the document nests deeper than {MAX_DEPTH} levels",
                "a scenario file nests a few levels deep; is this the right file?",
            )
        anchor = event.anchor
        self.depth += 1
        if anchor is not None:
            self.open_anchors.add(anchor)
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1
            if anchor is not None:
                self.open_anchors.discard(anchor)


class YNode:
    """A YAML node with its position: ``value`` is a dict, list or scalar.

    Mapping values are ``dict[str, tuple[YNode, YNode]]`` (key node, value
    node) so that problems with a key can point at the key. ``text`` is the
    scalar as written (``0x1F``, ``True``, ``~``) for messages that describe
    it, or None.
    """

    __slots__ = ("col", "line", "text", "value")

    def __init__(self, value: Any, line: int, col: int, text: str | None = None) -> None:
        self.value = value
        self.line = line
        self.col = col
        self.text = text

    @property
    def is_map(self) -> bool:
        return isinstance(self.value, dict)

    @property
    def is_seq(self) -> bool:
        return isinstance(self.value, list)

    def __repr__(self) -> str:
        return f"YNode({self.value!r}, {self.line}:{self.col})"


def _spelling(value: Any) -> str:
    """A scalar value written as YAML (for nodes that do not carry their text)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return ".nan"
        if math.isinf(value):
            return ".inf" if value > 0 else "-.inf"
    return str(value)


def _type_name(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    return "a string"


_SHOWN_CHARS = 60  # a value quoted in a message is cut after this many characters


def _as_written(node: YNode) -> str | None:
    """A scalar as the user wrote it, in backticks; None for null and collections."""
    value = node.value
    if value is None or isinstance(value, (dict, list)):
        return None
    if isinstance(value, str):
        text = value
    else:
        text = node.text if node.text is not None else _spelling(value)
    if len(text) > _SHOWN_CHARS:
        text = text[: _SHOWN_CHARS - 1] + "…"
    return f"`{text}`"


def describe(node: YNode) -> str:
    """What a node is, in the user's YAML: ``an integer `0x1F```, ``a list``, ``null``."""
    shown = _as_written(node)
    name = _type_name(node.value)
    return name if shown is None else f"{name} {shown}"


class YamlProblem(Exception):
    """Raised by :func:`compose` with the diagnostics of an unreadable document."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = diagnostics
        super().__init__(diagnostics[0].render() if diagnostics else "bad YAML")


def _short_tag(tag: str) -> str:
    """A tag as it is usually written: ``!!set`` for ``tag:yaml.org,2002:set``."""
    if tag.startswith(_STANDARD_PREFIX):
        return "!!" + tag[len(_STANDARD_PREFIX) :]
    return tag


class _Converter:
    def __init__(self, path: str, lines: list[str], aliases: int) -> None:
        self.path = path
        self.lines = lines
        self.aliases = aliases
        self.budget = MAX_NODES
        self.problems: list[Diagnostic] = []

    def position(self, line0: int, col0: int) -> tuple[int, int]:
        """A 0-based position as 1-based line and column, never past the end of the text.

        PyYAML marks the end of the stream (and an empty value there) on the
        line after the last one; a diagnostic points at the end of the last line.
        """
        if not self.lines:
            return 1, 1
        if line0 >= len(self.lines):
            return len(self.lines), len(self.lines[-1]) + 1
        return line0 + 1, min(col0, len(self.lines[line0])) + 1

    def at(self, line0: int, col0: int, message: str, hint: str | None = None) -> Diagnostic:
        """A diagnostic at a 0-based position, with its source line."""
        line, col = self.position(line0, col0)
        src = self.lines[line - 1] if self.lines else ""
        return Diagnostic(self.path, line, col, message, src, hint)

    def diag(self, mark: Any, message: str, hint: str | None = None) -> Diagnostic:
        return self.at(mark.line, mark.column, message, hint)

    def node(self, value: Any, mark: Any, text: str | None = None) -> YNode:
        line, col = self.position(mark.line, mark.column)
        return YNode(value, line, col, text)

    def convert(self, node: yaml.Node, depth: int = 0) -> YNode:
        self.budget -= 1
        if self.budget < 0:
            if self.aliases:
                raise YamlProblem(
                    [
                        self.diag(
                            node.start_mark,
                            f"document expands to more than {MAX_NODES} nodes",
                            "anchors and aliases that expand enormously are refused",
                        )
                    ]
                )
            raise YamlProblem(
                [
                    self.diag(
                        node.start_mark,
                        f"document has more than {MAX_NODES} nodes",
                        "a scenario file is a few KiB of YAML; is this the right file?",
                    )
                ]
            )
        if depth > MAX_DEPTH:
            # The composer caps nesting as written; only aliases pasted into
            # one another can nest deeper.
            raise YamlProblem(
                [
                    self.diag(
                        node.start_mark,
                        f"aliases expand to nesting deeper than {MAX_DEPTH} levels",
                        "anchors and aliases that expand enormously are refused",
                    )
                ]
            )
        mark = node.start_mark
        if isinstance(node, yaml.MappingNode):
            if node.tag != _MAP:
                self.problems.append(self.diag(mark, f"unsupported tag `{_short_tag(node.tag)}`"))
            out: dict[str, tuple[YNode, YNode]] = {}
            for key_node, value_node in node.value:
                key = self.convert(key_node, depth + 1)
                value = self.convert(value_node, depth + 1)
                if not isinstance(key.value, str):
                    shown = _as_written(key) or _type_name(key.value)
                    self.problems.append(
                        self.diag(key_node.start_mark, f"mapping key must be a string, got {shown}")
                    )
                    continue
                if key.value in out:
                    first = out[key.value][0]
                    self.problems.append(
                        self.diag(
                            key_node.start_mark,
                            f"duplicate key `{key.value}`",
                            f"first defined at line {first.line}, column {first.col}",
                        )
                    )
                    continue
                out[key.value] = (key, value)
            return self.node(out, mark)
        if isinstance(node, yaml.SequenceNode):
            if node.tag != _SEQ:
                self.problems.append(self.diag(mark, f"unsupported tag `{_short_tag(node.tag)}`"))
            items = [self.convert(n, depth + 1) for n in node.value]
            return self.node(items, mark)
        text: str = node.value
        value = self.scalar(node)
        return self.node(value, mark, None if isinstance(value, str) else text)

    def scalar(self, node: yaml.Node) -> Any:
        text: str = node.value
        tag = node.tag
        if tag == _STR:
            return text
        pattern = _CORE_PATTERNS.get(tag)
        if pattern is None:
            self.problems.append(self.diag(node.start_mark, f"unsupported tag `{_short_tag(tag)}`"))
            return text
        # Implicitly resolved scalars always match; an explicit tag (`!!int 1_000`)
        # may not, and Python's int()/float() would accept more than YAML 1.2 does.
        if pattern.fullmatch(text) is None:
            self.problems.append(self.diag(node.start_mark, f"`{text}` is not {_NOT_A[tag]}"))
            return text
        if tag == _NULL:
            return None
        if tag == _BOOL:
            return text.lower() == "true"
        if tag == _INT:
            if text.startswith("0o"):
                return int(text[2:], 8)
            if text.startswith("0x"):
                return int(text[2:], 16)
            return int(text)
        lowered = text.lower()
        if lowered.endswith(".inf"):
            return -math.inf if lowered.startswith("-") else math.inf
        if lowered == ".nan":
            return math.nan
        return float(text)


def _syntax_error(converter: _Converter, exc: yaml.MarkedYAMLError, text_length: int) -> Diagnostic:
    """PyYAML's error as a diagnostic: its problem, and its context where that helps."""
    problem = (exc.problem or "").strip()
    context = (exc.context or "").strip()
    mark = exc.problem_mark or exc.context_mark
    context_mark = exc.context_mark
    message = problem or context or "invalid YAML"
    hint: str | None = None
    if context and problem:
        if context.startswith("while "):
            # Background ("while parsing a block mapping"). When the text ended
            # inside the construct the problem's position shows nothing, so the
            # context is what says what was left open.
            if exc.problem_mark is not None and exc.problem_mark.index >= text_length:
                message = f"{problem} {context}"
            opened = re.fullmatch(r"while (?:scanning|parsing) (?:an? )?(.+)", context)
            if (
                context_mark is not None
                and mark is not None
                and opened is not None
                and (context_mark.line, context_mark.column) != (mark.line, mark.column)
            ):
                hint = (
                    f"the {opened[1]} starts at line {context_mark.line + 1}, "
                    f"column {context_mark.column + 1}"
                )
        elif context.endswith("; first occurrence"):  # found duplicate anchor 'a'; ...
            message = context[: -len("; first occurrence")]
            if context_mark is not None:
                hint = (
                    f"first defined at line {context_mark.line + 1}, "
                    f"column {context_mark.column + 1}"
                )
        else:
            # The first half of one sentence ("expected a single document in
            # the stream", "but found another document").
            message = f"{context}, {problem}"
            if context.startswith("expected a single document"):
                hint = "a scenario file holds one YAML document; remove the `---` or split the file"
    if mark is None:
        return Diagnostic(converter.path, 1, 1, f"invalid YAML: {message}", hint=hint)
    return converter.diag(mark, f"invalid YAML: {message}", hint)


def _reader_error(converter: _Converter, text: str, exc: yaml.reader.ReaderError) -> Diagnostic:
    """A character YAML does not allow, at its line and column."""
    before = text[: exc.position]
    line0 = len(_LINE_BREAK.findall(before))
    starts = [m.end() for m in _LINE_BREAK.finditer(before)]
    col0 = exc.position - (starts[-1] if starts else 0)
    code = exc.character if isinstance(exc.character, int) else 0
    hint = None
    if code < 0x100:
        hint = f"remove it, or write it as `\\x{code:02x}` inside a double-quoted string"
    return converter.at(
        line0, col0, f"invalid YAML: unacceptable character #x{code:04x}: {exc.reason}", hint
    )


def compose(text: str, path: str) -> tuple[YNode | None, list[Diagnostic]]:
    """Compose one YAML document into a :class:`YNode` tree.

    Returns the tree (None for an empty document) and the non-fatal problems
    (duplicate keys, unknown tags, text a core tag does not accept). Raises
    :class:`YamlProblem` when the text is not YAML at all, when an alias is
    inside the node it names, or when the document nests deeper than
    :data:`MAX_DEPTH` or expands beyond :data:`MAX_NODES`.
    """
    lines = source_lines(text)
    converter = _Converter(path, lines, aliases=0)
    loader: _Loader | None = None
    try:
        # The reader checks every character in its constructor, so it is built
        # inside the `try` too.
        loader = _Loader(text)
        node = loader.get_single_node()
        converter.aliases = loader.aliases
        if node is None:
            return None, []
        tree = converter.convert(node)
    except _Refused as exc:
        raise YamlProblem([converter.diag(exc.mark, exc.message, exc.hint)]) from None
    except yaml.reader.ReaderError as exc:
        raise YamlProblem([_reader_error(converter, text, exc)]) from None
    except yaml.MarkedYAMLError as exc:
        raise YamlProblem([_syntax_error(converter, exc, len(text))]) from None
    except yaml.YAMLError as exc:
        raise YamlProblem([Diagnostic(path, 1, 1, f"invalid YAML: {exc}")]) from None
    except RecursionError:
        # Unreachable with MAX_DEPTH unless the caller is itself deep in the stack.
        raise YamlProblem(
            [Diagnostic(path, 1, 1, "the document nests too deeply to load")]
        ) from None
    finally:
        if loader is not None:
            loader.dispose()
    return tree, converter.problems


def to_plain(node: YNode) -> Any:
    """The plain Python value of a node (dicts, lists, scalars)."""
    value = node.value
    if isinstance(value, dict):
        return {k: to_plain(v) for k, (_, v) in value.items()}
    if isinstance(value, list):
        return [to_plain(v) for v in value]
    return value
