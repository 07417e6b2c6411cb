"""What a class sees on its feedback pages (issue 50): times in the course's timezone, a
score column that never wraps, and the missing-submission message naming the file nbgrader
expects in the course's edition."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from grader import i18n
from grader.classgrade.late import parse
from grader.common.hint import Hint
from grader.outputs.render import feedback_html, to_html
from grader.results import ExerciseResult, Report

LESSON = "10_decoder_only"
BEIJING = """timezone = "Asia/Shanghai"
[due]
10_decoder_only = "2026-03-03 23:59"
[penalty]
per_day = 0.10
"""


def _text(page: str) -> str:
    return re.sub(r"<[^>]+>", "", page)


def _late_note(submitted: datetime) -> str:
    deadlines = parse(BEIJING, lessons=[LESSON])
    return deadlines.lateness(LESSON, "s1", submitted).describe()


def test_deadlines_are_shown_in_the_course_timezone_with_its_name() -> None:
    """A 23:59 Beijing deadline reads 23:59 Asia/Shanghai, not 15:59 UTC, in both
    languages; the submission time too."""
    on_time = _late_note(datetime(2026, 3, 3, 10, tzinfo=UTC))
    assert str(on_time) == ("On time (submitted 2026-03-03 18:00:00 Asia/Shanghai, "
                       "due 2026-03-03 23:59:00 Asia/Shanghai).")
    late = _late_note(datetime(2026, 3, 4, 10, tzinfo=UTC))
    assert "(submitted 2026-03-04 18:00:00 Asia/Shanghai, due 2026-03-03 23:59:00 Asia/Shanghai)" in str(late)
    report = Report(f"s1/{LESSON}/{LESSON}.zh.ipynb", LESSON,
                    [ExerciseResult("rms_norm", 2.0, 2.0)], notes=[late])
    page = _text(feedback_html(i18n.localize(report, "zh"), "s1", penalty=0.2))
    assert "截止于 2026-03-03 23:59:00 Asia/Shanghai" in page
    assert "提交于 2026-03-04 18:00:00 Asia/Shanghai" in page
    assert "UTC" not in page and "15:59" not in page


def test_a_course_without_a_timezone_still_says_utc() -> None:
    deadlines = parse('[due]\n10_decoder_only = "2026-03-03 23:59"\n', lessons=[LESSON])
    note = deadlines.lateness(LESSON, "s1", datetime(2026, 3, 3, 10, tzinfo=UTC)).describe()
    assert str(note) == "On time (submitted 2026-03-03 10:00:00 UTC, due 2026-03-03 23:59:00 UTC)."


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_score_column_never_wraps(lang: str) -> None:
    """「分/数」, 「1 /」「2」: the points header, each exercise's points and the total stay on
    one line, on the feedback page and in the notebook's check table."""
    report = i18n.localize(Report(f"s1/{LESSON}/{LESSON}.zh.ipynb", LESSON, [
        ExerciseResult("rms_norm", 1.0, 2.0, [Hint("a hint")]), ExerciseResult("lm_loss", 2.0, 2.0)]), lang)
    for page in (feedback_html(report, "s1"), to_html(report)):
        header = re.search(r"<th[^>]*>" + re.escape(i18n.translate("points", lang)) + "</th>", page)
        assert header and "white-space:nowrap" in header.group(0), page
        cells = re.findall(r"<t[dh][^>]*>[^<]*\d / \d+</t[dh]>", page)
        assert len(cells) == 3, cells  # two exercises and the total
        assert all("white-space:nowrap" in cell for cell in cells), cells
    page = feedback_html(report, "s1")
    assert re.search(r'<b class="points">3 / 4</b>', page) and ".points{white-space:nowrap}" in page


@pytest.mark.parametrize(("edition", "expected", "lang"), [
    ("en", [f"{LESSON}.ipynb"], "en"),
    ("zh", [f"{LESSON}.zh.ipynb"], "zh"),
    ("both", [f"{LESSON}.ipynb", f"{LESSON}.zh.ipynb"], "en"),
])
def test_a_missing_submission_names_the_edition_nbgrader_expects(monkeypatch, edition, expected,
                                                                  lang) -> None:
    from grader.classgrade.classroom import missing

    monkeypatch.setenv("COURSE_EDITION", edition)
    monkeypatch.delenv("COURSE_LANG", raising=False)
    report = missing("s1", LESSON)
    layout = ", ".join(f"s1/{LESSON}/{name}" for name in expected)
    assert str(report.reason) == f"No submission: no notebook of {LESSON} in s1/ (nbgrader's layout: {layout})."
    assert report.notebook == f"s1/{LESSON}/{expected[0]}"
    assert i18n.choose(None, report.edition) == lang
    if lang == "zh":
        page = _text(feedback_html(i18n.localize(report, "zh"), "s1"))
        assert f"nbgrader 的目录结构：s1/{LESSON}/{LESSON}.zh.ipynb" in page
