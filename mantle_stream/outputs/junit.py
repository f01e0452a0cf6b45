"""JUnit XML: one ``<testsuite>`` per conversation, one ``<testcase>`` per assertion.

The shape Jenkins, GitLab and GitHub test reporters read. Conversations a
long run lets go of are written as they go, and the file is moved into
place atomically at the end of the run (:class:`JunitWriter`, a
:class:`~mantle_stream.outputs.sink.Sink` whose ``on_end`` does that).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from typing import IO

from mantle_stream.core.engine.evaluator import UnmatchedConversation
from mantle_stream.core.errors import FeedError
from mantle_stream.core.verdicts import ConversationResult, Decision, StopMessage
from mantle_stream.outputs.atomic import atomic_file
from mantle_stream.outputs.report import Report, ReportConversation, report_conversation

__all__ = ["JunitWriter", "junit_xml"]


def _suite(conv: ReportConversation) -> ET.Element:
    """One conversation as a ``<testsuite>``: a case per assertion."""
    failures = sum(1 for a in conv.assertions if a.verdict == "failed")
    errors = sum(1 for a in conv.assertions if a.verdict == "errored")
    skipped = sum(1 for a in conv.assertions if a.verdict in ("pending", "skipped"))
    suite = ET.Element(
        "testsuite",
        name=conv.conversation_id,
        tests=str(len(conv.assertions)),
        failures=str(failures),
        errors=str(errors),
        skipped=str(skipped),
    )
    if conv.duration is not None and conv.started is not None:
        # How long the conversation ran, from its events' own timestamps.
        suite.set("time", f"{conv.duration:.3f}")
        suite.set(
            "timestamp", datetime.fromtimestamp(conv.started, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        )
    ET.SubElement(
        ET.SubElement(suite, "properties"), "property", name="scenario", value=conv.scenario or ""
    )
    for a in conv.assertions:
        case = ET.SubElement(
            suite,
            "testcase",
            name=f"#{a.index} {a.kind}",
            classname=conv.scenario or conv.conversation_id,
        )
        at = "end of conversation" if a.decided_at is None else f"sequence {a.decided_at}"
        if a.verdict == "failed":
            failure = ET.SubElement(case, "failure", message=a.reason, type=a.kind)
            failure.text = f"{a.reason}\n(decided at {at})"
        elif a.verdict == "pending":
            ET.SubElement(case, "skipped", message="still pending when the run ended")
        elif a.verdict == "skipped":
            ET.SubElement(case, "skipped", message=a.reason)
        elif a.verdict == "errored":  # could not be evaluated: not a failure
            ET.SubElement(
                case, "error", message=a.reason, type="errored"
            ).text = f"{a.reason}\n(at {at})"
        else:
            ET.SubElement(case, "system-out").text = f"{a.reason} (decided at {at})"
    return suite


def _unmatched_suite(u: UnmatchedConversation) -> ET.Element:
    # Not judged is not passed: an error a CI job shows, never a silent absence.
    suite = ET.Element(
        "testsuite", name=u.conversation_id, tests="1", failures="0", errors="1", skipped="0"
    )
    case = ET.SubElement(
        suite, "testcase", name="scenario", classname=u.scenario or u.conversation_id
    )
    why = (
        f"its scenario `{u.scenario}` is not loaded"
        if u.scenario
        else "no results file or metadata names its scenario"
    )
    if u.did_you_mean:
        why += f"; did you mean `{u.did_you_mean}`?"
    ET.SubElement(case, "error", message=f"not judged: {why}", type="unmatched")
    return suite


class JunitWriter:
    """JUnit XML, a ``<testsuite>`` per conversation, a ``<testcase>`` per assertion.

    Conversations a long-lived run lets go of (``keep_finished``) are written
    to a temporary file beside ``path`` as they leave memory (:meth:`add`, the
    engine's ``on_let_go``); at the end (:meth:`finish`, the sink's
    :meth:`on_end`) the ones still kept are added and the file is put
    together under its totals and moved into place atomically, so a reader
    never sees half a file and memory never holds more than one suite.
    """

    def __init__(self, path: str, *, name: str = "mantle-stream") -> None:
        self.path = path
        self.name = name
        self.tests = self.failures = self.errors = 0
        directory = os.path.dirname(os.path.abspath(path))
        try:
            fd, self._body_path = tempfile.mkstemp(
                prefix=f".{os.path.basename(path)}-", dir=directory
            )
        except OSError as exc:
            raise FeedError(f"cannot write `{path}`: {exc.strerror}") from None
        self._body: IO[bytes] | None = os.fdopen(fd, "w+b")

    def add(self, conversation: ConversationResult | UnmatchedConversation) -> None:
        """Write one finished conversation now (the engine's ``on_let_go``)."""
        if isinstance(conversation, UnmatchedConversation):
            self._write(_unmatched_suite(conversation))
        else:
            self._write(_suite(report_conversation(conversation)))

    def _write(self, suite: ET.Element) -> None:
        assert self._body is not None, "written after finish()"
        self.tests += int(suite.get("tests", "0"))
        self.failures += int(suite.get("failures", "0"))
        self.errors += int(suite.get("errors", "0"))
        ET.indent(suite, space="  ", level=1)
        try:
            self._body.write(b"  " + ET.tostring(suite, encoding="utf-8") + b"\n")
        except OSError as exc:
            raise FeedError(f"cannot write `{self.path}`: {exc.strerror}") from None

    def on_decisions(self, decisions: list[Decision]) -> None:
        """Suites are written whole: from conversations let go of, and at the end."""

    def on_stop(self, message: StopMessage) -> None:
        """A stopped conversation's pending assertions end skipped: written at the end."""

    def on_end(self, report: Report) -> None:
        self.finish(report)

    def finish(self, report: Report) -> None:
        """Add what the report still lists and move the whole file into place."""
        for conv in report.conversations:
            self._write(_suite(conv))
        for u in report.unmatched:
            self._write(_unmatched_suite(u))
        body = self._body
        assert body is not None
        root = ET.Element(
            "testsuites",
            name=self.name,
            tests=str(self.tests),
            failures=str(self.failures),
            errors=str(self.errors),
        )
        head = ET.tostring(root, encoding="utf-8", xml_declaration=True)
        opening = head[: head.rindex(b" />")] + b">\n"  # the empty element, opened
        try:
            body.flush()
            body.seek(0)
            with atomic_file(self.path) as out:
                out.write(opening)
                shutil.copyfileobj(body, out)
                out.write(b"</testsuites>\n")
        finally:
            self.close()

    def close(self) -> None:
        """Drop the temporary file (also when the run ends before :meth:`finish`)."""
        if self._body is not None:
            self._body.close()
            self._body = None
            with contextlib.suppress(OSError):
                os.unlink(self._body_path)


def junit_xml(report: Report, *, name: str = "mantle-stream") -> bytes:
    """The report as JUnit XML (the whole file in memory: for small reports and tests)."""
    root = ET.Element("testsuites", name=name)
    tests = failures = errors = 0
    for suite in [*map(_suite, report.conversations), *map(_unmatched_suite, report.unmatched)]:
        root.append(suite)
        tests += int(suite.get("tests", "0"))
        failures += int(suite.get("failures", "0"))
        errors += int(suite.get("errors", "0"))
    root.set("tests", str(tests))
    root.set("failures", str(failures))
    root.set("errors", str(errors))
    ET.indent(root)
    xml: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return xml + b"\n"
