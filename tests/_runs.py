"""Scenarios run several times: the shared feed of the scenario-results tests.

Three runs each of five scenarios: ``always`` passes every run, ``flaky``
fails one, ``never`` fails all, ``stopped`` has a run mantle_stream stopped
early, ``errored`` a run whose regular expression ran out of time (an error
of the harness, never a failure). Used by the report, table, JUnit, GitHub and
HTML tests, so that every output is checked on the same runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mantle_stream as ms

from _harness import line, scenario

SKILL = {"skill_activated": {"skill_id": "card"}}
SAID = {"bot_uttered": {"text_matches": "done"}}
EVIL = {"bot_uttered": {"text_matches": r"(a+)+$"}}
SCENARIOS = [
    scenario(SKILL, SAID, name="always"),
    scenario(SKILL, SAID, name="flaky"),
    scenario(SKILL, name="never"),
    scenario(SKILL, SAID, name="stopped"),
    scenario(SKILL, EVIL, name="errored"),
]
NAMES = ("always", "flaky", "never", "stopped", "errored")

ACTIVATED = {"skill_activated": {"skill_id": "card", "step_id": None}}
OTHER = {"skill_activated": {"skill_id": "other", "step_id": None}}
DONE = {"bot": {"text": "all done", "data": None}}
SILENT = {"bot": {"text": "hmm", "data": None}}
EVIL_TEXT = {"bot": {"text": "a" * 5000 + "!", "data": None}}  # backtracks for ever
ENDS_IN_A = {"bot": {"text": "a pizza", "data": None}}  # matches the pattern at once


def run(cid: str, *payloads: dict[str, Any]) -> list[bytes]:
    """One conversation's lines: the payloads in order, then its session_ended."""
    rows = [line(cid, seq, **payload) for seq, payload in enumerate(payloads)]
    return [*rows, line(cid, len(payloads), session_ended={})]


def judge_runs(
    *,
    keep_finished: int | None = None,
    on_let_go: Callable[[Any], None] | None = None,
    stray: bool = False,
) -> ms.Evaluator:
    """The five scenarios' three runs each, judged (and with ``stray`` one more
    conversation, of a scenario not loaded)."""
    assignments = {f"{name}-{n}": name for name in NAMES for n in range(3)}
    if stray:
        assignments["stray"] = "nope"
    evaluator = ms.Evaluator(
        SCENARIOS, assignments=assignments, regex_timeout=0.01, keep_finished=keep_finished
    )
    if on_let_go is not None:
        evaluator.on_let_go = on_let_go
    # A run stopped early: told to stop after its first verdict (the skill passed).
    evaluator.push_line(line("stopped-0", 0, **ACTIVATED))
    evaluator.stop("stopped-0")
    evaluator.finish("stopped-0")
    lines: list[bytes] = []
    for n in range(3):
        lines += run(f"always-{n}", ACTIVATED, DONE)
        lines += run(f"flaky-{n}", ACTIVATED, DONE if n != 1 else SILENT)
        lines += run(f"never-{n}", OTHER)
        lines += run(f"errored-{n}", ACTIVATED, EVIL_TEXT if n == 2 else ENDS_IN_A)
    for n in (1, 2):
        lines += run(f"stopped-{n}", ACTIVATED, DONE)
    if stray:
        lines += run("stray", ACTIVATED)
    for row in lines:
        evaluator.push_line(row)
    evaluator.finish_all()
    return evaluator
