"""Hidden graders of lesson 11_generation (torch).

``filter_logits`` is compared with a float64 oracle on inputs drawn away from ties and from the
boundaries where the contract could be read two ways (a running total within 0.002 of p, a top-k
and top-p pair whose two readings disagree), plus a boundary case whose probabilities are exact
(equal logits: 1/4, 1/8) where the contract is clear, and top_p=1 on 32,000 tokens (every one
kept; a float32 running total reaches 1 thousands of tokens early). ``sample`` is exact where it
can be (temperature 0 and top_k=1 are the argmax); its draws are compared one by one with
torch.multinomial's from a generator seeded alike (1,000 rows, all equal: a mistaken distribution
agrees on every row with probability below 1e-26), and draws that differ (another way to draw) are
judged on 20,000 draws from a seeded generator, with bounds of six binomial standard deviations
(never flaky) that every mistake misses by far more; any sampler whose draws have the right
distribution and follow the given generator keeps full marks.

``filter_logits`` and ``sample`` also meet top_k > V and rows shifted to ±1000 (the same
distributions, on which a softmax written as exp(x) / exp(x).sum() overflows). ``filter_logits``'s
outputs are compared with -inf as -1e30 (``finite``), and its hints show -inf (``close_logits``).

``decoder_step`` and ``generate`` run on lesson 10's ``DecoderLM`` (the course's, built next to
the submission by the ``decoder_lm`` fixture) holding weights drawn here, and are compared with
the same model run on whole sequences in float64; the cache is read only through what
``decoder_step`` returns (its attributes are read only to name a mistake once a step has failed).
``generate``'s mode is checked on that model (in eval mode, kept) and on a DecoderLM built with
dropout=1.0, which in training mode drops every block's output. ``beam_search`` runs on lesson
08's ``Transformer`` (beam 1 must be ``greedy_decode``), on lesson 08's copy model (built in
training mode, it counts the calls made in it) and on a stand-in whose next-token logits come from a table (``table_model``): scenarios in
which the best hypothesis is unique and found by every correct variant of beam search (a shrinking
beam, k alive beams from 2k candidates, finished beams kept frozen in the beam, early stopping once
k have finished, returning the best finished one), and in which each common mistake ends on another
hypothesis, computed here by the same search with that mistake (``suspect``): among them a best
sentence whose probability underflows float32, a hypothesis alive at max_len that wins, and a
search that stops early beside an alive hypothesis that scores better than every finished one.
On the random Transformer only the hypotheses (through their eos) are judged: what a search that
extends its finished hypotheses writes after an eos depends on the draw, so the rows' tails are
judged on the copy model, whose outcome does not (padded with model.pad_id: a copy model whose pad
is a word's id).
"""

import contextlib
import functools
import importlib.util
import math
import re

import numpy as np
import torch

from grader.runtime.errors import SubmissionError
from grader.testkit.framework import (
    ON_DEVICE,
    Failed,
    check,
    close,
    diagnose,
    exercise,
    first_failure,
    gen,
    matches,
    msg,
    per_run,
    run_memo,
    suspect,
)

MISTAKES = {
    "filter_temperature_multiplied": "the logits are multiplied by the temperature instead of divided",
    "filter_temperature_after": "the temperature is applied after top-p filtering",
    "filter_topk_count": "top-k keeps k + 1 or k - 1 tokens",
    "filter_not_neg_inf": "excluded tokens get a large negative number instead of -inf",
    "filter_topp_excludes_crossing": "top-p leaves out the token that makes the total reach p",
    "filter_topp_drops_top": "top-p can exclude every token (the most likely one is not always kept)",
    "filter_topp_unsorted": "top-p sums the probabilities in vocabulary order, not from the most likely down",
    "filter_topp_boundary": "top-p keeps one token more when the total reaches p exactly",
    "filter_topp_float32_total": "top_p=1 drops tokens: the running total, summed in float32 from the most likely "
                                 "token down, reaches 1 before the last one",
    "filter_not_combined": "with both top_k and top_p only one filter is applied",
    "filter_topk_above_vocab": "top_k larger than the vocabulary raises instead of keeping every token",
    "filter_softmax_overflow": "top-p's softmax overflows on large logits (exp without subtracting the max)",
    "sample_no_argmax_at_zero": "temperature 0 is not the argmax (the logits are divided by 0)",
    "sample_not_squeezed": "sample returns [B, 1] instead of [B]",
    "sample_generator_ignored": "sample does not draw with the given generator",
    "sample_unfiltered": "sample draws from the unfiltered logits",
    "sample_temperature_after_softmax": "the temperature divides the probabilities (no effect) instead of the logits",
    "sample_not_long": "sample returns ids of another integer dtype than torch.long",
    "sample_softmax_overflow": "sample's probabilities overflow on large logits (exp without subtracting the max)",
    "step_pads_attended": "decoder_step lets real tokens attend to the left pads",
    "step_no_causal": "decoder_step has no causal mask",
    "step_no_causal_in_chunk": "decoder_step has no causal mask inside a chunk of new tokens after the prompt",
    "step_scale_d_model": "decoder_step divides the scores by √d_model instead of √d_head",
    "step_pad_id_hardcoded": "decoder_step takes id 0 as the pad instead of model.pad_id",
    "step_keys_before_rope": "the cache keeps the keys before RoPE",
    "step_positions_not_advanced": "new tokens are placed at position 0 instead of after the cached ones",
    "step_positions_with_pads": "new tokens' positions count the left pads (len(cache) without subtracting them)",
    "step_positions_from_row_start": "positions are counted from the row's first column, left pads included",
    "step_cache_not_extended": "decoder_step does not add the new keys and values to the cache",
    "step_cache_refilled": "decoder_step replaces the cache with the new tokens' keys and values",
    "step_tensor_on_cpu": "a tensor made inside decoder_step without device=",
    "step_no_scale": "decoder_step does not divide the scores by √d_head",
    "step_rope_on_v": "decoder_step rotates the values too",
    "step_cache_shared": "every KVCache() shares the same lists (made in the class body, not in __init__)",
    "step_cache_len": "len(cache) is not T, the number of positions cached",
    "gen_length_off_by_one": "generate makes max_new_tokens ± 1 tokens",
    "gen_no_pad_after_eos": "generate does not write pad_id after a row's eos",
    "gen_never_stops": "generate goes on after every row has ended",
    "gen_stops_at_first_eos": "generate stops when the first row ends",
    "gen_cache_unused": "generate with use_cache=True runs the whole sequence at every step",
    "gen_cache_when_off": "generate uses the cache even when use_cache=False",
    "gen_sampling_args_dropped": "generate does not pass temperature, top_k and top_p on to sample",
    "gen_generator_dropped": "generate does not pass its generator on to sample",
    "gen_no_eval": "generate runs the model in training mode (dropout on)",
    "gen_mode_not_restored": "generate does not restore the model's training mode",
    "beam_no_memory_mask": "beam_search decodes without the source padding mask",
    "beam_max_len_off_by_one": "beam_search returns max_len + 1 tokens",
    "beam_size_ignored": "beam_search keeps one hypothesis (greedy) whatever beam_size",
    "beam_no_log_softmax": "beam_search adds raw logits instead of log-probabilities",
    "beam_sum_probs": "beam_search adds probabilities instead of log-probabilities",
    "beam_finished_expanded": "finished hypotheses are extended after their eos",
    "beam_penalty_per_step": "the length penalty is applied at every step instead of once",
    "beam_penalty_counts_bos": "the length penalty's |Y| counts bos",
    "beam_alpha_ignored": "the length_penalty argument is ignored (0.6 always)",
    "beam_no_length_penalty": "the final choice uses log p without the length penalty",
    "beam_no_eval": "beam_search runs the model in training mode (dropout on)",
    "beam_mode_not_restored": "beam_search does not restore the model's training mode",
    "beam_probs_multiplied": "beam_search multiplies probabilities (they underflow to 0 in float32) instead of "
                             "adding log-probabilities",
    "beam_alive_dropped": "the hypotheses alive at max_len are dropped when some hypothesis ended with eos",
    "beam_unfinished_returned": "beam_search returns a hypothesis still alive (no eos, shorter than max_len)",
    "beam_penalty_multiplied": "log p is multiplied by the length penalty instead of divided by it",
    "beam_score_last_token": "a hypothesis is ranked by its last token's log-probability, not by the sum",
    "beam_best_by_length": "the best hypothesis is chosen by its length, not by its score",
    "beam_last_finished": "the last finished hypothesis is returned instead of the best",
    "beam_pad_id_hardcoded": "beam_search pads the shorter rows with id 0 instead of model.pad_id",
    "beam_no_bos": "beam_search returns the hypotheses without their bos",
    "step_last_position_only": "decoder_step returns the last position's logits [B, V] instead of every new token's",
    "step_masked_with_neg_inf": "decoder_step hides scores with -inf, so a left pad's query gives NaN that reaches "
                                "the real tokens",
    "gen_prompt_dropped": "generate returns the new tokens without the prompts",
}

#: What the lesson's text (both editions) asks of each exercise, each requirement with the
#: diagnoses that grade it: ids of MISTAKES, or the shared ``library_call`` and
#: ``changes_its_input`` (tests/grader/hidden/test_requirements.py: each one declared, and proven on this
#: exercise by a planted bug; every diagnosis answers some requirement).
REQUIREMENTS = {
    "filter_logits": {
        "logits / temperature (divided, before any filter)": ("filter_temperature_multiplied",),
        "top-p measures the probabilities after the temperature (temperature, then top-k, then top-p)":
            ("filter_temperature_after",),
        "top-k keeps the top_k largest logits of each row, the k-th included": ("filter_topk_count",),
        "top_k larger than V keeps everything": ("filter_topk_above_vocab",),
        "every excluded token set to -inf": ("filter_not_neg_inf",),
        "top-p: sorted from the most likely down, a token dropped when the mass before it "
        "(cumsum - probs) already reaches top_p": ("filter_topp_unsorted", "filter_topp_excludes_crossing",
                                                   "filter_topp_boundary"),
        "top-p never drops the first (most likely) token": ("filter_topp_drops_top",),
        "top_p=1 keeps every token (the total in float64, or top-p skipped at 1)": ("filter_topp_float32_total",),
        # a softmax that gives NaN on logits near ±1000 is not the softmax the text asks for
        "top-p on the softmax of the sorted logits": ("filter_softmax_overflow",),
        "top_k and top_p together: both filters apply (each only when it is not None)": ("filter_not_combined",),
        "a new tensor: the caller's logits are left unchanged (masked_fill, not masked_fill_)":
            ("changes_its_input",),
    },
    "sample": {
        "temperature == 0: the argmax of each row, no draw": ("sample_no_argmax_at_zero",),
        "[B] token ids (one per row)": ("sample_not_squeezed",),
        "torch.long ids": ("sample_not_long",),
        "drawn with torch.multinomial and the given generator": ("sample_generator_ignored",),
        "from softmax(filter_logits(logits, temperature, top_k, top_p))":
            ("sample_unfiltered", "sample_temperature_after_softmax", "sample_softmax_overflow"),
        "logits are left as they were (the lesson's second rule)": ("changes_its_input",),
    },
    "decoder_step": {
        "computes what lesson 10's DecoderLM.forward computes, block by block: RoPE on q and k, "
        "scores divided by √d_head": ("step_scale_d_model", "step_no_scale", "step_rope_on_v"),
        "the new keys (after RoPE) and values concatenated after the cached ones, the result "
        "replacing the cache": ("step_keys_before_rope", "step_cache_not_extended", "step_cache_refilled"),
        "positions continue where the cache ends, counted from each row's first real token "
        "(T0 + j - p)": ("step_positions_not_advanced", "step_positions_with_pads",
                         "step_positions_from_row_start"),
        "a band mask: causal for every chunk (tril(T0)), combined with the key mask ids != model.pad_id":
            ("step_no_causal", "step_no_causal_in_chunk", "step_pads_attended", "step_pad_id_hardcoded"),
        "returns the logits of every new token, [B, L_new, V]": ("step_last_position_only",),
        "hidden scores filled with torch.finfo(scores.dtype).min, never -inf (a pad's query has no key)":
            ("step_masked_with_neg_inf",),
        "KVCache() takes no arguments and makes a new, empty cache": ("step_cache_shared",),
        "len(cache) is T, the number of positions cached": ("step_cache_len",),
        "lesson 10's given block_forward (which takes past keys and values) is refused": ("given_answer",),
        # Exercise 3 does not say it; section 7 runs generate, hence decoder_step, on a GPU (see
        # the report: a sentence for both editions)
        "tensors built inside on ids' device (section 7 runs it on a GPU)": ("step_tensor_on_cpu",),
    },
    "generate": {
        "returns the prompts followed by the new tokens, [B, P + T]": ("gen_prompt_dropped",),
        "max_new_tokens steps at most: T = max_new_tokens when no row ends": ("gen_length_off_by_one",),
        "pad_id after a row's eos": ("gen_no_pad_after_eos",),
        "stops when every row has ended": ("gen_never_stops", "gen_stops_at_first_eos"),
        "use_cache=True: decoder_step on the prompt once, then on the last token; use_cache=False: "
        "model(ids) on everything so far": ("gen_cache_unused", "gen_cache_when_off"),
        "sample(logits, temperature, top_k, top_p, generator)":
            ("gen_sampling_args_dropped", "gen_generator_dropped"),
        "eval() for the loop, the mode restored after it": ("gen_no_eval", "gen_mode_not_restored"),
        "lesson 10's given greedy_answers and block_forward are refused": ("given_answer",),
    },
    "beam_search": {
        "decodes with memory_mask=src_mask (the source's padding mask)": ("beam_no_memory_mask",),
        "[B, <= max_len]: at most max_len tokens, bos included": ("beam_max_len_off_by_one",),
        "each row starts with bos_id": ("beam_no_bos",),
        "keeps the beam_size best of all n · V candidates": ("beam_size_ignored",),
        "scores in log space: a hypothesis's score is the sum of its tokens' log_softmax":
            ("beam_no_log_softmax", "beam_sum_probs", "beam_probs_multiplied", "beam_score_last_token"),
        "a hypothesis that ends with eos_id is finished: it leaves the beam": ("beam_finished_expanded",),
        "those left in the beam at max_len count as finished": ("beam_alive_dropped",),
        "returns a finished hypothesis (ending with eos, or of max_len tokens)": ("beam_unfinished_returned",),
        "normalised once, log p / ((5 + |Y|) / 6) ** length_penalty, |Y| the tokens after bos":
            ("beam_penalty_per_step", "beam_penalty_counts_bos", "beam_alpha_ignored", "beam_no_length_penalty",
             "beam_penalty_multiplied"),
        "the finished hypothesis with the best normalised score": ("beam_best_by_length", "beam_last_finished"),
        "the shorter rows padded with model.pad_id": ("beam_pad_id_hardcoded",),
        "in eval mode, restored after": ("beam_no_eval", "beam_mode_not_restored"),
    },
}

# Each exercise is graded with the course's versions of the ones it builds on (grader.testkit.parts).
BUILDS_ON = {
    "sample": ("filter_logits",),
    "generate": ("sample", "filter_logits", "decoder_step", "KVCache"),
}

# The course's given code that computes an exercise: refused while that exercise is graded
# (grader.testkit.parts.judged_alone), so that a decoder_step built on lesson10.block_forward (which
# takes past keys and values) or a generate returning lesson10.greedy_answers earns nothing.
GIVEN_ANSWERS = {
    "decoder_step": ("lesson10.block_forward",),
    "generate": ("lesson10.greedy_answers", "lesson10.block_forward"),
}

F64 = torch.float64
NEG_INF = float("-inf")
ATOL = 1e-4  # float32 against float64; every mistake is off by far more


def _int(n, low, high):
    return int(torch.randint(low, high, (1,), generator=gen(n)))


def _attempt(n, i):
    """The generator of attempt ``i`` of test input ``n`` (inputs redrawn until they are clear)."""
    return gen(100_000 + 100 * n + i)


# --- filter_logits ----------------------------------------------------------------------------

FILTER_HINTS = {
    "filter_temperature_multiplied": msg("the logits are multiplied by the temperature: divide them, logits / temperature (a temperature below 1 sharpens the distribution)"),
    "filter_temperature_after": msg("the temperature is applied after the filtering: divide the logits by it first, so that top-p measures the probabilities that will be sampled"),
    "filter_topk_plus_one": msg("top-k keeps k + 1 tokens: keep the k largest logits (those at least as large as the k-th largest)"),
    "filter_topk_minus_one": msg("top-k keeps k - 1 tokens: keep the k largest logits, the k-th included"),
    "filter_topp_excludes_crossing": msg("top-p leaves out the token whose probability makes the total reach p: a token is excluded only when the more likely tokens before it already reach p"),
    "filter_topp_drops_top": msg("top-p excludes every token of a row whose most likely token alone is above p: the most likely token always stays"),
    "filter_topp_unsorted": msg("top-p adds the probabilities up in vocabulary order: sort them from the most likely down first (logits.sort(descending=True)), then map the choice back"),
    "filter_not_combined": msg("with both top_k and top_p only one filter is applied: apply top-k, then top-p to the tokens top-k kept"),
}
FILTER_IDS = {"filter_topk_plus_one": "filter_topk_count", "filter_topk_minus_one": "filter_topk_count",
              "filter_topk_only": "filter_not_combined", "filter_topp_only": "filter_not_combined"}
FILTER_HINTS["filter_topk_only"] = FILTER_HINTS["filter_topp_only"] = FILTER_HINTS["filter_not_combined"]


def ref_filter(logits, temperature=1.0, top_k=None, top_p=None, mistake=None):
    """logits / temperature with -inf at the excluded tokens, in float64: top-k keeps the k
    largest, then top-p the smallest most likely set (of what top-k kept, renormalised) whose
    probabilities reach p."""
    x = logits.double()
    if mistake == "filter_temperature_multiplied":
        x = x * temperature
    elif mistake != "filter_temperature_after":
        x = x / temperature
    keep = torch.ones_like(x, dtype=torch.bool)
    if top_k is not None and mistake != "filter_topp_only":
        k = min(top_k + {"filter_topk_plus_one": 1, "filter_topk_minus_one": -1}.get(mistake, 0), x.shape[-1])
        keep &= x >= x.topk(max(k, 1), dim=-1).values[..., -1:] if k > 0 else torch.zeros_like(keep)
    if top_p is not None and mistake != "filter_topk_only":
        probs = x.masked_fill(~keep, NEG_INF).softmax(-1)
        if mistake == "filter_topp_unsorted":
            order = torch.arange(x.shape[-1]).expand(x.shape)
        else:
            order = probs.argsort(dim=-1, descending=True, stable=True)
        ranked = probs.gather(-1, order)
        total = ranked.cumsum(-1)
        if mistake in ("filter_topp_excludes_crossing", "filter_topp_drops_top"):
            drop = total > top_p
        else:
            drop = total - ranked >= top_p
        if mistake != "filter_topp_drops_top":
            drop[..., 0] = False
        keep &= ~torch.zeros_like(drop).scatter(-1, order, drop)
    out = x.masked_fill(~keep, NEG_INF)
    return out / temperature if mistake == "filter_temperature_after" else out


def finite(t):
    """-inf as -1e30 (and inf as 1e30), NaN kept: comparable without inf - inf."""
    return t.double().nan_to_num(nan=math.nan, posinf=1e30, neginf=-1e30)


SHOWN_INF = re.compile(r"(?<![\w.+-])(-?)1e\+30\b")


def close_logits(out, want, message, **kwargs):
    """close() on logits compared through finite() (so that -inf meets -inf without inf - inf),
    its evidence showing ±inf where the tensors hold it ("yours -inf, right 0.5"), not ±1e30."""
    try:
        close(out, want, message, **kwargs)
    except Failed as exc:
        raise Failed(exc.message and exc.message.map_values(lambda v: SHOWN_INF.sub(r"\1inf", v)), exc.mistake) from None


FILTER_SUSPECTS = tuple(m for m in FILTER_HINTS if m not in ("filter_topk_only", "filter_topp_only"))


def filter_suspects(logits, mistakes=FILTER_SUSPECTS, rows=slice(None), **kwargs):
    return [suspect(FILTER_IDS.get(m, m), (lambda m=m: finite(ref_filter(logits, mistake=m, **kwargs))[rows]),
                    FILTER_HINTS[m]) for m in mistakes]


def _sent(sub, calls):
    """filter_logits on each (logits, kwargs) of ``calls``, sent together without waiting (one
    round trip for a test's calls): their results, each read by ``_filter(..., sent=)`` in the
    order of the calls."""
    with sub.batch(lazy=True) as b:
        return [b.call("filter_logits", logits, **kwargs) for logits, kwargs in calls]


def _filter(sub, logits, oracle=True, sent=None, **kwargs):
    """filter_logits(logits, **kwargs) (``sent``: its result from :func:`_sent`), checked for its
    shape, dtype and -inf; the output and the oracle's, each with -inf as -1e30 (without
    ``oracle``: the output alone, and no -inf to check, for a case where the oracle excludes
    nothing)."""
    out = sent.value if sent is not None else sub.call("filter_logits", logits, **kwargs)
    check(isinstance(out, torch.Tensor) and tuple(out.shape) == tuple(logits.shape),
          msg("filter_logits should return a tensor of the logits' shape {logits_shape}, got {out_shape}", logits_shape=list(logits.shape), out_shape=list(getattr(out, 'shape', [])) if isinstance(out, torch.Tensor) else type(out).__name__))
    check(out.dtype == logits.dtype, msg("filter_logits of {logits_dtype} logits returned {out_dtype}: keep the logits' dtype", logits_dtype=str(logits.dtype)[6:], out_dtype=str(out.dtype)[6:]))
    if not oracle:
        return finite(out), None
    want = ref_filter(logits, **kwargs)
    excluded = torch.isinf(want)
    if excluded.any() and bool(torch.isfinite(out[excluded]).all()) and float(out[excluded].max()) < -1e3:
        diagnose("filter_not_neg_inf", msg("the excluded tokens hold a large negative number instead of -inf: use float(\"-inf\"), so that their probability is exactly 0 at any temperature"))
    return finite(out), finite(want)


def _gaps_ok(x, gap=1e-3):
    """No two logits of a row closer than ``gap`` (top-k away from ties)."""
    s = x.sort(dim=-1).values
    return bool((s[..., 1:] - s[..., :-1]).min() > gap)


def _totals_clear(x, temperature, top_p, margin=2e-3):
    """No running total of the sorted probabilities within ``margin`` of p (away from the
    boundary, where float rounding would decide)."""
    return bool(_totals_clear_rows(x, temperature, top_p, margin).all())


def _gaps_ok_rows(x, gap=1e-3):
    """_gaps_ok of each row of ``x`` [B, V]: [B] booleans."""
    s = x.sort(dim=-1).values
    return (s[..., 1:] - s[..., :-1]).min(-1).values > gap


def _totals_clear_rows(x, temperature, top_p, margin=2e-3):
    """_totals_clear of each row of ``x`` [B, V]: [B] booleans."""
    probs = (x.double() / temperature).softmax(-1).sort(dim=-1, descending=True).values
    return ((probs.cumsum(-1) - top_p).abs() > margin).all(-1)


def filter_case(n, temperature=1.0, top_k=None, top_p=None, differs_from=(), p_range=(0.35, 0.9)):
    """Logits [B, V] (and p, when top_p is "draw") clear of ties and boundaries, on which every
    mistake in ``differs_from`` changes the result, each in its own way."""
    for i in range(200):
        g = _attempt(n, i)
        B, V = int(torch.randint(3, 6, (1,), generator=g)), int(torch.randint(8, 17, (1,), generator=g))
        x = torch.randn(B, V, generator=g) * 2.0
        p = top_p
        if top_p == "draw":
            p = p_range[0] + (p_range[1] - p_range[0]) * float(torch.rand(1, generator=g))
        if not _gaps_ok(x) or (p is not None and not _totals_clear(x, temperature, p)):
            continue
        outcomes = [torch.isinf(ref_filter(x, temperature, top_k, p, m)) for m in (None, *differs_from)]
        if all(not torch.equal(a, b) for i, a in enumerate(outcomes) for b in outcomes[i + 1:]):
            return x, p
    raise RuntimeError(msg("no clear filter_logits input found"))  # a grader bug: the draws are generous


@exercise("filter_logits", points=0.5)
def test_filter_temperature(sub):
    x, _ = filter_case(1)
    T = 0.3 + 2.0 * float(torch.rand(1, generator=gen(2)))
    x64 = x.double()
    scaled, plain, wide = _sent(sub, [(x, {"temperature": T}), (x, {}), (x64, {"temperature": T})])
    out, want = _filter(sub, x, temperature=T, sent=scaled)
    close_logits(out, want, msg("with temperature={T} and no top_k or top_p, filter_logits should return logits / temperature, nothing excluded", T=format(T, '.3f')), atol=1e-5, suspects=filter_suspects(x, temperature=T))
    out, want = _filter(sub, x, sent=plain)
    close_logits(out, want, msg("with the default arguments filter_logits should return the logits unchanged"), atol=1e-6)
    out, want = _filter(sub, x64, temperature=T, sent=wide)
    close_logits(out, want, msg("float64 logits with temperature={T} should give logits / temperature in float64", T=format(T, '.3f')),
                 atol=1e-12)


@exercise("filter_logits", points=0.75)
def test_filter_top_k(sub):
    x, _ = filter_case(4)
    V = x.shape[-1]
    drawn_T = 0.5 + float(torch.rand(1, generator=gen(5)))
    drawn_k = 2 + _int(6, 0, V - 3)
    # last, at temperature 1: no division makes a new tensor first, so a masked_fill_ on the
    # caller's logits shows (changes_its_input)
    settings = ((drawn_k, drawn_T), (1, drawn_T), (V, drawn_T), (V + _int(7, 1, 6), drawn_T), (drawn_k, 1.0))
    sent = _sent(sub, [(x, {"temperature": T, "top_k": k}) for k, T in settings])
    for (k, T), result in zip(settings, sent, strict=True):
        try:
            out, want = _filter(sub, x, temperature=T, top_k=k, sent=result)
        except SubmissionError as exc:
            if k <= V:
                raise
            diagnose("filter_topk_above_vocab", msg("filter_logits(logits, top_k={k}) on rows of V = {V} logits raised {error_type} ({error}) where top_k={V} works: top_k larger than V keeps every token, so take min(top_k, V) (torch.topk cannot return more than V values)", k=k, V=V, error_type=exc.exc_type, error=exc.message[:120]))
        close_logits(out, want, msg("with top_k={k} (and temperature={T}) each row should keep its {k} largest logits, divided by the temperature, and hold -inf everywhere else", k=k, T=format(T, '.3f')), atol=1e-5,
                     suspects=filter_suspects(x, temperature=T, top_k=k))


@exercise("filter_logits", points=0.25)
def test_filter_top_p_keeps_one(sub):
    x, _ = filter_case(8, top_p=1e-6, differs_from=("filter_topp_unsorted",))
    top = (x.double().softmax(-1)).max(-1).values.min().item()
    ps = (1e-6, 0.5 * top)
    for p, result in zip(ps, _sent(sub, [(x, {"top_p": p}) for p in ps]), strict=True):
        out, want = _filter(sub, x, top_p=p, sent=result)
        kept = (out > -1e29).sum(-1)
        check(bool((kept > 0).all()), msg("with top_p={p}, below every row's largest probability, a row kept no token: the most likely token always stays (top-p keeps at least one)", p=format(p, '.3g')),
              mistake="filter_topp_drops_top")
        close_logits(out, want, msg("with top_p={p}, below every row's largest probability, each row should keep only its most likely token", p=format(p, '.3g')), atol=1e-5, suspects=filter_suspects(x, top_p=p))


@exercise("filter_logits", points=0.75)
def test_filter_top_p(sub):
    x, p = filter_case(10, top_p="draw", differs_from=("filter_topp_excludes_crossing", "filter_topp_drops_top"))
    T = (0.4 if _int(11, 0, 2) else 2.5)
    x2, p2 = filter_case(12, temperature=T, top_p="draw",
                         differs_from=("filter_temperature_after", "filter_topp_excludes_crossing"))
    x3, p3, shift = overflow_case(13)
    first, second, shifted = _sent(sub, [(x, {"top_p": p}), (x2, {"temperature": T, "top_p": p2}),
                                         (x3 + shift, {"top_p": p3})])
    out, want = _filter(sub, x, top_p=p, sent=first)
    close_logits(out, want, msg("with top_p={p} each row should keep its most likely tokens up to and including the one whose probability brings the total to p, and -inf elsewhere", p=format(p, '.4f')), atol=1e-5,
                 suspects=filter_suspects(x, top_p=p))
    x, p = x2, p2
    out, want = _filter(sub, x, temperature=T, top_p=p, sent=second)
    close_logits(out, want, msg("with temperature={T} and top_p={p}, top-p should measure the probabilities of logits / temperature", T=T, p=format(p, '.4f')), atol=1e-5, suspects=filter_suspects(x, temperature=T, top_p=p))
    x, p = x3, p3
    out, want = _filter(sub, x + shift, top_p=p, sent=shifted)
    if not matches(out, want, atol=1e-5) and matches(*_filter(sub, x, top_p=p), atol=1e-5):
        shifts = ", ".join(f"{v:+g}" for v in shift[:, 0].tolist())
        diagnose("filter_softmax_overflow", msg("with top_p={p}, rows shifted by {shifts} (the same distributions: a softmax does not change when a row is shifted) kept other tokens than the rows themselves: in float32 exp(100) is inf and exp(-1000) is 0, so exp(x) / exp(x).sum() gives NaN; use torch.softmax, which subtracts the max", p=format(p, '.4f'), shifts=shifts))
    close_logits(out, want, msg("with top_p={p}, rows of logits near +1000, -1000 and +100 should keep the tokens that the same rows shifted to near 0 keep", p=format(p, '.4f')), atol=1e-5)


@exercise("filter_logits", points=0.25)
def test_filter_top_p_exact_total(sub):
    """Equal logits give exact probabilities (1/2, 1/4, 1/8): a running total that reaches p
    exactly ends the set there, whatever the precision."""
    V = 12
    g = gen(14)
    cases = []
    for p, sizes in ((0.5, (2, 4, 8)), (0.75, (4, 8, 4))):
        x = torch.full((len(sizes), V), -100.0)
        for b, size in enumerate(sizes):
            x[b, torch.randperm(V, generator=g)[:size]] = 0.0
        cases.append((p, sizes, x))
    wide = top_p_one_logits(g)
    *sent, wide_sent = _sent(sub, [*((x, {"top_p": p}) for p, _, x in cases), (wide, {"top_p": 1.0})])
    for (p, sizes, x), result in zip(cases, sent, strict=True):
        out, _ = _filter(sub, x, top_p=p, sent=result)
        kept = (out > -1e29).sum(-1).tolist()
        want = [round(p * size) for size in sizes]
        sizes_txt = ", ".join(str(s) for s in sizes)
        if kept == [w + 1 for w in want]:
            diagnose("filter_topp_boundary", msg("rows with {sizes_txt} equal logits (probabilities 1/{sizes} ...) and top_p={p} kept {kept} tokens instead of {want}: the set ends at the first token that brings the total to p, reached exactly here (exclude a token when the tokens before it already reach p, a total >= p)", sizes_txt=sizes_txt, sizes=sizes[0], p=p, kept=kept, want=want))
        check(kept == want, msg("rows with {sizes_txt} equal logits and top_p={p} should keep {want} tokens (their probabilities reach p exactly), kept {kept}", sizes_txt=sizes_txt, p=p, want=want, kept=kept))
        ties = (x == 0.0)
        check(bool((out[out > -1e29] == 0.0).all()) and bool((out[~ties] <= -1e29).all()),
              msg("rows with {sizes_txt} equal logits and top_p={p} should keep only tokens of the tied largest logits, unchanged", sizes_txt=sizes_txt, p=p))
    _top_p_one_keeps_all(sub, wide, wide_sent)


def top_p_one_logits(g, V=32_000):
    """Logits [1, V] of a vocabulary of 32,000 whose smallest probabilities are about 1e-10."""
    return (3.0 * torch.randn(1, V, generator=g)).clamp(-9.0, 9.0)


def _top_p_one_keeps_all(sub, x, sent):
    """top_p=1 on top_p_one_logits (``sent``: filter_logits's result): every token has a
    probability above 0, so every one is kept; a float32 running total from the most likely
    token down reaches 1.0 thousands of tokens before the end (float64 does not)."""
    V = x.shape[-1]
    out, _ = _filter(sub, x, oracle=False, top_p=1.0, sent=sent)  # the oracle keeps every token
    kept = int((out > -1e29).sum())
    if kept < V and kept == _float32_total_keeps(x):
        diagnose("filter_topp_float32_total", msg("with top_p=1.0 on {V} tokens, filter_logits kept {kept}: a running total of float32 probabilities reaches 1.0 before the last token; sum the probabilities in float64 (probs.double()), or skip top-p when top_p is 1", V=format(V, ','), kept=format(kept, ',')))
    check(kept == V, msg("with top_p=1.0 on {V} tokens every token should be kept (each has a probability above 0), kept {kept}", V=format(V, ','), kept=format(kept, ',')))


def _float32_total_keeps(x):
    """How many tokens top_p=1 keeps with a running total of float32 probabilities summed from
    the most likely token down (the mistake ``filter_topp_float32_total``)."""
    ranked = x.sort(dim=-1, descending=True).values.softmax(-1)
    return int(((ranked.cumsum(-1) - ranked) < 1.0).sum())


OVERFLOW_SHIFTS = (1000.0, -1000.0, 100.0)


def overflow_case(n):
    """Logits [B, V] clear of boundaries, p, and a shift per row (+1000, -1000, +100, ...):
    every row excludes a token, so that a softmax that overflows (keeping every token) shows."""
    for i in range(200):
        g = _attempt(n, i)
        B, V = int(torch.randint(3, 6, (1,), generator=g)), int(torch.randint(8, 13, (1,), generator=g))
        x = torch.randn(B, V, generator=g) * 2.0
        p = 0.3 + 0.5 * float(torch.rand(1, generator=g))
        if _totals_clear(x, 1.0, p) and bool(torch.isinf(ref_filter(x, top_p=p)).any(-1).all()):
            shift = torch.tensor([OVERFLOW_SHIFTS[b % 3] for b in range(B)])[:, None]
            return x, p, shift
    raise RuntimeError(msg("no clear overflow input found"))


def _readings(x, T, k, p):
    """Per row: whether both readings of top_k with top_p agree (top-p of what top-k kept,
    renormalised; or top-p of the whole distribution, then top-k), whether top-k binds (the
    result differs from top-p alone) and whether top-p binds (it differs from top-k alone)."""
    first = torch.isfinite(ref_filter(x, T, k, p))
    only_p = torch.isfinite(ref_filter(x, T, None, p))
    only_k = torch.isfinite(ref_filter(x, T, k, None))
    return (first == (only_p & only_k)).all(-1), (first != only_p).any(-1), (first != only_k).any(-1)


COMBINED_CLEAR = ("filter_topk_plus_one", "filter_topk_minus_one", "filter_temperature_after",
                  "filter_topp_excludes_crossing", "filter_topp_drops_top", "filter_topp_unsorted")


def _enough(rows, k_binds, p_binds):
    """At least four rows, top-k binding in one of them and top-p in another."""
    return int(rows.sum()) >= 4 and bool((k_binds & rows).any()) and bool((p_binds & rows).any())


def _told_apart(x, T, k, p, rows):
    """On ``rows``, each mistake of COMBINED_CLEAR changes the reference's choice, and applying
    one filter only changes it otherwise (each outcome computed only when it is needed)."""
    def outcome(mistake):
        return torch.isinf(ref_filter(x, T, k, p, mistake))[rows]

    right = outcome(None)
    others = []
    for m in COMBINED_CLEAR:
        others.append(outcome(m))
        if torch.equal(right, others[-1]):
            return False
    for m in ("filter_topk_only", "filter_topp_only"):
        one = outcome(m)
        if any(torch.equal(one, b) for b in [right, *others]):
            return False
    return True


def combined_case(n):
    """Logits [8, V], temperature, k and p, and the rows (at least four) on which both readings of
    top_k with top_p agree, clear of boundaries, top-k binding in some and top-p in others, and
    every mistake of COMBINED_CLEAR changing one of them (so that it always costs this check) in
    its own way (so that applying one filter only is told apart from them)."""
    for i in range(400):
        g = _attempt(n, i)
        V = int(torch.randint(8, 14, (1,), generator=g))
        x = torch.randn(8, V, generator=g) * torch.tensor([0.7, 3.0]).repeat(4)[:, None]  # flat and peaked rows
        T = (0.4, 2.0)[int(torch.randint(0, 2, (1,), generator=g))] * (0.9 + 0.2 * float(torch.rand(1, generator=g)))
        k = int(torch.randint(2, 4, (1,), generator=g))
        p = 0.6 + 0.35 * float(torch.rand(1, generator=g))
        agree, k_binds, p_binds = _readings(x, T, k, p)
        if not _enough(agree, k_binds, p_binds):  # rows <= agree: the cheaper test first
            continue
        kept = (x / T).masked_fill(~torch.isfinite(ref_filter(x, T, k)), NEG_INF)
        rows = agree & _gaps_ok_rows(x) & _totals_clear_rows(x, T, p) & _totals_clear_rows(kept, 1.0, p)
        if _enough(rows, k_binds, p_binds) and _told_apart(x, T, k, p, rows):
            return x, T, k, p, rows
    raise RuntimeError(msg("no clear top_k + top_p input found"))


@exercise("filter_logits", points=0.5)
def test_filter_top_k_and_top_p(sub):
    x, T, k, p, rows = combined_case(16)
    out, want = _filter(sub, x, temperature=T, top_k=k, top_p=p)
    close_logits(out[rows], want[rows], msg("with temperature={T}, top_k={k} and top_p={p} both filters apply: in some rows top-k leaves fewer tokens than top-p would, in others top-p fewer than k", T=format(T, '.3f'), k=k, p=format(p, '.4f')), atol=1e-5,
                 suspects=filter_suspects(x, tuple(FILTER_HINTS), temperature=T, top_k=k, top_p=p, rows=rows))


# --- sample -----------------------------------------------------------------------------------

N_DRAWS = 20_000
N_SEEDED = 1000  # draws compared one by one with torch.multinomial's (_drawn_as_torch)
Z_BOUND = 6.0  # standard deviations: a correct sampler fails a bound with probability ~2e-9

SAMPLE_HINTS = {
    "sample_unfiltered": msg("the tokens are drawn from the unfiltered logits: draw from softmax(filter_logits(logits, temperature, top_k, top_p))"),
    "sample_temperature_after_softmax": msg("the temperature divides the probabilities, which torch.multinomial normalises again (no effect): divide the logits, filter_logits(logits, temperature, ...), before the softmax"),
}


def _ids(out, B, what, long=False):
    """The ids sample returned, checked for their shape and for being integers (``long``: torch.long
    exactly, checked in one test only, so that another integer dtype costs that test alone)."""
    check(isinstance(out, torch.Tensor), msg("{what} should return a tensor of token ids, got {out}", what=what, out=type(out).__name__))
    if tuple(out.shape) == (B, 1):
        diagnose("sample_not_squeezed", msg("{what} returned shape [{B}, 1]: return one id per row, shape [B] (torch.multinomial(...).squeeze(-1))", what=what, B=B))
    check(tuple(out.shape) == (B,), msg("{what} should return one id per row, shape [{B}], got {out_shape}", what=what, B=B, out_shape=list(out.shape)))
    check(not out.is_floating_point() and out.dtype != torch.bool, msg("{what} should return integer token ids (torch.long), got {out_dtype}", what=what, out_dtype=str(out.dtype)[6:]))
    if long and out.dtype != torch.long:
        diagnose("sample_not_long", msg("{what} returned ids of dtype {out_dtype}: token ids are torch.long (what torch.multinomial and argmax return, and what nn.Embedding takes); do not convert them", what=what, out_dtype=str(out.dtype)[6:]))
    return out.long()


def _generator(sub, n):
    return sub.fixture("generator", int(torch.randint(0, 2**62, (1,), generator=gen(n))))


@exercise("sample", points=0.5)
def test_sample_temperature_zero_and_top_k_one(sub):
    x, _ = filter_case(100)
    B = x.shape[0]
    want = x.argmax(-1)
    for kwargs in ({"temperature": 0.0}, {"temperature": 0.0, "top_k": 3, "top_p": 0.5}):
        try:
            out = sub.call("sample", x, generator=_generator(sub, 101), **kwargs)
        except SubmissionError as exc:
            try:  # the same call at temperature 1: does only temperature 0 fail?
                sub.call("sample", x, generator=_generator(sub, 101), **{**kwargs, "temperature": 1.0})
            except SubmissionError:
                raise exc from None
            diagnose("sample_no_argmax_at_zero", msg("sample(logits, temperature=0) raised {error_type} ({error}) where temperature=1 works: dividing by a temperature of 0 gives inf and NaN; at temperature 0 return logits.argmax(dim=-1)", error_type=exc.exc_type, error=exc.message[:120]))
        out = _ids(out, B, msg("sample(logits, temperature=0)"), long=True)
        if not matches(out, want):
            diagnose("sample_no_argmax_at_zero", msg("sample(logits, temperature=0) is not each row's argmax: temperature 0 means greedy, return logits.argmax(dim=-1)"))
    T = 0.5 + 1.5 * float(torch.rand(1, generator=gen(102)))
    flat = torch.randn(300, 9, generator=gen(103)) * 0.5  # a sampler that ignores top_k misses some argmax
    out = _ids(sub.call("sample", flat, temperature=T, top_k=1, generator=_generator(sub, 104)), 300,
               msg("sample(logits, top_k=1)"), long=True)
    close(out, flat.argmax(-1), msg("sample(logits, temperature={T}, top_k=1) keeps one token per row, so it should return each row's argmax", T=format(T, '.3f')))


@exercise("sample", points=0.5)
def test_sample_uses_the_generator(sub):
    g = gen(105)
    x = torch.randn(500, 9, generator=g)
    seed = int(torch.randint(0, 2**62, (1,), generator=g))
    first = _ids(sub.call("sample", x, generator=sub.fixture("generator", seed)), 500, "sample")
    again = _ids(sub.call("sample", x, generator=sub.fixture("generator", seed)), 500, "sample")
    check(torch.equal(first, again), msg("two generators seeded alike gave different draws: draw with the generator given, torch.multinomial(probs, 1, generator=generator)"), mistake="sample_generator_ignored")
    other = _ids(sub.call("sample", x, generator=sub.fixture("generator", seed + 1)), 500, "sample")
    check(not torch.equal(first, other), msg("generators seeded differently gave the same 500 draws: draw with the generator given, torch.multinomial(probs, 1, generator=generator)"),
          mistake="sample_generator_ignored")


def _fits(counts, probs):
    """Whether the token counts of N draws fit the distribution ``probs`` (float64 [V]): none
    where a probability is 0, elsewhere within six binomial standard deviations (plus 3 draws,
    for tokens so unlikely that the normal approximation does not hold)."""
    N = int(counts.sum())
    if bool((counts[probs == 0] > 0).any()):
        return False
    sd = (N * probs * (1 - probs)).sqrt()
    return bool(((counts - N * probs).abs() <= Z_BOUND * sd + 3).all())


def distribution_case(n, temperature, top_k=None, top_p=None):
    """One row of logits whose right distribution is far from every mistaken one."""
    for i in range(200):
        g = _attempt(n, i)
        x = torch.randn(1, 8, generator=g) * 1.5
        if not _gaps_ok(x, 0.05) or (top_p is not None and not _totals_clear(x, temperature, top_p, 0.02)):
            continue
        right = ref_filter(x, temperature, top_k, top_p).softmax(-1)[0]
        wrong = [ref_filter(x, temperature).softmax(-1)[0], ref_filter(x, 1.0, top_k, top_p).softmax(-1)[0]]
        if all(float((right - w).abs().max()) > 0.06 for w in wrong):
            return x
    raise RuntimeError(msg("no clear sampling input found"))


def _draws(sub, x, n, T, k, p, N=N_DRAWS):
    """The token counts of N draws of sample from the row x, [V] (float64)."""
    out = _ids(sub.call("sample", x.expand(N, -1).contiguous(), temperature=T, top_k=k, top_p=p,
                        generator=_generator(sub, n + 1)), N, "sample")
    V = x.shape[-1]
    check(bool(((out >= 0) & (out < V)).all()), msg("sample returned ids outside 0 … {V}", V=V - 1))
    return torch.bincount(out, minlength=V).double()


def _drawn_as_torch(sub, x, n, T, k, p, N=N_SEEDED):
    """Whether sample's N draws from the row x are, row for row, those of torch.multinomial on
    softmax(filter_logits(x, T, k, p)) in float32 with a generator seeded alike (the lesson's
    way). torch.multinomial draws one token per row as the argmax of probs / q, q exponential
    noise from the generator: draws from probabilities that differ by a total variation δ differ
    on a row with probability at least δ, so a mistake (δ ≥ 0.06 here, distribution_case) agrees
    on all N rows with probability below 0.94^N. False (another way to draw, or an error): the
    caller judges the draws' distribution instead."""
    seed = int(torch.randint(0, 2**62, (1,), generator=gen(n + 2)))
    rows = x.expand(N, -1).contiguous()
    try:
        out = sub.call("sample", rows, temperature=T, top_k=k, top_p=p, generator=sub.fixture("generator", seed))
    except (Failed, SubmissionError):
        return False
    probs = (rows / T).masked_fill(torch.isinf(ref_filter(x, T, k, p)), NEG_INF).softmax(-1)
    want = torch.multinomial(probs, 1, generator=torch.Generator().manual_seed(seed)).squeeze(-1)
    return isinstance(out, torch.Tensor) and out.dtype == torch.long and torch.equal(out, want)


OVERFLOW_HINT = (msg("in float32 exp(x) is inf above about 88 and 0 below about -103, so exp(logits) or exp(x) / exp(x).sum() gives inf or NaN: use torch.softmax, which subtracts the max"))


@exercise("sample", points=1)
def test_sample_distribution(sub):
    """The second and third rows are shifted by -1000 and +1000 (the same distributions): a softmax
    written as exp(x) / exp(x).sum(), or torch.multinomial on exp(x), overflows there. Draws equal
    to torch.multinomial's pass at once (_drawn_as_torch); any others are judged on N_DRAWS."""
    for n, (T, k, p), shift in ((110, (0.6, 4, None), 0.0), (120, (1.6, None, 0.7), -1000.0),
                                (130, (1.3, 5, 0.8), 1000.0)):
        x = distribution_case(n, T, k, p)
        if _drawn_as_torch(sub, x + shift, n, T, k, p):
            continue
        settings = f"temperature={T}" + (f", top_k={k}" if k else "") + (f", top_p={p}" if p else "")
        right = ref_filter(x, T, k, p).softmax(-1)[0]
        try:
            counts = _draws(sub, x + shift, n, T, k, p)
        except SubmissionError as exc:
            if shift and _fits(_draws(sub, x, n, T, k, p, N=2000), right):
                diagnose("sample_softmax_overflow", msg("sample raised {error_type} ({error}) on logits near {shift} with {settings}, and draws well from the same logits shifted to near 0: {OVERFLOW_HINT}", error_type=exc.exc_type, error=exc.message[:120], shift=format(shift, '+g'), settings=settings, OVERFLOW_HINT=OVERFLOW_HINT))
            raise
        if _fits(counts, right):
            continue
        if shift and _fits(_draws(sub, x, n, T, k, p), right):
            diagnose("sample_softmax_overflow", msg("{N_DRAWS} draws from logits near {shift} with {settings} do not follow softmax(filter_logits(...)), while the same logits shifted to near 0 do: {OVERFLOW_HINT}", N_DRAWS=N_DRAWS, shift=format(shift, '+g'), settings=settings, OVERFLOW_HINT=OVERFLOW_HINT))
        for mistake, probs in (("sample_unfiltered", ref_filter(x, T).softmax(-1)[0]),
                               ("sample_temperature_after_softmax", ref_filter(x, 1.0, k, p).softmax(-1)[0])):
            if _fits(counts, probs):
                diagnose(mistake, msg("{hint} ({N_DRAWS} draws with {settings})", hint=SAMPLE_HINTS[mistake], N_DRAWS=N_DRAWS, settings=settings))
        outside = int(counts[right == 0].sum())
        check(outside == 0, msg("{outside} of {N_DRAWS} draws with {settings} are tokens that filter_logits excludes: draw from softmax(filter_logits(logits, temperature, top_k, top_p))", outside=outside, N_DRAWS=N_DRAWS, settings=settings))
        worst = int(((counts - N_DRAWS * right).abs() / (N_DRAWS * right * (1 - right)).sqrt().clamp(min=1e-9)).argmax())
        check(False, msg("{N_DRAWS} draws with {settings} do not follow softmax(filter_logits(...)): token {worst} came {count} times, expected about {expected}", N_DRAWS=N_DRAWS, settings=settings, worst=worst, count=int(counts[worst]), expected=format(N_DRAWS * float(right[worst]), '.0f')))


# --- decoder_step (and KVCache) ---------------------------------------------------------------

V_LM, D_LM, H_LM, N_LAYER, FF_LM, MAX_LEN = 11, 16, 2, 2, 24, 32


@functools.cache
def _lesson(number):
    from coursekit.earlier import lesson_code

    return lesson_code(number)


def _preload_references():
    """Lessons 08's and 10's reference modules, loaded with this module where they are installed:
    the check helper's trusted zygote imports it once, so each check (a fork) finds them loaded.
    Where one is not installed, lesson_code would load the student's notebook: that waits for the
    test that needs it (never a notebook at import)."""
    from coursekit import catalogue

    for number in ("08", "10"):
        if importlib.util.find_spec(catalogue.get(number).reference_module) is not None:
            _lesson(number)


_preload_references()


def decoder_lm(pad_id, state=None):
    """Lesson 10's DecoderLM of the tests' size (float32, in eval mode, no grads), holding ``state``."""
    m = _lesson("10").DecoderLM(V_LM, d_model=D_LM, n_head=H_LM, n_layer=N_LAYER, d_ff=FF_LM, max_len=MAX_LEN,
                                dropout=0.0, pad_id=pad_id)
    if state is not None:
        m.load_state_dict(state)
    return m.eval().requires_grad_(False)


@contextlib.contextmanager
def in_float32(m64):
    """The case's float64 model ``m64`` as the float32 one it was converted from (its weights drawn
    in float32: both conversions are exact), converted back after: no model built."""
    try:
        yield m64.float()
    finally:
        m64.double()


def lm_model(g, pad_id):
    """Lesson 10's DecoderLM with weights drawn from ``g`` (the pad's embedding zero, so that
    the pad is seldom predicted): its state (float32) and the model in float64 (float32 weights,
    converted: one model built, none copied)."""
    m = decoder_lm(pad_id)
    with torch.no_grad():
        for name, p in sorted(m.named_parameters()):
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=g))
            elif name == "embed.weight":  # small, so that the blocks, not the last token, decide
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
                p[pad_id] = 0.0
            else:
                p.copy_(torch.randn(p.shape, generator=g) * 2.0 / math.sqrt(p.shape[1]))
        # random angles per position: RoPE alone sees only offsets, so positions shifted by a
        # row's left pads would pass with the real tables; with these, every position shows
        angles = (2 * torch.rand(m.cos.shape, generator=g, dtype=torch.float64) - 1) * math.pi
        m.cos.copy_(angles.cos())
        m.sin.copy_(angles.sin())
    return {k: v.clone() for k, v in m.state_dict().items()}, m.double()


def _model_fixture(sub, name, state, *args):
    """``sub.fixture(name, state, *args)``, a model holding the weights ``state`` (a case's, drawn
    once per grading run), built once in the run for the tests that ask for it: they only run it,
    and a call that changed one of its parameters or buffers would fail (a call may change only
    the arguments the check names, grader.runtime.unchanged); each test makes its own cache."""
    memo = run_memo()
    key = ("fixture", id(sub), name, id(state), args)
    if key not in memo:  # the state is kept with it: its id stays its own for the run
        memo[key] = state, sub.fixture(name, state, *args)
    return memo[key][1]


def _lm_fixture(sub, state, pad_id):
    return _model_fixture(sub, "decoder_lm", state, V_LM, D_LM, H_LM, N_LAYER, FF_LM, MAX_LEN, pad_id)


def _lm(sub):
    """The decoder_step tests' model as a fixture, in float64, and its pad_id (never 0: token 0
    is a real token, so that a pad taken as 0 shows): test_generate_greedy's, drawn once per run
    (each test draws its own ids), so that the worker builds one DecoderLM for both exercises."""
    state, m64, pad_id, *_ = generate_case(GREEDY_CASE, _int(*GREEDY_T), ending=False)
    return _lm_fixture(sub, state, pad_id), m64, pad_id


def real_tokens(g, shape, pad_id):
    ids = torch.randint(0, V_LM - 1, shape, generator=g)
    return ids + (ids >= pad_id).long()


def lm_prompts(n, pad_id, B=3, P=None):
    """Prompts [B, P]: row 0 unpadded, the others left-padded by different amounts; every row's
    second real token is id 0 (a real token here, so that a pad taken as 0 shows)."""
    P = P or _int(n, 6, 9)
    g = gen(n + 1)
    ids = real_tokens(g, (B, P), pad_id)
    lead = [0] + sorted((1 + torch.randperm(P - 3, generator=g)[:B - 1]).tolist())
    for b, k in enumerate(lead):
        ids[b, :k] = pad_id
        ids[b, k + 1] = 0
    return ids


def ref_step(m, ids, cache, mistake=None):
    """decoder_step in float64 on the model ``m`` (a float64 DecoderLM), reading and extending
    ``cache`` (a dict), as the reference does it, or with ``mistake``."""
    B, L = ids.shape
    T0 = 0 if cache.get("mask") is None else cache["mask"].shape[1]
    new_mask = ids != (0 if mistake == "step_pad_id_hardcoded" else m.pad_id)
    key_mask = new_mask if T0 == 0 else torch.cat([cache["mask"], new_mask], 1)
    leading = key_mask.long().cumsum(-1).eq(0).sum(-1, keepdim=True)
    start = 0 if mistake == "step_positions_not_advanced" else T0
    shift = 0 if mistake == "step_positions_from_row_start" or (mistake == "step_positions_with_pads" and T0) \
        else leading
    pos = (torch.arange(start, start + L) - shift).clamp(min=0).expand(B, L)
    cos, sin = m.cos[pos][:, None], m.sin[pos][:, None]
    allowed = torch.ones(L, T0 + L, dtype=torch.bool).tril(T0)
    if mistake == "step_no_causal" or (mistake == "step_no_causal_in_chunk" and T0):
        allowed = torch.ones_like(allowed)
    if mistake != "step_pads_attended":
        allowed = allowed & key_mask[:, None, None, :]
    apply_rope = _lesson("10").apply_rope
    x = m.embed(ids)
    D = x.shape[-1]
    dh = 2 * m.cos.shape[-1]
    H = D // dh
    cache.setdefault("k", [])
    cache.setdefault("v", [])
    for i, block in enumerate(m.blocks):
        h = block.attn_norm(x)
        q, k, v = (proj(h).view(B, L, H, dh).transpose(1, 2) for proj in (block.q_proj, block.k_proj, block.v_proj))
        q, k_rot = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if mistake == "step_rope_on_v":
            v = apply_rope(v, cos, sin)
        stored = k if mistake == "step_keys_before_rope" else k_rot
        keys = torch.cat([cache["k"][i], k_rot], 2) if T0 else k_rot
        values = torch.cat([cache["v"][i], v], 2) if T0 else v
        if not T0:
            cache["k"].append(stored)
            cache["v"].append(v)
        elif mistake == "step_cache_refilled":
            cache["k"][i], cache["v"][i] = stored, v
        elif mistake != "step_cache_not_extended":
            cache["k"][i] = torch.cat([cache["k"][i], stored], 2)
            cache["v"][i] = values
        scale = {"step_scale_d_model": math.sqrt(D), "step_no_scale": 1.0}.get(mistake, math.sqrt(dh))
        scores = q @ keys.transpose(-2, -1) / scale
        scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
        x = x + block.out_proj((scores.softmax(-1) @ values).transpose(1, 2).reshape(B, L, D))
        x = x + block.ffn(block.ffn_norm(x))
    if not T0 or mistake not in ("step_cache_not_extended", "step_cache_refilled"):
        cache["mask"] = key_mask
    elif mistake == "step_cache_refilled":
        cache["mask"] = new_mask
    return m.lm_head(m.norm(x))


STEP_HINTS = {
    "step_pads_attended": msg("the real tokens attend to the left pads: combine the causal mask with the key mask of every cached and new position (ids != model.pad_id)"),
    "step_no_causal": msg("there is no causal mask: a new token may attend to the cached positions and to the new tokens up to itself, torch.ones(L, T0 + L, dtype=torch.bool).tril(T0)"),
    "step_no_causal_in_chunk": msg("several new tokens at once after the prompt see each other's future: the causal mask is needed for every chunk, not only the prompt, torch.ones(L, T0 + L, dtype=torch.bool).tril(T0)"),
    "step_scale_d_model": msg("the scores are divided by √d_model: divide by √d_head, the width of one head"),
    "step_no_scale": msg("the scores are not scaled: divide q·kᵀ by √d_head, as lesson 10's block does"),
    "step_rope_on_v": msg("the values are rotated too: RoPE turns only q and k (positions belong in the scores, not in what is mixed), and the cache keeps the values as v_proj gives them"),
    "step_pad_id_hardcoded": msg("the pads are taken as id 0: use the model's pad_id (model.pad_id)"),
    "step_keys_before_rope": msg("the cache keeps the keys before RoPE: rotate k first and cache the rotated keys, so that each cached key keeps its own position's angle"),
    "step_positions_not_advanced": msg("the new tokens are placed at position 0: they come after the cached positions, positions len(cache), len(cache) + 1, … counted from each row's first real token"),
    "step_positions_with_pads": msg("the new tokens' positions count the left pads (len(cache) as it is): subtract each row's leading pads, as the prompt's positions do"),
    "step_positions_from_row_start": msg("the positions count the left pads: a row's positions start at 0 at its first real token (subtract each row's leading pads), as in lesson 10's model"),
    "step_cache_not_extended": msg("the new tokens' keys and values are not added to the cache: after the prompt every step sees only the prompt and itself"),
    "step_cache_refilled": msg("the cache is replaced by the new tokens' keys and values at every step: append them to what it holds (torch.cat along the positions)"),
}


def step_suspects(m64, chunks, select, mistakes=tuple(STEP_HINTS)):
    def run(mistake):
        cache: dict = {}
        return select([ref_step(m64, ids, cache, mistake) for ids in chunks])

    return [suspect(m, (lambda m=m: run(m)), STEP_HINTS[m]) for m in mistakes]


def _cache(sub, model):
    """The student's KVCache(): the contract's constructor takes no argument; KVCache(model)
    and KVCache(n_layer) are accepted too."""
    for args in ((), (model,), (N_LAYER,)):
        try:
            return sub.new("KVCache", *args)
        except SubmissionError as exc:
            if exc.exc_type != "TypeError":
                raise
    raise Failed(msg("KVCache() could not be built (nor KVCache(model), nor KVCache(n_layer)): the contract builds an empty cache with KVCache(), without arguments"))


def _step(sub, model, ids, cache, pad_id, expect=None):
    """decoder_step's logits of ``ids``, checked for their form; with ``expect``, also
    ``expect()``, computed while the worker steps (the call is sent without waiting)."""
    with sub.batch(lazy=True) as b:
        stepped = b.call("decoder_step", model, ids, cache, changes=(2, "cache"))  # the cache it extends
    expected = expect() if expect is not None else None
    out = stepped.value
    want = [*ids.shape, V_LM]
    if isinstance(out, torch.Tensor) and list(out.shape) == [ids.shape[0], V_LM]:
        diagnose("step_last_position_only", msg("decoder_step(model, ids, cache) with ids {ids_shape} returned {out_shape}, the logits of the last position only: return those of every new token, [B, L_new, V] (generate takes [:, -1] itself)", ids_shape=list(ids.shape), out_shape=list(out.shape)))
    check(isinstance(out, torch.Tensor) and list(out.shape) == want, msg("decoder_step(model, ids, cache) with ids {ids_shape} should return the logits of the new tokens, {want}, got {out_shape}", ids_shape=list(ids.shape), want=want, out_shape=list(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__))
    if bool(out[ids != pad_id].isnan().any()):
        diagnose("step_masked_with_neg_inf", msg("decoder_step returned NaN at real tokens of left-padded rows: a left pad's query has no key it may see, so scores hidden with -inf give it NaN, which the next layer's values carry to every token; fill the hidden scores with torch.finfo(scores.dtype).min"))
    check(bool(torch.isfinite(out[ids != pad_id]).all()),
          msg("decoder_step returned NaN or inf at real tokens"))
    return out if expect is None else (out, expected)


ROTATED_TOO_LATE = re.compile(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\) at non-singleton dimension 2")


def _later_step(sub, model, ids, cache, pad_id, T0, expect):
    """decoder_step on new tokens after T0 cached positions, and ``expect()`` (see :func:`_step`);
    an error that only keys cached before RoPE (all T0 + L of them rotated by the L new angles)
    raise is named."""
    try:
        return _step(sub, model, ids, cache, pad_id, expect)
    except SubmissionError as exc:
        L = ids.shape[1]
        found = ROTATED_TOO_LATE.search(exc.message)
        if found and (int(found[1]), int(found[2])) == (T0 + L, L):
            diagnose("step_keys_before_rope", msg("after {T0} cached positions, {L} new token{s} raised {error_type} ({error}): the keys of every position, cached ones included, meet the angles of the new tokens only; rotate only the new keys, by their own positions, and cache them after RoPE (a cached key keeps its rotation)", T0=T0, L=L, s='s' if L > 1 else '', error_type=exc.exc_type, error=exc.message[:120]))
        raise


def _holds_no_keys(value, depth=0):
    """Whether value (an object's attributes, as read) is plain data without a 4-D float tensor
    (False when it holds another object, which could hold them)."""
    if isinstance(value, torch.Tensor):
        return not (value.dim() == 4 and value.is_floating_point())
    if isinstance(value, (list, tuple, dict)) and depth < 4:
        return all(_holds_no_keys(v, depth + 1) for v in (value.values() if isinstance(value, dict) else value))
    return value is None or type(value) in (bool, int, float, str)


def _diagnose_shared_cache(sub, model, ids, pad_id):
    """After a failed step: a fresh KVCache() that holds none of the keys and values of its prefill
    itself keeps them in the class (its lists made in the class body, shared by every KVCache())."""
    try:
        cache = _cache(sub, model)
        _step(sub, model, ids, cache, pad_id)
        attributes = cache.get("__dict__")
    except (Failed, SubmissionError):
        return
    if isinstance(attributes, dict) and _holds_no_keys(attributes):
        diagnose("step_cache_shared", msg("after a prefill, a new KVCache() holds no keys or values itself: its lists belong to the class (written in the class body), so every KVCache() shares them and a new cache reads the keys of an older one; create them in __init__ (self.keys = [])"))


@exercise("decoder_step", points=1.25)
def test_step_prefill(sub):
    model, m64, pad_id = _lm(sub)
    ids = lm_prompts(203, pad_id)
    out, want = _step(sub, model, ids, _cache(sub, model), pad_id, expect=lambda: m64(ids))
    real = ids != pad_id
    close(out[real], want[real], msg("on a left-padded prompt and an empty KVCache(), decoder_step should give the model's own logits, model(ids), at every real token"), atol=ATOL,
          suspects=step_suspects(m64, [ids], lambda outs: outs[0][real]))


def _prefix_logits(m64, whole):
    """``upto(n)``: model(whole[:, :n]) in float64, for every prefix from one forward of ``whole``
    (the model is causal: a position's logits never see what follows it), run when first asked."""
    run = functools.cache(lambda: m64(whole))
    return lambda n: run()[:, :n]


@exercise("decoder_step", points=1.25)
def test_step_token_by_token(sub):
    model, m64, pad_id = _lm(sub)
    ids = lm_prompts(213, pad_id)
    B = ids.shape[0]
    cache = _cache(sub, model)
    _step(sub, model, ids, cache, pad_id)
    g = gen(215)
    chunks, full = [ids], ids
    ended = _int(216, 1, B)  # a left-padded row ends after the second step and is fed pads
    news = [real_tokens(g, (B, 1), pad_id) for _ in range(5)]
    for new in news[2:]:
        new[ended] = pad_id
    upto = _prefix_logits(m64, torch.cat([ids, *news], 1))
    try:
        for t, new in enumerate(news):
            chunks.append(new)
            full = torch.cat([full, new], 1)
            out, want = _later_step(sub, model, new, cache, pad_id, full.shape[1] - 1, lambda n=full.shape[1]: upto(n))
            live = torch.tensor([t < 2 or b != ended for b in range(B)])
            at_step = (msg("step {t} after the prompt", t=t + 1) if t < 2 else msg("step {t} after the prompt, row {ended} having ended (it is fed pad_id now), in the other rows", t=t + 1, ended=ended))
            close(out[live, 0], want[live, -1], msg("fed one token at a time after a left-padded prompt, decoder_step should give model(whole sequence)[:, -1]: wrong at {step}", step=at_step), atol=ATOL,
                  suspects=step_suspects(m64, list(chunks), lambda outs, live=live: outs[-1][live, 0]))
    except (Failed, SubmissionError) as exc:
        if getattr(exc, "mistake", None) is None:
            _diagnose_shared_cache(sub, model, ids, pad_id)
        raise
    T = full.shape[1]
    n = cache.method("__len__")
    check(n == T, msg("after a prompt of {columns} columns and 5 tokens, len(cache) is {n}: it should be T = {T}, the number of positions cached (the columns of the key mask, pads included)", columns=ids.shape[1], n=n, T=T),
          mistake="step_cache_len")


@exercise("decoder_step", points=1)
def test_step_chunk(sub):
    model, m64, pad_id = _lm(sub)
    ids = lm_prompts(223, pad_id)
    B = ids.shape[0]
    cache = _cache(sub, model)
    _step(sub, model, ids, cache, pad_id)
    g = gen(225)
    chunks, full = [ids], ids
    news = [real_tokens(g, (B, L), pad_id) for L in (_int(226, 2, 4), 1)]
    upto = _prefix_logits(m64, torch.cat([ids, *news], 1))
    for new in news:
        L = new.shape[1]
        chunks.append(new)
        full = torch.cat([full, new], 1)
        out, want = _later_step(sub, model, new, cache, pad_id, full.shape[1] - L, lambda n=full.shape[1]: upto(n))
        close(out, want[:, -L:], msg("fed {L} new token{s} at once after the prompt, decoder_step should give model(whole sequence)[:, -{L}:] (each new token attends to the cache and to the new tokens up to itself)", L=L, s='s' if L > 1 else ''), atol=ATOL,
              suspects=step_suspects(m64, list(chunks), lambda outs: outs[-1]))


@exercise("decoder_step", points=0.5)
def test_step_runs_on_the_model_device(sub):
    model, _, pad_id = _lm(sub)
    ids = lm_prompts(233, pad_id)
    cache = _cache(sub, model)
    try:
        sub.call("decoder_step", model, ids, cache, forbid=(ON_DEVICE,))
    except SubmissionError as exc:
        if exc.exc_type == "DeviceMismatch":
            diagnose("step_tensor_on_cpu", msg("on a GPU this decoder_step fails: {error}; make every tensor built inside it on the ids' device (torch.arange(..., device=ids.device))", error=exc.message))
        raise


# --- generate ---------------------------------------------------------------------------------

def greedy_from(m64, rows, T, per_row=False, steps=None):
    """Each row of real tokens continued greedily for T tokens in float64, without stopping;
    and the smallest gap between the two largest logits on the way (a near tie would let
    float32 noise decide; ``per_row``: each row's; ``steps``: each row's gap over its first
    ``steps[b]`` tokens only, the ones it needs). The rows run as one batch, right-filled with a real token: the
    model is causal, so what follows a row's last token never reaches its logits, and its
    positions count from its first token as they would alone."""
    lengths = [len(r) for r in rows]
    fill = 0 if m64.pad_id != 0 else 1
    ids = torch.full((len(rows), max(lengths) + T), fill, dtype=torch.long)
    for b, row in enumerate(rows):
        ids[b, :len(row)] = torch.tensor(row)
    conts: list[list[int]] = [[] for _ in rows]
    gaps = torch.full((len(rows),), math.inf, dtype=F64)
    needed = torch.tensor([T] * len(rows) if steps is None else list(steps))
    for step in range(T):
        ends = torch.tensor(lengths) + step  # where each row's next token goes
        z = m64(ids[:, :int(ends.max())])[torch.arange(len(rows)), ends - 1]  # [B, V]
        top = z.topk(2, dim=-1).values
        gaps = torch.where(needed > step, gaps.minimum(top[:, 0] - top[:, 1]), gaps)
        for b, token in enumerate(z.argmax(-1).tolist()):
            conts[b].append(token)
            ids[b, lengths[b] + step] = token
    return conts, (gaps.tolist() if per_row else float(gaps.min()))


def ends_of(conts, eos):
    """The index of each continuation's first eos (None where there is none)."""
    return [c.index(eos) if eos in c else None for c in conts]


def left_pad(rows, pad_id):
    width = max(len(r) for r in rows)
    return torch.tensor([[pad_id] * (width - len(r)) + list(r) for r in rows])


ENDING_BASES = 6  # prompts continued at once for an ending case: one of them almost always serves


def _ending_rows(g, m64, pad_id, T):
    """Three rows that follow one greedy path, a prompt and two longer ones (so that they meet eos
    at different steps, all before the last), their continuations (T tokens) and the tokens that
    can be eos; of ENDING_BASES prompts continued as one batch, the first whose path is clear of
    ties and never predicts the pad. None where none serves."""
    bases = _ending_bases(g, pad_id)
    paths, gaps = greedy_from(m64, bases, T + 3, per_row=True)
    return _ending_pick(g, bases, paths, gaps, pad_id, T)


def _ending_bases(g, pad_id):
    return [real_tokens(g, (1, int(torch.randint(4, 7, (1,), generator=g))), pad_id)[0].tolist()
            for _ in range(ENDING_BASES)]


def _ending_pick(g, bases, paths, gaps, pad_id, T):
    """_ending_rows's choice among the bases continued (T + 3 tokens each) and their gaps."""
    shifts = sorted(torch.randperm(4, generator=g)[:3].tolist())
    for base, path, gap in zip(bases, paths, gaps, strict=True):
        rows = [base + path[:s] for s in shifts]
        conts = [path[s:s + T] for s in shifts]
        firsts = {t: path.index(t) for t in range(V_LM) if t != pad_id and t in path and t not in rows[0]}
        eos = [t for t, j in firsts.items() if shifts[-1] < j < T - 1 + shifts[0]]
        if gap >= 1e-3 and not any(pad_id in c for c in conts) and eos:
            return rows, conts, eos
    return None


@per_run
def generate_case(n, T, ending):
    """A model, left-padded prompts [3, P] and an eos id, greedy decoding clear of ties and never
    predicting the pad. ``ending``: the rows are one prompt and two longer ones that follow its
    greedy path (so they meet eos at different steps, all before the last); else independent
    prompts, none meeting eos within T tokens. Returns the float32 and float64 models, their
    state, pad_id, the prompts, each row's greedy continuation (T tokens) and eos."""
    if n == GREEDY_CASE and not ending:
        return greedy_and_ending(T, _int(*ENDING_T))[0]
    for i in range(100):
        g = _attempt(n, i)
        pad_id = int(torch.randint(1, V_LM, (1,), generator=g))
        state, m64 = lm_model(g, pad_id)
        if ending:
            found = _ending_case_on(g, m64, pad_id, T)
            if found is not None:
                return state, m64, pad_id, *found
            continue
        tokens = [t for t in range(V_LM) if t != pad_id]
        rows = [real_tokens(g, (1, int(torch.randint(3, 8, (1,), generator=g))), pad_id)[0].tolist()
                for _ in range(3)]
        conts, gap = greedy_from(m64, rows, T)
        eos = [t for t in tokens if not any(t in c for c in conts)]
        if gap < 1e-3 or any(pad_id in c for c in conts) or not eos:
            continue
        eos_id = eos[int(torch.randint(0, len(eos), (1,), generator=g))]
        return state, m64, pad_id, left_pad(rows, pad_id), conts, eos_id
    raise RuntimeError(msg("no clear generation case found"))


def _ending_case_on(g, m64, pad_id, T):
    """The prompts (left-padded), continuations and eos of an ending case on the model ``m64``,
    drawn from ``g`` (see :func:`_ending_rows`; its path is clear of ties and never predicts the
    pad); None where none serves."""
    found = _ending_rows(g, m64, pad_id, T)
    if found is None:
        return None
    rows, conts, eos = found
    return left_pad(rows, pad_id), conts, eos[int(torch.randint(0, len(eos), (1,), generator=g))]


#: test_generate_stops_and_pads's max_new_tokens (drawn from 6 to 8: each token costs the check a float64 forward
#: and the worker a decoder_step) and case
ENDING_T, ENDING_CASE = (308, 6, 9), 309
#: further draws of prompts for an ending case on the greedy case's model before it draws a model of its own
ENDING_ON_GREEDY = 3


@per_run
def greedy_and_ending(T, T_end):
    """The greedy case (generate_case(GREEDY_CASE, T, ending=False)) and, on its model, the
    ending case's prompts (drawn from ENDING_CASE's generators) continued in the same batch: T_end + 3
    float64 forwards for both (T + T_end + 3 apart). The ending case is None where its prompts
    do not serve (see :func:`_ending_rows`)."""
    for i in range(100):
        g = _attempt(GREEDY_CASE, i)
        pad_id = int(torch.randint(1, V_LM, (1,), generator=g))
        state, m64 = lm_model(g, pad_id)
        tokens = [t for t in range(V_LM) if t != pad_id]
        rows = [real_tokens(g, (1, int(torch.randint(3, 8, (1,), generator=g))), pad_id)[0].tolist()
                for _ in range(3)]
        g_end = _attempt(ENDING_CASE, 50 + i)
        bases = _ending_bases(g_end, pad_id)
        paths, gaps = greedy_from(m64, rows + bases, max(T, T_end + 3), per_row=True,
                                  steps=[T] * len(rows) + [T_end + 3] * len(bases))
        conts = [p[:T] for p in paths[:len(rows)]]
        eos = [t for t in tokens if not any(t in c for c in conts)]
        if min(gaps[:len(rows)]) < 1e-3 or any(pad_id in c for c in conts) or not eos:
            continue
        eos_id = eos[int(torch.randint(0, len(eos), (1,), generator=g))]
        ending = _ending_pick(g_end, bases, [p[:T_end + 3] for p in paths[len(rows):]], gaps[len(rows):],
                              pad_id, T_end)
        if ending is not None:
            end_rows, end_conts, end_eos = ending
            ending = (state, m64, pad_id, left_pad(end_rows, pad_id), end_conts,
                      end_eos[int(torch.randint(0, len(end_eos), (1,), generator=g_end))])
        return (state, m64, pad_id, left_pad(rows, pad_id), conts, eos_id), ending
    raise RuntimeError(msg("no clear generation case found"))


@per_run
def ending_case(T):
    """generate_case(ENDING_CASE, T, ending=True), drawn on the greedy tests' model (test_generate_greedy's
    case) where its prompts, or one of ENDING_ON_GREEDY further draws of them, serve: a model
    fewer to draw here and to build in the worker; else on a model of its own."""
    greedy, ending = greedy_and_ending(_int(*GREEDY_T), T)
    if ending is not None:
        return ending
    state, m64, pad_id, *_ = greedy
    for i in range(ENDING_ON_GREEDY):
        found = _ending_case_on(_attempt(ENDING_CASE, 150 + i), m64, pad_id, T)
        if found is not None:
            return state, m64, pad_id, *found
    return generate_case(ENDING_CASE, T, ending=True)


def gen_expected(prompt, conts, eos, pad_id, T, mistake=None):
    """What generate returns for these greedy continuations (or with ``mistake``)."""
    ends = ends_of(conts, eos)
    if mistake == "gen_never_stops" or None in ends:
        steps = T
    elif mistake == "gen_stops_at_first_eos":
        steps = min(ends) + 1
    else:
        steps = max(ends) + 1
    rows = []
    for cont, end in zip(conts, ends, strict=True):
        row = list(cont[:steps])
        if end is not None and mistake != "gen_no_pad_after_eos":
            row[end + 1:] = [pad_id] * (steps - end - 1)
        rows.append(row)
    return torch.cat([prompt, torch.tensor(rows)], 1)


GEN_HINTS = {
    "gen_no_pad_after_eos": msg("after a row's eos the following tokens should be model.pad_id while the other rows go on: token.masked_fill(done, model.pad_id)"),
    "gen_never_stops": msg("generation goes on after every row has produced eos: stop as soon as all of them have ended"),
    "gen_stops_at_first_eos": msg("generation stops when the first row ends: go on until every row has ended (done.all())"),
}


def _generate(sub, model, prompt, *args, **kwargs):
    return _generated(sub.call("generate", model, prompt, *args, **kwargs), prompt)


def _generated(out, prompt):
    """generate's output ``out``, once it is checked to be a tensor [B, L_prompt + T]."""
    check(isinstance(out, torch.Tensor) and out.dim() == 2 and out.shape[0] == prompt.shape[0],
          msg("generate should return a tensor [B, L_prompt + T] of token ids, one row per prompt ({prompts}), got {out_shape}", prompts=prompt.shape[0], out_shape=list(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__))
    return out


#: test_generate_greedy's max_new_tokens (drawn from 5 to 7) and case: every test of generate that
#: needs a case of prompts none of whose continuations meets eos tries it first (a case costs the
#: check T float64 forwards per attempt; it serves the sampling test 60 runs in 60, the dropout
#: test 59 in 60: each then draws its own, as before)
GREEDY_T, GREEDY_CASE = (300, 5, 8), 301
#: the tokens generated for a prompt row alone (test_generate_greedy): the prefill's and one from the cache
ALONE_T = 2


def _shared_case(i, n):
    """The case a test tries at its attempt ``i``: the greedy tests' first, then its own ``n`` + 100 i."""
    return GREEDY_CASE if i == 0 else n + 100 * i


def _counted_generate(sub, model, prompt, T, eos, **kwargs):
    """generate's output on the decoder_lm fixture ``model``, and the positions it ran through the
    model (its ``embedded`` count before and after, sent with the call)."""
    with sub.batch(lazy=True) as b:
        before = b.get(model, "embedded")
        out = b.call("generate", model, prompt, T, eos, **kwargs)
        after = b.get(model, "embedded")
    return _generated(out.value, prompt), after.value - before.value


def _cached_greedy(sub, model, prompt, T, eos):
    """_counted_generate with use_cache=True on the greedy case, run once per grading run: the greedy
    test judges its tokens, test_generate_uses_the_cache the positions it ran (one generation fewer)."""
    memo = run_memo()
    key = ("cached greedy", id(sub), id(model), id(prompt), T, eos)
    if key not in memo:
        memo[key] = _counted_generate(sub, model, prompt, T, eos, use_cache=True)
    return memo[key]


def _uncached_greedy(sub, model, prompt, T, eos):
    """generate(..., use_cache=False) on the greedy case, run once per grading run on the
    decoder_lm fixture ``model``, put in eval mode first: its output, the positions it ran
    through the model (test_generate_uses_the_cache) and the model's mode after it
    (test_generate_without_cache: one generation fewer)."""
    memo = run_memo()
    key = ("uncached greedy", id(sub), id(model), id(prompt), T, eos)
    if key not in memo:
        with sub.batch(lazy=True) as b:
            b.method(model, "eval")  # an earlier generate may have left it in training mode
            before = b.get(model, "embedded")
            out = b.call("generate", model, prompt, T, eos, use_cache=False)
            after = b.get(model, "embedded")
            training = b.get(model, "training")
        memo[key] = _generated(out.value, prompt), after.value - before.value, training.value
    return memo[key]


def _greedy_case(sub, n, T):
    state, m64, pad_id, prompt, conts, eos = generate_case(n, T, ending=False)
    return _lm_fixture(sub, state, pad_id), m64, pad_id, prompt, conts, eos


@exercise("generate", points=1)
def test_generate_greedy(sub):
    T = _int(*GREEDY_T)
    model, _, pad_id, prompt, conts, eos = _greedy_case(sub, GREEDY_CASE, T)
    want = torch.cat([prompt, torch.tensor(conts)], 1)
    out, _ = _cached_greedy(sub, model, prompt, T, eos)
    P = prompt.shape[1]
    if out.shape[1] == T and matches(out, want[:, P:]):
        diagnose("gen_prompt_dropped", msg("generate returned the {T} new tokens only: return the prompts followed by them, [B, P + T]", T=T))
    if out.shape[1] in (P + T - 1, P + T + 1) and matches(out[:, :P + T - 1], want[:, :P + T - 1]):
        diagnose("gen_length_off_by_one", msg("with max_new_tokens={T} and no eos, generate made {new_tokens} new tokens: it should make exactly max_new_tokens of them, after the prompt", T=T, new_tokens=out.shape[1] - P))
    close(out, want, msg("generate(model, prompt, max_new_tokens={T}, eos_id) on left-padded prompts whose continuations never meet eos should return the prompts followed by {T} greedy tokens (the argmax of the last position's logits, fed back)", T=T))
    pads = (prompt == pad_id).sum(-1)
    b = int(pads.argmax())  # the row with the most left pads: alone, its positions start elsewhere
    row = prompt[b:b + 1, int(pads[b]):]
    # its first ALONE_T tokens: the prompt's step and a cached one (a step costs a decoder_step)
    close(_generate(sub, model, row, ALONE_T, eos), torch.cat([row, torch.tensor([conts[b][:ALONE_T]])], 1),
          msg("prompt row {b} alone (without its left pads) should give the same tokens as in the padded batch", b=b))


def dropped_out(m64, prompt, T, eos):
    """What greedy generation without the cache gives with a DecoderLM of dropout 1.0 left in training
    mode: every block's output is dropped, so each position's logits are lm_head(norm(embed(its token)))."""
    ids, done = prompt, torch.zeros(prompt.shape[0], dtype=torch.bool)
    for _ in range(T):
        token = m64.lm_head(m64.norm(m64.embed(ids[:, -1]))).argmax(-1).masked_fill(done, m64.pad_id)
        ids = torch.cat([ids, token[:, None]], 1)
        done = done | (token == eos)
        if done.all():
            break
    return ids


def _training(model):
    return model.inspect(values=False).get("training")


@exercise("generate", points=0.25)
def test_generate_without_cache(sub):
    """Also the mode: use_cache=False on the greedy case's model in eval mode (the run
    test_generate_uses_the_cache counts), then one token with lesson 10's DecoderLM built with
    dropout=1.0 and left in training mode, which drops every block's output (so generating in
    training mode gives another first token, whatever the draw)."""
    T = _int(*GREEDY_T)
    model, _, _, prompt, conts, eos = _greedy_case(sub, GREEDY_CASE, T)
    out, _, training = _uncached_greedy(sub, model, prompt, T, eos)
    close(out, torch.cat([prompt, torch.tensor(conts)], 1), msg("generate(..., use_cache=False) should return the same greedy tokens as with the cache (here {T} tokens after each prompt), computed by running model(ids) on the whole sequence at every step", T=T))
    check(training is False, msg("generate left a model that was in eval mode in training mode: save was_training = model.training first and call model.train(was_training) at the end"),
          mistake="gen_mode_not_restored")
    for i in range(20):  # a case whose first token differs in training mode: the greedy tests' first
        state, m64, pad_id, prompt, conts, eos = generate_case(_shared_case(i, 305), T, ending=False)
        want = torch.cat([prompt, torch.tensor(conts)[:, :1]], 1)
        if not matches(dropped_out(m64, prompt, 1, eos), want):
            break
    else:
        raise RuntimeError(msg("no case where dropout shows found"))
    with sub.batch(lazy=True) as b:
        made = b.new("DecoderLM", V_LM, d_model=D_LM, n_head=H_LM, n_layer=N_LAYER, d_ff=FF_LM, max_len=MAX_LEN,
                     dropout=1.0, pad_id=pad_id)
        b.method(made.handle, "load_state_dict", state)
        b.method(made.handle, "train")
        first = b.call("generate", made.handle, prompt, 1, eos, use_cache=False)
        training = b.get(made.handle, "training")
    out = _generated(first.value, prompt)
    check(matches(out, want), msg("a model left in training mode, built with dropout=1.0, generates another first token than the same model in eval mode: generation runs with dropout off, so call model.eval() before the loop (and restore the mode after it)"), mistake="gen_no_eval")
    check(training.value is True, msg("generate left a model that was in training mode in eval mode: save was_training = model.training first and call model.train(was_training) at the end"),
          mistake="gen_mode_not_restored")


@exercise("generate", points=0.75)
def test_generate_stops_and_pads(sub):
    T = _int(*ENDING_T)
    state, _, pad_id, prompt, conts, eos = ending_case(T)
    model = _lm_fixture(sub, state, pad_id)
    out = _generate(sub, model, prompt, T, eos)
    ends = ends_of(conts, eos)
    want = gen_expected(prompt, conts, eos, pad_id, T)
    close(out, want, msg("rows that produce eos (id {eos}) after {lengths} new tokens should be followed by pad_id ({pad_id}) while the others go on, and generation should stop when the last row has ended", eos=eos, lengths=', '.join(str(e + 1) for e in ends), pad_id=pad_id), suspects=[suspect(m, gen_expected(prompt, conts, eos, pad_id, T, m), hint)
                                               for m, hint in GEN_HINTS.items()])


@exercise("generate", points=0.75)
def test_generate_uses_the_cache(sub):
    T = _int(*GREEDY_T)  # test_generate_greedy's case (no row meets eos), drawn once
    model, _, pad_id, prompt, conts, eos = _greedy_case(sub, GREEDY_CASE, T)
    P = prompt.shape[1]
    _, cached = _cached_greedy(sub, model, prompt, T, eos)
    _, uncached, _ = _uncached_greedy(sub, model, prompt, T, eos)
    if cached >= T * P:
        diagnose("gen_cache_unused", msg("with use_cache=True generate ran {cached} positions through the model for a prompt of {P} and {T} new tokens: it runs the whole sequence at every step; feed the prompt once to decoder_step with a KVCache(), then only each new token", cached=cached, P=P, T=T))
    check(cached <= P + T, msg("with use_cache=True generate ran {cached} positions through the model, a prompt of {P} and {T} new tokens: the prompt once and then each new token once is {positions}", cached=cached, P=P, T=T, positions=P + T - 1))
    check(uncached > P + T, msg("with use_cache=False generate ran only {uncached} positions through the model: without a cache it runs model(ids) on the whole sequence at every step", uncached=uncached), mistake="gen_cache_when_off")


def sampled_generate(m32, prompt, T, temperature, top_k, top_p, seed, nevers=(None,)):
    """generate with sampling as the course does it: one draw per step for the whole batch,
    torch.multinomial on softmax(filter_logits(last logits)) with a generator seeded ``seed``;
    one output for each of ``nevers``: a token whose logit is set to -inf first (the pad, as
    the course's version does: advice the text gives, so both ways are right), or None. The
    outputs' rows run through the model as one batch (each row is its own sentence), each
    output drawn with its own generator."""
    B = prompt.shape[0]
    generators = [torch.Generator().manual_seed(seed) for _ in nevers]
    ids = prompt.repeat(len(nevers), 1)
    for _ in range(T):
        logits = m32(ids)[:, -1]
        drawn = []
        for i, (never, g) in enumerate(zip(nevers, generators, strict=True)):
            z = logits[i * B:(i + 1) * B]
            if never is not None:
                z[:, never] = NEG_INF
            drawn.append(torch.multinomial(ref_filter(z, temperature, top_k, top_p).softmax(-1), 1, generator=g))
        ids = torch.cat([ids, torch.cat(drawn)], 1)
    return list(ids.split(B))


def _within_top_k(logits, k, never):
    """[B, V]: the tokens among the k largest of ``logits``, or of ``logits`` without the token ``never``."""
    plain = logits >= logits.topk(k, dim=-1).values[:, -1:] - 1e-4
    without = logits.clone()
    without[:, never] = NEG_INF
    return plain | (without >= without.topk(k, dim=-1).values[:, -1:] - 1e-4)


SAMPLING = {"temperature": 2.0, "top_k": 4, "top_p": 0.95}


def chances(m64, prompt, conts):
    """Along the greedy continuations: the probability that sampling at temperature 1.5 without
    filters retraces them (how often a sampler that drops top_k=1 would still look greedy), and
    the product of the largest probabilities under SAMPLING (about how often two samplers that
    ignore their generator would agree)."""
    full = torch.cat([prompt, torch.tensor(conts)], 1)
    P = prompt.shape[1]
    logits = m64(full)[:, P - 1:-1]
    greedy = (logits / 1.5).softmax(-1).gather(-1, full[:, P:, None]).prod()
    peaks = ref_filter(logits.reshape(-1, V_LM), **SAMPLING).softmax(-1).max(-1).values.prod()
    return float(greedy), float(peaks)


@exercise("generate", points=0.25)
def test_generate_passes_sampling_on(sub):
    T = _int(*GREEDY_T)
    for i in range(20):  # inputs on which the mistakes show all but surely: the greedy tests' first
        state, m64, pad_id, prompt, conts, eos = generate_case(_shared_case(i, 316), T, ending=False)
        greedy_chance, agree_chance = chances(m64, prompt, conts)
        if greedy_chance < 1e-6 and agree_chance < 1e-4:
            break
    model = _lm_fixture(sub, state, pad_id)
    greedy = torch.cat([prompt, torch.tensor(conts)], 1)
    seed = int(torch.randint(0, 2**62, (1,), generator=gen(317)))
    with sub.batch(lazy=True) as b:  # the samples expected below are drawn while the worker generates
        first = b.call("generate", model, prompt, T, eos, temperature=1.5, top_k=1,
                       generator=sub.fixture("generator", seed))
    settings = SAMPLING
    with in_float32(m64) as m32:
        wants = sampled_generate(m32, prompt, T, seed=seed, nevers=(None, pad_id), **settings)
    out = _generated(first.value, prompt)
    if not matches(out, greedy):
        plain = _generate(sub, model, prompt, T, eos)
        if matches(plain, greedy):
            diagnose("gen_sampling_args_dropped", msg("generate(..., temperature=1.5, top_k=1) should be greedy (top-k keeps one token), and it is not: pass temperature, top_k, top_p and generator on to sample(logits, temperature, top_k, top_p, generator)"))
        check(False, msg("generate(..., temperature=1.5, top_k=1) should give the greedy tokens (top-k keeps one)"))
    drawn = torch.cat([w[:, prompt.shape[1]:] for w in wants], 1)
    eos = next((t for t in range(V_LM) if t != pad_id and t not in drawn), eos)
    out = _generate(sub, model, prompt, T, eos, generator=sub.fixture("generator", seed), **settings)
    if any(matches(out, want) for want in wants):
        return
    again = _generate(sub, model, prompt, T, eos, generator=sub.fixture("generator", seed), **settings)
    check(matches(out, again), msg("two generators seeded alike gave different samples: pass generate's generator on to sample"), mistake="gen_generator_dropped")
    P = prompt.shape[1]
    for t in range(P, out.shape[1]):  # any draws that follow the generator, within top-k, are accepted
        within = _within_top_k(m64(out[:, :t])[:, -1], settings["top_k"], pad_id)
        allowed = within | (out[:, :t] == eos).any(1, keepdim=True) | (out[:, t:t + 1] == pad_id)
        picked = allowed.gather(1, out[:, t:t + 1].clamp(0, V_LM - 1))
        check(bool(picked.all()), msg("with top_k=4 generate sampled a token outside the 4 most likely: pass temperature, top_k, top_p and generator on to sample"), mistake="gen_sampling_args_dropped")


# --- beam_search ------------------------------------------------------------------------------

PAD, BOS = 0, 1
SRC_V, TGT_V, D_T, H_T, FF_T = 12, 12, 16, 2, 32


def transformer_model(g):
    """Lesson 08's Transformer (one layer each side) with weights drawn from ``g``; pad and bos
    are never predicted (their output bias is -30). Its state (float32) and the model in float64."""
    m = _lesson("08").Transformer(SRC_V, TGT_V, d_model=D_T, n_head=H_T, num_encoder_layers=1,
                                  num_decoder_layers=1, d_ff=FF_T, dropout=0.0, max_len=MAX_LEN, pad_id=PAD)
    with torch.no_grad():
        for name, p in sorted(m.named_parameters()):
            if p.dim() == 2:
                p.copy_(torch.randn(p.shape, generator=g) * (1.0 if "embed" in name else 2.0 / math.sqrt(p.shape[1])))
            else:  # the norms' weights near 1, every bias near 0
                p.copy_(0.1 * torch.randn(p.shape, generator=g) + float("norm" in name and name.endswith("weight")))
        m.generator.bias[PAD] = m.generator.bias[BOS] = -30.0
    m.eval().requires_grad_(False)
    return {k: v.clone() for k, v in m.state_dict().items()}, m.double()


def free_paths(m64, src, steps):
    """Each source's greedy continuation after bos for ``steps`` tokens, in float64 and without
    stopping, and the smallest gap between the two largest logits on the way."""
    mask = (src != PAD)[:, None, None, :]
    memory = m64.encode(src, mask)
    ys = torch.full((src.shape[0], 1), BOS)
    gap = math.inf
    for _ in range(steps):
        z = m64.generator(m64.decode(ys, memory, memory_mask=mask)[:, -1])
        top = z.topk(2, dim=-1).values
        gap = min(gap, float((top[:, 0] - top[:, 1]).min()))
        ys = torch.cat([ys, z.argmax(-1, keepdim=True)], 1)
    return ys[:, 1:].tolist(), gap


def greedy_of(paths, eos, max_len):
    """greedy_decode's output for these continuations: bos, each row up to its eos then pads,
    until every row has ended or max_len tokens."""
    ends = ends_of([p[:max_len - 1] for p in paths], eos)
    steps = max_len - 1 if None in ends else max(ends) + 1
    rows = [[BOS] + [t if e is None or j <= e else PAD for j, t in enumerate(p[:steps])]
            for p, e in zip(paths, ends, strict=True)]
    return torch.tensor(rows)


@per_run
def transformer_case(n, max_len):
    """A Transformer, right-padded sources [3, 6] whose greedy decoding is clear of ties, and an
    eos that at least one row meets before max_len where there is one."""
    for i in range(100):
        g = _attempt(n, i)
        state, m64 = transformer_model(g)
        src = torch.randint(1, SRC_V, (3, 6), generator=g)
        src[1, -1:] = PAD
        src[2, -2:] = PAD
        paths, gap = free_paths(m64, src, max_len - 1)
        if gap < 1e-3:
            continue
        met = [t for p in paths for t in p[1:]]
        eos = met[int(torch.randint(0, len(met), (1,), generator=g))]
        return state, src, eos, paths
    raise RuntimeError(msg("no clear Transformer case found"))


# lesson 08's scripted copy model (runtime.fixtures.copy_model): it predicts src[i] at target
# position i while the prefix is right, else junk, and junk wherever the source's padding is
# visible through memory_mask
COPY_V, COPY_EOS, COPY_JUNK = 13, 2, 12


def copy_sources(n, B=3, L=5):
    """Sources [B, L] of words 3..11, each row ending with eos at a different place, then pads."""
    g = gen(n)
    src = torch.randint(3, COPY_JUNK, (B, L), generator=g)
    for b, end in enumerate(sorted((1 + torch.randperm(L - 2, generator=g)[:B]).tolist())):
        src[b, end] = COPY_EOS
        src[b, end + 1:] = PAD
    return src[torch.randperm(B, generator=g)]


def copy_paths(src, masked=True):
    """The copy model's greedy continuations after bos (junk past the source, or everywhere
    when its padding is visible)."""
    rows = []
    for row in src.tolist():
        seen = not masked and PAD in row
        rows.append([COPY_JUNK if seen or i >= len(row) else row[i] for i in range(2 * len(row))])
    return rows


def _hypotheses(out, B, max_len, eos, tails=True):
    """The hypothesis of each row of beam_search's output (through its eos, or the whole row
    without trailing pads), after checking the output's form (``tails``: and that only pads
    follow an eos; not on a random Transformer, where a search that extends its finished
    hypotheses returns one that goes on after its eos or not, as the draw decides)."""
    check(isinstance(out, torch.Tensor) and out.dim() == 2 and out.shape[0] == B,
          msg("beam_search should return a tensor [B, <= max_len] of token ids, one row per source ({B}), got {out_shape}", B=B, out_shape=list(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__))
    if out.shape[1] == max_len + 1:
        diagnose("beam_max_len_off_by_one", msg("beam_search returned {length} tokens with max_len={max_len}: max_len counts every token, bos included", length=max_len + 1, max_len=max_len))
    check(out.shape[1] <= max_len, msg("beam_search returned {length} tokens with max_len={max_len}", length=out.shape[1], max_len=max_len))
    if not bool((out == BOS).any()):  # bos is never predicted here: no bos at all is bos left out
        diagnose("beam_no_bos", msg("the rows beam_search returned hold no bos_id: return each hypothesis whole, bos_id first (as greedy_decode does)"))
    check(bool((out[:, 0] == BOS).all()), msg("every hypothesis should start with bos_id"))
    rows = []
    for row in out.tolist():
        if eos in row[1:]:
            end = row.index(eos, 1)
            tail = row[end + 1:] if tails else []
            if any(t not in (PAD, eos) for t in tail):
                diagnose("beam_finished_expanded", msg("a hypothesis goes on after its eos: a hypothesis that produced eos is finished, set aside and never extended (the rest of its row is pad)"))
            check(all(t == PAD for t in tail), msg("after a hypothesis's eos its row should hold pad_id only"))
            rows.append(tuple(row[:end + 1]))
        else:
            while row and row[-1] == PAD:
                row = row[:-1]
            rows.append(tuple(row))
    return rows


def as_rows(hypotheses, width):
    return torch.tensor([list(h) + [PAD] * (width - len(h)) for h in hypotheses])


# max_len of the searches on the Transformer: test_beam_one_is_greedy's, drawn from 4 to 6, and
# test_beam_output_form's (a search costs a decoder call per source and step)
T_LENS, FORM_LEN = (4, 7), 3


@exercise("beam_search", points=1)
def test_beam_one_is_greedy(sub):
    src = copy_sources(400)
    model = sub.fixture("copy_model", vocab=COPY_V, pad_id=PAD, bos_id=BOS, eos_id=COPY_EOS, junk_id=COPY_JUNK)
    lengths = (src.shape[1] + 2, 4)
    with sub.batch(lazy=True) as b:  # the Transformer's case below is drawn while the worker searches
        searched = [b.call("beam_search", model, src, 1, max_len, BOS, COPY_EOS) for max_len in lengths]
    t_len = _int(401, *T_LENS)
    state, t_src, eos, paths = transformer_case(402, t_len)
    for max_len, out in zip(lengths, searched, strict=True):
        out = out.value
        _hypotheses(out, src.shape[0], max_len, COPY_EOS)
        want = greedy_of(copy_paths(src), COPY_EOS, max_len)
        while out.shape[1] > want.shape[1] and bool((out[:, -1] == PAD).all()):
            out = out[:, :-1]  # [B, <= max_len]: pad columns after every row has ended are allowed
        close(out, want, msg("with beam_size=1 and max_len={max_len}, on a model that copies its source (sources of different lengths, right-padded), beam_search should give greedy_decode's tokens", max_len=max_len),
              suspects=[suspect("beam_no_memory_mask", greedy_of(copy_paths(src, masked=False), COPY_EOS, max_len),
                                msg("the padded sources decode differently: pass the source padding mask to the decoder, model.decode(ys, memory, memory_mask=src_mask)"))])
    max_len, src = t_len, t_src
    model = _model_fixture(sub, "transformer", state, SRC_V, TGT_V, D_T, H_T, 1, FF_T, MAX_LEN, PAD)
    out = sub.call("beam_search", model, src, 1, max_len, BOS, eos)
    got = as_rows(_hypotheses(out, src.shape[0], max_len, eos, tails=False), max_len)  # tails: the copy model's
    want = as_rows([tuple(t for t in row if t != PAD) for row in greedy_of(paths, eos, max_len).tolist()], max_len)
    close(got, want, msg("with beam_size=1 and max_len={max_len}, on a lesson 08 Transformer with random weights, beam_search should give greedy_decode's tokens", max_len=max_len))


@exercise("beam_search", points=0.5)
def test_beam_output_form(sub):
    """Also the mode: the copy model is built in training mode and counts the calls made in it."""
    src = copy_sources(403)
    model = sub.fixture("copy_model", vocab=COPY_V, pad_id=PAD, bos_id=BOS, eos_id=COPY_EOS, junk_id=COPY_JUNK)
    for max_len, training in ((src.shape[1] + 2, True), (4, False)):
        if not training:
            model.eval()
        with sub.batch(lazy=True) as b:  # the search, its calls in training mode and the mode after it
            searched = b.call("beam_search", model, src, 4, max_len, BOS, COPY_EOS)
            in_training = b.get(model, "calls_in_training")
            after = b.inspect(model, values=False)
        got = as_rows(_hypotheses(searched.value, src.shape[0], max_len, COPY_EOS), max_len)
        close(got, as_rows([tuple(t for t in r if t != PAD) for r in
                            greedy_of(copy_paths(src), COPY_EOS, max_len).tolist()], max_len),
              msg("with beam_size=4 and max_len={max_len}, on a model that copies its source and is sure of every token, beam_search should return each source copied after bos, through its eos or up to max_len", max_len=max_len))
        check(in_training.value == 0, msg("beam_search runs a model left in training mode without switching it to eval mode, so dropout is on while it searches: call model.eval() first (and restore the mode at the end)"), mistake="beam_no_eval")
        check(after.value.get("training") is training, msg("beam_search left a model that was in training mode in eval mode: save was_training = model.training first and call model.train(was_training) at the end")
              if training else msg("beam_search left a model that was in eval mode in training mode: save was_training = model.training first and call model.train(was_training) at the end"),
              mistake="beam_mode_not_restored")
    _beam_fake(sub, 407, [(ALIVE_AT_MAX, {})], 2, 3, None,
               msg("with max_len=3, bos a a (probability 0.81), still in the beam at max_len, counts as finished and beats bos eos (0.09): beam search should return it"))
    (got,), _, (ids,), _ = _beam_tables(sub, 406, [(STOPPED_EARLY, {})], 2, 7, None, raw=True)
    if got == (BOS, ids["a"], ids["x"]):
        diagnose("beam_unfinished_returned", msg("with beam_size=2 beam search returned bos a x, a hypothesis still in the beam (no eos, 3 of max_len=7 tokens), because it scored best when two others had finished: a hypothesis is finished when it ends with eos or reaches max_len, and only finished ones are returned (stopping early, return the best finished one)"))
    check(EOS_T in got or len(got) == 7, msg("with beam_size=2 and max_len=7, beam_search returned a hypothesis that neither ends with eos nor has max_len tokens: a hypothesis ends with eos or reaches max_len"))
    t_len = _int(401, *T_LENS)  # test_beam_one_is_greedy's Transformer, drawn once
    state, src, eos, _ = transformer_case(402, t_len)
    # its two padded sources (of different lengths) and a short max_len: the form's rules are
    # the same on fewer, shorter searches (a search costs a decoder call per source and step)
    src, max_len = src[1:], min(t_len, FORM_LEN)
    model = _model_fixture(sub, "transformer", state, SRC_V, TGT_V, D_T, H_T, 1, FF_T, MAX_LEN, PAD)
    out = sub.call("beam_search", model, src, 4, max_len, BOS, eos)
    for b, h in enumerate(_hypotheses(out, src.shape[0], max_len, eos, tails=False)):
        check(h[-1] == eos or len(h) == max_len, msg("row {b} of beam_search(beam_size=4, max_len={max_len}) neither ends with eos nor has max_len tokens: a hypothesis ends with eos or reaches max_len", b=b, max_len=max_len))
        check(PAD not in h, msg("row {b} of beam_search(beam_size=4) holds pad_id inside its hypothesis", b=b))
    _beam_pads(sub, 408)


def _beam_pads(sub, n, B=3, L=5):
    """beam_search on the copy model with a word's id as its pad_id: sources without padding (so
    that the source mask cannot matter), of words other than that id, each with eos at its own
    place; the rows that end before the longest one are padded with model.pad_id."""
    g = gen(n)
    pad = int(torch.randint(3, COPY_JUNK, (1,), generator=g))
    words = torch.tensor([t for t in range(3, COPY_JUNK) if t != pad])
    src = words[torch.randint(0, len(words), (B, L), generator=g)]
    ends = (1 + torch.randperm(L - 2, generator=g)[:B]).tolist()
    want = torch.full((B, max(ends) + 2), pad)
    for b, end in enumerate(ends):
        src[b, end] = COPY_EOS
        want[b, :end + 2] = torch.cat([torch.tensor([BOS]), src[b, :end + 1]])
    model = sub.fixture("copy_model", vocab=COPY_V, pad_id=pad, bos_id=BOS, eos_id=COPY_EOS, junk_id=COPY_JUNK)
    model.eval()
    out = sub.call("beam_search", model, src, 2, max(ends) + 3, BOS, COPY_EOS)
    check(isinstance(out, torch.Tensor) and out.dim() == 2 and out.shape[0] == B, msg("beam_search should return a tensor [B, <= max_len] of token ids, one row per source ({B})", B=B))
    while out.shape[1] > want.shape[1] and bool((out[:, -1] == pad).all()):
        out = out[:, :-1]  # pad columns after every row has ended are allowed
    padded = want == pad
    if out.shape == want.shape and torch.equal(out[~padded], want[~padded]) and bool((out[padded] == 0).all()):
        diagnose("beam_pad_id_hardcoded", msg("the rows that end before the longest one are padded with 0, and this model's pad_id is {pad}: pad them with model.pad_id", pad=pad))
    close(out, want, msg("with a model whose pad_id is {pad} (a model that copies its source and is sure of every token), beam_search(beam_size=2) should return each source copied after bos through its eos, the rows that end before the longest one padded with model.pad_id", pad=pad))


# The table model's vocabulary: pad, bos, eos and seven words whose ids each run draws afresh.
EOS_T, V_T, WORDS = 2, 10, "abcdxyz"


def word_probs(spec, ids):
    """Next-token probabilities: ``spec`` gives some words' (and "EOS"'s; 0.001 otherwise), pad
    and bos get 1e-4, the other words share the rest."""
    p = [0.0] * V_T
    p[PAD] = p[BOS] = 1e-4
    p[EOS_T] = spec.get("EOS", 0.001)
    for word, q in spec.items():
        if word != "EOS":
            p[ids[word]] = q
    rest = [ids[w] for w in WORDS if w not in spec]
    share = (1.0 - sum(p)) / len(rest)
    for t in rest:
        p[t] = share
    return p


def table_of(spec, ids, offsets=None):
    """The table_model entry of a scenario: logits = log p (+ an offset per prefix, which a
    log-softmax removes), after eos a cheap word z (0.97)."""
    offsets = offsets or {}
    logits = {",".join(map(str, [BOS] + [ids[w] for w in prefix])):
              [math.log(q) + offsets.get(prefix, 0.0) for q in word_probs(probs, ids)]
              for prefix, probs in spec.items()}
    return {"logits": logits, "default": [math.log(q) for q in word_probs({}, ids)],
            "after_eos": [math.log(q) for q in word_probs({"z": 0.97}, ids)], "eos": EOS_T}


def _table_model(sub, tables, vocab):
    """The table_model fixture, each list of logits sent as one float32 tensor."""
    def as_tensor(logits):
        return torch.tensor(logits, dtype=torch.float32)
    return sub.fixture("table_model", [{"logits": {key: as_tensor(v) for key, v in t["logits"].items()},
                                        "default": as_tensor(t["default"]), "after_eos": as_tensor(t["after_eos"]),
                                        "eos": t["eos"]} for t in tables], vocab, PAD)


def logits_fn(table):
    def next_logits(prefix):
        if EOS_T in prefix[1:]:
            return table["after_eos"]
        return table["logits"].get(",".join(map(str, prefix)), table["default"])
    return next_logits


def _log_softmax(z):
    top = max(z)
    lse = top + math.log(sum(math.exp(v - top) for v in z))
    return [v - lse for v in z]


def penalty(n, alpha):
    return ((5 + n) / 6) ** alpha


def best_hypothesis(next_logits, max_len, alpha):
    """The hypothesis with the best log p / ((5 + |Y|) / 6)^α, exactly (depth first, cut where
    even the longest continuation cannot catch up)."""
    best: list = [-math.inf, None]  # [value, hypothesis]
    largest = penalty(max_len - 1, alpha)

    def walk(prefix, score):
        if prefix[-1] == EOS_T and len(prefix) > 1 or len(prefix) == max_len:
            value = score / penalty(len(prefix) - 1, alpha)
            if value > best[0]:
                best[:] = [value, tuple(prefix)]
            return
        if score / largest <= best[0]:
            return
        logp = _log_softmax(next_logits(tuple(prefix)))
        for t in sorted(range(V_T), key=lambda t: -logp[t]):
            walk([*prefix, t], score + logp[t])

    walk([BOS], 0.0)
    return best[1]


def _probs32(z):
    """softmax(z) in float32, as a student's torch.softmax gives it."""
    return torch.tensor(z, dtype=torch.float32).softmax(-1).tolist()


def beam_with(next_logits, k, max_len, alpha, mistake=None):
    """The reference's beam search (k candidates a step, the finished ones set aside, the beam
    shrinking) on one source, or with ``mistake``."""
    if mistake == "beam_alpha_ignored":
        alpha = 0.6
    elif mistake == "beam_no_length_penalty":
        alpha = 0.0
    k = 1 if mistake == "beam_size_ignored" else k
    extra = 1 if mistake == "beam_penalty_counts_bos" else 0
    product = mistake == "beam_probs_multiplied"  # float32 products, log taken at the end

    def normalised(total, tokens):
        lp = penalty(len(tokens) - 1 + extra, alpha)
        if product:
            total = math.log(total) if total > 0 else -math.inf
        return total * lp if mistake == "beam_penalty_multiplied" else total / lp

    alive: list[tuple[tuple[int, ...], float]] = [((BOS,), 1.0 if product else 0.0)]
    finished = []
    while alive and len(alive[0][0]) < max_len:
        candidates = []
        for tokens, score in alive:
            z = next_logits(tokens)
            logp = list(z) if mistake == "beam_no_log_softmax" else _log_softmax(z)
            probs = _probs32(z) if product else None
            for t in range(len(z)):
                if probs is not None:  # product
                    total = float(np.float32(score) * np.float32(probs[t]))
                elif mistake == "beam_score_last_token":
                    total = logp[t]
                else:
                    total = score + (math.exp(logp[t]) if mistake == "beam_sum_probs" else logp[t])
                if mistake == "beam_penalty_per_step":
                    total /= penalty(len(tokens), alpha)
                candidates.append((total, (*tokens, t)))
        candidates.sort(key=lambda c: -c[0])
        alive = []
        for total, tokens in candidates[:k]:
            if tokens[-1] == EOS_T:
                finished.append((normalised(total, tokens), tokens))
            if tokens[-1] != EOS_T or mistake == "beam_finished_expanded":
                alive.append((tokens, total))
    if not finished or mistake != "beam_alive_dropped":
        finished += [(normalised(score, tokens), tokens) for tokens, score in alive]
    if mistake == "beam_last_finished":
        return finished[-1][1]
    if mistake == "beam_best_by_length":
        return max(finished, key=lambda f: len(f[1]))[1]
    return max(finished, key=lambda f: f[0])[1]


BEAM_HINTS = {
    "beam_size_ignored": msg("only one hypothesis is kept: keep the beam_size best continuations of all the hypotheses at every step"),
    "beam_no_log_softmax": msg("the hypotheses' scores add up raw logits: add log-probabilities, torch.log_softmax(model.generator(...), dim=-1)"),
    "beam_sum_probs": msg("the scores add up probabilities: a hypothesis's log p is the sum of its tokens' log-probabilities (the log of their product)"),
    "beam_penalty_per_step": msg("the length penalty is applied at every step: keep each hypothesis's log p as a plain sum and divide by ((5 + |Y|) / 6)^α once, to compare finished ones"),
    "beam_penalty_counts_bos": msg("the length penalty counts bos: |Y| is the number of tokens after bos (eos included)"),
    "beam_alpha_ignored": msg("the length_penalty argument is ignored: α is the given length_penalty (0.6 only by default)"),
    "beam_no_length_penalty": msg("the best hypothesis is chosen by log p alone: compare log p / ((5 + |Y|) / 6)^α"),
    "beam_finished_expanded": msg("a hypothesis goes on after its eos: set a finished one aside, never extend it"),
    "beam_probs_multiplied": msg("the best sentence, long, has a probability below 1e-45, which is 0 in float32: the scores multiply probabilities; score in log space, adding each token's log_softmax"),
    "beam_alive_dropped": msg("the hypotheses still alive at max_len are dropped because another one ended with eos: when the loop ends, those left in the beam count as finished too"),
    "beam_penalty_multiplied": msg("log p is multiplied by the length penalty: divide it, log p / ((5 + |Y|) / 6)^α (log p is negative: multiplying favours the short hypotheses)"),
    "beam_score_last_token": msg("a hypothesis's score is its last token's log-probability: add it to the score of the hypothesis it extends, so that the score is the log p of the whole sentence"),
    "beam_best_by_length": msg("the best hypothesis is chosen by its length: choose by the normalised score, log p / ((5 + |Y|) / 6)^α"),
    "beam_last_finished": msg("the hypothesis returned is the last one to finish, not the best: return the finished one with the best log p / ((5 + |Y|) / 6)^α"),
}

TRAP = {(): {"a": 0.5, "b": 0.4, "EOS": 0.02}, ("a",): {"x": 0.3, "EOS": 0.05}, ("a", "x"): {"EOS": 0.8},
        ("b",): {"y": 0.9}, ("b", "y"): {"EOS": 0.9}}
SHORT_WINS = {(): {"EOS": 0.6, "a": 0.35}, ("a",): {"b": 0.9}, ("a", "b"): {"c": 0.9}, ("a", "b", "c"): {"d": 0.9},
              ("a", "b", "c", "d"): {"EOS": 0.9}}
# max_len 3 and beam 2, no tie anywhere (the beam empties at the second step in the last two rows): the
# best of the finished hypotheses, per row, is neither the last to finish (bos a c, bos b eos, bos b eos),
# nor the first longest (bos a eos, -, -), nor the best by the last token's probability (bos a c, -,
# bos b eos), nor the best by summed probabilities (bos a c, -, -)
WHICH_FINISHED = (
    {(): {"EOS": 0.5, "a": 0.3, "b": 0.15}, ("a",): {"c": 0.6, "EOS": 0.3}, ("b",): {"d": 0.9}},
    {(): {"a": 0.6, "b": 0.35}, ("a",): {"EOS": 0.9, "c": 0.05}, ("b",): {"EOS": 0.5, "d": 0.45}},
    {(): {"a": 0.6, "b": 0.35}, ("a",): {"EOS": 0.7, "c": 0.25}, ("b",): {"EOS": 0.8, "d": 0.15}},
)
# max_len 3: bos eos (0.09) finishes at once, bos a a (0.81) is alive at max_len: it counts as finished
ALIVE_AT_MAX = {(): {"a": 0.9, "EOS": 0.09}, ("a",): {"a": 0.9}}
# beam 2: bos eos (0.35) finishes, then bos a eos (0.21) beside bos a x (0.36), still alive, which every
# continuation makes worse than bos eos: a search that stops once 2 have finished must return bos eos
STOPPED_EARLY = {(): {"a": 0.6, "EOS": 0.35}, ("a",): {"x": 0.6, "EOS": 0.35}}
LATE_COST = {(): {"a": 0.6, "b": 0.3}, ("a",): {"x": 0.95}, ("a", "x"): {"y": 0.95}, ("a", "x", "y"): {"EOS": 0.55},
             ("b",): {"x": 0.95}, ("b", "x"): {"y": 0.95}, ("b", "x", "y"): {"EOS": 0.95}}


def long_or_short(ratio, short=0.46, opening=0.44):
    """bos eos (log p = s) against bos a b c eos, whose log p is ``ratio`` · s: which one wins
    depends on α (and on counting bos in |Y|)."""
    q = math.exp((ratio * math.log(short) - math.log(opening)) / 3)
    return {(): {"EOS": short, "a": opening}, ("a",): {"b": q}, ("a", "b"): {"c": q}, ("a", "b", "c"): {"EOS": q}}


def _beam_tables(sub, n, rows, k, max_len, alpha, raw=False, meanwhile=lambda fns: None):
    """beam_search on the table model, one scenario (spec, offsets) per source row: the hypotheses
    returned (``raw``: the rows as returned, without their trailing pads), the tables' logits
    functions, their word ids, and ``meanwhile(fns)``: the check's own work, done while the
    worker searches (the call is sent without waiting)."""
    g = gen(n)
    tables, words = [], []
    for spec, offsets in rows:
        ids = dict(zip(WORDS, (3 + torch.randperm(len(WORDS), generator=g)).tolist(), strict=True))
        tables.append(table_of(spec, ids, offsets))
        words.append(ids)
    B = len(rows)
    src = torch.randint(1, B + 1, (B, 5), generator=g)
    src[:, 0] = torch.arange(1, B + 1)                       # which table each row reads
    src[torch.arange(B), 4 - torch.randint(0, 3, (B,), generator=g)] = PAD
    src = src.where(src.cumprod(1) != 0, PAD)                # right-padded
    model = _table_model(sub, [tables[0], *tables], V_T)
    kwargs = {} if alpha is None else {"length_penalty": alpha}
    with sub.batch(lazy=True) as b:
        searched = b.call("beam_search", model, src, k, max_len, BOS, EOS_T, **kwargs)
    fns = [logits_fn(t) for t in tables]
    expected = meanwhile(fns)
    out = searched.value
    if raw:
        check(isinstance(out, torch.Tensor) and out.dim() == 2 and out.shape[0] == B, msg("beam_search should return a tensor [B, <= max_len] of token ids, one row per source ({B})", B=B))
        returned = [row.tolist() for row in out]
        return [tuple(row[:len(row) - next((i for i, t in enumerate(reversed(row)) if t != PAD), len(row))])
                for row in returned], fns, words, expected
    return _hypotheses(out, B, max_len, EOS_T), fns, words, expected


def _beam_fake(sub, n, rows, k, max_len, alpha, message, mistakes=tuple(BEAM_HINTS)):
    """beam_search on the table model, one scenario (spec, offsets) per source row, judged
    against the best hypothesis of each and the searches with each mistake."""
    a = 0.6 if alpha is None else alpha
    hypotheses, fns, _, want = _beam_tables(
        sub, n, rows, k, max_len, alpha, meanwhile=lambda fns: as_rows([best_hypothesis(f, max_len, a) for f in fns],
                                                                       max_len))
    got = as_rows(hypotheses, max_len)
    close(got, want, message, suspects=[
        suspect(m, (lambda m=m: as_rows([beam_with(f, k, max_len, a, m) for f in fns], max_len)), BEAM_HINTS[m])
        for m in mistakes if m != "beam_finished_expanded"])


# A long best sentence whose probability underflows float32: a vocabulary of 40 (pad, bos, eos and
# 37 words), so that the most likely next word can be as unlikely as 0.03.
V_U, UNDERFLOW_LEN, UNDERFLOW_BEAM, UNDERFLOW_ALPHA = 40, 36, 3, 2.0


def _dist(spec):
    """Log-probabilities over V_U tokens: ``spec`` {token: p} (eos 1e-6 unless given), pad and bos
    1e-7, every other word an equal share of the rest."""
    p = {PAD: 1e-7, BOS: 1e-7, EOS_T: 1e-6, **spec}
    rest = [t for t in range(EOS_T + 1, V_U) if t not in p]
    share = (1.0 - sum(p.values())) / len(rest)
    return [math.log(p.get(t, share)) for t in range(V_U)]


def underflow_case(g):
    """The table of one source and its best hypothesis. From bos a word, almost surely; then
    another, or eos (0.002: E1, 2 tokens, log p -6.2); then a chain of words, each the most likely
    at 0.03, except that after five words eos has 0.3 (E2, 6 tokens, log p -11.7) and after 34
    words 0.9 (E3, 35 tokens, log p -109.3: 4e-48, 0 in float32). With α = 2: E3 -2.46 > E2 -3.49 >
    E1 -4.57, so E3 is the best (every other hypothesis has a lower log p for its length), and
    every correct beam of 3 finds it (E1 and E2 finish on the way, fewer than 3: early stopping
    does not stop before E3). Multiplied probabilities make E3 0 (log -inf): E2 wins; without
    the penalty (or with 0.6, or adding probabilities), E1."""
    n = UNDERFLOW_LEN - 2  # the words before E3's eos
    chain = (EOS_T + 1 + torch.randint(0, V_U - EOS_T - 1, (n + 1,), generator=g)).tolist()
    sure = 1 - 2e-7 - 36e-5  # the other words 1e-5 each
    logits = {str(BOS): _dist({chain[0]: sure - 1e-6}),
              f"{BOS},{chain[0]}": _dist({chain[1]: sure - 0.002, EOS_T: 0.002})}
    for j in range(2, n + 1):  # after bos and j words
        spec = {5: {chain[j]: 0.6, EOS_T: 0.3}, n: {chain[j]: 0.05, EOS_T: 0.9}}.get(j, {chain[j]: 0.03})
        logits[",".join(map(str, [BOS, *chain[:j]]))] = _dist(spec)
    table = {"logits": logits, "default": _dist({}), "after_eos": _dist({}), "eos": EOS_T}
    return table, (BOS, *chain[:n], EOS_T)


def _beam_underflow(sub, n):
    """The underflow scenario (one source), judged against E3 and the searches with each mistake."""
    table, best = underflow_case(gen(n))
    src = torch.tensor([[3, 4, 5, PAD]])
    model = _table_model(sub, [table], V_U)  # one table: every source reads it
    try:
        out = sub.call("beam_search", model, src, UNDERFLOW_BEAM, UNDERFLOW_LEN, BOS, EOS_T,
                       length_penalty=UNDERFLOW_ALPHA)
    except SubmissionError as exc:
        if "math domain error" in exc.message:
            diagnose("beam_probs_multiplied", msg("beam_search raised {error_type} ({error}) on a long sentence whose probability is below 1e-45, 0 in float32: the log of a product of probabilities; score in log space, adding each token's log_softmax", error_type=exc.exc_type, error=exc.message[:80]))
        raise
    got = as_rows(_hypotheses(out, 1, UNDERFLOW_LEN, EOS_T), UNDERFLOW_LEN)
    fns = [logits_fn(table)]
    close(got, as_rows([best], UNDERFLOW_LEN),
          msg("with length_penalty={UNDERFLOW_ALPHA} and beam_size={UNDERFLOW_BEAM}, a sentence of 35 tokens whose probability is about 4e-48 (each word at most 0.03) beats the short ones that finish on the way: beam search should return it", UNDERFLOW_ALPHA=UNDERFLOW_ALPHA, UNDERFLOW_BEAM=UNDERFLOW_BEAM), suspects=[
              suspect(m, (lambda m=m: as_rows([beam_with(f, UNDERFLOW_BEAM, UNDERFLOW_LEN, UNDERFLOW_ALPHA, m)
                                               for f in fns], UNDERFLOW_LEN)), BEAM_HINTS[m])
              for m in BEAM_HINTS if m != "beam_finished_expanded"])


@exercise("beam_search", points=0.75)
def test_beam_beats_greedy(sub):
    _beam_fake(sub, 410, [(TRAP, {}), (TRAP, {("a",): 3.0, ("b",): -3.0})], 2, 7, None,
               msg("with beam_size=2 on a model whose most likely first word leads to a worse sentence (greedy takes it), beam search should keep both openings and return the sentence with the higher normalised log p"))
    _beam_fake(sub, 411, [(TRAP, {}), (TRAP, {})], 3, 6, None, msg("with beam_size=3, as with 2, beam search should return the better sentence that greedy misses"))


@exercise("beam_search", points=1)
def test_beam_length_penalty(sub):
    mixed: list[tuple] = [(long_or_short(1.257), {}), (long_or_short(1.1), {}), (long_or_short(1.5), {}), (TRAP, {}),
             (long_or_short(0.9, short=0.3, opening=0.6), {})]
    first_failure(
        lambda: _beam_fake(sub, 420, mixed, 2, 7, None, msg("with the default length_penalty=0.6, sentences of different lengths are compared by log p / ((5 + |Y|) / 6)^0.6, |Y| the tokens after bos: here a longer sentence wins in the first two rows and the last, a shorter one in the third (and in the fourth row sentences of equal length)")),
        lambda: _beam_fake(sub, 421, [(long_or_short(1.5), {}), (long_or_short(1.2), {}),
                                      (long_or_short(0.9, short=0.3, opening=0.6), {})], 2, 7, 2.0,
                           msg("with length_penalty=2.0 the longer sentence wins in every row: log p / ((5 + |Y|) / 6)^2")),
        lambda: _beam_fake(sub, 422, [(long_or_short(1.257), {}), (long_or_short(1.1), {})], 2, 7, 0.0,
                           msg("with length_penalty=0 the sentence with the higher log p wins, the short one here")),
        lambda: _beam_underflow(sub, 423))


@exercise("beam_search", points=0.75)
def test_beam_scores(sub):
    first_failure(
        lambda: _beam_fake(sub, 430, [(SHORT_WINS, {}), (LATE_COST, {})], 2, 7, None,
                           msg("a hypothesis's score is the sum of its tokens' log-probabilities, divided by the length penalty once at the end: here a short sentence beats a longer one whose every token is likely, and of two sentences of equal length the one with the higher log p wins")),
        lambda: _beam_fake(sub, 432, [(spec, {}) for spec in WHICH_FINISHED], 2, 3, None,
                           msg("with beam_size=2 and max_len=3, beam search should return the finished hypothesis with the best log p / ((5 + |Y|) / 6)^0.6 (here bos eos in the first row, bos a eos in the others)")))
