"""The device audit catches tensors made on the CPU, and only those
(grader/runtime/device.py)."""

from __future__ import annotations

import pytest
import torch

from grader.runtime.device import ON_DEVICE, DeviceMismatch, on_device

torch.set_num_threads(1)


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


def test_the_audit_reads_a_calls_tensors_as_torchs_tree_does_without_it() -> None:
    """The audit walks every torch call's arguments and results (hundreds in a forward): its own
    walk finds the leaves torch's tree_leaves finds, in the same order, in what torch functions
    take and return (lists, tuples, named tuples, torch's return types, dicts)."""
    from torch.utils import _pytree

    from grader.runtime import device

    x, y = torch.ones(2, 3), torch.zeros(3)
    cases = [((x, y), {}), (([x, [y, 1]], None), {"dim": -1, "out": (x,)}),
             ((x.topk(2),), {}), ((x.max(dim=0), "cpu:0"), {"device": torch.device("cpu")})]
    for case in cases:
        assert [id(v) for v in device._leaves(case)] == [id(v) for v in _pytree.tree_leaves(case)]
