"""What a Chinese class's instructor reads (issue 50): ``report.html`` and ``grade``'s summary
in the class's language (``--lang``, else ``COURSE_LANG``, else the edition the class handed
in), the report quoting the hints as the students read them; an English class stays English."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from grader import i18n
from grader.classgrade.classroom import Options, RunSummary, editions_handed_in, summary_lines
from grader.classgrade.late import parse
from grader.common.hint import Hint
from grader.i18n import msg
from grader.results import ExerciseResult, Report, Status, not_graded
from grader.results.folder import grades_row

LESSON = "10_decoder_only"
HINT = "rope_angles should return two tensors, (cos, sin)"  # a hint of the course's catalogue
EXERCISES = {"rope_angles": 2.0, "lm_loss": 2.0}


def _class(tmp_path: Path, edition: str) -> Path:
    """A graded folder: two students of ``edition``, one of them missing."""
    from grader.results.folder import Folder

    suffix = ".zh" if edition == "zh" else ""
    folder = Folder(tmp_path / "out")
    folder.prepare()
    wrong = Report(f"s1/{LESSON}/{LESSON}{suffix}.ipynb", LESSON,
                   [ExerciseResult("rope_angles", 0.25, 2.0, [Hint(HINT)]), ExerciseResult("lm_loss", 2.0, 2.0)])
    gone = not_graded(f"s2/{LESSON}/{LESSON}{suffix}.ipynb", LESSON, EXERCISES, Status.MISSING,
                      msg("No submission: no notebook of {lesson} in {student}/ (nbgrader's layout: "
                          "{canonical}).", lesson=LESSON, student="s2",
                          canonical=f"s2/{LESSON}/{LESSON}{suffix}.ipynb"))  # classroom's message
    for student, report in (("s1", wrong), ("s2", gone)):
        folder.write_result(student, report)
    folder.write_grades([grades_row("s1", wrong, list(EXERCISES)), grades_row("s2", gone, list(EXERCISES))],
                        list(EXERCISES))
    return folder.path


def _report(folder: Path, lang: str | None = None) -> tuple[str, str]:
    from grader.outputs.class_report import write_report

    with contextlib.redirect_stdout(io.StringIO()):
        path, summary = write_report(folder, lang=lang)
    return path.read_text(encoding="utf-8"), summary


def _english_left(page: str) -> list[str]:
    """Runs of English words in the page's text (its tables, headings, notes), leaving out
    code, ids, statuses and the plots."""
    body = re.sub(r"<(svg|code|style)\b.*?</\1>", " ", page, flags=re.S)
    text = re.sub(r"<[^>]+>", "\n", body)
    return [line.strip() for line in text.splitlines()
            if re.search(r"[A-Za-z]{3,} [A-Za-z]{3,}", line)]


def test_a_chinese_class_gets_its_report_in_chinese(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("COURSE_LANG", raising=False)
    page, summary = _report(_class(tmp_path, "zh"))
    assert '<html lang="zh">' in page and "班级报告" in page
    assert i18n.translate(HINT, "zh") in page and HINT not in page  # the hint the student read
    assert "没有提交" in page  # s2's message, translated sentence by sentence
    assert not _english_left(page), _english_left(page)
    assert summary.startswith("已写入 ") and "名学生" in summary
    assert all(not i18n.translate_checked(line.strip(), "zh")[1] for line in summary.splitlines())


def test_an_english_class_and_lang_en_stay_english(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("COURSE_LANG", raising=False)
    page, summary = _report(_class(tmp_path / "en", "en"))
    assert '<html lang="en">' in page and HINT in page and summary.startswith("wrote ")
    page, summary = _report(_class(tmp_path / "zh", "zh"), lang="en")
    assert '<html lang="en">' in page and HINT in page and "班级报告" not in page
    monkeypatch.setenv("COURSE_LANG", "zh")
    page, _ = _report(_class(tmp_path / "en2", "en"))
    assert '<html lang="zh">' in page


def test_report_and_grade_take_lang_on_the_command_line() -> None:
    from grader.cli import build_parser

    assert build_parser().parse_args(["report", "out", "--lang", "zh"]).lang == "zh"
    assert build_parser().parse_args(["grade", "sub", "--lesson", "10", "--out", "o", "--lang", "zh"]).lang == "zh"


@pytest.mark.parametrize(("editions", "lang"), [(["zh", "zh", "en"], "zh"), (["en", "zh"], "en"),
                                                 ([], "en"), (["en"], "en")])
def test_the_class_language_is_the_edition_most_of_it_handed_in(monkeypatch, editions, lang) -> None:
    monkeypatch.delenv("COURSE_LANG", raising=False)
    assert i18n.class_language(None, editions) == lang
    assert i18n.class_language("en", ["zh"]) == "en"


def test_grades_summary_says_every_line_in_chinese(tmp_path) -> None:
    deadlines = parse('timezone = "Asia/Shanghai"\n[due]\n10_decoder_only = "2026-03-03 23:59"\n',
                      source="deadlines.toml", lessons=[LESSON])
    opts = Options(lesson=LESSON, out=tmp_path / "out", deadlines=deadlines)
    summary = RunSummary(graded=3, reused=2, seconds=4.5, per_submission=[1.0, 2.0], protections=["bwrap"],
                         missing={"memory-cap": "no cgroup"}, changed=["s1"], other_settings={"s2": "x"},
                         waiting=["s3"], statuses={"s4": "ambiguous", "s1": "ok"})
    lines = summary_lines(summary, opts)
    assert len(lines) == 8 and str(lines[0]).startswith("graded 3 submission(s) (1 changed since graded)")
    for line in lines:
        text, english = i18n.translate_checked(line, "zh")
        assert not english and i18n.CJK_RE.search(text), (line, text)


def test_the_editions_handed_in_are_read_from_the_results(tmp_path) -> None:
    out = _class(tmp_path, "zh")
    assert editions_handed_in(out, ["s1", "s2", "nobody"]) == ["zh", "zh"]
