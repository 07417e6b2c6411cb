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


def cpu_vector_width() -> int:
    """float32 numbers in one vector register as PyTorch's CPU kernels use it on this
    machine: 16 with AVX-512, else 8 (AVX2; PyTorch's 256-bit vectors elsewhere)."""
    return 16 if "AVX512" in torch.backends.cpu.get_cpu_capability() else 8


VECTOR_WIDTH = cpu_vector_width()


def padded_softmax(scores: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """torch.softmax over the last axis, each row first padded with -inf to VECTOR_WIDTH:
    exp(-inf) = 0 adds nothing to the sum, so the result is the same, without the slow path."""
    n = scores.size(-1)
    padded = F.pad(scores, (0, max(VECTOR_WIDTH - n, 0)), value=float("-inf"))
    return torch.softmax(padded, dim=-1, dtype=dtype)[..., :n]


class ShortRowsPadded(torch.overrides.TorchFunctionMode):
    """Inside `with ShortRowsPadded():`, a softmax over a last axis shorter than VECTOR_WIDTH
    (on a CPU) is computed by padded_softmax; every other torch call runs unchanged."""

    SOFTMAXES = (torch.softmax, F.softmax, torch.Tensor.softmax, torch.special.softmax)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in self.SOFTMAXES and len(args) <= 2 and isinstance(args[0], torch.Tensor):
            x, dim = args[0], args[1] if len(args) == 2 else kwargs.get("dim")
            if (x.device.type == "cpu" and x.dim() > 0 and dim in (-1, x.dim() - 1)
                    and x.size(-1) < VECTOR_WIDTH):
                return padded_softmax(x, kwargs.get("dtype"))
        return func(*args, **kwargs)


def fast_scaled_dot_product_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                                      mask: torch.Tensor | None = None, dropout_p: float = 0.0):
    """scaled_dot_product_attention, with its softmax over fewer than VECTOR_WIDTH keys
    done by padded_softmax: the same outputs and weights, without torch's slow path."""
    with ShortRowsPadded():
        return scaled_dot_product_attention(q, k, v, mask, dropout_p)
