"""Visible tests are never stricter than the hidden graders.

For every lesson, the reference and every alternative correct solution of
``tests/planted/lNN.py`` (each keeps full marks with the hidden graders: test_planted_bugs)
run through the student's side of the notebook: the setup, provided and answer cells and
each test cell without its hidden region, as Validate runs them (demonstrations skipped).
No visible assert may fail. (Lesson 08's checkpoints have their own test,
test_checkpoints.)"""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
import types

import pytest
from conftest import solution_path
from planted import Variant, modules

from coursekit import catalogue
from grader.check.notebook import BEGIN_HIDDEN_TESTS, END_HIDDEN_TESTS

_HIDDEN = re.compile(f"{BEGIN_HIDDEN_TESTS}.*?{END_HIDDEN_TESTS}", re.S)
STUDENT_SIDE = catalogue.RUN_WHEN_GRADING | {catalogue.Role.TESTS}  # Validate runs the visible tests too
CASES = [(m.LESSON, None) for m in modules()] + [(m.LESSON, v) for m in modules() for v in m.ALTERNATIVES]


def _notebook(lesson: str, variant: Variant | None) -> dict:
    nb = json.loads(solution_path(lesson).read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        cell["source"] = catalogue.cell_source(cell)
    return variant.apply(nb) if variant else nb


def visible_failures(nb: dict, monkeypatch) -> list[tuple[str | None, str]]:
    """(grade id, error) of each cell that failed, running the student's side in order
    (grader.runtime's loop over what grading runs and the test cells), in a module of its
    own (dataclasses look their module up in sys.modules)."""
    from grader.runtime.execute import prepare_namespace, run_cells

    module = types.ModuleType("__visible__")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    cells = nb["cells"]
    run = [(i, _HIDDEN.sub("", cell["source"])) for i, cell in enumerate(cells)
           if catalogue.cell_role(cell) in STUDENT_SIDE]
    with contextlib.redirect_stdout(io.StringIO()):
        report = run_cells(run, prepare_namespace(module.__dict__))
    return [(catalogue.grade_id(cells[e.cell]), e.error[:300]) for e in report.errors]


@pytest.mark.parametrize("lesson, variant", CASES,
                         ids=[f"{lesson}:{v.description if v else 'reference'}" for lesson, v in CASES])
def test_visible_tests_pass_every_correct_solution(lesson: str, variant: Variant | None,
                                                   monkeypatch) -> None:
    monkeypatch.setenv("COURSE_GRADING", "1")  # long demonstrations take their smallest size
    failed = visible_failures(_notebook(lesson, variant), monkeypatch)
    assert not failed, f"a visible test is stricter than the hidden graders: {failed}"
