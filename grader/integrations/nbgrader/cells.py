"""nbgrader's autograde without false tampering alarms (jupyter/nbgrader#1961).

``generate_assignment`` stores each test cell's checksum in the gradebook *before* it
strips the hidden tests, and the released cell's checksum after; ``autograde`` compares
the submitted cell (hidden tests stripped, as released) with the stored checksum, so every
test cell with hidden tests of every submission logs ``Attribute 'checksum' for cell
test_... has changed!`` before it puts the hidden tests back: three false alarms per
lesson 01 submission, 600 for a class of 200. :class:`CourseOverwriteCells` puts them
back in silence when the submitted cell is exactly what was released (the stored source
less its hidden tests), and still warns when a student changed a locked cell.
``nbgrader_config.py`` puts it in place of ``OverwriteCells``.

It also keeps only the hidden tests of each test cell for autograde (:func:`hidden_tests_only`):
a released test cell holds the exercise's visible asserts, which a student runs with
Validate; when they also ran in autograde, one failed visible assert stopped the cell
before its hidden tests and zeroed an exercise that ``grader grade`` gives partial credit
with hints. The hidden tests check everything the visible ones do (the course's rule:
visible tests are never stricter), so autograde, sandboxed or in a kernel, gives the
points and hints ``grade`` gives.
"""

from __future__ import annotations

import copy
from typing import Any

from nbgrader.preprocessors import ClearHiddenTests, OverwriteCells

from coursekit import catalogue
from grader.check.notebook import BEGIN_HIDDEN_TESTS, END_HIDDEN_TESTS
from grader.i18n import choose, words
from grader.integrations.nbgrader.editions import edition_of_name
from grader.kernel import VISIBLE_TESTS_RAN

BEGIN, END = BEGIN_HIDDEN_TESTS, END_HIDDEN_TESTS


def hidden_tests_only(source: str, lang: str = "en") -> str | None:
    """A test cell's source for autograde: a comment, then its hidden tests region (with
    its markers); None when the cell has no hidden tests (it then runs as it is)."""
    lines = source.split("\n")
    starts = [i for i, line in enumerate(lines) if BEGIN in line]
    ends = [i for i, line in enumerate(lines) if END in line]
    if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
        return None
    comment = f"# {words(lang)(VISIBLE_TESTS_RAN)}"
    return "\n".join([comment, *lines[starts[0]:ends[0] + 1]])


class CourseOverwriteCells(OverwriteCells):
    """``OverwriteCells`` that reports a locked cell's checksum only when it was changed."""

    _as_released = False

    def preprocess_cell(self, cell: Any, resources: Any, cell_index: int) -> tuple[Any, Any]:
        self._as_released = self._is_as_released(cell)
        try:
            cell, resources = super().preprocess_cell(cell, resources, cell_index)
        finally:
            self._as_released = False
        if catalogue.cell_role(cell) is catalogue.Role.TESTS:
            name = resources.get("nbgrader", {}).get("notebook") or ""
            hidden = hidden_tests_only(cell.source, choose(None, edition_of_name(name)))
            if hidden is not None:
                cell.source = hidden
        return cell, resources

    def _is_as_released(self, cell: Any) -> bool:
        if not (catalogue.is_grade(cell) or catalogue.is_locked(cell)):
            return False
        try:
            stored = self.gradebook.find_source_cell(
                cell.metadata.nbgrader["grade_id"], self.notebook_id, self.assignment_id)
        except Exception:  # noqa: BLE001 - nbgrader itself reports what is missing
            return False
        released = copy.deepcopy(cell)
        released.source = stored.source
        ClearHiddenTests(parent=self.parent)._remove_hidden_test_region(released)
        return released.source == cell.source

    def report_change(self, name: str, attr: str, old: Any, new: Any) -> None:
        if attr == "checksum" and self._as_released:
            self.log.debug("Cell %s as released: hidden tests put back", name)
            return
        super().report_change(name, attr, old, new)
