"""nbgrader end to end in a temporary copy of the course: generate_assignment, autograde
a correct and a blank submission of every lesson, export; nbgrader's scores equal
``grader check``'s, and those of ``grade`` for the term's class (tests/conftest.py)."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys

import pytest
from support import ROOT, lessons

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def run(args: list[str], cwd, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


NBGRADER = [sys.executable, "-m", "nbgrader"]
SUBMISSIONS = {"alice": "solutions", "bob": "lessons"}  # correct, blank


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> dict:
    """Every lesson at once, as an instructor would release a term (nbgrader's ``*``: one
    ``generate_assignment``, one ``autograde`` and one ``export`` for the whole course):
    alice hands in each reference notebook, bob each blank one."""
    tmp = tmp_path_factory.mktemp("nbgrader-course")
    course = tmp / "course"
    shutil.copytree(ROOT / "solutions", course / "solutions")
    shutil.copy(ROOT / "nbgrader_config.py", course)
    run([*NBGRADER, "generate_assignment", "*", "--force"], course)
    for lesson in lessons():
        for student, source in SUBMISSIONS.items():
            folder = course / "submitted" / student / lesson
            folder.mkdir(parents=True)
            shutil.copy(course / source / lesson / f"{lesson}.ipynb", folder / f"{lesson}.ipynb")
    run([*NBGRADER, "autograde", "*", "--force"], course)
    run([*NBGRADER, "export", "--to", str(tmp / "grades.csv")], course)
    with open(tmp / "grades.csv", newline="") as f:
        scores = {(row["assignment"], row["student_id"]): float(row["raw_score"])
                  for row in csv.DictReader(f)}
    return {"course": course, "scores": scores}


@pytest.mark.parametrize("lesson", lessons())
def test_nbgrader_autograde_agrees_with_grader_check(course, warm_check_env, lesson: str) -> None:
    scores = course["scores"]
    for student in SUBMISSIONS:
        notebook = course["course"] / "submitted" / student / lesson / f"{lesson}.ipynb"
        proc = run([sys.executable, "-m", "grader", "check", str(notebook), "--format", "json"],
                   ROOT, warm_check_env)
        assert scores[lesson, student] == json.loads(proc.stdout)["score"], student
    assert scores[lesson, "alice"] > 0 and scores[lesson, "bob"] == 0


def test_nbgraders_sandboxed_autograde_gives_grades_scores(term_nbgrader, term) -> None:
    """nbgrader's autograde of the term's class grades in the course's sandbox
    (grader.integrations.nbgrader.sandbox): every student's raw score is `grade`'s, the hang and the
    rewritten test cell included."""
    got = {s: float(r["raw_score"]) for s, r in term_nbgrader["export"].items()}
    want = {s: float(term["rows"][s]["raw_score"] or term["rows"][s]["score"]) for s in got}
    assert got == want
