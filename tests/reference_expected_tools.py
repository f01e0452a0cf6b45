"""Reference scoring of ``goals.expected_tools``: the oracle for the streaming scorer.

Written from the rules of issue 23 (item 2) and Rasa's definitions of the
metrics, independent of ``mantle_stream``: one *finished* conversation at a
time, plain loops and brute force over the whole list of calls.

The rules:

* observed calls: the conversation's tool runs, except framework tools other
  than ``search_knowledge`` and ``cannot_help``; turns as for assertions
  (:func:`reference_batch.split_turns`);
* a call *matches* an expected tool when the name is equal, it did not error,
  and every listed argument is present and equal by value
  (:func:`reference_batch.values_equal`); it is a *retry* of one when it
  errored and would otherwise match;
* standalone ``tool_called``: passed when some call matches, at the first such
  call, in its turn; recall 1 or 0; precision the matching calls over all
  calls (None when there is none);
* ``tool_group`` on one turn (only turns with calls are looked at):

  - unordered, *perfect* when some one-to-one assignment of expected tools to
    matching calls leaves no call unassigned but retries (of any tool of the
    group); *matched*: the most expected tools matched by distinct calls;
  - ordered, *perfect* when the turn's calls are, in order, for each expected
    tool in turn: retries of it, then one call matching it; *matched*: Rasa's
    scan, expected tool by expected tool, from where the last match was: a
    retry of the tool sought is passed over, a call matching it is taken, a
    call matching a later tool first ends the scan, anything else is passed
    over;
  - passed on the first perfect turn, decided by the user message that opens
    the next turn (the end, None, when it is the last); recall 1, precision
    k over the turn's calls; else failed, scored on the turn with the most
    matched (the earliest of equals): recall matched / k, precision matched /
    the turn's calls; no call at all: recall 0, precision None, no turn;
* conversation means of recall, precision and accuracy (passed = 1) over the
  entries that have them.

Entries are given as loaded from YAML (``{"tool_called": ...}``, ``gate`` beside
it; ``{"tool_group": [...]}``).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from reference_batch import conversation_events, is_counted_run, split_turns, values_equal

Event = Mapping[str, Any]


def expected_tool(value: Any) -> dict[str, Any]:
    """A ``tool_called`` value as ``{"tool_name", "arguments"}``."""
    if isinstance(value, str):
        return {"tool_name": value.strip(), "arguments": {}}
    return {"tool_name": value["tool_name"].strip(), "arguments": value.get("arguments") or {}}


def identifies(expected: Mapping[str, Any], call: Event) -> bool:
    if call["tool_name"] != expected["tool_name"]:
        return False
    arguments = call["arguments"]
    return all(
        key in arguments and values_equal(value, arguments[key])
        for key, value in expected["arguments"].items()
    )


def matches(expected: Mapping[str, Any], call: Event) -> bool:
    return not call["is_error"] and identifies(expected, call)


def is_retry(expected: Mapping[str, Any], call: Event) -> bool:
    return bool(call["is_error"]) and identifies(expected, call)


# -- one turn of a group


def unordered_matched(tools: Sequence[Mapping[str, Any]], calls: Sequence[Event]) -> int:
    """The most expected tools matched by distinct calls (brute force)."""
    for size in range(len(tools), 0, -1):
        for chosen in itertools.combinations(range(len(tools)), size):
            for picked in itertools.permutations(range(len(calls)), size):
                if all(matches(tools[t], calls[c]) for t, c in zip(chosen, picked, strict=True)):
                    return size
    return 0


def unordered_perfect(tools: Sequence[Mapping[str, Any]], calls: Sequence[Event]) -> bool:
    for picked in itertools.permutations(range(len(calls)), len(tools)):
        if not all(matches(tools[t], calls[c]) for t, c in enumerate(picked)):
            continue
        others = [calls[c] for c in range(len(calls)) if c not in picked]
        if all(any(is_retry(t, call) for t in tools) for call in others):
            return True
    return False


def ordered_perfect(tools: Sequence[Mapping[str, Any]], calls: Sequence[Event]) -> bool:
    if not tools:
        return not calls
    first, rest = tools[0], tools[1:]
    for end, call in enumerate(calls):
        if matches(first, call):
            return ordered_perfect(rest, calls[end + 1 :])
        if not is_retry(first, call):
            return False
    return False


def ordered_matched(tools: Sequence[Mapping[str, Any]], calls: Sequence[Event]) -> int:
    matched = 0
    position = 0
    while matched < len(tools):
        sought = tools[matched]
        for index in range(position, len(calls)):
            call = calls[index]
            if is_retry(sought, call):
                continue
            if matches(sought, call):
                matched += 1
                position = index + 1
                break
            if any(matches(later, call) for later in tools[matched + 1 :]):
                return matched
        else:
            return matched
    return matched


# -- scoring


def score(
    entries: Sequence[Mapping[str, Any]], raw_events: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """``{"entries": [{"verdict", "turn", "decided_at", "recall", "precision"}], "recall",
    "precision", "accuracy"}`` for one finished conversation."""
    turns = split_turns(conversation_events(raw_events))
    observed = [(number, e) for number, turn in enumerate(turns) for e in turn if is_counted_run(e)]
    calls = [call for _, call in observed]
    results: list[dict[str, Any]] = []
    for entry in entries:
        if "tool_called" in entry:
            tool = expected_tool(entry["tool_called"])
            found = [(number, call) for number, call in observed if matches(tool, call)]
            results.append(
                {
                    "verdict": "passed" if found else "failed",
                    "turn": found[0][0] if found else None,
                    "decided_at": found[0][1]["sequence"] if found else None,
                    "recall": 1.0 if found else 0.0,
                    "precision": len(found) / len(calls) if calls else None,
                }
            )
            continue
        items = entry["tool_group"]
        tools = [expected_tool(i["tool_called"]) for i in items if "tool_called" in i]
        ordered = False
        for item in items:
            if "ordered" in item:
                ordered = item["ordered"]
        perfect = ordered_perfect if ordered else unordered_perfect
        matched_on = ordered_matched if ordered else unordered_matched
        result: dict[str, Any] = {
            "verdict": "failed",
            "turn": None,
            "decided_at": None,
            "recall": 0.0,
            "precision": None,
        }
        best: tuple[int, int, int] | None = None  # (matched, calls, turn)
        for number, turn in enumerate(turns):
            on_turn = [e for e in turn if is_counted_run(e)]
            if not on_turn:
                continue
            if perfect(tools, on_turn):
                following = turns[number + 1][0] if number + 1 < len(turns) else None
                result = {
                    "verdict": "passed",
                    "turn": number,
                    "decided_at": None if following is None else following["sequence"],
                    "recall": 1.0,
                    "precision": len(tools) / len(on_turn),
                }
                break
            matched = matched_on(tools, on_turn)
            if best is None or matched > best[0]:
                best = (matched, len(on_turn), number)
        else:
            if best is not None:
                matched, n, number = best
                result.update(turn=number, recall=matched / len(tools), precision=matched / n)
        results.append(result)

    def mean(values: list[float | None]) -> float | None:
        present = [v for v in values if v is not None]
        return sum(present) / len(present) if present else None

    return {
        "entries": results,
        "recall": mean([r["recall"] for r in results]),
        "precision": mean([r["precision"] for r in results]),
        "accuracy": mean([1.0 if r["verdict"] == "passed" else 0.0 for r in results]),
    }
