"""Visible tests are never stricter than the hidden graders.

For every lesson, the reference and every alternative correct solution of
``tests/planted/lNN.py`` (each keeps full marks with the hidden graders: test_planted_bugs)
run through the student's side of the notebook: the setup, provided and answer cells and
each test cell without its hidden region, as Validate runs them (demonstrations skipped).
No visible assert may fail. (Lesson 08's checkpoints have their own test,
test_checkpoints.)"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import re
import sys
import types

import pytest
from planted import Variant, modules
from support import solution_path

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


BUGS = [(m.LESSON, v) for m in modules() for v in m.BUGS]
SEED = 20260101


def _charged_for(lesson: str, exercise: str) -> set[str]:
    """The exercises whose loss answers a visible test of ``exercise`` failing: itself and
    what it builds on (its hidden tests judge it with the course's versions of those, so a
    mistake there is charged once, where it was made: grader.testkit.parts)."""
    tests = importlib.import_module(f"grader.hidden.test_{lesson}")
    seen, todo = set(), [exercise]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += list(getattr(tests, "BUILDS_ON", {}).get(name, ()))
    return seen


@pytest.mark.slow
@pytest.mark.parametrize("lesson, variant", BUGS, ids=[f"{lesson}:{v.description}" for lesson, v in BUGS])
def test_whatever_a_visible_test_rejects_the_hidden_graders_charge(lesson: str, variant: Variant,
                                                                  monkeypatch) -> None:
    """A planted mistake that fails a visible test cell (``test_<exercise>``) loses points
    in the hidden graders on that exercise or on one it builds on: a student whose own
    visible tests fail never reads full marks."""
    from grader.check.engine import grade_in_process

    monkeypatch.setenv("COURSE_GRADING", "1")
    nb = _notebook(lesson, variant)
    failed = visible_failures(nb, monkeypatch)
    rejected = {gid.removeprefix("test_") for gid, _ in failed if gid and gid.startswith("test_")}
    if not rejected:
        return
    report = grade_in_process(nb, lesson, seed=SEED)
    charged = {e.name for e in report.exercises if e.points < e.max_points}
    for exercise in sorted(rejected):
        assert _charged_for(lesson, exercise) & charged, (
            f"{variant.description}: the visible test of {exercise} fails ({failed}), but the "
            f"hidden graders charge only {sorted(charged) or 'nothing'}")
