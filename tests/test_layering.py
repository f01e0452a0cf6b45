"""The package's layers, as allowlists: what each layer may import (docs/architecture.md).

The tree follows the pipeline: ``core`` (scenarios, assertions, events, the
evaluator) is pure and imports only the core and a few libraries; ``feeds``
(where events come from) and ``outputs`` (where verdicts go) each build on
the core and never on each other; the ``runner`` drives an evaluator from a
feed; the ``cli`` composes them all. A module that is not listed under a
layer fails this test: a new module is placed on purpose.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "mantle_stream"

#: Each layer (a subpackage or a module, by dotted prefix) and the layers it may import.
LAYERS: dict[str, set[str]] = {
    "mantle_stream.core": {"mantle_stream.core"},
    "mantle_stream.feeds": {"mantle_stream.core", "mantle_stream.feeds"},
    "mantle_stream.outputs": {"mantle_stream.core", "mantle_stream.outputs"},
    "mantle_stream.runner": {
        "mantle_stream.core",
        "mantle_stream.feeds",
        "mantle_stream.outputs.state",
    },
    # Execution strategies from a typed run configuration: one process, --workers,
    # the Kafka member and the gate started, the sinks composed (for the command line,
    # the pytest plugin and library users).
    "mantle_stream.run": {
        "mantle_stream.core",
        "mantle_stream.feeds",
        "mantle_stream.outputs",
        "mantle_stream.runner",
        "mantle_stream.kafka",
        "mantle_stream.gate",
        "mantle_stream.run",
    },
    "mantle_stream.cli": {
        "mantle_stream.core",
        "mantle_stream.feeds",
        "mantle_stream.outputs",
        "mantle_stream.runner",
        "mantle_stream.kafka",
        "mantle_stream.gate",
        "mantle_stream.run",
        "mantle_stream.cli",
    },
    # A consumer group member over Kafka: judges like the runner, publishes like
    # the outputs (confluent-kafka imported only here).
    "mantle_stream.kafka": {
        "mantle_stream.core",
        "mantle_stream.outputs",
        "mantle_stream.kafka",
    },
    # The gate in front of an agent: judges from the agent's tracker, or a feed through
    # the runner; reports through the outputs' records (uvicorn and httpx only here).
    "mantle_stream.gate": {
        "mantle_stream.core",
        "mantle_stream.feeds",
        "mantle_stream.outputs",
        "mantle_stream.runner",
        "mantle_stream.gate",
    },
    "mantle_stream.testing": {"mantle_stream.core"},
    # The pytest plugin, an edge like the command line (its entry module itself
    # imports only pytest and the standard library: tests/test_pytest_plugin.py).
    "mantle_stream.pytest_plugin": {
        "mantle_stream.core",
        "mantle_stream.feeds",
        "mantle_stream.outputs",
        "mantle_stream.runner",
        "mantle_stream.pytest_plugin",
    },
    "mantle_stream.__main__": {"mantle_stream.cli"},
    # The public surface re-exports from the layers below the command line.
    "mantle_stream": {
        "mantle_stream.core",
        "mantle_stream.runner",
        "mantle_stream.feeds",
        "mantle_stream.outputs",
    },
}

#: What the pure core may import besides itself: no event loop, terminal, clock,
#: socket, thread or process.
CORE_LIBRARIES = {
    "__future__",
    "collections",
    "contextlib",
    "dataclasses",
    "difflib",
    "enum",
    "functools",
    "hashlib",
    "heapq",
    "itertools",
    "math",
    "operator",
    "re",
    "typing",
    "unicodedata",
    "msgspec",
    "regex",
    "yaml",
}
#: Splitting source URLs (``urllib.parse`` only: no I/O) for messages that name them.
PARSERS = {"mantle_stream.core.urls": {"urllib"}}
#: Loading reads files by design (scenario files, evaluate_agent results);
#: nothing that runs per event does.
LOADERS = {
    "mantle_stream.core.scenario.load": {"os", "pathlib"},
    "mantle_stream.core.recorded": {"os", "pathlib"},
}


def _modules() -> list[str]:
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def _source(module: str) -> Path:
    path = PACKAGE.parent / Path(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def _imports(module: str) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(_source(module).read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "mantle_stream":  # from mantle_stream import x: a submodule
                names.update(f"mantle_stream.{alias.name}" for alias in node.names)
            else:
                names.add(node.module)
    return names


def _layer(module: str) -> str:
    matches = [layer for layer in LAYERS if module == layer or module.startswith(layer + ".")]
    assert matches, f"{module} belongs to no layer: add it to LAYERS on purpose"
    return max(matches, key=len)


def _within(name: str, allowed: set[str]) -> bool:
    return any(name == a or name.startswith(a + ".") for a in allowed)


MODULES = _modules()


@pytest.mark.parametrize("module", MODULES)
def test_each_module_imports_only_from_the_layers_below_it(module: str) -> None:
    allowed = LAYERS[_layer(module)]
    own = {name for name in _imports(module) if name.split(".")[0] == "mantle_stream"}
    bad = sorted(name for name in own if not _within(name, allowed) and name != "mantle_stream")
    assert not bad, f"{module} ({_layer(module)}) imports {bad}"


@pytest.mark.parametrize("module", [m for m in MODULES if m.startswith("mantle_stream.core")])
def test_the_core_imports_no_io_event_loop_or_terminal(module: str) -> None:
    roots = {name.split(".")[0] for name in _imports(module)} - {"mantle_stream"}
    bad = roots - CORE_LIBRARIES - LOADERS.get(module, set()) - PARSERS.get(module, set())
    assert not bad, f"{module} imports {sorted(bad)}"
    if module not in LOADERS:
        tree = ast.parse(_source(module).read_text())
        calls = [
            n.func.id
            for n in ast.walk(tree)
            if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Name)
            and n.func.id in {"open", "print", "input"}
        ]
        assert not calls, f"{module} calls {calls}"


def test_no_import_cycle_between_modules() -> None:
    graph = {m: {n for n in _imports(m) if n in MODULES and n != m} for m in MODULES}
    # Importing a submodule imports its package: a package's __init__ is not a cycle.
    seen: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(node: str) -> None:
        seen[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if seen.get(nxt) == 1:
                cycle = [*path[path.index(nxt) :], nxt]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if nxt not in seen:
                visit(nxt)
        path.pop()
        seen[node] = 2

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(MODULES)))
    for module in MODULES:
        if module not in seen:
            visit(module)


def test_the_allowlist_is_not_vacuous() -> None:
    # The walk found the tree, and a module importing an edge from the core would fail.
    assert len(MODULES) > 20 and "mantle_stream.core.engine.evaluator" in MODULES
    assert not _within("mantle_stream.outputs.report", LAYERS["mantle_stream.core"])
    assert not _within("mantle_stream.feeds.base", LAYERS["mantle_stream.outputs"])
