"""Hidden graders of lesson 08_transformer (torch).

Every layer is compared with PyTorch's own (``nn.TransformerEncoderLayer`` /
``nn.TransformerDecoderLayer``, ``batch_first=True``, both LayerNorm placements) after its
weights are copied into the student's module by name; the whole model is compared with
the same computation written out in float64 (``transformer_ref``), and checked by
properties (causality, padding invariance, left padding). ``greedy_decode`` runs against
a scripted model (the ``copy_model`` fixture), so it is graded independently of the
student's Transformer. Weights and inputs are drawn afresh for every grading run.

A wrong output is compared with the outputs of the common mistakes (``suspect``), written
as options of the float64 layers below: the one it matches is the hint.
"""

import functools
import inspect
import math

import torch

# what torch imports when these tests first differentiate (sympy: ~0.7 s), imported with the
# tests: before a class's first submission, not during it
import torch.fx.experimental.symbolic_shapes  # noqa: F401
from torch import nn

from grader.runtime.errors import SubmissionError
from grader.testkit.framework import (
    ON_DEVICE,
    Failed,
    check,
    close,
    diagnose,
    exercise,
    gen,
    identify,
    matches,
    msg,
    run_memo,
    suspect,
)

MISTAKES = {
    "ffn_no_activation": "no activation between linear1 and linear2",
    "ffn_activation_ignored": "the activation argument is ignored",
    "ffn_tanh_gelu": "the tanh approximation instead of the exact GELU",
    "ffn_dropout_ignored": "the feed-forward's dropout argument is ignored",
    "ffn_activation_after": "the activation is applied after linear2",
    "ffn_layer_names": "the feed-forward's layers are not named linear1 and linear2",
    "ffn_width": "linear1 and linear2 do not map d_model -> d_ff -> d_model (d_ff ignored or swapped)",
    "ffn_dropout_placement": "the feed-forward's dropout is not between the activation and linear2",
    "layer_submodule_names": "a layer's submodules are not named self_attn, cross_attn, ff, norm1, norm2, norm3",
    "ln_placement_swapped": "post-LN and pre-LN swapped (norm_first read the wrong way round)",
    "no_residual_attn": "no residual connection around the self-attention",
    "no_residual_ff": "no residual connection around the feed-forward",
    "no_residual_cross": "no residual connection around the cross-attention",
    "pre_ln_residual_normalised": "pre-LN adds the normalised input to the residual stream",
    "norms_swapped": "the sub-layers' norms used in each other's place (norm1, norm2, norm3 in order)",
    "src_mask_ignored": "the encoder layer ignores src_mask",
    "tgt_mask_ignored": "the decoder layer ignores tgt_mask",
    "memory_mask_ignored": "the decoder layer ignores memory_mask",
    "cross_kv_from_decoder": "cross-attention takes its keys and values from the decoder",
    "cross_keys_from_decoder": "cross-attention takes its keys from the decoder",
    "cross_queries_from_memory": "cross-attention takes its queries from memory",
    "cross_before_self": "cross-attention before self-attention",
    "pre_ln_normalised_memory": "pre-LN cross-attention normalises memory with norm2",
    "attn_no_dropout": "the attention gets no dropout (MultiHeadAttention built without it)",
    "residual_no_dropout": "no dropout on the sub-layers' outputs",
    "ff_no_dropout": "the layer's feed-forward is built without the layer's dropout",
    "dropout_in_eval_mode": "the layer still drops in eval mode (F.dropout without training=self.training)",
    "no_causal_mask": "the decoder's self-attention gets no causal mask",
    "no_tgt_padding_mask": "the target mask ignores the target's padding",
    "no_src_padding_mask": "the encoder gets no source padding mask",
    "no_memory_mask": "the decoder's cross-attention gets no memory mask",
    "pad_id_hardcoded": "the masks are built from pad id 0, not the model's pad_id",
    "no_positional_encoding": "no positional encoding",
    "no_final_norms_pre_ln": "pre-LN without the final encoder_norm / decoder_norm",
    "final_norms_post_ln": "final norms added in post-LN too",
    "norm_first_not_passed": "norm_first not passed to the layers",
    "decoder_uses_src_embed": "the decoder embeds the target with src_embed",
    "shared_layers": "one layer object repeated: the layers share their weights",
    "pos_enc_args_ignored": "max_len or dropout do not reach the PositionalEncoding",
    "layers_no_dropout": "the layers do not get the model's dropout",
    "embeddings_reinitialised": "the embeddings are re-initialised with std 1",
    "mask_on_cpu": "a mask made inside the model without device=",
    "model_submodule_names": "the model's submodules are not named as the contract says",
    "no_pad_id_attribute": "the model does not keep its padding id in the attribute pad_id",
    "logits_normalised": "forward returns (log-)probabilities instead of logits",
    "never_stops": "decoding does not stop when every row has ended",
    "drops_bos": "the decoded rows do not start with bos",
    "starts_with_pad": "decoding starts from pad instead of bos",
    "no_pad_after_eos": "tokens after a row's eos are not replaced by pad",
    "stops_at_first_eos": "decoding stops when any row ends, not every row",
    "max_len_off_by_one": "decoding returns max_len + 1 tokens",
    "no_memory_mask_decode": "greedy decoding passes no memory mask",
    "first_position_logits": "the next token is taken from the first position's logits",
    "decode_in_train_mode": "greedy decoding runs the model in training mode (dropout on)",
    "decode_output_on_cpu": "greedy decoding makes its token tensor on the CPU",
    "decode_not_long": "greedy decoding returns a floating-point tensor, not a LongTensor",
    "decode_pad_hardcoded": "greedy decoding pads with 0 instead of model.pad_id",
    "decode_with_grad": "greedy decoding runs the model with gradients on (no torch.no_grad())",
}

#: What the lesson's text (both editions) asks of each exercise, each requirement with the
#: diagnoses that grade it: ids of MISTAKES, or the shared ``library_call`` and
#: ``changes_its_input`` (tests/grader/hidden/test_requirements.py: each one declared, and proven on this
#: exercise by a planted bug; every diagnosis answers some requirement).
REQUIREMENTS = {
    "PositionwiseFeedForward": {
        "submodules named linear1 and linear2": ("ffn_layer_names",),
        "linear1 maps D -> d_ff, linear2 d_ff -> D": ("ffn_width",),
        "forward: linear2(dropout(act(linear1(x)))), the activation between the two layers":
            ("ffn_no_activation", "ffn_activation_after"),
        'activation "relu" or "gelu", the exact GELU of lesson 06':
            ("ffn_activation_ignored", "ffn_tanh_gelu"),
        "dropout (its argument) after the activation": ("ffn_dropout_ignored", "ffn_dropout_placement"),
    },
    "EncoderLayer": {
        "submodules self_attn, ff, norm1, norm2 (weights loaded by name)": ("layer_submodule_names",),
        "post-LN by default: x = norm(x + dropout(sublayer(x))), with the residual":
            ("ln_placement_swapped", "no_residual_attn", "no_residual_ff"),
        "pre-LN with norm_first=True: x = x + dropout(sublayer(norm(x)))":
            ("ln_placement_swapped", "pre_ln_residual_normalised"),
        "self-attention with norm1, then feed-forward with norm2": ("norms_swapped",),
        "src_mask reaches the self-attention (both placements)": ("src_mask_ignored",),
        "dropout passed to MultiHeadAttention and to PositionwiseFeedForward":
            ("attn_no_dropout", "ff_no_dropout"),
        "nn.Dropout(dropout) on each sub-layer's output before the residual addition":
            ("residual_no_dropout",),
        "nothing dropped in eval mode": ("dropout_in_eval_mode",),
        "torch's own attention and Transformer layers are refused (the lesson's first rule)": ("library_call",),
        "x is left as it was (the lesson's second rule: no argument changed)": ("changes_its_input",),
    },
    "DecoderLayer": {
        "submodules self_attn, cross_attn, ff, norm1, norm2, norm3 (weights loaded by name)":
            ("layer_submodule_names",),
        "masked self-attention with tgt_mask": ("tgt_mask_ignored",),
        "cross-attention: queries from the decoder, keys and values from memory (not normalised)":
            ("cross_kv_from_decoder", "cross_keys_from_decoder", "cross_queries_from_memory",
             "pre_ln_normalised_memory"),
        "memory_mask reaches the cross-attention": ("memory_mask_ignored",),
        "self-attention (norm1), then cross-attention (norm2), then feed-forward (norm3)":
            ("cross_before_self", "norms_swapped"),
        "a residual connection around each sub-layer":
            ("no_residual_attn", "no_residual_cross", "no_residual_ff"),
        "post-LN by default, pre-LN with norm_first=True, as in the encoder layer":
            ("ln_placement_swapped", "pre_ln_residual_normalised"),
        "dropout in the same places as the encoder layer (both attentions get it)":
            ("attn_no_dropout", "ff_no_dropout", "residual_no_dropout"),
        "nothing dropped in eval mode": ("dropout_in_eval_mode",),
        "torch's own attention and Transformer layers are refused (the lesson's first rule)": ("library_call",),
        "x and memory are left as they were (the lesson's second rule)": ("changes_its_input",),
    },
    "Transformer": {
        "submodules src_embed, tgt_embed, pos_enc, encoder_layers, decoder_layers, generator "
        "(encoder_norm, decoder_norm when norm_first), loaded by name": ("model_submodule_names",),
        "encoder_layers / decoder_layers: nn.ModuleLists of separate layers": ("shared_layers",),
        "attribute pad_id": ("no_pad_id_attribute",),
        "tokens embedded (× √D) plus the positional encoding; the target with tgt_embed":
            ("no_positional_encoding", "decoder_uses_src_embed"),
        "the embedding tables keep std D^-0.5": ("embeddings_reinitialised",),
        "max_len and dropout passed to PositionalEncoding, dropout to every layer":
            ("pos_enc_args_ignored", "layers_no_dropout"),
        "post-LN by default (no final norms), pre-LN with norm_first=True (encoder_norm, decoder_norm)":
            ("norm_first_not_passed", "no_final_norms_pre_ln", "final_norms_post_ln"),
        "masks built inside from pad_id: the source padding mask (encode builds it when not given)":
            ("no_src_padding_mask", "pad_id_hardcoded"),
        "memory_mask (the source padding mask) for the cross-attention": ("no_memory_mask",),
        "target mask = causal_mask(Lt) & padding_mask(tgt, pad_id)": ("no_causal_mask", "no_tgt_padding_mask"),
        "every tensor built inside on the input's device": ("mask_on_cpu",),
        "forward returns logits [B, Lt, tgt_vocab] = generator(decode(tgt, encode(src)))":
            ("logits_normalised",),
        "torch's own attention and Transformer layers are refused (the lesson's first rule)": ("library_call",),
    },
    "greedy_decode": {
        "a LongTensor [B, T]": ("decode_not_long",),
        "each row starts with bos_id": ("drops_bos", "starts_with_pad"),
        "T <= max_len, bos counted": ("max_len_off_by_one",),
        "the argmax of the last position's logits, appended and fed back": ("first_position_logits",),
        "after a row's eos every position is model.pad_id": ("no_pad_after_eos", "decode_pad_hardcoded"),
        "stops as soon as every row has ended": ("never_stops", "stops_at_first_eos"),
        "the decoder gets the memory mask": ("no_memory_mask_decode",),
        "model.eval() first": ("decode_in_train_mode",),
        "without gradients (@torch.no_grad())": ("decode_with_grad",),
        "tokens made on the source's device": ("decode_output_on_cpu",),
    },
}

# Each exercise is graded with the course's versions of the ones it builds on (grader.testkit.parts).
BUILDS_ON = {
    "EncoderLayer": ("PositionwiseFeedForward",),
    "DecoderLayer": ("PositionwiseFeedForward",),
    "Transformer": ("PositionwiseFeedForward", "EncoderLayer", "DecoderLayer"),
}

D, H, FF = 16, 4, 32
ATOL = 1e-4  # float32 against float64 (or torch's layers); every mistake is off by far more


def randn(n, *shape, scale=1.0):
    return torch.randn(*shape, generator=gen(n)) * scale


def _random_values(n, named_shapes):
    """``{name: tensor}``: random weights (LayerNorm scales around 1) so that every
    parameter matters, drawn from ``n`` in the order of ``named_shapes``."""
    g = gen(n)
    values = {}
    for name, shape in named_shapes:
        if "norm" in name and name.endswith("weight"):
            values[name] = 1.0 + 0.3 * torch.randn(shape, generator=g)
        elif name.endswith("bias"):
            values[name] = 0.2 * torch.randn(shape, generator=g)
        else:
            values[name] = torch.randn(shape, generator=g) / math.sqrt(shape[-1] if len(shape) > 1 else 1)
    return values


def _randomize(module, n):
    """``module`` with :func:`_random_values` for weights."""
    values = _random_values(n, [(name, p.shape) for name, p in module.named_parameters()])
    with torch.no_grad():
        for name, p in module.named_parameters():
            p.copy_(values[name])
    return module


def _mha_params(prefix, t, torch_prefix):
    w, b = t[f"{torch_prefix}.in_proj_weight"], t[f"{torch_prefix}.in_proj_bias"]
    out = {}
    for i, name in enumerate(("q_proj", "k_proj", "v_proj")):
        out[f"{prefix}.{name}.weight"] = w[i * D:(i + 1) * D].clone()
        out[f"{prefix}.{name}.bias"] = b[i * D:(i + 1) * D].clone()
    for kind in ("weight", "bias"):
        out[f"{prefix}.out_proj.{kind}"] = t[f"{torch_prefix}.out_proj.{kind}"].clone()
    return out


def _contract_params(t, prefix=""):
    """The weights ``t`` of a torch layer (``{torch's name: tensor}``) under the contract's names."""
    p = _mha_params(f"{prefix}self_attn", t, "self_attn")
    if "multihead_attn.in_proj_weight" in t:
        p.update(_mha_params(f"{prefix}cross_attn", t, "multihead_attn"))
    for name in ("linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias"):
        p[f"{prefix}ff.{name}"] = t[name].clone()
    for norm in ("norm1", "norm2", "norm3"):
        for kind in ("weight", "bias"):
            if f"{norm}.{kind}" in t:
                p[f"{prefix}{norm}.{kind}"] = t[f"{norm}.{kind}"].clone()
    return p


def _layer_params(layer, prefix=""):
    """The torch layer's weights under the contract's names."""
    return _contract_params({k: v.detach() for k, v in layer.named_parameters()}, prefix)


def _inject(handle, params, what, hint, names=None, sizes=None):
    """Load ``params`` into the student's module by name (keeping its other entries), in
    the order of its state dict (where two names share one tensor, the later one wins).
    ``names``, ``sizes``: the mistakes that a missing name, a wrong shape diagnose."""
    shapes = handle.state_shapes()
    check(isinstance(shapes, dict), msg("{what}.state_dict() did not return a dict: is it an nn.Module?", what=what))
    missing = [k for k in params if k not in shapes]
    check(not missing, msg("{what} has no parameter named {missing}{more}: {hint}", what=what, missing=', '.join(missing[:4]), more=' ...' if len(missing) > 4 else '', hint=hint), mistake=names)
    for k, v in params.items():
        check(shapes[k] == list(v.shape),
              msg("{what}: parameter {name} has shape {shape}, expected {want_shape}", what=what, name=k, shape=shapes[k], want_shape=list(v.shape)), mistake=sizes)
    handle.load_state_dict({k: params[k] for k in shapes if k in params}, strict=False)
    handle.eval()
    return handle


LAYER_HINT = (msg("use the submodule names self_attn, ff (with linear1 and linear2), norm1, norm2 (and cross_attn, norm3 in the decoder layer), with MultiHeadAttention's q_proj, k_proj, v_proj, out_proj"))
LAYER_NAMES = "layer_submodule_names"

#: torch's own attention, refused in every exercise (the lesson's introduction): the course's
#: MultiHeadAttention (lesson 04) computes it with lesson 03's code
FORBID = ("torch.nn.functional.multi_head_attention_forward",
          "torch.nn.functional.scaled_dot_product_attention")


#: torch's own attention and Transformer modules, by the type names a module's inspect() lists
LIBRARY_MODULES = ("torch.nn.modules.activation.MultiheadAttention", "torch.nn.modules.transformer.")


def _reveal(handle, *args, run=True):
    """``handle`` once it is known not to be built on torch's attention: its submodules are
    read (nn.MultiheadAttention or nn.Transformer* reveal themselves before the parameter
    names do) and, with ``run`` (one test of each exercise: the refusal costs a forward under
    a torch function mode), it runs on ``args`` with torch's attention functions refused
    (any other failure is left to the checks)."""
    return _revealed(handle, *args, run=run)[0]


def _revealed(handle, *args, run=True):
    """:func:`_reveal`, and the names of the module's parameters, read in the same request."""
    shown = handle.inspect(values=False)
    modules = shown.get("modules", {})
    found = sorted({"nn." + t.rsplit(".", 1)[-1] for t in modules.values() if t.startswith(LIBRARY_MODULES)})
    if found:
        diagnose("library_call", msg("`{class_name}` is built on torch's own {found}: this exercise asks you to build it from your own parts (lesson 04's MultiHeadAttention, this lesson's layers)", class_name=handle.type_name.rsplit('.', 1)[-1], found=' / '.join(found)))
    if run:
        try:
            handle(*args, forbid=FORBID)
        except SubmissionError as exc:
            if exc.exc_type == "ForbiddenCall":
                raise
    return handle, set(shown.get("parameters") or ())


def _pad_mask(keep):  # [B, L] bool, True = token -> contract mask [B, 1, 1, L]
    return keep[:, None, None, :]


def _causal(n):
    return torch.tril(torch.ones(n, n, dtype=torch.bool))


def _keep(n, batch, length, full_row=True):
    """A right-padding pattern [batch, length] (True = token), row 0 unpadded."""
    lengths = torch.randint(2, length, (batch,), generator=gen(n))
    if full_row:
        lengths[0] = length
    return torch.arange(length)[None, :] < lengths[:, None]


# --- the same computations in float64, with the common mistakes as options --------------

def _lin(p, name, x):
    return x @ p[f"{name}.weight"].double().T + p[f"{name}.bias"].double()


def _mha(p, prefix, q, k, v, mask=None):
    """Multi-head attention of the course: mask True = allowed, fully masked rows -> 0."""
    d = D // H

    def heads(t):
        return t.reshape(t.shape[0], t.shape[1], H, d).transpose(1, 2)

    qh, kh = heads(_lin(p, f"{prefix}.q_proj", q)), heads(_lin(p, f"{prefix}.k_proj", k))
    vh = heads(_lin(p, f"{prefix}.v_proj", v))
    s = qh @ kh.transpose(-2, -1) / math.sqrt(d)
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    a = torch.softmax(s, -1)
    if mask is not None:
        a = a.masked_fill(~mask, 0.0)
    out = (a @ vh).transpose(1, 2).reshape(q.shape[0], q.shape[1], D)
    return _lin(p, f"{prefix}.out_proj", out)


def _ln(p, name, x, affine=True):
    if not affine:
        return nn.functional.layer_norm(x, (D,), eps=1e-5)
    return nn.functional.layer_norm(x, (D,), p[f"{name}.weight"].double(), p[f"{name}.bias"].double(), 1e-5)


def _ff(p, prefix, x):
    return _lin(p, f"{prefix}.linear2", torch.relu(_lin(p, f"{prefix}.linear1", x)))


def encoder_ref(p, x, mask, norm_first, mistake=None, pre=""):
    x = x.double()
    mask = None if mistake == "src_mask_ignored" else mask

    def sa(h):
        return _mha(p, f"{pre}self_attn", h, h, h, mask)

    n1, n2 = (f"{pre}norm2", f"{pre}norm1") if mistake == "norms_swapped" else (f"{pre}norm1", f"{pre}norm2")
    if norm_first != (mistake == "ln_placement_swapped"):
        h = _ln(p, n1, x)
        x = (h if mistake == "pre_ln_residual_normalised" else x) + sa(h)
        return (0.0 if mistake == "no_residual_ff" else x) + _ff(p, f"{pre}ff", _ln(p, n2, x))
    x = _ln(p, n1, (0.0 if mistake == "no_residual_attn" else x) + sa(x))
    return _ln(p, n2, (0.0 if mistake == "no_residual_ff" else x) + _ff(p, f"{pre}ff", x))


def decoder_ref(p, x, mem, tgt_mask, mem_mask, norm_first, mistake=None, pre=""):
    x, mem = x.double(), mem.double()
    tgt_mask = None if mistake == "tgt_mask_ignored" else tgt_mask
    mem_mask = None if mistake == "memory_mask_ignored" else mem_mask

    def sa(h):
        return _mha(p, f"{pre}self_attn", h, h, h, tgt_mask)

    def ca(h):
        c = f"{pre}cross_attn"
        if mistake == "cross_kv_from_decoder":
            return _mha(p, c, h, h, h, mem_mask)
        if mistake == "cross_keys_from_decoder":
            return _mha(p, c, h, h, mem, mem_mask)
        if mistake == "cross_queries_from_memory":
            return _mha(p, c, mem, h, h)
        if mistake == "pre_ln_normalised_memory" and norm_first:
            m = _ln(p, f"{pre}norm2", mem)
            return _mha(p, c, h, m, m, mem_mask)
        return _mha(p, c, h, mem, mem, mem_mask)

    n1, n2, n3 = f"{pre}norm1", f"{pre}norm2", f"{pre}norm3"
    if mistake == "norms_swapped":  # the encoder's norm2 kept for the feed-forward, norm3 for the cross
        n2, n3 = n3, n2
    res_self = 0.0 if mistake == "no_residual_attn" else 1.0
    res_cross = 0.0 if mistake == "no_residual_cross" else 1.0
    if norm_first != (mistake == "ln_placement_swapped"):
        h = _ln(p, n1, x)
        x = res_self * (h if mistake == "pre_ln_residual_normalised" else x) + sa(h)
        x = res_cross * x + ca(_ln(p, n2, x))
        return x + _ff(p, f"{pre}ff", _ln(p, n3, x))
    if mistake == "cross_before_self":
        x = _ln(p, n2, x + ca(x))
        x = _ln(p, n1, x + sa(x))
    else:
        x = _ln(p, n1, res_self * x + sa(x))
        x = _ln(p, n2, res_cross * x + ca(x))
    return _ln(p, n3, (0.0 if mistake == "no_residual_ff" else x) + _ff(p, f"{pre}ff", x))


HINTS = {
    "ln_placement_swapped": msg("the layer normalises where the other placement does: with norm_first=True (pre-LN) the norm starts each branch, x + sublayer(norm(x)); with norm_first=False (post-LN) it follows the addition, norm(x + sublayer(x))"),
    "no_residual_attn": msg("the self-attention sub-layer has no residual connection: post-LN is norm1(x + self_attn(x, x, x)), keep the x +"),
    "no_residual_ff": msg("the feed-forward sub-layer has no residual connection: add its input back (x + ff(...))"),
    "no_residual_cross": msg("the cross-attention sub-layer has no residual connection: add its input back (x + cross_attn(...))"),
    "pre_ln_residual_normalised": msg("pre-LN adds the normalised input to the stream: h = norm1(x), then x = x + self_attn(h, h, h), with the un-normalised x"),
    "norms_swapped": msg("the norms are used in each other's place: each sub-layer has its own, in order: norm1 the self-attention, norm2 the next sub-layer (the encoder's feed-forward, the decoder's cross-attention), norm3 the decoder's feed-forward"),
    "src_mask_ignored": msg("src_mask does not reach the self-attention: pass it, self_attn(x, x, x, src_mask)"),
    "tgt_mask_ignored": msg("tgt_mask does not reach the self-attention: pass it, self_attn(x, x, x, tgt_mask)"),
    "memory_mask_ignored": msg("memory_mask does not reach the cross-attention: pass it, cross_attn(x, memory, memory, memory_mask)"),
    "cross_kv_from_decoder": msg("cross-attention takes its keys and values from the decoder: they come from the encoder's output, cross_attn(x, memory, memory, memory_mask)"),
    "cross_keys_from_decoder": msg("cross-attention takes its keys from the decoder: keys and values both come from memory, cross_attn(x, memory, memory, memory_mask)"),
    "cross_queries_from_memory": msg("cross-attention takes its queries from memory: the queries come from the decoder, keys and values from memory, cross_attn(x, memory, memory)"),
    "cross_before_self": msg("cross-attention runs before self-attention: the decoder first attends to what it has written (self_attn, norm1), then to the source (cross_attn, norm2)"),
    "pre_ln_normalised_memory": msg("norm2 is applied to memory too: in pre-LN only the decoder's stream is normalised, cross_attn(norm2(x), memory, memory)"),
}


def layer_suspects(ref, mistakes, *args):
    return [suspect(m, (lambda m=m: ref(*args, mistake=m)), HINTS[m]) for m in mistakes]


ENC_MISTAKES = ("ln_placement_swapped", "no_residual_attn", "no_residual_ff", "pre_ln_residual_normalised",
                "norms_swapped", "src_mask_ignored")
DEC_MISTAKES = ("ln_placement_swapped", "no_residual_attn", "no_residual_ff", "no_residual_cross",
                "pre_ln_normalised_memory", "tgt_mask_ignored", "memory_mask_ignored",
                "cross_kv_from_decoder", "cross_keys_from_decoder", "cross_queries_from_memory",
                "cross_before_self", "pre_ln_residual_normalised", "norms_swapped")


# --- PositionwiseFeedForward ----------------------------------------------------------

def _ffn_params(n, d_ff=FF):
    g = gen(n)
    return {"linear1.weight": torch.randn(d_ff, D, generator=g) / 4,
            "linear1.bias": 0.3 * torch.randn(d_ff, generator=g),
            "linear2.weight": torch.randn(D, d_ff, generator=g) / math.sqrt(d_ff),
            "linear2.bias": 0.3 * torch.randn(D, generator=g)}


def _ffn_oracle(p, x, act, after=False):
    h = act(x @ p["linear1.weight"].T + p["linear1.bias"]) if not after else x @ p["linear1.weight"].T + p["linear1.bias"]
    y = h @ p["linear2.weight"].T + p["linear2.bias"]
    return act(y) if after else y


FFN_HINT = msg("name the layers linear1 (d_model -> d_ff) and linear2 (d_ff -> d_model)")


def _inject_ffn(handle, p):
    return _inject(handle, p, "PositionwiseFeedForward", FFN_HINT, "ffn_layer_names", "ffn_width")


def ffn_suspects(p, x, activation):
    def tanh_gelu(t):
        return nn.functional.gelu(t, approximate="tanh")

    act = torch.relu if activation == "relu" else nn.functional.gelu
    return [
        suspect("ffn_no_activation", _ffn_oracle(p, x, lambda t: t), msg("there is no activation between linear1 and linear2: two linear maps in a row are just one linear map")),
        suspect("ffn_activation_ignored", _ffn_oracle(p, x, torch.relu) if activation == "gelu" else None,
                msg("with activation=\"gelu\" the layer still uses ReLU: pick the activation from the argument (gelu of lesson 06 for \"gelu\")")),
        suspect("ffn_tanh_gelu", _ffn_oracle(p, x, tanh_gelu) if activation == "gelu" else None,
                msg("with activation=\"gelu\" the activation should be the exact GELU x·Φ(x) (gelu of lesson 06), not its tanh approximation")),
        suspect("ffn_activation_after", _ffn_oracle(p, x, act, after=True), msg("the activation is applied after linear2: FFN(x) = linear2(act(linear1(x)))")),
    ]


def _x(n, B=3, L=7):
    return randn(n, B, L, D)


@exercise("PositionwiseFeedForward", points=1)
def test_ffn_relu(sub):
    p, x = _ffn_params(10), _x(11)
    ff = _inject_ffn(sub.new("PositionwiseFeedForward", D, FF), p)
    close(ff(x), _ffn_oracle(p, x, torch.relu), msg("FFN(x) should be linear2(relu(linear1(x))) at every position"), atol=ATOL, suspects=ffn_suspects(p, x, "relu"))


@exercise("PositionwiseFeedForward", points=1)
def test_ffn_gelu(sub):
    p, x = _ffn_params(12), _x(13)
    ff = _inject_ffn(sub.new("PositionwiseFeedForward", D, FF, activation="gelu"), p)
    close(ff(x), _ffn_oracle(p, x, nn.functional.gelu), msg("with activation=\"gelu\" the layer should be linear2(gelu(linear1(x))) with the exact GELU x·Φ(x) of lesson 06"), atol=ATOL,
          suspects=ffn_suspects(p, x, "gelu"))
    ff2 = _inject_ffn(sub.new("PositionwiseFeedForward", D, FF, 0.0, "relu"), p)
    close(ff2(x), _ffn_oracle(p, x, torch.relu), msg("with activation=\"relu\" the activation should be ReLU"), atol=ATOL, suspects=ffn_suspects(p, x, "relu"))


@exercise("PositionwiseFeedForward", points=0.5)
def test_ffn_sizes(sub):
    ff = sub.new("PositionwiseFeedForward", 6, 20)  # d_ff not 4 · d_model: the argument is used
    params = ff.inspect()["parameters"]
    check("linear1.weight" in params and "linear2.weight" in params,
          msg("PositionwiseFeedForward has no parameters linear1.weight and linear2.weight (found {params}): {FFN_HINT}, so that weights load by name", params=', '.join(sorted(params)[:4]) or 'none', FFN_HINT=FFN_HINT),
          mistake="ffn_layer_names")
    shapes = [list(params[f"linear{i}.weight"].shape) for i in (1, 2)]
    check(shapes == [[20, 6], [6, 20]], msg("PositionwiseFeedForward(d_model=6, d_ff=20): linear1 should map d_model -> d_ff (weight [20, 6]) and linear2 d_ff -> d_model (weight [6, 20]), got {linear1_shape} and {linear2_shape}", linear1_shape=shapes[0], linear2_shape=shapes[1]), mistake="ffn_width")
    out = ff(randn(14, 2, 3, 6))
    check(tuple(out.shape) == (2, 3, 6), msg("the output should have the input's shape [B, L, d_model]"))


@exercise("PositionwiseFeedForward", points=0.5)
def test_ffn_dropout(sub):
    p, x = _ffn_params(15, 64), _x(16)
    ff = _inject_ffn(sub.new("PositionwiseFeedForward", D, 64, dropout=0.5), p)
    close(ff(x), _ffn_oracle(p, x, torch.relu), msg("in eval mode dropout must do nothing"), atol=ATOL)
    ff.train()
    out = ff(x)
    check(not torch.allclose(out, _ffn_oracle(p, x, torch.relu), atol=1e-4),
          msg("with dropout=0.5 in training mode some activations should be dropped: pass the dropout argument to nn.Dropout, after the activation"), mistake="ffn_dropout_ignored")
    # where: with linear1's weight 0 and its bias 1 every activation is 1, whatever x. Dropout
    # after the activation zeroes some of them and linear2's sums vary; on the input it
    # changes nothing, on the output it zeroes whole outputs
    ff.load_state_dict(dict(p, **{"linear1.weight": torch.zeros(64, D), "linear1.bias": torch.ones(64)}))
    ff.train()
    got = ff(x)
    steady = (p["linear2.weight"].sum(1) + p["linear2.bias"]).expand_as(got)
    check(not torch.allclose(got, steady, atol=1e-5), msg("with dropout=0.5 in training mode the feed-forward drops its input: dropout goes between the activation and linear2, linear2(dropout(act(linear1(x))))"), mistake="ffn_dropout_placement")
    check(float((got.abs() < 1e-7).float().mean()) < 0.2, msg("with dropout=0.5 in training mode the feed-forward drops its output: dropout goes between the activation and linear2, linear2(dropout(act(linear1(x))))"), mistake="ffn_dropout_placement")


# --- EncoderLayer ----------------------------------------------------------------------

def _torch_encoder(norm_first, n):
    with torch.random.fork_rng(devices=[]):
        layer = nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, batch_first=True, norm_first=norm_first)
    return _randomize(layer, n).train()  # train mode: no fast path; dropout is 0


def _student_encoder(sub, norm_first, layer):
    ours = _reveal(sub.new("EncoderLayer", D, H, FF, dropout=0.0, norm_first=norm_first), run=False)
    return _inject(ours, _layer_params(layer), "EncoderLayer", LAYER_HINT, LAYER_NAMES)


def _layers(sub, name, norm_first, n, refuse):
    """torch's layer with the weights drawn from ``n``, the student's ``name`` holding them
    (built once in a grading run, shared by the tests of the layer: they only run it), and
    the ``forbid`` of the check's first call of it: with ``refuse``, torch's attention
    refused until one call has run so in this grading run (:func:`_refused`), as
    :func:`_reveal` would refuse it in a call of its own."""
    key = ("layers", id(sub), name, norm_first, n)
    memo = run_memo()
    if key not in memo:
        layer = (_torch_encoder if name == "EncoderLayer" else _torch_decoder)(norm_first, n)
        ours = (_student_encoder if name == "EncoderLayer" else _student_decoder)(sub, norm_first, layer)
        memo[key] = layer, ours
    layer, ours = memo[key]
    return layer, ours, FORBID if refuse and not memo.get(key + ("refused",)) else ()


def _refused(sub, name, norm_first, n, result, forbid):
    """``result()``, the output of a call sent with ``forbid`` (:func:`_layers`); a call that
    ran with torch's attention refused marks the layer refused in this grading run,
    whatever else it raised (the checks charge that), as :func:`_reveal` does."""
    try:
        return result()
    except SubmissionError as exc:
        if exc.exc_type == "ForbiddenCall":
            forbid = ()  # not refused: every test that refuses it charges it
        raise
    finally:
        if forbid:
            run_memo()[("layers", id(sub), name, norm_first, n, "refused")] = True


def _check_encoder(sub, norm_first, n, masks=((None, None, ""),), refuse=True, inputs=None):
    """Check the layer with weights drawn from ``n`` under each of ``masks``, ``(mask,
    torch's mask arguments, what)``, each on its own input (drawn from ``inputs``, by default
    ``n``). ``refuse``: its first call with torch's attention refused (:func:`_layers`); a
    test that checks several layers does it for its first only."""
    inputs = n if inputs is None else inputs
    x = _x(inputs + 1)
    layer, ours, forbid = _layers(sub, "EncoderLayer", norm_first, n, refuse)
    p = _layer_params(layer)
    placement = (msg("pre-LN (norm_first=True): x = x + self_attn(h, h, h) with h = norm1(x), then x = x + ff(norm2(x))") if norm_first else
                 msg("post-LN (norm_first=False, the paper): x = norm1(x + self_attn(x, x, x)), then x = norm2(x + ff(x))"))
    for i, (mask, torch_mask, what) in enumerate(masks):
        x = x if i == 0 else _x(inputs + 1 + i)
        out = posted(sub, ours, "__call__", *((x, mask) if mask is not None else (x,)), forbid=forbid)
        want = layer(x, **(torch_mask or {}))  # while the worker runs the student's layer
        got, forbid = _refused(sub, "EncoderLayer", norm_first, n, out, forbid), ()
        close(got, want, msg("{what}the layer should compute {placement}, as nn.TransformerEncoderLayer does with the same weights", what=what, placement=placement), atol=ATOL,
              suspects=layer_suspects(encoder_ref, ENC_MISTAKES, p, x, mask, norm_first))


@exercise("EncoderLayer", points=1)
def test_encoder_post_ln(sub):
    branch(_check_encoder, sub, False, 20)


@exercise("EncoderLayer", points=1)
def test_encoder_pre_ln(sub):
    branch(_check_encoder, sub, True, 22)


@exercise("EncoderLayer", points=1)
def test_encoder_masks(sub):
    keep = _keep(24, 3, 7)
    judged = [nf for nf in (False, True) if _passes(_check_encoder, sub, nf, 20 + 2 * nf, refuse=not nf)]
    check(judged, MASKS_UNJUDGED)  # a branch wrong without masks is charged by its own check
    for norm_first in judged:  # every mask in both branches: each has its own calls
        padded, causal = ((
            msg("pre-LN with a padding mask src_mask [B, 1, 1, L] no position may attend to padding: "),
            msg("pre-LN with an [L, L] src_mask (True = may attend): ")) if norm_first else (
            msg("post-LN with a padding mask src_mask [B, 1, 1, L] no position may attend to padding: "),
            msg("post-LN with an [L, L] src_mask (True = may attend): ")))
        _check_encoder(sub, norm_first, 20 + 2 * norm_first, ((_pad_mask(keep), {"src_key_padding_mask": ~keep}, padded),
                                                              (_causal(7), {"src_mask": ~_causal(7)}, causal)),
                       refuse=False, inputs=25 + 3 * norm_first)  # the branch's layer, both masks


MASKS_UNJUDGED = (msg("the layer is wrong without masks in both branches (post-LN and pre-LN), so its masks cannot be checked yet: fix the layer first"))


def _passes(check_layer, sub, norm_first, n, refuse=False):
    """Whether the layer's branch passes its own unmasked check (``_check_encoder`` or
    ``_check_decoder``), so that a mask check judges the mask alone; a layer built on
    torch's attention (``refuse``) is charged at once. The outcome of the branch's own
    test in this grading run (:func:`branch`) is taken as it is: the same check."""
    known = run_memo().get((check_layer.__name__, id(sub), norm_first, n))
    if known is not None:
        return known
    try:
        branch(check_layer, sub, norm_first, n, refuse=refuse)
    except SubmissionError as exc:
        if exc.exc_type == "ForbiddenCall":
            raise
        return False
    except Failed as exc:
        if exc.mistake == "library_call":
            raise
        return False
    return True


def branch(check_layer, sub, norm_first, n, refuse=True):
    """``check_layer(sub, norm_first, n)``, its outcome kept for :func:`_passes` in this
    grading run: passed or failed, but not refused as built on torch's attention (that is
    charged where it is found). Without torch's attention ``refuse`` changes nothing."""
    key = (check_layer.__name__, id(sub), norm_first, n)
    try:
        out = check_layer(sub, norm_first, n, refuse=refuse)
    except SubmissionError as exc:
        if exc.exc_type != "ForbiddenCall":
            run_memo()[key] = False
        raise
    except Failed as exc:
        if exc.mistake != "library_call":
            run_memo()[key] = False
        raise
    run_memo()[key] = True
    return out


def check_layer_dropout(sub, name, n, sublayers):
    """Dropout where nn.Transformer*Layer puts it: the attention weights (the MultiHeadAttention
    is built with the layer's dropout), inside the feed-forward, and on every sub-layer's
    output before the residual addition. Pre-LN makes the last one readable: with values
    zeroed and linear2's weight zeroed, each sub-layer outputs a constant c_k, so the layer
    adds Σ_k dropout(c_k) to x; with c_k = 1, 10, 100 every mix of kept and dropped shows."""
    p = 0.5
    m = _reveal(sub.new(name, D, H, FF, dropout=p, norm_first=True), run=False)
    shapes = m.state_shapes() or {}  # names and shapes: the weights below are set, never read
    names = set(shapes)
    check(all(f"{s}.q_proj.weight" in names for s in sublayers[:-1]) and "ff.linear2.weight" in names,
          LAYER_HINT, mistake=LAYER_NAMES)
    # 0. eval mode: no dropout anywhere, so two calls agree
    x = _x(n + 3, 4, 12)
    args = (x,) if len(sublayers) == 2 else (x, _x(n + 4, 4, 5))
    m.eval()
    check(torch.equal(*twice(sub, m, *args)), msg("{name}(dropout={p}) in eval mode gives a different output at every call: nothing may be dropped after model.eval(); use nn.Dropout modules, which follow the mode (F.dropout drops unless given training=self.training)", name=name, p=p),
          mistake="dropout_in_eval_mode")
    m.train()
    # 1. attention dropout: uniform weights, values = 1, out_proj the identity
    for s in sublayers[:-1]:
        attn = m.get(s)
        state = {key[len(s) + 1:]: torch.zeros(shape) for key, shape in shapes.items()
                 if key.startswith(f"{s}.") and shape is not None}
        state["v_proj.bias"] = torch.ones(D)
        state["out_proj.weight"] = torch.eye(D)
        attn.load_state_dict(state)
        attn.train()
        x = _x(n, 4, 12)
        out = attn(x, x, x)
        check(not torch.allclose(out, torch.ones_like(out), atol=1e-6),
              msg("{name}({D}, {H}, {FF}, dropout={p}): `{s}` applies no dropout to its attention weights in training mode: build it with the layer's dropout, MultiHeadAttention(d_model, n_head, dropout)", name=name, D=D, H=H, FF=FF, p=p, s=s), mistake="attn_no_dropout")
    # 1b. the feed-forward's dropout: in training mode two calls differ
    ff = m.get("ff")
    ff.train()
    x = _x(n + 5, 4, 12)
    check(not torch.equal(*twice(sub, ff, x)), msg("{name}({D}, {H}, {FF}, dropout={p}): `ff` applies no dropout in training mode: build it with the layer's dropout, PositionwiseFeedForward(d_model, d_ff, dropout)", name=name, D=D, H=H, FF=FF, p=p), mistake="ff_no_dropout")
    # 2. residual dropout on each sub-layer's output
    state = {}  # the entries changed, loaded over the others
    constants = [1.0, 10.0, 100.0][:len(sublayers)]
    for s, c in zip(sublayers[:-1], constants, strict=False):
        state[f"{s}.v_proj.weight"] = torch.zeros(shapes[f"{s}.v_proj.weight"])
        state[f"{s}.v_proj.bias"] = torch.zeros(shapes[f"{s}.v_proj.bias"])
        state[f"{s}.out_proj.bias"] = torch.full(shapes[f"{s}.out_proj.bias"], c)
    state["ff.linear2.weight"] = torch.zeros(shapes["ff.linear2.weight"])
    state["ff.linear2.bias"] = torch.full(shapes["ff.linear2.bias"], constants[-1])
    m.load_state_dict(state, strict=False)
    x = _x(n + 1, 8, 12)
    args = (x,) if len(sublayers) == 2 else (x, _x(n + 2, 8, 5))
    m.eval()
    if not torch.allclose(m(*args) - x, torch.full_like(x, sum(constants)), atol=1e-3):
        return  # the pre-LN layer itself is wrong: its own check charges that
    m.train()
    added = (m(*args) - x).double()
    kept = [torch.isclose(added, torch.full_like(added, sum(c / (1 - p) * k for c, k in zip(constants, bits, strict=True))),
                          atol=1e-3)
            for bits in _bit_patterns(len(constants))]
    explained = torch.stack(kept).any(0)
    full = torch.isclose(added, torch.full_like(added, sum(constants)), atol=1e-3)
    check(not full.all(), msg("{name}(dropout={p}) in training mode applies no dropout to the sub-layers' outputs: x + dropout(sublayer(...)), one nn.Dropout(dropout) per residual (or one shared module)", name=name, p=p), mistake="residual_no_dropout")
    both_dropped = float(kept[0].float().mean())  # expected p ** (number of sub-layers)
    check(bool(explained.all()) and abs(both_dropped - p ** len(constants)) < 0.1,
          msg("{name}(dropout={p}) in training mode should drop each sub-layer's output with probability {p} (and scale the rest by 1/(1 - p)) before adding it to x", name=name, p=p),
          mistake="residual_no_dropout")


def twice(sub, module, *args):
    """Two calls ``module(*args)``, sent together (one round trip)."""
    with sub.batch() as b:
        calls = [b.method(module, "__call__", *args) for _ in range(2)]
    return [call.value for call in calls]


def _bit_patterns(k):
    return [[(i >> j) & 1 for j in range(k)] for i in range(2 ** k)]


@exercise("EncoderLayer", points=1)
def test_encoder_dropout_where_the_paper_puts_it(sub):
    check_layer_dropout(sub, "EncoderLayer", 30, ["self_attn", "ff"])


# --- DecoderLayer ----------------------------------------------------------------------

def _torch_decoder(norm_first, n):
    with torch.random.fork_rng(devices=[]):
        layer = nn.TransformerDecoderLayer(D, H, FF, dropout=0.0, batch_first=True, norm_first=norm_first)
    return _randomize(layer, n).train()


def _student_decoder(sub, norm_first, layer):
    ours = _reveal(sub.new("DecoderLayer", D, H, FF, dropout=0.0, norm_first=norm_first), run=False)
    return _inject(ours, _layer_params(layer), "DecoderLayer", LAYER_HINT, LAYER_NAMES)


def _check_decoder(sub, norm_first, n, tgt_mask=None, mem_mask=None, what="", refuse=True, inputs=None):
    """Check the layer with weights drawn from ``n`` on inputs drawn from ``inputs`` (by
    default ``n``), as ``_check_encoder``."""
    inputs = n if inputs is None else inputs
    x, mem = randn(inputs + 1, 3, 6, D), randn(inputs + 2, 3, 5, D)
    layer, ours, forbid = _layers(sub, "DecoderLayer", norm_first, n, refuse)
    p = _layer_params(layer)
    kwargs = {k: v for k, v in (("tgt_mask", tgt_mask), ("memory_mask", mem_mask)) if v is not None}
    placement = (msg("pre-LN: x = x + self_attn(h, h, h) with h = norm1(x), x = x + cross_attn(norm2(x), memory, memory), x = x + ff(norm3(x))") if norm_first else
                 msg("post-LN: x = norm1(x + self_attn(x, x, x)), x = norm2(x + cross_attn(x, memory, memory)), x = norm3(x + ff(x))"))
    message = (msg("{what}the decoder layer should compute {placement} (queries from the decoder, keys and values from memory), as nn.TransformerDecoderLayer does with the same weights", what=what, placement=placement))
    torch_kwargs = {}
    if tgt_mask is not None:
        torch_kwargs["tgt_mask"] = ~tgt_mask
    if mem_mask is not None:
        torch_kwargs["memory_key_padding_mask"] = ~mem_mask[:, 0, 0, :]
    forward = posted(sub, ours, "__call__", x, mem, forbid=forbid, **kwargs)
    want = layer(x, mem, **torch_kwargs)  # while the worker runs the student's layer
    try:
        out = _refused(sub, "DecoderLayer", norm_first, n, forward, forbid)
    except SubmissionError as exc:
        if exc.exc_type == "ForbiddenCall":
            raise
        # a target of 6 and a memory of 5 positions made it fail: with equal lengths the
        # same mistake runs, and the output tells which one it is
        x5 = x[:, :5]
        t5 = tgt_mask[:5, :5] if tgt_mask is not None else None
        try:
            out5 = ours(x5, mem, **dict(kwargs, **({"tgt_mask": t5} if t5 is not None else {})))
        except SubmissionError:
            raise
        found = identify(out5, decoder_ref(p, x5, mem, t5, mem_mask, norm_first), layer_suspects(
            decoder_ref, DEC_MISTAKES, p, x5, mem, t5, mem_mask, norm_first), atol=ATOL)
        if found is not None:
            diagnose(found.mistake, msg("{hint} (with a target of 6 and a memory of 5 positions the layer fails)", hint=found.message))
        raise
    close(out, want, message, atol=ATOL, suspects=layer_suspects(
        decoder_ref, DEC_MISTAKES, p, x, mem, tgt_mask, mem_mask, norm_first))
    return ours, x, mem, out


@exercise("DecoderLayer", points=1)
def test_decoder_post_ln(sub):
    branch(_check_decoder, sub, False, 40)


@exercise("DecoderLayer", points=1)
def test_decoder_pre_ln(sub):
    branch(_check_decoder, sub, True, 43)


@exercise("DecoderLayer", points=0.75)
def test_decoder_target_mask(sub):
    ours, x, mem, out = _check_decoder(sub, False, 40, tgt_mask=_causal(6), inputs=46,
                                       what=msg("with a causal tgt_mask [Lt, Lt]: "))
    changed = x.clone()
    changed[:, 3:] = randn(49, 3, 3, D)
    close(ours(changed, mem, tgt_mask=_causal(6))[:, :3], out[:, :3],
          msg("with the causal tgt_mask, changing later target positions must not change earlier outputs"), atol=ATOL)


@exercise("DecoderLayer", points=0.75)
def test_decoder_masks_in_both_branches(sub):
    keep = _keep(50, 3, 5)
    judged = [nf for nf in (True, False) if _passes(_check_decoder, sub, nf, 40 + 3 * nf, refuse=nf)]
    check(judged, MASKS_UNJUDGED)  # a branch wrong without masks is charged by its own check
    for norm_first in judged:  # every mask in both branches: each has its own calls
        _check_decoder(sub, norm_first, 40 + 3 * norm_first, tgt_mask=_causal(6), mem_mask=_pad_mask(keep),
                       refuse=False, inputs=51 + 3 * norm_first,
                       what=msg("pre-LN with a causal tgt_mask and memory_mask [B, 1, 1, Ls] the cross-attention must not look at the source's padding: ") if norm_first else
                       msg("post-LN with a causal tgt_mask and memory_mask [B, 1, 1, Ls] the cross-attention must not look at the source's padding: "))


@exercise("DecoderLayer", points=0.5)
def test_decoder_dropout_where_the_paper_puts_it(sub):
    check_layer_dropout(sub, "DecoderLayer", 55, ["self_attn", "cross_attn", "ff"])


# --- Transformer -----------------------------------------------------------------------

SV, TV = 11, 13
REVEAL_TOKENS = (torch.tensor([[3, 4, 5, 2]]), torch.tensor([[1, 6, 7]]))  # src, tgt


def _pe(n, d, first=0):
    pos = torch.arange(first, first + n, dtype=torch.float64)[:, None]
    i = torch.arange(0, d, 2, dtype=torch.float64)
    angle = pos / torch.pow(10000.0, i / d)
    pe = torch.zeros(n, d, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(angle), torch.cos(angle)
    return pe


@functools.cache
def _torch_shapes(kind):
    """``(name, shape)`` of the parameters of torch's encoder or decoder layer, in its order."""
    layer = (_torch_encoder if kind == "encoder" else _torch_decoder)(False, 0)
    return tuple((name, p.shape) for name, p in layer.named_parameters())


def transformer_params(n, norm_first, n_enc=2, n_dec=2):
    """Random weights under the contract's names: those of torch's layers randomised
    (:func:`_randomize`), drawn without building them."""
    p = {}
    for i in range(n_enc):
        p.update(_contract_params(_random_values(n + i, _torch_shapes("encoder")), f"encoder_layers.{i}."))
    for i in range(n_dec):
        p.update(_contract_params(_random_values(n + 10 + i, _torch_shapes("decoder")), f"decoder_layers.{i}."))
    g = gen(n + 99)
    p["src_embed.embedding.weight"] = torch.randn(SV, D, generator=g) / math.sqrt(D)
    p["tgt_embed.embedding.weight"] = torch.randn(TV, D, generator=g) / math.sqrt(D)
    p["generator.weight"] = torch.randn(TV, D, generator=g) / math.sqrt(D)
    p["generator.bias"] = 0.1 * torch.randn(TV, generator=g)
    if norm_first:
        for name in ("encoder_norm", "decoder_norm"):
            p[f"{name}.weight"] = 1.0 + 0.3 * torch.randn(D, generator=g)
            p[f"{name}.bias"] = 0.2 * torch.randn(D, generator=g)
    return p


@functools.cache
def _param_names(norm_first, n_enc, n_dec):
    """The names of :func:`transformer_params` (the same in every grading run)."""
    return frozenset(transformer_params(0, norm_first, n_enc, n_dec))


class OwnLayers:
    """The student's own EncoderLayer and DecoderLayer holding the weights of ``p``, built on
    demand: the Transformer is judged on how it assembles its layers (masks, embeddings,
    positions, final norms), so a mistake inside a layer costs that layer's points only."""

    def __init__(self, sub, p):
        self.sub, self.p, self.n = sub, p, _depth(p)
        self.cache = {}

    def _layer(self, name, prefix, norm_first):
        own = {k[len(prefix):]: v for k, v in self.p.items() if k.startswith(prefix)}
        return _inject(self.sub.new(name, D, H, FF, dropout=0.0, norm_first=norm_first), own, name, LAYER_HINT)

    def get(self, norm_first):
        if norm_first not in self.cache:
            self.cache[norm_first] = (
                [self._layer("EncoderLayer", f"encoder_layers.{i}.", norm_first) for i in range(self.n[0])],
                [self._layer("DecoderLayer", f"decoder_layers.{i}.", norm_first) for i in range(self.n[1])])
        return self.cache[norm_first]


def _depth(p):
    """``(n_enc, n_dec)``: the numbers of encoder and decoder layers whose weights ``p`` holds."""
    return tuple(sum(k.startswith(f"{stack}.") and k.endswith(".self_attn.q_proj.weight") for k in p)
                 for stack in ("encoder_layers", "decoder_layers"))


def transformer_ref(p, src, tgt, norm_first, pad_id, mistake=None, part="logits", layers=None):
    """The lesson's Transformer in float64 (masks built from pad_id), with the common
    mistakes as options, as deep as ``p``; ``part="memory"`` returns the encoder's output.
    With ``layers`` (an ``OwnLayers``), the student's own layers do the layers' work."""
    n_enc, n_dec = _depth(p)
    pad = 0 if mistake == "pad_id_hardcoded" else pad_id
    src_mask = (src != pad)[:, None, None, :]
    Lt = tgt.shape[1]
    causal = _causal(Lt)
    tgt_pad = (tgt != pad)[:, None, None, :]
    tgt_mask = {"no_causal_mask": tgt_pad, "no_tgt_padding_mask": causal}.get(mistake, causal & tgt_pad)
    pe = not mistake == "no_positional_encoding"
    layers_first = False if mistake == "norm_first_not_passed" else norm_first

    def embed(table, t):
        x = p[f"{table}.embedding.weight"].double()[t] * math.sqrt(D)
        return x + _pe(t.shape[1], D) if pe else x

    def final(name, x):
        if norm_first and mistake != "no_final_norms_pre_ln":
            return _ln(p, name, x)
        return _ln(p, name, x, affine=False) if mistake == "final_norms_post_ln" else x

    def encoder(i, x, mask):
        i = 0 if mistake == "shared_layers" else i
        if layers is not None:
            return layers.get(layers_first)[0][i](x.float(), mask).double()
        return encoder_ref(p, x, mask, layers_first, pre=f"encoder_layers.{i}.")

    def decoder(i, y, memory, mask, mem_mask):
        if layers is not None:
            return layers.get(layers_first)[1][i](y.float(), memory.float(), mask, mem_mask).double()
        return decoder_ref(p, y, memory, mask, mem_mask, layers_first, pre=f"decoder_layers.{i}.")

    x = embed("src_embed", src)
    for i in range(n_enc):
        x = encoder(i, x, None if mistake == "no_src_padding_mask" else src_mask)
    memory = final("encoder_norm", x)
    if part == "memory":
        return memory
    y = embed("src_embed" if mistake == "decoder_uses_src_embed" else "tgt_embed", tgt)
    for i in range(n_dec):
        y = decoder(i, y, memory, tgt_mask, None if mistake == "no_memory_mask" else src_mask)
    logits = _lin(p, "generator", final("decoder_norm", y))
    if mistake == "logits_normalised":
        return torch.log_softmax(logits, -1)
    return torch.softmax(logits, -1) if mistake == "logits_softmax" else logits


def judged(sub, p, src, tgt, norm_first, pad_id, part="logits"):
    """The expected output, and the ``layers`` to judge suspects with: the student's own
    layers when they can be built and run, else the right ones."""
    own = OwnLayers(sub, p)
    try:
        return transformer_ref(p, src, tgt, norm_first, pad_id, part=part, layers=own), own
    except (Failed, SubmissionError):
        return transformer_ref(p, src, tgt, norm_first, pad_id, part=part), None


def close_judged(sub, p, got, src, tgt, norm_first, pad_id, message, part="logits", select=lambda t: t):
    """``close(select(got), select(expected), message)``, ``expected`` as :func:`judged` has
    it. An output that matches the right model passes without building the student's own
    layers: they only decide whether a wrong output is the Transformer's fault. ``got`` may be
    a function that reads a call sent without waiting (:func:`posted`): the right model runs
    here meanwhile."""
    right = transformer_ref(p, src, tgt, norm_first, pad_id, part=part)
    got = got() if callable(got) else got
    if matches(select(got), select(right), atol=ATOL):
        return
    want, own = judged(sub, p, src, tgt, norm_first, pad_id, part=part)
    close(select(got), select(want), message, atol=ATOL,
          suspects=transformer_suspects(p, src, tgt, norm_first, pad_id, own, part=part, select=select))


TRANSFORMER_HINTS = {
    "no_causal_mask": msg("the decoder's self-attention has no causal mask, so each position sees the target tokens after it: tgt_mask = causal_mask(Lt) & padding_mask(tgt, pad_id)"),
    "no_tgt_padding_mask": msg("the target mask ignores the target's padding: with a left-padded target the real tokens attend to the pads; tgt_mask = causal_mask(Lt) & padding_mask(tgt, pad_id)"),
    "no_src_padding_mask": msg("the encoder's self-attention gets no source padding mask: pass padding_mask(src, pad_id) to every encoder layer"),
    "no_memory_mask": msg("the decoder's cross-attention gets no memory mask, so it attends to the source's padding: pass padding_mask(src, pad_id) as memory_mask"),
    "pad_id_hardcoded": msg("the masks are built from pad id 0: build them from the model's pad_id (self.pad_id; 3 here)"),
    "no_positional_encoding": msg("no positional encoding is added: x = pos_enc(embed(tokens)) for the source and the target"),
    "no_final_norms_pre_ln": msg("with norm_first=True each stack should end with its final LayerNorm: encoder_norm on the memory, decoder_norm before the generator"),
    "final_norms_post_ln": msg("post-LN (norm_first=False) has no final norms: the last layer already ends with a LayerNorm (nn.Transformer adds them anyway)"),
    "norm_first_not_passed": msg("the layers run post-LN although norm_first=True: pass norm_first to every EncoderLayer and DecoderLayer"),
    "decoder_uses_src_embed": msg("the target is embedded with src_embed: the decoder reads tgt_embed(tgt)"),
    "shared_layers": msg("the encoder layers share their weights: build a new layer for every position of the nn.ModuleList (a list comprehension), not [layer] * N"),
    "logits_normalised": msg("forward returns log-probabilities (log_softmax of the logits): return the generator's output itself, the logits; the loss applies log_softmax"),
    "logits_softmax": msg("forward returns probabilities (softmax of the logits): return the generator's output itself, the logits; the loss applies log_softmax"),
}
SUSPECT_IDS = {"logits_softmax": "logits_normalised"}  # two forms of one mistake


def transformer_suspects(p, src, tgt, norm_first, pad_id, layers=None, part="logits", select=lambda t: t,
                         mistakes=tuple(TRANSFORMER_HINTS)):
    return [suspect(SUSPECT_IDS.get(m, m), (lambda m=m: select(transformer_ref(p, src, tgt, norm_first, pad_id, m,
                                                                           part=part, layers=layers))),
                    TRANSFORMER_HINTS[m]) for m in mistakes]


TRANSFORMER_HINT = (msg("use the submodule names src_embed, tgt_embed (TokenEmbedding), pos_enc, encoder_layers, decoder_layers (nn.ModuleList), generator, and encoder_norm, decoder_norm when norm_first=True"))


def _model(sub, n, norm_first, pad_id=0, n_enc=2, n_dec=2, dropout=0.0, max_len=64):
    """The student's Transformer with the weights ``transformer_params(n, ...)`` injected, and
    those weights: built once in a grading run, shared by the tests that ask for the same
    (they only run it: one that changes its own weights or mode fails its first test)."""
    key = ("model", id(sub), n, norm_first, pad_id, n_enc, n_dec, dropout, max_len)
    memo = run_memo()
    if key not in memo:
        memo[key] = _build_model(sub, n, norm_first, pad_id, n_enc, n_dec, dropout, max_len)
    return memo[key]


def _built(sub, norm_first, n_enc=2, n_dec=2, run=False, claim=None):
    """The student's ``Transformer(SV, TV, ..., dropout=0.0, max_len=64, pad_id=0)`` as its
    constructor leaves it, and the names of its parameters: built once in a grading run, for
    the structure test to read and for one model of :func:`_model` (``claim``: its ``n``) to
    take its weights; a second claimant gets a model of its own. ``run``: run it once with
    torch's attention refused (``_reveal``)."""
    key = ("built", id(sub), norm_first, n_enc, n_dec)
    memo = run_memo()
    if key not in memo or (claim is not None and memo.setdefault(key + ("claim",), claim) != claim):
        built = _revealed(sub.new("Transformer", SV, TV, d_model=D, n_head=H, num_encoder_layers=n_enc,
                                  num_decoder_layers=n_dec, d_ff=FF, dropout=0.0, max_len=64, pad_id=0,
                                  norm_first=norm_first), *REVEAL_TOKENS, run=run)
        if key in memo:  # claimed by another model: this one is its own
            return built
        memo[key] = built
    return memo[key]


def _build_model(sub, n, norm_first, pad_id, n_enc, n_dec, dropout, max_len):
    p = transformer_params(n, norm_first, n_enc, n_dec)
    if (pad_id, dropout, max_len) == (0, 0.0, 64):  # the structure test's configuration
        m, names = _built(sub, norm_first, n_enc, n_dec, claim=n)
    else:
        m, names = _revealed(sub.new("Transformer", SV, TV, d_model=D, n_head=H, num_encoder_layers=n_enc,
                                     num_decoder_layers=n_dec, d_ff=FF, dropout=dropout, max_len=max_len,
                                     pad_id=pad_id, norm_first=norm_first), run=False)  # run once: the structure test
    if "encoder_layers.1.self_attn.q_proj.weight" not in names and \
            "encoder_layers.0.self_attn.q_proj.weight" in names and n_enc > 1:
        diagnose("shared_layers", TRANSFORMER_HINTS["shared_layers"])
    return _inject(m, p, "Transformer", TRANSFORMER_HINT, "model_submodule_names"), p


def posted(sub, model, name, *args, **kwargs):
    """``model.method(name, ...)`` sent without waiting: a function that reads its result (the
    check computes what it expects while the worker runs the call)."""
    with sub.batch(lazy=True) as b:
        later = b.method(model, name, *args, **kwargs)
    return lambda: later.value


def _logits(model, src, tgt, **kwargs):
    return _logits_of(model(src, tgt, **kwargs), src, tgt)


def _logits_of(out, src, tgt):
    """The forward's output ``out``, once it is checked to be logits [B, Lt, tgt_vocab]."""
    check(tuple(getattr(out, "shape", ())) == (src.shape[0], tgt.shape[1], TV),
          msg("forward(src, tgt) should return logits [B, Lt, tgt_vocab] = {want}, got {out_shape}", want=[src.shape[0], tgt.shape[1], TV], out_shape=list(getattr(out, 'shape', []))))
    return out


def batch(n, pad_id=0, B=3, Ls=6, Lt=7, left=False):
    """Token batches [B, Ls], [B, Lt], padded with pad_id on the right (or the left), the
    first row unpadded; ids 1 and 2 are bos and eos, and every target holds the id TV - 1,
    which the source vocabulary lacks."""
    g = gen(n)
    src = torch.randint(3, SV, (B, Ls), generator=g)
    tgt = torch.randint(3, TV, (B, Lt), generator=g)
    src[src == pad_id] = 4
    tgt[tgt == pad_id] = 4
    tgt[:, 0] = 1
    keep_s, keep_t = _keep(n + 1, B, Ls), _keep(n + 2, B, Lt)
    if left:
        keep_s, keep_t = keep_s.flip(1), keep_t.flip(1)
        for b in range(B):  # bos opens the real tokens of a left-padded target
            tgt[b, int((~keep_t[b]).sum())] = 1
    first = (~keep_t).sum(1)                 # where each target's bos sits
    tgt[torch.arange(B), first + 1] = TV - 1  # a target id beyond the source vocabulary in every row
    return src.masked_fill(~keep_s, pad_id), tgt.masked_fill(~keep_t, pad_id)


@exercise("Transformer", points=0.5)
def test_transformer_structure(sub):
    # post-LN with 1 encoder and 2 decoder layers (num_decoder_layers is its own argument),
    # run once with torch's attention refused (both placements share it); pre-LN as
    # test_transformer_pre_ln_logits's model is built (2 and 2 layers: shared encoder layers
    # show), which takes its weights afterwards
    for norm_first, n_enc, n_dec in ((False, 1, 2), (True, 2, 2)):
        m, names = _built(sub, norm_first, n_enc, n_dec, run=not norm_first)
        expected = _param_names(norm_first, n_enc, n_dec)
        missing = sorted(expected - names)
        if not norm_first:
            check(not any(n.startswith(("encoder_norm", "decoder_norm")) for n in names),
                  TRANSFORMER_HINTS["final_norms_post_ln"], mistake="final_norms_post_ln")
        if missing and all(k.startswith("encoder_layers.1.") for k in missing):
            diagnose("shared_layers", TRANSFORMER_HINTS["shared_layers"])
        check(not missing, msg("Transformer(norm_first={norm_first}) has no parameter {missing}{more}: {TRANSFORMER_HINT}", norm_first=norm_first, missing=', '.join(missing[:3]), more=' ...' if len(missing) > 3 else '', TRANSFORMER_HINT=TRANSFORMER_HINT),
              mistake="model_submodule_names")
    try:
        pad_id = m.get("pad_id")
    except SubmissionError:
        diagnose("no_pad_id_attribute", msg("the model has no attribute pad_id: keep the padding id in self.pad_id (greedy decoding and the training step read model.pad_id)"))
    check(pad_id == 0, msg("Transformer(pad_id=0).pad_id should be 0, got {pad_id}", pad_id=repr(pad_id)))


@exercise("Transformer", points=0.5)
def test_transformer_encode(sub):
    m, p = _model(sub, 64, False)
    src, _ = batch(63)
    close_judged(sub, p, posted(sub, m, "encode", src), src, src, False, 0,
                 msg("encode(src) should return the encoder output [B, Ls, d_model]: embed (× √d_model), add the positional encoding, run the encoder layers with the source padding mask"),
                 part="memory")


@exercise("Transformer", points=1)
def test_transformer_post_ln_logits(sub):
    m, p = _model(sub, 64, False)
    src, tgt = batch(65)
    keep = tgt != 0
    forward = posted(sub, m, "__call__", src, tgt)

    def got():
        try:
            return _logits_of(forward(), src, tgt)
        except SubmissionError as exc:
            if exc.exc_type == "IndexError":  # target ids beyond the source vocabulary?
                small = tgt.clamp(max=SV - 1)
                _, own = judged(sub, p, src, small, False, 0)
                if matches(_logits(m, src, small), transformer_ref(p, src, small, False, 0, "decoder_uses_src_embed",
                                                                   layers=own), atol=ATOL):
                    diagnose("decoder_uses_src_embed", TRANSFORMER_HINTS["decoder_uses_src_embed"])
            raise
    close_judged(sub, p, got, src, tgt, False, 0, msg("with injected weights the logits differ from the paper's model (post-LN, no final norms)"), select=lambda t: t[keep])


@exercise("Transformer", points=0.75)
def test_transformer_pre_ln_logits(sub):
    m, p = _model(sub, 66, True)
    src, tgt = batch(67)
    keep = tgt != 0
    forward = posted(sub, m, "__call__", src, tgt)
    close_judged(sub, p, lambda: _logits_of(forward(), src, tgt), src, tgt, True, 0, msg("with norm_first=True the logits differ from the pre-LN model (pre-LN layers, then encoder_norm and decoder_norm)"),
                 select=lambda t: t[keep])


@exercise("Transformer", points=0.5)
def test_transformer_causality(sub):
    m, p = _model(sub, 64, False)
    src, tgt = batch(69)
    ks, variants = (1, 3, 5), [tgt]
    for k in ks:
        changed = tgt.clone()
        changed[:, k:] = torch.randint(3, TV, changed[:, k:].shape, generator=gen(70 + k))
        variants.append(changed)
    # one forward for the target and its three changed copies: each row is its own sentence
    outs = _logits(m, src.repeat(len(variants), 1), torch.cat(variants)).split(len(tgt))
    base = outs[0]
    own: OwnLayers | bool | None = None  # False: the student's layers could not be built
    own_base: torch.Tensor | None = None
    for k, changed, out in zip(ks, variants[1:], outs[1:], strict=True):
        got = out[:, :k]
        if matches(got, base[:, :k], atol=ATOL):
            continue
        if own is None:  # the student's own layers, built only to tell whose fault a leak is
            own = OwnLayers(sub, p)
            try:
                own_base = transformer_ref(p, src, tgt, False, 0, layers=own)
            except (Failed, SubmissionError):
                own = False
        if own and own_base is not None and not matches(
                transformer_ref(p, src, changed, False, 0, layers=own)[:, :k],
                               own_base[:, :k], atol=ATOL):
            return  # the decoder layer itself lets the future in: DecoderLayer's checks charge it
        close(got, base[:, :k],
              msg("changing target tokens from position {k} on changed the logits of earlier positions: forward must build the causal mask for the decoder's self-attention", k=k),
              atol=ATOL, suspects=[suspect("no_causal_mask", lambda c=changed, k=k, own=own: transformer_ref(
                  p, src, c, False, 0, "no_causal_mask", layers=own or None)[:, :k],
                  TRANSFORMER_HINTS["no_causal_mask"])])


@exercise("Transformer", points=0.75)
def test_transformer_padding(sub):
    # one layer in each stack: the masks are built by the model itself (the logits tests run two)
    m, p = _model(sub, 74, True, pad_id=3, n_enc=1, n_dec=1)
    sides = [batch(75 + left, pad_id=3, left=left) for left in (False, True)]
    # both paddings in one forward: each row is its own sentence
    srcs, tgts = torch.cat([s for s, _ in sides]), torch.cat([t for _, t in sides])
    forward = posted(sub, m, "__call__", srcs, tgts)
    split = functools.cache(lambda: _logits_of(forward(), srcs, tgts).split(len(sides[0][1])))  # read once
    for i, (left, (src, tgt)) in enumerate(zip((False, True), sides, strict=True)):
        keep = tgt != 3
        side = msg("left") if left else msg("right")
        close_judged(sub, p, lambda i=i: split()[i], src, tgt, True, 3,
                     msg("with source and target padded on the {side} (pad_id=3) the logits of the real tokens are wrong: every mask comes from the model's pad_id, the target's from causal_mask(Lt) & padding_mask(tgt, pad_id)", side=side), select=lambda t, k=keep: t[k])
    (src, tgt), padded = sides[0], split()[0]  # row 1 is padded on the right (row 0 never is)
    alone = _logits(m, src[1:2, :int((src[1] != 3).sum())], tgt[1:2, :int((tgt[1] != 3).sum())])
    close(padded[1:2, :alone.shape[1]], alone, msg("the logits of a sentence changed when the batch padded it"), atol=ATOL)


def _small_model(sub):
    """The student's ``Transformer(300, 400, ..., 1 + 1 layers, dropout=0.5, max_len=37)`` as
    its constructor leaves it: built once in a grading run, for the dropout and
    initialisation test to read and for the device test, whose audit costs every torch
    operation of a forward a Python call (a layer of each stack runs all of the model's own
    code: its masks, embeddings and loops)."""
    key = ("small model", id(sub))
    memo = run_memo()
    if key not in memo:
        memo[key] = _reveal(sub.new("Transformer", 300, 400, d_model=D, n_head=H, num_encoder_layers=1,
                                    num_decoder_layers=1, d_ff=FF, dropout=0.5, max_len=37, pad_id=0), run=False)
    return memo[key]


@exercise("Transformer", points=0.5)
def test_transformer_dropout_and_initialisation(sub):
    m = _small_model(sub)
    params = m.inspect()["parameters"]
    for table in ("src_embed", "tgt_embed"):
        w = params.get(f"{table}.embedding.weight")
        check(w is not None, msg("the model has no parameter {table}.embedding.weight: {TRANSFORMER_HINT}", table=table, TRANSFORMER_HINT=TRANSFORMER_HINT),
              mistake="model_submodule_names")
        std = float(w.double().std())
        check(0.5 * D ** -0.5 < std < 2.0 * D ** -0.5, msg("{table}'s table has std {std}: keep TokenEmbedding's initialisation, std d_model^-0.5 = {D} (std 1 times √d_model would drown the positional encoding)", table=table, std=format(std, '.3g'), D=format(D ** -0.5, '.3g')), mistake="embeddings_reinitialised")
    pe = m.get("pos_enc.pe")
    check(isinstance(pe, torch.Tensor) and tuple(pe.shape)[-2:] == (37, D),
          msg("Transformer(max_len=37) should build PositionalEncoding(d_model, max_len, dropout): pos_enc.pe should be [37, {D}]", D=D), mistake="pos_enc_args_ignored")
    enc = m.get("pos_enc")
    enc.train()
    x = torch.ones(2, 30, D)
    check(bool((enc(x) == 0).any()), msg("Transformer(dropout=0.5) should pass its dropout to PositionalEncoding(d_model, max_len, dropout): in training mode pos_enc drops nothing"),
          mistake="pos_enc_args_ignored")
    layer = m.get("encoder_layers.0")
    layer.train()
    y = randn(80, 2, 9, D)
    first, second = layer(y), layer(y)
    check(not torch.allclose(first, second), msg("Transformer(dropout=0.5) should pass its dropout to every EncoderLayer and DecoderLayer: in training mode the encoder layer drops nothing"),
          mistake="layers_no_dropout")


@exercise("Transformer", points=0.5)
def test_transformer_runs_on_the_model_device(sub):
    m = _small_model(sub)
    m.eval()
    src, tgt = batch(83, left=True, B=2, Ls=4, Lt=5)
    try:
        m(src, tgt, forbid=(ON_DEVICE,))  # the logits' shape: the other tests' (400 ids here)
        m.method("encode", src, forbid=(ON_DEVICE,))
    except SubmissionError as exc:
        if exc.exc_type == "DeviceMismatch":
            diagnose("mask_on_cpu", msg("on a GPU this forward fails: {error}; make every tensor built inside the model on the input's device (causal_mask(Lt, device=tgt.device), torch.ones(..., device=...), ones_like)", error=exc.message))
        raise


# --- greedy_decode ---------------------------------------------------------------------

PAD, BOS, EOS, JUNK, V = 0, 1, 2, 12, 13


def simulate(src_rows, max_len, mistake=None, pad=PAD):
    """Greedy decoding of the copy model (whose pad id is ``pad``), as a decoder with
    ``mistake`` would do it."""
    B = len(src_rows)

    def predict(row, prefix, masked=True):
        """The copy model's next token after ``prefix`` (see runtime.fixtures.copy_model)."""
        src = src_rows[row]
        t = len(prefix) - 1 if mistake != "first_position_logits" else 0
        expected = [BOS] + list(src)
        ok = prefix[:t + 1] == expected[:t + 1]
        pad_seen = not masked and pad in src
        return src[t] if ok and t < len(src) and not pad_seen else JUNK

    first = pad if mistake == "starts_with_pad" else BOS
    ys = [[first] for _ in range(B)]
    done = [False] * B
    limit = max_len + 1 if mistake == "max_len_off_by_one" else max_len

    def running():
        if len(ys[0]) >= limit:
            return False
        if mistake == "never_stops":
            return True
        return not (any(done) if mistake == "stops_at_first_eos" else all(done))

    while running():
        for b in range(B):
            tok = predict(b, ys[b], masked=mistake != "no_memory_mask_decode")
            if done[b] and mistake != "no_pad_after_eos":
                tok = 0 if mistake == "decode_pad_hardcoded" else pad
            ys[b].append(tok)
            done[b] = done[b] or tok == EOS
    out = torch.tensor(ys)
    return out[:, 1:] if mistake == "drops_bos" else out


DECODE_HINTS = {
    "never_stops": msg("decoding goes on to max_len after every row has produced eos: stop as soon as every row has ended"),
    "drops_bos": msg("the rows do not start with bos_id: return the whole sequence, bos included"),
    "starts_with_pad": msg("decoding starts from pad: every row starts with bos_id, ys = torch.full((B, 1), bos_id, ...)"),
    "no_pad_after_eos": msg("after a row's eos the following positions should be model.pad_id, whatever the model predicts there, while the other rows go on"),
    "stops_at_first_eos": msg("decoding stops when the first row produces eos: go on until every row has ended (or max_len)"),
    "max_len_off_by_one": msg("the output has max_len + 1 tokens: max_len counts every token, bos included"),
    "no_memory_mask_decode": msg("a padded source decodes differently: pass the source padding mask to the decoder, decode(ys, memory, memory_mask=padding_mask(src, model.pad_id)), or call model(src, ys)"),
    "first_position_logits": msg("the next token is taken from the first position's logits: take the last position's, logits[:, -1]"),
    "decode_pad_hardcoded": msg("after a row's eos the positions are 0, not the model's padding id: fill them with model.pad_id"),
}


def decode_sources(n, B=2, L=6, eos_at=None, padded=False):
    """Random sources [B, L] of tokens 3..11 with an eos in each row (at ``eos_at`` if given,
    else at different random positions)."""
    g = gen(n)
    src = torch.randint(3, 12, (B, L), generator=g)
    pos = eos_at if eos_at is not None else (1 + torch.randperm(L - 1, generator=g)[:B]).tolist()  # rows end apart
    for b, i in enumerate(pos):
        src[b, i] = EOS
        if padded:
            src[b, i + 1:] = PAD
    return src


def _decode(sub, src, max_len, forbid=()):
    model = sub.fixture("copy_model", vocab=V, pad_id=PAD, bos_id=BOS, eos_id=EOS, junk_id=JUNK)
    out = sub.call("greedy_decode", model, src, max_len, BOS, EOS, forbid=forbid)
    check(hasattr(out, "shape") and out.dim() == 2, msg("greedy_decode should return a tensor [B, T] of token ids"))
    check(out.shape[0] == src.shape[0], msg("greedy_decode should return one row per source sentence ({sources}), got {rows}", sources=src.shape[0], rows=out.shape[0]))
    if not bool((out[:, 0] == BOS).all()):
        if bool((out[:, 0] == PAD).all()):
            diagnose("starts_with_pad", DECODE_HINTS["starts_with_pad"])
        if matches(out, simulate(src.tolist(), max_len, "drops_bos")):
            diagnose("drops_bos", DECODE_HINTS["drops_bos"])
        check(False, msg("every decoded row should start with bos_id"))
    return out, model


def _check_decoded(sub, src, max_len, message, exact_length=False):
    """Compare with greedy decoding; extra columns of pad after every row has ended are
    charged by the checks of the stopping rule only (``exact_length``)."""
    out, model = _decode(sub, src, max_len)
    want = simulate(src.tolist(), max_len)
    n = want.shape[1]
    if not exact_length and out.shape[1] > n and bool((out[:, n:] == PAD).all()):
        out = out[:, :n]
    close(out, want, message, suspects=[suspect(m, simulate(src.tolist(), max_len, m), DECODE_HINTS[m])
                                        for m in DECODE_HINTS])
    return out, model


@exercise("greedy_decode", points=0.75)
def test_greedy_copies_and_starts_with_bos(sub):
    src = decode_sources(90, eos_at=[4, 4], B=2, L=5)
    out, _ = _check_decoded(sub, src, 10, msg("decoding a model that copies its source should give bos followed by the source through eos: at every step append the argmax of the last position's logits and feed the sequence back"))
    check(out.dtype == torch.long, msg("greedy_decode should return token ids as a LongTensor, got {out_dtype}: make the tokens with dtype=torch.long (torch.full((B, 1), bos_id, dtype=torch.long, ...)), not from a float tensor", out_dtype=out.dtype), mistake="decode_not_long")


@exercise("greedy_decode", points=1)
def test_greedy_stops_when_all_ended(sub):
    src = decode_sources(91, L=8)
    _check_decoded(sub, src, 12, msg("decoding should stop right after the last row's eos"), exact_length=True)


@exercise("greedy_decode", points=0.5)
def test_greedy_pads_after_eos(sub):
    src = decode_sources(92, eos_at=[1, 5], L=6)
    _check_decoded(sub, src, 10, msg("after a row's eos every position should be pad while the other rows go on"))
    # a model whose padding id is not 0: the pads are model.pad_id
    pad = V  # one more id than the copy model's usual vocabulary
    model = sub.fixture("copy_model", vocab=V + 1, pad_id=pad, bos_id=BOS, eos_id=EOS, junk_id=JUNK)
    out = sub.call("greedy_decode", model, src, 10, BOS, EOS)
    rows = src.tolist()
    n = simulate(rows, 10, pad=pad).shape[1]
    if hasattr(out, "shape") and out.dim() == 2 and out.shape[1] > n and bool((out[:, n:] == pad).all()):
        out = out[:, :n]  # extra columns of pad: charged by the checks of the stopping rule only
    close(out, simulate(rows, 10, pad=pad), msg("with model.pad_id = {pad}, after a row's eos every position should be {pad}", pad=pad), suspects=[suspect(m, simulate(rows, 10, m, pad=pad), DECODE_HINTS[m])
                                                 for m in DECODE_HINTS])


@exercise("greedy_decode", points=0.5)
def test_greedy_max_len(sub):
    src = decode_sources(93, eos_at=[8, 8], L=9)
    _check_decoded(sub, src, 5, msg("with max_len=5 and no eos in sight the output should be bos and the first 4 tokens"), exact_length=True)


@exercise("greedy_decode", points=0.5)
def test_greedy_padded_source(sub):
    src = decode_sources(94, eos_at=[4, 2], L=5, padded=True)
    _check_decoded(sub, src, 10, msg("a padded source should decode as it would alone"))


def record_grad_mode(model):
    """Counts, in ``model.calls_with_grad``, the calls of its encode, decode and forward made
    with gradients enabled: the grader's code, put next to the submission for one check."""
    import torch

    def counting(method):
        def counted(*args, **kwargs):
            model.calls_with_grad += int(torch.is_grad_enabled())
            return method(*args, **kwargs)
        return counted

    model.calls_with_grad = 0
    for name in ("encode", "decode", "forward"):
        setattr(model, name, counting(getattr(model, name)))


@exercise("greedy_decode", points=0.5)
def test_greedy_eval_mode(sub):
    model = sub.fixture("copy_model", vocab=V, pad_id=PAD, bos_id=BOS, eos_id=EOS, junk_id=JUNK)
    with sub.course_versions(inspect.getsource(record_grad_mode), ("record_grad_mode",)):
        sub.call("record_grad_mode", model)
    sub.call("greedy_decode", model, decode_sources(95, L=6), 10, BOS, EOS)
    check(model.get("calls_in_training") == 0, msg("greedy_decode runs the model in training mode, so dropout is on while it translates: call model.eval() before decoding"),
          mistake="decode_in_train_mode")
    check(model.get("calls_with_grad") == 0, msg("greedy_decode runs the model with gradients on, so torch records every step for a backward pass that never comes: decorate it with @torch.no_grad() (or run the loop inside with torch.no_grad())"), mistake="decode_with_grad")


@exercise("greedy_decode", points=0.25)
def test_greedy_on_the_model_device(sub):
    # rows that end one step apart: the loop's every path (a row ended, one going on) in
    # three steps, each audited operation costing a Python call
    src = decode_sources(96, eos_at=[1, 2], L=3)
    try:
        _decode(sub, src, 10, forbid=(ON_DEVICE,))
    except SubmissionError as exc:
        if exc.exc_type == "DeviceMismatch":
            diagnose("decode_output_on_cpu", msg("on a GPU this decoding fails: {error}; make the tokens on the source's device, torch.full(..., device=src.device)", error=exc.message))
        raise
