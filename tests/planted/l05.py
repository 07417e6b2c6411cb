"""Planted mistakes in lesson 05 (LayerNorm versus BatchNorm, backward pass, torch module)."""

from planted import Variant, bug

LESSON = "05_layer_norm"

LN_VAR = "var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)  # biased: divide by D"
LN_DIV = "x_hat = (x - mean) / np.sqrt(var + eps)"
MOD_VAR = "var = centered.pow(2).mean(dim=-1, keepdim=True)  # biased: divide by D"
MOD_FWD = """        mean = x.mean(dim=-1, keepdim=True)
        centered = x - mean
        var = centered.pow(2).mean(dim=-1, keepdim=True)  # biased: divide by D
        return self.weight * (centered / torch.sqrt(var + self.eps)) + self.bias"""
MOD_OUT = "return self.weight * (centered / torch.sqrt(var + self.eps)) + self.bias"

BUGS = [
    # layer_norm (numpy)
    bug("layer_norm", "ln_unbiased_var", "unbiased variance (ddof=1)",
        (LN_VAR, "var = x.var(axis=-1, ddof=1, keepdims=True)")),
    bug("layer_norm", "ln_eps_outside", "eps outside the square root", (LN_DIV, "x_hat = (x - mean) / (np.sqrt(var) + eps)")),
    bug("layer_norm", "ln_eps_outside", "std + eps", (LN_DIV, "x_hat = (x - mean) / (x.std(axis=-1, keepdims=True) + eps)")),
    bug("layer_norm", "ln_wrong_axis", "normalised over the batch axis", ("axis=-1", "axis=0")),
    bug("layer_norm", "ln_no_affine", "gain and bias ignored", ("return gamma * x_hat + beta", "return x_hat")),
    bug("layer_norm", "ln_eps_ignored", "eps argument ignored (1e-5 hard-coded)", ("np.sqrt(var + eps)", "np.sqrt(var + 1e-5)")),
    # batch_norm
    bug("batch_norm", "bn_last_axis", "normalised over the last axis (that is layer norm)",
        ("axes = tuple(range(x.ndim - 1))", "axes = (x.ndim - 1,)")),
    bug("batch_norm", "bn_axis0_only", "over axis 0 only (wrong for [B, L, D])", ("axes = tuple(range(x.ndim - 1))", "axes = (0,)")),
    bug("batch_norm", "bn_unbiased_var", "unbiased variance", ("x.var(axis=axes, keepdims=True)", "x.var(axis=axes, ddof=1, keepdims=True)")),
    # layer_norm_backward
    bug("layer_norm_backward", "bwd_no_projection_term", "x̂·mean(dx̂·x̂) term dropped",
        ("\n                    - x_hat * (dx_hat * x_hat).mean(axis=-1, keepdims=True))", ")")),
    bug("layer_norm_backward", "bwd_no_mean_term", "mean(dx̂) term dropped",
        ("dx_hat - dx_hat.mean(axis=-1, keepdims=True)", "dx_hat")),
    bug("layer_norm_backward", "dgamma_no_xhat", "dgamma without x̂", ("dgamma = (dout * x_hat).sum(axis=tokens)", "dgamma = dout.sum(axis=tokens)")),
    bug("layer_norm_backward", "dgamma_not_summed", "dgamma, dbeta not summed over the length axis",
        ("tokens = tuple(range(x.ndim - 1))", "tokens = 0")),
    bug("layer_norm_backward", "dx_no_gamma", "gamma forgotten in dx", ("dx_hat = dout * gamma", "dx_hat = dout")),
    # layer_norm, batch_norm, layer_norm_backward: numpy exercises
    bug("layer_norm", "library_call", "torch's F.layer_norm, converted back to numpy", source="""
def layer_norm(x, gamma, beta, eps=1e-5):
    t = torch.from_numpy(np.asarray(x))
    out = F.layer_norm(t, t.shape[-1:], torch.from_numpy(np.asarray(gamma)), torch.from_numpy(np.asarray(beta)), eps)
    return out.numpy()
"""),
    bug("layer_norm", "library_call", "nn.LayerNorm with the given gain and bias", source="""
def layer_norm(x, gamma, beta, eps=1e-5):
    ln = nn.LayerNorm(x.shape[-1], eps=eps).double()
    with torch.no_grad():
        ln.weight.copy_(torch.from_numpy(gamma)); ln.bias.copy_(torch.from_numpy(beta))
        return ln(torch.from_numpy(x)).numpy()
"""),
    bug("batch_norm", "library_call", "torch's F.batch_norm in training mode, converted back", source="""
def batch_norm(x, gamma, beta, eps=1e-5):
    t = torch.from_numpy(x).reshape(-1, x.shape[-1])
    out = F.batch_norm(t, None, None, torch.from_numpy(gamma), torch.from_numpy(beta), training=True, eps=eps)
    return out.reshape(x.shape).numpy()
"""),
    bug("layer_norm_backward", "library_call", "autograd through F.layer_norm", source="""
def layer_norm_backward(dout, x, gamma, eps=1e-5):
    xt = torch.tensor(x, requires_grad=True)
    gt = torch.tensor(gamma, requires_grad=True)
    bt = torch.zeros_like(gt, requires_grad=True)
    F.layer_norm(xt, xt.shape[-1:], gt, bt, eps).backward(torch.from_numpy(dout))
    return xt.grad.numpy(), gt.grad.numpy(), bt.grad.numpy()
"""),
    bug("layer_norm", "not_numpy", "computed in torch, returns a torch.Tensor", source="""
def layer_norm(x, gamma, beta, eps=1e-5):
    x = torch.as_tensor(x)
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return torch.as_tensor(gamma) * (x - mean) / torch.sqrt(var + eps) + torch.as_tensor(beta)
"""),
    bug("batch_norm", "not_numpy", "computed in torch, returns a torch.Tensor", source="""
def batch_norm(x, gamma, beta, eps=1e-5):
    x = torch.from_numpy(x)
    dims = tuple(range(x.dim() - 1))
    var, mean = torch.var_mean(x, dim=dims, keepdim=True, unbiased=False)
    return torch.from_numpy(gamma) * (x - mean) / torch.sqrt(var + eps) + torch.from_numpy(beta)
"""),
    bug("batch_norm", "not_numpy", "returns a nested list (.tolist())",
        ("return gamma * (x - mean) / np.sqrt(var + eps) + beta", "return (gamma * (x - mean) / np.sqrt(var + eps) + beta).tolist()")),
    bug("layer_norm_backward", "not_numpy", "returns dx, dgamma, dbeta as torch tensors",
        ("return dx, dgamma, dbeta", "return torch.from_numpy(dx), torch.from_numpy(dgamma), torch.from_numpy(dbeta)")),
    bug("layer_norm", "ln_float32", "computed in float32 (x.astype(np.float32))",
        ("mean = x.mean(axis=-1, keepdims=True)\n    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)  # biased",
         "x = x.astype(np.float32)\n    mean = x.mean(axis=-1, keepdims=True)\n    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)  # biased")),
    bug("batch_norm", "ln_eps_outside", "eps outside the square root",
        ("np.sqrt(var + eps)", "(np.sqrt(var) + eps)")),
    bug("layer_norm_backward", "bwd_no_eps", "sigma without eps (sqrt(var))",
        ("inv_std = 1.0 / np.sqrt(var + eps)", "inv_std = 1.0 / np.sqrt(var)")),
    bug("layer_norm_backward", "ln_unbiased_var", "unbiased variance (ddof=1)",
        ("var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)", "var = x.var(axis=-1, ddof=1, keepdims=True)")),
    bug("layer_norm_backward", "ln_eps_outside", "eps outside the square root",
        ("inv_std = 1.0 / np.sqrt(var + eps)", "inv_std = 1.0 / (np.sqrt(var) + eps)")),
    bug("layer_norm", "changes_its_input", "centres the caller's x in place (x -= mean)",
        ("var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)  # biased: divide by D\n    x_hat = (x - mean) / np.sqrt(var + eps)",
         "x -= mean\n    var = (x ** 2).mean(axis=-1, keepdims=True)\n    x_hat = x / np.sqrt(var + eps)")),
    bug("batch_norm", "ln_no_affine", "gain and bias ignored",
        ("return gamma * (x - mean) / np.sqrt(var + eps) + beta", "return (x - mean) / np.sqrt(var + eps)")),
    bug("batch_norm", "ln_eps_ignored", "eps argument ignored (1e-5 hard-coded)", ("np.sqrt(var + eps)", "np.sqrt(var + 1e-5)")),
    bug("layer_norm_backward", "ln_eps_ignored", "eps argument ignored (1e-5 hard-coded)",
        ("inv_std = 1.0 / np.sqrt(var + eps)", "inv_std = 1.0 / np.sqrt(var + 1e-5)")),
    # LayerNorm (torch)
    bug("LayerNorm", "ln_unbiased_var", "torch's default x.var() (unbiased)", (MOD_VAR, "var = x.var(dim=-1, keepdim=True)")),
    bug("LayerNorm", "ln_eps_outside", "eps outside the square root",
        (MOD_OUT, "return self.weight * (centered / (torch.sqrt(var) + self.eps)) + self.bias")),
    bug("LayerNorm", "ln_wrong_axis", "normalised over the batch axis", ("dim=-1", "dim=0")),
    bug("LayerNorm", "ln_no_affine", "gain and bias ignored", (MOD_OUT, "return centered / torch.sqrt(var + self.eps)")),
    bug("LayerNorm", "ln_param_names", "parameters named gamma and beta",
        ("self.weight = nn.Parameter", "self.gamma = nn.Parameter"),
        ("self.bias = nn.Parameter", "self.beta = nn.Parameter"),
        ("self.weight * (", "self.gamma * ("), ("+ self.bias", "+ self.beta")),
    bug("LayerNorm", "ln_eps_ignored", "constructor eps ignored", ("torch.sqrt(var + self.eps)", "torch.sqrt(var + 1e-5)")),
    bug("LayerNorm", "ln_param_init", "weight initialised at random (torch.randn)",
        ("self.weight = nn.Parameter(torch.ones(d_model))", "self.weight = nn.Parameter(torch.randn(d_model))")),
    bug("LayerNorm", "library_call", "calls F.layer_norm (the operation the exercise teaches)",
        (MOD_OUT, "return F.layer_norm(x, x.shape[-1:], self.weight, self.bias, self.eps)")),
    bug("LayerNorm", "library_call", "wraps nn.LayerNorm",
        ("self.weight = nn.Parameter(torch.ones(d_model))\n        self.bias = nn.Parameter(torch.zeros(d_model))",
         "self.ln = nn.LayerNorm(d_model, eps=eps)"),
        (MOD_OUT, "return self.ln(x)")),
    bug("LayerNorm", "ln_python_loop", "a Python loop over the tokens", (MOD_FWD, """        rows = []
        for t in x.reshape(-1, x.shape[-1]):
            mean = t.mean()
            var = ((t - mean) ** 2).mean()
            rows.append(self.weight * (t - mean) / torch.sqrt(var + self.eps) + self.bias)
        return torch.stack(rows).reshape(x.shape)""")),
    bug("LayerNorm", "ln_python_loop", "a Python loop over the sentences (vectorised inside each)", (MOD_FWD, """        if x.dim() < 3:
            mean = x.mean(dim=-1, keepdim=True)
            var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
            return self.weight * (x - mean) / torch.sqrt(var + self.eps) + self.bias
        return torch.stack([self(s) for s in x])""")),
]

BUGS += [
    # issue 49: the given LayerNormFunction (section 7) computes layer norm, forward and backward
    bug("LayerNorm", "given_answer", "forward returns the given LayerNormFunction's output",
        ("        mean = x.mean(dim=-1, keepdim=True)\n        centered = x - mean\n",
         "        return LayerNormFunction.apply(x, self.weight, self.bias, self.eps)\n"
         "        mean = x.mean(dim=-1, keepdim=True)\n        centered = x - mean\n")),
    bug("layer_norm", "given_answer", "computed by the given LayerNormFunction",
        ("    mean = x.mean(axis=-1, keepdims=True)\n    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)  # biased",
         "    t = LayerNormFunction.apply(*(torch.from_numpy(np.asarray(a, dtype=np.float64)) for a in (x, gamma, beta)), eps)\n"
         "    return t.numpy()\n"
         "    mean = x.mean(axis=-1, keepdims=True)\n    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)  # biased")),
    bug("layer_norm_backward", "given_answer", "computed by backpropagating through the given LayerNormFunction",
        ("    mean = x.mean(axis=-1, keepdims=True)\n    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)\n    inv_std",
         "    xt, gt = torch.tensor(x, requires_grad=True), torch.tensor(gamma, requires_grad=True)\n"
         "    bt = torch.zeros_like(gt, requires_grad=True)\n"
         "    LayerNormFunction.apply(xt, gt, bt, eps).backward(torch.from_numpy(np.asarray(dout, dtype=np.float64)))\n"
         "    return xt.grad.numpy(), gt.grad.numpy(), bt.grad.numpy()\n"
         "    mean = x.mean(axis=-1, keepdims=True)\n    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)\n    inv_std")),
]

ALTERNATIVES = [
    Variant("layer_norm", "mean of squares minus squared mean", source="""
def layer_norm(x, gamma, beta, eps=1e-5):
    mu = np.mean(x, axis=-1, keepdims=True)
    var = np.mean(x * x, axis=-1, keepdims=True) - mu ** 2
    return gamma * (x - mu) / np.sqrt(var + eps) + beta
"""),
    Variant("layer_norm", "np.var and np.sqrt of the reciprocal", source="""
def layer_norm(x, gamma, beta, eps=1e-5):
    x = np.asarray(x, dtype=np.float64)
    inv = 1.0 / np.sqrt(np.var(x, axis=-1, keepdims=True) + eps)
    return (x - x.mean(-1)[..., None]) * inv * gamma + beta
"""),
    Variant("layer_norm", "einsum for the mean and the variance", source="""
def layer_norm(x, gamma, beta, eps=1e-5):
    D = x.shape[-1]
    xc = x - np.einsum("...d->...", x)[..., None] / D
    var = np.einsum("...d,...d->...", xc, xc)[..., None] / D
    return np.einsum("...d,d->...d", xc / np.sqrt(var + eps), gamma) + beta
"""),
    Variant("layer_norm", "astype(np.float64) and np.std", source="""
def layer_norm(x, gamma, beta, eps=1e-5):
    x = x.astype(np.float64)
    std = np.std(x, axis=-1, keepdims=True)
    return gamma * ((x - np.mean(x, axis=-1, keepdims=True)) / np.sqrt(std ** 2 + eps)) + beta
"""),
    Variant("layer_norm", "torch arithmetic in float64 (no library norm), .numpy() at the end", source="""
def layer_norm(x, gamma, beta, eps=1e-5):
    t = torch.from_numpy(x)
    var, mean = torch.var_mean(t, dim=-1, keepdim=True, unbiased=False)
    out = torch.from_numpy(gamma) * (t - mean) / torch.sqrt(var + eps) + torch.from_numpy(beta)
    return out.numpy()
"""),
    Variant("batch_norm", "np.std and a float64 cast", source="""
def batch_norm(x, gamma, beta, eps=1e-5):
    x = np.asarray(x, dtype=np.float64)
    axes = tuple(range(x.ndim - 1))
    mu = np.mean(x, axis=axes, keepdims=True)
    return (x - mu) / np.sqrt(np.std(x, axis=axes, keepdims=True) ** 2 + eps) * gamma + beta
"""),
    Variant("batch_norm", "reshape to 2-D, normalise columns, reshape back", source="""
def batch_norm(x, gamma, beta, eps=1e-5):
    flat = x.reshape(-1, x.shape[-1])
    mu = flat.mean(axis=0)
    var = ((flat - mu) ** 2).mean(axis=0)
    return (gamma * (flat - mu) / np.sqrt(var + eps) + beta).reshape(x.shape)
"""),
    Variant("layer_norm_backward", "staged chain rule through var and mean", source="""
def layer_norm_backward(dout, x, gamma, eps=1e-5):
    D = x.shape[-1]
    mu = x.mean(-1, keepdims=True)
    xc = x - mu
    var = (xc ** 2).mean(-1, keepdims=True)
    std = np.sqrt(var + eps)
    xhat = xc / std
    lead = tuple(range(x.ndim - 1))
    dxhat = dout * gamma
    dvar = (dxhat * xc * -0.5 * (var + eps) ** -1.5).sum(-1, keepdims=True)
    dmu = (-dxhat / std).sum(-1, keepdims=True) + dvar * (-2.0 * xc).mean(-1, keepdims=True)
    dx = dxhat / std + dvar * 2.0 * xc / D + dmu / D
    return dx, (dout * xhat).sum(axis=lead), dout.sum(axis=lead)
"""),
    Variant("layer_norm_backward", "explicit Jacobian per token (einsum)", source="""
def layer_norm_backward(dout, x, gamma, eps=1e-5):
    D = x.shape[-1]
    xhat = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps)
    s = np.sqrt(x.var(-1, keepdims=True) + eps)[..., None]
    J = (np.eye(D) - 1.0 / D - xhat[..., :, None] * xhat[..., None, :] / D) / s
    dx = np.einsum("...i,...ij->...j", dout * gamma, J)
    axes = tuple(range(x.ndim - 1))
    return dx, np.sum(dout * xhat, axis=axes), np.sum(dout, axis=axes)
"""),
    Variant("layer_norm_backward", "the N·dx̂ form (sums, one division by N·σ̂)", source="""
def layer_norm_backward(dout, x, gamma, eps=1e-5):
    N = x.shape[-1]
    xc = x - x.mean(axis=-1, keepdims=True)
    inv = 1.0 / np.sqrt((xc ** 2).sum(axis=-1, keepdims=True) / N + eps)
    xhat = xc * inv
    dxhat = dout * gamma
    dx = inv / N * (N * dxhat - dxhat.sum(axis=-1, keepdims=True) - xhat * (dxhat * xhat).sum(axis=-1, keepdims=True))
    lead = tuple(range(x.ndim - 1))
    return dx, (dout * xhat).sum(axis=lead), dout.sum(axis=lead)
"""),
    Variant("LayerNorm", "flattened to [tokens, D], torch.std(correction=0), reshaped back", source="""
class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.d_model, self.eps = d_model, eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def _normalise(self, flat):
        mu = flat.mean(dim=1, keepdim=True)
        sd = torch.std(flat, dim=1, keepdim=True, correction=0)
        return (flat - mu) / torch.sqrt(sd ** 2 + self.eps)

    def forward(self, x):
        out = self._normalise(x.reshape(-1, self.d_model)).reshape(x.shape)
        return torch.addcmul(self.bias, out, self.weight)
"""),
    Variant("LayerNorm", "eps as a tensor made on the first call, torch.mean and torch.square", source="""
class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        if not hasattr(self, "eps_t"):
            self.eps_t = torch.full((1,), self.eps, dtype=torch.float64)
        centred = x - torch.mean(x, dim=-1, keepdim=True)
        var = torch.mean(torch.square(centred), dim=-1, keepdim=True)
        return centred * torch.rsqrt(var + self.eps_t.to(x.dtype)) * self.weight + self.bias
"""),
    Variant("LayerNorm", "half precision computed in float32, einsum for the scale", source="""
class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        h = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
        h = h - h.mean(-1, keepdim=True)
        h = h / (h.square().mean(-1, keepdim=True) + self.eps).sqrt()
        return (torch.einsum("...d,d->...d", h, self.weight) + self.bias).type_as(x)
"""),
    Variant("LayerNorm", "mean of squares, rsqrt, var(unbiased=False) style", source="""
class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))
        self.eps = eps

    def forward(self, x):
        mu = x.mean(-1, keepdim=True)
        var = (x * x).mean(-1, keepdim=True) - mu * mu
        return (x - mu) * torch.rsqrt(var + self.eps) * self.weight + self.bias
"""),
    Variant("LayerNorm", "x.var(unbiased=False)", source="""
class LayerNorm(nn.Module):
    def __init__(self, d_model, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x):
        var, mean = torch.var_mean(x, dim=-1, keepdim=True, unbiased=False)
        return self.weight * (x - mean) / (var + self.eps).sqrt() + self.bias
"""),
]

# What each planted mistake earns on its exercise (the rubric in CONTRIBUTING):
SCORES = {
    ('layer_norm', 'unbiased variance (ddof=1)'): 0,
    ('layer_norm', 'eps outside the square root'): 2,
    ('layer_norm', 'std + eps'): 2,
    ('layer_norm', 'normalised over the batch axis'): 0,
    ('layer_norm', 'gain and bias ignored'): 1.5,
    ('layer_norm', 'eps argument ignored (1e-5 hard-coded)'): 2,
    ('layer_norm', "torch's F.layer_norm, converted back to numpy"): 0,
    ('layer_norm', 'nn.LayerNorm with the given gain and bias'): 0,
    ('layer_norm', 'computed in torch, returns a torch.Tensor'): 0,
    ('layer_norm', 'computed in float32 (x.astype(np.float32))'): 2.5,
    ('layer_norm', "centres the caller's x in place (x -= mean)"): 0,
    ('batch_norm', 'normalised over the last axis (that is layer norm)'): 0,
    ('batch_norm', 'over axis 0 only (wrong for [B, L, D])'): 0.5,
    ('batch_norm', 'unbiased variance'): 0,
    ('batch_norm', "torch's F.batch_norm in training mode, converted back"): 0,
    ('batch_norm', 'computed in torch, returns a torch.Tensor'): 0,
    ('batch_norm', 'eps outside the square root'): 0,
    ('batch_norm', 'returns a nested list (.tolist())'): 0,
    ('batch_norm', 'gain and bias ignored'): 0,
    ('batch_norm', 'eps argument ignored (1e-5 hard-coded)'): 1.5,
    ('layer_norm_backward', 'x̂·mean(dx̂·x̂) term dropped'): 1.5,
    ('layer_norm_backward', 'mean(dx̂) term dropped'): 1.5,
    ('layer_norm_backward', 'dgamma without x̂'): 2,
    ('layer_norm_backward', 'dgamma, dbeta not summed over the length axis'): 1.5,
    ('layer_norm_backward', 'gamma forgotten in dx'): 1.5,
    ('layer_norm_backward', 'autograd through F.layer_norm'): 0,
    ('layer_norm_backward', 'returns dx, dgamma, dbeta as torch tensors'): 0,
    ('layer_norm_backward', 'sigma without eps (sqrt(var))'): 0.5,
    ('layer_norm_backward', 'unbiased variance (ddof=1)'): 0.5,
    ('layer_norm_backward', 'eps outside the square root'): 0.5,
    ('layer_norm_backward', 'eps argument ignored (1e-5 hard-coded)'): 0.5,
    ('LayerNorm', "torch's default x.var() (unbiased)"): 0,
    ('LayerNorm', 'eps outside the square root'): 2,
    ('LayerNorm', 'normalised over the batch axis'): 0,
    ('LayerNorm', 'gain and bias ignored'): 1.5,
    ('LayerNorm', 'parameters named gamma and beta'): 0,
    ('LayerNorm', 'constructor eps ignored'): 2,
    ('LayerNorm', 'calls F.layer_norm (the operation the exercise teaches)'): 0,
    ('LayerNorm', 'wraps nn.LayerNorm'): 0,
    ('LayerNorm', 'a Python loop over the tokens'): 2.5,
    ('LayerNorm', 'weight initialised at random (torch.randn)'): 2.5,
    ('LayerNorm', 'a Python loop over the sentences (vectorised inside each)'): 2.5,
    ('LayerNorm', "forward returns the given LayerNormFunction's output"): 0,
    ('layer_norm', 'computed by the given LayerNormFunction'): 0,
    ('layer_norm_backward', 'computed by backpropagating through the given LayerNormFunction'): 0,
}
