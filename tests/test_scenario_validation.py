"""Scenario validation: every rule of the assertion reference, one behaviour per test.

Sources: Mantle's assertion reference (required / optional / rejected keys
per check, memory values, sequencing), docs/semantics.md ("Matching": the
``session.`` prefix, null values, YAML typing, unknown keys, sequencing and
tools_within_one_turn limits), the README (scenario file shape, ``validate``,
exit status 2) and compiler-style diagnostics (every problem at once, 1-based
positions, user names in backticks).

Most tests write a few lines of ``goals.assertions`` and compare whole
diagnostics (line, column, message, hint). Positions in those tables are
*relative to the snippet*: line 1, column 1 is the snippet's first character
(see :func:`snippet_problems`).

A known loader bug gets an ``xfail(strict=True)`` test with the bug in the
reason: it describes the correct behaviour and starts passing (so must lose
its marker) when the loader is fixed.

Golden file: ``tests/golden/broken_scenario.txt`` holds the rendered
diagnostics of ``examples/eval/broken/broken_scenario.yml``. It was written
from the loader's output and then checked by hand against the spec; after a
deliberate change, regenerate it with ``MANTLE_STREAM_UPDATE_GOLDEN=1`` and
read the diff before committing.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import mantle_stream
from mantle_stream import (
    Diagnostic,
    Scenario,
    ScenarioError,
    load_scenario_file,
    load_scenario_text,
    load_scenarios,
)
from mantle_stream.core.assertions.bot import BotCheck, Button
from mantle_stream.core.assertions.lifecycle import LifecycleCheck
from mantle_stream.core.assertions.memory import MemoryCheck, MemoryEntry, MemoryStep
from mantle_stream.core.assertions.sequencing import SequencingCheck
from mantle_stream.core.assertions.tools import ToolCall, ToolExecutedCheck, ToolsWithinOneTurnCheck

REPO = Path(__file__).resolve().parent.parent
BROKEN = "examples/eval/broken/broken_scenario.yml"
GOLDEN = REPO / "tests" / "golden" / "broken_scenario.txt"
PATH = "scenario.yml"

Problem = tuple[int, int, str, "str | None"]

HEADER = """\
scenario:
  name: Test scenario
  simulation_context: You are a test customer.
  goals:
    assertions:
"""
HEADER_LINES = 5
INDENT = 6

SKILL_KINDS = [
    "skill_activated",
    "skill_completed",
    "skill_cancelled",
    "skill_interrupted",
    "skill_resumed",
]
BLOCK_KINDS = [
    "ordered_block_entered",
    "ordered_block_completed",
    "ordered_block_cancelled",
    "ordered_block_interrupted",
    "ordered_block_resumed",
]
MEMORY_KINDS = ["memory_was_set", "memory_was_not_set", "memory_was_cleared"]
STEP_ID_REJECTED = ["skill_activated", "skill_completed", "ordered_block_entered"]
STEP_ID_ACCEPTED = [k for k in SKILL_KINDS + BLOCK_KINDS if k not in STEP_ID_REJECTED]


def with_assertions(snippet: str) -> str:
    """A valid scenario whose ``goals.assertions`` list is ``snippet``."""
    body = textwrap.dedent(snippet).strip("\n") + "\n"
    return HEADER + textwrap.indent(body, " " * INDENT)


def assertions_of(snippet: str) -> tuple[Any, ...]:
    return load_scenario_text(with_assertions(snippet), PATH).assertions


def diagnostics_of(text: str, path: str = PATH) -> list[Diagnostic]:
    with pytest.raises(ScenarioError) as info:
        load_scenario_text(text, path)
    return info.value.diagnostics


def problems_of(text: str) -> list[Problem]:
    """(line, col, message, hint) of every diagnostic of a whole document."""
    return [(d.line, d.col, d.message, d.hint) for d in diagnostics_of(textwrap.dedent(text))]


def snippet_problems(snippet: str) -> list[Problem]:
    """(line, col, message, hint) for an assertions snippet, positions relative to it."""
    return [
        (d.line - HEADER_LINES, d.col - INDENT, d.message, d.hint)
        for d in diagnostics_of(with_assertions(snippet))
    ]


def snippet_messages(snippet: str) -> list[tuple[str, str | None]]:
    """(message, hint) only, for tests whose subject is the wording, not the position."""
    return [(d.message, d.hint) for d in diagnostics_of(with_assertions(snippet))]


YAML12_HINT = "scenario files are YAML 1.2: only `true` and `false` are booleans, `{}` is a string"
STEP_ID_HINT = (
    "`{}` is recorded without a step; only the cancel, interrupt and resume checks "
    "(and completed, for ordered blocks) take `step_id`"
)
NULL_HINT = (
    "null is not accepted as a memory value; to check that the key was cleared use "
    "`memory_was_cleared`"
)
REGEX_HINT = "it is a Python regular expression; escape special characters with a backslash"
NO_FIELD_HINT = "a check with no field would match every message"


# ==========================================================================
# The reference's own examples load into the expected typed model
# ==========================================================================

REFERENCE_EXAMPLES = {
    "skill": (
        """
        assertions:
          - skill_activated:
              skill_id: card_replace
          - skill_completed:
              skill_id: card_replace
        """,
        (
            LifecycleCheck(kind="skill_activated", skill_id="card_replace"),
            LifecycleCheck(kind="skill_completed", skill_id="card_replace"),
        ),
    ),
    "ordered-block": (
        """
        assertions:
          - ordered_block_entered:
              skill_id: card_replace
              block_id: main
        """,
        (LifecycleCheck(kind="ordered_block_entered", skill_id="card_replace", block_id="main"),),
    ),
    "memory": (
        """
        assertions:
          - memory_was_set:
              - name: card_replace.replacement_reason
                value: damaged
              - name: card_replace.selected_card_id
          - memory_was_not_set:
              - name: card_replace.fraud_review
          - memory_was_cleared:
              - name: card_replace.draft_order_id
        """,
        (
            MemoryCheck(
                kind="memory_was_set",
                entries=(
                    MemoryEntry(
                        name="card_replace.replacement_reason", has_value=True, value="damaged"
                    ),
                    MemoryEntry(name="card_replace.selected_card_id"),
                ),
            ),
            MemoryCheck(
                kind="memory_was_not_set", entries=(MemoryEntry(name="card_replace.fraud_review"),)
            ),
            MemoryCheck(
                kind="memory_was_cleared",
                entries=(MemoryEntry(name="card_replace.draft_order_id"),),
            ),
        ),
    ),
    "tool_executed": (
        """
        assertions:
          - tool_executed:
              tool_name: order_replacement
              source: local
              skill_id: card_replace
              arguments:
                shipping: standard
          - tool_executed:
              tool_name: submit_transfer
              source: mcp
              mcp_server: banking
        """,
        (
            ToolExecutedCheck(
                ToolCall(
                    tool_name="order_replacement",
                    source="local",
                    skill_id="card_replace",
                    arguments={"shipping": "standard"},
                )
            ),
            ToolExecutedCheck(
                ToolCall(tool_name="submit_transfer", source="mcp", mcp_server="banking")
            ),
        ),
    ),
    "tools_within_one_turn": (
        """
        assertions:
          - tools_within_one_turn:
              ordered: true
              allow_extra_calls: false
              calls:
                - tool_executed:
                    tool_name: check_balance
                    source: local
                - tool_executed:
                    tool_name: order_replacement
                    source: local
        """,
        (
            ToolsWithinOneTurnCheck(
                calls=(
                    ToolCall(tool_name="check_balance", source="local"),
                    ToolCall(tool_name="order_replacement", source="local"),
                ),
                allow_extra_calls=False,
                ordered=True,
            ),
        ),
    ),
    "agent-messages": (
        """
        assertions:
          - bot_uttered:
              text_matches: "replacement.*(ordered|placed)"
          - bot_did_not_utter:
              utter_name: utter_cannot_help
        """,
        (
            BotCheck(kind="bot_uttered", text_matches="replacement.*(ordered|placed)"),
            BotCheck(kind="bot_did_not_utter", utter_name="utter_cannot_help"),
        ),
    ),
    "sequencing": (
        """
        assertions:
          - sequencing:
              - memory_was_set: card_replace.replacement_reason
              - tool_executed:
                  tool_name: order_replacement
                  source: local
              - skill_completed:
                  skill_id: card_replace
        """,
        (
            SequencingCheck(
                steps=(
                    MemoryStep(kind="memory_was_set", name="card_replace.replacement_reason"),
                    ToolExecutedCheck(ToolCall(tool_name="order_replacement", source="local")),
                    LifecycleCheck(kind="skill_completed", skill_id="card_replace"),
                )
            ),
        ),
    ),
}


def reference_scenario(example: str) -> str:
    """The reference's ``assertions:`` snippet, verbatim, placed under ``goals``."""
    body = textwrap.dedent(example).strip("\n") + "\n"
    return (
        "scenario:\n  name: Reference example\n  simulation_context: c\n  goals:\n"
        + textwrap.indent(body, "    ")
    )


@pytest.mark.parametrize(
    ("example", "expected"), REFERENCE_EXAMPLES.values(), ids=REFERENCE_EXAMPLES.keys()
)
def test_reference_example_loads_into_the_typed_model(example: str, expected: tuple[Any]) -> None:
    assert load_scenario_text(reference_scenario(example), PATH).assertions == expected


def test_the_cli_md_scenario_example_loads() -> None:
    text = textwrap.dedent("""\
        scenario:
          name: Customer replaces a damaged card      # required
          type: happy_path                            # optional
          simulation_context: >                       # required
            You are a customer whose card is damaged.
          setup:
            initial_slots: {project.customer_authenticated: true}   # optional
          goals:                                      # optional
            criteria: [Agent confirms the replacement]              # judged elsewhere
            assertions:
              - skill_activated: {skill_id: card_replace}
        """)
    assert load_scenario_text(text, "eval/scenarios/card.yml") == Scenario(
        name="Customer replaces a damaged card",
        type="happy_path",
        simulation_context="You are a customer whose card is damaged.\n",
        initial_slots={"project.customer_authenticated": True},
        criteria=("Agent confirms the replacement",),
        assertions=(LifecycleCheck(kind="skill_activated", skill_id="card_replace"),),
        path="eval/scenarios/card.yml",
        lines=(11,),
    )


def test_a_scenario_needs_only_name_and_simulation_context() -> None:
    scenario = load_scenario_text("scenario:\n  name: n\n  simulation_context: c\n")
    assert scenario == Scenario(name="n", simulation_context="c", path="<string>")


def test_each_assertion_remembers_its_line() -> None:
    scenario = load_scenario_text(
        with_assertions("""
        - skill_activated: {skill_id: a}

        - skill_completed:
            skill_id: a
        """),
        PATH,
    )
    assert scenario.lines == (6, 8)


@pytest.mark.parametrize(
    "path", sorted((REPO / "examples/eval/scenarios").glob("*.yml")), ids=lambda p: p.stem
)
def test_every_example_scenario_is_valid(path: Path) -> None:
    assert load_scenario_file(path).assertions


# ==========================================================================
# Skill and ordered-block checks
# ==========================================================================


@pytest.mark.parametrize("kind", SKILL_KINDS + BLOCK_KINDS)
def test_lifecycle_check_requires_skill_id(kind: str) -> None:
    fields = "{block_id: main}" if kind in BLOCK_KINDS else "{}"
    assert snippet_messages(f"- {kind}: {fields}") == [
        (f"`{kind}` is missing required key `skill_id`", None)
    ]


@pytest.mark.parametrize("kind", BLOCK_KINDS)
def test_ordered_block_check_requires_block_id(kind: str) -> None:
    assert snippet_messages(f"- {kind}: {{skill_id: card_replace}}") == [
        (f"`{kind}` is missing required key `block_id`", None)
    ]


@pytest.mark.parametrize("kind", SKILL_KINDS)
def test_skill_check_loads_with_skill_id_only(kind: str) -> None:
    assert assertions_of(f"- {kind}: {{skill_id: card_replace}}") == (
        LifecycleCheck(kind=kind, skill_id="card_replace"),
    )


@pytest.mark.parametrize("kind", STEP_ID_ACCEPTED)
def test_step_id_narrows_cancel_interrupt_resume_and_block_completed(kind: str) -> None:
    block = ", block_id: main" if kind in BLOCK_KINDS else ""
    assert assertions_of(f"- {kind}: {{skill_id: s{block}, step_id: confirm}}") == (
        LifecycleCheck(
            kind=kind, skill_id="s", block_id="main" if block else None, step_id="confirm"
        ),
    )


@pytest.mark.parametrize("kind", STEP_ID_REJECTED)
def test_step_id_is_rejected_where_the_event_has_no_step(kind: str) -> None:
    block = "    block_id: main\n" if kind in BLOCK_KINDS else ""
    snippet = f"- {kind}:\n    skill_id: card_replace\n{block}    step_id: select_card"
    assert snippet_problems(snippet) == [
        (3 + bool(block), 5, f"`step_id` is not allowed in `{kind}`", STEP_ID_HINT.format(kind))
    ]


def test_block_id_is_unknown_on_a_skill_check() -> None:
    assert snippet_problems("""
        - skill_completed:
            skill_id: card_replace
            block_id: main
        """) == [(3, 5, "unknown key `block_id` in `skill_completed`", "allowed keys: `skill_id`")]


@pytest.mark.parametrize(
    ("kind", "field", "value", "description"),
    [
        ("skill_activated", "skill_id", "42", "an integer `42`"),
        ("skill_cancelled", "skill_id", "[card_replace]", "a list"),
        ("skill_cancelled", "step_id", "{a: 1}", "a mapping"),
        ("ordered_block_entered", "block_id", "1.5", "a number `1.5`"),
        ("ordered_block_completed", "step_id", "7", "an integer `7`"),
    ],
    ids=["skill_id-int", "skill_id-list", "step_id-mapping", "block_id-float", "step_id-int"],
)
def test_lifecycle_ids_must_be_strings(kind: str, field: str, value: str, description: str) -> None:
    fields = {"skill_id": "s", **({"block_id": "b"} if kind in BLOCK_KINDS else {})}
    fields[field] = value
    body = "\n".join(f"    {k}: {v}" for k, v in fields.items())
    line = 2 + list(fields).index(field)
    col = 5 + len(field) + 2
    assert snippet_problems(f"- {kind}:\n{body}") == [
        (line, col, f"`{field}` in `{kind}` must be a string, got {description}", None)
    ]


# Values are described as YAML spells them (`true`, not Python's `True`).
def test_a_boolean_given_for_a_string_is_described_in_yaml_spelling() -> None:
    assert snippet_problems("- skill_activated: {skill_id: true}") == [
        (1, 31, "`skill_id` in `skill_activated` must be a string, got a boolean `true`", None)
    ]


@pytest.mark.parametrize(
    ("value", "description"),
    [
        ("0x1F", "an integer `0x1F`"),
        ("1e3", "a number `1e3`"),
        ("-.inf", "a number `-.inf`"),
        ("FALSE", "a boolean `FALSE`"),
        ("~", "null"),
        ("[a]", "a list"),
        ("{a: 1}", "a mapping"),
    ],
    ids=["hex", "exponent", "infinity", "upper-bool", "tilde", "list", "mapping"],
)
def test_a_value_is_described_as_it_was_written(value: str, description: str) -> None:
    (message,) = [m for m, _ in snippet_messages(f"- skill_activated: {{skill_id: {value}}}")]
    assert message == f"`skill_id` in `skill_activated` must be a string, got {description}"


@pytest.mark.parametrize("kind", ["skill_activated", "ordered_block_resumed"])
def test_a_lifecycle_check_must_be_a_mapping(kind: str) -> None:
    assert snippet_problems(f"- {kind}: card_replace") == [
        (1, 5 + len(kind), f"`{kind}` must be a mapping, got a string `card_replace`", None)
    ]


# ==========================================================================
# Memory checks
# ==========================================================================


@pytest.mark.parametrize("kind", ["memory_was_set", "memory_was_not_set"])
def test_memory_value_is_optional(kind: str) -> None:
    assert assertions_of(f"""
        - {kind}:
            - name: s.any_write
            - name: s.exact
              value: damaged
        """) == (
        MemoryCheck(
            kind=kind,
            entries=(
                MemoryEntry(name="s.any_write"),
                MemoryEntry(name="s.exact", has_value=True, value="damaged"),
            ),
        ),
    )


@pytest.mark.parametrize("kind", MEMORY_KINDS)
def test_memory_entry_requires_name(kind: str) -> None:
    assert snippet_problems(f"""
        - {kind}:
            - name: s.ok
            - {{}}
        """) == [(3, 7, f"an entry of `{kind}` is missing required key `name`", None)]


def test_memory_was_cleared_rejects_value() -> None:
    assert snippet_problems("""
        - memory_was_cleared:
            - name: card_replace.draft_order_id
              value: d-1
        """) == [
        (
            3,
            7,
            "`value` is not allowed in an entry of `memory_was_cleared`",
            "a clear has no value; remove `value`",
        )
    ]


@pytest.mark.parametrize("kind", ["memory_was_set", "memory_was_not_set"])
@pytest.mark.parametrize(
    ("spelling", "col"),
    [("null", 14), ("~", 14), ("Null", 14), ("", 13)],
    ids=["null", "tilde", "Null", "empty"],
)
def test_null_is_rejected_as_a_memory_value(kind: str, spelling: str, col: int) -> None:
    value_line = f"      value: {spelling}".rstrip()
    problems = snippet_problems(f"- {kind}:\n    - name: s.k\n{value_line}")
    assert problems == [(3, col, f"`value` in an entry of `{kind}` must not be null", NULL_HINT)]


def test_a_nested_null_inside_a_memory_value_is_kept() -> None:
    """Only a null *as the value* is rejected; a JSON object may hold a null."""
    (check,) = assertions_of("- memory_was_set: [{name: s.k, value: {a: null}}]")
    assert check.entries[0].value == {"a": None}


@pytest.mark.parametrize("kind", MEMORY_KINDS)
def test_session_prefix_is_rejected_with_a_hint(kind: str) -> None:
    assert snippet_problems(f"""
        - {kind}:
            - name: session.card_replace.replacement_reason
        """) == [
        (
            2,
            13,
            "memory key `session.card_replace.replacement_reason` starts with "
            "`session.` and can never match",
            "the tracker stores keys without it: write `card_replace.replacement_reason`",
        )
    ]


def test_a_session_scope_without_the_dot_is_an_ordinary_key() -> None:
    (check,) = assertions_of("- memory_was_set: [{name: sessions.count}]")
    assert check.entries == (MemoryEntry(name="sessions.count"),)


@pytest.mark.parametrize("kind", MEMORY_KINDS)
def test_memory_check_needs_at_least_one_entry(kind: str) -> None:
    assert snippet_problems(f"- {kind}: []") == [
        (1, 5 + len(kind), f"`{kind}` needs at least one entry", None)
    ]


@pytest.mark.parametrize("kind", MEMORY_KINDS)
def test_memory_check_given_a_bare_key_outside_sequencing(kind: str) -> None:
    assert snippet_problems(f"- {kind}: card_replace.reason") == [
        (
            1,
            5 + len(kind),
            f"`{kind}` takes a list of entries, got a string `card_replace.reason`",
            f"write `{kind}: [{{name: card_replace.reason}}]`; the bare key form is only for steps "
            "inside `sequencing`",
        )
    ]


@pytest.mark.parametrize(
    ("value", "description"),
    [
        ("{name: s.k}", "a mapping"),
        ("", "null"),
        ("7", "an integer `7`"),
    ],
    ids=["mapping", "null", "int"],
)
def test_memory_check_needs_a_list_of_entries(value: str, description: str) -> None:
    assert snippet_problems(f"- memory_was_set: {value}".rstrip()) == [
        (
            1,
            19 if value else 18,
            f"`memory_was_set` takes a list of entries, got {description}",
            "write a list of entries: `- name: scope.field`",
        )
    ]


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("5", "`name` in an entry of `memory_was_set` must be a string, got an integer `5`"),
        ("[s.k]", "`name` in an entry of `memory_was_set` must be a string, got a list"),
        ("''", "`name` in an entry of `memory_was_set` must not be empty"),
    ],
    ids=["int", "list", "empty"],
)
def test_memory_name_must_be_a_non_empty_string(name: str, message: str) -> None:
    assert snippet_problems(f"- memory_was_set:\n    - name: {name}") == [(2, 13, message, None)]


@pytest.mark.parametrize(
    ("kind", "key", "hint"),
    [
        ("memory_was_set", "nmae", "did you mean `name`?"),
        ("memory_was_set", "vaule", "did you mean `value`?"),
        ("memory_was_not_set", "values", "did you mean `value`?"),
        ("memory_was_cleared", "nam", "did you mean `name`?"),
    ],
    ids=["set-name", "set-value", "not-set-value", "cleared-name"],
)
def test_unknown_key_in_a_memory_entry_suggests_the_near_miss(
    kind: str, key: str, hint: str
) -> None:
    problems = snippet_problems(f"- {kind}:\n    - name: s.k\n      {key}: x")
    assert problems == [(3, 7, f"unknown key `{key}` in an entry of `{kind}`", hint)]


def test_every_bad_entry_of_a_memory_check_is_reported() -> None:
    assert snippet_problems("""
        - memory_was_set:
            - name: session.a.b
            - name: c.d
              value: null
            - name: 3
        """) == [
        (
            2,
            13,
            "memory key `session.a.b` starts with `session.` and can never match",
            "the tracker stores keys without it: write `a.b`",
        ),
        (4, 14, "`value` in an entry of `memory_was_set` must not be null", NULL_HINT),
        (
            5,
            13,
            "`name` in an entry of `memory_was_set` must be a string, got an integer `3`",
            None,
        ),
    ]


# ==========================================================================
# tool_executed
# ==========================================================================


def test_tool_executed_with_every_optional_field() -> None:
    assert assertions_of("""
        - tool_executed:
            tool_name: submit_transfer
            source: mcp
            mcp_server: banking
            skill_id: transfer
            arguments: {amount: 25, currency: EUR, memo: null}
            is_error: false
        """) == (
        ToolExecutedCheck(
            ToolCall(
                tool_name="submit_transfer",
                source="mcp",
                mcp_server="banking",
                skill_id="transfer",
                arguments={"amount": 25, "currency": "EUR", "memo": None},
                is_error=False,
            )
        ),
    )


@pytest.mark.parametrize(
    ("fields", "missing"),
    [
        ("{source: local}", "tool_name"),
        ("{tool_name: t}", "source"),
    ],
    ids=["tool_name", "source"],
)
def test_tool_executed_requires_tool_name_and_source(fields: str, missing: str) -> None:
    assert snippet_messages(f"- tool_executed: {fields}") == [
        (f"`tool_executed` is missing required key `{missing}`", None)
    ]


def test_mcp_server_is_required_with_source_mcp() -> None:
    assert snippet_messages("- tool_executed: {tool_name: submit_transfer, source: mcp}") == [
        (
            "`tool_executed` with source `mcp` is missing required key `mcp_server`",
            "the server is not inferred from the tool name",
        )
    ]


def test_mcp_server_is_rejected_with_source_local() -> None:
    assert snippet_problems("""
        - tool_executed:
            tool_name: order_replacement
            source: local
            mcp_server: banking
        """) == [
        (
            4,
            5,
            "`mcp_server` is not allowed in `tool_executed` with source `local`",
            "a local run has no MCP server; remove `mcp_server` or set `source: mcp`",
        )
    ]


@pytest.mark.parametrize(
    ("source", "hint"),
    [
        ("remote", None),
        ("locale", "did you mean `local`?"),
        ("mpc", "did you mean `mcp`?"),
        ("LOCAL", None),
    ],
    ids=["remote", "near-local", "near-mcp", "upper-case"],
)
def test_source_is_local_or_mcp(source: str, hint: str | None) -> None:
    assert snippet_problems(f"- tool_executed:\n    tool_name: t\n    source: {source}") == [
        (3, 13, f"`source` in `tool_executed` must be `local` or `mcp`, got `{source}`", hint)
    ]


@pytest.mark.parametrize(
    ("field", "value", "description"),
    [
        ("tool_name", "5", "an integer `5`"),
        ("source", "[local]", "a list"),
        ("mcp_server", "{name: banking}", "a mapping"),
        ("skill_id", "3.5", "a number `3.5`"),
    ],
    ids=["tool_name", "source", "mcp_server", "skill_id"],
)
def test_tool_executed_strings_must_be_strings(field: str, value: str, description: str) -> None:
    fields = {"tool_name": "t", "source": "mcp", "mcp_server": "m", "skill_id": "s"}
    fields[field] = value
    body = "\n".join(f"    {k}: {v}" for k, v in fields.items())
    line = 2 + list(fields).index(field)
    assert snippet_problems(f"- tool_executed:\n{body}") == [
        (
            line,
            7 + len(field),
            f"`{field}` in `tool_executed` must be a string, got {description}",
            None,
        )
    ]


@pytest.mark.parametrize(
    ("value", "description"),
    [
        ("[shipping, standard]", "a list"),
        ("standard", "a string `standard`"),
        ("", "null"),
    ],
    ids=["list", "string", "null"],
)
def test_tool_arguments_must_be_a_mapping(value: str, description: str) -> None:
    line = f"    arguments: {value}".rstrip()
    assert snippet_problems(f"- tool_executed:\n    tool_name: t\n    source: local\n{line}") == [
        (
            4,
            16 if value else 15,
            f"`arguments` in `tool_executed` must be a mapping, got {description}",
            None,
        )
    ]


@pytest.mark.parametrize(
    ("key", "hint"),
    [
        ("toolname", "did you mean `tool_name`?"),
        ("mcp_sever", "did you mean `mcp_server`?"),
        ("argument", "did you mean `arguments`?"),
        ("is_eror", "did you mean `is_error`?"),
        ("skil_id", "did you mean `skill_id`?"),
        (
            "retries",
            "allowed keys: `arguments`, `is_error`, `mcp_server`, `skill_id`, `source`, "
            "`tool_name`",
        ),
    ],
    ids=["tool_name", "mcp_server", "arguments", "is_error", "skill_id", "no-near-miss"],
)
def test_unknown_key_in_tool_executed(key: str, hint: str) -> None:
    assert snippet_problems(f"""
        - tool_executed:
            tool_name: t
            source: mcp
            mcp_server: m
            {key}: x
        """) == [(5, 5, f"unknown key `{key}` in `tool_executed`", hint)]


# ==========================================================================
# Booleans: YAML 1.2 only knows true / false
# ==========================================================================

BOOLEAN_FIELDS = {
    "is_error": (
        "- tool_executed:\n    tool_name: t\n    source: local\n    is_error: {}",
        4,
        "`tool_executed`",
    ),
    "allow_extra_calls": (
        "- tools_within_one_turn:\n    allow_extra_calls: {}\n    calls:\n"
        "      - tool_executed: {{tool_name: a, source: local}}\n"
        "      - tool_executed: {{tool_name: b, source: local}}",
        2,
        "`tools_within_one_turn`",
    ),
    "ordered": (
        "- tools_within_one_turn:\n    allow_extra_calls: true\n    ordered: {}\n    calls:\n"
        "      - tool_executed: {{tool_name: a, source: local}}\n"
        "      - tool_executed: {{tool_name: b, source: local}}",
        3,
        "`tools_within_one_turn`",
    ),
}


@pytest.mark.parametrize("word", ["yes", "no", "on", "off", "Yes", "OFF"])
@pytest.mark.parametrize("field", BOOLEAN_FIELDS)
def test_yaml_1_1_boolean_words_are_strings_with_a_hint(field: str, word: str) -> None:
    template, line, what = BOOLEAN_FIELDS[field]
    assert snippet_problems(template.format(word)) == [
        (
            line,
            7 + len(field),
            f"`{field}` in {what} must be true or false, got a string `{word}`",
            YAML12_HINT.format(word),
        )
    ]


@pytest.mark.parametrize(
    ("value", "description"),
    [
        ("1", "an integer `1`"),
        ('"true"', "a string `true`"),
        ("[true]", "a list"),
        ("~", "null"),
    ],
    ids=["int", "quoted", "list", "null"],
)
@pytest.mark.parametrize("field", BOOLEAN_FIELDS)
def test_other_non_booleans_get_no_yaml_hint(field: str, value: str, description: str) -> None:
    template, line, what = BOOLEAN_FIELDS[field]
    assert snippet_problems(template.format(value)) == [
        (
            line,
            7 + len(field),
            f"`{field}` in {what} must be true or false, got {description}",
            None,
        )
    ]


@pytest.mark.parametrize(("word", "expected"), [("true", True), ("false", False)])
def test_is_error_true_and_false_are_booleans(word: str, expected: bool) -> None:
    (check,) = assertions_of(f"- tool_executed: {{tool_name: t, source: local, is_error: {word}}}")
    assert check.call.is_error is expected


# ==========================================================================
# tools_within_one_turn
# ==========================================================================

TWO_CALLS = """\
    calls:
      - tool_executed: {tool_name: a, source: local}
      - tool_executed: {tool_name: b, source: mcp, mcp_server: m}"""


def test_tools_within_one_turn_ordered_defaults_to_false() -> None:
    assert assertions_of(f"- tools_within_one_turn:\n    allow_extra_calls: true\n{TWO_CALLS}") == (
        ToolsWithinOneTurnCheck(
            calls=(
                ToolCall(tool_name="a", source="local"),
                ToolCall(tool_name="b", source="mcp", mcp_server="m"),
            ),
            allow_extra_calls=True,
            ordered=False,
        ),
    )


def test_tools_within_one_turn_requires_allow_extra_calls() -> None:
    assert snippet_messages(f"- tools_within_one_turn:\n    ordered: true\n{TWO_CALLS}") == [
        (
            "`tools_within_one_turn` is missing required key `allow_extra_calls`",
            "say `true` to allow other tool runs in the turn, `false` to forbid them",
        )
    ]


def test_tools_within_one_turn_requires_calls() -> None:
    assert snippet_messages("- tools_within_one_turn: {allow_extra_calls: false}") == [
        ("`tools_within_one_turn` is missing required key `calls`", None)
    ]


def test_tools_within_one_turn_with_one_call() -> None:
    assert snippet_problems("""
        - tools_within_one_turn:
            allow_extra_calls: false
            calls:
              - tool_executed: {tool_name: check_balance, source: local}
        """) == [
        (
            4,
            7,
            "`tools_within_one_turn` needs at least two calls, got 1",
            "for a single tool run use `tool_executed`",
        )
    ]


def test_tools_within_one_turn_with_zero_calls() -> None:
    assert snippet_problems("""
        - tools_within_one_turn:
            allow_extra_calls: false
            calls: []
        """) == [
        (
            3,
            12,
            "`tools_within_one_turn` needs at least two calls, got 0",
            "for a single tool run use `tool_executed`",
        )
    ]


@pytest.mark.parametrize(
    ("value", "description", "col"),
    [
        ("", "null", 11),
        ("{tool_executed: {tool_name: a, source: local}}", "a mapping", 12),
        ("check_balance", "a string `check_balance`", 12),
    ],
    ids=["null", "mapping", "string"],
)
def test_calls_must_be_a_list(value: str, description: str, col: int) -> None:
    line = f"    calls: {value}".rstrip()
    assert snippet_problems(f"- tools_within_one_turn:\n    allow_extra_calls: true\n{line}") == [
        (3, col, f"`calls` must be a list of `tool_executed` entries, got {description}", None)
    ]


@pytest.mark.parametrize("kind", ["skill_activated", "bot_uttered", "tools_within_one_turn"])
def test_a_call_that_is_not_tool_executed(kind: str) -> None:
    assert snippet_problems(f"""
        - tools_within_one_turn:
            allow_extra_calls: true
            calls:
              - tool_executed: {{tool_name: a, source: local}}
              - {kind}: {{skill_id: x}}
        """) == [
        (5, 9, f"a call in `tools_within_one_turn` must be `tool_executed`, got `{kind}`", None)
    ]


def test_a_misspelled_call_kind_suggests_tool_executed() -> None:
    assert snippet_problems("""
        - tools_within_one_turn:
            allow_extra_calls: true
            calls:
              - tool_executed: {tool_name: a, source: local}
              - tool_execute: {tool_name: b, source: local}
        """) == [(5, 9, "unknown assertion `tool_execute`", "did you mean `tool_executed`?")]


def test_each_call_is_checked_like_a_tool_executed() -> None:
    assert snippet_problems("""
        - tools_within_one_turn:
            allow_extra_calls: true
            calls:
              - tool_executed: {tool_name: a, source: local, mcp_server: m}
              - tool_executed: {tool_name: b, source: local, is_error: no}
        """) == [
        (
            4,
            54,
            "`mcp_server` is not allowed in `tool_executed` with source `local`",
            "a local run has no MCP server; remove `mcp_server` or set `source: mcp`",
        ),
        (
            5,
            64,
            "`is_error` in `tool_executed` must be true or false, got a string `no`",
            YAML12_HINT.format("no"),
        ),
    ]


def test_unknown_key_in_tools_within_one_turn() -> None:
    snippet = (
        "- tools_within_one_turn:\n    allow_extra_calls: true\n    orderd: true\n" + TWO_CALLS
    )
    assert snippet_problems(snippet) == [
        (3, 5, "unknown key `orderd` in `tools_within_one_turn`", "did you mean `ordered`?")
    ]


# The commonest mistake in a calls list: the call's fields written without the
# `tool_executed:` wrapper. The hint says so (not "start each ... with `- `").
def test_a_call_without_the_tool_executed_wrapper_says_so() -> None:
    found = snippet_problems("""
        - tools_within_one_turn:
            allow_extra_calls: true
            calls:
              - tool_name: a
                source: local
              - tool_name: b
                source: local
        """)
    assert [(line, col) for line, col, _, _ in found] == [(4, 9), (6, 9)]
    for _, _, _, hint in found:
        assert hint is not None and "tool_executed:" in hint
        assert "its own `- `" not in hint


@pytest.mark.parametrize(
    ("snippet", "hint"),
    [
        ("- skill_activated: {skill_id: a}\n  step_id: b", "move `step_id` into `skill_activated`"),
        (
            "- skill_activated: {skill_id: a}\n  note: b",
            "only `skill_activated` belongs at this level; move `note` into it or remove it",
        ),
        (
            "- {}",
            "write the check's kind as the key, e.g. `- skill_activated: {skill_id: card_replace}`",
        ),
        (
            "- tool_name: t\n  source: local",
            "write `- tool_executed:` and indent the fields of the call under it",
        ),
        (
            "- tools_within_one_turn:\n    allow_extra_calls: true\n    calls:\n"
            "      - tool_executed: {tool_name: a, source: local}\n      - tool_name: b",
            "wrap each call in `tool_executed:` (`- tool_executed: {tool_name: ..., source: ...}`)",
        ),
    ],
    ids=[
        "field-beside-flow-mapping",
        "unknown-beside-check",
        "empty",
        "bare-tool-assertion",
        "one-key-bare-call",
    ],
)
def test_a_list_item_that_is_not_one_check_gets_a_hint_that_fits(snippet: str, hint: str) -> None:
    assert [h for _, h in snippet_messages(snippet)] == [hint]


# ==========================================================================
# bot_uttered / bot_did_not_utter
# ==========================================================================


@pytest.mark.parametrize("kind", ["bot_uttered", "bot_did_not_utter"])
@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ("utter_name: utter_ask_card", {"utter_name": "utter_ask_card"}),
        ("text_matches: '(?i)card\\s+\\d{4}'", {"text_matches": r"(?i)card\s+\d{4}"}),
        (
            "buttons: [{title: Yes, payload: /affirm}, {title: 'No'}]",
            {"buttons": (Button(title="Yes", payload="/affirm"), Button(title="No"))},
        ),
        ("buttons: []", {"buttons": ()}),
    ],
    ids=["utter_name", "text_matches", "buttons", "no-buttons"],
)
def test_bot_check_with_one_field(kind: str, fields: str, expected: dict[str, Any]) -> None:
    assert assertions_of(f"- {kind}: {{{fields}}}") == (BotCheck(kind=kind, **expected),)


@pytest.mark.parametrize("kind", ["bot_uttered", "bot_did_not_utter"])
@pytest.mark.parametrize(("value", "col"), [("", 0), ("{}", 1)], ids=["null", "empty-mapping"])
def test_bot_check_with_no_field_is_rejected(kind: str, value: str, col: int) -> None:
    assert snippet_problems(f"- {kind}: {value}".rstrip()) == [
        (
            1,
            4 + len(kind) + col,
            f"`{kind}` needs at least one of `utter_name`, `text_matches`, `buttons`",
            NO_FIELD_HINT,
        )
    ]


@pytest.mark.parametrize(
    ("pattern", "error"),
    [
        ("replacement (ordered|placed", "missing ), unterminated subpattern at position 12"),
        ("*card", "nothing to repeat at position 0"),
        ("[z-a]", "bad character range z-a at position 1"),
        ("card\\", "bad escape (end of pattern) at position 4"),
        (
            "(?P<n>a)(?P<n>b)",
            "redefinition of group name 'n' as group 2; was group 1 at position 12",
        ),
    ],
    ids=[
        "unterminated-group",
        "nothing-to-repeat",
        "bad-range",
        "trailing-backslash",
        "duplicate-group",
    ],
)
def test_invalid_text_matches_reports_the_regex_error_and_position(
    pattern: str, error: str
) -> None:
    quoted = "'" + pattern.replace("'", "''") + "'"
    assert snippet_problems(f"- bot_uttered:\n    text_matches: {quoted}") == [
        (2, 19, f"`text_matches` is not a valid regular expression: {error}", REGEX_HINT)
    ]


@pytest.mark.parametrize(
    ("field", "value", "description"),
    [
        ("utter_name", "5", "an integer `5`"),
        ("text_matches", "[a, b]", "a list"),
        ("utter_name", "{a: 1}", "a mapping"),
    ],
    ids=["utter_name-int", "text_matches-list", "utter_name-mapping"],
)
def test_bot_fields_must_be_strings(field: str, value: str, description: str) -> None:
    assert snippet_problems(f"- bot_uttered:\n    {field}: {value}") == [
        (2, 7 + len(field), f"`{field}` in `bot_uttered` must be a string, got {description}", None)
    ]


@pytest.mark.parametrize(
    ("key", "hint"),
    [
        ("text_match", "did you mean `text_matches`?"),
        ("utterance_name", "did you mean `utter_name`?"),
        ("button", "did you mean `buttons`?"),
        ("text", "allowed keys: `buttons`, `text_matches`, `utter_name`"),
    ],
    ids=["text_matches", "utter_name", "buttons", "no-near-miss"],
)
def test_unknown_key_in_a_bot_check(key: str, hint: str) -> None:
    assert snippet_problems(f"- bot_did_not_utter:\n    utter_name: u\n    {key}: x") == [
        (3, 5, f"unknown key `{key}` in `bot_did_not_utter`", hint)
    ]


def test_every_bad_button_is_reported() -> None:
    assert snippet_problems("""
        - bot_uttered:
            buttons:
              - payload: /affirm
              - title: 5
              - Yes
              - title: 'No'
                payload: 3
              - title: Maybe
                payloda: /maybe
        """) == [
        (3, 9, "a button is missing required key `title`", None),
        (4, 16, "`title` in a button must be a string, got an integer `5`", None),
        (5, 9, "a button must be a mapping, got a string `Yes`", None),
        (7, 18, "`payload` in a button must be a string, got an integer `3`", None),
        (9, 9, "unknown key `payloda` in a button", "did you mean `payload`?"),
    ]


def test_buttons_must_be_a_list() -> None:
    assert snippet_problems("- bot_uttered:\n    buttons: {title: Yes}") == [
        (2, 14, "`buttons` in `bot_uttered` must be a list, got a mapping", None)
    ]


# ==========================================================================
# sequencing
# ==========================================================================


def test_sequencing_accepts_every_allowed_step_shape() -> None:
    assert assertions_of("""
        - sequencing:
            - skill_activated: {skill_id: s}
            - ordered_block_completed: {skill_id: s, block_id: main, step_id: done}
            - memory_was_set: s.reason
            - tool_executed: {tool_name: t, source: mcp, mcp_server: m}
            - memory_was_cleared: s.draft
            - skill_completed: {skill_id: s}
        """) == (
        SequencingCheck(
            steps=(
                LifecycleCheck(kind="skill_activated", skill_id="s"),
                LifecycleCheck(
                    kind="ordered_block_completed", skill_id="s", block_id="main", step_id="done"
                ),
                MemoryStep(kind="memory_was_set", name="s.reason"),
                ToolExecutedCheck(ToolCall(tool_name="t", source="mcp", mcp_server="m")),
                MemoryStep(kind="memory_was_cleared", name="s.draft"),
                LifecycleCheck(kind="skill_completed", skill_id="s"),
            )
        ),
    )


def test_sequencing_with_a_single_step_is_allowed() -> None:
    assert assertions_of("- sequencing:\n    - memory_was_set: s.k") == (
        SequencingCheck(steps=(MemoryStep(kind="memory_was_set", name="s.k"),)),
    )


@pytest.mark.parametrize("kind", ["memory_was_set", "memory_was_cleared"])
@pytest.mark.parametrize(
    ("value", "description", "line", "col"),
    [
        ("[{name: s.k}]", "a list", 2, 23),
        ("{name: s.k, value: 1}", "a mapping", 2, 23),
        ("\n        - name: s.k\n          value: damaged", "a list", 3, 9),
        ("5", "an integer `5`", 2, 23),
    ],
    ids=["flow-list", "mapping", "block-list-with-value", "int"],
)
def test_a_memory_step_takes_the_key_as_a_string(
    kind: str, value: str, description: str, line: int, col: int
) -> None:
    hint = f"write `- {kind}: scope.field`"
    if description in ("a list", "a mapping"):
        hint += "; inside `sequencing` a memory step cannot carry a value"
    col += len(kind) - len("memory_was_set") if line == 2 else 0
    assert snippet_problems(f"- sequencing:\n    - {kind}: {value}") == [
        (
            line,
            col,
            f"inside `sequencing`, `{kind}` takes the key name as a string, got {description}",
            hint,
        )
    ]


def test_a_memory_step_with_the_session_prefix() -> None:
    assert snippet_problems("- sequencing:\n    - memory_was_cleared: session.s.draft") == [
        (
            2,
            27,
            "memory key `session.s.draft` starts with `session.` and can never match",
            "the tracker stores keys without it: write `s.draft`",
        )
    ]


@pytest.mark.parametrize(
    ("kind", "hint"),
    [
        ("memory_was_not_set", "it can only be judged at the end, not at a point in order"),
        ("tools_within_one_turn", "it spans a whole turn, not one event"),
        ("bot_did_not_utter", "it can only be judged at the end, not at a point in order"),
        ("sequencing", "sequencing cannot be nested; list the steps in one sequence"),
    ],
)
def test_checks_that_cannot_be_sequenced_are_rejected(kind: str, hint: str) -> None:
    assert snippet_problems(f"""
        - sequencing:
            - skill_activated: {{skill_id: s}}
            - {kind}: whatever
        """) == [(3, 7, f"`{kind}` is not allowed inside `sequencing`", hint)]


@pytest.mark.parametrize(
    ("value", "message", "col"),
    [
        ("[]", "`sequencing` needs at least one step", 15),
        ("", "`sequencing` takes a list of steps, got null", 14),
        (
            "{skill_activated: {skill_id: s}}",
            "`sequencing` takes a list of steps, got a mapping",
            15,
        ),
    ],
    ids=["empty", "null", "mapping"],
)
def test_sequencing_needs_a_list_of_at_least_one_step(value: str, message: str, col: int) -> None:
    assert snippet_problems(f"- sequencing: {value}".rstrip()) == [(1, col, message, None)]


def test_sequencing_steps_use_the_usual_shape_and_rules() -> None:
    assert snippet_problems("""
        - sequencing:
            - skill_activated: {skill_id: s, step_id: x}
            - tool_executed: {tool_name: t, source: mcp}
            - bot_uttered: {}
            - tool_execute: {tool_name: t, source: local}
        """) == [
        (
            2,
            38,
            "`step_id` is not allowed in `skill_activated`",
            STEP_ID_HINT.format("skill_activated"),
        ),
        (
            3,
            7,
            "`tool_executed` with source `mcp` is missing required key `mcp_server`",
            "the server is not inferred from the tool name",
        ),
        (
            4,
            7,
            "`bot_uttered` is not allowed inside `sequencing`",
            "Mantle's scenario schema allows skill, ordered-block, `tool_executed` and memory "
            "steps only; check the message with a `bot_uttered` assertion of its own",
        ),
        (5, 7, "unknown assertion `tool_execute`", "did you mean `tool_executed`?"),
    ]


# ==========================================================================
# Assertion shape and unknown keys at every level
# ==========================================================================


@pytest.mark.parametrize(
    ("kind", "hint"),
    [
        ("skil_activated", "did you mean `skill_activated`?"),
        ("memory_was_sett", "did you mean `memory_was_set`?"),
        ("tools_in_one_turn", "did you mean `tools_within_one_turn`?"),
        ("bot_utter", "did you mean `bot_uttered`?"),
        ("sequence", "did you mean `sequencing`?"),
        ("custom_check", None),
    ],
    ids=["skill", "memory", "tools", "bot", "sequencing", "no-near-miss"],
)
def test_unknown_assertion_kind(kind: str, hint: str | None) -> None:
    assert snippet_problems(f"- {kind}: {{skill_id: a}}") == [
        (1, 3, f"unknown assertion `{kind}`", hint)
    ]


def test_unknown_key_at_assertion_level_suggests_the_near_miss() -> None:
    assert snippet_problems("""
        - skill_activated:
            skill_id: card_replace
            skil_id: card_replace
        """) == [(3, 5, "unknown key `skil_id` in `skill_activated`", "did you mean `skill_id`?")]


def test_a_misspelled_required_key_is_unknown_and_the_key_missing() -> None:
    assert snippet_messages("- skill_activated:\n    skil_id: card_replace") == [
        ("`skill_activated` is missing required key `skill_id`", None),
        ("unknown key `skil_id` in `skill_activated`", "did you mean `skill_id`?"),
    ]


def test_two_checks_in_one_list_item() -> None:
    assert snippet_problems("""
        - skill_activated: {skill_id: a}
          skill_completed: {skill_id: a}
        """) == [
        (
            1,
            3,
            "an assertion must have exactly one key, the check's kind; got "
            "`skill_activated`, `skill_completed`",
            "start each assertion with its own `- `",
        )
    ]


@pytest.mark.parametrize(
    ("item", "description"),
    [
        ("skill_activated", "a string `skill_activated`"),
        ("[a]", "a list"),
        ("", "null"),
    ],
    ids=["string", "list", "null"],
)
def test_an_assertion_must_be_a_mapping(item: str, description: str) -> None:
    assert snippet_problems(f"- {item}".rstrip()) == [
        (1, 3 if item else 2, f"an assertion must be a mapping, got {description}", None)
    ]


# Fields not indented under the kind make a two-key mapping; the fix is to
# indent them, not to start another assertion.
def test_fields_not_indented_under_the_kind_get_an_indentation_hint() -> None:
    ((line, col, message, hint),) = snippet_problems("""
        - skill_activated:
          skill_id: card_replace
        """)
    assert (line, col) == (1, 3)
    assert message == (
        "an assertion must have exactly one key, the check's kind; got "
        "`skill_activated`, `skill_id`"
    )
    assert hint is not None and "indent" in hint and "its own `- `" not in hint


@pytest.mark.parametrize(
    ("value", "description", "col"),
    [
        ("{skill_activated: {skill_id: a}}", "a mapping", 17),
        ("skill_activated", "a string `skill_activated`", 17),
    ],
    ids=["mapping", "string"],
)
def test_assertions_must_be_a_list(value: str, description: str, col: int) -> None:
    assert problems_of(f"""\
        scenario:
          name: n
          simulation_context: c
          goals:
            assertions: {value}
        """) == [(5, col, f"`assertions` must be a list, got {description}", None)]


@pytest.mark.parametrize(
    "goals",
    ["  goals:\n    assertions:\n", "  goals:\n    assertions: []\n", "  goals:\n    criteria:\n"],
    ids=["null-assertions", "empty-assertions", "null-criteria"],
)
def test_empty_goals_parts_load_as_nothing(goals: str) -> None:
    scenario = load_scenario_text("scenario:\n  name: n\n  simulation_context: c\n" + goals)
    assert (scenario.assertions, scenario.criteria) == ((), ())


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "scenaro:\n  name: n\n",
            (1, 1, "unknown key `scenaro` in the document", "did you mean `scenario`?"),
        ),
        (
            "scenario:\n  name: n\n  simulation_context: c\nversion: 2\n",
            (4, 1, "unknown key `version` in the document", "allowed keys: `scenario`"),
        ),
        (
            "scenario:\n  name: n\n  simulaton_context: c\n",
            (
                3,
                3,
                "unknown key `simulaton_context` in `scenario`",
                "did you mean `simulation_context`?",
            ),
        ),
        (
            "scenario:\n  name: n\n  simulation_context: c\n  goal:\n    assertions: []\n",
            (4, 3, "unknown key `goal` in `scenario`", "did you mean `goals`?"),
        ),
        (
            "scenario:\n  name: n\n  simulation_context: c\n  tags: [a]\n",
            (
                4,
                3,
                "unknown key `tags` in `scenario`",
                "allowed keys: `goals`, `name`, `setup`, `simulation_context`, `type`",
            ),
        ),
        (
            "scenario:\n  name: n\n  simulation_context: c\n  setup:\n    initial_slot: {a: 1}\n",
            (5, 5, "unknown key `initial_slot` in `setup`", "did you mean `initial_slots`?"),
        ),
        (
            "scenario:\n  name: n\n  simulation_context: c\n  goals:\n    assertion: []\n",
            (5, 5, "unknown key `assertion` in `goals`", "did you mean `assertions`?"),
        ),
        (
            "scenario:\n  name: n\n  simulation_context: c\n  goals:\n    critera: []\n",
            (5, 5, "unknown key `critera` in `goals`", "did you mean `criteria`?"),
        ),
        (
            "scenario:\n  name: n\n  simulation_context: c\n  goals:\n    rubric: []\n",
            (
                5,
                5,
                "unknown key `rubric` in `goals`",
                "allowed keys: `assertions`, `criteria`, `expected_tools`",
            ),
        ),
    ],
    ids=[
        "document-near-miss",
        "document-other",
        "scenario-near-miss",
        "scenario-goals",
        "scenario-other",
        "setup",
        "goals-assertions",
        "goals-criteria",
        "goals-other",
    ],
)
def test_unknown_key_above_the_assertions(text: str, expected: Problem) -> None:
    found = [(d.line, d.col, d.message, d.hint) for d in diagnostics_of(text)]
    assert expected in found
    # a misspelled *required* key is also reported missing, and nothing else is
    others = [message for problem in found if problem != expected for message in problem[2:3]]
    assert all("is missing required key" in message for message in others)


# ==========================================================================
# The scenario itself
# ==========================================================================


@pytest.mark.parametrize(
    ("body", "missing"),
    [
        ("  simulation_context: c\n", "name"),
        ("  name: n\n", "simulation_context"),
    ],
    ids=["name", "simulation_context"],
)
def test_scenario_requires_name_and_simulation_context(body: str, missing: str) -> None:
    assert [(d.message, d.hint) for d in diagnostics_of("scenario:\n" + body)] == [
        (f"`scenario` is missing required key `{missing}`", None)
    ]


def test_the_document_requires_scenario() -> None:
    assert problems_of("name: n\n") == [
        (1, 1, "unknown key `name` in the document", "allowed keys: `scenario`"),
        (1, 1, "the document is missing required key `scenario`", None),
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("- scenario\n", (1, 1, "the document must be a mapping, got a list", None)),
        ("just text\n", (1, 1, "the document must be a mapping, got a string `just text`", None)),
        ("scenario: [a]\n", (1, 11, "`scenario` must be a mapping, got a list", None)),
        ("scenario:\n", (1, 10, "`scenario` must be a mapping, got null", None)),
        (
            "scenario:\n  name: [n]\n  simulation_context: c\n",
            (2, 9, "`name` in `scenario` must be a string, got a list", None),
        ),
        (
            "scenario:\n  name: n\n  simulation_context: {a: 1}\n",
            (3, 23, "`simulation_context` in `scenario` must be a string, got a mapping", None),
        ),
        (
            "scenario:\n  name: n\n  simulation_context: c\n  type: 3\n",
            (4, 9, "`type` in `scenario` must be a string, got an integer `3`", None),
        ),
        (
            "scenario:\n  name: n\n  simulation_context: c\n  setup: [a]\n",
            (4, 10, "`setup` must be a mapping, got a list", None),
        ),
        (
            "scenario:\n  name: n\n  simulation_context: c\n  setup:\n    initial_slots: [a]\n",
            (5, 20, "`initial_slots` must be a mapping, got a list", None),
        ),
        (
            "scenario:\n  name: n\n  simulation_context: c\n  goals: [a]\n",
            (4, 10, "`goals` must be a mapping, got a list", None),
        ),
        (
            "scenario:\n  name: n\n  simulation_context: c\n  goals:\n    criteria: one\n",
            (5, 15, "`criteria` must be a list, got a string `one`", None),
        ),
        (
            "scenario:\n  name: n\n  simulation_context: c\n  goals:\n    criteria: [ok, 3]\n",
            (5, 20, "a criterion must be a string, got an integer `3`", None),
        ),
    ],
    ids=[
        "document-list",
        "document-string",
        "scenario-list",
        "scenario-null",
        "name-list",
        "context-mapping",
        "type-int",
        "setup-list",
        "initial-slots-list",
        "goals-list",
        "criteria-string",
        "criterion-int",
    ],
)
def test_scenario_shape(text: str, expected: Problem) -> None:
    assert [(d.line, d.col, d.message, d.hint) for d in diagnostics_of(text)] == [expected]


def test_initial_slots_keep_their_values() -> None:
    scenario = load_scenario_text(
        textwrap.dedent("""\
        scenario:
          name: n
          simulation_context: c
          setup:
            initial_slots:
              project.customer_authenticated: true
              project.customer_id: cust-20931
              project.limit: 500
        """)
    )
    assert scenario.initial_slots == {
        "project.customer_authenticated": True,
        "project.customer_id": "cust-20931",
        "project.limit": 500,
    }


# A missing required key is reported at the key whose value lacks it
# (`tools_within_one_turn`, `scenario`, ...), not at the start of the mapping,
# i.e. under its *first* key (`calls:`, `name:`), which is unrelated.
MISSING_KEY_AT_OWNER = [
    ("scenario:\n  name: n\n", (1, 1, "`scenario` is missing required key `simulation_context`")),
    (
        with_assertions("- tools_within_one_turn:\n    calls: []"),
        (6, 9, "`tools_within_one_turn` is missing required key `allow_extra_calls`"),
    ),
    (
        with_assertions("- skill_activated:\n    skil_id: card_replace"),
        (6, 9, "`skill_activated` is missing required key `skill_id`"),
    ),
    (
        with_assertions("- tool_executed:\n    tool_name: t\n    source: mcp"),
        (6, 9, "`tool_executed` with source `mcp` is missing required key `mcp_server`"),
    ),
]


@pytest.mark.parametrize(
    ("text", "expected"),
    MISSING_KEY_AT_OWNER,
    ids=["scenario", "tools_within_one_turn", "skill_activated", "mcp_server"],
)
def test_a_missing_key_is_reported_at_the_key_that_owns_the_mapping(
    text: str, expected: tuple[int, int, str]
) -> None:
    found = [(d.line, d.col, d.message) for d in diagnostics_of(text)]
    assert expected in found


def test_a_missing_key_in_a_list_item_is_reported_at_the_item() -> None:
    """A list item has no owning key, so the item itself is the place."""
    assert snippet_problems("- memory_was_set:\n    - value: 1") == [
        (2, 7, "an entry of `memory_was_set` is missing required key `name`", None)
    ]


# ==========================================================================
# Every problem at once, in file order, rendered like a compiler
# ==========================================================================

SEVERAL_MISTAKES = """\
scenario:
  name: Several mistakes
  simulation_context: c
  goals:
    assertions:
      - skill_activated: {skill_id: a, step_id: b}
      - memory_was_cleared:
          - name: session.s.k
      - bot_uttered:
          text_matches: "(unclosed"
      - sequencing: []
      - tool_executed: {tool_name: t, source: local, is_error: yes}
  type: happy_path
  type: sad_path
"""


def test_all_problems_in_a_file_are_reported_sorted_by_line() -> None:
    assert [(d.line, d.col, d.message) for d in diagnostics_of(SEVERAL_MISTAKES)] == [
        (6, 40, "`step_id` is not allowed in `skill_activated`"),
        (8, 19, "memory key `session.s.k` starts with `session.` and can never match"),
        (
            10,
            25,
            "`text_matches` is not a valid regular expression: missing ), unterminated "
            "subpattern at position 0",
        ),
        (11, 21, "`sequencing` needs at least one step"),
        (12, 64, "`is_error` in `tool_executed` must be true or false, got a string `yes`"),
        (14, 3, "duplicate key `type`"),
    ]


def test_yaml_and_validation_problems_are_merged_in_line_order() -> None:
    text = "scenario:\n  name: n\n  name: m\n  simulaton_context: c\n"
    assert [(d.line, d.col, d.message) for d in diagnostics_of(text)] == [
        (1, 1, "`scenario` is missing required key `simulation_context`"),
        (3, 3, "duplicate key `name`"),
        (4, 3, "unknown key `simulaton_context` in `scenario`"),
    ]


def test_scenario_error_message_is_every_rendered_diagnostic() -> None:
    with pytest.raises(ScenarioError) as info:
        load_scenario_text(SEVERAL_MISTAKES, PATH)
    assert str(info.value) == "\n".join(d.render() for d in info.value.diagnostics)
    assert isinstance(info.value, mantle_stream.MantleStreamError)


def test_a_diagnostic_renders_like_a_compiler_error() -> None:
    (diagnostic,) = diagnostics_of(
        with_assertions("- skill_activated: {skil_id: a, skill_id: a}"), "eval/scenarios/x.yml"
    )
    assert diagnostic.render() == (
        "eval/scenarios/x.yml:6:27: error: unknown key `skil_id` in `skill_activated`\n"
        "          - skill_activated: {skil_id: a, skill_id: a}\n"
        "                              ^\n"
        "hint: did you mean `skill_id`?"
    )


def test_the_caret_keeps_tabs_so_it_lines_up() -> None:
    text = (
        "scenario:\n  name: n\n  simulation_context: c\n"
        '  setup: {initial_slots: {k: "a\tb"}, typo: 1}\n'
    )
    (diagnostic,) = diagnostics_of(text, "t.yml")
    assert diagnostic.render() == (
        "t.yml:4:38: error: unknown key `typo` in `setup`\n"
        '      setup: {initial_slots: {k: "a\tb"}, typo: 1}\n'
        "                                   \t     ^\n"
        "hint: allowed keys: `initial_slots`"
    )


def test_load_scenario_text_names_the_source_string_by_default() -> None:
    with pytest.raises(ScenarioError) as info:
        load_scenario_text("scenario: 1\n")
    assert [d.path for d in info.value.diagnostics] == ["<string>"]


# ==========================================================================
# load_scenarios: files and directories
# ==========================================================================

VALID = "scenario:\n  name: {}\n  simulation_context: c\n"


def test_a_directory_loads_every_yml_and_yaml_file_sorted(tmp_path: Path) -> None:
    (tmp_path / "b.yaml").write_text(VALID.format("B"))
    (tmp_path / "a.yml").write_text(VALID.format("A"))
    (tmp_path / "notes.md").write_text("not a scenario")
    (tmp_path / "c.yml.bak").write_text("scenario: broken")
    (tmp_path / "d.json").write_text("{}")
    scenarios = load_scenarios([tmp_path])
    assert [(s.name, Path(s.path).name, s.stem) for s in scenarios] == [
        ("A", "a.yml", "a"),
        ("B", "b.yaml", "b"),
    ]


def test_files_and_directories_can_be_mixed(tmp_path: Path) -> None:
    folder = tmp_path / "more"
    folder.mkdir()
    (folder / "x.yml").write_text(VALID.format("X"))
    single = tmp_path / "single.yaml"
    single.write_text(VALID.format("S"))
    assert [s.name for s in load_scenarios([str(single), folder])] == ["S", "X"]


@pytest.mark.parametrize(
    "contents", [{}, {"README.md": "hi", "x.json": "{}"}], ids=["empty", "no-yaml"]
)
def test_a_directory_without_scenarios_is_an_error(
    tmp_path: Path, contents: dict[str, str]
) -> None:
    for name, text in contents.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(ScenarioError) as info:
        load_scenarios([tmp_path])
    assert [(d.path, d.line, d.col, d.message) for d in info.value.diagnostics] == [
        (str(tmp_path), 0, 0, "no *.yml or *.yaml files in this directory")
    ]


def test_diagnostics_of_several_files_are_reported_together(tmp_path: Path) -> None:
    (tmp_path / "a.yml").write_text("scenario:\n  name: a\n")
    (tmp_path / "b.yml").write_text(VALID.format("fine"))
    (tmp_path / "c.yml").write_text(
        "scenario:\n  name: c\n  simulation_context: c\n  typo: 1\n"
        "  goals: {assertions: [{skill_activated: {}}]}\n"
    )
    with pytest.raises(ScenarioError) as info:
        load_scenarios([tmp_path])
    assert [(Path(d.path).name, d.line, d.message) for d in info.value.diagnostics] == [
        ("a.yml", 1, "`scenario` is missing required key `simulation_context`"),
        ("c.yml", 4, "unknown key `typo` in `scenario`"),
        ("c.yml", 5, "`skill_activated` is missing required key `skill_id`"),
    ]


def test_a_missing_file_is_a_diagnostic(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yml"
    with pytest.raises(ScenarioError) as info:
        load_scenarios([missing])
    assert [(d.path, d.line, d.col, d.message) for d in info.value.diagnostics] == [
        (str(missing), 0, 0, "cannot read: No such file or directory")
    ]


def test_no_paths_load_no_scenarios() -> None:
    assert load_scenarios([]) == []


# "All problems of all files at once": an empty directory is one more problem,
# it does not hide the others.
def test_an_empty_directory_does_not_hide_other_files_problems(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    broken = tmp_path / "broken.yml"
    broken.write_text("scenario:\n  name: b\n")
    with pytest.raises(ScenarioError) as info:
        load_scenarios([empty, broken])
    assert [(d.path, d.message) for d in info.value.diagnostics] == [
        (str(empty), "no *.yml or *.yaml files in this directory"),
        (str(broken), "`scenario` is missing required key `simulation_context`"),
    ]


# ==========================================================================
# Golden: the example broken scenario
# ==========================================================================


def rendered(found: list[Diagnostic]) -> str:
    return "".join(d.render() + "\n" for d in found)


def broken_diagnostics(monkeypatch: pytest.MonkeyPatch) -> list[Diagnostic]:
    monkeypatch.chdir(REPO)
    with pytest.raises(ScenarioError) as info:
        load_scenario_file(BROKEN)
    return info.value.diagnostics


def golden_messages() -> list[tuple[str, str | None]]:
    """(message, hint) of every diagnostic in the golden file, positions left out."""
    found: list[tuple[str, str | None]] = []
    for line in GOLDEN.read_text().splitlines():
        if line.startswith(f"{BROKEN}:"):
            found.append((line.split(": error: ", 1)[1], None))
        elif line.startswith("hint: "):
            found[-1] = (found[-1][0], line[len("hint: ") :])
    return found


def test_the_broken_example_reports_the_golden_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every message and hint of the golden file, whatever the positions."""
    got = [(d.message, d.hint) for d in broken_diagnostics(monkeypatch)]
    assert sorted(got, key=str) == sorted(golden_messages(), key=str)
    assert len(got) == 11


def test_broken_example_matches_the_golden_diagnostics(monkeypatch: pytest.MonkeyPatch) -> None:
    got = rendered(broken_diagnostics(monkeypatch))
    if os.environ.get("MANTLE_STREAM_UPDATE_GOLDEN"):
        GOLDEN.write_text(got)
    assert got == GOLDEN.read_text()


# ==========================================================================
# The command line: mantle-stream validate
# ==========================================================================


def validate(*paths: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mantle_stream", "validate", *paths],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_validate_a_broken_file_exits_2_with_every_diagnostic_on_stderr(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    expected = broken_diagnostics(monkeypatch)
    result = validate(BROKEN)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == rendered(expected) + f"{len(expected)} errors in 1 file\n"
    assert "Traceback" not in result.stderr


def test_validate_a_valid_file_exits_0() -> None:
    result = validate("examples/eval/scenarios/card_replace_damaged.yml")
    assert (result.returncode, result.stdout, result.stderr) == (
        0,
        "examples/eval/scenarios/card_replace_damaged.yml: ok: "
        "`Customer replaces a damaged card`, 12 assertions\n",
        "",
    )


def test_validate_a_directory_of_valid_files_exits_0() -> None:
    result = validate("examples/eval/scenarios")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count(": ok: ") == len(
        list((REPO / "examples/eval/scenarios").glob("*.yml"))
    )


def test_validate_reports_several_files_in_one_run(tmp_path: Path) -> None:
    (tmp_path / "a.yml").write_text("scenario:\n  name: a\n")
    (tmp_path / "b.yml").write_text("")
    result = validate(str(tmp_path))
    assert result.returncode == 2
    assert result.stderr.endswith("\n2 errors in 2 files\n")
    assert f"{tmp_path / 'a.yml'}:1:1: error:" in result.stderr
    assert f"{tmp_path / 'b.yml'}:1:1: error: the file is empty" in result.stderr


def test_validate_a_missing_file_exits_2_without_a_traceback(tmp_path: Path) -> None:
    result = validate(str(tmp_path / "nope.yml"))
    assert result.returncode == 2
    assert result.stderr == (
        f"{tmp_path / 'nope.yml'}: error: cannot read: No such file or "
        "directory\n1 error in 1 file\n"
    )


# Inputs that once raised RecursionError or yaml.reader.ReaderError out of the
# loader (a traceback and exit 1): they are diagnostics and exit 2.
@pytest.mark.parametrize(
    "text",
    ["a: &a [*a]\n", "scenario:\n  name: a\x07b\n"],
    ids=["recursive-alias", "control-character"],
)
def test_validate_never_prints_a_traceback(tmp_path: Path, text: str) -> None:
    path = tmp_path / "bad.yml"
    path.write_text(text)
    result = validate(str(path))
    assert "Traceback" not in result.stderr
    assert result.returncode == 2
    assert result.stderr.startswith(f"{path}:1:") or result.stderr.startswith(f"{path}:2:")
