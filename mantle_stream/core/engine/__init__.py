"""The evaluator: events in, verdicts out, one conversation at a time."""

__all__: list[str] = []
