"""The JSON report's records (docs/outputs.md, "JSON report"): what each field means.

An edge module: :mod:`.report` builds these from an evaluator's snapshots,
:mod:`.notes` puts them in words, and every output (table, JUnit, HTML,
GitHub, the gate's and a Kafka member's parts) reads them. Field names here
are a published contract: add, never rename.
"""

from __future__ import annotations

import msgspec

from mantle_stream.core.engine.evaluator import UnmatchedConversation
from mantle_stream.core.recorded import RunDifference
from mantle_stream.core.verdicts import (
    COUNTED,
    CandidateVerdict,
    Occurrence,
    ToolCallScores,
    Verdict,
    VerdictRecord,
)

__all__ = [
    "WARNING_COUNTS",
    "AmbiguousRun",
    "ExpectedToolsSummary",
    "GateReport",
    "GateScenario",
    "GroupReport",
    "Recorded",
    "Report",
    "ReportConversation",
    "ScenarioAssertion",
    "ScenarioResult",
    "ScenarioToolEntry",
    "Summary",
    "Warnings",
]


class Recorded(msgspec.Struct, frozen=True):
    """What ``evaluate_agent`` recorded for this run (with ``--results``)."""

    file: str
    run_index: int | None
    differences: list[RunDifference]  # assertions whose recorded verdict differs from ours


class ReportConversation(msgspec.Struct, frozen=True, omit_defaults=True):
    conversation_id: str
    scenario: str | None
    verdict: Verdict
    events: int
    assertions: list[VerdictRecord]
    recorded: Recorded | None = None
    # From the events' timestamps: when it started (epoch seconds) and how long it ran.
    started: float | None = None
    duration: float | None = None
    # The sequence of each turn's user message: where its turns begin.
    turn_starts: list[int] = []
    # Its scenario's goals.expected_tools, scored as Rasa scores them (absent when none).
    expected_tools: ToolCallScores | None = None
    # A stop was sent for it (ConversationResult.stopped): absent when not.
    stopped_early: bool = False


class Summary(msgspec.Struct, frozen=True, omit_defaults=True):
    conversations: int
    passed: int
    failed: int
    assertions: int
    unmatched: int
    # False (and shown) only when the run stopped before its end (--fail-fast,
    # a bad event, Ctrl-C): then verdicts not yet decided are "pending".
    complete: bool = True
    # Assertions left unjudged because mantle_stream stopped their conversation.
    skipped: int = 0
    # Assertions that could not be evaluated (a regular expression out of time).
    errored: int = 0
    # With --results: assertions whose verdict differs from evaluate_agent's record.
    recorded_differences: int = 0
    # Finished conversations counted above but not listed (a live run keeps the most
    # recent ones only: see --keep-finished); --jsonl and --junit have every verdict.
    omitted: int = 0


class Warnings(msgspec.Struct, frozen=True, omit_defaults=True):
    """What the feed (or the scenarios) did wrong but did not stop the run.

    Only non-zero counts are present. Every one is also a line of the human
    summaries (:func:`notes`).
    """

    bad_events: int = 0  # skipped with --on-bad-event=skip
    duplicates: int = 0  # delivered again (or too late) and skipped
    gaps: int = 0  # missing sequences given up on after the reorder window
    late_events: int = 0  # arrived after their conversation ended, or after a given-up gap
    unknown_kinds: dict[str, int] = {}  # payload kinds this version does not know
    legacy_rows: dict[str, int] = {}  # older flat CALM rows (slot, flow_started, ...) skipped
    scenarios_without_assertions: list[str] = []  # they pass every conversation
    refused_clients: dict[str, int] = {}  # the listener turned them away, by reason
    foreign_events: int = 0  # sent for a conversation another connection owns: refused
    # Conversations that named no scenario within MAX_UNNAMED_BUFFER events or bytes.
    unnamed_given_up: int = 0
    # Conversations asked for by id that the source could not give (a Rasa server
    # that kept failing, or answered another's tracker), with why: not judged.
    unread: dict[str, str] = {}
    # What the source said about how it was read (a lock waited for, a database
    # replaced, rows it could not read), one line each.
    source: list[str] = []
    # Where each gap, late, duplicate, foreign and unknown event counted above was: its
    # conversation and sequence (the first MAX_OCCURRENCES of each warning).
    occurrences: list[Occurrence] = []
    # Missing sequences passed at once, not waited for: the source delivers each
    # conversation in order, so they were never sent (Rasa numbers events it does
    # not publish, such as the `slot` events of a scenario's initial slots).
    gaps_passed: int = 0
    # Events at a sequence already applied with another event_id (Rasa's SQL tracker
    # store renumbers in some session-restart paths): applied after the first; each
    # occurrence names both ids (`event_id`, `applied_event_id`).
    sequence_conflicts: int = 0


#: The warnings that are an evaluator's counters: each Warnings field named as a Tally
#: counter (and so as its Statistics field).
WARNING_COUNTS: tuple[str, ...] = tuple(n for n in Warnings.__struct_fields__ if n in COUNTED)


class ScenarioAssertion(msgspec.Struct, frozen=True):
    """One assertion of a scenario across its runs.

    ``verdict``: ``passed`` in every run that judged it, ``failed`` in every
    one, ``flaky`` when it passed in some and failed in others (``failed`` of
    ``judged`` runs), ``errored`` when it could only error, ``not judged``
    when no run got to it (pending or skipped everywhere).
    """

    index: int
    kind: str
    verdict: str
    judged: int  # runs where it passed or failed
    failed: int
    errored: int = 0
    skipped: int = 0
    file: str | None = None
    line: int | None = None


class ScenarioToolEntry(msgspec.Struct, frozen=True):
    """One ``expected_tools`` entry of a scenario across its runs: ``verdict`` as for
    an assertion (``passed``, ``failed``, ``flaky``, ``not judged``), and the mean of
    its recall and precision over the runs that have them (None when none does)."""

    scenario: str
    index: int
    kind: str
    gate: bool
    verdict: str
    judged: int  # runs where it passed or failed
    failed: int
    recall: float | None
    precision: float | None
    file: str | None = None
    line: int | None = None


class ScenarioResult(msgspec.Struct, frozen=True):
    """A scenario's runs: the conversations judged against it (``evaluate_agent``'s
    ``run_count``), as Mantle teams read them.

    A run is ``passed``, ``failed`` (an assertion failed), ``errored`` (none
    failed, one could not be evaluated: an error of the harness, not of the
    agent) or ``pending`` (not finished); ``stopped_early`` counts the runs
    mantle_stream stopped (they are also failed or passed). ``pass_rate`` is
    passed ÷ (passed + failed); over those ``k`` runs ``pass_hat_k`` says all
    passed (pass^k) and ``pass_at_k`` that at least one did (pass@k); all
    three are null when no run was judged.
    """

    scenario: str
    file: str | None
    runs: int
    passed: int
    failed: int
    errored: int
    pending: int
    stopped_early: int
    k: int
    pass_rate: float | None
    pass_hat_k: bool | None
    pass_at_k: bool | None
    assertions: list[ScenarioAssertion]


class GroupReport(msgspec.Struct, frozen=True):
    """A Kafka consumer group member's part (``kafka://`` sources): which group, which
    member this was, the group's members when it ended, the partitions it judged."""

    group: str
    topic: str
    member: str
    members: list[str]
    partitions: list[int]
    lag: int
    published: int  # verdict records sent to the verdicts topic
    restored: int  # conversations resumed from the state topic
    not_resumed: int = 0  # state records that did not decode or fit: judged afresh
    join_seconds: float | None = None  # from the start to its first partitions
    judge_seconds: float = 0.0  # from its first partitions to the last events applied


class AmbiguousRun(msgspec.Struct, frozen=True):
    """A run that ended with several candidate scenarios (or none): not counted as
    passed or failed; each candidate's verdict is given."""

    conversation_id: str
    candidates: list[CandidateVerdict]


class GateScenario(msgspec.Struct, frozen=True):
    scenario: str
    runs: int
    stopped: int
    turns_not_played: int  # webhook messages the gate answered instead of the agent


class GateReport(msgspec.Struct, frozen=True):
    """The gate's part of the report (``mantle-stream gate``): the runs it saw, stopped
    and the agent turns they did not play, in all and per scenario."""

    upstream: str
    runs: int
    stopped: int
    turns_not_played: int
    scenarios: list[GateScenario]
    ambiguous: list[AmbiguousRun] = []
    problems: list[str] = []  # runs whose judging failed: forwarded unchanged


class ExpectedToolsSummary(msgspec.Struct, frozen=True):
    """The ``expected_tools`` entries of the listed conversations, as one record.

    ``gated``: the run was asked to judge tool calls (``--tool-calls``): a
    ``gate: true`` entry that failed failed its conversation. ``recall``,
    ``precision``, ``accuracy``: the means of the conversations' means (as
    Rasa's report averages them), None when no conversation has the metric.
    """

    gated: bool
    conversations: int  # listed conversations whose scenario has entries
    entries: int
    passed: int
    failed: int
    gates_failed: int  # gate entries that failed (they fail the run only when gated)
    recall: float | None
    precision: float | None
    accuracy: float | None
    # Each entry of each scenario that has some, across the scenario's runs.
    scenarios: list[ScenarioToolEntry] = []


class Report(msgspec.Struct, frozen=True, omit_defaults=True):
    conversations: list[ReportConversation]
    summary: Summary
    unmatched: list[UnmatchedConversation] = []
    warnings: Warnings | None = None
    # Per scenario, its runs (the listed conversations judged against it).
    scenarios: list[ScenarioResult] = []
    kafka: GroupReport | None = None
    gate: GateReport | None = None
    # Rasa's tool-call scores of goals.expected_tools (absent when no scenario has any).
    expected_tools: ExpectedToolsSummary | None = None

    def to_json(self) -> bytes:
        return msgspec.json.format(msgspec.json.encode(self), indent=2)
