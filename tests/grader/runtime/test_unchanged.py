"""A function must not change its arguments (grader.runtime.unchanged), checked on every
call a hidden test makes, and said to the student as the mistake ``changes_its_input``."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from grader.check.messages import CHANGES_ITS_INPUT, explain
from grader.runtime.errors import SubmissionError
from grader.runtime.target import Target
from grader.runtime.unchanged import ArgumentChanged, ArgumentSnapshot

SOURCE = '''
import numpy as np, torch
def centre(x):
    x -= x.mean(-1, keepdims=True)
    return x
def centre_copy(x):
    return x - x.mean(-1, keepdims=True)
def fill(logits, k):
    logits.masked_fill_(logits < k, float("-inf"))
    return logits
def grow(ids):
    ids.append(0)
    return len(ids)
def second(batch):
    batch[1][0, 0] = 7
    return batch[0]
def reshape(x):
    x.shape = (x.size,)
    return x
def nan_safe(x):
    return np.nansum(x)
def shrink(model, ids):
    with torch.no_grad():
        model.weight.mul_(0.5)
    return ids
def train(m, lr=0.1):
    with torch.no_grad():
        m.weight.sub_(lr)
    return 0.0
def add_in_place(x):
    x += 1
    return x
'''


@pytest.fixture()
def target() -> Target:
    t = Target()
    t.load([(0, SOURCE)])
    return t


def changed(target: Target, name: str, *args, changes=(), **kwargs) -> str | None:
    try:
        target.call(name, None, list(args), kwargs, changes=changes)
    except SubmissionError as exc:
        assert exc.exc_type == "ArgumentChanged", exc
        return exc.message
    return None


def test_an_argument_changed_in_place_is_named_by_its_parameter(target) -> None:
    assert changed(target, "centre", np.ones((2, 3)) * np.arange(3)) == "`x`"
    assert changed(target, "fill", torch.randn(2, 5), 0.0) == "`logits`"
    assert changed(target, "fill", logits=torch.randn(2, 5), k=0.0) == "`logits`"
    assert changed(target, "grow", [1, 2]) == "`ids`"
    assert changed(target, "second", (torch.zeros(2, 2), torch.zeros(2, 2))) == "`batch`[1]"
    assert changed(target, "reshape", np.zeros((2, 3))) == "`x`"  # the shape is part of it


def test_a_module_argument_is_compared_by_its_parameters(target) -> None:
    model = torch.nn.Linear(3, 2)
    assert changed(target, "shrink", model, torch.zeros(2)) == "`model`.weight"


def test_nothing_is_reported_for_a_function_that_computes_into_new_values(target) -> None:
    x = np.array([[1.0, np.nan, -np.inf]])  # NaN equals NaN here, and -inf stays -inf
    assert changed(target, "centre_copy", x) is None
    assert changed(target, "nan_safe", x) is None


def test_what_a_function_is_meant_to_change_is_left_to_it(target) -> None:
    model = torch.nn.Linear(3, 2)
    assert changed(target, "train", model, changes=(0,)) is None  # by position: any name
    assert changed(target, "train", m=model, changes=("m",)) is None
    assert changed(target, "train", model, changes=("model",)) == "`m`.weight"  # not by a name it lacks


def test_a_tensor_that_requires_grad_is_refused_by_torch_and_still_named(target) -> None:
    x = torch.randn(2, 3)
    with pytest.raises(SubmissionError) as info:
        target.grad("add_in_place", None, [x], {}, torch.ones(2, 3))
    assert info.value.exc_type == "ArgumentChanged" and info.value.message == ""


def test_the_student_reads_the_mistake_in_words() -> None:
    hint = explain(SubmissionError("apply_rope", "ArgumentChanged", "`x`"), "apply_rope")
    assert hint.mistake == CHANGES_ITS_INPUT
    assert str(hint).startswith("`apply_rope` changes its argument `x` in place")
    hint = explain(SubmissionError("gelu", "ArgumentChanged", ""), "gelu")
    assert hint.mistake == CHANGES_ITS_INPUT and "one of its tensor arguments" in str(hint)


def test_the_snapshot_is_a_copy_the_call_cannot_reach() -> None:
    x = torch.zeros(3)
    snap = ArgumentSnapshot(lambda x: None, [x], {})
    x.add_(1)
    with pytest.raises(ArgumentChanged, match="`x`"):
        snap.check()


def _tied_module() -> torch.nn.Module:
    """Submodules, a weight shared by two of them, a None parameter and buffer, a buffer
    that is not persistent, one submodule twice."""
    m = torch.nn.Module()
    m.a = torch.nn.Linear(2, 2)
    m.b = torch.nn.Linear(2, 2, bias=False)
    m.b.weight = m.a.weight
    m.norm = torch.nn.BatchNorm1d(2)
    m.again = m.norm
    m.register_parameter("none", None)
    m.register_buffer("missing", None)
    m.register_buffer("scratch", torch.ones(1), persistent=False)
    return m


def test_a_module_argument_is_read_in_one_walk_of_its_submodules(monkeypatch) -> None:
    """A snapshot reads a module's parameters and buffers before and after every call (a
    beam search's decoder fixture, a Transformer): one walk of its submodules each time, not
    two, giving what named_parameters() and named_buffers() give, in their order."""
    from grader.runtime import unchanged

    module = _tied_module()
    walks = []
    walk = torch.nn.Module.named_modules

    def counted(self, *args, **kwargs):
        walks.append(self)
        return walk(self, *args, **kwargs)

    monkeypatch.setattr(torch.nn.Module, "named_modules", counted)
    snap = ArgumentSnapshot(lambda model: None, [module], {})
    snap.check()
    assert walks.count(module) == 2, walks.count(module)  # 4 before: named_parameters and named_buffers each walked it
    found = unchanged._named_tensors(module)
    expected = [*module.named_parameters(), *module.named_buffers()]
    assert [name for name, _ in found] == [name for name, _ in expected]
    assert all(a is b for (_, a), (_, b) in zip(found, expected, strict=True))
    module.norm.running_mean.add_(1)
    with pytest.raises(ArgumentChanged, match=r"`model`\.norm\.running_mean"):
        snap.check()


def test_a_module_with_its_own_named_parameters_is_read_through_them() -> None:
    from grader.runtime import unchanged

    class Hidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(2, 2)

        def named_parameters(self, *args, **kwargs):
            yield from ()

    assert unchanged._named_tensors(Hidden()) == []
