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
