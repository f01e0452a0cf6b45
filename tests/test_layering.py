"""The pure core imports neither anyio nor rich and does no I/O (docs/architecture.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "mantle_stream"
CORE = ["_yaml", "_diagnostics", "_scenario", "_values", "_events", "_match", "_machines",
        "_compiler", "_engine", "_verdicts", "_errors"]
FORBIDDEN = {"anyio", "rich", "socket", "asyncio", "time", "datetime", "os", "sys",
             "threading", "subprocess", "mantle_stream._cli", "mantle_stream._live",
             "mantle_stream._feeds", "mantle_stream._outputs", "mantle_stream._report"}
# The scenario module reads files by design (loading is its job); the loop
# over events never does.
ALLOWED = {"_scenario": {"os"}}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("module", CORE)
def test_core_module_imports_no_io_or_edges(module: str) -> None:
    imported = _imports(PACKAGE / f"{module}.py")
    roots = {name.split(".")[0] for name in imported} | imported
    bad = (roots & FORBIDDEN) - ALLOWED.get(module, set())
    assert not bad, f"{module} imports {sorted(bad)}"


def test_core_never_calls_open() -> None:
    for module in CORE:
        if module == "_scenario":
            continue
        tree = ast.parse((PACKAGE / f"{module}.py").read_text())
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Name) and n.func.id in {"open", "print", "input"}]
        assert not calls, f"{module} calls {[c.func.id for c in calls]}"  # type: ignore[attr-defined]
