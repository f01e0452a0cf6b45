"""Which scenarios a run can be playing, from its setup (core/setup.py): the rule
docs/semantics.md states, one to one, seed fields under bare names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from mantle_stream.core.engine.evaluator import Evaluator
from mantle_stream.core.recorded import load_results
from mantle_stream.core.scenario.load import load_scenarios
from mantle_stream.core.scenario.model import Scenario
from mantle_stream.core.setup import RunSetup, candidates
from mantle_stream.testing import scenario

BASE = scenario({"skill_activated": {"skill_id": "x"}})


def _with(name: str, slots: dict[str, Any]) -> Any:
    return msgspec.structs.replace(BASE, name=name, path=f"<{name}>", initial_slots=slots)


AUTH = _with("auth", {"project.customer_authenticated": True, "project.customer_id": "c-1"})
OTHER = _with("other", {"project.customer_authenticated": True, "project.customer_id": "c-2"})
SKILL = _with("skill", {"card_replace.reason": "damaged"})
NONE = _with("none", {})


def _setup(metadata: dict[str, Any] | None = None, slots: dict[str, Any] | None = None) -> RunSetup:
    setup = RunSetup()
    setup.session_start({"is_simulation": True, **(metadata or {})})
    setup.slot_events([{"event": "slot", "name": k, "value": v} for k, v in (slots or {}).items()])
    return setup


@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        (
            _setup(slots={"project.customer_authenticated": True, "project.customer_id": "c-1"}),
            ["auth"],
        ),
        (
            _setup(slots={"project.customer_authenticated": True, "project.customer_id": "c-2"}),
            ["other"],
        ),
        # Seed fields travel in the session-start metadata under their bare names.
        (_setup({"customer_authenticated": True}, {"project.customer_id": "c-1"}), ["auth"]),
        (_setup({"customer_authenticated": True, "customer_id": "c-2"}), ["other"]),
        (_setup(slots={"card_replace.reason": "damaged"}), ["skill"]),
        (_setup(), ["none"]),
    ],
    ids=["slots", "other-slots", "seed-and-slot", "seeds", "skill-key", "nothing"],
)
def test_a_run_is_a_candidate_of_the_scenarios_its_setup_matches(
    setup: RunSetup, expected: list[str]
) -> None:
    assert [s.name for s in candidates([AUTH, OTHER, SKILL, NONE], setup)] == expected


def test_types_must_match_true_is_not_1_nor_true_as_text() -> None:
    for value in (1, "true"):
        setup = _setup(
            slots={"project.customer_authenticated": value, "project.customer_id": "c-1"}
        )
        assert candidates([AUTH], setup) == []


def test_a_skill_key_is_never_a_seed_field() -> None:
    assert candidates([SKILL], _setup({"reason": "damaged"})) == []


def test_one_to_one_an_extra_entry_shown_is_not_the_scenarios() -> None:
    setup = _setup(slots={"project.customer_authenticated": True, "project.customer_id": "c-1",
                          "project.extra": 1})  # fmt: skip
    assert candidates([AUTH], setup) == []


def test_equal_setups_leave_several_candidates() -> None:
    twin = _with("twin", dict(AUTH.initial_slots))
    setup = _setup(slots=dict(AUTH.initial_slots))
    assert [s.name for s in candidates([AUTH, twin], setup)] == ["auth", "twin"]


def test_the_simulators_own_metadata_is_not_a_slot() -> None:
    setup = _setup({"scenario": "auth"})
    assert setup.metadata == {} and [s.name for s in candidates([NONE], setup)] == ["none"]


# ---------------------------------------------------------------- on an event source

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "eval"


def _examples(scenarios: list[Scenario]) -> Evaluator:
    evaluator = Evaluator(scenarios)
    evaluator.push_chunk((EXAMPLES / "events" / "all.jsonl").read_bytes())
    evaluator.finish_all()
    return evaluator


def test_with_several_scenarios_each_run_is_judged_against_the_one_its_setup_matches() -> None:
    """No results folder, no metadata: the memory writes before each run's first user
    message (its initial slots) tell the five example scenarios apart."""
    scenarios = load_scenarios([str(EXAMPLES / "scenarios")])
    recorded = load_results(EXAMPLES / "results" / "2026-12-01T09-00-00")
    stems = {s.name: s.stem for s in scenarios}
    evaluator = _examples(scenarios)
    assert evaluator.unmatched() == []
    judged = {r.conversation_id: stems[r.scenario or ""] for r in evaluator.results()}
    assert len(judged) == 13
    assert judged == {cid: recorded[cid].scenario for cid in judged}


def test_runs_whose_setup_matches_several_scenarios_are_reported_with_them() -> None:
    [card] = load_scenarios([str(EXAMPLES / "scenarios" / "card_replace_damaged.yml")])
    twin = msgspec.structs.replace(card, name="A twin", path="<twin>")
    other = load_scenarios([str(EXAMPLES / "scenarios" / "fraud_report.yml")])
    evaluator = _examples([card, twin, *other])
    ambiguous = [u for u in evaluator.unmatched() if u.candidates]
    assert ambiguous and all(sorted(u.candidates) == ["A twin", card.name] for u in ambiguous)
    assert not [r for r in evaluator.results() if r.scenario in (card.name, "A twin")]
