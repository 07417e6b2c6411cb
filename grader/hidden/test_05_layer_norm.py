"""Hidden graders of lesson 05_layer_norm (numpy layer_norm, batch_norm, backward; torch LayerNorm).

Oracles are torch built-ins in float64 (``F.layer_norm``, ``F.batch_norm``, autograd); the
inputs are fixed arrays, so nothing depends on a random seed of the submission.
"""

import numpy as np
import torch
import torch.nn.functional as F

from grader.framework import check, close, exercise

RNG = np.random.default_rng(20170612)
X3 = RNG.normal(size=(2, 3, 8)) * 2.0 + 0.5          # [B, L, D]
X2 = RNG.normal(size=(5, 6)) * 3.0 - 1.0              # [B, D]
GAMMA8, BETA8 = RNG.normal(size=8), RNG.normal(size=8)
GAMMA6, BETA6 = RNG.normal(size=6), RNG.normal(size=6)
FLAT = RNG.normal(size=(3, 4, 8)) * 1e-3               # tokens whose features barely vary
TIGHT = {"atol": 1e-9, "rtol": 1e-7}                   # numpy exercises: float64


def ref_layer_norm(x, gamma, beta, eps=1e-5):
    t = torch.from_numpy(np.asarray(x, dtype=np.float64))
    return F.layer_norm(t, (t.shape[-1],), torch.from_numpy(gamma), torch.from_numpy(beta), eps).numpy()


def ref_batch_norm(x, gamma, beta, eps=1e-5):
    t = torch.from_numpy(np.asarray(x, dtype=np.float64))
    if t.ndim > 2:  # F.batch_norm wants the features on axis 1
        t = t.movedim(-1, 1)
    y = F.batch_norm(t, None, None, torch.from_numpy(gamma), torch.from_numpy(beta), training=True, eps=eps)
    return (y.movedim(1, -1) if y.ndim > 2 else y).numpy()


# --- layer_norm -------------------------------------------------------------------------

@exercise("layer_norm", points=1)
def test_layer_norm_matches_torch(sub):
    close(sub.call("layer_norm", X3, GAMMA8, BETA8), ref_layer_norm(X3, GAMMA8, BETA8),
          "layer_norm of a [2, 3, 8] batch is wrong: normalise each token's 8 features (the last "
          "axis) with their own mean and biased variance, then multiply by gamma and add beta",
          **TIGHT)
    close(sub.call("layer_norm", X2, GAMMA6, BETA6), ref_layer_norm(X2, GAMMA6, BETA6),
          "layer_norm of a [5, 6] input is wrong: each row is normalised on its own, then scaled "
          "by gamma and shifted by beta", **TIGHT)


@exercise("layer_norm", points=0.5)
def test_layer_norm_each_token(sub):
    y = np.asarray(sub.call("layer_norm", X3, np.ones(8), np.zeros(8)), dtype=np.float64)
    close(y.mean(axis=-1) if y.shape == X3.shape else y, np.zeros((2, 3)),
          "with gamma = 1 and beta = 0 every token's features should have mean 0: normalise over "
          "the last axis (axis=-1, keepdims=True), not over the batch", atol=1e-9)


@exercise("layer_norm", points=0.5)
def test_layer_norm_biased_variance(sub):
    x = np.array([[1.0, 2.0, 3.0, 4.0]])
    close(sub.call("layer_norm", x, np.ones(4), np.zeros(4), eps=0.0), (x - 2.5) / np.sqrt(1.25),
          "layer_norm([1, 2, 3, 4]) with eps=0 should be (x - 2.5) / sqrt(1.25): the variance is "
          "the biased one, dividing by D (1.25 here), not by D - 1", **TIGHT)


@exercise("layer_norm", points=1)
def test_layer_norm_eps_inside_sqrt(sub):
    close(sub.call("layer_norm", FLAT, np.ones(8), np.zeros(8)), ref_layer_norm(FLAT, np.ones(8), np.zeros(8)),
          "for tokens whose features barely vary (variance ≈ 1e-6) the result depends on where eps "
          "goes: divide by sqrt(var + eps), not by sqrt(var) + eps", **TIGHT)
    close(sub.call("layer_norm", X2, GAMMA6, BETA6, eps=0.5), ref_layer_norm(X2, GAMMA6, BETA6, eps=0.5),
          "with eps=0.5 the result should change: use the `eps` argument, inside the square root",
          **TIGHT)


# --- batch_norm -------------------------------------------------------------------------

@exercise("batch_norm", points=0.5)
def test_batch_norm_2d(sub):
    close(sub.call("batch_norm", X2, GAMMA6, BETA6), ref_batch_norm(X2, GAMMA6, BETA6),
          "batch_norm of a [5, 6] input: normalise each feature (column) over the batch (axis 0) "
          "with the biased variance, then scale by gamma and shift by beta", **TIGHT)


@exercise("batch_norm", points=1)
def test_batch_norm_3d(sub):
    close(sub.call("batch_norm", X3, GAMMA8, BETA8), ref_batch_norm(X3, GAMMA8, BETA8),
          "batch_norm of a [B, L, D] batch: each feature gets one mean and one variance over the "
          "batch AND the length axes (every axis but the last), not over axis 0 only", **TIGHT)


@exercise("batch_norm", points=0.5)
def test_batch_norm_feature_statistics(sub):
    y = np.asarray(sub.call("batch_norm", X3, np.ones(8), np.zeros(8), eps=0.0), dtype=np.float64)
    check(y.shape == X3.shape, f"batch_norm must keep the shape of x {list(X3.shape)}, got {list(y.shape)}")
    close(y.mean(axis=(0, 1)), np.zeros(8),
          "with gamma = 1, beta = 0 every feature should have mean 0 over all the tokens of the "
          "batch: normalise over every axis but the last, not over the features", atol=1e-9)
    close(y.var(axis=(0, 1)), np.ones(8),
          "with gamma = 1, beta = 0, eps = 0 every feature should have variance 1 over all the "
          "tokens of the batch (biased variance, over every axis but the last)", atol=1e-9)


# --- layer_norm_backward ----------------------------------------------------------------

def ref_backward(dout, x, gamma, eps=1e-5):
    xt = torch.tensor(x, requires_grad=True)
    gt = torch.tensor(gamma, requires_grad=True)
    bt = torch.zeros(x.shape[-1], dtype=torch.float64, requires_grad=True)
    F.layer_norm(xt, (x.shape[-1],), gt, bt, eps).backward(torch.from_numpy(dout))
    return xt.grad.numpy(), gt.grad.numpy(), bt.grad.numpy()


def _triple(result):
    check(isinstance(result, (tuple, list)) and len(result) == 3,
          "layer_norm_backward should return three arrays (dx, dgamma, dbeta)")
    return result


def _check_backward(sub, dout, x, gamma, eps=1e-5, where=""):
    dx, dgamma, dbeta = _triple(sub.call("layer_norm_backward", dout, x, gamma, eps=eps))
    rdx, rdgamma, rdbeta = ref_backward(dout, x, gamma, eps)
    close(dbeta, rdbeta, f"dbeta{where} should be dout summed over every axis but the last "
          f"(one number per feature)", **TIGHT)
    close(dgamma, rdgamma, f"dgamma{where} should be (dout · x̂) summed over every axis but the "
          f"last: gamma multiplies x̂, so its gradient carries x̂", **TIGHT)
    close(dx, rdx, f"dx{where} does not match autograd: dx = (dx̂ - mean(dx̂) - x̂·mean(dx̂·x̂)) "
          f"/ sqrt(var + eps) with dx̂ = dout · gamma, means over the last axis", **TIGHT)


@exercise("layer_norm_backward", points=1)
def test_backward_2d(sub):
    rng = np.random.default_rng(5)
    _check_backward(sub, rng.normal(size=(5, 6)), X2, GAMMA6, where=" of a [5, 6] input")


@exercise("layer_norm_backward", points=1)
def test_backward_3d(sub):
    rng = np.random.default_rng(6)
    _check_backward(sub, rng.normal(size=X3.shape), X3, GAMMA8, where=" of a [2, 3, 8] batch")
    _check_backward(sub, rng.normal(size=X2.shape), X2, GAMMA6, eps=0.3, where=" with eps=0.3")


@exercise("layer_norm_backward", points=1)
def test_backward_invariances(sub):
    rng = np.random.default_rng(7)
    dout = rng.normal(size=X3.shape)
    dx, _, _ = _triple(sub.call("layer_norm_backward", dout, X3, GAMMA8, eps=0.0))
    dx = np.asarray(dx, dtype=np.float64)
    check(dx.shape == X3.shape, f"dx must have the shape of x {list(X3.shape)}, got {list(dx.shape)}")
    close(dx.sum(axis=-1), np.zeros((2, 3)),
          "adding a constant to every feature of a token does not change layer_norm, so dx must "
          "sum to 0 over each token's features: did you drop the -mean(dx̂) term?", atol=1e-9)
    xc = X3 - X3.mean(axis=-1, keepdims=True)
    close((dx * xc).sum(axis=-1), np.zeros((2, 3)),
          "scaling a token's features (with eps = 0) does not change layer_norm, so dx must be "
          "orthogonal to x̂ within each token: did you drop the x̂·mean(dx̂·x̂) term?", atol=1e-9)


# --- LayerNorm (torch) ------------------------------------------------------------------

FORBID = ("torch.nn.functional.layer_norm", "torch.layer_norm")
T3 = torch.from_numpy(X3).float()
W8 = torch.from_numpy(GAMMA8).float()
B8 = torch.from_numpy(BETA8).float()
TFLAT = torch.from_numpy(FLAT).float()
F32 = {"atol": 2e-5, "rtol": 1e-4}


def _layer_norm_module(sub, d_model=8, **kwargs):
    m = sub.new("LayerNorm", d_model, **kwargs)
    info = m.inspect()
    check(info.get("is_module"), "LayerNorm should be an nn.Module (class LayerNorm(nn.Module))")
    params = info["parameters"]
    check(set(params) == {"weight", "bias"},
          f"LayerNorm should have exactly two parameters named `weight` and `bias` (like "
          f"nn.LayerNorm, so that weights can be loaded by name), found {sorted(params) or 'none'}")
    return m, params


@exercise("LayerNorm", points=0.5)
def test_module_parameters(sub):
    m, params = _layer_norm_module(sub, 8)
    close(params["weight"], torch.ones(8), "`weight` (the gain γ) should start as ones, shape [d_model]")
    close(params["bias"], torch.zeros(8), "`bias` (β) should start as zeros, shape [d_model]")
    m.eval()
    y = m(T3, forbid=FORBID)
    close(y, F.layer_norm(T3, (8,)), "with its initial weight = 1 and bias = 0, LayerNorm should "
          "normalise each token's features (the last axis)", **F32)


@exercise("LayerNorm", points=1)
def test_module_matches_torch_with_weights(sub):
    m, _ = _layer_norm_module(sub, 8)
    m.load_state_dict({"weight": W8, "bias": B8})
    m.eval()
    close(m(T3, forbid=FORBID), F.layer_norm(T3, (8,), W8, B8),
          "LayerNorm with loaded weights should equal weight * x̂ + bias, with x̂ normalised over "
          "the last axis using the biased variance (x.var() is unbiased by default: use "
          "unbiased=False or the mean of squared deviations)", **F32)
    x2 = T3[0]
    close(m(x2, forbid=FORBID), F.layer_norm(x2, (8,), W8, B8),
          "LayerNorm should work on any shape [..., d_model], e.g. [3, 8]: normalise over the last "
          "axis, never over the batch", **F32)


@exercise("LayerNorm", points=1)
def test_module_eps(sub):
    m, _ = _layer_norm_module(sub, 8)
    m.eval()
    close(m(TFLAT, forbid=FORBID), F.layer_norm(TFLAT, (8,)),
          "for tokens whose features barely vary (variance ≈ 1e-6) the result depends on where eps "
          "goes: divide by sqrt(var + eps), not by sqrt(var) + eps", **F32)
    m2, _ = _layer_norm_module(sub, 8, eps=0.5)
    m2.eval()
    close(m2(T3, forbid=FORBID), F.layer_norm(T3, (8,), eps=0.5),
          "LayerNorm(8, eps=0.5) should use eps = 0.5 (store the constructor's eps)", **F32)


@exercise("LayerNorm", points=0.5)
def test_module_gradients(sub):
    m, _ = _layer_norm_module(sub, 8)
    m.load_state_dict({"weight": W8, "bias": B8})
    g = torch.from_numpy(np.random.default_rng(8).normal(size=X3.shape)).float()
    got = m.grad(T3, grad_output=g, forbid=FORBID)
    x = T3.clone().requires_grad_(True)
    w, b = W8.clone().requires_grad_(True), B8.clone().requires_grad_(True)
    F.layer_norm(x, (8,), w, b).backward(g)
    close(got["input_grads"][0], x.grad, "the gradient of LayerNorm with respect to x is wrong "
          "(autograd follows your forward: check the forward pass)", atol=1e-4, rtol=1e-3)
    close(got["param_grads"].get("weight"), w.grad,
          "the gradient of `weight` is wrong: weight should multiply x̂", atol=1e-4, rtol=1e-3)
    close(got["param_grads"].get("bias"), b.grad,
          "the gradient of `bias` is wrong: bias should be added after the scaling", atol=1e-4, rtol=1e-3)
