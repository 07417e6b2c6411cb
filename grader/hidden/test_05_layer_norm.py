"""Hidden graders of lesson 05_layer_norm (numpy layer_norm, batch_norm, backward; torch LayerNorm).

Oracles are torch built-ins in float64 (``F.layer_norm``, ``F.batch_norm``, autograd) and
the same formulas written out with the common mistakes as options (``suspect``): a wrong
answer that matches one of them gets that mistake as its hint. Inputs are drawn afresh for
every grading run; nothing depends on a random seed of the submission. The numpy exercises
are refused torch's normalisations (``NUMPY_FORBID``) and must return numpy arrays; the torch
module is refused ``F.layer_norm`` and must not loop in Python (it counts the torch operations
its forward runs on a small and on a larger input).
"""


import numpy as np
import torch

# what torch imports when these tests first differentiate (sympy: ~0.7 s), imported with the
# tests: before a class's first submission, not during it
import torch.fx.experimental.symbolic_shapes  # noqa: F401
import torch.nn.functional as F

from grader.runtime.errors import SubmissionError
from grader.testkit.framework import (
    Tolerance,
    check,
    close,
    exercise,
    matches,
    msg,
    numpy_only,
    python_lines,
    rng,
    suspect,
)

MISTAKES = {
    "ln_unbiased_var": "the variance is the unbiased one (divides by D - 1)",
    "ln_eps_outside": "eps is added outside the square root (std + eps)",
    "ln_wrong_axis": "the normalisation runs over the batch axis, not the features",
    "ln_no_affine": "gamma and beta (weight and bias) are not applied",
    "ln_eps_ignored": "the eps argument is ignored",
    "ln_param_names": "the parameters are not named weight and bias",
    "ln_param_init": "weight and bias do not start as ones and zeros",
    "ln_float32": "layer_norm computes in float32 instead of numpy's float64",
    "ln_python_loop": "LayerNorm's forward loops in Python over the tokens or the features",
    "not_numpy": "a numpy exercise returns a torch tensor (or a list) instead of a numpy array",
    "bn_last_axis": "batch_norm normalises over the features (that is layer norm)",
    "bn_axis0_only": "batch_norm normalises over axis 0 only, not every axis but the last",
    "bn_unbiased_var": "batch_norm uses the unbiased variance",
    "bwd_no_eps": "the backward pass leaves eps out of σ̂ (sqrt(var) instead of sqrt(var + eps))",
    "bwd_no_projection_term": "dx lacks the x̂·mean(dx̂·x̂) term",
    "bwd_no_mean_term": "dx lacks the -mean(dx̂) term",
    "dgamma_no_xhat": "dgamma is dout summed, without x̂",
    "dgamma_not_summed": "dgamma and dbeta are summed over the batch axis only",
    "dx_no_gamma": "dx̂ = dout, without gamma",
}

#: What the lesson's text (both editions) asks of each exercise, each requirement with the
#: diagnoses that grade it: ids of MISTAKES, or the shared ``library_call`` and
#: ``changes_its_input`` (tests/grader/hidden/test_requirements.py: each one declared, and proven on this
#: exercise by a planted bug; every diagnosis answers some requirement).
REQUIREMENTS = {
    "layer_norm": {
        "normalise each token over its features, the last axis": ("ln_wrong_axis",),
        "the biased variance (divide by D, np.var's default)": ("ln_unbiased_var",),
        "ε inside the square root: sqrt(σ² + ε), not σ + ε": ("ln_eps_outside",),
        "then scale by gamma and shift by beta: gamma * x̂ + beta": ("ln_no_affine",),
        "with the eps it is given (the argument, 1e-5 by default)": ("ln_eps_ignored",),
        "computed in numpy's float64, the dtype of x (no cast to float32)": ("ln_float32",),
        "numpy in, a numpy array out (the course's rule)": ("not_numpy",),
        "torch's normalisations are refused (the course's rule on shortcuts)": ("library_call",),
        "x is left as it was: a new array is returned": ("changes_its_input",),
        "the given LayerNormFunction and FastLayerNorm (section 7) are refused (the course's rule)":
            ("given_answer",),
    },
    "batch_norm": {
        "the statistics over every axis but the last (axis 0 of [B, D], axes 0 and 1 of [B, L, D])":
            ("bn_last_axis", "bn_axis0_only"),
        "still the biased variance": ("bn_unbiased_var",),
        "still ε inside the square root": ("ln_eps_outside",),
        "the same formula as layer_norm: scaled by gamma, shifted by beta": ("ln_no_affine",),
        "with the eps it is given (the argument, 1e-5 by default)": ("ln_eps_ignored",),
        "numpy in, a numpy array out (the course's rule)": ("not_numpy",),
        "torch's normalisations are refused, F.batch_norm included (the course's rule)": ("library_call",),
    },
    "layer_norm_backward": {
        "dbeta and dgamma summed over every axis but the last, shape [D]": ("dgamma_not_summed",),
        "dgamma = Σ dout · x̂": ("dgamma_no_xhat",),
        "dx̂ = dout · gamma": ("dx_no_gamma",),
        "dx = (dx̂ - mean(dx̂) - x̂·mean(dx̂·x̂)) / σ̂, means over the last axis":
            ("bwd_no_mean_term", "bwd_no_projection_term"),
        "μ, σ̂ = sqrt(σ² + ε) and x̂ recomputed from x as the forward pass has them (biased "
        "variance, ε inside the root)": ("bwd_no_eps", "ln_eps_outside", "ln_unbiased_var"),
        "with the eps it is given (the argument, 1e-5 by default)": ("ln_eps_ignored",),
        "numpy in, numpy arrays out (the course's rule)": ("not_numpy",),
        "torch's normalisations are refused, autograd through F.layer_norm included (the course's rule)":
            ("library_call",),
        "the given LayerNormFunction and FastLayerNorm (section 7) are refused (the course's rule)":
            ("given_answer",),
    },
    "LayerNorm": {
        "nn.Parameters named exactly weight and bias, of shape [d_model]": ("ln_param_names",),
        "weight (γ) initialised to ones, bias (β) to zeros": ("ln_param_init",),
        "normalise over the last axis": ("ln_wrong_axis",),
        "the biased variance (not x.var()'s default)": ("ln_unbiased_var",),
        "ε inside the square root": ("ln_eps_outside",),
        "returns weight * x̂ + bias": ("ln_no_affine",),
        "stores the constructor's eps and uses it": ("ln_eps_ignored",),
        "vectorised torch operations, no Python loops": ("ln_python_loop",),
        "F.layer_norm and nn.LayerNorm are refused": ("library_call",),
        "the given LayerNormFunction and FastLayerNorm (section 7) are refused (the course's rule)":
            ("given_answer",),
    },
}

# The notebook's given code that computes an exercise (section 7's hand-written backward pass):
# refused while these exercises are graded (grader.testkit.parts.judged_alone; issue 49).
# (literals: release's leak scan reads them with ast.literal_eval)
GIVEN_ANSWERS = {
    "layer_norm": ("LayerNormFunction", "FastLayerNorm"),
    "layer_norm_backward": ("LayerNormFunction", "FastLayerNorm"),
    "LayerNorm": ("LayerNormFunction", "FastLayerNorm"),
}

TIGHT: Tolerance = {"atol": 1e-9, "rtol": 1e-7}                   # numpy exercises: float64
LOOSE: Tolerance = {"atol": 1e-3, "rtol": 1e-3}                   # where eps's placement must not count
F32: Tolerance = {"atol": 2e-5, "rtol": 1e-4}

# torch's normalisations, refused in the numpy exercises (each can compute the other's axes)
NUMPY_FORBID = ("torch.nn.functional.layer_norm", "torch.layer_norm", "torch.native_layer_norm",
                "torch.nn.functional.batch_norm", "torch.batch_norm", "torch.native_batch_norm",
                "torch.nn.functional.instance_norm", "torch.instance_norm",
                "torch.nn.functional.group_norm", "torch.group_norm")


def call_numpy(sub, name, *args, **kwargs):
    """The numpy exercise ``name`` called without torch's normalisations; every array it
    returns must be numpy's (as in lessons 01 and 02: not_numpy costs the exercise's checks)."""
    result = sub.call(name, *args, forbid=NUMPY_FORBID, **kwargs)
    numpy_only(name, *(result if name == "layer_norm_backward" and isinstance(result, (tuple, list)) else (result,)))
    return result


def data(n):
    """x3 [2, 3, 8], x2 [5, 6], their gammas and betas, and flat [3, 4, 8] (features that
    barely vary), for this grading run."""
    r = rng(n)
    return {"x3": r.normal(size=(2, 3, 8)) * 2.0 + 0.5, "x2": r.normal(size=(5, 6)) * 3.0 - 1.0,
            "g8": r.normal(size=8), "b8": r.normal(size=8), "g6": r.normal(size=6),
            "b6": r.normal(size=6), "flat": r.normal(size=(3, 4, 8)) * 1e-3}


def norm(x, gamma, beta, eps=1e-5, axes=(-1,), ddof=0, eps_outside=False, affine=True):
    """Normalisation over ``axes`` with the common mistakes as options (float64)."""
    x = np.asarray(x, dtype=np.float64)
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).sum(axis=axes, keepdims=True) / (np.prod([x.shape[a] for a in axes]) - ddof)
    with np.errstate(all="ignore"):
        x_hat = (x - mean) / (np.sqrt(var) + eps if eps_outside else np.sqrt(var + eps))
    return gamma * x_hat + beta if affine else x_hat


def ln_suspects(x, gamma, beta, eps=1e-5, given_eps=True):
    return [
        suspect("ln_unbiased_var", norm(x, gamma, beta, eps, ddof=1),
                msg("the variance is divided by D - 1 (unbiased): layer norm uses the biased variance, the mean of the squared deviations (np.var's default, ddof=0)")),
        suspect("ln_eps_outside", norm(x, gamma, beta, eps, eps_outside=True),
                msg("eps is added outside the square root: divide by sqrt(var + eps), not by sqrt(var) + eps (it shows on tokens whose features barely vary)")),
        suspect("ln_wrong_axis", norm(x, gamma, beta, eps, axes=(0,)),
                msg("the mean and variance are taken over the batch (axis 0): layer norm normalises each token over its own features, the last axis")),
        suspect("ln_no_affine", norm(x, gamma, beta, eps, affine=False),
                msg("gamma and beta are not applied: return gamma * x̂ + beta")),
        suspect("ln_eps_ignored", norm(x, gamma, beta, 1e-5) if given_eps and eps != 1e-5 else None,
                msg("with eps={eps} the result is that of eps = 1e-5: use the eps argument", eps=eps)),
    ]


# --- layer_norm -------------------------------------------------------------------------

def float32_probe(n):
    """Two [2, 8] inputs around 1e6 (spread ≈ 30) that float32 cannot tell apart: the first is
    the second (on float32's grid, 1/16 apart there) with every feature moved by 0.45 of that
    step, up and down in turn. Float32 rounds both to the same numbers; in float64 their layer
    norms differ by about 5e-4 at every feature."""
    step = 2.0 ** -4                                    # float32's spacing in [2^19, 2^20)
    grid = 1e6 + np.round(rng(n).normal(size=(2, 8)) * 30.0 / step) * step
    return grid + 0.45 * step * np.resize([1.0, -1.0], 8), grid


def _low_precision(a):
    if isinstance(a, np.ndarray):
        return a.dtype in (np.float32, np.float16)
    return isinstance(a, torch.Tensor) and a.dtype in (torch.float32, torch.float16, torch.bfloat16)


def computes_in_float32(sub, n=30):
    """Whether layer_norm rounds its input to float32: it returns a float32 array, or the same
    output, right to float32's precision, for two inputs that differ only beyond float32's
    precision (``float32_probe``), whose layer norms differ in float64."""
    x, grid = float32_probe(n)
    ones, zeros = np.ones(8), np.zeros(8)
    got, got_grid = (call_numpy(sub, "layer_norm", a, ones, zeros) for a in (x, grid))
    if _low_precision(got) or _low_precision(got_grid):
        return True
    want, want_grid = norm(x, 1.0, 0.0), norm(grid, 1.0, 0.0)
    return (matches(got, got_grid, atol=1e-9, rtol=0) and matches(got, want, atol=0.1, rtol=0)
            and not matches(want, want_grid, atol=1e-4, rtol=0))


FLOAT32_HINT = (msg("layer_norm computes in float32: its result is float32, or it gives the same result for two inputs that differ only after their 7th significant digit, which float64 tells apart; keep numpy's float64 (no astype(np.float32), no float32 tensors)"))


def close_f64(sub, got, want, message, suspects):
    """``close`` to float64 precision; a float32 computation that is right to float32's precision
    passes here, charged once by test_layer_norm_biased_variance."""
    if not matches(got, want, **TIGHT) and matches(got, want, **F32) and computes_in_float32(sub):
        return
    close(got, want, message, suspects=suspects, **TIGHT)


@exercise("layer_norm", points=1)
def test_layer_norm_matches_torch(sub):
    d = data(1)
    for x, g, b, what in ((d["x3"], d["g8"], d["b8"], msg("a [2, 3, 8] batch")), (d["x2"], d["g6"], d["b6"], msg("a [5, 6] input"))):
        close(call_numpy(sub, "layer_norm", x, g, b), norm(x, g, b), msg("layer_norm of {what} should normalise each token's features (the last axis), then scale by gamma and shift by beta", what=what), suspects=ln_suspects(x, g, b), **LOOSE)


@exercise("layer_norm", points=0.5)
def test_layer_norm_biased_variance(sub):
    x = rng(2).normal(size=(1, 4)) * 2.0
    got = call_numpy(sub, "layer_norm", x, np.ones(4), np.zeros(4), eps=0.0)
    check(not computes_in_float32(sub), FLOAT32_HINT, mistake="ln_float32")
    close(got, norm(x, 1.0, 0.0, 0.0), msg("layer_norm of one token of 4 features with eps=0 should be (x - mean) / std with the biased std"), suspects=ln_suspects(x, 1.0, 0.0, 0.0, given_eps=False),
          **TIGHT)


@exercise("layer_norm", points=1)
def test_layer_norm_eps_inside_sqrt(sub):
    d = data(3)
    ones, zeros = np.ones(8), np.zeros(8)
    close_f64(sub, call_numpy(sub, "layer_norm", d["flat"], ones, zeros), norm(d["flat"], ones, zeros),
              msg("for tokens whose features barely vary (variance ≈ 1e-6) the result depends on where eps goes"), ln_suspects(d["flat"], ones, zeros))


@exercise("layer_norm", points=0.5)
def test_layer_norm_eps_argument(sub):
    d = data(4)
    x, g, b = d["x2"], d["g6"], d["b6"]
    got = call_numpy(sub, "layer_norm", x, g, b, eps=0.5)
    if not matches(got, norm(x, g, b, 0.5, eps_outside=True), **F32):  # eps's place counts elsewhere
        close_f64(sub, got, norm(x, g, b, 0.5), msg("with eps=0.5 the result should change"),
                  ln_suspects(x, g, b, 0.5))


# --- batch_norm -------------------------------------------------------------------------

def bn_suspects(x, gamma, beta, eps=1e-5):
    every = tuple(range(x.ndim - 1))
    return [
        suspect("bn_last_axis", norm(x, gamma, beta, eps, axes=(-1,)),
                msg("batch_norm normalises each token over its features: that is layer norm; batch norm normalises each feature over the batch (every axis but the last)")),
        suspect("bn_axis0_only", norm(x, gamma, beta, eps, axes=(0,)) if x.ndim > 2 else None,
                msg("for [B, L, D] each feature gets one mean and variance over the batch AND the length axes (every axis but the last), not over axis 0 only")),
        suspect("bn_unbiased_var", norm(x, gamma, beta, eps, axes=every, ddof=1),
                msg("the variance is divided by N - 1 (unbiased): batch norm in training mode uses the biased variance (np.var's default)")),
        suspect("ln_eps_outside", norm(x, gamma, beta, eps, axes=every, eps_outside=True),
                msg("eps is added outside the square root: batch norm divides by sqrt(var + eps), as layer norm does, not by sqrt(var) + eps")),
        suspect("ln_no_affine", norm(x, gamma, beta, eps, axes=every, affine=False),
                msg("gamma and beta are not applied: return gamma * x̂ + beta")),
        suspect("ln_eps_ignored", norm(x, gamma, beta, 1e-5, axes=every) if eps != 1e-5 else None,
                msg("with eps={eps} the result is that of eps = 1e-5: use the eps argument", eps=eps)),
    ]


@exercise("batch_norm", points=0.5)
def test_batch_norm_2d(sub):
    d = data(5)
    got = call_numpy(sub, "batch_norm", d["x2"], d["g6"], d["b6"])
    close(got, norm(d["x2"], d["g6"], d["b6"], axes=(0,)),
          msg("batch_norm of a [5, 6] input should normalise each feature (column) over the batch"),
          suspects=bn_suspects(d["x2"], d["g6"], d["b6"]), **TIGHT)


@exercise("batch_norm", points=1)
def test_batch_norm_3d(sub):
    d = data(6)
    close(call_numpy(sub, "batch_norm", d["x3"], d["g8"], d["b8"]), norm(d["x3"], d["g8"], d["b8"], axes=(0, 1)),
          msg("batch_norm of a [B, L, D] batch should normalise each feature over every axis but the last"), suspects=bn_suspects(d["x3"], d["g8"], d["b8"]), **TIGHT)


@exercise("batch_norm", points=0.5)
def test_batch_norm_matches_torch(sub):
    x = rng(7).normal(size=(4, 5, 6)) * 1.5 + 2.0
    g, b = rng(8).normal(size=6), rng(9).normal(size=6)
    t = torch.from_numpy(x).movedim(-1, 1)
    want = F.batch_norm(t, None, None, torch.from_numpy(g), torch.from_numpy(b), training=True).movedim(1, -1)
    close(call_numpy(sub, "batch_norm", x, g, b), want, msg("batch_norm should equal torch's batch_norm in training mode"), suspects=bn_suspects(x, g, b), **TIGHT)
    # the eps argument: the formula's own eps (its place is judged above)
    want = F.batch_norm(t, None, None, torch.from_numpy(g), torch.from_numpy(b), training=True, eps=0.5).movedim(1, -1)
    close(call_numpy(sub, "batch_norm", x, g, b, eps=0.5), want, msg("with eps=0.5 the result should change"),
          suspects=bn_suspects(x, g, b, 0.5), **TIGHT)


# --- layer_norm_backward ----------------------------------------------------------------

def backward_parts(dout, x, gamma, eps=1e-5, *, mistake=None):
    """(dx, dgamma, dbeta), with one of the common mistakes."""
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).sum(-1, keepdims=True) / (x.shape[-1] - (mistake == "ln_unbiased_var"))
    sigma = {"bwd_no_eps": lambda: np.sqrt(var), "ln_eps_outside": lambda: np.sqrt(var) + eps}.get(
        mistake, lambda: np.sqrt(var + eps))()
    inv = 1.0 / sigma
    x_hat = (x - mean) * inv
    tokens = 0 if mistake == "dgamma_not_summed" else tuple(range(x.ndim - 1))
    dbeta = dout.sum(axis=tokens)
    dgamma = dout.sum(axis=tokens) if mistake == "dgamma_no_xhat" else (dout * x_hat).sum(axis=tokens)
    dx_hat = dout if mistake == "dx_no_gamma" else dout * gamma
    dx = dx_hat
    if mistake != "bwd_no_mean_term":
        dx = dx - dx_hat.mean(-1, keepdims=True)
    if mistake != "bwd_no_projection_term":
        dx = dx - x_hat * (dx_hat * x_hat).mean(-1, keepdims=True)
    return dx * inv, dgamma, dbeta


BACKWARD_HINTS = {
    "bwd_no_projection_term": msg("dx lacks the -x̂·mean(dx̂·x̂) term: scaling a token's features does not change layer_norm, so dx must be orthogonal to x̂ within each token"),
    "bwd_no_mean_term": msg("dx lacks the -mean(dx̂) term: adding a constant to a token's features does not change layer_norm, so dx must sum to 0 over each token"),
    "dgamma_no_xhat": msg("dgamma is dout summed: gamma multiplies x̂, so dgamma = (dout · x̂) summed over every axis but the last"),
    "dgamma_not_summed": msg("dgamma and dbeta are summed over axis 0 only: sum over every axis but the last (batch and length), one number per feature"),
    "dx_no_gamma": msg("dx̂ should be dout · gamma (the output is gamma · x̂ + beta): gamma is missing"),
    "bwd_no_eps": msg("σ̂ leaves eps out: the forward pass divides by sqrt(var + eps), so x̂ and dx use σ̂ = sqrt(var + eps) too"),
    "ln_unbiased_var": msg("the variance is divided by D - 1 (unbiased): the forward pass uses the biased variance (ddof=0, np.var's default), so x̂ and σ̂ must too"),
    "ln_eps_outside": msg("eps is added outside the square root: σ̂ = sqrt(var + eps), as in the forward pass, not sqrt(var) + eps"),
}


def _triple(result):
    check(isinstance(result, (tuple, list)) and len(result) == 3,
          msg("layer_norm_backward should return three arrays (dx, dgamma, dbeta)"))
    return result


def _backward(sub, dout, x, gamma, eps):
    return _triple(call_numpy(sub, "layer_norm_backward", dout, x, gamma, eps=eps))


def backward_cases():
    """(dout, x, gamma, eps, where) of this grading run."""
    d = data(10)
    return [(rng(11).normal(size=(5, 6)), d["x2"], d["g6"], 1e-5, msg(" of a [5, 6] input")),
            (rng(12).normal(size=(2, 3, 8)), d["x3"], d["g8"], 1e-5, msg(" of a [2, 3, 8] batch")),
            (rng(13).normal(size=(5, 6)), d["x2"], d["g6"], 0.3, msg(" with eps=0.3"))]


def autograd_backward(dout, x, gamma, eps):
    xt = torch.tensor(x, requires_grad=True)
    gt = torch.tensor(gamma, requires_grad=True)
    bt = torch.zeros(x.shape[-1], dtype=torch.float64, requires_grad=True)
    F.layer_norm(xt, (x.shape[-1],), gt, bt, eps).backward(torch.from_numpy(dout))
    assert xt.grad is not None and gt.grad is not None and bt.grad is not None
    return xt.grad.numpy(), gt.grad.numpy(), bt.grad.numpy()


def _check_part(sub, i, name, text):
    """Judge part ``i`` of every case; returns the last case's (dx, dgamma, dbeta)."""
    for dout, x, gamma, eps, where in backward_cases():
        parts = _backward(sub, dout, x, gamma, eps)
        got = parts[i]
        close(got, autograd_backward(dout, x, gamma, eps)[i], msg("{name}{where} should be {text} (as autograd through F.layer_norm gives)", name=name, where=where, text=text), **TIGHT,
              suspects=[suspect(m, (lambda m=m, case=(dout, x, gamma, eps): backward_parts(*case, mistake=m)[i]),
                                BACKWARD_HINTS[m]) for m in BACKWARD_HINTS]
              + [suspect("ln_eps_ignored", backward_parts(dout, x, gamma)[i] if eps != 1e-5 else None,
                         msg("with eps={eps} the result is that of eps = 1e-5: use the eps argument", eps=eps))])
    return parts


@exercise("layer_norm_backward", points=0.5)
def test_backward_dbeta(sub):
    _check_part(sub, 2, "dbeta", msg("dout summed over every axis but the last (one number per feature)"))


@exercise("layer_norm_backward", points=1)
def test_backward_dgamma(sub):
    _check_part(sub, 1, "dgamma", msg("(dout · x̂) summed over every axis but the last"))


@exercise("layer_norm_backward", points=1.5)
def test_backward_dx(sub):
    _check_part(sub, 0, "dx", msg("(dx̂ - mean(dx̂) - x̂·mean(dx̂·x̂)) / sqrt(var + eps) with dx̂ = dout · gamma, means over the last axis"))


# --- LayerNorm (torch) ------------------------------------------------------------------

FORBID = NUMPY_FORBID  # the same: any of torch's normalisations computes a layer norm


def _layer_norm_module(sub, d_model=8, **kwargs):
    m = sub.new("LayerNorm", d_model, **kwargs)
    info = m.inspect()
    check(info.get("is_module"), msg("LayerNorm should be an nn.Module (class LayerNorm(nn.Module))"))
    try:  # a module built on the library reveals itself before its parameter names do
        m(torch.zeros(1, d_model), forbid=FORBID)
    except SubmissionError as exc:
        if exc.exc_type == "ForbiddenCall":
            raise
    params = info["parameters"]
    check(set(params) == {"weight", "bias"},
          msg("LayerNorm should have exactly two parameters named `weight` and `bias` (like nn.LayerNorm, so that weights can be loaded by name), found {params}", params=sorted(params) or 'none'),
          mistake="ln_param_names")
    return m, params


def t32(a):
    return torch.from_numpy(np.asarray(a)).float()


def module_suspects(x, gamma, beta, eps=1e-5, given_eps=False):
    x = np.asarray(x, dtype=np.float64)
    return [s for s in ln_suspects(x, np.asarray(gamma, dtype=np.float64), np.asarray(beta, dtype=np.float64),
                                   eps, given_eps)]


@exercise("LayerNorm", points=0.5)
def test_module_parameters(sub):
    m, params = _layer_norm_module(sub, 8)
    shaped = all(tuple(params[k].shape) == (8,) for k in ("weight", "bias"))  # else a symptom
    close(params["weight"], torch.ones(8), msg("`weight` (the gain γ) should start as ones, shape [d_model]"),
          mistake="ln_param_init" if shaped else None)
    close(params["bias"], torch.zeros(8), msg("`bias` (β) should start as zeros, shape [d_model]"),
          mistake="ln_param_init" if shaped else None)
    m.eval()
    x = t32(data(20)["x3"])
    close(m(x, forbid=FORBID), F.layer_norm(x, (8,)), msg("with its initial weight = 1 and bias = 0, LayerNorm should normalise each token's features (the last axis)"),
          suspects=module_suspects(x.double().numpy(), 1.0, 0.0), **F32)
    # vectorised: as many lines of the student's Python for 24 tokens of 24 features as for 1
    # token of 8 (each module has run once before it is counted: a first call's set-up is not)
    wide, x_wide = sub.new("LayerNorm", 24).eval(), t32(rng(27).normal(size=(4, 6, 24)))
    wide(x_wide, forbid=FORBID)
    x_small = t32(rng(26).normal(size=(1, 1, 8)))
    small = python_lines(sub, lambda: m(x_small, forbid=FORBID))
    large = python_lines(sub, lambda: wide(x_wide, forbid=FORBID))
    check(large <= small + 2, msg("LayerNorm's forward loops in Python: it runs {large} lines of Python on a [4, 6, 24] input and {small} on a [1, 1, 8] one, where vectorised code runs the same few on any shape; normalise every token at once, over the last axis (mean(dim=-1, keepdim=True)), with no loop over the tokens or the features", large=large, small=small), mistake="ln_python_loop")


@exercise("LayerNorm", points=1)
def test_module_matches_torch_with_weights(sub):
    m, _ = _layer_norm_module(sub, 8)
    d = data(21)
    w, b, x = t32(d["g8"]), t32(d["b8"]), t32(d["x3"])
    m.load_state_dict({"weight": w, "bias": b})
    m.eval()
    for inp, what in ((x, "[2, 3, 8]"), (x[0], "[3, 8]")):
        close(m(inp, forbid=FORBID), F.layer_norm(inp, (8,), w, b), msg("LayerNorm with loaded weights should equal weight * x̂ + bias, x̂ normalised over the last axis, for any shape [..., d_model] such as {what}", what=what),
              suspects=module_suspects(inp.double().numpy(), w.double().numpy(), b.double().numpy()),
              **F32)


@exercise("LayerNorm", points=1)
def test_module_eps(sub):
    m, _ = _layer_norm_module(sub, 8)
    m.load_state_dict({"weight": torch.ones(8), "bias": torch.zeros(8)})  # their start is judged apart
    m.eval()
    flat = t32(data(22)["flat"])
    close(m(flat, forbid=FORBID), F.layer_norm(flat, (8,)), msg("for tokens whose features barely vary (variance ≈ 1e-6) the result depends on where eps goes"),
          suspects=module_suspects(flat.double().numpy(), 1.0, 0.0), **F32)
    m2, _ = _layer_norm_module(sub, 8, eps=0.5)
    m2.load_state_dict({"weight": torch.ones(8), "bias": torch.zeros(8)})
    m2.eval()
    x = t32(data(23)["x3"])
    got = m2(x, forbid=FORBID)
    if matches(got, norm(x.double().numpy(), 1.0, 0.0, 0.5, eps_outside=True), **F32):
        return  # eps is used; where it goes was judged above
    close(got, F.layer_norm(x, (8,), eps=0.5), msg("LayerNorm(8, eps=0.5) should use eps = 0.5"),
          suspects=module_suspects(x.double().numpy(), 1.0, 0.0, 0.5, given_eps=True)
          + [suspect("ln_eps_ignored", F.layer_norm(x, (8,)), msg("LayerNorm(8, eps=0.5) uses eps = 1e-5: store the constructor's eps and use it in forward"))], **F32)


@exercise("LayerNorm", points=0.5)
def test_module_gradients(sub):
    m, _ = _layer_norm_module(sub, 8)
    d = data(24)
    w8, b8, x3 = t32(d["g8"]), t32(d["b8"]), t32(d["x3"])
    m.load_state_dict({"weight": w8, "bias": b8})
    g = t32(rng(25).normal(size=(2, 3, 8)))
    got = m.grad(x3, grad_output=g, forbid=FORBID)
    x = x3.clone().requires_grad_(True)
    w, b = w8.clone().requires_grad_(True), b8.clone().requires_grad_(True)
    F.layer_norm(x, (8,), w, b).backward(g)
    close(got["input_grads"][0], x.grad, msg("the gradient of LayerNorm with respect to x is wrong (autograd follows your forward: check the forward pass)"), atol=1e-4, rtol=1e-3)
    close(got["param_grads"].get("weight"), w.grad,
          msg("the gradient of `weight` is wrong: weight should multiply x̂"), atol=1e-4, rtol=1e-3)
    close(got["param_grads"].get("bias"), b.grad,
          msg("the gradient of `bias` is wrong: bias should be added after the scaling"), atol=1e-4, rtol=1e-3)
