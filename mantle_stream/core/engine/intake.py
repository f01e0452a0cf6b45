"""Intake: bytes to events for the evaluator, and the irregular lines and chunks.

The usual chunk (one JSON event per line, each with one payload field set)
is decoded at once (:meth:`Intake.push_chunk`) and applied by the
evaluator's hot loop without coming back here. Everything else comes here:
a chunk with blank lines or a value over several lines (decoded line by
line), a line without exactly one payload field (a flat event, a newer
engine's kind, a bad event: :meth:`Intake.irregular`), and bad events, named
by their source and line (:meth:`Intake.locate`), raised or reported and
counted (:meth:`Intake.bad_event`). It counts the lines read and knows which
lines are this worker's (a :class:`~.partition.Partition`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import msgspec

from mantle_stream.core.engine.conversation import Irregular, LineFinder
from mantle_stream.core.engine.notes import Notes
from mantle_stream.core.engine.partition import Partition
from mantle_stream.core.errors import EventError
from mantle_stream.core.events.decode import MAX_LINE_BYTES, EventDecoder
from mantle_stream.core.events.model import (
    PAYLOAD_FIELDS,
    UNKNOWN,
    Event,
    MemorySet,
    Payload,
    ToolExecuted,
    count_lines,
    excerpt,
    parse_json_value,
    payload_of,
)
from mantle_stream.core.verdicts import Decision, Tally

__all__ = ["PLAIN", "Context", "Intake", "value_error"]


class Context(msgspec.Struct, frozen=True, gc=False):
    """What a call of the evaluator's hot loop rarely needs, as one record.

    ``chunk`` holds the events' lines, one each, from line ``first``;
    ``events[i]`` is line ``offset + i`` (with ``where``, the chunk's events
    were one worker's share: line ``where[offset + i]``). ``known``: the
    payload of the one event given, found when it arrived (a held event,
    applied later without its line). ``owner``: the connection the events
    came on. ``stop_at_failure``: stop after the first event that fails an
    assertion (``--fail-fast``). A struct, not a class: made for every line
    pushed on its own, its construction costs a tenth of a Python ``__init__``'s.
    """

    stop_at_failure: bool = False
    chunk: bytes | None = None
    first: int = 1
    offset: int = 0
    known: Payload | None = None
    owner: object = None
    where: list[int] | None = None


#: The context of events pushed as they are: no chunk, no owner.
PLAIN = Context()


class Intake:
    """Decodes what the evaluator is given and names the bad events in it."""

    __slots__ = ("decoder", "line", "notes", "partition", "run", "source", "tally")

    def __init__(
        self,
        source: str,
        tally: Tally,
        notes: Notes,
        partition: Partition | None,
        run: Callable[[list[Event], list[Decision], Context], None],
    ) -> None:
        self.decoder = EventDecoder(source)
        self.run = run  # the evaluator's hot loop: applies decoded events
        self.tally = tally
        self.notes = notes
        # One worker of `check --workers`: only its conversations are applied.
        self.partition = partition
        self.line = 0  # lines read so far
        self.source: str | None = None  # where the chunk being pushed came from

    def push_one(
        self,
        line: bytes,
        line_no: int,
        out: list[Decision],
        stop_at_failure: bool = False,
        owner: object = None,
    ) -> None:
        """Decode and apply one line on its own (exact line numbers in errors)."""
        if self.partition is not None and not self.partition.keeps_line(line):
            return
        try:
            event = self.decoder.decode_raw(line, line_no)
        except EventError as exc:
            raise self.locate(exc, line_no, line) from None
        if event is None:
            return
        context = Context(stop_at_failure=stop_at_failure, chunk=line, first=line_no, owner=owner)
        try:
            self.run([event], out, context)
        except Irregular as irregular:
            raise self.locate(irregular.error, line_no, line) from None

    def push_chunk(
        self,
        chunk: bytes,
        stop_at_failure: bool,
        on_bad: Callable[[EventError], object] | None,
        first_line: int | None,
        source: str | None,
        owner: object,
    ) -> list[Decision]:
        """``Evaluator.push_chunk``: decoded at once when it holds one value per line,
        else line by line; a bad event raised or reported (``on_bad``)."""
        first = self.line + 1 if first_line is None else first_line
        self.source = source
        lines = count_lines(chunk) + (0 if chunk.endswith(b"\n") or not chunk else 1)
        self.line += lines
        events: list[Event] | None = None
        if len(chunk) <= MAX_LINE_BYTES:  # else the slow path checks each line's length
            # A bad line somewhere: the slow path finds it and names it.
            with contextlib.suppress(msgspec.DecodeError, RecursionError):
                events = self.decoder.decode_lines(chunk)
            if events is not None and len(events) != lines:
                # Blank lines, or two JSON values on one line: only the line by
                # line path can tell which event came from which line, and it
                # rejects a line holding two values.
                events = None
        out: list[Decision] = []
        if events is None:
            for offset, line in enumerate(chunk.split(b"\n")):
                try:
                    self.push_one(line, first + offset, out, stop_at_failure, owner)
                except EventError as exc:
                    self.bad_event(exc, on_bad, out)
                if stop_at_failure and _failed_now(out):
                    break
            return out
        where: list[int] | None = None  # each event's line, when some are another worker's
        if self.partition is not None:
            events, where = self.partition.select(events, LineFinder(chunk).line)
        context = Context(
            stop_at_failure=stop_at_failure, chunk=chunk, first=first, owner=owner, where=where
        )
        split: list[bytes] | None = None
        while True:
            try:
                self.run(events[context.offset :] if context.offset else events, out, context)
                return out
            except Irregular as irregular:
                position = context.offset + irregular.position
                at = position if where is None else where[position]
                if split is None:
                    split = chunk.split(b"\n")
                self.bad_event(self.locate(irregular.error, first + at, split[at]), on_bad, out)
                context = msgspec.structs.replace(context, offset=position + 1)
                if stop_at_failure and _failed_now(out):
                    return out

    def bad_event(
        self, error: EventError, on_bad: Callable[[EventError], object] | None, out: list[Decision]
    ) -> None:
        """A bad event: raised (with the decisions made before it), or reported to
        ``on_bad`` and counted."""
        if on_bad is None:
            error.decisions = out  # made by the events before it: not to be lost
            raise error
        self.tally.bad_events += 1
        on_bad(error)

    def locate(self, exc: EventError, line_no: int, line: bytes) -> EventError:
        """``exc`` named by the source and line it came from."""
        source = self.source or self.decoder.source
        if exc.line is not None and exc.source == source:
            return exc
        return EventError(
            exc.message,
            source=source,
            line=exc.line if exc.line is not None else line_no,
            excerpt=exc.excerpt or excerpt(line),
        )

    def irregular(
        self,
        event: Event,
        known: Payload | None,
        lines: LineFinder | None,
        index: int,
        line_no: int,
        position: int,
    ) -> tuple[Event, Payload]:
        """An event without exactly one payload field set, made sense of from its line.

        ``known``: its payload, found when it first arrived (a held event); a
        newer engine's kind learnt as a field is counted; anything else is
        decoded again from line ``index`` of the chunk (``lines``), which
        raises :class:`Irregular` for a bad event. Without a chunk (an
        :class:`Event` pushed as it is) the event is checked as it stands.
        """
        if known is not None:
            return event, known  # (noted when it first arrived)
        decoder = self.decoder
        # (A flat row, the tracker endpoint's shape, is decoded again as one: whether
        # payload fields are set is not asked of it.)
        unset = event.event is None and all(getattr(event, n) is None for n in PAYLOAD_FIELDS)
        if unset and decoder.learned_kind(event):
            payload: Payload = UNKNOWN  # a newer kind, decoded as a field of its own
        else:
            try:
                if lines is None:
                    payload_of(event)  # raises: pushed as an Event
                    raise AssertionError("an event without exactly one payload")
                event, payload = decoder.classify(event, lines.line(index), line_no, unset)
            except EventError as exc:
                raise Irregular(exc, position) from None
        if payload is UNKNOWN:
            self.notes.note("unknown_kinds", event.conversation_id, event.sequence)
        return event, payload


def _failed_now(out: list[Decision]) -> bool:
    return any(d.verdict == "failed" for d in out)


def value_error(payload: Payload) -> EventError:
    """Why the JSON-in-a-string of a payload did not parse (the hot loop's slow path)."""
    try:
        _value_of(payload)
    except EventError as exc:
        return exc
    raise AssertionError(f"the value of {payload!r} parses")


def _value_of(payload: Payload) -> Any:
    """The parsed JSON-in-a-string of a memory write or a tool run."""
    if type(payload) is MemorySet:
        return parse_json_value(payload.value_json, "`memory_set.value_json`")
    tool: ToolExecuted = payload  # type: ignore[assignment]
    value = parse_json_value(
        tool.arguments_json or "{}",  # None or "": no arguments
        "`tool_executed.arguments_json`",
    )
    if type(value) is not dict:
        raise EventError(
            f"`tool_executed.arguments_json` must hold a JSON object, got {type(value).__name__}"
        )
    return value
