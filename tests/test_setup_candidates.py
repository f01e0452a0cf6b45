"""Which scenarios a run can be playing, from its setup (core/setup.py): the rule
docs/semantics.md states, one to one, seed fields under bare names."""

from __future__ import annotations

import json
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


# ---------------------------------------------------------------- judged apart

CARD_FILE = EXAMPLES / "scenarios" / "card_replace_damaged.yml"
FEED = (EXAMPLES / "events" / "all.jsonl").read_bytes()


def _twins() -> tuple[Scenario, Scenario, list[Scenario]]:
    """The card scenario, a twin with its setup and other assertions (so that the two
    verdicts can differ), and the fraud scenario (another setup)."""
    [card] = load_scenarios([str(CARD_FILE)])
    twin = msgspec.structs.replace(
        scenario(
            {"skill_activated": {"skill_id": "card_replace"}},
            {"memory_was_not_set": [{"name": "card_replace.fraud_review"}]},
            name="A twin",
        ),
        initial_slots=card.initial_slots,
    )
    return card, twin, load_scenarios([str(EXAMPLES / "scenarios" / "fraud_report.yml")])


def _alone(s: Scenario, feed: bytes = FEED) -> Evaluator:
    evaluator = Evaluator(s)
    evaluator.push_chunk(feed)
    evaluator.finish_all()
    return evaluator


def _lines_of(cid: str) -> bytes:
    return b"".join(line + b"\n" for line in FEED.splitlines() if cid.encode() in line)


def _ambiguous_ids(card: Scenario) -> list[str]:
    """The example runs that play the card scenario (its setup)."""
    recorded = load_results(EXAMPLES / "results" / "2026-12-01T09-00-00")
    return [cid for cid, run in recorded.items() if run.scenario == card.stem]


def test_a_run_of_several_candidates_is_judged_against_each_apart_and_reaches_no_output() -> None:
    card, twin, other = _twins()
    evaluator = Evaluator([card, twin, *other])
    decisions = evaluator.push_chunk(FEED) + evaluator.finish_all()
    ids = _ambiguous_ids(card)
    alone = {s.name: _alone(s) for s in (card, twin)}
    verdicts = {u.conversation_id: u.candidate_verdicts for u in evaluator.unmatched()}
    assert ids and all(cid in verdicts for cid in ids)
    for cid in ids:
        assert [(c.scenario, c.verdict) for c in verdicts[cid]] == [
            (s.name, alone[s.name].result(cid).verdict) for s in (card, twin)
        ]
        assert not [d for d in decisions if d.conversation_id == cid]  # provisional
    # The two candidates disagree on at least one run: a verdict under one is not the other's.
    assert any(len({c.verdict for c in verdicts[cid]}) == 2 for cid in ids)
    assert all(r.scenario not in (card.name, twin.name) for r in evaluator.results())
    u = next(u for u in evaluator.unmatched() if u.conversation_id == ids[0])
    assert u.why().startswith("its setup matches 2 scenarios, judged apart: `Customer")


@pytest.mark.parametrize("when", ["mid-run", "after its end"])
def test_a_run_named_later_is_judged_as_if_named_from_the_start(when: str) -> None:
    """The results folder names a run's scenario while it plays, or (as evaluate_agent
    writes it) after it ended: its verdicts and decisions are those of judging it
    against that scenario from its first event."""
    card, twin, other = _twins()
    evaluator = Evaluator([card, twin, *other])
    cid = _ambiguous_ids(card)[0]
    lines = _lines_of(cid).splitlines(keepends=True)
    half = len(lines) // 2 if when == "mid-run" else len(lines)
    early = evaluator.push_chunk(b"".join(lines[:half]))
    assert early == [] and evaluator.naming(cid) == "candidates"
    named = evaluator.assign(cid, twin.name)
    rest = evaluator.push_chunk(b"".join(lines[half:])) + evaluator.finish_all()
    alone = _alone(twin, _lines_of(cid))
    assert evaluator.result(cid) == alone.result(cid)
    key = lambda d: (d.index, d.verdict, d.decided_at)  # noqa: E731
    assert sorted(map(key, named + rest)) == sorted(map(key, alone.results()[0].assertions))
    assert evaluator.unmatched() == [] and evaluator.statistics().failed == (
        alone.result(cid).verdict == "failed"
    )


def test_a_run_named_past_the_buffer_takes_over_its_candidates_state(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import mantle_stream.core.engine.scenarios as choice

    # Its first user message is its 12th event: candidates decided, then past the bound.
    monkeypatch.setattr(choice, "MAX_UNNAMED_BUFFER", 13)
    card, twin, other = _twins()
    evaluator = Evaluator([card, twin, *other])
    cid = _ambiguous_ids(card)[0]
    lines = _lines_of(cid).splitlines(keepends=True)
    evaluator.push_chunk(b"".join(lines[:-3]))
    assert evaluator.naming(cid) == "candidates"
    named = evaluator.assign(cid, card.name)
    rest = evaluator.push_chunk(b"".join(lines[-3:])) + evaluator.finish_all()
    alone = _alone(card, _lines_of(cid))
    assert evaluator.result(cid) == alone.result(cid)
    assert len(named + rest) == len(card.assertions)  # each decision once
    # Named past the buffer, and not one of its candidates: nothing left to judge it with.
    evaluator = Evaluator([card, twin, *other])
    evaluator.push_chunk(b"".join(lines[:-3]))
    assert evaluator.assign(cid, other[0].name) == []
    assert evaluator.statistics().unnamed_given_up == 1
    assert [u.candidate_verdicts for u in evaluator.unmatched()] == [()]


def test_a_stopped_run_of_several_candidates_is_stopped_under_each() -> None:
    card, twin, other = _twins()
    evaluator = Evaluator([card, twin, *other])
    cid = _ambiguous_ids(card)[0]
    lines = _lines_of(cid).splitlines(keepends=True)
    evaluator.push_chunk(b"".join(lines[:15]))  # past its first user message
    assert evaluator.naming(cid) == "candidates"
    evaluator.stop(cid)
    evaluator.finish_all()
    [u] = evaluator.unmatched()
    for name, apart in evaluator._choice.apart.items():
        judged = apart.conversation(cid)
        assert judged is not None
        assert "skipped" in {r.verdict for r in judged.results if r is not None}, name
    assert u.candidate_verdicts


def test_failed_under_every_candidate_names_the_first_candidates_failure() -> None:
    card, _, other = _twins()
    twin = msgspec.structs.replace(card, name="A twin", path="<twin>")
    evaluator = Evaluator([card, twin, *other])
    failing = [cid for cid in _ambiguous_ids(card) if _alone(card).result(cid).verdict == "failed"]
    cid = failing[0]
    evaluator.push_chunk(_lines_of(cid))
    found = evaluator.failed_under_every_candidate(cid)
    assert found is not None
    result, failure = found
    assert result.scenario == card.name and failure.verdict == "failed"
    assert evaluator.failed_under_every_candidate("nobody") is None


def test_given_candidates_replace_what_the_events_show() -> None:
    card, twin, other = _twins()
    evaluator = Evaluator([card, twin, *other])
    cid = _ambiguous_ids(card)[0]
    evaluator.consider(cid, [twin.name])  # (the gate saw its setup on the wire)
    evaluator.push_chunk(_lines_of(cid))
    evaluator.finish_all()
    assert evaluator.result(cid) == _alone(twin, _lines_of(cid)).result(cid)


def test_a_run_let_go_of_is_reported_with_its_candidates_and_leaves_them() -> None:
    card, twin, other = _twins()
    evaluator = Evaluator([card, twin, *other], keep_finished=0)
    let_go: list[Any] = []
    evaluator.on_let_go = let_go.append
    evaluator.push_chunk(FEED)
    evaluator.finish_all()
    ambiguous = [u for u in let_go if getattr(u, "candidate_verdicts", ())]
    assert len(ambiguous) == len(_ambiguous_ids(card))
    aparts = evaluator._choice.apart.values()
    assert aparts
    assert all(  # nothing kept
        apart.conversation(u.conversation_id) is None for apart in aparts for u in ambiguous
    )


def test_with_one_scenario_a_run_naming_another_in_its_metadata_is_not_judged() -> None:
    card, _, _ = _twins()
    meta = json.dumps(json.dumps({"scenario": "transfer_mcp"}))
    feed = (
        f'{{"conversation_id":"c","sequence":0,"metadata":{meta},'
        '"skill_activated":{"skill_id":"card_replace"}}\n'
        '{"conversation_id":"d","sequence":0,"skill_activated":{"skill_id":"card_replace"}}\n'
    ).encode()
    evaluator = _alone(card, feed)
    [u] = evaluator.unmatched()
    assert (u.conversation_id, u.scenario) == ("c", "transfer_mcp")
    assert [r.conversation_id for r in evaluator.results()] == ["d"]
