"""Hidden graders of lesson 06_gelu (exact GELU, its tanh approximation, the derivative).

Checked in float64 against torch's own ``F.gelu`` (``approximate="none"`` / ``"tanh"``) and
autograd, with tolerances far below the 4.7e-4 gap between exact GELU and the tanh
approximation, on points drawn afresh for every grading run; the submission may not call
``F.gelu`` / ``nn.GELU`` itself. A wrong answer is compared with the formulas of the common
mistakes (``suspect``): the one it matches is the hint.
"""

import math

import torch
import torch.nn.functional as F

from grader.runtime.errors import SubmissionError
from grader.testkit.framework import Tolerance, check, close, diagnose, exercise, gen, msg, suspect

MISTAKES = {
    "gelu_is_tanh": "gelu computes the tanh approximation instead of x·Φ(x)",
    "erf_without_sqrt2": "Φ(x) computed as ½(1 + erf(x)) instead of ½(1 + erf(x / √2))",
    "gelu_sigmoid": "gelu computes the sigmoid approximation x·σ(1.702x)",
    "gelu_no_x": "gelu returns Φ(x) without the factor x",
    "dtype_changed": "a float64 input comes back in another dtype",
    "not_elementwise": "the function handles a 1-D tensor only: it fails on, or reshapes, a tensor of another shape",
    "tanh_no_cubic": "the tanh approximation lacks the 0.044715·x³ term",
    "tanh_square": "the tanh approximation uses x² instead of x³",
    "tanh_sqrt_2pi": "the tanh approximation uses √(2π) instead of √(2/π)",
    "grad_cdf_only": "gelu_grad returns Φ(x) without the x·φ(x) term",
    "grad_pdf_unnormalised": "the normal density lacks its 1/√(2π)",
    "grad_of_tanh": "gelu_grad is the derivative of the tanh approximation",
}

#: What the lesson's text (both editions) asks of each exercise, each requirement with the
#: diagnoses that grade it: ids of MISTAKES, or the shared ``library_call`` and
#: ``changes_its_input`` (tests/grader/hidden/test_requirements.py: each one declared, and proven on this
#: exercise by a planted bug; every diagnosis answers some requirement).
REQUIREMENTS = {
    "gelu": {
        "the exact x·Φ(x), Φ(x) = ½(1 + erf(x / √2)), not an approximation":
            ("gelu_is_tanh", "erf_without_sqrt2", "gelu_sigmoid", "gelu_no_x"),
        "elementwise, for a tensor x of any shape": ("not_elementwise",),
        "keeps the dtype (float64 in, float64 out)": ("dtype_changed",),
        "F.gelu and nn.GELU are refused (exercise 1, and the lesson's first rule)": ("library_call",),
        "x is left as it was (the lesson's second rule)": ("changes_its_input",),
    },
    "gelu_tanh": {
        "½·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))": ("tanh_no_cubic", "tanh_square", "tanh_sqrt_2pi"),
        "elementwise": ("not_elementwise",),
        "keeps the dtype": ("dtype_changed",),
        "F.gelu(x, approximate='tanh') is refused (the lesson's first rule: F.gelu in every exercise)":
            ("library_call",),
        "x is left as it was (the lesson's second rule)": ("changes_its_input",),
    },
    "gelu_grad": {
        "Φ(x) + x·φ(x) in closed form, φ(x) = exp(-x²/2) / √(2π)":
            ("grad_cdf_only", "grad_pdf_unnormalised", "grad_of_tanh"),
        "elementwise": ("not_elementwise",),
        # stated for gelu and gelu_tanh; exercise 3 does not repeat it (a text change is proposed)
        "keeps the dtype (as gelu and gelu_tanh)": ("dtype_changed",),
        "in closed form, not through F.gelu (the lesson's first rule: F.gelu in every exercise)":
            ("library_call",),
        "x is left as it was (the lesson's second rule)": ("changes_its_input",),
    },
}

FORBID = ("torch.nn.functional.gelu",)
TIGHT: Tolerance = {"atol": 1e-6, "rtol": 1e-6}  # float64 in; far below every mistake's difference
K = math.sqrt(2.0 / math.pi)


def points(n, size=301):
    """Sorted points in [-6, 6] for this grading run, float64."""
    return (torch.rand(size, generator=gen(n), dtype=torch.float64) * 12.0 - 6.0).sort().values


def near_gap(n):
    """Points where exact GELU and its tanh approximation differ most (|x| ≈ 1.5 to 3.5)."""
    x = 1.5 + 2.0 * torch.rand(8, generator=gen(n), dtype=torch.float64)
    return torch.cat([x, -x])


def phi(x):
    return 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))


def pdf(x):
    return torch.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)


def tanh_form(x, k=K, cube=True, power=3):
    inner = x + 0.044715 * x.pow(power) if cube else x
    return 0.5 * x * (1.0 + torch.tanh(k * inner))


def gelu_suspects(x):
    return [
        suspect("gelu_is_tanh", tanh_form(x), msg("gelu returns the tanh approximation (that is gelu_tanh): compute the exact x·Φ(x) = ½·x·(1 + erf(x / √2))")),
        suspect("erf_without_sqrt2", 0.5 * x * (1.0 + torch.erf(x)), msg("Φ(x) is ½(1 + erf(x / √2)): the √2 inside erf is missing (erf is the CDF of N(0, ½), not of N(0, 1))")),
        suspect("gelu_sigmoid", x * torch.sigmoid(1.702 * x), msg("x·σ(1.702x) is another approximation: the exercise asks for the exact x·Φ(x) with erf")),
        suspect("gelu_no_x", phi(x), msg("gelu returns Φ(x): multiply by x, gelu(x) = x·Φ(x)")),
    ]


def tanh_suspects(x):
    return [
        suspect("tanh_no_cubic", tanh_form(x, cube=False), msg("the 0.044715·x³ term is missing: tanh(√(2/π)·(x + 0.044715·x³))")),
        suspect("tanh_square", tanh_form(x, power=2), msg("the correction term uses x²: it is 0.044715·x³ (x³ keeps the sign of x)")),
        suspect("tanh_sqrt_2pi", tanh_form(x, k=math.sqrt(2.0 * math.pi)), msg("the constant is √(2/π) ≈ 0.798, not √(2π) ≈ 2.507")),
    ]


def grad_suspects(x):
    t = torch.tanh(K * (x + 0.044715 * x ** 3))
    tanh_grad = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * K * (1 + 3 * 0.044715 * x * x)
    return [
        suspect("grad_cdf_only", phi(x), msg("the product rule on x·Φ(x) gives two terms: Φ(x) + x·φ(x); the x·φ(x) term is missing")),
        suspect("grad_pdf_unnormalised", phi(x) + x * torch.exp(-0.5 * x * x), msg("the normal density is φ(x) = exp(-x²/2) / √(2π): the 1/√(2π) is missing")),
        suspect("grad_of_tanh", tanh_grad, msg("this is the derivative of the tanh approximation: differentiate the exact x·Φ(x), which gives Φ(x) + x·φ(x)")),
    ]


def _tensor(y, name, like):
    check(isinstance(y, torch.Tensor), msg("`{name}` should return a torch tensor, got {y}", name=name, y=type(y).__name__))
    check(tuple(y.shape) == tuple(like.shape),
          msg("`{name}` should work elementwise and keep the shape {like_shape}, got {y_shape}", name=name, like_shape=list(like.shape), y_shape=list(y.shape)),
          mistake="not_elementwise")
    return y


def call(sub, name, x):
    return _tensor(sub.call(name, x, forbid=FORBID), name, x)


def _any_shape(sub, name, x):
    """``name`` works on the 1-D tensor of x's values (else that failure is the symptom);
    failing on x itself, of shape [2, 3, 4], is then the mistake of a 1-D-only function."""
    call(sub, name, x.reshape(-1))
    try:
        sub.call(name, x, forbid=FORBID)
    except SubmissionError as exc:
        if exc.exc_type == "ForbiddenCall":
            raise
        diagnose("not_elementwise", msg("`{name}` works on a 1-D tensor but fails on a [2, 3, 4] one ({error_type}): compute it elementwise with torch operations on the whole tensor, whatever its shape (no loop over its values, no reshape)", name=name, error_type=exc.exc_type))


def _dtypes(sub, name, expected, suspects):
    x = (torch.rand(2, 3, 4, generator=gen(90)) * 8.0 - 4.0)
    _any_shape(sub, name, x.double())
    for inp in (x, x.double()):
        y = call(sub, name, inp)
        check(y.dtype == inp.dtype, msg("`{name}` of a {inp_dtype} tensor should be {inp_dtype}, got {y_dtype}: compute in the input's dtype (no .float() or .double() inside)", name=name, inp_dtype=inp.dtype, y_dtype=y.dtype),
              mistake="dtype_changed")
    close(call(sub, name, x), expected(x.double()), msg("`{name}` of a float32 [2, 3, 4] tensor is wrong", name=name),
          atol=2e-6, rtol=1e-5, suspects=suspects(x.double()))


# --- gelu -------------------------------------------------------------------------------

@exercise("gelu", points=1)
def test_gelu_hand_values(sub):
    x = torch.tensor([-3.0, -1.0, 0.0, 0.5, 1.0, 2.0], dtype=torch.float64)
    close(call(sub, "gelu", x), x * phi(x),
          msg("gelu(x) = x·Φ(x) with Φ(x) = ½(1 + erf(x / √2)): gelu(1) = 0.841345, gelu(-1) = -0.158655, gelu(2) = 1.954500"), suspects=gelu_suspects(x), **TIGHT)


@exercise("gelu", points=1)
def test_gelu_is_exact(sub):
    for x in (near_gap(1), points(2)):
        close(call(sub, "gelu", x), F.gelu(x), msg("gelu must be the exact x·Φ(x) with erf (near |x| ≈ 2.7 the tanh approximation is off by 4.7e-4)"), **TIGHT,
              suspects=gelu_suspects(x))


@exercise("gelu", points=0.5)
def test_gelu_dtypes(sub):
    _dtypes(sub, "gelu", F.gelu, gelu_suspects)


@exercise("gelu", points=0.5)
def test_gelu_symmetry(sub):
    x = points(3)
    y, y_neg = call(sub, "gelu", x), call(sub, "gelu", -x)
    close(y - y_neg, x, msg("gelu(x) - gelu(-x) should equal x, because Φ(x) + Φ(-x) = 1"),
          **TIGHT, suspects=[suspect(s.mistake, s.candidate - gelu_suspects(-x)[i].candidate,
                                                   s.message) for i, s in enumerate(gelu_suspects(x))])
    grid = torch.linspace(-0.76, -0.74, 201, dtype=torch.float64)
    close(call(sub, "gelu", grid).min(), torch.tensor(-0.16997120747, dtype=torch.float64),
          msg("the smallest value of GELU is -0.169971 (at x ≈ -0.7518)"), atol=1e-5, rtol=0)


# --- gelu_tanh --------------------------------------------------------------------------

@exercise("gelu_tanh", points=1)
def test_gelu_tanh_matches_torch(sub):
    x = points(10)
    close(call(sub, "gelu_tanh", x), F.gelu(x, approximate="tanh"),
          msg("gelu_tanh should be ½·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))"), suspects=tanh_suspects(x),
          **TIGHT)


@exercise("gelu_tanh", points=0.5)
def test_gelu_tanh_hand_values(sub):
    x = torch.tensor([-2.0, -1.0, 1.0, 2.0, 3.0], dtype=torch.float64)
    close(call(sub, "gelu_tanh", x), tanh_form(x), msg("gelu_tanh(2) should be 1.954598 and gelu_tanh(-2) = -0.045402"), suspects=tanh_suspects(x), **TIGHT)


@exercise("gelu_tanh", points=0.5)
def test_gelu_tanh_dtypes(sub):
    _dtypes(sub, "gelu_tanh", tanh_form, tanh_suspects)


# --- gelu_grad --------------------------------------------------------------------------

def _autograd_gelu(x):
    x = x.detach().clone().requires_grad_(True)
    F.gelu(x).sum().backward()
    return x.grad


@exercise("gelu_grad", points=1)
def test_gelu_grad_matches_autograd(sub):
    x = points(20)
    close(call(sub, "gelu_grad", x), _autograd_gelu(x),
          msg("gelu_grad should be Φ(x) + x·φ(x), with φ(x) = exp(-x²/2) / √(2π) the normal density (product rule on x·Φ(x)); it does not match autograd"), suspects=grad_suspects(x), **TIGHT)


@exercise("gelu_grad", points=0.5)
def test_gelu_grad_hand_values(sub):
    x = torch.tensor([0.0, 1.0, -1.0, 2.0], dtype=torch.float64)
    close(call(sub, "gelu_grad", x), phi(x) + x * pdf(x), msg("GELU'(0) = 0.5, GELU'(1) = Φ(1) + φ(1) = 1.083315, GELU'(-1) = -0.083315"), suspects=grad_suspects(x), **TIGHT)


@exercise("gelu_grad", points=0.5)
def test_gelu_grad_dtypes(sub):
    _dtypes(sub, "gelu_grad", _autograd_gelu, grad_suspects)
