"""``python -m grader gradebook`` (grader/outputs/gradebook.py) on the term's graded class: the
roster's students, every lesson's column, weights, late penalties in; the same term imported
into Canvas (``lms``) and its pages handed back (``return-feedback --to``); the README's
table of every lesson's points."""

from __future__ import annotations

import csv
import subprocess
import sys

import pytest
from support import ROOT
from term_class import LESSON

from coursekit import catalogue


@pytest.mark.e2e
@pytest.mark.slow
def test_gradebook_and_returned_feedback(term, tmp_path) -> None:
    roster = tmp_path / "roster.csv"
    roster.write_text("Student,ID,SIS User ID,SIS Login ID,Section\n"
                      '"Lovelace, Ada",1,S1,alice,A\n"Babbage, Charles",2,S2,bob,A\n'
                      '"=Sum, Eve",3,S3,nobody,A\n', encoding="utf-8")
    book = tmp_path / "book.csv"
    proc = subprocess.run([sys.executable, "-m", "grader", "gradebook", str(term["out"]),
                           "--roster", str(roster), "--out", str(book), "--weights", "01=2"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr  # "nobody", and most of the term, match nothing
    assert f"1 of {len(catalogue.lessons())} lessons graded" in proc.stdout and "graded, not in the roster" in proc.stdout
    assert "(0 in every graded lesson): =Sum, Eve <nobody>" in proc.stdout
    with open(book, newline="", encoding="utf-8") as f:
        table = list(csv.reader(f))
    header, by_login = table[0], {r[1]: r for r in table[1:]}
    from grader.outputs.gradebook import lesson_points
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
    assert proc.returncode == 1 and "grader lms: " in proc.stderr
    with open(imported, newline="", encoding="utf-8") as f:
        rows_in = {r[3]: r for r in list(csv.reader(f))[2:]}
    assert set(rows_in) == {"alice", "bob"}  # "nobody" was graded nowhere: not imported
    assert float(rows_in["alice"][-1]) == 10.0
    assert float(rows_in["bob"][-1]) == float(term["rows"]["bob"]["score"])
    back = tmp_path / "returned"
    proc = subprocess.run([sys.executable, "-m", "grader", "return-feedback", str(term["out"]),
                           "--to", str(back)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and (back / "bob" / f"{LESSON}.html").is_file()


@pytest.mark.parametrize("readme", ["README.md", "README.zh.md"])
def test_the_readme_shows_the_points_of_every_lesson(readme: str) -> None:
    from grader.outputs.gradebook import point_table

    text = (ROOT / readme).read_text(encoding="utf-8")
    shown = text.split("<!-- points-table -->\n", 1)[1].split("\n<!-- /points-table -->", 1)[0]
    assert shown == point_table()



def test_the_summary_table_lines_up_with_chinese_headers() -> None:
    """``gradebook``'s table in Chinese: its header words (课程, 分数, 已评分, 总分) take two
    columns a character, and pad to the lesson ids' and points' columns as a terminal shows
    them (``str.ljust`` counted them one column each: the header's columns were off)."""
    from pathlib import Path

    from zh_tables import Table, cells_of, misaligned

    from grader.outputs.gradebook import Gradebook, summary
    from grader.outputs.lms import Match, Roster

    points = {"01_attention_by_hand": 10.0, "02_split_heads": 8.0, "10_decoder_only": 112.5}
    book = Gradebook([], [], ["01_attention_by_hand", "10_decoder_only"], points,
                     Match("student_id", [], [], [], []), Roster("csv", ["student_id"], []))
    lines = summary(book, Path("book.csv"), "zh").splitlines()[1:]
    cells = [cells_of(line) for line in lines]
    assert [text for _, _, text in cells[0]] == ["课程", "分数", "已评分"] and cells[-1][0][2] == "总分"
    assert [len(line) for line in cells] == [3, 3, 3, 3, 2], lines
    assert not misaligned(Table(None, cells[:-1])), "\n".join(lines)       # header and lessons
    assert not misaligned(Table(None, [line[:2] for line in cells])), "\n".join(lines)  # and the total
