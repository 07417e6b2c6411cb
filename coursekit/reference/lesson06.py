"""Reference code of lesson 06_gelu, GENERATED from solutions/06_gelu/06_gelu.ipynb
by `python -m coursekit.export`. Do not edit."""
# ruff: noqa

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


def gelu(x: torch.Tensor) -> torch.Tensor:
    """Exact GELU: x · Φ(x), Φ the standard normal CDF."""
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """The tanh approximation of GELU."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))
