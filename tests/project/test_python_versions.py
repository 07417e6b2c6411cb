"""The course runs on every Python that both torch 2.13 and the pinned numpy ship wheels
for (3.11 to 3.14: torch 2.13 has cp310-cp314 wheels, numpy 2.4.6 requires >= 3.11).

This machine's torch wheel is for 3.11 only, so under the newer interpreters found here
(pyenv or PATH) the tests check what can differ without torch: every source file of the
course (packages, tests, benchmarks, solutions' and lessons' code cells) compiles without a
warning (3.12 turned invalid escapes into SyntaxWarnings), and every standard-library
module it imports still exists (3.12 and 3.13 removed distutils, imp, cgi, pipes, ...).
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from support import ROOT

NEWER = ("3.12", "3.13", "3.14")
FOLDERS = ("coursekit", "grader", "tests", "benchmarks", "datasets", "docs")


def interpreter(version: str) -> str | None:
    """A working ``python<version>`` (pyenv's shims name versions that are not selected)."""
    pyenv = sorted((Path.home() / ".pyenv" / "versions").glob(f"{version}.*/bin/python{version}"))
    for candidate in [*reversed([str(p) for p in pyenv]), shutil.which(f"python{version}")]:
        if candidate and subprocess.run([candidate, "-c", "pass"], capture_output=True).returncode == 0:
            return candidate
    return None


def sources() -> dict[str, str]:
    """Every piece of the course's Python: files, and the code cells of the notebooks."""
    found = {}
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "__pycache__" not in path.parts:
                found[path.relative_to(ROOT).as_posix()] = path.read_text(encoding="utf-8")
    for path in sorted([*(ROOT / "solutions").rglob("*.ipynb"), *(ROOT / "lessons").rglob("*.ipynb")]):
        if ".ipynb_checkpoints" in path.parts:
            continue
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        for i, cell in enumerate(cells):
            text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            if cell["cell_type"] == "code":  # IPython magics and shell escapes are not Python
                lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith(("%", "!"))]
                found[f"{path.relative_to(ROOT).as_posix()}#cell{i}"] = "\n".join(lines)
    return found


def stdlib_imports(texts: dict[str, str]) -> list[str]:
    """The standard-library modules (as 3.11 knows them) the course imports."""
    names = set()
    for text in texts.values():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module.split(".")[0])
    return sorted(n for n in names if n in sys.stdlib_module_names)


CHECK = r"""
import json, sys, warnings
texts, modules = json.load(sys.stdin)
problems = []
for name, text in texts.items():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            compile(text, name, "exec")
        except SyntaxError as exc:
            problems.append(f"{name}: {exc}")
    problems += [f"{name}: {w.category.__name__}: {w.message}" for w in caught]
problems += [f"no module {m} in Python {sys.version.split()[0]}" for m in modules
             if m not in sys.stdlib_module_names]
print(json.dumps(problems))
"""


def test_requires_python_is_what_torch_and_numpy_support() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["requires-python"] == ">=3.11,<3.15"
    pins = dict(dep.split(";")[0].strip().split("==") for dep in project["dependencies"])
    assert pins["torch"] == "2.13.0" and pins["numpy"] == "2.4.6"  # else re-check the range


@pytest.mark.parametrize("version", NEWER)
def test_the_course_compiles_and_imports_only_what_newer_pythons_have(version: str) -> None:
    python = interpreter(version)
    if python is None:
        pytest.skip(f"no Python {version} on this machine")
    texts = sources()
    assert len(texts) > 100
    proc = subprocess.run([python, "-c", CHECK], input=json.dumps([texts, stdlib_imports(texts)]),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout) == []
