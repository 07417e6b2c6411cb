"""nbgrader end to end in a temporary copy of the course: generate_assignment, autograde
a correct and a blank submission, export; nbgrader's scores equal ``grader check``'s, and
those of ``grade`` for the term's class (tests/conftest.py)."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT, lessons

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def run(args: list[str], cwd) -> subprocess.CompletedProcess:
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


@pytest.mark.parametrize("lesson", lessons())
def test_nbgrader_autograde_agrees_with_grader_check(tmp_path, lesson: str) -> None:
    course = tmp_path / "course"
    shutil.copytree(ROOT / "solutions", course / "solutions")
    shutil.copy(ROOT / "nbgrader_config.py", course)
    run(["nbgrader", "generate_assignment", lesson, "--force"], course)
    submissions = {
        "alice": course / "solutions" / lesson / f"{lesson}.ipynb",  # correct
        "bob": course / "lessons" / lesson / f"{lesson}.ipynb",      # blank
    }
    for student, notebook in submissions.items():
        folder = course / "submitted" / student / lesson
        folder.mkdir(parents=True)
        shutil.copy(notebook, folder / f"{lesson}.ipynb")
    run(["nbgrader", "autograde", lesson, "--force"], course)
    run(["nbgrader", "export", "--to", str(tmp_path / "grades.csv")], course)
    with open(tmp_path / "grades.csv", newline="") as f:
        nbgrader_scores = {row["student_id"]: float(row["raw_score"]) for row in csv.DictReader(f)}

    for student in submissions:
        notebook = course / "submitted" / student / lesson / f"{lesson}.ipynb"
        proc = run([sys.executable, "-m", "grader", "check", str(notebook), "--format", "json"], ROOT)
        assert nbgrader_scores[student] == json.loads(proc.stdout)["score"], student
    assert nbgrader_scores["alice"] > 0 and nbgrader_scores["bob"] == 0


def test_nbgraders_sandboxed_autograde_gives_grades_scores(term_nbgrader, term) -> None:
    """nbgrader's autograde of the term's class grades in the course's sandbox
    (grader.integrations.nbgrader.sandbox): every student's raw score is `grade`'s, the hang and the
    rewritten test cell included."""
    got = {s: float(r["raw_score"]) for s, r in term_nbgrader["export"].items()}
    want = {s: float(term["rows"][s]["raw_score"] or term["rows"][s]["score"]) for s in got}
    assert got == want
