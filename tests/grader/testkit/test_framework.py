"""Hidden inputs are fresh for every grading run and reproducible from its seed, and the
reference keeps full marks under many seeds (grader/testkit/framework.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from planted import Variant
from support import lessons, solution_path

from grader.check.engine import in_process_submission, run_hidden_tests
from grader.check.notebook import read_notebook
from grader.testkit.framework import SEED_VARIABLE, grading_run, run_memo

torch.set_num_threads(1)


RECORDING = Variant("softmax", "softmax that keeps every input it is given", replace=((
    "    x = np.asarray(x, dtype=np.float64)\n",
    "    x = np.asarray(x, dtype=np.float64)\n    SEEN.append(x.copy())\n"),),
    also={"setup": [("import numpy as np", "import numpy as np\nSEEN = []")]})


def _inputs_seen(seed=None):
    lesson = "01_attention_by_hand"
    sub = in_process_submission(RECORDING.apply(read_notebook(solution_path(lesson))))
    results = run_hidden_tests(sub, lesson, only={"softmax"}, seed=seed)
    assert results[0].points == results[0].max_points
    seen = sub.target.namespace["SEEN"]
    return [x for x in seen if x.size > 3]  # the random ones (the lesson's own examples aside)


def test_two_grading_runs_see_different_hidden_inputs() -> None:
    first, second = _inputs_seen(), _inputs_seen()
    assert first and len(first) == len(second)
    assert not any(np.array_equal(a, b) for a, b in zip(first, second, strict=True))


def test_the_same_seed_reproduces_a_grading_run(monkeypatch) -> None:
    assert all(np.array_equal(a, b) for a, b in zip(_inputs_seen(7), _inputs_seen(7), strict=True))
    monkeypatch.setenv(SEED_VARIABLE, "the instructor's secret")
    secret = _inputs_seen()
    assert all(np.array_equal(a, b) for a, b in zip(secret, _inputs_seen(), strict=True))
    assert not any(np.array_equal(a, b) for a, b in zip(secret, _inputs_seen(7), strict=True))


def test_a_run_memo_lives_as_long_as_its_grading_run() -> None:
    """What a hidden test keeps for a later test of its run (lesson 08's models) is gone
    when the run ends: the next run, even with the same seed, starts empty."""
    with grading_run(7):
        run_memo()["model"] = "built"
        assert run_memo()["model"] == "built"
        with grading_run(7):
            assert "model" not in run_memo()
        assert run_memo()["model"] == "built"
    with grading_run(7):
        assert "model" not in run_memo()
    run_memo()["model"] = "built"  # outside a grading run nothing is kept
    assert "model" not in run_memo()


@pytest.mark.parametrize("lesson", lessons())
def test_reference_keeps_full_marks_under_many_seeds(lesson: str) -> None:
    sub = in_process_submission(read_notebook(solution_path(lesson)))
    for seed in range(3):
        lost = {r.name: r.hints for r in run_hidden_tests(sub, lesson, seed=seed) if r.points < r.max_points}
        assert not lost, f"seed {seed}: {lost}"
