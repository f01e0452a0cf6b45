"""Scenario files: YAML with positions, diagnostics, the model and its checks."""

__all__: list[str] = []
