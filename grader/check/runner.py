"""A small, thread-safe runner for the hidden pytest graders.

The hidden graders are ordinary pytest tests (``pytest grader/hidden/test_X.py --notebook
N`` runs them). Grading runs them many times per process (one per exercise cell in an
nbgrader kernel, one per student in a class run, in threads), where starting pytest each
time costs more than the checks themselves and pytest's global state is not thread-safe.
This runner calls the same test functions directly. It supports what hidden graders may
use: the ``sub`` fixture, ``@exercise`` marks, ``@pytest.mark.parametrize`` and the
``BUILDS_ON`` of a test module (grader.testkit.parts, as the hidden tests' conftest applies it);
``tests/grader/check/test_runner.py`` checks that it agrees with pytest on every lesson.
"""

from __future__ import annotations

import importlib
import inspect
import itertools
import logging
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

from coursekit import settings
from grader.check import messages
from grader.results import ExerciseResult
from grader.runtime.errors import GradingError
from grader.testkit.framework import Failed, grading_run
from grader.testkit.parts import judged_alone
from grader.testkit.submission import Posted, Submission

_log = logging.getLogger(__name__)

TestCase = tuple[str, str, float, Callable[..., Any], dict[str, Any]]


def _marks(fn: Callable[..., Any], name: str) -> list[Any]:
    return [m for m in getattr(fn, "pytestmark", []) if m.name == name]


def _expand(fn: Callable[..., Any]) -> Iterator[dict[str, Any]]:
    """Keyword arguments of every parametrized instance of ``fn`` (pytest's order)."""
    grids = []
    for mark in reversed(_marks(fn, "parametrize")):
        names = mark.args[0]
        names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
        rows = []
        for value in mark.args[1]:
            if type(value).__name__ == "ParameterSet":  # pytest.param(...)
                values = tuple(value.values)
            elif len(names) == 1:
                values = (value,)
            else:
                values = tuple(value)
            rows.append(dict(zip(names, values, strict=True)))
        grids.append(rows)
    for combo in itertools.product(*grids):
        merged: dict[str, Any] = {}
        for part in combo:
            merged.update(part)
        yield merged


def collect(lesson: str) -> list[TestCase]:
    """``(test id, exercise, points, function, params)`` of a lesson's hidden tests."""
    module = _tests(lesson)
    cases: list[TestCase] = []
    for name, fn in vars(module).items():
        if not name.startswith("test") or not inspect.isfunction(fn):
            continue
        marks = _marks(fn, "exercise")
        if not marks:
            continue
        exercise, points = str(marks[0].args[0]), float(marks[0].kwargs.get("points", 1.0))
        for i, params in enumerate(_expand(fn)):
            cases.append((f"{name}[{i}]", exercise, points, fn, params))
    return cases


def _tests(lesson: str) -> ModuleType:
    return importlib.import_module(f"grader.hidden.test_{lesson}")


def _grader_bug(exercise: str, exc: BaseException) -> None:
    """A hidden test's own error (not the student's), with its traceback: in the log at
    ``debug``; under ``$GRADER_DEBUG`` as a warning, which stderr shows even where no log
    is set up (an nbgrader kernel, a Gradescope run)."""
    _log.log(logging.WARNING if settings.debug() else logging.DEBUG,
             "%s: the hidden test's own error (a grader bug?)", exercise, exc_info=exc)


def run(sub: Submission, lesson: str, only: set[str] | None = None,
        seed: int | None = None) -> list[ExerciseResult]:
    """Grade ``sub``: one grading run, its hidden inputs drawn from ``seed`` (fresh when
    ``None``, see :func:`grader.testkit.framework.fresh_seed`)."""
    results: dict[str, ExerciseResult] = {}
    with grading_run(seed):
        for _, exercise, points, fn, params in collect(lesson):
            if only is not None and exercise not in only:
                continue
            result = results.setdefault(exercise, ExerciseResult(exercise))
            result.max_points += points
            try:
                with sub.settled(), judged_alone(sub, _tests(lesson), exercise):
                    fn(sub=sub, **params)
            except Exception as exc:  # noqa: BLE001 - every failure is reported, in words
                result.failures.append(messages.explain(exc, exercise))
                if not isinstance(exc, (Failed, GradingError, Posted)):  # a grader bug
                    _grader_bug(exercise, exc)
            else:
                result.points += points
    return list(results.values())
