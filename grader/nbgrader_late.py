"""The course's late-penalty rule inside nbgrader (its ``LateSubmissionPlugin`` interface).

``nbgrader_config.py`` enables it when ``deadlines.toml`` exists::

    c.AssignLatePenalties.plugin_class = "grader.nbgrader_late.CoursePenalty"

nbgrader measures how late a notebook is against the due date and extension in its own
gradebook (``python -m grader deadlines`` writes them there from ``deadlines.toml``) and
asks this plugin for the penalty in points; the rule (``[penalty]``) is the one
``python -m grader grade`` applies (``grader.late``).
"""

from __future__ import annotations

from nbgrader.plugins import LateSubmissionPlugin
from traitlets import Unicode

from .late import DEFAULT_FILE, load


class CoursePenalty(LateSubmissionPlugin):
    """Late penalty from the ``[penalty]`` rule of the course's ``deadlines.toml``."""

    deadlines = Unicode(DEFAULT_FILE, help="the course's deadlines file").tag(config=True)

    def late_submission_penalty(self, student_id: str, score: float,
                                total_seconds_late: float) -> float | None:
        points = load(self.deadlines).penalty_points(score or 0.0, total_seconds_late)
        self.log.info("%s: %.0f s late, penalty %g of %g points (%s)", student_id,
                      total_seconds_late, points, score or 0.0, self.deadlines)
        return points
