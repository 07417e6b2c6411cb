"""The engine's fast runner and pytest itself agree on every lesson's hidden graders; hints
are folded the same way for every renderer; hidden inputs are fresh for every grading run
and reproducible from its seed; the device audit catches CPU-made tensors and only those."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from conftest import lesson_path, lessons, solution_path
from planted import Variant, modules

from grader.engine import in_process_submission, run_hidden_tests
from grader.framework import SEED_VARIABLE, Failed, close, suspect
from grader.messages import Hint, explain, fold
from grader.results import ExerciseResult
from grader.runner import collect
from grader.runtime.device import ON_DEVICE, DeviceMismatch, on_device

torch.set_num_threads(1)


def _load(path) -> dict:
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        cell["source"] = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
    return nb


def _summary(results) -> dict:
    return {r.name: (r.points, r.max_points, tuple((str(f), f.mistake) for f in r.failures),
                     tuple(r.hints)) for r in results}


@pytest.mark.parametrize("lesson", lessons())
def test_fast_runner_agrees_with_pytest(lesson: str) -> None:
    notebooks = [_load(solution_path(lesson)), _load(lesson_path(lesson))]
    bugs = [m for m in modules() if m.LESSON == lesson]
    notebooks += [v.apply(_load(solution_path(lesson))) for m in bugs for v in m.BUGS[:4]]
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


# --- hints ------------------------------------------------------------------------------

def test_a_diagnosis_comes_first_and_folds_the_symptoms_it_explains() -> None:
    failures = [Hint("the output differs"), Hint("scaled by √d_model", "scale"), Hint("weights differ"),
                Hint("scaled by √d_model (again)", "scale"), Hint("gradients differ")]
    assert fold(failures) == ["scaled by √d_model (+3 related checks failed)"]
    assert fold(failures)[0].mistake == "scale"


def test_two_diagnoses_are_both_shown_in_the_order_found() -> None:
    hints = fold([Hint("a", "m1"), Hint("b"), Hint("c", "m2")])
    assert [h.mistake for h in hints] == ["m1", "m2"]
    assert hints[0] == "a (+1 related check failed)"


def test_without_a_diagnosis_the_students_own_error_comes_before_symptoms() -> None:
    hints = fold([Hint("differs"), Hint("raised IndexError", kind="error"), Hint("differs")])
    assert hints == ["raised IndexError (+2 related checks failed)"]
    assert fold([Hint("not implemented", kind="error")] * 4) == ["not implemented"]
    assert fold(["plain text", "plain text"]) == ["plain text"]
    assert fold([]) == []


def test_every_renderer_shows_the_folded_hints() -> None:
    from grader.results import Report, feedback_html, to_json, to_text

    result = ExerciseResult("MultiHeadAttention", 2.0, 12.0,
                            [Hint("differs"), Hint("scaled by √d_model", "scale"), Hint("weights differ")])
    assert result.as_dict()["message"] == "scaled by √d_model (+2 related checks failed)"
    report = Report("nb.ipynb", "04_multi_head_attention", [result])
    assert "hint: scaled by √d_model (+2 related checks failed)" in to_text(report)
    assert "differs" not in to_text(report).replace("checks failed", "")
    assert json.loads(to_json(report))["exercises"][0]["message"] == result.hints[0]
    page = feedback_html(report, "ada")
    assert "scaled by √d_model (+2 related checks failed)" in page and "weights differ" not in page


def test_a_suspect_fires_only_when_the_output_matches_that_mistake_alone() -> None:
    right, wrong = np.array([1.0, 2.0]), np.array([1.0, 4.0])
    with pytest.raises(Failed) as found:
        close(wrong, right, "differs", suspects=[suspect("double", np.array([1.0, 4.0]), "doubled")])
    assert found.value.mistake == "double" and str(found.value).startswith("doubled (at index [1]")
    with pytest.raises(Failed) as other:  # another mistake: the symptom, not a false diagnosis
        close(np.array([9.0, 9.0]), right, "differs", suspects=[suspect("double", np.array([1.0, 4.0]), "doubled")])
    assert other.value.mistake is None
    with pytest.raises(Failed) as ambiguous:  # two mistakes fit: the evidence names neither
        close(wrong, right, "differs", suspects=[suspect("a", wrong, "a"), suspect("b", wrong.copy(), "b")])
    assert ambiguous.value.mistake is None
    with pytest.raises(Failed) as blind:  # a suspect equal to the right answer proves nothing
        close(wrong, right, "differs", suspects=[suspect("same", right.copy(), "same")])
    assert blind.value.mistake is None


def test_a_library_call_is_a_diagnosis() -> None:
    from grader.runtime.errors import SubmissionError

    hint = explain(SubmissionError("gelu", "ForbiddenCall", "torch.nn.functional.gelu"), "gelu")
    assert hint.mistake == "library_call" and "F.gelu" in hint


# --- hidden inputs --------------------------------------------------------------------------

RECORDING = Variant("softmax", "softmax that keeps every input it is given", replace=((
    "    x = np.asarray(x, dtype=np.float64)\n",
    "    x = np.asarray(x, dtype=np.float64)\n    SEEN.append(x.copy())\n"),),
    also={"setup": [("import numpy as np", "import numpy as np\nSEEN = []")]})


def _inputs_seen(seed=None):
    lesson = "01_attention_by_hand"
    sub = in_process_submission(RECORDING.apply(_load(solution_path(lesson))))
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


@pytest.mark.parametrize("lesson", lessons())
def test_reference_keeps_full_marks_under_many_seeds(lesson: str) -> None:
    sub = in_process_submission(_load(solution_path(lesson)))
    for seed in range(3):
        lost = {r.name: r.hints for r in run_hidden_tests(sub, lesson, seed=seed) if r.points < r.max_points}
        assert not lost, f"seed {seed}: {lost}"


# --- the device audit ---------------------------------------------------------------------

class _Masked(torch.nn.Module):
    def __init__(self, make):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.make = make
        self.register_buffer("table", torch.ones(8, 4))
        self.register_buffer("scratch", torch.ones(8, 4), persistent=False)
        self.plain = torch.ones(8, 4)

    def forward(self, x):
        return self.make(self, self.lin(x))


def _audit(make):
    x = torch.randn(2, 3, 4)
    module = _Masked(make)
    with on_device((ON_DEVICE,), module, [x], {}) as audit:
        audit.check_result(module(x))


@pytest.mark.parametrize("make", [
    lambda m, h: h.masked_fill(~torch.ones(3, 3, dtype=torch.bool, device=h.device).tril()[:, :1], 0.0),
    lambda m, h: h * torch.ones_like(h) + m.table[:3] + m.scratch[:3],
    lambda m, h: h + h.new_zeros(3, 4) + torch.tensor(2.0),            # a 0-dim CPU scalar is fine
    lambda m, h: h[:, torch.arange(2)].sum() + h,                      # CPU indices are fine
    lambda m, h: h + torch.zeros(3, 4).to(h.device),
], ids=["device=", "ones_like and buffers", "new_zeros and a scalar", "cpu indices", ".to(device)"])
def test_the_device_audit_accepts_tensors_made_on_the_device(make) -> None:
    _audit(make)


@pytest.mark.parametrize(("make", "origin"), [
    (lambda m, h: h.masked_fill(~torch.ones(3, 3, dtype=torch.bool).tril()[:, :1], 0.0), "torch.ones"),
    (lambda m, h: h + m.plain[:3], "self.plain"),
    (lambda m, h: torch.cat([h, torch.zeros(2, 1, 4)], 1), "torch.zeros"),
    (lambda m, h: h.cpu() + h, ".cpu()"),
    (lambda m, h: torch.zeros(2, 3, 4), "torch.zeros"),                 # handed back on the CPU
], ids=["mask", "plain attribute", "cat", "cpu()", "result"])
def test_the_device_audit_catches_cpu_tensors(make, origin) -> None:
    with pytest.raises(DeviceMismatch, match=origin.replace(".", r"\.").replace("(", r"\(").replace(")", r"\)")):
        _audit(make)
