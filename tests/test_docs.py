"""The README as a landing page and the documentation site's sources (issue 26).

The README stays short and keeps the two set-up commands that work as written
(the demo, and the test command ``.ci/run`` runs); its links point at files
that exist; the command-line reference page is rendered from the parser itself
(``docs/hooks/cli_reference.py``, the MkDocs hook), one section per command.
``mkdocs build --strict`` itself runs in ``.ci/run``: the site's toolchain is
the ``docs`` extra, not the ``test`` one.
"""

from __future__ import annotations

import importlib.util
import re
from types import ModuleType

import pytest

from mantle_stream import load_scenario_text
from mantle_stream.cli.parser import _commands, _parser

from _harness import REPOSITORY

README = REPOSITORY / "README.md"
DEMO = 'python -m pip install -e ".[gate]" && mantle-stream demo'
TESTS = 'python -m pip install -e ".[test]" && python -m pytest'


def _sh_lines(text: str) -> list[str]:
    """Every line inside a ```sh block."""
    blocks = re.findall(r"^```sh\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)
    return [line for block in blocks for line in block.splitlines()]


def test_the_readme_is_at_most_12_kib() -> None:
    assert len(README.read_bytes()) <= 12 * 1024


@pytest.mark.parametrize("command", [DEMO, TESTS], ids=["demo", "tests"])
def test_the_readme_shows_each_setup_command_alone_on_its_line(command: str) -> None:
    assert command in _sh_lines(README.read_text(encoding="utf-8"))


def test_the_setup_commands_come_before_anything_else_runnable() -> None:
    lines = _sh_lines(README.read_text(encoding="utf-8"))
    assert lines[:3] == ["python3 -m venv .venv && . .venv/bin/activate", DEMO, TESTS]


def test_ci_runs_the_readmes_test_command_as_written() -> None:
    ci = (REPOSITORY / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert TESTS in ci


def test_every_relative_link_of_the_readme_names_a_file_that_exists() -> None:
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README.read_text(encoding="utf-8"))
    local = [link for link in links if "://" not in link]
    assert local, "the README links into docs/"
    assert [link for link in local if not (REPOSITORY / link).is_file()] == []


@pytest.mark.parametrize("page", ["README.md", "docs/scenarios.md"])
def test_the_scenario_example_of_each_page_loads(page: str) -> None:
    text = (REPOSITORY / page).read_text(encoding="utf-8")
    example = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert load_scenario_text(example).name == "Customer replaces a damaged card"


def _hook() -> ModuleType:
    path = REPOSITORY / "docs" / "hooks" / "cli_reference.py"
    spec = importlib.util.spec_from_file_location("cli_reference", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_cli_reference_page_is_every_commands_help_as_the_parser_prints_it() -> None:
    page: str = _hook().render()
    commands = _commands(_parser())
    assert set(re.findall(r"^## `mantle-stream (\w+)`$", page, flags=re.MULTILINE)) == set(commands)
    for name in commands:
        assert f"usage: mantle-stream {name} " in page
    assert "--regex-timeout SECONDS" in page
