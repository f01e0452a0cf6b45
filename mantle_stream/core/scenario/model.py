"""A loaded scenario: its name, its context, its assertions' specs, its expected tools.

Every assertion is a frozen :class:`Check` struct of its family (see
:mod:`mantle_stream.core.assertions`); :mod:`.load` builds them from a
scenario file, and the compiler turns them into machines. ``goals.expected_tools``
entries (Rasa's tool-call scoring, not assertions: see
:mod:`mantle_stream.core.assertions.expected_tools`) are :class:`ToolCalled` and
:class:`ToolGroup` records.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import msgspec

__all__ = [
    "Assertion",
    "Check",
    "ExpectedTool",
    "ExpectedToolsEntry",
    "Scenario",
    "ToolCalled",
    "ToolGroup",
]


class Check(msgspec.Struct, frozen=True):
    """Base of every assertion's spec; ``kind`` is its name in a scenario file."""

    if TYPE_CHECKING:  # a field of some specs, a class constant of others

        @property
        def kind(self) -> str: ...


#: An assertion of a scenario: a spec of one of the registered kinds.
Assertion = Check


class ExpectedTool(msgspec.Struct, frozen=True):
    """One expected tool call of ``expected_tools``: a name and, optionally, the
    arguments that must equal the call's (the others are not looked at)."""

    tool_name: str
    arguments: dict[str, Any] | None = None


class ToolCalled(msgspec.Struct, frozen=True):
    """A standalone ``tool_called`` entry: the tool must run somewhere in the conversation."""

    tool: ExpectedTool
    gate: bool = False  # fails the run when it fails (with --tool-calls)

    kind: ClassVar[str] = "tool_called"


class ToolGroup(msgspec.Struct, frozen=True):
    """A ``tool_group`` entry: these tools, and no other, in one user turn."""

    tools: tuple[ExpectedTool, ...]
    ordered: bool = False
    gate: bool = False

    kind: ClassVar[str] = "tool_group"


#: An entry of ``goals.expected_tools``.
ExpectedToolsEntry = ToolCalled | ToolGroup


class Scenario(msgspec.Struct, frozen=True):
    """A loaded, valid scenario file."""

    name: str
    simulation_context: str
    assertions: tuple[Check, ...] = ()
    type: str | None = None
    initial_slots: dict[str, Any] = {}
    criteria: tuple[str, ...] = ()
    path: str = "<string>"
    lines: tuple[int, ...] = ()  # 1-based line of each assertion, for reports
    expected_tools: tuple[ExpectedToolsEntry, ...] = ()
    expected_tools_lines: tuple[int, ...] = ()  # 1-based line of each entry

    @property
    def stem(self) -> str:
        """The file name without extension: a second name a feed may use."""
        name = self.path.rstrip("/").rsplit("/", 1)[-1]
        dot = name.rfind(".")
        return name[:dot] if 0 < dot < len(name) - 1 else name
