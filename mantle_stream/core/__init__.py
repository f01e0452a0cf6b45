"""The pure core: scenarios, assertions, events and the evaluator.

No anyio, rich, clock or socket here; files are read only when loading
scenarios and recorded results."""

__all__: list[str] = []
