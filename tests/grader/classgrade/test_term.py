"""An instructor's term through both graders, in the term's own order (issue 49): every due
date and extension written before the lesson is generated, a gradebook row left by an older
``deadlines`` (made before the lesson's notebooks existed), an extension granted after
grading, a notebook that hoards memory, notebooks nbgrader cannot see (a folder inside the
folder; the Chinese edition in a course of the English one). ``grade`` and nbgrader's
sandboxed autograde must agree on every row nbgrader grades, and nbgrader's export must
have a row, saying why, for every other student of the class."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import DEADLINES, ROOT, hoarding, nbgrader, rows

from coursekit import catalogue

pytestmark = [pytest.mark.e2e, pytest.mark.slow,  # nbgrader 0.9 with SQLAlchemy 2: nbgrader_config.py says why
              pytest.mark.filterwarnings(r"ignore:Object of type <Submitted\w+> not in session")]

LESSON = "01_attention_by_hand"
LATE = "2026-03-04 10:00:00.000000 UTC"  # after the example due date: 1 day 11 hours late
CLASS = ("alice", "erin", "hank", "hog", "ivy", "zoe")


def _command(args: list[str], cwd: Path) -> str:
    proc = subprocess.run([sys.executable, "-m", "grader", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def _hand_in(submitted: Path) -> None:
    solution, chinese = catalogue.get(LESSON).solution(), catalogue.get(LESSON).solution("zh")
    for student in ("alice", "hank", "ivy"):  # the reference answers; alice and hank late
        (submitted / student / LESSON).mkdir(parents=True)
        shutil.copy(solution, submitted / student / LESSON / f"{LESSON}.ipynb")
    for student in ("alice", "hank"):
        (submitted / student / LESSON / "timestamp.txt").write_text(LATE, encoding="utf-8")
    (submitted / "hog" / LESSON).mkdir(parents=True)
    (submitted / "hog" / LESSON / f"{LESSON}.ipynb").write_text(json.dumps(hoarding(solution)),
                                                                 encoding="utf-8")
    (submitted / "erin" / LESSON / "submission").mkdir(parents=True)  # a zip extracted whole
    shutil.copy(solution, submitted / "erin" / LESSON / "submission" / f"{LESSON}.ipynb")
    (submitted / "zoe" / LESSON).mkdir(parents=True)
    shutil.copy(chinese, submitted / "zoe" / LESSON / f"{LESSON}.zh.ipynb")


def _export(course: Path, name: str) -> dict[str, dict[str, str]]:
    nbgrader(["export", "--to", name], course)
    with open(course / name, newline="", encoding="utf-8") as f:
        return {row["student_id"]: row for row in csv.DictReader(f)}


@pytest.fixture(scope="module")
def replay(tmp_path_factory) -> dict:
    from nbgrader.api import Gradebook, SubmittedAssignment

    course = tmp_path_factory.mktemp("term-replay") / "course"
    shutil.copytree(ROOT / "solutions" / LESSON, course / "solutions" / LESSON)
    shutil.copy(ROOT / "nbgrader_config.py", course)
    (course / "deadlines.toml").write_text(DEADLINES, encoding="utf-8")
    said = {"before": _command(["deadlines"], course)}
    nbgrader(["generate_assignment", LESSON, "--force"], course)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", "attention-course") as gb:
        # ivy's row as the older `deadlines` left it: made before generate, no notebook rows
        gb.update_or_create_student("ivy")
        gb.db.add(SubmittedAssignment(assignment=gb.find_assignment(LESSON),
                                      student=gb.find_student("ivy")))
        gb.db.commit()
    _hand_in(course / "submitted")
    log = nbgrader(["autograde", LESSON], course, ok=False)
    first = _export(course, "first.csv")
    _command(["grade", "submitted", "--lesson", LESSON, "--out", "out", "--jobs", "2",
              "--deadlines", "deadlines.toml"], course)
    graded = rows(course / "out")
    # hank asked in time, the instructor answered after grading
    (course / "deadlines.toml").write_text(DEADLINES.replace('alice = "2 days"',
                                                             'alice = "2 days"\nhank = "2 days"'))
    said["after"] = _command(["deadlines"], course)
    _command(["grade", "submitted", "--lesson", LESSON, "--out", "out", "--jobs", "2",
              "--deadlines", "deadlines.toml"], course)
    return {"log": log.stdout + log.stderr, "said": said, "first": first, "graded": graded,
            "second": _export(course, "second.csv"), "regraded": rows(course / "out")}


def _numbers(row: dict[str, str]) -> tuple[float, float, float]:
    raw = row["raw_score"] or row["score"]
    return float(raw), float(row["late_submission_penalty"] or 0), float(row["score"])


def test_deadlines_written_before_generate_keep_every_extension(replay) -> None:
    first = replay["first"]
    assert _numbers(first["alice"]) == (10.0, 0.0, 10.0)  # late, within her extension
    assert _numbers(first["hank"]) == (10.0, 2.0, 8.0)
    assert _numbers(first["ivy"]) == (10.0, 0.0, 10.0)  # the older deadlines' row, completed
    assert "MissingEntry" not in replay["log"]
    assert "alice: 01_attention_by_hand extended by 2 days" in replay["said"]["before"]
    assert "seconds late" not in "".join(line for line in replay["log"].splitlines() if "alice" in line)


def test_every_student_of_the_class_has_a_row_in_nbgraders_export(replay) -> None:
    first = replay["first"]
    assert sorted(first) == sorted(replay["graded"]) == sorted(CLASS)
    for student in ("erin", "zoe"):  # grade finds their notebooks; nbgrader does not look there
        assert first[student]["status"] == "unseen" and first[student]["score"] == "0.0"
        assert replay["graded"][student]["status"] == "ok"
    assert "`01_attention_by_hand/submission/01_attention_by_hand.ipynb`" in first["erin"]["message"]
    assert "found `01_attention_by_hand/01_attention_by_hand.zh.ipynb`. The course holds the en " \
           "edition only" in first["zoe"]["message"]


def test_both_graders_agree_on_every_row_nbgrader_grades(replay) -> None:
    for name, export, graded in (("first", replay["first"], replay["graded"]),
                                 ("after the extension", replay["second"], replay["regraded"])):
        seen = [s for s, row in export.items() if row["status"] == "ok"]
        assert sorted(seen) == ["alice", "hank", "hog", "ivy"], name
        assert {s: _numbers(export[s]) for s in seen} == {s: _numbers(graded[s]) for s in seen}, name


def test_a_memory_hog_gets_memory_and_nothing_in_both_graders(replay) -> None:
    """512 MiB more at every call of softmax: the limit is reached in a check, at a point
    that depends on the run; the verdict does not."""
    for graded in (replay["graded"], replay["regraded"]):
        assert graded["hog"]["status"] == "memory" and graded["hog"]["score"] == "0.0"
    assert _numbers(replay["first"]["hog"]) == _numbers(replay["second"]["hog"]) == (0.0, 0.0, 0.0)
    assert "01_attention_by_hand/01_attention_by_hand: 0 of 10 points (memory)" in replay["log"]


def test_an_extension_granted_after_grading_reaches_nbgraders_export(replay) -> None:
    assert "hank: 01_attention_by_hand late penalty 2 -> 0 points" in replay["said"]["after"]
    assert _numbers(replay["second"]["hank"]) == (10.0, 0.0, 10.0)
    assert _numbers(replay["regraded"]["hank"]) == (10.0, 0.0, 10.0)
