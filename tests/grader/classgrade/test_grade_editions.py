"""``python -m grader grade`` takes either edition, sandboxed (the default isolation): the
Chinese reference gets full marks, the blank Chinese notebook zero, a planted mistake the
same score in both editions; a student who hands in both editions is graded on the one
they worked in; feedback speaks the notebook's language (or ``--lang``); ``grades.csv``
and ``results/`` stay English."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys

import pytest
from support import ROOT

from coursekit import catalogue

pytestmark = pytest.mark.e2e

LESSON = "01_attention_by_hand"
ENTRY = catalogue.get(LESSON)


def _put(submitted, student: str, *notebooks) -> None:
    folder = submitted / student / LESSON
    folder.mkdir(parents=True)
    for notebook in notebooks:
        if isinstance(notebook, tuple):
            name, nb = notebook
            (folder / name).write_text(json.dumps(nb), encoding="utf-8")
        else:
            shutil.copy(notebook, folder / notebook.name)


def _planted(edition: str) -> tuple[str, dict]:
    """The reference with softmax ignoring its axis: the same mistake in either edition."""
    nb = catalogue.read_json(ENTRY.solution(edition))
    for cell in nb["cells"]:
        if catalogue.grade_id(cell) == "softmax":
            cell["source"] = cell["source"].replace("axis=axis, keepdims=True)\n    e", "keepdims=True)\n    e")
    return ENTRY.solution(edition).name, nb


def _grade(submitted, out, *extra: str) -> dict[str, dict]:
    proc = subprocess.run([sys.executable, "-m", "grader", "grade", str(submitted), "--lesson", LESSON,
                           "--out", str(out), "--isolation", "auto", "--deadlines", "none", *extra],
                          capture_output=True, text=True, cwd=ROOT, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(out / "grades.csv", newline="", encoding="utf-8") as f:
        return {row["student_id"]: row for row in csv.DictReader(f)}


def test_either_edition_is_graded_the_same(tmp_path) -> None:
    submitted = tmp_path / "submitted"
    _put(submitted, "alice", ENTRY.solution("zh"))
    _put(submitted, "bob", ENTRY.student("zh"))
    _put(submitted, "carol", _planted("zh"))
    _put(submitted, "carol-en", _planted("en"))
    _put(submitted, "dave", ENTRY.solution("zh"), ENTRY.student("en"))   # both, worked in Chinese
    _put(submitted, "erin", ENTRY.student("zh"), ENTRY.solution("en"))   # both, worked in English
    out = tmp_path / "out"
    table = _grade(submitted, out)
    scores = {s: float(r["score"]) for s, r in table.items()}
    assert scores["alice"] == scores["dave"] == scores["erin"] == 10.0 and scores["bob"] == 0.0
    assert 0 < scores["carol"] == scores["carol-en"] < 10
    assert {table[s]["softmax"] for s in ("carol", "carol-en")} == {table["carol"]["softmax"]}
    # the gradebook is English whatever the students' language
    text = (out / "grades.csv").read_text(encoding="utf-8") + "".join(
        p.read_text(encoding="utf-8") for p in (out / "results").glob("*.json"))
    assert not any("\u4e00" <= ch <= "\u9fff" for ch in text)
    assert json.loads((out / "results" / "dave.json").read_text())["notebook"].endswith(".zh.ipynb")
    assert json.loads((out / "results" / "erin.json").read_text())["notebook"].endswith(f"{LESSON}.ipynb")
    # feedback in the notebook's language
    bob = (out / "feedback" / "bob" / f"{LESSON}.html").read_text(encoding="utf-8")
    assert '<html lang="zh">' in bob and "还没有实现" in bob
    carol_en = (out / "feedback" / "carol-en" / f"{LESSON}.html").read_text(encoding="utf-8")
    assert '<html lang="en">' in carol_en and "Score" in carol_en


def test_lang_chooses_the_feedback_language(tmp_path) -> None:
    submitted = tmp_path / "submitted"
    _put(submitted, "bob", ENTRY.student("zh"))
    _put(submitted, "frank", ENTRY.student("en"))
    out = tmp_path / "out"
    _grade(submitted, out, "--lang", "zh")
    frank = (out / "feedback" / "frank" / f"{LESSON}.html").read_text(encoding="utf-8")
    assert "还没有实现" in frank
    _grade(submitted, out, "--lang", "en", "--force")
    bob = (out / "feedback" / "bob" / f"{LESSON}.html").read_text(encoding="utf-8")
    assert "is not implemented yet" in bob
