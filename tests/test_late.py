"""Late work (grader/classgrade/late.py, grader/integrations/nbgrader/classgrade/late.py) in the term's class: ``grade``'s late
columns and penalties, ``deadlines.toml`` found beside the class wherever ``grade`` runs,
and nbgrader's autograde applying the same penalty through the course's plugin."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DEADLINES, ROOT, rows
from term_class import LESSON

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_late_work_columns(term) -> None:
    alice, hank, bob = (term["rows"][s] for s in ("alice", "hank", "bob"))
    assert (hank["raw_score"], hank["late_submission_penalty"], hank["score"]) == ("10.0", "2.0", "8.0")
    assert "1 day 11 hours late" in hank["message"] and "penalty 20%" in hank["message"]
    assert alice["duedate"] == "2026-03-04 22:59:00 UTC"  # her extension
    assert (alice["late_submission_penalty"], alice["score"]) == ("0.0", "10.0")
    assert bob["timestamp"] == "" and bob["late_submission_penalty"] == "0.0"
    page = (term["out"] / "feedback" / "hank" / f"{LESSON}.html").read_text()
    # in the course's timezone, named (issue 50: a Beijing class read its deadlines in UTC)
    assert ("1 day 11 hours late (submitted 2026-03-04 11:00:00 Europe/Paris, due 2026-03-02 "
            "23:59:00 Europe/Paris)") in page
    # the page's score is the gradebook's, the raw score beside it (issue 24, item 5)
    assert 'Score: <b class="points">8 / 10</b> (raw score 10, late penalty 2)' in page


#: ``python -m grader`` with the course's checkout, where ``grade`` also looks for
#: ``deadlines.toml``, taken to be the folder named first (issue 49: not the instructor's clone)
WITH_CHECKOUT = ("import sys; from pathlib import Path; import grader.classgrade.late as late; "
                 "late.COURSE_ROOT = Path(sys.argv.pop(1)); from grader.cli import main; "
                 "sys.exit(main())")


def test_deadlines_are_found_beside_the_class_whatever_the_folder(term, tmp_path) -> None:
    """Issue 24: run from another folder, `grade` silently skipped the course's penalties."""
    course, elsewhere, checkout = tmp_path / "course", tmp_path / "home", tmp_path / "checkout"
    elsewhere.mkdir()
    checkout.mkdir()
    shutil.copytree(term["root"] / "submitted" / "hank", course / "submitted" / "hank")
    (course / "deadlines.toml").write_text(DEADLINES, encoding="utf-8")

    def run(out: Path) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", WITH_CHECKOUT, str(checkout), "grade",
                               str(course / "submitted"), "--lesson", LESSON, "--out", str(out)],
                              cwd=elsewhere, capture_output=True, text=True, timeout=300,
                              env=dict(os.environ, PYTHONPATH=str(ROOT)))

    found = run(tmp_path / "out")
    assert found.returncode == 0, found.stderr
    assert f"late work: {course / 'deadlines.toml'}" in found.stdout
    assert rows(tmp_path / "out")["hank"]["score"] == "8.0"
    (course / "deadlines.toml").unlink()
    none = run(tmp_path / "out-none")
    assert none.returncode == 0, none.stderr
    assert "grader: no deadlines.toml (looked in " in none.stderr
    assert f"{course}," in none.stderr and "--deadlines none says so" in none.stderr
    assert f"{checkout})" in none.stderr
    assert rows(tmp_path / "out-none")["hank"]["score"] == "10.0"


def test_nbgrader_agrees_on_hangs_and_late_work(term_nbgrader) -> None:
    got = {s: (r["raw_score"], r["late_submission_penalty"], r["score"])
           for s, r in term_nbgrader["export"].items()}
    assert 6 <= float(got["bob"][0]) < 10 and got["bob"][1] == "0.0"  # the hang: softmax only
    assert got["hank"] == ("10.0", "2.0", "8.0")
    assert got["alice"] == ("10.0", "0.0", "10.0")  # late, within her extension
    assert got["carol"][0] == "0.0"
