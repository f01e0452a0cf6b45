"""Strict, typed value equality for memory values and tool arguments.

The reference compares values by JSON type as well as value: ``true`` is not
``"true"``, ``5`` is not ``"5"``, ``1`` is not ``true`` and ``5`` is not
``5.0``. Python's ``==`` says ``1 == True`` and ``5 == 5.0``, so it cannot be
used directly. Objects compare by keys and values in any order, lists element
by element.
"""

from __future__ import annotations

from typing import Any

__all__ = ["strict_equal"]


def strict_equal(a: Any, b: Any) -> bool:
    """True when ``a`` and ``b`` are the same JSON value with the same JSON types."""
    ta = type(a)
    if ta is not type(b):
        return False
    if ta is dict:
        if a.keys() != b.keys():
            return False
        return all(strict_equal(v, b[k]) for k, v in a.items())
    if ta is list:
        if len(a) != len(b):
            return False
        return all(strict_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)
