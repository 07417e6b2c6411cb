"""Planted mistakes in lesson 12 (attention at scale) and alternative correct solutions."""

from planted import Variant, bug

LESSON = "12_attention_at_scale"

MERGE = "return m, l_a * torch.exp(m_a - shift) + l_b * torch.exp(m_b - shift)"
SHIFT = "shift = m.masked_fill(m == -math.inf, 0.0)"
ACC = "acc = acc * torch.exp(m - shift)[..., None] + (p @ v_j) * torch.exp(m_b - shift)[..., None]"
P_TILE = "p = torch.exp(s - m_b.masked_fill(m_b == -math.inf, 0.0)[..., None])"
ROWS = "rows = torch.arange(i, i + q_i.size(2), device=q.device)[:, None] + (Lk - Lq)"
LSE = "lse[:, :, i:i + block_q] = m + torch.log(total)"
OUT = "(acc / total.clamp(min=1e-30)[..., None])"
P_BWD = "p = torch.exp(s - lse[:, :, i:i + block_q, None])"
DS = "ds = p * (dp - delta[:, :, i:i + block_q, None])"
DQ = "dq[:, :, i:i + block_q] += (ds @ k_j * scale).to(dq.dtype)"
DK = "dk_j = dk_j + ds.transpose(-2, -1) @ q_i * scale"
REPEAT = "return x[:, :, None].expand(B, H_kv, n_rep, L, d).reshape(B, H_kv * n_rep, L, d)"
WINDOW = "return (behind >= 0) & (behind < window)"
KV = "k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)"

FULL_SCORES = """
def flash_attention(q, k, v, causal=False, key_mask=None, block_q=64, block_k=64):
    Lq, Lk = q.size(2), k.size(2)
    s = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    allowed = torch.ones(Lq, Lk, dtype=torch.bool, device=q.device)
    if causal:
        allowed = allowed.tril(Lk - Lq)
    if key_mask is not None:
        allowed = allowed & key_mask[:, None, None, :]
    s = s.masked_fill(~allowed, -math.inf)
    return torch.softmax(s, dim=-1).nan_to_num(0.0) @ v, torch.logsumexp(s, dim=-1)
"""

FLASH_SDPA = """
def flash_attention(q, k, v, causal=False, key_mask=None, block_q=64, block_k=64):
    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return out, torch.logsumexp(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
"""

BWD_FULL = """
def flash_attention_backward(q, k, v, out, lse, dout, causal=False, key_mask=None, block_q=64, block_k=64):
    Lq, Lk, d = q.size(2), k.size(2), q.size(-1)
    allowed = torch.ones(Lq, Lk, dtype=torch.bool, device=q.device)
    if causal:
        allowed = allowed.tril(Lk - Lq)
    if key_mask is not None:
        allowed = allowed & key_mask[:, None, None, :]
    s = (q @ k.transpose(-2, -1) / math.sqrt(d)).masked_fill(~allowed, -math.inf)
    p = torch.exp(s - lse.masked_fill(lse == -math.inf, math.inf)[..., None])
    dv = p.transpose(-2, -1) @ dout
    ds = p * (dout @ v.transpose(-2, -1) - (dout * out).sum(-1, keepdim=True))
    return ds @ k / math.sqrt(d), ds.transpose(-2, -1) @ q / math.sqrt(d), dv
"""

BWD_SDPA = """
def flash_attention_backward(q, k, v, out, lse, dout, causal=False, key_mask=None, block_q=64, block_k=64):
    q_, k_, v_ = (t.detach().requires_grad_() for t in (q, k, v))
    with torch.enable_grad():
        o = F.scaled_dot_product_attention(q_, k_, v_, is_causal=causal)
    return torch.autograd.grad(o, (q_, k_, v_), dout)
"""

BUGS = [
    # merge_softmax_stats
    bug("merge_softmax_stats", "merge_older_not_rescaled", "the older sum added without rescaling",
        (MERGE, "return m, l_a + l_b * torch.exp(m_b - shift)")),
    bug("merge_softmax_stats", "merge_exp_flipped", "exp(m - m_a) instead of exp(m_a - m)",
        (MERGE, "return m, l_a * torch.exp(shift - m_a) + l_b * torch.exp(shift - m_b)")),
    bug("merge_softmax_stats", "merge_nan_when_empty", "-inf - (-inf) when both blocks are empty", (SHIFT, "shift = m")),
    # flash_attention
    bug("flash_attention", "flash_acc_not_rescaled", "the accumulator not rescaled when the max grows",
        (ACC, "acc = acc + (p @ v_j) * torch.exp(m_b - shift)[..., None]")),
    bug("flash_attention", "flash_no_max_subtracted", "exp(s) without subtracting the max",
        ("m_b = s.amax(dim=-1)", "m_b = torch.zeros_like(s[..., 0])"), (P_TILE, "p = torch.exp(s)")),
    bug("flash_attention", "flash_lse_before_last_block", "lse taken before the last key block",
        ("        " + LSE, "        pass"),
        ("            m_b = s.amax(dim=-1)", "            " + LSE + "\n            m_b = s.amax(dim=-1)")),
    bug("flash_attention", "flash_causal_top_left", "causal mask aligned to the top left",
        (ROWS, ROWS.replace(" + (Lk - Lq)", ""))),
    bug("flash_attention", "flash_masked_row_nan", "0 / 0 for a query with no allowed key",
        (OUT, "(acc / total[..., None])")),
    bug("flash_attention", "flash_full_scores", "the whole [Lq, Lk] score matrix", source=FULL_SCORES),
    bug("flash_attention", "flash_full_scores", "an [Lq, Lk] causal mask built once, sliced per tile",
        ("    for i in range(0, Lq, block_q):",
         "    causal_mask = torch.ones(Lq, Lk, dtype=torch.bool, device=q.device).tril(Lk - Lq)\n"
         "    for i in range(0, Lq, block_q):"),
        ("s = s.masked_fill(cols > rows, -math.inf)",
         "s = s.masked_fill(~causal_mask[i:i + block_q, j:j + block_k], -math.inf)")),
    bug("flash_attention", "library_call", "calls F.scaled_dot_product_attention", source=FLASH_SDPA),
    # flash_attention_backward
    bug("flash_attention_backward", "bwd_tile_softmax", "each tile's own softmax instead of exp(S - lse)",
        (P_BWD, "p = torch.softmax(s, dim=-1).nan_to_num(0.0)")),
    bug("flash_attention_backward", "bwd_delta_from_p", "D from P ∘ dP within the tile",
        (DS, "ds = p * (dp - (p * dp).sum(dim=-1, keepdim=True))")),
    bug("flash_attention_backward", "bwd_missing_scale", "no 1/√d in dq", (DQ, DQ.replace(" * scale", ""))),
    bug("flash_attention_backward", "bwd_missing_scale", "no 1/√d in dk", (DK, DK.replace(" * scale", ""))),
    bug("flash_attention_backward", "bwd_masked_row_nan", "lse -inf left as it is (exp(-inf + inf))",
        ("lse = lse.float().masked_fill(lse == -math.inf, math.inf)", "lse = lse.float()")),
    bug("flash_attention_backward", "bwd_full_scores", "the whole [Lq, Lk] matrices", source=BWD_FULL),
    bug("flash_attention_backward", "library_call", "autograd through F.scaled_dot_product_attention",
        source=BWD_SDPA),
    # repeat_kv
    bug("repeat_kv", "repeat_kv_tiled", "x.repeat (heads 0, 1, 0, 1) instead of repeat_interleave",
        (REPEAT, "return x.repeat(1, n_rep, 1, 1)")),
    bug("repeat_kv", "repeat_kv_wrong_axis", "repeated along the positions",
        (REPEAT, "return x.repeat_interleave(n_rep, dim=2)")),
    # sliding_window_mask
    bug("sliding_window_mask", "window_off_by_one", "window + 1 keys (behind <= window)",
        (WINDOW, "return (behind >= 0) & (behind <= window)")),
    bug("sliding_window_mask", "window_not_causal", "the window sees the future too (|i - j| < window)",
        (WINDOW, "return behind.abs() < window")),
    bug("sliding_window_mask", "window_device_ignored", "device ignored",
        ("i = torch.arange(L, device=device)", "i = torch.arange(L)")),
    # GroupedQueryAttention
    bug("GroupedQueryAttention", "gqa_kv_d_model", "k and v projected to d_model (every head its own)",
        ("self.k_proj = nn.Linear(d_model, n_kv_head * self.d_head, bias=False)",
         "self.k_proj = nn.Linear(d_model, d_model, bias=False)"),
        ("self.v_proj = nn.Linear(d_model, n_kv_head * self.d_head, bias=False)",
         "self.v_proj = nn.Linear(d_model, d_model, bias=False)"),
        ("view(B, L, self.n_kv_head, self.d_head)", "view(B, L, self.n_head, self.d_head)"),
        (KV, "pass")),
    bug("GroupedQueryAttention", "gqa_no_value_error", "n_head % n_kv_head not checked",
        ("if d_model % n_head or n_head % n_kv_head:", "if d_model % n_head:")),
    bug("GroupedQueryAttention", "gqa_group_order", "query head h with key-value head h % n_kv_head (x.repeat)",
        (KV, "k, v = k.repeat(1, n_rep, 1, 1), v.repeat(1, n_rep, 1, 1)")),
    bug("GroupedQueryAttention", "gqa_rope_on_v", "RoPE on v too",
        ("q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)",
         "q, k, v = apply_rope(q, cos, sin), apply_rope(k, cos, sin), apply_rope(v, cos, sin)")),
    bug("GroupedQueryAttention", "gqa_window_ignored", "the window ignored", ("if self.window is None:", "if True:")),
    bug("GroupedQueryAttention", "gqa_key_mask_ignored", "the key mask ignored",
        ("allowed = allowed & key_mask[:, None, None, :]", "allowed = allowed")),
    bug("GroupedQueryAttention", "gqa_nan_pad_rows", "masked scores filled with -inf (NaN on pad rows)",
        ("torch.finfo(scores.dtype).min", 'float("-inf")')),
]

FA2_INLINE = """
def flash_attention(q, k, v, causal=False, key_mask=None, block_q=64, block_k=64):
    B, H, Lq, d = q.shape
    Lk = k.shape[2]
    out = torch.zeros_like(q)
    lse = torch.zeros(B, H, Lq)
    for i in range(0, Lq, block_q):
        qi = q[:, :, i:i + block_q] / d ** 0.5
        n = qi.shape[2]
        m = torch.full((B, H, n), float("-inf"))
        total = torch.zeros(B, H, n)
        acc = torch.zeros(B, H, n, d)
        for j in range(0, Lk, block_k):
            s = torch.einsum("bhqd,bhkd->bhqk", qi, k[:, :, j:j + block_k])
            keep = torch.ones(n, s.shape[-1], dtype=torch.bool)
            if causal:
                keep = (torch.arange(j, j + s.shape[-1])[None, :]
                        <= torch.arange(i, i + n)[:, None] + Lk - Lq)
            if key_mask is not None:
                keep = keep & key_mask[:, None, None, j:j + block_k]
            s = torch.where(keep, s, float("-inf"))
            m_new = torch.maximum(m, s.max(dim=-1).values)
            safe = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
            p = torch.exp(s - safe[..., None])
            alpha = torch.exp(m - safe)
            total = total * alpha + p.sum(-1)
            acc = acc * alpha[..., None] + torch.einsum("bhqk,bhkd->bhqd", p, v[:, :, j:j + block_k])
            m = m_new
        out[:, :, i:i + block_q] = torch.where(total[..., None] > 0, acc / total[..., None].clamp(min=1e-38), 0.0)
        lse[:, :, i:i + block_q] = m + torch.log(total)
    return out, lse
"""

KEYS_OUTER = """
def flash_attention(q, k, v, causal=False, key_mask=None, block_q=64, block_k=64):
    # FlashAttention-1's order: key blocks outside, query blocks inside, the statistics kept for every query
    B, H, Lq, d = q.shape
    Lk = k.size(2)
    m = torch.full((B, H, Lq), -math.inf)
    total = torch.zeros(B, H, Lq)
    acc = torch.zeros(B, H, Lq, d)
    for j in range(0, Lk, block_k):
        k_j, v_j = k[:, :, j:j + block_k], v[:, :, j:j + block_k]
        cols = torch.arange(j, j + k_j.size(2))
        for i in range(0, Lq, block_q):
            s = q[:, :, i:i + block_q] @ k_j.transpose(-2, -1) / math.sqrt(d)
            if causal:
                rows = torch.arange(i, i + s.size(2))[:, None] + (Lk - Lq)
                s = s.masked_fill(cols > rows, -math.inf)
            if key_mask is not None:
                s = s.masked_fill(~key_mask[:, None, None, j:j + block_k], -math.inf)
            m_old = m[:, :, i:i + block_q]
            m_b = s.amax(dim=-1)
            p = torch.exp(s - m_b.masked_fill(m_b == -math.inf, 0.0)[..., None])
            m_new, l_new = merge_softmax_stats(m_old, total[:, :, i:i + block_q], m_b, p.sum(dim=-1))
            shift = m_new.masked_fill(m_new == -math.inf, 0.0)
            acc[:, :, i:i + block_q] = (acc[:, :, i:i + block_q] * torch.exp(m_old - shift)[..., None]
                                        + (p @ v_j) * torch.exp(m_b - shift)[..., None])
            m[:, :, i:i + block_q], total[:, :, i:i + block_q] = m_new, l_new
    out = torch.where(total[..., None] > 0, acc / total.clamp(min=1e-30)[..., None], torch.zeros(()))
    return out, m + torch.log(total)
"""

BWD_QUERIES_OUTER = """
def flash_attention_backward(q, k, v, out, lse, dout, causal=False, key_mask=None, block_q=64, block_k=64):
    B, H, Lq, d = q.shape
    Lk = k.size(2)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    for i in range(0, Lq, block_q):
        q_i, do_i, o_i = q[:, :, i:i + block_q], dout[:, :, i:i + block_q], out[:, :, i:i + block_q]
        delta = torch.einsum("bhqd,bhqd->bhq", do_i, o_i)
        l_i = lse[:, :, i:i + block_q]
        l_i = torch.where(torch.isinf(l_i), torch.full_like(l_i, float("inf")), l_i)
        for j in range(0, Lk, block_k):
            k_j, v_j = k[:, :, j:j + block_k], v[:, :, j:j + block_k]
            s = torch.einsum("bhqd,bhkd->bhqk", q_i, k_j) / math.sqrt(d)
            if causal:
                keep = torch.arange(j, j + s.size(-1))[None, :] <= torch.arange(i, i + s.size(2))[:, None] + (Lk - Lq)
                s = torch.where(keep, s, float("-inf"))
            if key_mask is not None:
                s = torch.where(key_mask[:, None, None, j:j + block_k], s, float("-inf"))
            p = torch.exp(s - l_i[..., None])
            dv[:, :, j:j + block_k] += torch.einsum("bhqk,bhqd->bhkd", p, do_i)
            ds = p * (torch.einsum("bhqd,bhkd->bhqk", do_i, v_j) - delta[..., None])
            dq[:, :, i:i + block_q] += torch.einsum("bhqk,bhkd->bhqd", ds, k_j) / math.sqrt(d)
            dk[:, :, j:j + block_k] += torch.einsum("bhqk,bhqd->bhkd", ds, q_i) / math.sqrt(d)
    return dq, dk, dv
"""

GQA_SDPA = """
class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, n_head, n_kv_head, window=None):
        super().__init__()
        if n_head % n_kv_head:
            raise ValueError("n_head must be a multiple of n_kv_head")
        self.h, self.h_kv, self.window, self.dh = n_head, n_kv_head, window, d_model // n_head
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.k_proj = nn.Linear(d_model, n_kv_head * self.dh, bias=False)
        self.v_proj = nn.Linear(d_model, n_kv_head * self.dh, bias=False)
        self.out_proj = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, cos, sin, key_mask=None):
        B, L, D = x.shape
        q = apply_rope(self.q_proj(x).unflatten(-1, (self.h, self.dh)).transpose(1, 2), cos, sin)
        k = apply_rope(self.k_proj(x).unflatten(-1, (self.h_kv, self.dh)).transpose(1, 2), cos, sin)
        v = self.v_proj(x).unflatten(-1, (self.h_kv, self.dh)).transpose(1, 2)
        if self.window:
            allowed = sliding_window_mask(L, self.window, device=x.device)
        else:
            allowed = torch.ones(L, L, dtype=torch.bool, device=x.device).tril()
        if key_mask is not None:
            allowed = allowed & key_mask[:, None, None, :]
            allowed = allowed | ~allowed.any(dim=-1, keepdim=True)   # a pad's row: any keys, never used
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, enable_gqa=True)
        return self.out_proj(a.transpose(1, 2).reshape(B, L, D))
"""

GQA_GROUPS = """
class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, n_head, n_kv_head, window=None):
        super().__init__()
        if n_head % n_kv_head != 0:
            raise ValueError(f"{n_head} heads cannot be shared by {n_kv_head}")
        self.n_head, self.n_kv_head, self.window = n_head, n_kv_head, window
        d_head = d_model // n_head
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.k_proj = nn.Linear(d_model, n_kv_head * d_head, bias=False)
        self.v_proj = nn.Linear(d_model, n_kv_head * d_head, bias=False)
        self.out_proj = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, cos, sin, key_mask=None):
        B, L, D = x.shape
        g, r, dh = self.n_kv_head, self.n_head // self.n_kv_head, D // self.n_head
        q = apply_rope(self.q_proj(x).view(B, L, self.n_head, dh).transpose(1, 2), cos, sin)
        k = apply_rope(self.k_proj(x).view(B, L, g, dh).transpose(1, 2), cos, sin)
        v = self.v_proj(x).view(B, L, g, dh).transpose(1, 2)
        q = q.reshape(B, g, r, L, dh)                                  # the groups, no copies of k and v
        scores = torch.einsum("bgrqd,bgkd->bgrqk", q, k) / dh ** 0.5
        i = torch.arange(L, device=x.device)
        allowed = i[None, :] <= i[:, None]
        if self.window is not None:
            allowed = allowed & (i[None, :] > i[:, None] - self.window)
        if key_mask is not None:
            allowed = allowed & key_mask[:, None, None, None, :]
        scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
        a = torch.einsum("bgrqk,bgkd->bgrqd", scores.softmax(-1), v).reshape(B, self.n_head, L, dh)
        return self.out_proj(a.transpose(1, 2).reshape(B, L, D))
"""

ALTERNATIVES = [
    Variant("merge_softmax_stats", "torch.where for the empty blocks, logaddexp", source="""
def merge_softmax_stats(m_a, l_a, m_b, l_b):
    m = torch.maximum(m_a, m_b)
    safe = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
    return m, torch.exp(torch.logaddexp(torch.log(l_a) + m_a - safe, torch.log(l_b) + m_b - safe))
"""),
    Variant("flash_attention", "einsum tiles", replace=(
        ("s = q_i @ k_j.transpose(-2, -1)", 's = torch.einsum("bhqd,bhkd->bhqk", q_i, k_j)'),
        ("(p @ v_j)", 'torch.einsum("bhqk,bhkd->bhqd", p, v_j)'))),
    Variant("flash_attention", "FlashAttention-2's inline statistics, einsum", source=FA2_INLINE),
    Variant("flash_attention", "key blocks outside, query blocks inside (FlashAttention-1)", source=KEYS_OUTER),
    Variant("flash_attention_backward", "query blocks outside, einsum, lse -inf by torch.where",
            source=BWD_QUERIES_OUTER),
    Variant("repeat_kv", "torch.repeat_interleave", replace=((REPEAT, "return x.repeat_interleave(n_rep, dim=1)"),)),
    Variant("repeat_kv", "a list of heads, concatenated", replace=(
        (REPEAT, "return torch.cat([x[:, h:h + 1] for h in range(H_kv) for _ in range(n_rep)], dim=1)"),)),
    Variant("sliding_window_mask", "tril minus tril", replace=((WINDOW, (
        "full = torch.ones(L, L, dtype=torch.bool, device=device)\n"
        "    return full.tril() & ~full.tril(-window)")),)),
    Variant("GroupedQueryAttention", "F.scaled_dot_product_attention with enable_gqa=True", source=GQA_SDPA),
    Variant("GroupedQueryAttention", "query heads grouped by reshape, einsum, no repeat_kv", source=GQA_GROUPS),
]

SCORES = {
    ('merge_softmax_stats', 'the older sum added without rescaling'): 1,
    ('merge_softmax_stats', 'exp(m - m_a) instead of exp(m_a - m)'): 0,
    ('merge_softmax_stats', '-inf - (-inf) when both blocks are empty'): 1.5,
    ('flash_attention', 'the accumulator not rescaled when the max grows'): 1,
    ('flash_attention', 'exp(s) without subtracting the max'): 4.5,
    ('flash_attention', 'lse taken before the last key block'): 1,
    ('flash_attention', 'causal mask aligned to the top left'): 3,
    ('flash_attention', '0 / 0 for a query with no allowed key'): 4,
    ('flash_attention', 'the whole [Lq, Lk] score matrix'): 4,
    ('flash_attention', 'an [Lq, Lk] causal mask built once, sliced per tile'): 4,
    ('flash_attention', 'calls F.scaled_dot_product_attention'): 0,
    ('flash_attention_backward', "each tile's own softmax instead of exp(S - lse)"): 1,
    ('flash_attention_backward', 'D from P ∘ dP within the tile'): 1,
    ('flash_attention_backward', 'no 1/√d in dq'): 1,
    ('flash_attention_backward', 'no 1/√d in dk'): 1,
    ('flash_attention_backward', 'lse -inf left as it is (exp(-inf + inf))'): 3.5,
    ('flash_attention_backward', 'the whole [Lq, Lk] matrices'): 3,
    ('flash_attention_backward', 'autograd through F.scaled_dot_product_attention'): 0,
    ('repeat_kv', 'x.repeat (heads 0, 1, 0, 1) instead of repeat_interleave'): 0.5,
    ('repeat_kv', 'repeated along the positions'): 0,
    ('sliding_window_mask', 'window + 1 keys (behind <= window)'): 0,
    ('sliding_window_mask', 'the window sees the future too (|i - j| < window)'): 0,
    ('sliding_window_mask', 'device ignored'): 1,
    ('GroupedQueryAttention', 'k and v projected to d_model (every head its own)'): 1,
    ('GroupedQueryAttention', 'n_head % n_kv_head not checked'): 3.5,
    ('GroupedQueryAttention', 'query head h with key-value head h % n_kv_head (x.repeat)'): 1.5,
    ('GroupedQueryAttention', 'RoPE on v too'): 0.5,
    ('GroupedQueryAttention', 'the window ignored'): 2.5,
    ('GroupedQueryAttention', 'the key mask ignored'): 3,
    ('GroupedQueryAttention', 'masked scores filled with -inf (NaN on pad rows)'): 3,
}
