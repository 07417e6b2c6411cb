"""Every score a person reads is the one recorded, quarter points included (issue 50: the
check table printed `lm_loss 0.2 / 2.0` and `total 11.2 / 21.0` where the JSON, the
feedback page and grades.csv said 0.25 and 11.25)."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import re
from pathlib import Path

import pytest

from grader.common.hint import Hint
from grader.outputs.render import feedback_html, to_html, to_json, to_text
from grader.results import ExerciseResult, Report
from grader.results.folder import grades_row, grades_table, result_object

LESSON = "10_decoder_only"
#: What grading recorded: (exercise, points, max_points); the total is 11.25 of 21.
RECORDED = [("rms_norm", 0.25, 2.0), ("lm_loss", 0.75, 1.0), ("DecoderLM", 10.25, 18.0)]
TOTAL = (11.25, 21.0)
#: "a / b" and "a of b": a score as a table or a sentence shows it.
PAIR = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?) ?(?:/|of) ?(\d+(?:\.\d+)?)(?![\w.])")


def _report(lang: str = "en") -> Report:
    from grader.i18n import localize

    exercises = [ExerciseResult(name, points, top, [] if points == top else [Hint("a hint")])
                 for name, points, top in RECORDED]
    return localize(Report(f"s1/{LESSON}/{LESSON}.ipynb", LESSON, exercises), lang)


def _pairs(text: str) -> list[tuple[float, float]]:
    return [(float(a), float(b)) for a, b in PAIR.findall(re.sub(r"<[^>]+>", " ", text))]


def _shown_as_recorded(text: str, where: str) -> None:
    """Every score pair ``text`` shows is a recorded one, written with every digit; each
    exercise's and the total are there."""
    recorded = {(p, m) for _, p, m in RECORDED} | {TOTAL}
    pairs = _pairs(text)
    assert set(pairs) >= recorded, f"{where} lacks a recorded score: {pairs}"
    assert set(pairs) <= recorded, f"{where} shows a score that is not recorded: {pairs}"
    for wrong in ("0.2 ", "11.2 ", "10.2 ", "0.8 "):
        assert wrong not in re.sub(r"<[^>]+>", " ", text) + " ", f"{where} rounds: {wrong!r}"


def test_the_record_holds_quarter_points() -> None:
    record = json.loads(json.dumps(result_object(_report())))
    assert (record["score"], record["max_score"]) == TOTAL
    assert [(x["name"], x["points"], x["max_points"]) for x in record["exercises"]] == RECORDED
    assert json.loads(to_json(_report()))["score"] == 11.25
    row = next(csv.DictReader(io.StringIO(grades_table([grades_row("s1", _report(), [n for n, _, _ in RECORDED])],
                                                        [n for n, _, _ in RECORDED]))))
    assert float(row["score"]) == 11.25 and [float(row[n]) for n, _, _ in RECORDED] == [0.25, 0.75, 10.25]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_check_table_feedback_page_and_notebook_cell_show_the_recorded_scores(lang: str) -> None:
    report = _report(lang)
    _shown_as_recorded(to_text(report), "grader check's table")
    _shown_as_recorded(to_html(report), "the notebook's check table")
    page = feedback_html(report, "s1")
    _shown_as_recorded(page, "the feedback page")
    assert "11.25 / 21" in re.sub(r"<[^>]+>", "", page)


def test_the_check_table_columns_stay_aligned() -> None:
    lines = [line for line in to_text(_report()).splitlines() if " / " in line]
    assert len({line.index("/") for line in lines}) == 1, lines


def test_a_late_penalty_is_shown_to_the_last_recorded_digit() -> None:
    """A penalty of 7 % a day leaves 4 decimals: the page shows what grades.csv holds."""
    page = re.sub(r"<[^>]+>", "", feedback_html(_report(), "s1", penalty=0.7875))
    assert "10.4625 / 21" in page and "0.7875" in page and "11.25" in page


def test_nbgrader_cells_and_gradescope_show_the_recorded_scores(capsys) -> None:
    from grader.integrations.gradescope import run as gradescope
    from grader.kernel import exercise_text

    report = _report()
    for name, points, top in RECORDED:
        text, earned = exercise_text(name, [x for x in report.exercises if x.name == name], str)
        assert earned == points and _pairs(text) == [(points, top)], text
    cfg = gradescope.Config(lesson=LESSON)
    doc = gradescope.document(cfg, report.exercises, ["summary"], status="ok", seconds=1.0, extra={})
    assert doc["score"] == 11.25
    assert [(t["score"], t["max_score"]) for t in doc["tests"]] == [(p, m) for _, p, m in RECORDED]
    gradescope.report_stdout(cfg, gradescope.Graded(doc, {}, {}, 1 << 30), 1.0)
    shown = [line for line in capsys.readouterr().out.splitlines() if " / " in line]
    assert [_pairs(line) for line in shown] == [[(p, m)] for _, p, m in RECORDED]


def test_the_class_report_shows_the_recorded_scores(tmp_path: Path) -> None:
    from grader.outputs.class_report import load, to_look_at, write_report
    from grader.results.folder import Folder

    folder = Folder(tmp_path / "out")
    folder.prepare()
    names = [n for n, _, _ in RECORDED]
    low = Report("s2", LESSON, [ExerciseResult(n, 0.25, m, [Hint("a hint")]) for n, _, m in RECORDED])
    folder.write_result("s1", _report())
    folder.write_result("s2", low)
    folder.write_grades([grades_row("s1", _report(), names), grades_row("s2", low, names)], names)
    with contextlib.redirect_stdout(io.StringIO()):
        _, summary = write_report(folder.path)
    page = (folder.path / "report.html").read_text(encoding="utf-8")
    assert 'data-student="s1" data-score="11.25"' in page
    assert re.search(r">11\.25 / 21<", page) and re.search(r">0\.75<", page), "the grades table"
    assert "median 6 of 21" in summary  # (11.25 + 0.75) / 2
    why = {row["student"]: " ".join(row["reasons"]) for row in to_look_at(load(folder.path), {})}
    assert why["s2"] == "scored 0.75 of 21"


def test_the_course_gradebook_shows_the_recorded_scores(tmp_path: Path) -> None:
    """Twelve lessons with quarter points add up past 100: ``:g`` showed 139.4625 as 139.463."""
    from grader.outputs.gradebook import build, lesson_points, summary

    points = lesson_points()
    folders = []
    for lesson, top in points.items():
        folder = tmp_path / lesson
        folder.mkdir()
        score = top - 1.5375 if lesson == "01_attention_by_hand" else top
        (folder / "grades.csv").write_text(
            "student_id,lesson,score,max_score,status,message\n"
            f"s1,{lesson},{score},{top},ok,\n", encoding="utf-8")
        folders.append(folder)
    roster = tmp_path / "roster.csv"
    roster.write_text("name,student_id\nAda,s1\n", encoding="utf-8")
    book = build(folders, roster, key="student_id")
    total = sum(points.values()) - 1.5375
    row = dict(zip(book.header, book.rows[0], strict=True))
    assert row["01_attention_by_hand (10)"] == "8.4625"
    assert (row["total"], row["possible"]) == (f"{total:.4f}", f"{sum(points.values()):g}")
    assert _pairs(f"{row['total']} / {row['possible']}") == [(total, sum(points.values()))]
    assert f"{sum(points.values()):g}" in summary(book, tmp_path / "book.csv").splitlines()[-1]
