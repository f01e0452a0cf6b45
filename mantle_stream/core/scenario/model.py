"""A loaded scenario: its name, its context and its assertions' specs.

Every assertion is a frozen :class:`Check` struct of its family (see
:mod:`mantle_stream.core.assertions`); :mod:`.load` builds them from a
scenario file, and the compiler turns them into machines.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import msgspec

__all__ = ["Assertion", "Check", "Scenario"]


class Check(msgspec.Struct, frozen=True):
    """Base of every assertion's spec; ``kind`` is its name in a scenario file."""

    if TYPE_CHECKING:  # a field of some specs, a class constant of others

        @property
        def kind(self) -> str: ...


#: An assertion of a scenario: a spec of one of the registered kinds.
Assertion = Check


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

    @property
    def stem(self) -> str:
        """The file name without extension: a second name a feed may use."""
        name = self.path.rstrip("/").rsplit("/", 1)[-1]
        dot = name.rfind(".")
        return name[:dot] if 0 < dot < len(name) - 1 else name
