"""Assertion kinds: what each matches and the machine that decides it."""

__all__: list[str] = []
