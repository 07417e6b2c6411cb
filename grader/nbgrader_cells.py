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
"""

from __future__ import annotations

import copy
from typing import Any

from nbgrader import utils
from nbgrader.preprocessors import ClearHiddenTests, OverwriteCells


class CourseOverwriteCells(OverwriteCells):
    """``OverwriteCells`` that reports a locked cell's checksum only when it was changed."""

    _as_released = False

    def preprocess_cell(self, cell: Any, resources: Any, cell_index: int) -> tuple[Any, Any]:
        self._as_released = self._is_as_released(cell)
        try:
            return super().preprocess_cell(cell, resources, cell_index)
        finally:
            self._as_released = False

    def _is_as_released(self, cell: Any) -> bool:
        if not (utils.is_grade(cell) or utils.is_locked(cell)):
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
