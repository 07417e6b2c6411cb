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

_MAGIC = re.compile(r"^\s*[%!].*$", re.M)
_HIDDEN = re.compile(r"### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS", re.S)
CASES = [(m.LESSON, None) for m in modules()] + [(m.LESSON, v) for m in modules() for v in m.ALTERNATIVES]


def _notebook(lesson: str, variant: Variant | None) -> dict:
    nb = json.loads(solution_path(lesson).read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        cell["source"] = catalogue.cell_source(cell)
    return variant.apply(nb) if variant else nb


def visible_failures(nb: dict, monkeypatch) -> list[tuple[str | None, str]]:
    """(grade id, error) of each cell that failed, running the student's side in order, in
    a module of its own (dataclasses look their module up in sys.modules)."""
    module = types.ModuleType("__visible__")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    namespace = module.__dict__
    failed = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "code" or catalogue.is_demo(cell):
            continue
        source = _HIDDEN.sub("", _MAGIC.sub("", cell["source"]))
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(source, f"<{catalogue.grade_id(cell)}>", "exec"), namespace)
        except Exception as exc:  # noqa: BLE001 - a failing visible test is the result
            failed.append((catalogue.grade_id(cell), f"{type(exc).__name__}: {exc}"[:300]))
    return failed


@pytest.mark.parametrize("lesson, variant", CASES,
                         ids=[f"{lesson}:{v.description if v else 'reference'}" for lesson, v in CASES])
def test_visible_tests_pass_every_correct_solution(lesson: str, variant: Variant | None,
                                                   monkeypatch) -> None:
    monkeypatch.setenv("COURSE_GRADING", "1")  # long demonstrations take their smallest size
    failed = visible_failures(_notebook(lesson, variant), monkeypatch)
    assert not failed, f"a visible test is stricter than the hidden graders: {failed}"
