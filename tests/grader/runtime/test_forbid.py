"""A check's forbidden torch functions (``Target.call(forbid=...)``): refused however they
are reached, every time, and only while the check's call runs."""

from __future__ import annotations

import subprocess
import sys

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


NUMPY_WORKER = """
import sys
import numpy as np
from grader.runtime.errors import ForbiddenCall
from grader.runtime.target import forbidding

with forbidding(["torch.softmax"]):
    np.exp(np.ones(3))  # a numpy lesson's call
assert "torch" not in sys.modules, "the guard imported torch"

def student_softmax(x):
    import torch  # imported by the call itself: the guard starts when the import ends
    return torch.softmax(torch.as_tensor(x), -1)

try:
    with forbidding(["torch.softmax"]):
        student_softmax([1.0, 2.0])
except ForbiddenCall as exc:
    print("refused", exc)
import torch
assert torch.softmax(torch.ones(2), -1).sum() == 1  # after the call: allowed again
assert not any(type(f).__name__ == "_AfterImport" for f in sys.meta_path)
"""


def test_a_process_without_torch_does_not_import_it_for_the_guard() -> None:
    """A numpy lesson's worker has no torch: the guard must not import it (seconds, counted
    in the call's own limit: a 3 s limit failed lesson 01's reference under load), and a
    call that imports torch itself is still refused the forbidden function."""
    proc = subprocess.run([sys.executable, "-c", NUMPY_WORKER], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("refused"), proc.stdout
