"""The registry of assertion kinds: one :class:`~.base.AssertionKind` row each.

The scenario loader validates a check with its row, the compiler compiles it
with its row, ``sequencing`` asks each row whether its kind can be a step.
Adding a kind is a family module with a ``KINDS`` tuple, and its rows here
(:func:`register` adds one at run time, as a test's toy kind does).
"""

from __future__ import annotations

from mantle_stream.core.assertions import bot, lifecycle, memory, sequencing, tools
from mantle_stream.core.assertions.base import AssertionKind

__all__ = ["KINDS", "register", "unregister"]

#: Every kind by its name in scenario files, in the reference's order.
KINDS: dict[str, AssertionKind] = {}


def register(*kinds: AssertionKind) -> None:
    """Add kinds; a name registered twice is a programming error."""
    for kind in kinds:
        if kind.name in KINDS:
            raise ValueError(f"assertion kind `{kind.name}` is registered already")
        if (kind.step is None) != (kind.matcher is None):
            raise ValueError(f"`{kind.name}`: a step needs both `step` and `matcher`")
        KINDS[kind.name] = kind


def unregister(name: str) -> None:
    """Remove a kind added with :func:`register` (loaded scenarios keep their specs)."""
    del KINDS[name]


register(*lifecycle.KINDS, *memory.KINDS, *tools.KINDS, *bot.KINDS, *sequencing.KINDS)
