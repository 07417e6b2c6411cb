"""Planted mistakes in lesson 03 (scaled dot-product attention and masks; torch)."""

from planted import Variant, bug

LESSON = "03_scaled_dot_product_attention"
SDPA = "scaled_dot_product_attention"

BUGS = [
    # scaled_dot_product_attention
    bug(SDPA, "mask_inverted", "mask inverted", ("scores.masked_fill(~allowed", "scores.masked_fill(allowed"),
        ("weights.masked_fill(~allowed", "weights.masked_fill(allowed")),
    bug(SDPA, "mask_fill_zero", "masked scores filled with 0", ('masked_fill(~allowed, float("-inf"))', "masked_fill(~allowed, 0.0)"),
        ("weights = weights.masked_fill(~allowed, 0.0)", "pass")),
    bug(SDPA, "mask_after_softmax", "mask applied after softmax without renormalising",
        ('scores = scores.masked_fill(~allowed, float("-inf"))', "pass")),
    bug(SDPA, "masked_rows_nan", "NaN on fully masked rows (-inf fill, no clean-up)",
        ("weights = weights.masked_fill(~allowed, 0.0)", "pass")),
    bug(SDPA, "masked_rows_uniform", "fully masked rows uniform (finite fill, no clean-up)",
        ('float("-inf"))', "-1e9)"), ("weights = weights.masked_fill(~allowed, 0.0)", "pass")),
    bug(SDPA, "mask_lost_with_dropout", "the dropout branch recomputes the weights without the mask",
        ("weights = F.dropout(weights, p=dropout_p)",
         "weights = F.dropout(torch.softmax(torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d_k), dim=-1), "
         "p=dropout_p)")),
    bug(SDPA, "scale_by_d", "scaled by d instead of sqrt(d)", ("/ math.sqrt(d_k)", "/ d_k")),
    bug(SDPA, "never_scaled", "not scaled", ("/ math.sqrt(d_k)", "")),
    bug(SDPA, "scale_by_lk", "scaled by sqrt of the number of keys", ("math.sqrt(d_k)", "math.sqrt(k.size(-2))")),
    bug(SDPA, "softmax_query_axis", "softmax over the query axis", ("torch.softmax(scores, dim=-1)", "torch.softmax(scores, dim=-2)")),
    bug(SDPA, "weights_times_keys", "weights applied to the keys", ("torch.matmul(weights, v)", "torch.matmul(weights, k)")),
    bug(SDPA, "absolute_axes", "k transposed over the wrong axes (only works for 4-D inputs)",
        ("k.transpose(-2, -1)", "k.transpose(2, 3)")),
    bug(SDPA, "dropout_ignored", "dropout ignored", ("if dropout_p > 0.0:", "if False:")),
    bug(SDPA, "dropout_no_rescale", "dropout without rescaling",
        ("weights = F.dropout(weights, p=dropout_p)",
         "weights = weights * (torch.rand_like(weights) > dropout_p)")),
    bug(SDPA, "dropout_not_on_weights", "dropout on the output instead of the weights",
        ("weights = F.dropout(weights, p=dropout_p)",
         "return F.dropout(torch.matmul(weights, v), p=dropout_p), weights")),
    bug(SDPA, "dropout_not_on_weights", "dropout on v instead of the weights",
        ("weights = F.dropout(weights, p=dropout_p)", "v = F.dropout(v, p=dropout_p)")),
    bug(SDPA, "library_call", "calls F.scaled_dot_product_attention", source='''
def scaled_dot_product_attention(q, k, v, mask=None, dropout_p=0.0):
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return out, torch.softmax(scores, -1).nan_to_num(0.0)
'''),
    # causal_mask
    bug("causal_mask", "causal_upper", "upper instead of lower triangle", (".tril()", ".triu()")),
    bug("causal_mask", "causal_no_diagonal", "a token unable to see itself", (".tril()", ".tril(diagonal=-1)")),
    bug("causal_mask", "causal_inverted", "inverted (True = masked)", ("return torch.ones", "return ~torch.ones")),
    bug("causal_mask", "causal_float", "float mask", ("dtype=torch.bool", "dtype=torch.float32")),
    bug("causal_mask", "causal_device_ignored", "device ignored (no device parameter)",
        ("def causal_mask(L: int, device=None)", "def causal_mask(L: int)"), ("device=device", "")),
    # padding_mask
    bug("padding_mask", "padding_inverted", "inverted", ("tokens != pad_id", "tokens == pad_id")),
    bug("padding_mask", "padding_masks_queries", "masking queries instead of keys", ("[:, None, None, :]", "[:, None, :, None]")),
    bug("padding_mask", "padding_shape", "missing its broadcast axes", ("[:, None, None, :]", "")),
    bug("padding_mask", "padding_shape", "only one broadcast axis", ("[:, None, None, :]", "[:, None, :]")),
    bug("padding_mask", "padding_pad_id_ignored", "pad_id ignored (always 0)", ("tokens != pad_id", "tokens != 0")),
    bug(SDPA, "sdpa_pair_order", "returns (weights, output)",
        ("return torch.matmul(weights, v), weights", "return weights, torch.matmul(weights, v)")),
    bug(SDPA, "mask_not_broadcast", "mask applied by boolean indexing (needs the scores' full shape)",
        ('scores = scores.masked_fill(~allowed, float("-inf"))', 'scores[~allowed] = float("-inf")'),
        ("weights = weights.masked_fill(~allowed, 0.0)", "weights[~allowed] = 0.0")),
    bug("padding_mask", "padding_not_bool", "float mask (1.0 for real tokens)",
        ("(tokens != pad_id)[:, None, None, :]", "(tokens != pad_id).float()[:, None, None, :]")),
    bug("scaled_dot_product_attention", "changes_its_input", "scales q in place (q /= √d_k)",
        ("scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d_k)",
         "q /= math.sqrt(d_k)\n    scores = torch.matmul(q, k.transpose(-2, -1))")),
]

ALTERNATIVES = [
    Variant(SDPA, "finite fill -1e9 with renormalisation, torch.where", source='''
def scaled_dot_product_attention(q, k, v, mask=None, dropout_p=0.0):
    scores = q @ k.transpose(-1, -2) * (1.0 / q.shape[-1] ** 0.5)
    if mask is not None:
        scores = torch.where(mask, scores, torch.tensor(-1e9, dtype=scores.dtype))
    w = scores.softmax(-1)
    if mask is not None:
        w = w * mask
        w = w / w.sum(-1, keepdim=True).clamp_min(1e-30)
    if dropout_p:
        w = torch.nn.functional.dropout(w, dropout_p, training=True)
    return w @ v, w
'''),
    Variant(SDPA, "einsum, finfo.min fill, nan_to_num", source='''
def scaled_dot_product_attention(q, k, v, mask=None, dropout_p=0.0):
    s = torch.einsum("...qd,...kd->...qk", q, k) / math.sqrt(k.shape[-1])
    if mask is not None:
        s = s.masked_fill(mask.logical_not(), torch.finfo(s.dtype).min)
    w = torch.softmax(s, dim=-1)
    if mask is not None:
        w = torch.where(mask, w, torch.zeros_like(w))
    w = torch.nn.functional.dropout(w, p=dropout_p, training=dropout_p > 0)
    return torch.einsum("...qk,...kd->...qd", w, v), w
'''),
    Variant(SDPA, "-inf fill, nan_to_num after softmax, manual dropout mask", source='''
def scaled_dot_product_attention(q, k, v, mask=None, dropout_p=0.0):
    s = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1))
    if mask is not None:
        s = s.masked_fill(mask == False, float("-inf"))  # noqa: E712
    w = torch.nan_to_num(torch.softmax(s, -1), nan=0.0)
    if dropout_p > 0:
        keep = (torch.rand_like(w) >= dropout_p).to(w.dtype)
        w = w * keep / (1 - dropout_p)
    return w @ v, w
'''),
    Variant(SDPA, "in-place masked_fill_ with the dtype's minimum, rows with no key zeroed by any()", source='''
def scaled_dot_product_attention(q, k, v, mask=None, dropout_p=0.0):
    scores = (q / math.sqrt(q.shape[-1])) @ k.mT
    if mask is not None:
        mask = torch.broadcast_to(mask, scores.shape)
        scores.masked_fill_(~mask, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=-1)
    if mask is not None:
        weights = weights * mask.any(dim=-1, keepdim=True) * mask
    if dropout_p:
        weights = F.dropout(weights, dropout_p)
    return weights @ v, weights
'''),
    Variant(SDPA, "mask expanded to the scores' shape, then boolean indexing", source='''
def scaled_dot_product_attention(q, k, v, mask=None, dropout_p=0.0):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        hidden = ~mask.expand_as(scores)
        scores[hidden] = float("-inf")
    weights = scores.softmax(-1)
    if mask is not None:
        weights[hidden] = 0.0
    if dropout_p > 0:
        weights = F.dropout(weights, dropout_p)
    return weights @ v, weights
'''),
    Variant(SDPA, "torch.bmm over the flattened leading axes", source='''
def scaled_dot_product_attention(q, k, v, mask=None, dropout_p=0.0):
    lead = torch.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    (Lq, d), (Lk, dv) = q.shape[-2:], v.shape[-2:]
    qf = q.expand(*lead, Lq, d).reshape(-1, Lq, d)
    kf = k.expand(*lead, Lk, d).reshape(-1, Lk, d)
    scores = torch.bmm(qf, kf.transpose(1, 2)).reshape(*lead, Lq, Lk) / math.sqrt(d)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, -1)
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)
    if dropout_p > 0:
        weights = F.dropout(weights, p=dropout_p)
    wl = weights.shape[:-2]
    out = torch.bmm(weights.reshape(-1, Lq, Lk), v.expand(*wl, Lk, dv).reshape(-1, Lk, dv))
    return out.reshape(*wl, Lq, dv), weights
'''),
    Variant("causal_mask", "tril of ones, then bool", source='''
def causal_mask(L, device=None):
    return torch.tril(torch.ones(L, L, device=device)).bool()
'''),
    Variant("causal_mask", "arange comparison", source='''
def causal_mask(L, device=None):
    i = torch.arange(L, device=device)
    return i[:, None] >= i[None, :]
'''),
    Variant("causal_mask", "not triu above the diagonal", source='''
def causal_mask(L, device=None):
    return ~torch.triu(torch.ones(L, L, dtype=torch.bool, device=device), diagonal=1)
'''),
    Variant("padding_mask", "ne and unsqueeze", source='''
def padding_mask(tokens, pad_id):
    return tokens.ne(pad_id).unsqueeze(1).unsqueeze(2)
'''),
    Variant("padding_mask", "torch.ne, then None indexing", source='''
def padding_mask(tokens, pad_id):
    return torch.ne(tokens, pad_id)[:, None, None]
'''),
    Variant("padding_mask", "view", source='''
def padding_mask(tokens, pad_id):
    B, L = tokens.shape
    return (tokens != pad_id).view(B, 1, 1, L)
'''),
]

# What each planted mistake earns on its exercise (the rubric in CONTRIBUTING):
SCORES = {
    ('scaled_dot_product_attention', 'the dropout branch recomputes the weights without the mask'): 9.5,
    ('scaled_dot_product_attention', 'mask inverted'): 5,
    ('scaled_dot_product_attention', 'masked scores filled with 0'): 5,
    ('scaled_dot_product_attention', 'mask applied after softmax without renormalising'): 5,
    ('scaled_dot_product_attention', 'NaN on fully masked rows (-inf fill, no clean-up)'): 9,
    ('scaled_dot_product_attention', 'fully masked rows uniform (finite fill, no clean-up)'): 9,
    ('scaled_dot_product_attention', 'scaled by d instead of sqrt(d)'): 7,
    ('scaled_dot_product_attention', 'not scaled'): 7,
    ('scaled_dot_product_attention', 'scaled by sqrt of the number of keys'): 7,
    ('scaled_dot_product_attention', 'softmax over the query axis'): 2,
    ('scaled_dot_product_attention', 'weights applied to the keys'): 5.5,
    ('scaled_dot_product_attention', 'k transposed over the wrong axes (only works for 4-D inputs)'): 6.5,
    ('scaled_dot_product_attention', 'dropout ignored'): 9.5,
    ('scaled_dot_product_attention', 'dropout without rescaling'): 9.5,
    ('scaled_dot_product_attention', 'calls F.scaled_dot_product_attention'): 0,
    ('causal_mask', 'upper instead of lower triangle'): 0,
    ('causal_mask', 'a token unable to see itself'): 1,
    ('causal_mask', 'inverted (True = masked)'): 0,
    ('causal_mask', 'float mask'): 0,
    ('causal_mask', 'device ignored (no device parameter)'): 2.5,
    ('padding_mask', 'inverted'): 0,
    ('padding_mask', 'masking queries instead of keys'): 0,
    ('padding_mask', 'missing its broadcast axes'): 0,
    ('padding_mask', 'only one broadcast axis'): 0,
    ('padding_mask', 'pad_id ignored (always 0)'): 2,
    ('padding_mask', 'float mask (1.0 for real tokens)'): 0,
    ('scaled_dot_product_attention', 'returns (weights, output)'): 0,
    ('scaled_dot_product_attention', "mask applied by boolean indexing (needs the scores' full shape)"): 8,
}
