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


VECTOR_WIDTH = 16  # float32 numbers in one AVX-512 register


def fast_scaled_dot_product_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                                      mask: torch.Tensor | None = None, dropout_p: float = 0.0):
    """scaled_dot_product_attention, with the keys padded to VECTOR_WIDTH on a CPU.

    The extra keys and values are zeros that the mask hides: they get weight exactly 0, so
    the output and the weights of the real keys are those of scaled_dot_product_attention;
    only torch's slow softmax for rows shorter than a vector register is avoided.
    """
    Lk = k.size(-2)
    if k.device.type != "cpu" or Lk >= VECTOR_WIDTH:
        return scaled_dot_product_attention(q, k, v, mask, dropout_p)
    extra = VECTOR_WIDTH - Lk
    k = F.pad(k, (0, 0, 0, extra))                            # [..., VECTOR_WIDTH, d], zeros at the end
    v = F.pad(v, (0, 0, 0, extra))
    allowed = torch.ones(Lk, dtype=torch.bool, device=k.device) if mask is None else mask.to(k.device, torch.bool)
    allowed = F.pad(allowed.expand(*allowed.shape[:-1], Lk), (0, extra), value=False)  # nobody sees them
    out, weights = scaled_dot_product_attention(q, k, v, allowed, dropout_p)
    return out, weights[..., :Lk]
