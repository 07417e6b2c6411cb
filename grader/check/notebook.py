"""Reading submitted notebooks (trusted side) and choosing the cells to run when grading.

When grading, these code cells are *not* run:
- nbgrader autograder-test cells (``grade: true`` without ``solution: true``): visible
  asserts and hidden-test hooks; the hidden graders replace them;
- cells tagged ``demo``: plots, long demonstrations and training runs that only teach.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from coursekit import catalogue
from coursekit.errors import UserError

MAX_NOTEBOOK_BYTES = 50 << 20


class NotebookError(UserError):
    """The file cannot be read as a notebook; ``str(exc)`` is a one-line reason."""


def read_notebook(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.exists():
        raise NotebookError(f"{path}: no such file")
    if path.is_dir():
        raise NotebookError(f"{path}: is a folder, not a notebook")
    if path.stat().st_size > MAX_NOTEBOOK_BYTES:
        raise NotebookError(f"{path}: larger than {MAX_NOTEBOOK_BYTES >> 20} MiB")
    return parse_notebook(path.read_bytes(), str(path))


def parse_notebook(data: bytes, name: str = "notebook") -> dict[str, Any]:
    """Parse and check a notebook's JSON; returns it with every cell source as one string.

    A deliberately small check of nbformat 4's structure (the full ``nbformat`` validator
    takes a second to import): what grading needs, with a one-line reason otherwise.
    """
    if not data.strip():
        raise NotebookError(f"{name}: the file is empty")
    try:
        raw = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise NotebookError(f"{name}: not a text file (is it a notebook?)") from None
    except json.JSONDecodeError as exc:
        raise NotebookError(f"{name}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except RecursionError:
        raise NotebookError(f"{name}: JSON nested too deeply") from None
    if not isinstance(raw, dict) or "nbformat" not in raw:
        raise NotebookError(f"{name}: JSON, but not a Jupyter notebook")
    major = raw.get("nbformat")
    if not isinstance(major, int) or major < 4:
        raise NotebookError(f"{name}: nbformat {major} is too old; open and save it in "
                            f"JupyterLab to upgrade it to nbformat 4")
    if major > 4:
        raise NotebookError(f"{name}: nbformat {major} is newer than this grader reads (4)")
    cells = raw.get("cells")
    if not isinstance(cells, list):
        raise NotebookError(f"{name}: the notebook has no list of cells")
    for i, cell in enumerate(cells):
        if not isinstance(cell, dict) or not isinstance(cell.get("cell_type"), str):
            raise NotebookError(f"{name}: cell {i} is not a notebook cell")
        try:
            cell["source"] = catalogue.cell_source(cell)
        except TypeError:
            raise NotebookError(f"{name}: cell {i} has a malformed source") from None
        if not isinstance(cell.get("metadata", {}), dict):
            raise NotebookError(f"{name}: cell {i} has malformed metadata")
    return raw


# nbgrader's markers in a cell's source: the answer between the first two (blanked in the
# student's notebook), the hooks of the hidden tests between the last two (removed from it).
# Here, not in coursekit: a student bundle ships coursekit, and the release's leak scan
# refuses any file that holds them.
BEGIN_SOLUTION, END_SOLUTION = "### BEGIN SOLUTION", "### END SOLUTION"
BEGIN_HIDDEN_TESTS, END_HIDDEN_TESTS = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"


def cells_to_run(nb: dict[str, Any]) -> list[tuple[int, str]]:
    """``(index, source)`` of the code cells a grader executes, in notebook order."""
    return [
        (i, cell["source"])
        for i, cell in enumerate(nb["cells"])
        if catalogue.cell_role(cell) in catalogue.RUN_WHEN_GRADING
    ]
