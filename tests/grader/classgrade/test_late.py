"""Late work (grader/classgrade/late.py, grader/integrations/nbgrader/late.py) in the term's class: ``grade``'s late
columns and penalties, ``deadlines.toml`` found beside the class wherever ``grade`` runs,
and nbgrader's autograde applying the same penalty through the course's plugin."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import DEADLINES, ROOT, rows
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


@pytest.mark.filterwarnings(r"ignore:Object of type <Submitted\w+> not in session")
def test_deadlines_before_the_lesson_is_generated_and_after_it_is_graded(tmp_path) -> None:
    """``deadlines`` at both ends of a term, on nbgrader's gradebook alone: a submission row
    written before the lesson's notebooks exist gets their rows once they do (what the
    course's generate_assignment and autograde do), and an extension granted after grading
    changes the late penalty already in the gradebook (what nbgrader's export reads)."""
    from nbgrader.api import Gradebook

    from grader.integrations.nbgrader.late import complete_submission, write_to_gradebook

    db, toml = f"sqlite:///{tmp_path / 'gradebook.db'}", tmp_path / "deadlines.toml"
    toml.write_text(DEADLINES, encoding="utf-8")
    said = write_to_gradebook(str(toml), db, "course", [LESSON])  # before generate_assignment
    assert f"alice: {LESSON} extended by 2 days" in said
    with Gradebook(db, "course") as gb:  # what generate_assignment's SaveCells then writes
        gb.add_notebook(LESSON, LESSON)
        gb.add_grade_cell("test_softmax", LESSON, LESSON, max_score=4.0, cell_type="code")
        gb.add_solution_cell("softmax", LESSON, LESSON)
        alice = gb.find_submission(LESSON, "alice")
        assert complete_submission(gb, alice) == 3  # her notebook, its grade, its comment
        gb.db.commit()
        assert complete_submission(gb, alice) == 0
        gb.find_comment("softmax", LESSON, LESSON, "alice")  # autograde's SaveAutoGrades needs them
        gb.add_student("hank")  # graded 4 of 4, 1 day 11 hours late: 20% off
        hank = gb.add_submission(LESSON, "hank", timestamp="2026-03-04 10:00:00 UTC")
        grade = gb.find_grade("test_softmax", LESSON, LESSON, "hank")
        grade.auto_score, hank.notebooks[0].late_submission_penalty = 4.0, 0.8
        gb.db.commit()
    toml.write_text(DEADLINES.replace('alice = "2 days"', 'alice = "2 days"\nhank = "2 days"'),
                    encoding="utf-8")
    said = write_to_gradebook(str(toml), db, "course", [LESSON])
    assert f"hank: {LESSON} late penalty 0.8 -> 0 points ({LESSON}, graded before this change)" in said
    with Gradebook(db, "course") as gb:
        assert gb.find_submission(LESSON, "hank").late_submission_penalty == 0.0
