"""The grader's seams typed (issue 53, item 5: no ``pool: Any``): a pool, a worker source, a
worker, limits or a plan is passed with its own type, never as ``Any``, so that mypy
(``make typecheck``, ``--check-untyped-defs``) checks what crosses between the stages."""

from __future__ import annotations

import ast
from pathlib import Path

from support import ROOT

#: The names a seam's object goes by.
SEAMS = {"pool", "source", "worker", "limits", "plan"}


def untyped_seams(root: Path) -> list[str]:
    """``file:line name`` for each parameter, attribute, variable or function (what it returns)
    of ``SEAMS`` annotated ``Any``
    (or ``Any | None``; a ``dict[str, Any]`` of limits is plain data, not the seam)."""
    found = []
    for path in sorted((root / "grader").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            named: list[tuple[str, ast.expr | None]] = []
            if isinstance(node, ast.arg):
                named.append((node.arg, node.annotation))
            elif isinstance(node, ast.FunctionDef):  # ``def _pool(...) -> Any``
                named.append((node.name.strip("_"), node.returns))
            elif isinstance(node, ast.AnnAssign):
                target = node.target
                name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
                named.append((name, node.annotation))
            for name, annotation in named:
                if name in SEAMS and annotation is not None and "Any" in ast.unparse(annotation).split(" | "):
                    found.append(f"{path.relative_to(root).as_posix()}:{node.lineno} {name}")
    return sorted(found)


def test_an_untyped_seam_is_found(tmp_path: Path) -> None:
    (tmp_path / "grader").mkdir()
    (tmp_path / "grader" / "x.py").write_text(
        "from typing import Any\n"
        "class S:\n    def __init__(self, pool: Any, jobs: Any, limits: dict[str, Any]):\n"
        "        self.source: Any | None = None\n        self.other: Any = None\n"
        "def _pool(lesson: str) -> Any:\n    pass\n")
    assert untyped_seams(tmp_path) == ["grader/x.py:3 pool", "grader/x.py:4 source", "grader/x.py:6 pool"]


def test_no_seam_is_typed_any() -> None:
    assert untyped_seams(ROOT) == []


#: Builtin values a class might subclass to carry data past a ``list[str]`` (issue 53, item 3:
#: ``Hint(str)`` smuggled its mistake id so).
VALUES = {"str", "int", "float", "bytes", "tuple", "list", "dict"}
#: The subclasses allowed, each with why: a marker that carries nothing but its type.
MARKERS = {"grader/common/csvcells.py:Verbatim": "a CSV cell written as it is, unquoted"}


def value_subclasses(root: Path) -> list[str]:
    """``file:Class`` for each class of ``root/grader`` that subclasses one of ``VALUES``."""
    return sorted(f"{path.relative_to(root).as_posix()}:{node.name}"
                  for path in (root / "grader").rglob("*.py")
                  for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                  if isinstance(node, ast.ClassDef)
                  and any(ast.unparse(base) in VALUES for base in node.bases))


def test_a_value_subclass_is_found(tmp_path: Path) -> None:
    (tmp_path / "grader").mkdir()
    (tmp_path / "grader" / "hint.py").write_text(
        "class Hint(str):\n    mistake = None\nclass Plain:\n    pass\n")
    assert value_subclasses(tmp_path) == ["grader/hint.py:Hint"]


def test_no_data_rides_on_a_str() -> None:
    """A hint is a ``grader.common.hint.Hint`` (text, mistake id, kind: a plain class) in the
    one result model (``grader.results``); no class smuggles data inside a builtin value."""
    assert value_subclasses(ROOT) == sorted(MARKERS)
