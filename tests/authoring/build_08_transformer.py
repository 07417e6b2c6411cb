"""Builds solutions/08_transformer/08_transformer.ipynb (the single source of lesson 08).

    python tests/authoring/build_08_transformer.py
    nbgrader generate_assignment 08_transformer --force
    python -m coursekit.export

Edit the cells here, not in the notebook, then rebuild, regenerate and re-export.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from grader.authoring import code, markdown, notebook, readonly, solution, tests  # noqa: E402

LESSON = "08_transformer"


def exported(cell: nbformat.NotebookNode) -> nbformat.NotebookNode:
    cell.metadata["tags"] = ["export"]
    return cell


CELLS = [
    markdown(r"""
    # Lesson 08 · The whole Transformer: encoder, decoder, masks, greedy decoding

    Lessons 03–07 built the parts: scaled dot-product attention and its masks (03),
    multi-head attention (多头注意力, 04), layer normalisation (层归一化, 05), GELU (06),
    positional encoding and token embeddings (位置编码, 07). This lesson assembles them into
    the encoder–decoder (编码器–解码器) of *Attention Is All You Need*, the model that lesson 09
    trains to read numbers aloud in Chinese (`1234 → 一千二百三十四`).

    You will write:

    1. `PositionwiseFeedForward`: the two-layer MLP applied at every position;
    2. `EncoderLayer`: self-attention and feed-forward, each wrapped in a residual connection
       and a LayerNorm, **post-LN** (the paper) or **pre-LN** (`norm_first=True`);
    3. `DecoderLayer`: masked self-attention, **cross-attention** (queries from the decoder,
       keys and values from the encoder) and feed-forward;
    4. `Transformer`: embeddings, positional encoding, the two stacks, the output projection,
       and the **masks built inside the model** from the padding id;
    5. `greedy_decode`: translation one token at a time, stopping at `<eos>`.

    Then you will count the parameters of the paper's base model (and find out why it is
    "65M") and compare the cost of self-attention with a recurrent network.

    Grade yourself at any time:

    ```
    python -m grader check lessons/08_transformer/08_transformer.ipynb
    ```
    """),
    readonly(r"""
    import math

    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    # The building blocks of lessons 03-07, generated from their reference notebooks
    # (coursekit/reference/lessonNN.py is written by `python -m coursekit.export`).
    from coursekit.reference.lesson03 import causal_mask, padding_mask
    from coursekit.reference.lesson04 import MultiHeadAttention
    from coursekit.reference.lesson05 import LayerNorm
    from coursekit.reference.lesson06 import gelu
    from coursekit.reference.lesson07 import PositionalEncoding, TokenEmbedding
    """, "setup"),
    code(r"""
    %matplotlib inline
    import matplotlib.pyplot as plt

    torch.set_printoptions(precision=4, sci_mode=False)
    """),
    markdown(r"""
    ### Where the earlier building blocks come from (and how to use your own)

    The cell above imports `MultiHeadAttention`, `LayerNorm`, `gelu`, `PositionalEncoding`,
    `TokenEmbedding`, `causal_mask` and `padding_mask` from `coursekit.reference`: modules
    **generated** from the reference solutions of lessons 03–07, never copied by hand. So
    this lesson works even if an earlier one is unfinished, and it is graded on its own.

    Finished lessons 03–07 yourself and want to run the Transformer on **your** code? Set
    `USE_MY_CODE = True` in the next cell: `coursekit.export.load_my_code(lesson)` reads the
    same names from your notebook `lessons/<lesson>/<lesson>.ipynb`. (The grader always uses
    the reference blocks, so a bug in an earlier lesson never costs points here.)
    """),
    code(r"""
    USE_MY_CODE = False   # True: run this lesson on your own code of lessons 03-07

    if USE_MY_CODE:
        from coursekit.export import load_my_code

        _l03 = load_my_code("03_scaled_dot_product_attention")
        causal_mask, padding_mask = _l03.causal_mask, _l03.padding_mask
        MultiHeadAttention = load_my_code("04_multi_head_attention").MultiHeadAttention
        LayerNorm = load_my_code("05_layer_norm").LayerNorm
        gelu = load_my_code("06_gelu").gelu
        _l07 = load_my_code("07_positional_encoding")
        PositionalEncoding, TokenEmbedding = _l07.PositionalEncoding, _l07.TokenEmbedding
    print("MultiHeadAttention from", MultiHeadAttention.__module__)
    """, demo=True),
    markdown(r"""
    Conventions, as in every lesson: batch first; `B` batch, `L` length, `D = d_model`,
    `H` heads. A boolean mask is **True where attention is allowed** and broadcasts to
    `[..., Lq, Lk]`; `padding_mask(tokens, pad_id)` is `[B, 1, 1, L]` and `causal_mask(L)` is
    `[L, L]`, True on and below the diagonal. `MultiHeadAttention(d_model, n_head, dropout)`
    is called as `mha(query, key, value, mask)` and returns `[B, Lq, D]`.

    ## 1. The position-wise feed-forward network

    Attention mixes information *across* positions; the feed-forward network (前馈网络)
    then transforms each position *on its own*, with the same weights everywhere:

    $$\operatorname{FFN}(x) = \max(0,\; x W_1 + b_1)\, W_2 + b_2$$

    `W₁` widens `D` to `d_ff` (512 → 2048 in the paper, 4×), the activation is ReLU (BERT and
    GPT use GELU, lesson 06), `W₂` narrows back to `D`. Because `nn.Linear` acts on the last
    axis, a `[B, L, D]` input needs no reshaping. Dropout, when used, sits after the
    activation (that is where PyTorch puts it too).

    ### Exercise 1 · `PositionwiseFeedForward(d_model, d_ff, dropout=0.0, activation="relu")`

    Submodules `linear1` (`D → d_ff`) and `linear2` (`d_ff → D`); `activation` is `"relu"` or
    `"gelu"` (use `gelu` of lesson 06); `forward(x)` returns `linear2(dropout(act(linear1(x))))`.
    """),
    exported(solution("PositionwiseFeedForward", r'''
    class PositionwiseFeedForward(nn.Module):
        """FFN(x) = linear2(dropout(activation(linear1(x)))), applied at every position."""

        def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu"):
            super().__init__()
            ### BEGIN SOLUTION
            if activation not in ("relu", "gelu"):
                raise ValueError(f"activation must be 'relu' or 'gelu', got {activation!r}")
            self.linear1 = nn.Linear(d_model, d_ff)
            self.linear2 = nn.Linear(d_ff, d_model)
            self.dropout = nn.Dropout(dropout)
            self.activation = torch.relu if activation == "relu" else gelu
            ### END SOLUTION

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            ### BEGIN SOLUTION
            return self.linear2(self.dropout(self.activation(self.linear1(x))))
            ### END SOLUTION
    ''')),
    tests(LESSON, "PositionwiseFeedForward", 3, r"""
    _ff = PositionwiseFeedForward(8, 32)
    _x = torch.randn(2, 5, 8)
    assert _ff(_x).shape == (2, 5, 8), "the output must have the input's shape [B, L, D]"
    assert _ff.linear1.weight.shape == (32, 8) and _ff.linear2.weight.shape == (8, 32), \
        "linear1 goes D -> d_ff, linear2 goes d_ff -> D"
    _h = torch.relu(_ff.linear1(_x))
    assert torch.allclose(_ff(_x), _ff.linear2(_h), atol=1e-6), "FFN(x) = linear2(relu(linear1(x)))"
    assert torch.allclose(_ff(_x[:, :2]), _ff(_x)[:, :2], atol=1e-6), "each position is transformed on its own"
    print("PositionwiseFeedForward: visible tests passed ✓")
    """),
    markdown(r"""
    ## 2. Residual connections and LayerNorm: post-LN and pre-LN

    Each sub-layer (self-attention, feed-forward) is wrapped the same way. The paper writes
    the output of a sub-layer as

    $$\text{post-LN:}\qquad x \leftarrow \operatorname{LayerNorm}\big(x + \operatorname{Dropout}(\operatorname{Sublayer}(x))\big)$$

    The **residual connection** (残差连接) `x + …` lets the input pass straight through, so
    a deep stack starts close to the identity and gradients reach the lower layers; the
    LayerNorm keeps the scale of `x` fixed after every addition. Later models (GPT-2, most
    modern ones) move the norm *inside* the branch:

    $$\text{pre-LN:}\qquad x \leftarrow x + \operatorname{Dropout}\big(\operatorname{Sublayer}(\operatorname{LayerNorm}(x))\big)$$

    | | post-LN (paper, `norm_first=False`) | pre-LN (`norm_first=True`) |
    |---|---|---|
    | where the norm is | after the addition | at the start of the branch |
    | the residual stream | re-normalised after every sub-layer | never normalised: grows layer after layer |
    | training | needs learning-rate warm-up; can diverge when deep | stable without careful warm-up |
    | end of the stack | nothing more | needs a **final LayerNorm** (the stream was never normalised) |

    An encoder layer is: self-attention sub-layer (with `norm1`), then feed-forward sub-layer
    (with `norm2`). The encoder's self-attention receives the source mask (`src_mask`), so no
    position attends to padding.

    ### Exercise 2 · `EncoderLayer(d_model, n_head, d_ff, dropout=0.0, norm_first=False)`

    Submodules `self_attn` (`MultiHeadAttention`), `ff` (`PositionwiseFeedForward`), `norm1`,
    `norm2` (`LayerNorm`); `forward(x, src_mask=None)` returns `[B, L, D]`. Use one
    `nn.Dropout(dropout)` on each sub-layer's output before the residual addition.
    """),
    exported(solution("EncoderLayer", r'''
    class EncoderLayer(nn.Module):
        """Self-attention then feed-forward, each with a residual connection and a LayerNorm."""

        def __init__(self, d_model: int, n_head: int, d_ff: int, dropout: float = 0.0,
                     norm_first: bool = False):
            super().__init__()
            ### BEGIN SOLUTION
            self.self_attn = MultiHeadAttention(d_model, n_head, dropout)
            self.ff = PositionwiseFeedForward(d_model, d_ff, dropout)
            self.norm1 = LayerNorm(d_model)
            self.norm2 = LayerNorm(d_model)
            self.dropout1 = nn.Dropout(dropout)
            self.dropout2 = nn.Dropout(dropout)
            self.norm_first = norm_first
            ### END SOLUTION

        def forward(self, x: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
            ### BEGIN SOLUTION
            if self.norm_first:
                h = self.norm1(x)
                x = x + self.dropout1(self.self_attn(h, h, h, src_mask))
                x = x + self.dropout2(self.ff(self.norm2(x)))
            else:
                x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, src_mask)))
                x = self.norm2(x + self.dropout2(self.ff(x)))
            return x
            ### END SOLUTION
    ''')),
    tests(LESSON, "EncoderLayer", 4, r"""
    _layer = EncoderLayer(16, 4, 32).eval()
    _x = torch.randn(2, 5, 16)
    assert _layer(_x).shape == (2, 5, 16), "an encoder layer keeps the shape [B, L, D]"
    _y = _layer(_x)
    assert torch.allclose(_y.mean(-1), torch.zeros(2, 5), atol=1e-5), \
        "post-LN: the output of the layer is the output of norm2 (mean 0 over the features)"
    _pre = EncoderLayer(16, 4, 32, norm_first=True).eval()
    assert not torch.allclose(_pre(_x).mean(-1), torch.zeros(2, 5), atol=1e-3), \
        "pre-LN: the output is x + FFN(norm2(x)), not normalised"
    _mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])[:, None, None, :]
    _a = _layer(_x, _mask)
    _b = _layer(torch.cat([_x[1:, :3], torch.randn(1, 2, 16)], 1), _mask[1:])
    assert torch.allclose(_a[1:, :3], _b[:, :3], atol=1e-5), "masked (padding) positions must not change the others"
    print("EncoderLayer: visible tests passed ✓")
    """),
    markdown(r"""
    Your layer computes exactly what PyTorch's `nn.TransformerEncoderLayer` computes; only
    the names of the weights differ (PyTorch fuses the three input projections into one
    `in_proj_weight` of shape `[3D, D]`, and its boolean masks mean the opposite: **True
    where attention is forbidden**). Copy the weights across and compare:
    """),
    code(r"""
    def copy_mha(ours: nn.Module, theirs: nn.MultiheadAttention) -> None:
        D = theirs.embed_dim
        for i, name in enumerate(["q_proj", "k_proj", "v_proj"]):
            getattr(ours, name).weight.data.copy_(theirs.in_proj_weight.data[i * D:(i + 1) * D])
            getattr(ours, name).bias.data.copy_(theirs.in_proj_bias.data[i * D:(i + 1) * D])
        ours.out_proj.load_state_dict(theirs.out_proj.state_dict())

    for norm_first in (False, True):
        torch.manual_seed(0)
        theirs = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True,
                                            norm_first=norm_first)
        ours = EncoderLayer(16, 4, 32, norm_first=norm_first)
        copy_mha(ours.self_attn, theirs.self_attn)
        ours.ff.linear1.load_state_dict(theirs.linear1.state_dict())
        ours.ff.linear2.load_state_dict(theirs.linear2.state_dict())
        ours.norm1.load_state_dict(theirs.norm1.state_dict())
        ours.norm2.load_state_dict(theirs.norm2.state_dict())
        x = torch.randn(3, 7, 16)
        keep = torch.ones(3, 7, dtype=torch.bool)
        keep[1, 5:] = False                                   # sentence 1 has 2 pads
        diff = (ours(x, keep[:, None, None, :]) - theirs(x, src_key_padding_mask=~keep)).abs().max()
        print(f"norm_first={norm_first}: largest difference {diff:.2e}")
    """, demo=True),
    markdown(r"""
    ## 3. The decoder layer and cross-attention

    The decoder layer has **three** sub-layers, each with its residual connection and norm:

    1. **masked self-attention** (`self_attn`, `norm1`): the target attends to itself, but
       only to earlier positions: the `tgt_mask` combines the causal mask with the target's
       padding. Without it, the model would learn to copy the next token it is supposed to
       predict, and fail at test time, when that token does not exist yet.
    2. **cross-attention** (交叉注意力, `cross_attn`, `norm2`): **queries from the decoder**,
       **keys and values from the encoder's output** (`memory`). This is where the translation
       happens: while writing 万, the decoder looks up the source digit that decides it.
       `memory_mask` (the source padding mask) hides the source's padding.
    3. feed-forward (`ff`, `norm3`).

    The order matters: the decoder first gathers what it has written so far, *then* asks the
    source. Cross-attention's output has the decoder's length `Lt` (one row per query), while
    its weights are `[B, H, Lt, Ls]`: one row per target position, one column per source
    position. Lesson 09 plots them as alignments.

    ### Exercise 3 · `DecoderLayer(d_model, n_head, d_ff, dropout=0.0, norm_first=False)`

    Submodules `self_attn`, `cross_attn` (`MultiHeadAttention`), `ff`, `norm1`, `norm2`,
    `norm3`; `forward(x, memory, tgt_mask=None, memory_mask=None)` returns `[B, Lt, D]`.
    Post-LN by default, pre-LN with `norm_first=True`, exactly as in the encoder layer.
    """),
    exported(solution("DecoderLayer", r'''
    class DecoderLayer(nn.Module):
        """Masked self-attention, cross-attention over the encoder output, feed-forward."""

        def __init__(self, d_model: int, n_head: int, d_ff: int, dropout: float = 0.0,
                     norm_first: bool = False):
            super().__init__()
            ### BEGIN SOLUTION
            self.self_attn = MultiHeadAttention(d_model, n_head, dropout)
            self.cross_attn = MultiHeadAttention(d_model, n_head, dropout)
            self.ff = PositionwiseFeedForward(d_model, d_ff, dropout)
            self.norm1 = LayerNorm(d_model)
            self.norm2 = LayerNorm(d_model)
            self.norm3 = LayerNorm(d_model)
            self.dropout1 = nn.Dropout(dropout)
            self.dropout2 = nn.Dropout(dropout)
            self.dropout3 = nn.Dropout(dropout)
            self.norm_first = norm_first
            ### END SOLUTION

        def forward(self, x: torch.Tensor, memory: torch.Tensor,
                    tgt_mask: torch.Tensor | None = None,
                    memory_mask: torch.Tensor | None = None) -> torch.Tensor:
            ### BEGIN SOLUTION
            if self.norm_first:
                h = self.norm1(x)
                x = x + self.dropout1(self.self_attn(h, h, h, tgt_mask))
                h = self.norm2(x)
                x = x + self.dropout2(self.cross_attn(h, memory, memory, memory_mask))
                x = x + self.dropout3(self.ff(self.norm3(x)))
            else:
                x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, tgt_mask)))
                x = self.norm2(x + self.dropout2(self.cross_attn(x, memory, memory, memory_mask)))
                x = self.norm3(x + self.dropout3(self.ff(x)))
            return x
            ### END SOLUTION
    ''')),
    tests(LESSON, "DecoderLayer", 4, r"""
    _dec = DecoderLayer(16, 4, 32).eval()
    _x, _mem = torch.randn(2, 6, 16), torch.randn(2, 4, 16)
    assert _dec(_x, _mem).shape == (2, 6, 16), "the output has the decoder's shape [B, Lt, D]"
    _causal = causal_mask(6)
    _y = _dec(_x, _mem, tgt_mask=_causal)
    _x2 = _x.clone(); _x2[:, 4:] = torch.randn(2, 2, 16)
    assert torch.allclose(_dec(_x2, _mem, tgt_mask=_causal)[:, :4], _y[:, :4], atol=1e-5), \
        "with the causal mask, later target positions must not change earlier outputs"
    _dec(_x, _mem)
    assert _dec.cross_attn.attn_weights.shape == (2, 4, 6, 4), \
        "cross-attention: queries from the decoder (Lt = 6), keys and values from memory (Ls = 4)"
    print("DecoderLayer: visible tests passed ✓")
    """),
    markdown(r"""
    ## 4. The whole model, with its masks built inside

    ```
    src [B, Ls] ─ src_embed ─ pos_enc ─ EncoderLayer × N ─(encoder_norm)─ memory [B, Ls, D]
                                                                           │
    tgt [B, Lt] ─ tgt_embed ─ pos_enc ─ DecoderLayer × N ─(decoder_norm)─ generator ─ logits [B, Lt, V]
    ```

    - `TokenEmbedding` (lesson 07) multiplies the embedding by `√D`. With PyTorch's default
      N(0, 1) initialisation that makes the embeddings `√D` times larger than the positional
      encoding (values in [-1, 1]), which then barely registers; initialise both embedding
      tables with standard deviation `D^-0.5` so that, after the `√D`, the two have the same
      scale.
    - One `PositionalEncoding` serves source and target (it has no weights).
    - **Masks are built inside**, from `pad_id`: a user passes token ids and never thinks
      about masks. `src_mask = padding_mask(src, pad_id)` (`[B, 1, 1, Ls]`) serves the
      encoder's self-attention *and*, as `memory_mask`, the decoder's cross-attention;
      `tgt_mask = causal_mask(Lt) & padding_mask(tgt, pad_id)` broadcasts to `[B, 1, Lt, Lt]`.
      (Our batches are padded on the right, so the causal mask alone already hides every pad
      from every real token; the padding part keeps the model right for left-padded input.)
    - With `norm_first=True` the stacks end with `encoder_norm` and `decoder_norm`; in post-LN
      they do not exist (the last layer already ends with a norm). Beware:
      `nn.Transformer` adds both final norms even in post-LN mode, so compare with it layer by
      layer, not as a whole model.
    - `generator = nn.Linear(D, tgt_vocab)` turns each decoder state into logits.

    ### Exercise 4 · `Transformer(src_vocab, tgt_vocab, d_model=512, n_head=8, num_encoder_layers=6, num_decoder_layers=6, d_ff=2048, dropout=0.1, max_len=512, pad_id=0, norm_first=False)`

    Submodules `src_embed`, `tgt_embed` (`TokenEmbedding`), `pos_enc` (`PositionalEncoding`),
    `encoder_layers`, `decoder_layers` (`nn.ModuleList`), `encoder_norm`, `decoder_norm`
    (`LayerNorm`, only when `norm_first`), `generator`; attribute `pad_id`. Methods:

    - `encode(src, src_mask=None)` → memory `[B, Ls, D]` (builds the padding mask when not given);
    - `decode(tgt, memory, tgt_mask=None, memory_mask=None)` → decoder states `[B, Lt, D]`
      (builds the causal + padding target mask when not given; `memory_mask` hides the
      source padding; pass it: `decode` cannot see the source tokens);
    - `forward(src, tgt)` → logits `[B, Lt, tgt_vocab]` = `generator(decode(tgt, encode(src)))`
      with every mask built from `pad_id`.
    """),
    exported(solution("Transformer", r'''
    class Transformer(nn.Module):
        """The encoder-decoder Transformer; masks are built inside from pad_id."""

        def __init__(self, src_vocab: int, tgt_vocab: int, d_model: int = 512, n_head: int = 8,
                     num_encoder_layers: int = 6, num_decoder_layers: int = 6, d_ff: int = 2048,
                     dropout: float = 0.1, max_len: int = 512, pad_id: int = 0,
                     norm_first: bool = False):
            super().__init__()
            ### BEGIN SOLUTION
            self.pad_id = pad_id
            self.norm_first = norm_first
            self.src_embed = TokenEmbedding(src_vocab, d_model)
            self.tgt_embed = TokenEmbedding(tgt_vocab, d_model)
            self.pos_enc = PositionalEncoding(d_model, max_len, dropout)
            self.encoder_layers = nn.ModuleList(
                [EncoderLayer(d_model, n_head, d_ff, dropout, norm_first) for _ in range(num_encoder_layers)])
            self.decoder_layers = nn.ModuleList(
                [DecoderLayer(d_model, n_head, d_ff, dropout, norm_first) for _ in range(num_decoder_layers)])
            if norm_first:
                self.encoder_norm = LayerNorm(d_model)
                self.decoder_norm = LayerNorm(d_model)
            self.generator = nn.Linear(d_model, tgt_vocab)
            for table in (self.src_embed.embedding, self.tgt_embed.embedding):
                nn.init.normal_(table.weight, std=d_model ** -0.5)
            ### END SOLUTION

        def encode(self, src: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
            ### BEGIN SOLUTION
            if src_mask is None:
                src_mask = padding_mask(src, self.pad_id)
            x = self.pos_enc(self.src_embed(src))
            for layer in self.encoder_layers:
                x = layer(x, src_mask)
            return self.encoder_norm(x) if self.norm_first else x
            ### END SOLUTION

        def decode(self, tgt: torch.Tensor, memory: torch.Tensor,
                   tgt_mask: torch.Tensor | None = None,
                   memory_mask: torch.Tensor | None = None) -> torch.Tensor:
            ### BEGIN SOLUTION
            if tgt_mask is None:
                tgt_mask = causal_mask(tgt.size(1), device=tgt.device) & padding_mask(tgt, self.pad_id)
            x = self.pos_enc(self.tgt_embed(tgt))
            for layer in self.decoder_layers:
                x = layer(x, memory, tgt_mask, memory_mask)
            return self.decoder_norm(x) if self.norm_first else x
            ### END SOLUTION

        def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
            ### BEGIN SOLUTION
            src_mask = padding_mask(src, self.pad_id)
            memory = self.encode(src, src_mask)
            return self.generator(self.decode(tgt, memory, memory_mask=src_mask))
            ### END SOLUTION
    ''')),
    tests(LESSON, "Transformer", 5, r"""
    torch.manual_seed(0)
    _model = Transformer(11, 13, d_model=16, n_head=4, num_encoder_layers=2, num_decoder_layers=2,
                         d_ff=32, dropout=0.0).eval()
    _src = torch.tensor([[5, 6, 7, 2], [8, 9, 2, 0]])
    _tgt = torch.tensor([[1, 4, 5, 6, 2], [1, 7, 2, 0, 0]])
    _logits = _model(_src, _tgt)
    assert _logits.shape == (2, 5, 13), "forward returns logits [B, Lt, tgt_vocab]"
    _tgt2 = _tgt.clone(); _tgt2[:, 3:] = 9
    assert torch.allclose(_model(_src, _tgt2)[:, :3], _logits[:, :3], atol=1e-5), \
        "changing a later target token changed earlier logits: is the causal mask built in forward?"
    _alone = _model(_src[1:, :3], _tgt[1:, :3])
    assert torch.allclose(_alone, _logits[1:, :3], atol=1e-5), \
        "padding changed the result: build the padding masks from pad_id (source and target)"
    assert not hasattr(_model, "encoder_norm"), "post-LN has no final encoder/decoder norm"
    print("Transformer: visible tests passed ✓")
    """),
    markdown(r"""
    ## 5. Greedy decoding

    At test time there is no target to feed the decoder. It writes one token at a time:

    1. encode the source once (`memory`), and keep the source padding mask;
    2. start every sequence with `<bos>`: `ys = [[bos], [bos], …]`;
    3. run the decoder on `ys`, take the logits of the **last** position, pick the most likely
       token (greedy = `argmax`, no search), append it to `ys`;
    4. a sequence that has produced `<eos>` is finished: from then on it gets `pad_id`, whatever
       the model says; stop as soon as **every** sequence is finished, or when `ys` reaches
       `max_len` tokens (counting the `<bos>`).

    Two details are easy to miss. The decoder call needs the `memory_mask`, or a short source
    padded to the batch's length decodes differently from the same source alone. And the
    model must be in evaluation mode (no dropout) and run without gradients. Without a
    key/value cache every step re-runs the decoder over the whole prefix, so decoding `T`
    tokens costs O(T²); fine for numerals, and a classic optimisation for long outputs.

    ### Exercise 5 · `greedy_decode(model, src, max_len, bos_id, eos_id)`

    Returns a LongTensor `[B, T]` with `T ≤ max_len`, each row starting with `bos_id`; after a
    row's `eos_id` every position is `model.pad_id`; the loop stops as soon as every row has
    ended. Use `model.encode`, `model.decode` and `model.generator` (or `model(src, ys)`).
    """),
    exported(solution("greedy_decode", r'''
    @torch.no_grad()
    def greedy_decode(model: nn.Module, src: torch.Tensor, max_len: int, bos_id: int,
                      eos_id: int) -> torch.Tensor:
        """Translate src [B, Ls] greedily; returns [B, T <= max_len] ids starting with bos_id."""
        ### BEGIN SOLUTION
        was_training = model.training
        model.eval()
        src_mask = padding_mask(src, model.pad_id)
        memory = model.encode(src, src_mask)
        ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)
        done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
        while ys.size(1) < max_len and not done.all():
            logits = model.generator(model.decode(ys, memory, memory_mask=src_mask)[:, -1])
            next_token = logits.argmax(-1).masked_fill(done, model.pad_id)
            ys = torch.cat([ys, next_token[:, None]], dim=1)
            done = done | (next_token == eos_id)
        model.train(was_training)
        return ys
        ### END SOLUTION
    ''')),
    tests(LESSON, "greedy_decode", 4, r"""
    torch.manual_seed(0)
    _m = Transformer(11, 13, d_model=16, n_head=4, num_encoder_layers=1, num_decoder_layers=1,
                     d_ff=32, dropout=0.0)
    _src = torch.tensor([[5, 6, 7, 2], [8, 9, 2, 0]])
    _out = greedy_decode(_m, _src, max_len=7, bos_id=1, eos_id=2)
    assert _out.dtype == torch.long and _out.shape[0] == 2 and _out.shape[1] <= 7, "[B, T <= max_len] token ids"
    assert (_out[:, 0] == 1).all(), "every row starts with bos"
    for _row in _out.tolist():
        if 2 in _row:
            assert all(t == 0 for t in _row[_row.index(2) + 1:]), "after eos every position must be pad"
    print(_out)
    print("greedy_decode: visible tests passed ✓")
    """),
    markdown(r"""
    Greedy decoding with an untrained model writes nonsense, of course; lesson 09 trains it.
    A quick sanity check of the loop: the model's logits at each step could depend only on
    what came before, so decoding a batch and decoding each sentence alone must agree.
    """),
    code(r"""
    torch.manual_seed(1)
    m = Transformer(11, 13, d_model=32, n_head=4, num_encoder_layers=2, num_decoder_layers=2,
                    d_ff=64, dropout=0.0)
    src = torch.tensor([[5, 6, 7, 8, 2], [9, 4, 2, 0, 0]])
    batch = greedy_decode(m, src, max_len=8, bos_id=1, eos_id=2)
    alone = greedy_decode(m, src[1:, :3], max_len=8, bos_id=1, eos_id=2)
    print(batch)
    print(alone)
    """, demo=True),
    markdown(r"""
    ## 6. How many parameters has the base model? (Why "65M"?)

    The paper's base model: `D = 512`, `H = 8`, `N = 6` layers each side, `d_ff = 2048`, and a
    shared byte-pair vocabulary of about 37,000 tokens (English–German). Count it by hand:

    | part | parameters |
    |---|---|
    | multi-head attention: 4 projections `D×D + D` | 4 · (512² + 512) = 1,050,624 |
    | feed-forward: `D×d_ff + d_ff + d_ff×D + D` | 2,099,712 |
    | LayerNorm: `2D` | 1,024 |
    | encoder layer: 1 attention + FFN + 2 norms | 3,152,384 |
    | decoder layer: 2 attentions + FFN + 3 norms | 4,204,032 |
    | 6 + 6 layers | 44,138,496 |
    | one embedding table `V×D` | 18,944,000 |

    The layers hold 44M. The paper's model **shares one matrix** three ways (section 3.4):
    the source embedding, the target embedding and the pre-softmax projection (our
    `generator.weight`) are the same `37000 × 512` table, so the vocabulary costs 18.9M
    once: 44.1 + 18.9 ≈ **63M**, reported as "65M" (a rounder vocabulary size, biases and the
    like account for the rest). Our `Transformer` keeps three separate tables (simpler, and
    our source and target vocabularies differ: digits and Chinese characters), so the same
    configuration has about **101M** parameters. Build it on PyTorch's `meta` device, which
    allocates no memory, and count:
    """),
    code(r"""
    with torch.device("meta"):
        base = Transformer(37000, 37000, d_model=512, n_head=8, num_encoder_layers=6,
                           num_decoder_layers=6, d_ff=2048, dropout=0.1)
    total = sum(p.numel() for p in base.parameters())
    table = base.src_embed.embedding.weight.numel()
    layers = sum(p.numel() for n, p in base.named_parameters() if "layers" in n)
    print(f"layers                          {layers:>12,}")
    print(f"our model (3 separate tables)   {total:>12,}")
    print(f"with one shared table (paper)   {total - 2 * table:>12,}")
    """),
    markdown(r"""
    ## 7. What attention costs: the complexity table

    Table 1 of the paper compares layer types for a sequence of length `n` with width `d`:

    | layer type | operations per layer | sequential operations | longest path between two positions |
    |---|---|---|---|
    | self-attention | O(n² · d) | O(1) | O(1) |
    | recurrent (RNN, LSTM) | O(n · d²) | O(n) | O(n) |
    | convolutional (kernel k) | O(k · n · d²) | O(1) | O(log_k n) |
    | self-attention restricted to r neighbours | O(r · n · d) | O(1) | O(n / r) |

    - Self-attention compares every position with every other (`n²` dot products of width
      `d`); a recurrent layer multiplies a `d × d` matrix once per position. Attention is
      cheaper while `n < d`: true for sentences (n ≈ 30–70 with d = 512), false for long
      documents, hence the many "efficient attention" variants.
    - **Sequential operations**: a recurrent layer must finish position `t − 1` before `t`;
      attention computes all positions at once, which is what GPUs want (the notes: "并行计算").
    - **Path length**: in attention, position 1 reaches position `n` in a single step; in a
      recurrent network the signal crosses `n` steps, and long-range dependencies fade.

    A rough measurement of the two costs on this machine:
    """),
    code(r"""
    import time

    def seconds(fn, repeat=5):
        fn()
        start = time.perf_counter()
        for _ in range(repeat):
            fn()
        return (time.perf_counter() - start) / repeat

    threads = torch.get_num_threads()
    torch.set_num_threads(1)   # a fair comparison (and on a busy machine, 1 thread is often fastest)
    d = 64
    W = torch.randn(d, d)
    rows = []
    for n in (16, 64, 256, 1024):
        x = torch.randn(n, d)
        attention_time = seconds(lambda: torch.softmax(x @ x.T / d ** 0.5, -1) @ x)

        def recurrent():
            h = torch.zeros(d)
            for t in range(n):
                h = torch.tanh(x[t] + h @ W)
        rows.append((n, attention_time, seconds(recurrent)))
    torch.set_num_threads(threads)
    print(" n      attention (1 step)   recurrent (n steps)")
    for n, a, r in rows:
        print(f"{n:<6} {a * 1e3:>10.3f} ms        {r * 1e3:>10.3f} ms")
    """, demo=True),
    markdown(r"""
    The recurrent loop loses by far even where it does fewer multiplications: its `n` steps
    must run one after another, while attention's `n²·d` work is one parallel matrix product.

    ## Summary

    - A Transformer layer is sub-layers wrapped in residual connections and LayerNorms;
      post-LN (paper) normalises after the addition, pre-LN inside the branch, and then needs
      final norms.
    - Encoder: self-attention + FFN. Decoder: **masked** self-attention, **cross-attention**
      (queries from the decoder, keys and values from the encoder), FFN.
    - The model builds its masks from `pad_id`: padding masks for the source (also used as
      the memory mask) and causal + padding for the target.
    - Greedy decoding feeds the model its own predictions, from `<bos>` to `<eos>`.
    - The base model's 65M parameters assume one embedding matrix shared three ways.

    Next, lesson 09 (`09_training`) trains this model on the numerals dataset.
    """),
]


def build() -> nbformat.NotebookNode:
    return notebook(CELLS)


if __name__ == "__main__":
    out = ROOT / "solutions" / LESSON / f"{LESSON}.ipynb"
    out.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(build(), out)
    print(out.relative_to(ROOT))
