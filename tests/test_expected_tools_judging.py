"""Judging ``goals.expected_tools`` (issue 23, item 2): Rasa's tool-call scores, streaming.

Sources: the issue's rules (observed calls, turns, matching, standalone and
group entries, recall and precision as Rasa computes them, decided live),
docs/semantics.md ("Expected tools"). One behaviour per example test; then a
property: on random conversations in real wire shapes (tests/strategies.py)
every verdict, turn, ``decided_at`` and metric equals the reference
(tests/reference_expected_tools.py), and what a snapshot shows as passed
mid-conversation is final.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference_expected_tools import score

from mantle_stream import Evaluator, load_scenario_text
from mantle_stream.core.verdicts import ToolCallScores, ToolEntryResult
from mantle_stream.testing import conversation, session_ended, tool, user

from strategies import (
    ARGUMENT_KEYS,
    Conversation,
    argument_values,
    conversations,
    numeric_twin,
    one_in_five,
    random_events,
    turn_users,
)


def scenario_with(entries: list[dict[str, Any]]) -> Any:
    return load_scenario_text(
        json.dumps(
            {
                "scenario": {
                    "name": "t",
                    "simulation_context": "x",
                    "goals": {"expected_tools": entries},
                }
            }
        )
    )


def scores(entries: list[dict[str, Any]], *events: Any) -> ToolCallScores:
    evaluator = Evaluator(scenario_with(entries))
    for line in conversation(*events):
        evaluator.push_line(line)
    evaluator.finish_all()
    (result,) = evaluator.results()
    assert result.expected_tools is not None
    return result.expected_tools


def entry(entries: list[dict[str, Any]], *events: Any) -> ToolEntryResult:
    (only,) = scores(entries, *events).entries
    return only


def outcome(e: ToolEntryResult) -> tuple[str, int | None, int | None]:
    return e.verdict, e.turn, e.decided_at


def group(*names: str, ordered: bool | None = None, gate: bool | None = None) -> dict[str, Any]:
    items: list[dict[str, Any]] = [{"tool_called": n} for n in names]
    if ordered is not None:
        items.append({"ordered": ordered})
    if gate is not None:
        items.append({"gate": gate})
    return {"tool_group": items}


# -- standalone


def test_a_standalone_entry_passes_at_the_first_matching_call() -> None:
    # sequences: 0 user, 1 a (errored), 2 b, 3 user, 4 a
    e = entry(
        [{"tool_called": "a"}],
        user("hi"),
        tool("a", is_error=True),
        tool("b"),
        user("x"),
        tool("a"),
    )
    assert outcome(e) == ("passed", 2, 4)
    assert (e.recall, e.precision) == (1.0, 1 / 3)


def test_a_standalone_entry_compares_listed_arguments_by_value() -> None:
    spec = [{"tool_called": {"tool_name": "a", "arguments": {"n": 1, "flag": True}}}]
    assert entry(spec, tool("a", args={"n": 1.0, "flag": True, "other": 3})).verdict == "passed"
    assert entry(spec, tool("a", args={"n": 1, "flag": 1})).verdict == "failed"
    assert entry(spec, tool("a", args={"n": 1})).reason == (
        "`a` never ran with the listed arguments"
    )


def test_an_errored_call_never_matches() -> None:
    e = entry([{"tool_called": "a"}], tool("a", is_error=True))
    assert (e.verdict, e.reason, e.recall, e.precision) == (
        "failed",
        "`a` ran but failed (is_error) every time",
        0.0,
        0.0,
    )


def test_with_no_call_precision_is_none() -> None:
    e = entry([{"tool_called": "a"}], user("hi"))
    assert (e.verdict, e.turn, e.recall, e.precision, e.reason) == (
        "failed",
        None,
        0.0,
        None,
        "`a` never ran",
    )


@pytest.mark.parametrize("name", ["complete_skill", "set_fields", "listen", "activate"])
def test_framework_tools_are_not_observed(name: str) -> None:
    e = entry([{"tool_called": "a"}], tool(name), tool("a"))
    assert (e.verdict, e.precision) == ("passed", 1.0)
    assert entry([{"tool_called": name}], tool(name)).verdict == "failed"


@pytest.mark.parametrize("name", ["search_knowledge", "cannot_help"])
def test_search_knowledge_and_cannot_help_are_observed(name: str) -> None:
    assert entry([{"tool_called": name}], tool(name)).verdict == "passed"
    assert entry([{"tool_called": "a"}], tool(name), tool("a")).precision == 0.5


# -- groups


def test_a_group_passes_when_its_perfect_turn_ends() -> None:
    # 0 user, 1 b, 2 a, 3 user, 4 c
    e = entry([group("a", "b")], user("hi"), tool("b"), tool("a"), user("more"), tool("c"))
    assert outcome(e) == ("passed", 1, 3)
    assert (e.recall, e.precision) == (1.0, 1.0)
    assert e.reason == "`a`, `b` ran in turn 1 with no other calls"


def test_a_group_perfect_in_the_last_turn_passes_at_the_end() -> None:
    e = entry([group("a", "b")], user("hi"), tool("b"), tool("a"), session_ended())
    assert outcome(e) == ("passed", 1, None)


def test_an_extra_call_spoils_the_turn() -> None:
    e = entry([group("a", "b")], user("hi"), tool("a"), tool("b"), tool("c"))
    assert (e.verdict, e.turn, e.recall, e.precision) == ("failed", 1, 1.0, 2 / 3)
    assert e.reason == (
        "no turn ran `a`, `b` and no other calls; turn 1 matched 2 of 2, but had an extra call `c`"
    )


def test_an_errored_retry_of_an_expected_tool_is_no_extra() -> None:
    e = entry([group("a", "b")], user("hi"), tool("a", is_error=True), tool("b"), tool("a"))
    assert (e.verdict, e.precision) == ("passed", 2 / 3)
    spoiled = entry([group("a", "b")], user("hi"), tool("c", is_error=True), tool("b"), tool("a"))
    assert spoiled.verdict == "failed"


def test_each_expected_tool_needs_a_call_of_its_own() -> None:
    e = entry([group("a", "a")], user("hi"), tool("a"))
    assert (e.verdict, e.recall) == ("failed", 0.5)
    assert entry([group("a", "a")], user("hi"), tool("a"), tool("a")).verdict == "passed"


def test_a_matching_is_found_where_a_first_fit_would_miss_it() -> None:
    spec = [
        {
            "tool_group": [
                {"tool_called": "a"},
                {"tool_called": {"tool_name": "a", "arguments": {"n": 1}}},
            ]
        }
    ]
    assert entry(spec, user("hi"), tool("a", args={"n": 1}), tool("a", args={"n": 2})).verdict == (
        "passed"
    )


def test_an_ordered_group_needs_the_listed_order() -> None:
    ordered = [group("a", "b", ordered=True)]
    assert entry(ordered, user("hi"), tool("a"), tool("b")).verdict == "passed"
    e = entry(ordered, user("hi"), tool("b"), tool("a"))
    assert (e.verdict, e.recall, e.precision) == ("failed", 0.0, 0.0)
    assert e.reason.endswith("turn 1 matched 0 of 2: `b` ran before its turn in the listed order")


def test_an_ordered_group_skips_retries_of_the_tool_expected_next() -> None:
    ordered = [group("a", "b", ordered=True)]
    e = entry(
        ordered,
        user("hi"),
        tool("a", is_error=True),
        tool("a"),
        tool("b", is_error=True),
        tool("b"),
    )
    assert (e.verdict, e.precision) == ("passed", 0.5)
    late_retry = entry(ordered, user("hi"), tool("a"), tool("b"), tool("b", is_error=True))
    assert late_retry.verdict == "failed"


def test_a_failed_group_is_scored_on_the_turn_closest_to_it() -> None:
    # turn 1: a c (1 of 2); turn 2: d (0); turn 3: a b c (2 of 2 + extra)
    e = entry(
        [group("a", "b")],
        user("1"), tool("a"), tool("c"),
        user("2"), tool("d"),
        user("3"), tool("a"), tool("b"), tool("c"),
    )  # fmt: skip
    assert (e.verdict, e.turn, e.recall, e.precision) == ("failed", 3, 1.0, 2 / 3)


def test_of_equally_close_turns_the_earliest_counts() -> None:
    e = entry([group("a", "b")], user("1"), tool("a"), tool("x"), user("2"), tool("b"))
    assert (e.turn, e.recall, e.precision) == (1, 0.5, 0.5)


def test_turn_zero_and_command_messages() -> None:
    # the /command starts no turn: a and b are both in turn 0
    e = entry([group("a", "b")], tool("a"), user("/session_start"), tool("b"))
    assert outcome(e) == ("passed", 0, None)


def test_conversation_means_and_gates() -> None:
    s = scores(
        [
            {"tool_called": "a", "gate": True},
            {"tool_called": "zz"},
            group("a", "b", gate=True),
        ],
        user("hi"),
        tool("a"),
        tool("b"),
    )
    assert [e.verdict for e in s.entries] == ["passed", "failed", "passed"]
    assert [e.gate for e in s.entries] == [True, False, True]
    assert (s.recall, s.precision, s.accuracy) == (2 / 3, (0.5 + 0.0 + 1.0) / 3, 2 / 3)
    assert s.gates_failed == 0


def test_a_live_snapshot_shows_what_has_passed_and_nothing_else() -> None:
    evaluator = Evaluator(scenario_with([{"tool_called": "a"}, group("a", "b")]))
    lines = conversation(user("hi"), tool("a"), tool("b"), user("next"))
    for line in lines[:2]:
        evaluator.push_line(line)
    (result,) = evaluator.results()
    assert result.expected_tools is not None
    assert [(e.verdict, e.decided_at, e.recall) for e in result.expected_tools.entries] == [
        ("passed", 1, None),
        ("pending", None, None),
    ]
    for line in lines[2:]:
        evaluator.push_line(line)
    (result,) = evaluator.results()
    assert result.expected_tools is not None
    assert [(e.verdict, e.decided_at) for e in result.expected_tools.entries] == [
        ("passed", 1),
        ("passed", 3),
    ]


def test_a_scenario_without_expected_tools_has_no_scores() -> None:
    evaluator = Evaluator(load_scenario_text("scenario: {name: t, simulation_context: x}"))
    for line in conversation(tool("a")):
        evaluator.push_line(line)
    evaluator.finish_all()
    assert evaluator.results()[0].expected_tools is None


# -- the property: streaming equals the reference

TOOL_NAMES = ("check_balance", "check_balance", "search_knowledge", "cannot_help", "complete_skill")
tool_names = st.sampled_from(TOOL_NAMES)
expected_arguments = st.dictionaries(st.sampled_from(ARGUMENT_KEYS), argument_values, max_size=2)


@st.composite
def tool_called_values(draw: st.DrawFn) -> Any:
    name = draw(tool_names)
    shape = draw(st.sampled_from(("name", "map", "map-args")))
    if shape == "name":
        return name
    if shape == "map":
        return {"tool_name": name}
    return {"tool_name": name, "arguments": draw(expected_arguments)}


@st.composite
def expected_entries(draw: st.DrawFn) -> dict[str, Any]:
    if draw(st.booleans()):
        entry: dict[str, Any] = {"tool_called": draw(tool_called_values())}
        if draw(st.booleans()):
            entry["gate"] = draw(st.booleans())
        return entry
    items: list[dict[str, Any]] = [
        {"tool_called": v} for v in draw(st.lists(tool_called_values(), min_size=1, max_size=3))
    ]
    for flag in ("ordered", "gate"):
        if draw(st.booleans()):
            items.insert(draw(st.integers(0, len(items))), {flag: draw(st.booleans())})
    return {"tool_group": items}


def as_assertion(entry: dict[str, Any]) -> dict[str, Any]:
    """The assertion whose witnesses (tests/strategies.py) are calls of the entry's tools:
    a tool_executed, or a turn of tools_within_one_turn (fenced, permuted, with extras)."""

    def call(value: Any) -> dict[str, Any]:
        spec = {"tool_name": value, "source": "local"} if isinstance(value, str) else value
        return {"source": "local", **spec}

    if "tool_called" in entry:
        return {"tool_executed": call(entry["tool_called"])}
    calls = [
        {"tool_executed": call(i["tool_called"])} for i in entry["tool_group"] if "tool_called" in i
    ]
    return {"tools_within_one_turn": {"calls": calls, "allow_extra_calls": False}}


def run_of(value: Any, is_error: bool) -> dict[str, Any]:
    """A local run of an expected tool, its listed arguments (or their numeric twins)."""
    tool: dict[str, Any] = {"tool_name": value} if isinstance(value, str) else value
    return {
        "kind": "tool_executed",
        "tool_name": tool["tool_name"],
        "source": "local",
        "mcp_server": None,
        "skill_id": None,
        "arguments": numeric_twin(dict(tool.get("arguments") or {})),
        "is_error": is_error,
    }


@st.composite
def group_turns(draw: st.DrawFn, entry: dict[str, Any]) -> list[dict[str, Any]]:
    """A turn meant to satisfy a group: each tool's run, some after errored retries, in
    the listed order or not, sometimes with an extra run; fenced by user messages."""
    runs: list[dict[str, Any]] = []
    for item in entry["tool_group"]:
        if "tool_called" in item:
            for _ in range(draw(st.sampled_from((0, 0, 1, 2)))):
                runs.append(run_of(item["tool_called"], is_error=True))
            runs.append(run_of(item["tool_called"], is_error=draw(one_in_five)))
    if draw(one_in_five):
        runs.append(draw(random_events("tool_executed")))
    if draw(one_in_five):
        runs = draw(st.permutations(runs))
    return [draw(turn_users), *runs, *([draw(turn_users)] if draw(st.booleans()) else [])]


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[dict[str, Any]], Conversation]:
    entries = draw(st.lists(expected_entries(), min_size=1, max_size=4))
    # Each entry's witnesses twice over: errored tries before a success are common.
    planted = [as_assertion(e) for e in entries for _ in range(draw(st.integers(1, 2)))]
    turns = [draw(group_turns(e)) for e in entries if "tool_group" in e and draw(st.booleans())]
    return entries, draw(conversations(planted, max_events=8, planted=turns))


def reported(s: ToolCallScores) -> dict[str, Any]:
    return {
        "entries": [
            {
                "verdict": e.verdict,
                "turn": e.turn,
                "decided_at": e.decided_at,
                "recall": e.recall,
                "precision": e.precision,
            }
            for e in s.entries
        ],
        "recall": s.recall,
        "precision": s.precision,
        "accuracy": s.accuracy,
    }


#: The loaded Hypothesis profile's count (100 unless told): the README's test command.
QUICK = settings(
    max_examples=settings().max_examples,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@QUICK
@given(cases())
def test_streaming_scores_equal_the_reference(
    case: tuple[list[dict[str, Any]], Conversation],
) -> None:
    _scores_equal_the_reference(case)


@pytest.mark.slow
@settings(QUICK, max_examples=1500)
@given(cases())
def test_streaming_scores_equal_the_reference_long(
    case: tuple[list[dict[str, Any]], Conversation],
) -> None:
    _scores_equal_the_reference(case)


def _scores_equal_the_reference(case: tuple[list[dict[str, Any]], Conversation]) -> None:
    entries, conv = case
    evaluator = Evaluator(scenario_with(entries))
    seen: dict[int, tuple[str, int | None, int | None]] = {}
    for row in conv.rows:
        evaluator.push_line(row.line)
        for result in evaluator.results():
            assert result.expected_tools is not None
            for e in result.expected_tools.entries:
                if e.verdict == "passed":
                    seen.setdefault(e.index, (e.verdict, e.turn, e.decided_at))
    evaluator.finish_all()
    (result,) = evaluator.results()
    assert result.expected_tools is not None
    assert reported(result.expected_tools) == score(entries, conv.events)
    final = {e.index: (e.verdict, e.turn, e.decided_at) for e in result.expected_tools.entries}
    assert all(final[index] == decided for index, decided in seen.items())  # never changed


def test_a_checkpoint_resumes_the_scores_at_any_event() -> None:
    spec = [{"tool_called": "a"}, group("a", "b"), group("b", "c", ordered=True)]
    lines = conversation(
        user("1"), tool("a"), tool("c"),
        user("2"), tool("b", is_error=True), tool("b"), tool("c"), tool("a"),
        user("3"), tool("a"), tool("b"),
        session_ended(),
    )  # fmt: skip
    whole = Evaluator(scenario_with(spec))
    for line in lines:
        whole.push_line(line)
    expected = whole.results()[0].expected_tools
    assert expected is not None
    assert [e.verdict for e in expected.entries] == ["passed", "passed", "failed"]
    for split in range(len(lines) + 1):
        first = Evaluator(scenario_with(spec))
        for line in lines[:split]:
            first.push_line(line)
        second = Evaluator(scenario_with(spec))
        second.restore(first.checkpoint())
        for line in lines:  # read again from the start: what was applied is skipped
            second.push_line(line)
        second.finish_all()
        assert second.results()[0].expected_tools == expected, split


def test_in_a_stopped_conversation_what_has_not_passed_is_skipped() -> None:
    evaluator = Evaluator(scenario_with([{"tool_called": "a"}, {"tool_called": "b", "gate": True}]))
    for line in conversation(user("hi"), tool("a")):
        evaluator.push_line(line)
    evaluator.stop("c")
    evaluator.finish_all()
    (result,) = evaluator.results()
    assert result.expected_tools is not None
    assert [(e.verdict, e.reason) for e in result.expected_tools.entries] == [
        ("passed", "`a` ran in turn 1"),
        ("skipped", "not judged: the conversation was stopped early; `b` never ran"),
    ]
    assert (result.expected_tools.accuracy, result.expected_tools.gates_failed) == (1.0, 0)
