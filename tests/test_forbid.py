"""A check's forbidden torch functions (``Target.call(forbid=...)``): refused however they
are reached, every time, and only while the check's call runs."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from grader.runtime.errors import ForbiddenCall
from grader.runtime.target import forbidding

GELU = "torch.nn.functional.gelu"


@pytest.mark.parametrize("reach", [F.gelu, torch._C._nn.gelu, torch.nn.GELU()],
                         ids=["F.gelu", "torch._C._nn.gelu", "nn.GELU"])
def test_a_forbidden_function_is_refused_however_it_is_reached(reach) -> None:
    x = torch.randn(3)
    for _ in range(3):  # the mode made once for these names refuses every time
        with pytest.raises(ForbiddenCall), forbidding([GELU]):
            reach(x)


def test_other_functions_run_and_nothing_is_refused_afterwards() -> None:
    x = torch.randn(3)
    with forbidding([GELU]):
        assert torch.equal(torch.relu(x), x.clamp(min=0))
    assert torch.equal(F.gelu(x), F.gelu(x))  # outside the call: allowed again


def test_each_set_of_names_refuses_its_own() -> None:
    x = torch.randn(3)
    with forbidding(["torch.softmax"]):
        F.gelu(x)
        with pytest.raises(ForbiddenCall):
            torch.softmax(x, -1)
    with forbidding([GELU, "torch.softmax"]), pytest.raises(ForbiddenCall):
        F.gelu(x)


def test_guards_and_unknown_names_forbid_nothing() -> None:
    x = torch.randn(3)
    with forbidding(["grader:on-device", "torch.no_such_function"]):
        F.gelu(x)
