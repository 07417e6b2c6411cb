"""No CSV the course writes holds a cell a spreadsheet would run (OWASP: CSV injection).

A student id is a folder name the student may choose: ``=HYPERLINK(...)``, ``@SUM(...)``,
``+1``, ``-1``, a tab or a carriage return first. Every writer (``grades.csv``, the course
gradebook, the Canvas and Moodle exports, nbgrader's export) is checked by parsing what it
wrote, never by opening a spreadsheet; the course's own readers give the ids back as they
were (``grader.common.csvcells.read``)."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from grader.common import csvcells
from grader.outputs import gradebook, lms
from grader.outputs.class_report import load
from grader.results import Report, Status
from grader.results.folder import grades_row, grades_table

LESSON = "01_attention_by_hand"
HOSTILE = ['=HYPERLINK("http://evil.example","x")', "@SUM(1+1)", "+1+cmd", "-2+3", "\tx", "\rx",
           "'=quoted", "plain"]
STARTS = ("=", "+", "-", "@", "\t", "\r")


def cells(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def runnable(rows: list[list[str]]) -> list[str]:
    """The cells a spreadsheet would evaluate (a number is a number, not a formula)."""
    bad = []
    for row in rows:
        for cell in row:
            try:
                float(cell)
                continue
            except ValueError:
                pass
            if cell[:1] in STARTS and not cell.startswith('="'):  # ="..." is Canvas's own text form
                bad.append(cell)
    return bad


@pytest.mark.parametrize("value", [*HOSTILE, "", "'", "''x", "10.5"])
def test_text_and_read_are_inverse(value: str) -> None:
    written = csvcells.text(value)
    assert csvcells.read(written) == value
    assert written[:1] not in STARTS


@pytest.fixture
def graded(tmp_path: Path) -> Path:
    """A grades.csv with the hostile ids, as `grade` writes it."""
    folder = tmp_path / "graded"
    (folder / "results").mkdir(parents=True)
    rows = [grades_row(student, Report(f"{student}/{LESSON}", LESSON, [], Status.MISSING, reason="No submission."),
                    []) for student in HOSTILE]
    (folder / "grades.csv").write_text(grades_table(rows, []), encoding="utf-8")
    return folder


def test_grades_csv_holds_no_formula_and_reads_back(graded: Path) -> None:
    text = (graded / "grades.csv").read_text(encoding="utf-8")
    assert not runnable(cells(text))
    assert [s.student_id for s in load(graded).students] == HOSTILE
    assert sorted(lms.read_lesson(graded).rows) == sorted(HOSTILE)


def _roster(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f, lineterminator="\n").writerows([header, *rows])
    return path


def test_lms_exports_and_the_gradebook_hold_no_formula(graded: Path, tmp_path: Path) -> None:
    ids = [s for s in HOSTILE if "\r" not in s and "\t" not in s]  # what a roster cell can hold
    moodle = _roster(tmp_path / "moodle.csv", ["First name", "Last name", "Email address"],
                     [["=A1", "@B", s] for s in ids])
    path = lms.export([graded], moodle, "moodle", key="Email address", out=tmp_path / "m.csv").target
    written = cells(path.read_text(encoding="utf-8"))
    # the column the LMS matches on is written as the roster gave it (issue 49: the LMS reads
    # it, and an id with a quote added matches nobody); every other cell is neutralised
    assert not runnable([row[1:] for row in written])
    assert sorted(row[0] for row in written[1:]) == sorted(ids)
    canvas = _roster(tmp_path / "canvas.csv", ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"],
                     [[f"=cmd {i}", str(i), "+1", s, "-s"] for i, s in enumerate(ids)])
    path = lms.export([graded], canvas, "canvas", key="SIS Login ID", out=tmp_path / "c.csv").target
    written = cells(path.read_text(encoding="utf-8"))
    assert not runnable([[row[0], *row[4:]] for row in written])  # ID, SIS User ID, SIS Login ID: as given
    assert sorted(row[3] for row in written[2:]) == sorted(ids) and {row[2] for row in written[2:]} == {"+1"}
    assert written[2][0].startswith('="=cmd')  # Canvas's own form
    book = gradebook.build([graded], _roster(tmp_path / "r.csv", ["name", "login"],
                                            [["-Eve", s] for s in ids]), key="login")
    assert not runnable(cells(book.csv()))
    assert {row[2] for row in book.rows} == set(ids)  # matched through the read-back ids


def test_nbgraders_export_holds_no_formula(tmp_path: Path) -> None:
    from nbgrader.api import Gradebook

    from grader.integrations.nbgrader.editions import EditionsCsvExport

    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gb:
        gb.add_assignment(LESSON)
        for i, student in enumerate(HOSTILE):
            gb.add_student(student, first_name="@first", last_name="-last", email=f"=e{i}")
        EditionsCsvExport(to=str(tmp_path / "export.csv"), student=[], assignment=[]).export(gb)
    with open(tmp_path / "export.csv", newline="", encoding="utf-8") as f:
        written = list(csv.reader(f))
    assert not runnable(written)
    assert sorted(csvcells.read(row[3]) for row in written[1:]) == sorted(HOSTILE)
