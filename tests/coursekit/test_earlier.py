"""coursekit.earlier: a later lesson runs on the course's reference code where it is
installed, else on the student's own earlier notebook, and says in words which lesson to
finish when that code cannot be used."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from coursekit import catalogue, earlier
from coursekit.earlier import EarlierLessonError, lesson_code, load_my_code

LESSON = catalogue.get("05_layer_norm")
SOLUTION = LESSON.solution()
STUDENT = LESSON.student()


def _edited(notebook: Path, out: Path, drop: set[str] = frozenset(),
            replace: dict[str, str] | None = None) -> Path:
    nb = catalogue.read_json(notebook)
    nb["cells"] = [c for c in nb["cells"] if catalogue.grade_id(c) not in drop]
    for cell in nb["cells"]:
        if catalogue.grade_id(cell) in (replace or {}):
            cell["source"] = replace[catalogue.grade_id(cell)]
    out.write_text(json.dumps(nb), encoding="utf-8")
    return out


def test_a_finished_notebook_gives_working_code() -> None:
    mine = load_my_code(LESSON.id, SOLUTION)
    x = torch.randn(2, 3, 8)
    torch.testing.assert_close(mine.FastLayerNorm(8)(x), mine.LayerNorm(8)(x))
    assert mine.__name__ == "my_lesson05" and set(LESSON.exports()) <= set(vars(mine))


def test_an_untouched_notebook_is_refused_naming_the_lesson_and_the_exercises() -> None:
    with pytest.raises(EarlierLessonError) as refused:
        load_my_code("05", STUDENT)
    message = str(refused.value)
    assert "lesson 05" in message and "finish lesson 05" in message
    assert "`layer_norm`" in message and "`LayerNorm`" in message
    assert "`FastLayerNorm`" not in message  # provided code, nothing to finish there
    assert "\n" not in message


def test_provided_cells_missing_from_an_older_notebook_come_from_the_reference(tmp_path: Path) -> None:
    old = _edited(SOLUTION, tmp_path / "old.ipynb", drop={"LayerNormFunction", "FastLayerNorm"})
    mine = load_my_code(LESSON.id, old)
    assert issubclass(mine.FastLayerNorm, mine.LayerNorm)
    x = torch.randn(2, 3, 8)
    torch.testing.assert_close(mine.FastLayerNorm(8)(x), mine.LayerNorm(8)(x))


def test_a_missing_answer_cell_is_an_error_not_the_reference(tmp_path: Path) -> None:
    broken = _edited(SOLUTION, tmp_path / "broken.ipynb", drop={"LayerNorm"})
    with pytest.raises(EarlierLessonError, match="has no cell `LayerNorm`"):
        load_my_code(LESSON.id, broken)


def test_a_cell_that_fails_names_its_exercise(tmp_path: Path) -> None:
    broken = _edited(SOLUTION, tmp_path / "raises.ipynb",
                     replace={"layer_norm": "def layer_norm(x, gamma, beta, eps=1e-5):\n    return x\n"
                                            "1 / 0\n"})
    with pytest.raises(EarlierLessonError, match=r"cell `layer_norm` .* raised ZeroDivisionError"):
        load_my_code(LESSON.id, broken)


def test_no_notebook_says_where_it_should_be(tmp_path: Path) -> None:
    with pytest.raises(EarlierLessonError, match="is not at .*nowhere.ipynb"):
        load_my_code("05", tmp_path / "nowhere.ipynb")


def test_solution_markers_do_not_eat_the_blank_line_before_a_method() -> None:
    code = earlier.extract(SOLUTION, ["LayerNorm"])
    assert "\n\n    def forward(" in code and "BEGIN SOLUTION" not in code


def test_lesson_code_is_the_reference_module_where_it_is_installed() -> None:
    module = lesson_code("03")
    assert module.__name__ == "coursekit.reference.lesson03"
    assert lesson_code("03_scaled_dot_product_attention") is module


def test_lesson_code_falls_back_to_the_students_notebook(tmp_path: Path, monkeypatch) -> None:
    """As in a bundle without reference modules: lesson 03's code comes from the student's
    notebook; the untouched one is refused in words."""
    real = catalogue.get("03")
    course = catalogue.COURSE.at(tmp_path)
    lesson = course.get("03")
    lesson.student().parent.mkdir(parents=True)
    monkeypatch.setattr(catalogue, "COURSE", course)
    monkeypatch.setattr(earlier.importlib.util, "find_spec", lambda name: None)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(EarlierLessonError, match="notebook is not at lessons/03_scaled"):
        lesson_code("03")
    lesson.student().write_bytes(real.student().read_bytes())
    with pytest.raises(EarlierLessonError, match="`scaled_dot_product_attention`.*not written yet"):
        lesson_code("03")
    lesson.student().write_bytes(real.solution().read_bytes())
    mine = lesson_code("03")
    assert mine.__name__ == "my_lesson03"
    assert mine.causal_mask(3).tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    assert lesson_code("03") is mine  # loaded once while the notebook is unchanged
