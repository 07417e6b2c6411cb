"""nbgrader with two editions of a lesson (grader/integrations/nbgrader/editions.py), end to end in a
temporary copy of the course: an instructor who teaches in Chinese (COURSE_EDITION=zh)
gets one notebook per lesson and its true maximum; one who lets students choose
(COURSE_EDITION=both) gets each student's edition counted once by ``nbgrader export``;
hints in the feedback are in the notebook's language; Validate works on both editions."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys

import pytest
from support import ROOT

from coursekit import catalogue
from grader.integrations.nbgrader import editions as nbgrader_editions

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

LESSON = "01_attention_by_hand"


def run(args: list[str], cwd, edition: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("COURSE_EDITION", "COURSE_LANG")}
    if edition:
        env["COURSE_EDITION"] = edition
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def _course(tmp_path, edition: str):
    course = tmp_path / "course"
    shutil.copytree(ROOT / "solutions" / LESSON, course / "solutions" / LESSON)
    shutil.copy(ROOT / "nbgrader_config.py", course)
    run(["nbgrader", "generate_assignment", LESSON, "--force"], course, edition)
    return course


def _submit(course, student: str, *notebooks) -> None:
    folder = course / "submitted" / student / LESSON
    folder.mkdir(parents=True)
    for notebook in notebooks:
        shutil.copy(notebook, folder / notebook.name)


def _export(course, tmp_path, edition: str) -> dict[str, tuple[float, float]]:
    run(["nbgrader", "autograde", LESSON, "--force"], course, edition)
    run(["nbgrader", "export", "--to", str(tmp_path / "grades.csv")], course, edition)
    with open(tmp_path / "grades.csv", newline="") as f:
        return {row["student_id"]: (float(row["score"]), float(row["max_score"])) for row in csv.DictReader(f)}


def _outputs(course, student: str, name: str) -> str:
    nb = json.loads((course / "autograded" / student / LESSON / name).read_text(encoding="utf-8"))
    texts = [o.get("text", "") for c in nb["cells"] for o in c.get("outputs", [])]
    return "".join("".join(t) if isinstance(t, list) else t for t in texts)


def test_the_globs_select_one_edition_each() -> None:
    import fnmatch

    english, chinese = LESSON, f"{LESSON}.zh"
    assert fnmatch.fnmatch(english, nbgrader_editions.notebook_glob("en"))
    assert not fnmatch.fnmatch(chinese, nbgrader_editions.notebook_glob("en"))
    assert fnmatch.fnmatch(chinese, nbgrader_editions.notebook_glob("zh"))
    assert not fnmatch.fnmatch(english, nbgrader_editions.notebook_glob("zh"))
    for lesson in catalogue.COURSE:  # no lesson id can fool the English glob
        assert fnmatch.fnmatch(lesson.id, nbgrader_editions.notebook_glob("en"))
    assert nbgrader_editions.ignored("en") == ["*.zh.ipynb"]


def test_a_course_taught_in_chinese(tmp_path) -> None:
    course = _course(tmp_path, "zh")
    released = sorted(p.name for p in (course / "lessons" / LESSON).glob("*.ipynb"))
    assert released == [f"{LESSON}.zh.ipynb"]
    entry = catalogue.get(LESSON)
    _submit(course, "alice", entry.solution("zh"))
    _submit(course, "bob", entry.student("zh"))
    scores = _export(course, tmp_path, "zh")
    assert scores == {"alice": (10.0, 10.0), "bob": (0.0, 10.0)}
    for student in ("alice", "bob"):
        notebook = course / "submitted" / student / LESSON / f"{LESSON}.zh.ipynb"
        proc = run([sys.executable, "-m", "grader", "check", str(notebook), "--format", "json"], ROOT)
        assert json.loads(proc.stdout)["score"] == scores[student][0]
    said = _outputs(course, "alice", f"{LESSON}.zh.ipynb")      # the hidden tests' verdicts
    assert "dot_scores：2 / 2 分" in said and "points" not in said, said
    run(["nbgrader", "generate_feedback", LESSON, "--force"], course, "zh")
    page = (course / "feedback" / "alice" / LESSON / f"{LESSON}.zh.html").read_text(encoding="utf-8")
    assert "softmax：4 / 4 分" in page and "grade(" not in page


def test_students_choose_their_edition(tmp_path) -> None:
    course = _course(tmp_path, "both")
    assert sorted(p.name for p in (course / "lessons" / LESSON).glob("*.ipynb")) == \
        [f"{LESSON}.ipynb", f"{LESSON}.zh.ipynb"]
    entry = catalogue.get(LESSON)
    _submit(course, "alice", entry.solution("zh"))                       # Chinese only
    _submit(course, "carol", entry.solution("en"))                       # English only
    _submit(course, "dave", entry.solution("zh"), entry.student("en"))   # both, worked in Chinese
    _submit(course, "erin", entry.student("zh"), entry.student("en"))    # both, untouched
    scores = _export(course, tmp_path, "both")
    assert scores == {"alice": (10.0, 10.0), "carol": (10.0, 10.0), "dave": (10.0, 10.0),
                      "erin": (0.0, 10.0)}
    assert "attention：4 / 4 分" in _outputs(course, "dave", f"{LESSON}.zh.ipynb")
    assert "attention: 4 / 4 points" in _outputs(course, "carol", f"{LESSON}.ipynb")


def test_an_english_course_ignores_the_chinese_edition(tmp_path) -> None:
    course = _course(tmp_path, None)
    assert sorted(p.name for p in (course / "lessons" / LESSON).glob("*.ipynb")) == [f"{LESSON}.ipynb"]


@pytest.mark.parametrize("kind, verdict", [("solution", "Success! Your notebook passes all the tests."),
                                           ("student", "VALIDATION FAILED ON 3 CELL(S)!")])
def test_validate_works_on_the_chinese_edition(kind: str, verdict: str) -> None:
    notebook = catalogue.get(LESSON).notebook(kind, "zh")
    proc = subprocess.run(["nbgrader", "validate", str(notebook)], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert verdict in proc.stdout, proc.stdout + proc.stderr
