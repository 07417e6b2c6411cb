"""Every grader is proven against planted mistakes and alternative correct solutions."""

from __future__ import annotations

import json

import pytest
from conftest import solution_path
from planted import Variant, modules

from grader.engine import grade_in_process

CASES = [(m.LESSON, v) for m in modules() for v in m.BUGS]
ALTERNATIVES = [(m.LESSON, v) for m in modules() for v in m.ALTERNATIVES]


def _grade(lesson: str, variant: Variant):
    nb = json.loads(solution_path(lesson).read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if isinstance(cell["source"], list):
            cell["source"] = "".join(cell["source"])
    report = grade_in_process(variant.apply(nb), lesson)
    return {e.name: e for e in report.exercises}


@pytest.mark.parametrize(("lesson", "variant"), CASES, ids=[f"{les}:{v.description}" for les, v in CASES])
def test_planted_bug_loses_points_on_its_exercise(lesson: str, variant: Variant) -> None:
    results = _grade(lesson, variant)
    target = results[variant.exercise]
    assert target.points < target.max_points, f"{variant.description} kept full marks"
    assert target.failures and all(target.failures), "a failed exercise must say why"
    for failure in target.failures:
        assert "def " not in failure and "sub.call" not in failure, "messages must not show code"


@pytest.mark.parametrize(("lesson", "variant"), ALTERNATIVES,
                         ids=[f"{les}:{v.description}" for les, v in ALTERNATIVES])
def test_alternative_solution_keeps_full_marks(lesson: str, variant: Variant) -> None:
    results = _grade(lesson, variant)
    lost = {k: r.failures for k, r in results.items() if r.points < r.max_points}
    assert not lost, f"{variant.description} lost points: {lost}"
