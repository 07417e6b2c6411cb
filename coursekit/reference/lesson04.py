"""Reference code of lesson 04_multi_head_attention, GENERATED from solutions/04_multi_head_attention/04_multi_head_attention.ipynb
by `python -m coursekit.export`. Do not edit."""
# ruff: noqa

import math

import torch
import torch.nn as nn

# Lesson 03's attention and masks (the course's reference versions, see coursekit.export).
# scaled_dot_product_attention is lesson 03's fast_scaled_dot_product_attention (section 6
# there): the same results, without torch's slow softmax for fewer than 16 keys on a CPU.
# To use your own lesson 03 code instead:
#   from coursekit.export import load_my_code
#   my03 = load_my_code("03_scaled_dot_product_attention")
#   scaled_dot_product_attention = my03.scaled_dot_product_attention
from coursekit.reference.lesson03 import causal_mask, padding_mask
from coursekit.reference.lesson03 import fast_scaled_dot_product_attention as scaled_dot_product_attention


class MultiHeadAttention(nn.Module):
    """Multi-head attention (batch first): projections, split into heads, scaled dot-product
    attention per head, merge, output projection."""

    def __init__(self, d_model: int, n_head: int, dropout: float = 0.0, bias: bool = True):
        super().__init__()
        if d_model % n_head:
            raise ValueError(f"d_model = {d_model} is not divisible by n_head = {n_head}")
        self.d_model, self.n_head, self.d_head = d_model, n_head, d_model // n_head
        self.dropout = dropout
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.attn_weights = None
    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                mask: torch.Tensor | None = None) -> torch.Tensor:
        """query [B, Lq, D], key and value [B, Lk, D]; mask bool (True = allowed),
        broadcastable to [B, H, Lq, Lk]. Returns [B, Lq, D]; keeps the weights
        [B, H, Lq, Lk] in self.attn_weights."""
        B, Lq, _ = query.shape
        Lk = key.size(1)
        H, d = self.n_head, self.d_head
        q = self.q_proj(query).view(B, Lq, H, d).transpose(1, 2)       # [B, H, Lq, d]
        k = self.k_proj(key).view(B, Lk, H, d).transpose(1, 2)         # [B, H, Lk, d]
        v = self.v_proj(value).view(B, Lk, H, d).transpose(1, 2)       # [B, H, Lk, d]
        p = self.dropout if self.training else 0.0
        out, weights = scaled_dot_product_attention(q, k, v, mask, p)  # [B, H, Lq, d]
        self.attn_weights = weights.detach()                            # [B, H, Lq, Lk]
        out = out.transpose(1, 2).reshape(B, Lq, self.d_model)          # merge heads
        return self.out_proj(out)
