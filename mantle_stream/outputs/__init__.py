"""Where verdicts go: the JSON report, JSONL, JUnit, the table and the live view."""

__all__: list[str] = []
