"""Hidden graders of lesson 07_positional_encoding (sinusoidal table, PositionalEncoding,
TokenEmbedding).

The oracle is the paper's formula computed in float64 here; weights are injected by name;
dropout is off except in the one check of dropout itself.
"""

import numpy as np
import torch

from grader.framework import check, close, exercise


def ref_pe(max_len, d_model):
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)
    angle = pos / 10000.0 ** (two_i / d_model)
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe


PE_TOL = {"atol": 1e-4, "rtol": 0}  # float32 angles: pos · ω carries ~1e-5 error at pos ≈ 100


def _table(sub, max_len, d_model):
    pe = sub.call("sinusoidal_positional_encoding", max_len, d_model)
    check(isinstance(pe, torch.Tensor),
          f"sinusoidal_positional_encoding should return a torch tensor, got {type(pe).__name__}")
    check(tuple(pe.shape) == (max_len, d_model),
          f"sinusoidal_positional_encoding({max_len}, {d_model}) should be [{max_len}, {d_model}], "
          f"got {list(pe.shape)}")
    return pe


# --- sinusoidal_positional_encoding -----------------------------------------------------

@exercise("sinusoidal_positional_encoding", points=0.5)
def test_pe_shape_dtype(sub):
    pe = _table(sub, 50, 16)
    check(pe.dtype == torch.float32, f"the table should be float32, got {pe.dtype}")


@exercise("sinusoidal_positional_encoding", points=1)
def test_pe_values(sub):
    close(_table(sub, 128, 64), ref_pe(128, 64),
          "PE[pos, 2i] = sin(pos / 10000^(2i/D)) and PE[pos, 2i+1] = cos(pos / 10000^(2i/D)), "
          "positions from 0, columns interleaved sin, cos, sin, cos, …", **PE_TOL)
    close(_table(sub, 20, 6), ref_pe(20, 6), "the table for max_len=20, d_model=6 is wrong", **PE_TOL)


@exercise("sinusoidal_positional_encoding", points=0.5)
def test_pe_first_rows_and_columns(sub):
    pe = _table(sub, 40, 16)
    close(pe[0], torch.tensor([0.0, 1.0] * 8),
          "position 0 should be [0, 1, 0, 1, …] (sin 0 = 0 in even columns, cos 0 = 1 in odd ones): "
          "positions start at 0, and the sines come first", atol=1e-6)
    pos = torch.arange(40, dtype=torch.float64)
    close(pe[:, 0], torch.sin(pos), "column 0 should be sin(pos) (i = 0, frequency 1)", **PE_TOL)
    close(pe[:, 1], torch.cos(pos), "column 1 should be cos(pos): the cosine of the same angle as "
          "column 0 (interleaved, and the exponent uses 2i, shared by a pair of columns)", **PE_TOL)


@exercise("sinusoidal_positional_encoding", points=0.5)
def test_pe_pairs_share_an_angle(sub):
    pe = _table(sub, 60, 32).double()
    close(pe[:, 0::2] ** 2 + pe[:, 1::2] ** 2, torch.ones(60, 16),
          "each pair of columns (2i, 2i+1) should be a sin and a cos of the same angle, so "
          "PE[pos, 2i]² + PE[pos, 2i+1]² = 1", atol=1e-5)


@exercise("sinusoidal_positional_encoding", points=0.5)
def test_pe_relative_offsets(sub):
    pe = _table(sub, 100, 32).double()
    dots = pe[:-7] @ pe[7:].T  # row p, column q: PE[p] · PE[q + 7]
    diag = torch.diagonal(dots, offset=0)  # PE[p] · PE[p + 7] for every p
    close(diag, torch.full_like(diag, float(diag[0])),
          "PE[p] · PE[p + 7] should be the same for every position p (it is Σ cos(7·ω_i)): "
          "PE[p + k] is a rotation of PE[p]", atol=1e-3)


# --- PositionalEncoding -----------------------------------------------------------------

X = torch.from_numpy(np.random.default_rng(7).normal(size=(2, 10, 16))).float()


def _module(sub, *args, **kwargs):
    m = sub.new("PositionalEncoding", *args, **kwargs)
    info = m.inspect()
    check(info.get("is_module"), "PositionalEncoding should be an nn.Module")
    return m, info


@exercise("PositionalEncoding", points=1)
def test_pe_is_a_buffer(sub):
    m, info = _module(sub, 16, max_len=50)
    buffers = info["buffers"]
    check("pe" in buffers, "keep the table as a buffer named `pe` (self.register_buffer('pe', …)), "
          "not a plain attribute: a buffer moves with .to(device) and is saved in state_dict")
    check("pe" not in info["parameters"], "`pe` is fixed: register it as a buffer, not a parameter")
    pe = buffers["pe"]
    check(tuple(pe.shape) == (50, 16),
          f"the buffer `pe` should be [max_len, d_model] = [50, 16], got {list(pe.shape)}")
    check(pe.dtype == torch.float32, f"the buffer `pe` should be float32, got {pe.dtype}")
    close(pe, ref_pe(50, 16), "the buffer `pe` should hold the sinusoidal table", **PE_TOL)
    check(not info["parameters"], "PositionalEncoding has nothing to learn: it should have no parameters")


@exercise("PositionalEncoding", points=1)
def test_pe_forward_adds_table(sub):
    m, _ = _module(sub, 16, max_len=50)
    m.eval()
    close(m(X), X.double() + ref_pe(10, 16),
          "forward(x) should return x + pe[:L] for x of shape [B, L, D] (the same rows for every "
          "sentence of the batch); do not rescale x here: TokenEmbedding already did", **PE_TOL)
    zeros = torch.zeros(1, 50, 16)
    close(m(zeros), ref_pe(50, 16)[None], "with L = max_len every row of pe should be added", **PE_TOL)


@exercise("PositionalEncoding", points=0.5)
def test_pe_dropout(sub):
    m, _ = _module(sub, 16, max_len=50, dropout=0.5)
    m.train()
    ones = torch.ones(4, 10, 16)
    y = m(ones)
    expected = ones.double() + ref_pe(10, 16)
    check(isinstance(y, torch.Tensor) and tuple(y.shape) == (4, 10, 16),
          "forward should return a tensor of the shape of x")
    zeroed = y == 0
    check(bool(zeroed.any()), "with dropout=0.5 in training mode some entries should be zeroed: "
          "apply nn.Dropout(dropout) after adding the encoding")
    close(torch.where(zeroed, 0.0, y.double()), torch.where(zeroed, 0.0, 2.0 * expected),
          "in training mode the kept entries should be (x + pe) / (1 - p): dropout after the sum",
          atol=1e-4, rtol=1e-5)
    m.eval()
    close(m(ones), expected, "in eval mode dropout should do nothing: output x + pe[:L]", **PE_TOL)


@exercise("PositionalEncoding", points=0.5)
def test_pe_defaults(sub):
    m, info = _module(sub, 8)
    pe = info["buffers"].get("pe")
    check(pe is not None and tuple(pe.shape) == (5000, 8),
          "PositionalEncoding(8) should default to max_len = 5000: a buffer `pe` of shape [5000, 8]")
    m.train()  # the default dropout is 0: even in training mode nothing is dropped
    x = X[:, :, :8]
    close(m(x), x.double() + ref_pe(10, 8),
          "with the default dropout = 0.0, even in training mode forward(x) should be x + pe[:L]", **PE_TOL)


# --- TokenEmbedding ---------------------------------------------------------------------

TOKENS = torch.tensor([[1, 2, 3, 0], [4, 4, 9, 7]])
W = torch.from_numpy(np.random.default_rng(11).normal(size=(10, 16))).float()


def _embedding(sub, vocab, d_model):
    m = sub.new("TokenEmbedding", vocab, d_model)
    info = m.inspect()
    check(info.get("is_module"), "TokenEmbedding should be an nn.Module")
    check(info["modules"].get("embedding") == "torch.nn.modules.sparse.Embedding",
          "TokenEmbedding should have a submodule named `embedding`, an nn.Embedding(vocab_size, d_model)")
    weight = info["parameters"].get("embedding.weight")
    check(weight is not None and tuple(weight.shape) == (vocab, d_model),
          f"the embedding table should be [vocab_size, d_model] = [{vocab}, {d_model}]")
    return m, info


@exercise("TokenEmbedding", points=0.5)
def test_embedding_submodule(sub):
    _embedding(sub, 10, 16)


@exercise("TokenEmbedding", points=1)
def test_embedding_scaled_lookup(sub):
    m, _ = _embedding(sub, 10, 16)
    m.load_state_dict({"embedding.weight": W})
    m.eval()
    y = m(TOKENS)
    close(y, W[TOKENS] * 4.0,
          "forward(tokens) should look the tokens up and multiply by √d_model (= 4 for d_model = 16), "
          "neither leave them unscaled nor divide", atol=1e-5, rtol=1e-5)
    m2, _ = _embedding(sub, 10, 9)
    m2.load_state_dict({"embedding.weight": W[:, :9]})
    close(m2(TOKENS), W[:, :9][TOKENS] * 3.0,
          "with d_model = 9 the vectors should be multiplied by √9 = 3", atol=1e-5, rtol=1e-5)


@exercise("TokenEmbedding", points=0.5)
def test_embedding_init_scale(sub):
    _, info = _embedding(sub, 2000, 64)
    std = float(info["parameters"]["embedding.weight"].double().std())
    check(0.5 * 64 ** -0.5 < std < 2.0 * 64 ** -0.5,
          f"initialise the embedding with std d_model ** -0.5 (0.125 for d_model = 64), found std "
          f"{std:.3g}: N(0, 1) times √d_model would drown the positional encoding")
    m, _ = _embedding(sub, 2000, 64)
    m.eval()
    out = m(torch.arange(2000)[None])
    rms = float(out.double().pow(2).mean().sqrt())
    check(0.5 < rms < 2.0, f"embedded vectors should have entries of size about 1 (like the "
          f"positional encoding's), found a root mean square of {rms:.3g}")
