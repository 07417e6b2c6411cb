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
from grader.i18n.message import Message, msg

MAX_NOTEBOOK_BYTES = 50 << 20


class NotebookError(UserError):
    """The file cannot be read as a notebook: ``reason``, a one-line message, said after the
    notebook's name (``str(exc)``: the English ``NAME: REASON``; ``exc.args[0]`` the message)."""

    def __init__(self, notebook: str | Path, reason: Message) -> None:
        super().__init__(msg("{notebook}: {reason}", notebook=notebook, reason=reason))
        self.notebook = str(notebook)
        self.reason = reason

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.notebook, self.reason))


def read_notebook(path: str | Path, name: str | None = None) -> dict[str, Any]:
    """The notebook at ``path`` (:func:`parse_notebook`; ``name``: how it is called in the
    reasons, default its path), at most ``MAX_NOTEBOOK_BYTES``."""
    path = Path(path)
    name = str(path) if name is None else name
    if not path.exists():
        raise NotebookError(name, msg("no such file"))
    if path.is_dir():
        raise NotebookError(name, msg("is a folder, not a notebook"))
    check_size(path, name)
    return parse_notebook(path.read_bytes(), name)


def check_size(path: Path, name: str) -> None:
    """NotebookError when the file at ``path`` is larger than ``MAX_NOTEBOOK_BYTES``."""
    if path.stat().st_size > MAX_NOTEBOOK_BYTES:
        raise NotebookError(name, msg("larger than {mib} MiB", mib=MAX_NOTEBOOK_BYTES >> 20))


def parse_notebook(data: bytes, name: str = "notebook") -> dict[str, Any]:
    """Parse and check a notebook's JSON; returns it with every cell source as one string.

    A deliberately small check of nbformat 4's structure (the full ``nbformat`` validator
    takes a second to import): what grading needs, with a one-line reason otherwise.
    """
    if not data.strip():
        raise NotebookError(name, msg("the file is empty"))
    try:
        raw = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise NotebookError(name, msg("not a text file (is it a notebook?)")) from None
    except json.JSONDecodeError as exc:
        raise NotebookError(name, msg("not valid JSON (line {line}: {error})", line=exc.lineno,
                                      error=exc.msg)) from None
    except RecursionError:
        raise NotebookError(name, msg("JSON nested too deeply")) from None
    if not isinstance(raw, dict) or "nbformat" not in raw:
        raise NotebookError(name, msg("JSON, but not a Jupyter notebook"))
    major = raw.get("nbformat")
    if not isinstance(major, int) or major < 4:
        raise NotebookError(name, msg("nbformat {version} is too old; open and save it in JupyterLab "
                                      "to upgrade it to nbformat 4", version=major))
    if major > 4:
        raise NotebookError(name, msg("nbformat {version} is newer than this grader reads (4)",
                                      version=major))
    cells = raw.get("cells")
    if not isinstance(cells, list):
        raise NotebookError(name, msg("the notebook has no list of cells"))
    for i, cell in enumerate(cells):
        if not isinstance(cell, dict) or not isinstance(cell.get("cell_type"), str):
            raise NotebookError(name, msg("cell {cell} is not a notebook cell", cell=i))
        try:
            cell["source"] = catalogue.cell_source(cell)
        except TypeError:
            raise NotebookError(name, msg("cell {cell} has a malformed source", cell=i)) from None
        if not isinstance(cell.get("metadata", {}), dict):
            raise NotebookError(name, msg("cell {cell} has malformed metadata", cell=i))
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
