"""Hidden graders of lesson 01_attention_by_hand (numpy).

Inputs are drawn afresh for every grading run (``rng``), except the lesson's own 优秀
example and the few values a check needs (1000, -inf), which are built around random data.
A wrong answer is compared with the outputs of the common mistakes (``suspect``): the one
it matches is the hint.
"""

import numpy as np

from grader.testkit.framework import (
    check,
    close,
    diagnose,
    exercise,
    matches,
    msg,
    numpy_only,
    rng,
    suspect,
)

MISTAKES = {
    "scores_transposed": "the scores are K·Qᵀ (keys as rows) instead of Q·Kᵀ",
    "scores_wrong_axis": "the dot product sums over the tokens instead of the features",
    "softmax_no_max": "softmax does not subtract the maximum before exp (overflow)",
    "softmax_global_max": "softmax subtracts the maximum of the whole array, not each row's",
    "softmax_axis_ignored": "softmax ignores its `axis` argument",
    "softmax_sum_all": "softmax divides by the sum of the whole array, not of each row",
    "softmax_neginf": "-inf entries get a non-zero weight (or NaN)",
    "scale_by_dk": "scores divided by d_k instead of √d_k",
    "scale_flag_ignored": "scale=False still divides by √d_k",
    "never_scaled": "the scores are never divided by √d_k",
    "attention_softmax_axis": "attention's softmax runs over the queries (axis 0), not the keys",
    "attention_pair_order": "attention returns (weights, output) instead of (output, weights)",
    "weights_times_keys": "the output is weights @ K instead of weights @ V",
    "not_numpy": "a numpy exercise returns a torch tensor (or a list) instead of a numpy array",
}

#: What the lesson's text (both editions) asks of each exercise, each requirement with the
#: diagnoses that grade it: ids of MISTAKES, or the shared ``library_call`` and
#: ``changes_its_input`` (tests/grader/hidden/test_requirements.py: each one declared, and proven on this
#: exercise by a planted bug; every diagnosis answers some requirement).
REQUIREMENTS = {
    "dot_scores": {
        "the dot product of every query (row of Q) with every key (row of K): shape [n, m]":
            ("scores_transposed", "scores_wrong_axis"),
        "numpy in, a numpy array out": ("not_numpy",),
    },
    "softmax": {
        "along `axis` (its argument)": ("softmax_axis_ignored", "softmax_sum_all"),
        "numerically stable: subtract the maximum along that axis": ("softmax_no_max", "softmax_global_max"),
        "stable for -inf entries (weight 0, no NaN)": ("softmax_neginf",),
        "x is left as it was (a function does not change its arguments)": ("changes_its_input",),
        "built from the formula, not torch's softmax (the course's rule on shortcuts)": ("library_call",),
        "numpy in, a numpy array out": ("not_numpy",),
    },
    "attention": {
        "softmax(Q Kᵀ / √d_k) V: scores divided by √d_k when scale is true":
            ("scale_by_dk", "never_scaled", "scale_flag_ignored"),
        "weights [n, m], one row per query, each row summing to 1 (softmax over the keys)":
            ("attention_softmax_axis", "scores_transposed"),
        "the output weights the value rows: weights @ V": ("weights_times_keys",),
        "numpy in, numpy arrays out": ("not_numpy",),
        "returns (output, weights)": ("attention_pair_order",),
        "built from the formula, not F.scaled_dot_product_attention": ("library_call",),
    },
}

# attention is graded with the course's dot_scores and softmax, so a mistake in either is
# charged once, to its own exercise (grader.testkit.parts)
BUILDS_ON = {"attention": ("dot_scores", "softmax")}

#: The library's one-call versions of what an exercise builds: refused (library_call).
FORBID = {
    "softmax": ("torch.softmax", "torch.nn.functional.softmax", "torch.Tensor.softmax",
                "torch.special.softmax"),
    "attention": ("torch.nn.functional.scaled_dot_product_attention",),
}


def call(sub, name, *args, **kwargs):
    """The notebook's ``name`` called without its refused library calls; every array it
    returns must be numpy's (a numpy lesson)."""
    result = sub.call(name, *args, forbid=FORBID.get(name, ()), **kwargs)
    numpy_only(name, *(result if name == "attention" and isinstance(result, (tuple, list)) else (result,)))
    return result


YOU = [1.0, 2.0, 3.0, 4.0, 5.0, 0.0]  # 优
XIU = [2.0, 3.0, 4.0, 5.0, 6.0, 0.0]  # 秀
X = np.array([YOU, XIU])


def inputs():
    """Q [3, 4], K [5, 4], V [5, 2] for this grading run."""
    r = rng(1)
    return r.normal(size=(3, 4)), r.normal(size=(5, 4)), r.normal(size=(5, 2))


def square_inputs():
    """Q [4, 3], K [4, 3] (as many queries as keys, Q ≠ K), V [4, 2]."""
    r = rng(2)
    return r.normal(size=(4, 3)), r.normal(size=(4, 3)) * 2.0, r.normal(size=(4, 2))


def ref_softmax(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_suspects(x, axis=-1):
    """What the common softmax mistakes return for ``x`` (numpy warnings silenced)."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(all="ignore"):
        naive = np.exp(x) / np.exp(x).sum(axis=axis, keepdims=True)
        global_max = np.exp(x - x.max()) / np.exp(x - x.max()).sum(axis=axis, keepdims=True)
        whole = np.exp(x - x.max(axis=axis, keepdims=True))
        whole = whole / whole.sum()
        axis0 = ref_softmax(x, 0)
    return [
        suspect("softmax_no_max", naive, msg("softmax overflows: exp(1000) is inf, so subtract each row's maximum before exp (the result does not change, the overflow goes)")),
        suspect("softmax_global_max", global_max, msg("softmax subtracts the maximum of the whole array: a row far below it underflows to 0 / 0, so subtract each row's own maximum (max(axis=axis, keepdims=True))")),
        suspect("softmax_sum_all", whole, msg("softmax divides by the sum over the whole array: divide by each row's own sum (sum(axis=axis, keepdims=True)), so that every row sums to 1")),
        suspect("softmax_axis_ignored", axis0 if axis not in (0, -x.ndim) else None,
                msg("softmax(x, axis={axis}) normalises over axis 0: use the `axis` argument in both the max and the sum", axis=axis)),
    ]


# --- dot_scores -------------------------------------------------------------------------

def score_suspects(Q, K):
    return [
        suspect("scores_transposed", K @ Q.T, msg("the scores are K·Qᵀ: row i must be query i and column j key j, so compute Q @ K.T (shape [n_queries, n_keys])")),
        suspect("scores_wrong_axis", (Q[:, None, :] * K[None, :, :]).sum(0),
                msg("the products are summed over the queries, leaving the feature axis: scores[i, j] = Σ_k Q[i, k]·K[j, k] sums over the features (Q @ K.T)")),
        suspect("scores_wrong_axis", (Q[:, None, :] * K[None, :, :]).sum(1),
                msg("the products are summed over the keys, leaving the feature axis: scores[i, j] = Σ_k Q[i, k]·K[j, k] sums over the features (Q @ K.T)")),
    ]


@exercise("dot_scores", points=1)
def test_dot_scores_worked_example(sub):
    close(call(sub, "dot_scores", X, X), [[55.0, 70.0], [70.0, 90.0]],
          msg("Q·Kᵀ of the 优秀 example should be [[55, 70], [70, 90]] (优·优 = 1+4+9+16+25 = 55)"),
          suspects=score_suspects(X, X))


@exercise("dot_scores", points=1)
def test_dot_scores_queries_are_rows(sub):
    Q, K, _ = inputs()
    close(call(sub, "dot_scores", Q, K), Q @ K.T,
          msg("with 3 queries and 5 keys of width 4 the scores should be the [3, 5] matrix of dot products Q[i] · K[j]"), suspects=score_suspects(Q, K))
    Qs, Ks, _ = square_inputs()
    close(call(sub, "dot_scores", Qs, Ks), Qs @ Ks.T,
          msg("with 4 queries and 4 different keys the scores should be Q @ K.T"),
          suspects=score_suspects(Qs, Ks))


# --- softmax ----------------------------------------------------------------------------

@exercise("softmax", points=1)
def test_softmax_rows(sub):
    x = rng(3).normal(size=(2, 5))
    close(call(sub, "softmax", x), ref_softmax(x, -1),
          msg("softmax of a [2, 5] array should normalise each row: exp(x) / sum(exp(x)) over the last axis"), suspects=softmax_suspects(x, -1))
    v = rng(4).normal(size=4)
    close(call(sub, "softmax", v), ref_softmax(v), msg("softmax of a vector should be exp(x) / sum(exp(x))"), suspects=softmax_suspects(v))


@exercise("softmax", points=1)
def test_softmax_axis_argument(sub):
    x = rng(5).normal(size=(3, 4, 2))
    close(call(sub, "softmax", x, axis=1), ref_softmax(x, 1),
          msg("softmax(x, axis=1) should normalise along axis 1"), suspects=softmax_suspects(x, 1))
    close(call(sub, "softmax", x, 0), ref_softmax(x, 0),
          msg("softmax(x, 0) should normalise along axis 0"), suspects=softmax_suspects(x, 0))


@exercise("softmax", points=1)
def test_softmax_large_inputs(sub):
    x = 1000.0 + rng(6).normal(size=(2, 3))
    close(call(sub, "softmax", x), ref_softmax(x),
          msg("softmax of scores near 1000 is wrong: subtracting a constant from a row must not change its softmax"), suspects=softmax_suspects(x))


@exercise("softmax", points=0.5)
def test_softmax_per_row_maximum(sub):
    base = rng(7).normal(size=(2, 3))
    x = base + np.array([[0.0], [1000.0]])
    close(call(sub, "softmax", x), ref_softmax(x),
          msg("softmax of rows with very different scales (one near 0, one near 1000) is wrong"),
          suspects=softmax_suspects(x))


@exercise("softmax", points=0.5)
def test_softmax_minus_infinity(sub):
    x = rng(8).normal(size=(2, 4))
    x[0, 1] = x[1, 0] = x[1, 3] = -np.inf
    w = np.asarray(call(sub, "softmax", x), dtype=np.float64)
    check(w.shape == x.shape, msg("softmax should keep the shape {x_shape}, got {w_shape}", x_shape=list(x.shape), w_shape=list(w.shape)))
    masked = np.isinf(x)
    check(np.all(np.isfinite(w)) and np.all(w[masked] == 0),
          msg("entries of -inf (masked positions) should get weight exactly 0 (exp(-inf) = 0) and never NaN: keep the -inf entries as they are, subtract the row's maximum, then exp"),
          mistake="softmax_neginf")
    close(w, ref_softmax(x), msg("rows with -inf entries should still sum to 1 over their finite entries"), suspects=softmax_suspects(x))


# --- attention --------------------------------------------------------------------------

def ref_attention(q, k, v, scale=True, divide_by=None, axis=-1, transposed=False):
    scores = k @ q.T if transposed else q @ k.T
    if divide_by is not None:
        scores = scores / divide_by
    elif scale:
        scores = scores / np.sqrt(k.shape[-1])
    w = ref_softmax(scores, axis)
    return w @ v, w


def _pair(result):
    check(isinstance(result, (tuple, list)) and len(result) == 2,
          msg("attention should return a pair (output, weights)"))
    return result


def attention_suspects(Q, K, V, scale=True, part="weights"):
    """What each attention mistake returns, for the weights (``part="weights"``) or the
    output; each a diagnosis."""
    i = 1 if part == "weights" else 0
    d = K.shape[-1]
    return [
        suspect("scale_by_dk", ref_attention(Q, K, V, divide_by=d)[i] if scale else None,
                msg("the scores are divided by d_k = {d}: divide them by √d_k = √{d} instead", d=d)),
        suspect("never_scaled", ref_attention(Q, K, V, scale=False)[i] if scale else None,
                msg("with scale=True the scores must be divided by √d_k (they were left unscaled)")),
        suspect("scale_flag_ignored", ref_attention(Q, K, V, scale=True)[i] if not scale else None,
                msg("with scale=False the scores must not be divided by √d_k (the `scale` flag is ignored)")),
        suspect("attention_softmax_axis", ref_attention(Q, K, V, scale, axis=0)[i]
                if Q.shape[0] == K.shape[0] else None,
                msg("the weights are normalised over the queries (axis 0): each query's weights must sum to 1 over the keys, so softmax over axis -1 (and softmax must use its axis)")),
        suspect("scores_transposed", ref_attention(Q, K, V, scale, transposed=True)[i]
                if Q.shape[0] == K.shape[0] else None,
                msg("the scores are K·Qᵀ: row i must be query i, so use dot_scores(Q, K) (Q first)")),
        suspect("weights_times_keys", ref_attention(Q, K, K, scale)[0] if part == "output" else None,
                msg("the output is weights @ K: the weights average the values, so return weights @ V")),
    ]


def attend(sub, Q, K, V, **kwargs):
    out, w = _pair(call(sub, "attention", Q, K, V, **kwargs))
    want_out, want_w = ref_attention(Q, K, V, **kwargs)
    if not matches(w, want_w) and matches(out, want_w) and matches(w, want_out):
        diagnose("attention_pair_order", msg("attention returns (weights, output): return the output first, then the weights"))
    return out, w


@exercise("attention", points=1.5)
def test_attention_worked_example(sub):
    out, w = attend(sub, X, X, X)
    ref_out, ref_w = ref_attention(X, X, X)
    close(w, ref_w, msg("the weights of the 优秀 example should be softmax(Q Kᵀ / √d_k) with d_k = 6"),
          suspects=attention_suspects(X, X, X))
    close(out, ref_out, msg("the output of the 优秀 example should be weights @ V"),
          suspects=attention_suspects(X, X, X, part="output"))


@exercise("attention", points=1)
def test_attention_scale_flag(sub):
    Q, K, V = square_inputs()
    out, w = attend(sub, Q, K, V, scale=False)
    ref_out, ref_w = ref_attention(Q, K, V, scale=False)
    close(w, ref_w, msg("with scale=False the weights should be softmax(Q Kᵀ) over the keys"),
          suspects=attention_suspects(Q, K, V, scale=False))
    close(out, ref_out, msg("with scale=False the output should be softmax(Q Kᵀ) @ V"),
          suspects=attention_suspects(Q, K, V, scale=False, part="output"))


@exercise("attention", points=1.5)
def test_attention_queries_keys_values(sub):
    for Q, K, V in (square_inputs(), inputs()):
        out, w = attend(sub, Q, K, V)
        ref_out, ref_w = ref_attention(Q, K, V)
        n, m = Q.shape[0], K.shape[0]
        close(w, ref_w, msg("with {n} queries and {m} keys the weights should be the [{n}, {m}] matrix softmax(Q Kᵀ / √d_k), each row summing to 1", n=n, m=m),
              suspects=attention_suspects(Q, K, V))
        close(out, ref_out, msg("with {n} queries, {m} keys and values of width {width} the output should be the [{n}, {width}] matrix weights @ V", n=n, m=m, width=V.shape[1]),
              suspects=attention_suspects(Q, K, V, part="output"))
