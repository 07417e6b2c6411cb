"""Planted mistakes in lesson 10 (today's decoder-only Transformer) and alternative correct solutions."""

from planted import Variant, bug

LESSON = "10_decoder_only"

RMS = "return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight"
THETA = "theta = base ** (-torch.arange(0, d_head, 2, dtype=torch.float64) / d_head)"
TABLES = "return angles.cos().float(), angles.sin().float()"
TURNED = "turned = torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1)"
GATE = "return self.w2(F.silu(self.w1(x)) * self.w3(x))"
ATTN_OUT = "x = x + self.dropout(self.out_proj(a.transpose(1, 2).reshape(B, L, D)))"
FFN_OUT = "return x + self.dropout(self.ffn(self.ffn_norm(x)))"
ROPE = "q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)"
CAUSAL = "allowed = torch.ones(L, L, dtype=torch.bool, device=x.device).tril()"
KEYS = "allowed = allowed & key_mask[:, None, None, :]"
POSITIONS = "positions = (torch.arange(ids.size(1), device=ids.device) - leading).clamp(min=0)"
BUFFERS = 'self.register_buffer("cos", cos)\n        self.register_buffer("sin", sin)'
LOSS = "return F.cross_entropy(logits[:, :-1][scored].float(), ids[:, 1:][scored])"

BUGS = [
    # rms_norm
    bug("rms_norm", "rms_subtracts_mean", "subtracts the mean first (LayerNorm without bias)",
        (RMS, "x = x - x.mean(dim=-1, keepdim=True)\n    " + RMS)),
    bug("rms_norm", "rms_eps_outside", "eps outside the square root",
        (RMS, "return x / (x.pow(2).mean(dim=-1, keepdim=True).sqrt() + eps) * weight")),
    bug("rms_norm", "rms_wrong_axis", "mean of x² over axis 0", ("mean(dim=-1, keepdim=True)", "mean(dim=0, keepdim=True)")),
    bug("rms_norm", "rms_wrong_axis", "mean of x² over axis 1", ("mean(dim=-1, keepdim=True)", "mean(dim=1, keepdim=True)")),
    bug("rms_norm", "rms_no_weight", "weight not applied", (RMS, RMS.removesuffix(" * weight"))),
    bug("rms_norm", "rms_eps_ignored", "eps argument ignored (1e-6 hard-coded)", ("keepdim=True) + eps)", "keepdim=True) + 1e-6)")),
    bug("rms_norm", "rms_no_sqrt", "divides by the mean square (no square root)",
        (RMS, "return x / (x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight")),
    bug("rms_norm", "library_call", "calls F.rms_norm (the operation the exercise writes from the formula)",
        (RMS, "return F.rms_norm(x, x.shape[-1:], weight, eps)")),
    bug("rms_norm", "library_call", "calls torch.rms_norm", (RMS, "return torch.rms_norm(x, (x.shape[-1],), weight, eps)")),
    # RMSNorm
    bug("RMSNorm", "rmsnorm_no_weight", "weight kept as a plain tensor, not a parameter",
        ("self.weight = nn.Parameter(torch.ones(d_model))", "self.weight = torch.ones(d_model)")),
    bug("RMSNorm", "rmsnorm_weight_ignored", "forward ignores the weight",
        ("return rms_norm(x, self.weight, self.eps)", "return rms_norm(x, torch.ones_like(self.weight), self.eps)")),
    bug("RMSNorm", "rmsnorm_eps_ignored", "eps not passed to rms_norm",
        ("return rms_norm(x, self.weight, self.eps)", "return rms_norm(x, self.weight)")),
    bug("RMSNorm", "rmsnorm_weight_init", "weight initialised at random (torch.rand)",
        ("self.weight = nn.Parameter(torch.ones(d_model))", "self.weight = nn.Parameter(torch.rand(d_model))")),
    bug("RMSNorm", "rmsnorm_bias", "a bias β as well (LayerNorm's parameters)",
        ("self.weight = nn.Parameter(torch.ones(d_model))",
         "self.weight = nn.Parameter(torch.ones(d_model))\n        self.bias = nn.Parameter(torch.zeros(d_model))"),
        ("return rms_norm(x, self.weight, self.eps)", "return rms_norm(x, self.weight, self.eps) + self.bias")),
    bug("RMSNorm", "rmsnorm_eps_default", "default eps 1e-5 (LayerNorm's)", ("eps: float = 1e-6", "eps: float = 1e-5")),
    bug("RMSNorm", "library_call", "forward calls F.rms_norm",
        ("return rms_norm(x, self.weight, self.eps)", "return F.rms_norm(x, x.shape[-1:], self.weight, self.eps)")),
    bug("RMSNorm", "library_call", "wraps nn.RMSNorm", source="""
class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.norm = nn.RMSNorm(d_model, eps=eps)

    def forward(self, x):
        return self.norm(x)
"""),
    # rope_angles
    bug("rope_angles", "rope_float64", "tables left in float64", (TABLES, "return angles.cos(), angles.sin()")),
    bug("rope_angles", "rope_cos_sin_swapped", "returns (sin, cos)", (TABLES, "return angles.sin().float(), angles.cos().float()")),
    bug("rope_angles", "rope_exponent_i", "exponent by the pair's index i (i/d instead of 2i/d)",
        ("torch.arange(0, d_head, 2, dtype=torch.float64)", "torch.arange(d_head // 2, dtype=torch.float64)")),
    bug("rope_angles", "rope_positions_from_1", "positions 1 … max_len",
        ("torch.arange(max_len, dtype=torch.float64)", "torch.arange(1, max_len + 1, dtype=torch.float64)")),
    bug("rope_angles", "rope_multiplied", "pos multiplied by base^(2i/d)", ("base ** (-torch.arange", "base ** (torch.arange")),
    bug("rope_angles", "rope_base_ignored", "base argument ignored (10000 hard-coded)", (THETA, THETA.replace("base **", "10000.0 **"))),
    bug("rope_angles", "rope_full_width", "each angle twice (Hugging Face's [max_len, d_head] tables)",
        (TABLES, "angles = torch.cat([angles, angles], dim=-1)\n    " + TABLES)),
    # apply_rope
    bug("apply_rope", "rope_half_split", "half-split pairs (rotate_half) instead of interleaved",
        ("x0, x1 = x[..., 0::2], x[..., 1::2]", "x0, x1 = x.chunk(2, dim=-1)"),
        ("turned = torch.stack(", "turned = torch.cat("), ("return turned.flatten(-2).to(x.dtype)", "return turned.to(x.dtype)")),
    bug("apply_rope", "rope_sign_flipped", "rotation sign flipped",
        (TURNED, "turned = torch.stack((x0 * cos + x1 * sin, -x0 * sin + x1 * cos), dim=-1)")),
    bug("apply_rope", "rope_apply_swapped", "cos and sin in each other's place",
        (TURNED, "turned = torch.stack((x0 * sin - x1 * cos, x0 * cos + x1 * sin), dim=-1)")),
    bug("apply_rope", "rope_output_concatenated", "rotated halves concatenated, not interleaved back",
        ("turned = torch.stack(", "turned = torch.cat("), ("return turned.flatten(-2).to(x.dtype)", "return turned.to(x.dtype)")),
    bug("apply_rope", "rope_dtype_changed", "returns float32 for a bf16 x (no cast back)",
        ("return turned.flatten(-2).to(x.dtype)", "return turned.flatten(-2)")),
    bug("apply_rope", "rope_tables_not_broadcast", "tables reshaped to [1, 1, L, d/2] (cos[None, None])",
        ("x0, x1 = x[..., 0::2], x[..., 1::2]", "cos, sin = cos[None, None], sin[None, None]\n    x0, x1 = x[..., 0::2], x[..., 1::2]")),
    bug("apply_rope", "changes_its_input", "writes the rotation into x in place and returns x",
        ("turned = torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1)      # [B, H, L, d/2, 2]\n"
         "    return turned.flatten(-2).to(x.dtype)",
         "x[..., 0::2], x[..., 1::2] = x0 * cos - x1 * sin, x0 * sin + x1 * cos\n    return x")),
    # SwiGLU
    bug("SwiGLU", "swiglu_bias", "linear layers with biases", ("bias=False", "bias=True")),
    bug("SwiGLU", "swiglu_w2_w3_swapped", "w2 widens, w3 narrows (the roles of w2 and w3 swapped)",
        ("self.w3 = nn.Linear(d_model, d_ff, bias=False)", "self.w3 = nn.Linear(d_ff, d_model, bias=False)"),
        ("self.w2 = nn.Linear(d_ff, d_model, bias=False)", "self.w2 = nn.Linear(d_model, d_ff, bias=False)"),
        (GATE, "return self.w3(F.silu(self.w1(x)) * self.w2(x))")),
    bug("SwiGLU", "swiglu_gate_swapped", "SiLU on the w3 branch", (GATE, "return self.w2(self.w1(x) * F.silu(self.w3(x)))")),
    bug("SwiGLU", "swiglu_silu_both", "SiLU on both branches", (GATE, "return self.w2(F.silu(self.w1(x)) * F.silu(self.w3(x)))")),
    bug("SwiGLU", "swiglu_sigmoid", "sigmoid instead of SiLU", (GATE, "return self.w2(torch.sigmoid(self.w1(x)) * self.w3(x))")),
    bug("SwiGLU", "swiglu_gelu", "GELU instead of SiLU (GEGLU)", (GATE, "return self.w2(F.gelu(self.w1(x)) * self.w3(x))")),
    bug("SwiGLU", "swiglu_no_gate", "w3 branch left out", (GATE, "return self.w2(F.silu(self.w1(x)))")),
    # DecoderBlock
    bug("DecoderBlock", "block_bias", "attention projections with biases",
        ("nn.Linear(d_model, d_model, bias=False)", "nn.Linear(d_model, d_model)")),
    bug("DecoderBlock", "block_post_norm", "norm after the residual (post-norm)",
        ("h = self.attn_norm(x)", "h = x"),
        (ATTN_OUT, "x = self.attn_norm(x + self.dropout(self.out_proj(a.transpose(1, 2).reshape(B, L, D))))"),
        (FFN_OUT, "return self.ffn_norm(x + self.dropout(self.ffn(x)))")),
    bug("DecoderBlock", "block_residual_normalised", "the residual adds the normalised input",
        ("h = self.attn_norm(x)", "h = x = self.attn_norm(x)"),
        (FFN_OUT, "x = self.ffn_norm(x)\n        return x + self.dropout(self.ffn(x))")),
    bug("DecoderBlock", "block_shared_norm", "attn_norm used before the feed-forward too",
        ("self.ffn(self.ffn_norm(x))", "self.ffn(self.attn_norm(x))")),
    bug("DecoderBlock", "block_no_rope", "q and k not rotated", (ROPE, "q, k = q, k")),
    bug("DecoderBlock", "block_rope_q_only", "rotation applied to q only", (ROPE, "q = apply_rope(q, cos, sin)")),
    bug("DecoderBlock", "block_rope_on_v", "rotation applied to v too",
        (ROPE, ROPE.replace("q, k =", "q, k, v =") + ", apply_rope(v, cos, sin)")),
    bug("DecoderBlock", "block_scale_d_model", "scores divided by √d_model", ("/ math.sqrt(D // H)", "/ math.sqrt(D)")),
    bug("DecoderBlock", "block_no_causal", "causal mask missing", (CAUSAL, CAUSAL.removesuffix(".tril()"))),
    bug("DecoderBlock", "block_causal_inverted", "causal mask inverted (the future only)",
        (CAUSAL, CAUSAL.replace("= torch.ones", "= ~torch.ones"))),
    bug("DecoderBlock", "block_key_mask_ignored", "key_mask ignored", (KEYS, "allowed = allowed")),
    bug("DecoderBlock", "block_key_mask_inverted", "key_mask inverted", (KEYS, KEYS.replace("& key_mask", "& ~key_mask"))),
    bug("DecoderBlock", "block_key_mask_query_axis", "key_mask over the query axis (key_mask[:, None, :, None])",
        (KEYS, KEYS.replace("key_mask[:, None, None, :]", "key_mask[:, None, :, None]"))),
    bug("DecoderBlock", "block_key_mask_query_axis", "key_mask over the query axis, -inf and nan_to_num",
        (KEYS, KEYS.replace("key_mask[:, None, None, :]", "key_mask[:, None, :, None]")),
        ("scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)",
         'scores = scores.masked_fill(~allowed, float("-inf"))'),
        ("a = torch.softmax(scores, dim=-1) @ v", "a = torch.softmax(scores, dim=-1).nan_to_num(0.0) @ v")),
    bug("DecoderBlock", "block_nan_pad_rows", "masked with -inf: fully masked pad queries give NaN",
        ("torch.finfo(scores.dtype).min", 'float("-inf")')),
    bug("DecoderBlock", "block_no_dropout", "dropout argument ignored", ("nn.Dropout(dropout)", "nn.Dropout(0.0)")),
    bug("DecoderBlock", "block_mask_on_cpu", "causal mask made without device=", (CAUSAL, CAUSAL.replace(", device=x.device", ""))),
    bug("DecoderBlock", "given_answer", "forward returns the given block_forward's output (issue 49)",
        ("        B, L, D = x.shape\n        H = self.n_head\n",
         "        return block_forward(self, x, cos, sin, key_mask, n_head=self.n_head, dropout=self.dropout.p)[0]\n"
         "        B, L, D = x.shape\n        H = self.n_head\n")),
    # DecoderLM
    bug("DecoderLM", "lm_d_ff_default", "d_ff default 4·d_model", ("d_ff = 8 * round(8 * d_model / 3 / 8)", "d_ff = 4 * d_model")),
    bug("DecoderLM", "lm_d_ff_default", "d_ff default int(8/3·d_model), not a multiple of 8",
        ("d_ff = 8 * round(8 * d_model / 3 / 8)", "d_ff = int(8 * d_model / 3)")),
    bug("DecoderLM", "lm_rope_d_model", "rotary tables built for d_model", ("rope_angles(max_len, d_model // n_head)", "rope_angles(max_len, d_model)")),
    bug("DecoderLM", "lm_head_bias", "lm_head with a bias", ("nn.Linear(d_model, vocab_size, bias=False)", "nn.Linear(d_model, vocab_size)")),
    bug("DecoderLM", "lm_tied_copied", "tied weights copied instead of shared",
        ("self.lm_head.weight = self.embed.weight", "self.lm_head.weight = nn.Parameter(self.embed.weight.detach().clone())")),
    bug("DecoderLM", "lm_tied_copied", "tied by sharing .data (two parameters)",
        ("self.lm_head.weight = self.embed.weight", "self.lm_head.weight.data = self.embed.weight.data")),
    bug("DecoderLM", "lm_tie_ignored", "weights tied even when tie_weights=False", ("if tie_weights:", "if True:")),
    bug("DecoderLM", "lm_embed_scaled", "embeddings scaled by √d_model",
        ("x = self.embed(ids)", "x = self.embed(ids) * math.sqrt(self.embed.embedding_dim)")),
    bug("DecoderLM", "lm_no_final_norm", "no final norm", ("return self.lm_head(self.norm(x))", "return self.lm_head(x)")),
    bug("DecoderLM", "lm_positions_from_1", "positions counted from 1", ("- leading).clamp(min=0)", "- leading + 1).clamp(min=0)")),
    bug("DecoderLM", "lm_positions_from_row_start", "positions from the padded row's start (left pads shift them)",
        (POSITIONS, "positions = torch.arange(ids.size(1), device=ids.device).expand(ids.shape)")),
    bug("DecoderLM", "lm_pads_attended", "no key mask passed to the blocks", ("x = block(x, cos, sin, key_mask)", "x = block(x, cos, sin)")),
    bug("DecoderLM", "lm_pad_id_hardcoded", "pads taken as id 0", ("key_mask = ids != self.pad_id", "key_mask = ids != 0")),
    bug("DecoderLM", "lm_dropout_not_passed", "the blocks built without dropout",
        ("DecoderBlock(d_model, n_head, d_ff, dropout)", "DecoderBlock(d_model, n_head, d_ff)")),
    bug("DecoderLM", "lm_tensor_on_cpu", "positions from torch.arange without device=",
        ("torch.arange(ids.size(1), device=ids.device)", "torch.arange(ids.size(1))")),
    bug("DecoderLM", "lm_tables_not_buffers", "cos and sin kept as plain attributes", (BUFFERS, "self.cos, self.sin = cos, sin")),
    # lm_loss
    bug("lm_loss", "loss_not_shifted", "logits scored against the same position's token",
        ("scored = loss_mask[:, 1:]", "scored = loss_mask"), (LOSS, "return F.cross_entropy(logits[scored].float(), ids[scored])")),
    bug("lm_loss", "loss_shift_reversed", "logits[:, 1:] against ids[:, :-1]",
        (LOSS, "return F.cross_entropy(logits[:, 1:][scored].float(), ids[:, :-1][scored])")),
    bug("lm_loss", "loss_mask_ignored", "loss on every position (the prompt too)",
        (LOSS, "return F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), ids[:, 1:].flatten())")),
    bug("lm_loss", "loss_mask_unshifted", "positions chosen with loss_mask[:, :-1]", ("scored = loss_mask[:, 1:]", "scored = loss_mask[:, :-1]")),
    bug("lm_loss", "loss_mean_all", "masked losses divided by all positions",
        (LOSS, LOSS.replace("[scored])", '[scored], reduction="sum") / scored.numel()'))),
    bug("lm_loss", "loss_sum", "summed instead of averaged", (LOSS, LOSS.replace("[scored])", '[scored], reduction="sum")'))),
    bug("lm_loss", "loss_log_of_softmax", "log(softmax(x)), which underflows",
        (LOSS, "logp = torch.log(torch.softmax(logits[:, :-1][scored].float(), dim=-1))\n"
               "    return -logp.gather(1, ids[:, 1:][scored][:, None]).mean()")),
    bug("lm_loss", "loss_not_a_tensor", "returns .item()", (LOSS, LOSS + ".item()")),
]

ALTERNATIVES = [
    Variant("RMSNorm", "torch.rsqrt inline, eps and weight in another order", source='''
class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight
'''),
    Variant("rms_norm", "x / sqrt(mean(x * x) + eps), torch.mean", source='''
def rms_norm(x, weight, eps=1e-6):
    return weight * (x / torch.sqrt(torch.mean(x * x, dim=-1, keepdim=True) + eps))
'''),
    Variant("rms_norm", "the vector norm divided by √D, in float64, cast back", source='''
def rms_norm(x, weight, eps=1e-6):
    h = x.double()
    ms = torch.linalg.vector_norm(h, dim=-1, keepdim=True) ** 2 / h.shape[-1]
    return (h / (ms + eps).sqrt()).to(x.dtype) * weight
'''),
    Variant("rms_norm", "einsum for the mean square", source='''
def rms_norm(x, weight, eps=1e-6):
    ms = torch.einsum("...d,...d->...", x, x)[..., None] / x.shape[-1]
    return x * (ms + eps).rsqrt() * weight
'''),
    Variant("rms_norm", "x * torch.rsqrt(...) in float32, cast back", source='''
def rms_norm(x, weight, eps=1e-6):
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + eps)
    return h.type_as(x) * weight
'''),
    Variant("RMSNorm", "computes inline, eps stored under another name", source='''
class RMSNorm(nn.Module):
    def __init__(self, d_model, eps=1e-6):
        super().__init__()
        self.variance_epsilon = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
'''),
    Variant("rope_angles", "complex numbers: torch.polar, float32 throughout", source='''
def rope_angles(max_len, d_head, base=10000.0):
    freqs = 1.0 / (base ** (torch.arange(0, d_head, 2)[: d_head // 2].float() / d_head))
    t = torch.arange(max_len, dtype=torch.float32)
    freqs = torch.outer(t, freqs)
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs)
    return freqs_cis.real.contiguous(), freqs_cis.imag.contiguous()
'''),
    Variant("apply_rope", "complex numbers: torch.view_as_complex (Meta's LLaMA)", source='''
def apply_rope(x, cos, sin):
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    out = torch.view_as_real(xc * torch.complex(cos.float(), sin.float())).flatten(-2)
    return out.type_as(x)
'''),
    Variant("apply_rope", "half-split rotate_half applied to the features permuted to [evens | odds]", source='''
def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x, cos, sin):
    d = x.shape[-1]
    perm = torch.cat([torch.arange(0, d, 2), torch.arange(1, d, 2)]).to(x.device)
    xh = x[..., perm]  # the interleaved pairs (2i, 2i+1) become (i, i + d/2)
    c, s = torch.cat((cos, cos), -1), torch.cat((sin, sin), -1)
    out = xh * c + rotate_half(xh) * s
    return out[..., torch.argsort(perm)].to(x.dtype)
'''),
    Variant("apply_rope", "a 2x2 rotation matrix per pair, with einsum", source='''
def apply_rope(x, cos, sin):
    pairs = x.unflatten(-1, (-1, 2))  # [..., d/2, 2]
    rot = torch.stack((torch.stack((cos, -sin), -1), torch.stack((sin, cos), -1)), -2)  # [..., d/2, 2, 2]
    return torch.einsum("...ij,...j->...i", rot, pairs.to(rot.dtype)).flatten(-2).to(x.dtype)
'''),
    Variant("SwiGLU", "x * sigmoid(x) by hand", replace=(
        (GATE, "a = self.w1(x)\n        return self.w2(a * torch.sigmoid(a) * self.w3(x))"),
    )),
    Variant("SwiGLU", "an nn.SiLU module, the layers made in another order", source='''
class SwiGLU(nn.Module):
    def __init__(self, d_model, d_ff):
        super().__init__()
        self.w2 = nn.Linear(d_ff, d_model, bias=False)
        self.w3 = nn.Linear(d_model, d_ff, bias=False)
        self.w1 = nn.Linear(d_model, d_ff, bias=False)
        self.act = nn.SiLU()

    def forward(self, x):
        return self.w2(self.act(self.w1(x)) * self.w3(x))
'''),
    Variant("DecoderBlock", "F.scaled_dot_product_attention with a boolean mask, F.dropout", source='''
class DecoderBlock(nn.Module):
    def __init__(self, d_model, n_head, d_ff, dropout=0.0):
        super().__init__()
        self.n_head, self.p = n_head, dropout
        self.attn_norm, self.ffn_norm = RMSNorm(d_model), RMSNorm(d_model)
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.k_proj = nn.Linear(d_model, d_model, bias=False)
        self.v_proj = nn.Linear(d_model, d_model, bias=False)
        self.out_proj = nn.Linear(d_model, d_model, bias=False)
        self.ffn = SwiGLU(d_model, d_ff)

    def forward(self, x, cos, sin, key_mask=None):
        L = x.size(1)
        h = self.attn_norm(x)
        q, k, v = (p(h).unflatten(-1, (self.n_head, -1)).transpose(1, 2)
                   for p in (self.q_proj, self.k_proj, self.v_proj))
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        allowed = torch.ones(L, L, dtype=torch.bool, device=x.device).tril()
        if key_mask is not None:
            allowed = allowed & key_mask[:, None, None, :]
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=self.p if self.training else 0.0)
        x = x + F.dropout(self.out_proj(a.transpose(1, 2).flatten(2)), self.p, self.training)
        return x + F.dropout(self.ffn(self.ffn_norm(x)), self.p, self.training)
'''),
    Variant("DecoderBlock", "einsum attention, -inf then nan_to_num, an attention helper", source='''
class DecoderBlock(nn.Module):
    def __init__(self, d_model, n_head, d_ff, dropout=0.0):
        super().__init__()
        self.n_head = n_head
        self.attn_norm = RMSNorm(d_model)
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.k_proj = nn.Linear(d_model, d_model, bias=False)
        self.v_proj = nn.Linear(d_model, d_model, bias=False)
        self.out_proj = nn.Linear(d_model, d_model, bias=False)
        self.ffn_norm = RMSNorm(d_model)
        self.ffn = SwiGLU(d_model, d_ff)
        self.drop_attn, self.drop_ffn = nn.Dropout(dropout), nn.Dropout(dropout)

    def attend(self, h, cos, sin, key_mask):
        B, L, D = h.shape
        H = self.n_head
        q = apply_rope(self.q_proj(h).view(B, L, H, -1).transpose(1, 2), cos, sin)
        k = apply_rope(self.k_proj(h).view(B, L, H, -1).transpose(1, 2), cos, sin)
        v = self.v_proj(h).view(B, L, H, -1).transpose(1, 2)
        scores = torch.einsum("bhid,bhjd->bhij", q, k) * (D // H) ** -0.5
        mask = torch.tril(torch.ones_like(scores[0, 0], dtype=torch.bool))
        if key_mask is not None:
            mask = mask & key_mask[:, None, None, :]
        weights = scores.masked_fill(~mask, float("-inf")).softmax(-1).nan_to_num(0.0)
        return self.out_proj(torch.einsum("bhij,bhjd->bihd", weights, v).reshape(B, L, D))

    def forward(self, x, cos, sin, key_mask=None):
        x = x + self.drop_attn(self.attend(self.attn_norm(x), cos, sin, key_mask))
        return x + self.drop_ffn(self.ffn(self.ffn_norm(x)))
'''),
    Variant("DecoderLM", "positions from the running count of real tokens", replace=(
        (POSITIONS, "positions = (key_mask.long().cumsum(dim=-1) - 1).clamp(min=0)"),
    )),
    Variant("DecoderLM", "non-persistent buffers, the embedding tied to the head's weight", replace=(
        ("self.lm_head.weight = self.embed.weight", "self.embed.weight = self.lm_head.weight"),
        (BUFFERS, 'self.register_buffer("cos", cos, persistent=False)\n'
                  '        self.register_buffer("sin", sin, persistent=False)'),
    )),
    Variant("lm_loss", "F.cross_entropy with ignore_index on the masked targets", source='''
def lm_loss(logits, ids, loss_mask):
    target = ids[:, 1:].masked_fill(~loss_mask[:, 1:], -100)
    return F.cross_entropy(logits[:, :-1].transpose(1, 2), target, ignore_index=-100)
'''),
    Variant("lm_loss", "log_softmax and gather, averaged by the mask's count", source='''
def lm_loss(logits, ids, loss_mask):
    logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
    nll = -logp.gather(-1, ids[:, 1:, None]).squeeze(-1)
    keep = loss_mask[:, 1:].float()
    return (nll * keep).sum() / keep.sum()
'''),
]

# What each planted mistake earns on its exercise (the rubric in CONTRIBUTING):
SCORES = {
    ('rms_norm', 'subtracts the mean first (LayerNorm without bias)'): 0,
    ('rms_norm', 'eps outside the square root'): 1.5,
    ('rms_norm', 'mean of x² over axis 0'): 0,
    ('rms_norm', 'mean of x² over axis 1'): 0,
    ('rms_norm', 'weight not applied'): 0,
    ('rms_norm', 'eps argument ignored (1e-6 hard-coded)'): 1.5,
    ('rms_norm', 'divides by the mean square (no square root)'): 0,
    ('rms_norm', 'calls F.rms_norm (the operation the exercise writes from the formula)'): 0,
    ('rms_norm', 'calls torch.rms_norm'): 0,
    ('RMSNorm', 'weight kept as a plain tensor, not a parameter'): 0,
    ('RMSNorm', 'forward ignores the weight'): 1,
    ('RMSNorm', 'eps not passed to rms_norm'): 1.5,
    ('RMSNorm', "default eps 1e-5 (LayerNorm's)"): 1.5,
    ('RMSNorm', 'weight initialised at random (torch.rand)'): 1.5,
    ('RMSNorm', "a bias β as well (LayerNorm's parameters)"): 1.5,
    ('RMSNorm', 'forward calls F.rms_norm'): 0,
    ('RMSNorm', 'wraps nn.RMSNorm'): 0,
    ('rope_angles', 'tables left in float64'): 1.5,
    ('rope_angles', 'returns (sin, cos)'): 0.5,
    ('rope_angles', "exponent by the pair's index i (i/d instead of 2i/d)"): 0.5,
    ('rope_angles', 'positions 1 … max_len'): 0.5,
    ('rope_angles', 'pos multiplied by base^(2i/d)'): 0.5,
    ('rope_angles', 'base argument ignored (10000 hard-coded)'): 1.5,
    ('rope_angles', "each angle twice (Hugging Face's [max_len, d_head] tables)"): 0,
    ('apply_rope', 'half-split pairs (rotate_half) instead of interleaved'): 0,
    ('apply_rope', 'rotation sign flipped'): 0,
    ('apply_rope', "cos and sin in each other's place"): 0,
    ('apply_rope', 'rotated halves concatenated, not interleaved back'): 0,
    ('apply_rope', 'returns float32 for a bf16 x (no cast back)'): 2.5,
    ('apply_rope', 'tables reshaped to [1, 1, L, d/2] (cos[None, None])'): 2.5,
    ('apply_rope', 'writes the rotation into x in place and returns x'): 0,
    ('SwiGLU', 'linear layers with biases'): 1.5,
    ('SwiGLU', 'w2 widens, w3 narrows (the roles of w2 and w3 swapped)'): 0,
    ('SwiGLU', 'SiLU on the w3 branch'): 0.5,
    ('SwiGLU', 'SiLU on both branches'): 0.5,
    ('SwiGLU', 'sigmoid instead of SiLU'): 0.5,
    ('SwiGLU', 'GELU instead of SiLU (GEGLU)'): 0.5,
    ('SwiGLU', 'w3 branch left out'): 0.5,
    ('DecoderBlock', 'attention projections with biases'): 3.5,
    ('DecoderBlock', 'norm after the residual (post-norm)'): 2,
    ('DecoderBlock', 'the residual adds the normalised input'): 2,
    ('DecoderBlock', 'attn_norm used before the feed-forward too'): 2.5,
    ('DecoderBlock', 'q and k not rotated'): 2.5,
    ('DecoderBlock', 'rotation applied to q only'): 2.5,
    ('DecoderBlock', 'rotation applied to v too'): 2.5,
    ('DecoderBlock', 'scores divided by √d_model'): 2.5,
    ('DecoderBlock', 'causal mask missing'): 2.5,
    ('DecoderBlock', 'causal mask inverted (the future only)'): 1.5,
    ('DecoderBlock', 'key_mask ignored'): 3,
    ('DecoderBlock', 'key_mask inverted'): 3,
    ('DecoderBlock', 'key_mask over the query axis (key_mask[:, None, :, None])'): 3,
    ('DecoderBlock', 'key_mask over the query axis, -inf and nan_to_num'): 3,
    ('DecoderBlock', 'masked with -inf: fully masked pad queries give NaN'): 3,
    ('DecoderBlock', 'dropout argument ignored'): 3.5,
    ('DecoderBlock', 'causal mask made without device='): 3.5,
    ('DecoderBlock', "forward returns the given block_forward's output (issue 49)"): 0.5,
    ('DecoderLM', 'd_ff default 4·d_model'): 3.5,
    ('DecoderLM', 'd_ff default int(8/3·d_model), not a multiple of 8'): 3.5,
    ('DecoderLM', 'rotary tables built for d_model'): 2,
    ('DecoderLM', 'lm_head with a bias'): 3.5,
    ('DecoderLM', 'tied weights copied instead of shared'): 3.5,
    ('DecoderLM', 'tied by sharing .data (two parameters)'): 3.5,
    ('DecoderLM', 'weights tied even when tie_weights=False'): 3.5,
    ('DecoderLM', 'embeddings scaled by √d_model'): 2,
    ('DecoderLM', 'no final norm'): 2,
    ('DecoderLM', 'positions counted from 1'): 3,
    ('DecoderLM', "positions from the padded row's start (left pads shift them)"): 3,
    ('DecoderLM', 'no key mask passed to the blocks'): 3,
    ('DecoderLM', 'pads taken as id 0'): 2,
    ('DecoderLM', 'the blocks built without dropout'): 3.5,
    ('DecoderLM', 'positions from torch.arange without device='): 3.5,
    ('DecoderLM', 'cos and sin kept as plain attributes'): 3.5,
    ('lm_loss', "logits scored against the same position's token"): 0.25,
    ('lm_loss', 'logits[:, 1:] against ids[:, :-1]'): 0.25,
    ('lm_loss', 'loss on every position (the prompt too)'): 0.25,
    ('lm_loss', 'positions chosen with loss_mask[:, :-1]'): 0.25,
    ('lm_loss', 'masked losses divided by all positions'): 0.25,
    ('lm_loss', 'summed instead of averaged'): 0.25,
    ('lm_loss', 'log(softmax(x)), which underflows'): 1.5,
    ('lm_loss', 'returns .item()'): 1.75,
}
