"""Hidden graders of lesson 01_attention_by_hand (numpy)."""

import numpy as np

from grader.framework import check, close, exercise

YOU = [1.0, 2.0, 3.0, 4.0, 5.0, 0.0]  # 优
XIU = [2.0, 3.0, 4.0, 5.0, 6.0, 0.0]  # 秀
X = np.array([YOU, XIU])
RNG = np.random.default_rng(20190601)
Q = RNG.normal(size=(3, 4))
K = RNG.normal(size=(5, 4))
V = RNG.normal(size=(5, 2))


def ref_softmax(x, axis=-1):
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


# --- dot_scores -------------------------------------------------------------------------

@exercise("dot_scores", points=1)
def test_dot_scores_worked_example(sub):
    close(sub.call("dot_scores", X, X), [[55.0, 70.0], [70.0, 90.0]],
          "Q·Kᵀ of the 优秀 example should be [[55, 70], [70, 90]] (优·优 = 1+4+9+16+25 = 55)")


@exercise("dot_scores", points=1)
def test_dot_scores_rectangular(sub):
    close(sub.call("dot_scores", Q, K), Q @ K.T,
          "with 3 queries and 5 keys the scores should be [3, 5]: row i is query i, "
          "column j is key j (Q @ K.T, not K @ Q.T)")


# --- softmax ----------------------------------------------------------------------------

@exercise("softmax", points=0.5)
def test_softmax_values(sub):
    close(sub.call("softmax", np.array([1.0, 2.0, 3.0])), ref_softmax([1.0, 2.0, 3.0]),
          "softmax([1, 2, 3]) should be exp(x) / sum(exp(x))")


@exercise("softmax", points=1)
def test_softmax_rows_sum_to_one(sub):
    x = np.random.default_rng(1).normal(size=(2, 5))
    w = sub.call("softmax", x)
    close(w, ref_softmax(x, -1),
          "rows of the weights should sum to 1: is softmax taken over the wrong axis?")


@exercise("softmax", points=0.5)
def test_softmax_axis_argument(sub):
    x = np.random.default_rng(2).normal(size=(3, 4, 2))
    close(sub.call("softmax", x, axis=1), ref_softmax(x, 1),
          "softmax(x, axis=1) should normalise along axis 1: use the `axis` argument")
    close(sub.call("softmax", x, 0), ref_softmax(x, 0),
          "softmax(x, 0) should normalise along axis 0: use the `axis` argument")


@exercise("softmax", points=1)
def test_softmax_large_inputs(sub):
    x = np.array([[1000.0, 1000.0, 1001.0], [-1000.0, -1000.0, -1000.0]])
    w = sub.call("softmax", x)
    check(np.all(np.isfinite(np.asarray(w, dtype=np.float64))),
          "softmax of [1000, 1000, 1001] gives NaN or inf: subtract the maximum before exp "
          "(exp(1000) overflows)")
    close(w, ref_softmax(x), "softmax of large inputs is wrong: subtract the maximum before exp")


@exercise("softmax", points=0.5)
def test_softmax_per_row_maximum(sub):
    x = np.array([[0.0, 1.0, 2.0], [1000.0, 1001.0, 1002.0]])
    w = np.asarray(sub.call("softmax", x), dtype=np.float64)
    check(np.all(np.isfinite(w)),
          "rows with very different scales give NaN: subtract each row's own maximum "
          "(max(axis=axis, keepdims=True)), not the maximum of the whole array")
    close(w, ref_softmax(x), "subtract each row's own maximum, not the global one")


@exercise("softmax", points=0.5)
def test_softmax_minus_infinity(sub):
    x = np.array([[-np.inf, 0.0, 1.0], [2.0, -np.inf, -np.inf]])
    close(sub.call("softmax", x), ref_softmax(x),
          "entries of -inf (masked positions) should get weight exactly 0 while the rest "
          "of the row still sums to 1")


# --- attention --------------------------------------------------------------------------

def ref_attention(q, k, v, scale=True):
    scores = q @ k.T
    if scale:
        scores = scores / np.sqrt(k.shape[-1])
    w = ref_softmax(scores)
    return w @ v, w


def _pair(result, message):
    check(isinstance(result, (tuple, list)) and len(result) == 2, message)
    return result


@exercise("attention", points=0.5)
def test_attention_returns_output_and_weights(sub):
    out, w = _pair(sub.call("attention", Q, K, V),
                   "attention should return a pair (output, weights)")
    close(w, ref_attention(Q, K, V)[1],
          "the second value returned should be the weights, of shape [n_queries, n_keys]")


@exercise("attention", points=1.5)
def test_attention_worked_example(sub):
    out, w = _pair(sub.call("attention", X, X, X), "attention should return (output, weights)")
    ref_out, ref_w = ref_attention(X, X, X)
    close(w, ref_w, "weights of the 优秀 example: softmax(Q Kᵀ / √d_k) with d_k = 6: "
          "divide by the square root of the key width, not by d_k itself")
    close(out, ref_out, "output of the 优秀 example should be weights @ V")


@exercise("attention", points=1)
def test_attention_scale_flag(sub):
    out, w = _pair(sub.call("attention", X, X, X, scale=False),
                   "attention should return (output, weights)")
    ref_out, ref_w = ref_attention(X, X, X, scale=False)
    close(w, ref_w, "with scale=False the scores must not be divided by √d_k")
    close(out, ref_out, "with scale=False the output should be softmax(Q Kᵀ) @ V")


@exercise("attention", points=1)
def test_attention_rectangular(sub):
    out, w = _pair(sub.call("attention", Q, K, V), "attention should return (output, weights)")
    ref_out, ref_w = ref_attention(Q, K, V)
    close(np.asarray(w).sum(-1) if np.ndim(w) == 2 else w, np.ones(3),
          "each query's weights (rows) should sum to 1 over the keys: softmax over the wrong axis?")
    close(out, ref_out, "with 3 queries, 5 keys and values of width 2 the output should be "
          "[3, 2] = weights @ V (weights from Q and K, values from V)")
