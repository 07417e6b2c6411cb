"""Lesson 05's FastLayerNorm: the LayerNorm that lessons 08-09 train with, whose backward
pass is written by hand (LayerNormFunction). It must be the same function as LayerNorm and
nn.LayerNorm, forward and backward, for every shape the Transformer gives it."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from coursekit.reference.lesson05 import FastLayerNorm, LayerNorm, LayerNormFunction
from coursekit.reference.lesson08 import Transformer


def _float64(*shape: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g, dtype=torch.float64) * 2 + 1).requires_grad_()


@pytest.mark.parametrize("shape", [(7,), (3, 7), (2, 3, 7), (2, 1, 3, 7)])
def test_backward_matches_finite_differences(shape: tuple[int, ...]) -> None:
    x, weight, bias = _float64(*shape, seed=0), _float64(7, seed=1), _float64(7, seed=2)
    assert torch.autograd.gradcheck(LayerNormFunction.apply, (x, weight, bias, 1e-5))


def test_non_contiguous_input() -> None:
    x = _float64(7, 4, seed=3).detach().t().requires_grad_()  # [4, 7] with strides (1, 4)
    assert not x.is_contiguous()
    assert torch.autograd.gradcheck(LayerNormFunction.apply, (x, _float64(7, seed=4), _float64(7, seed=5), 1e-5))


@pytest.mark.parametrize("eps", [1e-5, 1e-2])
def test_same_values_and_gradients_as_layer_norm_and_nn(eps: float) -> None:
    g = torch.Generator().manual_seed(6)
    modules = {"LayerNorm": LayerNorm(16, eps), "FastLayerNorm": FastLayerNorm(16, eps),
               "nn.LayerNorm": nn.LayerNorm(16, eps)}
    state = {"weight": torch.randn(16, generator=g), "bias": torch.randn(16, generator=g)}
    x = torch.randn(4, 5, 16, generator=g) * 3 + 1
    x[0, 0] = 0.5  # a constant token: variance 0, eps alone keeps it finite
    dout = torch.randn(4, 5, 16, generator=g)
    results = {}
    for name, module in modules.items():
        module.load_state_dict(state)
        xi = x.clone().requires_grad_()
        y = module(xi)
        y.backward(dout)
        results[name] = (y, xi.grad, module.weight.grad, module.bias.grad)
    for name in ("FastLayerNorm", "nn.LayerNorm"):
        for what, a, b in zip(("output", "dx", "dweight", "dbias"), results[name], results["LayerNorm"], strict=True):
            torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4, msg=f"{name} {what}")


def test_is_a_layer_norm_with_the_same_parameters() -> None:
    fast = FastLayerNorm(8)
    assert isinstance(fast, LayerNorm)
    assert set(dict(fast.named_parameters())) == {"weight", "bias"}
    assert fast.eps == 1e-5


def test_second_derivative_is_refused_not_wrong() -> None:
    x, weight, bias = _float64(3, 7, seed=7), _float64(7, seed=8), _float64(7, seed=9)
    (dx,) = torch.autograd.grad(LayerNormFunction.apply(x, weight, bias, 1e-5).pow(2).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable|does not require grad"):
        dx.sum().backward()


def test_transformer_trains_with_it() -> None:
    model = Transformer(11, 13, d_model=16, n_head=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=32,
                        dropout=0.0)
    norms = [m for m in model.modules() if isinstance(m, LayerNorm)]
    assert norms and all(isinstance(m, FastLayerNorm) for m in norms)
    src, tgt = torch.randint(1, 11, (2, 5)), torch.randint(1, 13, (2, 6))
    model(src, tgt).sum().backward()
    assert all(m.weight.grad is not None and torch.isfinite(m.weight.grad).all() for m in norms)
