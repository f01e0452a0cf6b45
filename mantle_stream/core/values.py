"""Typed value equality for memory values and tool arguments.

The reference compares values by JSON type as well as value: ``true`` is not
``"true"`` and ``5`` is not ``"5"``. JSON has one number type, so ``1``
equals ``1.0`` (Rasa's evaluator agrees); booleans equal only booleans
(``true`` is not ``1``, although Python says ``True == 1``). Objects compare
by keys and values in any order, lists element by element.
"""

from __future__ import annotations

from typing import Any

__all__ = ["strict_equal"]

_NUMBERS = (int, float)


def strict_equal(a: Any, b: Any) -> bool:
    """True when ``a`` and ``b`` are the same JSON value (numbers by value)."""
    ta = type(a)
    tb = type(b)
    if ta is not tb:
        # int and float are one JSON number type; bool is neither here.
        return ta in _NUMBERS and tb in _NUMBERS and a == b
    if ta is dict:
        if a.keys() != b.keys():
            return False
        return all(strict_equal(v, b[k]) for k, v in a.items())
    if ta is list:
        if len(a) != len(b):
            return False
        return all(strict_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)
