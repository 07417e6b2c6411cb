"""Reference code of lesson 03_scaled_dot_product_attention, GENERATED from solutions/03_scaled_dot_product_attention/03_scaled_dot_product_attention.ipynb
by `python -m coursekit.export`. Do not edit."""
# ruff: noqa

import math

import torch
import torch.nn.functional as F


def causal_mask(L: int, device=None) -> torch.Tensor:
    """Bool [L, L]: True where query i may attend to key j, i.e. j <= i."""
    return torch.ones(L, L, dtype=torch.bool, device=device).tril()


def padding_mask(tokens: torch.Tensor, pad_id: int) -> torch.Tensor:
    """Bool [B, 1, 1, L]: True where tokens[b, j] is a real token (key j may be attended to)."""
    return (tokens != pad_id)[:, None, None, :]


def scaled_dot_product_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                                 mask: torch.Tensor | None = None, dropout_p: float = 0.0):
    """softmax(q kᵀ / √d_k) v over the last two axes; returns (output, weights).

    mask: bool, True where attention is allowed, broadcastable to [..., Lq, Lk].
    Masked keys get weight exactly 0; a query with no allowed key gets zero weights and a
    zero output (never NaN). Dropout (probability dropout_p) is applied to the weights.
    """
    d_k = q.size(-1)
    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        allowed = mask.to(device=scores.device, dtype=torch.bool)
        scores = scores.masked_fill(~allowed, float("-inf"))   # a very large NEGATIVE number
    weights = torch.softmax(scores, dim=-1)                     # over the keys
    if mask is not None:
        weights = weights.masked_fill(~allowed, 0.0)            # fully masked rows: NaN -> 0
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    return torch.matmul(weights, v), weights
