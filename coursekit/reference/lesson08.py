"""Reference code of lesson 08_transformer, GENERATED from solutions/08_transformer/08_transformer.ipynb
by `python -m coursekit.export`. Do not edit."""
# ruff: noqa

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

# The building blocks of lessons 03-07, generated from their reference notebooks
# (coursekit/reference/lessonNN.py is written by `python -m coursekit.export`).
from coursekit.reference.lesson03 import causal_mask, padding_mask
from coursekit.reference.lesson04 import MultiHeadAttention
from coursekit.reference.lesson05 import FastLayerNorm as LayerNorm  # backward by hand, lesson 05 §7
from coursekit.reference.lesson06 import gelu
from coursekit.reference.lesson07 import PositionalEncoding, TokenEmbedding


class PositionwiseFeedForward(nn.Module):
    """FFN(x) = linear2(dropout(activation(linear1(x)))), applied at every position."""

    def __init__(self, d_model: int, d_ff: int, dropout: float = 0.0, activation: str = "relu"):
        super().__init__()
        if activation not in ("relu", "gelu"):
            raise ValueError(f"activation must be 'relu' or 'gelu', got {activation!r}")
        self.linear1 = nn.Linear(d_model, d_ff)
        self.linear2 = nn.Linear(d_ff, d_model)
        self.dropout = nn.Dropout(dropout)
        self.activation = torch.relu if activation == "relu" else gelu
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear2(self.dropout(self.activation(self.linear1(x))))


class EncoderLayer(nn.Module):
    """Self-attention then feed-forward, each with a residual connection and a LayerNorm."""

    def __init__(self, d_model: int, n_head: int, d_ff: int, dropout: float = 0.0,
                 norm_first: bool = False):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, n_head, dropout)
        self.ff = PositionwiseFeedForward(d_model, d_ff, dropout)
        self.norm1 = LayerNorm(d_model)
        self.norm2 = LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.norm_first = norm_first
    def forward(self, x: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        if self.norm_first:
            h = self.norm1(x)
            x = x + self.dropout1(self.self_attn(h, h, h, src_mask))
            x = x + self.dropout2(self.ff(self.norm2(x)))
        else:
            x = self.norm1(x + self.dropout1(self.self_attn(x, x, x, src_mask)))
            x = self.norm2(x + self.dropout2(self.ff(x)))
        return x


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention over the encoder output, feed-forward."""

    def __init__(self, d_model: int, n_head: int, d_ff: int, dropout: float = 0.0,
                 norm_first: bool = False):
        super().__init__()
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
    def forward(self, x: torch.Tensor, memory: torch.Tensor,
                tgt_mask: torch.Tensor | None = None,
                memory_mask: torch.Tensor | None = None) -> torch.Tensor:
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


class Transformer(nn.Module):
    """The encoder-decoder Transformer; masks are built inside from pad_id."""

    def __init__(self, src_vocab: int, tgt_vocab: int, d_model: int = 512, n_head: int = 8,
                 num_encoder_layers: int = 6, num_decoder_layers: int = 6, d_ff: int = 2048,
                 dropout: float = 0.1, max_len: int = 512, pad_id: int = 0,
                 norm_first: bool = False):
        super().__init__()
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
    def encode(self, src: torch.Tensor, src_mask: torch.Tensor | None = None) -> torch.Tensor:
        if src_mask is None:
            src_mask = padding_mask(src, self.pad_id)
        x = self.pos_enc(self.src_embed(src))
        for layer in self.encoder_layers:
            x = layer(x, src_mask)
        return self.encoder_norm(x) if self.norm_first else x
    def decode(self, tgt: torch.Tensor, memory: torch.Tensor,
               tgt_mask: torch.Tensor | None = None,
               memory_mask: torch.Tensor | None = None) -> torch.Tensor:
        if tgt_mask is None:
            tgt_mask = causal_mask(tgt.size(1), device=tgt.device) & padding_mask(tgt, self.pad_id)
        x = self.pos_enc(self.tgt_embed(tgt))
        for layer in self.decoder_layers:
            x = layer(x, memory, tgt_mask, memory_mask)
        return self.decoder_norm(x) if self.norm_first else x
    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        src_mask = padding_mask(src, self.pad_id)
        memory = self.encode(src, src_mask)
        return self.generator(self.decode(tgt, memory, memory_mask=src_mask))


@torch.no_grad()
def greedy_decode(model: nn.Module, src: torch.Tensor, max_len: int, bos_id: int,
                  eos_id: int) -> torch.Tensor:
    """Translate src [B, Ls] greedily; returns [B, T <= max_len] ids starting with bos_id."""
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
