"""Every way a :class:`~grader.results.Report` is shown to people: ``grader check``'s text
table, JSON object and HTML fragment (:func:`check_output` picks one), and the student's
feedback page. The lower stages that show a report are handed these: ``grader check``
(``grader.check.command``, run by the CLI or by the helper) its ``show``; ``grade``
(``grader.classgrade``) writes each feedback page with :func:`feedback_html`.
``grades.csv``'s row is the graded folder's data (``grader.results.folder.grades_row``).

Each renders the report in the report's language (``grader.i18n.localize`` made it), the
hints from their data (:class:`~grader.common.hint.Hint`'s text); the JSON object is the spec's
format, byte for byte.
"""

from __future__ import annotations

import json

from coursekit.text import pad
from coursekit.text import width as text_width
from grader.common.templating import points
from grader.results import Report, Status


def to_json(report: Report) -> str:
    """``grader check --format json``: the spec's object, on one line."""
    return json.dumps(report.as_dict(), ensure_ascii=False)


def to_text(report: Report, color: bool = False) -> str:
    """The ``grader check`` table for people, in the report's language."""
    from grader.i18n import words

    t = words(report.lang)

    def paint(text: str, code: str) -> str:
        return f"\033[{code}m{text}\033[0m" if color else text

    width = max([text_width(e.name) for e in report.exercises] + [8, text_width(t("total"))])
    lines = [f"{report.lesson}  ({report.notebook})", ""]
    for e in report.exercises:
        mark = paint("✔", "32") if e.passed else paint("✘", "31")
        lines.append(f"  {mark} {pad(e.name, width)}  {points(e.points):>5} / {points(e.max_points)}")
        lines += [f"      {_label(t('hint:'))}{t(hint.text)}" for hint in e.hints]
    lines.append(f"    {pad(t('total'), width)}  {points(report.score):>5} / {points(report.max_score)}")
    if report.status != Status.OK:
        lines += ["", paint(report.said(t), "33")]
    elif report.notes:
        lines += ["", *(paint(t(note), "33") for note in report.notes)]
    if report.cell_errors:
        lines += ["", t("Cells that raised an error while the notebook ran:")]
        for err in report.cell_errors[:10]:
            lines.append(f"  {t('cell')} {err.get('cell')}: {str(err.get('error'))[:200]}")
    return "\n".join(lines)


def check_output(report: Report, fmt: str, color: bool) -> str:
    """What ``grader check --format fmt`` prints (``json``, ``html``, else the text table,
    ``color``: with colours), ending in a newline but for HTML."""
    if fmt == "json":
        return to_json(report) + "\n"
    if fmt == "html":
        return to_html(report)
    return to_text(report, color=color) + "\n"


def _label(text: str) -> str:
    """``hint: `` or ``提示：`` (a full-width colon carries its own space)."""
    return text if text.endswith("：") else text + " "


def to_html(report: Report) -> str:
    """``grader check --format html``: the text table's words, in the report's language, as
    an HTML fragment (the notebook's check cell shows it)."""
    from grader.common.templating import render
    from grader.i18n import words

    return render("check.html.j2", report=report, t=words(report.lang),
                  errors=report.cell_errors[:10])


def feedback_html(report: Report, student: str, penalty: float = 0.0) -> str:
    """The student's feedback page, in the report's language (:func:`grader.i18n.localize`):
    points and hints, never a hidden test's code. ``penalty``: points lost for lateness
    (the score shown is then ``grades.csv``'s, the raw score beside it)."""
    from grader.common.templating import render
    from grader.i18n import words

    return render("feedback.html.j2", report=report, student=student, t=words(report.lang),
                  errors=report.cell_errors[:10], excerpt=report.output_excerpt[:2000],
                  penalty=round(penalty, 4), final=round(report.score - penalty, 4))
