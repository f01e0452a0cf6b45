"""YAML loading with positions, YAML 1.2 core-schema scalars and safety limits.

First stage of the scenario pipeline. PyYAML composes a node tree (it never
constructs Python objects, so no tag can run code); this module converts it to
:class:`YNode` values that keep 1-based line and column for diagnostics.

Why not ``yaml.safe_load``: PyYAML implements YAML 1.1, where ``yes``/``on``
are booleans and ``1_000`` or ``1:30`` are integers. Scenario files are YAML
1.2 core schema, so the implicit resolvers are replaced here. Duplicate keys,
explicit unknown tags and alias expansions beyond a budget ("billion laughs")
are reported as errors instead of being silently accepted.
"""

from __future__ import annotations

import math
import re
from typing import Any

import yaml

from mantle_stream._diagnostics import Diagnostic

__all__ = ["MAX_NODES", "YNode", "YamlProblem", "compose", "to_plain"]

# A scenario file has at most a few thousand nodes; a million means an alias bomb.
MAX_NODES = 100_000

_STR = "tag:yaml.org,2002:str"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_BOOL = "tag:yaml.org,2002:bool"
_NULL = "tag:yaml.org,2002:null"
_SEQ = "tag:yaml.org,2002:seq"
_MAP = "tag:yaml.org,2002:map"


class _CoreResolver(yaml.resolver.Resolver):
    """Implicit resolvers of the YAML 1.2 core schema (and nothing else)."""


_CoreResolver.yaml_implicit_resolvers = {}
for _tag, _regexp, _first in (
    (_BOOL, r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    (_NULL, r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    (_INT, r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", "-+0123456789"),
    (
        _FLOAT,
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
        "-+0123456789.",
    ),
):
    _CoreResolver.add_implicit_resolver(_tag, re.compile(_regexp), list(_first))


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


class YNode:
    """A YAML node with its position: ``value`` is a dict, list or scalar.

    Mapping values are ``dict[str, tuple[YNode, YNode]]`` (key node, value
    node) so that problems with a key can point at the key.
    """

    __slots__ = ("col", "line", "value")

    def __init__(self, value: Any, line: int, col: int) -> None:
        self.value = value
        self.line = line
        self.col = col

    @property
    def is_map(self) -> bool:
        return isinstance(self.value, dict)

    @property
    def is_seq(self) -> bool:
        return isinstance(self.value, list)

    def __repr__(self) -> str:
        return f"YNode({self.value!r}, {self.line}:{self.col})"


class YamlProblem(Exception):
    """Raised by :func:`compose` with the diagnostics of an unreadable document."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = diagnostics
        super().__init__(diagnostics[0].render() if diagnostics else "bad YAML")


class _Converter:
    def __init__(self, path: str, lines: list[str]) -> None:
        self.path = path
        self.lines = lines
        self.budget = MAX_NODES
        self.problems: list[Diagnostic] = []

    def diag(self, mark: yaml.Mark, message: str, hint: str | None = None) -> Diagnostic:
        line = mark.line + 1
        src = self.lines[mark.line] if mark.line < len(self.lines) else ""
        return Diagnostic(self.path, line, mark.column + 1, message, src, hint)

    def convert(self, node: yaml.Node) -> YNode:
        self.budget -= 1
        if self.budget < 0:
            raise YamlProblem([self.diag(
                node.start_mark,
                f"document expands to more than {MAX_NODES} nodes",
                "anchors and aliases that expand enormously are refused",
            )])
        mark = node.start_mark
        if isinstance(node, yaml.MappingNode):
            if node.tag != _MAP:
                self.problems.append(self.diag(mark, f"unsupported tag `{node.tag}`"))
            out: dict[str, tuple[YNode, YNode]] = {}
            for key_node, value_node in node.value:
                key = self.convert(key_node)
                value = self.convert(value_node)
                if not isinstance(key.value, str):
                    self.problems.append(self.diag(
                        key_node.start_mark, f"mapping key must be a string, got `{key.value!r}`"
                    ))
                    continue
                if key.value in out:
                    first = out[key.value][0]
                    self.problems.append(self.diag(
                        key_node.start_mark, f"duplicate key `{key.value}`",
                        f"first defined at line {first.line}, column {first.col}",
                    ))
                    continue
                out[key.value] = (key, value)
            return YNode(out, mark.line + 1, mark.column + 1)
        if isinstance(node, yaml.SequenceNode):
            if node.tag != _SEQ:
                self.problems.append(self.diag(mark, f"unsupported tag `{node.tag}`"))
            return YNode([self.convert(n) for n in node.value], mark.line + 1, mark.column + 1)
        return YNode(self.scalar(node), mark.line + 1, mark.column + 1)

    def scalar(self, node: yaml.Node) -> Any:
        text: str = node.value
        tag = node.tag
        if tag == _STR:
            return text
        if tag == _NULL:
            return None
        if tag == _BOOL:
            return text.lower() == "true"
        if tag == _INT:
            try:
                if text.startswith("0o"):
                    return int(text[2:], 8)
                if text.startswith("0x"):
                    return int(text[2:], 16)
                return int(text)
            except ValueError:
                self.problems.append(self.diag(node.start_mark, f"`{text}` is not an integer"))
                return text
        if tag == _FLOAT:
            lowered = text.lower()
            if lowered.endswith(".inf"):
                return -math.inf if lowered.startswith("-") else math.inf
            if lowered == ".nan":
                return math.nan
            try:
                return float(text)
            except ValueError:
                self.problems.append(self.diag(node.start_mark, f"`{text}` is not a number"))
                return text
        self.problems.append(self.diag(node.start_mark, f"unsupported tag `{tag}`"))
        return text


def compose(text: str, path: str) -> tuple[YNode | None, list[Diagnostic]]:
    """Compose one YAML document into a :class:`YNode` tree.

    Returns the tree (None for an empty document) and the non-fatal problems
    (duplicate keys, unknown tags). Raises :class:`YamlProblem` when the text
    is not YAML at all or expands beyond :data:`MAX_NODES`.
    """
    lines = text.splitlines()
    converter = _Converter(path, lines)
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        message = (exc.problem or exc.context or "invalid YAML").strip()
        if mark is None:
            raise YamlProblem([Diagnostic(path, 1, 1, f"invalid YAML: {message}")]) from None
        raise YamlProblem([converter.diag(mark, f"invalid YAML: {message}")]) from None
    except yaml.YAMLError as exc:
        raise YamlProblem([Diagnostic(path, 1, 1, f"invalid YAML: {exc}")]) from None
    finally:
        loader.dispose()
    if node is None:
        return None, []
    tree = converter.convert(node)
    return tree, converter.problems


def to_plain(node: YNode) -> Any:
    """The plain Python value of a node (dicts, lists, scalars)."""
    value = node.value
    if isinstance(value, dict):
        return {k: to_plain(v) for k, (_, v) in value.items()}
    if isinstance(value, list):
        return [to_plain(v) for v in value]
    return value
