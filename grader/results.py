"""What grading produced, and every way it is shown: statuses, results, renderers.

A :class:`Report` is one notebook's grade: its :class:`ExerciseResult` s and a
:class:`Status`. ``grader check`` prints it (:func:`to_text`, :func:`to_json`);
``grader grade`` writes it (:func:`record_json` for ``results/<id>.json``,
:func:`csv_row` for ``grades.csv``, :func:`feedback_html` for the feedback page), and the
per-student sentence of every one of them is :attr:`Report.message`, written once here.

Statuses (the ``status`` of ``grades.csv`` and of ``results/<id>.json``):

============ ==============================================================================
``ok``       the notebook ran and every check ran, whatever the score
``timeout``  the notebook ran out of time (``--timeout``): checks after that point score 0
``memory``   the notebook reached its memory limit (``--memory``), wherever it did: every
             exercise 0 (``check.engine.nothing_graded``), the same on every run
``crashed``  the notebook's process stopped before grading finished (``os._exit``, a signal)
``garbled``  the notebook's process wrote garbage where the grader reads its answers (to a
             file descriptor it does not own): it is stopped at once, checks after that
             point score 0
``missing``  no notebook where nbgrader's layout puts it: every exercise 0
``unreadable`` the file is not a notebook the grader can read (broken JSON, nbformat 3,
             too large): every exercise 0, the reason in ``message``
``ambiguous`` the student's folder holds several notebooks of the lesson, each worked on
             and different: nothing is guessed, every exercise 0 until the instructor keeps
             one (``message`` names them) and regrades
``error``    the grading machinery itself failed on this submission, twice (never the
             student's code: that is ``ok`` with hints, or one of the above). Every exercise
             0; the traceback is in ``errors.log``; regrade with ``--force`` once fixed
============ ==============================================================================
"""

from __future__ import annotations

import io
import json
import unicodedata
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from grader import csvcells
from grader.templating import points


class Status(StrEnum):
    OK = "ok"
    TIMEOUT = "timeout"
    MEMORY = "memory"
    CRASHED = "crashed"
    GARBLED = "garbled"
    MISSING = "missing"
    UNREADABLE = "unreadable"
    AMBIGUOUS = "ambiguous"
    ERROR = "error"

    @classmethod
    def of_worker(cls, status: str) -> Status:
        """A worker's ``finish()`` word (ok, timeout, memory, crashed); anything else: crashed."""
        return cls(status) if status in ("ok", "timeout", "memory", "crashed") else cls.CRASHED


#: What happened, in a sentence, when the notebook's process did not see grading through.
STOPPED = {
    Status.TIMEOUT: "The notebook ran out of time (an infinite loop or a very slow cell?).",
    Status.MEMORY: "The notebook ran out of memory.",
    Status.CRASHED: "The notebook's process stopped before grading finished.",
    Status.GARBLED: ("The notebook's process wrote garbage where the grader reads its answers "
                     "(to a file descriptor it does not own?): it was stopped there."),
}


@dataclass
class ExerciseResult:
    """Points of one exercise (its contract name) and, when it lost points, why."""

    name: str
    points: float = 0.0
    max_points: float = 0.0
    failures: list[str] = field(default_factory=list)
    lang: str = field(default="en", compare=False)  # of the failures (grader.i18n.localize)

    @property
    def passed(self) -> bool:
        return not self.failures and self.points >= self.max_points

    @property
    def hints(self) -> list[str]:
        """What the student reads: each diagnosed mistake once, first, and the other failed
        checks folded into a count (``grader.check.messages.fold``)."""
        from grader.check.messages import fold

        return fold(self.failures, self.lang)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "points": round(self.points, 4),
            "max_points": round(self.max_points, 4),
            "passed": self.passed,
            "message": "; ".join(self.hints),
        }


@dataclass
class Report:
    """One notebook's grade. ``reason`` says why a notebook was not graded (missing,
    unreadable, error); :attr:`message` is the sentence shown for it everywhere."""

    notebook: str
    lesson: str
    exercises: list[ExerciseResult]
    status: Status = Status.OK
    reason: str = ""
    cell_errors: list[dict[str, Any]] = field(default_factory=list)
    output_excerpt: str = ""
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)  # e.g. a call that hung, which file was graded
    seed: int | None = None  # the hidden inputs' seed, when drawn at random (reproducible)
    edition: str = "en"   # the notebook's edition (grader.i18n.notebook_edition)
    lang: str = "en"      # the language of its hints (grader.i18n.localize); records stay English

    @property
    def score(self) -> float:
        return round(sum(e.points for e in self.exercises), 4)

    @property
    def max_score(self) -> float:
        return round(sum(e.max_points for e in self.exercises), 4)

    @property
    def message(self) -> str:
        """What happened to the submission, in a sentence."""
        return " ".join([self._what_happened(), *self.notes])

    def said(self, t: Any = None) -> str:
        """:attr:`message` with each sentence put through ``t`` (``i18n.words``): the verdict
        and every note are templates of their own, which the joined message is not."""
        parts = [(t or str)(part) for part in [self._what_happened(), *self.notes] if part]
        return ("" if self.lang == "zh" else " ").join(parts)

    def _what_happened(self) -> str:
        if self.status == Status.OK:
            score, top = points(self.score), points(self.max_score)
            return f"Graded: {score} of {top} points."
        if self.status in STOPPED:
            return STOPPED[Status(self.status)]
        first = self.exercises[0].as_dict()["message"] if self.exercises else ""
        return self.reason or first or f"Not graded ({self.status})."

    def as_dict(self) -> dict[str, Any]:
        """The ``grader check --format json`` object of the spec."""
        return {"notebook": self.notebook, "lesson": self.lesson, "score": self.score,
                "max_score": self.max_score, "exercises": [e.as_dict() for e in self.exercises]}

    def as_record(self) -> dict[str, Any]:
        """``results/<student>.json``: the ``check`` object plus ``status``; in English
        whatever the student's language, like the gradebook (its ``notebook`` names the
        edition handed in)."""
        return dict(self.as_dict(), status=str(self.status))

    def provenance(self) -> dict[str, Any]:
        """What ``results/<id>.json`` (the contract's object) leaves out and a rerun or the
        CSV needs: the notes of :attr:`message` and the hidden inputs' seed."""
        return {"notes": list(self.notes), "seed": self.seed}

    @classmethod
    def from_record(cls, record: dict[str, Any], notes: list[str] | None = None) -> Report:
        """The report of a ``results/<id>.json`` object: each exercise's hints as recorded
        (``grader.record``), or its ``message`` as one hint in a folder from before."""
        exercises = [ExerciseResult(x["name"], x["points"], x["max_points"], _failures(x))
                     for x in record["exercises"]]
        return cls(record["notebook"], record["lesson"], exercises, Status(record["status"]),
                   notes=[str(n) for n in (notes or [])])


def _failures(exercise: dict[str, Any]) -> list[str]:
    from grader.hint import Hint

    hints = exercise.get("hints")
    if isinstance(hints, list):
        return [Hint(str(h.get("text", "")), h.get("mistake"), h.get("kind")) for h in hints]
    return [exercise["message"]] if exercise.get("message") else []


def not_graded(notebook: str, lesson: str, exercises: dict[str, float], status: Status,
               reason: str) -> Report:
    """A report for a notebook that never ran: every exercise 0 of its points, ``reason`` as hint."""
    results = [ExerciseResult(name, 0.0, points, [reason]) for name, points in exercises.items()]
    return Report(notebook, lesson, results, status=status, reason=reason)


# --- renderers ----------------------------------------------------------------------------

def to_json(report: Report) -> str:
    return json.dumps(report.as_dict(), ensure_ascii=False)


def record_json(report: Report) -> str:
    return json.dumps(report.as_record(), ensure_ascii=False)


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
        lines += [f"      {_label(t('hint:'))}{hint}" for hint in e.hints]
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
