"""Hidden graders of lesson 07_positional_encoding (sinusoidal table, PositionalEncoding,
TokenEmbedding).

The oracle is the paper's formula computed in float64 here; weights are injected by name;
inputs are drawn afresh for every grading run; dropout is off except in the one check of
dropout itself. A wrong table or output is compared with those of the common mistakes
(``suspect``): the one it matches is the hint.
"""

import math

import torch

from grader.runtime.errors import SubmissionError
from grader.testkit.framework import (
    ON_DEVICE,
    Message,
    Tolerance,
    check,
    close,
    diagnose,
    exercise,
    gen,
    matches,
    msg,
    python_lines,
    suspect,
)

MISTAKES = {
    "pe_concatenated": "the sines and cosines are concatenated instead of interleaved",
    "pe_sin_cos_swapped": "cos in the even columns and sin in the odd ones",
    "pe_exponent_j": "the exponent uses the column index j instead of 2i (pairs do not share a frequency)",
    "pe_positions_from_1": "positions start at 1 instead of 0",
    "pe_exponent_i": "the exponent is i/D instead of 2i/D",
    "pe_multiplied": "pos is multiplied by 10000^(2i/D) instead of divided",
    "pe_dtype": "the table is not float32",
    "pe_table_shape": "the table is not [max_len, d_model] (a batch axis added, or transposed)",
    "pe_python_loop": "the table is filled by a Python loop over the positions or the columns",
    "pe_not_buffer": "pe is a plain attribute, not a registered buffer",
    "pe_parameter": "pe is registered as a parameter",
    "pe_buffer_shape": "the buffer pe is not [max_len, d_model]",
    "pe_rescales_x": "PositionalEncoding multiplies x by √d_model again",
    "pe_sliced_by_batch": "forward adds pe[:B] (sliced by the batch size) instead of pe[:L]",
    "pe_defaults": "the defaults of the signature (max_len=5000, dropout=0.0) are changed",
    "pe_dropout_in_eval": "dropout still drops in eval mode (F.dropout without training=self.training)",
    "pe_no_dropout": "PositionalEncoding applies no dropout",
    "pe_dropout_before_add": "dropout is applied to x before adding the encoding",
    "pe_table_on_cpu": "forward builds a tensor on the CPU instead of using the buffer",
    "emb_not_scaled": "the embedding is not multiplied by √d_model",
    "emb_divided": "the embedding is divided by √d_model",
    "emb_scaled_by_d": "the embedding is multiplied by d_model instead of √d_model",
    "emb_init": "the embedding keeps N(0, 1) initialisation instead of std d_model^-0.5",
    "emb_submodule_name": "the nn.Embedding submodule is not named `embedding`",
}

#: What the lesson's text (both editions) asks of each exercise, each requirement with the
#: diagnoses that grade it: ids of MISTAKES, or the shared ``library_call`` and
#: ``changes_its_input`` (tests/grader/hidden/test_requirements.py: each one declared, and proven on this
#: exercise by a planted bug; every diagnosis answers some requirement).
REQUIREMENTS = {
    "sinusoidal_positional_encoding": {
        "a [max_len, d_model] tensor": ("pe_table_shape",),
        "float32": ("pe_dtype",),
        "interleaved: sin in the even columns (pe[:, 0::2]), cos in the odd ones (pe[:, 1::2])":
            ("pe_concatenated", "pe_sin_cos_swapped"),
        "angle pos / 10000^(2i/D), 2i the even column index shared by the pair":
            ("pe_exponent_j", "pe_exponent_i", "pe_multiplied"),
        "positions start at 0 (row 0 is [0, 1, 0, 1, …])": ("pe_positions_from_1",),
        "without Python loops (broadcasting a column of positions against a row of frequencies)":
            ("pe_python_loop",),
    },
    "PositionalEncoding": {
        "the table kept as a registered buffer named pe, not a parameter or a plain attribute":
            ("pe_not_buffer", "pe_parameter", "pe_table_on_cpu"),
        "pe is [max_len, d_model]": ("pe_buffer_shape",),
        "__init__(d_model, max_len=5000, dropout=0.0): the signature's defaults": ("pe_defaults",),
        "forward adds the first L rows, pe[:L], to x [B, L, D] (broadcast over the batch)":
            ("pe_sliced_by_batch",),
        "x is not rescaled here": ("pe_rescales_x",),
        "then nn.Dropout(dropout) on the sum: dropout(x + pe[:L])": ("pe_no_dropout", "pe_dropout_before_add"),
        "dropout only in training mode, none after model.eval()": ("pe_dropout_in_eval",),
        "x is left as it was (the lesson's second rule: no argument changed)": ("changes_its_input",),
    },
    "TokenEmbedding": {
        "a submodule named embedding, nn.Embedding(vocab_size, d_model)": ("emb_submodule_name",),
        "its weight initialised with std d_model ** -0.5": ("emb_init",),
        "forward: embedding(tokens) · √d_model": ("emb_not_scaled", "emb_divided", "emb_scaled_by_d"),
    },
}

# Graded with the course's table, so a wrong table costs only its own exercise (grader.testkit.parts).
BUILDS_ON = {"PositionalEncoding": ("sinusoidal_positional_encoding",)}


def ref_pe(max_len, d_model, first=0, exponent="2i", multiply=False, layout="interleaved", swap=False):
    """The paper's table in float64, with the common mistakes as options."""
    pos = torch.arange(first, first + max_len, dtype=torch.float64)[:, None]
    if exponent == "j":
        j = torch.arange(d_model, dtype=torch.float64)
        angle = pos / 10000.0 ** (j / d_model)
        pe = torch.zeros(max_len, d_model, dtype=torch.float64)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(angle[:, 0::2]), torch.cos(angle[:, 1::2])
        return pe
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    power = 10000.0 ** ((two_i / 2 if exponent == "i" else two_i) / d_model)
    angle = pos * power if multiply else pos / power
    sin, cos = (torch.cos(angle), torch.sin(angle)) if swap else (torch.sin(angle), torch.cos(angle))
    if layout == "concatenated":
        return torch.cat([sin, cos], 1)[:, :d_model]
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = sin
    pe[:, 1::2] = cos[:, : d_model // 2]
    return pe


def pe_suspects(max_len, d_model, transform=lambda t: t):
    options: list[tuple[str, dict, Message]] = [
        ("pe_concatenated", {"layout": "concatenated"}, msg("the columns should interleave sin, cos, sin, cos, … (PE[:, 0::2] = sin, PE[:, 1::2] = cos), not all sines then all cosines")),
        ("pe_sin_cos_swapped", {"swap": True}, msg("the sines belong in the even columns 2i and the cosines in the odd columns 2i+1 (position 0 is [0, 1, 0, 1, …])")),
        ("pe_exponent_j", {"exponent": "j"}, msg("columns 2i and 2i+1 share one frequency 1/10000^(2i/D): the exponent uses 2i for both, not the column index")),
        ("pe_positions_from_1", {"first": 1}, msg("positions start at 0 (the first row is sin 0 = 0, cos 0 = 1): use torch.arange(max_len)")),
        ("pe_exponent_i", {"exponent": "i"}, msg("the exponent is 2i/D with 2i the even column index (0, 2, 4, …), not i/D")),
        ("pe_multiplied", {"multiply": True}, msg("the angle is pos / 10000^(2i/D): divide by the power, do not multiply")),
    ]
    return [suspect(m, transform(ref_pe(max_len, d_model, **kw)), message) for m, kw, message in options]


PE_TOL: Tolerance = {"atol": 1e-4, "rtol": 0}  # float32 angles: pos · ω carries ~1e-5 error at pos ≈ 100


def _table(sub, max_len, d_model):
    pe = sub.call("sinusoidal_positional_encoding", max_len, d_model)
    check(isinstance(pe, torch.Tensor),
          msg("sinusoidal_positional_encoding should return a torch tensor, got {pe}", pe=type(pe).__name__))
    return pe


def randn(n, *shape):
    return torch.randn(*shape, generator=gen(n))


def sizes(n):
    """A table size for this grading run: max_len in [40, 120), d_model even in [8, 64]."""
    g = gen(n)
    return int(torch.randint(40, 120, (1,), generator=g)), 2 * int(torch.randint(4, 33, (1,), generator=g))


# --- sinusoidal_positional_encoding -----------------------------------------------------

@exercise("sinusoidal_positional_encoding", points=0.5)
def test_pe_shape_dtype(sub):
    pe = _table(sub, 50, 16)
    check(tuple(pe.shape) == (50, 16), msg("sinusoidal_positional_encoding(50, 16) should be [max_len, d_model] = [50, 16] (one row per position, no batch axis), got {pe_shape}", pe_shape=list(pe.shape)),
          mistake="pe_table_shape")
    check(pe.dtype == torch.float32, msg("the table should be float32 (like the model's weights), got {pe_dtype}", pe_dtype=pe.dtype), mistake="pe_dtype")
    small = python_lines(sub, lambda: sub.call("sinusoidal_positional_encoding", 6, 4))
    large = python_lines(sub, lambda: sub.call("sinusoidal_positional_encoding", 48, 32))
    check(large <= small + 2, msg("sinusoidal_positional_encoding loops in Python: it runs {large} lines of Python for a [48, 32] table and {small} for a [6, 4] one, where vectorised code runs the same few for any size; build the positions as a column [max_len, 1] and the frequencies as a row, let broadcasting form every angle at once, then fill pe[:, 0::2] and pe[:, 1::2]", large=large, small=small),
          mistake="pe_python_loop")


@exercise("sinusoidal_positional_encoding", points=1)
def test_pe_values(sub):
    for max_len, d_model in (sizes(1), (20, 6)):
        table = _table(sub, max_len, d_model).double()
        corner = (slice(0, 3), slice(0, 4))  # small angles: float32 is exact enough for any mistake
        if tuple(table.shape) == (max_len, d_model):
            close(table[corner], ref_pe(max_len, d_model)[corner], msg("the first rows and columns of the table for max_len={max_len}, d_model={d_model} are wrong", max_len=max_len, d_model=d_model),
                  suspects=pe_suspects(max_len, d_model, lambda t, c=corner: t[c]), **PE_TOL)
        close(table, ref_pe(max_len, d_model),
              msg("the table for max_len={max_len}, d_model={d_model} should be PE[pos, 2i] = sin(pos / 10000^(2i/D)), PE[pos, 2i+1] = cos(pos / 10000^(2i/D))", max_len=max_len, d_model=d_model),
              suspects=pe_suspects(max_len, d_model), **PE_TOL)


@exercise("sinusoidal_positional_encoding", points=0.5)
def test_pe_first_rows_and_columns(sub):
    max_len, d_model = sizes(2)
    pe = _table(sub, max_len, d_model).double()
    check(tuple(pe.shape) == (max_len, d_model), msg("the table should be [{max_len}, {d_model}]", max_len=max_len, d_model=d_model))
    close(pe[0], ref_pe(1, d_model)[0], msg("position 0 should be [0, 1, 0, 1, …] (sin 0 = 0 in even columns, cos 0 = 1 in odd ones)"), atol=1e-6,
          suspects=pe_suspects(max_len, d_model, lambda t: t[0]))
    close(pe[:, :2], ref_pe(max_len, d_model)[:, :2], msg("columns 0 and 1 should be sin(pos) and cos(pos) (i = 0, frequency 1)"), suspects=pe_suspects(max_len, d_model, lambda t: t[:, :2]),
          **PE_TOL)


@exercise("sinusoidal_positional_encoding", points=0.5)
def test_pe_pairs_share_an_angle(sub):
    max_len, d_model = sizes(3)
    pe = _table(sub, max_len, d_model).double()
    check(tuple(pe.shape) == (max_len, d_model), msg("the table should be [{max_len}, {d_model}]", max_len=max_len, d_model=d_model))
    close(pe[:, 0::2] ** 2 + pe[:, 1::2] ** 2, torch.ones(max_len, d_model // 2),
          msg("each pair of columns (2i, 2i+1) should be a sin and a cos of the same angle, so PE[pos, 2i]² + PE[pos, 2i+1]² = 1"), atol=1e-5,
          suspects=pe_suspects(max_len, d_model, lambda t: t[:, 0::2] ** 2 + t[:, 1::2] ** 2))


@exercise("sinusoidal_positional_encoding", points=0.5)
def test_pe_relative_offsets(sub):
    max_len, d_model = sizes(4)
    k = int(torch.randint(2, 12, (1,), generator=gen(5)))
    pe = _table(sub, max_len, d_model).double()
    check(tuple(pe.shape) == (max_len, d_model), msg("the table should be [{max_len}, {d_model}]", max_len=max_len, d_model=d_model))

    def shifted_dots(t):
        return (t[:-k] * t[k:]).sum(-1)

    close(shifted_dots(pe), shifted_dots(ref_pe(max_len, d_model)),
          msg("PE[p] · PE[p + {k}] should be the same for every position p, Σ cos({k}·ω_i): PE[p + k] is a rotation of PE[p]", k=k), atol=1e-3, suspects=pe_suspects(max_len, d_model, shifted_dots))


# --- PositionalEncoding -----------------------------------------------------------------

def _module(sub, *args, **kwargs):
    m = sub.new("PositionalEncoding", *args, **kwargs)
    info = m.inspect()
    check(info.get("is_module"), msg("PositionalEncoding should be an nn.Module"))
    return m, info


@exercise("PositionalEncoding", points=0.5)
def test_pe_is_a_buffer(sub):
    m, info = _module(sub, 16, max_len=50)
    buffers = info["buffers"]
    check("pe" not in info["parameters"], msg("`pe` is fixed: register it as a buffer (self.register_buffer('pe', table)), not an nn.Parameter"), mistake="pe_parameter")
    check("pe" in buffers or not buffers, msg("name the buffer `pe` (found {buffers}): the model's code reads it by that name", buffers=', '.join(buffers)))
    check("pe" in buffers, msg("keep the table as a buffer named `pe` (self.register_buffer('pe', table)), not a plain attribute: a buffer moves with .to(device) and is saved in state_dict"), mistake="pe_not_buffer")
    pe = buffers["pe"]
    check(tuple(pe.shape) == (50, 16), msg("the buffer `pe` should be [max_len, d_model] = [50, 16], got {pe_shape}: forward adds pe[:L] to x [B, L, D]", pe_shape=list(pe.shape)), mistake="pe_buffer_shape")
    check(pe.dtype == torch.float32, msg("the buffer `pe` should be float32, got {pe_dtype}", pe_dtype=pe.dtype))
    close(pe.double(), ref_pe(50, 16), msg("the buffer `pe` should hold the sinusoidal table"), **PE_TOL)
    check(not info["parameters"], msg("PositionalEncoding has nothing to learn: it should have no parameters"))


@exercise("PositionalEncoding", points=1)
def test_pe_forward_adds_table(sub):
    max_len = 50
    m, _ = _module(sub, 16, max_len=max_len)
    m.eval()
    L = int(torch.randint(5, max_len, (1,), generator=gen(10)))
    x = randn(11, 2, L, 16)
    # one sentence first: pe sliced by the batch size (pe[:x.size(0)], the slice of a tutorial
    # whose x is [L, B, D]) adds row 0 to every position there, and fails on a batch of 2
    zeros = torch.zeros(1, max_len, 16)
    close(m(zeros), ref_pe(max_len, 16)[None], msg("with L = max_len every row of pe should be added"),
          suspects=[suspect("pe_sliced_by_batch", ref_pe(1, 16).expand(max_len, 16)[None],
                            msg("forward adds row 0 of pe to every position of a batch of one sentence: it slices pe by x.size(0), the batch size; x is [B, L, D], so add pe[:x.size(1)], the first L rows"))], **PE_TOL)
    # x as autograd sees it, the embeddings' output: forward must not change it in place
    # (x += pe[:L]: the grader names the argument changed, mistake changes_its_input)
    m.grad(x, grad_output=torch.ones(2, L, 16))
    close(m(x), x.double() + ref_pe(L, 16), msg("forward(x) should return x + pe[:L] for x of shape [B, L, D] = [2, {L}, 16] (the same rows for every sentence of the batch)", L=L),
          suspects=[suspect("pe_rescales_x", x.double() * 4.0 + ref_pe(L, 16), msg("forward multiplies x by √d_model: TokenEmbedding already did, so return x + pe[:L]"))], **PE_TOL)


def added(m, x):
    """x + pe[:L], or x·√D + pe[:L] when the module rescales x (a mistake the forward check
    charges), so that other checks judge only their own part."""
    want = x.double() + ref_pe(x.shape[1], x.shape[2])
    rescaled = x.double() * math.sqrt(x.shape[2]) + ref_pe(x.shape[1], x.shape[2])
    training = m.inspect()["training"]
    m.eval()
    out = m(x)
    m.train(training)
    return rescaled if torch.allclose(out.double(), rescaled, atol=1e-4) else want


@exercise("PositionalEncoding", points=0.5)
def test_pe_dropout(sub):
    m, _ = _module(sub, 16, max_len=50, dropout=0.5)
    x = randn(12, 4, 10, 16).abs() + 1.0
    expected = added(m, x)
    m.train()
    y = m(x)
    check(isinstance(y, torch.Tensor) and tuple(y.shape) == (4, 10, 16),
          msg("forward should return a tensor of the shape of x"))
    y = y.double()
    pe = ref_pe(10, 16).expand_as(y)
    scale = float((expected - pe)[0, 0, 0] / x[0, 0, 0])
    zeroed = y.abs() < 1e-7
    before = (y - pe).abs() < 1e-5  # entries where only the encoding is left: x was dropped
    check(not (before.float().mean() > 0.2 and torch.allclose(
        torch.where(before, 0.0, y), torch.where(before, 0.0, 2.0 * scale * x.double() + pe), atol=1e-4)),
        msg("dropout is applied to x before the encoding is added: apply it to the sum, dropout(x + pe[:L])"), mistake="pe_dropout_before_add")
    check(bool(zeroed.any()), msg("with dropout=0.5 in training mode some entries should be zeroed: apply nn.Dropout(dropout) after adding the encoding"), mistake="pe_no_dropout")
    check(torch.allclose(torch.where(zeroed, 0.0, y), torch.where(zeroed, 0.0, 2.0 * expected),
                         atol=1e-4, rtol=1e-5),
          msg("in training mode the kept entries should be (x + pe[:L]) / (1 - p): add the encoding, then apply nn.Dropout to the sum"))
    m.eval()
    y = m(x)
    dropped = (y.double().abs() < 1e-7) & (expected.abs() > 1e-3)
    check(not bool(dropped.any()), msg("in eval mode forward still zeroes entries: dropout must be off after model.eval(); use the module nn.Dropout(dropout), which follows the mode (F.dropout drops unless given training=self.training)"), mistake="pe_dropout_in_eval")
    close(y, expected, msg("in eval mode dropout should do nothing: output x + pe[:L]"), **PE_TOL)


def _rows(pe, d_model):
    """The number of rows of a table ``pe`` [..., max_len, d_model], or None."""
    if not isinstance(pe, torch.Tensor) or pe.dim() < 2 or pe.shape[-1] != d_model:
        return None
    return int(pe.shape[-2])


@exercise("PositionalEncoding", points=0.5)
def test_pe_defaults(sub):
    m, _ = _module(sub, 8)
    if _rows(m.get("pe"), 8) != 5000:
        given = _rows(_module(sub, 8, max_len=40)[0].get("pe"), 8) == 40  # max_len itself is used
        check(False, msg("PositionalEncoding(8) should default to max_len = 5000: `pe` of shape [5000, 8] (keep the signature __init__(self, d_model, max_len=5000, dropout=0.0))"),
              mistake="pe_defaults" if given else None)
    x = randn(13, 2, 10, 8)
    expected = added(m, x)
    m.train()  # the default dropout is 0: even in training mode nothing is dropped
    if not matches(m(x), expected, **PE_TOL):
        explicit, _ = _module(sub, 8, dropout=0.0)
        explicit.train()
        given = matches(explicit(x), expected, **PE_TOL)  # dropout=0.0 given: nothing dropped
        check(False, msg("with the default dropout = 0.0, even in training mode forward(x) should be x + pe[:L] (keep the signature __init__(self, d_model, max_len=5000, dropout=0.0))"),
              mistake="pe_defaults" if given else None)


@exercise("PositionalEncoding", points=0.5)
def test_pe_runs_on_the_model_device(sub):
    m, _ = _module(sub, 16, max_len=50)
    m.eval()
    try:
        m(randn(14, 2, 7, 16), forbid=(ON_DEVICE,))
    except SubmissionError as exc:
        if exc.exc_type == "DeviceMismatch":
            if "plain tensor attribute" in exc.message:
                diagnose("pe_not_buffer", msg("on a GPU this forward fails: {error}; register the table with self.register_buffer('pe', table) so that model.to(device) moves it", error=exc.message))
            diagnose("pe_table_on_cpu", msg("on a GPU this forward fails: {error}; add the registered buffer self.pe[:L], which moves with the model", error=exc.message))
        raise


# --- TokenEmbedding ---------------------------------------------------------------------

def _embedding(sub, vocab, d_model):
    m = sub.new("TokenEmbedding", vocab, d_model)
    info = m.inspect()
    check(info.get("is_module"), msg("TokenEmbedding should be an nn.Module"))
    check("embedding" in info["modules"], msg("TokenEmbedding should have a submodule named `embedding`, an nn.Embedding(vocab_size, d_model): weights are loaded by that name"),
          mistake="emb_submodule_name")
    check(info["modules"]["embedding"] == "torch.nn.modules.sparse.Embedding",
          msg("the submodule `embedding` should be an nn.Embedding(vocab_size, d_model)"))
    weight = info["parameters"].get("embedding.weight")
    check(weight is not None and tuple(weight.shape) == (vocab, d_model),
          msg("the embedding table should be [vocab_size, d_model] = [{vocab}, {d_model}]", vocab=vocab, d_model=d_model))
    return m, info


def emb_suspects(looked_up, d_model):
    return [
        suspect("emb_not_scaled", looked_up, msg("the vectors are not scaled: multiply them by √d_model = √{d_model}", d_model=d_model)),
        suspect("emb_divided", looked_up / math.sqrt(d_model), msg("the vectors are divided by √d_model: multiply them by √{d_model}", d_model=d_model)),
        suspect("emb_scaled_by_d", looked_up * d_model, msg("the vectors are multiplied by d_model = {d_model}: the factor is its square root, √{d_model}", d_model=d_model)),
    ]


@exercise("TokenEmbedding", points=0.5)
def test_embedding_submodule(sub):
    _embedding(sub, 10, 16)


@exercise("TokenEmbedding", points=1)
def test_embedding_scaled_lookup(sub):
    tokens = torch.randint(0, 10, (2, 5), generator=gen(20))
    for d_model, n in ((16, 21), (9, 22)):
        m, _ = _embedding(sub, 10, d_model)
        w = randn(n, 10, d_model)
        m.load_state_dict({"embedding.weight": w})
        m.eval()
        close(m(tokens), w[tokens] * math.sqrt(d_model),
              msg("forward(tokens) should look the tokens up and multiply by √d_model (= {scale} for d_model = {d_model})", scale=format(math.sqrt(d_model), 'g'), d_model=d_model), atol=1e-5, rtol=1e-5,
              suspects=emb_suspects(w[tokens], d_model))


@exercise("TokenEmbedding", points=0.5)
def test_embedding_init_scale(sub):
    _, info = _embedding(sub, 2000, 64)
    std = float(info["parameters"]["embedding.weight"].double().std())
    check(not 0.5 < std < 2.0 or 0.5 * 64 ** -0.5 < std < 2.0 * 64 ** -0.5,
          msg("the embedding keeps PyTorch's N(0, 1) initialisation (std {std}): initialise it with std d_model ** -0.5 (0.125 for d_model = 64), or × √d_model drowns the positional encoding", std=format(std, '.3g')), mistake="emb_init")
    check(0.5 * 64 ** -0.5 < std < 2.0 * 64 ** -0.5,
          msg("initialise the embedding with std d_model ** -0.5 (0.125 for d_model = 64), found std {std}", std=format(std, '.3g')))
    m, _ = _embedding(sub, 2000, 64)
    m.eval()
    out = m(torch.arange(2000)[None])
    rms = float(out.double().pow(2).mean().sqrt())
    check(0.5 < rms < 2.0, msg("embedded vectors should have entries of size about 1 (like the positional encoding's), found a root mean square of {rms}", rms=format(rms, '.3g')))
