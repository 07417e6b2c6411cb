"""The "Check your work" cell (coursekit/selfcheck.py): the last cell of every lesson grades
the notebook as saved, in a separate process, and shows the command line's verdict."""

from __future__ import annotations

import html
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from support import ROOT, lesson_path, lessons, solution_path

from coursekit import catalogue, selfcheck
from grader.check.notebook import cells_to_run, read_notebook

pytestmark = pytest.mark.slow  # every lesson's check cell run in a kernel

LESSON = "01_attention_by_hand"


def _env() -> dict[str, str]:
    # COURSE_GRADING as in the kernel of nbgrader's Validate
    return dict(os.environ, COURSE_CHECK_HELPER="off", COURSE_GRADING="1")


@pytest.mark.parametrize("lesson", lessons())
def test_every_lesson_ends_with_the_check_cell(lesson: str) -> None:
    entry = catalogue.get(lesson)
    for path in [*entry.notebooks("solution").values(), *entry.notebooks("student").values()]:
        nb = read_notebook(path)
        last = nb["cells"][-1]
        assert last["cell_type"] == "code" and last["id"] == "check-my-work"
        assert f'check_my_work("{lesson}")' in last["source"]
        assert catalogue.is_demo(last) and catalogue.is_provided(last)
        assert nb["cells"][-2]["id"] == "check-my-work-prose"
        assert nb["cells"][-2]["source"].startswith(("## Check your work", "## 检查你的作业"))
        assert len(nb["cells"]) - 1 not in {i for i, _ in cells_to_run(nb)}  # graders skip it


def _nbconvert(notebook: Path) -> nbformat.NotebookNode:
    proc = subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook",
                           "--execute", "--allow-errors", "--ExecutePreprocessor.timeout=600", notebook.name,
                           "--output", "executed.ipynb"], cwd=notebook.parent, env=_env(),
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return nbformat.read(notebook.parent / "executed.ipynb", as_version=4)


def _verdict(nb: nbformat.NotebookNode) -> tuple[str, str]:
    outputs = [o for o in nb.cells[-1].outputs if o.output_type == "execute_result"]
    assert outputs, nb.cells[-1].outputs
    return outputs[-1].data["text/html"], outputs[-1].data["text/plain"]


@pytest.mark.e2e
def test_nbconvert_execute_shows_the_verdict_of_the_saved_notebook(tmp_path) -> None:
    folder = tmp_path / LESSON
    shutil.copytree(lesson_path(LESSON).parent, folder)
    page, text = _verdict(_nbconvert(folder / f"{LESSON}.ipynb"))
    assert "<table" in page and "0 / 10" in page
    assert "hint: `softmax` is not implemented yet" in page  # the command line's words
    assert "✘" in text and "hint: `softmax` is not implemented yet" in text
    assert "def " not in page and "assert" not in page  # no test code shown

    # the same folder with the reference answers saved in it: full marks
    shutil.copy(solution_path(LESSON), folder / f"{LESSON}.ipynb")
    page, _ = _verdict(_nbconvert(folder / f"{LESSON}.ipynb"))
    assert "10 / 10" in page and "✘" not in page


@pytest.mark.e2e
def test_nbconvert_of_the_chinese_edition_checks_it_in_chinese(tmp_path) -> None:
    """Both editions in one folder (as lessons/ holds them): the check grades the one the
    kernel ran, and speaks its language."""
    zh = lesson_path(LESSON).with_name(f"{LESSON}.zh.ipynb")
    folder = tmp_path / LESSON
    shutil.copytree(lesson_path(LESSON).parent, folder)
    page, text = _verdict(_nbconvert(folder / zh.name))
    assert f"{LESSON}.zh.ipynb" in page and "0 / 10" in page
    assert "提示" in page and "hint:" not in page


def test_unsaved_exercise_is_named(tmp_path) -> None:
    """The kernel ran a softmax the file does not hold: the verdict says to save first."""
    saved = tmp_path / f"{LESSON}.ipynb"
    shutil.copy(solution_path(LESSON), saved)
    nb = nbformat.read(saved, as_version=4)
    for cell in nb.cells:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "softmax":
            cell.source += "\n# an edit not saved yet\n"
    client = NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=False,
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute(env=_env())
    page, text = _verdict(nb)
    assert "not saved (softmax)" in page and "not saved (softmax)" in text
    assert "dot_scores" not in text.split("\n")[0]
    assert "10 / 10" in page  # the saved file is graded


def test_without_graders_it_says_what_to_do(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(selfcheck, "COURSE_ROOT", tmp_path)  # a handout: coursekit only
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("COURSE_GRADING", raising=False)
    verdict = selfcheck.check_my_work(LESSON, solution_path(LESSON))
    assert verdict.message == selfcheck.MESSAGES["en"]["no_grader"] and "Validate" in repr(verdict)
    assert "<table" not in verdict._repr_html_()


def test_skipped_while_autograded(monkeypatch, tmp_path) -> None:
    folder = tmp_path / "autograded" / "alice" / LESSON
    folder.mkdir(parents=True)
    monkeypatch.chdir(folder)
    verdict = selfcheck.check_my_work(LESSON, solution_path(LESSON))
    assert verdict.message == selfcheck.MESSAGES["en"]["grading"]


def test_notebook_not_found_is_explained(monkeypatch, tmp_path) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("CI", "COURSE_GRADING", "JPY_SESSION_NAME"):
        monkeypatch.delenv(name, raising=False)
    verdict = selfcheck.check_my_work(LESSON)
    assert "Could not find this notebook" in verdict.message


def test_session_path_is_used(monkeypatch, tmp_path) -> None:
    """JupyterLab names the notebook in $JPY_SESSION_NAME, relative or absolute."""
    folder = tmp_path / "somewhere"
    folder.mkdir()
    target = folder / f"{LESSON}.ipynb"
    shutil.copy(lesson_path(LESSON), target)
    monkeypatch.chdir(folder)
    monkeypatch.setenv("JPY_SESSION_NAME", str(target))
    assert selfcheck.find_notebook(LESSON) == target
    monkeypatch.setenv("JPY_SESSION_NAME", f"course/lessons/{LESSON}.ipynb")  # server-relative
    assert selfcheck.find_notebook(LESSON) == folder / f"{LESSON}.ipynb"
    monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / "other.ipynb"))
    assert selfcheck.find_notebook(LESSON) == folder / f"{LESSON}.ipynb"  # the working folder's


@pytest.mark.e2e
def test_html_format_of_the_command_line() -> None:
    proc = subprocess.run([sys.executable, "-m", "grader", "check", str(lesson_path(LESSON)),
                           "--format", "html"], capture_output=True, text=True, cwd=ROOT,
                          env=_env(), timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith('<div class="grader-check">') and "0 / 10" in proc.stdout
    text = subprocess.run([sys.executable, "-m", "grader", "check", str(lesson_path(LESSON))],
                          capture_output=True, text=True, cwd=ROOT, env=_env(), timeout=300)
    hints = [line.strip() for line in text.stdout.splitlines() if "hint:" in line]
    assert len(hints) == 3 and all(hint in html.unescape(proc.stdout) for hint in hints)
