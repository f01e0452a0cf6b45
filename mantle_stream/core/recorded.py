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
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec

from mantle_stream.core.errors import UsageError
from mantle_stream.core.verdicts import ConversationResult

__all__ = ["RecordedRun", "RunDifference", "compare", "load_results"]


class RecordedRun(msgspec.Struct, frozen=True):
    """One ``run_N.json``: the conversation, its scenario, Rasa's verdict per assertion."""

    path: str
    conversation_id: str
    scenario: str
    run_index: int | None
    passed: dict[int, bool]  # assertion index -> Rasa's recorded result


class RunDifference(msgspec.Struct, frozen=True):
    """An assertion whose verdict differs from the one ``evaluate_agent`` recorded."""

    index: int
    kind: str
    verdict: str
    recorded: str


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


def compare(result: ConversationResult, run: RecordedRun) -> list[RunDifference]:
    """Where our final verdicts differ from the run's recorded ones (passed/failed only)."""
    out = []
    for a in result.assertions:
        recorded = run.passed.get(a.index)
        if recorded is None or a.verdict not in ("passed", "failed"):
            continue
        if (a.verdict == "passed") != recorded:
            out.append(
                RunDifference(a.index, a.kind, a.verdict, "passed" if recorded else "failed")
            )
    return out
