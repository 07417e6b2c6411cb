"""Planted mistakes in lesson 04 (MultiHeadAttention; torch)."""

from planted import Variant, bug

LESSON = "04_multi_head_attention"
MHA = "MultiHeadAttention"

SPLIT = (
    "        q = self.q_proj(query).view(B, Lq, H, d).transpose(1, 2)       # [B, H, Lq, d]\n"
    "        k = self.k_proj(key).view(B, Lk, H, d).transpose(1, 2)         # [B, H, Lk, d]\n"
    "        v = self.v_proj(value).view(B, Lk, H, d).transpose(1, 2)       # [B, H, Lk, d]\n"
)
ATTEND = "        out, weights = scaled_dot_product_attention(q, k, v, mask, p)  # [B, H, Lq, d]\n"

INLINE = '''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_head, dropout=0.0, bias=True):
        super().__init__()
        self.d_model, self.n_head, self.d_head = d_model, n_head, d_model // n_head
        self.dropout = dropout
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, query, key, value, mask=None):
        B, Lq, D = query.shape
        Lk, H, d = key.shape[1], self.n_head, self.d_head
        q = self.q_proj(query).unflatten(-1, (H, d)).permute(0, 2, 1, 3)
        k = self.k_proj(key).unflatten(-1, (H, d)).permute(0, 2, 1, 3)
        v = self.v_proj(value).unflatten(-1, (H, d)).permute(0, 2, 1, 3)
        s = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(SCALE)
        if mask is not None:
            s = torch.where(mask, s, torch.full_like(s, -1e9))
        w = torch.softmax(s, dim=-1)
        if mask is not None:
            w = w * mask
            w = w / w.sum(-1, keepdim=True).clamp_min(1e-20)
        self.attn_weights = WEIGHTS
        if self.training and self.dropout > 0:
            w = torch.nn.functional.dropout(w, self.dropout)
        out = torch.einsum("bhqk,bhkd->bqhd", w, v).flatten(2)
        return self.out_proj(out)
'''


def inline(scale="d", weights="w.detach()"):
    return INLINE.replace("SCALE", scale).replace("WEIGHTS", weights)


BUGS = [
    Variant(MHA, "scaled by sqrt(d_model) instead of sqrt(d_head)", mistake="scale_d_model", source=inline(scale="D")),
    bug(MHA, "scale_d_model", "scaled by sqrt(d_model) (rescaled queries around the lesson 03 call)",
        (ATTEND, ATTEND.replace("(q, k, v,", "(q * math.sqrt(d / self.d_model), k, v,"))),
    bug(MHA, "split_no_transpose", "heads split by a reshape without transpose", (SPLIT, SPLIT.replace(
        "view(B, Lq, H, d).transpose(1, 2)", "reshape(B, H, Lq, d)").replace(
        "view(B, Lk, H, d).transpose(1, 2)", "reshape(B, H, Lk, d)"))),
    bug(MHA, "split_head_fast_axis", "head as the fast axis when splitting", (SPLIT, SPLIT.replace(
        "view(B, Lq, H, d).transpose(1, 2)", "view(B, Lq, d, H).permute(0, 3, 1, 2)").replace(
        "view(B, Lk, H, d).transpose(1, 2)", "view(B, Lk, d, H).permute(0, 3, 1, 2)"))),
    bug(MHA, "merge_no_transpose", "heads merged by a reshape without transposing back",
        ("out = out.transpose(1, 2).reshape(B, Lq, self.d_model)", "out = out.reshape(B, Lq, self.d_model)")),
    bug(MHA, "merge_head_fast_axis", "heads merged in the wrong order",
        ("out = out.transpose(1, 2).reshape(B, Lq, self.d_model)",
         "out = out.permute(0, 2, 3, 1).reshape(B, Lq, self.d_model)")),
    bug(MHA, "no_out_proj", "output projection skipped", ("return self.out_proj(out)", "return out")),
    bug(MHA, "kv_from_query", "keys and values taken from the query",
        ("self.k_proj(key).view(B, Lk,", "self.k_proj(query).view(B, Lq,"),
        ("self.v_proj(value).view(B, Lk,", "self.v_proj(query).view(B, Lq,")),
    bug(MHA, "values_from_keys", "values taken from the keys", ("self.v_proj(value)", "self.v_proj(key)")),
    bug(MHA, "bias_ignored", "bias=False ignored", ("bias=bias)", "bias=True)")),
    bug(MHA, "attn_weights_averaged", "attn_weights averaged over heads", ("self.attn_weights = weights.detach()",
                                                 "self.attn_weights = weights.mean(1).detach()")),
    Variant(MHA, "attn_weights averaged over heads (inline attention)", mistake="attn_weights_averaged", source=inline(weights="w.mean(1)")),
    bug(MHA, "attn_weights_missing", "attn_weights never stored", ("self.attn_weights = weights.detach()", "pass")),
    bug(MHA, "mask_ignored", "mask ignored", ("scaled_dot_product_attention(q, k, v, mask, p)",
                              "scaled_dot_product_attention(q, k, v, None, p)")),
    bug(MHA, "dropout_in_eval", "dropout also in eval mode", ("p = self.dropout if self.training else 0.0", "p = self.dropout")),
    bug(MHA, "dropout_never", "dropout never applied", ("p = self.dropout if self.training else 0.0", "p = 0.0")),
    bug(MHA, "v_with_k_proj", "k_proj used for the values", ("self.v_proj(value)", "self.k_proj(value)")),
    Variant(MHA, "wraps nn.MultiheadAttention", mistake="library_call", source='''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_head, dropout=0.0, bias=True):
        super().__init__()
        self.n_head = n_head
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self._mha = [nn.MultiheadAttention(d_model, n_head, dropout=dropout, bias=bias, batch_first=True)]

    def forward(self, query, key, value, mask=None):
        mha = self._mha[0]
        mha.train(self.training)
        with torch.no_grad():
            mha.in_proj_weight.copy_(torch.cat([self.q_proj.weight, self.k_proj.weight, self.v_proj.weight]))
            mha.out_proj.weight.copy_(self.out_proj.weight)
            if self.q_proj.bias is not None:
                mha.in_proj_bias.copy_(torch.cat([self.q_proj.bias, self.k_proj.bias, self.v_proj.bias]))
                mha.out_proj.bias.copy_(self.out_proj.bias)
        attn_mask = None if mask is None else ~mask.expand(query.size(0), self.n_head, query.size(1), key.size(1)).flatten(0, 1)
        out, w = mha(query, key, value, attn_mask=attn_mask, average_attn_weights=False)
        self.attn_weights = w
        return out
'''),
    Variant(MHA, "calls F.scaled_dot_product_attention", mistake="library_call", source=INLINE.replace(
        "        s = torch.einsum", "        fused = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)\n"
        "        s = torch.einsum").replace("SCALE", "d").replace("WEIGHTS", "w.detach()")),
    bug(MHA, "proj_names", "out_proj named o_proj",
        ("self.out_proj = nn.Linear", "self.o_proj = nn.Linear"), ("return self.out_proj(out)", "return self.o_proj(out)")),
    bug(MHA, "returns_pair", "forward returns (output, weights), as nn.MultiheadAttention does",
        ("return self.out_proj(out)", "return self.out_proj(out), weights")),
    bug("MultiHeadAttention", "changes_its_input", "unsqueezes the caller's [L, L] mask in place",
        ("out, weights = scaled_dot_product_attention(q, k, v, mask, p)",
         "if mask is not None and mask.dim() == 2:\n            mask.unsqueeze_(0).unsqueeze_(0)\n"
         "        out, weights = scaled_dot_product_attention(q, k, v, mask, p)")),
]

BUGS += [
    Variant(MHA, "an all-True mask made on the CPU when none is given (inline attention)",
            mistake="mask_on_cpu", source=inline().replace(
                "        if mask is not None:\n            s = torch.where",
                "        if mask is None:\n            mask = torch.ones(Lq, key.size(1), dtype=torch.bool)\n"
                "        if mask is not None:\n            s = torch.where")),
]

ALTERNATIVES = [
    Variant(MHA, "an all-True mask on the query's device when none is given", replace=(
        (ATTEND, "        if mask is None:\n            mask = torch.ones(Lq, Lk, dtype=torch.bool, device=query.device)\n" + ATTEND),)),
    Variant(MHA, "unflatten and flatten, dropout_p = self.dropout * self.training, weights kept undetached",
            source='''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_head, dropout=0.0, bias=True):
        super().__init__()
        self.n_head, self.dropout = n_head, dropout
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, query, key, value, mask=None):
        H, d = self.n_head, query.size(-1) // self.n_head
        q, k, v = (proj(x).unflatten(-1, (H, d)).transpose(1, 2)
                   for proj, x in ((self.q_proj, query), (self.k_proj, key), (self.v_proj, value)))
        out, self.attn_weights = scaled_dot_product_attention(q, k, v, mask=mask,
                                                              dropout_p=self.dropout * self.training)
        return self.out_proj(out.transpose(1, 2).flatten(2))
'''),
    Variant(MHA, "one head at a time: chunk the projections, loop, concatenate", source='''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_head, dropout=0.0, bias=True):
        super().__init__()
        self.heads = n_head
        self.p_drop = dropout
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, query, key, value, mask=None):
        qs = self.q_proj(query).chunk(self.heads, dim=-1)
        ks = self.k_proj(key).chunk(self.heads, dim=-1)
        vs = self.v_proj(value).chunk(self.heads, dim=-1)
        outs, weights = [], []
        for q, k, v in zip(qs, ks, vs):
            m = None if mask is None else mask.squeeze(1) if mask.dim() == 4 else mask
            o, w = scaled_dot_product_attention(q, k, v, m, self.p_drop if self.training else 0.0)
            outs.append(o)
            weights.append(w)
        self.attn_weights = torch.stack(weights, dim=1).detach()
        return self.out_proj(torch.cat(outs, dim=-1))
'''),
    Variant(MHA, "inline einsum attention, unflatten/permute, torch.where with -1e9 and renormalisation",
            source=inline()),
    Variant(MHA, "split and merge with helper methods, swapaxes, lesson 03 attention", source='''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_head, dropout=0.0, bias=True):
        super().__init__()
        assert d_model % n_head == 0
        self.h = n_head
        self.p = dropout
        for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
            setattr(self, name, nn.Linear(d_model, d_model, bias))

    def _split(self, x):
        B, L, D = x.shape
        return x.reshape(B, L, self.h, D // self.h).swapaxes(1, 2)

    def _merge(self, x):
        B, H, L, d = x.shape
        return x.swapaxes(1, 2).reshape(B, L, H * d)

    def forward(self, query, key, value, mask=None):
        out, self.attn_weights = scaled_dot_product_attention(
            self._split(self.q_proj(query)), self._split(self.k_proj(key)),
            self._split(self.v_proj(value)), mask=mask, dropout_p=self.p if self.training else 0.0)
        return self.out_proj(self._merge(out))
'''),
    Variant(MHA, "scale the queries first, loop-free, masked_fill with finfo.min", source='''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, n_head, dropout=0.0, bias=True):
        super().__init__()
        self.d_model, self.n_head = d_model, n_head
        self.drop = nn.Dropout(dropout)
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, query, key, value, mask=None):
        B, Lq, D = query.shape
        H = self.n_head
        d = D // H
        q = (self.q_proj(query) / math.sqrt(d)).view(B, Lq, H, d).permute(0, 2, 1, 3)
        k = self.k_proj(key).view(B, -1, H, d).permute(0, 2, 3, 1)      # [B, H, d, Lk]
        v = self.v_proj(value).view(B, -1, H, d).permute(0, 2, 1, 3)
        s = q @ k
        if mask is not None:
            s = s.masked_fill(~mask, torch.finfo(s.dtype).min)
        w = s.softmax(-1)
        if mask is not None:
            w = w.masked_fill(~mask, 0.0)
        self.attn_weights = w
        out = self.drop(w) @ v
        return self.out_proj(out.permute(0, 2, 1, 3).reshape(B, Lq, D))
'''),
]

# What each planted mistake earns on its exercise (the rubric in CONTRIBUTING):
SCORES = {
    ('MultiHeadAttention', 'scaled by sqrt(d_model) instead of sqrt(d_head)'): 8.5,
    ('MultiHeadAttention', 'scaled by sqrt(d_model) (rescaled queries around the lesson 03 call)'): 8.5,
    ('MultiHeadAttention', 'heads split by a reshape without transpose'): 9,
    ('MultiHeadAttention', 'head as the fast axis when splitting'): 9.5,
    ('MultiHeadAttention', 'heads merged by a reshape without transposing back'): 10,
    ('MultiHeadAttention', 'heads merged in the wrong order'): 10.5,
    ('MultiHeadAttention', 'output projection skipped'): 9.5,
    ('MultiHeadAttention', 'keys and values taken from the query'): 8,
    ('MultiHeadAttention', 'values taken from the keys'): 8,
    ('MultiHeadAttention', 'bias=False ignored'): 11.5,
    ('MultiHeadAttention', 'attn_weights averaged over heads'): 11,
    ('MultiHeadAttention', 'attn_weights averaged over heads (inline attention)'): 11,
    ('MultiHeadAttention', 'attn_weights never stored'): 11,
    ('MultiHeadAttention', 'mask ignored'): 10,
    ('MultiHeadAttention', 'dropout also in eval mode'): 11.5,
    ('MultiHeadAttention', 'dropout never applied'): 11.5,
    ('MultiHeadAttention', 'k_proj used for the values'): 9.5,
    ('MultiHeadAttention', 'wraps nn.MultiheadAttention'): 0,
    ('MultiHeadAttention', 'calls F.scaled_dot_product_attention'): 0,
    ('MultiHeadAttention', 'out_proj named o_proj'): 0,
    ('MultiHeadAttention', 'forward returns (output, weights), as nn.MultiheadAttention does'): 0,
    ('MultiHeadAttention', 'an all-True mask made on the CPU when none is given (inline attention)'): 11.5,
}
