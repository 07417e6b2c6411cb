"""Hidden graders of lesson 08_transformer (torch).

Every layer is compared with PyTorch's own (``nn.TransformerEncoderLayer`` /
``nn.TransformerDecoderLayer``, ``batch_first=True``, both LayerNorm placements) after its
weights are copied into the student's module by name; the whole model is compared with an
oracle assembled from those layers, and checked by properties (causality, padding
invariance). ``greedy_decode`` runs against a scripted model (the ``copy_model`` fixture),
so it is graded independently of the student's Transformer.
"""

import math

import torch
from torch import nn

from grader.framework import Failed, check, close, exercise
from grader.runtime.errors import SubmissionError

D, H, FF = 16, 4, 32
ATOL = 2e-5


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _randomize(module, seed):
    """Random weights (LayerNorm scales around 1) so that every parameter matters."""
    g = _gen(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if "norm" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.2 * torch.randn(p.shape, generator=g))
            else:
                fan_in = p.shape[-1] if p.dim() > 1 else 1
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(fan_in))
    return module


def _mha_params(prefix, mha):
    w, b = mha.in_proj_weight.detach(), mha.in_proj_bias.detach()
    out = {}
    for i, name in enumerate(("q_proj", "k_proj", "v_proj")):
        out[f"{prefix}.{name}.weight"] = w[i * D:(i + 1) * D].clone()
        out[f"{prefix}.{name}.bias"] = b[i * D:(i + 1) * D].clone()
    out[f"{prefix}.out_proj.weight"] = mha.out_proj.weight.detach().clone()
    out[f"{prefix}.out_proj.bias"] = mha.out_proj.bias.detach().clone()
    return out


def _layer_params(layer, prefix=""):
    """The torch layer's weights under the contract's names."""
    p = {}
    p.update(_mha_params(f"{prefix}self_attn", layer.self_attn))
    if hasattr(layer, "multihead_attn"):
        p.update(_mha_params(f"{prefix}cross_attn", layer.multihead_attn))
    for lin in ("linear1", "linear2"):
        p[f"{prefix}ff.{lin}.weight"] = getattr(layer, lin).weight.detach().clone()
        p[f"{prefix}ff.{lin}.bias"] = getattr(layer, lin).bias.detach().clone()
    for norm in ("norm1", "norm2", "norm3"):
        if hasattr(layer, norm):
            p[f"{prefix}{norm}.weight"] = getattr(layer, norm).weight.detach().clone()
            p[f"{prefix}{norm}.bias"] = getattr(layer, norm).bias.detach().clone()
    return p


def _inject(handle, params, what, hint):
    """Load ``params`` into the student's module by name (keeping its other entries)."""
    state = handle.state_dict()
    check(isinstance(state, dict), f"{what}.state_dict() did not return a dict: is it an nn.Module?")
    missing = [k for k in params if k not in state]
    check(not missing, f"{what} has no parameter named {', '.join(missing[:4])}"
          f"{' ...' if len(missing) > 4 else ''}: {hint}")
    for k, v in params.items():
        check(tuple(state[k].shape) == tuple(v.shape),
              f"{what}: parameter {k} has shape {list(state[k].shape)}, expected {list(v.shape)}")
    state.update(params)
    handle.load_state_dict(state)
    handle.eval()
    return handle


LAYER_HINT = ("use the submodule names self_attn, ff (with linear1 and linear2), norm1, norm2 "
              "(and cross_attn, norm3 in the decoder layer), with MultiHeadAttention's "
              "q_proj, k_proj, v_proj, out_proj")


def _pad_mask(keep):  # [B, L] bool, True = token -> contract mask [B, 1, 1, L]
    return keep[:, None, None, :]


def _causal(n):
    return torch.tril(torch.ones(n, n, dtype=torch.bool))


X = torch.randn(3, 7, D, generator=_gen(1))
MEM = torch.randn(3, 5, D, generator=_gen(2))
TGT_X = torch.randn(3, 6, D, generator=_gen(3))
KEEP_SRC = torch.tensor([[True] * 5, [True] * 3 + [False] * 2, [True] * 4 + [False]])
KEEP_X = torch.tensor([[True] * 7, [True] * 5 + [False] * 2, [True] * 6 + [False]])


# --- PositionwiseFeedForward ----------------------------------------------------------

def _ffn_params(seed, d_ff=FF):
    g = _gen(seed)
    return {"linear1.weight": torch.randn(d_ff, D, generator=g) / 4,
            "linear1.bias": 0.3 * torch.randn(d_ff, generator=g),
            "linear2.weight": torch.randn(D, d_ff, generator=g) / math.sqrt(d_ff),
            "linear2.bias": 0.3 * torch.randn(D, generator=g)}


def _ffn_oracle(p, x, act):
    h = act(x @ p["linear1.weight"].T + p["linear1.bias"])
    return h @ p["linear2.weight"].T + p["linear2.bias"]


FFN_HINT = "name the layers linear1 (d_model -> d_ff) and linear2 (d_ff -> d_model)"


@exercise("PositionwiseFeedForward", points=1)
def test_ffn_relu(sub):
    p = _ffn_params(10)
    ff = _inject(sub.new("PositionwiseFeedForward", D, FF), p, "PositionwiseFeedForward", FFN_HINT)
    close(ff(X), _ffn_oracle(p, X, torch.relu),
          "FFN(x) should be linear2(relu(linear1(x))) at every position", atol=ATOL)


@exercise("PositionwiseFeedForward", points=1)
def test_ffn_gelu(sub):
    p = _ffn_params(11)
    ff = _inject(sub.new("PositionwiseFeedForward", D, FF, activation="gelu"), p,
                 "PositionwiseFeedForward", FFN_HINT)
    close(ff(X), _ffn_oracle(p, X, nn.functional.gelu),
          'with activation="gelu" the activation should be the exact GELU x·Φ(x) of lesson 06 '
          "(is the activation argument ignored?)", atol=ATOL)
    ff2 = _inject(sub.new("PositionwiseFeedForward", D, FF, 0.0, "relu"), p,
                  "PositionwiseFeedForward", FFN_HINT)
    close(ff2(X), _ffn_oracle(p, X, torch.relu),
          'with activation="relu" the activation should be ReLU', atol=ATOL)


@exercise("PositionwiseFeedForward", points=0.5)
def test_ffn_sizes(sub):
    ff = sub.new("PositionwiseFeedForward", 6, 24)
    params = ff.inspect()["parameters"]
    check("linear1.weight" in params and "linear2.weight" in params, FFN_HINT)
    check(tuple(params["linear1.weight"].shape) == (24, 6) and tuple(params["linear2.weight"].shape) == (6, 24),
          "linear1 should map d_model -> d_ff (weight [d_ff, d_model]) and linear2 d_ff -> d_model")
    out = ff(torch.randn(2, 3, 6, generator=_gen(12)))
    check(tuple(out.shape) == (2, 3, 6), "the output should have the input's shape [B, L, d_model]")


@exercise("PositionwiseFeedForward", points=0.5)
def test_ffn_dropout(sub):
    p = _ffn_params(13, 64)
    ff = _inject(sub.new("PositionwiseFeedForward", D, 64, dropout=0.5), p, "PositionwiseFeedForward", FFN_HINT)
    close(ff(X), _ffn_oracle(p, X, torch.relu), "in eval mode dropout must do nothing", atol=ATOL)
    ff.train()
    out = ff(X)
    check(not torch.allclose(out, _ffn_oracle(p, X, torch.relu), atol=1e-4),
          "with dropout=0.5 in training mode some activations should be dropped: "
          "is the dropout argument used?")


# --- EncoderLayer ----------------------------------------------------------------------

def _torch_encoder(norm_first, seed):
    layer = nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, batch_first=True, norm_first=norm_first)
    return _randomize(layer, seed).train()  # train mode: no fast path; dropout is 0


def _student_encoder(sub, norm_first, layer):
    ours = sub.new("EncoderLayer", D, H, FF, dropout=0.0, norm_first=norm_first)
    return _inject(ours, _layer_params(layer), "EncoderLayer", LAYER_HINT)


POST_ENC = ("with norm_first=False (post-LN, the paper) the layer should compute "
            "x = norm1(x + self_attn(x, x, x)), then x = norm2(x + ff(x)); "
            "compared with nn.TransformerEncoderLayer given the same weights")
PRE_ENC = ("with norm_first=True (pre-LN) the layer should compute "
           "x = x + self_attn(h, h, h) with h = norm1(x), then x = x + ff(norm2(x)); "
           "compared with nn.TransformerEncoderLayer(norm_first=True) given the same weights")


@exercise("EncoderLayer", points=1)
def test_encoder_post_ln(sub):
    layer = _torch_encoder(False, 20)
    close(_student_encoder(sub, False, layer)(X), layer(X), POST_ENC, atol=ATOL)


@exercise("EncoderLayer", points=1)
def test_encoder_pre_ln(sub):
    layer = _torch_encoder(True, 21)
    close(_student_encoder(sub, True, layer)(X), layer(X), PRE_ENC, atol=ATOL)


@exercise("EncoderLayer", points=1)
def test_encoder_padding_mask(sub):
    layer = _torch_encoder(False, 22)
    ours = _student_encoder(sub, False, layer)
    close(ours(X, _pad_mask(KEEP_X)), layer(X, src_key_padding_mask=~KEEP_X),
          "with a padding mask src_mask [B, 1, 1, L] no position may attend to padding: "
          "pass src_mask to the self-attention", atol=ATOL)


@exercise("EncoderLayer", points=1)
def test_encoder_causal_mask_pre_ln(sub):
    layer = _torch_encoder(True, 23)
    ours = _student_encoder(sub, True, layer)
    close(ours(X, src_mask=_causal(7)), layer(X, src_mask=~_causal(7)),
          "pre-LN with an [L, L] src_mask: the mask must reach the self-attention "
          "(True = may attend)", atol=ATOL)


# --- DecoderLayer ----------------------------------------------------------------------

def _torch_decoder(norm_first, seed):
    layer = nn.TransformerDecoderLayer(D, H, FF, dropout=0.0, batch_first=True, norm_first=norm_first)
    return _randomize(layer, seed).train()


def _student_decoder(sub, norm_first, layer):
    ours = sub.new("DecoderLayer", D, H, FF, dropout=0.0, norm_first=norm_first)
    return _inject(ours, _layer_params(layer), "DecoderLayer", LAYER_HINT)


POST_DEC = ("with norm_first=False the decoder layer should compute x = norm1(x + self_attn(x, x, x)), "
            "x = norm2(x + cross_attn(x, memory, memory)), x = norm3(x + ff(x)): self-attention "
            "first, then cross-attention with queries from the decoder and keys and values from "
            "memory; compared with nn.TransformerDecoderLayer given the same weights")
PRE_DEC = ("with norm_first=True the decoder layer should compute x = x + self_attn(h, h, h) with "
           "h = norm1(x), x = x + cross_attn(norm2(x), memory, memory), x = x + ff(norm3(x)); "
           "compared with nn.TransformerDecoderLayer(norm_first=True) given the same weights")


def _decoder_call(layer_handle, *args, **kwargs):
    try:
        return layer_handle(*args, **kwargs)
    except SubmissionError as exc:
        raise Failed(f"the decoder layer failed on a target of length 6 and a memory of length 5 "
                     f"({exc.exc_type}: {exc.message[:200]}): cross-attention takes its queries "
                     f"from the decoder and its keys and values from memory") from None


@exercise("DecoderLayer", points=1)
def test_decoder_post_ln(sub):
    layer = _torch_decoder(False, 30)
    out = _decoder_call(_student_decoder(sub, False, layer), TGT_X, MEM)
    close(out, layer(TGT_X, MEM), POST_DEC, atol=ATOL)


@exercise("DecoderLayer", points=1)
def test_decoder_pre_ln(sub):
    layer = _torch_decoder(True, 31)
    out = _decoder_call(_student_decoder(sub, True, layer), TGT_X, MEM)
    close(out, layer(TGT_X, MEM), PRE_DEC, atol=ATOL)


@exercise("DecoderLayer", points=1)
def test_decoder_target_mask(sub):
    layer = _torch_decoder(False, 32)
    ours = _student_decoder(sub, False, layer)
    out = _decoder_call(ours, TGT_X, MEM, tgt_mask=_causal(6))
    changed = TGT_X.clone()
    changed[:, 3:] = torch.randn(3, 3, D, generator=_gen(33))
    later = _decoder_call(ours, changed, MEM, tgt_mask=_causal(6))
    close(later[:, :3], out[:, :3], "with the causal tgt_mask, changing later target positions "
          "must not change earlier outputs: pass tgt_mask to the self-attention", atol=ATOL)
    close(out, layer(TGT_X, MEM, tgt_mask=~_causal(6)),
          "with a causal tgt_mask the decoder layer differs from nn.TransformerDecoderLayer", atol=ATOL)


@exercise("DecoderLayer", points=1)
def test_decoder_memory_mask_pre_ln(sub):
    layer = _torch_decoder(True, 34)
    ours = _student_decoder(sub, True, layer)
    out = _decoder_call(ours, TGT_X, MEM, tgt_mask=_causal(6), memory_mask=_pad_mask(KEEP_SRC))
    close(out, layer(TGT_X, MEM, tgt_mask=~_causal(6), memory_key_padding_mask=~KEEP_SRC),
          "with memory_mask [B, 1, 1, Ls] the cross-attention must not look at the source's "
          "padding: pass memory_mask to cross_attn (and tgt_mask to self_attn)", atol=ATOL)


# --- Transformer -----------------------------------------------------------------------

SV, TV = 11, 13


def _pe(n, d):
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    i = torch.arange(0, d, 2, dtype=torch.float64)
    angle = pos / torch.pow(10000.0, i / d)
    pe = torch.zeros(n, d, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(angle), torch.cos(angle)
    return pe.float()


class Oracle:
    """A Transformer assembled from torch's layers; weights under the contract's names."""

    def __init__(self, norm_first, seed, n_enc=2, n_dec=2, pad_id=0):
        self.norm_first, self.pad_id = norm_first, pad_id
        self.enc = [_torch_encoder(norm_first, seed + i) for i in range(n_enc)]
        self.dec = [_torch_decoder(norm_first, seed + 10 + i) for i in range(n_dec)]
        g = _gen(seed + 99)
        self.params = {
            "src_embed.embedding.weight": torch.randn(SV, D, generator=g) / math.sqrt(D),
            "tgt_embed.embedding.weight": torch.randn(TV, D, generator=g) / math.sqrt(D),
            "generator.weight": torch.randn(TV, D, generator=g) / math.sqrt(D),
            "generator.bias": 0.1 * torch.randn(TV, generator=g),
        }
        for i, layer in enumerate(self.enc):
            self.params.update(_layer_params(layer, f"encoder_layers.{i}."))
        for i, layer in enumerate(self.dec):
            self.params.update(_layer_params(layer, f"decoder_layers.{i}."))
        if norm_first:
            for name in ("encoder_norm", "decoder_norm"):
                self.params[f"{name}.weight"] = 1.0 + 0.3 * torch.randn(D, generator=g)
                self.params[f"{name}.bias"] = 0.2 * torch.randn(D, generator=g)

    def _norm(self, name, x):
        return nn.functional.layer_norm(x, (D,), self.params[f"{name}.weight"],
                                        self.params[f"{name}.bias"], 1e-5)

    def encode(self, src):
        x = self.params["src_embed.embedding.weight"][src] * math.sqrt(D) + _pe(src.shape[1], D)
        for layer in self.enc:
            x = layer(x, src_key_padding_mask=src == self.pad_id)
        return self._norm("encoder_norm", x) if self.norm_first else x

    def forward(self, src, tgt):
        memory = self.encode(src)
        x = self.params["tgt_embed.embedding.weight"][tgt] * math.sqrt(D) + _pe(tgt.shape[1], D)
        for layer in self.dec:
            x = layer(x, memory, tgt_mask=~_causal(tgt.shape[1]), tgt_key_padding_mask=tgt == self.pad_id,
                      memory_key_padding_mask=src == self.pad_id)
        if self.norm_first:
            x = self._norm("decoder_norm", x)
        return x @ self.params["generator.weight"].T + self.params["generator.bias"]


TRANSFORMER_HINT = ("use the submodule names src_embed, tgt_embed (TokenEmbedding), pos_enc, "
                    "encoder_layers, decoder_layers (nn.ModuleList), generator, and encoder_norm, "
                    "decoder_norm when norm_first=True")

SRC = torch.tensor([[4, 5, 6, 7, 8, 2], [9, 10, 4, 2, 0, 0], [5, 2, 0, 0, 0, 0]])
TGT = torch.tensor([[1, 4, 5, 6, 7, 8, 2], [1, 9, 10, 11, 12, 2, 0], [1, 3, 2, 0, 0, 0, 0]])


def _model(sub, oracle, n_enc=2, n_dec=2):
    m = sub.new("Transformer", SV, TV, d_model=D, n_head=H, num_encoder_layers=n_enc,
                num_decoder_layers=n_dec, d_ff=FF, dropout=0.0, max_len=64,
                pad_id=oracle.pad_id, norm_first=oracle.norm_first)
    return _inject(m, oracle.params, "Transformer", TRANSFORMER_HINT)


def _logits(model, src, tgt):
    out = model(src, tgt)
    check(tuple(getattr(out, "shape", ())) == (src.shape[0], tgt.shape[1], TV),
          f"forward(src, tgt) should return logits [B, Lt, tgt_vocab] = "
          f"{[src.shape[0], tgt.shape[1], TV]}, got {list(getattr(out, 'shape', []))}")
    return out


@exercise("Transformer", points=0.5)
def test_transformer_structure(sub):
    for norm_first in (False, True):
        m = sub.new("Transformer", SV, TV, d_model=D, n_head=H, num_encoder_layers=2,
                    num_decoder_layers=3, d_ff=FF, dropout=0.0, max_len=64, pad_id=0,
                    norm_first=norm_first)
        info = m.inspect()
        names = set(info["parameters"])
        expected = set(Oracle(norm_first, 40, 2, 3).params)
        missing = sorted(expected - names)
        check(not missing, f"Transformer(norm_first={norm_first}) has no parameter "
              f"{', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''}: {TRANSFORMER_HINT}")
        if not norm_first:
            check(not any(n.startswith(("encoder_norm", "decoder_norm")) for n in names),
                  "post-LN (norm_first=False) has no final encoder_norm / decoder_norm: the last "
                  "layer already ends with a LayerNorm (nn.Transformer adds them anyway)")
    check(m.get("pad_id") == 0, "the model should keep its padding id in the attribute pad_id")


@exercise("Transformer", points=0.5)
def test_transformer_encode(sub):
    oracle = Oracle(False, 50)
    m = _model(sub, oracle)
    close(m.method("encode", SRC), oracle.encode(SRC),
          "encode(src) should return the encoder output [B, Ls, d_model]: embed (× √d_model), "
          "add the positional encoding, run the encoder layers with the source padding mask",
          atol=ATOL)


@exercise("Transformer", points=1)
def test_transformer_post_ln_logits(sub):
    oracle = Oracle(False, 60)
    m = _model(sub, oracle)
    want = oracle.forward(SRC, TGT)
    got = _logits(m, SRC, TGT)
    keep = TGT != 0
    close(got[keep], want[keep],
          "with injected weights the logits differ from the paper's model (post-LN, no final "
          "norms): embeddings × √d_model + positional encoding, encoder and decoder stacks with "
          "padding and causal masks built from pad_id, then generator", atol=ATOL)


@exercise("Transformer", points=1)
def test_transformer_pre_ln_logits(sub):
    oracle = Oracle(True, 70)
    m = _model(sub, oracle)
    want = oracle.forward(SRC, TGT)
    got = _logits(m, SRC, TGT)
    keep = TGT != 0
    close(got[keep], want[keep],
          "with norm_first=True the logits differ from a pre-LN model: each stack should end "
          "with its final LayerNorm (encoder_norm on the memory, decoder_norm before the "
          "generator)", atol=ATOL)


@exercise("Transformer", points=1)
def test_transformer_causality(sub):
    oracle = Oracle(False, 80)
    m = _model(sub, oracle)
    base = _logits(m, SRC, TGT)
    for k in (1, 3, 5):
        changed = TGT.clone()
        changed[:, k:] = torch.randint(3, TV, changed[:, k:].shape, generator=_gen(k))
        close(_logits(m, SRC, changed)[:, :k], base[:, :k],
              f"changing target tokens from position {k} on changed the logits of earlier "
              f"positions: forward must build the causal mask for the decoder's self-attention",
              atol=ATOL)


@exercise("Transformer", points=1)
def test_transformer_padding_invariance(sub):
    oracle = Oracle(True, 90, pad_id=3)
    m = _model(sub, oracle)
    src = torch.tensor([[4, 5, 6, 7, 2, 3, 3], [9, 10, 2, 3, 3, 3, 3]])
    tgt = torch.tensor([[1, 4, 5, 2, 3, 3], [1, 8, 9, 10, 11, 2]])
    batch = _logits(m, src, tgt)
    alone = _logits(m, src[:1, :5], tgt[:1, :4])
    close(batch[:1, :4], alone, "the logits of a sentence changed when the batch padded it "
          "(pad_id=3 here): build the source padding mask from the model's pad_id and use it in "
          "the encoder and as the decoder's memory mask", atol=ATOL)
    longer = _logits(m, src[:1, :5], torch.tensor([[1, 4, 5, 2, 3, 3, 3, 3]]))
    close(longer[:, :4], alone, "padding the target changed the logits of real tokens: "
          "build the target mask from the causal mask and the target padding", atol=ATOL)
    close(batch[1:], _logits(m, src[1:, :3], tgt[1:]), "the logits changed when the source was "
          "padded: the decoder's cross-attention must not look at source padding (memory_mask)",
          atol=ATOL)


# --- greedy_decode ---------------------------------------------------------------------

PAD, BOS, EOS, JUNK, V = 0, 1, 2, 12, 13


def _expected(src_rows, max_len):
    """What greedy decoding of the copy model gives: bos, the source up to its eos, pads."""
    out = []
    for row in src_rows:
        seq = [BOS]
        for tok in row:
            if len(seq) >= max_len:
                break
            seq.append(tok)
            if tok == EOS:
                break
        out.append(seq)
    width = max(len(s) for s in out)
    return torch.tensor([s + [PAD] * (width - len(s)) for s in out])


def _decode(sub, src, max_len):
    model = sub.fixture("copy_model", vocab=V, pad_id=PAD, bos_id=BOS, eos_id=EOS, junk_id=JUNK)
    out = sub.call("greedy_decode", model, src, max_len, BOS, EOS)
    check(hasattr(out, "shape") and out.dim() == 2, "greedy_decode should return a tensor [B, T] of token ids")
    check(out.shape[0] == src.shape[0], f"greedy_decode should return one row per source sentence "
          f"({src.shape[0]}), got {out.shape[0]}")
    check(bool((out[:, 0] == BOS).all()), "every decoded row should start with bos_id (do not drop it)")
    return out


def _check_decoded(out, want, message):
    """Compare, saying which rule of greedy decoding was broken."""
    n, m = out.shape[1], want.shape[1]
    for row, ref in zip(out[:, :min(n, m)].tolist(), want[:, :min(n, m)].tolist(), strict=False):
        if row == ref:
            continue
        first = next(i for i, (a, b) in enumerate(zip(row, ref, strict=False)) if a != b)
        if EOS in ref and first > ref.index(EOS):
            check(False, "after a row's eos every later position must be model.pad_id, whatever "
                  "the model predicts there, while the other rows go on")
        check(False, message)
    check(n <= m, f"decoding went on to length {n} although every row had ended (with eos) at "
          f"length {m}: stop as soon as every row has produced eos")
    check(n >= m, f"decoding stopped at length {n}, before every row had produced eos (expected "
          f"length {m}); only max_len ends it earlier")


@exercise("greedy_decode", points=1)
def test_greedy_copies_and_starts_with_bos(sub):
    src = torch.tensor([[5, 6, 7, 8, 2], [9, 4, 10, 6, 2]])
    out = _decode(sub, src, 10)
    _check_decoded(out, _expected(src.tolist(), 10),
                   "decoding a model that copies its source should give bos followed by the source "
                   "through eos: at every step append the argmax of the last position's logits and "
                   "feed the sequence back")


@exercise("greedy_decode", points=1)
def test_greedy_stops_when_all_ended(sub):
    src = torch.tensor([[5, 6, 2, 7, 8, 9, 10, 11], [9, 2, 4, 5, 6, 7, 8, 9]])
    out = _decode(sub, src, 12)
    _check_decoded(out, _expected(src.tolist(), 12), "decoding should stop right after the last eos")


@exercise("greedy_decode", points=1)
def test_greedy_pads_after_eos(sub):
    src = torch.tensor([[5, 2, 7, 8, 9, 2], [9, 4, 10, 6, 8, 2]])
    out = _decode(sub, src, 10)
    _check_decoded(out, _expected(src.tolist(), 10), "after eos a row must hold only pad_id")


@exercise("greedy_decode", points=0.5)
def test_greedy_max_len(sub):
    src = torch.tensor([[5, 6, 7, 8, 9, 10, 11, 4, 2], [4, 4, 5, 5, 6, 6, 7, 7, 2]])
    out = _decode(sub, src, 5)
    check(out.shape[1] == 5, f"with max_len=5 and no eos in sight the output should have exactly "
          f"5 tokens including bos, got {out.shape[1]}")
    close(out, _expected(src.tolist(), 5), "with max_len=5 the output is bos and the first 4 tokens")


@exercise("greedy_decode", points=0.5)
def test_greedy_padded_source(sub):
    src = torch.tensor([[5, 6, 7, 8, 2], [9, 4, 2, 0, 0]])
    out = _decode(sub, src, 10)
    _check_decoded(out, _expected(src.tolist(), 10),
                   "a padded source decoded differently: pass the source padding mask to the "
                   "decoder as memory_mask (decode(ys, memory, memory_mask=...)), or call "
                   "model(src, ys)")
