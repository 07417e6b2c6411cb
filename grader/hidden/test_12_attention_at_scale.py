"""Hidden graders of lesson 12_attention_at_scale (torch).

Every oracle is written out here in float64: the merge of two partial softmax statistics,
attention with a bottom-right causal mask and a key mask (its output and log-sum-exp), its
gradients by torch's autograd, LLaMA's repeat_kv, Mistral's sliding window and grouped-query
attention with RoPE (lesson 10's rotation of interleaved pairs). The tiled forward and backward
are also written tile by tile, with the common mistakes as options, so that a wrong answer is
named by the one mistaken formula it matches (``suspect``). The tile bound is graded by
watching every tensor the student's function creates (a ``TorchDispatchMode`` run next to the
submission): the largest may hold as many elements as the largest input or output, or one
``[B, H, block_q, block_k]`` tile. Weights are injected by name; inputs and sizes are drawn
afresh for every grading run.
"""

import functools
import inspect
import math

import torch

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
    suspect,
)

MISTAKES = {
    "merge_older_not_rescaled": "the older sum l_a is added without rescaling it to the new max",
    "merge_exp_flipped": "the sums are multiplied by exp(m − m_a) and exp(m − m_b): the exponent's sign is flipped",
    "merge_nan_when_empty": "two empty blocks (max −inf) give NaN: −inf − (−inf)",
    "flash_acc_not_rescaled": "the accumulated output is not rescaled when the running max grows",
    "flash_lse_before_last_block": "the log-sum-exp is taken before the last key block is merged in",
    "flash_causal_top_left": "the causal mask is aligned to the top left (query i sees keys j ≤ i) "
                             "instead of the bottom right (j ≤ i + Lk − Lq)",
    "flash_masked_row_nan": "a query with no allowed key gives NaN instead of output 0 and lse −inf",
    "flash_no_max_subtracted": "the scores are exponentiated without subtracting the running max "
                               "(exp overflows on large scores)",
    "flash_full_scores": "the whole [Lq, Lk] score matrix (or another tensor larger than a tile) is built",
    "bwd_tile_softmax": "the backward normalises each tile on its own (softmax of the tile) instead of "
                        "recomputing P = exp(S − lse) from the saved log-sum-exp",
    "bwd_delta_from_p": "D is computed per tile from P ∘ dP instead of once as rowsum(dO ∘ O)",
    "bwd_missing_scale": "dq or dk lacks the factor 1/√d",
    "bwd_masked_row_nan": "a query with no allowed key (lse −inf) gives NaN gradients",
    "bwd_full_scores": "the backward builds the whole [Lq, Lk] matrix (or another tensor larger than a tile)",
    "repeat_kv_tiled": "the key–value heads are tiled (x.repeat): output head h is input head h % H_kv, "
                       "not h // n_rep",
    "repeat_kv_wrong_axis": "the repeats are along another axis than the heads",
    "window_off_by_one": "the window holds window + 1 keys (i − window ≤ j) instead of window",
    "window_not_causal": "the window also sees the future (|i − j| < window)",
    "window_device_ignored": "sliding_window_mask ignores its device argument",
    "gqa_kv_d_model": "k_proj and v_proj project to d_model instead of n_kv_head · d_head",
    "gqa_no_value_error": "n_head not a multiple of n_kv_head is accepted",
    "gqa_group_order": "query head h attends with key–value head h % n_kv_head instead of h // (n_head // n_kv_head)",
    "gqa_rope_on_v": "the values are rotated too",
    "gqa_window_ignored": "the window argument is ignored",
    "gqa_key_mask_ignored": "the key mask is ignored",
    "gqa_nan_pad_rows": "a query with no allowed key (a left pad) gives NaN",
}

#: What the lesson's text (both editions) asks of each exercise, with the diagnoses that grade it.
REQUIREMENTS = {
    "merge_softmax_stats": {
        "m = max(m_a, m_b), l = l_a·exp(m_a − m) + l_b·exp(m_b − m), elementwise":
            ("merge_older_not_rescaled", "merge_exp_flipped"),
        "an empty block (−inf, 0) leaves the other unchanged; both empty give (−inf, 0), never NaN":
            ("merge_nan_when_empty",),
    },
    "flash_attention": {
        "out = softmax(q·kᵀ / √d) · v over the allowed keys, with the online softmax: the running "
        "output rescaled whenever the running max grows": ("flash_acc_not_rescaled",),
        "lse: the log-sum-exp of each query's allowed scores, all of its keys": ("flash_lse_before_last_block",),
        "causal aligned to the bottom right: query i sees keys j ≤ i + (Lk − Lq)": ("flash_causal_top_left",),
        "a query with no allowed key: out 0, lse −inf, no NaN": ("flash_masked_row_nan",),
        "the stable softmax: each tile's scores minus the running max (lesson 01)": ("flash_no_max_subtracted",),
        "never a tensor larger than the inputs and outputs or one [B, H, block_q, block_k] tile":
            ("flash_full_scores",),
        "written tile by tile: F.scaled_dot_product_attention refused (the course's rule on shortcuts)":
            ("library_call",),
    },
    "flash_attention_backward": {
        "P recomputed tile by tile as exp(S − lse) from the saved log-sum-exp": ("bwd_tile_softmax",),
        "D = rowsum(dO ∘ O), dS = P ∘ (dP − D)": ("bwd_delta_from_p",),
        "dq = dS·K / √d, dk = dSᵀ·Q / √d, dv = Pᵀ·dO": ("bwd_missing_scale",),
        "rows with no allowed key contribute nothing (no NaN)": ("bwd_masked_row_nan",),
        "the same bound on the tensors it creates as the forward": ("bwd_full_scores",),
        "written tile by tile: F.scaled_dot_product_attention refused (the course's rule on shortcuts)":
            ("library_call",),
    },
    "repeat_kv": {
        "output head h is input head h // n_rep (each key–value head n_rep times in a row)": ("repeat_kv_tiled",),
        "[B, H_kv, L, d] → [B, H_kv·n_rep, L, d]": ("repeat_kv_wrong_axis",),
    },
    "sliding_window_mask": {
        "True where i − window < j ≤ i: the last window positions, itself included": ("window_off_by_one",),
        "causal: never a later key": ("window_not_causal",),
        "made on the device it is given": ("window_device_ignored",),
    },
    "GroupedQueryAttention": {
        "k_proj and v_proj: d_model → n_kv_head·d_head, bias-free": ("gqa_kv_d_model",),
        "n_head % n_kv_head != 0 raises ValueError": ("gqa_no_value_error",),
        "query head h attends with key–value head h // (n_head // n_kv_head)": ("gqa_group_order",),
        "RoPE (lesson 10's apply_rope) on q and k, not on v": ("gqa_rope_on_v",),
        "window: the sliding window mask instead of the causal one": ("gqa_window_ignored",),
        "key_mask [B, L] True at real tokens hides the pads' keys": ("gqa_key_mask_ignored",),
        "masked scores filled with the dtype's finite minimum: no NaN on pad rows": ("gqa_nan_pad_rows",),
    },
}

# Each exercise is graded with the course's versions of the ones it builds on (grader.testkit.parts).
BUILDS_ON = {
    "flash_attention": ("merge_softmax_stats",),
    "GroupedQueryAttention": ("repeat_kv", "sliding_window_mask"),
}

F64 = torch.float64
ATOL = 1e-4  # float32 against float64; every mistake is off by far more
NEG = -math.inf
SDPA = ("torch.nn.functional.scaled_dot_product_attention",)  # the one-call version of attention


def randn(n, *shape, scale=1.0):
    return torch.randn(*shape, generator=gen(n)) * scale


def _int(n, low, high):
    return int(torch.randint(low, high, (1,), generator=gen(n)))


# --- float64 oracles ---------------------------------------------------------------------

def allowed_keys(B, Lq, Lk, causal=False, key_mask=None, top_left=False):
    """[B, 1, Lq, Lk] bool: causal aligned to the bottom right (or the top left), and the key mask."""
    allowed = torch.ones(Lq, Lk, dtype=torch.bool)
    if causal:
        allowed = allowed.tril(0 if top_left else Lk - Lq)
    allowed = allowed.expand(B, 1, Lq, Lk)
    if key_mask is not None:
        allowed = allowed & key_mask[:, None, None, :]
    return allowed


def ref_attention(q, k, v, causal=False, key_mask=None, top_left=False):
    """(out, lse) in float64; a query with no allowed key: out 0, lse −inf."""
    q, k, v = q.double(), k.double(), v.double()
    B, _, Lq, d = q.shape
    s = q @ k.transpose(-2, -1) / math.sqrt(d)
    s = s.masked_fill(~allowed_keys(B, Lq, k.shape[2], causal, key_mask, top_left), NEG)
    lse = torch.logsumexp(s, dim=-1)
    return torch.softmax(s, dim=-1).nan_to_num(0.0) @ v, lse


def _finite(m):
    return m.masked_fill(m == NEG, 0.0)


def ref_tiled(q, k, v, causal=False, key_mask=None, block_q=64, block_k=64, mistake=None):
    """The tiled forward in float64, written as the lesson's: (out, lse), with ``mistake``."""
    q, k, v = q.double(), k.double(), v.double()
    B, H, Lq, d = q.shape
    Lk = k.shape[2]
    top_left = mistake == "flash_causal_top_left"
    allowed = allowed_keys(B, Lq, Lk, causal, key_mask, top_left)
    outs, lses = [], []
    for i in range(0, Lq, block_q):
        q_i = q[:, :, i:i + block_q] / math.sqrt(d)
        m = torch.full(q_i.shape[:-1], NEG, dtype=F64)
        total = torch.zeros(q_i.shape[:-1], dtype=F64)
        acc = torch.zeros_like(q_i)
        lse_early = None
        for j in range(0, Lk, block_k):
            if j + block_k >= Lk:
                lse_early = m + torch.log(total)
            s = q_i @ k[:, :, j:j + block_k].transpose(-2, -1)
            s = s.masked_fill(~allowed[:, :, i:i + block_q, j:j + block_k], NEG)
            m_b = s.amax(-1)
            p = torch.exp(s - _finite(m_b)[..., None])
            m_new = torch.maximum(m, m_b)
            shift = _finite(m_new)
            total = total * torch.exp(m - shift) + p.sum(-1) * torch.exp(m_b - shift)
            pv = (p @ v[:, :, j:j + block_k]) * torch.exp(m_b - shift)[..., None]
            acc = acc + pv if mistake == "flash_acc_not_rescaled" else acc * torch.exp(m - shift)[..., None] + pv
            m = m_new
        outs.append(acc / total.clamp(min=1e-300)[..., None])
        early = mistake == "flash_lse_before_last_block"
        lses.append(lse_early if early and lse_early is not None else m + torch.log(total))
    return torch.cat(outs, 2), torch.cat(lses, 2)


def ref_grads(q, k, v, dout, causal=False, key_mask=None):
    """(dq, dk, dv) of (out · dout).sum() by torch's autograd, in float64."""
    q, k, v = (t.detach().double().requires_grad_() for t in (q, k, v))
    out, _ = ref_attention(q, k, v, causal, key_mask)
    return torch.autograd.grad((out * dout.double()).sum(), (q, k, v))


def ref_backward(q, k, v, out, lse, dout, causal=False, key_mask=None, block_q=64, block_k=64, *, mistake=None):
    """The tiled backward in float64 with ``mistake`` (the correct one equals ``ref_grads``)."""
    q, k, v, out, lse, dout = (t.double() for t in (q, k, v, out, lse, dout))
    B, H, Lq, d = q.shape
    Lk = k.shape[2]
    scale = 1 / math.sqrt(d)
    allowed = allowed_keys(B, Lq, Lk, causal, key_mask)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    delta = (dout * out).sum(-1)
    lse = lse.masked_fill(lse == NEG, math.inf)
    for j in range(0, Lk, block_k):
        k_j, v_j = k[:, :, j:j + block_k], v[:, :, j:j + block_k]
        for i in range(0, Lq, block_q):
            q_i, do_i = q[:, :, i:i + block_q], dout[:, :, i:i + block_q]
            s = (q_i @ k_j.transpose(-2, -1) * scale).masked_fill(~allowed[:, :, i:i + block_q, j:j + block_k], NEG)
            if mistake == "bwd_tile_softmax":
                p = torch.softmax(s, -1).nan_to_num(0.0)
            else:
                p = torch.exp(s - lse[:, :, i:i + block_q, None])
            dv[:, :, j:j + block_k] += p.transpose(-2, -1) @ do_i
            dp = do_i @ v_j.transpose(-2, -1)
            dl = (p * dp).sum(-1) if mistake == "bwd_delta_from_p" else delta[:, :, i:i + block_q]
            ds = p * (dp - dl[..., None])
            dq[:, :, i:i + block_q] += ds @ k_j * (1.0 if mistake == "bwd_missing_scale_dq" else scale)
            dk[:, :, j:j + block_k] += ds.transpose(-2, -1) @ q_i * (1.0 if mistake == "bwd_missing_scale_dk" else scale)
    return dq, dk, dv


# --- watching the tensors a call creates ------------------------------------------------

# Run next to the submission for the calls of one check (as framework.python_lines): every
# tensor an operation returns between the two calls is measured (views, factories, in-place
# results); requests are served one after another in one thread, so the count spans exactly
# the student's call and the transport of its arguments and results (no larger than they).
def tensor_watch_start():  # the course's code, run next to the submission
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    state = tensor_watch_start.__dict__["state"] = {"numel": 0, "shape": []}

    class Watch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
            out = func(*args, **(kwargs or {}))
            for t in tree_leaves(out):
                if isinstance(t, torch.Tensor) and t.numel() > state["numel"]:
                    state["numel"], state["shape"] = t.numel(), list(t.shape)
            return out

    state["mode"] = Watch()
    state["mode"].__enter__()


def tensor_watch_stop():
    state = tensor_watch_start.__dict__["state"]
    state["mode"].__exit__(None, None, None)
    return state["numel"], state["shape"]


@functools.cache
def _watch_source() -> str:
    return inspect.getsource(tensor_watch_start) + "\n\n" + inspect.getsource(tensor_watch_stop)


def largest_tensor(sub, request):
    """(elements, shape) of the largest tensor ``request()`` (one call of the submission) creates."""
    with sub.course_versions(_watch_source(), ("tensor_watch_start", "tensor_watch_stop")):
        sub.call("tensor_watch_start")
        try:
            request()
        finally:
            numel, shape = sub.call("tensor_watch_stop")
    return int(numel), shape


def check_tile_bound(sub, request, bound, what, mistake, B, H, Lq, Lk, bq, bk):
    numel, shape = largest_tensor(sub, request)
    if numel > bound:
        scores = msg("built the whole [Lq, Lk] score matrix") if Lq * Lk <= numel else msg("made a tensor larger than a tile")
        diagnose(mistake, msg("{what} {scores}: with Lq = {Lq}, Lk = {Lk}, block_q = {bq}, block_k = {bk} it made a tensor of shape {shape} ({numel} elements), but nothing may be larger than the inputs and outputs or one [B, H, block_q, block_k] = [{B}, {H}, {bq}, {bk}] tile: keep one tile of scores at a time, and build masks for the tile only", what=what, scores=scores, Lq=Lq, Lk=Lk, bq=bq, bk=bk, shape=shape, numel=numel, B=B, H=H))


# --- merge_softmax_stats -----------------------------------------------------------------

MERGE_HINTS = {
    "merge_older_not_rescaled": msg("l_a is added as it is: it was summed relative to m_a, so it must be rescaled to the new max too, l = l_a·exp(m_a − m) + l_b·exp(m_b − m)"),
    "merge_exp_flipped": msg("each sum is multiplied by exp(m − m_a) (or exp(m − m_b)): rescaling to a larger max shrinks it, l_a·exp(m_a − m) with m_a − m ≤ 0"),
}


def ref_merge(m_a, l_a, m_b, l_b, *, mistake=None):
    m_a, l_a, m_b, l_b = (t.double() for t in (m_a, l_a, m_b, l_b))
    m = torch.maximum(m_a, m_b)
    shift = _finite(m)
    if mistake == "merge_older_not_rescaled":
        return m, l_a + l_b * torch.exp(m_b - shift)
    if mistake == "merge_exp_flipped":
        return m, l_a * torch.exp(shift - m_a) + l_b * torch.exp(shift - m_b)
    return m, l_a * torch.exp(m_a - shift) + l_b * torch.exp(m_b - shift)


def _merged(sub, *stats):
    got = sub.call("merge_softmax_stats", *stats)
    check(isinstance(got, (tuple, list)) and len(got) == 2 and all(isinstance(t, torch.Tensor) for t in got),
          msg("merge_softmax_stats should return two tensors, (m, l)"))
    return got


def _merge_case(sub, stats, what):
    m, total = _merged(sub, *stats)
    want_m, want_l = ref_merge(*stats)
    close(m, want_m, msg("{what}: m should be max(m_a, m_b)", what=what), atol=ATOL)
    close(total, want_l, msg("{what}: l should be l_a·exp(m_a − m) + l_b·exp(m_b − m)", what=what), atol=ATOL, rtol=1e-4,
          suspects=[suspect(k, ref_merge(*stats, mistake=k)[1], hint) for k, hint in MERGE_HINTS.items()])


@exercise("merge_softmax_stats", points=1)
def test_merge_values(sub):
    R, C = _int(1, 2, 5), _int(2, 3, 7)
    m_a, m_b = randn(3, R, C, scale=3.0), randn(4, R, C, scale=3.0)
    l_a, l_b = 1 + 4 * torch.rand(R, C, generator=gen(5)), 1 + 4 * torch.rand(R, C, generator=gen(6))
    _merge_case(sub, (m_a, l_a, m_b, l_b), msg("two blocks' statistics [{R}, {C}]", R=R, C=C))
    _merge_case(sub, (m_a[:, :1], l_a[:, :1], m_b, l_b), msg("[{R}, 1] merged with [{R}, {C}] (shapes broadcast)", R=R, C=C))


@exercise("merge_softmax_stats", points=0.5)
def test_merge_one_block_empty(sub):
    n = _int(7, 3, 7)
    m_a, l_a = randn(8, n, scale=3.0), 1 + torch.rand(n, generator=gen(9))
    empty_m, empty_l = torch.full((n,), NEG), torch.zeros(n)
    for stats, what in (((m_a, l_a, empty_m, empty_l), msg("(m_a, l_a) merged with an empty block (−inf, 0)")),
                        ((empty_m, empty_l, m_a, l_a), msg("an empty block (−inf, 0) merged with (m_b, l_b)"))):
        m, total = _merged(sub, *stats)
        check(not (torch.isnan(m).any() or torch.isnan(total).any()), msg("{what} gave NaN: an empty block must leave the other unchanged", what=what))
        close(torch.stack([m, total]), torch.stack([m_a, l_a]), msg("{what} should leave the other block unchanged", what=what),
              atol=ATOL, suspects=[suspect(k, torch.stack(ref_merge(*stats, mistake=k)), hint)
                                   for k, hint in MERGE_HINTS.items()])


@exercise("merge_softmax_stats", points=0.5)
def test_merge_both_empty(sub):
    n = _int(10, 2, 6)
    m_a, l_a = randn(11, n, scale=3.0), 1 + torch.rand(n, generator=gen(12))
    m_a[0], l_a[0] = NEG, 0.0                                  # both empty at 0, one empty elsewhere
    m, total = _merged(sub, m_a, l_a, torch.full((n,), NEG), torch.zeros(n))
    one_empty_right = matches(m[1:], m_a[1:]) and matches(total[1:], l_a[1:], atol=ATOL)
    check(not torch.isnan(total[0]) and not torch.isnan(m[0]), msg("two empty blocks (max −inf, sum 0) gave NaN: −inf − (−inf) is NaN; where the merged max is −inf subtract 0 instead, so the result is (−inf, 0)"), mistake="merge_nan_when_empty" if one_empty_right else None)
    check(m[0] == NEG and total[0] == 0, msg("two empty blocks should give (−inf, 0), got ({m}, {total})", m=format(m[0], 'g'), total=format(total[0], 'g')))


# --- flash_attention ---------------------------------------------------------------------

FLASH_HINTS = {
    "flash_acc_not_rescaled": msg("the running output is not rescaled when the running max grows: before adding a tile's p·v, multiply the accumulator by exp(m_old − m_new), as the sum"),
    "flash_lse_before_last_block": msg("lse leaves out the last block of keys: take m + log(l) after every key block has been merged"),
    "flash_causal_top_left": msg("the causal mask is aligned to the top left: query i is position i + (Lk − Lq) and sees keys j ≤ i + (Lk − Lq) (one new query sees every key, as in lesson 11's cache step)"),
}


def flash_suspects(q, k, v, causal, key_mask, bq, bk, select):
    def candidate(mistake):
        return lambda: select(*ref_tiled(q, k, v, causal, key_mask, bq, bk, mistake))
    return [suspect(m, candidate(m), hint) for m, hint in FLASH_HINTS.items()
            if causal or m != "flash_causal_top_left"]


def _qkv(n, B, H, Lq, Lk, d, scale=1.0):
    return randn(n, B, H, Lq, d, scale=scale), randn(n + 1, B, H, Lk, d, scale=scale), randn(n + 2, B, H, Lk, d)


def _flash(sub, q, k, v, **kwargs):
    got = sub.call("flash_attention", q, k, v, forbid=SDPA, **kwargs)
    check(isinstance(got, (tuple, list)) and len(got) == 2 and all(isinstance(t, torch.Tensor) for t in got),
          msg("flash_attention should return two tensors, (out, lse)"))
    out, lse = got
    B, H, Lq, d = q.shape
    check(tuple(out.shape) == (B, H, Lq, d) and tuple(lse.shape) == (B, H, Lq),
          msg("flash_attention should return out [B, H, Lq, d] = {want_out} and lse [B, H, Lq] = {want_lse}, got {out_shape} and {lse_shape}", want_out=[B, H, Lq, d], want_lse=[B, H, Lq], out_shape=list(out.shape), lse_shape=list(lse.shape)))
    return out, lse


def flash_case(sub, q, k, v, what, causal=False, key_mask=None, bq=64, bk=64):
    out, lse = _flash(sub, q, k, v, causal=causal, key_mask=key_mask, block_q=bq, block_k=bk)
    if key_mask is not None or causal:
        no_key = ~allowed_keys(q.shape[0], q.shape[2], k.shape[2], causal, key_mask).any(-1)  # [B, 1, Lq]
        nan_rows = torch.isnan(out).any(-1) | torch.isnan(lse)
        if nan_rows.any() and no_key.expand_as(nan_rows)[nan_rows].all():
            diagnose("flash_masked_row_nan", msg("{what}: a query with no allowed key gave NaN: its l is 0 and its max −inf; give it out 0 and lse −inf (divide by l only where l > 0, and shift by 0 where the max is −inf)", what=what))
    want_out, want_lse = ref_attention(q, k, v, causal, key_mask)
    close(out, want_out, msg("{what}: out should be softmax(q·kᵀ/√d)·v over the allowed keys", what=what), atol=ATOL,
          suspects=flash_suspects(q, k, v, causal, key_mask, bq, bk, lambda o, _: o))
    close(lse, want_lse, msg("{what}: lse should be the log-sum-exp of each query's allowed scores", what=what), atol=ATOL,
          suspects=flash_suspects(q, k, v, causal, key_mask, bq, bk, lambda _, s: s))


def _blocks(n):
    return _int(n, 3, 7), _int(n + 1, 3, 7)


@exercise("flash_attention", points=1.5)
def test_flash_values(sub):
    bq, bk = _blocks(20)
    B, H, d = _int(22, 1, 3), _int(23, 1, 3), 2 * _int(24, 2, 5)
    Lq, Lk = 3 * bq + _int(25, 1, bq), 4 * bk + _int(26, 1, bk)            # not multiples of the blocks
    q, k, v = _qkv(27, B, H, Lq, Lk, d, scale=1.5)
    flash_case(sub, q, k, v, msg("q [{B}, {H}, {Lq}, {d}], k and v with {Lk} keys, block_q={bq}, block_k={bk}", B=B, H=H, Lq=Lq, d=d, Lk=Lk, bq=bq, bk=bk),
               bq=bq, bk=bk)
    q, k, v = _qkv(30, 1, 2, 5, 9, 4)
    flash_case(sub, q, k, v, msg("5 queries, 9 keys, with the default blocks (64)"))


@exercise("flash_attention", points=1)
def test_flash_causal_bottom_right(sub):
    bq, bk = _blocks(33)
    Lq = _int(35, 4, 10)
    Lk = Lq + _int(36, 3, 12)
    q, k, v = _qkv(37, 2, 2, Lq, Lk, 6)
    flash_case(sub, q, k, v, msg("causal, {Lq} new queries after {earlier} earlier keys ({Lk} keys), block_q={bq}, block_k={bk}", Lq=Lq, earlier=Lk - Lq, Lk=Lk, bq=bq, bk=bk), causal=True, bq=bq, bk=bk)
    L = _int(40, 7, 15)
    q, k, v = _qkv(41, 1, 2, L, L, 4)
    flash_case(sub, q, k, v, msg("causal, Lq = Lk = {L}, block_q={bq}, block_k={bk}", L=L, bq=bq, bk=bk), causal=True, bq=bq, bk=bk)


@exercise("flash_attention", points=1)
def test_flash_key_mask_and_empty_rows(sub):
    bq, bk = _blocks(44)
    B, Lk = 3, 3 * bk + _int(46, 1, bk)
    Lq = _int(47, 4, 9)
    key_mask = torch.rand(B, Lk, generator=gen(48)) > 0.4
    key_mask[0, 0] = True
    key_mask[1] = False                                            # a row with no key at all
    q, k, v = _qkv(49, B, 2, Lq, Lk, 4)
    flash_case(sub, q, k, v, msg("a key_mask [{B}, {Lk}] whose second row hides every key, block_q={bq}, block_k={bk}", B=B, Lk=Lk, bq=bq, bk=bk), key_mask=key_mask, bq=bq, bk=bk)
    Lq, Lk = Lk, Lq                                                # more queries than keys: the first see none
    q, k, v = _qkv(52, 1, 2, Lq, Lk, 4)
    flash_case(sub, q, k, v, msg("causal, {Lq} queries and {Lk} keys (the first {count} queries see no key), block_q={bq}, block_k={bk}", Lq=Lq, Lk=Lk, count=Lq - Lk, bq=bq, bk=bk), causal=True, bq=bq, bk=bk)


@exercise("flash_attention", points=0.5)
def test_flash_large_scores(sub):
    bq, bk = _blocks(55)
    Lq, Lk = 2 * bq + 1, 3 * bk + 2
    q, k, v = _qkv(57, 1, 2, Lq, Lk, 4, scale=12.0)                  # scores of hundreds: exp overflows float32
    q[:, :, 0], k[:, :, -1] = torch.tensor([12.0, 0, 0, 0]), torch.tensor([60.0, 0, 0, 0])  # query 0's max: the last key
    out, lse = _flash(sub, q, k, v, block_q=bq, block_k=bk)
    check(torch.isfinite(out).all() and torch.isfinite(lse).all(), msg("with scores of a few hundred (largest {largest}) the output has inf or NaN: exp overflows unless each tile's scores are shifted by the running max first (exp(s − m), lesson 01's stable softmax)", largest=format(float((q.double() @ k.double().transpose(-2, -1)).abs().max() / 2), '.0f')), mistake="flash_no_max_subtracted")
    want_out, want_lse = ref_attention(q, k, v)
    close(out, want_out, msg("with large scores out should still be softmax(q·kᵀ/√d)·v"), atol=ATOL)
    close(lse, want_lse, msg("with large scores lse should still be the log-sum-exp of the scores"), atol=1e-3, rtol=1e-5)


def bound_case(n, B=1, H=2, d=2):
    """Blocks drawn from ``n`` and q, k, v of 2 blocks plus a ragged end, for the tile-bound
    checks: ``(bq, bk, Lq, Lk, q, k, v)``. Every tile costs the watch of its operations, so
    the checks use few, and one sentence: with B = 1, H = d = 2 an [Lq, Lk] mask (Lq, Lk > 4)
    is still larger than the inputs, the outputs and a [B, H, block_q, block_k] tile."""
    bq, bk = _blocks(n)
    Lq, Lk = 2 * bq + _int(n + 2, 1, bq), 2 * bk + _int(n + 3, 1, bk)
    return (bq, bk, Lq, Lk, *_qkv(n + 4, B, H, Lq, Lk, d))


@exercise("flash_attention", points=1)
def test_flash_tile_bound(sub):
    B, H, d = 1, 2, 2
    bq, bk, Lq, Lk, q, k, v = bound_case(60, B, H, d)
    key_mask = torch.rand(B, Lk, generator=gen(65)) > 0.2
    key_mask[:, 0] = True
    bound = max(B * H * Lq * d, B * H * Lk * d, B * Lk, B * H * bq * bk)
    for causal, mask in ((False, None), (True, key_mask)):
        check_tile_bound(sub, lambda causal=causal, mask=mask: sub.call(
            "flash_attention", q, k, v, causal=causal, key_mask=mask, block_q=bq, block_k=bk, forbid=SDPA),
            bound, f"flash_attention{' (causal, with a key mask)' if causal else ''}", "flash_full_scores",
            B, H, Lq, Lk, bq, bk)


# --- flash_attention_backward ------------------------------------------------------------

BWD_HINTS = {
    "bwd_tile_softmax": msg("each tile's probabilities are normalised within the tile (a softmax of the tile): a tile holds only some of a query's keys, so recompute P = exp(S − lse) with the saved log-sum-exp of all of them"),
    "bwd_delta_from_p": msg("D is summed from P ∘ dP within each tile: it needs all of a row's keys, so compute it once, before the loop, as D = rowsum(dO ∘ O)"),
    "bwd_missing_scale": msg("dq or dk lacks the factor 1/√d: S = q·kᵀ/√d, so dq = dS·K/√d and dk = dSᵀ·Q/√d"),
}


def bwd_suspects(args, kwargs):
    def candidate(mistake):
        return lambda: torch.cat([g.flatten() for g in ref_backward(*args, **kwargs, mistake=mistake)])
    found = [suspect(m, candidate(m), hint) for m, hint in BWD_HINTS.items() if m != "bwd_missing_scale"]
    return found + [suspect("bwd_missing_scale", candidate(m), BWD_HINTS["bwd_missing_scale"])
                    for m in ("bwd_missing_scale_dq", "bwd_missing_scale_dk")]


def backward_case(sub, q, k, v, what, causal=False, key_mask=None, bq=64, bk=64, n=0):
    out, lse = (t.float() for t in ref_attention(q, k, v, causal, key_mask))    # the course's forward
    dout = randn(n, *out.shape)
    got = sub.call("flash_attention_backward", q, k, v, out, lse, dout, causal=causal, key_mask=key_mask,
                   block_q=bq, block_k=bk, forbid=SDPA)
    check(isinstance(got, (tuple, list)) and len(got) == 3 and all(isinstance(t, torch.Tensor) for t in got),
          msg("flash_attention_backward should return three tensors, (dq, dk, dv)"))
    for name, g, x in zip(("dq", "dk", "dv"), got, (q, k, v), strict=True):
        check(tuple(g.shape) == tuple(x.shape), msg("{name} should have the shape of {tensor}, {x_shape}, got {g_shape}", name=name, tensor=name[1:], x_shape=list(x.shape), g_shape=list(g.shape)))
    if any(torch.isnan(g).any() for g in got):
        no_key = ~allowed_keys(q.shape[0], q.shape[2], k.shape[2], causal, key_mask).any(-1)
        check(not no_key.any(), msg("{what}: a query with no allowed key (lse −inf) gave NaN gradients: exp(S − lse) is exp(−inf + inf) there; such a row contributes nothing (replace its lse by +inf, or skip it)", what=what), mistake="bwd_masked_row_nan")
    want = torch.cat([g.flatten() for g in ref_grads(q, k, v, dout, causal, key_mask)])
    args = (q, k, v, out, lse, dout)
    kwargs = {"causal": causal, "key_mask": key_mask, "block_q": bq, "block_k": bk}
    close(torch.cat([g.flatten() for g in got]), want, msg("{what}: (dq, dk, dv) should be the gradients of (out · dout).sum() (torch's autograd on the plain formula)", what=what), atol=ATOL, rtol=1e-4,
          suspects=bwd_suspects(args, kwargs))


@exercise("flash_attention_backward", points=1.5)
def test_backward_values(sub):
    bq, bk = _blocks(70)
    B, H, d = _int(72, 1, 3), 2, 2 * _int(73, 2, 4)
    Lq, Lk = 2 * bq + _int(74, 1, bq), 3 * bk + _int(75, 1, bk)
    q, k, v = _qkv(76, B, H, Lq, Lk, d, scale=1.5)
    backward_case(sub, q, k, v, msg("q [{B}, {H}, {Lq}, {d}], {Lk} keys, block_q={bq}, block_k={bk}", B=B, H=H, Lq=Lq, d=d, Lk=Lk, bq=bq, bk=bk),
                  bq=bq, bk=bk, n=79)


@exercise("flash_attention_backward", points=1)
def test_backward_causal_and_key_mask(sub):
    bq, bk = _blocks(80)
    Lq = _int(82, 4, 9)
    Lk = Lq + 2 * bk + _int(83, 1, bk)
    key_mask = torch.rand(2, Lk, generator=gen(84)) > 0.3
    key_mask[:, 0] = True                                          # every query sees at least the first key
    q, k, v = _qkv(85, 2, 2, Lq, Lk, 4)
    backward_case(sub, q, k, v, msg("causal, {Lq} queries after {earlier} earlier keys, with a key mask, block_q={bq}, block_k={bk}", Lq=Lq, earlier=Lk - Lq, bq=bq, bk=bk), causal=True, key_mask=key_mask, bq=bq, bk=bk, n=88)


@exercise("flash_attention_backward", points=0.5)
def test_backward_empty_rows(sub):
    bq, bk = _blocks(90)
    Lk = 2 * bk + _int(92, 1, bk)
    key_mask = torch.rand(2, Lk, generator=gen(93)) > 0.3
    key_mask[0, 0], key_mask[1] = True, False                      # the second row has no key at all
    q, k, v = _qkv(94, 2, 2, _int(97, 3, 8), Lk, 4)
    backward_case(sub, q, k, v, msg("a key_mask whose second row hides every key, block_q={bq}, block_k={bk}", bq=bq, bk=bk),
                  key_mask=key_mask, bq=bq, bk=bk, n=98)


@exercise("flash_attention_backward", points=1)
def test_backward_tile_bound(sub):
    B, H, d = 1, 2, 2
    bq, bk, Lq, Lk, q, k, v = bound_case(100, B, H, d)
    out, lse = (t.float() for t in ref_attention(q, k, v, True))
    dout = randn(107, *out.shape)
    bound = max(B * H * Lq * d, B * H * Lk * d, B * H * Lq, B * H * bq * bk)
    check_tile_bound(sub, lambda: sub.call("flash_attention_backward", q, k, v, out, lse, dout, causal=True,
                                           block_q=bq, block_k=bk, forbid=SDPA),
                     bound, "flash_attention_backward", "bwd_full_scores", B, H, Lq, Lk, bq, bk)


# --- repeat_kv ---------------------------------------------------------------------------

REPEAT_HINTS = {
    "repeat_kv_tiled": msg("the heads are tiled (x.repeat(1, n_rep, 1, 1) gives heads 0, 1, 0, 1, …): each key–value head is repeated n_rep times in a row, 0, 0, 1, 1, … (output head h is input head h // n_rep, LLaMA's repeat_kv)"),
    "repeat_kv_wrong_axis": msg("the copies are made along another axis: repeat the heads, axis 1, [B, H_kv, L, d] → [B, H_kv·n_rep, L, d]"),
}


def ref_repeat(x, n_rep, mistake=None):
    if mistake == "repeat_kv_tiled":
        return x.repeat(1, n_rep, 1, 1)
    if mistake == "repeat_kv_wrong_axis":
        return x.repeat_interleave(n_rep, dim=2)
    return x.repeat_interleave(n_rep, dim=1)


def repeat_case(sub, x, n_rep):
    close(sub.call("repeat_kv", x, n_rep), ref_repeat(x, n_rep), msg("repeat_kv of [B, H_kv, L, d] = {x_shape} with n_rep={n_rep}: output head h should be input head h // {n_rep}", x_shape=list(x.shape), n_rep=n_rep), atol=0,
          suspects=[suspect(m, ref_repeat(x, n_rep, m), hint) for m, hint in REPEAT_HINTS.items()])


@exercise("repeat_kv", points=1)
def test_repeat_kv_order(sub):
    B, Hkv, L, d = _int(110, 1, 3), _int(111, 2, 4), _int(112, 2, 6), 4
    repeat_case(sub, randn(113, B, Hkv, L, d), _int(114, 2, 4))


@exercise("repeat_kv", points=0.5)
def test_repeat_kv_sizes(sub):
    x = randn(115, 2, 1, _int(116, 2, 6), 6)
    repeat_case(sub, x, _int(117, 2, 5))                           # one key–value head: multi-query
    x = randn(118, 1, 3, 4, 2)
    repeat_case(sub, x, 1)


# --- sliding_window_mask ----------------------------------------------------------------

WINDOW_HINTS = {
    "window_off_by_one": msg("the window holds window + 1 keys: query i sees j with i − window < j ≤ i, the last `window` positions including itself"),
    "window_not_causal": msg("the window also sees later keys: it is causal, i − window < j ≤ i, never j > i"),
}


def ref_window(L, window, mistake=None):
    i = torch.arange(L)
    behind = i[:, None] - i[None, :]
    if mistake == "window_not_causal":
        return behind.abs() < window
    return (behind >= 0) & (behind <= window if mistake == "window_off_by_one" else behind < window)


@exercise("sliding_window_mask", points=1)
def test_window_values(sub):
    L = _int(120, 6, 13)
    for window in (_int(121, 2, 5), 1, L + 1):
        got = sub.call("sliding_window_mask", L, window)
        check(isinstance(got, torch.Tensor) and got.dtype == torch.bool,
              msg("sliding_window_mask should return a bool tensor (True where attention is allowed)"))
        close(got, ref_window(L, window), msg("sliding_window_mask({L}, {window}): query i may attend key j when i − {window} < j ≤ i", L=L, window=window), suspects=[suspect(m, ref_window(L, window, m), hint)
                                                     for m, hint in WINDOW_HINTS.items()])


@exercise("sliding_window_mask", points=0.5)
def test_window_device(sub):
    try:
        got = sub.call("sliding_window_mask", 5, 2, device="cpu:0", forbid=(ON_DEVICE,))
    except SubmissionError as exc:
        if exc.exc_type in ("TypeError", "DeviceMismatch"):
            diagnose("window_device_ignored", msg("sliding_window_mask(L, window, device) should build the mask on `device` (torch.arange(L, device=device)): on a GPU a model asks for its mask there"))
        raise
    close(got, ref_window(5, 2), msg("sliding_window_mask(5, 2, device) should be the window-2 mask"),
          suspects=[suspect(m, ref_window(5, 2, m), hint) for m, hint in WINDOW_HINTS.items()])


# --- GroupedQueryAttention ---------------------------------------------------------------

D_MODEL = 16
GQA_HINTS = {
    "gqa_group_order": msg("query head h attends with key–value head h % n_kv_head: the groups are consecutive, query head h uses key–value head h // (n_head // n_kv_head) (repeat_kv)"),
    "gqa_rope_on_v": msg("the values are rotated too: RoPE turns q and k only"),
    "gqa_window_ignored": msg("the window is ignored: with a window, query i sees only keys i − window < j ≤ i (sliding_window_mask)"),
    "gqa_key_mask_ignored": msg("the key mask is ignored: a pad's key must not be attended to, allowed & key_mask[:, None, None, :]"),
}


def rotate(x, cos, sin):
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1).flatten(-2)


def tables(L, d_head, offset=None):
    """cos, sin [L, d_head / 2] in float64 (per-row tables [B, 1, L, d/2] when ``offset`` [B, 1] is given)."""
    theta = 10000.0 ** (-torch.arange(0, d_head, 2, dtype=F64) / d_head)
    pos = torch.arange(L, dtype=F64)
    if offset is not None:
        pos = (pos[None] - offset).clamp(min=0)[:, None]
    angles = pos[..., None] * theta
    return angles.cos(), angles.sin()


def ref_gqa(p, x, cos, sin, n_head, n_kv, window=None, key_mask=None, mistake=None):
    x, cos, sin = x.double(), cos.double(), sin.double()
    B, L, D = x.shape
    dh = D // n_head

    def heads(name, n):
        return (x @ p[f"{name}.weight"].double().T).reshape(B, L, n, dh).transpose(1, 2)

    q, k, v = heads("q_proj", n_head), heads("k_proj", n_kv), heads("v_proj", n_kv)
    q, k = rotate(q, cos, sin), rotate(k, cos, sin)
    if mistake == "gqa_rope_on_v":
        v = rotate(v, cos, sin)
    rep = n_head // n_kv
    k, v = ((t.repeat(1, rep, 1, 1) if mistake == "gqa_group_order" else t.repeat_interleave(rep, 1)) for t in (k, v))
    scores = q @ k.transpose(-2, -1) / math.sqrt(dh)
    allowed = ref_window(L, window) if window and mistake != "gqa_window_ignored" else torch.ones(L, L).tril().bool()
    if key_mask is not None and mistake != "gqa_key_mask_ignored":
        allowed = allowed & key_mask[:, None, None, :]
    weights = torch.softmax(scores.masked_fill(~allowed, NEG), -1).nan_to_num(0.0)
    return ((weights @ v).transpose(1, 2).reshape(B, L, D)) @ p["out_proj.weight"].double().T


def gqa_weights(n, n_head, n_kv):
    dh = D_MODEL // n_head
    return {"q_proj.weight": randn(n, D_MODEL, D_MODEL, scale=0.5),
            "k_proj.weight": randn(n + 1, n_kv * dh, D_MODEL, scale=0.5),
            "v_proj.weight": randn(n + 2, n_kv * dh, D_MODEL, scale=0.5),
            "out_proj.weight": randn(n + 3, D_MODEL, D_MODEL, scale=0.5)}


def _gqa(sub, n_head, n_kv, weights, window=None):
    m = sub.new("GroupedQueryAttention", D_MODEL, n_head, n_kv, window=window)
    shapes = m.state_shapes()
    check(isinstance(shapes, dict), msg("GroupedQueryAttention should be an nn.Module"))
    if shapes.get("k_proj.weight") == [D_MODEL, D_MODEL] and n_kv < n_head:
        diagnose("gqa_kv_d_model", msg("k_proj projects to d_model = {D_MODEL}: with n_kv_head = {n_kv} key–value heads of d_head = {d_head} it is nn.Linear(d_model, n_kv_head · d_head = {kv_width}, bias=False), as v_proj: that is what shrinks the cache", D_MODEL=D_MODEL, n_kv=n_kv, d_head=D_MODEL // n_head, kv_width=n_kv * D_MODEL // n_head))
    for name, w in weights.items():
        check(shapes.get(name) == list(w.shape), msg("GroupedQueryAttention({D_MODEL}, {n_head}, {n_kv}) should have a bias-free {module} with weight {w_shape}, found {found_shape}", D_MODEL=D_MODEL, n_head=n_head, n_kv=n_kv, module=name.split('.')[0], w_shape=list(w.shape), found_shape=shapes.get(name)))
    extra = sorted(set(shapes) - set(weights))
    check(not extra, msg("GroupedQueryAttention has parameters or buffers {extra}: the projections are bias-free", extra=extra))
    m.load_state_dict(weights)
    m.eval()
    return m


def gqa_case(sub, n, n_head, n_kv, what, window=None, padded=False):
    weights = gqa_weights(n, n_head, n_kv)
    B, L = 2, _int(n + 4, 6, 11)
    x = randn(n + 5, B, L, D_MODEL)
    key_mask, real = None, torch.ones(B, L, dtype=torch.bool)
    offset = None
    if padded:
        lead = torch.tensor([[0], [_int(n + 6, 2, 4)]])
        key_mask = real = torch.arange(L)[None] >= lead
        offset = lead.double()
    cos, sin = tables(L, D_MODEL // n_head, offset)
    m = _gqa(sub, n_head, n_kv, weights, window)
    got = m(x, cos.float(), sin.float(), key_mask)
    check(isinstance(got, torch.Tensor) and tuple(got.shape) == (B, L, D_MODEL),
          msg("GroupedQueryAttention's forward should return [B, L, D] = {want}", want=[B, L, D_MODEL]))
    if padded:
        check(not torch.isnan(got).any(), msg("{what}: a left pad's query (no allowed key) gave NaN: fill the masked scores with torch.finfo(scores.dtype).min, not −inf", what=what), mistake="gqa_nan_pad_rows")
    ref = functools.partial(ref_gqa, weights, x, cos, sin, n_head, n_kv, window, key_mask)
    close(got[real], ref()[real], msg("{what}: the output should be out_proj of causal attention with RoPE on q and k, query head h using key–value head h // (n_head // n_kv_head)", what=what), atol=ATOL,
          suspects=[suspect(k, (lambda k=k: ref(mistake=k)[real]), hint) for k, hint in GQA_HINTS.items()])


@exercise("GroupedQueryAttention", points=0.5)
def test_gqa_structure(sub):
    _gqa(sub, 4, 2, gqa_weights(130, 4, 2))
    try:
        sub.new("GroupedQueryAttention", D_MODEL, 4, 3)
    except SubmissionError as exc:
        check(exc.exc_type == "ValueError", msg("GroupedQueryAttention({D_MODEL}, 4, 3) should raise ValueError (4 query heads cannot be shared out among 3 key–value heads), it raised {error_type}", D_MODEL=D_MODEL, error_type=exc.exc_type))
        return
    diagnose("gqa_no_value_error", msg("GroupedQueryAttention({D_MODEL}, n_head=4, n_kv_head=3) was built: n_head must be a multiple of n_kv_head, raise ValueError otherwise", D_MODEL=D_MODEL))


@exercise("GroupedQueryAttention", points=1)
def test_gqa_equals_multi_head(sub):
    gqa_case(sub, 140, 4, 4, msg("with n_kv_head = n_head = 4 (lesson 10's attention)"))


@exercise("GroupedQueryAttention", points=1)
def test_gqa_groups(sub):
    gqa_case(sub, 150, 4, 2, msg("4 query heads sharing 2 key–value heads"))
    gqa_case(sub, 160, 4, 1, msg("4 query heads sharing 1 key–value head (multi-query attention)"))


@exercise("GroupedQueryAttention", points=0.5)
def test_gqa_window(sub):
    gqa_case(sub, 170, 4, 2, msg("with window=3"), window=3)


@exercise("GroupedQueryAttention", points=1)
def test_gqa_key_mask(sub):
    gqa_case(sub, 180, 4, 2, msg("a left-padded batch with its key_mask"), padded=True)
    gqa_case(sub, 190, 4, 2, msg("a left-padded batch with its key_mask and window=2"), window=2, padded=True)
