"""nbgrader with two editions of each lesson: which notebooks a course holds, and scores.

nbgrader treats every notebook of an assignment folder as part of the assignment: with
both ``NN_name.ipynb`` and ``NN_name.zh.ipynb`` in ``solutions/NN_name/``, a student who
hands in one edition would get the other marked missing, and the assignment's maximum
would double. ``nbgrader_config.py`` calls :func:`configure`, which reads
``COURSE_EDITION``:

- ``en`` (default) or ``zh``: the course holds that edition only. ``notebook_id`` selects
  its notebooks (``generate_assignment``, ``autograde``, ``generate_feedback``), and the
  other edition's notebooks are ``ignore``\\ d when files are copied (``release_assignment``,
  ``fetch``, ``collect``): students receive, and are graded on, one notebook per lesson;
  the gradebook and the formgrader show the lesson's true maximum.
- ``both``: students choose. Each lesson's assignment holds both notebooks; students get
  both and work in one. nbgrader's gradebook then keeps a score for each edition, so
  ``nbgrader export`` uses :class:`EditionsCsvExport`, which counts, for every notebook,
  the edition the student scored best in and the maximum of one edition (the formgrader's
  own totals still add both editions: read scores from the export).

In every mode, the hidden graders' hints are in the language of the notebook being
autograded (:class:`HintLanguage` sets ``COURSE_LANG`` for its kernel) unless the
instructor set ``COURSE_LANG``. The CSV is the same, language-neutral table in every mode.
"""

from __future__ import annotations

import os
from typing import Any

from nbconvert.preprocessors import Preprocessor
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins.export import CsvExportPlugin
from traitlets import Bool

from coursekit import catalogue, settings
from grader import csvcells

#: The instructor's own COURSE_LANG, read once, before any notebook sets it.
_INSTRUCTOR_LANG = settings.language()


def notebook_glob(edition: str) -> str:
    """nbgrader's ``CourseDirectory.notebook_id`` for a course holding ``edition``: a glob
    of notebook names without ``.ipynb``. An English notebook's name is the lesson id,
    which has no dot (``catalogue.Lesson`` checks it), so ``*[!.]??`` matches every English
    notebook and no ``<id>.xx`` edition."""
    if edition == "both":
        return "*"
    suffix = catalogue.EDITIONS[edition]
    return f"*{suffix}" if suffix else "*[!.]??"


def ignored(edition: str) -> list[str]:
    """File globs of the notebooks of the editions a course does not hold."""
    if edition == "both":
        return []
    return [f"{notebook_glob(other)}.ipynb" for other in catalogue.EDITIONS if other != edition]


def edition_of_name(name: str) -> str:
    """The edition of a notebook from its name (``01_attention_by_hand.zh`` is ``zh``)."""
    return catalogue.COURSE.edition_of(name if name.endswith(".ipynb") else f"{name}.ipynb")


def base_name(name: str) -> str:
    """A notebook's name without its edition's suffix: the notebook both editions are of."""
    suffix = catalogue.EDITIONS[edition_of_name(name)]
    return name.removesuffix(suffix) if suffix else name


class HintLanguage(Preprocessor):
    """Before a notebook's kernel starts (nbgrader's ``Execute``), set ``COURSE_LANG`` to
    its edition's language, so that the hidden tests' hints printed in the feedback are
    in the language the student reads. ``COURSE_LANG`` set by the instructor wins."""

    enabled = Bool(True).tag(config=True)  # nbconvert runs a preprocessor only when enabled

    def preprocess(self, nb: Any, resources: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        name = resources.get("nbgrader", {}).get("notebook") or ""
        os.environ[settings.LANG] = _INSTRUCTOR_LANG or edition_of_name(name)
        return nb, resources


class EditionsCsvExport(CsvExportPlugin):
    """nbgrader's CSV (same columns), counting each notebook once whatever its editions:
    the student's best edition, out of one edition's maximum. With one edition per course
    it is nbgrader's own CSV, quoted as CSV and with no cell a spreadsheet would run."""

    def export(self, gradebook: Gradebook) -> None:
        dest = self.to or "grades.csv"
        students = [str(s) for s in self.student]
        assignments = [str(a) for a in self.assignment]
        keys = ["assignment", "duedate", "timestamp", "student_id", "last_name", "first_name",
                "email", "raw_score", "late_submission_penalty", "score", "max_score"]
        self.log.info("Exporting grades to %s (each notebook's editions counted once)", dest)
        with open(dest, "w", newline="") as fh:
            writer = csvcells.Writer(fh)
            writer.writerow(keys)
            for assignment in gradebook.assignments:
                if assignments and assignment.name not in assignments:
                    continue
                max_score = _per_notebook((nb.name, nb.max_score) for nb in assignment.notebooks)
                for student in gradebook.students:
                    if students and student.id not in students:
                        continue
                    row: dict[str, Any] = {
                        "assignment": assignment.name, "duedate": assignment.duedate,
                        "student_id": student.id, "last_name": student.last_name,
                        "first_name": student.first_name, "email": student.email,
                        "max_score": max_score}
                    try:
                        submission = gradebook.find_submission(assignment.name, student.id)
                    except MissingEntry:
                        row.update(timestamp="", raw_score=0.0, late_submission_penalty=0.0, score=0.0)
                    else:
                        raw = _per_notebook((nb.name, nb.score) for nb in submission.notebooks)
                        penalty = submission.late_submission_penalty
                        row.update(timestamp=submission.timestamp, raw_score=raw,
                                   late_submission_penalty=penalty, score=max(0.0, raw - penalty))
                    # a student id or name is never a spreadsheet formula (grader.csvcells)
                    writer.writerow("" if row[k] is None else str(row[k]) for k in keys)


def _per_notebook(scores: Any) -> float:
    """The sum over notebooks of the best score among each notebook's editions."""
    best: dict[str, float] = {}
    for name, score in scores:
        base = base_name(name)
        best[base] = max(best.get(base, 0.0), float(score or 0.0))
    return sum(best.values())


def configure(c: Any, edition: str | None = None) -> str:
    """Set up an nbgrader config ``c`` for ``edition`` (default ``$COURSE_EDITION``);
    returns the edition."""
    from nbgrader.converters import Autograde
    from nbgrader.coursedir import CourseDirectory

    edition = edition or settings.edition()
    c.CourseDirectory.notebook_id = notebook_glob(edition)
    c.CourseDirectory.ignore = list(CourseDirectory.class_traits()["ignore"].default()) + ignored(edition)
    default = list(Autograde.class_traits()["autograde_preprocessors"].default())
    if settings.autograde() == "sandbox":  # never run a student's code as the instructor
        from nbgrader.preprocessors import Execute

        from grader.integrations.nbgrader.sandbox import SandboxedAutograde

        default = [SandboxedAutograde if step is Execute else step for step in default]
    from grader.integrations.nbgrader.late import SyncSubmission

    c.Autograde.autograde_preprocessors = [SyncSubmission, HintLanguage, *default]
    c.ExportApp.plugin_class = EditionsCsvExport
    return edition
