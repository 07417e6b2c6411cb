"""Hints are folded the same way for every renderer: a diagnosis first, the symptoms it
explains folded into it (grader/check/messages.py, grader/testkit/framework.py's suspects)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from grader.check.messages import explain, fold
from grader.common.hint import Hint
from grader.results import ExerciseResult
from grader.testkit.framework import Failed, close, suspect

torch.set_num_threads(1)
def test_a_diagnosis_comes_first_and_folds_the_symptoms_it_explains() -> None:
    failures = [Hint("the output differs"), Hint("scaled by √d_model", "scale"), Hint("weights differ"),
                Hint("scaled by √d_model (again)", "scale"), Hint("gradients differ")]
    assert [str(h.text) for h in fold(failures)] == ["scaled by √d_model (+3 related checks failed)"]
    assert fold(failures)[0].mistake == "scale"


def test_two_diagnoses_are_both_shown_in_the_order_found() -> None:
    hints = fold([Hint("a", "m1"), Hint("b"), Hint("c", "m2")])
    assert [h.mistake for h in hints] == ["m1", "m2"]
    assert str(hints[0].text) == "a (+1 related check failed)"


def test_without_a_diagnosis_the_students_own_error_comes_before_symptoms() -> None:
    hints = fold([Hint("differs"), Hint("raised IndexError", kind="error"), Hint("differs")])
    assert [(str(h.text), h.mistake, h.kind) for h in hints] == [("raised IndexError (+2 related checks failed)", None, "error")]
    assert fold([Hint("not implemented", kind="error")] * 4) == [Hint("not implemented", kind="error")]
    assert fold([Hint("plain text"), Hint("plain text")]) == [Hint("plain text", None, "symptom")]
    assert fold([]) == []


def test_every_renderer_shows_the_folded_hints() -> None:
    from grader.outputs.render import feedback_html, to_json, to_text
    from grader.results import Report

    result = ExerciseResult("MultiHeadAttention", 2.0, 12.0,
                            [Hint("differs"), Hint("scaled by √d_model", "scale"), Hint("weights differ")])
    assert result.as_dict()["message"] == "scaled by √d_model (+2 related checks failed)"
    report = Report("nb.ipynb", "04_multi_head_attention", [result])
    assert "hint: scaled by √d_model (+2 related checks failed)" in to_text(report)
    assert "differs" not in to_text(report).replace("checks failed", "")
    assert json.loads(to_json(report))["exercises"][0]["message"] == str(result.hints[0].text)
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
    assert hint.mistake == "library_call" and "F.gelu" in str(hint.text)


def test_given_code_is_refused_through_any_alias_then_given_back() -> None:
    """Issue 49: Target.refuse makes the notebook's given code raise while an exercise that it
    computes is graded (a function through an alias, a class through its methods), a named
    mistake; allow puts it back."""
    from grader.runtime.errors import SubmissionError
    from grader.runtime.target import Target

    target = Target({})
    target.load([(0, "import functools\n\ndef helper(x):\n    return x + 1\n\nalias = helper\n\n"
                     "class Given:\n    @staticmethod\n    def f(x):\n        return x\n\n"
                     "def logged(fn):\n    @functools.wraps(fn)\n    def call(*args):\n        return fn(*args)\n"
                     "    return call\n\n@logged\ndef cached(x):\n    return x\n\nalso = cached\n\n"
                     "def by_alias(x):\n    return alias(x)\n\ndef by_class(x):\n    return Given.f(x)\n\n"
                     "def by_decorated(x):\n    return also(x)\n")])
    assert target.refuse(["helper", "Given", "cached", "absent"]) == ["helper", "Given", "cached"]
    for name, given in (("by_alias", "helper"), ("by_class", "Given"), ("by_decorated", "cached")):
        try:
            target.call(name, None, [1], {})
        except SubmissionError as exc:
            hint = explain(exc, "Exercise")
        else:
            raise AssertionError(f"{name} reached the refused {given}")
        assert hint.mistake == "given_answer" and f"calls {given}, code the notebook gives" in str(hint.text), hint
    target.allow(["helper", "Given", "cached"])
    assert target.call("by_alias", None, [1], {}) == 2 and target.call("by_class", None, [1], {}) == 1
    assert target.call("by_decorated", None, [1], {}) == 1
