"""Shared for every test: the suite never writes into a GitHub Actions job of its own.

When the suite itself runs in GitHub Actions, ``GITHUB_ACTIONS=true`` would turn
on ``--annotations github`` in every ``check`` and ``watch`` the tests start, and
``GITHUB_STEP_SUMMARY`` would get their summaries. The tests that want them set
them explicitly (``test_cli_github.py``).
"""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _outside_github_actions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
