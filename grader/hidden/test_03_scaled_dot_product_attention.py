"""Hidden graders of lesson 03_scaled_dot_product_attention (torch).

Inputs are drawn afresh for every grading run (the grader's own torch.Generator, never the
student's seed); the oracle is PyTorch's F.scaled_dot_product_attention or a float64
formula. A wrong answer is compared with the outputs of the common mistakes (``suspect``):
the one it matches is the hint. The masking checks are relations between the student's
own masked and unmasked weights, so a mistake in the scale costs the scale's points only.
"""

import math

import torch

# what torch.broadcast_shapes imports the first time (sympy: ~0.7 s), imported with the
# tests: before a class's first submission, not during it
import torch.fx.experimental.symbolic_shapes  # noqa: F401
import torch.nn.functional as F

from grader.runtime.errors import SubmissionError
from grader.testkit.framework import (
    ON_DEVICE,
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
    "mask_inverted": "the mask is read the wrong way round (True taken as masked)",
    "mask_lost_with_dropout": "the mask is not applied when dropout_p > 0",
    "mask_fill_zero": "masked scores are set to 0 instead of -inf",
    "mask_after_softmax": "the mask zeroes weights after the softmax without renormalising",
    "masked_rows_nan": "a query with every key masked gets NaN",
    "masked_rows_uniform": "a query with every key masked gets uniform weights instead of zeros",
    "scale_by_d": "the scores are divided by d_k instead of √d_k",
    "never_scaled": "the scores are not divided by √d_k",
    "scale_by_lk": "the scores are divided by √(number of keys) instead of √d_k",
    "softmax_query_axis": "the softmax runs over the queries instead of the keys",
    "weights_times_keys": "the output is weights @ k instead of weights @ v",
    "absolute_axes": "the axes are counted from the front (only 4-D inputs work)",
    "dropout_ignored": "dropout_p is ignored",
    "dropout_no_rescale": "dropout zeroes weights without rescaling the rest by 1/(1-p)",
    "dropout_not_on_weights": "dropout applied to the output or to v instead of the weights",
    "causal_upper": "the causal mask is the upper triangle",
    "causal_no_diagonal": "the causal mask hides the diagonal (a token cannot see itself)",
    "causal_inverted": "the causal mask is inverted (True = masked)",
    "causal_float": "the causal mask is not boolean",
    "causal_device_ignored": "causal_mask ignores its device argument",
    "padding_inverted": "the padding mask is inverted (True at the padding)",
    "padding_masks_queries": "the padding mask is [B, 1, L, 1]: it masks queries, not keys",
    "padding_shape": "the padding mask lacks its broadcast axes ([B, L] or [B, 1, L])",
    "padding_pad_id_ignored": "the padding mask ignores pad_id",
    "padding_not_bool": "the padding mask is not boolean (0/1 numbers)",
    "sdpa_pair_order": "the function returns (weights, output) instead of (output, weights)",
    "mask_not_broadcast": "the mask works only at the scores' full shape: it is not broadcast",
}

#: What the lesson's text (both editions) asks of each exercise, each requirement with the
#: diagnoses that grade it: ids of MISTAKES, or the shared ``library_call`` and
#: ``changes_its_input`` (tests/grader/hidden/test_requirements.py: each one declared, and proven on this
#: exercise by a planted bug; every diagnosis answers some requirement).
REQUIREMENTS = {
    "scaled_dot_product_attention": {
        "q kᵀ over the last two axes (k.transpose(-2, -1)), for any number of leading (batch, "
        "head) axes": ("absolute_axes",),
        "scores divided by √d_k with d_k = q.size(-1) (the square root, not d_k)":
            ("scale_by_d", "never_scaled", "scale_by_lk"),
        "softmax over the keys (the last axis): each query's weights sum to 1": ("softmax_query_axis",),
        "a boolean mask, True = allowed: the scores where it is False are filled": ("mask_inverted",),
        "masked scores become -inf (or a very large negative number) before the softmax: masked "
        "weights exactly 0, the allowed ones still summing to 1": ("mask_fill_zero", "mask_after_softmax"),
        "the mask broadcasts to the scores [..., Lq, Lk] ([L, L], [B, 1, 1, Lk], …)": ("mask_not_broadcast",),
        "a fully masked row: zero weights and a zero output, never NaN":
            ("masked_rows_nan", "masked_rows_uniform"),
        "dropout_p > 0: dropout on the weights, F.dropout(weights, p=dropout_p), the mask still "
        "applied": ("dropout_ignored", "dropout_no_rescale", "dropout_not_on_weights", "mask_lost_with_dropout"),
        "returns (output [..., Lq, d_v], weights [..., Lq, Lk]) with output = weights @ v":
            ("weights_times_keys", "sdpa_pair_order"),
        "written by hand: F.scaled_dot_product_attention is not accepted": ("library_call",),
    },
    "causal_mask": {
        "a boolean tensor": ("causal_float",),
        "[L, L], True on and below the diagonal: query i may look at keys 0 … i":
            ("causal_upper", "causal_no_diagonal", "causal_inverted"),
        "created on `device`": ("causal_device_ignored",),
    },
    "padding_mask": {
        "a boolean tensor": ("padding_not_bool",),
        "True where the token is not padding": ("padding_inverted",),
        "padding is where tokens == pad_id (the argument)": ("padding_pad_id_ignored",),
        "[B, 1, 1, L]: about the keys, broadcast over every head and every query":
            ("padding_masks_queries", "padding_shape"),
    },
}

SDPA = ("torch.nn.functional.scaled_dot_product_attention",)


def randn(n, *shape, dtype=torch.float32):
    return torch.randn(*shape, generator=gen(n), dtype=dtype)


def ref_attention(q, k, v, mask=None, scale="sqrt", fill="-inf", clean=True, axis=-1, values=None):
    """float64 formula, with the common mistakes as options; fully masked rows -> zeros."""
    q, k, v = q.double(), k.double(), (v if values is None else values).double()
    d = {"sqrt": math.sqrt(q.size(-1)), "d": q.size(-1), "none": 1.0, "lk": math.sqrt(k.size(-2))}[scale]
    scores = q @ k.transpose(-2, -1) / d
    if mask is not None and fill != "after":
        scores = scores.masked_fill(~mask, {"-inf": float("-inf"), "zero": 0.0, "-1e9": -1e9}[fill])
    w = torch.softmax(scores, axis)
    if mask is not None and (clean or fill == "after"):
        w = w.masked_fill(~mask, 0.0)
    return w @ v, w


def sdpa_suspects(q, k, v, mask=None, part="weights"):
    """What the common mistakes return (weights or output) for these inputs."""
    i = 1 if part == "weights" else 0

    def s(mistake, message, **kw):
        return suspect(mistake, lambda: ref_attention(q, k, v, **{"mask": mask, **kw})[i], message)

    d, lk = q.size(-1), k.size(-2)
    found = [
        s("scale_by_d", msg("the scores are divided by d_k = {d}: divide by √d_k = √{d} (d_k = q.size(-1))", d=d), scale="d"),
        s("never_scaled", msg("the scores are not scaled: divide q kᵀ by √d_k = √{d}", d=d), scale="none"),
        s("scale_by_lk", msg("the scores are divided by √{lk}, the number of keys: divide by √d_k = √{d}, the width of q and k (q.size(-1))", lk=lk, d=d), scale="lk"),
        s("softmax_query_axis", msg("each key's weights sum to 1 over the queries: take the softmax over the last axis (the keys), dim=-1"), axis=-2),
    ]
    if mask is not None:
        found += [
            s("mask_inverted", msg("the weights go to the keys where the mask is False: True means allowed (fill the scores where ~mask)"), mask=~mask),
            s("mask_fill_zero", msg("masked scores are set to 0, which still gets weight: fill them with -inf (or a very large negative number) before the softmax"), fill="zero",
              clean=False),
            s("mask_after_softmax", msg("the mask zeroes weights after the softmax, so the allowed weights no longer sum to 1: fill masked scores with -inf before the softmax"),
              fill="after"),
            s("masked_rows_uniform", msg("a query whose keys are all masked gets uniform weights: its weights and output should be 0 (zero the masked weights after the softmax)"),
              fill="-1e9", clean=False),
            s("masked_rows_nan", msg("a query whose keys are all masked gets NaN (softmax of all -inf is 0/0): zero the masked weights after the softmax"), clean=False),
        ]
    if part == "output":
        found.append(s("weights_times_keys", msg("the output is weights @ k: the weights average the values, so return weights @ v"), values=k))
    return found


def expected_shapes(args, kwargs):
    """(weights shape, output shape, mask) for a call with these arguments: q, k, v are the
    first three, the mask the fourth or ``mask=``; shapes ``None`` if they do not broadcast."""
    q, k, v = args[:3]
    mask = kwargs.get("mask", args[3] if len(args) > 3 else None)
    try:
        w = tuple(torch.broadcast_shapes(q.shape[:-2], k.shape[:-2])) + (q.size(-2), k.size(-2))
        if isinstance(mask, torch.Tensor):
            w = tuple(torch.broadcast_shapes(mask.shape, w))
        out = tuple(torch.broadcast_shapes(w[:-2], v.shape[:-2])) + (q.size(-2), v.size(-1))
    except (RuntimeError, IndexError):
        return None, None, mask
    return w, out, mask


def runs_with_full_mask(sub, args, kwargs, shape):
    """Whether the call runs once its mask is expanded to the scores' full ``shape``."""
    mask = kwargs.get("mask", args[3] if len(args) > 3 else None)
    full = mask.expand(shape).clone()
    if "mask" in kwargs:
        kwargs = {**kwargs, "mask": full}
    else:
        args = (*args[:3], full, *args[4:])
    try:
        sub.call("scaled_dot_product_attention", *args, forbid=SDPA, **kwargs)
    except SubmissionError:
        return False
    return True


def attend(sub, *args, **kwargs):
    want_w, want_out, mask = expected_shapes(args, kwargs)
    try:
        result = sub.call("scaled_dot_product_attention", *args, forbid=SDPA, **kwargs)
    except SubmissionError as exc:
        if "Dimension out of range" in exc.message and args[0].dim() < 4:
            diagnose("absolute_axes", msg("with {ndim}-D inputs your code raised \"Dimension out of range\": count the axes from the end (k.transpose(-2, -1), q.size(-1)) so that any number of leading axes works", ndim=args[0].dim()))
        if (isinstance(mask, torch.Tensor) and want_w is not None and tuple(mask.shape) != want_w
                and runs_with_full_mask(sub, args, kwargs, want_w)):
            diagnose("mask_not_broadcast", msg("with a mask of shape {mask_shape} your code raised {error_type}, though it runs with a mask of the scores' full shape {scores_shape}: a mask only has to broadcast to [..., Lq, Lk], so apply it with masked_fill or torch.where, which broadcast (indexing scores[~mask] needs the full shape)", mask_shape=list(mask.shape), error_type=exc.exc_type, scores_shape=list(want_w)))
        raise
    check(isinstance(result, (tuple, list)) and len(result) == 2,
          msg("scaled_dot_product_attention should return a pair (output, weights)"))
    out, w = result
    check(isinstance(out, torch.Tensor) and isinstance(w, torch.Tensor),
          msg("scaled_dot_product_attention should return two tensors (output, weights)"))
    if want_w != want_out and shape_of(out) == want_w and shape_of(w) == want_out:
        diagnose("sdpa_pair_order", msg("scaled_dot_product_attention returns (weights, output): the first tensor is {weights_shape}, the weights' shape [..., Lq, Lk]; return the output [..., Lq, d_v] first, then the weights", weights_shape=list(want_w)))
    return out, w


def compare(sub, q, k, v, mask=None, what="", **kwargs):
    """Weights and output against the formula, a mistake named when one fits."""
    out, w = attend(sub, q, k, v, mask=mask, **kwargs)
    ref_out, ref_w = ref_attention(q, k, v, mask)
    close(w, ref_w, msg("{what}the weights should be softmax(q kᵀ / √d_k) over the keys", what=what),
          atol=1e-5, suspects=sdpa_suspects(q, k, v, mask))
    close(out, ref_out, msg("{what}the output should be weights @ v", what=what), atol=1e-5,
          suspects=sdpa_suspects(q, k, v, mask, part="output"))
    return out, w


def qkv(n, lead=(2, 3), lq=4, lk=5, d=8, dv=6):
    return randn(n, *lead, lq, d), randn(n + 1, *lead, lk, d), randn(n + 2, *lead, lk, dv)


def masked_like_own(sub, q, k, v, mask, name):
    """Masking checked against the student's own unmasked weights: w_masked must be w·mask
    renormalised over the allowed keys (whatever the scale), zero on fully masked rows; the
    output is compared when the unmasked output is right."""
    out0, w0 = attend(sub, q, k, v)
    out, w = attend(sub, q, k, v, mask=mask)
    try:
        want = w0.double() * mask
    except RuntimeError:
        check(False, msg("with {name} the weights should keep their shape {w0_shape}", name=name, w0_shape=list(w0.shape)))
    want = torch.nan_to_num(want / want.sum(-1, keepdim=True), nan=0.0)
    close(w, want, msg("with {name} (True = allowed) masked keys should get exactly zero weight and the allowed keys' weights should still sum to 1", name=name), atol=1e-5,
          suspects=sdpa_suspects(q, k, v, mask))
    if matches(out0, ref_attention(q, k, v)[0], atol=1e-5):
        close(out, ref_attention(q, k, v, mask)[0], msg("with {name} the output should be the masked weights @ v", name=name), atol=1e-5, suspects=sdpa_suspects(q, k, v, mask, part="output"))


# --- scaled_dot_product_attention ---------------------------------------------------------

@exercise("scaled_dot_product_attention", points=0.5)
def test_sdpa_shapes_and_rows(sub):
    q, k, v = qkv(1)
    out, w = attend(sub, q, k, v)
    check(shape_of(w) == (2, 3, 4, 5),
          msg("the weights should be [..., Lq, Lk] = [2, 3, 4, 5] for 4 queries and 5 keys, got {w_shape}", w_shape=list(w.shape)))
    close(w.sum(-1), torch.ones(2, 3, 4), msg("each query's weights should sum to 1 over the keys"),
          atol=1e-5, suspects=[suspect("softmax_query_axis", ref_attention(q, k, v, axis=-2)[1].sum(-1),
                                       msg("each key's weights sum to 1 over the queries: take the softmax over the last axis (the keys), dim=-1"))])
    if shape_of(out) == (2, 3, 4, 8):
        diagnose("weights_times_keys", msg("the output has the keys' width (8), not the values' (6): the weights average the values, so return weights @ v"))
    check(shape_of(out) == (2, 3, 4, 6), msg("the output should be [..., Lq, d_v] = [2, 3, 4, 6], got {out_shape}", out_shape=list(out.shape)))


@exercise("scaled_dot_product_attention", points=2)
def test_sdpa_matches_torch_without_mask(sub):
    q, k, v = qkv(4)
    out, _ = compare(sub, q, k, v, what=msg("without a mask "))
    close(out, F.scaled_dot_product_attention(q, k, v), msg("the output differs from torch's scaled_dot_product_attention"), atol=1e-5)


@exercise("scaled_dot_product_attention", points=1)
def test_sdpa_scale_is_square_root(sub):
    q, k, v = randn(7, 1, 3, 64), randn(8, 1, 4, 64), randn(9, 1, 4, 2)
    compare(sub, q, k, v, what=msg("with d_k = 64 (scale √64 = 8) "))


@exercise("scaled_dot_product_attention", points=2)
def test_sdpa_boolean_mask_true_is_allowed(sub):
    q, k, v = qkv(10)
    mask = torch.rand(2, 3, 4, 5, generator=gen(13)) > 0.4
    keep = int(torch.randint(5, (1,), generator=gen(14)))
    mask[..., keep] = True                                   # every row keeps a key
    mask[..., (keep + 1) % 5] = False                        # and loses one
    masked_like_own(sub, q, k, v, mask, msg("a boolean mask [B, H, Lq, Lk]"))


@exercise("scaled_dot_product_attention", points=1)
def test_sdpa_fully_masked_rows_are_zero(sub):
    q, k, v = qkv(15)
    mask = torch.rand(4, 5, generator=gen(18)) > 0.3
    keep = int(torch.randint(5, (1,), generator=gen(19)))
    mask[:, keep] = True
    row = int(torch.randint(4, (1,), generator=gen(20)))
    mask[(row + 1) % 4, (keep + 1) % 5] = False              # another query sees only some keys
    mask[row] = False                                        # this query may see nothing
    mask = mask.expand(2, 3, 4, 5).clone()                   # the scores' shape: broadcasting is judged apart
    out, w = attend(sub, q, k, v, mask=mask)
    ok = not torch.isnan(w).any() and not torch.isnan(out).any() and \
        bool((w[..., row, :] == 0).all()) and bool((out[..., row, :] == 0).all())
    if not ok:
        close(w, ref_attention(q, k, v, mask)[1], msg("query {row} may see no key: its weights and output should be 0 (never NaN)", row=row), atol=1e-5, suspects=sdpa_suspects(q, k, v, mask))
        check(False, msg("query {row} may see no key: its weights and output should be 0 (never NaN)", row=row))
    masked_like_own(sub, q, k, v, mask, msg("a query whose keys are all masked"))


@exercise("scaled_dot_product_attention", points=1)
def test_sdpa_masks_broadcast(sub):
    lengths = torch.randint(1, 6, (2,), generator=gen(21))
    pad = (torch.arange(5)[None, :] < lengths[:, None])[:, None, None, :]     # [B, 1, 1, Lk]
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    q, k, v = qkv(22, lq=5)
    for mask, name in [(pad, msg("a padding mask [B, 1, 1, Lk]")), (causal, msg("a causal mask [L, L]")),
                       (pad & causal, msg("a combined mask [B, 1, L, L]"))]:
        masked_like_own(sub, q, k, v, mask, msg("{name}, broadcast over heads and queries,", name=name))


@exercise("scaled_dot_product_attention", points=0.5)
def test_sdpa_causal_future_does_not_change_past(sub):
    x = randn(25, 1, 6, 8)
    causal = torch.ones(6, 6, dtype=torch.bool).tril()
    y = x.clone()
    y[:, 4:] = randn(26, 1, 2, 8) * 3                       # change the last two tokens
    out_x, _ = attend(sub, x, x, x, mask=causal)
    out_y, _ = attend(sub, y, y, y, mask=causal)
    close(out_y[:, :4], out_x[:, :4],
          msg("under a causal mask, changing a future token changed an earlier output: query i may only use keys j <= i"), atol=1e-5,
          suspects=[suspect("mask_inverted", ref_attention(y, y, y, ~causal)[0][:, :4],
                            msg("the weights go to the keys where the mask is False: True means allowed (fill the scores where ~mask)"))])


@exercise("scaled_dot_product_attention", points=0.5)
def test_sdpa_padded_key_never_matters(sub):
    x = randn(27, 1, 5, 8)
    keep = torch.tensor([True, True, True, False, False])
    y = x.clone()
    y[:, 3:] = randn(28, 1, 2, 8) * 10                      # change the padded keys and values
    out_x, _ = attend(sub, x, x, x, mask=keep)
    out_y, _ = attend(sub, x, y, y, mask=keep)
    close(out_y, out_x, msg("changing a masked (padded) key or value changed the output: masked keys must get exactly zero weight"), atol=1e-5,
          suspects=[suspect(m, ref_attention(x, y, y, **{"mask": keep, **kw})[0], msg) for m, kw, msg in (
              ("mask_inverted", {"mask": ~keep}, msg("the weights go to the keys where the mask is False: True means allowed (fill the scores where ~mask)")),
              ("mask_fill_zero", {"fill": "zero", "clean": False}, msg("masked scores are set to 0, which still gets weight: fill them with -inf before the softmax")))])


@exercise("scaled_dot_product_attention", points=0.5)
def test_sdpa_permutation_equivariant(sub):
    x = randn(29, 2, 6, 8)
    perm = torch.randperm(6, generator=gen(30))
    out, _ = attend(sub, x, x, x)
    out_p, _ = attend(sub, x[:, perm], x[:, perm], x[:, perm])
    close(out_p, out[:, perm], msg("attention without positions should be permutation-equivariant: shuffling the tokens should shuffle the outputs the same way"), atol=1e-5)


@exercise("scaled_dot_product_attention", points=0.5)
def test_sdpa_any_leading_axes(sub):
    q, k, v = randn(31, 4, 8), randn(32, 6, 8), randn(33, 6, 3)
    out4, w4 = attend(sub, q[None, None], k[None, None], v[None, None])
    for lead, what in ((0, msg("plain 2-D inputs q [Lq, d], k [Lk, d], v [Lk, d_v]")), (1, msg("3-D inputs [B, L, d]"))):
        shape = (1,) * lead
        out, w = attend(sub, q.view(*shape, 4, 8), k.view(*shape, 6, 8), v.view(*shape, 6, 3))
        close(w, w4.reshape(*shape, 4, 6), msg("with {what} the weights should be those of the same inputs given as [1, 1, L, d]", what=what), atol=1e-5)
        close(out, out4.reshape(*shape, 4, 3), msg("with {what} the output should be that of the same inputs given as [1, 1, L, d]", what=what), atol=1e-5)


@exercise("scaled_dot_product_attention", points=0.5)
def test_sdpa_dropout_on_weights(sub):
    # values = [identity | ones]: the output's first 16 columns *are* the (dropped-out)
    # weights, its last column their row sums; dropout on the output or on v breaks the sum
    q, k = randn(37, 2, 16, 8), randn(38, 2, 16, 8)
    v = torch.cat([torch.eye(16), torch.ones(16, 1)], dim=-1).expand(2, 16, 17).contiguous()
    out0, w0 = attend(sub, q, k, v, dropout_p=0.0)
    close(out0[..., :16], w0, msg("with dropout_p=0.0 nothing may be dropped: with v the identity the output should equal the weights"), atol=1e-5)
    out, _ = attend(sub, q, k, v, dropout_p=0.5)
    close(out[..., 16], out[..., :16].sum(-1),
          msg("dropout must zero attention weights, after the softmax and before they multiply v: here it zeroed the output (or v) instead, so each output mixes values with weights that were never dropped"), atol=1e-4, mistake="dropout_not_on_weights")
    out = out[..., :16]
    dropped = out.abs() < 1e-7
    frac = float(dropped.float().mean())
    check(frac > 0.05 or not torch.allclose(out, w0, atol=1e-5),
          msg("with dropout_p=0.5 no weight was dropped: apply F.dropout(weights, p=dropout_p) to the weights before multiplying by v"), mistake="dropout_ignored")
    kept = ~dropped
    check(not (0.3 < frac < 0.7 and torch.allclose(out[kept], w0[kept], atol=1e-5, rtol=1e-4)),
          msg("with dropout_p=0.5 the kept weights should be scaled by 1/(1-p) = 2 (F.dropout does it), so that their expected sum stays 1"), mistake="dropout_no_rescale")
    kept_ok = torch.isclose(out, 2 * w0, atol=1e-5, rtol=1e-4) | dropped
    check(bool(kept_ok.all()) and 0.3 < frac < 0.7,
          msg("with dropout_p=0.5 about half of the weights should be zeroed and the rest scaled by 1/(1-p) = 2, before multiplying by v"))
    causal = torch.ones(16, 16, dtype=torch.bool).tril()
    full = causal.expand(2, 16, 16).clone()                  # the scores' shape: broadcasting is judged apart
    _, without = attend(sub, q, k, v, mask=full)
    if without[..., ~causal].abs().gt(1e-7).any():
        return  # the mask itself is wrong: the mask checks charge that
    _, masked = attend(sub, q, k, v, mask=full, dropout_p=0.5)
    check(not masked[..., ~causal].abs().gt(1e-7).any(),
          msg("with a mask and dropout_p=0.5 a masked key got weight: the mask applies whether or not dropout is on (mask the scores, softmax, then dropout the weights)"),
          mistake="mask_lost_with_dropout")


# --- causal_mask ---------------------------------------------------------------------------

def causal_suspects(n):
    tri = torch.ones(n, n, dtype=torch.bool)
    return [
        suspect("causal_upper", tri.triu(), msg("True sits above the diagonal, so query 0 sees the whole future: True belongs on and below the diagonal (tril)")),
        suspect("causal_no_diagonal", tri.tril(-1), msg("the diagonal is False, so a token cannot see itself (and the first token sees nothing): keep the diagonal, tril() not tril(-1)")),
        suspect("causal_inverted", ~tri.tril(), msg("the mask is inverted: True means allowed, so it is True on and below the diagonal")),
    ]


def causal(sub, *args, **kwargs):
    m = sub.call("causal_mask", *args, **kwargs)
    check(isinstance(m, torch.Tensor), msg("causal_mask should return a torch tensor"))
    check(m.dtype == torch.bool, msg("causal_mask should be a boolean tensor (True = allowed), got {m_dtype}: masks select with True/False", m_dtype=m.dtype), mistake="causal_float")
    return m


@exercise("causal_mask", points=1.5)
def test_causal_mask_values(sub):
    n = int(torch.randint(4, 9, (1,), generator=gen(40)))
    close(causal(sub, n), torch.ones(n, n, dtype=torch.bool).tril(),
          msg("causal_mask({n}) should be True exactly on and below the diagonal", n=n),
          suspects=causal_suspects(n))


@exercise("causal_mask", points=0.5)
def test_causal_mask_device(sub):
    try:
        m = causal(sub, 3, device="cpu:0", forbid=(ON_DEVICE,))
        m2 = causal(sub, 3, "cpu:0", forbid=(ON_DEVICE,))
    except SubmissionError as exc:
        if exc.exc_type in ("TypeError", "DeviceMismatch"):
            diagnose("causal_device_ignored", msg("causal_mask(L, device) should build the mask on `device` (torch.ones(L, L, dtype=torch.bool, device=device)): on a GPU a model asks for its mask there"))
        raise
    for got in (m, m2):
        close(got, torch.ones(3, 3, dtype=torch.bool).tril(), msg("causal_mask(3, device) should be the [3, 3] lower-triangular mask"), suspects=causal_suspects(3))


@exercise("causal_mask", points=1)
def test_causal_mask_hides_the_future(sub):
    m = causal(sub, 6)
    check(shape_of(m) == (6, 6), msg("causal_mask(6) should be [6, 6]"))
    x = randn(41, 2, 6, 8)
    y = x.clone()
    y[:, 3:] = randn(42, 2, 3, 8) * 5
    out_x = F.scaled_dot_product_attention(x, x, x, attn_mask=m)
    out_y = F.scaled_dot_product_attention(y, y, y, attn_mask=m)
    close(out_y[:, :3], out_x[:, :3], msg("with your causal mask, changing a future token changed an earlier output: the mask lets a query see the future"), atol=1e-5)
    check(not torch.isnan(out_x).any(),
          msg("with your causal mask some query sees no key at all (a token must see itself)"))


# --- padding_mask --------------------------------------------------------------------------

def tokens(n, pad_id=0):
    """A random batch [4, 6], right-padded with pad_id (one row without padding)."""
    t = torch.randint(1, 9, (4, 6), generator=gen(n))
    t[t == pad_id] = pad_id + 1
    lengths = torch.randint(1, 6, (4,), generator=gen(n + 1))
    lengths[0] = 6
    t[torch.arange(6)[None, :] >= lengths[:, None]] = pad_id
    return t


def padding_suspects(t, pad_id):
    keep = t != pad_id
    return [
        suspect("padding_inverted", (~keep)[:, None, None, :], msg("the mask is True at the padding: True means a real token that may be attended to (tokens != pad_id)")),
        suspect("padding_masks_queries", keep[:, None, :, None], msg("the mask is [B, 1, L, 1], which masks queries: padding is hidden from the keys' side, [B, 1, 1, L]")),
        suspect("padding_shape", keep, msg("the mask is [B, L]: add the head and query axes, [B, 1, 1, L], so that it broadcasts over heads and queries")),
        suspect("padding_shape", keep[:, None, :], msg("the mask is [B, 1, L]: it needs both broadcast axes, [B, 1, 1, L] (heads, then queries)")),
        suspect("padding_pad_id_ignored", (t != 0)[:, None, None, :] if pad_id != 0 else None,
                msg("with pad_id={pad_id} the mask is False where tokens == 0: compare with the pad_id argument", pad_id=pad_id)),
    ]


def padding(sub, t, pad_id):
    m = sub.call("padding_mask", t, pad_id)
    check(isinstance(m, torch.Tensor), msg("padding_mask should return a torch tensor"))
    check(m.dtype == torch.bool, msg("padding_mask should be a boolean tensor (True = allowed), got {m_dtype}: keep the comparison tokens != pad_id as it is (a float mask would be added to the scores, not select keys)", m_dtype=m.dtype), mistake="padding_not_bool")
    close(m, (t != pad_id)[:, None, None, :], msg("padding_mask(tokens, {pad_id}) should be [B, 1, 1, L], True exactly where tokens != {pad_id}", pad_id=pad_id), suspects=padding_suspects(t, pad_id))
    return m


@exercise("padding_mask", points=1)
def test_padding_mask_values(sub):
    padding(sub, tokens(50), 0)


@exercise("padding_mask", points=1)
def test_padding_mask_other_pad_id(sub):
    padding(sub, tokens(52, pad_id=3), 3)


@exercise("padding_mask", points=1)
def test_padding_mask_hides_padded_keys(sub):
    t = tokens(54)
    m = padding(sub, t, 0)
    x = randn(56, 4, 2, 6, 8)                                # [B, H, L, d]
    y = x.clone()
    y[~(t != 0)[:, None, :, None].expand_as(x)] = 7.0        # change every padded token
    out_x = F.scaled_dot_product_attention(x, x, x, attn_mask=m)
    out_y = F.scaled_dot_product_attention(x, y, y, attn_mask=m)
    close(out_y, out_x, msg("with your padding mask, changing a padded key changed the output: it should hide the padded keys (last axis), for every head and query"), atol=1e-5)
