"""Reference code of lesson 07_positional_encoding, GENERATED from solutions/07_positional_encoding/07_positional_encoding.ipynb
by `python -m coursekit.export`. Do not edit."""
# ruff: noqa

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


def sinusoidal_positional_encoding(max_len: int, d_model: int) -> torch.Tensor:
    """The [max_len, d_model] sinusoidal table: sin in even columns, cos in odd ones."""
    position = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)  # [max_len, 1]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)  # 0, 2, 4, ...
    angle = position / torch.pow(10000.0, two_i / d_model)  # [max_len, ceil(D / 2)]
    pe = torch.zeros(max_len, d_model, dtype=torch.float32)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return pe


class PositionalEncoding(nn.Module):
    """Adds the sinusoidal encoding (a buffer `pe` [max_len, d_model]) to x [B, L, D], then dropout."""

    def __init__(self, d_model: int, max_len: int = 5000, dropout: float = 0.0):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model))
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(x + self.pe[: x.size(1)])


class TokenEmbedding(nn.Module):
    """Embedding lookup scaled by sqrt(d_model); weights initialised with std d_model ** -0.5."""

    def __init__(self, vocab_size: int, d_model: int):
        super().__init__()
        self.d_model = d_model
        self.embedding = nn.Embedding(vocab_size, d_model)
        nn.init.normal_(self.embedding.weight, mean=0.0, std=d_model ** -0.5)
    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.embedding(tokens) * math.sqrt(self.d_model)
