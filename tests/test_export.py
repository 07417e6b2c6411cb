"""coursekit.export.load_my_code: later lessons run on a student's own earlier code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from coursekit.export import ROOT, load_my_code

LESSON = "05_layer_norm"
SOLUTION = ROOT / "solutions" / LESSON / f"{LESSON}.ipynb"
STUDENT = ROOT / "lessons" / LESSON / f"{LESSON}.ipynb"


def _without(notebook: Path, grade_ids: set[str], out: Path) -> Path:
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    nb["cells"] = [c for c in nb["cells"]
                   if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") not in grade_ids]
    out.write_text(json.dumps(nb), encoding="utf-8")
    return out


def test_a_finished_notebook_gives_working_code() -> None:
    mine = load_my_code(LESSON, SOLUTION)
    x = torch.randn(2, 3, 8)
    torch.testing.assert_close(mine.FastLayerNorm(8)(x), mine.LayerNorm(8)(x))


def test_an_untouched_notebook_gives_the_student_stubs() -> None:
    mine = load_my_code(LESSON, STUDENT)
    with pytest.raises(NotImplementedError):
        mine.LayerNorm(8)


def test_provided_cells_missing_from_an_older_notebook_come_from_the_reference(tmp_path: Path) -> None:
    old = _without(SOLUTION, {"LayerNormFunction", "FastLayerNorm"}, tmp_path / "old.ipynb")
    mine = load_my_code(LESSON, old)
    assert issubclass(mine.FastLayerNorm, mine.LayerNorm)
    x = torch.randn(2, 3, 8)
    torch.testing.assert_close(mine.FastLayerNorm(8)(x), mine.LayerNorm(8)(x))


def test_a_missing_answer_cell_is_an_error_not_the_reference(tmp_path: Path) -> None:
    broken = _without(SOLUTION, {"LayerNorm"}, tmp_path / "broken.ipynb")
    with pytest.raises(KeyError, match="LayerNorm"):
        load_my_code(LESSON, broken)
