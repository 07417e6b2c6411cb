"""Helpers for writing lesson notebooks with nbgrader metadata, and checking them.

The reference notebooks in ``solutions/`` are the single source of every lesson; these
helpers only build cells with consistent metadata (nbgrader schema 3):

- ``markdown(text)``, ``code(src, demo=False)``: ordinary cells; ``demo=True`` tags the
  cell ``demo`` (skipped by the grader: plots, long demonstrations);
- ``readonly(src, grade_id)``: a locked code cell (setup, data);
- ``solution(grade_id, src)``: an autograded answer cell; ``grade_id`` is the contract name;
  the solution sits between ``### BEGIN SOLUTION`` and ``### END SOLUTION``;
- ``tests(lesson, exercise, points, visible)``: the exercise's autograder cell: visible
  asserts, then the hidden hook that runs ``grader.kernel.grade`` at autograde time.
"""

from __future__ import annotations

import textwrap
from typing import Any

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

SCHEMA = 3


def _meta(**nbgrader: Any) -> dict[str, Any]:
    return {"nbgrader": dict(nbgrader, schema_version=SCHEMA)}


def markdown(text: str) -> nbformat.NotebookNode:
    return new_markdown_cell(textwrap.dedent(text).strip())


def code(src: str, demo: bool = False) -> nbformat.NotebookNode:
    cell = new_code_cell(textwrap.dedent(src).strip())
    if demo:
        cell.metadata["tags"] = ["demo"]
    return cell


def readonly(src: str, grade_id: str) -> nbformat.NotebookNode:
    cell = new_code_cell(textwrap.dedent(src).strip())
    cell.metadata.update(_meta(grade=False, solution=False, locked=True, grade_id=grade_id))
    return cell


def solution(grade_id: str, src: str) -> nbformat.NotebookNode:
    cell = new_code_cell(textwrap.dedent(src).strip())
    cell.metadata.update(_meta(grade=False, solution=True, locked=False, grade_id=grade_id))
    return cell


def tests(lesson: str, exercise: str, points: float, visible: str) -> nbformat.NotebookNode:
    src = (
        textwrap.dedent(visible).strip()
        + "\n### BEGIN HIDDEN TESTS\nfrom grader.kernel import grade\n"
        + f'grade("{lesson}", "{exercise}", globals())\n### END HIDDEN TESTS'
    )
    cell = new_code_cell(src)
    cell.metadata.update(
        _meta(grade=True, solution=False, locked=True, points=float(points), grade_id=f"test_{exercise}")
    )
    return cell


def notebook(cells: list[nbformat.NotebookNode]) -> nbformat.NotebookNode:
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"display_name": "Python 3 (ipykernel)", "language": "python",
                                 "name": "python3"}
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def graded_cells(nb: dict[str, Any]) -> dict[str, float]:
    """``{exercise: points}`` of the notebook's autograder cells (``test_<exercise>``)."""
    found = {}
    for cell in nb["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if meta.get("grade") and not meta.get("solution"):
            found[meta["grade_id"].removeprefix("test_")] = float(meta["points"])
    return found
