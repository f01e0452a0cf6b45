"""mantle_stream: judge Mantle scenario assertions while the conversation runs.

The public API::

    import mantle_stream as ms

    scenarios = ms.load_scenarios(["eval/scenarios/"])
    runs = ms.load_results("eval/results/2026-12-01T09-00-00")  # which scenario each ran
    evaluator = ms.Evaluator(scenarios,
                             assignments={cid: run.scenario for cid, run in runs.items()})
    for line in feed:  # or: for event in ms.decode_events(data): evaluator.push(event)
        for decision in evaluator.push_line(line):
            print(decision.conversation_id, decision.index, decision.verdict, decision.reason)
    evaluator.finish_all()
    report = ms.build_report(evaluator, runs)
"""

import importlib
from typing import TYPE_CHECKING, Any

from mantle_stream.core.defaults import VERSION

if TYPE_CHECKING:  # the names, for type checkers; at run time each loads on first use
    from mantle_stream.core.engine.evaluator import (
        ConversationState,
        Evaluator,
        UnmatchedConversation,
    )
    from mantle_stream.core.errors import (
        EventError,
        FeedError,
        MantleStreamError,
        ScenarioError,
        UsageError,
    )
    from mantle_stream.core.events.decode import decode_events
    from mantle_stream.core.events.model import (
        Bot,
        Event,
        MemoryCleared,
        MemorySet,
        OrderedBlockCancelled,
        OrderedBlockCompleted,
        OrderedBlockEntered,
        OrderedBlockInterrupted,
        OrderedBlockResumed,
        Payload,
        SessionEnded,
        SessionStarted,
        SkillActivated,
        SkillCancelled,
        SkillCompleted,
        SkillInterrupted,
        SkillResumed,
        ToolExecuted,
        User,
    )
    from mantle_stream.core.recorded import RecordedRun, load_results
    from mantle_stream.core.scenario.diagnostics import Diagnostic
    from mantle_stream.core.scenario.load import (
        load_scenario_file,
        load_scenario_text,
        load_scenarios,
    )
    from mantle_stream.core.scenario.model import Scenario
    from mantle_stream.core.verdicts import (
        AssertionResult,
        CandidateVerdict,
        ConversationResult,
        Decision,
        DecisionRecord,
        Statistics,
        StopMessage,
        Verdict,
        VerdictRecord,
    )
    from mantle_stream.feeds import Chunk, Feed, open_feed
    from mantle_stream.outputs.report import Report, build_report
    from mantle_stream.outputs.sink import Sink
    from mantle_stream.runner import Runner, RunOutcome, run_feed

#: Where each public name lives: loaded on first use (PEP 562), so that the
#: command line answers ``--help`` without loading the engine.
_LAZY = {
    "AssertionResult": "mantle_stream.core.verdicts",
    "CandidateVerdict": "mantle_stream.core.verdicts",
    "Chunk": "mantle_stream.feeds",
    "ConversationResult": "mantle_stream.core.verdicts",
    "ConversationState": "mantle_stream.core.engine.evaluator",
    "Decision": "mantle_stream.core.verdicts",
    "DecisionRecord": "mantle_stream.core.verdicts",
    "Diagnostic": "mantle_stream.core.scenario.diagnostics",
    "Evaluator": "mantle_stream.core.engine.evaluator",
    "Event": "mantle_stream.core.events.model",
    "Bot": "mantle_stream.core.events.model",
    "MemoryCleared": "mantle_stream.core.events.model",
    "MemorySet": "mantle_stream.core.events.model",
    "OrderedBlockCancelled": "mantle_stream.core.events.model",
    "OrderedBlockCompleted": "mantle_stream.core.events.model",
    "OrderedBlockEntered": "mantle_stream.core.events.model",
    "OrderedBlockInterrupted": "mantle_stream.core.events.model",
    "OrderedBlockResumed": "mantle_stream.core.events.model",
    "Payload": "mantle_stream.core.events.model",
    "SessionEnded": "mantle_stream.core.events.model",
    "SessionStarted": "mantle_stream.core.events.model",
    "SkillActivated": "mantle_stream.core.events.model",
    "SkillCancelled": "mantle_stream.core.events.model",
    "SkillCompleted": "mantle_stream.core.events.model",
    "SkillInterrupted": "mantle_stream.core.events.model",
    "SkillResumed": "mantle_stream.core.events.model",
    "ToolExecuted": "mantle_stream.core.events.model",
    "User": "mantle_stream.core.events.model",
    "decode_events": "mantle_stream.core.events.decode",
    "EventError": "mantle_stream.core.errors",
    "Feed": "mantle_stream.feeds",
    "FeedError": "mantle_stream.core.errors",
    "MantleStreamError": "mantle_stream.core.errors",
    "RecordedRun": "mantle_stream.core.recorded",
    "Report": "mantle_stream.outputs.report",
    "RunOutcome": "mantle_stream.runner",
    "Runner": "mantle_stream.runner",
    "Scenario": "mantle_stream.core.scenario.model",
    "ScenarioError": "mantle_stream.core.errors",
    "Sink": "mantle_stream.outputs.sink",
    "Statistics": "mantle_stream.core.verdicts",
    "StopMessage": "mantle_stream.core.verdicts",
    "UnmatchedConversation": "mantle_stream.core.engine.evaluator",
    "UsageError": "mantle_stream.core.errors",
    "Verdict": "mantle_stream.core.verdicts",
    "VerdictRecord": "mantle_stream.core.verdicts",
    "build_report": "mantle_stream.outputs.report",
    "load_results": "mantle_stream.core.recorded",
    "load_scenario_file": "mantle_stream.core.scenario.load",
    "load_scenario_text": "mantle_stream.core.scenario.load",
    "load_scenarios": "mantle_stream.core.scenario.load",
    "open_feed": "mantle_stream.feeds",
    "run_feed": "mantle_stream.runner",
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
    "Bot",
    "CandidateVerdict",
    "Chunk",
    "ConversationResult",
    "ConversationState",
    "Decision",
    "DecisionRecord",
    "Diagnostic",
    "Evaluator",
    "Event",
    "EventError",
    "Feed",
    "FeedError",
    "MantleStreamError",
    "MemoryCleared",
    "MemorySet",
    "OrderedBlockCancelled",
    "OrderedBlockCompleted",
    "OrderedBlockEntered",
    "OrderedBlockInterrupted",
    "OrderedBlockResumed",
    "Payload",
    "RecordedRun",
    "Report",
    "RunOutcome",
    "Runner",
    "Scenario",
    "ScenarioError",
    "SessionEnded",
    "SessionStarted",
    "Sink",
    "SkillActivated",
    "SkillCancelled",
    "SkillCompleted",
    "SkillInterrupted",
    "SkillResumed",
    "Statistics",
    "StopMessage",
    "ToolExecuted",
    "UnmatchedConversation",
    "UsageError",
    "User",
    "Verdict",
    "VerdictRecord",
    "__version__",
    "build_report",
    "decode_events",
    "load_results",
    "load_scenario_file",
    "load_scenario_text",
    "load_scenarios",
    "open_feed",
    "run_feed",
]
