"""``evaluate_agent`` results folders: which scenario each conversation ran, and its verdicts.

An edge module (reads files). Rasa's ``evaluate_agent`` names its simulated
conversations ``sim-<uuid4>`` and puts the scenario nowhere on the events;
after each run it writes ``eval/results/<timestamp>/<scenario>/run_<N>.json``
with the run's ``conversation_id``, ``scenario_slug``, ``run_index`` and
``assertions: [{index, assertion, passed}]``. :func:`load_results` reads a
folder of those (any depth), so the engine can judge each conversation
against its scenario, and :func:`compare` lists where our verdicts differ
from the ones Rasa recorded.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import msgspec

from mantle_stream.core.assertions.bot import BotCheck
from mantle_stream.core.assertions.memory import MemoryCheck
from mantle_stream.core.assertions.tools import ToolExecutedCheck, ToolsWithinOneTurnCheck
from mantle_stream.core.errors import UsageError
from mantle_stream.core.scenario.model import Check
from mantle_stream.core.verdicts import ConversationResult

__all__ = ["RecordedRun", "RunDifference", "compare", "divergences", "load_results"]


class RecordedRun(msgspec.Struct, frozen=True):
    """One ``run_N.json``: the conversation, its scenario, Rasa's verdict per assertion."""

    path: str
    conversation_id: str
    scenario: str
    run_index: int | None
    passed: dict[int, bool]  # assertion index -> Rasa's recorded result


class RunDifference(msgspec.Struct, frozen=True):
    """An assertion whose verdict differs from the one ``evaluate_agent`` recorded.

    ``divergences``: the documented divergences from Rasa's evaluator that can
    make this assertion's verdicts differ (docs/semantics.md, "Divergences");
    none when nothing the assertion asks for is read differently, so the
    difference needs explaining (a bug here or there, or other events).
    """

    index: int
    kind: str
    verdict: str
    recorded: str
    divergences: list[str] = []


#: The documented divergences, as the report names them.
TYPED_VALUES = "memory values are typed: `true` is not `1`"
ALL_FIELDS_ONE_MESSAGE = "one message must meet every field of a bot check"
MATCHING = "tools_within_one_turn finds any assignment of runs to calls, not a greedy one"
COMPLETE_SKILL = "a `complete_skill` run neither meets nor breaks tools_within_one_turn"
MORE_BUTTONS = "buttons listed but not carried fail"
ANY_PAYLOAD = "a button without a payload matches any payload"
NULL_ARGUMENT = "a tool argument listed as null does not match a run without it"
BUTTONS_AT_POSITIONS = "bot_did_not_utter matches buttons at their positions"
NO_TEXT = "a message without text does not match text_matches (Rasa errors)"


def divergences(check: Check, verdict: str) -> list[str]:
    """The documented divergences that can make ``check`` come out ``verdict`` here when
    Rasa's evaluator decides the other way (each reads the check one way: stricter
    or looser than Rasa 3.21)."""
    found: list[tuple[str, str]] = []  # (divergence, our verdict where Rasa differs)
    if isinstance(check, MemoryCheck):
        if any(isinstance(e.value, bool | int | float) for e in check.entries if e.has_value):
            # `true` against `1`: Rasa finds it set, we do not.
            found.append(
                (TYPED_VALUES, "passed" if check.kind == "memory_was_not_set" else "failed")
            )
    elif isinstance(check, BotCheck):
        uttered = check.kind == "bot_uttered"
        if sum(f is not None for f in (check.utter_name, check.text_matches, check.buttons)) > 1:
            found.append((ALL_FIELDS_ONE_MESSAGE, "failed" if uttered else "passed"))
        if check.buttons is not None:
            if uttered:
                found.append((MORE_BUTTONS, "failed"))
                if any(b.payload is None for b in check.buttons):
                    found.append((ANY_PAYLOAD, "passed"))
            else:
                found.append((BUTTONS_AT_POSITIONS, "passed"))
        if check.text_matches is not None:
            found.append((NO_TEXT, "passed"))  # Rasa's run errored: recorded as not passed
    elif isinstance(check, ToolExecutedCheck | ToolsWithinOneTurnCheck):
        calls = list(check.calls) if isinstance(check, ToolsWithinOneTurnCheck) else [check.call]
        if isinstance(check, ToolsWithinOneTurnCheck):
            if not check.ordered:
                found.append((MATCHING, "passed"))
            found.append((COMPLETE_SKILL, "passed"))
        if any(None in (c.arguments or {}).values() for c in calls):
            found.append((NULL_ARGUMENT, "failed"))
    return [text for text, ours in found if ours == verdict]


class _RunFile(msgspec.Struct):
    conversation_id: str
    scenario_slug: str | None = None
    run_index: int | None = None
    assertions: list[dict[str, Any]] = []


_decode_run = msgspec.json.Decoder(_RunFile).decode


def _run_files(root: Path) -> Iterable[Path]:
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            if name.startswith("run_") and name.endswith(".json"):
                yield Path(folder) / name


def load_results(path: str | os.PathLike[str]) -> dict[str, RecordedRun]:
    """Every run of a results folder, by conversation id.

    The scenario is the file's ``scenario_slug``, else its folder's name
    (both are the scenario file's stem). Raises :class:`UsageError` for a
    folder that holds no ``run_*.json`` or a file that is not a run.
    """
    root = Path(path)
    if not root.is_dir():
        raise UsageError(f"--results `{root}` is not a directory")
    runs: dict[str, RecordedRun] = {}
    for file in _run_files(root):
        try:
            run = _decode_run(file.read_bytes())
        except OSError as exc:
            raise UsageError(f"cannot read `{file}`: {exc.strerror or exc}") from None
        except (msgspec.DecodeError, RecursionError) as exc:
            raise UsageError(f"`{file}` is not an evaluate_agent run file: {exc}") from None
        passed: dict[int, bool] = {}
        for position, entry in enumerate(run.assertions):
            index = entry.get("index", position)
            if isinstance(index, int) and isinstance(entry.get("passed"), bool):
                passed[index] = entry["passed"]
        scenario = run.scenario_slug or file.parent.name
        other = runs.get(run.conversation_id)
        if other is not None and other.scenario != scenario:
            raise UsageError(
                f"conversation `{run.conversation_id}` is a run of two scenarios "
                f"(`{other.path}` and `{file}`)"
            )
        runs[run.conversation_id] = RecordedRun(
            str(file), run.conversation_id, scenario, run.run_index, passed
        )
    if not runs:
        raise UsageError(
            f"--results `{root}` holds no run_*.json files (expected "
            "<timestamp>/<scenario>/run_<N>.json as evaluate_agent writes them)"
        )
    return runs


def compare(
    result: ConversationResult, run: RecordedRun, checks: Sequence[Check] = ()
) -> list[RunDifference]:
    """Where our final verdicts differ from the run's recorded ones (passed/failed only);
    with the scenario's ``checks``, each names the divergences it can come from."""
    out = []
    for a in result.assertions:
        recorded = run.passed.get(a.index)
        if recorded is None or a.verdict not in ("passed", "failed"):
            continue
        if (a.verdict == "passed") != recorded:
            why = divergences(checks[a.index], a.verdict) if a.index < len(checks) else []
            out.append(
                RunDifference(a.index, a.kind, a.verdict, "passed" if recorded else "failed", why)
            )
    return out
