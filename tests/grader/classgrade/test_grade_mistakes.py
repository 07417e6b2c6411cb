"""An instructor's slips stop `grade` with a sentence that says what to do, before anything
is written, instead of grading a whole class as ``missing`` (issue 24, items 6 and 7)."""

from __future__ import annotations

import csv
import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import ROOT, solution_path

pytestmark = pytest.mark.e2e

LESSON = "01_attention_by_hand"


def grade(submitted: Path, out: Path, lesson: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grader", "grade", str(submitted), "--lesson",
                           lesson, "--out", str(out), "--deadlines", "none"], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


@pytest.fixture
def submitted(tmp_path: Path) -> Path:
    folder = tmp_path / "submitted" / "alice" / LESSON
    folder.mkdir(parents=True)
    (folder / f"{LESSON}.ipynb").write_bytes(solution_path(LESSON).read_bytes())
    return tmp_path / "submitted"


def test_a_lesson_number_is_taken_as_release_takes_it(submitted: Path, tmp_path: Path) -> None:
    proc = grade(submitted, tmp_path / "out", "1")
    assert proc.returncode == 0, proc.stderr
    with open(tmp_path / "out" / "grades.csv", newline="", encoding="utf-8") as f:
        (row,) = list(csv.DictReader(f))
    assert (row["lesson"], row["score"]) == (LESSON, "10.0")
    check = subprocess.run([sys.executable, "-m", "grader", "check", "--lesson", "01",
                            "--format", "json", str(submitted / "alice" / LESSON / f"{LESSON}.ipynb")],
                           cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stderr
    assert json.loads(check.stdout)["lesson"] == LESSON


def test_the_wrong_lesson_stops_and_names_the_right_one(submitted: Path, tmp_path: Path) -> None:
    proc = grade(submitted, tmp_path / "out", "03")
    assert proc.returncode == 2
    assert ("no student folder in" in proc.stderr
            and f"they hold {LESSON} (1 students): is it --lesson {LESSON}?" in proc.stderr)
    assert not (tmp_path / "out").exists()


def test_a_students_folder_given_for_the_class_stops(submitted: Path, tmp_path: Path) -> None:
    proc = grade(submitted / "alice", tmp_path / "out", LESSON)
    assert proc.returncode == 2
    assert f"holds lesson folders ({LESSON}), not one folder per student" in proc.stderr
    assert not (tmp_path / "out").exists()


def test_two_runs_on_one_output_folder_do_not_interleave(submitted: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    fd = os.open(out, os.O_RDONLY)  # as a run in progress holds it
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        proc = grade(submitted, out, LESSON)
    finally:
        os.close(fd)
    assert proc.returncode == 2
    assert f"another `grade` is writing to {out}" in proc.stderr
    assert list(out.iterdir()) == []
    again = grade(submitted, out, LESSON)  # once it is done
    assert again.returncode == 0, again.stderr
    assert not [p for p in out.iterdir() if p.name.startswith(".") and p.name != ".gitignore"]
