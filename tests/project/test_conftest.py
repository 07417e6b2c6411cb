"""``conftest.py`` holds fixtures and hooks only (issue 53, item 8): importing it changes
neither ``sys.path`` nor the environment (what the tests' processes need is set in
``pytest_configure``, once, before collection), and no test imports it: the helpers the tests
share are in ``tests/support.py``."""

from __future__ import annotations

import ast
from pathlib import Path

from support import ROOT

#: What changes the process for everything imported after it.
CHANGES = ("sys.path", "os.environ", "os.putenv", "os.unsetenv", "os.chdir", "sys.modules")


def import_time_changes(source: str) -> list[str]:
    """``line: statement`` for each statement run at import (outside a function) that names
    one of ``CHANGES``: ``sys.path.insert(...)``, ``os.environ[...] = ...``, ..."""
    found = []
    body = list(ast.parse(source).body)
    while body:
        node = body.pop(0)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue  # run when called (a hook, a fixture)
        if isinstance(node, ast.If | ast.Try | ast.With | ast.For | ast.While):
            body[:0] = [n for n in ast.iter_child_nodes(node) if isinstance(n, ast.stmt)]
            continue
        text = ast.unparse(node)
        if any(change in text for change in CHANGES) and not isinstance(node, ast.Import | ast.ImportFrom):
            found.append(f"{node.lineno}: {text.splitlines()[0]}")
    return found


def conftest_imports(tests: Path) -> list[str]:
    """The test files that import a ``conftest`` module."""
    found = []
    for path in sorted(tests.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(name.split(".")[-1] == "conftest" for name in names):
                found.append(path.relative_to(tests).as_posix())
    return sorted(set(found))


def test_a_change_at_import_and_an_import_of_conftest_are_found(tmp_path: Path) -> None:
    source = ("import os, sys\nROOT = 1\nsys.path.insert(0, 'x')\n"
              "if True:\n    os.environ['A'] = '1'\n"
              "def pytest_configure(config):\n    os.environ['B'] = '1'\n")
    assert import_time_changes(source) == ["3: sys.path.insert(0, 'x')", "5: os.environ['A'] = '1'"]
    (tmp_path / "test_x.py").write_text("from conftest import helper\n")
    (tmp_path / "test_y.py").write_text("import support\n")
    assert conftest_imports(tmp_path) == ["test_x.py"]


def test_conftest_changes_nothing_at_import_and_no_test_imports_it() -> None:
    for conftest in (ROOT / "tests" / "conftest.py", ROOT / "grader" / "hidden" / "conftest.py"):
        assert import_time_changes(conftest.read_text(encoding="utf-8")) == [], conftest
    assert conftest_imports(ROOT / "tests") == []
