"""Planted mistakes in lesson 08 (the whole Transformer) and alternative correct solutions."""

from planted import Variant, bug

LESSON = "08_transformer"

ENC_POST = "x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, src_mask)))"
DEC_SELF_POST = "x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)))"
DEC_CROSS_POST = "x = self.norm2(x + self.dropout2(self.cross_attn(x, memory, memory, memory_mask)))"
DEC_FF_POST = "x = self.norm3(x + self.dropout3(self.ff(x)))"

BUGS = [
    # PositionwiseFeedForward
    bug("PositionwiseFeedForward", "no activation between the linear layers",
        ("self.linear2(self.dropout(self.activation(self.linear1(x))))",
         "self.linear2(self.dropout(self.linear1(x)))")),
    bug("PositionwiseFeedForward", "activation argument ignored (always ReLU)",
        ('torch.relu if activation == "relu" else gelu', "torch.relu")),
    bug("PositionwiseFeedForward", "tanh-approximate GELU instead of exact",
        ("else gelu", 'else (lambda t: F.gelu(t, approximate="tanh"))')),
    bug("PositionwiseFeedForward", "dropout argument ignored",
        ("self.dropout = nn.Dropout(dropout)", "self.dropout = nn.Dropout(0.0)")),
    bug("PositionwiseFeedForward", "activation after the second linear layer",
        ("self.linear2(self.dropout(self.activation(self.linear1(x))))",
         "self.activation(self.linear2(self.dropout(self.linear1(x))))")),
    # EncoderLayer
    bug("EncoderLayer", "inverted LN placement (norm_first flag reversed)",
        ("if self.norm_first:\n            h = self.norm1(x)",
         "if not self.norm_first:\n            h = self.norm1(x)")),
    bug("EncoderLayer", "missing residual around self-attention (post-LN)",
        (ENC_POST, "x = self.norm1(self.dropout1(self.self_attn(x, x, x, src_mask)))")),
    bug("EncoderLayer", "missing residual around the feed-forward (pre-LN)",
        ("x = x + self.dropout2(self.ff(self.norm2(x)))", "x = self.dropout2(self.ff(self.norm2(x)))")),
    bug("EncoderLayer", "src_mask ignored",
        ("self.self_attn(x, x, x, src_mask)", "self.self_attn(x, x, x)"),
        ("self.self_attn(h, h, h, src_mask)", "self.self_attn(h, h, h)")),
    bug("EncoderLayer", "pre-LN residual adds the normalised input instead of x",
        ("h = self.norm1(x)\n            x = x + self.dropout1",
         "x = self.norm1(x)\n            h = x\n            x = x + self.dropout1")),
    bug("EncoderLayer", "norm1 and norm2 swapped",
        ("self.norm1 = LayerNorm(d_model)\n        self.norm2 = LayerNorm(d_model)",
         "self.norm2 = LayerNorm(d_model)\n        self.norm1 = LayerNorm(d_model)"),
        ("x = self.norm1(x + self.dropout1", "x = self.norm2(x + self.dropout1"),
        ("x = self.norm2(x + self.dropout2(self.ff(x)))", "x = self.norm1(x + self.dropout2(self.ff(x)))")),
    # DecoderLayer
    bug("DecoderLayer", "cross-attention keys and values from the decoder",
        (DEC_CROSS_POST, "x = self.norm2(x + self.dropout2(self.cross_attn(x, x, x, memory_mask)))"),
        ("self.cross_attn(h, memory, memory, memory_mask)", "self.cross_attn(h, h, h, memory_mask)")),
    bug("DecoderLayer", "cross-attention keys from the decoder (values from memory)",
        (DEC_CROSS_POST, "x = self.norm2(x + self.dropout2(self.cross_attn(x, x, memory, memory_mask)))")),
    bug("DecoderLayer", "cross-attention queries from memory",
        (DEC_CROSS_POST, "x = self.norm2(x + self.dropout2(self.cross_attn(memory, x, x)))")),
    bug("DecoderLayer", "unmasked target self-attention",
        ("self.self_attn(x, x, x, tgt_mask)", "self.self_attn(x, x, x)"),
        ("self.self_attn(h, h, h, tgt_mask)", "self.self_attn(h, h, h)")),
    bug("DecoderLayer", "memory_mask ignored",
        ("self.cross_attn(x, memory, memory, memory_mask)", "self.cross_attn(x, memory, memory)"),
        ("self.cross_attn(h, memory, memory, memory_mask)", "self.cross_attn(h, memory, memory)")),
    bug("DecoderLayer", "cross- before self-attention",
        (DEC_SELF_POST + "\n            " + DEC_CROSS_POST,
         "x = self.norm2(x + self.dropout2(self.cross_attn(x, memory, memory, memory_mask)))\n"
         "            x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)))")),
    bug("DecoderLayer", "inverted LN placement (norm_first flag reversed)",
        ("if self.norm_first:\n            h = self.norm1(x)\n            x = x + self.dropout1(self.self_attn(h, h, h, tgt_mask))",
         "if not self.norm_first:\n            h = self.norm1(x)\n            x = x + self.dropout1(self.self_attn(h, h, h, tgt_mask))")),
    bug("DecoderLayer", "missing residual around cross-attention",
        (DEC_CROSS_POST, "x = self.norm2(self.dropout2(self.cross_attn(x, memory, memory, memory_mask)))"),
        ("x = x + self.dropout2(self.cross_attn(h, memory, memory, memory_mask))",
         "x = self.dropout2(self.cross_attn(h, memory, memory, memory_mask))")),
    bug("DecoderLayer", "missing residual around the feed-forward",
        (DEC_FF_POST, "x = self.norm3(self.dropout3(self.ff(x)))")),
    bug("DecoderLayer", "pre-LN cross-attention attends to the normalised memory",
        ("self.cross_attn(h, memory, memory, memory_mask)",
         "self.cross_attn(h, self.norm2(memory), self.norm2(memory), memory_mask)")),
    # Transformer
    bug("Transformer", "no causal mask built in decode",
        ("tgt_mask = causal_mask(tgt.size(1), device=tgt.device) & padding_mask(tgt, self.pad_id)",
         "tgt_mask = padding_mask(tgt, self.pad_id)")),
    bug("Transformer", "no source padding mask in the encoder",
        ("x = layer(x, src_mask)", "x = layer(x)")),
    bug("Transformer", "no memory mask in the decoder",
        ("self.decode(tgt, memory, memory_mask=src_mask)", "self.decode(tgt, memory)")),
    bug("Transformer", "masks built from a hard-coded pad id 0",
        ("src_mask = padding_mask(src, self.pad_id)\n        memory",
         "src_mask = padding_mask(src, 0)\n        memory"),
        ("& padding_mask(tgt, self.pad_id)", "& padding_mask(tgt, 0)")),
    bug("Transformer", "no positional encoding",
        ("x = self.pos_enc(self.src_embed(src))", "x = self.src_embed(src)"),
        ("x = self.pos_enc(self.tgt_embed(tgt))", "x = self.tgt_embed(tgt)")),
    bug("Transformer", "no final norms in pre-LN",
        ("return self.encoder_norm(x) if self.norm_first else x", "return x"),
        ("return self.decoder_norm(x) if self.norm_first else x", "return x")),
    bug("Transformer", "final norms added in post-LN too (like nn.Transformer)",
        ("if norm_first:\n            self.encoder_norm", "if True:\n            self.encoder_norm"),
        ("return self.encoder_norm(x) if self.norm_first else x", "return self.encoder_norm(x)"),
        ("return self.decoder_norm(x) if self.norm_first else x", "return self.decoder_norm(x)")),
    bug("Transformer", "norm_first not passed to the layers",
        ("EncoderLayer(d_model, n_head, d_ff, dropout, norm_first)", "EncoderLayer(d_model, n_head, d_ff, dropout)"),
        ("DecoderLayer(d_model, n_head, d_ff, dropout, norm_first)", "DecoderLayer(d_model, n_head, d_ff, dropout)")),
    bug("Transformer", "decoder reads the source embedding",
        ("x = self.pos_enc(self.tgt_embed(tgt))", "x = self.pos_enc(self.src_embed(tgt))")),
    bug("Transformer", "one layer object repeated (shared weights)",
        ("self.encoder_layers = nn.ModuleList(\n            [EncoderLayer(d_model, n_head, d_ff, dropout, norm_first) for _ in range(num_encoder_layers)])",
         "_enc = EncoderLayer(d_model, n_head, d_ff, dropout, norm_first)\n"
         "        self.encoder_layers = nn.ModuleList([_enc] * num_encoder_layers)")),
    # greedy_decode
    bug("greedy_decode", "never stops early (always max_len)",
        ("while ys.size(1) < max_len and not done.all():", "while ys.size(1) < max_len:")),
    bug("greedy_decode", "drops bos from the output", ("return ys", "return ys[:, 1:]")),
    bug("greedy_decode", "starts without bos (first token fed is pad)",
        ("ys = torch.full((src.size(0), 1), bos_id,", "ys = torch.full((src.size(0), 1), model.pad_id,")),
    bug("greedy_decode", "no pad after eos",
        ("logits.argmax(-1).masked_fill(done, model.pad_id)", "logits.argmax(-1)")),
    bug("greedy_decode", "stops at the first eos of any sequence",
        ("while ys.size(1) < max_len and not done.all():",
         "while ys.size(1) < max_len and not done.any():")),
    bug("greedy_decode", "one token too many (max_len + 1)",
        ("while ys.size(1) < max_len and", "while ys.size(1) <= max_len and")),
    bug("greedy_decode", "no memory mask when decoding",
        ("model.decode(ys, memory, memory_mask=src_mask)", "model.decode(ys, memory)")),
    bug("greedy_decode", "takes the first position's logits instead of the last",
        ("memory_mask=src_mask)[:, -1])", "memory_mask=src_mask)[:, 0])")),
]

ALTERNATIVES = [
    # Targets are right-padded and the causal mask already hides every later position, pads
    # included, from the real tokens: the target padding mask changes only the (unscored)
    # rows of the pad positions themselves.
    Variant("Transformer", "causal target mask without the target padding mask", replace=(
        ("tgt_mask = causal_mask(tgt.size(1), device=tgt.device) & padding_mask(tgt, self.pad_id)",
         "tgt_mask = causal_mask(tgt.size(1), device=tgt.device)"),)),
    Variant("PositionwiseFeedForward", "nn.ReLU / nn.GELU modules and F.gelu", source='''
class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu"):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.act = {"relu": nn.ReLU(), "gelu": nn.GELU()}[activation]
        self.drop = nn.Dropout(dropout)
        self.linear2 = nn.Linear(d_ff, d_model)

    def forward(self, x):
        return self.linear2(self.drop(self.act(self.linear1(x))))
'''),
    Variant("EncoderLayer", "a sublayer helper and a single dropout module", source='''
class EncoderLayer(nn.Module):
    def __init__(self, d_model, n_head, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_head, dropout=dropout)
        self.ff = PositionwiseFeedForward(d_model, d_ff, dropout=dropout)
        self.norm1, self.norm2 = LayerNorm(d_model), LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)
        self.norm_first = norm_first

    def _sub(self, x, norm, f):
        if self.norm_first:
            return x + self.drop(f(norm(x)))
        return norm(x + self.drop(f(x)))

    def forward(self, x, src_mask=None):
        x = self._sub(x, self.norm1, lambda h: self.self_attn(h, h, h, mask=src_mask))
        return self._sub(x, self.norm2, self.ff)
'''),
    Variant("DecoderLayer", "keyword arguments and a loop over sub-layers", source='''
class DecoderLayer(nn.Module):
    def __init__(self, d_model, n_head, d_ff, dropout=0.0, norm_first=False):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_head, dropout)
        self.cross_attn = MultiHeadAttention(d_model, n_head, dropout)
        self.ff = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.norm3 = LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x, memory, tgt_mask=None, memory_mask=None):
        subs = [(self.norm1, lambda h: self.self_attn(query=h, key=h, value=h, mask=tgt_mask)),
                (self.norm2, lambda h: self.cross_attn(query=h, key=memory, value=memory, mask=memory_mask)),
                (self.norm3, self.ff)]
        for norm, f in subs:
            x = x + self.drop(f(norm(x))) if self.norm_first else norm(x + self.drop(f(x)))
        return x
'''),
    Variant("Transformer", "masks written with tril and comparisons; float masks avoided",
            replace=(
                ("tgt_mask = causal_mask(tgt.size(1), device=tgt.device) & padding_mask(tgt, self.pad_id)",
                 "L = tgt.shape[1]\n            tgt_mask = torch.ones(L, L, dtype=torch.bool, device=tgt.device).tril()"
                 "[None, None] & (tgt != self.pad_id)[:, None, None, :]"),
                ("src_mask = padding_mask(src, self.pad_id)\n        memory",
                 "src_mask = (src != self.pad_id).unsqueeze(1).unsqueeze(2)\n        memory"),
            )),
    Variant("greedy_decode", "calls model(src, ys) at every step and preallocates pads", source='''
@torch.no_grad()
def greedy_decode(model, src, max_len, bos_id, eos_id):
    model.eval()
    B = src.shape[0]
    ys = torch.full((B, max_len), model.pad_id, dtype=torch.long)
    ys[:, 0] = bos_id
    finished = torch.zeros(B, dtype=torch.bool)
    t = 1
    while t < max_len:
        nxt = model(src, ys[:, :t])[:, -1].argmax(-1)
        nxt[finished] = model.pad_id
        ys[:, t] = nxt
        finished |= nxt == eos_id
        t += 1
        if finished.all():
            break
    return ys[:, :t]
'''),
    Variant("greedy_decode", "decodes only the unfinished rows", source='''
@torch.no_grad()
def greedy_decode(model, src, max_len, bos_id, eos_id):
    model.eval()
    mask = padding_mask(src, model.pad_id)
    memory = model.encode(src, mask)
    B = src.size(0)
    out = [[bos_id] for _ in range(B)]
    alive = list(range(B))
    while alive and len(out[alive[0]]) < max_len:
        idx = torch.tensor(alive)
        ys = torch.tensor([out[i] for i in alive])
        h = model.decode(ys, memory[idx], memory_mask=mask[idx])
        nxt = model.generator(h[:, -1]).argmax(-1).tolist()
        for i, t in zip(alive, nxt):
            out[i].append(t)
        alive = [i for i in alive if out[i][-1] != eos_id]
    width = max(len(r) for r in out)
    return torch.tensor([r + [model.pad_id] * (width - len(r)) for r in out])
'''),
]
