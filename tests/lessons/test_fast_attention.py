"""Lesson 03's fast_scaled_dot_product_attention, which lessons 04-09 attend with: the
attention's softmax over short rows is computed on rows padded with -inf to VECTOR_WIDTH.
It must give the outputs, weights and gradients of scaled_dot_product_attention for every
mask the contract allows, and reroute every spelling of softmax, and only softmax."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from coursekit.reference.lesson03 import (
    VECTOR_WIDTH,
    ShortRowsPadded,
    causal_mask,
    fast_scaled_dot_product_attention,
    padded_softmax,
    scaled_dot_product_attention,
)
from coursekit.reference.lesson04 import MultiHeadAttention

B, H, LQ, D = 2, 3, 5, 8


def _qkv(lk: int, seed: int = 0) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(B, H, n, D, generator=g, dtype=torch.float64).requires_grad_() for n in (LQ, lk, lk))


def _masks(lk: int) -> dict[str, torch.Tensor | None]:
    g = torch.Generator().manual_seed(1)
    padding = torch.rand(B, 1, 1, lk, generator=g) > 0.3
    padding[:, ..., 0] = True
    some_rows_empty = torch.rand(B, H, LQ, lk, generator=g) > 0.5
    some_rows_empty[0, 0, 2] = False  # a query that may see no key: zero weights, zero output
    return {
        "none": None,
        "[Lq, Lk] causal": causal_mask(max(LQ, lk))[:LQ, :lk],
        "[B, 1, 1, Lk] padding": padding,
        "[B, H, Lq, Lk] with an empty row": some_rows_empty,
        "[B, 1, Lq, 1] last axis broadcast": torch.rand(B, 1, LQ, 1, generator=g) > 0.3,
        "0-d": torch.tensor(True),
        "[Lk] float 0/1": (torch.rand(lk, generator=g) > 0.3).double(),
    }


@pytest.mark.parametrize("lk", [1, 7, VECTOR_WIDTH - 1, VECTOR_WIDTH, VECTOR_WIDTH + 3])
@pytest.mark.parametrize("mask_name", list(_masks(4)))
def test_same_output_weights_and_gradients(lk: int, mask_name: str) -> None:
    mask = _masks(lk)[mask_name]
    results = []
    for attend in (scaled_dot_product_attention, fast_scaled_dot_product_attention):
        q, k, v = _qkv(lk)
        out, weights = attend(q, k, v, mask)
        g = torch.Generator().manual_seed(2)
        (out * torch.randn(out.shape, generator=g, dtype=out.dtype)).sum().backward()
        results.append((out, weights, q.grad, k.grad, v.grad))
    for what, fast, plain in zip(("output", "weights", "dq", "dk", "dv"), results[1], results[0], strict=True):
        assert fast.shape == plain.shape, what
        torch.testing.assert_close(fast, plain, msg=f"{what} with mask {mask_name}, Lk = {lk}")
    assert torch.isfinite(results[1][1]).all()


def test_dropout_still_applies() -> None:
    torch.manual_seed(0)
    q, k, v = (t.detach() for t in _qkv(6))
    _, weights = fast_scaled_dot_product_attention(q, k, v, None, dropout_p=0.5)
    assert (weights == 0).any() and weights.shape == (B, H, LQ, 6)


def test_multi_head_attention_attends_with_it() -> None:
    torch.manual_seed(0)
    mha, ref = MultiHeadAttention(16, 4).eval(), torch.nn.MultiheadAttention(16, 4, batch_first=True).eval()
    with torch.no_grad():
        w = ref.in_proj_weight.chunk(3)
        b = ref.in_proj_bias.chunk(3)
        for proj, wi, bi in zip((mha.q_proj, mha.k_proj, mha.v_proj), w, b, strict=True):
            proj.weight.copy_(wi)
            proj.bias.copy_(bi)
        mha.out_proj.load_state_dict(ref.out_proj.state_dict())
    x, mem = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
    expected, expected_weights = ref(x, mem, mem, average_attn_weights=False)
    torch.testing.assert_close(mha(x, mem, mem), expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(mha.attn_weights, expected_weights, atol=1e-6, rtol=1e-5)


SPELLINGS = {
    "torch.softmax(x, -1)": lambda x: torch.softmax(x, -1),
    "torch.softmax(x, dim=-1)": lambda x: torch.softmax(x, dim=-1),
    "F.softmax(x, dim=-1)": lambda x: F.softmax(x, dim=-1),
    "x.softmax(-1)": lambda x: x.softmax(-1),
    "x.softmax(dim=3)": lambda x: x.softmax(dim=3),
    "torch.special.softmax(x, -1)": lambda x: torch.special.softmax(x, -1),
    "nn.Softmax(dim=-1)": lambda x: torch.nn.Softmax(dim=-1)(x),
    "F.softmax(x, -1, dtype=float64)": lambda x: F.softmax(x, -1, dtype=torch.float64),
}


@pytest.mark.parametrize("spelling", list(SPELLINGS))
def test_every_spelling_of_softmax_is_padded(spelling: str) -> None:
    x = torch.randn(2, 3, 4, VECTOR_WIDTH - 1).requires_grad_()
    with ShortRowsPadded():
        y = SPELLINGS[spelling](x)
    assert y.grad_fn is not None and "Slice" in y.grad_fn.name(), "not rerouted to padded_softmax"
    torch.testing.assert_close(y, SPELLINGS[spelling](x))


@pytest.mark.parametrize("call", ["softmax over another axis", "long rows", "not a softmax"])
def test_other_calls_pass_through(call: str) -> None:
    x = torch.randn(2, 3, 4, VECTOR_WIDTH - 1 if call != "long rows" else VECTOR_WIDTH).requires_grad_()
    fn = {"softmax over another axis": lambda t: torch.softmax(t, dim=-2),
          "long rows": lambda t: torch.softmax(t, dim=-1),
          "not a softmax": lambda t: torch.log_softmax(t, dim=-1)}[call]
    with ShortRowsPadded():
        y = fn(x)
    assert "Slice" not in y.grad_fn.name()
    torch.testing.assert_close(y, fn(x))


@pytest.mark.parametrize("n", [0, 1, VECTOR_WIDTH - 1, VECTOR_WIDTH, 3 * VECTOR_WIDTH + 1])
def test_padded_softmax_is_softmax_for_any_row_length(n: int) -> None:
    x = torch.randn(3, 2, n)
    torch.testing.assert_close(padded_softmax(x), torch.softmax(x, dim=-1))


def test_padded_softmax_of_masked_rows() -> None:
    x = torch.tensor([[1.0, float("-inf"), 2.0], [float("-inf")] * 3])
    y = padded_softmax(x)
    torch.testing.assert_close(y[0], torch.softmax(x[0], -1))
    assert torch.isnan(y[1]).all(), "a fully masked row stays NaN, as with torch.softmax (SDPA zeroes it)"


def test_a_student_attention_written_otherwise_is_accelerated_too() -> None:
    def my_attention(q, k, v, mask=None, dropout_p=0.0):
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.size(-1))
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = scores.softmax(dim=-1).nan_to_num(0.0)
        return weights @ v, weights

    q, k, v = (t.detach() for t in _qkv(7))
    with ShortRowsPadded():
        out, weights = my_attention(q, k, v, causal_mask(7)[:LQ])
    expected, expected_weights = scaled_dot_product_attention(q, k, v, causal_mask(7)[:LQ])
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(weights, expected_weights)
