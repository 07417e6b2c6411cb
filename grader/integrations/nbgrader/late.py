"""The course's late-penalty rule inside nbgrader (its ``LateSubmissionPlugin`` interface).

``nbgrader_config.py`` enables it when ``deadlines.toml`` exists::

    c.AssignLatePenalties.plugin_class = "grader.integrations.nbgrader.late.CoursePenalty"

nbgrader measures how late a notebook is against the due date and extension in its own
gradebook and asks this plugin for the penalty in points; the rule (``[penalty]``) is the
one ``python -m grader grade`` applies (``grader.classgrade.late``). ``deadlines.toml`` is
the one source of due dates and extensions: ``python -m grader deadlines`` writes them into
the gradebook at any time of the term (before or after ``generate_assignment``, before or
after grading: :func:`write_to_gradebook`). A submission row written before its lesson was
generated gets the rows of the lesson's notebooks when they are made
(:class:`CompleteSubmissions`, a step of ``generate_assignment``), and autograde gives each
submission it grades the rows it lacks and the student's extension (:class:`SyncSubmission`),
so an extension never depends on the order the commands ran in.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from nbgrader.api import (
    Comment,
    Grade,
    Gradebook,
    SubmittedAssignment,
    SubmittedNotebook,
)
from nbgrader.plugins import LateSubmissionPlugin
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Unicode

from grader.classgrade.late import DEFAULT_FILE, Deadlines, format_duration, format_local, load
from grader.common import ids


class CoursePenalty(LateSubmissionPlugin):
    """Late penalty from the ``[penalty]`` rule of the course's ``deadlines.toml``."""

    deadlines = Unicode(DEFAULT_FILE, help="the course's deadlines file").tag(config=True)

    def late_submission_penalty(self, student_id: str, score: float,
                                total_seconds_late: float) -> float | None:
        points = load(self.deadlines).penalty_points(score or 0.0, total_seconds_late)
        self.log.info("%s: %.0f s late, penalty %g of %g points (%s)", student_id,
                      total_seconds_late, points, score or 0.0, self.deadlines)
        return points


class CompleteSubmissions(NbGraderPreprocessor):
    """``generate_assignment``'s step after ``SaveCells``: every submission of the
    assignment (one ``deadlines`` wrote with an extension before the lesson was generated)
    gets the rows of the notebook just saved, as one made afterwards has (nbgrader's
    autograde fails on a submission without them: ``MissingEntry``, the student at 0)."""

    def preprocess(self, nb: Any, resources: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        info = resources["nbgrader"]
        with Gradebook(info["db_url"]) as gb:
            for submission in gb.find_assignment(info["assignment"]).submissions:
                complete_submission(gb, submission)
            gb.db.commit()
        return nb, resources


class SyncSubmission(NbGraderPreprocessor):
    """Autograde's first step for each notebook: the submission being graded has a row for
    every notebook and graded cell of its assignment (one that an older ``deadlines`` made
    before ``generate_assignment`` has none, and nbgrader's ``SaveAutoGrades`` then failed
    with ``MissingEntry: No such taskcomment``) and the extension ``deadlines.toml`` gives
    the student, before nbgrader's late penalty is worked out."""

    deadlines = Unicode(DEFAULT_FILE, help="the course's deadlines file").tag(config=True)

    def preprocess(self, nb: Any, resources: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        info = resources["nbgrader"]
        lesson, student = info["assignment"], info["student"]
        deadlines = load(self.deadlines) if Path(self.deadlines).is_file() else None
        with Gradebook(info["db_url"]) as gb:
            submission = gb.find_submission(lesson, student)
            added = complete_submission(gb, submission)
            if added:
                self.log.info("%s: added the gradebook's rows of %d cell(s) missing", submission, added)
            if deadlines is not None and lesson in deadlines.due:
                submission.extension = deadlines.extension(lesson, student) or None
            gb.db.commit()
        return nb, resources


def complete_submission(gb: Gradebook, submission: SubmittedAssignment) -> int:
    """Give ``submission`` the rows nbgrader's ``add_submission`` makes for each notebook,
    graded cell and solution cell its assignment holds now (a submission made before the
    assignment was generated has none); returns how many rows were added."""
    added = 0
    have = {nb.notebook.name: nb for nb in submission.notebooks}
    for notebook in submission.assignment.notebooks:
        nb = have.get(notebook.name)
        if nb is None:
            nb = SubmittedNotebook(notebook=notebook, assignment=submission)
            added += 1
        graded = {g.cell_id for g in nb.grades}
        commented = {c.cell_id for c in nb.comments}
        for cell in [*notebook.grade_cells, *notebook.task_cells]:
            if cell.id not in graded:
                Grade(cell_id=cell.id, notebook=nb)
                added += 1
        for cell in [*notebook.solution_cells, *notebook.task_cells]:
            if cell.id not in commented:
                Comment(cell_id=cell.id, notebook=nb)
                added += 1
    if added:
        gb.db.add(submission)
    return added


def write_to_gradebook(deadlines_file: str, db_url: str, course_id: str,
                       lessons: list[str], folders: Iterable[str] = ()) -> list[str]:
    """Put ``deadlines.toml``'s due dates and extensions into nbgrader's gradebook, where
    nbgrader measures lateness, at any time of the term (a lesson not generated yet: its
    notebooks' rows are added when it is, :class:`CompleteSubmissions`); a submission
    missing rows is completed; the late penalty of a notebook graded already is worked out
    again from the due dates and extensions now (so that ``nbgrader export`` has an
    extension granted after grading). Returns what was written, one line each. A student is
    written as nbgrader's gradebook, or else ``folders`` (the course's student folders),
    spells the same id (``grader.common.ids``): nbgrader compares ids exactly."""
    deadlines = load(deadlines_file, lessons)
    done = []
    with Gradebook(db_url, course_id) as gb:
        known = [s.id for s in gb.students] + list(folders)
        for lesson, due in deadlines.due.items():
            gb.update_or_create_assignment(lesson, duedate=due.replace(tzinfo=None))  # naive UTC
            done.append(f"{lesson}: due {format_local(due, deadlines.timezone)}")
        for student_id, granted in deadlines.extensions.items():
            student = ids.spelled_as(student_id, known)
            gb.update_or_create_student(student)
            for lesson in deadlines.due:
                extension = deadlines.extension(lesson, student)
                if extension or lesson in granted:
                    gb.update_or_create_submission(lesson, student, extension=extension)
                    done.append(f"{student}: {lesson} extended by {format_duration(extension)!s}")
        done += _sync_graded(gb, deadlines)
    return done


def _sync_graded(gb: Gradebook, deadlines: Deadlines) -> list[str]:
    """Every submission of a lesson with a due date: its rows complete, its extension the
    file's, and each notebook's late penalty what autograde would give it now (nbgrader's
    ``AssignLatePenalties`` with :class:`CoursePenalty`); one line per changed penalty."""
    changed = []
    for lesson in deadlines.due:  # each one in the gradebook: write_to_gradebook made it
        for submission in gb.find_assignment(lesson).submissions:
            student = submission.student.id
            complete_submission(gb, submission)
            submission.extension = deadlines.extension(lesson, student) or None
            gb.db.flush()
            late = submission.total_seconds_late
            for nb in submission.notebooks:
                old = nb.late_submission_penalty or 0.0
                new = deadlines.penalty_points(nb.score or 0.0, late) if late > 0 else None
                nb.late_submission_penalty = new
                if abs((new or 0.0) - old) > 1e-9:
                    changed.append(f"{student}: {lesson} late penalty {old:g} -> {new or 0.0:g} "
                                   f"points ({nb.notebook.name}, graded before this change)")
    gb.db.commit()
    return changed
