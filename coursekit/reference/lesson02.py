"""Reference code of lesson 02_split_heads, GENERATED from solutions/02_split_heads/02_split_heads.ipynb
by `python -m coursekit.export`. Do not edit."""
# ruff: noqa

import numpy as np


def split_qkv(x: np.ndarray, n_state: int):
    """[B, L, 3·n_state] -> (q, k, v), each [B, L, n_state]: consecutive blocks, in that order."""
    q = x[:, :, :n_state]
    k = x[:, :, n_state:2 * n_state]
    v = x[:, :, 2 * n_state:3 * n_state]
    return q, k, v


def split_heads(x: np.ndarray, n_head: int, k: bool = False) -> np.ndarray:
    """[B, L, D] -> [B, H, L, d] (k=False) or [B, H, d, L] (k=True), with d = D // H.
    Head h holds the consecutive features h·d … (h+1)·d - 1 of every token."""
    B, L, D = x.shape
    new_x = x.reshape(B, L, n_head, D // n_head)           # [B, L, H, d]
    return new_x.transpose((0, 2, 3, 1) if k else (0, 2, 1, 3))


def merge_heads(x: np.ndarray) -> np.ndarray:
    """[B, H, L, d] -> [B, L, H·d]: the inverse of split_heads (k=False)."""
    B, H, L, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, L, H * d)
