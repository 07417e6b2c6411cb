"""Hidden graders of lesson 04_multi_head_attention (torch).

Weights are injected by name (never the student's initialisation or seed), inputs are
drawn afresh for every grading run, and the oracle is ``nn.MultiheadAttention`` holding
the same weights, or the same computation written out in float64 (``mha_ref``) with the
common mistakes as options. A wrong output is compared with those mistakes' outputs
(``suspect``): the one it matches is the hint.

Partial credit follows the damage: each component (self-attention, per-head weights, the
scale, cross-attention, masks, gradients, dropout, bias) is judged against the oracle
written the way the student's own self-attention behaves (``dialect``), so one mistake
costs the points of the components it breaks, not of every check downstream of it.
"""

import itertools
import math

import torch

# what torch imports when these tests first differentiate (sympy: ~0.7 s), imported with the
# tests: before a class's first submission, not during it
import torch.fx.experimental.symbolic_shapes  # noqa: F401
import torch.nn as nn

from grader.runtime.errors import SubmissionError
from grader.testkit.framework import (
    ON_DEVICE,
    Failed,
    Tolerance,
    check,
    close,
    diagnose,
    exercise,
    gen,
    matches,
    msg,
    shape_of,
    suspect,
)

MISTAKES = {
    "scale_d_model": "the scores are divided by √d_model instead of √d_head",
    "split_no_transpose": "heads split by a reshape straight to [B, H, L, d] (no transpose)",
    "split_head_fast_axis": "heads split with the head as the fast axis ([B, L, d, H])",
    "merge_no_transpose": "heads merged by a reshape without transposing back",
    "merge_head_fast_axis": "heads merged in the wrong order ([B, L, d, H])",
    "no_out_proj": "the output projection is skipped",
    "kv_from_query": "keys and values projected from the query",
    "values_from_keys": "values projected from `key` instead of `value`",
    "v_with_k_proj": "values projected with k_proj instead of v_proj",
    "mask_ignored": "the mask is not passed to the attention",
    "attn_weights_averaged": "self.attn_weights averaged over the heads",
    "attn_weights_missing": "self.attn_weights is not stored",
    "dropout_in_eval": "dropout is applied in eval mode too",
    "dropout_never": "dropout is never applied",
    "bias_ignored": "bias=False is ignored",
    "mask_on_cpu": "a mask tensor made inside forward without device=",
    "proj_names": "the projections are not the submodules q_proj, k_proj, v_proj, out_proj",
    "returns_pair": "forward returns (output, weights) instead of the output alone",
}

#: What the lesson's text (both editions) asks of each exercise, each requirement with the
#: diagnoses that grade it: ids of MISTAKES, or the shared ``library_call`` and
#: ``changes_its_input`` (tests/grader/hidden/test_requirements.py: each one declared, and proven on this
#: exercise by a planted bug; every diagnosis answers some requirement).
REQUIREMENTS = {
    "MultiHeadAttention": {
        "submodules q_proj, k_proj, v_proj, out_proj, each nn.Linear(d_model, d_model): these "
        "exact names (weights are loaded by name)": ("proj_names",),
        "bias=bias given to every projection (bias=False: no biases)": ("bias_ignored",),
        "q = q_proj(query), k = k_proj(key), v = v_proj(value): keys and values from `key` and "
        "`value`, never from the query": ("kv_from_query", "values_from_keys", "v_with_k_proj"),
        "split into heads: view(B, L, H, d).transpose(1, 2) -> [B, H, L, d]":
            ("split_no_transpose", "split_head_fast_axis"),
        "each head's scores divided by √d (the width of a head), not √D": ("scale_d_model",),
        "the mask (True = allowed, broadcast to [B, H, Lq, Lk]) applies in every head": ("mask_ignored",),
        "dropout on the attention weights: p = self.dropout in training mode, 0.0 in eval mode":
            ("dropout_in_eval", "dropout_never"),
        "self.attn_weights holds the weights per head, [B, H, Lq, Lk]":
            ("attn_weights_averaged", "attn_weights_missing"),
        "merge: transpose(1, 2).reshape(B, Lq, D) (head 0's d features first), then out_proj":
            ("merge_no_transpose", "merge_head_fast_axis", "no_out_proj"),
        "forward returns the output [B, Lq, d_model] (the weights stay in self.attn_weights)":
            ("returns_pair",),
        "a tensor made inside forward is made on the inputs' device (device=query.device)":
            ("mask_on_cpu",),
        "nn.MultiheadAttention, F.multi_head_attention_forward and F.scaled_dot_product_attention "
        "are not accepted": ("library_call",),
    },
}

FORBID = ("torch.nn.functional.multi_head_attention_forward",
          "torch.nn.functional.scaled_dot_product_attention")
PROJ = ("q_proj", "k_proj", "v_proj", "out_proj")
EX = "MultiHeadAttention"
D, H = 32, 4
TOL: Tolerance = {"atol": 1e-4, "rtol": 1e-4}  # float32 against float64; every mistake is off by far more


def randn(n, *shape, scale=1.0):
    return torch.randn(*shape, generator=gen(n)) * scale


def make_weights(n, d_model, bias=True):
    w = {}
    for i, name in enumerate(PROJ):
        w[f"{name}.weight"] = randn(n * 10 + 2 * i, d_model, d_model, scale=1.5 / math.sqrt(d_model))
        if bias:
            w[f"{name}.bias"] = randn(n * 10 + 2 * i + 1, d_model, scale=0.2)
    return w


def torch_mha(d_model, n_head, weights, bias=True):
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


RIGHT = {"split": "right", "scale": "head", "merge": "right", "out_proj": True, "v_name": "v_proj"}
DIALECT_MISTAKES = [  # (option, value, mistake) in the order a hint names them
    ("v_name", "k_proj", "v_with_k_proj"),
    ("split", "flat", "split_no_transpose"), ("split", "fast", "split_head_fast_axis"),
    ("scale", "model", "scale_d_model"), ("merge", "flat", "merge_no_transpose"),
    ("merge", "fast", "merge_head_fast_axis"), ("out_proj", False, "no_out_proj"),
]
HINTS = {
    "v_with_k_proj": msg("the values go through k_proj: project them with v_proj"),
    "split_no_transpose": msg("the heads mix tokens: a reshape of [B, L, D] straight to [B, H, L, d] keeps the numbers in order; view as [B, L, H, d], then transpose(1, 2)"),
    "split_head_fast_axis": msg("each head holds every H-th feature: view as [B, L, H, d] (a head is a consecutive chunk of d features), not [B, L, d, H]"),
    "scale_d_model": msg("the scores are divided by √d_model: each head compares d_head-wide vectors, so divide by √d_head (√8 with d_model = 32 and 4 heads)"),
    "merge_no_transpose": msg("the merged output mixes positions: transpose [B, H, L, d] back to [B, L, H, d] before reshaping to [B, L, d_model]"),
    "merge_head_fast_axis": msg("the heads are merged feature by feature: transpose to [B, L, H, d] (head 0's d features, then head 1's), not [B, L, d, H]"),
    "no_out_proj": msg("the output projection is missing: return out_proj(merged heads)"),
}


def mha_ref(w, query, key, value, n_head, mask=None, split="right", scale="head", merge="right",
            out_proj=True, kv="kv", v_name="v_proj"):
    """Multi-head attention in float64 (differentiable), with the common mistakes as
    options; returns (output [B, Lq, D], weights [B, H, Lq, Lk])."""
    D_ = query.shape[-1]
    d = D_ // n_head

    def proj(x, name):
        y = x.double() @ w[f"{name}.weight"].double().T
        return y + w[f"{name}.bias"].double() if f"{name}.bias" in w else y

    k_in, v_in = {"kv": (key, value), "qq": (query, query), "kk": (key, key)}[kv]

    def heads(x):
        B, L, _ = x.shape
        if split == "flat":
            return x.reshape(B, n_head, L, d)
        if split == "fast":
            return x.view(B, L, d, n_head).permute(0, 3, 1, 2)
        return x.view(B, L, n_head, d).transpose(1, 2)

    q, k, v = heads(proj(query, "q_proj")), heads(proj(k_in, "k_proj")), heads(proj(v_in, v_name))
    s = q @ k.transpose(-2, -1) / math.sqrt(d if scale == "head" else D_)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    a = torch.softmax(s, -1)
    if mask is not None:
        a = a.masked_fill(~mask, 0.0)
    out = a @ v
    B, _, Lq, _ = out.shape
    if merge == "flat":
        out = out.reshape(B, Lq, D_)
    elif merge == "fast":
        out = out.permute(0, 2, 3, 1).reshape(B, Lq, D_)
    else:
        out = out.transpose(1, 2).reshape(B, Lq, D_)
    return (proj(out, "out_proj") if out_proj else out), a


class Started:
    """The student's module built with injected weights, in eval mode, and forward calls on
    it, all sent without waiting (a lazy batch): what the check computes before reading the
    results (its oracles) runs while the student's code does."""

    def __init__(self, sub, d_model, n_head, n, calls=(), attrs=(), grad=None, bias=True,
                 dropout=0.0, forbid=FORBID):
        kwargs = {"dropout": dropout} if dropout else {}
        if not bias:
            kwargs["bias"] = False
        self.weights = make_weights(n, d_model, bias=bias)
        with sub.batch(lazy=True) as b:
            self._made = b.new(EX, d_model, n_head, forbid=FORBID, **kwargs)
            m = self._made.handle
            self._inspected = b.inspect(m, values=False)  # names are all it reads
            self._steps = [b.method(m, "load_state_dict", self.weights, strict=False),
                           b.method(m, "eval")]
            self._outs = [b.method(m, "__call__", *args, forbid=forbid, **kw) for args, kw in calls]
            self._attrs = [b.get(m, attr) for attr in attrs]
            self._grad = grad and b.grad(m, *grad[0], grad_output=grad[1], forbid=FORBID)

    def module(self):
        """The module and its weights, once it is checked to take them by name."""
        m = self._made.value
        info = self._inspected.value
        check(info.get("is_module"), msg("MultiHeadAttention should be an nn.Module (class ...(nn.Module))"))
        params = info["parameters"]
        for name in PROJ:
            check(f"{name}.weight" in params,
                  msg("MultiHeadAttention needs a submodule `{name}` = nn.Linear(d_model, d_model): weights are loaded by these names", name=name), mistake="proj_names")
        for step in self._steps:
            step.value  # noqa: B018 - raises the step's error, if any
        return m, self.weights

    def outs(self):
        """The forward calls' outputs, in order, after :meth:`module`."""
        self.module()
        return [_one_tensor(out.value) for out in self._outs]

    def attr(self, i):
        """The ``i``-th attribute read after the calls, after :meth:`outs`."""
        self.outs()
        return self._attrs[i].value

    def grad(self):
        """``m.grad(...)`` of the ``grad`` asked for, after the calls."""
        self.outs()
        return self._grad.value


def build(sub, d_model, n_head, n, bias=True, dropout=0.0):
    """The student's module with injected weights, in eval mode."""
    return Started(sub, d_model, n_head, n, bias=bias, dropout=dropout).module()


def forward(m, *args, forbid=FORBID, **kwargs):
    return _one_tensor(m(*args, forbid=forbid, **kwargs))


def _one_tensor(out):
    if isinstance(out, (tuple, list)) and len(out) == 2 and isinstance(out[0], torch.Tensor):
        diagnose("returns_pair", msg("forward returns a pair, as nn.MultiheadAttention does: return the output [B, Lq, d_model] alone, and keep the weights in self.attn_weights"))
    check(isinstance(out, torch.Tensor),
          msg("forward should return one tensor [B, Lq, d_model] (keep the weights in self.attn_weights)"))
    return out


def forwards(sub, m, *calls, forbid=FORBID):
    """``[forward(m, *args, **kwargs) for args, kwargs in calls]``, the calls sent together."""
    with sub.batch() as b:
        outs = [b.method(m, "__call__", *args, forbid=forbid, **kwargs) for args, kwargs in calls]
    return [_one_tensor(out.value) for out in outs]  # in order: fails as the calls one by one


def attn_weights(w, shape):
    """Check ``w``, what forward stored in ``self.attn_weights``."""
    check(isinstance(w, torch.Tensor), msg("after a forward pass, self.attn_weights should hold the attention weights, a tensor [B, H, Lq, Lk] (store them in forward)"),
          mistake="attn_weights_missing")
    got = shape_of(w)
    check(not (got != shape and got == (shape[0], shape[2], shape[3])),
          msg("self.attn_weights should keep every head, [B, H, Lq, Lk]: store the weights before any mean over the heads"), mistake="attn_weights_averaged")
    check(got == shape, msg("self.attn_weights should be [B, H, Lq, Lk] = {shape}, got {got}", shape=list(shape), got=list(got or ())))
    return w


def dialect(m, w, n_head, x, out=None, right=None):
    """The options of ``mha_ref`` under which the student's self-attention on ``x`` is
    reproduced (the right ones first); ``RIGHT`` when nothing fits. ``right``: ``mha_ref``
    on ``x`` under ``RIGHT``, when the check has computed it already."""
    out = forward(m, x, x, x) if out is None else out
    for values in itertools.product(["right", "flat", "fast"], ["head", "model"],
                                    ["right", "flat", "fast"], [True, False], ["v_proj", "k_proj"]):
        options = dict(zip(("split", "scale", "merge", "out_proj", "v_name"), values, strict=True))
        want = (right if right is not None and options == RIGHT
                else mha_ref(w, x, x, x, n_head, **options))[0]
        if matches(out, want, **TOL):
            return options
    return dict(RIGHT)


def in_dialect(right, w, q, k, v, n_head, options, **kwargs):
    """``mha_ref`` under ``options``: ``right`` (computed ahead) when they are ``RIGHT``."""
    return right if options == RIGHT else mha_ref(w, q, k, v, n_head, **options, **kwargs)


def dialect_mistakes(options):
    return [m for key, value, m in DIALECT_MISTAKES if options[key] == value]


def self_attention_suspects(w, x, n_head, part=0):
    """One suspect per single mistake of the dialect options."""
    found = []
    for key, value, mistake in DIALECT_MISTAKES:
        options = dict(RIGHT, **{key: value})
        found.append(suspect(mistake, lambda o=options: mha_ref(w, x, x, x, n_head, **o)[part],
                             HINTS[mistake]))
    return found


def diagnose_dialect(options):
    """Name the first mistake of a dialect with several (no single suspect fits then)."""
    mistakes = dialect_mistakes(options)
    if mistakes:
        diagnose(mistakes[0], HINTS[mistakes[0]])


# --- structure ---------------------------------------------------------------------------

@exercise(EX, points=1)
def test_submodules_and_parameter_count(sub):
    x = randn(1, 2, 5, 24)
    with sub.batch(lazy=True) as b:
        made = b.new(EX, 24, 3, forbid=FORBID)
        inspected = b.inspect(made.handle)
        steps = [b.method(made.handle, "eval"), b.method(made.handle, "__call__", x, x, x, forbid=FORBID)]
    made.value  # noqa: B018 - raises the constructor's error, if any
    info = inspected.value
    check(info.get("is_module"), msg("MultiHeadAttention should be an nn.Module"))
    for name in PROJ:
        check(name in info["modules"],
              msg("MultiHeadAttention needs a submodule `{name}` = nn.Linear(d_model, d_model): weights are loaded by these names", name=name), mistake="proj_names")
        check(info["modules"].get(name, "").endswith("Linear"),
              msg("`{name}` should be an nn.Linear(d_model, d_model) submodule", name=name))
        check(shape_of(info["parameters"].get(f"{name}.weight")) == (24, 24),
              msg("{name}.weight should be [d_model, d_model] = [24, 24]", name=name))
        check(shape_of(info["parameters"].get(f"{name}.bias")) == (24,),
              msg("{name}.bias should be [d_model] = [24] (bias=True by default)", name=name))
    total = sum(int(p.numel()) for p in info["parameters"].values())
    check(total == 4 * 24 ** 2 + 4 * 24,
          msg("multi-head attention with D = 24 should have 4·D² + 4·D = 2400 parameters, found {total}", total=total))
    out = _one_tensor([step.value for step in steps][-1])
    check(shape_of(out) == (2, 5, 24), msg("the output should be [B, L, d_model] = [2, 5, 24], got {out_shape}", out_shape=shape_of(out)))


# --- numbers -------------------------------------------------------------------------------
# Each check sends the student's calls first and computes its oracles while they run.

@exercise(EX, points=1.5)
def test_self_attention_equals_torch(sub):
    x = randn(3, 2, 6, D)
    started = Started(sub, D, H, 2, [((x, x, x), {})])
    w = started.weights
    want = torch_mha(D, H, w)(x, x, x, need_weights=False)[0]
    m, _ = started.module()
    (out,) = started.outs()
    check(shape_of(out) == (2, 6, D), msg("the output should be [B, L, d_model] = [2, 6, {D}], got {out_shape}", D=D, out_shape=list(out.shape)))
    try:
        close(out, want, msg("with the same weights the self-attention output differs from nn.MultiheadAttention's"), **TOL, suspects=self_attention_suspects(w, x, H))
    except Failed as exc:
        if exc.mistake is None:  # several mistakes at once: name the first
            diagnose_dialect(dialect(m, w, H, x, out))
        raise


@exercise(EX, points=1)
def test_attn_weights_per_head(sub):
    x = randn(5, 2, 6, D)
    started = Started(sub, D, H, 4, [((x, x, x), {})], attrs=["attn_weights"])
    w = started.weights
    _, ref_w = torch_mha(D, H, w)(x, x, x, need_weights=True, average_attn_weights=False)
    got = attn_weights(started.attr(0), (2, H, 6, 6))
    close(got.sum(-1), torch.ones(2, H, 6), msg("each head's weights should sum to 1 over the keys"), **TOL)
    close(got, ref_w, msg("self.attn_weights differ from nn.MultiheadAttention's per-head weights (average_attn_weights=False)"), **TOL,
          suspects=[s for s in self_attention_suspects(w, x, H, part=1)
                    if s.mistake not in ("merge_no_transpose", "merge_head_fast_axis", "no_out_proj")])


@exercise(EX, points=1)
def test_scale_is_head_width(sub):
    x = randn(7, 1, 5, 64, scale=2.0)
    started = Started(sub, 64, 8, 6, [((x, x, x), {})])
    w = started.weights
    right = mha_ref(w, x, x, x, 8)
    m, _ = started.module()
    (out,) = started.outs()
    options = dict(dialect(m, w, 8, x, out, right), scale="head")
    close(out, in_dialect(right, w, x, x, x, 8, options)[0], msg("with d_model = 64 and 8 heads the scores of each head should be divided by √8"), **TOL,
          suspects=[suspect("scale_d_model", mha_ref(w, x, x, x, 8, **dict(options, scale="model"))[0],
                            msg("with d_model = 64 and 8 heads each head compares 8-wide vectors: divide the scores by √d_head = √8, not by √d_model = √64"))])


def cross_inputs(n, lq=3, lk=9):
    return randn(n, 2, lq, D), randn(n + 1, 2, lk, D), randn(n + 2, 2, lk, D)


def cross_suspects(w, q, k, v, options, part):
    return [
        suspect("kv_from_query", lambda: mha_ref(w, q, k, v, H, kv="qq", **options)[part],
                msg("keys and values are projected from the query: in cross-attention they come from the other sequence, k_proj(key) and v_proj(value)")),
        suspect("values_from_keys", lambda: mha_ref(w, q, k, v, H, kv="kk", **options)[part],
                msg("the values are projected from `key`: use v_proj(value) (keys and values may differ)")),
    ]


def start_cross(sub, n, x, q, k, v, attrs=()):
    """The module, its self-attention on ``x`` (its dialect) and cross-attention of ``q`` on
    ``k``, ``v`` sent; returns (started, output on ``x``, output and weights on ``q, k, v``
    under ``RIGHT``), the last two computed while the calls run."""
    started = Started(sub, D, H, n, [((x, x, x), {}), ((q, k, v), {})], attrs=attrs)
    w = started.weights
    return started, mha_ref(w, x, x, x, H), mha_ref(w, q, k, v, H)


@exercise(EX, points=1.5)
def test_cross_attention_weights(sub):
    x, (q, k, v) = randn(9, 2, 6, D), cross_inputs(10)
    started, right_x, right = start_cross(sub, 8, x, q, k, v, attrs=["attn_weights"])
    m, w = started.module()
    out_x, out = started.outs()
    options = dialect(m, w, H, x, out_x, right_x)
    got = started.attr(0)
    if isinstance(got, torch.Tensor) and shape_of(got) == (2, H, 3, 3):
        diagnose("kv_from_query", msg("with 3 queries and 9 keys the weights are [B, H, 3, 3]: keys and values must be projected from `key` and `value`, not from the query"))
    want = in_dialect(right, w, q, k, v, H, options)
    close(out, want[0], msg("cross-attention (3 queries attending to 9 keys and values) differs from nn.MultiheadAttention"), **TOL,
          suspects=cross_suspects(w, q, k, v, options, 0))
    if isinstance(got, torch.Tensor) and got.dim() == 4:
        close(got, want[1], msg("cross-attention weights (3 queries, 9 keys) differ from nn.MultiheadAttention's"), **TOL,
              suspects=cross_suspects(w, q, k, v, options, 1))


@exercise(EX, points=1.5)
def test_cross_attention_output(sub):
    x, (q, k, v) = randn(15, 2, 6, D), cross_inputs(16, lq=4, lk=7)
    started, right_x, right = start_cross(sub, 14, x, q, k, v)
    m, w = started.module()
    out_x, out = started.outs()
    options = dialect(m, w, H, x, out_x, right_x)
    check(shape_of(out) == (2, 4, D), msg("cross-attention with 4 queries and 7 keys should give [B, Lq, d_model] = [2, 4, {D}] (one row per query), got {out_shape}", D=D, out_shape=shape_of(out)))
    close(out, in_dialect(right, w, q, k, v, H, options)[0], msg("the cross-attention output (4 queries, 7 keys and values) differs from nn.MultiheadAttention's"), **TOL,
          suspects=cross_suspects(w, q, k, v, options, 0))


@exercise(EX, points=1.5)
def test_masks_equal_torch(sub):
    x = randn(21, 2, 6, D)
    causal = torch.ones(6, 6, dtype=torch.bool).tril()
    lengths = torch.randint(2, 6, (2,), generator=gen(22))
    pad = (torch.arange(6)[None, :] < lengths[:, None])[:, None, None, :]
    masks = [(causal, msg("a causal mask [L, L]")), (pad, msg("a padding mask [B, 1, 1, L]")),
             (causal & pad, msg("a combined causal & padding mask"))]
    started = Started(sub, D, H, 20, [((x, x, x), {})] + [((x, x, x), {"mask": mask}) for mask, _ in masks])
    w = started.weights
    right = mha_ref(w, x, x, x, H)
    rights = [mha_ref(w, x, x, x, H, mask=mask) for mask, _ in masks]
    m, _ = started.module()
    out_x, *outs = started.outs()
    options = dialect(m, w, H, x, out_x, right)
    unmasked = in_dialect(right, w, x, x, x, H, options)[0]
    for (mask, name), out, want in zip(masks, outs, rights, strict=True):
        ignored = [suspect("mask_ignored", unmasked, msg("the mask is ignored: pass it to the attention of every head (masked keys get zero weight)"))]
        close(out, in_dialect(want, w, x, x, x, H, options, mask=mask)[0],
              msg("with {name} (True = allowed) the output differs from nn.MultiheadAttention's", name=name),
              **TOL, suspects=ignored)


@exercise(EX, points=0.5)
def test_causal_and_permutation_properties(sub):
    x = randn(26, 2, 6, D)
    causal = torch.ones(6, 6, dtype=torch.bool).tril()
    y = x.clone()
    y[:, 4:] = randn(27, 2, 2, D, scale=3.0)
    perm = torch.randperm(6, generator=gen(28))
    xp = x[:, perm]
    started = Started(sub, D, H, 25, [((y, y, y), {"mask": causal}), ((x, x, x), {"mask": causal}),
                                      ((xp, xp, xp), {}), ((x, x, x), {})])
    changed, causal_out, shuffled, out = started.outs()
    close(changed[:, :4], causal_out[:, :4],
          msg("under a causal mask, changing a future token changed an earlier output"), **TOL)
    close(shuffled, out[:, perm],
          msg("without positional information, shuffling the tokens should shuffle the outputs the same way (attention must not depend on positions)"), **TOL)


@exercise(EX, points=0.5)
def test_runs_on_the_model_device(sub):
    x, mem = randn(30, 2, 5, D), randn(31, 2, 7, D)
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    started = Started(sub, D, H, 29, [((x, x, x), {}), ((x, mem, mem), {}), ((x, x, x), {"mask": causal})],
                      forbid=FORBID + (ON_DEVICE,))
    started.module()
    try:
        started.outs()
    except SubmissionError as exc:
        if exc.exc_type == "DeviceMismatch":
            diagnose("mask_on_cpu", msg("on a GPU this forward fails: {error}; make tensors inside forward on the input's device (device=query.device, torch.ones_like)", error=exc.message))
        raise


def reference_grads(w, q, k, v, g, options):
    """``mha_ref``'s gradients under ``options``: (inputs q, k, v; weights by name), float64."""
    xs = [t.double().clone().requires_grad_(True) for t in (q, k, v)]
    ws = {name: t.double().clone().requires_grad_(True) for name, t in w.items()}
    mha_ref(ws, xs[0], xs[1], xs[2], H, **options)[0].backward(g.double())
    return [t.grad for t in xs], {name: t.grad for name, t in ws.items()}


@exercise(EX, points=1)
def test_gradients_equal_torch(sub):
    x = randn(33, 2, 6, D)
    q, k, v = randn(34, 2, 5, D), randn(35, 2, 6, D), randn(36, 2, 6, D)
    g = randn(37, 2, 5, D)
    started = Started(sub, D, H, 32, [((x, x, x), {})], grad=((q, k, v), g))
    w = started.weights
    right, right_grads = mha_ref(w, x, x, x, H), reference_grads(w, q, k, v, g, RIGHT)
    m, _ = started.module()
    (out_x,) = started.outs()
    options = dialect(m, w, H, x, out_x, right)
    input_grads, weight_grads = right_grads if options == RIGHT else reference_grads(w, q, k, v, g, options)
    res = started.grad()
    for got, want, name in zip(res["input_grads"], input_grads, ("query", "key", "value"), strict=True):
        if name != "query" and got is not None and float(got.abs().max()) == 0.0:
            diagnose("kv_from_query", msg("the output does not depend on `{name}`: project the keys from `key` and the values from `value`, not from the query", name=name))
        close(got, want, msg("the gradient with respect to `{name}` differs from nn.MultiheadAttention's", name=name), atol=1e-4)
    grads = res["param_grads"]
    for name in ("q_proj.weight", "k_proj.weight", "v_proj.weight", "out_proj.weight"):
        got = grads.get(name)
        if name == "v_proj.weight" and (got is None or float(got.abs().max()) == 0.0):
            diagnose("v_with_k_proj", msg("v_proj is never used (its gradient is zero): project the values with v_proj, the keys with k_proj"))
        close(got, weight_grads[name], msg("the gradient of {name} differs from nn.MultiheadAttention's (is {module} used, and used once?)", name=name, module=name.split('.')[0]), atol=1e-4)


@exercise(EX, points=0.5)
def test_dropout_only_in_training(sub):
    x = randn(41, 2, 6, D)
    started = Started(sub, D, H, 40, [((x, x, x), {})], dropout=0.5)
    plain = Started(sub, D, H, 40, [((x, x, x), {})])  # its self-attention: the dialect
    w = started.weights
    right = mha_ref(w, x, x, x, H)
    m, _ = started.module()
    plain_m, _ = plain.module()
    (plain_out,) = plain.outs()
    want = in_dialect(right, w, x, x, x, H, dialect(plain_m, w, H, x, plain_out, right))[0]
    (out_eval,) = started.outs()
    if not matches(out_eval, want, **TOL):
        again = forward(m, x, x, x)
        check(matches(again, out_eval, atol=1e-6),
              msg("in eval mode the output changes from call to call: dropout must be off when self.training is False (model.eval())"), mistake="dropout_in_eval")
    close(out_eval, want, msg("in eval mode, with dropout=0.5, the output should equal the output without dropout"), **TOL)
    m.train()
    check(not matches(forward(m, x, x, x), out_eval, atol=1e-4),
          msg("with dropout=0.5 in training mode the attention weights should be dropped out (pass dropout_p=self.dropout to the attention when self.training)"), mistake="dropout_never")


@exercise(EX, points=0.5)
def test_bias_false(sub):
    x = randn(43, 2, 5, 24)
    with sub.batch(lazy=True) as b:
        made = b.new(EX, 24, 3, bias=False, forbid=FORBID)
        inspected = b.inspect(made.handle, values=False)
    started = Started(sub, 24, 3, 42, [((x, x, x), {})], bias=False)
    right = mha_ref(started.weights, x, x, x, 3)
    made.value  # noqa: B018 - raises the constructor's error, if any
    info = inspected.value
    biases = [k for k in info.get("parameters", {}) if k.endswith("bias")]
    check(not biases, msg("with bias=False the projections should have no bias (found {biases}): pass bias=bias to every nn.Linear", biases=', '.join(biases)), mistake="bias_ignored")
    total = sum(math.prod(shape) for shape in info["parameters"].values())
    check(total == 4 * 24 ** 2, msg("with bias=False there should be 4·D² = 2304 parameters, found {total}", total=total))
    m, w = started.module()
    (out,) = started.outs()
    close(out, in_dialect(right, w, x, x, x, 3, dialect(m, w, 3, x, out, right))[0],
          msg("with bias=False the output differs from nn.MultiheadAttention(bias=False)"), **TOL)
