"""A name the grader needs is missing: the hint says why when the notebook says it (issue 24).

A syntax error in an exercise's cell leaves its function undefined; the hint used to ask
whether the student deleted or renamed the cell. It now quotes the cell's own error, in the
sandbox and in process alike; a cell that is really gone keeps the old question."""

from __future__ import annotations

import json

import pytest
from support import solution_path

from grader.check.engine import grade_in_process, grade_with_worker
from grader.check.launch import LocalSource
from grader.common.limits import DEFAULT_LIMITS

LESSON = "01_attention_by_hand"


def _notebook(change) -> dict:
    nb = json.loads(solution_path(LESSON).read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        cell["source"] = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
    nb["cells"] = [c for c in (change(cell) for cell in nb["cells"]) if c is not None]
    return nb


def _softmax_cell(cell: dict, new) -> dict | None:
    if cell["metadata"].get("nbgrader", {}).get("grade_id") == "softmax":
        return new(cell)
    return cell


def _broken(cell: dict) -> dict:
    return dict(cell, source=cell["source"].replace("shifted = x - np.max", "shifted = x - np.max("))


def _hints(report) -> dict[str, list[str]]:
    return {e.name: [str(h.text) for h in e.hints] for e in report.exercises}


@pytest.mark.parametrize("where", ["in process", "worker"])
def test_a_syntax_error_is_named_as_the_reason(where: str) -> None:
    nb = _notebook(lambda cell: _softmax_cell(cell, _broken))
    if where == "in process":
        report = grade_in_process(nb, LESSON)
    else:
        source = LocalSource()
        report = grade_with_worker(nb, LESSON, source.start(DEFAULT_LIMITS), limits=DEFAULT_LIMITS)
    first = _hints(report)["softmax"][0]
    assert "`softmax` is not defined: its cell failed with SyntaxError" in first, first
    assert "did you delete" not in first
    assert report.exercises[0].points == report.exercises[0].max_points  # dot_scores is fine


def test_a_deleted_cell_keeps_the_question() -> None:
    nb = _notebook(lambda cell: _softmax_cell(cell, lambda c: None))
    first = _hints(grade_in_process(nb, LESSON))["softmax"][0]
    assert first.startswith("`softmax` is not defined: did you delete its cell"), first
