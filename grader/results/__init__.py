"""What grading produced: one notebook's grade, as one model kept everywhere.

A :class:`Report` is one notebook's grade: its :class:`ExerciseResult` s (points and the
:class:`~grader.common.hint.Hint` s that say why points were lost, as data: text, mistake id,
kind), a :class:`Status`, the notes of its message and, once ``grade`` has written it,
what it was made from and with (:class:`Provenance`). :meth:`Report.to_dict` and
:meth:`Report.from_dict` are its one serialiser (:mod:`grader.results.folder` keeps it in
the graded folder, one file per student); :mod:`grader.outputs.render` shows it (``grader
check``'s text, JSON and HTML, the feedback page), ``grader.results.folder.grades_row``
makes its ``grades.csv`` row, and the per-student sentence of every one of them is
:attr:`Report.message`, written once here.

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

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from grader.common.hint import Hint
from grader.common.templating import points
from grader.i18n import Message, join, msg


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
    Status.TIMEOUT: msg("The notebook ran out of time (an infinite loop or a very slow cell?)."),
    Status.MEMORY: msg("The notebook ran out of memory."),
    Status.CRASHED: msg("The notebook's process stopped before grading finished."),
    Status.GARBLED: (msg("The notebook's process wrote garbage where the grader reads its answers (to a file descriptor it does not own?): it was stopped there.")),
}


@dataclass
class ExerciseResult:
    """Points of one exercise (its contract name) and, when it lost points, why: the hint
    of every failed check (:attr:`hints` folds them into what the student reads)."""

    name: str
    points: float = 0.0
    max_points: float = 0.0
    failures: list[Hint] = field(default_factory=list)
    lang: str = field(default="en", compare=False)  # of the failures (grader.i18n.localize)

    @property
    def passed(self) -> bool:
        return not self.failures and self.points >= self.max_points

    @property
    def hints(self) -> list[Hint]:
        """What the student reads: each diagnosed mistake once, first, and the other failed
        checks folded into a count (``grader.check.messages.fold``)."""
        from grader.check.messages import fold

        return fold(self.failures, self.lang)

    @property
    def message(self) -> str:
        """The hints in one line, in English (the ``message`` of the ``check`` object)."""
        return str(self.summary)

    @property
    def summary(self) -> Message | str:
        """The hints in one line, as a message (each hint keeps its id)."""
        return join("; ", (h.text for h in self.hints))

    def as_dict(self) -> dict[str, Any]:
        """The exercise of the ``grader check --format json`` object of the spec."""
        return {
            "name": self.name,
            "points": round(self.points, 4),
            "max_points": round(self.max_points, 4),
            "passed": self.passed,
            "message": self.message,
        }

    def to_dict(self) -> dict[str, Any]:
        """:meth:`as_dict` and the hints as data beside its ``message``."""
        return dict(self.as_dict(), hints=[h.as_dict() for h in self.hints])

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ExerciseResult:
        """From :meth:`to_dict`'s object, or from :meth:`as_dict`'s (written before hints
        were kept as data): its ``message`` is then its one hint."""
        hints = data.get("hints")
        if isinstance(hints, list):
            failures = [Hint.from_dict(h) for h in hints if isinstance(h, dict)]
        else:
            failures = [Hint(str(data["message"]))] if data.get("message") else []
        return cls(str(data["name"]), float(data["points"]), float(data["max_points"]), failures)


@dataclass
class Provenance:
    """What ``grade`` made a result from and with: the notebook graded (``submission``:
    its name, SHA-256 and nbgrader's timestamp; a rerun regrades when it changed), the
    settings (``graded_with``: grader version, isolation level, protections, limits:
    ``grader.check.provenance``), when, and whether every code cell was still as handed out."""

    submission: dict[str, Any] | None = None
    graded_with: dict[str, Any] = field(default_factory=dict)
    graded_at: str = ""
    untouched: bool = False

    KEYS = ("submission", "graded_with", "graded_at", "untouched")

    def to_dict(self) -> dict[str, Any]:
        return {"submission": self.submission, "graded_with": self.graded_with,
                "graded_at": self.graded_at, "untouched": self.untouched}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Provenance | None:
        """From an object holding :attr:`KEYS` (None when it holds none of them)."""
        if not any(key in data for key in cls.KEYS):
            return None
        submission, settings = data.get("submission"), data.get("graded_with")
        return cls(submission if isinstance(submission, dict) else None,
                   settings if isinstance(settings, dict) else {},
                   str(data.get("graded_at") or ""), data.get("untouched") is True)


@dataclass
class Report:
    """One notebook's grade. ``reason`` says why a notebook was not graded (missing,
    unreadable, error); :attr:`message` is the sentence shown for it everywhere."""

    notebook: str
    lesson: str
    exercises: list[ExerciseResult]
    status: Status = Status.OK
    reason: Message | str = ""
    cell_errors: list[dict[str, Any]] = field(default_factory=list)
    output_excerpt: str = ""
    seconds: float = 0.0
    notes: list[Message | str] = field(default_factory=list)  # e.g. a call that hung, which file was graded
    seed: int | None = None  # the hidden inputs' seed, when drawn at random (reproducible)
    edition: str = "en"   # the notebook's edition (grader.i18n.notebook_edition)
    lang: str = "en"      # the language of its hints (grader.i18n.localize); records stay English
    made: Provenance | None = None  # what ``grade`` made it from and with
    #: False for a result read back from a folder written before hints were kept as data:
    #: each exercise's one hint is then its recorded ``message`` (no mistake id, no kind)
    hints_recorded: bool = True

    @property
    def score(self) -> float:
        return round(sum(e.points for e in self.exercises), 4)

    @property
    def max_score(self) -> float:
        return round(sum(e.max_points for e in self.exercises), 4)

    @property
    def message(self) -> str:
        """What happened to the submission, in a sentence, in English."""
        return " ".join(str(part) for part in [self._what_happened(), *self.notes])

    def said(self, t: Callable[[Message | str], str] | None = None) -> str:
        """:attr:`message` with each sentence put through ``t`` (``i18n.words``): the verdict
        and every note are templates of their own, which the joined message is not."""
        parts = [(t or str)(part) for part in [self._what_happened(), *self.notes] if part]
        return ("" if self.lang == "zh" else " ").join(parts)

    def _what_happened(self) -> Message | str:
        if self.status == Status.OK:
            score, top = points(self.score), points(self.max_score)
            return msg("Graded: {score} of {top} points.", score=score, top=top)
        if self.status in STOPPED:
            return STOPPED[Status(self.status)]
        first = self.exercises[0].summary if self.exercises else ""
        return self.reason or first or msg("Not graded ({status}).", status=self.status)

    def as_dict(self) -> dict[str, Any]:
        """The ``grader check --format json`` object of the spec."""
        return {"notebook": self.notebook, "lesson": self.lesson, "score": self.score,
                "max_score": self.max_score, "exercises": [e.as_dict() for e in self.exercises]}

    def to_dict(self) -> dict[str, Any]:
        """Everything ``grade`` keeps of this report, in English whatever the student's
        language, like the gradebook: the ``check`` object with each exercise's hints as
        data and ``status`` (the spec's keys of ``results/<id>.json``), then the notes, the
        seed and the :class:`Provenance` (the same file's keys of its own:
        ``grader.results.folder``)."""
        data = dict(self.as_dict(), exercises=[e.to_dict() for e in self.exercises],
                    status=str(self.status), notes=[str(n) for n in self.notes], seed=self.seed)
        return data | (self.made.to_dict() if self.made is not None else {})

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Report:
        """The report of :meth:`to_dict`'s object, or of one written by an earlier grader (a
        ``results/<id>.json`` without hints as data, without notes or provenance)."""
        exercises = data["exercises"]
        notes = data.get("notes")
        seed = data.get("seed")
        return cls(str(data["notebook"]), str(data["lesson"]),
                   [ExerciseResult.from_dict(x) for x in exercises], Status(data["status"]),
                   notes=[str(n) for n in notes] if isinstance(notes, list) else [],
                   seed=seed if isinstance(seed, int) else None, made=Provenance.from_dict(data),
                   hints_recorded=all(isinstance(x.get("hints"), list) for x in exercises))


def not_graded(notebook: str, lesson: str, exercises: dict[str, float], status: Status,
               reason: Message | str) -> Report:
    """A report for a notebook that never ran: every exercise 0 of its points, ``reason`` as hint."""
    results = [ExerciseResult(name, 0.0, points, [Hint(reason)]) for name, points in exercises.items()]
    return Report(notebook, lesson, results, status=status, reason=reason)
