"""Lessons are consistent with the catalogue and with each other: generated from
solutions/, points agree with the graders, every contract name is graded, generated
reference modules are up to date, and the README's table lists the catalogue's lessons."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys

import pytest
from support import ROOT, lessons, solution_path

from coursekit import catalogue
from grader.authoring import generate as authoring
from grader.authoring.generate import graded_cells
from grader.check.engine import exercise_points, run_hidden_tests
from grader.testkit.lessons import HIDDEN_DIR, known_lessons
from grader.testkit.submission import InProcessSubmission

pytestmark = pytest.mark.slow  # over ~30 s on 2 cores: out of the quick loop (-m "not slow")

#: The graded contract: the names a student writes in each lesson (coursekit.catalogue).
CONTRACT = {lesson.id: list(lesson.graded) for lesson in catalogue.COURSE}


def _max_points(lesson: str) -> dict[str, float]:
    return exercise_points(lesson)


def test_the_catalogue_holds_the_contract() -> None:
    assert lessons() == list(CONTRACT) == known_lessons()
    assert all(CONTRACT.values()), "a lesson without graded names"
    assert [lesson.number for lesson in catalogue.COURSE] == [f"{n:02d}" for n in range(1, len(CONTRACT) + 1)]


def test_every_lesson_folder_and_grader_is_in_the_catalogue() -> None:
    """Nothing lists lessons but the catalogue: a folder or a grader it lacks is an error."""
    for kind in catalogue.KINDS.values():
        folders = sorted(p.name for p in (ROOT / kind).iterdir() if p.is_dir() and p.name[0] != ".")
        assert folders == lessons(), kind
    assert sorted(p.stem.removeprefix("test_") for p in HIDDEN_DIR.glob("test_*.py")) == lessons()
    for lesson in catalogue.COURSE:
        for kind in catalogue.KINDS:
            for edition, path in lesson.notebooks(kind).items():
                assert path.is_file(), f"{lesson.id}: no {edition} {kind} notebook {path}"


@pytest.mark.parametrize("lesson", lessons())
def test_contract_names_are_graded(lesson: str) -> None:
    graded = _max_points(lesson)
    missing = [name for name in CONTRACT[lesson] if name not in graded]
    assert not missing, f"no hidden graders for {missing}"


def test_empty_namespace_grading_lists_the_same_exercises_as_collect() -> None:
    for lesson in lessons():
        results = run_hidden_tests(InProcessSubmission(), lesson)
        assert {r.name: r.max_points for r in results} == exercise_points(lesson), lesson


@pytest.mark.parametrize("lesson", lessons())
def test_the_notebook_title_is_the_catalogue_title(lesson: str) -> None:
    entry = catalogue.get(lesson)
    first = catalogue.read_json(entry.solution())["cells"][0]["source"].splitlines()[0]
    assert first == f"# Lesson {entry.number} · {entry.title}"


def test_the_readme_table_is_the_catalogue() -> None:
    """README.md's lesson table: one row per lesson, in order; every name in backticks in
    the "you write" column is a graded exercise of that lesson."""
    rows = re.findall(r"^\| `(\d\d_\w+)` \| (.+) \|$", (ROOT / "README.md").read_text(encoding="utf-8"), re.M)
    assert [lesson for lesson, _ in rows] == lessons()
    for lesson, written in rows:
        names = [n for n in re.findall(r"`([^`]+)`", written) if not n.startswith("datasets/")]
        assert names and set(names) <= set(catalogue.get(lesson).graded), (lesson, names)


def _uses_dataset(source: str) -> set[str]:
    """Datasets a cell reads: load_numerals(...) and dataset_dir("name") calls (ast)."""
    tree = catalogue.parse(source)
    found = set()
    for node in ast.walk(tree) if tree else []:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "load_numerals":
                found.add("numerals")
            elif node.func.id == "dataset_dir":
                arg = node.args[0] if node.args else None
                found.add(arg.value if isinstance(arg, ast.Constant) else "numerals")
    return found


@pytest.mark.parametrize("lesson", lessons())
def test_datasets_a_lesson_reads_are_declared_in_the_catalogue(lesson: str) -> None:
    entry = catalogue.get(lesson)
    used = set().union(*(_uses_dataset(c["source"])
                         for c in catalogue.code_cells(catalogue.read_json(entry.solution()))))
    assert used <= set(entry.datasets), f"{lesson} reads {used}, declares {entry.datasets}"
    for name in entry.datasets:
        assert (ROOT / "datasets" / name).is_dir()


def test_lessons_build_only_on_earlier_lessons_with_reference_code() -> None:
    for lesson in catalogue.COURSE:
        for number in lesson.builds_on():
            earlier = catalogue.get(number)
            assert earlier.number < lesson.number, (lesson.id, number)
            assert earlier.exported_ids(), f"{lesson.id} uses {earlier.id}, which exports nothing"
    assert catalogue.get("04").builds_on() == ("03",)
    assert catalogue.get("09").builds_on() == ("08",)
    assert [x.number for x in catalogue.COURSE.builds_on(catalogue.get("09"))] == \
        ["03", "04", "05", "06", "07", "08"]


@pytest.mark.parametrize("lesson", lessons())
def test_notebook_points_equal_grader_points(lesson: str) -> None:
    assert graded_cells(catalogue.read_json(solution_path(lesson))) == _max_points(lesson)


@pytest.mark.parametrize("lesson", lessons())
def test_every_exercise_has_a_solution_cell_named_by_its_contract_name(lesson: str) -> None:
    nb = catalogue.read_json(solution_path(lesson))
    solution_ids = {catalogue.grade_id(c) for c in nb["cells"] if catalogue.is_solution(c)}
    assert set(graded_cells(nb)) <= solution_ids


def test_lessons_equal_a_fresh_generation(tmp_path) -> None:
    course = tmp_path / "course"
    shutil.copytree(ROOT / "solutions", course / "solutions")
    shutil.copy(ROOT / "nbgrader_config.py", course)
    # every lesson in one nbgrader run ('*'), as `generate --assignments` does one at a time
    subprocess.run(authoring.generate_command("*"), cwd=course, check=True, capture_output=True)
    for lesson in lessons():
        for edition, path in catalogue.get(lesson).notebooks("student").items():
            fresh = course / "lessons" / lesson / path.name
            assert fresh.read_bytes() == path.read_bytes(), (
                f"lessons/{lesson}/{path.name} ({edition}) is stale: run "
                f"`python -m grader.authoring.generate --assignments {lesson[:2]}`")


def test_student_notebooks_contain_no_solutions_or_hidden_tests() -> None:
    for lesson in lessons():
        for path in catalogue.get(lesson).notebooks("student").values():
            text = path.read_text(encoding="utf-8")
            for marker in ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", "grader.kernel"):
                assert marker not in text, f"{path.name}: student notebook contains {marker!r}"


def test_reference_modules_are_generated_from_solutions() -> None:
    for path, text in authoring.generated_files().items():
        assert path.exists() and path.read_text(encoding="utf-8") == text, (
            f"{path.relative_to(ROOT)} is stale: run `python -m grader.authoring.generate`")
    stray = set((ROOT / "coursekit" / "reference").glob("*.py")) - set(authoring.generated_files())
    assert not stray, f"reference modules without a source notebook: {stray}"


def test_ruff_lays_out_the_generated_imports(monkeypatch: pytest.MonkeyPatch) -> None:
    messy = "import torch.nn as nn\nfrom coursekit.earlier import lesson_code\nimport math\n" \
            "from torch import Tensor\nimport torch\nfrom torch import nn as _nn, MAX\n\n\nx = 1\n"
    assert authoring.sort_imports(messy, "lesson99.py") == (
        "import math\n\nimport torch\nimport torch.nn as nn\nfrom torch import MAX, Tensor\n"
        "from torch import nn as _nn\n\nfrom coursekit.earlier import lesson_code\n\nx = 1\n")
    monkeypatch.setattr(authoring.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(SystemExit, match="ruff is not installed"):
        authoring.sort_imports(messy, "lesson99.py")


def test_reference_modules_read_like_hand_written_ones() -> None:
    """Imports at the top and ruff-clean without a noqa; a blank line before every method."""
    for path, text in authoring.generated_files().items():
        assert "noqa" not in text, path.name
        tree = ast.parse(text)
        first_other = next((i for i, n in enumerate(tree.body[1:], 1)
                            if not isinstance(n, (ast.Import, ast.ImportFrom))), len(tree.body))
        assert not any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in tree.body[first_other:]), \
            f"{path.name}: an import below the top"
        lines = text.splitlines()
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            for method in cls.body[1:]:
                if isinstance(method, ast.FunctionDef):
                    first = min([method.lineno] + [d.lineno for d in method.decorator_list])
                    assert lines[first - 2].strip() == "", f"{path.name}: no blank line before {method.name}"
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", *map(str, authoring.generated_files())],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout
