"""The term's class (the ``term`` fixture of tests/conftest.py) against rosters (issue 49,
items 2 and 3): a student whose id the roster and ``deadlines.toml`` spell in decomposed
Unicode (NFD) while her folder is composed (NFC), and a roster that matches nobody."""

from __future__ import annotations

import csv
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from support import DEADLINES, ROOT, grade, rows

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

NFC, NFD = unicodedata.normalize("NFC", "zoë"), unicodedata.normalize("NFD", "zoë")


def _grader(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "grader", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_an_nfd_roster_id_is_her_nfc_folder_everywhere(term, tmp_path: Path) -> None:
    """She hands in hank's notebook, as late as his (8 of 10 after the penalty), but with an
    extension that ``deadlines.toml`` grants her in NFD: 10. ``--student`` in NFD picks her
    folder; the roster's NFD id gets her score in the gradebook and the Canvas import."""
    assert NFC != NFD
    submitted, out = tmp_path / "submitted", tmp_path / "out"
    shutil.copytree(term["root"] / "submitted", submitted)
    shutil.copytree(term["out"], out)
    shutil.copytree(submitted / "hank", submitted / NFC)
    deadlines = tmp_path / "deadlines.toml"
    deadlines.write_text(DEADLINES.replace('alice = "2 days"', f'alice = "2 days"\n"{NFD}" = "2 days"'),
                         encoding="utf-8")
    proc = grade(submitted, out, "--deadlines", str(deadlines), "--student", NFD)
    assert "graded 1 submission(s)" in proc.stdout
    graded = rows(out)
    assert graded["hank"]["score"] == "8.0" and graded[NFC]["score"] == "10.0"

    roster = tmp_path / "roster.csv"
    roster.write_text("Student,ID,SIS User ID,SIS Login ID,Section\n"
                      f'"Lovelace, Ada",1,S1,alice,A\n"Zoë, Z",2,S2,{NFD},A\n', encoding="utf-8")
    book = tmp_path / "book.csv"
    proc = _grader("gradebook", out, "--roster", roster, "--out", book)
    assert proc.returncode == 1, proc.stderr  # the rest of the term is not in this roster
    assert "graded, not in the roster (not counted): bob, carol" in proc.stdout
    with open(book, newline="", encoding="utf-8") as f:
        by_login = {r[1]: r for r in csv.reader(f)}
    assert by_login[NFD][2:4] == [NFC, "10"]
    imported = tmp_path / "canvas.csv"
    proc = _grader("lms", out, "--roster", roster, "--to", "canvas", "--out", imported)
    assert proc.returncode == 1, proc.stderr
    with open(imported, newline="", encoding="utf-8") as f:
        lines = list(csv.reader(f))[2:]
    assert [r[3:] for r in lines] == [["alice", "A", "10"], [NFD, "A", "10"]]


def test_a_roster_matching_nobody_is_refused_by_gradebook_and_lms(term, tmp_path: Path) -> None:
    """A roster keyed by emails against the term's user names: ``gradebook`` gave everyone 0,
    exit 0; both commands now refuse it the same way, nothing written."""
    roster = tmp_path / "roster.csv"
    roster.write_text("Student,ID,SIS User ID,SIS Login ID,Section\n"
                      '"Lovelace, Ada",1,S1,ada@example.edu,A\n"Babbage, Charles",2,S2,cb@example.edu,A\n',
                      encoding="utf-8")
    book, imported = tmp_path / "book.csv", tmp_path / "canvas.csv"
    refusals = []
    for command, out in (("gradebook", book), ("lms", imported)):
        extra = ["--to", "canvas"] if command == "lms" else []
        proc = _grader(command, term["out"], "--roster", roster, "--out", out, *extra)
        assert proc.returncode == 2 and not out.exists(), proc.stdout + proc.stderr
        assert proc.stdout == ""
        refusals.append(proc.stderr.removeprefix(f"grader {command}: "))
    assert refusals[0] == refusals[1]
    assert refusals[0].startswith("no graded student matched the roster's 'SIS Login ID' column "
                                  "(it holds e.g. ada@example.edu, cb@example.edu; the student "
                                  "ids are e.g. alice, bob, carol)")


def test_an_nfd_extension_reaches_the_student_nbgrader_knows(tmp_path: Path) -> None:
    """nbgrader compares ids exactly: an extension written for the NFD spelling would go to
    a second student, and hers (NFC, from her folder) would have none."""
    from nbgrader.api import Gradebook

    from grader.integrations.nbgrader.late import write_to_gradebook

    lesson = "01_attention_by_hand"
    db = f"sqlite:///{tmp_path / 'gradebook.db'}"
    with Gradebook(db, "course") as gb:
        gb.update_or_create_student(NFC)
    deadlines = tmp_path / "deadlines.toml"
    deadlines.write_text(f'[due]\n{lesson} = "2026-03-02 23:59"\n[extensions]\n"{NFD}" = "2 days"\n'
                         f'"{unicodedata.normalize("NFD", "josé")}" = "1 day"\n', encoding="utf-8")
    write_to_gradebook(str(deadlines), db, "course", [lesson], folders=["josé"])
    with Gradebook(db, "course") as gb:
        assert sorted(s.id for s in gb.students) == sorted([NFC, "josé"])
        assert gb.find_submission(lesson, NFC).extension.days == 2
        assert gb.find_submission(lesson, "josé").extension.days == 1
