"""``nbgrader release_feedback`` in a class that mixes exchange and LMS submissions.

nbgrader releases a feedback page through the exchange under a hash of the submission's
``submission_secret.txt``, which only an exchange submission has (``nbgrader submit``
writes it; ``zip_collect`` and a copied ``submitted/`` folder do not). nbgrader 0.9.6 then
stops the whole release at the first page without one (``FileNotFoundError ...
submission_secret.txt``), so one LMS student keeps the whole class from its feedback.
:class:`CourseReleaseFeedback` releases every page that can go through the exchange, and
names the students whose pages cannot, with the way to return theirs
(``python -m grader return-feedback --to FOLDER``). ``nbgrader_config.py`` sets it as
``c.ExchangeFactory.release_feedback``.
"""

from __future__ import annotations

import glob
import os

from nbgrader.exchange.default.release_feedback import ExchangeReleaseFeedback


class CourseReleaseFeedback(ExchangeReleaseFeedback):
    """nbgrader's ``release_feedback``, skipping (by name) the pages of non-exchange submissions."""

    def copy_files(self) -> None:
        without = sorted(self._students_without_secret())
        if without:
            self.log.warning(
                "Not releasing the feedback of %d student(s) whose submission did not come "
                "through the exchange (no submission_secret.txt): %s. Return it another way, "
                "e.g. python -m grader return-feedback GRADED --to FOLDER",
                len(without), ", ".join(without))
        excluded = self.coursedir.student_id_exclude
        self.coursedir.student_id_exclude = ",".join(filter(None, [excluded, *without]))
        try:
            super().copy_files()
        finally:
            self.coursedir.student_id_exclude = excluded

    def _students_without_secret(self) -> set[str]:
        missing = set()
        for html_file in glob.glob(os.path.join(self.src_path, "*.html")):
            folder = os.path.dirname(html_file)
            if not os.path.isfile(os.path.join(folder, "submission_secret.txt")):
                missing.add(os.path.basename(os.path.dirname(folder)))
        return missing
