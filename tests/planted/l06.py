"""Planted mistakes in lesson 06 (exact GELU, tanh approximation, derivative)."""

from planted import Variant, bug

LESSON = "06_gelu"

EXACT = "return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))"
TANH = "return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3))))"

BUGS = [
    bug("gelu", "gelu_is_tanh", "the tanh approximation passed off as exact", (EXACT, TANH)),
    bug("gelu", "erf_without_sqrt2", "erf(x) instead of erf(x / √2)", ("torch.erf(x / math.sqrt(2.0))", "torch.erf(x)")),
    bug("gelu", "gelu_sigmoid", "x·sigmoid(1.702x)", (EXACT, "return x * torch.sigmoid(1.702 * x)")),
    bug("gelu", "gelu_no_x", "Φ(x) without the factor x", (EXACT, "return 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))")),
    bug("gelu", "library_call", "calls F.gelu (the operation the exercise teaches)", (EXACT, "return F.gelu(x)")),
    bug("gelu", "library_call", "uses nn.GELU", (EXACT, "return nn.GELU()(x)")),
    bug("gelu", "dtype_changed", "computes in float32 whatever the input", (EXACT, EXACT.replace("x / ", "x.float() / ").replace("0.5 * x", "0.5 * x.float()"))),
    bug("gelu_tanh", "tanh_no_cubic", "cubic term missing", ("(x + 0.044715 * x.pow(3))", "x")),
    bug("gelu_tanh", "tanh_square", "x² instead of x³", ("x.pow(3)", "x.pow(2)")),
    bug("gelu_tanh", "tanh_sqrt_2pi", "sqrt(2π) instead of sqrt(2/π)", ("math.sqrt(2.0 / math.pi)", "math.sqrt(2.0 * math.pi)")),
    bug("gelu_tanh", "library_call", "calls F.gelu(approximate='tanh')", (TANH, "return F.gelu(x, approximate='tanh')")),
    bug("gelu_grad", "grad_cdf_only", "Φ(x) alone", ("return cdf + x * pdf", "return cdf")),
    bug("gelu_grad", "grad_pdf_unnormalised", "density without 1/√(2π)",
        ("pdf = torch.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)", "pdf = torch.exp(-0.5 * x * x)")),
    bug("gelu_grad", "grad_of_tanh", "derivative of the tanh approximation",
        ("cdf = 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))\n    pdf = torch.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)\n    return cdf + x * pdf",
         "k = math.sqrt(2.0 / math.pi)\n    t = torch.tanh(k * (x + 0.044715 * x ** 3))\n"
         "    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x)")),
    bug("gelu_grad", "library_call", "autograd through F.gelu", source="""
def gelu_grad(x):
    x = x.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        y = F.gelu(x).sum()
    return torch.autograd.grad(y, x)[0]
"""),
    # a loop over the values of a 1-D tensor (torch.tensor of a list): x.tolist() of a
    # [2, 3, 4] tensor is a nested list, and 0.5 * [...] fails
    bug("gelu", "not_elementwise", "a loop over x.tolist() (1-D only)",
        (EXACT, "return torch.tensor([0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0))) for v in x.tolist()], "
                "dtype=x.dtype)")),
    bug("gelu_tanh", "not_elementwise", "flattens x and never restores its shape",
        (TANH, "x = x.reshape(-1)\n    " + TANH)),
    bug("gelu_grad", "not_elementwise", "a loop over the values of x (1-D only)",
        ("return cdf + x * pdf",
         "return torch.tensor([c + v * p for c, v, p in zip(cdf.tolist(), x.tolist(), pdf.tolist())], dtype=x.dtype)")),
    bug("gelu_tanh", "dtype_changed", "computes in float32 whatever the input",
        (TANH, "x = x.float()\n    " + TANH)),
    bug("gelu_grad", "dtype_changed", "computes in float32 whatever the input",
        ("cdf = 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))", "x = x.float()\n    cdf = 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))")),
    bug("gelu_tanh", "changes_its_input", "multiplies x in place (x.mul_)",
        (TANH, "return x.mul_(0.5 * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x.pow(3)))))")),
    bug("gelu_grad", "changes_its_input", "x.mul_(pdf).add_(cdf): the result built in x",
        ("return cdf + x * pdf", "return x.mul_(pdf).add_(cdf)")),
    bug("gelu", "changes_its_input", "multiplies x in place (x.mul_)",
        ("return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))",
         "return x.mul_(0.5 * (1.0 + torch.erf(x / math.sqrt(2.0))))")),
]

ALTERNATIVES = [
    Variant("gelu", "erf of x·√½, halved at the end", source="""
def gelu(x):
    return x * (1 + torch.erf(x * math.sqrt(0.5))) / 2
"""),
    Variant("gelu", "x times torch.special.ndtr", source="""
def gelu(x):
    return x * torch.special.ndtr(x)
"""),
    Variant("gelu", "erfc form", source="""
def gelu(x):
    return 0.5 * x * torch.erfc(-x / 2 ** 0.5)
"""),
    Variant("gelu_tanh", "sigmoid form 0.5(1 + tanh(z)) = sigmoid(2z)", source="""
def gelu_tanh(x):
    z = (2.0 / math.pi) ** 0.5 * (x + 0.044715 * x ** 3)
    return x * torch.sigmoid(2.0 * z)
"""),
    Variant("gelu_tanh", "factored cubic, numpy constants", source="""
def gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(np.sqrt(2 / np.pi) * x * (1 + 0.044715 * x * x)))
"""),
    Variant("gelu_grad", "closed form written out with torch.special", source="""
def gelu_grad(x):
    return torch.special.ndtr(x) + x * torch.exp(-x ** 2 / 2) / math.sqrt(2 * math.pi)
"""),
    Variant("gelu_grad", "autograd through the student's own gelu", source="""
def gelu_grad(x):
    x = x.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        (g,) = torch.autograd.grad(gelu(x).sum(), x)
    return g
"""),
]

# What each planted mistake earns on its exercise (the rubric in CONTRIBUTING):
SCORES = {
    ('gelu', 'the tanh approximation passed off as exact'): 0,
    ('gelu', 'erf(x) instead of erf(x / √2)'): 0,
    ('gelu', 'x·sigmoid(1.702x)'): 0,
    ('gelu', 'Φ(x) without the factor x'): 0,
    ('gelu', 'calls F.gelu (the operation the exercise teaches)'): 0,
    ('gelu', 'uses nn.GELU'): 0,
    ('gelu', 'computes in float32 whatever the input'): 2.5,
    ('gelu_tanh', 'cubic term missing'): 0,
    ('gelu_tanh', 'x² instead of x³'): 0,
    ('gelu_tanh', 'sqrt(2π) instead of sqrt(2/π)'): 0,
    ('gelu_tanh', "calls F.gelu(approximate='tanh')"): 0,
    ('gelu_grad', 'Φ(x) alone'): 0,
    ('gelu_grad', 'density without 1/√(2π)'): 0,
    ('gelu_grad', 'derivative of the tanh approximation'): 0,
    ('gelu_grad', 'autograd through F.gelu'): 0,
    ('gelu', 'a loop over x.tolist() (1-D only)'): 2.5,
    ('gelu_tanh', 'flattens x and never restores its shape'): 1.5,
    ('gelu_grad', 'a loop over the values of x (1-D only)'): 1.5,
    ('gelu_tanh', 'computes in float32 whatever the input'): 1.5,
    ('gelu_grad', 'computes in float32 whatever the input'): 1.5,
    ('gelu_tanh', 'multiplies x in place (x.mul_)'): 0,
    ('gelu_grad', 'x.mul_(pdf).add_(cdf): the result built in x'): 0,
}
