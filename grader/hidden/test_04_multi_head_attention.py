"""Hidden graders of lesson 04_multi_head_attention (torch).

Weights are injected by name (never the student's initialisation or seed) and the oracle is
``nn.MultiheadAttention(batch_first=True)`` holding the same weights (its fused in_proj split
into q, k, v). The library's own attention is refused while the student's code runs.
"""

import math

import torch
import torch.nn as nn

from grader.framework import check, close, exercise, shape_of

FORBID = ("torch.nn.functional.multi_head_attention_forward",
          "torch.nn.functional.scaled_dot_product_attention")
PROJ = ("q_proj", "k_proj", "v_proj", "out_proj")
EX = "MultiHeadAttention"


def randn(*shape, seed=0, scale=1.0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * scale


def make_weights(d_model, bias=True, seed=0):
    w = {}
    for i, name in enumerate(PROJ):
        w[f"{name}.weight"] = randn(d_model, d_model, seed=seed + 2 * i, scale=1.5 / math.sqrt(d_model))
        if bias:
            w[f"{name}.bias"] = randn(d_model, seed=seed + 2 * i + 1, scale=0.2)
    return w


def oracle(d_model, n_head, weights, bias=True):
    """nn.MultiheadAttention holding ``weights`` (the global RNG is left untouched)."""
    with torch.random.fork_rng(devices=[]):
        ref = nn.MultiheadAttention(d_model, n_head, bias=bias, batch_first=True)
    with torch.no_grad():
        ref.in_proj_weight.copy_(torch.cat([weights[f"{p}.weight"] for p in PROJ[:3]]))
        ref.out_proj.weight.copy_(weights["out_proj.weight"])
        if bias:
            ref.in_proj_bias.copy_(torch.cat([weights[f"{p}.bias"] for p in PROJ[:3]]))
            ref.out_proj.bias.copy_(weights["out_proj.bias"])
    return ref.eval()


def run_oracle(ref, q, k, v, mask=None):
    """Output and per-head weights; ``mask`` uses the course's convention (True = allowed)."""
    with torch.no_grad():
        attn_mask = None
        if mask is not None:
            n_head = ref.num_heads
            attn_mask = ~mask.expand(q.size(0), n_head, q.size(1), k.size(1)).reshape(-1, q.size(1), k.size(1))
        out, w = ref(q, k, v, attn_mask=attn_mask, need_weights=True, average_attn_weights=False)
    return out, w


def build(sub, d_model, n_head, bias=True, dropout=0.0, seed=0):
    """The student's module with injected weights, in eval mode."""
    kwargs = {"dropout": dropout} if dropout else {}
    if not bias:
        kwargs["bias"] = False
    m = sub.new(EX, d_model, n_head, forbid=FORBID, **kwargs)
    info = m.inspect()
    check(info.get("is_module"), "MultiHeadAttention should be an nn.Module (class ...(nn.Module))")
    params = info["parameters"]
    for name in PROJ:
        check(f"{name}.weight" in params,
              f"MultiHeadAttention needs a submodule `{name}` = nn.Linear(d_model, d_model): "
              f"weights are loaded by these names")
    weights = make_weights(d_model, bias=bias, seed=seed)
    m.load_state_dict(weights, strict=False)
    m.eval()
    return m, weights


def forward(m, *args, **kwargs):
    out = m(*args, forbid=FORBID, **kwargs)
    check(isinstance(out, torch.Tensor),
          "forward should return one tensor [B, Lq, d_model] (keep the weights in self.attn_weights)")
    return out


def attn_weights(m, shape):
    w = m.get("attn_weights")
    check(isinstance(w, torch.Tensor), "after a forward pass, self.attn_weights should hold the "
          "attention weights (a tensor [B, H, Lq, Lk])")
    got = shape_of(w)
    if got != shape and got == (shape[0], shape[2], shape[3]):
        check(False, "self.attn_weights should keep every head: [B, H, Lq, Lk], not averaged over "
              "heads")
    check(got == shape, f"self.attn_weights should be [B, H, Lq, Lk] = {list(shape)}, got {list(got or ())}")
    return w


D, H = 32, 4
X = randn(2, 6, D, seed=100)
MEM_K = randn(2, 9, D, seed=101)
MEM_V = randn(2, 9, D, seed=102)


# --- structure ---------------------------------------------------------------------------

@exercise(EX, points=1)
def test_submodules_and_parameter_count(sub):
    m = sub.new(EX, 24, 3, forbid=FORBID)
    info = m.inspect()
    check(info.get("is_module"), "MultiHeadAttention should be an nn.Module")
    for name in PROJ:
        check(info["modules"].get(name, "").endswith("Linear"),
              f"`{name}` should be an nn.Linear(d_model, d_model) submodule")
        check(shape_of(info["parameters"].get(f"{name}.weight")) == (24, 24),
              f"{name}.weight should be [d_model, d_model] = [24, 24]")
        check(shape_of(info["parameters"].get(f"{name}.bias")) == (24,),
              f"{name}.bias should be [d_model] = [24] (bias=True by default)")
    total = sum(int(p.numel()) for p in info["parameters"].values())
    check(total == 4 * 24 ** 2 + 4 * 24,
          f"multi-head attention with d_model = 24 should have 4·d² + 4·d = 2400 parameters, "
          f"found {total}")


@exercise(EX, points=1)
def test_bias_false(sub):
    m = sub.new(EX, 24, 3, bias=False, forbid=FORBID)
    info = m.inspect()
    biases = [k for k in info.get("parameters", {}) if k.endswith("bias")]
    check(not biases, f"with bias=False the projections should have no bias (found {', '.join(biases)}): "
          f"pass bias=bias to every nn.Linear")
    total = sum(int(p.numel()) for p in info["parameters"].values())
    check(total == 4 * 24 ** 2, f"with bias=False there should be 4·d² = 2304 parameters, found {total}")
    m, w = build(sub, 24, 3, bias=False, seed=7)
    x = randn(2, 5, 24, seed=103)
    close(forward(m, x, x, x), run_oracle(oracle(24, 3, w, bias=False), x, x, x)[0],
          "with bias=False the output differs from nn.MultiheadAttention(bias=False)", atol=1e-5)


# --- numbers -------------------------------------------------------------------------------

@exercise(EX, points=2)
def test_self_attention_equals_torch(sub):
    m, w = build(sub, D, H)
    out = forward(m, X, X, X)
    check(shape_of(out) == (2, 6, D), f"the output should be [B, L, d_model] = [2, 6, {D}], got {list(out.shape)}")
    ref_out, _ = run_oracle(oracle(D, H, w), X, X, X)
    close(out, ref_out, "with the same weights the output differs from nn.MultiheadAttention: check "
          "the split into heads (view [B, L, H, d] then transpose), the scale √d_head, the merge "
          "(transpose back, then reshape) and the output projection", atol=1e-5)


@exercise(EX, points=1)
def test_attn_weights_per_head(sub):
    m, w = build(sub, D, H)
    forward(m, X, X, X)
    got = attn_weights(m, (2, H, 6, 6))
    _, ref_w = run_oracle(oracle(D, H, w), X, X, X)
    close(got.sum(-1), torch.ones(2, H, 6), "each head's weights should sum to 1 over the keys", atol=1e-5)
    close(got, ref_w, "self.attn_weights differ from nn.MultiheadAttention's per-head weights "
          "(average_attn_weights=False): heads in the wrong order, or the wrong scale?", atol=1e-5)


@exercise(EX, points=1)
def test_scale_is_head_width(sub):
    m, w = build(sub, 64, 8, seed=20)
    x = randn(1, 5, 64, seed=104, scale=2.0)
    out = forward(m, x, x, x)
    got = attn_weights(m, (1, 8, 5, 5))
    ref_out, ref_w = run_oracle(oracle(64, 8, w), x, x, x)
    close(got, ref_w, "with d_model = 64 and 8 heads each head compares 8-wide vectors: scale the "
          "scores by √d_head = √8, not by √d_model", atol=1e-5)
    close(out, ref_out, "with d_model = 64 and 8 heads the output differs from nn.MultiheadAttention",
          atol=1e-5)


@exercise(EX, points=1.5)
def test_cross_attention_equals_torch(sub):
    m, w = build(sub, D, H, seed=30)
    q = X[:, :3]
    out = forward(m, q, MEM_K, MEM_V)
    check(shape_of(out) == (2, 3, D), f"cross-attention with 3 queries and 9 keys should give "
          f"[B, Lq, d_model] = [2, 3, {D}], got {shape_of(out)}")
    attn_weights(m, (2, H, 3, 9))
    ref_out, ref_w = run_oracle(oracle(D, H, w), q, MEM_K, MEM_V)
    close(m.get("attn_weights"), ref_w, "cross-attention weights are wrong: keys must be projected "
          "from `key` (k_proj(key)), not from the query", atol=1e-5)
    close(out, ref_out, "cross-attention output is wrong: values must be projected from `value` "
          "(v_proj(value)), keys from `key`", atol=1e-5)


@exercise(EX, points=1.5)
def test_masks_equal_torch(sub):
    m, w = build(sub, D, H, seed=40)
    ref = oracle(D, H, w)
    causal = torch.ones(6, 6, dtype=torch.bool).tril()
    pad = torch.tensor([[True] * 6, [True] * 4 + [False] * 2])[:, None, None, :]
    for mask, name in [(causal, "a causal mask [L, L]"), (pad, "a padding mask [B, 1, 1, L]"),
                       (causal & pad, "a combined causal & padding mask")]:
        out = forward(m, X, X, X, mask=mask)
        ref_out, ref_w = run_oracle(ref, X, X, X, mask)
        got = attn_weights(m, (2, H, 6, 6))
        check(bool((got[~mask.expand(2, H, 6, 6)] == 0).all()),
              f"with {name} (True = allowed) masked keys should get zero weight")
        close(out, ref_out, f"with {name} the output differs from nn.MultiheadAttention", atol=1e-5)


@exercise(EX, points=0.5)
def test_causal_future_does_not_change_past(sub):
    m, _ = build(sub, D, H, seed=50)
    causal = torch.ones(6, 6, dtype=torch.bool).tril()
    y = X.clone()
    y[:, 4:] = randn(2, 2, D, seed=105, scale=3.0)
    close(forward(m, y, y, y, mask=causal)[:, :4], forward(m, X, X, X, mask=causal)[:, :4],
          "under a causal mask, changing a future token changed an earlier output", atol=1e-5)


@exercise(EX, points=0.5)
def test_permutation_equivariant(sub):
    m, _ = build(sub, D, H, seed=60)
    perm = torch.tensor([2, 5, 0, 3, 1, 4])
    out = forward(m, X, X, X)
    xp = X[:, perm]
    close(forward(m, xp, xp, xp), out[:, perm],
          "without positional information, shuffling the tokens should shuffle the outputs the "
          "same way (attention must not depend on positions)", atol=1e-5)


@exercise(EX, points=1)
def test_gradients_equal_torch(sub):
    m, w = build(sub, D, H, seed=70)
    k, v = randn(2, 6, D, seed=106), randn(2, 6, D, seed=107)
    g = randn(2, 6, D, seed=108)
    res = m.grad(X, k, v, grad_output=g, forbid=FORBID)
    ref = oracle(D, H, w)
    xs = [t.clone().requires_grad_(True) for t in (X, k, v)]
    ref(*xs, need_weights=False)[0].backward(g)
    for got, want, name in zip(res["input_grads"], xs, ("query", "key", "value")):
        close(got, want.grad, f"the gradient with respect to `{name}` differs from "
              f"nn.MultiheadAttention's", atol=1e-4)
    grads = res["param_grads"]
    wq, wk, wv = ref.in_proj_weight.grad.chunk(3)
    for name, want in (("q_proj.weight", wq), ("k_proj.weight", wk), ("v_proj.weight", wv),
                       ("out_proj.weight", ref.out_proj.weight.grad)):
        close(grads.get(name), want, f"the gradient of {name} differs from nn.MultiheadAttention's "
              f"(is {name.split('.')[0]} used, and used once?)", atol=1e-4)


@exercise(EX, points=1)
def test_dropout_only_in_training(sub):
    m, w = build(sub, D, H, dropout=0.5, seed=80)
    out_eval = forward(m, X, X, X)
    close(out_eval, run_oracle(oracle(D, H, w), X, X, X)[0],
          "in eval mode dropout must be off: the output should equal nn.MultiheadAttention's",
          atol=1e-5)
    m.train()
    out_train = forward(m, X, X, X)
    check(not torch.allclose(out_train, out_eval, atol=1e-4),
          "with dropout=0.5 in training mode the attention weights should be dropped out "
          "(pass dropout_p=self.dropout when self.training)")
