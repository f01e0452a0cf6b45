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

__version__ = "0.1.0"

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
