"""The engine's fast runner and pytest itself agree on every lesson's hidden graders, and
the hidden tests take only the ``sub`` fixture (grader/check/runner.py)."""

from __future__ import annotations

import pytest
import torch
from planted import modules
from support import lesson_path, lessons, solution_path

from grader.check.engine import in_process_submission, run_hidden_tests
from grader.check.notebook import read_notebook
from grader.check.runner import collect

pytestmark = pytest.mark.slow  # over ~30 s on 2 cores: out of the quick loop (-m "not slow")

torch.set_num_threads(1)


def _summary(results) -> dict:
    return {r.name: (r.points, r.max_points, tuple((str(f), f.mistake) for f in r.failures),
                     tuple(r.hints)) for r in results}


@pytest.mark.parametrize("lesson", lessons())
def test_fast_runner_agrees_with_pytest(lesson: str) -> None:
    notebooks = [read_notebook(solution_path(lesson)), read_notebook(lesson_path(lesson))]
    bugs = [m for m in modules() if m.LESSON == lesson]
    notebooks += [v.apply(read_notebook(solution_path(lesson))) for m in bugs for v in m.BUGS[:4]]
    for nb in notebooks:
        sub = in_process_submission(nb)
        fast = _summary(run_hidden_tests(sub, lesson, seed=1234))
        slow = _summary(run_hidden_tests(sub, lesson, use_pytest=True, seed=1234))
        assert fast == slow


@pytest.mark.parametrize("lesson", lessons())
def test_hidden_tests_only_use_the_sub_fixture_and_parametrize(lesson: str) -> None:
    import inspect

    for test_id, _, _, fn, params in collect(lesson):
        extra = set(inspect.signature(fn).parameters) - {"sub"} - set(params)
        assert not extra, f"{test_id} asks for fixtures {extra}: hidden tests take only `sub`"
