"""``python -m grader gradebook DIR... --roster ROSTER``: one gradebook for the course.

Each ``DIR`` is a folder ``python -m grader grade`` wrote (its ``grades.csv``: one lesson,
late penalties already taken off the ``score``). The roster is the one ``grader lms``
reads (``grader.outputs.lms.read_roster``: Canvas's or Moodle's gradebook export, or any CSV with a
key column whose values are the ``student_id`` folder names). Out comes one CSV, a row per
roster student: who they are, then every lesson of the course (blank while it has not
been graded; 0 for a student with no submission in a graded lesson), the total, the
points possible so far and the percentage; with ``--weights``, a weighted percentage too.
Students are matched as ``grader lms`` matches them (``lms.pair``): a roster matching
nobody is refused; students graded but not in the roster (an instructor's test submission,
a typo in a folder name) and roster students graded in no folder are listed, never
counted, and the command exits 1.

The points of each lesson come from its hidden graders (``engine.exercise_points``), so
the table the README shows (``point_table``) cannot drift from what grading gives.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import coursekit.text
from coursekit import catalogue
from coursekit.errors import UnknownLesson
from grader.common import csvcells
from grader.common.templating import points as points_text
from grader.i18n import said_lines, words
from grader.i18n.message import Message, msg
from grader.outputs.lms import (
    Exported,
    Lesson,
    LmsError,
    Match,
    Roster,
    graded_students,
    key_column,
    pair,
    read_lesson,
    read_roster,
)


def lesson_points() -> dict[str, float]:
    """``{lesson: points}`` for every lesson of the course, from its hidden graders."""
    from grader.check.engine import exercise_points

    return {lesson.id: sum(exercise_points(lesson.id).values()) for lesson in catalogue.COURSE}


def point_table(points: dict[str, float] | None = None) -> str:
    """The course's points per lesson as a Markdown table (the README shows it)."""
    points = points or lesson_points()
    lines = ["| lesson | points |", "| --- | ---: |"]
    # plain ids: the README's lesson table is the one whose ids are in backticks
    lines += [f"| {lesson} | {points_text(value)} |" for lesson, value in points.items()]
    lines.append(f"| total | {points_text(sum(points.values()))} |")
    return "\n".join(lines)


def parse_weights(text: str | None, lessons: list[str]) -> dict[str, float] | None:
    """``"01=1,08=2,09=3"`` (lesson numbers or ids; unnamed lessons weigh 1)."""
    if not text:
        return None
    weights = {lesson: 1.0 for lesson in lessons}
    for part in text.split(","):
        name, _, value = part.partition("=")
        try:
            lesson = catalogue.get(name.strip()).id
            weights[lesson] = float(value)
        except (UnknownLesson, ValueError):
            raise LmsError(msg("--weights: cannot read {weight} (e.g. 01=1,08=2)", weight=repr(part.strip()))) from None
    return weights


@dataclass
class Gradebook:
    header: list[str]
    rows: list[list[str]]
    graded: list[str]  # lessons with a folder
    points: dict[str, float]
    paired: Match  # the roster's students with the graded ones
    roster: Roster

    def csv(self) -> str:
        buf = io.StringIO()
        writer = csvcells.Writer(buf)
        writer.writerow(self.header)
        writer.writerows(self.rows)
        return buf.getvalue()


def build(folders: list[str | Path], roster_path: str | Path, key: str | None = None,
          weights: str | None = None, local_part: bool = False) -> Gradebook:
    points = lesson_points()
    lessons: dict[str, Lesson] = {}
    for folder in folders:
        graded = read_lesson(folder)
        if graded.lesson in lessons:
            raise LmsError(msg("two folders grade {lesson}: {folder} and {other_folder}", lesson=graded.lesson,
                               folder=lessons[graded.lesson].folder, other_folder=graded.folder))
        if graded.lesson not in points:
            raise LmsError(msg("{folder}: {lesson} is not a lesson of the course", folder=graded.folder,
                               lesson=graded.lesson))
        lessons[graded.lesson] = graded
    order = [lesson for lesson in points if lesson in lessons]
    roster = read_roster(roster_path)
    column = key_column(roster, key)
    paired = pair(roster, column, graded_students(lessons.values()), local_part)
    by_row = {id(row): student for row, student in paired.matched}
    weight = parse_weights(weights, list(points))
    identity = ["name", column] if column != "name" else [column]
    header = identity + ["student_id"] + [f"{lesson} ({points_text(points[lesson])})" for lesson in points]
    header += ["total", "possible", "percent"] + (["weighted_percent"] if weight else [])
    rows = []
    for row in roster.rows:
        student = by_row.get(id(row), "")
        scores: dict[str, float | None] = {}
        for lesson in points:
            if lesson not in lessons:
                scores[lesson] = None  # not graded yet
            else:
                graded_row = lessons[lesson].rows.get(student)
                scores[lesson] = float(graded_row["score"]) if graded_row else 0.0
        total = sum(scores[lesson] or 0.0 for lesson in order)
        possible = sum(points[lesson] for lesson in order)
        who = [roster.name(row), row.get(column, "")] if column != "name" else [row.get(column, "")]
        line = [*who, student] + ["" if v is None else points_text(v) for v in scores.values()]
        line += [points_text(total), points_text(possible), f"{100 * total / possible:.1f}" if possible else ""]
        if weight:
            share = sum(weight[lesson] for lesson in order)
            value = sum(weight[lesson] * (scores[lesson] or 0.0) / points[lesson] for lesson in order)
            line.append(f"{100 * value / share:.1f}" if share else "")
        rows.append(line)
    return Gradebook(header, rows, order, points, paired, roster)


def summary(book: Gradebook, target: Path, lang: str = "en") -> str:
    """What ``gradebook`` wrote, in ``lang`` (the instructor's): a table of the lessons."""
    t = words(lang)
    table = [[t("lesson"), t("points"), t("graded")]]
    table += [[lesson, points_text(value), t("yes") if lesson in book.graded else t("not yet")]
              for lesson, value in book.points.items()]
    table.append([t("total"), points_text(sum(book.points.values())), ""])
    widths = coursekit.text.columns(table, least=(0, 6))
    lines: list[Message | str] = [coursekit.text.row(cells, widths, "<><", "  ").rstrip() for cells in table]
    lines += book.paired.unmatched_lines(book.roster, msg("0 in every graded lesson"), msg("not counted"))
    first = msg("wrote {file}: {students} student(s) of the roster, {graded} of {lessons} lessons graded",
                file=target, students=len(book.roster.rows), graded=len(book.graded), lessons=len(book.points))
    return said_lines(first, lines, lang)


def write(folders: list[str | Path], roster_path: str | Path, out: str | Path,
          key: str | None = None, weights: str | None = None, local_part: bool = False,
          lang: str = "en") -> Exported:
    book = build(folders, roster_path, key, weights, local_part)
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(book.csv(), encoding="utf-8")
    return Exported(target, summary(book, target, lang), book.paired.mismatch())
