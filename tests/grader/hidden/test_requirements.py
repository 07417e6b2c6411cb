"""Every requirement a lesson's text states has a hidden check, and every diagnosis answers
a stated requirement.

Each hidden test module declares ``REQUIREMENTS = {exercise: {requirement: (mistake ids)}}``:
what the exercise's statement, docstring and the lesson's conventions ask of it (both
editions: their code cells are equal and their prose says the same), each with the mistake
ids whose checks grade it. Here, for every lesson: every graded exercise is listed; every id
is declared (``MISTAKES``, or the shared ``library_call`` / ``changes_its_input``) and proven
on that very exercise by a planted bug (tests/planted, which must lose points there with that
first hint: tests/grader/hidden/test_planted_bugs.py); and every declared diagnosis answers some
requirement, so that the graders charge no rule the text does not state.
"""

from __future__ import annotations

import importlib

import pytest
from planted import modules

from coursekit import catalogue
from grader.check.messages import SHARED_MISTAKES

PLANTED = {m.LESSON: m for m in modules()}
LESSONS = [lesson.id for lesson in catalogue.LESSONS if lesson.graded]


def _tests(lesson: str):
    return importlib.import_module(f"grader.hidden.test_{lesson}")


@pytest.mark.parametrize("lesson", LESSONS)
def test_every_requirement_is_checked_and_proven(lesson: str) -> None:
    tests = _tests(lesson)
    requirements = getattr(tests, "REQUIREMENTS", None)
    assert requirements, f"grader/hidden/test_{lesson}.py lists no REQUIREMENTS"
    graded = set(catalogue.get(lesson).graded)
    assert set(requirements) == graded, f"REQUIREMENTS should list exactly {sorted(graded)}"
    declared = set(tests.MISTAKES) | set(SHARED_MISTAKES)
    proven = {(v.exercise, m) for v in PLANTED[lesson].BUGS for m in (v.mistake, *v.related)}
    for exercise, stated in requirements.items():
        assert stated, f"{exercise}: no requirement listed"
        for requirement, ids in stated.items():
            assert isinstance(ids, tuple) and ids, f"{exercise}: {requirement!r} has no check"
            unknown = set(ids) - declared
            assert not unknown, f"{exercise}: {requirement!r} names undeclared mistakes {sorted(unknown)}"
            unproven = [i for i in ids if (exercise, i) not in proven]
            assert not unproven, (f"{exercise}: {requirement!r}: no planted bug of {exercise} proves "
                                  f"{unproven} (tests/planted)")


@pytest.mark.parametrize("lesson", LESSONS)
def test_every_diagnosis_answers_a_stated_requirement(lesson: str) -> None:
    tests = _tests(lesson)
    answered = {i for stated in getattr(tests, "REQUIREMENTS", {}).values() for ids in stated.values() for i in ids}
    unstated = set(tests.MISTAKES) - answered
    assert not unstated, (f"diagnoses of grader/hidden/test_{lesson}.py that no requirement lists "
                          f"(a rule the text does not state is never charged): {sorted(unstated)}")
