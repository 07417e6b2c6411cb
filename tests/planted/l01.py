"""Planted mistakes in lesson 01 (numpy attention by hand)."""

from planted import Variant, bug

LESSON = "01_attention_by_hand"

BUGS = [
    bug("dot_scores", "scores_transposed", "transposed scores K @ Q.T", ("Q @ K.T", "K @ Q.T")),
    bug("dot_scores", "scores_wrong_axis", "elementwise product summed over the wrong axis",
        ("return Q @ K.T", "return (Q[:, None, :] * K[None, :, :]).sum(0)")),
    bug("softmax", "softmax_no_max", "no max subtraction (overflows)",
        ("x - np.max(x, axis=axis, keepdims=True)", "x")),
    bug("softmax", "softmax_axis_ignored", "softmax over axis 0 whatever `axis` says",
        ("axis=axis, keepdims=True)\n    e", "axis=0, keepdims=True)\n    e"),
        ("np.sum(e, axis=axis", "np.sum(e, axis=0"), related=("attention_softmax_axis",)),
    bug("softmax", "softmax_global_max", "global instead of per-row maximum",
        ("np.max(x, axis=axis, keepdims=True)", "np.max(x)")),
    bug("softmax", "softmax_sum_all", "sum over the wrong axis (no keepdims)",
        ("np.sum(e, axis=axis, keepdims=True)", "np.sum(e)")),
    bug("softmax", "softmax_neginf", "NaN for -inf entries (subtracting the max lost, nan_to_num on the inputs)",
        ("x = np.asarray(x, dtype=np.float64)",
         "x = np.nan_to_num(np.asarray(x, dtype=np.float64), neginf=0.0)")),
    bug("attention", "scale_by_dk", "scaled by d_k instead of sqrt(d_k)",
        ("np.sqrt(K.shape[-1])", "K.shape[-1]")),
    bug("attention", "scale_flag_ignored", "scale flag ignored (always scaled)",
        ("if scale:\n        scores", "if True:\n        scores")),
    bug("attention", "never_scaled", "never scaled", ("if scale:\n        scores", "if False:\n        scores")),
    bug("attention", "attention_softmax_axis", "softmax over the query axis", ("softmax(scores, axis=-1)", "softmax(scores, axis=0)")),
    bug("attention", "attention_pair_order", "returns weights then output", ("return weights @ V, weights", "return weights, weights @ V")),
    bug("attention", "weights_times_keys", "weights applied to the keys", ("weights @ V", "weights @ K")),
    bug("attention", "scores_transposed", "scores transposed", ("scores = dot_scores(Q, K)", "scores = dot_scores(K, Q)")),
    bug("softmax", "changes_its_input", "subtracts the max from x in place",
        ("shifted = x - np.max(x, axis=axis, keepdims=True)",
         "x -= np.max(x, axis=axis, keepdims=True)\n    shifted = x")),
    bug("softmax", "library_call", "torch.softmax on the array, converted back",
        ("x = np.asarray(x, dtype=np.float64)\n    shifted = x - np.max(x, axis=axis, keepdims=True)\n"
         "    e = np.exp(shifted)\n    return e / np.sum(e, axis=axis, keepdims=True)",
         "import torch\n    return torch.softmax(torch.as_tensor(np.asarray(x, dtype=np.float64)), dim=axis).numpy()")),
    bug("softmax", "not_numpy", "computed in torch, returns a tensor",
        ("x = np.asarray(x, dtype=np.float64)\n    shifted = x - np.max(x, axis=axis, keepdims=True)\n"
         "    e = np.exp(shifted)\n    return e / np.sum(e, axis=axis, keepdims=True)",
         "import torch\n    t = torch.as_tensor(np.asarray(x, dtype=np.float64))\n"
         "    e = (t - t.amax(dim=axis, keepdim=True)).exp()\n    return e / e.sum(dim=axis, keepdim=True)")),
    bug("dot_scores", "not_numpy", "torch matmul, returns a tensor",
        ("return Q @ K.T", "import torch\n    return torch.as_tensor(Q) @ torch.as_tensor(K).T")),
    bug("attention", "library_call", "F.scaled_dot_product_attention for the output",
        ("return weights @ V, weights",
         "import torch\n    t = [torch.as_tensor(a) for a in (Q, K, V)]\n"
         "    out = torch.nn.functional.scaled_dot_product_attention(*t, scale=None if scale else 1.0)\n"
         "    return out.numpy(), weights")),
    bug("attention", "not_numpy", "output returned as a torch tensor",
        ("return weights @ V, weights", "import torch\n    return torch.as_tensor(weights @ V), weights")),
]

ALTERNATIVES = [
    Variant("dot_scores", "einsum", source="""
def dot_scores(Q, K):
    return np.einsum("nd,md->nm", Q, K)
"""),
    Variant("softmax", "log-sum-exp", source="""
def softmax(x, axis=-1):
    x = np.asarray(x, dtype=float)
    m = np.max(x, axis=axis, keepdims=True)
    lse = m + np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))
    return np.exp(x - lse)
"""),
    Variant("softmax", "moveaxis to the end and back", source="""
def softmax(x, axis=-1):
    z = np.moveaxis(np.asarray(x, dtype=float), axis, -1)
    z = np.exp(z - z.max(-1)[..., None])
    return np.moveaxis(z / z.sum(-1)[..., None], -1, axis)
"""),
    Variant("attention", "einsum and explicit math.sqrt", source="""
import math
def attention(Q, K, V, scale=True):
    s = np.einsum("nd,md->nm", Q, K)
    if scale:
        s = s / math.sqrt(Q.shape[1])
    w = softmax(s)
    return (np.einsum("nm,mv->nv", w, V), w)
"""),
]

# What each planted mistake earns on its exercise (the rubric in CONTRIBUTING):
SCORES = {
    ('dot_scores', 'transposed scores K @ Q.T'): 1,
    ('dot_scores', 'elementwise product summed over the wrong axis'): 0,
    ('softmax', 'no max subtraction (overflows)'): 2.5,
    ('softmax', 'softmax over axis 0 whatever `axis` says'): 0,
    ('softmax', 'global instead of per-row maximum'): 3.5,
    ('softmax', 'sum over the wrong axis (no keepdims)'): 0,
    ('softmax', 'NaN for -inf entries (subtracting the max lost, nan_to_num on the inputs)'): 3.5,
    ('attention', 'scaled by d_k instead of sqrt(d_k)'): 1,
    ('attention', 'scale flag ignored (always scaled)'): 3,
    ('attention', 'never scaled'): 1,
    ('attention', 'softmax over the query axis'): 0,
    ('attention', 'returns weights then output'): 0,
    ('attention', 'weights applied to the keys'): 1.5,
    ('attention', 'scores transposed'): 1.5,
}
