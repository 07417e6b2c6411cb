"""The grader's modules as layers (issue 28): each stage imports only the stages below it,
no import cycle, nothing but ``python -m grader`` imports the CLI, the runtime imports only
the runtime, and no module overwrites another grader module's globals (what differs between
callers is passed as arguments). Imports are read from the source (ast), at module level and
inside functions alike: a function-level import that goes up is a cycle waiting for the next
refactoring. The stages are declared once, lowest first, in ``grader.STAGES``; the folders of ``grader/`` are
the stages, and CONTRIBUTING.md's "Where things live" lists them in the same order."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from support import ROOT

import grader

Graph = dict[str, set[str]]

#: Lowest first: a module may import its own stage and the stages before it. Declared once,
#: in ``grader.STAGES`` (with each stage's role), which CONTRIBUTING.md's table follows.
STAGES = [set(packages) for packages, _role in grader.STAGES]


def _modules(root: Path) -> dict[str, Path]:
    mods = {}
    for path in (root / "grader").rglob("*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return mods


def _imported(mod: str, path: Path, node: ast.Import | ast.ImportFrom, mods: dict) -> list[str]:
    """The grader modules ``node`` imports (``from . import x``: the submodule x)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        for _ in range(node.level - 1):
            base = base.rpartition(".")[0]
        target = node.module or "" if not node.level else (
            f"{base}.{node.module}" if node.module else base)
        names = [target, *(f"{target}.{a.name}" for a in node.names)]
    found = []
    for name in names:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        if name and name != mod and not mod.startswith(name + "."):  # its own package
            found.append(name)
    return found


def import_graph(root: Path) -> Graph:
    mods = _modules(root)
    graph: Graph = {}
    for mod, path in mods.items():
        graph[mod] = {name for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                      if isinstance(node, ast.Import | ast.ImportFrom)
                      for name in _imported(mod, path, node, mods)}
    return graph


def cycles(graph: Graph) -> list[set[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while not group or v not in group:
                group.add(stack.pop())
            if len(group) > 1:
                groups.append(group)

    for v in list(graph):
        if v not in index:
            visit(v)
    return groups


def test_the_graph_sees_a_cycle(tmp_path: Path) -> None:
    """The check below can fail: a cycle made of a function-level import is found."""
    (tmp_path / "grader" / "helper").mkdir(parents=True)
    (tmp_path / "grader" / "__init__.py").write_text("")
    (tmp_path / "grader" / "cli.py").write_text("from .helper import client\n")
    (tmp_path / "grader" / "helper" / "__init__.py").write_text("")
    (tmp_path / "grader" / "helper" / "client.py").write_text(
        "def run():\n    from .. import cli\n")
    assert cycles(import_graph(tmp_path)) == [{"grader.cli", "grader.helper.client"}]


def stage(module: str) -> int:
    top = module.split(".")[1]
    for level, names in enumerate(STAGES):
        if top in names:
            return level
    raise AssertionError(f"{module} belongs to no stage: add it to grader.STAGES (grader/__init__.py) "
                         "and to CONTRIBUTING.md's table")


def upward(graph: Graph) -> list[str]:
    """``a -> b`` for every import of a later stage."""
    return sorted(f"{a} -> {b}" for a, targets in graph.items() if a != "grader"
                  for b in targets if b != "grader" and stage(b) > stage(a))


GRAPH = import_graph(ROOT)


def test_no_import_cycle() -> None:
    assert {"grader.cli", "grader.check.command", "grader.helper.zygote"} <= set(GRAPH)
    assert "grader.check.command" in GRAPH["grader.helper.zygote"]
    assert cycles(GRAPH) == []
    assert [m for m, imports in GRAPH.items() if "grader.cli" in imports] == ["grader.__main__"]


def test_stages_import_only_the_stages_below() -> None:
    assert upward(GRAPH) == []


def test_the_stages_see_an_upward_import() -> None:
    """The check above can fail: the check asking the CLI is caught."""
    graph = dict(GRAPH, **{"grader.check.engine": GRAPH["grader.check.engine"] | {"grader.cli"}})
    assert upward(graph) == ["grader.check.engine -> grader.cli"]
    with pytest.raises(AssertionError, match="belongs to no stage"):
        stage("grader.newstage")


def test_the_runtime_imports_only_the_runtime() -> None:
    """What runs beside the student's code is copied into the sandbox alone."""
    for module, targets in GRAPH.items():
        if module.startswith("grader.runtime"):
            assert all(t.startswith("grader.runtime") for t in targets), (module, targets)


def _module_names(tree: ast.Module, mod: str, path: Path, mods: dict) -> set[str]:
    """The names that ``tree`` binds to grader modules (``from . import launch``)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                bound = alias.asname or alias.name.partition(".")[0]
                if isinstance(node, ast.Import):
                    if alias.name.startswith("grader"):
                        names.add(bound)
                elif any(name.endswith("." + alias.name)
                         for name in _imported(mod, path, node, mods)):
                    names.add(bound)
    return names


def overwritten_globals(root: Path) -> list[str]:
    """``module.NAME = ...`` (or ``setattr(module, ...)``) on a grader module, anywhere."""
    mods = _modules(root)
    found = []
    for mod, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = _module_names(tree, mod, path, mods)
        for node in ast.walk(tree):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AugAssign | ast.AnnAssign):
                targets = [node.target]
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                  and node.func.id in ("setattr", "delattr") and node.args):
                targets = [ast.Attribute(value=node.args[0], attr="?")]
            for target in targets:
                if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                        and target.value.id in names):
                    found.append(f"{mod}:{node.lineno}: {target.value.id}.{target.attr}")
    return found


def test_no_module_overwrites_another_modules_global(tmp_path: Path) -> None:
    (tmp_path / "grader").mkdir()
    (tmp_path / "grader" / "__init__.py").write_text("")
    (tmp_path / "grader" / "launch.py").write_text("SOURCE = None\n")
    (tmp_path / "grader" / "helper.py").write_text(
        "def run():\n    from . import launch\n    launch.SOURCE = print\n")
    assert overwritten_globals(tmp_path) == ["grader.helper:3: launch.SOURCE"]
    assert overwritten_globals(ROOT) == []


def loose_modules(root: Path) -> list[str]:
    """What the top of ``root/grader`` holds besides ``__init__``, ``__main__``, ``cli`` and
    packages."""
    return sorted(p.name for p in (root / "grader").iterdir()
                  if p.name not in {"__init__.py", "__main__.py", "cli.py", "__pycache__"}
                  and not (p.is_dir() and (p / "__init__.py").exists()))


def test_the_top_of_grader_holds_the_cli_and_packages(tmp_path: Path) -> None:
    """The folder tree is the map: a module at the top of grader/ belongs in a stage's folder."""
    (tmp_path / "grader" / "check").mkdir(parents=True)
    for name in ("__init__.py", "cli.py", "hint.py", "check/__init__.py"):
        (tmp_path / "grader" / name).write_text("")
    assert loose_modules(tmp_path) == ["hint.py"]
    assert loose_modules(ROOT) == []


def test_every_package_is_one_stage() -> None:
    """grader.STAGES names each package (and top-level module) of grader/ once, and nothing else."""
    declared = [name for packages in STAGES for name in packages]
    tops = {p.removesuffix(".py") for p in
            {p.name for p in (ROOT / "grader").iterdir()} - {"__init__.py", "__pycache__", "locale"}}
    assert len(declared) == len(set(declared)) and set(declared) == tops
    assert all(role and "\n" not in role for _packages, role in grader.STAGES)


def table_stages(contributing: str) -> list[str]:
    """The packages and modules of grader/ that "Where things live"'s table names, in its order
    (its first column; a data folder such as ``locale/`` is not one)."""
    section = contributing.split("## Where things live", 1)[1]
    rows = section.split("| stage | holds |", 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    names = []
    for row in rows:
        for word in re.findall(r"`([^`]+)`", row.split(" | ")[0]):
            name = word.removesuffix("/").removesuffix(".py")
            if (ROOT / "grader" / f"{name}.py").is_file() or (ROOT / "grader" / name / "__init__.py").is_file():
                names.append(name)
    return names


def test_contributing_lists_the_stages_in_their_order() -> None:
    text = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    declared = [name for packages, _role in grader.STAGES for name in packages]
    assert table_stages(text) == declared, "CONTRIBUTING.md's table and grader.STAGES differ"
    # the check can fail: two rows swapped
    swapped = text.replace("| `sandbox/` |", "| `SWAP` |").replace("| `runtime/` |", "| `sandbox/` |") \
        .replace("| `SWAP` |", "| `runtime/` |")
    assert table_stages(swapped) != declared


def test_the_hidden_tests_import_only_the_testkit_and_the_runtime() -> None:
    """What a hidden grader is written with is a package of its own (grader.testkit)."""
    hidden = {m: targets for m, targets in GRAPH.items() if m.startswith("grader.hidden.test_")}
    assert len(hidden) >= 12 and "grader.testkit.framework" in hidden["grader.hidden.test_01_attention_by_hand"]
    assert {(m, t) for m, targets in hidden.items() for t in targets
            if not t.startswith(("grader.testkit", "grader.runtime"))} == set()
