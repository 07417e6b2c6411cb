"""``grader selftest``'s table (grader/classgrade/selftest.py), the lessons checked stubbed out:
its columns line up as a terminal shows them, Chinese headers included."""

from __future__ import annotations

import pytest
from zh_tables import Table, cells_of, misaligned

from coursekit import catalogue
from grader.classgrade import selftest


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_table_lines_up_in_every_language(
        lang: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Each header word (课程, 参考笔记本, 未改动笔记本, 秒: two columns a character) starts
    where its column's cells start (scores that fill their cells, ``1000 / 100``); the header
    was printed unpadded, its Chinese words counted one column each."""
    def check_lesson(lesson: catalogue.Lesson, isolation: str, require: tuple[str, ...]) -> tuple[
            selftest.LessonSelftest, list[str], dict[str, str]]:
        return selftest.LessonSelftest(lesson.id, 1000.0, 1000.0, 100.0, 12345.6, []), ["bwrap"], {}

    monkeypatch.setattr(selftest, "check_lesson", check_lesson)
    assert selftest.run("01,10", lang=lang)
    lines = capsys.readouterr().out.splitlines()[:3]
    cells = [cells_of(line)[:4] for line in lines]
    assert [len(line) for line in cells] == [4, 4, 4], lines
    assert not misaligned(Table(None, cells)), "\n".join(lines)
    assert len({line[1][0] for line in cells}) == 1 and len({line[2][0] for line in cells}) == 1, "\n".join(lines)
