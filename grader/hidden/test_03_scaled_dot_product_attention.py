"""Hidden graders of lesson 03_scaled_dot_product_attention (torch).

Every check uses fixed inputs (the grader's own torch.Generator, never the student's seed)
and PyTorch's F.scaled_dot_product_attention or exact values as the oracle.
"""

import math

import torch
import torch.nn.functional as F

from grader.framework import check, close, exercise, shape_of

SDPA = ("torch.nn.functional.scaled_dot_product_attention",)


def randn(*shape, seed=0, dtype=torch.float32):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def ref_attention(q, k, v, mask=None):
    """float64 oracle: softmax over allowed keys, fully masked rows -> zeros."""
    q, k, v = q.double(), k.double(), v.double()
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, -1)
    if mask is not None:
        w = w.masked_fill(~mask, 0.0)
    return w @ v, w


def attend(sub, *args, **kwargs):
    result = sub.call("scaled_dot_product_attention", *args, forbid=SDPA, **kwargs)
    check(isinstance(result, (tuple, list)) and len(result) == 2,
          "scaled_dot_product_attention should return a pair (output, weights)")
    out, w = result
    check(isinstance(out, torch.Tensor) and isinstance(w, torch.Tensor),
          "scaled_dot_product_attention should return two tensors (output, weights)")
    return out, w


def no_nan(t, message):
    check(not torch.isnan(t).any(), message)


# --- scaled_dot_product_attention ---------------------------------------------------------

Q = randn(2, 3, 4, 8, seed=1)
K = randn(2, 3, 5, 8, seed=2)
V = randn(2, 3, 5, 6, seed=3)


@exercise("scaled_dot_product_attention", points=0.5)
def test_sdpa_shapes_and_rows(sub):
    out, w = attend(sub, Q, K, V)
    check(shape_of(w) == (2, 3, 4, 5),
          f"the weights should be [..., Lq, Lk] = [2, 3, 4, 5] for 4 queries and 5 keys, got {list(w.shape)}")
    check(shape_of(out) == (2, 3, 4, 6),
          f"the output should be [..., Lq, d_v] = [2, 3, 4, 6], got {list(out.shape)}")
    close(w.sum(-1), torch.ones(2, 3, 4),
          "each query's weights should sum to 1 over the keys: softmax over the wrong axis?", atol=1e-5)


@exercise("scaled_dot_product_attention", points=2)
def test_sdpa_matches_torch_without_mask(sub):
    out, w = attend(sub, Q, K, V)
    ref_out, ref_w = ref_attention(Q, K, V)
    close(w, ref_w, "the weights should be softmax(q kᵀ / √d_k) over the keys: divide by the "
          "square root of d_k, and take softmax over the last axis", atol=1e-5)
    close(out, F.scaled_dot_product_attention(Q, K, V),
          "the output differs from torch's scaled_dot_product_attention: it should be weights @ v",
          atol=1e-5)


@exercise("scaled_dot_product_attention", points=1)
def test_sdpa_scale_is_square_root(sub):
    q, k, v = randn(1, 3, 64, seed=4), randn(1, 4, 64, seed=5), randn(1, 4, 2, seed=6)
    _, w = attend(sub, q, k, v)
    ref_w = ref_attention(q, k, v)[1]
    close(w, ref_w, "with d_k = 64 the scores must be divided by √64 = 8 (not by 64, and not left "
          "unscaled)", atol=1e-5)


@exercise("scaled_dot_product_attention", points=2)
def test_sdpa_boolean_mask_true_is_allowed(sub):
    g = torch.Generator().manual_seed(7)
    mask = torch.rand(2, 3, 4, 5, generator=g) > 0.4
    mask[..., 0] = True                                      # every row keeps a key
    out, w = attend(sub, Q, K, V, mask=mask)
    no_nan(w, "the weights contain NaN with a mask where every query keeps at least one key")
    check(bool((w[~mask] == 0).all()),
          "keys where the mask is False must get exactly zero weight (True means allowed: "
          "is the mask inverted, or the masked scores filled with 0 instead of -inf?)")
    close(w.sum(-1), torch.ones(2, 3, 4),
          "with a mask, the weights of the allowed keys should still sum to 1: fill masked scores "
          "with -inf (or a very large negative number) before the softmax, or renormalise",
          atol=1e-5)
    close(out, F.scaled_dot_product_attention(Q, K, V, attn_mask=mask),
          "with a boolean mask (True = allowed) the output differs from torch's", atol=1e-5)


@exercise("scaled_dot_product_attention", points=1)
def test_sdpa_fully_masked_rows_are_zero(sub):
    mask = torch.ones(4, 5, dtype=torch.bool)
    mask[1] = False                                          # query 1 may see nothing
    mask[3, 2:] = False
    out, w = attend(sub, Q, K, V, mask=mask)
    no_nan(out, "a query whose keys are all masked gives NaN: its weights and output should be 0")
    no_nan(w, "a query whose keys are all masked gives NaN weights: they should be 0")
    check(bool((w[..., 1, :] == 0).all()) and bool((out[..., 1, :] == 0).all()),
          "a query whose keys are all masked should get all-zero weights and a zero output")
    ref_out, ref_w = ref_attention(Q, K, V, mask)
    close(w, ref_w, "with some rows fully masked, the other rows should be unchanged", atol=1e-5)
    close(out, ref_out, "with some rows fully masked, the other outputs should be unchanged", atol=1e-5)


@exercise("scaled_dot_product_attention", points=1)
def test_sdpa_masks_broadcast(sub):
    pad = torch.tensor([[True, True, True, False, False],
                        [True, True, True, True, False]])[:, None, None, :]   # [B, 1, 1, Lk]
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    q5 = randn(2, 3, 5, 8, seed=8)
    for mask, name in [(pad, "a padding mask [B, 1, 1, Lk]"), (causal, "a causal mask [L, L]"),
                       (pad & causal, "a combined mask [B, 1, L, L]")]:
        out, w = attend(sub, q5, K, V, mask=mask)
        ref_out, ref_w = ref_attention(q5, K, V, mask)
        close(w, ref_w, f"with {name} (broadcast over heads and queries) the weights are wrong",
              atol=1e-5)
        close(out, ref_out, f"with {name} the output is wrong", atol=1e-5)


@exercise("scaled_dot_product_attention", points=0.5)
def test_sdpa_causal_future_does_not_change_past(sub):
    x = randn(1, 6, 8, seed=9)
    causal = torch.ones(6, 6, dtype=torch.bool).tril()
    y = x.clone()
    y[:, 4:] = randn(1, 2, 8, seed=10) * 3                  # change the last two tokens
    out_x, _ = attend(sub, x, x, x, mask=causal)
    out_y, _ = attend(sub, y, y, y, mask=causal)
    close(out_y[:, :4], out_x[:, :4],
          "under a causal mask, changing a future token changed an earlier output: "
          "query i may only use keys j <= i", atol=1e-5)


@exercise("scaled_dot_product_attention", points=0.5)
def test_sdpa_padded_key_never_matters(sub):
    x = randn(1, 5, 8, seed=11)
    keep = torch.tensor([True, True, True, False, False])
    y = x.clone()
    y[:, 3:] = randn(1, 2, 8, seed=12) * 10                 # change the padded keys and values
    out_x, _ = attend(sub, x, x, x, mask=keep)
    out_y, _ = attend(sub, x, y, y, mask=keep)
    close(out_y, out_x, "changing a masked (padded) key or value changed the output: masked keys "
          "must get exactly zero weight", atol=1e-5)


@exercise("scaled_dot_product_attention", points=0.5)
def test_sdpa_permutation_equivariant(sub):
    x = randn(2, 6, 8, seed=13)
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    out, w = attend(sub, x, x, x)
    out_p, w_p = attend(sub, x[:, perm], x[:, perm], x[:, perm])
    close(out_p, out[:, perm], "attention without positions should be permutation-equivariant: "
          "shuffling the tokens should shuffle the outputs the same way", atol=1e-5)


@exercise("scaled_dot_product_attention", points=0.5)
def test_sdpa_any_leading_axes(sub):
    q, k, v = randn(4, 8, seed=14), randn(6, 8, seed=15), randn(6, 3, seed=16)
    out, w = attend(sub, q, k, v)
    ref_out, ref_w = ref_attention(q, k, v)
    close(out, ref_out, "plain 2-D inputs q [Lq, d], k [Lk, d], v [Lk, d_v] should work too: "
          "transpose only the last two axes of k (k.transpose(-2, -1))", atol=1e-5)
    q3, k3, v3 = randn(2, 4, 8, seed=17), randn(2, 6, 8, seed=18), randn(2, 6, 3, seed=19)
    out3, _ = attend(sub, q3, k3, v3)
    close(out3, ref_attention(q3, k3, v3)[0], "3-D inputs [B, L, d] should work too", atol=1e-5)


@exercise("scaled_dot_product_attention", points=0.5)
def test_sdpa_dropout_on_weights(sub):
    # values = identity, so the output *is* the (dropped-out) weight matrix
    q, k = randn(2, 16, 8, seed=20), randn(2, 16, 8, seed=21)
    v = torch.eye(16).expand(2, 16, 16).contiguous()
    out0, _ = attend(sub, q, k, v, dropout_p=0.0)
    close(out0, ref_attention(q, k, v)[0], "with dropout_p=0.0 nothing may be dropped", atol=1e-5)
    out, _ = attend(sub, q, k, v, dropout_p=0.5)
    ref_w = ref_attention(q, k, v)[1].float()
    dropped = out.abs() < 1e-7
    kept_ok = torch.isclose(out, 2 * ref_w, atol=1e-5, rtol=1e-4) | dropped
    frac = float(dropped.float().mean())
    check(bool(kept_ok.all()) and 0.3 < frac < 0.7,
          "with dropout_p=0.5 about half of the weights should be zeroed and the rest scaled by "
          "1/(1-p) = 2 (F.dropout(weights, p=dropout_p)), before multiplying by v")


# --- causal_mask ---------------------------------------------------------------------------

@exercise("causal_mask", points=1.5)
def test_causal_mask_values(sub):
    m = sub.call("causal_mask", 4)
    check(isinstance(m, torch.Tensor), "causal_mask should return a torch tensor")
    check(m.dtype == torch.bool, f"causal_mask should be boolean (True = allowed), got {m.dtype}")
    check(shape_of(m) == (4, 4), f"causal_mask(4) should be [4, 4], got {list(m.shape)}")
    want = torch.tensor([[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]], dtype=torch.bool)
    check(not bool(m[0, 1:].any()),
          "query 0 may not see keys 1, 2, 3 (the future): True belongs on and below the "
          "diagonal (lower triangle), not above it")
    check(bool(m.diagonal().all()), "every token must be able to see itself: the diagonal is True")
    close(m, want, "causal_mask(4) should be True exactly on and below the diagonal")


@exercise("causal_mask", points=0.5)
def test_causal_mask_sizes_and_device(sub):
    for n in (1, 7):
        m = sub.call("causal_mask", n)
        close(m, torch.ones(n, n, dtype=torch.bool).tril(),
              f"causal_mask({n}) should be an [{n}, {n}] lower-triangular boolean mask")
    m = sub.call("causal_mask", 3, device="cpu")
    close(m, torch.ones(3, 3, dtype=torch.bool).tril(), "causal_mask(3, device='cpu') should work")
    m = sub.call("causal_mask", 3, "cpu")
    close(m, torch.ones(3, 3, dtype=torch.bool).tril(),
          "causal_mask(3, 'cpu') should work (device is the second argument)")


@exercise("causal_mask", points=1)
def test_causal_mask_hides_the_future(sub):
    m = sub.call("causal_mask", 6)
    check(isinstance(m, torch.Tensor) and shape_of(m) == (6, 6), "causal_mask(6) should be [6, 6]")
    m = m.to(torch.bool)
    x = randn(2, 6, 8, seed=30)
    y = x.clone()
    y[:, 3:] = randn(2, 3, 8, seed=31) * 5
    out_x = F.scaled_dot_product_attention(x, x, x, attn_mask=m)
    out_y = F.scaled_dot_product_attention(y, y, y, attn_mask=m)
    close(out_y[:, :3], out_x[:, :3], "with your causal mask, changing a future token changed an "
          "earlier output: the mask lets a query see the future", atol=1e-5)
    no_nan(out_x, "with your causal mask some query sees no key at all (a token must see itself)")


# --- padding_mask --------------------------------------------------------------------------

TOKENS = torch.tensor([[5, 6, 7, 0, 0], [8, 9, 4, 2, 0], [3, 0, 0, 0, 0]])


@exercise("padding_mask", points=1)
def test_padding_mask_values(sub):
    m = sub.call("padding_mask", TOKENS, 0)
    check(isinstance(m, torch.Tensor), "padding_mask should return a torch tensor")
    check(m.dtype == torch.bool, f"padding_mask should be boolean (True = allowed), got {m.dtype}")
    check(shape_of(m) == (3, 1, 1, 5),
          f"padding_mask should have shape [B, 1, 1, L] = [3, 1, 1, 5] so that it broadcasts over "
          f"heads and queries, got {list(m.shape)}")
    want = (TOKENS != 0)[:, None, None, :]
    check(not bool(m[2, 0, 0, 1:].any()),
          "padding positions must be False (not allowed): is the mask inverted?")
    close(m, want, "padding_mask should be True exactly where tokens != pad_id")


@exercise("padding_mask", points=1)
def test_padding_mask_other_pad_id(sub):
    tokens = torch.tensor([[1, 2, 3, 3], [3, 3, 4, 3]])
    m = sub.call("padding_mask", tokens, 3)
    close(m, (tokens != 3)[:, None, None, :],
          "with pad_id=3 the mask should be False where tokens == 3: use the pad_id argument")


@exercise("padding_mask", points=1)
def test_padding_mask_hides_padded_keys(sub):
    m = sub.call("padding_mask", TOKENS, 0)
    check(isinstance(m, torch.Tensor) and m.dim() == 4,
          "padding_mask should be [B, 1, 1, L]: the head and query axes are missing")
    check(shape_of(m) == (3, 1, 1, 5),
          "padding_mask masks keys, so it should be [B, 1, 1, L] (not [B, 1, L, 1], which masks "
          "queries)")
    m = m.to(torch.bool)
    x = randn(3, 2, 5, 8, seed=40)                           # [B, H, L, d]
    y = x.clone()
    y[~(TOKENS != 0)[:, None, :, None].expand_as(x)] = 7.0   # change every padded token
    out_x = F.scaled_dot_product_attention(x, x, x, attn_mask=m)
    out_y = F.scaled_dot_product_attention(x, y, y, attn_mask=m)
    check(not torch.isnan(out_x).any(), "with your padding mask a query sees no key at all")
    close(out_y, out_x, "with your padding mask, changing a padded key changed the output: "
          "it should hide the padded keys (last axis), for every head and query", atol=1e-5)
