"""``python -m grader lms``: grades.csv as Canvas's and Moodle's gradebook import CSV,
students matched through sample rosters in the layouts the LMSs export
(tests/fixtures/lms); students on one side only are listed, never dropped silently."""

from __future__ import annotations

import csv
import io
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from support import ROOT

from grader.outputs import gradebook
from grader.outputs.lms import LmsError, export, match, read_roster
from grader.results.folder import CSV_HEADER

pytestmark = pytest.mark.e2e

FIXTURES = ROOT / "tests" / "fixtures" / "lms"
CANVAS = FIXTURES / "canvas_gradebook_export.csv"
MOODLE = FIXTURES / "moodle_grades_export.csv"


def graded(folder: Path, lesson: str, rows: list[tuple[str, float, str]], max_score: float = 10.0) -> Path:
    """A grades.csv as ``grade --out folder`` writes it."""
    folder.mkdir(parents=True)
    with (folder / "grades.csv").open("w", newline="", encoding="utf-8") as f:
        out = csv.writer(f, lineterminator="\n")
        out.writerow(CSV_HEADER + ["ex1"])
        for student, score, status in rows:
            message = f"Graded: {score:g} of {max_score:g} points." if status == "ok" else f"Not graded ({status})."
            out.writerow([student, lesson, score, max_score, status, message, score])
    return folder


@pytest.fixture
def folders(tmp_path) -> list[Path]:
    return [
        graded(tmp_path / "l01", "01_attention_by_hand", [
            ("alice", 10.0, "ok"), ("bob", 0.0, "ok"), ("carol", 7.5, "ok"), ("dave", 0.0, "missing"),
            ("erin", 4.0, "ok")]),
        graded(tmp_path / "l02", "02_split_heads", [
            ("alice", 8.0, "ok"), ("bob", 0.0, "timeout"), ("carol", 10.0, "ok")]),
    ]


def canvas_import(text: str) -> tuple[list[tuple[str, str | None]], dict[str, str], list[list[str]]]:
    """What Canvas's GradebookImporter (app/models/gradebook_importer.rb) reads from a CSV:
    the header checks it makes, assignments as (title, id), points possible, student rows."""
    rows = list(csv.reader(io.StringIO(text)))
    header = rows[0]
    assert len(header) > 3 and "Student" in header[0] and "ID" in header[1]      # row_has_student_headers?
    assert re.match(r"SIS\s+User\s+ID", header[2]) and re.match(r"SIS\s+Login\s+ID", header[3])
    assert "Section" in header[4]                                                 # last student info column
    assignments = []
    for name in header[5:]:
        m = re.match(r"^(.*) \((\d+)\)$", name)                                   # Assignment.title_and_id
        assignments.append((m.group(1), m.group(2)) if m else (name, None))
    assert "Points Possible" in rows[1][0]
    points = dict(zip(header[5:], rows[1][5:], strict=True))
    return assignments, points, rows[2:]


def test_canvas_import_matches_by_login_and_lists_both_sides(folders, tmp_path) -> None:
    target, text, _ = export(folders, CANVAS, "canvas",
                          assignments=["Lesson 01: attention by hand (104211)"])
    assert target == folders[0] / "canvas-import.csv"
    assignments, points, rows = canvas_import(target.read_text(encoding="utf-8"))
    assert assignments == [("Lesson 01: attention by hand", "104211"), ("02_split_heads", None)]
    assert points == {"Lesson 01: attention by hand (104211)": "10", "02_split_heads": "10"}
    assert rows == [
        ["Lovelace, Ada", "48201", "S1001", "alice", "Section A", "10", "8"],
        ["Babbage, Charles", "48202", "S1002", "bob", "Section A", "0", "0"],
        ["Hopper, Grace", "48203", "S1003", "carol", "Section B", "7.5", "10"],
        ["Turing, Alan", "48204", "S1004", "Dave", "Section B", "0", ""],
    ]
    assert "4 student(s), 2 assignment(s)" in text
    assert "matched on 'SIS Login ID'" in text
    assert "01_attention_by_hand: not graded normally, exported as scored: dave (missing)" in text
    assert "02_split_heads: not graded normally, exported as scored: bob (timeout)" in text
    assert "graded in no folder (left blank): =Sum, Eve <frank>" in text
    assert "with an empty 'SIS Login ID' (cannot be matched): Liskov, Barbara" in text
    assert "graded, not in the roster (not exported): erin" in text
    assert "skipped line 10: Canvas's Test Student" in text


def test_canvas_name_that_looks_like_a_formula_stays_text(tmp_path) -> None:
    folder = graded(tmp_path / "l01", "01_attention_by_hand", [("frank", 3.0, "ok")])
    target, _, _ = export([folder], CANVAS, "canvas")
    _, _, rows = canvas_import(target.read_text(encoding="utf-8"))
    assert rows == [['="=Sum, Eve"', "48205", "S1005", "frank", "Section B", "3"]]


def test_canvas_other_keys_and_semicolon_exports(folders, tmp_path) -> None:
    by_sis = graded(tmp_path / "sis", "01_attention_by_hand", [("S1003", 7.5, "ok")])
    _, text, _ = export([by_sis], CANVAS, "canvas", key="sis")
    assert "1 student(s)" in text and "matched on 'SIS User ID'" in text
    semicolons = tmp_path / "export;.csv"
    semicolons.write_text("\ufeff" + CANVAS.read_text(encoding="utf-8").replace(",", ";"), encoding="utf-8")
    assert [r["SIS Login ID"] for r in read_roster(semicolons).rows][:2] == ["alice", "bob"]
    with pytest.raises(LmsError, match="no email column"):
        export(folders, CANVAS, "canvas", key="email")


def test_moodle_import_matches_email_local_part(folders, tmp_path) -> None:
    out = tmp_path / "moodle.csv"
    target, text, _ = export(folders[:1], MOODLE, "moodle", local_part=True, out=out)
    rows = list(csv.reader(io.StringIO(target.read_text(encoding="utf-8"))))
    assert rows[0] == ["Email address", "01_attention_by_hand", "01_attention_by_hand (feedback)"]
    assert rows[1:] == [
        ["alice@example.edu", "10", "Graded: 10 of 10 points."],
        ["bob@example.edu", "0", "Graded: 0 of 10 points."],
        ["Carol@Example.edu", "7.5", "Graded: 7.5 of 10 points."],
        ["dave@example.edu", "0", "Not graded (missing)."],
    ]
    assert "moodle export, 5 student(s), matched on 'Email address'" in text
    assert "graded in no folder (left blank): Eve Sum <frank@example.edu>" in text
    assert "graded, not in the roster (not exported): erin" in text


def test_duplicate_keys_and_unknown_columns_are_refused(tmp_path) -> None:
    roster = tmp_path / "roster.csv"
    roster.write_text("name,login\nA,x\nB,X \n", encoding="utf-8")
    with pytest.raises(LmsError, match="neither Canvas's nor Moodle's"):
        export([graded(tmp_path / "g", "01_attention_by_hand", [("x", 1, "ok")])], roster, "canvas")
    with pytest.raises(LmsError, match="not unique: x, X"):
        match(read_roster(roster), "login", ["x"])
    with pytest.raises(LmsError, match="no column 'email'"):
        export([tmp_path / "g"], roster, "moodle", key="email")
    with pytest.raises(LmsError, match="cannot read"):
        export([tmp_path / "nothing"], roster, "moodle", key="login")


def test_cli_prints_the_summary_and_fails_clearly(folders) -> None:
    cmd = [sys.executable, "-m", "grader", "lms", str(folders[0]), "--roster", str(CANVAS), "--to", "canvas"]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=120)
    # erin is graded but not in the roster, frank and Liskov are in it but graded nowhere
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.startswith(f"wrote {folders[0] / 'canvas-import.csv'}: 4 student(s)")
    assert proc.stderr.startswith("grader lms: 1 graded student(s) not in the roster and 2 roster "
                                  "student(s) matched to no graded student (named above)")
    proc = subprocess.run(cmd + ["--key", "Nope"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2 and proc.stderr.startswith("grader lms: the roster has no column 'Nope'")


def test_an_import_that_matches_nobody_is_refused(folders, tmp_path) -> None:
    """Issue 24: Moodle's default key (email) against user names matched 0 students and still
    wrote the file, exit 0."""
    target = tmp_path / "moodle.csv"
    with pytest.raises(LmsError, match=r"no graded student matched the roster's 'Email address' "
                                       r"column \(it holds e\.g\. alice@example\.edu"):
        export(folders[:1], MOODLE, "moodle", out=target)
    assert not target.exists()
    proc = subprocess.run([sys.executable, "-m", "grader", "lms", str(folders[0]), "--roster",
                           str(MOODLE), "--to", "moodle", "--out", str(target)],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2 and "--local-part for emails; nothing was written" in proc.stderr


def test_a_canvas_assignment_not_in_the_roster_is_warned_about(folders) -> None:
    _, text, _ = export(folders[:1], CANVAS, "canvas", assignments=["Lesson 1: attention by hand"])
    assert ("WARNING: the roster has no assignment 'Lesson 1: attention by hand': Canvas will "
            "add it as a new column") in text
    assert "(the roster's: Lesson 01: attention by hand (104211), Lesson 02: split heads (104212))" in text
    _, text, _ = export(folders[:1], CANVAS, "canvas",
                     assignments=["Lesson 01: attention by hand (104211)"])
    assert "WARNING" not in text
    _, text, _ = export(folders[:1], CANVAS, "canvas", assignments=["Lesson 01: attention by hand"])
    assert "WARNING" not in text  # Canvas matches a title without its id too


def _cli(*args: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "grader", *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT, timeout=300)


def test_the_gradebook_refuses_a_roster_matching_nobody_as_lms_does(folders, tmp_path) -> None:
    """Issue 49: ``gradebook`` gave everyone 0, exit 0, when the roster's key matched nobody;
    ``lms`` refused it. One matching function (``lms.pair``) refuses it for both."""
    book = tmp_path / "book.csv"
    with pytest.raises(LmsError, match="no graded student matched the roster's 'Email address'"):
        gradebook.write(folders[:1], MOODLE, book)
    proc = _cli("gradebook", folders[0], "--roster", MOODLE, "--out", book)
    assert proc.returncode == 2 and not book.exists()
    assert proc.stderr.startswith("grader gradebook: no graded student matched the roster's "
                                  "'Email address' column") and "nothing was written" in proc.stderr


@pytest.mark.parametrize("command", ["lms", "gradebook"])
def test_any_unmatched_student_is_named_and_the_command_fails(command, tmp_path) -> None:
    """Issue 49: a partial mismatch was a silent zero (gradebook) or blank (lms), exit 0.
    Both commands write the matched students, name every unmatched one, and exit 1."""
    folder = graded(tmp_path / "l01", "01_attention_by_hand", [
        ("alice", 10.0, "ok"), ("bob", 6.0, "ok"), ("carol", 7.5, "ok"), ("Dave", 1.0, "ok"),
        ("frank", 2.0, "ok"), ("trial", 9.0, "ok")])
    out = tmp_path / "out.csv"
    extra = ["--to", "canvas"] if command == "lms" else []
    proc = _cli(command, folder, "--roster", CANVAS, "--out", out, *extra)
    assert proc.returncode == 1 and out.is_file()
    assert "graded, not in the roster (not " in proc.stdout and ": trial" in proc.stdout
    assert "in the roster with an empty 'SIS Login ID' (cannot be matched): Liskov, Barbara" in proc.stdout
    assert f"grader {command}: 1 graded student(s) not in the roster and 1 roster student(s) " \
           "matched to no graded student (named above)" in proc.stderr
    # every roster student matched and every graded one in it: exit 0
    roster = tmp_path / "roster.csv"
    roster.write_text("\n".join(CANVAS.read_text(encoding="utf-8").splitlines()[:8]) + "\n", encoding="utf-8")
    proc = _cli(command, folder, "--roster", roster, "--out", out, *extra, "--key", "login")
    assert (proc.returncode, proc.stderr) == (1, proc.stderr)  # trial still unmatched
    assert "trial" in proc.stdout
    solo = graded(tmp_path / "solo", "01_attention_by_hand", [
        ("alice", 10.0, "ok"), ("bob", 6.0, "ok"), ("carol", 7.5, "ok"), ("Dave", 1.0, "ok"),
        ("frank", 2.0, "ok")])
    proc = _cli(command, solo, "--roster", roster, "--out", out, *extra, "--key", "login")
    assert (proc.returncode, proc.stderr) == (0, "")


def test_ids_are_compared_in_one_unicode_form_and_look_alikes_spelled_out(tmp_path) -> None:
    """Issue 49: a roster id in decomposed Unicode (NFD, as macOS and some exports write it)
    never matched the composed folder name (NFC): 0 in every lesson, and a message naming
    two ids that look the same."""
    nfc, nfd = unicodedata.normalize("NFC", "zoë"), unicodedata.normalize("NFD", "zoë")
    assert nfc != nfd
    folder = graded(tmp_path / "l01", "01_attention_by_hand", [(nfc, 9.0, "ok"), ("olga", 4.0, "ok")])
    roster = tmp_path / "roster.csv"
    roster.write_text(f"Name,login\nZoë,{nfd}\nOlga,\u043elga\n", encoding="utf-8")  # Cyrillic о
    book = gradebook.build([folder], roster, key="login")
    rows = {row[0]: row for row in book.rows}
    assert rows["Zoë"][2:4] == [nfc, "9"]
    text = gradebook.summary(book, tmp_path / "book.csv")
    assert "graded, not in the roster (not counted): olga" in text
    assert "in the roster, graded in no folder (0 in every graded lesson): Olga <\u043elga [U+043E l g a]>" in text
    target, text, mismatch = export([folder], roster, "moodle", key="login", out=tmp_path / "m.csv")
    assert target.read_text(encoding="utf-8").splitlines()[1] == f"{nfd},9,Graded: 9 of 10 points."
    assert mismatch and "Olga <\u043elga [U+043E l g a]>" in text
    from grader.common import ids
    assert ids.shown(nfd) == f"{nfd} [z o e U+0308]" and ids.shown(nfc) == f"{nfc} [z o U+00EB]"
    assert ids.shown("alice") == "alice" and ids.shown("bob ") == "bob  [b o b U+0020]"


def test_the_columns_an_lms_matches_on_are_written_as_the_roster_gave_them(tmp_path) -> None:
    """Issue 49: the CSV neutraliser put ``'`` before ``+cmd@example.edu`` in the LMS's key
    column, and the LMS matched nobody. Key columns are the LMS's own values; every other
    cell (a name, a section, a feedback message) is still neutralised."""
    student = "+cmd@example.edu"
    folder = graded(tmp_path / "l01", "01_attention_by_hand", [(student, 3.0, "ok")])
    canvas = tmp_path / "canvas.csv"
    canvas.write_text("Student,ID,SIS User ID,SIS Login ID,Section\n"
                      f"\"+Sum, Eve\",-48205,@S1005,{student},=Section B\n", encoding="utf-8")
    target, _, _ = export([folder], canvas, "canvas", out=tmp_path / "c.csv")
    _, _, rows = canvas_import(target.read_text(encoding="utf-8"))
    assert rows == [["'+Sum, Eve", "-48205", "@S1005", student, "'=Section B", "3"]]
    moodle = tmp_path / "moodle.csv"
    moodle.write_text(f"First name,Last name,Email address\nEve,Sum,{student}\n", encoding="utf-8")
    grades = folder / "grades.csv"
    grades.write_text(grades.read_text(encoding="utf-8").replace("Graded: 3", "=Graded: 3"), encoding="utf-8")
    target, _, _ = export([folder], moodle, "moodle", out=tmp_path / "m.csv")
    assert target.read_text(encoding="utf-8").splitlines()[1] == f"{student},3,'=Graded: 3 of 10 points."
