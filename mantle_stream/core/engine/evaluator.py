"""The engine: conversations, routing, verdicts. The embeddable library API.

Last stage of the pure core. An :class:`Evaluator` holds one compiled
:class:`~mantle_stream.core.assertions.compiler.Plan` per scenario and, per open
conversation, one machine per assertion. Each event is routed only to the
machines indexed under its payload type and key; a decision is reported the
moment a machine makes it and the machine is then dropped, so a decided
verdict never changes and costs nothing afterwards.

The evaluator keeps the public API and the end of a conversation; the rest is
done by collaborators it holds, each with its own state:
:class:`~.routing.Router` (the hot loop),
:class:`~.intake.Intake` (bytes to events, bad and irregular lines),
:class:`~.ordering.Ordering` (sequence order, the reorder window),
:class:`~.scenarios.ScenarioChoice` (which scenario judges a conversation),
:class:`~.settling.Settling` (decisions, the end of a conversation),
:class:`~.retention.Retention` (finished conversations kept or let go of) and
:class:`~.checkpoints.Checkpoints` (saving and restoring).

No I/O, no clock: feeds, the CLI and the live view drive it from the edges.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from mantle_stream.core.assertions.compiler import Plan, compile_scenario
from mantle_stream.core.defaults import DEFAULT_REGEX_TIMEOUT, DEFAULT_REORDER_WINDOW
from mantle_stream.core.engine.checkpoints import (
    Checkpoint,
    Checkpoints,
    ConversationState,
    Frozen,
)
from mantle_stream.core.engine.conversation import (
    MAX_UNNAMED_BUFFER,
    MAX_UNNAMED_BYTES,
    Conversation,
    Conversations,
    Irregular,
    ScenarioStatus,
    UnmatchedConversation,
    result_of,
)
from mantle_stream.core.engine.intake import PLAIN, Context, Intake
from mantle_stream.core.engine.notes import Notes
from mantle_stream.core.engine.ordering import Ordering
from mantle_stream.core.engine.partition import JudgedConversations, Partition
from mantle_stream.core.engine.retention import Retention
from mantle_stream.core.engine.routing import Router
from mantle_stream.core.engine.scenarios import Apart, ScenarioChoice
from mantle_stream.core.engine.settling import Settling
from mantle_stream.core.errors import EventError, UsageError
from mantle_stream.core.events.decode import EventDecoder
from mantle_stream.core.events.model import (
    Event,
    Payload,
    payload_of,
)
from mantle_stream.core.scenario.model import Scenario
from mantle_stream.core.verdicts import (
    CandidateVerdict,
    ConversationResult,
    Decision,
    Statistics,
    Tally,
)

__all__ = [
    "DEFAULT_REORDER_WINDOW",
    "MAX_UNNAMED_BUFFER",
    "MAX_UNNAMED_BYTES",
    "Checkpoint",
    "ConversationState",
    "Evaluator",
    "UnmatchedConversation",
]


class Evaluator:
    """Judges conversations against scenarios while their events arrive.

    >>> evaluator = Evaluator(load_scenarios(["scenarios/"]))   # doctest: +SKIP
    >>> for decision in evaluator.push_line(line): ...           # doctest: +SKIP
    >>> evaluator.finish_all(); evaluator.results()              # doctest: +SKIP

    Which scenario judges a conversation: the one ``assignments`` names for
    its id (an ``evaluate_agent`` results folder, see :mod:`mantle_stream.core.recorded`); else,
    with one scenario loaded, that one; else the scenario whose name or file
    stem is ``"scenario"`` in the envelope metadata of its events.

    ``keep_finished``: None keeps every finished conversation for
    :meth:`results`; N only the N most recent (see :mod:`~.retention`).
    ``ordered``: the source delivers each conversation's events in the order
    they were numbered, so a gap is passed at once (see :mod:`~.ordering`).
    ``partition``: one worker of ``check --workers``, which applies only its
    conversations.
    """

    def __init__(
        self,
        scenarios: Scenario | Iterable[Scenario],
        *,
        source: str = "<events>",
        reorder_window: int = DEFAULT_REORDER_WINDOW,
        assignments: Mapping[str, str] | None = None,
        regex_timeout: float = DEFAULT_REGEX_TIMEOUT,
        keep_finished: int | None = None,
        partition: Partition | None = None,
        ordered: bool = False,
    ) -> None:
        # The counters, each named as its Statistics field (see Tally), and where
        # their warnings' events were.
        self.tally = Tally()
        self._notes = notes = Notes()
        self._book = book = Conversations()
        self._frozen = frozen = Frozen()
        self._ordering = Ordering(
            self.tally, notes, frozen, self._apply, reorder_window=reorder_window, ordered=ordered
        )
        self._retention = Retention(book, keep_finished)
        # Called with each finished conversation as it is let go of, so a sink that
        # needs every conversation (JUnit) can write it out before it leaves memory.
        self.on_let_go: Callable[[ConversationResult | UnmatchedConversation], None] | None = None
        if isinstance(scenarios, Scenario):
            scenarios = [scenarios]
        plans = [compile_scenario(s, regex_timeout=regex_timeout) for s in scenarios]
        self._settling = Settling(self.tally)
        self._choice = ScenarioChoice(
            plans,
            assignments,
            book,
            self._settling,
            frozen,
            apply=self._apply,
            finish=self._finish,
            make_apart=self._make_apart,
        )
        self._apart_options = (source, regex_timeout)
        self._checkpoints = Checkpoints(
            plans, self._choice.by_name, book, self.tally, notes, self._retention.omitted, frozen
        )
        self._intake = Intake(source, self.tally, notes, partition, self._run)
        self._router = Router(
            book,
            self._intake,
            self._ordering,
            self._choice,
            self._settling,
            self._retention,
            notes,
            self._finish,
        )
        self._intake.run = self._router.run  # each line straight to the hot loop

    # The options of the collaborators that a caller may read, or set after construction
    # (the Runner sets ``ordered`` from its feed).

    @property
    def reorder_window(self) -> int:
        return self._ordering.reorder_window

    @property
    def ordered(self) -> bool:
        return self._ordering.ordered

    @ordered.setter
    def ordered(self, value: bool) -> None:
        # A source may learn it as it reads (a SQL table's ids, a Kafka partition's
        # records): the scenarios judged apart follow, whenever they were made.
        self._ordering.ordered = value
        for apart in self._choice.apart.values():
            apart.ordering.ordered = value

    @property
    def keep_finished(self) -> int | None:
        return self._retention.keep_finished

    @property
    def partition(self) -> Partition | None:
        return self._intake.partition

    def _make_apart(self, plan: Plan) -> Apart:
        """An evaluator for one candidate scenario: these options, that scenario."""
        source, regex_timeout = self._apart_options
        apart = Evaluator(
            plan.scenario,
            source=source,
            reorder_window=self.reorder_window,
            regex_timeout=regex_timeout,
            ordered=self.ordered,
        )
        return Apart(
            apart._book,
            apart._ordering,
            apart._apply,
            apart.finish,
            lambda cid, settled_by, skips: apart.stop(cid, settled_by, skip_pending=skips),
        )

    # ------------------------------------------------------------------ input

    @property
    def scenarios(self) -> list[Scenario]:
        return [p.scenario for p in self._choice.plans]

    def push(self, event: Event) -> list[Decision]:
        """Apply one parsed event; return the decisions it caused."""
        try:
            payload_of(event)  # exactly one payload and a conversation, or EventError
        except EventError as exc:
            raise EventError(exc.message, source=self._intake.decoder.source) from None
        out: list[Decision] = []
        try:
            self._run([event], out)
        except Irregular as irregular:
            raise irregular.error from None
        return out

    def push_line(self, line: bytes | str) -> list[Decision]:
        """Apply one JSON line (blank lines are ignored)."""
        intake = self._intake
        intake.source = None
        intake.line += 1  # counted, even when it is not text
        if isinstance(line, str):
            try:
                line = line.encode()
            except UnicodeEncodeError as exc:
                raise EventError(
                    f"not valid text ({exc.reason})", source=intake.decoder.source, line=intake.line
                ) from None
        out: list[Decision] = []
        intake.push_one(line.rstrip(b"\r\n"), intake.line, out)
        return out

    def push_chunk(
        self,
        chunk: bytes,
        *,
        stop_at_failure: bool = False,
        on_bad: Callable[[EventError], object] | None = None,
        first_line: int | None = None,
        source: str | None = None,
        owner: object = None,
    ) -> list[Decision]:
        """Apply a chunk of complete JSON lines (the fast path for files and sockets).

        The chunk must end at a line boundary; a trailing partial line is
        decoded as a line of its own. With ``stop_at_failure`` the events after
        the first one that fails an assertion are not applied (``--fail-fast``).
        A bad event raises :class:`EventError` (the events before it are
        applied); with ``on_bad`` it is reported there, skipped and counted, and
        the rest of the chunk is applied. ``first_line`` and ``source`` name
        where the chunk came from in error messages (a socket connection, say);
        by default lines are counted across every chunk pushed. ``owner``
        (a connection, say) owns the conversations it opens: its events for a
        conversation another owner holds are refused and counted
        (``foreign_events``) until that owner is released (:meth:`release_owner`).

        The fast path decodes the whole chunk at once and trusts it when it holds as
        many JSON values as lines. Where lines of several values make up for blank
        lines, or for a value spread over several lines (``{`` alone on a line), the
        count matches and those values are applied where line by line they would be
        bad events: a writer of one event per line never writes either (checking
        every line would cost a quarter of decoding).
        """
        return self._intake.push_chunk(chunk, stop_at_failure, on_bad, first_line, source, owner)

    def _apply(self, event: Event, payload: Payload, out: list[Decision]) -> None:
        """One event whose payload is known (held, or buffered until its scenario was
        named), applied now."""
        self._router.run([event], out, Context(known=payload))

    def release_held(self, conversation_id: str | None = None) -> list[Decision]:
        """Apply the events waiting in reorder windows, giving up on their gaps.

        One conversation's, or every conversation's. The runner calls this for
        a conversation whose gap has stayed open for ``--gap-timeout`` seconds.
        """
        out: list[Decision] = []
        if conversation_id is not None:
            conv = self._book.open.get(conversation_id)
            convs = [] if conv is None else [conv]
        else:
            convs = list(self._book.open.values())
        self._ordering.release_all(convs, out)
        return out

    def release_owner(self, owner: object) -> None:
        """``owner`` is gone: the next owner to send events for its conversations takes
        them over (a simulator that reconnects)."""
        for conv in self._book.open.values():
            if conv.owner is owner:
                conv.owner = None

    def holding(self) -> list[str]:
        """Conversations with events waiting for a missing earlier sequence."""
        return [cid for cid, conv in self._book.open.items() if conv.held]

    @property
    def lines_read(self) -> int:
        return self._intake.line

    @property
    def decoder(self) -> EventDecoder:
        return self._intake.decoder

    # ------------------------------------------------------------------ core

    def _run(self, events: list[Event], out: list[Decision], c: Context = PLAIN) -> None:
        """Apply events in order (the hot loop: :meth:`Router.run`)."""
        self._router.run(events, out, c)

    # ------------------------------------------------------------------ ending

    def stop(
        self,
        conversation_id: str,
        settled_by: Decision | None = None,
        *,
        skip_pending: bool = True,
    ) -> None:
        """Record that the conversation's simulator was told to stop it: it is
        *stopped early* (``ConversationResult.stopped``) in every output.

        Its assertions still pending when it ends never had their chance:
        they end ``skipped``, not failed or passed (see :meth:`finish`), with
        a reason naming ``settled_by`` (the decision the stop message named;
        by default the first failure, else the first decision). With
        ``skip_pending=False`` (a Kafka member, whose simulator may play on)
        they are judged on what comes.
        """
        conv = self._book.all.get(conversation_id)
        if conv is None:
            return
        if conv.naming == ScenarioStatus.CANDIDATES and not conv.finished:
            self._choice.stop_apart(conv, settled_by, skip_pending)
        else:
            self._settling.stop(conv, settled_by, skip_pending)

    def finish(self, conversation_id: str) -> list[Decision]:
        """End one conversation now: every pending assertion resolves."""
        conv = self._book.all.get(conversation_id)
        if conv is None:
            raise UsageError(f"unknown conversation `{conversation_id}`")
        out: list[Decision] = []
        self._finish(conv, out)
        return out

    def finish_all(self) -> list[Decision]:
        """End of input: finish every open conversation."""
        out: list[Decision] = []
        for conv in list(self._book.open.values()):
            self._finish(conv, out)
        return out

    def _finish(self, conv: Conversation, out: list[Decision]) -> None:
        """The conversation ended: every assertion still open is decided now."""
        if conv.finished:
            return
        if conv.held:  # the end of input: what is held is all there is
            self._ordering.release(conv, out, force=len(conv.held))
            if conv.finished:
                return
        # Finished: no longer open, queued for checkpoints and for being let go of.
        conv.finished = True
        conv.recent_ids = None  # only an open conversation needs them
        conv.applied_ids = []  # (nor these: what comes after the end is late, unread)
        self._book.open.pop(conv.cid, None)
        self._retention.finished(conv.cid)
        plan = conv.plan
        if plan is None:
            self._choice.ended_unjudged(conv)
        else:
            self._frozen.queue(conv.cid)
            self._settling.end(conv, plan, out)
        self._let_go()

    def _let_go(self) -> None:
        """The finished conversations beyond ``keep_finished`` leave (see Retention)."""
        for conv in self._retention.let_go():
            if self.on_let_go is not None:
                self.on_let_go(
                    result_of(conv) if conv.plan is not None else self._choice.unmatched_of(conv)
                )
            self._choice.let_candidates_go(conv)
            self._frozen.drop(conv.cid)

    # ------------------------------------------------------------------ reading

    def forget(self, conversation_id: str) -> None:
        """Let go of an open conversation judged elsewhere from now on, uncounted: a Kafka
        partition given to another member, which resumes it from its saved state."""
        book = self._book
        conv = book.open.pop(conversation_id, None)
        if conv is None:
            return
        del book.all[conversation_id]
        self.tally.held -= len(conv.held or ())
        if conv.plan is not None:
            book.judged -= 1
        self._choice.let_candidates_go(conv)

    def naming(self, conversation_id: str) -> str | None:
        """How far the conversation's scenario is known (a :class:`ScenarioStatus` value); None
        for a conversation not seen (or let go of)."""
        conv = self._book.all.get(conversation_id)
        return None if conv is None else conv.naming

    def is_open(self, conversation_id: str) -> bool:
        """True when the conversation has had events and has not ended yet."""
        return conversation_id in self._book.open

    def is_settled(self, conversation_id: str) -> bool:
        """True when the conversation's outcome can no longer change.

        That is when it has ended, when an assertion has failed, or when every
        assertion is decided: a simulator may stop the conversation early.
        """
        conv = self._book.all.get(conversation_id)
        if conv is None:
            return False
        if conv.finished or (conv.plan is not None and conv.pending == 0):
            return True
        return conv.failed

    def result(self, conversation_id: str) -> ConversationResult:
        conv = self._book.all.get(conversation_id)
        if conv is None or conv.plan is None:
            raise UsageError(f"no judged conversation `{conversation_id}`")
        return result_of(conv)

    def results(self) -> list[ConversationResult]:
        """A snapshot of every judged conversation, in order of first event."""
        return [result_of(c) for c in self._book.all.values() if c.plan is not None]

    def unmatched(self) -> list[UnmatchedConversation]:
        """Conversations judged against no scenario: they named none, or one not loaded,
        or several candidates are left."""
        return self._choice.unmatched()

    def judged(self) -> JudgedConversations:
        """What was judged, as data (what :func:`~mantle_stream.build_report` reads):
        a worker of ``check --workers`` hands it to the process that merges them."""
        decoder = self._intake.decoder
        return JudgedConversations(
            results=self.results(),
            unmatched=self.unmatched(),
            statistics=self.statistics(),
            omitted=self.omitted(),
            unknown_kinds=dict(decoder.unknown),
            legacy_rows=dict(decoder.legacy),
            occurrences=list(self._notes.occurrences),
        )

    def omitted(self) -> dict[str, int]:
        """Counters of the finished conversations let go of (``keep_finished``): how many,
        passed, failed, their assertions, skipped, errored, and unmatched ones."""
        return dict(self._retention.omitted)

    def open_conversations(self) -> dict[str, int]:
        """Conversations not yet ended, with the number of events each has had."""
        return {cid: conv.events for cid, conv in self._book.open.items()}

    def statistics(self) -> Statistics:
        omitted, book, decoder = self._retention.omitted, self._book, self._intake.decoder
        return Statistics(
            **self.tally.counted(),
            conversations=len(book.all) + omitted["conversations"] + omitted["unmatched"],
            open=len(book.open),
            unknown_kinds=sum(decoder.unknown.values()),
            unmatched=len(book.all) - book.judged + omitted["unmatched"],
            legacy_rows=sum(decoder.legacy.values()),
        )

    # ---------------------------------------------- scenario choice (ScenarioChoice)

    def assign(self, conversation_id: str, scenario: str) -> list[Decision]:
        """Name the scenario that judges a conversation, from outside its events (a
        results folder that appeared, the gate's choice from the run's setup).

        Before its first event, it is judged against ``scenario`` from the start; a
        conversation still waiting for its scenario (or judged apart by several
        candidates) has its buffered events applied now. One already judged (or given
        up on) keeps what it has. An unknown ``scenario`` makes it one that named a
        scenario not loaded.
        """
        return self._choice.assign(conversation_id, scenario)

    def consider(self, conversation_id: str, scenarios: Sequence[str]) -> None:
        """Give the candidates of a conversation whose scenario is not named, from outside
        its events (the gate, which saw its setup on the wire): used at its first real
        user message in place of those its events show. One candidate judges it; none
        leaves it unmatched. Too late once its candidates are decided."""
        self._choice.consider(conversation_id, scenarios)

    def failed_under_every_candidate(
        self, conversation_id: str
    ) -> tuple[ConversationResult, Decision] | None:
        """A conversation judged apart under several candidates that has failed under
        every one: its result under the first, with that result's first failure."""
        return self._choice.failed_under_every_candidate(conversation_id)

    def candidate_verdicts(self, conversation_id: str) -> list[CandidateVerdict]:
        """A conversation judged apart under several candidates: its verdict under each
        (empty for any other)."""
        return self._choice.candidate_verdicts(conversation_id)

    # ---------------------------------------------------- checkpoints (Checkpoints)

    def conversation_state(self, conversation_id: str) -> ConversationState:
        """The state of one judged conversation as plain data."""
        return self._checkpoints.conversation_state(conversation_id)

    def restore_conversation(self, state: ConversationState) -> None:
        """Re-open (or re-record, if finished) a conversation from its state.

        Events of it that arrive again are counted as replayed and skipped: a
        sequence it already applied, or one of the first ``unsequenced`` rows
        without a sequence. So a feed can be re-read from the start.
        """
        self._checkpoints.restore_conversation(state)

    def freeze_finished(self, limit: int) -> int:
        """Encode up to ``limit`` finished conversations for the next :meth:`checkpoint`;
        return how many are still waiting.

        A finished conversation never changes again, so it is encoded once. A
        live run calls this in slices between chunks before each checkpoint,
        so that encoding thousands of newly finished conversations never
        holds the event loop at once; :meth:`checkpoint` encodes what is left.
        """
        return self._checkpoints.freeze_finished(limit)

    def checkpoint(self) -> bytes:
        """Every judged conversation's state and the counters, as JSON bytes.

        Events held in a reorder window are not included: they were not
        applied, so re-reading the feed delivers them again.
        """
        return self._checkpoints.checkpoint()

    def restore(self, data: bytes) -> None:
        """Resume from :meth:`checkpoint` output (into a fresh evaluator, same scenarios)."""
        self._checkpoints.restore(data)
