"""mantle_stream: judge Mantle scenario assertions while the conversation runs.

The public API::

    import mantle_stream as ms

    scenarios = ms.load_scenarios(["eval/scenarios/"])
    runs = ms.load_results("eval/results/2026-12-01T09-00-00")  # which scenario each ran
    evaluator = ms.Evaluator(scenarios,
                             assignments={cid: run.scenario for cid, run in runs.items()})
    for line in feed:
        for decision in evaluator.push_line(line):
            print(decision.conversation_id, decision.index, decision.verdict, decision.reason)
    evaluator.finish_all()
    report = ms.build_report(evaluator, runs)
"""

import importlib
from typing import TYPE_CHECKING, Any

from mantle_stream._defaults import VERSION

if TYPE_CHECKING:  # the names, for type checkers; at run time each loads on first use
    from mantle_stream._diagnostics import Diagnostic
    from mantle_stream._engine import ConversationState, Evaluator, UnmatchedConversation
    from mantle_stream._errors import (
        EventError,
        FeedError,
        MantleStreamError,
        ScenarioError,
        UsageError,
    )
    from mantle_stream._events import Event, EventDecoder
    from mantle_stream._report import Report, build_report, exit_status
    from mantle_stream._results import RecordedRun, load_results
    from mantle_stream._run import Runner, RunOutcome, StopMessage, run_feed
    from mantle_stream._scenario import (
        Scenario,
        load_scenario_file,
        load_scenario_text,
        load_scenarios,
    )
    from mantle_stream._verdicts import (
        AssertionResult,
        ConversationResult,
        Decision,
        Statistics,
        Verdict,
    )

#: Where each public name lives: loaded on first use (PEP 562), so that the
#: command line answers ``--help`` without loading the engine.
_LAZY = {
    "AssertionResult": "mantle_stream._verdicts",
    "ConversationResult": "mantle_stream._verdicts",
    "ConversationState": "mantle_stream._engine",
    "Decision": "mantle_stream._verdicts",
    "Diagnostic": "mantle_stream._diagnostics",
    "Evaluator": "mantle_stream._engine",
    "Event": "mantle_stream._events",
    "EventDecoder": "mantle_stream._events",
    "EventError": "mantle_stream._errors",
    "FeedError": "mantle_stream._errors",
    "MantleStreamError": "mantle_stream._errors",
    "RecordedRun": "mantle_stream._results",
    "Report": "mantle_stream._report",
    "RunOutcome": "mantle_stream._run",
    "Runner": "mantle_stream._run",
    "Scenario": "mantle_stream._scenario",
    "ScenarioError": "mantle_stream._errors",
    "Statistics": "mantle_stream._verdicts",
    "StopMessage": "mantle_stream._run",
    "UnmatchedConversation": "mantle_stream._engine",
    "UsageError": "mantle_stream._errors",
    "Verdict": "mantle_stream._verdicts",
    "build_report": "mantle_stream._report",
    "exit_status": "mantle_stream._report",
    "load_results": "mantle_stream._results",
    "load_scenario_file": "mantle_stream._scenario",
    "load_scenario_text": "mantle_stream._scenario",
    "load_scenarios": "mantle_stream._scenario",
    "run_feed": "mantle_stream._run",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mantle_stream' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__version__ = VERSION

__all__ = [
    "AssertionResult",
    "ConversationResult",
    "ConversationState",
    "Decision",
    "Diagnostic",
    "Evaluator",
    "Event",
    "EventDecoder",
    "EventError",
    "FeedError",
    "MantleStreamError",
    "RecordedRun",
    "Report",
    "RunOutcome",
    "Runner",
    "Scenario",
    "ScenarioError",
    "Statistics",
    "StopMessage",
    "UnmatchedConversation",
    "UsageError",
    "Verdict",
    "__version__",
    "build_report",
    "exit_status",
    "load_results",
    "load_scenario_file",
    "load_scenario_text",
    "load_scenarios",
    "run_feed",
]
