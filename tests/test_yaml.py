"""The YAML layer of the scenario loader: scalars, keys, tags, aliases, limits.

docs/semantics.md: scenario files use YAML 1.2 core-schema scalars (only
``true``/``false`` are booleans; no sexagesimal or underscore integers) and
duplicate mapping keys are an error. Every problem is a compiler-style
diagnostic with a 1-based line and column, never a traceback.

Everything goes through the public API (``mantle_stream.load_scenario_text``,
``load_scenario_file``); typed values are observed where they matter:
``setup.initial_slots``, memory ``value`` and tool ``arguments``.
"""

from __future__ import annotations

import itertools
import json
import math
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mantle_stream import (
    Diagnostic,
    Scenario,
    ScenarioError,
    load_scenario_file,
    load_scenario_text,
)
from mantle_stream.core.assertions.memory import MemoryCheck
from mantle_stream.core.assertions.tools import ToolExecutedCheck
from mantle_stream.core.scenario.load import MAX_SCENARIO_BYTES

PATH = "scenario.yml"

Problem = tuple[int, int, str, "str | None"]


def doc(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def load(text: str) -> Scenario:
    return load_scenario_text(doc(text), PATH)


def diagnostics(text: str) -> list[Diagnostic]:
    with pytest.raises(ScenarioError) as info:
        load_scenario_text(doc(text), PATH)
    return info.value.diagnostics


def problems(text: str) -> list[Problem]:
    """(line, col, message, hint) of every diagnostic, in reported order."""
    return [(d.line, d.col, d.message, d.hint) for d in diagnostics(text)]


def slot(scalar: str) -> Any:
    """The value YAML ``scalar`` loads to, as the initial slot ``k``."""
    scenario = load(f"""
        scenario:
          name: n
          simulation_context: c
          setup:
            initial_slots:
              k: {scalar}
        """)
    return scenario.initial_slots["k"]


def memory_value(scalar: str) -> Any:
    scenario = load(f"""
        scenario:
          name: n
          simulation_context: c
          goals:
            assertions:
              - memory_was_set:
                  - name: s.k
                    value: {scalar}
        """)
    (check,) = scenario.assertions
    assert isinstance(check, MemoryCheck)
    (entry,) = check.entries
    assert entry.has_value
    return entry.value


def tool_argument(scalar: str) -> Any:
    scenario = load(f"""
        scenario:
          name: n
          simulation_context: c
          goals:
            assertions:
              - tool_executed:
                  tool_name: t
                  source: local
                  arguments:
                    a: {scalar}
        """)
    (check,) = scenario.assertions
    assert isinstance(check, ToolExecutedCheck) and check.call.arguments is not None
    return check.call.arguments["a"]


def same(got: Any, expected: Any) -> bool:
    """Equal *and* of the same type all the way down (``5 != 5.0``, ``1 != true``)."""
    if type(got) is not type(expected):
        return False
    if isinstance(expected, dict):
        return got.keys() == expected.keys() and all(same(got[k], expected[k]) for k in expected)
    if isinstance(expected, list):
        return len(got) == len(expected) and all(map(same, got, expected))
    if isinstance(expected, float) and math.isnan(expected):
        return math.isnan(got)
    return bool(got == expected)


# --------------------------------------------------------------------------
# YAML 1.2 core-schema scalars
# --------------------------------------------------------------------------

CORE_SCALARS = [
    # booleans: only true/false (any case form the core schema lists)
    ("true", True),
    ("false", False),
    ("True", True),
    ("FALSE", False),
    # YAML 1.1 booleans are plain strings in 1.2
    ("yes", "yes"),
    ("no", "no"),
    ("on", "on"),
    ("off", "off"),
    ("Yes", "Yes"),
    ("y", "y"),
    ("n", "n"),
    # null
    ("null", None),
    ("~", None),
    ("Null", None),
    ("", None),
    # integers: decimal, 0o octal, 0x hex; a leading zero is still decimal
    ("5", 5),
    ("-17", -17),
    ("+3", 3),
    ("0", 0),
    ("010", 10),
    ("0o17", 15),
    ("0x1F", 31),
    ("0x1f", 31),
    # YAML 1.1 integer forms are strings in 1.2
    ("1_000", "1_000"),
    ("1:30", "1:30"),
    ("0b101", "0b101"),
    ("017_0", "017_0"),
    ("-0x1F", "-0x1F"),
    # floats
    ("5.0", 5.0),
    ("1.", 1.0),
    (".5", 0.5),
    ("-2.5", -2.5),
    ("1e3", 1000.0),
    ("2.5E-1", 0.25),
    (".inf", math.inf),
    ("-.inf", -math.inf),
    ("+.Inf", math.inf),
    (".nan", math.nan),
    (".NaN", math.nan),
    # YAML 1.1 float and timestamp forms are strings in 1.2
    ("1_000.5", "1_000.5"),
    ("190:20:30.15", "190:20:30.15"),
    ("2001-12-14", "2001-12-14"),
    # quoting always gives a string
    ('"5"', "5"),
    ("'true'", "true"),
    ('"null"', "null"),
    ("'0x1F'", "0x1F"),
    # a plain scalar that looks like nothing else is a string
    ("=", "="),
    ("<<", "<<"),
    ("card_replace.reason", "card_replace.reason"),
]


@pytest.mark.parametrize(
    ("scalar", "expected"), CORE_SCALARS, ids=[s or "<empty>" for s, _ in CORE_SCALARS]
)
def test_plain_scalars_resolve_by_the_yaml_1_2_core_schema(scalar: str, expected: Any) -> None:
    assert same(slot(scalar), expected)


TYPED_VALUES = [
    ("5", 5),
    ("5.0", 5.0),
    ('"5"', "5"),
    ("true", True),
    ('"true"', "true"),
    ("yes", "yes"),
    ("1", 1),
    ("0x1F", 31),
    ("1_000", "1_000"),
    ("[1, '1', 1.0, true]", [1, "1", 1.0, True]),
    ("{b: 2, a: [x, 'y']}", {"b": 2, "a": ["x", "y"]}),
]
TYPED_IDS = [
    "int",
    "float",
    "quoted-int",
    "bool",
    "quoted-bool",
    "yes-is-str",
    "one",
    "hex",
    "underscore-is-str",
    "list",
    "mapping",
]


@pytest.mark.parametrize(("scalar", "expected"), TYPED_VALUES, ids=TYPED_IDS)
def test_memory_values_keep_their_yaml_type(scalar: str, expected: Any) -> None:
    assert same(memory_value(scalar), expected)


@pytest.mark.parametrize(("scalar", "expected"), TYPED_VALUES, ids=TYPED_IDS)
def test_tool_arguments_keep_their_yaml_type(scalar: str, expected: Any) -> None:
    assert same(tool_argument(scalar), expected)


def test_five_five_point_oh_and_quoted_five_are_three_different_values() -> None:
    values = [memory_value("5"), memory_value("5.0"), memory_value('"5"')]
    assert [type(v) for v in values] == [int, float, str]


# JSON is (for these values) valid YAML 1.2 flow syntax: a JSON document written
# as an expected value must load as exactly that value, types included.
json_values = st.recursive(
    st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(max_codepoint=0xFFFF, codec="utf-8"), max_size=20),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.text(st.characters(max_codepoint=0xFFFF, codec="utf-8"), max_size=8),
            children,
            max_size=4,
        )
    ),
    max_leaves=12,
)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])  # the profile's count
@given(json_values)
def test_any_json_value_written_as_a_memory_value_loads_with_its_exact_type(value: Any) -> None:
    assert same(memory_value(json.dumps(value)), value)


# --------------------------------------------------------------------------
# Explicit tags
# --------------------------------------------------------------------------

STANDARD_TAGS = [
    ("!!str 5", "5"),
    ("!!str true", "true"),
    ("!!int '5'", 5),
    ("!!int 0x1F", 31),
    ("!!float 5", 5.0),
    ("!!float .inf", math.inf),
    ("!!bool true", True),
    ("!!bool 'false'", False),
    ("!!null ''", None),
    ("!!seq [1]", [1]),
    ("!!map {a: 1}", {"a": 1}),
]


@pytest.mark.parametrize(("scalar", "expected"), STANDARD_TAGS, ids=[s for s, _ in STANDARD_TAGS])
def test_core_schema_tags_are_accepted(scalar: str, expected: Any) -> None:
    assert same(slot(scalar), expected)


@pytest.mark.parametrize(
    ("scalar", "message"),
    [
        ("!!int x", "`x` is not an integer"),
        ("!!float y", "`y` is not a number"),
    ],
    ids=["int", "float"],
)
def test_a_core_tag_on_text_of_another_type_is_an_error(scalar: str, message: str) -> None:
    assert problems(f"""
        scenario:
          name: n
          simulation_context: c
          setup: {{initial_slots: {{k: {scalar}}}}}
        """) == [(4, 30, message, None)]


# An explicit core tag does not widen the type: its text must match the same
# core-schema pattern as a plain scalar (Python's int()/float() would accept
# `1_000`, and `!!bool yes` must not become *false*).
@pytest.mark.parametrize(
    ("scalar", "message"),
    [
        ("!!int 1_000", "`1_000` is not an integer"),
        ("!!float 1_000.5", "`1_000.5` is not a number"),
        ("!!bool yes", "`yes` is not a boolean"),
        ("!!bool no", "`no` is not a boolean"),
        ("!!null x", "`x` is not null"),
    ],
    ids=["int-underscore", "float-underscore", "bool-yes", "bool-no", "null-text"],
)
def test_a_core_tag_on_a_yaml_1_1_form_is_an_error(scalar: str, message: str) -> None:
    assert problems(f"""
        scenario:
          name: n
          simulation_context: c
          setup: {{initial_slots: {{k: {scalar}}}}}
        """) == [(4, 30, message, None)]


# The tag is shown in the short form users write (`!!set`), not PyYAML's
# expanded `tag:yaml.org,2002:set`.
UNSUPPORTED_TAGS = [
    ("!!python/object:os.system {a: 1}", "!!python/object:os.system"),
    ("!!python/object/apply:os.system ['true']", "!!python/object/apply:os.system"),
    ("!!python/name:os.system ''", "!!python/name:os.system"),
    ("!!set {a}", "!!set"),
    ("!!binary aGk=", "!!binary"),
    ("!!timestamp 2001-12-14", "!!timestamp"),
    ("!Ref other", "!Ref"),
]


@pytest.mark.parametrize(
    ("scalar", "tag"),
    UNSUPPORTED_TAGS,
    ids=["python-object", "python-apply", "python-name", "set", "binary", "timestamp", "local-tag"],
)
def test_unsupported_tags_are_errors_at_the_tag(scalar: str, tag: str) -> None:
    assert problems(f"""
        scenario:
          name: n
          simulation_context: c
          setup: {{initial_slots: {{k: {scalar}}}}}
        """) == [(4, 30, f"unsupported tag `{tag}`", None)]


def test_python_tags_are_never_executed(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    text = doc(f"""
        scenario:
          name: !!python/object/apply:os.system ["touch {marker}"]
          simulation_context: !!python/object/apply:subprocess.call [["touch", "{marker}"]]
        """)
    with pytest.raises(ScenarioError):
        load_scenario_text(text, PATH)
    assert not marker.exists()


# --------------------------------------------------------------------------
# Mapping keys
# --------------------------------------------------------------------------


def test_duplicate_key_points_at_the_second_with_the_first_in_the_hint() -> None:
    assert problems("""
        scenario:
          name: First
          simulation_context: c
          name: Second
        """) == [(4, 3, "duplicate key `name`", "first defined at line 2, column 3")]


def test_every_repeat_of_a_key_is_reported_against_the_first() -> None:
    assert problems("""
        scenario:
          name: a
          name: b
          simulation_context: c
          name: d
        """) == [
        (3, 3, "duplicate key `name`", "first defined at line 2, column 3"),
        (5, 3, "duplicate key `name`", "first defined at line 2, column 3"),
    ]


def test_duplicate_keys_in_a_flow_mapping_inside_an_assertion() -> None:
    assert problems("""
        scenario:
          name: n
          simulation_context: c
          goals:
            assertions:
              - skill_activated: {skill_id: a, skill_id: b}
        """) == [(6, 40, "duplicate key `skill_id`", "first defined at line 6, column 27")]


def test_duplicate_top_level_scenario_key() -> None:
    assert problems("""
        scenario:
          name: n
          simulation_context: c
        scenario:
          name: m
          simulation_context: d
        """) == [(4, 1, "duplicate key `scenario`", "first defined at line 1, column 1")]


def test_the_same_key_in_two_different_mappings_is_not_a_duplicate() -> None:
    scenario = load("""
        scenario:
          name: n
          simulation_context: c
          goals:
            assertions:
              - skill_activated: {skill_id: a}
              - skill_activated: {skill_id: a}
        """)
    assert len(scenario.assertions) == 2


@pytest.mark.parametrize(
    ("key", "col", "shown"),
    [
        ("5", 27, "5"),
        ("1.5", 27, "1.5"),
    ],
    ids=["int", "float"],
)
def test_a_number_as_a_mapping_key_is_an_error(key: str, col: int, shown: str) -> None:
    assert problems(f"""
        scenario:
          name: n
          simulation_context: c
          setup: {{initial_slots: {{{key}: a}}}}
        """) == [(4, col, f"mapping key must be a string, got `{shown}`", None)]


# Non-string keys are described as YAML, never with Python spellings (`True`,
# `None`) or internal reprs (`[YNode('a', 4:29)]`).
@pytest.mark.parametrize(
    ("key", "shown"),
    [
        ("true", "true"),
        ("~", "null"),
        ("[a]", "a list"),
    ],
    ids=["bool", "null", "complex"],
)
def test_a_non_string_key_is_described_in_yaml_terms(key: str, shown: str) -> None:
    (diagnostic,) = diagnostics(f"""
        scenario:
          name: n
          simulation_context: c
          setup: {{initial_slots: {{{key}: a}}}}
        """)
    assert diagnostic.message.startswith("mapping key must be a string, got ")
    assert shown in diagnostic.message
    for python_spelling in ("True", "None", "YNode"):
        assert python_spelling not in diagnostic.message


def test_yaml_1_2_has_no_merge_key() -> None:
    """`<<` is an ordinary string key in YAML 1.2, so it is not merged."""
    assert load("""
        scenario:
          name: n
          simulation_context: c
          setup:
            initial_slots: {<<: {a: 1}}
        """).initial_slots == {"<<": {"a": 1}}


# --------------------------------------------------------------------------
# Anchors, aliases and size limits
# --------------------------------------------------------------------------


def test_a_few_aliases_are_expanded() -> None:
    scenario = load("""
        scenario:
          name: &name Shared name
          simulation_context: *name
          setup:
            initial_slots:
              a: &value {x: [1, 2]}
              b: *value
        """)
    assert scenario.simulation_context == "Shared name"
    assert scenario.initial_slots == {"a": {"x": [1, 2]}, "b": {"x": [1, 2]}}


def billion_laughs(levels: int = 9) -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    names = "abcdefghijklmnop"
    for prev, name in itertools.pairwise(names[:levels]):
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 10) + "]")
    return "\n".join(lines) + "\n"


@pytest.mark.timeout(10)
def test_an_alias_bomb_is_refused_quickly() -> None:
    started = time.perf_counter()
    with pytest.raises(ScenarioError) as info:
        load_scenario_text(billion_laughs(), PATH)
    assert time.perf_counter() - started < 5
    (diagnostic,) = info.value.diagnostics
    assert diagnostic.message == "document expands to more than 100000 nodes"
    assert diagnostic.hint == "anchors and aliases that expand enormously are refused"


# The node budget blames anchors and aliases only when aliases were expanded,
# not in a file that has none (here a ~200 KB flow list, under the 1 MiB cap).
@pytest.mark.slow
def test_a_large_document_without_aliases_is_not_blamed_on_aliases() -> None:
    text = (
        "scenario:\n  name: n\n  simulation_context: c\n  setup:\n    initial_slots:\n"
        "      k: [" + "1," * 100_001 + "]\n"
    )
    found: list[Diagnostic] = []
    try:
        load_scenario_text(text, PATH)
    except ScenarioError as exc:
        found = exc.diagnostics
    blamed = [d.message for d in found if "alias" in (d.hint or "") or "expands" in d.message]
    assert blamed == []


# PyYAML's composer lets an anchor refer to itself (`&a [*a]`): an infinite
# value, refused as a diagnostic rather than recursing until RecursionError.
@pytest.mark.timeout(10)
@pytest.mark.parametrize("text", ["a: &a [*a]\n", "a: &a {b: *a}\n"], ids=["seq", "map"])
def test_a_self_referencing_alias_is_a_diagnostic(text: str) -> None:
    with pytest.raises(ScenarioError) as info:
        load_scenario_text(text, PATH)
    (diagnostic,) = info.value.diagnostics
    assert diagnostic.line == 1


# PyYAML's composer (and the converter) recurse once per nesting level: a small
# file of nested brackets is refused by depth, never a RecursionError.
@pytest.mark.timeout(10)
def test_absurdly_deep_nesting_is_a_diagnostic() -> None:
    text = "scenario: " + "[" * 2000 + "]" * 2000 + "\n"
    with pytest.raises(ScenarioError) as info:
        load_scenario_text(text, PATH)
    assert info.value.diagnostics[0].line == 1


@pytest.mark.timeout(10)
def test_aliases_pasted_into_one_another_cannot_nest_without_limit() -> None:
    """Each line is shallow, but `*a2999` expands to 3000 nested lists."""
    text = "a0: &a0 [1]\n" + "".join(f"a{i}: &a{i} [*a{i - 1}]\n" for i in range(1, 3000))
    with pytest.raises(ScenarioError) as info:
        load_scenario_text(text, PATH)
    assert [(d.message, d.hint) for d in info.value.diagnostics] == [
        (
            "aliases expand to nesting deeper than 100 levels",
            "anchors and aliases that expand enormously are refused",
        )
    ]


def test_a_self_referencing_alias_is_reported_at_the_alias() -> None:
    (diagnostic,) = diagnostics("""
        scenario:
          name: n
          simulation_context: c
          setup: {initial_slots: &slots {k: [1, *slots]}}
        """)
    assert (diagnostic.line, diagnostic.col, diagnostic.message) == (
        4,
        41,
        "alias `*slots` is inside the node `&slots` it refers to",
    )


def test_text_over_the_size_cap_is_refused_before_parsing() -> None:
    text = "scenario: [" + "x" * MAX_SCENARIO_BYTES
    with pytest.raises(ScenarioError) as info:
        load_scenario_text(text, PATH)
    assert [(d.line, d.col, d.message, d.hint) for d in info.value.diagnostics] == [
        (
            1,
            1,
            "scenario file is larger than 1024 KiB",
            "a scenario file is a few KiB of YAML; is this the right file?",
        ),
    ]


def test_the_size_cap_counts_utf8_bytes_not_characters() -> None:
    """The same text is refused as a string and as a file: 600 000 `é` are 1.2 MB."""
    text = "scenario: " + "\u00e9" * 600_000
    assert len(text) < MAX_SCENARIO_BYTES < len(text.encode("utf-8"))
    with pytest.raises(ScenarioError) as info:
        load_scenario_text(text, PATH)
    assert [d.message for d in info.value.diagnostics] == ["scenario file is larger than 1024 KiB"]


def test_a_file_over_the_size_cap_is_refused_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "huge.yml"
    path.write_text("# padding\n" * (MAX_SCENARIO_BYTES // 10 + 1))
    size = path.stat().st_size
    with pytest.raises(ScenarioError) as info:
        load_scenario_file(path)
    assert [(d.path, d.line, d.col, d.message, d.hint) for d in info.value.diagnostics] == [
        (
            str(path),
            1,
            1,
            f"scenario file is {size} bytes, larger than the 1024 KiB limit",
            "a scenario file is a few KiB of YAML; is this the right file?",
        ),
    ]


def test_a_file_exactly_at_the_size_cap_loads(tmp_path: Path) -> None:
    head = "scenario:\n  name: n\n  simulation_context: c\n"
    path = tmp_path / "big.yml"
    path.write_text(head + "#" * (MAX_SCENARIO_BYTES - len(head) - 1) + "\n")
    assert path.stat().st_size == MAX_SCENARIO_BYTES
    assert load_scenario_file(path).name == "n"


# --------------------------------------------------------------------------
# Unreadable documents
# --------------------------------------------------------------------------

SYNTAX_ERRORS = [
    (
        "scenario:\n  name: n\n\tsimulation_context: c\n",
        (3, 1, "invalid YAML: found character '\\t' that cannot start any token"),
    ),
    (
        "scenario:\n  name: n\n   simulation_context: c\n",
        (3, 22, "invalid YAML: mapping values are not allowed here"),
    ),
    ("scenario:\n  name: a: b\n", (2, 10, "invalid YAML: mapping values are not allowed here")),
    (
        "scenario:\n  goals:\n    assertions:\n      - a\n  - b\n",
        (5, 3, "invalid YAML: expected <block end>, but found '-'"),
    ),
    ("scenario:\n  name: *nowhere\n", (2, 9, "invalid YAML: found undefined alias 'nowhere'")),
]


@pytest.mark.parametrize(
    ("text", "expected"),
    SYNTAX_ERRORS,
    ids=["tab-indent", "over-indent", "colon-in-plain", "dedent-into-list", "undefined-alias"],
)
def test_invalid_yaml_is_one_diagnostic_at_the_problem(
    text: str, expected: tuple[int, int, str]
) -> None:
    with pytest.raises(ScenarioError) as info:
        load_scenario_text(text, PATH)
    (diagnostic,) = info.value.diagnostics
    assert (diagnostic.line, diagnostic.col, diagnostic.message) == expected
    assert diagnostic.source_line == text.splitlines()[expected[0] - 1]


def test_a_syntax_error_renders_with_the_source_line_and_a_caret() -> None:
    with pytest.raises(ScenarioError) as info:
        load_scenario_text("scenario:\n  name: a: b\n", "bad.yml")
    assert [d.render() for d in info.value.diagnostics] == [
        "bad.yml:2:10: error: invalid YAML: mapping values are not allowed here\n"
        "      name: a: b\n"
        "             ^"
    ]


# PyYAML's `context` ("while scanning a quoted scalar", "expected a single
# document in the stream") is kept where the problem alone says nothing
# ("but found another document", "found unexpected end of stream"), and an
# end-of-stream position is clamped to the last line, with its source text.
@pytest.mark.parametrize(
    ("text", "context"),
    [
        (
            'scenario:\n  name: "unterminated\n  simulation_context: c\n',
            "while scanning a quoted scalar",
        ),
        ("scenario:\n  name: n\n---\nscenario: {}\n", "expected a single document in the stream"),
        ("scenario: {name: n\n", "while parsing a flow mapping"),
    ],
    ids=["unterminated-quote", "two-documents", "unclosed-flow-mapping"],
)
def test_a_syntax_error_says_what_was_being_parsed(text: str, context: str) -> None:
    with pytest.raises(ScenarioError) as info:
        load_scenario_text(text, PATH)
    (diagnostic,) = info.value.diagnostics
    assert context in diagnostic.message
    assert diagnostic.source_line  # points into the file, not past its end


def test_an_unterminated_quote_is_reported_at_the_end_with_where_it_opened() -> None:
    with pytest.raises(ScenarioError) as info:
        load_scenario_text('scenario:\n  name: "unterminated\n  simulation_context: c\n', "bad.yml")
    assert [d.render() for d in info.value.diagnostics] == [
        "bad.yml:3:24: error: invalid YAML: found unexpected end of stream while scanning a "
        "quoted scalar\n"
        "      simulation_context: c\n"
        "                           ^\n"
        "hint: the quoted scalar starts at line 2, column 9"
    ]


def test_two_documents_are_one_diagnostic_at_the_second() -> None:
    with pytest.raises(ScenarioError) as info:
        load_scenario_text("scenario:\n  name: n\n---\nscenario: {}\n", PATH)
    assert [(d.line, d.col, d.message) for d in info.value.diagnostics] == [
        (3, 1, "invalid YAML: expected a single document in the stream, but found another document")
    ]


# PyYAML's reader rejects non-printable characters (in its constructor): a
# diagnostic at the character, not yaml.reader.ReaderError.
@pytest.mark.parametrize("char", ["\x07", "\x00", "\x1b"], ids=["bell", "nul", "escape"])
def test_a_control_character_is_a_diagnostic_at_its_position(char: str) -> None:
    text = f"scenario:\n  name: a{char}b\n  simulation_context: c\n"
    with pytest.raises(ScenarioError) as info:
        load_scenario_text(text, PATH)
    (diagnostic,) = info.value.diagnostics
    assert (diagnostic.line, diagnostic.col) == (2, 10)
    assert diagnostic.message.startswith("invalid YAML: ")


def test_a_control_character_never_reaches_the_terminal() -> None:
    """The rendered source line shows U+FFFD in its place, so the caret still lines up."""
    with pytest.raises(ScenarioError) as info:
        load_scenario_text("scenario:\n  name: a\x1b[31mb\n", "bad.yml")
    assert [d.render() for d in info.value.diagnostics] == [
        "bad.yml:2:10: error: invalid YAML: unacceptable character #x001b: special characters "
        "are not allowed\n"
        "      name: a\ufffd[31mb\n"
        "             ^\n"
        "hint: remove it, or write it as `\\x1b` inside a double-quoted string"
    ]


def test_an_escaped_control_character_in_a_key_is_shown_escaped() -> None:
    (diagnostic,) = diagnostics("""
        scenario:
          name: n
          simulation_context: c
          "ty\\npe": x
        """)
    assert diagnostic.message == "unknown key `ty\npe` in `scenario`"
    assert diagnostic.render().splitlines()[0] == (
        "scenario.yml:4:3: error: unknown key `ty\\npe` in `scenario`"
    )


def test_a_file_that_is_not_utf8_is_a_diagnostic(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yml"
    path.write_bytes("scenario:\n  name: Caf\xe9\n".encode("latin-1"))
    with pytest.raises(ScenarioError) as info:
        load_scenario_file(path)
    assert [(d.line, d.col, d.message) for d in info.value.diagnostics] == [
        (1, 1, "not UTF-8 text: invalid continuation byte"),
    ]


@pytest.mark.parametrize(
    "text",
    ["", "\n\n", "   \n", "# just a comment\n"],
    ids=["empty", "blank-lines", "spaces", "comment-only"],
)
def test_an_empty_file_is_one_diagnostic(text: str) -> None:
    with pytest.raises(ScenarioError) as info:
        load_scenario_text(text, PATH)
    assert [(d.line, d.col, d.message, d.hint) for d in info.value.diagnostics] == [
        (1, 1, "the file is empty", "a scenario file starts with `scenario:`"),
    ]


def test_a_byte_order_mark_is_allowed(tmp_path: Path) -> None:
    path = tmp_path / "bom.yml"
    path.write_bytes(b"\xef\xbb\xbfscenario:\n  name: n\n  simulation_context: c\n")
    assert load_scenario_file(path).name == "n"


# --------------------------------------------------------------------------
# Properties: never a traceback, diagnostics always well formed
# --------------------------------------------------------------------------

# A YAML-ish alphabet, with anchors and aliases (`&a [*a]` is an infinite value)
# and a control character PyYAML's reader refuses.
yamlish = st.text(
    alphabet=st.sampled_from(list("scenario_ngme:-[]{}!#'\"|>?,. 0159\n\t\r&*\x07")), max_size=120
)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])  # the profile's count
@given(yamlish)
def test_any_text_either_loads_or_raises_scenario_error(text: str) -> None:
    try:
        load_scenario_text(text, PATH)
    except ScenarioError as exc:
        found = exc.diagnostics
        assert found
        assert found == sorted(found, key=lambda d: (d.line, d.col))
        lines = text.splitlines()
        for d in found:
            assert d.path == PATH
            assert d.line >= 1 and d.col >= 1
            assert d.line <= max(len(lines), 1)  # never past the end of the text
            if d.source_line:
                assert d.source_line == lines[d.line - 1]
            assert d.render().startswith(f"{PATH}:{d.line}:{d.col}: error: ")
