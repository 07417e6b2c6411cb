"""Every way a :class:`~grader.results.Report` is shown: ``grader check``'s text table,
JSON object and HTML fragment, the ``grades.csv`` row and the student's feedback page.

Each renders the report in the report's language (``grader.i18n.localize`` made it), the
hints from their data (:class:`~grader.hint.Hint`'s text); the JSON object and the CSV row
are the spec's formats, byte for byte.
"""

from __future__ import annotations

import io
import json
import unicodedata
from typing import Any

from grader import csvcells
from grader.results import Report, Status
from grader.templating import points


def to_json(report: Report) -> str:
    """``grader check --format json``: the spec's object, on one line."""
    return json.dumps(report.as_dict(), ensure_ascii=False)


def to_text(report: Report, color: bool = False) -> str:
    """The ``grader check`` table for people, in the report's language."""
    from grader.i18n import words

    t = words(report.lang)

    def paint(text: str, code: str) -> str:
        return f"\033[{code}m{text}\033[0m" if color else text

    width = max([len(e.name) for e in report.exercises] + [8])
    lines = [f"{report.lesson}  ({report.notebook})", ""]
    for e in report.exercises:
        mark = paint("✔", "32") if e.passed else paint("✘", "31")
        lines.append(f"  {mark} {e.name:<{width}}  {points(e.points):>5} / {points(e.max_points)}")
        lines += [f"      {_label(t('hint:'))}{hint.text}" for hint in e.hints]
    lines.append(f"    {_pad(t('total'), width)}  {points(report.score):>5} / {points(report.max_score)}")
    if report.status != Status.OK:
        lines += ["", paint(report.said(t), "33")]
    elif report.notes:
        lines += ["", *(paint(t(note), "33") for note in report.notes)]
    if report.cell_errors:
        lines += ["", t("Cells that raised an error while the notebook ran:")]
        for err in report.cell_errors[:10]:
            lines.append(f"  {t('cell')} {err.get('cell')}: {str(err.get('error'))[:200]}")
    return "\n".join(lines)


def _label(text: str) -> str:
    """``hint: `` or ``提示：`` (a full-width colon carries its own space)."""
    return text if text.endswith("：") else text + " "


def _pad(text: str, width: int) -> str:
    """``text`` padded to ``width`` terminal columns (a Chinese character takes two)."""
    wide = sum(1 for ch in text if unicodedata.east_asian_width(ch) in "WF")
    return text + " " * max(0, width - len(text) - wide)


CSV_HEADER = ["student_id", "lesson", "score", "max_score", "status", "message"]
#: With a course's due dates (``grader.classgrade.late``), after the exercise columns: nbgrader's names.
LATE_COLUMNS = ["timestamp", "duedate", "raw_score", "late_submission_penalty"]


def _one_line(text: str, limit: int = 600) -> str:
    return " ".join(str(text).split())[:limit]


def csv_row(student: str, report: Report, exercises: list[str],
            late: dict[str, Any] | None = None) -> list[Any]:
    """The ``grades.csv`` row of one student; ``exercises`` are the lesson's, in column order.
    ``late`` (the ``LATE_COLUMNS`` and ``note``): ``score`` is then the raw score less the
    penalty, and the note ends the message."""
    points = {x.name: round(x.points, 4) for x in report.exercises}
    penalty = float(late["late_submission_penalty"]) if late else 0.0
    message = " ".join([report.message, late.get("note", "")] if late else [report.message])
    row = [student, report.lesson, round(report.score - penalty, 4), report.max_score,
           str(report.status), _one_line(message.strip())] + [points.get(x, 0) for x in exercises]
    return row + ([late[c] for c in LATE_COLUMNS] if late else [])


def csv_table(rows: list[list[Any]], exercises: list[str], late: bool = False) -> str:
    buf = io.StringIO()
    writer = csvcells.Writer(buf)  # a student id is never a spreadsheet formula
    writer.writerow(CSV_HEADER + exercises + (LATE_COLUMNS if late else []))
    writer.writerows(rows)
    return buf.getvalue()


def to_html(report: Report) -> str:
    """``grader check --format html``: the text table's words, in the report's language, as
    an HTML fragment (the notebook's check cell shows it)."""
    from grader.i18n import words
    from grader.templating import render

    return render("check.html.j2", report=report, t=words(report.lang),
                  errors=report.cell_errors[:10])


def feedback_html(report: Report, student: str, penalty: float = 0.0) -> str:
    """The student's feedback page, in the report's language (:func:`grader.i18n.localize`):
    points and hints, never a hidden test's code. ``penalty``: points lost for lateness
    (the score shown is then ``grades.csv``'s, the raw score beside it)."""
    from grader.i18n import words
    from grader.templating import render

    return render("feedback.html.j2", report=report, student=student, t=words(report.lang),
                  errors=report.cell_errors[:10], excerpt=report.output_excerpt[:2000],
                  penalty=round(penalty, 4), final=round(report.score - penalty, 4))
