"""Every public module declares __all__, and everything in it exists (anyio style)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import mantle_stream

MODULES = sorted(
    m.name
    for m in pkgutil.walk_packages(mantle_stream.__path__, "mantle_stream.")
    if m.name != "mantle_stream.__main__"
)


@pytest.mark.parametrize("name", ["mantle_stream", *MODULES])
def test_module_all_names_exist(name: str) -> None:
    module = importlib.import_module(name)
    assert hasattr(module, "__all__"), f"{name} has no __all__"
    missing = [n for n in module.__all__ if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ lists missing names {missing}"


def test_root_reexports_the_library_api() -> None:
    for name in (
        "Evaluator",
        "load_scenarios",
        "load_scenario_text",
        "Decision",
        "Event",
        "MantleStreamError",
        "ScenarioError",
        "EventError",
        "build_report",
    ):
        assert name in mantle_stream.__all__


def test_every_error_derives_from_the_common_base() -> None:
    for name in ("ScenarioError", "EventError", "FeedError", "UsageError"):
        assert issubclass(getattr(mantle_stream, name), mantle_stream.MantleStreamError)


def test_the_root_loads_each_name_where_it_lives_and_lists_every_one() -> None:
    from mantle_stream import _LAZY

    assert set(_LAZY) | {"__version__"} == set(mantle_stream.__all__)
    for name, module in _LAZY.items():
        assert getattr(mantle_stream, name) is getattr(importlib.import_module(module), name)


def test_help_answers_without_loading_the_engine() -> None:
    import subprocess
    import sys

    code = (
        "import sys; from mantle_stream.cli.parser import main\n"
        "try:\n    main(['check', '--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('msgspec', 'anyio', 'rich', 'yaml') or m == 'mantle_stream.core.engine.evaluator'))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert proc.stdout.strip().splitlines()[-1] == "[]"


def test_an_event_can_be_built_from_exported_names_alone() -> None:
    # Event's docstring builds one from the root's names: every payload struct is there.
    event = mantle_stream.Event(
        conversation_id="c1", sequence=0, user=mantle_stream.User(text="hi")
    )
    assert event.payload == mantle_stream.User(text="hi")
    from mantle_stream.core.events.model import PAYLOAD_TYPES

    assert all(getattr(mantle_stream, cls.__name__) is cls for cls in PAYLOAD_TYPES.values())


def test_the_library_page_documents_every_public_name_and_only_those() -> None:
    """docs/library.md's API reference is the root's __all__ (and the testing builders):
    a name exported without its page, or a page of a name no longer exported, fails."""
    import re
    from pathlib import Path

    import mantle_stream.testing

    page = (Path(__file__).resolve().parent.parent / "docs" / "library.md").read_text()
    documented = set(re.findall(r"^::: mantle_stream\.(\w+)$", page, flags=re.M))
    assert documented == (set(mantle_stream.__all__) - {"__version__"}) | {"testing"}
    members = set(re.findall(r"^        - (\w+)$", page, flags=re.M))
    assert members == set(mantle_stream.testing.__all__)


def test_decode_events_reads_every_shape_mantle_writes() -> None:
    from mantle_stream.testing import conversation, skill, user

    lines = b"".join(conversation(user("hi"), skill("activated", "card_replace")))
    flat = b'{"event": "user", "text": "again", "sender_id": "c", "sequence": 2}\n'
    events = mantle_stream.decode_events(lines + flat, source="feed.jsonl")
    assert [e.sequence for e in events] == [0, 1, 2]
    assert events[2].user is not None and events[2].user.text == "again"
    assert mantle_stream.decode_events(lines.decode()) == events[:2]
