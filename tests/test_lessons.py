"""Lessons are consistent: generated from solutions/, points agree with the graders,
every contract name is graded, generated reference modules are up to date."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from conftest import ROOT, lesson_path, lessons, solution_path

from coursekit import export
from grader.authoring import graded_cells
from grader.engine import known_lessons, run_hidden_tests
from grader.submission import InProcessSubmission

CONTRACT = {
    "01_attention_by_hand": ["dot_scores", "softmax", "attention"],
    "02_split_heads": ["split_qkv", "split_heads", "merge_heads"],
    "03_scaled_dot_product_attention": ["scaled_dot_product_attention", "causal_mask", "padding_mask"],
    "04_multi_head_attention": ["MultiHeadAttention"],
    "05_layer_norm": ["layer_norm", "batch_norm", "layer_norm_backward", "LayerNorm"],
    "06_gelu": ["gelu", "gelu_tanh", "gelu_grad"],
    "07_positional_encoding": ["sinusoidal_positional_encoding", "PositionalEncoding", "TokenEmbedding"],
    "08_transformer": ["PositionwiseFeedForward", "EncoderLayer", "DecoderLayer", "Transformer",
                       "greedy_decode"],
    "09_training": ["noam_lr", "label_smoothed_nll", "train_step"],
}


def _max_points(lesson: str) -> dict[str, float]:
    return {r.name: r.max_points for r in run_hidden_tests(InProcessSubmission(), lesson)}


def test_every_lesson_of_the_contract_exists() -> None:
    assert lessons() == sorted(CONTRACT)
    assert known_lessons() == sorted(CONTRACT)


@pytest.mark.parametrize("lesson", lessons())
def test_contract_names_are_graded(lesson: str) -> None:
    graded = _max_points(lesson)
    missing = [name for name in CONTRACT[lesson] if name not in graded]
    assert not missing, f"no hidden graders for {missing}"


@pytest.mark.parametrize("lesson", lessons())
def test_notebook_points_equal_grader_points(lesson: str) -> None:
    nb = json.loads(solution_path(lesson).read_text(encoding="utf-8"))
    assert graded_cells(nb) == _max_points(lesson)


@pytest.mark.parametrize("lesson", lessons())
def test_every_exercise_has_a_solution_cell_named_by_its_contract_name(lesson: str) -> None:
    nb = json.loads(solution_path(lesson).read_text(encoding="utf-8"))
    solution_ids = {c["metadata"]["nbgrader"]["grade_id"] for c in nb["cells"]
                    if c.get("metadata", {}).get("nbgrader", {}).get("solution")}
    assert set(graded_cells(nb)) <= solution_ids


def test_lessons_equal_a_fresh_generation(tmp_path) -> None:
    course = tmp_path / "course"
    shutil.copytree(ROOT / "solutions", course / "solutions")
    shutil.copy(ROOT / "nbgrader_config.py", course)
    for lesson in lessons():
        subprocess.run(["nbgrader", "generate_assignment", lesson, "--force"], cwd=course,
                       check=True, capture_output=True)
        fresh = (course / "lessons" / lesson / f"{lesson}.ipynb").read_bytes()
        assert fresh == lesson_path(lesson).read_bytes(), (
            f"lessons/{lesson} is stale: run `nbgrader generate_assignment {lesson} --force`")


def test_student_notebooks_contain_no_solutions_or_hidden_tests() -> None:
    for lesson in lessons():
        text = lesson_path(lesson).read_text(encoding="utf-8")
        for marker in ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", "grader.kernel"):
            assert marker not in text, f"{lesson}: student notebook contains {marker!r}"


def test_reference_modules_are_generated_from_solutions() -> None:
    for path, text in export.generated_files().items():
        assert path.exists() and path.read_text(encoding="utf-8") == text, (
            f"{path.relative_to(ROOT)} is stale: run `python -m coursekit.export`")
    stray = set((ROOT / "coursekit" / "reference").glob("*.py")) - set(export.generated_files())
    assert not stray, f"reference modules without a source notebook: {stray}"
