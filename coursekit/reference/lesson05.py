"""Reference code of lesson 05_layer_norm, GENERATED from solutions/05_layer_norm/05_layer_norm.ipynb
by `python -m coursekit.export`. Do not edit."""
# ruff: noqa

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


def layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    """Layer normalisation over the last axis of x ([..., D]); gamma, beta are [D]."""
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)  # biased: divide by D
    x_hat = (x - mean) / np.sqrt(var + eps)
    return gamma * x_hat + beta


class LayerNorm(nn.Module):
    """Layer normalisation over the last axis with a learnable gain `weight` and `bias`."""

    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mean = x.mean(dim=-1, keepdim=True)
        centered = x - mean
        var = centered.pow(2).mean(dim=-1, keepdim=True)  # biased: divide by D
        return self.weight * (centered / torch.sqrt(var + self.eps)) + self.bias


from torch.autograd.function import once_differentiable


class LayerNormFunction(torch.autograd.Function):
    """Layer normalisation over the last axis whose backward is `layer_norm_backward`'s
    formula, written by hand: LayerNormFunction.apply(x, weight, bias, eps)."""

    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)
    def forward(ctx, x, weight, bias, eps):
        centered = x - x.mean(dim=-1, keepdim=True)
        inv_std = torch.rsqrt((centered * centered).mean(dim=-1, keepdim=True) + eps)  # 1/σ
        x_hat = centered * inv_std
        ctx.save_for_backward(x_hat, inv_std, weight)
        return torch.addcmul(bias, x_hat, weight)               # bias + x_hat * weight

    @staticmethod
    @torch.amp.custom_bwd(device_type="cuda")
    @once_differentiable
    def backward(ctx, dout):
        x_hat, inv_std, weight = ctx.saved_tensors
        D = dout.size(-1)
        dbias = dout.reshape(-1, D).sum(dim=0)                  # sum over every token
        dout_x_hat = dout * x_hat
        dweight = dout_x_hat.reshape(-1, D).sum(dim=0)
        dx_hat = dout * weight
        mean_dx_hat = dx_hat.mean(dim=-1, keepdim=True)
        mean_dx_hat_x_hat = dout_x_hat.mul_(weight).mean(dim=-1, keepdim=True)  # mean(dx_hat * x_hat)
        # dx = (dx_hat - mean(dx_hat) - x_hat * mean(dx_hat * x_hat)) / σ, computed in place
        dx = dx_hat.sub_(mean_dx_hat).sub_(x_hat * mean_dx_hat_x_hat).mul_(inv_std)
        return dx, dweight, dbias, None                         # no gradient for eps


class FastLayerNorm(LayerNorm):
    """LayerNorm whose backward pass is written by hand (LayerNormFunction): the same
    parameters and the same numbers, faster to train (section 7 measures it)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return LayerNormFunction.apply(x, self.weight, self.bias, self.eps)
