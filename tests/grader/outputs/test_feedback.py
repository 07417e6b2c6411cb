"""Feedback back to the students through nbgrader's exchange (grader/integrations/nbgrader/feedback.py,
``return-feedback --nbgrader``, grader/outputs/feedback.py) in a copy of the term's autograded
nbgrader course. ``return-feedback --to``: tests/grader/outputs/test_gradebook.py."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from support import ROOT, copy_of, grade, nbgrader
from term_class import LESSON, SOLUTION

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_feedback_through_the_exchange(term_nbgrader, tmp_path) -> None:
    """nbgrader's own feedback, and grade's pages through the same release_feedback, in a
    copy of the autograded class."""
    course = copy_of(term_nbgrader["course"], tmp_path)
    exchange, me = tmp_path / "exchange", tmp_path / "student"
    me.mkdir()
    root = f"--Exchange.root={exchange}"
    nbgrader(["release_assignment", LESSON, root, "--force"], course)
    nbgrader(["fetch_assignment", LESSON, "--course", "attention-course", root], me)
    shutil.copy(SOLUTION, me / LESSON / f"{LESSON}.ipynb")
    nbgrader(["submit", LESSON, "--course", "attention-course", root], me)
    nbgrader(["collect", LESSON, root], course)
    user = next(p.name for p in (course / "submitted").iterdir()
                if (p / LESSON / "submission_secret.txt").is_file())
    nbgrader(["autograde", LESSON, "--student", user], course)
    nbgrader(["generate_feedback", LESSON, "--student", user], course)
    nbgrader(["release_feedback", LESSON, "--student", user, root], course)
    nbgrader(["fetch_feedback", LESSON, "--course", "attention-course", root], me)
    pages = list((me / LESSON / "feedback").rglob(f"{LESSON}.html"))
    assert pages and "10.0" in pages[0].read_text()

    out = tmp_path / "out"
    grade(course / "submitted", out, "--student", user, "--deadlines", "none")
    proc = subprocess.run([sys.executable, "-m", "grader", "return-feedback", str(out),
                           "--nbgrader", str(course)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0 and "not copied" in proc.stdout  # zip/LMS students: no secret
    nbgrader(["release_feedback", LESSON, "--student", user, root], course)
    shutil.rmtree(me / LESSON / "feedback")
    nbgrader(["fetch_feedback", LESSON, "--course", "attention-course", root], me)
    page = next((me / LESSON / "feedback").rglob(f"{LESSON}.html")).read_text()
    assert f"Student: <b>{user}</b>" in page and "Graded: 10 of 10 points." in page

    # the whole class at once, most of it handed in without the exchange (no secret):
    # nbgrader 0.9.6 stopped at the first such page; the course's plugin names them instead
    nbgrader(["generate_feedback", LESSON], course)
    proc = nbgrader(["release_feedback", LESSON, root], course)
    said = proc.stdout + proc.stderr
    assert "did not come through the exchange" in said and "alice" in said and "FileNotFoundError" not in said
    assert f"Releasing feedback for student '{user}'" in said
