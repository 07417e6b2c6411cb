"""The grader's layout holds: stages import only the stages below them, and no import cycle.

Every ``import`` counts, at the top of a module or inside a function: a function-level
import that goes up is a cycle waiting for the next refactoring. The stages, lowest first,
are CONTRIBUTING.md's "Where things live".
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

GRADER = Path(__file__).resolve().parents[1] / "grader"

#: Lowest first: a module may import its own stage and the stages before it.
STAGES = [
    # words, limits and formats every stage shares; the code that runs beside the student's
    {"hint", "limits", "csvcells", "templating", "i18n", "runtime"},
    {"sandbox"},  # where a worker runs
    {"check", "results", "hidden"},  # one notebook: its worker, the hidden tests, the result
    {"helper"},  # check's warm per-user helper
    {"record"},  # the graded folder
    {"classgrade"},  # a whole class
    {"outputs"},  # what a record becomes for people
    {"integrations", "kernel", "authoring"},  # nbgrader, Gradescope; writing the course
    {"cli", "__main__"},  # the command line
]


def _modules() -> dict[str, Path]:
    found = {}
    for path in GRADER.rglob("*.py"):
        parts = ["grader", *path.relative_to(GRADER).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The grader modules ``name`` imports, anywhere in it."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            wanted = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            wanted = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        for target in wanted:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target not in (name, "grader"):
                targets.add(target)
    return targets


GRAPH = {name: _imports(name, path, mods) for mods in [_modules()] for name, path in mods.items()}


def _stage(module: str) -> int:
    top = module.split(".")[1] if "." in module else module
    for level, names in enumerate(STAGES):
        if top in names:
            return level
    raise AssertionError(f"{module} belongs to no stage: add grader/{top} to STAGES and to CONTRIBUTING.md")


def test_every_module_has_a_stage():
    for module in GRAPH:
        if module != "grader":
            _stage(module)


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if m != "grader"))
def test_imports_go_down(module):
    upward = sorted(t for t in GRAPH[module] if _stage(t) > _stage(module))
    assert not upward, f"{module} imports a later stage: {upward}"


def test_the_runtime_imports_only_the_runtime():
    """What runs beside the student's code is copied into the sandbox alone."""
    for module, targets in GRAPH.items():
        if module.startswith("grader.runtime"):
            assert all(t.startswith("grader.runtime") for t in targets), (module, targets)


def test_no_import_cycle():
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in GRAPH[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in GRAPH:
        if node not in index:
            visit(node)
    assert not cycles, f"import cycles: {cycles}"


def test_a_planted_cycle_is_found(monkeypatch):
    """The cycle test can fail: one import back from the check to the CLI makes a cycle."""
    monkeypatch.setitem(GRAPH, "grader.check.engine", GRAPH["grader.check.engine"] | {"grader.cli"})
    with pytest.raises(AssertionError, match="import cycles"):
        test_no_import_cycle()
    with pytest.raises(AssertionError, match="imports a later stage"):
        test_imports_go_down("grader.check.engine")
