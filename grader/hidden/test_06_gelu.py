"""Hidden graders of lesson 06_gelu (exact GELU, its tanh approximation, the derivative).

Checked in float64 against torch's own ``F.gelu`` (``approximate="none"`` / ``"tanh"``) and
autograd, with tolerances far below the 4.7e-4 gap between exact GELU and the tanh
approximation; the submission may not call ``F.gelu`` / ``nn.GELU`` itself.
"""

import math

import torch
import torch.nn.functional as F

from grader.framework import check, close, exercise

FORBID = ("torch.nn.functional.gelu",)
GRID = torch.linspace(-6.0, 6.0, 1201, dtype=torch.float64)
NEAR_GAP = torch.tensor([-2.7, -2.0, -1.5, 1.5, 2.0, 2.7, 3.5], dtype=torch.float64)
TIGHT = {"atol": 1e-9, "rtol": 1e-9}
X32 = torch.linspace(-4.0, 4.0, 24, dtype=torch.float32).reshape(2, 3, 4)


def _phi_cdf(x):
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def _tensor(y, name, like):
    check(isinstance(y, torch.Tensor), f"`{name}` should return a torch tensor, got {type(y).__name__}")
    check(tuple(y.shape) == tuple(like.shape),
          f"`{name}` should work elementwise and keep the shape {list(like.shape)}, got {list(y.shape)}")
    return y


def _float32(sub, name, expected):
    y = _tensor(sub.call(name, X32, forbid=FORBID), name, X32)
    check(y.dtype == torch.float32, f"`{name}` of a float32 tensor should be float32, got {y.dtype}")
    close(y, expected, f"`{name}` of a float32 [2, 3, 4] tensor is wrong", atol=2e-6, rtol=1e-5)


# --- gelu -------------------------------------------------------------------------------

@exercise("gelu", points=1)
def test_gelu_hand_values(sub):
    xs = [-3.0, -1.0, 0.0, 0.5, 1.0, 2.0]
    y = _tensor(sub.call("gelu", torch.tensor(xs, dtype=torch.float64), forbid=FORBID), "gelu",
                torch.zeros(len(xs)))
    close(y, [x * _phi_cdf(x) for x in xs],
          "gelu(x) = x·Φ(x) with Φ(x) = ½(1 + erf(x / √2)): gelu(1) = 0.841345, gelu(-1) = -0.158655, "
          "gelu(2) = 1.954500 (mind the √2 inside erf)", **TIGHT)


@exercise("gelu", points=1)
def test_gelu_is_exact(sub):
    y = _tensor(sub.call("gelu", GRID, forbid=FORBID), "gelu", GRID)
    check(y.dtype == torch.float64, f"gelu of a float64 tensor should stay float64, got {y.dtype}")
    gap = _tensor(sub.call("gelu", NEAR_GAP, forbid=FORBID), "gelu", NEAR_GAP)
    close(gap, F.gelu(NEAR_GAP),
          "gelu must be the exact x·Φ(x) with erf: near |x| ≈ 2.7 the tanh approximation (that is "
          "gelu_tanh) is off by 4.7e-4", atol=1e-7, rtol=1e-7)
    close(y, F.gelu(GRID), "gelu on [-6, 6] does not match exact GELU x·Φ(x)", atol=1e-7, rtol=1e-7)


@exercise("gelu", points=0.5)
def test_gelu_float32(sub):
    _float32(sub, "gelu", F.gelu(X32.double()))


@exercise("gelu", points=0.5)
def test_gelu_symmetry(sub):
    y = _tensor(sub.call("gelu", GRID, forbid=FORBID), "gelu", GRID)
    y_neg = _tensor(sub.call("gelu", -GRID, forbid=FORBID), "gelu", GRID)
    close(y - y_neg, GRID, "gelu(x) - gelu(-x) should equal x, because Φ(x) + Φ(-x) = 1",
          atol=1e-9, rtol=1e-9)
    close(y.clamp(max=0.0).min(), torch.tensor(-0.16997120747),
          "the smallest value of GELU is -0.169971 (at x ≈ -0.7518)", atol=1e-5, rtol=0)


# --- gelu_tanh --------------------------------------------------------------------------

@exercise("gelu_tanh", points=1)
def test_gelu_tanh_matches_torch(sub):
    y = _tensor(sub.call("gelu_tanh", GRID, forbid=FORBID), "gelu_tanh", GRID)
    close(y, F.gelu(GRID, approximate="tanh"),
          "gelu_tanh should be ½·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))): check the constant "
          "√(2/π), the 0.044715 and the cube x³", **TIGHT)


@exercise("gelu_tanh", points=0.5)
def test_gelu_tanh_hand_values(sub):
    xs = [-2.0, -1.0, 1.0, 2.0, 3.0]
    want = [0.5 * x * (1 + math.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))) for x in xs]
    y = _tensor(sub.call("gelu_tanh", torch.tensor(xs, dtype=torch.float64), forbid=FORBID), "gelu_tanh",
                torch.zeros(len(xs)))
    close(y, want, "gelu_tanh(2) should be 1.954598 and gelu_tanh(-2) = -0.045402: the cubic term "
          "0.044715·x³ keeps its sign for negative x (x³, not x²)", **TIGHT)


@exercise("gelu_tanh", points=0.5)
def test_gelu_tanh_float32(sub):
    _float32(sub, "gelu_tanh", F.gelu(X32.double(), approximate="tanh"))


# --- gelu_grad --------------------------------------------------------------------------

def _autograd_gelu(x):
    x = x.detach().clone().requires_grad_(True)
    F.gelu(x).sum().backward()
    return x.grad


@exercise("gelu_grad", points=1)
def test_gelu_grad_matches_autograd(sub):
    y = _tensor(sub.call("gelu_grad", GRID, forbid=FORBID), "gelu_grad", GRID)
    close(y, _autograd_gelu(GRID),
          "gelu_grad should be Φ(x) + x·φ(x), with φ(x) = exp(-x²/2) / √(2π) the normal density "
          "(product rule on x·Φ(x)); it does not match autograd", **TIGHT)


@exercise("gelu_grad", points=0.5)
def test_gelu_grad_hand_values(sub):
    xs = [0.0, 1.0, -1.0, 2.0]
    pdf = [math.exp(-x * x / 2) / math.sqrt(2 * math.pi) for x in xs]
    want = [_phi_cdf(x) + x * p for x, p in zip(xs, pdf, strict=True)]
    y = _tensor(sub.call("gelu_grad", torch.tensor(xs, dtype=torch.float64), forbid=FORBID), "gelu_grad",
                torch.zeros(len(xs)))
    close(y, want, "GELU'(0) = 0.5, GELU'(1) = Φ(1) + φ(1) = 1.083315, GELU'(-1) = -0.083315: "
          "both terms, and the 1/√(2π) of the density", **TIGHT)


@exercise("gelu_grad", points=0.5)
def test_gelu_grad_float32(sub):
    _float32(sub, "gelu_grad", _autograd_gelu(X32.double()))
