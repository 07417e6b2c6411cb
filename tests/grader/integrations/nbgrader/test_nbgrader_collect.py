"""``nbgrader zip_collect`` of a Canvas "Download Submissions" zip (grader/integrations/nbgrader/collect.py)
into a copy of the term's nbgrader course."""

from __future__ import annotations

import pytest
from support import copy_of, nbgrader
from term_class import LESSON, canvas_zip

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_zip_collect_of_a_canvas_download(term_nbgrader, tmp_path) -> None:
    course = copy_of(term_nbgrader["course"], tmp_path)
    canvas_zip(course / "downloaded" / LESSON / "archive" / "submissions.zip")
    proc = nbgrader(["zip_collect", LESSON], course)
    assert "Regular expression not provided" not in proc.stdout + proc.stderr
    for student in ("123456", "234567", "345678"):
        assert (course / "submitted" / student / LESSON / f"{LESSON}.ipynb").is_file(), student
