"""A term with a class (issue 18), end to end through ``python -m grader grade`` and nbgrader.

One class of lesson 01 holds every case an instructor meets: the reference answers, a
``softmax`` that loops forever for ``axis=0``, a blank notebook, an LMS-renamed file
(``... (1).ipynb``), a zip extracted whole (nested folders, ``__MACOSX``), two different
worked notebooks, a truncated notebook, a late one (nbgrader's ``timestamp.txt``), an empty
folder, an untouched notebook beside a worked copy, and one whose locked test cell was
changed. The same class goes through nbgrader (zip_collect of a Canvas-style zip, late
penalty through the course's plugin, the warnings of its log counted).
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from coursekit import catalogue

sys.path.insert(0, str(ROOT / "docs" / "examples"))
from term_class import LESSON, SOLUTION, build_class, canvas_zip, put  # noqa: E402

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

DEADLINES = (ROOT / "docs" / "examples" / "deadlines.toml").read_text(encoding="utf-8")


def grade(submitted: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, "-m", "grader", "grade", str(submitted), "--lesson", LESSON, "--out",
         str(out), "--jobs", "2", "--call-timeout", "3", *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def rows(out: Path) -> dict[str, dict[str, str]]:
    with open(out / "grades.csv", newline="", encoding="utf-8") as f:
        return {row["student_id"]: row for row in csv.DictReader(f)}


@pytest.fixture(scope="module")
def term(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("term")
    build_class(root / "submitted")
    (root / "deadlines.toml").write_text(DEADLINES, encoding="utf-8")
    first = grade(root / "submitted", root / "out", "--deadlines", str(root / "deadlines.toml"))
    return {"root": root, "out": root / "out", "first": first, "rows": rows(root / "out")}


def test_every_case_gets_a_clear_status(term) -> None:
    got = {s: (r["status"], float(r["score"])) for s, r in term["rows"].items()}
    assert 6 <= got.pop("bob")[1] < 10  # below: the hung call (hidden inputs vary by run)
    assert got == {
        "alice": ("ok", 10.0), "carol": ("ok", 0.0), "dave": ("ok", 10.0),
        "erin": ("ok", 10.0), "frank": ("ambiguous", 0.0), "gina": ("unreadable", 0.0),
        "hank": ("ok", 8.0), "ivan": ("missing", 0.0), "judy": ("ok", 10.0),
        "mallory": ("ok", 10.0)}  # the grader never runs the test cells a student can edit
    message = {s: r["message"] for s, r in term["rows"].items()}
    assert f"Graded `{LESSON}/{LESSON} (1).ipynb` (not at nbgrader's name" in message["dave"]
    assert f"`{LESSON}/submission/{LESSON}/{LESSON}.ipynb`" in message["erin"]
    assert f"`{LESSON}/{LESSON}-Copy1.ipynb`, `{LESSON}/{LESSON}.ipynb`; none was graded" \
        in message["frank"]
    assert "--student" not in message["frank"]  # the instructor's step is in grade's output
    assert "ambiguous: frank handed in several different notebooks" in term["first"].stdout
    assert "not valid JSON" in message["gina"]
    assert f"no notebook of {LESSON} in ivan/" in message["ivan"]
    assert f"Graded `{LESSON}/{LESSON}-Copy1.ipynb`, the notebook worked on; untouched: " \
        f"`{LESSON}/{LESSON}.ipynb`" in message["judy"]
    result = json.loads((term["out"] / "results" / "dave.json").read_text())
    assert set(result) == {"notebook", "lesson", "score", "max_score", "exercises", "status"}
    assert result["notebook"] == f"dave/{LESSON}/{LESSON} (1).ipynb"
    record = json.loads((term["out"] / "records" / "dave.json").read_text())
    assert record["submission"]["file"] == f"dave/{LESSON}/{LESSON} (1).ipynb"


def test_a_hung_call_costs_only_its_exercise(term) -> None:
    bob = term["rows"]["bob"]
    assert (float(bob["dot_scores"]), float(bob["attention"])) == (2.0, 4.0)
    assert 0 <= float(bob["softmax"]) < 4
    assert "`softmax` failed (softmax(array float64 [" in bob["message"]
    assert "the exercises after it were graded in a fresh run" in bob["message"]
    feedback = (term["out"] / "feedback" / "bob" / f"{LESSON}.html").read_text()
    assert "gave no answer within 3 s: an infinite loop" in feedback
    assert "grade(" not in feedback and "BEGIN HIDDEN" not in feedback


def test_check_grades_the_hung_notebook_the_same(term) -> None:
    notebook = term["root"] / "submitted" / "bob" / LESSON / f"{LESSON}.ipynb"
    proc = subprocess.run([sys.executable, "-m", "grader", "check", str(notebook), "--format",
                           "json", "--call-timeout", "3"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    result = json.loads(proc.stdout)
    points = {x["name"]: x["points"] for x in result["exercises"]}
    assert points["attention"] == 4.0 and points["dot_scores"] == 2.0
    assert 0 <= points["softmax"] < 4


def test_a_notebook_that_hangs_while_it_loads_stays_timeout(tmp_path) -> None:
    nb = catalogue.read_json(SOLUTION)
    nb["cells"].append({"cell_type": "code", "metadata": {}, "outputs": [],
                        "execution_count": None, "source": "while True:\n    pass\n"})
    put(tmp_path / "submitted" / "zoe" / LESSON / f"{LESSON}.ipynb", nb)
    grade(tmp_path / "submitted", tmp_path / "out", "--timeout", "5")
    zoe = rows(tmp_path / "out")["zoe"]
    assert (zoe["status"], float(zoe["score"])) == ("timeout", 0.0)


def test_late_work_columns(term) -> None:
    alice, hank, bob = (term["rows"][s] for s in ("alice", "hank", "bob"))
    assert (hank["raw_score"], hank["late_submission_penalty"], hank["score"]) == ("10.0", "2.0", "8.0")
    assert "1 day 11 hours late" in hank["message"] and "penalty 20%" in hank["message"]
    assert alice["duedate"] == "2026-03-04 22:59:00 UTC"  # her extension
    assert (alice["late_submission_penalty"], alice["score"]) == ("0.0", "10.0")
    assert bob["timestamp"] == "" and bob["late_submission_penalty"] == "0.0"
    page = (term["out"] / "feedback" / "hank" / f"{LESSON}.html").read_text()
    assert "1 day 11 hours late (submitted 2026-03-04 10:00:00 UTC" in page  # not "utc"
    # the page's score is the gradebook's, the raw score beside it (issue 24, item 5)
    assert "Score: <b>8 / 10</b> (raw score 10, late penalty 2)" in page


def test_deadlines_are_found_beside_the_class_whatever_the_folder(term, tmp_path) -> None:
    """Issue 24: run from another folder, `grade` silently skipped the course's penalties."""
    course, elsewhere = tmp_path / "course", tmp_path / "home"
    elsewhere.mkdir()
    shutil.copytree(term["root"] / "submitted" / "hank", course / "submitted" / "hank")
    (course / "deadlines.toml").write_text(DEADLINES, encoding="utf-8")

    def run(out: Path) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "grader", "grade", str(course / "submitted"),
                               "--lesson", LESSON, "--out", str(out)], cwd=elsewhere,
                              capture_output=True, text=True, timeout=300)

    found = run(tmp_path / "out")
    assert found.returncode == 0, found.stderr
    assert f"late work: {course / 'deadlines.toml'}" in found.stdout
    assert rows(tmp_path / "out")["hank"]["score"] == "8.0"
    (course / "deadlines.toml").unlink()
    none = run(tmp_path / "out-none")
    assert none.returncode == 0, none.stderr
    assert "grader: no deadlines.toml (looked in " in none.stderr
    assert f"{course}," in none.stderr and "--deadlines none says so" in none.stderr
    assert rows(tmp_path / "out-none")["hank"]["score"] == "10.0"


def test_reruns_regrade_what_changed_and_what_is_asked(term, tmp_path) -> None:
    root, out = tmp_path, tmp_path / "out"  # a copy: the other tests read the term as graded
    shutil.copytree(term["root"] / "submitted", root / "submitted")
    shutil.copytree(term["out"], out)
    again = grade(root / "submitted", out)
    assert "graded 0 submission(s), kept 11 earlier result(s)" in again.stdout
    shutil.copy(SOLUTION, root / "submitted" / "carol" / LESSON / f"{LESSON}.ipynb")
    changed = grade(root / "submitted", out)
    assert "graded 1 submission(s) (1 changed since graded), kept 10" in changed.stdout
    assert rows(out)["carol"]["score"] == "10.0"
    chosen = grade(root / "submitted", out, "--student", "alice", "--student", "dave")
    assert "graded 2 submission(s), kept 9" in chosen.stdout
    run = json.loads((out / "run.json").read_text())
    assert run["results_of_this_run"] == ["alice", "dave"]
    assert run["kept_results_made_otherwise"] == {}
    record = json.loads((out / "records" / "carol.json").read_text())
    assert record["submission"]["sha256"].startswith("sha256:")
    assert record["graded_with"]["isolation"] == "auto" and "+" in record["graded_with"]["grader"]
    other = grade(root / "submitted", out, "--student", "ivan", "--isolation", "none")
    assert "graded 1 submission(s)" in other.stdout
    after = grade(root / "submitted", out)
    assert "kept 1 result(s) made under other settings" in after.stdout and "ivan" in after.stdout
    assert json.loads((out / "run.json").read_text())["kept_results_made_otherwise"] == {
        "ivan": f"isolation none, grader {record['graded_with']['grader']}"}
    bad = subprocess.run([sys.executable, "-m", "grader", "grade", str(root / "submitted"),
                          "--lesson", LESSON, "--out", str(out), "--student", "nobody"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "no student folder nobody" in bad.stderr
    assert (out / ".gitignore").read_text().strip().endswith("*")


def test_gradebook_and_returned_feedback(term, tmp_path) -> None:
    roster = tmp_path / "roster.csv"
    roster.write_text("Student,ID,SIS User ID,SIS Login ID,Section\n"
                      '"Lovelace, Ada",1,S1,alice,A\n"Babbage, Charles",2,S2,bob,A\n'
                      '"=Sum, Eve",3,S3,nobody,A\n', encoding="utf-8")
    book = tmp_path / "book.csv"
    proc = subprocess.run([sys.executable, "-m", "grader", "gradebook", str(term["out"]),
                           "--roster", str(roster), "--out", str(book), "--weights", "01=2"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert f"1 of {len(catalogue.lessons())} lessons graded" in proc.stdout and "graded, not in the roster" in proc.stdout
    with open(book, newline="", encoding="utf-8") as f:
        table = list(csv.reader(f))
    header, by_login = table[0], {r[1]: r for r in table[1:]}
    from grader.gradebook import lesson_points
    points = lesson_points()
    assert [h.split(" (")[0] for h in header[3:3 + len(points)]] == list(points)
    assert by_login["alice"][-4:] == ["10", "10", "100.0", "100.0"]
    assert by_login["bob"][3] == term["rows"]["bob"]["score"].removesuffix(".0")
    assert by_login["nobody"][0] == "'=Sum, Eve" and by_login["nobody"][3] == "0"
    # the LMS import of the same term (Canvas): the gradebook's scores, late penalties in
    imported = tmp_path / "canvas.csv"
    proc = subprocess.run([sys.executable, "-m", "grader", "lms", str(term["out"]), "--roster",
                           str(roster), "--to", "canvas", "--key", "login", "--out", str(imported)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    with open(imported, newline="", encoding="utf-8") as f:
        rows_in = {r[3]: r for r in list(csv.reader(f))[2:]}
    assert set(rows_in) == {"alice", "bob"}  # "nobody" was graded nowhere: not imported
    assert float(rows_in["alice"][-1]) == 10.0
    assert float(rows_in["bob"][-1]) == float(term["rows"]["bob"]["score"])
    back = tmp_path / "returned"
    proc = subprocess.run([sys.executable, "-m", "grader", "return-feedback", str(term["out"]),
                           "--to", str(back)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and (back / "bob" / f"{LESSON}.html").is_file()


# --- nbgrader -----------------------------------------------------------------------------

def nbgrader(args: list[str], course: Path, ok: bool = True, **env: str) -> subprocess.CompletedProcess:
    proc = subprocess.run(["nbgrader", *args], cwd=course, capture_output=True, text=True,
                          timeout=900, env=dict(os.environ, **env))
    if ok:
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def course(term, tmp_path_factory) -> Path:
    course = tmp_path_factory.mktemp("nbgrader") / "course"
    shutil.copytree(ROOT / "solutions" / LESSON, course / "solutions" / LESSON)
    shutil.copy(ROOT / "nbgrader_config.py", course)
    (course / "deadlines.toml").write_text(DEADLINES, encoding="utf-8")
    nbgrader(["generate_assignment", LESSON, "--force"], course)
    build_class(course.parent / "class")  # as handed in (the rerun test changes carol's)
    for student in ("alice", "bob", "carol", "gina", "hank", "mallory"):
        shutil.copytree(course.parent / "class" / student, course / "submitted" / student)
    proc = subprocess.run([sys.executable, "-m", "grader", "deadlines"], cwd=course,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "alice: 01_attention_by_hand extended by 2 days" in proc.stdout
    return course


@pytest.fixture(scope="module")
def autograded(course) -> dict:
    log = nbgrader(["autograde", LESSON], course, ok=False, COURSE_CALL_TIMEOUT="3")
    nbgrader(["export", "--to", "export.csv"], course)
    with open(course / "export.csv", newline="", encoding="utf-8") as f:
        exported = {row["student_id"]: row for row in csv.DictReader(f)}
    return {"log": log.stdout + log.stderr, "export": exported}


def test_nbgrader_agrees_on_hangs_and_late_work(autograded, term) -> None:
    got = {s: (r["raw_score"], r["late_submission_penalty"], r["score"])
           for s, r in autograded["export"].items()}
    assert 6 <= float(got["bob"][0]) < 10 and got["bob"][1] == "0.0"  # the hang: softmax only
    assert got["hank"] == ("10.0", "2.0", "8.0")
    assert got["alice"] == ("10.0", "0.0", "10.0")  # late, within her extension
    assert got["carol"][0] == "0.0"


def test_nbgraders_sandboxed_autograde_gives_grades_scores(autograded, term) -> None:
    """nbgrader's autograde grades in the course's sandbox (grader.nbgrader_sandbox): every
    student's raw score is `grade`'s, the hang and the rewritten test cell included."""
    got = {s: float(r["raw_score"]) for s, r in autograded["export"].items()}
    want = {s: float(term["rows"][s]["raw_score"] or term["rows"][s]["score"]) for s in got}
    assert got == want


def test_the_terms_report(term) -> None:
    """`report` on the term graded with deadlines (issue 24: it crashed on the late columns)."""
    from grader.class_report import load, to_look_at

    proc = subprocess.run([sys.executable, "-m", "grader", "report", str(term["out"])], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "11 student(s)" in proc.stdout and "status: ok 8, ambiguous 1, unreadable 1, missing 1" in proc.stdout
    data = load(term["out"])
    assert {s.student_id: s.score for s in data.students}["hank"] == 8.0  # after the penalty
    why = {row["student"]: " ".join(row["reasons"]) for row in to_look_at(data, {})}
    assert {"frank", "gina", "ivan"} <= set(why)


def test_nbgrader_on_a_truncated_notebook(autograded) -> None:
    """What the instructor sees: an error in autograde's log, no autograded notebook, and
    0.0 in the export, as for a blank notebook; ``grade`` says ``unreadable``."""
    assert "NotJSONError" in autograded["log"] or "Notebook does not appear to be JSON" in \
        autograded["log"]
    assert autograded["export"]["gina"]["raw_score"] == "0.0"


def test_nbgrader_log_warns_only_about_real_tampering(autograded) -> None:
    """No false checksum alarms (jupyter/nbgrader#1961), no SQLAlchemy warnings, no kernel
    TCP warnings: one warning line per real problem."""
    log = autograded["log"]
    warnings = [line for line in log.splitlines() if "WARNING" in line or "Warning" in line]
    checksum = [w for w in warnings if "Attribute 'checksum'" in w]
    assert len(checksum) == 1 and "test_softmax" in checksum[0]  # mallory's changed test cell
    assert not [w for w in warnings if "SAWarning" in w or "without encryption" in w]
    late = [w for w in warnings if "seconds late" in w or "Late submission penalty" in w]
    assert late and all("hank" in w or "Late submission penalty: 2.0" in w for w in late)
    # gina's truncated notebook: errors naming her (nbgrader warns "Removing failed ..." only
    # when it had written something for her, which depends on the course's notebook names)
    truncated = [w for w in warnings if "Removing failed" in w]
    assert all("/gina/" in w for w in truncated), truncated
    errors = [line for line in log.splitlines() if "[AutogradeApp | ERROR]" in line]
    assert any("for student 'gina'" in e for e in errors), errors
    assert all("gina" in e or "Please see the" in e or e.endswith("Traceback (most recent call last):")
               for e in errors), errors
    sandbox = [w for w in warnings if "grader: sandboxed with" in w]  # a missing protection
    rest = [w for w in warnings if w not in checksum + late + truncated + sandbox]
    assert rest == [], rest


def copy_of(course: Path, tmp_path: Path) -> Path:
    """A copy of the module's course, for a test that adds students or grades to it."""
    shutil.copytree(course, tmp_path / "course", symlinks=True)
    return tmp_path / "course"


def test_zip_collect_of_a_canvas_download(course, tmp_path) -> None:
    course = copy_of(course, tmp_path)
    canvas_zip(course / "downloaded" / LESSON / "archive" / "submissions.zip")
    proc = nbgrader(["zip_collect", LESSON], course)
    assert "Regular expression not provided" not in proc.stdout + proc.stderr
    for student in ("123456", "234567", "345678"):
        assert (course / "submitted" / student / LESSON / f"{LESSON}.ipynb").is_file(), student


def test_feedback_through_the_exchange(autograded, course, term, tmp_path) -> None:
    """nbgrader's own feedback, and grade's pages through the same release_feedback, in a
    copy of the autograded class."""
    course = copy_of(course, tmp_path)
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


def test_the_readme_shows_the_points_of_every_lesson() -> None:
    from grader.gradebook import point_table

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    shown = text.split("<!-- points-table -->\n", 1)[1].split("\n<!-- /points-table -->", 1)[0]
    assert shown == point_table()
