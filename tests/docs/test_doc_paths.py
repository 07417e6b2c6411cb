"""Every path of this repository that the prose names exists (issue 53, item 9: docstrings
still named nbgrader's editions module in an ``authoring`` folder of the integration, and
other folders of before the package move). The prose: the Markdown files, the TOML, Makefile and CI script,
and the docstrings and comments of the Python files; not the code's strings, which build
paths from parts (``f"grader/hidden/test_{lesson}.py"``) and are tested by running them.

A path is a word that starts with a top-level folder of the repository (``grader/``,
``tests/``, ...); one with a placeholder in it (``NN``, ``<lesson>``, ``*``, ``{x}``,
``test_X.py``, ``test_foo.py``) is a pattern, not a path."""

from __future__ import annotations

import ast
import importlib
import io
import os
import re
import tokenize
from pathlib import Path

from support import ROOT

SKIPPED_FOLDERS = {"lessons", "solutions"}  # notebooks, generated or the lessons' own
PLACEHOLDER = re.compile(r"[<>*{}]|NN|_X\b|foo|\.\.\.")
TEXT_FILES = ("*.md", "*.toml", "*.yml", "Makefile", ".ci/run")


def _tops(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if p.is_dir() and (
        not p.name.startswith(".") or p.name == ".ci") and not p.name.endswith(".egg-info"))


def python_prose(source: str) -> str:
    """The docstrings and comments of a Python file, one after another."""
    parts = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                parts.append(doc)
    parts += [tok.string for tok in tokenize.generate_tokens(io.StringIO(source).readline)
              if tok.type == tokenize.COMMENT]
    return "\n".join(parts)


def prose_files(root: Path) -> dict[str, str]:
    """Each file's prose, by its path relative to ``root``."""
    found: dict[str, str] = {}
    for folder, subfolders, files in os.walk(root):
        here = Path(folder)
        subfolders[:] = sorted(d for d in subfolders if d not in ("__pycache__", *SKIPPED_FOLDERS)
                               and (not d.startswith(".") or d == ".ci") and "egg-info" not in d)
        for name in sorted(files):
            path = here / name
            rel = path.relative_to(root)
            if path.suffix == ".py":
                found[rel.as_posix()] = python_prose(path.read_text(encoding="utf-8"))
            elif any(rel.match(pattern) for pattern in TEXT_FILES):
                found[rel.as_posix()] = path.read_text(encoding="utf-8")
    return found


def missing_paths(root: Path) -> list[str]:
    """``file: path`` for each path named in ``root``'s prose that does not exist there."""
    tops = "|".join(map(re.escape, _tops(root)))
    word = re.compile(rf"(?<![\w./-])(?:{tops})/[\w./<>*{{}}-]*[\w/>}}*]")
    missing = []
    for name, text in prose_files(root).items():
        for match in word.finditer(text):
            path = match.group(0)
            if not PLACEHOLDER.search(path) and not (root / path).exists():
                missing.append(f"{name}: {path}")
    return sorted(set(missing))


def test_a_missing_path_is_found(tmp_path: Path) -> None:
    (tmp_path / "grader" / "check").mkdir(parents=True)
    (tmp_path / "docs").mkdir()
    (tmp_path / "grader" / "check" / "engine.py").write_text(
        '"""Reads grader/check/notebook.py, then grader/check/engine.py."""\n'
        'PATH = "grader/made/at/run/time.py"  # see grader/old/place.py, grader/hidden/test_NN.py\n')
    (tmp_path / "docs" / "guide.md").write_text(
        "Run `docs/make.py` (`grader/check/engine.py`); patterns: grader/hidden/test_<lesson>.py, "
        "tests/test_foo.py.\n")
    assert missing_paths(tmp_path) == ["docs/guide.md: docs/make.py",
                                       "grader/check/engine.py: grader/check/notebook.py",
                                       "grader/check/engine.py: grader/old/place.py"]


def test_every_path_the_prose_names_exists() -> None:
    assert missing_paths(ROOT) == []


#: A dotted name of the course's packages in the prose: ``grader.check.engine.quiet``.
DOTTED = re.compile(r"(?<![\w./-])((?:grader|coursekit)(?:\.[A-Za-z_]\w*)+)")
FILE_SUFFIXES = (".py", ".json", ".log", ".ipynb", ".po", ".md", ".toml", ".j2", ".csv", ".txt")


def resolves(name: str) -> bool:
    """``name`` is a module, or a module's attribute (an attribute's attribute ...)."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:i]))
        except ModuleNotFoundError as exc:
            if exc.name and ".".join(parts[:i]).startswith(exc.name):
                continue  # no such module: the name's last part is an attribute
            raise
        for attr in parts[i:]:
            if not hasattr(found, attr):
                return False
            found = getattr(found, attr)
        return True
    return False


def missing_names(prose: dict[str, str]) -> list[str]:
    """``file: name`` for each dotted name of the prose that is no module or attribute."""
    missing = set()
    for file, text in prose.items():
        for name in {m.rstrip(".") for m in DOTTED.findall(text)}:
            if not (name.endswith(FILE_SUFFIXES) or "__main__" in name
                    or PLACEHOLDER.search(name) or resolves(name)):
                missing.add(f"{file}: {name}")
    return sorted(missing)


def test_a_missing_module_or_attribute_is_found() -> None:
    prose = {"a.md": "`grader.check.engine.quiet`, grader.record.Result, grader.common.limits.Limits.wall_s, "
                     "grader.check.nothing, grader/hidden/test_01.py, coursekit.reference.lessonNN, "
                     "grader.results.folder."}
    assert missing_names(prose) == ["a.md: grader.check.nothing", "a.md: grader.record.Result"]


def test_every_module_the_prose_names_exists() -> None:
    """After the package move, a docstring naming a module of before it (the top-level
    ``record`` or ``hint`` of grader/) is drift: every dotted name of the course's packages in
    the prose resolves."""
    assert missing_names(prose_files(ROOT)) == []
