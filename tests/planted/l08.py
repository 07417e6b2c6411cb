"""Planted mistakes in lesson 08 (the whole Transformer) and alternative correct solutions."""

from planted import Variant, bug

LESSON = "08_transformer"

ENC_POST = "x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, src_mask)))"
DEC_SELF_POST = "x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)))"
DEC_CROSS_POST = "x = self.norm2(x + self.dropout2(self.cross_attn(x, memory, memory, memory_mask)))"
DEC_FF_POST = "x = self.norm3(x + self.dropout3(self.ff(x)))"

BUGS = [
    # PositionwiseFeedForward
    bug("PositionwiseFeedForward", "ffn_no_activation", "no activation between the linear layers",
        ("self.linear2(self.dropout(self.activation(self.linear1(x))))",
         "self.linear2(self.dropout(self.linear1(x)))")),
    bug("PositionwiseFeedForward", "ffn_activation_ignored", "activation argument ignored (always ReLU)",
        ('torch.relu if activation == "relu" else gelu', "torch.relu")),
    bug("PositionwiseFeedForward", "ffn_tanh_gelu", "tanh-approximate GELU instead of exact",
        ("else gelu", 'else (lambda t: F.gelu(t, approximate="tanh"))')),
    bug("PositionwiseFeedForward", "ffn_dropout_ignored", "dropout argument ignored",
        ("self.dropout = nn.Dropout(dropout)", "self.dropout = nn.Dropout(0.0)")),
    bug("PositionwiseFeedForward", "ffn_activation_after", "activation after the second linear layer",
        ("self.linear2(self.dropout(self.activation(self.linear1(x))))",
         "self.activation(self.linear2(self.dropout(self.linear1(x))))")),
    # EncoderLayer
    bug("EncoderLayer", "ln_placement_swapped", "inverted LN placement (norm_first flag reversed)",
        ("if self.norm_first:\n            h = self.norm1(x)",
         "if not self.norm_first:\n            h = self.norm1(x)")),
    bug("EncoderLayer", "no_residual_attn", "missing residual around self-attention (post-LN)",
        (ENC_POST, "x = self.norm1(self.dropout1(self.self_attn(x, x, x, src_mask)))")),
    bug("EncoderLayer", "no_residual_ff", "missing residual around the feed-forward (pre-LN)",
        ("x = x + self.dropout2(self.ff(self.norm2(x)))", "x = self.dropout2(self.ff(self.norm2(x)))")),
    bug("EncoderLayer", "src_mask_ignored", "src_mask ignored",
        ("self.self_attn(x, x, x, src_mask)", "self.self_attn(x, x, x)"),
        ("self.self_attn(h, h, h, src_mask)", "self.self_attn(h, h, h)")),
    # a mask must matter in each branch: one branch dropping it is caught on its own
    bug("EncoderLayer", "src_mask_ignored", "src_mask ignored in the pre-LN branch only",
        ("self.self_attn(h, h, h, src_mask)", "self.self_attn(h, h, h)")),
    bug("EncoderLayer", "src_mask_ignored", "src_mask ignored in the post-LN branch only",
        ("self.self_attn(x, x, x, src_mask)", "self.self_attn(x, x, x)")),
    bug("EncoderLayer", "pre_ln_residual_normalised", "pre-LN residual adds the normalised input instead of x",
        ("h = self.norm1(x)\n            x = x + self.dropout1",
         "x = self.norm1(x)\n            h = x\n            x = x + self.dropout1")),
    bug("EncoderLayer", "norms_swapped", "norm1 and norm2 swapped",
        ("self.norm1 = LayerNorm(d_model)\n        self.norm2 = LayerNorm(d_model)",
         "self.norm2 = LayerNorm(d_model)\n        self.norm1 = LayerNorm(d_model)"),
        ("x = self.norm1(x + self.dropout1", "x = self.norm2(x + self.dropout1"),
        ("x = self.norm2(x + self.dropout2(self.ff(x)))", "x = self.norm1(x + self.dropout2(self.ff(x)))")),
    # DecoderLayer
    bug("DecoderLayer", "cross_kv_from_decoder", "cross-attention keys and values from the decoder",
        (DEC_CROSS_POST, "x = self.norm2(x + self.dropout2(self.cross_attn(x, x, x, memory_mask)))"),
        ("self.cross_attn(h, memory, memory, memory_mask)", "self.cross_attn(h, h, h, memory_mask)")),
    bug("DecoderLayer", "cross_keys_from_decoder", "cross-attention keys from the decoder (values from memory)",
        (DEC_CROSS_POST, "x = self.norm2(x + self.dropout2(self.cross_attn(x, x, memory, memory_mask)))")),
    bug("DecoderLayer", "cross_queries_from_memory", "cross-attention queries from memory",
        (DEC_CROSS_POST, "x = self.norm2(x + self.dropout2(self.cross_attn(memory, x, x)))")),
    bug("DecoderLayer", "tgt_mask_ignored", "unmasked target self-attention",
        ("self.self_attn(x, x, x, tgt_mask)", "self.self_attn(x, x, x)"),
        ("self.self_attn(h, h, h, tgt_mask)", "self.self_attn(h, h, h)")),
    bug("DecoderLayer", "memory_mask_ignored", "memory_mask ignored",
        ("self.cross_attn(x, memory, memory, memory_mask)", "self.cross_attn(x, memory, memory)"),
        ("self.cross_attn(h, memory, memory, memory_mask)", "self.cross_attn(h, memory, memory)")),
    bug("DecoderLayer", "memory_mask_ignored", "memory_mask ignored in the post-LN branch only",
        ("self.cross_attn(x, memory, memory, memory_mask)", "self.cross_attn(x, memory, memory)")),
    bug("DecoderLayer", "memory_mask_ignored", "memory_mask ignored in the pre-LN branch only",
        ("self.cross_attn(h, memory, memory, memory_mask)", "self.cross_attn(h, memory, memory)")),
    bug("DecoderLayer", "tgt_mask_ignored", "tgt_mask ignored in the pre-LN branch only",
        ("self.self_attn(h, h, h, tgt_mask)", "self.self_attn(h, h, h)")),
    bug("DecoderLayer", "cross_before_self", "cross- before self-attention",
        (DEC_SELF_POST + "\n            " + DEC_CROSS_POST,
         "x = self.norm2(x + self.dropout2(self.cross_attn(x, memory, memory, memory_mask)))\n"
         "            x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)))")),
    bug("DecoderLayer", "ln_placement_swapped", "inverted LN placement (norm_first flag reversed)",
        ("if self.norm_first:\n            h = self.norm1(x)\n            x = x + self.dropout1(self.self_attn(h, h, h, tgt_mask))",
         "if not self.norm_first:\n            h = self.norm1(x)\n            x = x + self.dropout1(self.self_attn(h, h, h, tgt_mask))")),
    bug("DecoderLayer", "no_residual_cross", "missing residual around cross-attention",
        (DEC_CROSS_POST, "x = self.norm2(self.dropout2(self.cross_attn(x, memory, memory, memory_mask)))"),
        ("x = x + self.dropout2(self.cross_attn(h, memory, memory, memory_mask))",
         "x = self.dropout2(self.cross_attn(h, memory, memory, memory_mask))")),
    bug("DecoderLayer", "no_residual_ff", "missing residual around the feed-forward",
        (DEC_FF_POST, "x = self.norm3(self.dropout3(self.ff(x)))")),
    bug("DecoderLayer", "pre_ln_normalised_memory", "pre-LN cross-attention attends to the normalised memory",
        ("self.cross_attn(h, memory, memory, memory_mask)",
         "self.cross_attn(h, self.norm2(memory), self.norm2(memory), memory_mask)")),
    # Transformer
    bug("Transformer", "no_causal_mask", "no causal mask built in decode",
        ("tgt_mask = causal_mask(tgt.size(1), device=tgt.device) & padding_mask(tgt, self.pad_id)",
         "tgt_mask = padding_mask(tgt, self.pad_id)")),
    bug("Transformer", "no_src_padding_mask", "no source padding mask in the encoder",
        ("x = layer(x, src_mask)", "x = layer(x)")),
    bug("Transformer", "no_memory_mask", "no memory mask in the decoder",
        ("self.decode(tgt, memory, memory_mask=src_mask)", "self.decode(tgt, memory)")),
    bug("Transformer", "pad_id_hardcoded", "masks built from a hard-coded pad id 0",
        ("src_mask = padding_mask(src, self.pad_id)\n        memory",
         "src_mask = padding_mask(src, 0)\n        memory"),
        ("& padding_mask(tgt, self.pad_id)", "& padding_mask(tgt, 0)")),
    bug("Transformer", "no_positional_encoding", "no positional encoding",
        ("x = self.pos_enc(self.src_embed(src))", "x = self.src_embed(src)"),
        ("x = self.pos_enc(self.tgt_embed(tgt))", "x = self.tgt_embed(tgt)")),
    bug("Transformer", "no_final_norms_pre_ln", "no final norms in pre-LN",
        ("return self.encoder_norm(x) if self.norm_first else x", "return x"),
        ("return self.decoder_norm(x) if self.norm_first else x", "return x")),
    bug("Transformer", "final_norms_post_ln", "final norms added in post-LN too (like nn.Transformer)",
        ("if norm_first:\n            self.encoder_norm", "if True:\n            self.encoder_norm"),
        ("return self.encoder_norm(x) if self.norm_first else x", "return self.encoder_norm(x)"),
        ("return self.decoder_norm(x) if self.norm_first else x", "return self.decoder_norm(x)")),
    bug("Transformer", "norm_first_not_passed", "norm_first not passed to the layers",
        ("EncoderLayer(d_model, n_head, d_ff, dropout, norm_first)", "EncoderLayer(d_model, n_head, d_ff, dropout)"),
        ("DecoderLayer(d_model, n_head, d_ff, dropout, norm_first)", "DecoderLayer(d_model, n_head, d_ff, dropout)")),
    bug("Transformer", "decoder_uses_src_embed", "decoder reads the source embedding",
        ("x = self.pos_enc(self.tgt_embed(tgt))", "x = self.pos_enc(self.src_embed(tgt))")),
    bug("Transformer", "shared_layers", "one layer object repeated (shared weights)",
        ("self.encoder_layers = nn.ModuleList(\n            [EncoderLayer(d_model, n_head, d_ff, dropout, norm_first) for _ in range(num_encoder_layers)])",
         "_enc = EncoderLayer(d_model, n_head, d_ff, dropout, norm_first)\n"
         "        self.encoder_layers = nn.ModuleList([_enc] * num_encoder_layers)")),
    # greedy_decode
    bug("greedy_decode", "never_stops", "never stops early (always max_len)",
        ("while ys.size(1) < max_len and not done.all():", "while ys.size(1) < max_len:")),
    bug("greedy_decode", "drops_bos", "drops bos from the output", ("return ys", "return ys[:, 1:]")),
    bug("greedy_decode", "starts_with_pad", "starts without bos (first token fed is pad)",
        ("ys = torch.full((src.size(0), 1), bos_id,", "ys = torch.full((src.size(0), 1), model.pad_id,")),
    bug("greedy_decode", "no_pad_after_eos", "no pad after eos",
        ("logits.argmax(-1).masked_fill(done, model.pad_id)", "logits.argmax(-1)")),
    bug("greedy_decode", "stops_at_first_eos", "stops at the first eos of any sequence",
        ("while ys.size(1) < max_len and not done.all():",
         "while ys.size(1) < max_len and not done.any():")),
    bug("greedy_decode", "max_len_off_by_one", "one token too many (max_len + 1)",
        ("while ys.size(1) < max_len and", "while ys.size(1) <= max_len and")),
    bug("greedy_decode", "no_memory_mask_decode", "no memory mask when decoding",
        ("model.decode(ys, memory, memory_mask=src_mask)", "model.decode(ys, memory)")),
    bug("greedy_decode", "first_position_logits", "takes the first position's logits instead of the last",
        ("memory_mask=src_mask)[:, -1])", "memory_mask=src_mask)[:, 0])")),
    bug("EncoderLayer", "changes_its_input", "pre-LN residual added to x in place (x += ...)",
        ("x = x + self.dropout1(self.self_attn(h, h, h, src_mask))",
         "x += self.dropout1(self.self_attn(h, h, h, src_mask))")),
]

TGT_MASK = "tgt_mask = causal_mask(tgt.size(1), device=tgt.device) & padding_mask(tgt, self.pad_id)"
SOURCE_MASK = "src_mask = padding_mask(src, self.pad_id)\n        memory"

BUGS += [
    # the lesson asks for the target's padding in its mask: a left-padded target shows it
    bug("Transformer", "no_tgt_padding_mask", "causal target mask without the target padding mask",
        (TGT_MASK, "tgt_mask = causal_mask(tgt.size(1), device=tgt.device)")),
    bug("Transformer", "mask_on_cpu", "causal mask built with torch.ones(L, L) without device=",
        (TGT_MASK, "L = tgt.size(1)\n            tgt_mask = torch.ones(L, L, dtype=torch.bool).tril() & "
                   "padding_mask(tgt, self.pad_id)")),
    bug("Transformer", "pos_enc_args_ignored", "PositionalEncoding built without max_len and dropout",
        ("self.pos_enc = PositionalEncoding(d_model, max_len, dropout)", "self.pos_enc = PositionalEncoding(d_model)")),
    bug("Transformer", "layers_no_dropout", "the layers built with dropout 0",
        ("EncoderLayer(d_model, n_head, d_ff, dropout, norm_first)", "EncoderLayer(d_model, n_head, d_ff, 0.0, norm_first)"),
        ("DecoderLayer(d_model, n_head, d_ff, dropout, norm_first)", "DecoderLayer(d_model, n_head, d_ff, 0.0, norm_first)")),
    bug("Transformer", "embeddings_reinitialised", "embeddings re-initialised with N(0, 1)",
        ("nn.init.normal_(table.weight, std=d_model ** -0.5)", "nn.init.normal_(table.weight)")),
    bug("EncoderLayer", "attn_no_dropout", "self-attention built without dropout",
        ("self.self_attn = MultiHeadAttention(d_model, n_head, dropout)", "self.self_attn = MultiHeadAttention(d_model, n_head)")),
    bug("EncoderLayer", "residual_no_dropout", "no dropout on the sub-layers' outputs",
        ("self.dropout1 = nn.Dropout(dropout)\n        self.dropout2 = nn.Dropout(dropout)\n        self.norm_first",
         "self.dropout1 = nn.Dropout(0.0)\n        self.dropout2 = nn.Dropout(0.0)\n        self.norm_first")),
    bug("DecoderLayer", "attn_no_dropout", "cross-attention built without dropout",
        ("self.cross_attn = MultiHeadAttention(d_model, n_head, dropout)", "self.cross_attn = MultiHeadAttention(d_model, n_head)")),
    bug("DecoderLayer", "residual_no_dropout", "no dropout after the cross-attention",
        ("self.dropout2 = nn.Dropout(dropout)\n        self.dropout3", "self.dropout2 = nn.Dropout(0.0)\n        self.dropout3")),
    bug("greedy_decode", "decode_in_train_mode", "decodes in training mode (no model.eval())",
        ("    model.eval()\n", "")),
    bug("greedy_decode", "decode_in_train_mode", "puts the model in training mode (model.train())",
        ("    model.eval()\n", "    model.train()\n")),
    bug("greedy_decode", "decode_output_on_cpu", "tokens made with torch.full without device=",
        ("dtype=torch.long, device=src.device)", "dtype=torch.long)"),
        ("dtype=torch.bool, device=src.device)", "dtype=torch.bool)")),
]

DEC_PRE_SELF = "h = self.norm1(x)\n            x = x + self.dropout1(self.self_attn(h, h, h, tgt_mask))"
SOURCE_DEFAULT_MASK = "        if src_mask is None:\n            src_mask = padding_mask(src, self.pad_id)  # [B, 1, 1, Ls]\n"

BUGS += [
    # PositionwiseFeedForward: names, sizes, where the dropout goes
    bug("PositionwiseFeedForward", "ffn_layer_names", "layers named w_1 and w_2 (the Annotated Transformer's)",
        ("self.linear1", "self.w_1"), ("self.linear2", "self.w_2")),
    bug("PositionwiseFeedForward", "ffn_width", "the inner width hard-coded to 4 · d_model, d_ff ignored",
        ("nn.Linear(d_model, d_ff)", "nn.Linear(d_model, 4 * d_model)"),
        ("nn.Linear(d_ff, d_model)", "nn.Linear(4 * d_model, d_model)")),
    bug("PositionwiseFeedForward", "ffn_dropout_placement", "dropout on the output, after linear2",
        ("self.linear2(self.dropout(self.activation(self.linear1(x))))",
         "self.dropout(self.linear2(self.activation(self.linear1(x))))")),
    bug("PositionwiseFeedForward", "ffn_dropout_placement", "dropout on the input, before linear1",
        ("self.linear2(self.dropout(self.activation(self.linear1(x))))",
         "self.linear2(self.activation(self.linear1(self.dropout(x))))")),
    # EncoderLayer
    bug("EncoderLayer", "layer_submodule_names", "the feed-forward named feed_forward",
        ("self.ff", "self.feed_forward")),
    bug("EncoderLayer", "ff_no_dropout", "the feed-forward built without dropout",
        ("self.ff = PositionwiseFeedForward(d_model, d_ff, dropout)", "self.ff = PositionwiseFeedForward(d_model, d_ff)")),
    bug("EncoderLayer", "dropout_in_eval_mode", "residual dropout with F.dropout (training left at True)",
        ("self.norm_first = norm_first", "self.norm_first = norm_first\n        self.p = dropout"),
        ("self.dropout1(", "F.dropout(p=self.p, input="), ("self.dropout2(", "F.dropout(p=self.p, input=")),
    # DecoderLayer
    bug("DecoderLayer", "layer_submodule_names", "cross-attention named src_attn (the Annotated Transformer's)",
        ("self.cross_attn", "self.src_attn")),
    bug("DecoderLayer", "ff_no_dropout", "the feed-forward built without dropout",
        ("self.ff = PositionwiseFeedForward(d_model, d_ff, dropout)", "self.ff = PositionwiseFeedForward(d_model, d_ff)")),
    bug("DecoderLayer", "dropout_in_eval_mode", "residual dropout with F.dropout (training left at True)",
        ("self.norm_first = norm_first", "self.norm_first = norm_first\n        self.p = dropout"),
        ("self.dropout1(", "F.dropout(p=self.p, input="), ("self.dropout2(", "F.dropout(p=self.p, input="),
        ("self.dropout3(", "F.dropout(p=self.p, input=")),
    bug("DecoderLayer", "no_residual_attn", "missing residual around the masked self-attention (post-LN)",
        (DEC_SELF_POST, "x = self.norm1(self.dropout1(self.self_attn(x, x, x, tgt_mask)))")),
    bug("DecoderLayer", "pre_ln_residual_normalised", "pre-LN residual adds the normalised input instead of x",
        (DEC_PRE_SELF, "x = self.norm1(x)\n            h = x\n            x = x + self.dropout1(self.self_attn(h, h, h, tgt_mask))")),
    bug("DecoderLayer", "norms_swapped", "norm3 for the cross-attention and norm2 for the feed-forward",
        ("self.norm2(", "self.normX("), ("self.norm3(", "self.norm2("), ("self.normX(", "self.norm3(")),
    # Transformer
    bug("Transformer", "model_submodule_names", "the output projection named out, not generator",
        ("self.generator", "self.out")),
    bug("Transformer", "no_pad_id_attribute", "the padding id kept as self.pad",
        ("self.pad_id", "self.pad")),
    bug("Transformer", "logits_normalised", "forward returns log_softmax (the Annotated Transformer's Generator)",
        ("return self.generator(self.decode(tgt, memory, memory_mask=src_mask))",
         "return torch.log_softmax(self.generator(self.decode(tgt, memory, memory_mask=src_mask)), dim=-1)")),
    bug("Transformer", "logits_normalised", "forward returns softmax probabilities",
        ("return self.generator(self.decode(tgt, memory, memory_mask=src_mask))",
         "return self.generator(self.decode(tgt, memory, memory_mask=src_mask)).softmax(-1)")),
    bug("Transformer", "no_src_padding_mask", "encode builds no padding mask when none is given",
        (SOURCE_DEFAULT_MASK, "")),
    # the lesson's two rules: torch's own attention refused, arguments left as they were
    bug("EncoderLayer", "library_call", "self-attention with nn.MultiheadAttention",
        ("self.self_attn = MultiHeadAttention(d_model, n_head, dropout)",
         "self.self_attn = nn.MultiheadAttention(d_model, n_head, dropout, batch_first=True)"),
        ("self.self_attn(h, h, h, src_mask)", "self.self_attn(h, h, h, need_weights=False)[0]"),
        ("self.self_attn(x, x, x, src_mask)", "self.self_attn(x, x, x, need_weights=False)[0]")),
    bug("DecoderLayer", "library_call", "cross-attention with nn.MultiheadAttention",
        ("self.cross_attn = MultiHeadAttention(d_model, n_head, dropout)",
         "self.cross_attn = nn.MultiheadAttention(d_model, n_head, dropout, batch_first=True)"),
        ("self.cross_attn(x, memory, memory, memory_mask)", "self.cross_attn(x, memory, memory, need_weights=False)[0]"),
        ("self.cross_attn(h, memory, memory, memory_mask)", "self.cross_attn(h, memory, memory, need_weights=False)[0]")),
    bug("Transformer", "library_call", "the encoder stack made of nn.TransformerEncoderLayer",
        ("[EncoderLayer(d_model, n_head, d_ff, dropout, norm_first) for _ in range(num_encoder_layers)]",
         "[nn.TransformerEncoderLayer(d_model, n_head, d_ff, dropout, batch_first=True, norm_first=norm_first) "
         "for _ in range(num_encoder_layers)]"),
        ("x = layer(x, src_mask)", "x = layer(x, src_key_padding_mask=~src_mask[:, 0, 0])")),
    bug("DecoderLayer", "changes_its_input", "pre-LN residual added to x in place (x += ...)",
        ("x = x + self.dropout1(self.self_attn(h, h, h, tgt_mask))", "x += self.dropout1(self.self_attn(h, h, h, tgt_mask))")),
    # greedy_decode
    bug("greedy_decode", "decode_not_long", "the tokens kept in a float tensor",
        ("ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)",
         "ys = torch.ones(src.size(0), 1, device=src.device) * bos_id")),
    bug("greedy_decode", "decode_pad_hardcoded", "pads with 0 after eos, not model.pad_id",
        ("logits.argmax(-1).masked_fill(done, model.pad_id)", "logits.argmax(-1).masked_fill(done, 0)")),
    bug("greedy_decode", "decode_with_grad", "no @torch.no_grad() (the loop records gradients)",
        ("@torch.no_grad()\n", "")),
]

ALTERNATIVES = [
    Variant("PositionwiseFeedForward", "F.dropout with training=self.training, activation looked up by name",
            source='''
class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu"):
        super().__init__()
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.p = dropout
        self.act = {"relu": F.relu, "gelu": gelu}[activation]

    def forward(self, x):
        return self.linear2(F.dropout(self.act(self.linear1(x)), self.p, self.training))
'''),
    Variant("EncoderLayer", "residual dropout with F.dropout(training=self.training)", replace=(
        ("self.norm_first = norm_first", "self.norm_first = norm_first\n        self.p = dropout"),
        ("self.dropout1(", "F.dropout(training=self.training, p=self.p, input="),
        ("self.dropout2(", "F.dropout(training=self.training, p=self.p, input="),
    )),
    Variant("greedy_decode", "torch.no_grad() as a with block, pads with torch.where", source='''
def greedy_decode(model, src, max_len, bos_id, eos_id):
    model.eval()
    with torch.no_grad():
        mask = padding_mask(src, model.pad_id)
        memory = model.encode(src, mask)
        ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)
        ended = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
        while ys.size(1) < max_len and not bool(ended.all()):
            nxt = model.generator(model.decode(ys, memory, memory_mask=mask))[:, -1].argmax(-1)
            nxt = torch.where(ended, torch.full_like(nxt, model.pad_id), nxt)
            ys = torch.cat([ys, nxt[:, None]], dim=1)
            ended |= nxt == eos_id
    return ys
'''),
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
    ys = src.new_full((B, max_len), model.pad_id)
    ys[:, 0] = bos_id
    finished = torch.zeros(B, dtype=torch.bool, device=src.device)
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
        idx = torch.tensor(alive, device=src.device)
        ys = torch.tensor([out[i] for i in alive], device=src.device)
        h = model.decode(ys, memory[idx], memory_mask=mask[idx])
        nxt = model.generator(h[:, -1]).argmax(-1).tolist()
        for i, t in zip(alive, nxt):
            out[i].append(t)
        alive = [i for i in alive if out[i][-1] != eos_id]
    width = max(len(r) for r in out)
    return torch.tensor([r + [model.pad_id] * (width - len(r)) for r in out], device=src.device)
'''),
    Variant("Transformer", "post-LN final norms set to None, checked in encode/decode", replace=(
        ("        if norm_first:\n            self.encoder_norm = LayerNorm(d_model)\n            self.decoder_norm = LayerNorm(d_model)",
         "        self.encoder_norm = LayerNorm(d_model) if norm_first else None\n"
         "        self.decoder_norm = LayerNorm(d_model) if norm_first else None"),
        ("return self.encoder_norm(x) if self.norm_first else x",
         "return x if self.encoder_norm is None else self.encoder_norm(x)"),
        ("return self.decoder_norm(x) if self.norm_first else x",
         "return x if self.decoder_norm is None else self.decoder_norm(x)"),
    )),
    Variant("Transformer", "a causal mask cached as a non-persistent buffer, layers deep-copied", replace=(
        ("        self.generator = nn.Linear(d_model, tgt_vocab)",
         "        self.generator = nn.Linear(d_model, tgt_vocab)\n"
         "        self.register_buffer(\"causal\", torch.ones(max_len, max_len, dtype=torch.bool).tril(), persistent=False)"),
        (TGT_MASK, "L = tgt.size(1)\n            tgt_mask = self.causal[:L, :L] & tgt.ne(self.pad_id)[:, None, None, :]"),
        ("self.encoder_layers = nn.ModuleList(\n            [EncoderLayer(d_model, n_head, d_ff, dropout, norm_first) for _ in range(num_encoder_layers)])",
         "import copy\n        _layer = EncoderLayer(d_model, n_head, d_ff, dropout, norm_first)\n"
         "        self.encoder_layers = nn.ModuleList([copy.deepcopy(_layer) for _ in range(num_encoder_layers)])"),
    )),
    Variant("Transformer", "the encoder stack also kept under a second name", replace=(
        ("        self.generator = nn.Linear(d_model, tgt_vocab)",
         "        self.generator = nn.Linear(d_model, tgt_vocab)\n"
         "        self.encoder = self.encoder_layers  # the same layers: their weights appear twice in state_dict()"),
    )),
    Variant("Transformer", "target mask from ones_like and tril on the target's device", replace=(
        (TGT_MASK, "keep = tgt != self.pad_id\n            square = torch.ones_like(keep[0, :, None] & keep[0, None, :])\n"
                   "            tgt_mask = square.tril()[None, None] & keep[:, None, None, :]"),
    )),
    Variant("greedy_decode", "inference_mode, mode restored with train(mode), new_ones for the flags", source='''
def greedy_decode(model, src, max_len, bos_id, eos_id):
    mode = model.training
    model.eval()
    try:
        with torch.inference_mode():
            memory_mask = padding_mask(src, model.pad_id)
            memory = model.encode(src, memory_mask)
            ys = src.new_full((src.size(0), 1), bos_id)
            alive = src.new_ones(src.size(0), dtype=torch.bool)
            for _ in range(max_len - 1):
                step = model.generator(model.decode(ys, memory, memory_mask=memory_mask))[:, -1].argmax(-1)
                step = torch.where(alive, step, torch.full_like(step, model.pad_id))
                ys = torch.cat([ys, step.unsqueeze(1)], 1)
                alive = alive & (step != eos_id)
                if not alive.any():
                    break
            return ys.clone()
    finally:
        model.train(mode)
'''),
]

# What each planted mistake earns on its exercise (the rubric in CONTRIBUTING):
SCORES = {
    ('PositionwiseFeedForward', 'no activation between the linear layers'): 0.5,
    ('PositionwiseFeedForward', 'activation argument ignored (always ReLU)'): 2,
    ('PositionwiseFeedForward', 'tanh-approximate GELU instead of exact'): 2,
    ('PositionwiseFeedForward', 'dropout argument ignored'): 2.5,
    ('PositionwiseFeedForward', 'activation after the second linear layer'): 0.5,
    ('EncoderLayer', 'inverted LN placement (norm_first flag reversed)'): 1,
    ('EncoderLayer', 'missing residual around self-attention (post-LN)'): 3,
    ('EncoderLayer', 'missing residual around the feed-forward (pre-LN)'): 3,
    ('EncoderLayer', 'src_mask ignored'): 3,
    ('EncoderLayer', 'src_mask ignored in the pre-LN branch only'): 3,
    ('EncoderLayer', 'src_mask ignored in the post-LN branch only'): 3,
    ('EncoderLayer', 'pre-LN residual adds the normalised input instead of x'): 3,
    ('EncoderLayer', 'norm1 and norm2 swapped'): 3,
    ('DecoderLayer', 'cross-attention keys and values from the decoder'): 0.5,
    ('DecoderLayer', 'cross-attention keys from the decoder (values from memory)'): 2.25,
    ('DecoderLayer', 'cross-attention queries from memory'): 2.25,
    ('DecoderLayer', 'unmasked target self-attention'): 2.5,
    ('DecoderLayer', 'memory_mask ignored'): 3.25,
    ('DecoderLayer', 'memory_mask ignored in the post-LN branch only'): 3.25,
    ('DecoderLayer', 'memory_mask ignored in the pre-LN branch only'): 3.25,
    ('DecoderLayer', 'tgt_mask ignored in the pre-LN branch only'): 3.25,
    ('DecoderLayer', 'cross- before self-attention'): 2.25,
    ('DecoderLayer', 'inverted LN placement (norm_first flag reversed)'): 0.5,
    ('DecoderLayer', 'missing residual around cross-attention'): 0.5,
    ('DecoderLayer', 'missing residual around the feed-forward'): 2.25,
    ('DecoderLayer', 'pre-LN cross-attention attends to the normalised memory'): 3,
    ('Transformer', 'no causal mask built in decode'): 2,
    ('Transformer', 'no source padding mask in the encoder'): 2,
    ('Transformer', 'no memory mask in the decoder'): 2.5,
    ('Transformer', 'masks built from a hard-coded pad id 0'): 4.25,
    ('Transformer', 'no positional encoding'): 2,
    ('Transformer', 'no final norms in pre-LN'): 3.5,
    ('Transformer', 'final norms added in post-LN too (like nn.Transformer)'): 3,
    ('Transformer', 'norm_first not passed to the layers'): 3.5,
    ('Transformer', 'decoder reads the source embedding'): 2,
    ('Transformer', 'one layer object repeated (shared weights)'): 1.75,
    ('greedy_decode', 'never stops early (always max_len)'): 3,
    ('greedy_decode', 'drops bos from the output'): 0.5,
    ('greedy_decode', 'starts without bos (first token fed is pad)'): 0.5,
    ('greedy_decode', 'no pad after eos'): 2.5,
    ('greedy_decode', 'stops at the first eos of any sequence'): 2,
    ('greedy_decode', 'one token too many (max_len + 1)'): 3.5,
    ('greedy_decode', 'no memory mask when decoding'): 3.5,
    ('greedy_decode', "takes the first position's logits instead of the last"): 0.75,
    ('Transformer', 'causal target mask without the target padding mask'): 4.25,
    ('Transformer', 'causal mask built with torch.ones(L, L) without device='): 4.5,
    ('Transformer', 'PositionalEncoding built without max_len and dropout'): 4.5,
    ('Transformer', 'the layers built with dropout 0'): 4.5,
    ('Transformer', 'embeddings re-initialised with N(0, 1)'): 4.5,
    ('EncoderLayer', 'self-attention built without dropout'): 3,
    ('EncoderLayer', "no dropout on the sub-layers' outputs"): 3,
    ('DecoderLayer', 'cross-attention built without dropout'): 3.5,
    ('DecoderLayer', 'no dropout after the cross-attention'): 3.5,
    ('greedy_decode', 'decodes in training mode (no model.eval())'): 3.5,
    ('greedy_decode', 'puts the model in training mode (model.train())'): 3.5,
    ('greedy_decode', 'tokens made with torch.full without device='): 3.75,
    ('PositionwiseFeedForward', "layers named w_1 and w_2 (the Annotated Transformer's)"): 0,
    ('PositionwiseFeedForward', 'the inner width hard-coded to 4 · d_model, d_ff ignored'): 0.5,
    ('PositionwiseFeedForward', 'dropout on the output, after linear2'): 2.5,
    ('PositionwiseFeedForward', 'dropout on the input, before linear1'): 2.5,
    ('EncoderLayer', 'the feed-forward named feed_forward'): 0,
    ('EncoderLayer', 'the feed-forward built without dropout'): 3,
    ('EncoderLayer', 'residual dropout with F.dropout (training left at True)'): 3,
    ('DecoderLayer', "cross-attention named src_attn (the Annotated Transformer's)"): 0,
    ('DecoderLayer', 'the feed-forward built without dropout'): 3.5,
    ('DecoderLayer', 'residual dropout with F.dropout (training left at True)'): 3.5,
    ('DecoderLayer', 'missing residual around the masked self-attention (post-LN)'): 2.25,
    ('DecoderLayer', 'pre-LN residual adds the normalised input instead of x'): 3,
    ('DecoderLayer', 'norm3 for the cross-attention and norm2 for the feed-forward'): 0.5,
    ('Transformer', 'the output projection named out, not generator'): 1,
    ('Transformer', 'the padding id kept as self.pad'): 4.5,
    ('Transformer', "forward returns log_softmax (the Annotated Transformer's Generator)"): 2.5,
    ('Transformer', 'forward returns softmax probabilities'): 2.5,
    ('Transformer', 'encode builds no padding mask when none is given'): 4.5,
    ('greedy_decode', 'the tokens kept in a float tensor'): 3.25,
    ('greedy_decode', 'pads with 0 after eos, not model.pad_id'): 3.5,
    ('greedy_decode', 'no @torch.no_grad() (the loop records gradients)'): 3.5,
    ('EncoderLayer', 'self-attention with nn.MultiheadAttention'): 0,
    ('DecoderLayer', 'cross-attention with nn.MultiheadAttention'): 0,
    ('Transformer', 'the encoder stack made of nn.TransformerEncoderLayer'): 0,
    ('DecoderLayer', 'pre-LN residual added to x in place (x += ...)'): 2.5,
}
