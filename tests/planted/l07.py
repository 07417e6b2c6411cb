"""Planted mistakes in lesson 07 (sinusoidal table, PositionalEncoding, TokenEmbedding)."""

from planted import Variant, bug

LESSON = "07_positional_encoding"

FILL = "pe[:, 0::2] = torch.sin(angle)\n    pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])"

BUGS = [
    bug("sinusoidal_positional_encoding", "pe_concatenated", "concatenated instead of interleaved",
        (FILL, "pe = torch.cat([torch.sin(angle), torch.cos(angle)], dim=1)")),
    bug("sinusoidal_positional_encoding", "pe_sin_cos_swapped", "sin and cos swapped",
        (FILL, "pe[:, 0::2] = torch.cos(angle)\n    pe[:, 1::2] = torch.sin(angle[:, : d_model // 2])")),
    bug("sinusoidal_positional_encoding", "pe_exponent_j", "every column index instead of 2i in the exponent",
        ("two_i = torch.arange(0, d_model, 2, dtype=torch.float32)", "j = torch.arange(d_model, dtype=torch.float32)"),
        ("angle = position / torch.pow(10000.0, two_i / d_model)", "angle = position / torch.pow(10000.0, j / d_model)"),
        (FILL, "pe[:, 0::2] = torch.sin(angle[:, 0::2])\n    pe[:, 1::2] = torch.cos(angle[:, 1::2])")),
    bug("sinusoidal_positional_encoding", "pe_positions_from_1", "positions start at 1",
        ("torch.arange(max_len, dtype=torch.float32)", "torch.arange(1, max_len + 1, dtype=torch.float32)")),
    bug("sinusoidal_positional_encoding", "pe_exponent_i", "exponent i/D instead of 2i/D",
        ("torch.pow(10000.0, two_i / d_model)", "torch.pow(10000.0, two_i / 2 / d_model)")),
    bug("sinusoidal_positional_encoding", "pe_multiplied", "multiplies by 10000^(2i/D) instead of dividing",
        ("position / torch.pow(10000.0, two_i / d_model)", "position * torch.pow(10000.0, two_i / d_model)")),
    bug("sinusoidal_positional_encoding", "pe_dtype", "returns float64", ("return pe", "return pe.double()")),
    bug("PositionalEncoding", "pe_not_buffer", "pe kept as a plain attribute",
        ('self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model))',
         "self.pe = sinusoidal_positional_encoding(max_len, d_model)")),
    bug("PositionalEncoding", "pe_parameter", "pe registered as a parameter",
        ('self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model))',
         "self.pe = nn.Parameter(sinusoidal_positional_encoding(max_len, d_model), requires_grad=False)")),
    bug("PositionalEncoding", "pe_rescales_x", "scales x by √d_model again",
        ("self.dropout(x + self.pe[: x.size(1)])", "self.dropout(x * math.sqrt(x.size(-1)) + self.pe[: x.size(1)])")),
    bug("PositionalEncoding", "pe_no_dropout", "dropout forgotten", ("self.dropout(x + self.pe[: x.size(1)])", "x + self.pe[: x.size(1)]")),
    bug("PositionalEncoding", "changes_its_input", "x += pe in place",
        ("return self.dropout(x + self.pe[: x.size(1)])", "x += self.pe[: x.size(1)]\n        return self.dropout(x)")),
    bug("PositionalEncoding", "pe_dropout_before_add", "dropout before adding the encoding",
        ("self.dropout(x + self.pe[: x.size(1)])", "self.dropout(x) + self.pe[: x.size(1)]")),
    bug("PositionalEncoding", "pe_buffer_shape", "pe stored as [1, max_len, d_model]",
        ("sinusoidal_positional_encoding(max_len, d_model))", "sinusoidal_positional_encoding(max_len, d_model)[None])"),
        ("self.pe[: x.size(1)]", "self.pe[:, : x.size(1)]")),
    bug("TokenEmbedding", "emb_not_scaled", "not scaled", ("return self.embedding(tokens) * math.sqrt(self.d_model)",
                                         "return self.embedding(tokens)")),
    bug("TokenEmbedding", "emb_divided", "divided by √d_model", ("self.embedding(tokens) * math.sqrt", "self.embedding(tokens) / math.sqrt")),
    bug("TokenEmbedding", "emb_scaled_by_d", "scaled by d_model instead of √d_model",
        ("* math.sqrt(self.d_model)", "* self.d_model")),
    bug("TokenEmbedding", "emb_init", "N(0, 1) initialisation kept (drowns the encoding once scaled)",
        ("nn.init.normal_(self.embedding.weight, mean=0.0, std=d_model ** -0.5)", "pass")),
    bug("TokenEmbedding", "emb_submodule_name", "submodule named emb", ("self.embedding", "self.emb")),
]

BUGS += [
    bug("sinusoidal_positional_encoding", "pe_table_shape", "a batch axis added, [1, max_len, d_model]",
        ("return pe", "return pe.unsqueeze(0)")),
    bug("sinusoidal_positional_encoding", "pe_python_loop", "a double loop over positions and column pairs",
        source="""
def sinusoidal_positional_encoding(max_len, d_model):
    pe = torch.zeros(max_len, d_model)
    for pos in range(max_len):
        for i in range(0, d_model, 2):
            angle = pos / 10000 ** (i / d_model)
            pe[pos, i] = math.sin(angle)
            pe[pos, i + 1] = math.cos(angle)
    return pe
"""),
    bug("sinusoidal_positional_encoding", "pe_python_loop", "numpy columns filled in a loop over the pairs",
        source="""
def sinusoidal_positional_encoding(max_len, d_model):
    pe = np.zeros((max_len, d_model))
    pos = np.arange(max_len)[:, None]
    for i in range(0, d_model, 2):
        pe[:, i] = np.sin(pos[:, 0] / 10000 ** (i / d_model))
        pe[:, i + 1] = np.cos(pos[:, 0] / 10000 ** (i / d_model))
    return torch.tensor(pe, dtype=torch.float32)
"""),
    bug("sinusoidal_positional_encoding", "pe_python_loop", "a nested list comprehension of math.sin / math.cos",
        source="""
def sinusoidal_positional_encoding(max_len, d_model):
    return torch.tensor([[math.sin(p / 10000 ** (j / d_model)) if j % 2 == 0 else math.cos(p / 10000 ** ((j - 1) / d_model))
                          for j in range(d_model)] for p in range(max_len)], dtype=torch.float32)
"""),
    bug("PositionalEncoding", "pe_sliced_by_batch", "pe sliced by the batch size, pe[:x.size(0)]",
        ("self.pe[: x.size(1)]", "self.pe[: x.size(0)]")),
    bug("PositionalEncoding", "pe_defaults", "the default dropout changed to the paper's 0.1",
        ("max_len: int = 5000, dropout: float = 0.0", "max_len: int = 5000, dropout: float = 0.1")),
    bug("PositionalEncoding", "pe_defaults", "the default max_len changed to 512",
        ("max_len: int = 5000, dropout: float = 0.0", "max_len: int = 512, dropout: float = 0.0")),
    bug("PositionalEncoding", "pe_dropout_in_eval", "F.dropout without training=self.training",
        ("self.dropout = nn.Dropout(dropout)", "self.p = dropout"),
        ("return self.dropout(x + self.pe[: x.size(1)])", "return F.dropout(x + self.pe[: x.size(1)], self.p)")),
    bug("PositionalEncoding", "pe_table_on_cpu", "table rebuilt in forward (on the CPU)",
        ("self.dropout(x + self.pe[: x.size(1)])",
         "self.dropout(x + sinusoidal_positional_encoding(x.size(1), x.size(2)))")),
]

ALTERNATIVES = [
    Variant("PositionalEncoding", "buffer [1, max_len, D] style avoided: pe sliced with narrow and "
            "moved to x's device and dtype", source="""
class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model))

    def forward(self, x):
        return self.drop(x + self.pe.narrow(0, 0, x.size(1)).to(x.dtype))
"""),
    Variant("sinusoidal_positional_encoding", "log-space frequencies (the PyTorch tutorial's form)", source="""
def sinusoidal_positional_encoding(max_len, d_model):
    position = torch.arange(0, max_len).unsqueeze(1).float()
    div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
    pe = torch.zeros(max_len, d_model)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe
"""),
    Variant("sinusoidal_positional_encoding", "stack sin and cos, then reshape to interleave", source="""
def sinusoidal_positional_encoding(max_len, d_model):
    i = torch.arange(d_model // 2, dtype=torch.float64)
    angle = torch.arange(max_len, dtype=torch.float64)[:, None] / 10000 ** (2 * i / d_model)
    return torch.stack([angle.sin(), angle.cos()], dim=-1).reshape(max_len, d_model).float()
"""),
    Variant("sinusoidal_positional_encoding", "numpy table (broadcasting) converted to torch", source="""
def sinusoidal_positional_encoding(max_len, d_model):
    pos = np.arange(max_len)[:, None]
    angle = pos / np.power(10000, np.arange(0, d_model, 2) / d_model)[None, :]
    pe = np.zeros((max_len, d_model))
    pe[:, 0::2], pe[:, 1::2] = np.sin(angle), np.cos(angle)
    return torch.from_numpy(pe).float()
"""),
    Variant("sinusoidal_positional_encoding", "outer product of positions and frequencies, sin/cos for two columns",
            source="""
def sinusoidal_positional_encoding(max_len, d_model):
    freqs = torch.exp(-math.log(10000.0) * torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    angle = torch.outer(torch.arange(max_len, dtype=torch.float64), freqs)
    pe = torch.empty(max_len, d_model, dtype=torch.float64)
    for col, fn in ((0, torch.sin), (1, torch.cos)):  # two columns sets, whatever the size
        pe[:, col::2] = fn(angle)
    return pe.to(torch.float32)
"""),
    Variant("PositionalEncoding", "F.dropout with training=self.training, pe sliced by shape[-2]", source="""
class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()
        self.p = dropout
        self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model))

    def forward(self, x):
        return F.dropout(x + self.pe[: x.shape[-2]], p=self.p, training=self.training)
"""),
    Variant("PositionalEncoding", "non-persistent buffer, narrow()", source="""
class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=5000, dropout=0.0):
        super().__init__()
        self.register_buffer("pe", sinusoidal_positional_encoding(max_len, d_model), persistent=False)
        self.drop = nn.Dropout(p=dropout)

    def forward(self, x):
        return self.drop(x + self.pe.narrow(0, 0, x.shape[1]).unsqueeze(0))
"""),
    Variant("TokenEmbedding", "d_model ** 0.5 and init in a helper", source="""
class TokenEmbedding(nn.Module):
    def __init__(self, vocab_size, d_model):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, d_model)
        self.scale = d_model ** 0.5
        with torch.no_grad():
            self.embedding.weight.normal_(0.0, 1.0 / self.scale)

    def forward(self, tokens):
        return self.scale * self.embedding(tokens)
"""),
]

# What each planted mistake earns on its exercise (the rubric in CONTRIBUTING):
SCORES = {
    ('sinusoidal_positional_encoding', 'concatenated instead of interleaved'): 1,
    ('sinusoidal_positional_encoding', 'sin and cos swapped'): 1.5,
    ('sinusoidal_positional_encoding', 'every column index instead of 2i in the exponent'): 0.5,
    ('sinusoidal_positional_encoding', 'positions start at 1'): 1.5,
    ('sinusoidal_positional_encoding', 'exponent i/D instead of 2i/D'): 1.5,
    ('sinusoidal_positional_encoding', 'multiplies by 10000^(2i/D) instead of dividing'): 1.5,
    ('sinusoidal_positional_encoding', 'returns float64'): 2.5,
    ('PositionalEncoding', 'pe kept as a plain attribute'): 2,
    ('PositionalEncoding', 'pe registered as a parameter'): 2.5,
    ('PositionalEncoding', 'scales x by √d_model again'): 2,
    ('PositionalEncoding', 'dropout forgotten'): 2.5,
    ('PositionalEncoding', 'dropout before adding the encoding'): 2.5,
    ('PositionalEncoding', 'pe stored as [1, max_len, d_model]'): 2.5,
    ('TokenEmbedding', 'not scaled'): 0.5,
    ('TokenEmbedding', 'divided by √d_model'): 0.5,
    ('TokenEmbedding', 'scaled by d_model instead of √d_model'): 0.5,
    ('TokenEmbedding', 'N(0, 1) initialisation kept (drowns the encoding once scaled)'): 1.5,
    ('TokenEmbedding', 'submodule named emb'): 0,
    ('PositionalEncoding', 'table rebuilt in forward (on the CPU)'): 2.5,
    ('sinusoidal_positional_encoding', 'a batch axis added, [1, max_len, d_model]'): 0,
    ('sinusoidal_positional_encoding', 'a double loop over positions and column pairs'): 2.5,
    ('sinusoidal_positional_encoding', 'numpy columns filled in a loop over the pairs'): 2.5,
    ('sinusoidal_positional_encoding', 'a nested list comprehension of math.sin / math.cos'): 2.5,
    ('PositionalEncoding', 'pe sliced by the batch size, pe[:x.size(0)]'): 0.5,
    ('PositionalEncoding', "the default dropout changed to the paper's 0.1"): 2.5,
    ('PositionalEncoding', 'the default max_len changed to 512'): 2.5,
    ('PositionalEncoding', 'F.dropout without training=self.training'): 2.5,
}
