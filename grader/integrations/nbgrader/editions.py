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
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from nbconvert.preprocessors import Preprocessor
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins.export import CsvExportPlugin
from traitlets import Bool

from coursekit import catalogue, settings
from grader.classgrade.find import find
from grader.common import csvcells, ids

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
    """nbgrader's CSV (its columns, then ``status`` and ``message``), counting each notebook
    once whatever its editions: the student's best edition, out of one edition's maximum.
    Every student of the class gets a row: those of the gradebook and every folder of
    ``submitted/``, so a student whose only notebook nbgrader cannot see (in a folder inside
    the folder, under another name, the other edition) is a row with 0 and says why
    (:func:`submission_status`). With one edition per course the scores are nbgrader's own,
    quoted as CSV and with no cell a spreadsheet would run."""

    def export(self, gradebook: Gradebook) -> None:
        dest = self.to or "grades.csv"
        students = [ids.key(str(s)) for s in self.student]
        assignments = [str(a) for a in self.assignment]
        coursedir = getattr(self.parent, "coursedir", None)
        keys = ["assignment", "duedate", "timestamp", "student_id", "last_name", "first_name",
                "email", "raw_score", "late_submission_penalty", "score", "max_score",
                "status", "message"]
        self.log.info("Exporting grades to %s (each notebook's editions counted once)", dest)
        with open(dest, "w", newline="") as fh:
            writer = csvcells.Writer(fh)
            writer.writerow(keys)
            for assignment in gradebook.assignments:
                if assignments and assignment.name not in assignments:
                    continue
                max_score = _per_notebook((nb.name, nb.max_score) for nb in assignment.notebooks)
                for student in _class(gradebook, coursedir):
                    if students and ids.key(student.id) not in students:
                        continue
                    row = _row(gradebook, assignment, student, coursedir)
                    row["max_score"] = max_score
                    # a student id or name is never a spreadsheet formula (grader.common.csvcells)
                    writer.writerow("" if row[k] is None else str(row[k]) for k in keys)


def _class(gradebook: Gradebook, coursedir: Any) -> list[Any]:
    """The students of the gradebook, then those with a folder in ``submitted/`` only."""
    students = list(gradebook.students)
    known = {s.id for s in students}
    folder = Path(coursedir.format_path(coursedir.submitted_directory, ".", ".")).resolve() \
        if coursedir is not None else None
    if folder is not None and folder.is_dir():
        students += [SimpleNamespace(id=p.name, last_name=None, first_name=None, email=None)
                     for p in sorted(folder.iterdir())
                     if p.is_dir() and not p.name.startswith(".") and p.name not in known]
    return students


def _row(gradebook: Gradebook, assignment: Any, student: Any, coursedir: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "assignment": assignment.name, "duedate": assignment.duedate, "student_id": student.id,
        "last_name": student.last_name, "first_name": student.first_name, "email": student.email}
    try:
        submission = gradebook.find_submission(assignment.name, student.id)
    except MissingEntry:
        submission = None
        row.update(timestamp="", raw_score=0.0, late_submission_penalty=0.0, score=0.0)
    else:
        raw = _per_notebook((nb.name, nb.score) for nb in submission.notebooks)
        penalty = submission.late_submission_penalty
        row.update(timestamp=submission.timestamp, raw_score=raw,
                   late_submission_penalty=penalty, score=max(0.0, raw - penalty))
    names = [f"{nb.name}.ipynb" for nb in assignment.notebooks]
    row["status"], row["message"] = submission_status(coursedir, assignment.name, student.id,
                                                      names, submission is not None)
    return row


def submission_status(coursedir: Any, lesson: str, student: str, names: list[str],
                      in_gradebook: bool) -> tuple[str, str]:
    """The export's ``status`` of a student's lesson, and why when it is not ``ok``:
    ``ok`` (autograded), ``missing`` (no notebook of the lesson in the student's folder),
    ``unseen`` (notebooks where nbgrader does not look: ``python -m grader grade`` finds
    them), ``failed`` (at nbgrader's name, but autograde did not grade it: its log says
    why). Without the course folder (an export made outside nbgrader's app), the gradebook
    alone: ``ok`` or ``missing``."""
    if coursedir is None:
        return ("ok", "") if in_gradebook else ("missing", "No submission.")
    autograded = Path(coursedir.format_path(coursedir.autograded_directory, student, lesson))
    if in_gradebook and any((autograded / name).is_file() for name in names):
        return "ok", ""
    submitted = Path(coursedir.format_path(coursedir.submitted_directory, student, lesson))
    found = _notebooks_of(submitted.parent, lesson)
    at_name = [p for p in found if p.parent == submitted and p.name in names]
    if at_name:
        return "failed", ("Not graded: autograde failed on "
                          f"{', '.join(p.name for p in at_name)} (its log names the error).")
    if found:
        shown = ", ".join(f"`{p.relative_to(submitted.parent).as_posix()}`" for p in found)
        where = " or ".join(f"`{lesson}/{name}`" for name in names) or f"`{lesson}/`"
        other = {catalogue.COURSE.edition_of(p) for p in found} - {edition_of_name(n) for n in names}
        editions = (f" The course holds the {', '.join(sorted({edition_of_name(n) for n in names}))} "
                    "edition only (COURSE_EDITION=both takes either).") if other and names else ""
        return "unseen", (f"Not graded: nbgrader looks only at {where}; found {shown}.{editions} "
                          "Move it there and autograde again, or grade the class with "
                          "`python -m grader grade`.")
    return "missing", "No submission."


def _notebooks_of(student_folder: Path, lesson: str) -> list[Path]:
    """The notebooks of ``lesson`` a student's folder holds, wherever they lie (as
    ``python -m grader grade`` finds them); none for an assignment that is not a lesson."""
    if not student_folder.is_dir() or lesson not in catalogue.COURSE.ids():
        return []
    return find(student_folder, catalogue.get(lesson)).candidates


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
    from nbgrader.converters import Autograde, GenerateAssignment
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.preprocessors import SaveCells

    from grader.integrations.nbgrader.late import CompleteSubmissions, SyncSubmission

    edition = edition or settings.edition()
    c.CourseDirectory.notebook_id = notebook_glob(edition)
    c.CourseDirectory.ignore = list(CourseDirectory.class_traits()["ignore"].default()) + ignored(edition)
    default = list(Autograde.class_traits()["autograde_preprocessors"].default())
    if settings.autograde() == "sandbox":  # never run a student's code as the instructor
        from nbgrader.preprocessors import Execute

        from grader.integrations.nbgrader.sandbox import SandboxedAutograde

        default = [SandboxedAutograde if step is Execute else step for step in default]
    c.Autograde.autograde_preprocessors = [SyncSubmission, HintLanguage, *default]
    generate = list(GenerateAssignment.class_traits()["preprocessors"].default())
    at = generate.index(SaveCells) + 1
    c.GenerateAssignment.preprocessors = [*generate[:at], CompleteSubmissions, *generate[at:]]
    c.ExportApp.plugin_class = EditionsCsvExport
    return edition
