"""Planted mistakes in lesson 11 (generation: sampling, a KV cache, beam search) and alternative
correct solutions."""

from planted import Variant, bug

LESSON = "11_generation"

TOPK = "kth = torch.topk(logits, min(top_k, logits.size(-1)), dim=-1).values[..., -1:]   # [B, 1]"
BEFORE = "before = probs.cumsum(dim=-1) - probs          # the mass of the tokens more likely than each"
DROP = "drop = before >= top_p                         # the set already reached p without it"
FORCE = "drop[..., 0] = False                           # the most likely token always stays"
SAMPLE_PROBS = "probs = torch.softmax(filter_logits(logits, temperature, top_k, top_p), dim=-1)"
DRAW = "return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)"
ARANGE = "torch.arange(T0, T0 + L, device=ids.device)"
CAUSAL = "allowed = torch.ones(L, T0 + L, dtype=torch.bool, device=ids.device).tril(T0)     # causal"
KEYS = "allowed = allowed & key_mask[:, None, None, :]"
CACHED = """        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if T0:
            k = torch.cat([cache.keys[i], k], dim=2)
            v = torch.cat([cache.values[i], v], dim=2)
            cache.keys[i], cache.values[i] = k, v
        else:
            cache.keys.append(k)
            cache.values.append(v)"""
STORE = "cache.keys[i], cache.values[i] = k, v"
STEP_LOGITS = "logits = decoder_step(model, new, cache)[:, -1] if use_cache else model(ids)[:, -1]"
SAMPLED = "sample(logits, temperature, top_k, top_p, generator)"
LOGP = "logp = torch.log_softmax(model.generator(hidden[:, -1]).float(), dim=-1)   # [n, V]"
TOTAL = "total = (scores[:, None] + logp).flatten()                # [n · V]"
PENALTY = "/ ((5 + tokens_of.numel() - 1) / 6) ** length_penalty"
FINISHED = "(score / ((5 + tokens_of"
BEST = "best.append(max(finished, key=lambda f: f[0])[1])"
AT_MAX_LEN = "for tokens_of, score in zip(alive, scores.tolist(), strict=True):   # reached max_len"
RESTORE = "        model.train(was_training)\n"
HF_ADD_ALIVE = """        if len(done) < beam_size:
            done += [(s / ((5 + len(t) - 1) / 6) ** length_penalty, t) for t, s in beams]"""

HF_BEAM = '''
@torch.no_grad()
def beam_search(model, src, beam_size, max_len, bos_id, eos_id, length_penalty=0.6):
    was_training = model.training
    model.eval()
    results = []
    for b in range(src.size(0)):
        row = src[b:b + 1]
        mask = (row != model.pad_id)[:, None, None, :]
        memory = model.encode(row, mask)
        beams = [([bos_id], 0.0)]
        done = []
        while len(beams[0][0]) < max_len and len(done) < beam_size:
            ys = torch.tensor([tokens for tokens, _ in beams], device=src.device)
            hidden = model.decode(ys, memory.repeat(len(beams), 1, 1), memory_mask=mask)
            logp = F.log_softmax(model.generator(hidden[:, -1]), dim=-1)
            totals = torch.tensor([s for _, s in beams], device=src.device)[:, None] + logp
            values, index = totals.flatten().topk(min(2 * beam_size, totals.numel()))
            new = []
            for rank, (value, i) in enumerate(zip(values.tolist(), index.tolist())):
                parent, token = divmod(i, logp.size(-1))
                tokens = beams[parent][0] + [token]
                if token == eos_id:
                    if rank < beam_size:
                        done.append((value / ((5 + len(tokens) - 1) / 6) ** length_penalty, tokens))
                else:
                    new.append((tokens, value))
                if len(new) == beam_size:
                    break
            beams = new
        if len(done) < beam_size:
            done += [(s / ((5 + len(t) - 1) / 6) ** length_penalty, t) for t, s in beams]
        results.append(max(done, key=lambda d: d[0])[1])
    model.train(was_training)
    out = torch.full((src.size(0), max_len), model.pad_id, dtype=torch.long, device=src.device)
    for b, tokens in enumerate(results):
        out[b, :len(tokens)] = torch.tensor(tokens, device=src.device)
    return out
'''

BUGS = [
    # filter_logits
    bug("filter_logits", "filter_temperature_multiplied", "logits multiplied by the temperature",
        ("logits = logits / temperature", "logits = logits * temperature")),
    bug("filter_logits", "filter_temperature_after", "temperature applied after the filters",
        ("    logits = logits / temperature\n", ""), ("    return logits\n", "    return logits / temperature\n")),
    bug("filter_logits", "filter_topk_count", "top-k keeps k + 1", (TOPK, TOPK.replace("min(top_k,", "min(top_k + 1,"))),
    bug("filter_logits", "filter_topk_count", "top-k keeps k - 1 (drops the k-th too)",
        ("logits.masked_fill(logits < kth,", "logits.masked_fill(logits <= kth,")),
    bug("filter_logits", "filter_not_neg_inf", "excluded tokens at -1e9", ('float("-inf")', "-1e9")),
    bug("filter_logits", "filter_topp_excludes_crossing", "top-p leaves out the token that crosses p",
        (DROP, "drop = probs.cumsum(dim=-1) > top_p")),
    bug("filter_logits", "filter_topp_drops_top", "top-p without the most likely token kept (none left for tiny p)",
        (DROP, "drop = probs.cumsum(dim=-1) > top_p"), (FORCE, "")),
    bug("filter_logits", "filter_topp_unsorted", "top-p totals in vocabulary order",
        ("sorted_logits, order = logits.sort(dim=-1, descending=True)",
         "sorted_logits, order = logits, torch.arange(logits.size(-1)).expand_as(logits)")),
    bug("filter_logits", "filter_topp_boundary", "top-p with cumsum > p shifted right (keeps one more at exactly p)",
        (DROP, "drop = probs.cumsum(dim=-1) > top_p\n        drop[..., 1:] = drop[..., :-1].clone()")),
    bug("filter_logits", "filter_topp_float32_total", "top-p's running total in float32, applied at top_p=1 too",
        ("    if top_p is not None and top_p < 1:", "    if top_p is not None:"),
        ("probs = sorted_logits.double().softmax(dim=-1)", "probs = sorted_logits.softmax(dim=-1)")),
    bug("filter_logits", "filter_not_combined", "top_p ignored when top_k is given",
        ("    if top_p is not None and top_p < 1:", "    elif top_p is not None and top_p < 1:")),
    bug("filter_logits", "filter_topk_above_vocab", "torch.topk(logits, top_k) without min(top_k, V)",
        (TOPK, TOPK.replace("min(top_k, logits.size(-1))", "top_k"))),
    bug("filter_logits", "changes_its_input",
        "divides only when temperature != 1, then top-k with masked_fill_ (the caller's logits at temperature 1)",
        ("    logits = logits / temperature\n", "    if temperature != 1.0:\n        logits = logits / temperature\n"),
        ("logits = logits.masked_fill(logits < kth,", "logits.masked_fill_(logits < kth,")),
    bug("filter_logits", "filter_softmax_overflow", "top-p's softmax as exp(x) / exp(x).sum()",
        ("probs = sorted_logits.double().softmax(dim=-1)",
         "probs = sorted_logits.double().exp() / sorted_logits.double().exp().sum(dim=-1, keepdim=True)")),
    # sample
    bug("sample", "sample_no_argmax_at_zero", "temperature 0 divides by zero",
        ("if temperature == 0:\n        return logits.argmax(dim=-1)\n    ", "")),
    bug("sample", "sample_not_squeezed", "returns [B, 1]", (DRAW, DRAW.removesuffix(".squeeze(-1)"))),
    bug("sample", "sample_generator_ignored", "the generator not passed to multinomial",
        (DRAW, DRAW.replace(", generator=generator", ""))),
    bug("sample", "sample_unfiltered", "draws from the unfiltered logits",
        (SAMPLE_PROBS, "probs = torch.softmax(logits / temperature, dim=-1)")),
    bug("sample", "sample_temperature_after_softmax", "probabilities divided by the temperature",
        (SAMPLE_PROBS, "probs = torch.softmax(filter_logits(logits, 1.0, top_k, top_p), dim=-1) / temperature")),
    bug("sample", "sample_not_long", "ids returned as int32", (DRAW, DRAW + ".to(torch.int32)")),
    bug("sample", "sample_softmax_overflow", "torch.multinomial on exp(filtered logits)",
        (SAMPLE_PROBS, "probs = filter_logits(logits, temperature, top_k, top_p).exp()")),
    bug("sample", "sample_softmax_overflow", "softmax as exp(x) / exp(x).sum()",
        (SAMPLE_PROBS, "probs = filter_logits(logits, temperature, top_k, top_p).exp()\n"
                       "    probs = probs / probs.sum(dim=-1, keepdim=True)")),
    bug("sample", "changes_its_input", "divides the caller's logits in place (logits /= temperature)",
        (SAMPLE_PROBS, "logits /= temperature\n    probs = torch.softmax(filter_logits(logits, 1.0, top_k, top_p), dim=-1)")),
    # decoder_step (KVCache)
    bug("decoder_step", "given_answer", "each block run by lesson 10's given block_forward, with past keys and values",
        ("    for i, block in enumerate(model.blocks):\n",
         "    for i, block in enumerate(model.blocks):\n"
         "        past = (cache.keys[i], cache.values[i]) if T0 else None\n"
         "        x, (k, v) = lesson10.block_forward(block, x, cos, sin, key_mask, n_head=H, past=past)\n"
         "        if T0:\n"
         "            cache.keys[i], cache.values[i] = k, v\n"
         "        else:\n"
         "            cache.keys.append(k)\n"
         "            cache.values.append(v)\n"
         "        continue\n")),
    bug("generate", "given_answer", "greedy generation returned by lesson 10's given greedy_answers",
        ("    was_training = model.training\n    model.eval()\n    cache = KVCache()",
         "    if temperature == 0:\n"
         "        return torch.cat([prompt, lesson10.greedy_answers(model, prompt, max_new_tokens, eos_id)], dim=1)\n"
         "    was_training = model.training\n    model.eval()\n    cache = KVCache()")),
    bug("decoder_step", "step_pads_attended", "no key mask", (KEYS, "allowed = allowed")),
    bug("decoder_step", "step_no_causal", "no causal mask", (CAUSAL, CAUSAL.replace(".tril(T0)", ""))),
    bug("decoder_step", "step_no_causal_in_chunk", "causal mask for the prompt only",
        (CAUSAL, CAUSAL.replace(".tril(T0)", ".tril(T0 if T0 == 0 else T0 + L)"))),
    bug("decoder_step", "step_scale_d_model", "scores divided by √d_model", ("/ math.sqrt(D // H)", "/ math.sqrt(D)")),
    bug("decoder_step", "step_pad_id_hardcoded", "pads taken as id 0", ("new_mask = ids != model.pad_id", "new_mask = ids != 0")),
    bug("decoder_step", "step_keys_before_rope", "keys cached before RoPE", (CACHED, CACHED.replace(
        "q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)",
        "q, raw, k = apply_rope(q, cos, sin), k, apply_rope(k, cos, sin)").replace(
        STORE, "cache.keys[i], cache.values[i] = torch.cat([cache.keys[i], raw], dim=2), v").replace(
        "cache.keys.append(k)", "cache.keys.append(raw)"))),
    bug("decoder_step", "step_positions_not_advanced", "new tokens at position 0",
        (ARANGE, "torch.arange(L, device=ids.device)")),
    bug("decoder_step", "step_positions_with_pads", "later positions len(cache) + i, left pads not subtracted",
        ("- leading).clamp(min=0)", "- (leading if T0 == 0 else 0)).clamp(min=0)")),
    bug("decoder_step", "step_positions_from_row_start", "positions counted from the row's first column (pads included)",
        ("- leading).clamp(min=0)", "- 0 * leading).clamp(min=0)")),
    bug("decoder_step", "step_cache_not_extended", "the cache keeps the prompt only",
        ("            " + STORE + "\n", ""), ("cache.key_mask = key_mask", "cache.key_mask = key_mask if T0 == 0 else cache.key_mask")),
    bug("decoder_step", "step_cache_refilled", "the cache replaced by the new tokens",
        ("""            k = torch.cat([cache.keys[i], k], dim=2)
            v = torch.cat([cache.values[i], v], dim=2)
            """ + STORE, """            cache.keys[i], cache.values[i], k, v = (k, v, torch.cat([cache.keys[i], k], dim=2),
                                                    torch.cat([cache.values[i], v], dim=2))"""),
        ("cache.key_mask = key_mask", "cache.key_mask = new_mask if T0 else key_mask")),
    bug("decoder_step", "step_tensor_on_cpu", "positions from torch.arange without device=",
        (ARANGE, "torch.arange(T0, T0 + L)")),
    bug("decoder_step", "step_no_scale", "scores not divided by √d_head", (" / math.sqrt(D // H)", "")),
    bug("decoder_step", "step_rope_on_v", "RoPE on v too", (CACHED.splitlines()[0],
        "        q, k, v = apply_rope(q, cos, sin), apply_rope(k, cos, sin), apply_rope(v, cos, sin)")),
    bug("decoder_step", "step_keys_before_rope", "keys cached before RoPE, then all rotated by the new angles",
        (CACHED, CACHED.replace("q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)", "q = apply_rope(q, cos, sin)")
         + "\n        k = apply_rope(k, cos, sin)")),
    bug("decoder_step", "step_last_position_only", "returns the last position's logits only",
        ("return model.lm_head(model.norm(x))", "return model.lm_head(model.norm(x[:, -1]))")),
    bug("decoder_step", "step_masked_with_neg_inf", "hidden scores filled with -inf",
        ("scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)", 'scores.masked_fill(~allowed, float("-inf"))')),
    bug("decoder_step", "step_cache_shared", "KVCache's lists made in the class body (shared by every KVCache)",
        ("""    def __init__(self):
        ### BEGIN SOLUTION
        self.keys: list[torch.Tensor] = []      # one tensor per layer, [B, H, T, d_head]
        self.values: list[torch.Tensor] = []
""", """    keys: list[torch.Tensor] = []               # one list for every KVCache
    values: list[torch.Tensor] = []

    def __init__(self):
        ### BEGIN SOLUTION
""")),
    # generate
    bug("generate", "gen_length_off_by_one", "max_new_tokens - 1 steps",
        ("for _ in range(max_new_tokens):", "for _ in range(max_new_tokens - 1):")),
    bug("generate", "gen_no_pad_after_eos", "no pad after eos", (".masked_fill(done, model.pad_id)", "")),
    bug("generate", "gen_never_stops", "never stops early", ("if done.all():", "if done.all() and False:")),
    bug("generate", "gen_stops_at_first_eos", "stops when the first row ends", ("if done.all():", "if done.any():")),
    bug("generate", "gen_cache_unused", "use_cache ignored: the whole sequence every step",
        (STEP_LOGITS, "logits = model(ids)[:, -1]")),
    bug("generate", "gen_cache_when_off", "use_cache ignored: always the cache",
        ("cache = KVCache() if use_cache else None", "cache = KVCache()"),
        (STEP_LOGITS, "logits = decoder_step(model, new, cache)[:, -1]")),
    bug("generate", "gen_sampling_args_dropped", "top_k and top_p not passed to sample",
        (SAMPLED, "sample(logits, temperature, generator=generator)")),
    bug("generate", "gen_generator_dropped", "generator not passed to sample", (SAMPLED, "sample(logits, temperature, top_k, top_p)")),
    bug("generate", "gen_no_eval", "generate without model.eval()",
        ("    model.eval()\n    cache = KVCache()", "    cache = KVCache()")),
    bug("generate", "gen_mode_not_restored", "generate never restores the mode (eval after it)",
        (RESTORE + "    return ids", "        pass\n    return ids")),
    bug("generate", "gen_mode_not_restored", "generate ends with model.train(), whatever the mode",
        (RESTORE + "    return ids", "        model.train()\n    return ids")),
    bug("generate", "gen_prompt_dropped", "returns the new tokens only",
        (RESTORE + "    return ids", RESTORE + "    return ids[:, prompt.size(1):]")),
    # beam_search
    bug("beam_search", "beam_no_memory_mask", "decodes without the source mask",
        ("memory.expand(n, -1, -1), memory_mask=src_mask)", "memory.expand(n, -1, -1))")),
    bug("beam_search", "beam_max_len_off_by_one", "max_len + 1 tokens", ("alive.size(1) < max_len", "alive.size(1) <= max_len")),
    bug("beam_search", "beam_size_ignored", "one candidate a step (greedy)",
        ("top = total.topk(min(beam_size, total.numel()))", "top = total.topk(1)")),
    bug("beam_search", "beam_no_log_softmax", "raw logits summed", (LOGP, LOGP.replace("torch.log_softmax(", "(").replace(", dim=-1)", ")"))),
    bug("beam_search", "beam_sum_probs", "probabilities summed", (TOTAL, TOTAL.replace("+ logp)", "+ logp.exp())"))),
    bug("beam_search", "beam_finished_expanded", "finished hypotheses stay in the beam",
        ("alive, scores = grown[~ended], top.values[~ended]", "alive, scores = grown, top.values")),
    bug("beam_search", "beam_penalty_per_step", "running scores divided by the penalty at every step",
        (TOTAL, "total = ((scores[:, None] + logp) / ((5 + alive.size(1)) / 6) ** length_penalty).flatten()")),
    bug("beam_search", "beam_penalty_counts_bos", "|Y| counts bos", (PENALTY, PENALTY.replace(" - 1) / 6)", ") / 6)"))),
    bug("beam_search", "beam_alpha_ignored", "α fixed at 0.6", (PENALTY, PENALTY.replace("** length_penalty", "** 0.6"))),
    bug("beam_search", "beam_no_length_penalty", "best by log p alone", (PENALTY, "")),
    bug("beam_search", "beam_no_eval", "beam_search without model.eval()",
        ("    model.eval()\n    pad = model.pad_id", "    pad = model.pad_id")),
    bug("beam_search", "beam_mode_not_restored", "beam_search never restores the mode (eval after it)",
        (RESTORE + "    out = torch.full", "        pass\n    out = torch.full")),
    bug("beam_search", "beam_mode_not_restored", "beam_search ends with model.train(), whatever the mode",
        (RESTORE + "    out = torch.full", "        model.train()\n    out = torch.full")),
    bug("beam_search", "beam_probs_multiplied", "probabilities multiplied in float32, torch's log at the end",
        (LOGP, LOGP.replace("log_softmax", "softmax")), (TOTAL, TOTAL.replace("+ logp", "* logp")),
        ("scores = torch.zeros(1,", "scores = torch.ones(1,"), (FINISHED, "(float(torch.tensor(score).log()) / ((5 + tokens_of")),
    bug("beam_search", "beam_probs_multiplied", "probabilities multiplied in float32, math.log at the end",
        (LOGP, LOGP.replace("log_softmax", "softmax")), (TOTAL, TOTAL.replace("+ logp", "* logp")),
        ("scores = torch.zeros(1,", "scores = torch.ones(1,"), (FINISHED, "(math.log(score) / ((5 + tokens_of")),
    bug("beam_search", "beam_alive_dropped", "the hypotheses alive at max_len kept only when none ended with eos",
        (AT_MAX_LEN, "for tokens_of, score in ([] if finished else zip(alive, scores.tolist(), strict=True)):")),
    bug("beam_search", "beam_penalty_multiplied", "log p multiplied by the length penalty",
        (PENALTY, PENALTY.replace("/ ((5", "* ((5"))),
    bug("beam_search", "beam_score_last_token", "a hypothesis ranked by its last token's log p",
        (TOTAL, "total = logp.flatten()                # [n · V]")),
    bug("beam_search", "beam_best_by_length", "the longest finished hypothesis returned",
        (BEST, "best.append(max(finished, key=lambda f: f[1].numel())[1])")),
    bug("beam_search", "beam_last_finished", "the last finished hypothesis returned", (BEST, "best.append(finished[-1][1])")),
    bug("beam_search", "beam_no_bos", "hypotheses returned without bos", (BEST, BEST.replace("[1])", "[1][1:])"))),
    bug("beam_search", "beam_pad_id_hardcoded", "pads (and masks) id 0 instead of model.pad_id",
        ("    pad = model.pad_id\n", "    pad = 0\n")),
    bug("beam_search", "beam_unfinished_returned", "Hugging Face style, the alive beams added even after stopping early",
        source=HF_BEAM.replace(HF_ADD_ALIVE, HF_ADD_ALIVE.splitlines()[1][4:])),
    bug("decoder_step", "step_cache_len", "len(cache) counts the layers, not the positions",
        ("        return 0 if self.key_mask is None else self.key_mask.size(1)",
         "        return len(self.keys)"),
        ("    T0 = len(cache)\n", "    T0 = 0 if cache.key_mask is None else cache.key_mask.size(1)\n")),
]


ALTERNATIVES = [
    Variant("filter_logits", "sort for top-k, HF's ascending top-p with 1 - p", source='''
def filter_logits(logits, temperature=1.0, top_k=None, top_p=None):
    logits = logits / temperature
    if top_k is not None:
        k = min(top_k, logits.size(-1))
        kth = logits.sort(dim=-1, descending=True).values[..., k - 1:k]
        logits = torch.where(logits < kth, torch.full_like(logits, float("-inf")), logits)
    if top_p is not None:
        ascending, order = logits.sort(dim=-1)
        remove = ascending.softmax(dim=-1).cumsum(dim=-1) <= 1 - top_p
        remove[..., -1] = False
        logits = logits.masked_fill(remove.scatter(-1, order, remove), float("-inf"))
    return logits
'''),
    Variant("filter_logits", "topk values scattered into -inf, top-p mask in float64 by gather", source='''
def filter_logits(logits, temperature=1.0, top_k=None, top_p=None):
    scaled = logits / temperature
    out = scaled
    if top_k is not None:
        values, index = scaled.topk(min(top_k, scaled.size(-1)), dim=-1)
        out = torch.full_like(scaled, float("-inf")).scatter(-1, index, values)
    if top_p is not None:
        probs = out.double().softmax(dim=-1)
        order = probs.argsort(dim=-1, descending=True)
        ranked = probs.gather(-1, order)
        keep_sorted = ranked.cumsum(dim=-1) - ranked < top_p
        keep_sorted[..., 0] = True
        keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
        out = out.masked_fill(~keep, float("-inf"))
    return out
'''),
    Variant("sample", "multinomial on float64 probabilities", replace=(
        (SAMPLE_PROBS, SAMPLE_PROBS.replace("torch.softmax(filter_logits(logits, temperature, top_k, top_p)",
                                            "torch.softmax(filter_logits(logits, temperature, top_k, top_p).double()")),)),
    Variant("sample", "inverse CDF: torch.rand from the generator, searchsorted", source='''
def sample(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = torch.softmax(filter_logits(logits, temperature, top_k, top_p).double(), dim=-1)
    cdf = probs.cumsum(dim=-1)
    u = torch.rand(probs.shape[:-1] + (1,), generator=generator, dtype=probs.dtype) * cdf[..., -1:]
    return torch.searchsorted(cdf, u, right=True).squeeze(-1).clamp(max=probs.size(-1) - 1)
'''),
    Variant("sample", "Gumbel-max: the argmax of the logits plus Gumbel noise drawn from the generator", source='''
def sample(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    if temperature == 0:
        return logits.argmax(dim=-1)
    filtered = filter_logits(logits, temperature, top_k, top_p)
    u = torch.rand(filtered.shape, generator=generator).clamp(min=1e-12)
    return (filtered - torch.log(-torch.log(u))).argmax(dim=-1)
'''),
    Variant("decoder_step", "a preallocated cache, positions by the running count of real tokens", source='''
class KVCache:
    def __init__(self):
        self.keys, self.values, self.mask = [], [], None
        self.length = 0

    def __len__(self):
        return self.length


def decoder_step(model, ids, cache):
    B, L = ids.shape
    T0, T1 = cache.length, cache.length + ids.size(1)
    real = ids != model.pad_id
    if cache.mask is None:
        capacity = model.cos.size(0)
        cache.mask = torch.zeros(B, capacity, dtype=torch.bool, device=ids.device)
    cache.mask[:, T0:T1] = real
    mask = cache.mask[:, :T1]
    positions = (mask.long().cumsum(dim=-1) - 1).clamp(min=0)[:, T0:T1]
    cos, sin = model.cos[positions].unsqueeze(1), model.sin[positions].unsqueeze(1)
    causal = torch.arange(T1, device=ids.device)[None, :] <= torch.arange(T0, T1, device=ids.device)[:, None]
    allowed = causal[None, None] & mask[:, None, None, :]
    x = model.embed(ids)
    D = x.size(-1)
    d = 2 * model.cos.size(-1)
    H = D // d
    for i, block in enumerate(model.blocks):
        h = block.attn_norm(x)
        q = apply_rope(block.q_proj(h).view(B, L, H, d).transpose(1, 2), cos, sin)
        k = apply_rope(block.k_proj(h).view(B, L, H, d).transpose(1, 2), cos, sin)
        v = block.v_proj(h).view(B, L, H, d).transpose(1, 2)
        if len(cache.keys) <= i:
            cache.keys.append(k.new_zeros(B, H, model.cos.size(0), d))
            cache.values.append(v.new_zeros(B, H, model.cos.size(0), d))
        cache.keys[i][:, :, T0:T1] = k
        cache.values[i][:, :, T0:T1] = v
        keys, values = cache.keys[i][:, :, :T1], cache.values[i][:, :, :T1]
        scores = torch.einsum("bhqd,bhkd->bhqk", q, keys) / d ** 0.5
        weights = scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1).nan_to_num(0.0)
        x = x + block.out_proj((weights @ values).transpose(1, 2).reshape(B, L, D))
        x = x + block.ffn(block.ffn_norm(x))
    cache.length = T1
    return model.lm_head(model.norm(x))
'''),
    Variant("decoder_step", "(k, v) pairs per layer, the leading pads kept from the prompt", source='''
class KVCache:
    def __init__(self):
        self.layers = []
        self.real = None
        self.lead = None

    def __len__(self):
        return 0 if self.real is None else self.real.size(1)


def decoder_step(model, ids, cache):
    B, L = ids.shape
    T0 = len(cache)
    new = ids != model.pad_id
    if cache.lead is None:
        cache.lead = (new.long().cumsum(dim=1) == 0).sum(dim=1, keepdim=True)
        cache.real = new
    else:
        cache.real = torch.cat([cache.real, new], dim=1)
    positions = (T0 + torch.arange(L, device=ids.device)[None] - cache.lead).clamp(min=0)
    cos, sin = model.cos[positions][:, None], model.sin[positions][:, None]
    T = T0 + L
    causal = torch.ones(L, T, dtype=torch.bool, device=ids.device).tril(diagonal=T0)
    allowed = causal & cache.real[:, None, None, :]
    x = model.embed(ids)
    D = x.size(-1)
    d = 2 * model.cos.size(-1)
    H = D // d

    def heads(t):
        return t.view(B, L, H, d).transpose(1, 2)

    for i, block in enumerate(model.blocks):
        h = block.attn_norm(x)
        q, k, v = heads(block.q_proj(h)), heads(block.k_proj(h)), heads(block.v_proj(h))
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if i < len(cache.layers):
            k = torch.cat([cache.layers[i][0], k], dim=2)
            v = torch.cat([cache.layers[i][1], v], dim=2)
            cache.layers[i] = (k, v)
        else:
            cache.layers.append((k, v))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(d)
        scores = scores.masked_fill(~allowed, -1e9)
        x = x + block.out_proj((scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, L, D))
        x = x + block.ffn(block.ffn_norm(x))
    return model.lm_head(model.norm(x))
'''),
    Variant("generate", "a preallocated output, sampling only the rows still running", source='''
@torch.no_grad()
def generate(model, prompt, max_new_tokens, eos_id, temperature=0.0, top_k=None, top_p=None,
             generator=None, use_cache=True):
    mode = model.training
    model.eval()
    B, P = prompt.shape
    out = torch.full((B, P + max_new_tokens), model.pad_id, dtype=prompt.dtype, device=prompt.device)
    out[:, :P] = prompt
    running = torch.ones(B, dtype=torch.bool, device=prompt.device)
    cache = KVCache() if use_cache else None
    length = P
    for step in range(max_new_tokens):
        if use_cache:
            logits = decoder_step(model, out[:, :P] if step == 0 else out[:, length - 1:length], cache)[:, -1]
        else:
            logits = model(out[:, :length])[:, -1]
        picked = sample(logits[running], temperature, top_k, top_p, generator)
        out[running, length] = picked
        running = running.clone()
        running[running.clone()] = picked != eos_id
        length += 1
        if not running.any():
            break
    model.train(mode)
    return out[:, :length]
'''),
    Variant("beam_search", "Hugging Face style: k alive beams from 2k candidates, stop when k finished",
            source=HF_BEAM),
    Variant("beam_search", "batched beams, finished ones frozen in the beam (pad at log p 0)", source='''
@torch.no_grad()
def beam_search(model, src, beam_size, max_len, bos_id, eos_id, length_penalty=0.6):
    was_training = model.training
    model.eval()
    B, k, pad = src.size(0), beam_size, model.pad_id
    src_mask = (src != pad)[:, None, None, :]
    memory = model.encode(src, src_mask)
    memory = memory.repeat_interleave(k, dim=0)
    mask = src_mask.repeat_interleave(k, dim=0)
    ys = torch.full((B * k, 1), bos_id, dtype=torch.long, device=src.device)
    scores = torch.full((B, k), float("-inf"), device=src.device)
    scores[:, 0] = 0.0
    scores = scores.flatten()
    finished = torch.zeros(B * k, dtype=torch.bool, device=src.device)
    while ys.size(1) < max_len and not finished.all():
        logp = torch.log_softmax(model.generator(model.decode(ys, memory, memory_mask=mask)[:, -1]), dim=-1)
        V = logp.size(-1)
        frozen = torch.full_like(logp, float("-inf"))
        frozen[:, pad] = 0.0
        logp = torch.where(finished[:, None], frozen, logp)
        total = (scores[:, None] + logp).view(B, k * V)
        best, index = total.topk(k, dim=-1)
        parent = (index // V + torch.arange(B, device=src.device)[:, None] * k).flatten()
        token = (index % V).flatten()
        ys = torch.cat([ys[parent], token[:, None]], dim=1)
        finished = finished[parent] | (token == eos_id)
        scores = best.flatten()
    lengths = ((ys != pad) & (ys != bos_id)).sum(dim=1).float()
    normalised = (scores / ((5 + lengths) / 6) ** length_penalty).view(B, k)
    pick = normalised.argmax(dim=-1) + torch.arange(B, device=src.device) * k
    model.train(was_training)
    return ys[pick]
'''),
]

SCORES = {
    ('filter_logits', 'logits multiplied by the temperature'): 0.5,
    ('filter_logits', 'temperature applied after the filters'): 1.75,
    ('filter_logits', 'top-k keeps k + 1'): 1.75,
    ('filter_logits', 'top-k keeps k - 1 (drops the k-th too)'): 1.75,
    ('filter_logits', 'excluded tokens at -1e9'): 0.5,
    ('filter_logits', 'top-p leaves out the token that crosses p'): 1.75,
    ('filter_logits', 'top-p without the most likely token kept (none left for tiny p)'): 1.5,
    ('filter_logits', 'top-p totals in vocabulary order'): 1.25,
    ('filter_logits', 'top-p with cumsum > p shifted right (keeps one more at exactly p)'): 2.75,
    ('filter_logits', "top-p's running total in float32, applied at top_p=1 too"): 2.75,
    ('filter_logits', 'top_p ignored when top_k is given'): 2.5,
    ('filter_logits', 'torch.topk(logits, top_k) without min(top_k, V)'): 2.25,
    ('filter_logits', "top-p's softmax as exp(x) / exp(x).sum()"): 2.25,
    ('filter_logits', "divides only when temperature != 1, then top-k with masked_fill_ (the caller's logits at "
                      "temperature 1)"): 2.25,
    ('sample', "divides the caller's logits in place (logits /= temperature)"): 0,
    ('sample', 'temperature 0 divides by zero'): 1.5,
    ('sample', 'returns [B, 1]'): 0,
    ('sample', 'the generator not passed to multinomial'): 1.5,
    ('sample', 'draws from the unfiltered logits'): 0.5,
    ('sample', 'probabilities divided by the temperature'): 1,
    ('sample', 'ids returned as int32'): 1.5,
    ('sample', 'torch.multinomial on exp(filtered logits)'): 1,
    ('sample', 'softmax as exp(x) / exp(x).sum()'): 1,
    ('decoder_step', 'no key mask'): 0.5,
    ('decoder_step', 'no causal mask'): 0.5,
    ('decoder_step', 'causal mask for the prompt only'): 3,
    ('decoder_step', 'scores divided by √d_model'): 0.5,
    ('decoder_step', 'pads taken as id 0'): 0.5,
    ('decoder_step', 'keys cached before RoPE'): 1.75,
    ('decoder_step', 'new tokens at position 0'): 1.75,
    ('decoder_step', 'later positions len(cache) + i, left pads not subtracted'): 1.75,
    ('decoder_step', "positions counted from the row's first column (pads included)"): 0.5,
    ('decoder_step', 'the cache keeps the prompt only'): 1.75,
    ('decoder_step', 'the cache replaced by the new tokens'): 1.75,
    ('decoder_step', 'positions from torch.arange without device='): 3.5,
    ('decoder_step', 'scores not divided by √d_head'): 0.5,
    ('decoder_step', 'RoPE on v too'): 0.5,
    ('decoder_step', 'keys cached before RoPE, then all rotated by the new angles'): 1.75,
    ('decoder_step', "KVCache's lists made in the class body (shared by every KVCache)"): 1.75,
    ('generate', 'max_new_tokens - 1 steps'): 1.5,
    ('generate', 'no pad after eos'): 2.25,
    ('generate', 'never stops early'): 2.25,
    ('generate', 'stops when the first row ends'): 2.25,
    ('generate', 'use_cache ignored: the whole sequence every step'): 2.25,
    ('generate', 'use_cache ignored: always the cache'): 2.25,
    ('generate', 'top_k and top_p not passed to sample'): 2.75,
    ('generate', 'generator not passed to sample'): 2.75,
    ('generate', 'generate without model.eval()'): 2.75,
    ('generate', 'generate never restores the mode (eval after it)'): 2.75,
    ('generate', 'generate ends with model.train(), whatever the mode'): 2.75,
    ('beam_search', 'decodes without the source mask'): 2.5,
    ('beam_search', 'max_len + 1 tokens'): 2.5,
    ('beam_search', 'one candidate a step (greedy)'): 2.25,
    ('beam_search', 'raw logits summed'): 2.75,
    ('beam_search', 'probabilities summed'): 1.75,
    ('beam_search', 'finished hypotheses stay in the beam'): 1.5,
    ('beam_search', 'running scores divided by the penalty at every step'): 2.25,
    ('beam_search', '|Y| counts bos'): 3,
    ('beam_search', 'α fixed at 0.6'): 3,
    ('beam_search', 'best by log p alone'): 3,
    ('beam_search', 'beam_search without model.eval()'): 3.5,
    ('beam_search', 'beam_search never restores the mode (eval after it)'): 3.5,
    ('beam_search', 'beam_search ends with model.train(), whatever the mode'): 3.5,
    ('beam_search', "probabilities multiplied in float32, torch's log at the end"): 3,
    ('beam_search', 'probabilities multiplied in float32, math.log at the end'): 3,
    ('beam_search', 'the hypotheses alive at max_len kept only when none ended with eos'): 3.5,
    ('beam_search', 'log p multiplied by the length penalty'): 3,
    ('beam_search', "a hypothesis ranked by its last token's log p"): 1.75,
    ('beam_search', 'the longest finished hypothesis returned'): 1,
    ('beam_search', 'the last finished hypothesis returned'): 1,
    ('beam_search', 'Hugging Face style, the alive beams added even after stopping early'): 3.5,
    ('beam_search', 'pads (and masks) id 0 instead of model.pad_id'): 3.5,
    ('beam_search', 'hypotheses returned without bos'): 0,
    ('decoder_step', "returns the last position's logits only"): 0.5,
    ('decoder_step', 'hidden scores filled with -inf'): 0.5,
    ('generate', 'returns the new tokens only'): 0.75,
}
