"""Mantle's events: the wire structs and their decoding."""

__all__: list[str] = []
