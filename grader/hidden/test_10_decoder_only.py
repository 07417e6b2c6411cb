"""Hidden graders of lesson 10_decoder_only (torch).

Every oracle is the contract's formula written out here in float64: RMSNorm, the rotary
table and the rotation of interleaved pairs, SwiGLU, the pre-norm decoder block (causal
attention with RoPE on q and k, a key mask), the decoder-only model (positions counted from
each row's first real token, pads never attended to, tied embeddings) and the masked
next-token loss. Weights are injected by name, so nothing depends on a seed or on the order
in which a submission creates its layers; inputs and sizes are drawn afresh for every
grading run. A wrong output is compared with the outputs of the common mistakes
(``suspect``), written as options of the float64 functions below: the one it matches is the
hint.
"""

import math

import torch
import torch.nn.functional as F

from grader.runtime.errors import SubmissionError
from grader.testkit.framework import (
    ON_DEVICE,
    Failed,
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
    "rms_subtracts_mean": "rms_norm subtracts the mean (that is LayerNorm without its bias)",
    "rms_eps_outside": "eps is added outside the square root",
    "rms_wrong_axis": "the mean of x² is taken over the wrong axis",
    "rms_no_weight": "rms_norm does not multiply by weight",
    "rms_eps_ignored": "rms_norm ignores its eps argument",
    "rms_no_sqrt": "rms_norm divides by the mean square, not its square root",
    "rmsnorm_no_weight": "RMSNorm has no parameter weight",
    "rmsnorm_weight_init": "RMSNorm's weight does not start at ones",
    "rmsnorm_bias": "RMSNorm has a bias parameter (RMSNorm has no β)",
    "rmsnorm_weight_ignored": "RMSNorm's forward does not use its weight",
    "rmsnorm_eps_ignored": "RMSNorm does not pass its eps on",
    "rmsnorm_eps_default": "RMSNorm's default eps is not 1e-6",
    "rope_float64": "the rotary tables are float64",
    "rope_cos_sin_swapped": "rope_angles returns (sin, cos)",
    "rope_exponent_i": "the exponent is i/d_head (the pair's index) instead of 2i/d_head",
    "rope_positions_from_1": "positions start at 1 instead of 0",
    "rope_multiplied": "pos is multiplied by base^(2i/d_head) instead of divided",
    "rope_base_ignored": "the base argument is ignored (always 10000)",
    "rope_full_width": "the tables are [max_len, d_head] (each angle twice), not [max_len, d_head // 2]",
    "rope_half_split": "the rotation pairs x[..., i] with x[..., i + d/2] (half-split) instead of (2i, 2i+1)",
    "rope_sign_flipped": "the rotation turns the other way (the sign of sin flipped)",
    "rope_apply_swapped": "cos and sin are used in each other's place in the rotation",
    "rope_output_concatenated": "the rotated pairs are concatenated instead of interleaved back",
    "rope_dtype_changed": "apply_rope returns float32 for a half-precision x",
    "rope_tables_not_broadcast": "apply_rope reshapes or indexes cos and sin for [L, d/2] tables, so "
                                 "per-row tables [B, 1, L, d/2] fail",
    "swiglu_bias": "SwiGLU's linear layers have biases",
    "swiglu_w2_w3_swapped": "w2 widens and w3 narrows: the roles of w2 and w3 are swapped",
    "swiglu_gate_swapped": "SiLU is applied to the w3 branch instead of w1",
    "swiglu_silu_both": "SiLU is applied to both branches",
    "swiglu_sigmoid": "sigmoid instead of SiLU on the gate",
    "swiglu_gelu": "GELU instead of SiLU on the gate",
    "swiglu_no_gate": "no gate: the w3 branch is not multiplied in",
    "block_bias": "the attention projections have biases",
    "block_post_norm": "the norms follow the residual additions (post-norm) instead of starting each branch",
    "block_residual_normalised": "the residual adds the normalised input instead of x",
    "block_shared_norm": "one norm is used for both sub-layers",
    "block_no_rope": "q and k are not rotated",
    "block_rope_q_only": "only q is rotated, not k",
    "block_rope_on_v": "the values are rotated too",
    "block_scale_d_model": "the scores are divided by √d_model instead of √d_head",
    "block_no_causal": "no causal mask",
    "block_causal_inverted": "the causal mask is inverted (each position sees only the future)",
    "block_key_mask_ignored": "the key mask is ignored",
    "block_key_mask_inverted": "the key mask is inverted (only pads are attended to)",
    "block_key_mask_query_axis": "the key mask is broadcast over the query axis (hides the pads' rows, not their keys)",
    "block_nan_pad_rows": "a query with no allowed key (a left pad) gives NaN",
    "block_no_dropout": "the block applies no dropout",
    "block_mask_on_cpu": "a mask made inside the block without device=",
    "lm_d_ff_default": "d_ff=None does not give the multiple of 8 nearest 8/3·d_model",
    "lm_rope_d_model": "the rotary tables are built for d_model instead of d_model // n_head",
    "lm_head_bias": "lm_head has a bias",
    "lm_tied_copied": "lm_head's weight is a copy of the embedding's, not the same parameter",
    "lm_tie_ignored": "the weights are tied even when tie_weights=False",
    "lm_embed_scaled": "the embeddings are multiplied by √d_model",
    "lm_no_final_norm": "no final RMSNorm before lm_head",
    "lm_positions_from_1": "positions start at 1 instead of 0",
    "lm_positions_from_row_start": "positions are counted from the padded row's start, so left pads shift them",
    "lm_pads_attended": "no key mask: real tokens attend to the pads",
    "lm_pad_id_hardcoded": "pads are taken as id 0 instead of pad_id",
    "lm_dropout_not_passed": "the blocks do not get the model's dropout",
    "lm_tensor_on_cpu": "a tensor made inside the model without device=",
    "lm_tables_not_buffers": "cos and sin are plain attributes, not registered buffers",
    "loss_not_shifted": "the logits at position t are scored against ids[:, t] instead of the next token",
    "loss_shift_reversed": "the shift runs the wrong way (logits[:, 1:] against ids[:, :-1])",
    "loss_mask_ignored": "loss_mask is ignored: every position is counted",
    "loss_mask_unshifted": "loss_mask[:, :-1] selects the positions instead of loss_mask[:, 1:]",
    "loss_mean_all": "the masked losses are divided by the number of all positions",
    "loss_sum": "the loss is summed instead of averaged",
    "loss_log_of_softmax": "log(softmax(x)) underflows to -inf on large logits",
    "loss_not_a_tensor": "lm_loss returns a Python number instead of a tensor",
}

#: What the lesson's text (both editions) asks of each exercise, each requirement with the
#: diagnoses that grade it: ids of MISTAKES, or the shared ``library_call`` and
#: ``changes_its_input`` (tests/grader/hidden/test_requirements.py: each one declared, and proven on this
#: exercise by a planted bug; every diagnosis answers some requirement).
REQUIREMENTS = {
    "rms_norm": {
        "x / sqrt(mean(x², last axis) + eps) * weight: no mean subtracted, the root of the mean "
        "square, over each token's features":
            ("rms_subtracts_mean", "rms_no_sqrt", "rms_wrong_axis", "rms_no_weight"),
        "ε inside the square root (as in lesson 05)": ("rms_eps_outside",),
        "with the eps it is given (the argument, 1e-6 by default)": ("rms_eps_ignored",),
        "written from the formula: F.rms_norm refused (the course's rule on shortcuts)": ("library_call",),
    },
    "RMSNorm": {
        "one nn.Parameter named weight, [d_model]": ("rmsnorm_no_weight",),
        "weight initialised to ones": ("rmsnorm_weight_init",),
        "no β: weight is the only parameter": ("rmsnorm_bias",),
        "returns rms_norm(x, self.weight, self.eps)": ("rmsnorm_weight_ignored",),
        "keeps its eps (the argument) and uses it": ("rmsnorm_eps_ignored",),
        "eps=1e-6 by default (the signature)": ("rmsnorm_eps_default",),
        "F.rms_norm and nn.RMSNorm are refused (the course's rule on shortcuts)": ("library_call",),
    },
    "rope_angles": {
        "returns (cos, sin)": ("rope_cos_sin_swapped",),
        "float32 tensors": ("rope_float64",),
        "each [max_len, d_head // 2], one angle per pair": ("rope_full_width",),
        "angle pos · base^(-2i/d_head), the exponent over 0, 2, 4, … / d_head, positions 0 … max_len - 1":
            ("rope_exponent_i", "rope_multiplied", "rope_positions_from_1"),
        "with the base it is given": ("rope_base_ignored",),
    },
    "apply_rope": {
        "turns each interleaved pair (x[..., 2i], x[..., 2i+1]), interleaved back into [..., d]":
            ("rope_half_split", "rope_output_concatenated"),
        "(x₀, x₁) → (x₀·cos − x₁·sin, x₀·sin + x₁·cos)": ("rope_sign_flipped", "rope_apply_swapped"),
        "cos and sin broadcast as they come: [L, d/2] or per-row [B, 1, L, d/2] tables":
            ("rope_tables_not_broadcast",),
        "returns a tensor of x's dtype (cast back from the float32 tables)": ("rope_dtype_changed",),
        "returns a new tensor: x is left as it was": ("changes_its_input",),
    },
    "SwiGLU": {
        "bias-free linear maps": ("swiglu_bias",),
        "w1 and w3 widen d_model → d_ff, w2 narrows d_ff → d_model": ("swiglu_w2_w3_swapped",),
        "w2(silu(w1(x)) * w3(x)): the SiLU gate on w1's branch only, times w3's":
            ("swiglu_gate_swapped", "swiglu_silu_both", "swiglu_sigmoid", "swiglu_gelu", "swiglu_no_gate"),
    },
    "DecoderBlock": {
        "q_proj, k_proj, v_proj, out_proj bias-free": ("block_bias",),
        "pre-norm: x = x + attn(attn_norm(x)), then x = x + ffn(ffn_norm(x)), each with its own norm":
            ("block_post_norm", "block_residual_normalised", "block_shared_norm"),
        "RoPE on q and k, not on v": ("block_no_rope", "block_rope_q_only", "block_rope_on_v"),
        "scores divided by √d, d = d_model / n_head": ("block_scale_d_model",),
        "causal always (True = may attend, lesson 03's convention)": ("block_no_causal", "block_causal_inverted"),
        "key_mask [B, L] (True at real tokens) hides the pads' keys: causal & key_mask[:, None, None, :]":
            ("block_key_mask_ignored", "block_key_mask_inverted", "block_key_mask_query_axis"),
        "no NaN anywhere (a left pad's query has no key)": ("block_nan_pad_rows",),
        "nn.Dropout(dropout) on each branch's output before the addition": ("block_no_dropout",),
        # Exercise 6 does not say it; lesson 04 asks it of a mask made in forward, Exercise 7 of
        # the model the block is part of, and section 8 runs the model on a GPU (see the report)
        "the causal mask made on x's device (the model runs on a GPU, section 8)": ("block_mask_on_cpu",),
        "written in the exercise: section 8.3's given block_forward (the same block, for generation) "
        "is refused": ("given_answer",),
    },
    "DecoderLM": {
        "lm_head bias-free": ("lm_head_bias",),
        "d_ff=None: the multiple of 8 nearest 8/3·d_model": ("lm_d_ff_default",),
        "buffers cos, sin = rope_angles(max_len, d_model // n_head), registered with register_buffer":
            ("lm_rope_d_model", "lm_tables_not_buffers"),
        "lm_head.weight is embed.weight when tie_weights (the same Parameter), its own otherwise":
            ("lm_tied_copied", "lm_tie_ignored"),
        "embeddings without lesson 07's √D": ("lm_embed_scaled",),
        "logits = lm_head(norm(x)): a final RMSNorm": ("lm_no_final_norm",),
        "pads (ids == pad_id) are never attended to": ("lm_pads_attended", "lm_pad_id_hardcoded"),
        "positions count from each row's first real token, from 0":
            ("lm_positions_from_1", "lm_positions_from_row_start"),
        # the constructor's dropout has no other use than the blocks' (DecoderBlock(..., dropout))
        "the model's dropout reaches every block": ("lm_dropout_not_passed",),
        "tensors built inside go on ids' device": ("lm_tensor_on_cpu",),
    },
    "lm_loss": {
        "logits[:, :-1] against ids[:, 1:]": ("loss_not_shifted", "loss_shift_reversed"),
        "only where loss_mask[:, 1:] is True": ("loss_mask_ignored", "loss_mask_unshifted"),
        "the mean over the scored tokens": ("loss_mean_all", "loss_sum"),
        # the cross-entropy of large logits is finite: log(softmax) gives inf where it is not
        "the cross-entropy's value, large logits included (F.cross_entropy may do the work)":
            ("loss_log_of_softmax",),
        "a 0-dim tensor (the signature's -> torch.Tensor; training calls backward)": ("loss_not_a_tensor",),
    },
}

# Each exercise is graded with the course's versions of the ones it builds on (grader.testkit.parts).
BUILDS_ON = {
    "RMSNorm": ("rms_norm",),
    "DecoderBlock": ("RMSNorm", "rms_norm", "apply_rope", "SwiGLU"),
    "DecoderLM": ("DecoderBlock", "RMSNorm", "rms_norm", "rope_angles", "apply_rope", "SwiGLU"),
}

# The notebook's given code that computes an exercise: refused while that exercise is graded
# (grader.testkit.parts.judged_alone), so that a forward returning block_forward(self, ...)[0]
# earns nothing; release's leak scan accepts given code that repeats an answer only if listed here.
GIVEN_ANSWERS = {
    "DecoderBlock": ("block_forward",),
}

D, H, FF = 16, 2, 24  # tiny on purpose: the whole lesson grades in well under a second
DH = D // H
V, MAX_LEN = 11, 16
ATOL = 1e-4  # float32 against float64; every mistake is off by far more
F64 = torch.float64


def randn(n, *shape, scale=1.0):
    return torch.randn(*shape, generator=gen(n)) * scale


def _int(n, low, high):
    return int(torch.randint(low, high, (1,), generator=gen(n)))


# --- float64 oracles, with the common mistakes as options -------------------------------

def ref_rms(x, weight, eps=1e-6, mistake=None):
    """x / sqrt(mean(x², -1) + eps) * weight in float64."""
    x, weight = x.double(), torch.as_tensor(weight).double()
    if mistake == "rms_subtracts_mean":
        x = x - x.mean(-1, keepdim=True)
    axis = {"rms_wrong_axis": 0, "rms_wrong_axis_1": 1}.get(mistake, -1)
    ms = x.pow(2).mean(axis, keepdim=True)
    if mistake == "rms_eps_outside":
        out = x / (ms.sqrt() + eps)
    elif mistake == "rms_no_sqrt":
        out = x / (ms + eps)
    else:
        out = x / torch.sqrt(ms + (1e-6 if mistake == "rms_eps_ignored" else eps))
    return out if mistake == "rms_no_weight" else out * weight


def ref_angles(max_len, d_head, base=10000.0, mistake=None):
    """(cos, sin) [max_len, d_head // 2] in float64: angle pos · base^(-2i/d_head)."""
    first = 1 if mistake == "rope_positions_from_1" else 0
    pos = torch.arange(first, first + max_len, dtype=F64)[:, None]
    two_i = torch.arange(0, d_head, 2, dtype=F64)
    if mistake == "rope_exponent_i":
        two_i = two_i / 2
    b = 10000.0 if mistake == "rope_base_ignored" else base
    power = b ** (two_i / d_head)
    angle = pos * power if mistake == "rope_multiplied" else pos / power
    if mistake == "rope_full_width":
        angle = torch.cat([angle, angle], -1)
    cos, sin = torch.cos(angle), torch.sin(angle)
    return (sin, cos) if mistake == "rope_cos_sin_swapped" else (cos, sin)


def table(max_len=MAX_LEN, d_head=DH):
    """The float32 tables a correct rope_angles returns (what the models are handed)."""
    cos, sin = ref_angles(max_len, d_head)
    return cos.float(), sin.float()


def rotate(x, cos, sin, mistake=None):
    """Each interleaved pair (x[..., 2i], x[..., 2i+1]) turned by its angle, in float64."""
    x, cos, sin = x.double(), cos.double(), sin.double()
    if mistake == "rope_half_split":  # Hugging Face's rotate_half layout
        h = x.shape[-1] // 2
        x0, x1 = x[..., :h], x[..., h:]
        return torch.cat([x0 * cos - x1 * sin, x0 * sin + x1 * cos], -1)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    if mistake == "rope_sign_flipped":
        sin = -sin
    if mistake == "rope_apply_swapped":
        cos, sin = sin, cos
    a, b = x0 * cos - x1 * sin, x0 * sin + x1 * cos
    if mistake == "rope_output_concatenated":
        return torch.cat([a, b], -1)
    return torch.stack([a, b], -1).flatten(-2)


def ref_swiglu(p, x, pre="", mistake=None):
    w1, w2, w3 = (p[f"{pre}w{i}.weight"].double() for i in (1, 2, 3))
    x = x.double()
    a, b = x @ w1.T, x @ w3.T
    gate = {
        "swiglu_gate_swapped": lambda: a * F.silu(b),
        "swiglu_silu_both": lambda: F.silu(a) * F.silu(b),
        "swiglu_sigmoid": lambda: torch.sigmoid(a) * b,
        "swiglu_gelu": lambda: F.gelu(a) * b,
        "swiglu_no_gate": lambda: F.silu(a),
    }.get(mistake, lambda: F.silu(a) * b)()
    return gate @ w2.T


def ref_attention(p, pre, h, cos, sin, key_mask=None, mistake=None, n_head=H):
    B, L, d_model = h.shape
    dh = d_model // n_head

    def heads(name):
        return (h @ p[f"{pre}{name}.weight"].double().T).reshape(B, L, n_head, dh).transpose(1, 2)

    q, k, v = heads("q_proj"), heads("k_proj"), heads("v_proj")
    if mistake != "block_no_rope":
        q = rotate(q, cos, sin)
        k = k if mistake == "block_rope_q_only" else rotate(k, cos, sin)
    if mistake == "block_rope_on_v":
        v = rotate(v, cos, sin)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_model if mistake == "block_scale_d_model" else dh)
    causal = torch.ones(L, L, dtype=torch.bool).tril()
    allowed = {"block_no_causal": torch.ones_like(causal), "block_causal_inverted": ~causal}.get(mistake, causal)
    if key_mask is not None and mistake != "block_key_mask_ignored":
        keys = ~key_mask if mistake == "block_key_mask_inverted" else key_mask
        allowed = allowed & keys[:, None, None, :]
    weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), -1).nan_to_num(0.0)
    out = (weights @ v).transpose(1, 2).reshape(B, L, d_model)
    return out @ p[f"{pre}out_proj.weight"].double().T


def ref_block(p, x, cos, sin, key_mask=None, mistake=None, pre="", shared="attn_norm"):
    """The pre-norm block: x + attn(attn_norm(x)), then x + ffn(ffn_norm(x)), in float64."""
    x = x.double()
    first, second = "attn_norm", "ffn_norm"
    if mistake == "block_shared_norm":
        first = second = shared

    def norm(name, t):
        return ref_rms(t, p[f"{pre}{name}.weight"])

    def attn(t):
        return ref_attention(p, pre, t, cos, sin, key_mask, mistake)

    def ffn(t):
        return ref_swiglu(p, t, f"{pre}ffn.")

    if mistake == "block_post_norm":
        x = norm(first, x + attn(x))
        return norm(second, x + ffn(x))
    if mistake == "block_residual_normalised":
        h = norm(first, x)
        x = h + attn(h)
        h = norm(second, x)
        return h + ffn(h)
    x = x + attn(norm(first, x))
    return x + ffn(norm(second, x))


def positions(ids, pad_id, by="first"):
    """Each token's position counted from its row's first real token: by the number of
    leading pads (``first``) or by the running count of real tokens (``cumsum``), which agree
    on left- and right-padded rows."""
    real = ids != pad_id
    if by == "cumsum":
        return (real.long().cumsum(1) - 1).clamp(min=0)
    lead = (real.long().cumsum(1) == 0).sum(1, keepdim=True)
    return (torch.arange(ids.shape[1])[None, :] - lead).clamp(min=0)


def ref_lm(p, ids, pad_id, n_layer=2, mistake=None, by="first", tables=None):
    """The decoder-only model in float64: logits [B, L, V] (with the rotary ``tables`` the
    model holds, the contract's by default)."""
    pad = 0 if mistake == "lm_pad_id_hardcoded" else pad_id
    real = ids != pad
    if mistake == "lm_positions_from_row_start":
        pos = torch.arange(ids.shape[1]).expand(ids.shape)
    else:
        pos = positions(ids, pad, by) + (mistake == "lm_positions_from_1")
    cos_t, sin_t = tables or table()
    cos, sin = cos_t[pos][:, None], sin_t[pos][:, None]
    x = p["embed.weight"].double()[ids]
    if mistake == "lm_embed_scaled":
        x = x * math.sqrt(D)
    for i in range(n_layer):
        x = ref_block(p, x, cos, sin, None if mistake == "lm_pads_attended" else real, pre=f"blocks.{i}.")
    if mistake != "lm_no_final_norm":
        x = ref_rms(x, p["norm.weight"])
    return x @ p["lm_head.weight"].double().T


def ref_loss(logits, ids, loss_mask, mistake=None):
    """Mean cross-entropy of logits[:, :-1] against ids[:, 1:] where loss_mask[:, 1:]."""
    logits = logits.double()
    pred, target, keep = logits[:, :-1], ids[:, 1:], loss_mask[:, 1:]
    if mistake == "loss_not_shifted":
        pred, target, keep = logits, ids, loss_mask
    elif mistake == "loss_shift_reversed":
        pred, target = logits[:, 1:], ids[:, :-1]
    elif mistake == "loss_mask_unshifted":
        keep = loss_mask[:, :-1]
    elif mistake == "loss_mask_ignored":
        keep = torch.ones_like(keep)
    per_token = F.cross_entropy(pred.reshape(-1, pred.shape[-1]), target.reshape(-1), reduction="none")
    per_token = per_token.reshape(target.shape)
    if mistake == "loss_sum":
        return per_token[keep].sum()
    if mistake == "loss_mean_all":
        return per_token[keep].sum() / keep.numel()
    return per_token[keep].mean()


# --- injecting weights by name -----------------------------------------------------------

def _inject(handle, params, what, hint):
    """Load ``params`` into the student's module by name, in the order of its state dict
    (where two names share one tensor, the later one wins). Biases the contract does not
    have are zeroed, so that a bias left in costs only the structure check."""
    shapes = handle.state_shapes()
    check(isinstance(shapes, dict), msg("{what}.state_dict() did not return a dict: is it an nn.Module?", what=what))
    missing = [k for k in params if k not in shapes]
    check(not missing, msg("{what} has no parameter named {missing}{more}: {hint}", what=what, missing=', '.join(missing[:4]), more=' ...' if len(missing) > 4 else '', hint=hint))
    for k, v in params.items():
        check(shapes[k] == list(v.shape),
              msg("{what}: parameter {name} has shape {shape}, expected {want_shape}", what=what, name=k, shape=shapes[k], want_shape=list(v.shape)))
    state = {k: params[k] for k in shapes if k in params}
    state.update({k: torch.zeros(s) for k, s in shapes.items()
                  if k not in params and k.endswith(".bias") and s is not None})
    handle.load_state_dict(state, strict=False)
    handle.eval()
    return handle


# --- rms_norm ----------------------------------------------------------------------------

RMS_FORBID = ("torch.nn.functional.rms_norm", "torch.rms_norm")  # the exercise writes it from the formula

RMS_HINTS = {
    "rms_subtracts_mean": msg("the mean is subtracted first: that is LayerNorm (without its bias); RMSNorm only divides by the root mean square, x / sqrt(mean(x², -1) + eps) * weight"),
    "rms_eps_outside": msg("eps is added outside the square root: divide by sqrt(mean(x²) + eps), not by sqrt(mean(x²)) + eps (it shows on tokens whose features are tiny)"),
    "rms_wrong_axis": msg("the mean of x² is taken over the wrong axis: each token is normalised over its own features, the last axis, mean(-1, keepdim=True)"),
    "rms_no_weight": msg("the result is not multiplied by weight: return x / sqrt(mean(x², -1) + eps) * weight"),
    "rms_eps_ignored": msg("the eps argument is ignored: use it inside the square root"),
    "rms_no_sqrt": msg("x is divided by the mean square itself: divide by its square root, the root mean square"),
}
RMS_IDS = {"rms_wrong_axis_1": "rms_wrong_axis"}


def rms_suspects(x, weight, eps=1e-6):
    found = []
    for m in (*RMS_HINTS, *RMS_IDS):
        if (m == "rms_wrong_axis_1" and x.dim() < 3) or (m == "rms_eps_ignored" and eps == 1e-6):
            continue
        mid = RMS_IDS.get(m, m)
        found.append(suspect(mid, (lambda m=m: ref_rms(x, weight, eps, m)), RMS_HINTS[mid]))
    return found


def _rms_data(n):
    B, L = _int(n, 2, 4), _int(n + 1, 3, 7)
    x = randn(n + 2, B, L, D, scale=1.5) + 0.5  # an offset, so that subtracting the mean shows
    w = 1.0 + 0.5 * randn(n + 3, D)
    return x, w


@exercise("rms_norm", points=1)
def test_rms_norm_values(sub):
    x, w = _rms_data(1)
    close(sub.call("rms_norm", x, w, forbid=RMS_FORBID), ref_rms(x, w), msg("rms_norm of a {x_shape} batch should divide each token by the root mean square of its features, x / sqrt(mean(x², -1) + eps), then multiply by weight", x_shape=list(x.shape)), atol=ATOL, suspects=rms_suspects(x, w))
    x2 = randn(4, 5, 6, scale=2.0) - 0.7
    w2 = 1.0 + 0.5 * randn(5, 6)
    close(sub.call("rms_norm", x2, w2, forbid=RMS_FORBID), ref_rms(x2, w2), msg("rms_norm of a [5, 6] input should normalise each row over its 6 features"), atol=ATOL, suspects=rms_suspects(x2, w2))


@exercise("rms_norm", points=0.5)
def test_rms_norm_eps_inside_the_root(sub):
    x, w = _rms_data(6)
    tiny = x * 1e-3  # mean(x²) ≈ 1e-6, as large as eps: where eps goes now shows
    close(sub.call("rms_norm", tiny, w, forbid=RMS_FORBID), ref_rms(tiny, w), msg("for tokens whose features are tiny (mean(x²) ≈ eps = 1e-6) the result depends on where eps goes: inside the square root"),
          atol=ATOL, suspects=rms_suspects(tiny, w))


@exercise("rms_norm", points=0.5)
def test_rms_norm_eps_argument(sub):
    x, w = _rms_data(8)
    eps = 0.25 + float(torch.rand(1, generator=gen(9)))
    got = sub.call("rms_norm", x, w, eps=eps, forbid=RMS_FORBID)
    if matches(got, ref_rms(x, w, eps, "rms_eps_outside"), atol=ATOL):
        return  # eps is used, in the wrong place: the check of eps's place charges that
    close(got, ref_rms(x, w, eps), msg("with eps={eps} the result should change: x / sqrt(mean(x², -1) + eps) * weight", eps=format(eps, '.3f')), atol=ATOL, suspects=rms_suspects(x, w, eps))


# --- RMSNorm -----------------------------------------------------------------------------

RMSNORM_HINT = msg("keep the scale in an nn.Parameter named weight, of shape [d_model]")
RMSNORM_HINTS = {
    "rmsnorm_weight_ignored": msg("forward does not use self.weight: return rms_norm(x, self.weight, self.eps)"),
    "rmsnorm_eps_ignored": msg("RMSNorm(d_model, eps) does not pass its eps on: return rms_norm(x, self.weight, self.eps)"),
    "rmsnorm_eps_default": msg("RMSNorm's default eps should be 1e-6 (the contract's, and LLaMA's), not LayerNorm's 1e-5"),
}


def _rmsnorm(sub, *args, probe=False, **kwargs):
    """The student's RMSNorm(*args, **kwargs); ``probe``: called once on zeros, so that a module
    built on the library is refused (the calls that follow are refused it anyway)."""
    m = sub.new("RMSNorm", *args, **kwargs)
    info = m.inspect()
    check(info.get("is_module"), msg("RMSNorm should be an nn.Module"))
    if probe or "weight" not in info["parameters"]:  # the library reveals itself before names do
        try:
            m(torch.zeros(1, args[0] if args else kwargs["d_model"]), forbid=RMS_FORBID)
        except SubmissionError as exc:
            if exc.exc_type == "ForbiddenCall":
                raise
    return m, info


@exercise("RMSNorm", points=0.5)
def test_rmsnorm_parameters(sub):
    _, info = _rmsnorm(sub, D, probe=True)
    params = info["parameters"]
    check(params or "weight" in info["buffers"], msg("RMSNorm(d_model) has no parameters: it learns a scale, self.weight = nn.Parameter(torch.ones(d_model))"), mistake="rmsnorm_no_weight")
    check("weight" in params, msg("RMSNorm's scale should be an nn.Parameter named `weight` (found {params}): weights are loaded by that name", params=', '.join(params) or 'none'), mistake="rmsnorm_no_weight")
    check(tuple(params["weight"].shape) == (D,), msg("RMSNorm({D}).weight should have shape [{D}]", D=D))
    close(params["weight"], torch.ones(D), msg("RMSNorm's weight should start at ones (the identity scale)"),
          mistake="rmsnorm_weight_init")
    check("bias" not in params, msg("RMSNorm has a parameter `bias`: there is no β in RMSNorm, its only parameter is the scale weight (x / RMS(x) * weight)"), mistake="rmsnorm_bias")
    check(set(params) == {"weight"}, msg("RMSNorm has one parameter, weight (found {params}): no bias, no mean", params=', '.join(params)))


@exercise("RMSNorm", points=1)
def test_rmsnorm_forward(sub):
    x, w = _rms_data(10)
    m = _inject(_rmsnorm(sub, D)[0], {"weight": w}, "RMSNorm", RMSNORM_HINT)
    close(m(x, forbid=RMS_FORBID), ref_rms(x, w), msg("with a loaded weight, RMSNorm(d_model)(x) should be rms_norm(x, weight, eps) over the last axis"), atol=ATOL,
          suspects=[suspect("rmsnorm_weight_ignored", ref_rms(x, w, mistake="rms_no_weight"),
                            RMSNORM_HINTS["rmsnorm_weight_ignored"])])


@exercise("RMSNorm", points=0.5)
def test_rmsnorm_eps(sub):
    x, _ = _rms_data(12)
    w = torch.ones(D)  # the weight's own check is the forward's
    m = _inject(_rmsnorm(sub, D)[0], {"weight": w}, "RMSNorm", RMSNORM_HINT)
    tiny = x * 1e-3
    close(m(tiny, forbid=RMS_FORBID), ref_rms(tiny, w), msg("RMSNorm(d_model) on tokens with tiny features (mean(x²) ≈ 1e-6) should use eps = 1e-6"), atol=ATOL,
          suspects=[suspect("rmsnorm_eps_default", ref_rms(tiny, w, 1e-5), RMSNORM_HINTS["rmsnorm_eps_default"])])
    eps = 0.25 + float(torch.rand(1, generator=gen(13)))
    m2 = _inject(_rmsnorm(sub, D, eps=eps)[0], {"weight": w}, "RMSNorm", RMSNORM_HINT)
    close(m2(x, forbid=RMS_FORBID), ref_rms(x, w, eps), msg("RMSNorm(d_model, eps={eps}) should normalise with that eps", eps=format(eps, '.3f')),
          atol=ATOL, suspects=[suspect("rmsnorm_eps_ignored", ref_rms(x, w), RMSNORM_HINTS["rmsnorm_eps_ignored"])])


# --- rope_angles -------------------------------------------------------------------------

ANGLE_HINTS = {
    "rope_cos_sin_swapped": msg("rope_angles returns (sin, cos): the contract's order is (cos, sin) (position 0 gives cos = 1, sin = 0)"),
    "rope_exponent_i": msg("the exponent uses the pair's index i: pair i turns by pos · base^(-2i/d_head), with 2i = 0, 2, 4, … (torch.arange(0, d_head, 2))"),
    "rope_positions_from_1": msg("positions start at 1: the first row is position 0 (cos 0 = 1, sin 0 = 0), torch.arange(max_len)"),
    "rope_multiplied": msg("the angle is pos · base^(-2i/d_head): divide by base^(2i/d_head), do not multiply"),
    "rope_base_ignored": msg("the base argument is ignored: the angle is pos · base^(-2i/d_head) with the given base (10000 only by default)"),
    "rope_full_width": msg("the tables repeat each angle twice ([max_len, d_head], Hugging Face's layout): the contract's tables hold one angle per pair, [max_len, d_head // 2]"),
}


def angle_suspects(max_len, d_head, base=10000.0, select=lambda c, s: torch.stack([c, s])):
    found = []
    for m, hint in ANGLE_HINTS.items():
        if m == "rope_base_ignored" and base == 10000.0:
            continue
        if m == "rope_full_width":
            continue  # another shape: the shape check names it
        found.append(suspect(m, (lambda m=m: select(*ref_angles(max_len, d_head, base, m))), hint))
    return found


def _angles(sub, max_len, d_head, **kwargs):
    out = sub.call("rope_angles", max_len, d_head, **kwargs)
    check(isinstance(out, (tuple, list)) and len(out) == 2 and all(isinstance(t, torch.Tensor) for t in out),
          msg("rope_angles should return two tensors, (cos, sin)"))
    cos, sin = out
    want = (max_len, d_head // 2)
    if tuple(cos.shape) == (max_len, d_head) and tuple(sin.shape) == (max_len, d_head):
        diagnose("rope_full_width", ANGLE_HINTS["rope_full_width"])
    check(tuple(cos.shape) == want and tuple(sin.shape) == want, msg("rope_angles({max_len}, {d_head}) should return cos and sin of shape [max_len, d_head // 2] = {want}, got {cos_shape} and {sin_shape}", max_len=max_len, d_head=d_head, want=list(want), cos_shape=list(cos.shape), sin_shape=list(sin.shape)))
    return cos, sin


def angle_sizes(n):
    return _int(n, 20, 60), 2 * _int(n + 1, 2, 17)


@exercise("rope_angles", points=0.5)
def test_rope_angles_shape_and_dtype(sub):
    max_len, d_head = angle_sizes(20)
    cos, sin = _angles(sub, max_len, d_head)
    check(cos.dtype == torch.float32 and sin.dtype == torch.float32, msg("the tables should be float32 (like the model's weights), got {cos_dtype} and {sin_dtype}: compute the angles, then return cos.float(), sin.float()", cos_dtype=cos.dtype, sin_dtype=sin.dtype), mistake="rope_float64" if F64 in (cos.dtype, sin.dtype) else None)


@exercise("rope_angles", points=1)
def test_rope_angles_values(sub):
    for max_len, d_head in (angle_sizes(22), (12, 8)):
        cos, sin = _angles(sub, max_len, d_head)
        close(torch.stack([cos.double(), sin.double()]), torch.stack(ref_angles(max_len, d_head)),
              msg("rope_angles({max_len}, {d_head}) should hold cos and sin of pos · 10000^(-2i/d_head) for positions 0 … {last_position} and pairs i = 0 … {last_pair}", max_len=max_len, d_head=d_head, last_position=max_len - 1, last_pair=d_head // 2 - 1),
              atol=ATOL, suspects=angle_suspects(max_len, d_head))


@exercise("rope_angles", points=0.5)
def test_rope_angles_base(sub):
    max_len, d_head = angle_sizes(24)
    base = float(_int(25, 50, 5000))
    cos, sin = _angles(sub, max_len, d_head, base=base)
    close(torch.stack([cos.double(), sin.double()]), torch.stack(ref_angles(max_len, d_head, base)),
          msg("rope_angles({max_len}, {d_head}, base={base}) should use that base: pos · base^(-2i/d_head)", max_len=max_len, d_head=d_head, base=format(base, 'g')),
          atol=ATOL, suspects=angle_suspects(max_len, d_head, base))


# --- apply_rope --------------------------------------------------------------------------

ROPE_HINTS = {
    "rope_half_split": msg("the rotation pairs feature i with feature i + d/2 (Hugging Face's half-split rotate_half layout): the contract rotates interleaved pairs (x[..., 2i], x[..., 2i+1]), x[..., 0::2] and x[..., 1::2]"),
    "rope_sign_flipped": msg("the pairs turn the wrong way: (x₀, x₁) → (x₀·cos − x₁·sin, x₀·sin + x₁·cos), the sign of sin is flipped"),
    "rope_apply_swapped": msg("cos and sin are used in each other's place: (x₀, x₁) → (x₀·cos − x₁·sin, x₀·sin + x₁·cos)"),
    "rope_output_concatenated": msg("the rotated pairs are written back as [all first halves, all second halves]: interleave them again, torch.stack((a, b), -1).flatten(-2)"),
}


def rope_suspects(x, cos, sin, select=lambda t: t):
    return [suspect(m, (lambda m=m: select(rotate(x, cos, sin, m))), hint) for m, hint in ROPE_HINTS.items()]


def _rope_input(n, B=None, L=None):
    B = B or _int(n, 1, 3)
    L = L or _int(n + 1, 4, 9)
    return randn(n + 2, B, H, L, DH * 2)  # d_head 16: eight pairs of eight frequencies


@exercise("apply_rope", points=1.5)
def test_apply_rope_values(sub):
    x = _rope_input(30)
    L = x.shape[2]
    cos, sin = table(MAX_LEN, x.shape[-1])
    c, s = cos[:L], sin[:L]
    out = sub.call("apply_rope", x, c, s)
    check(isinstance(out, torch.Tensor) and tuple(out.shape) == tuple(x.shape),
          msg("apply_rope should return a tensor of x's shape {x_shape}", x_shape=list(x.shape)))
    close(out, rotate(x, c, s), msg("with cos, sin = table[:L] (positions 0 … {L}) each pair (x[..., 2i], x[..., 2i+1]) should become (x₀·cos − x₁·sin, x₀·sin + x₁·cos)", L=L - 1),
          atol=ATOL, suspects=rope_suspects(x, c, s))


@exercise("apply_rope", points=0.5)
def test_apply_rope_later_positions(sub):
    x = _rope_input(32)
    L, d = x.shape[2], x.shape[-1]
    offset = _int(34, 1, MAX_LEN - L + 1)
    cos, sin = table(MAX_LEN, d)
    c, s = cos[offset:offset + L], sin[offset:offset + L]
    close(sub.call("apply_rope", x, c, s), rotate(x, c, s), msg("with cos, sin = table[{offset}:{end}] (positions {offset} … {last}) every pair should turn by its own position's angle", offset=offset, end=offset + L, last=offset + L - 1),
          atol=ATOL, suspects=rope_suspects(x, c, s))
    # only relative positions reach q·k: turning q and k by the same extra angle changes nothing
    q, k = randn(35, 1, 1, L, d), randn(36, 1, 1, L, d)
    first = sub.call("apply_rope", q, cos[:L], sin[:L]) @ sub.call("apply_rope", k, cos[:L], sin[:L]).transpose(-2, -1)
    later = sub.call("apply_rope", q, c, s) @ sub.call("apply_rope", k, c, s).transpose(-2, -1)
    close(later, first, msg("q·k after the rotation should depend only on the distance between the positions: shifting both by {offset} changed the scores", offset=offset), atol=1e-3)

def _rows_alone_right(sub, x, pos, cos, sin, shape):
    """Diagnose tables that do not broadcast: apply_rope turns each sequence right on its own,
    with the [L, d/2] tables of its positions, but not the batch with the same angles as
    [B, 1, L, d/2] tables."""
    for b in range(x.shape[0]):
        try:
            alone = sub.call("apply_rope", x[b:b + 1], cos[pos[b]], sin[pos[b]])
        except SubmissionError:
            return
        if not matches(alone, rotate(x[b:b + 1], cos[pos[b]], sin[pos[b]]), atol=ATOL):
            return
    diagnose("rope_tables_not_broadcast", msg("apply_rope turns each sequence right with its own [L, d/2] tables, but not the batch with the same angles as tables of shape {shape} (one row of positions per sequence, table[positions][:, None]): do not reshape or index cos and sin for [L, d/2] tables (no cos[None, None]), let them broadcast against x[..., 0::2] as they are", shape=shape))


@exercise("apply_rope", points=0.5)
def test_apply_rope_positions_per_row(sub):
    B, L = 3, _int(40, 4, 9)
    x = _rope_input(41, B=B, L=L)
    pos = torch.stack([torch.randperm(MAX_LEN, generator=gen(42 + b))[:L] for b in range(B)])
    cos, sin = table(MAX_LEN, x.shape[-1])
    c, s = cos[pos][:, None], sin[pos][:, None]  # [B, 1, L, d/2]
    want = rotate(x, c, s)
    try:
        out = sub.call("apply_rope", x, c, s)
    except SubmissionError as exc:
        if exc.exc_type in ("ForbiddenCall", "ArgumentChanged"):
            raise
        _rows_alone_right(sub, x, pos, cos, sin, list(c.shape))
        raise Failed(msg("apply_rope(x, cos, sin) failed with cos and sin of shape {c_shape} (one row of positions per sequence, table[positions][:, None]): {error}; let cos and sin broadcast against x[..., 0::2]", c_shape=list(c.shape), error=exc.message)) from None
    if not matches(out, want, atol=ATOL):
        _rows_alone_right(sub, x, pos, cos, sin, list(c.shape))
    close(out, want, msg("with one row of positions per sequence (cos, sin = table[positions][:, None], [B, 1, L, d/2]) each sequence should turn by its own positions' angles"),
          atol=ATOL, suspects=rope_suspects(x, c, s))



@exercise("apply_rope", points=0.5)
def test_apply_rope_keeps_dtype(sub):
    x = _rope_input(45)
    L = x.shape[2]
    cos, sin = table(MAX_LEN, x.shape[-1])
    for dtype in (torch.bfloat16, torch.float64):
        out = sub.call("apply_rope", x.to(dtype), cos[:L], sin[:L])
        check(isinstance(out, torch.Tensor) and out.dtype == dtype,
              msg("apply_rope of a {dtype} x with float32 tables returned {out_dtype}: return x's dtype (cast the result back, out.to(x.dtype), or type_as(x)), as under bf16 autocast", dtype=str(dtype)[6:], out_dtype=getattr(out, 'dtype', type(out).__name__)),
              mistake="rope_dtype_changed" if dtype == torch.bfloat16 and getattr(out, "dtype", None) == torch.float32
              else None)
        close(out.double(), rotate(x.to(dtype), cos[:L], sin[:L]), msg("apply_rope of a {dtype} x should rotate it like a float32 one", dtype=str(dtype)[6:]), atol=0.1 if dtype == torch.bfloat16 else ATOL,
              suspects=rope_suspects(x.to(dtype), cos[:L], sin[:L]))


# --- SwiGLU ------------------------------------------------------------------------------

SWIGLU_HINT = msg("name the bias-free layers w1, w3 (d_model -> d_ff) and w2 (d_ff -> d_model)")
SWIGLU_HINTS = {
    "swiglu_gate_swapped": msg("SiLU is applied to the w3 branch: the gate is silu(w1(x)), multiplied by the plain w3(x), then w2"),
    "swiglu_silu_both": msg("SiLU is applied to both branches: only w1's is gated, w2(silu(w1(x)) * w3(x))"),
    "swiglu_sigmoid": msg("the gate uses sigmoid(w1(x)): SwiGLU uses SiLU, silu(a) = a · sigmoid(a)"),
    "swiglu_gelu": msg("the gate uses GELU: SwiGLU uses SiLU, silu(a) = a · sigmoid(a) (GEGLU would use GELU)"),
    "swiglu_no_gate": msg("the w3 branch is not multiplied in: SwiGLU is w2(silu(w1(x)) * w3(x))"),
}


def swiglu_params(n, d_model=D, d_ff=FF, pre=""):
    return {f"{pre}w1.weight": randn(n, d_ff, d_model, scale=1.5 / math.sqrt(d_model)),
            f"{pre}w3.weight": randn(n + 1, d_ff, d_model, scale=1.5 / math.sqrt(d_model)),
            f"{pre}w2.weight": randn(n + 2, d_model, d_ff, scale=1.0 / math.sqrt(d_ff))}


def swiglu_suspects(p, x):
    return [suspect(m, (lambda m=m: ref_swiglu(p, x, mistake=m)), hint) for m, hint in SWIGLU_HINTS.items()]


def _swiglu(sub, p, d_model=D, d_ff=FF):
    return _inject(sub.new("SwiGLU", d_model, d_ff), p, "SwiGLU", SWIGLU_HINT)


@exercise("SwiGLU", points=0.5)
def test_swiglu_structure(sub):
    m = sub.new("SwiGLU", 6, 10)
    shapes = m.state_shapes()
    check(isinstance(shapes, dict), msg("SwiGLU should be an nn.Module"))
    check(not any(k.endswith("bias") for k in shapes), msg("SwiGLU's layers have no biases (LLaMA's, PaLM's): nn.Linear(d_model, d_ff, bias=False)"), mistake="swiglu_bias")
    want = {"w1.weight": [10, 6], "w3.weight": [10, 6], "w2.weight": [6, 10]}
    check(all(k in shapes for k in want), msg("{SWIGLU_HINT} (found {shapes})", SWIGLU_HINT=SWIGLU_HINT, shapes=', '.join(shapes)))
    if shapes["w2.weight"] == want["w3.weight"] and shapes["w3.weight"] == want["w2.weight"]:
        diagnose("swiglu_w2_w3_swapped", msg("w2 widens and w3 narrows: in the contract (LLaMA's names) w1 and w3 both map d_model -> d_ff, and w2 maps d_ff -> d_model, so SwiGLU(x) = w2(silu(w1(x)) * w3(x))"))
    check(all(shapes[k] == s for k, s in want.items()), msg("w1 and w3 map d_model -> d_ff (weight [d_ff, d_model]), w2 maps d_ff -> d_model"))


@exercise("SwiGLU", points=1)
def test_swiglu_values(sub):
    p = swiglu_params(50)
    x = randn(53, 2, _int(54, 3, 8), D)
    close(_swiglu(sub, p)(x), ref_swiglu(p, x), msg("with injected weights SwiGLU(x) should be w2(silu(w1(x)) * w3(x)) at every position"), atol=ATOL, suspects=swiglu_suspects(p, x))


@exercise("SwiGLU", points=0.5)
def test_swiglu_other_sizes(sub):
    p = swiglu_params(55, 6, 20)
    m = _swiglu(sub, p, 6, 20)
    for x in (randn(58, 5, 6), randn(59, 2, 3, 4, 6)):
        close(m(x), ref_swiglu(p, x), msg("SwiGLU(6, 20) on an input of shape {x_shape} should work on the last axis and return the input's shape", x_shape=list(x.shape)), atol=ATOL, suspects=swiglu_suspects(p, x))


# --- DecoderBlock ------------------------------------------------------------------------

BLOCK_HINT = (msg("use the submodule names attn_norm, ffn_norm (RMSNorm), q_proj, k_proj, v_proj, out_proj (bias-free nn.Linear(d_model, d_model)) and ffn (SwiGLU with w1, w2, w3)"))
BLOCK_HINTS = {
    "block_post_norm": msg("the norms follow the residual additions (post-norm, like lesson 08's post-LN): today's block normalises at the start of each branch, x = x + attn(attn_norm(x)), then x = x + ffn(ffn_norm(x))"),
    "block_residual_normalised": msg("the residual adds the normalised input: h = attn_norm(x), then x = x + attn(h) with the un-normalised x (and the same for the feed-forward)"),
    "block_shared_norm": msg("one norm is used for both sub-layers: attn_norm before the attention, ffn_norm before the feed-forward, each with its own weight"),
    "block_no_rope": msg("q and k are not rotated: apply_rope(q, cos, sin) and apply_rope(k, cos, sin) after splitting the heads, before the scores"),
    "block_rope_q_only": msg("only q is rotated: rotate k too, so that q·k sees the distance between the positions"),
    "block_rope_on_v": msg("the values are rotated too: RoPE turns only q and k (positions belong in the scores, not in what is mixed)"),
    "block_scale_d_model": msg("the scores are divided by √d_model: divide by √d_head, the width of one head"),
    "block_no_causal": msg("there is no causal mask: each position sees the tokens after it; build torch.ones(L, L, dtype=torch.bool, device=x.device).tril() (True = may attend)"),
    "block_causal_inverted": msg("the causal mask is inverted: each position attends only to later ones; True = may attend, the lower triangle with the diagonal (tril)"),
    "block_key_mask_ignored": msg("key_mask is ignored: real tokens attend to the pads; combine it with the causal mask, causal & key_mask[:, None, None, :]"),
    "block_key_mask_inverted": msg("key_mask is inverted: True marks the real tokens (may attend), so the queries attend only to the pads"),
    "block_key_mask_query_axis": msg("key_mask is broadcast over the query axis (key_mask[:, None, :, None]): it hides the pads' own rows of scores, so the real tokens still attend to the pads; hide the pads' columns, the keys: key_mask[:, None, None, :]"),
}
BLOCK_MISTAKES = ("block_post_norm", "block_residual_normalised", "block_shared_norm", "block_no_rope",
                  "block_rope_q_only", "block_rope_on_v", "block_scale_d_model", "block_no_causal",
                  "block_causal_inverted")


def block_params(n, pre=""):
    g = gen(n)
    p = {}
    for name in ("attn_norm", "ffn_norm"):
        p[f"{pre}{name}.weight"] = 1.0 + 0.3 * torch.randn(D, generator=g)
    for name, scale in (("q_proj", 2.0), ("k_proj", 2.0), ("v_proj", 1.0), ("out_proj", 1.0)):
        p[f"{pre}{name}.weight"] = torch.randn(D, D, generator=g) * scale / math.sqrt(D)
    p.update(swiglu_params(n + 1, pre=f"{pre}ffn."))
    return p


def block_suspects(p, x, cos, sin, key_mask=None, mistakes=BLOCK_MISTAKES, select=lambda t: t):
    found = []
    for m in mistakes:
        for shared in (("attn_norm", "ffn_norm") if m == "block_shared_norm" else ("attn_norm",)):
            found.append(suspect(m, (lambda m=m, s=shared: select(ref_block(p, x, cos, sin, key_mask, m,
                                                                             shared=s))), BLOCK_HINTS[m]))
    return found


def _block(sub, p, dropout=0.0):
    return _inject(sub.new("DecoderBlock", D, H, FF, dropout=dropout), p, "DecoderBlock", BLOCK_HINT)


def _block_input(n, B=None, L=None):
    B = B or _int(n, 2, 4)
    L = L or _int(n + 1, 5, 9)
    cos, sin = table()
    return randn(n + 2, B, L, D), cos[:L], sin[:L]


def left_padded_keys(n, B, L):
    """key_mask [B, L]: each row left-padded with 1 … L - 2 pads (at least two real tokens)."""
    lead = torch.randint(1, L - 1, (B,), generator=gen(n))
    return torch.arange(L)[None, :] >= lead[:, None]


def _check_block(sub, n):
    p = block_params(n)
    x, cos, sin = _block_input(n + 5)
    out = _block(sub, p)(x, cos, sin)
    check(isinstance(out, torch.Tensor) and tuple(out.shape) == tuple(x.shape),
          msg("DecoderBlock(x, cos, sin) should return a tensor of x's shape {x_shape}", x_shape=list(x.shape)))
    want = ref_block(p, x, cos, sin)
    message = (msg("with injected weights and cos, sin = table[:L], the block should compute x = x + attn(attn_norm(x)), then x = x + ffn(ffn_norm(x)), with causal attention and RoPE on q and k"))
    # every mistake shows before the last position (where an inverted causal mask leaves no key)
    close(out[:, :-1], want[:, :-1], message, atol=ATOL,
          suspects=block_suspects(p, x, cos, sin, select=lambda t: t[:, :-1]))
    close(out, want, message, atol=ATOL, suspects=block_suspects(p, x, cos, sin))


def _passes(fn, *args):
    try:
        fn(*args)
    except (Failed, SubmissionError):
        return False
    return True


@exercise("DecoderBlock", points=0.5)
def test_block_structure(sub):
    shapes = sub.new("DecoderBlock", D, H, FF).state_shapes()
    check(isinstance(shapes, dict), msg("DecoderBlock should be an nn.Module"))
    biases = [k for k in shapes if k.endswith("bias") and k.split(".")[0] in ("q_proj", "k_proj", "v_proj",
                                                                                "out_proj")]
    check(not biases, msg("the attention projections have biases ({biases}): today's blocks have none, nn.Linear(d_model, d_model, bias=False)", biases=', '.join(biases)), mistake="block_bias")
    want = block_params(60)
    missing = [k for k in want if k not in shapes]
    check(not missing, msg("DecoderBlock has no parameter {missing}{more}: {BLOCK_HINT}", missing=', '.join(missing[:3]), more=' ...' if len(missing) > 3 else '', BLOCK_HINT=BLOCK_HINT))
    wrong = [k for k in want if shapes[k] != list(want[k].shape)]
    check(not wrong, msg("DecoderBlock({D}, {H}, {FF}): {wrong} should have shape {want_shape}", D=D, H=H, FF=FF, wrong=wrong[0] if wrong else '', want_shape=list(want[wrong[0]].shape) if wrong else ''))


@exercise("DecoderBlock", points=1.5)
def test_block_forward(sub):
    _check_block(sub, 62)


@exercise("DecoderBlock", points=1)
def test_block_key_mask(sub):
    p = block_params(64)
    B, L = _int(65, 2, 4), _int(66, 5, 9)
    x, _, _ = _block_input(67, B, L)
    keys = left_padded_keys(68, B, L)
    cos_t, sin_t = table()
    pos = positions(torch.where(keys, 1, 0), 0)  # counted from each row's first real token
    cos, sin = cos_t[pos][:, None], sin_t[pos][:, None]
    m = _block(sub, p)
    out = m(x, cos, sin, keys)
    check(isinstance(out, torch.Tensor) and tuple(out.shape) == tuple(x.shape),
          msg("DecoderBlock(x, cos, sin, key_mask) should return a tensor of x's shape {x_shape}", x_shape=list(x.shape)))
    message = (msg("with left-padded rows (key_mask False at the pads) and cos, sin of shape [B, 1, L, d/2], the real tokens must attend only to earlier real tokens"))
    want = ref_block(p, x, cos, sin, keys)[keys]
    if matches(out[keys], want, atol=ATOL):
        pass  # right, whatever the block does without a key mask
    elif _passes(_check_block, sub, 62):  # the block is right without a key mask: the mask is not
        plain = m(x, cos, sin)  # the same block without the key mask
        if matches(out[keys], plain[keys], atol=ATOL) and not matches(out[~keys], plain[~keys], atol=ATOL):
            # the mask changes the pads' own outputs only: it hides the pads' rows, not their keys
            diagnose("block_key_mask_query_axis", BLOCK_HINTS["block_key_mask_query_axis"])
        close(out[keys], want, message, atol=ATOL,
              suspects=block_suspects(p, x, cos, sin, keys, ("block_key_mask_ignored", "block_key_mask_inverted"),
                                      select=lambda t: t[keys]))
    else:  # judged against the student's own block: each row's real tokens as that row alone gives them
        for b in range(B):
            n = int(keys[b].sum())
            alone = m(x[b:b + 1, keys[b]], cos_t[:n], sin_t[:n])
            close(out[b, keys[b]], alone[0], msg("{message}: they should come out as the same row alone gives them", message=message), atol=ATOL)
    check(bool(torch.isfinite(out).all()), msg("a left pad's query has no key it may attend to, and its softmax over all -inf gives NaN, which the next layer spreads: give such rows zero weights (weights.nan_to_num(0.0), or mask with a large negative number instead of -inf)"),
          mistake="block_nan_pad_rows")


@exercise("DecoderBlock", points=0.5)
def test_block_dropout(sub):
    p = block_params(70)
    x, cos, sin = _block_input(71)
    own = _block(sub, p)(x, cos, sin)  # the student's own forward: dropout is judged against it
    m = _block(sub, p, dropout=1.0)
    m.train()
    out = m(x, cos, sin)
    check(not matches(out, own, atol=ATOL), msg("DecoderBlock(dropout=p) applies no dropout in training mode: x + dropout(attn(...)), x + dropout(ffn(...))"), mistake="block_no_dropout")
    close(out, x, msg("with dropout=1.0 in training mode both branches should be dropped entirely, leaving x: apply the dropout to each branch's output before adding it, x + dropout(attn(attn_norm(x)))"),
          atol=ATOL)
    m2 = _block(sub, p, dropout=0.5)
    close(m2(x, cos, sin), own, msg("in eval mode dropout must do nothing"), atol=ATOL)


@exercise("DecoderBlock", points=0.5)
def test_block_runs_on_the_model_device(sub):
    p = block_params(72)
    B, L = 2, 6
    x, _, _ = _block_input(73, B, L)
    keys = left_padded_keys(74, B, L)
    cos_t, sin_t = table()
    pos = positions(torch.where(keys, 1, 0), 0)
    try:
        _block(sub, p)(x, cos_t[pos][:, None], sin_t[pos][:, None], keys, forbid=(ON_DEVICE,))
    except SubmissionError as exc:
        if exc.exc_type == "DeviceMismatch":
            diagnose("block_mask_on_cpu", msg("on a GPU this forward fails: {error}; make the causal mask on the input's device, torch.ones(L, L, dtype=torch.bool, device=x.device)", error=exc.message))
        raise


# --- DecoderLM ---------------------------------------------------------------------------

LM_HINT = (msg("use the submodule names embed (nn.Embedding), blocks (nn.ModuleList of DecoderBlock), norm (RMSNorm) and lm_head (bias-free nn.Linear(d_model, vocab_size))"))
LM_HINTS = {
    "lm_embed_scaled": msg("the embeddings are multiplied by √d_model (lesson 07's TokenEmbedding): today's decoder-only models use the table as it is, x = embed(ids)"),
    "lm_no_final_norm": msg("there is no final RMSNorm: pre-norm blocks leave the stream un-normalised, so logits = lm_head(norm(x))"),
    "lm_positions_from_1": msg("positions start at 1: a row's first real token is at position 0"),
    "lm_positions_from_row_start": msg("positions are counted from the padded row's start, so left pads shift the real tokens' positions: count from each row's first real token, e.g. (ids != pad_id).cumsum(1) - 1"),
    "lm_pads_attended": msg("the real tokens attend to the pads: pass key_mask = ids != pad_id to every block"),
    "lm_pad_id_hardcoded": msg("the pads are taken as id 0: use the model's pad_id (self.pad_id; 3 here)"),
}


def lm_params(n, n_layer=2, tied=True):
    p = {}
    for i in range(n_layer):
        p.update(block_params(n + 1 + 2 * i, f"blocks.{i}."))
    g = gen(n)
    p["embed.weight"] = torch.randn(V, D, generator=g)
    p["norm.weight"] = 1.0 + 0.3 * torch.randn(D, generator=g)
    p["lm_head.weight"] = p["embed.weight"] if tied else torch.randn(V, D, generator=g) / math.sqrt(D)
    return p


def _lm(sub, n, pad_id=0, n_layer=2, tied=True, dropout=0.0, **kwargs):
    m = sub.new("DecoderLM", V, d_model=D, n_head=H, n_layer=n_layer, d_ff=FF, max_len=MAX_LEN,
                dropout=dropout, pad_id=pad_id, tie_weights=tied, **kwargs)
    p = lm_params(n, n_layer, tied)
    return _inject(m, p, "DecoderLM", LM_HINT), p


def lm_suspects(p, ids, pad_id, mistakes=tuple(LM_HINTS), select=lambda t: t, tables=None):
    found = []
    for m in mistakes:
        for by in (("first", "cumsum") if m == "lm_pad_id_hardcoded" else ("first",)):
            found.append(suspect(m, (lambda m=m, by=by: select(ref_lm(p, ids, pad_id, mistake=m, by=by,
                                                                       tables=tables))), LM_HINTS[m]))
    return found


def random_tables(n):
    """Rotary tables whose angles are random for every position: a model that reads them
    is no longer blind to a shift of all positions (RoPE proper sees only their differences),
    so where each token's position is counted from shows."""
    theta = torch.rand(MAX_LEN, DH // 2, generator=gen(n), dtype=F64) * 2 * math.pi
    return theta.cos().float(), theta.sin().float()


def lm_batch(n, pad_id, B=3, L=None):
    """ids [B, L]: row 0 unpadded, row 1 left-padded, row 2 right-padded (with pad_id); each
    row's second real token is id 0, so that pads taken as id 0 would show."""
    L = L or _int(n, 6, 9)
    g = gen(n + 1)
    ids = torch.randint(0, V - 1, (B, L), generator=g)
    ids[ids >= pad_id] += 1  # real tokens are never pad_id
    n_pad = int(torch.randint(2, L - 3, (1,), generator=g))
    keep = torch.ones(B, L, dtype=torch.bool)
    keep[1, :n_pad] = False
    keep[2, L - n_pad:] = False
    if pad_id != 0:
        ids[0, 1], ids[1, n_pad + 1], ids[2, 1] = 0, 0, 0
    return ids.masked_fill(~keep, pad_id), keep


def _logits(m, ids, **kwargs):
    out = m(ids, **kwargs)
    check(tuple(getattr(out, "shape", ())) == (*ids.shape, V), msg("forward(ids) should return logits [B, L, vocab_size] = {want}, got {out_shape}", want=[*ids.shape, V], out_shape=list(getattr(out, 'shape', []))))
    return out


@exercise("DecoderLM", points=0.5)
def test_lm_structure_and_defaults(sub):
    m = sub.new("DecoderLM", 50)
    shapes = m.state_shapes()
    check(isinstance(shapes, dict), msg("DecoderLM should be an nn.Module"))
    check("lm_head.bias" not in shapes, msg("lm_head has a bias: it is nn.Linear(d_model, vocab_size, bias=False), so that its weight can be the embedding's"), mistake="lm_head_bias")
    for name in ("embed.weight", "norm.weight", "blocks.3.ffn.w1.weight"):
        check(name in shapes, msg("DecoderLM(50) has no {name}: {LM_HINT}, n_layer=4 blocks by default", name=name, LM_HINT=LM_HINT))
    check("blocks.4.ffn.w1.weight" not in shapes, msg("DecoderLM(50) should have n_layer = 4 blocks by default"))
    check(shapes["embed.weight"] == [50, 128], msg("DecoderLM(50)'s embedding should be [vocab_size, d_model] = [50, 128] by default, got {shapes}", shapes=shapes['embed.weight']))
    d_ff = shapes["blocks.0.ffn.w1.weight"][0]
    check(d_ff == 344, msg("with d_ff=None and d_model=128 the feed-forward should be 344 wide (the multiple of 8 nearest 8/3 · 128 = 341.3), got {d_ff}: d_ff = 8 * round(8 * d_model / 3 / 8)", d_ff=d_ff),
          mistake="lm_d_ff_default")
    cos, sin = m.get("cos"), m.get("sin")
    check(isinstance(cos, torch.Tensor) and isinstance(sin, torch.Tensor), msg("DecoderLM should keep the rotary tables in buffers named cos and sin (self.register_buffer)"))
    if tuple(cos.shape) == (512, 64):
        diagnose("lm_rope_d_model", msg("the rotary tables are built for d_model: RoPE turns each head's vector, so build them with rope_angles(max_len, d_model // n_head), [512, 16] here"))
    check(tuple(cos.shape) == (512, 16) and tuple(sin.shape) == (512, 16), msg("DecoderLM(50)'s buffers cos and sin should be rope_angles(max_len, d_model // n_head) = [512, 16], got {cos_shape}", cos_shape=list(cos.shape)))
    check(m.get("pad_id") == 0, msg("the model should keep its padding id in the attribute pad_id (0 by default)"))
    small = sub.new("DecoderLM", V, d_model=D, n_head=H, n_layer=3, d_ff=FF, max_len=20, pad_id=5)
    info = small.inspect()
    check("cos" in info["buffers"] and "sin" in info["buffers"], msg("cos and sin should be registered buffers (self.register_buffer('cos', cos)), so that model.to(device) moves them"),
          mistake="lm_tables_not_buffers")
    check(tuple(info["buffers"]["cos"].shape) == (20, DH // 2), msg("DecoderLM(max_len=20, d_model={D}, n_head={H}).cos should be rope_angles(20, {d_head}), [20, {pairs}]", D=D, H=H, d_head=DH, pairs=DH // 2))
    check(small.get("pad_id") == 5, msg("DecoderLM(pad_id=5) should keep pad_id = 5"))
    check("blocks.2.ffn.w1.weight" in info["parameters"] and "blocks.3.ffn.w1.weight" not in info["parameters"],
          msg("DecoderLM(n_layer=3) should have 3 blocks"))
    check(list(info["parameters"]["blocks.0.ffn.w1.weight"].shape) == [FF, D], msg("DecoderLM(d_ff={FF}) should build blocks with that d_ff", FF=FF))


@exercise("DecoderLM", points=0.5)
def test_lm_tied_weights(sub):
    m = sub.new("DecoderLM", V, d_model=D, n_head=H, n_layer=1, d_ff=FF, max_len=MAX_LEN, tie_weights=True)
    params = m.inspect()["parameters"]
    check("embed.weight" in params, LM_HINT)
    if "lm_head.weight" in params:  # listed twice: two parameters, not one
        w = randn(80, V, D)
        m.load_state_dict({"embed.weight": w}, strict=False)
        if matches(m.get("lm_head.weight"), w):
            diagnose("lm_tied_copied", msg("with tie_weights=True lm_head.weight should be the embedding's own parameter (self.lm_head.weight = self.embed.weight): the two share their values but are two parameters, which the optimizer updates apart"))
        diagnose("lm_tied_copied", msg("with tie_weights=True lm_head.weight should be the embedding's own parameter (self.lm_head.weight = self.embed.weight), not a copy: loading a new embedding left lm_head unchanged"))
    untied = sub.new("DecoderLM", V, d_model=D, n_head=H, n_layer=1, d_ff=FF, max_len=MAX_LEN, tie_weights=False)
    names = untied.inspect(values=False)["parameters"]
    check("lm_head.weight" in names, msg("with tie_weights=False lm_head should have its own weight"),
          mistake="lm_tie_ignored")


@exercise("DecoderLM", points=1)
def test_lm_logits(sub):
    m, p = _lm(sub, 82, pad_id=V - 1)
    g = gen(83)
    ids = torch.randint(1, V - 1, (_int(84, 2, 4), _int(85, 4, 9)), generator=g)  # no pads
    ids[:, 1] = 0  # a real token 0 in every row, never its first: pads taken as id 0 show on every run
    close(_logits(m, ids), ref_lm(p, ids, V - 1), msg("with injected (tied) weights and no padding the logits should be lm_head(norm(x)) after the blocks, x = embed(ids) and positions 0 … L - 1"),
          atol=ATOL, suspects=lm_suspects(p, ids, V - 1))
    names = sub.new("DecoderLM", V, d_model=D, n_head=H, n_layer=1, d_ff=FF, max_len=MAX_LEN,
                    tie_weights=False).inspect(values=False)["parameters"]
    if "lm_head.weight" not in names:
        return  # always tied: the check of tied weights charges that
    m, p = _lm(sub, 86, pad_id=V - 1, tied=False)
    close(_logits(m, ids), ref_lm(p, ids, V - 1), msg("with tie_weights=False the logits should come from lm_head's own weight"), atol=ATOL, suspects=lm_suspects(p, ids, V - 1))


@exercise("DecoderLM", points=1)
def test_lm_padding_and_positions(sub):
    pad_id = 3
    m, p = _lm(sub, 88, pad_id=pad_id)
    tables = random_tables(87)
    m.method("__setattr__", "cos", tables[0])  # RoPE's own tables hide a shift of every position:
    m.method("__setattr__", "sin", tables[1])  # with these, where positions are counted from shows
    ids, keep = lm_batch(89, pad_id)
    out = _logits(m, ids)
    want = ref_lm(p, ids, pad_id, tables=tables)
    if not matches(out[keep], want[keep], atol=ATOL) and matches(out[keep], ref_lm(p, ids, pad_id)[keep], atol=ATOL):
        check(False, msg("forward should take the angles from the model's buffers cos and sin, indexed by each token's position (self.cos[positions]), not build new tables"))
    close(out[keep], want[keep], msg("with rows padded on the left and on the right (pad_id=3), the real tokens' logits are wrong: pads are never attended to (key_mask = ids != pad_id) and each token's position counts from its row's first real token"), atol=ATOL,
          suspects=lm_suspects(p, ids, pad_id, select=lambda t: t[keep], tables=tables))
    check(bool(torch.isfinite(out).all()), msg("the logits of a left-padded batch hold NaN or inf"))
    row = ids[1:2][keep[1:2]][None]
    close(out[1:2][keep[1:2]][None], _logits(m, row), msg("a left-padded row should give the same logits at its real tokens as the same row alone"), atol=ATOL)


@exercise("DecoderLM", points=0.5)
def test_lm_dropout(sub):
    m = sub.new("DecoderLM", V, d_model=D, n_head=H, n_layer=2, d_ff=FF, max_len=MAX_LEN, dropout=0.5)
    x, cos, sin = _block_input(90)
    for i in range(2):
        block = m.get(f"blocks.{i}")
        block.train()
        check(not torch.allclose(block(x, cos, sin), block(x, cos, sin)), msg("DecoderLM(dropout=0.5) should pass its dropout to every DecoderBlock: in training mode block {i} drops nothing", i=i),
              mistake="lm_dropout_not_passed")


@exercise("DecoderLM", points=0.5)
def test_lm_runs_on_the_model_device(sub):
    m, _ = _lm(sub, 92, pad_id=3)
    ids, _ = lm_batch(93, 3)
    try:
        _logits(m, ids, forbid=(ON_DEVICE,))
    except SubmissionError as exc:
        if exc.exc_type == "DeviceMismatch":
            if "plain tensor attribute" in exc.message:
                diagnose("lm_tables_not_buffers", msg("on a GPU this forward fails: {error}; register the tables with self.register_buffer('cos', cos) so that model.to(device) moves them", error=exc.message))
            diagnose("lm_tensor_on_cpu", msg("on a GPU this forward fails: {error}; make every tensor built inside forward on the ids' device (torch.arange(L, device=ids.device))", error=exc.message))
        raise


# --- lm_loss -----------------------------------------------------------------------------

LOSS_HINTS = {
    "loss_not_shifted": msg("the logits at position t are scored against ids[:, t], the token they already see: position t predicts the next token, so compare logits[:, :-1] with ids[:, 1:]"),
    "loss_shift_reversed": msg("the shift runs the wrong way: logits[:, :-1] (positions 0 … L - 2) predict ids[:, 1:] (the tokens after them)"),
    "loss_mask_ignored": msg("every position is counted, the prompt and the padding too: keep only the positions where loss_mask[:, 1:] is True"),
    "loss_mask_unshifted": msg("the positions are chosen with loss_mask[:, :-1]: the mask marks the targets, so it shifts with them, loss_mask[:, 1:]"),
    "loss_mean_all": msg("the masked losses are divided by the number of all positions: average over the selected positions only"),
    "loss_sum": msg("the losses are summed: lm_loss is their mean"),
}


def loss_data(n, scale=2.0):
    """logits [B, L, V], ids [B, L] and loss_mask [B, L]: a prompt, an answer (True), right pads."""
    B, L, vocab = _int(n, 2, 5), _int(n + 1, 6, 10), _int(n + 2, 5, 12)
    g = gen(n + 3)
    logits = torch.randn(B, L, vocab, generator=g) * scale
    ids = torch.randint(0, vocab, (B, L), generator=g)
    mask = torch.zeros(B, L, dtype=torch.bool)
    for b in range(B):
        start = int(torch.randint(1, L - 2, (1,), generator=g))
        end = int(torch.randint(start + 1, L + 1, (1,), generator=g))
        mask[b, start:end] = True
    return logits, ids, mask


def loss_suspects(logits, ids, mask):
    return [suspect(m, (lambda m=m: ref_loss(logits, ids, mask, m)), hint) for m, hint in LOSS_HINTS.items()]


def _loss(sub, logits, ids, mask):
    got = sub.call("lm_loss", logits, ids, mask)
    if isinstance(got, (float, int)) and not isinstance(got, bool):
        return torch.tensor(float(got))  # a number: its value is judged here, its type below
    check(isinstance(got, torch.Tensor), msg("lm_loss should return a 0-dim tensor, got a {got}", got=type(got).__name__))
    check(tuple(got.shape) == (), msg("lm_loss should return a 0-dim tensor, the mean, got shape {got_shape}", got_shape=list(got.shape)))
    return got


@exercise("lm_loss", points=0.75)
def test_lm_loss_values(sub):
    logits, ids, mask = loss_data(100)
    close(_loss(sub, logits, ids, mask), ref_loss(logits, ids, mask), msg("lm_loss should be the mean cross-entropy of logits[:, :-1] against ids[:, 1:] over the positions where loss_mask[:, 1:] is True"), atol=1e-5, suspects=loss_suspects(logits, ids, mask))


@exercise("lm_loss", points=0.5)
def test_lm_loss_only_the_answer(sub):
    logits, ids, mask = loss_data(102)
    want = ref_loss(logits, ids, mask)
    close(_loss(sub, logits, ids, mask), want, msg("with a prompt, an answer and padding in every row the loss should count the answer's tokens only"), atol=1e-5, suspects=loss_suspects(logits, ids, mask))
    other = logits.clone()
    other[:, :-1][~mask[:, 1:]] = 30.0 * torch.randn(int((~mask[:, 1:]).sum()), logits.shape[-1],
                                                     generator=gen(103))
    close(_loss(sub, other, ids, mask), want, msg("the logits that predict prompt or padding tokens must not change the loss"), atol=1e-5)


@exercise("lm_loss", points=0.5)
def test_lm_loss_large_logits(sub):
    logits, ids, mask = loss_data(104, scale=200.0)  # a confident model: some probabilities below 1e-300
    got = _loss(sub, logits, ids, mask)
    check(bool(torch.isfinite(got)), msg("with large logits the loss is not finite: log(softmax(x)) rounds tiny probabilities to 0 and log(0) = -inf; F.cross_entropy (or torch.log_softmax) subtracts the maximum first and stays finite"), mistake="loss_log_of_softmax")
    close(got, ref_loss(logits, ids, mask), msg("with large logits the loss should still be the masked cross-entropy"), atol=1e-3, rtol=1e-5, suspects=loss_suspects(logits, ids, mask))


@exercise("lm_loss", points=0.25)
def test_lm_loss_is_a_tensor(sub):
    logits, ids, mask = loss_data(106)
    got = sub.call("lm_loss", logits, ids, mask)
    check(not isinstance(got, (float, int)), msg("lm_loss returns a Python number: training calls loss.backward(), so return the 0-dim tensor itself (no .item())"), mistake="loss_not_a_tensor")
    check(isinstance(got, torch.Tensor) and tuple(got.shape) == (), msg("lm_loss should return a 0-dim tensor"))
