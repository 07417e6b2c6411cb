"""The course's late-penalty rule inside nbgrader (its ``LateSubmissionPlugin`` interface).

``nbgrader_config.py`` enables it when ``deadlines.toml`` exists::

    c.AssignLatePenalties.plugin_class = "grader.integrations.nbgrader.late.CoursePenalty"

nbgrader measures how late a notebook is against the due date and extension in its own
gradebook (``python -m grader deadlines`` writes them there from ``deadlines.toml``) and
asks this plugin for the penalty in points; the rule (``[penalty]``) is the one
``python -m grader grade`` applies (``grader.classgrade.late``).
"""

from __future__ import annotations

from collections.abc import Iterable

from nbgrader.plugins import LateSubmissionPlugin
from traitlets import Unicode

from grader import ids
from grader.classgrade.late import DEFAULT_FILE, format_duration, format_local, load


class CoursePenalty(LateSubmissionPlugin):
    """Late penalty from the ``[penalty]`` rule of the course's ``deadlines.toml``."""

    deadlines = Unicode(DEFAULT_FILE, help="the course's deadlines file").tag(config=True)

    def late_submission_penalty(self, student_id: str, score: float,
                                total_seconds_late: float) -> float | None:
        points = load(self.deadlines).penalty_points(score or 0.0, total_seconds_late)
        self.log.info("%s: %.0f s late, penalty %g of %g points (%s)", student_id,
                      total_seconds_late, points, score or 0.0, self.deadlines)
        return points


def write_to_gradebook(deadlines_file: str, db_url: str, course_id: str,
                       lessons: list[str], folders: Iterable[str] = ()) -> list[str]:
    """Put ``deadlines.toml``'s due dates and extensions into nbgrader's gradebook, where
    nbgrader measures lateness; returns what was written, one line each. A student is
    written as nbgrader's gradebook, or else ``folders`` (the course's student folders),
    spells the same id (``grader.ids``): nbgrader compares ids exactly."""
    from nbgrader.api import Gradebook

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
                    done.append(f"{student}: {lesson} extended by {format_duration(extension)}")
    return done
