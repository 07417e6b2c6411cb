"""Make every figure the lessons show before anything is run, from the reference code.

    python docs/figures/make_figures.py                 # all lessons
    python docs/figures/make_figures.py --lessons 03,08 # some
    python docs/figures/make_figures.py --retrain       # also retrain lessons 09's and 10's models
    python docs/figures/make_figures.py --lessons 09 --retrain  # retrain lesson 09's only

Each figure is written to ``solutions/<lesson>/figures/<name>.png`` (and, for a lesson
with a Chinese edition, ``<name>.zh.png``: its diagrams' words come from ``TEXT_ZH``, its
notebook figures from the Chinese notebook's own cells, which have the same ids);
``nbgrader
generate_assignment`` copies that folder into ``lessons/<lesson>/`` (and a release bundle
carries it), and the lessons' markdown shows it as ``![…](figures/<name>.png)``. Two kinds:

- **diagrams** drawn here (attention as a soft lookup, the masks, the Transformer, the
  three model families), from the reference masks of ``coursekit.reference``;
- **"what you should see"**: a lesson's own plotting cell, run on the reference solution
  (the notebook's setup, provided, solution and earlier demo cells are executed first, in
  order, exactly as a student runs them), its figure saved. So an image cannot drift from
  the code that draws it. Lesson 09's come from the model trained with its ``cpu`` preset,
  kept in ``docs/figures/numerals_cpu.pt``, lesson 10's from its own, kept in
  ``docs/figures/decoder_only_cpu.pt`` (``--retrain`` trains both again, a few minutes).

Output is deterministic for pinned matplotlib, font and torch (no timestamps in the PNG);
``tests/lessons/test_figures.py`` regenerates everything and compares the pixels with a tolerance.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from coursekit import catalogue  # noqa: E402
from coursekit.fonts import use_cjk_font  # noqa: E402

DPI = 90
CHECKPOINT = Path(__file__).resolve().parent / "numerals_cpu.pt"
CHECKPOINT_10 = Path(__file__).resolve().parent / "decoder_only_cpu.pt"
_MAGIC = re.compile(r"^\s*[%!].*$", re.M)

# ----------------------------------------------------------------------------- diagrams
#
# A diagram's words go through _t: in a lesson's Chinese edition (figures/<name>.zh.png)
# they come from TEXT_ZH, keyed by the English text; making a Chinese figure whose words
# are missing there fails and lists them. ("Editions" in CONTRIBUTING.md.)

TEXT_ZH: dict[str, str] = {
    # lesson 12: tiling, kv_cache_bytes
    "(m, ℓ) ← merge_softmax_stats(m, ℓ, m_b, ℓ_b)": "(m, ℓ) ← merge_softmax_stats(m, ℓ, m_b, ℓ_b)",
    "S = Q_i K_jᵀ / √d   (one tile, masked)": "S = Q_i K_jᵀ / √d   （一个分块，施加掩码）",
    "acc ← acc · exp(m_old − m) + (P̃ V_j) · exp(m_b − m)": "acc ← acc · exp(m_old − m) + (P̃ V_j) · exp(m_b − m)",
    "after the last key block:\nO_i = acc / ℓ,   lse_i = m + log ℓ": "最后一个键块之后：\nO_i = acc / ℓ，   lse_i = m + log ℓ",
    "as published": "按发布的配置",
    "cache per token (KiB, 16-bit)": "每个词元的缓存（KiB，16 位）",
    "causal, aligned to the bottom right: query i sees keys j ≤ i + (Lk − Lq)":
        "因果，对齐到右下角：查询 i 看到键 j ≤ i + (Lk − Lq)",
    "every query head its own key–value head (MHA)": "每个查询头都有自己的键值头（MHA）",
    "for the orange block of queries, tile after tile:": "对橙色的查询块，一个分块接一个分块：",
    "kept per query: m (running max), ℓ (running sum), acc (d numbers)":
        "每个查询保留：m（当前最大值）、ℓ（当前的和）、acc（d 个数）",
    "keys and values: blocks of block_k = {}": "键和值：块大小 block_k = {}",
    "key–value cache per token: 2 · layers · key–value heads · d_head · 2 bytes":
        "每个词元的键值缓存：2 · 层数 · 键值头数 · d_head · 2 字节",
    "m_b = rowmax(S),  P̃ = exp(S − m_b),  ℓ_b = rowsum(P̃)": "m_b = rowmax(S),  P̃ = exp(S − m_b),  ℓ_b = rowsum(P̃)",
    "never made: the [Lq, Lk] matrix of scores or of probabilities": "从不构建：[Lq, Lk] 的分数矩阵或概率矩阵",
    "next\nkey block": "下一个\n键块",
    "one key–value head (MQA)": "只有一个键值头（MQA）",
    "one tile [block_q, block_k] of scores at a time; dots: allowed by the causal mask":
        "每次一个 [block_q, block_k] 的分数块；圆点：因果掩码允许的位置",
    "queries: blocks of block_q = {}": "查询：块大小 block_q = {}",
    "skipped": "跳过",
    "{} layers, {} heads, {} kv": "{} 层，{} 个头，{} 个键值头",
    # lesson 01: soft_lookup
    "a dictionary: the one equal key": "字典：只找那个相等的键",
    "query": "查询",
    "key {}": "键 {}",
    "value {}": "值 {}",
    "exact match or nothing (KeyError)": "要么完全相等，要么报错（KeyError）",
    "attention: compare with every key, average the values": "注意力：与每个键比较，再对值加权平均",
    "score {}": "分数 {}",
    "softmax weights": "softmax 权重",
    "weights ≥ 0, summing to 1: a weighted average (attention pooling, 注意力汇聚)":
        "权重非负、和为 1：对值做加权平均，即注意力汇聚（attention pooling）",
    # lesson 03: masks
    "key": "键",
    "pad": "填充",
    "padding_mask: [B, 1, 1, L]\nno query looks at a pad": "padding_mask：[B, 1, 1, L]\n任何查询都不看填充位置",
    "causal_mask: [L, L]\nno query looks ahead": "causal_mask：[L, L]\n任何查询都不看后面的位置",
    "causal & padding\nboth at once (decoder)": "causal & padding\n两者同时生效（解码器）",
    # lesson 04: multi_head_attention ("query", "key": lessons 01, 03)
    "multi-head attention: H scaled dot-product attentions side by side": "多头注意力：H 个缩放点积注意力并排计算",
    "scaled dot-product attention\nin every head, independently": "缩放点积注意力\n每个头各自独立计算",
    "mask (optional)": "掩蔽（可选）",
    "softmax over the keys": "在所有键上做 softmax",
    "weights": "权重",
    "H heads": "H 个头",
    "weights [B, H, Lq, Lk], kept in self.attn_weights": "权重 [B, H, Lq, Lk]，保存在 self.attn_weights",
    "value": "值",
    "split into\nH heads": "拆分成\nH 个头",
    "merge heads\n(concatenate)": "合并多个头\n（拼接）",
    "output": "输出",
    "d = D / H: head h gets features h·d … (h+1)·d − 1 of every projected token (lesson 02)":
        "d = D / H：头 h 拿到投影后每个词元的特征 h·d … (h+1)·d − 1（第 02 课）",
    "self-attention: query = key = value = x;  cross-attention: key = value = the encoder's output":
        "自注意力：query = key = value = x；编码器－解码器注意力：key = value = 编码器的输出",
    "4 × Linear(D, D): 4·D² + 4·D parameters, whatever H is": "4 个 Linear(D, D)：不管 H 取多少，参数量都是 4·D² + 4·D",
    # lesson 08: transformer, model_masks, families
    "encoder self-attention\nsrc_mask = padding_mask(src)": "编码器自注意力\nsrc_mask = padding_mask(src)",
    "decoder masked self-attention\ntgt_mask = causal & padding_mask(tgt)":
        "解码器掩蔽自注意力\ntgt_mask = causal & padding_mask(tgt)",
    "cross-attention\nmemory_mask = padding_mask(src)": "编码器－解码器注意力\nmemory_mask = padding_mask(src)",
    "key (encoder output)": "键（编码器输出）",
    "query (decoder)": "查询（解码器）",
    "add & norm": "相加并规范化",
    "src tokens [B, Ls]  (digits + eos)": "源词元 [B, Ls]（数字 + eos）",
    "tgt tokens [B, Lt]  (bos + reading)": "目标词元 [B, Lt]（bos + 读法）",
    "TokenEmbedding × √D\n+ PositionalEncoding": "TokenEmbedding × √D\n+ PositionalEncoding",
    "N ×": "N ×",
    "× N": "× N",
    "multi-head self-attention": "多头自注意力",
    "feed-forward (FFN)": "前馈网络（FFN）",
    "memory [B, Ls, D]": "memory [B, Ls, D]",
    "mask:\npadding_mask(src)": "掩码：\npadding_mask(src)",
    "masked multi-head\nself-attention": "掩蔽多头\n自注意力",
    "cross-attention\nQ: decoder   K, V: memory": "编码器－解码器注意力\nQ：解码器   K、V：memory",
    "mask: causal_mask\n& padding_mask(tgt)": "掩码：causal_mask\n& padding_mask(tgt)",
    "keys, values": "键、值",
    "generator: Linear(D, V)": "generator：Linear(D, V)",
    "logits [B, Lt, V] → softmax": "logits [B, Lt, V] → softmax",
    "encoder self-attention: every source token sees every real source token":
        "编码器自注意力：每个源词元都能看到所有真实的源词元",
    "decoder self-attention: each target position sees itself and earlier ones":
        "解码器自注意力：每个目标位置只能看到自己和更早的位置",
    "cross-attention (编码器－解码器注意力): target queries, source keys and values":
        "编码器－解码器注意力（交叉注意力）：查询来自目标序列，键和值来自源序列",
    "post-LN (the paper): each sub-layer is x ← LayerNorm(x + Sublayer(x));\n"
    "pre-LN (norm_first=True): x ← x + Sublayer(LayerNorm(x)), plus a final norm per stack":
        "后置规范化（post-LN，论文）：每个子层为 x ← LayerNorm(x + Sublayer(x))；\n"
        "前置规范化（pre-LN，norm_first=True）：x ← x + Sublayer(LayerNorm(x))，每个层堆叠末尾再加一个规范化",
    "bidirectional self-attention": "双向自注意力",
    "feed-forward": "前馈网络",
    "BERT: encoder only": "BERT：仅编码器",
    "mask: padding\nonly": "掩码：只有\n填充掩码",
    "masked language model (掩蔽语言模型):\nguess the [MASK]ed tokens": "掩蔽语言模型：\n猜出被 [MASK] 替换的词元",
    "encoder: self-attention": "编码器：自注意力",
    "decoder: masked self + cross": "解码器：掩蔽自注意力 + 编码器－解码器注意力",
    "encoder–decoder (lessons 08–09)": "编码器－解码器（第 08–09 课）",
    "sequence to sequence: translation,\nsummarisation (Transformer, T5, BART)":
        "序列到序列：翻译、\n摘要（Transformer、T5、BART）",
    "causal self-attention": "因果自注意力",
    "GPT: decoder only": "GPT：仅解码器",
    "mask: causal\n(no cross-attention)": "掩码：因果掩码\n（没有编码器－解码器注意力）",
    "language model:\npredict the next token": "语言模型：\n预测下一个词元",
    "keep the\nencoder": "保留\n编码器",
    "keep the\ndecoder": "保留\n解码器",
    # lesson 10: blocks, rope, rope_relative ("N ×", "× N": lesson 08)
    "2017: the Transformer (lessons 08–09)": "2017 年：Transformer（第 08–09 课）",
    "encoder–decoder, post-LN": "编码器－解码器，后置规范化（post-LN）",
    "source tokens: 1 2 3 4 eos": "源词元：1 2 3 4 eos",
    "embedding × √D\n+ sinusoids (added once)": "嵌入 × √D\n+ 正弦位置编码（只加一次）",
    "multi-head self-attention\n(all positions; with biases)": "多头自注意力\n（看所有位置；有偏置）",
    "add & LayerNorm": "相加，再层规范化",
    "FFN: Linear(D, 4·D) → ReLU/GELU\n→ Linear(4·D, D)": "前馈网络：Linear(D, 4·D) → ReLU/GELU\n→ Linear(4·D, D)",
    "decoder stack: masked self-attention,\ncross-attention to this output, FFN\n(its own input: target tokens)":
        "解码器的 N 层：掩蔽自注意力、\n对这个输出的编码器－解码器注意力、前馈网络\n（它自己的输入：目标词元）",
    "generator: Linear(D, V)\nits own weight, with bias": "generator：Linear(D, V)\n自己的权重，有偏置",
    "logits": "logits",
    "today: a decoder-only language model (this lesson)": "今天：只含解码器的语言模型（本课）",
    "pre-norm, RMSNorm, RoPE, SwiGLU (LLaMA's block)": "前置规范化、RMSNorm、RoPE、SwiGLU（LLaMA 的块）",
    "tokens: 1 2 3 4 = 一 千 二 百 …": "词元：1 2 3 4 = 一 千 二 百 …",
    "embedding (no √D,\nnothing added)": "嵌入（不乘 √D，\n也不加任何东西）",
    "RMSNorm": "RMSNorm",
    "causal self-attention,\nRoPE on q and k; no biases": "因果自注意力，\n对 q 和 k 做 RoPE；没有偏置",
    "SwiGLU: w2(silu(w1·x) ⊙ w3·x)\nd_ff ≈ 8/3·D; no biases": "SwiGLU：w2(silu(w1·x) ⊙ w3·x)\nd_ff ≈ 8/3·D；没有偏置",
    "RMSNorm (final)": "最终的 RMSNorm",
    "lm_head: Linear(D, V), no bias\nweight = embed.weight (tied)":
        "lm_head：Linear(D, V)，没有偏置\nweight = embed.weight（权重绑定）",
    "logits: the next token": "logits：下一个词元",
    "one shared\nmatrix": "同一个\n矩阵",
    "what changed": "改了什么",
    "post-LN → pre-norm: x ← x + f(norm(x)); the residual path\nstays clean from input to output; a final norm":
        "后置规范化 → 前置规范化：x ← x + f(norm(x))；残差连接\n从输入直通输出，中间不做规范化；末尾再规范化一次",
    "LayerNorm → RMSNorm: x / rms(x) · g, no mean, no bias":
        "层规范化 → 均方根层规范化（RMSNorm）：x / rms(x) · g，\n不减均值，没有偏置",
    "sinusoids added once to the embedding → RoPE: q and k\nrotated by their positions in every layer; q·k sees m − n":
        "正弦位置编码只在嵌入处加一次 → 旋转位置编码（RoPE）：\n每一层都按位置旋转 q 和 k；q·k 只看到 m − n",
    "FFN, 2 matrices D × 4·D, ReLU or GELU → SwiGLU,\n3 matrices D × 8/3·D: the same 8·D² weights":
        "前馈网络，2 个 D × 4·D 矩阵，ReLU 或 GELU → 门控的 SwiGLU，\n3 个 D × 8/3·D 矩阵：权重同为 8·D² 个",
    "biases everywhere → no biases": "处处有偏置 → 没有偏置",
    "own output matrix → lm_head tied to the embedding, as small\nmodels do (so did the 2017 paper; lesson 08 and LLaMA do not)":
        "单独的输出矩阵 → lm_head 与嵌入共享权重，小模型都这样做\n（2017 年的论文也共享；第 08 课和 LLaMA 不共享）",
    "encoder–decoder → one causal decoder: it reads \"1234=\"\nand continues with \"一千二百三十四<eos>\"":
        "编码器－解码器 → 只有一个因果的解码器：\n读入“1234=”，接着写出“一千二百三十四<eos>”",
    "one head's query or key, d_head = 16: 8 pairs (x₂ᵢ, x₂ᵢ₊₁), pair i turns by pos·θᵢ radians, "
    "θᵢ = 10000^(−2i/16)":
        "一个头的查询或键，d_head = 16：8 对 (x₂ᵢ, x₂ᵢ₊₁)，第 i 对旋转 pos·θᵢ 弧度，θᵢ = 10000^(−2i/16)",
    "pair {}: (x{}, x{}), θ = {} rad = {}° per position": "第 {} 对：(x{}, x{})，每个位置转 θ = {} 弧度 = {}°",
    "the arrows: one pair of features at positions 0–5. A query at m and a key at n differ by the angle "
    "(m − n)·θᵢ in every pair, wherever they are.":
        "箭头：同一对特征在位置 0–5 的样子。位置 m 的查询与位置 n 的键，在每一对里都相差角度 (m − n)·θᵢ，"
        "不管它们在哪里。",
    "RoPE: q rotated to position m, k to n\n$(R_m q)\\cdot(R_n k)$\nconstant along every diagonal: a function of m − n":
        "RoPE：把 q 转到位置 m，把 k 转到位置 n\n$(R_m q)\\cdot(R_n k)$\n沿每条对角线不变：只是 m − n 的函数",
    "sinusoids added to the inputs x, y\n$(W_q(x + PE_m))\\cdot(W_k(y + PE_n))$\n"
    "changes along the diagonals: absolute positions leak in":
        "把正弦位置编码加到输入 x、y 上\n$(W_q(x + PE_m))\\cdot(W_k(y + PE_n))$\n沿对角线会变：绝对位置混了进来",
    "key position n": "键的位置 n",
    "query position m": "查询的位置 m",
    "RoPE": "RoPE",
    "sinusoids added": "加上正弦位置编码",
    "score": "注意力分数",
    "along the dashed diagonal m − n = {}:\nthe same pair of tokens, moved together":
        "沿虚线对角线 m − n = {}：\n同一对词元一起平移",
    # lesson 11
    "the sequence: what this step computes, what it reads": "序列：这一步计算的，和它读取的",
    "attention: queries × keys": "注意力：查询 × 键",
    "the cache, in every layer": "缓存（每一层都有）",
    "prefill:\nthe whole prompt": "预填充：\n整个提示词",
    "decode step {}:\none new token": "解码第 {} 步：\n一个新词元",
    "q, k, v": "q、k、v",
    "{} query–key scores\n(without a cache: {})": "{} 个查询–键分数\n（没有缓存时：{} 个）",
    "{} positions": "{} 个位置",
    "the chosen token\nis the next input": "选出的词元\n是下一步的输入",
    "computed in this step (q, k, v; k, v appended to the cache)": "这一步计算的（q、k、v；k、v 追加到缓存）",
    "read from the cache (k, v only; never recomputed)": "从缓存读取的（只有 k、v；不再重新计算）",
    "recomputed without a cache": "没有缓存时要重新计算的",
    "as the model gives it\n(temperature 1)": "模型给出的分布\n（温度 1）",
    "temperature 0.5\nsharper": "温度 0.5\n更尖锐",
    "temperature 2\nflatter": "温度 2\n更平坦",
    "top-k 3\nthe 3 most likely": "top-k 3\n最可能的 3 个",
    "top-p 0.9\nthe fewest reaching 0.9": "top-p 0.9\n概率之和达到 0.9 的最少词元",
    "token (most likely first)": "词元（按概率从大到小）",
    "{} kept:\ntheir mass {:.2f}\nbefore renormalising": "保留 {} 个：\n重新规范化之前\n概率之和为 {:.2f}",
    "probability": "概率",
    "dashed: the distribution as the model gives it; bars: after the filter and the softmax (excluded tokens: 0)":
        "虚线：模型给出的分布；柱：过滤并做 softmax 之后（被排除的词元：0）",
    "step {}": "第 {} 步",
    "finished, score = log p / ((5 + |Y|) / 6)^0.6:": "已完成的候选序列，得分 = log p / ((5 + |Y|) / 6)^0.6：",
    "in the beam (the 2 best of the step)": "留在束中（这一步最好的 2 个）",
    "pruned: not among the 2 best": "剪掉：不在最好的 2 个之中",
    "finished: <eos>, or max_len reached": "已完成：写出 <eos>，或达到 max_len",
    "greedy decoding: A A <eos>, p = 0.12": "贪心搜索：A A <eos>，p = 0.12",
    "beam 2, max_len 4 (<bos> and 3 tokens); the model: a table\nof next-token probabilities. p: the token's "
    "probability after\nthe tokens before it; log p: the sum of the logs along the path":
        "束宽 2，max_len 4（<bos> 加 3 个词元）；模型：一张\n下一个词元的概率表。p：在前面的词元之后\n这个词元的概率；"
        "log p：沿路径的对数概率之和",
}

_LANG = {"edition": "en"}


class MissingWords(KeyError):
    """Words of a diagram without their translation (TEXT_ZH)."""


def _t(text: str) -> str:
    """``text`` in the language of the figure being made."""
    if _LANG["edition"] == "en":
        return text
    if text not in TEXT_ZH:
        _LANG.setdefault("missing", []).append(text)
        return text
    return TEXT_ZH[text]


BLUE, ORANGE, GREEN, GREY = "#4c72b0", "#dd8452", "#55a868", "#8c8c8c"
SELF_COLOUR, MASKED_COLOUR, CROSS_COLOUR = "#c6dbef", "#fdd0a2", "#c7e9c0"


def _box(ax, x, y, w, h, text, face="white", edge="k", fontsize=9, **kw):
    ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02,rounding_size=0.08",
                                facecolor=face, edgecolor=edge, lw=1.0))
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize, **kw)


def _arrow(ax, start, end, colour="k", style="-|>", lw=1.0, rad=0.0, **kw):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle=style, mutation_scale=10, color=colour, lw=lw,
                                 connectionstyle=f"arc3,rad={rad}", shrinkA=0, shrinkB=0, **kw))


def soft_lookup() -> plt.Figure:
    """Lesson 01: a dictionary lookup against attention as a soft lookup."""
    fig, (hard, soft) = plt.subplots(1, 2, figsize=(11, 4.2), gridspec_kw={"width_ratios": [1, 1.35]})
    for ax in (hard, soft):
        ax.set_xlim(0, 10)
        ax.set_ylim(0, 7)
        ax.axis("off")
    hard.set_title(_t("a dictionary: the one equal key"), fontsize=11)
    _box(hard, 1.4, 3.5, 1.8, 0.8, _t("query") + "\n秀", face="#eeeeee")
    for y, key, value, hit in [(5.2, "优", "v₁", False), (3.5, "秀", "v₂", True), (1.8, "好", "v₃", False)]:
        _box(hard, 5.0, y, 1.4, 0.8, _t("key {}").format(key), face="#ffe9a8" if hit else "white")
        _box(hard, 7.8, y, 1.4, 0.8, _t("value {}").format(value), face="#ffe9a8" if hit else "white")
        _arrow(hard, (5.7, y), (7.1, y), colour=GREY)
        _arrow(hard, (2.3, 3.5), (4.3, y), colour="k" if hit else "#dddddd", lw=1.6 if hit else 0.8)
    hard.text(5.0, 0.5, _t("exact match or nothing (KeyError)"), ha="center", fontsize=9, color=GREY)

    soft.set_title(_t("attention: compare with every key, average the values"), fontsize=11)
    _box(soft, 0.9, 3.5, 1.4, 0.8, _t("query") + " q", face="#eeeeee")
    weights = [0.15, 0.70, 0.15]
    for y, (i, w) in zip((5.2, 3.5, 1.8), enumerate(weights), strict=True):
        _box(soft, 3.4, y, 1.3, 0.8, _t("key {}").format(f"k{'₁₂₃'[i]}"))
        _arrow(soft, (1.6, 3.5), (2.75, y), colour=GREY)
        soft.text(4.2, y + 0.45, _t("score {}").format(f"q·k{'₁₂₃'[i]}"), fontsize=8, color=GREY)
        soft.add_patch(plt.Rectangle((5.0, y - 0.3), 1.8 * w, 0.6, color=BLUE))
        soft.text(5.05 + 1.8 * w, y, f" {w:.2f}", va="center", fontsize=9)
        _box(soft, 7.7, y, 1.2, 0.8, _t("value {}").format(f"v{'₁₂₃'[i]}"))
    soft.text(5.9, 6.25, _t("softmax weights"), ha="center", fontsize=9)
    _box(soft, 9.3, 3.5, 1.2, 1.6, "0.15 v₁\n+ 0.70 v₂\n+ 0.15 v₃", face="#d9ead3", fontsize=8)
    for y in (5.2, 3.5, 1.8):
        _arrow(soft, (8.3, y), (8.7, 3.5), colour=GREY)
    soft.text(5.5, 0.5, _t("weights ≥ 0, summing to 1: a weighted average (attention pooling, 注意力汇聚)"),
              ha="center", fontsize=9, color=GREY)
    fig.tight_layout()
    return fig


def _mask_panel(ax, allowed, rows, cols, title, colour):
    import numpy as np

    a = np.asarray(allowed, dtype=float)
    ax.imshow(np.where(a > 0, 1.0, 0.0), cmap=matplotlib.colors.ListedColormap(["#e6e6e6", colour]),
              vmin=0, vmax=1)
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            if a[i, j] == 0:
                ax.text(j, i, "×", ha="center", va="center", color="#9a9a9a", fontsize=9)
    ax.set_xticks(range(len(cols)), cols, fontsize=9)
    ax.set_yticks(range(len(rows)), rows, fontsize=9)
    ax.set_xticks([x - 0.5 for x in range(1, len(cols))], minor=True)
    ax.set_yticks([y - 0.5 for y in range(1, len(rows))], minor=True)
    ax.grid(which="minor", color="white", lw=1.5)
    ax.tick_params(which="minor", length=0)
    ax.set_xlabel(_t("key"))
    ax.set_ylabel(_t("query"))
    ax.set_title(_t(title), fontsize=10)


def masks() -> plt.Figure:
    """Lesson 03: the padding, causal and combined masks of one padded sentence."""
    import torch

    from coursekit.reference.lesson03 import causal_mask, padding_mask

    chars = ["这", "很", "优", "秀", _t("pad"), _t("pad")]
    tokens = torch.tensor([[5, 6, 7, 8, 0, 0]])
    pad = padding_mask(tokens, 0)[0, 0].expand(6, 6)              # [1, 1, L] -> [L, L]
    causal = causal_mask(6)
    fig, axes = plt.subplots(1, 3, figsize=(12, 4.2))
    _mask_panel(axes[0], pad, chars, chars, "padding_mask: [B, 1, 1, L]\nno query looks at a pad", BLUE)
    _mask_panel(axes[1], causal, chars, chars, "causal_mask: [L, L]\nno query looks ahead", ORANGE)
    _mask_panel(axes[2], causal & pad, chars, chars, "causal & padding\nboth at once (decoder)", GREEN)
    fig.tight_layout()
    return fig


def model_masks() -> plt.Figure:
    """Lesson 08: the three masks of the model for a padded sentence pair."""
    import torch

    from coursekit.reference.lesson03 import causal_mask, padding_mask

    src_labels = ["2", "0", "eos", _t("pad"), _t("pad")]
    tgt_labels = ["bos", "二", "十", "eos", _t("pad"), _t("pad")]
    src = torch.tensor([[5, 6, 2, 0, 0]])
    tgt = torch.tensor([[1, 7, 8, 2, 0, 0]])
    src_mask = padding_mask(src, 0)[0, 0]                         # [1, Ls]
    tgt_mask = (causal_mask(6) & padding_mask(tgt, 0))[0, 0]      # [Lt, Lt]
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.4), gridspec_kw={"width_ratios": [5, 6, 5]})
    _mask_panel(axes[0], src_mask.expand(5, 5), src_labels, src_labels,
                "encoder self-attention\nsrc_mask = padding_mask(src)", BLUE)
    _mask_panel(axes[1], tgt_mask, tgt_labels, tgt_labels,
                "decoder masked self-attention\ntgt_mask = causal & padding_mask(tgt)", ORANGE)
    _mask_panel(axes[2], src_mask.expand(6, 5), tgt_labels, src_labels,
                "cross-attention\nmemory_mask = padding_mask(src)", GREEN)
    axes[2].set_xlabel(_t("key (encoder output)"))
    axes[2].set_ylabel(_t("query (decoder)"))
    fig.tight_layout()
    return fig


def _heads_stack(ax, x, y, w, h, face, n=4, step=0.1):
    """n boxes one behind the other (the heads), the front one centred on (x, y)."""
    for i in reversed(range(1, n)):
        ax.add_patch(FancyBboxPatch((x - w / 2 + i * step, y - h / 2 + i * step), w, h,
                                    boxstyle="round,pad=0.02,rounding_size=0.08",
                                    facecolor=face, edgecolor="k", lw=0.8))
    _box(ax, x, y, w, h, "", face=face)


def multi_head_attention() -> plt.Figure:
    """Lesson 04: multi-head attention, step by step, with the shapes of its tensors."""
    fig, ax = plt.subplots(figsize=(13.5, 5.6))
    ax.set_xlim(0, 15)
    ax.set_ylim(0, 6.2)
    ax.axis("off")
    ax.text(0.15, 5.8, _t("multi-head attention: H scaled dot-product attentions side by side"), fontsize=12)
    x_in, x_proj, x_split, x_attn, x_merge, x_out = 0.95, 2.95, 5.0, 8.0, 11.4, 13.65
    y_mid, shape = 2.95, dict(ha="center", va="top", fontsize=8, color="#444444")
    # the attention, one per head (drawn first: the arrows end on its front box)
    attn_w, attn_h, step = 2.6, 3.5, 0.1
    _heads_stack(ax, x_attn, y_mid, attn_w, attn_h, SELF_COLOUR, step=step)
    ax.text(x_attn, 4.38, _t("scaled dot-product attention\nin every head, independently"),
            ha="center", va="center", fontsize=9)
    steps = ["q kᵀ / √d   [B, H, Lq, Lk]", _t("mask (optional)"), _t("softmax over the keys"),
             _t("weights") + " @ v   [B, H, Lq, d]"]
    for i, text in enumerate(steps):
        y = 3.75 - 0.6 * i
        _box(ax, x_attn, y, 2.2, 0.38, text, fontsize=8)
        if i:
            _arrow(ax, (x_attn, y + 0.41), (x_attn, y + 0.19))
    ax.text(x_attn + attn_w / 2 + 0.35, y_mid + attn_h / 2 + 0.12, _t("H heads"), fontsize=9, color=BLUE)
    ax.text(x_attn, y_mid - attn_h / 2 - 0.12, _t("weights [B, H, Lq, Lk], kept in self.attn_weights"), **shape)
    # query, key, value: projected, then split into heads
    for name, letter, length, y in [("query", "q", "Lq", 4.25), ("key", "k", "Lk", 2.95), ("value", "v", "Lk", 1.65)]:
        _box(ax, x_in, y, 1.6, 0.72, _t(name) + f"\n[B, {length}, D]", fontsize=9)
        _box(ax, x_proj, y, 1.6, 0.72, f"{letter}_proj\nLinear(D, D)", face="#eadcf0", fontsize=9)
        _heads_stack(ax, x_split, y, 1.5, 0.72, "#e8e8e8", step=0.07)
        ax.text(x_split, y, _t("split into\nH heads"), ha="center", va="center", fontsize=9)
        ax.text(x_split + 0.1, y - 0.45, f"[B, H, {length}, d]", **shape)
        _arrow(ax, (x_in + 0.8, y), (x_proj - 0.8, y))
        _arrow(ax, (x_proj + 0.8, y), (x_split - 0.75, y))
        _arrow(ax, (x_split + 0.96, y), (x_attn - attn_w / 2, y))
    # merge the heads, output projection
    leave = x_attn + attn_w / 2 + 3 * step
    _arrow(ax, (leave, y_mid), (x_merge - 0.85, y_mid))
    ax.text((leave + x_merge - 0.85) / 2, y_mid - 0.1, "[B, H, Lq, d]", **shape)
    _box(ax, x_merge, y_mid, 1.7, 0.72, _t("merge heads\n(concatenate)"), face="#e8e8e8", fontsize=9)
    ax.text(x_merge, y_mid - 0.45, "[B, Lq, H·d] = [B, Lq, D]", **shape)
    _arrow(ax, (x_merge + 0.85, y_mid), (x_out - 0.75, y_mid))
    _box(ax, x_out, y_mid, 1.5, 0.72, "out_proj\nLinear(D, D)", face="#eadcf0", fontsize=9)
    _arrow(ax, (x_out, y_mid + 0.36), (x_out, 4.25 - 0.36))
    _box(ax, x_out, 4.25, 1.5, 0.72, _t("output") + "\n[B, Lq, D]", fontsize=9)
    notes = ("d = D / H: head h gets features h·d … (h+1)·d − 1 of every projected token (lesson 02)",
             "self-attention: query = key = value = x;  cross-attention: key = value = the encoder's output",
             "4 × Linear(D, D): 4·D² + 4·D parameters, whatever H is")
    for i, note in enumerate(notes):
        ax.text(0.15, 0.62 - 0.26 * i, _t(note), fontsize=8, color="#444444")
    fig.tight_layout()
    return fig


def _sublayer(ax, x, y, w, text, face):
    _box(ax, x, y, w, 0.62, _t(text), face=face, fontsize=9)
    _box(ax, x, y + 0.78, w, 0.42, _t("add & norm"), face="#f3f3d0", fontsize=8)


def transformer() -> plt.Figure:
    """Lesson 08: the encoder-decoder Transformer, its three attentions and their masks."""
    fig, ax = plt.subplots(figsize=(11, 8.6))
    ax.set_xlim(0, 11)
    ax.set_ylim(0, 11.2)
    ax.axis("off")
    ex, dx, w = 2.9, 7.7, 2.9
    # inputs
    _box(ax, ex, 0.45, w, 0.5, _t("src tokens [B, Ls]  (digits + eos)"), fontsize=8)
    _box(ax, dx, 0.45, w, 0.5, _t("tgt tokens [B, Lt]  (bos + reading)"), fontsize=8)
    for x in (ex, dx):
        _box(ax, x, 1.35, w, 0.55, _t("TokenEmbedding × √D\n+ PositionalEncoding"), face="#eadcf0", fontsize=8)
        _arrow(ax, (x, 0.7), (x, 1.07))
    # encoder stack
    ax.add_patch(FancyBboxPatch((ex - w / 2 - 0.35, 2.15), w + 0.7, 3.45, boxstyle="round,pad=0.02",
                                facecolor="none", edgecolor=GREY, ls="--"))
    ax.text(ex - w / 2 - 0.45, 3.9, _t("N ×"), ha="right", fontsize=11)
    _sublayer(ax, ex, 2.75, w, "multi-head self-attention", SELF_COLOUR)
    _sublayer(ax, ex, 4.45, w, "feed-forward (FFN)", "#e8e8e8")
    _arrow(ax, (ex, 1.63), (ex, 2.44))
    _arrow(ax, (ex, 3.74), (ex, 4.14))
    ax.text(ex, 6.1, _t("memory [B, Ls, D]"), ha="center", fontsize=9)
    _arrow(ax, (ex, 5.44), (ex, 5.95))
    ax.text(ex + w / 2 + 0.1, 2.75, _t("mask:\npadding_mask(src)"), va="center", fontsize=8, color=BLUE)
    # decoder stack
    ax.add_patch(FancyBboxPatch((dx - w / 2 - 0.35, 2.15), w + 0.7, 5.15, boxstyle="round,pad=0.02",
                                facecolor="none", edgecolor=GREY, ls="--"))
    ax.text(dx + w / 2 + 0.45, 6.6, _t("× N"), ha="left", fontsize=11)
    _sublayer(ax, dx, 2.75, w, "masked multi-head\nself-attention", MASKED_COLOUR)
    _sublayer(ax, dx, 4.45, w, "cross-attention\nQ: decoder   K, V: memory", CROSS_COLOUR)
    _sublayer(ax, dx, 6.15, w, "feed-forward (FFN)", "#e8e8e8")
    _arrow(ax, (dx, 1.63), (dx, 2.44))
    _arrow(ax, (dx, 3.74), (dx, 4.14))
    _arrow(ax, (dx, 5.44), (dx, 5.84))
    ax.text(dx + w / 2 + 0.1, 2.75, _t("mask: causal_mask\n& padding_mask(tgt)"), va="center", fontsize=8,
            color=ORANGE)
    _arrow(ax, (ex + 0.9, 6.05), (dx - w / 2, 4.45), colour=GREEN, lw=1.6, rad=-0.25)
    ax.text(5.3, 5.95, _t("keys, values"), fontsize=8, color=GREEN)
    ax.text(dx + w / 2 + 0.1, 4.45, _t("mask:\npadding_mask(src)"), va="center", fontsize=8, color=GREEN)
    # output
    _box(ax, dx, 8.0, w, 0.5, _t("generator: Linear(D, V)"), face="#eadcf0", fontsize=9)
    _box(ax, dx, 8.85, w, 0.5, _t("logits [B, Lt, V] → softmax"), fontsize=9)
    _arrow(ax, (dx, 7.14), (dx, 7.75))
    _arrow(ax, (dx, 8.25), (dx, 8.6))
    # legend
    for i, (colour, text) in enumerate([(SELF_COLOUR, "encoder self-attention: every source token sees every real source token"),
                                        (MASKED_COLOUR, "decoder self-attention: each target position sees itself and earlier ones"),
                                        (CROSS_COLOUR, "cross-attention (编码器－解码器注意力): target queries, source keys and values")]):
        ax.add_patch(plt.Rectangle((0.3, 10.55 - 0.45 * i), 0.35, 0.3, facecolor=colour, edgecolor="k", lw=0.5))
        ax.text(0.8, 10.7 - 0.45 * i, _t(text), va="center", fontsize=9)
    ax.text(0.3, 9.2, _t("post-LN (the paper): each sub-layer is x ← LayerNorm(x + Sublayer(x));\n"
                      "pre-LN (norm_first=True): x ← x + Sublayer(LayerNorm(x)), plus a final norm per stack"),
            fontsize=8, color="#444444")
    fig.tight_layout()
    return fig


def _stack(ax, x, y, w, layers, title, faces):
    top = y
    for text, face in reversed(layers):
        _box(ax, x, top, w, 0.55, _t(text), face=face, fontsize=8)
        top += 0.7
    ax.text(x, top + 0.05, _t(title), ha="center", fontsize=12)
    return top


def _mini_mask(ax, x, y, kind):
    import numpy as np

    n = 5
    a = np.tril(np.ones((n, n))) if kind == "causal" else np.ones((n, n))
    size = 0.13
    for i in range(n):
        for j in range(n):
            ax.add_patch(plt.Rectangle((x + j * size, y - i * size), size, size,
                                       facecolor=(ORANGE if kind == "causal" else BLUE) if a[i, j] else "#e6e6e6",
                                       edgecolor="white", lw=0.5))


def families() -> plt.Figure:
    """Lesson 08: encoder only (BERT), encoder-decoder, decoder only (GPT)."""
    fig, ax = plt.subplots(figsize=(12, 3.9))
    ax.set_xlim(0, 12)
    ax.set_ylim(0, 3.9)
    ax.axis("off")
    _stack(ax, 1.9, 0.8, 2.6, [("bidirectional self-attention", SELF_COLOUR), ("feed-forward", "#e8e8e8")],
           "BERT: encoder only", None)
    _mini_mask(ax, 1.3, 3.55, "full")
    ax.text(2.1, 3.3, _t("mask: padding\nonly"), fontsize=8)
    ax.text(1.9, 0.15, _t("masked language model (掩蔽语言模型):\nguess the [MASK]ed tokens"), ha="center", fontsize=8)
    _stack(ax, 6.0, 0.8, 2.9, [("encoder: self-attention", SELF_COLOUR), ("decoder: masked self + cross", CROSS_COLOUR)],
           "encoder–decoder (lessons 08–09)", None)
    ax.text(6.0, 0.15, _t("sequence to sequence: translation,\nsummarisation (Transformer, T5, BART)"), ha="center", fontsize=8)
    _stack(ax, 10.1, 0.8, 2.6, [("causal self-attention", MASKED_COLOUR), ("feed-forward", "#e8e8e8")],
           "GPT: decoder only", None)
    _mini_mask(ax, 9.5, 3.55, "causal")
    ax.text(10.3, 3.3, _t("mask: causal\n(no cross-attention)"), fontsize=8)
    ax.text(10.1, 0.15, _t("language model:\npredict the next token"), ha="center", fontsize=8)
    _arrow(ax, (4.45, 1.5), (3.3, 1.5), colour=GREY, lw=1.5)
    _arrow(ax, (7.55, 1.5), (8.7, 1.5), colour=GREY, lw=1.5)
    ax.text(3.9, 1.7, _t("keep the\nencoder"), ha="center", fontsize=8, color=GREY)
    ax.text(8.1, 1.7, _t("keep the\ndecoder"), ha="center", fontsize=8, color=GREY)
    fig.tight_layout()
    return fig


# lesson 10: blocks, rope, rope_relative

def _rope_tables(max_len: int, d_head: int, base: float = 10000.0):
    """Lesson 10's ``rope_angles`` and ``apply_rope`` (the course's reference where it exists)."""
    try:
        from coursekit.reference import lesson10
    except ImportError:
        lesson10 = None
    if lesson10 is not None:
        return lesson10.rope_angles(max_len, d_head, base), lesson10.apply_rope
    import torch

    def apply_rope(x, cos, sin):                  # interleaved pairs (2i, 2i+1), as the contract
        x0, x1 = x[..., 0::2], x[..., 1::2]
        return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2).to(x.dtype)

    theta = base ** (-torch.arange(0, d_head, 2, dtype=torch.float64) / d_head)       # pair i: base^(−2i/d)
    angles = torch.arange(max_len, dtype=torch.float64)[:, None] * theta            # [max_len, d_head // 2]
    return (angles.cos().float(), angles.sin().float()), apply_rope


def _badge(ax, x, y, n, colour="#c44e52"):
    ax.add_patch(plt.Circle((x, y), 0.17, facecolor=colour, edgecolor="none", zorder=5))
    ax.text(x, y, str(n), ha="center", va="center", fontsize=8, color="white", zorder=6)


def _skip(ax, x_side, start, end, colour=GREY):
    """A residual connection: from the stream at ``start`` (x, y) round the left side to ``end``."""
    ax.plot([start[0], x_side, x_side], [start[1], start[1], end[1]], color=colour, lw=1.2)
    _arrow(ax, (x_side, end[1]), end, colour=colour, lw=1.2)


BLOCK_DIFFERENCES = (
    "post-LN → pre-norm: x ← x + f(norm(x)); the residual path\nstays clean from input to output; a final norm",
    "LayerNorm → RMSNorm: x / rms(x) · g, no mean, no bias",
    "sinusoids added once to the embedding → RoPE: q and k\nrotated by their positions in every layer; q·k sees m − n",
    "FFN, 2 matrices D × 4·D, ReLU or GELU → SwiGLU,\n3 matrices D × 8/3·D: the same 8·D² weights",
    "biases everywhere → no biases",
    "own output matrix → lm_head tied to the embedding, as small\nmodels do (so did the 2017 paper; lesson 08 and LLaMA do not)",
    "encoder–decoder → one causal decoder: it reads \"1234=\"\nand continues with \"一千二百三十四<eos>\"",
)


def blocks() -> plt.Figure:
    """Lesson 10: the 2017 block (post-LN, encoder-decoder) beside today's (pre-norm RMSNorm, RoPE,
    SwiGLU, decoder only), their differences numbered."""
    fig, ax = plt.subplots(figsize=(14.8, 9.4))
    ax.set_xlim(0, 14.8)
    ax.set_ylim(0, 9.9)
    ax.axis("off")
    w = 3.2
    ffn_face, norm_face, embed_face = "#e8e8e8", "#f3f3d0", "#eadcf0"
    # 2017, on the left
    lx = 2.45
    ax.text(lx, 9.45, _t("2017: the Transformer (lessons 08–09)"), ha="center", fontsize=12)
    ax.text(lx, 9.1, _t("encoder–decoder, post-LN"), ha="center", fontsize=9, color="#444444")
    _box(ax, lx, 0.45, w, 0.5, _t("source tokens: 1 2 3 4 eos"), fontsize=8)
    _box(ax, lx, 1.35, w, 0.6, _t("embedding × √D\n+ sinusoids (added once)"), face=embed_face, fontsize=8)
    _badge(ax, lx + w / 2, 1.65, 3)
    _arrow(ax, (lx, 0.7), (lx, 1.05))
    ax.add_patch(FancyBboxPatch((lx - w / 2 - 0.55, 2.05), w + 0.75, 4.3, boxstyle="round,pad=0.02",
                                facecolor="none", edgecolor=GREY, ls="--"))
    ax.text(lx - w / 2 - 0.65, 4.2, _t("N ×"), ha="right", fontsize=11)
    _box(ax, lx, 2.95, w, 0.62, _t("multi-head self-attention\n(all positions; with biases)"), face=SELF_COLOUR,
         fontsize=8)
    _badge(ax, lx + w / 2, 3.26, 5)
    _box(ax, lx, 3.85, w, 0.42, _t("add & LayerNorm"), face=norm_face, fontsize=8)
    _badge(ax, lx + w / 2, 4.06, 1)
    _badge(ax, lx + w / 2 + 0.4, 4.06, 2)
    _box(ax, lx, 4.85, w, 0.62, _t("FFN: Linear(D, 4·D) → ReLU/GELU\n→ Linear(4·D, D)"), face=ffn_face, fontsize=8)
    _badge(ax, lx + w / 2, 5.16, 4)
    _box(ax, lx, 5.75, w, 0.42, _t("add & LayerNorm"), face=norm_face, fontsize=8)
    _arrow(ax, (lx, 1.65), (lx, 2.64))
    _arrow(ax, (lx, 3.26), (lx, 3.64))
    _arrow(ax, (lx, 4.06), (lx, 4.54))
    _arrow(ax, (lx, 5.16), (lx, 5.54))
    _skip(ax, lx - w / 2 - 0.3, (lx, 2.35), (lx - w / 2, 3.85))
    _skip(ax, lx - w / 2 - 0.3, (lx, 4.3), (lx - w / 2, 5.75))
    _box(ax, lx, 7.0, w, 0.72, _t("decoder stack: masked self-attention,\ncross-attention to this output, FFN\n"
                                  "(its own input: target tokens)"), face=CROSS_COLOUR, fontsize=8)
    _badge(ax, lx + w / 2, 7.36, 7)
    _box(ax, lx, 8.05, w, 0.55, _t("generator: Linear(D, V)\nits own weight, with bias"), face=embed_face, fontsize=8)
    _badge(ax, lx + w / 2, 8.33, 6)
    _box(ax, lx, 8.72, w, 0.38, _t("logits"), fontsize=8)
    _arrow(ax, (lx, 5.96), (lx, 6.64))
    _arrow(ax, (lx, 7.36), (lx, 7.78))
    _arrow(ax, (lx, 8.33), (lx, 8.53))
    # today, on the right
    rx = 11.55
    ax.text(rx, 9.45, _t("today: a decoder-only language model (this lesson)"), ha="center", fontsize=12)
    ax.text(rx, 9.1, _t("pre-norm, RMSNorm, RoPE, SwiGLU (LLaMA's block)"), ha="center", fontsize=9,
            color="#444444")
    _box(ax, rx, 0.45, w, 0.5, _t("tokens: 1 2 3 4 = 一 千 二 百 …"), fontsize=8)
    _badge(ax, rx + w / 2, 0.7, 7)
    _box(ax, rx, 1.35, w, 0.6, _t("embedding (no √D,\nnothing added)"), face=embed_face, fontsize=8)
    _badge(ax, rx + w / 2, 1.65, 3)
    _arrow(ax, (rx, 0.7), (rx, 1.05))
    ax.add_patch(FancyBboxPatch((rx - w / 2 - 0.55, 2.05), w + 0.75, 4.3, boxstyle="round,pad=0.02",
                                facecolor="none", edgecolor=GREY, ls="--"))
    ax.text(rx + w / 2 + 0.35, 4.2, _t("× N"), ha="left", fontsize=11)
    _box(ax, rx, 2.6, w, 0.36, _t("RMSNorm"), face=norm_face, fontsize=8)
    _badge(ax, rx + w / 2, 2.78, 2)
    _box(ax, rx, 3.3, w, 0.62, _t("causal self-attention,\nRoPE on q and k; no biases"), face=MASKED_COLOUR,
         fontsize=8)
    _badge(ax, rx + w / 2, 3.61, 3)
    _badge(ax, rx + w / 2 + 0.4, 3.61, 5)
    _box(ax, rx, 4.5, w, 0.36, _t("RMSNorm"), face=norm_face, fontsize=8)
    _box(ax, rx, 5.2, w, 0.62, _t("SwiGLU: w2(silu(w1·x) ⊙ w3·x)\nd_ff ≈ 8/3·D; no biases"), face=ffn_face,
         fontsize=8)
    _badge(ax, rx + w / 2, 5.51, 4)
    for y in (3.98, 5.88):                                       # the residual additions
        ax.add_patch(plt.Circle((rx, y), 0.14, facecolor="white", edgecolor="k", lw=1.0, zorder=3))
        ax.text(rx, y, "+", ha="center", va="center", fontsize=10, zorder=4)
    _badge(ax, rx + 0.45, 3.98, 1)
    _arrow(ax, (rx, 1.65), (rx, 2.42))
    _arrow(ax, (rx, 2.78), (rx, 2.99))
    _arrow(ax, (rx, 3.61), (rx, 3.84))
    _arrow(ax, (rx, 4.12), (rx, 4.32))
    _arrow(ax, (rx, 4.68), (rx, 4.89))
    _arrow(ax, (rx, 5.51), (rx, 5.74))
    _skip(ax, rx - w / 2 - 0.3, (rx, 2.25), (rx - 0.14, 3.98))
    _skip(ax, rx - w / 2 - 0.3, (rx, 4.22), (rx - 0.14, 5.88))
    _box(ax, rx, 6.75, w, 0.4, _t("RMSNorm (final)"), face=norm_face, fontsize=8)
    _arrow(ax, (rx, 6.02), (rx, 6.55))
    _box(ax, rx, 8.05, w, 0.55, _t("lm_head: Linear(D, V), no bias\nweight = embed.weight (tied)"), face=embed_face,
         fontsize=8)
    _badge(ax, rx + w / 2, 8.33, 6)
    _box(ax, rx, 8.72, w, 0.38, _t("logits: the next token"), fontsize=8)
    _arrow(ax, (rx, 6.95), (rx, 7.78))
    _arrow(ax, (rx, 8.33), (rx, 8.53))
    _arrow(ax, (rx + w / 2, 1.35), (rx + w / 2, 8.05), colour=BLUE, style="<|-|>", lw=1.2, rad=0.3, ls="--")
    ax.text(rx + w / 2 + 0.95, 7.3, _t("one shared\nmatrix"), ha="center", fontsize=8, color=BLUE)
    # the differences, between the two
    mx = 4.95
    ax.text(mx, 8.6, _t("what changed"), fontsize=11)
    for i, text in enumerate(BLOCK_DIFFERENCES):
        y = 8.0 - 0.95 * i
        _badge(ax, mx + 0.12, y, i + 1)
        ax.text(mx + 0.42, y, _t(text), va="center", fontsize=8)
    fig.tight_layout()
    return fig


def rope() -> plt.Figure:
    """Lesson 10: RoPE rotates each pair of a head's features by pos·θ_i; fast pairs and slow ones."""
    import numpy as np
    import torch

    d_head, positions, pairs = 16, 6, (0, 1, 2)
    (cos, sin), apply_rope = _rope_tables(positions, d_head)
    x = torch.tensor([0.94, 0.34]).repeat(d_head // 2).expand(1, 1, positions, d_head)   # every pair the same
    rotated = apply_rope(x, cos, sin)[0, 0]                                               # [positions, d_head]
    fig = plt.figure(figsize=(12, 5.0))
    grid = fig.add_gridspec(2, 3, height_ratios=[1, 4.6], hspace=0.12, left=0.01, right=0.99, top=0.97,
                            bottom=0.08, wspace=0.05)
    strip = fig.add_subplot(grid[0, :])
    strip.set_xlim(-0.2, d_head + d_head // 2 * 0.3 + 0.1)
    strip.set_ylim(-1.0, 1.15)
    strip.axis("off")
    colours = [BLUE, ORANGE, GREEN]
    for i in range(d_head // 2):
        left = i * 2.3
        face = matplotlib.colors.to_rgba(colours[pairs.index(i)], 0.35) if i in pairs else "#f2f2f2"
        for j in range(2):
            strip.add_patch(plt.Rectangle((left + j, 0), 1, 0.8, facecolor=face, edgecolor="k", lw=0.7))
            strip.text(left + j + 0.5, 0.4, f"$x_{{{2 * i + j}}}$", ha="center", va="center", fontsize=9)
        theta = 10000 ** (-2 * i / d_head)
        strip.text(left + 1, -0.35, rf"$\theta_{i}$ = {theta:.2g}", ha="center", va="center", fontsize=8)
    strip.text(-0.2, 1.0, _t("one head's query or key, d_head = 16: 8 pairs (x₂ᵢ, x₂ᵢ₊₁), "
                             "pair i turns by pos·θᵢ radians, θᵢ = 10000^(−2i/16)"), fontsize=9)
    for panel, i in enumerate(pairs):
        ax = fig.add_subplot(grid[1, panel])
        ax.set_aspect("equal")
        ax.set_xlim(-1.35, 1.35)
        ax.set_ylim(-1.35, 1.35)
        ax.axis("off")
        ax.add_patch(plt.Circle((0, 0), 1, fill=False, color="#cccccc", lw=0.8))
        ax.plot([-1.2, 1.2], [0, 0], color="#dddddd", lw=0.6)
        ax.plot([0, 0], [-1.2, 1.2], color="#dddddd", lw=0.6)
        shades = plt.get_cmap("viridis")(np.linspace(0, 0.85, positions))
        for pos in range(positions):
            u, v = rotated[pos, 2 * i].item(), rotated[pos, 2 * i + 1].item()
            ax.annotate("", (u, v), (0, 0), arrowprops=dict(arrowstyle="-|>", color=shades[pos], lw=1.6,
                                                            shrinkA=0, shrinkB=0))
            radius = 1.27 if i == 2 and pos % 2 else 1.13
            ax.text(radius * u, radius * v, str(pos), ha="center", va="center", fontsize=9, color=shades[pos])
        theta = 10000 ** (-2 * i / d_head)
        ax.set_title(_t("pair {}: (x{}, x{}), θ = {} rad = {}° per position").format(
            i, "₀₂₄"[i], "₁₃₅"[i], f"{theta:.2g}", f"{np.degrees(theta):.3g}"), fontsize=9,
            color=colours[panel])
    fig.text(0.5, 0.025, _t("the arrows: one pair of features at positions 0–5. A query at m and a key at n "
                           "differ by the angle (m − n)·θᵢ in every pair, wherever they are."),
             ha="center", fontsize=9, color="#444444")
    return fig


def rope_relative() -> plt.Figure:
    """Lesson 10: with RoPE the score q_m·k_n depends only on m − n (Toeplitz); with sinusoids
    added to the inputs it does not."""
    import torch

    from coursekit.reference.lesson07 import sinusoidal_positional_encoding

    n, d, gap = 32, 16, 3
    (cos, sin), apply_rope = _rope_tables(n, d)
    g = torch.Generator().manual_seed(0)
    q, k, x, y = (torch.randn(d, generator=g) for _ in range(4))
    w_q, w_k = (torch.randn(d, d, generator=g) / d ** 0.5 for _ in range(2))
    q_m = apply_rope(q.expand(1, 1, n, d), cos, sin)[0, 0]                 # q at positions 0…n−1
    k_n = apply_rope(k.expand(1, 1, n, d), cos, sin)[0, 0]
    rope_scores = q_m @ k_n.T                                               # [m, n]
    pe = sinusoidal_positional_encoding(n, d)
    added = ((x + pe) @ w_q.T) @ ((y + pe) @ w_k.T).T
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.6), gridspec_kw={"width_ratios": [1, 1, 1.15]})
    # (a line holding $…$ is drawn by mathtext, without the CJK font: formulas get lines of their own)
    panels = [(rope_scores, "RoPE: q rotated to position m, k to n\n$(R_m q)\\cdot(R_n k)$\n"
                            "constant along every diagonal: a function of m − n"),
              (added, "sinusoids added to the inputs x, y\n$(W_q(x + PE_m))\\cdot(W_k(y + PE_n))$\n"
                      "changes along the diagonals: absolute positions leak in")]
    for ax, (scores, title) in zip(axes, panels, strict=False):
        image = ax.imshow(scores.numpy(), cmap="viridis")
        ax.plot([0, n - 1 - gap], [gap, n - 1], color="white", lw=1.0, ls="--")
        ax.set_xlabel(_t("key position n"))
        ax.set_ylabel(_t("query position m"))
        ax.set_title(_t(title), fontsize=9)
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.03)
    m = torch.arange(gap, n)
    ax = axes[2]
    ax.plot(m.numpy(), rope_scores[m, m - gap].numpy(), color=BLUE, lw=2, label=_t("RoPE"))
    ax.plot(m.numpy(), added[m, m - gap].numpy(), color=ORANGE, lw=2, label=_t("sinusoids added"))
    ax.set_xlabel(_t("query position m"))
    ax.set_ylabel(_t("score"))
    ax.set_title(_t("along the dashed diagonal m − n = {}:\nthe same pair of tokens, moved together").format(gap),
                 fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


# lesson 11: kv_cache, filtering, beam_tree

def kv_cache() -> plt.Figure:
    """Lesson 11: prefill, then decoding with a KV cache: the tokens each step computes, the
    cache growing, and the query–key pairs of each step against those a step without a cache
    recomputes."""
    prompt, answer = ["1", "2", "3", "4", "="], ["一", "千", "二"]
    steps = len(answer) + 1
    fig, ax = plt.subplots(figsize=(13.6, 5.6))
    ax.set_xlim(0, 13.6)
    ax.set_ylim(-0.5, 6.2)
    ax.axis("off")
    new_face, cached_face = "#fdd0a2", "#c6dbef"
    ax.text(2.3, 6.0, _t("the sequence: what this step computes, what it reads"), fontsize=10)
    ax.text(8.0, 6.0, _t("attention: queries × keys"), fontsize=10)
    ax.text(11.75, 6.0, _t("the cache, in every layer"), fontsize=10)
    for step in range(steps):
        y = 5.05 - 1.45 * step
        n = len(prompt) + step                                    # positions after this step
        label = _t("prefill:\nthe whole prompt") if step == 0 else _t("decode step {}:\none new token").format(step)
        ax.text(0.1, y, label, va="center", fontsize=9)
        tokens = prompt + answer[:step]
        for i, token in enumerate(tokens):
            new = step == 0 or i == n - 1
            _box(ax, 2.6 + 0.62 * i, y, 0.52, 0.52, token, face=new_face if new else cached_face,
                 edge="k" if new else GREY, fontsize=10)
        if step:
            ax.text(2.6 + 0.62 * (n - 1), y - 0.48, _t("q, k, v"), ha="center", fontsize=7, color="#a0522d")
        # the query–key scores that count (the causal triangle; the code computes the whole square):
        # grey, those a step without a cache recomputes; orange, this step's
        cell = 0.135
        x0, top = 8.05, y + 0.55
        for q in range(n):
            for k in range(q + 1):
                computed = step == 0 or q == n - 1
                ax.add_patch(plt.Rectangle((x0 + k * cell, top - (q + 1) * cell), cell, cell,
                                           facecolor="#e6550d" if computed else "#eeeeee",
                                           edgecolor="white", lw=0.4))
        pairs = n * (n + 1) // 2 if step == 0 else n
        ax.text(x0 + n * cell + 0.15, y, _t("{} query–key scores\n(without a cache: {})").format(pairs, n * (n + 1) // 2),
                va="center", fontsize=8)
        # the cache after this step: n columns of k and v
        for row, name in enumerate(("k", "v")):
            for i in range(n):
                new = step == 0 or i == n - 1
                ax.add_patch(plt.Rectangle((11.85 + 0.18 * i, y + 0.05 - 0.3 * row), 0.16, 0.25,
                                           facecolor=new_face if new else cached_face, edgecolor=GREY, lw=0.5))
            ax.text(11.75, y + 0.17 - 0.3 * row, name, ha="right", va="center", fontsize=8)
        ax.text(11.85, y - 0.5, _t("{} positions").format(n), fontsize=8)
        if step:
            _arrow(ax, (7.45, y + 1.45 - 0.25), (7.45, y + 0.3), colour=GREY, lw=1.0)
    ax.text(7.53, 4.5, _t("the chosen token\nis the next input"), fontsize=8, color=GREY, va="center")
    ax.add_patch(plt.Rectangle((0.2, -0.35), 0.3, 0.22, facecolor=new_face, edgecolor="k", lw=0.6))
    ax.text(0.6, -0.24, _t("computed in this step (q, k, v; k, v appended to the cache)"), va="center", fontsize=8)
    ax.add_patch(plt.Rectangle((6.4, -0.35), 0.3, 0.22, facecolor=cached_face, edgecolor=GREY, lw=0.6))
    ax.text(6.8, -0.24, _t("read from the cache (k, v only; never recomputed)"), va="center", fontsize=8)
    ax.add_patch(plt.Rectangle((10.95, -0.35), 0.3, 0.22, facecolor="#eeeeee", edgecolor=GREY, lw=0.6))
    ax.text(11.35, -0.24, _t("recomputed without a cache"), va="center", fontsize=8)
    return fig


FILTER_LOGITS = (2.0, 1.6, 1.1, 0.6, 0.3, -0.2, -0.6, -1.2)   # lesson 11's checkpoint 1 uses the same


def filtering() -> plt.Figure:
    """Lesson 11: one distribution over eight tokens as the model gives it, at temperature 0.5 and
    2, with top-k 3 and with top-p 0.9 (the reference filter_logits)."""
    import torch

    from coursekit.reference.lesson11 import filter_logits

    logits = torch.tensor([FILTER_LOGITS])
    base = logits.softmax(-1)[0]
    panels = [(_t("as the model gives it\n(temperature 1)"), {}),
              (_t("temperature 0.5\nsharper"), {"temperature": 0.5}),
              (_t("temperature 2\nflatter"), {"temperature": 2.0}),
              (_t("top-k 3\nthe 3 most likely"), {"top_k": 3}),
              (_t("top-p 0.9\nthe fewest reaching 0.9"), {"top_p": 0.9})]
    fig, axes = plt.subplots(1, len(panels), figsize=(14, 3.4), sharey=True)
    x = range(len(FILTER_LOGITS))
    for ax, (title, kwargs) in zip(axes, panels, strict=True):
        filtered = filter_logits(logits, **kwargs)
        probs = filtered.softmax(-1)[0]
        kept = (filtered > float("-inf"))[0]
        ax.bar(x, base.tolist(), color="none", edgecolor=GREY, lw=0.8, ls="--")
        ax.bar(x, probs.tolist(), color=[BLUE if k else "#dddddd" for k in kept.tolist()])
        for i, p in enumerate(probs.tolist()):
            ax.text(i, p + 0.01, f"{p:.2f}" if kept[i] else "0", ha="center", fontsize=7,
                    color="k" if kept[i] else GREY)
        ax.set_title(title, fontsize=9)
        ax.set_xticks(list(x), [str(i + 1) for i in x], fontsize=8)
        ax.set_xlabel(_t("token (most likely first)"), fontsize=8)
        ax.set_ylim(0, 0.66)
        if "top_p" in kwargs:
            mass = base[kept].sum().item()
            ax.text(7.4, 0.45, _t("{} kept:\ntheir mass {:.2f}\nbefore renormalising").format(int(kept.sum()), mass),
                    ha="right", fontsize=8)
    axes[0].set_ylabel(_t("probability"))
    fig.text(0.5, 0.005, _t("dashed: the distribution as the model gives it; bars: after the filter and the softmax "
                           "(excluded tokens: 0)"), ha="center", fontsize=8, color="#444444")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return fig


def _table_model():
    """The TableModel class of lesson 11's checkpoint 5 (its cell d11c0064), so the figure and the
    checkpoint search the same made-up model."""
    import ast

    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    cell = next(c for c in _notebook_cells("11_generation") if c.get("id") == "d11c0064")
    tree = ast.parse(cell["source"])
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "TableModel")
    namespace = {"torch": torch, "nn": nn, "F": F}
    exec(compile(ast.Module([node], []), "<TableModel>", "exec"), namespace)
    return namespace["TableModel"]


def beam_tree() -> plt.Figure:
    """Lesson 11: beam search of width 2 on the made-up model of checkpoint 5, step by step: the
    candidates kept, pruned and finished, and greedy decoding's path."""
    import math

    table_model = _table_model()
    table, names = table_model.TABLE, table_model.NAMES
    beam, max_len, alpha, eos = 2, 4, 0.6, 2
    # the search, on the table's entries (the model gives every other token ~1e-6)
    status, logp = {}, {(): 0.0}
    alive = [()]
    while alive and len(alive[0]) + 1 < max_len:
        candidates = [(prefix + (t,), logp[prefix] + math.log(p)) for prefix in alive for t, p in table[prefix].items()]
        candidates.sort(key=lambda c: -c[1])
        alive = []
        for rank, (seq, score) in enumerate(candidates):
            logp[seq] = score
            if rank >= beam:
                status[seq] = "pruned"
            elif seq[-1] == eos or len(seq) + 1 == max_len:
                status[seq] = "finished"
            else:
                status[seq] = "kept"
                alive.append(seq)
    greedy, prefix = set(), ()
    while prefix in table and (not prefix or prefix[-1] != eos):
        prefix = prefix + (max(table[prefix], key=table[prefix].get),)
        greedy.add(prefix)
    finished = {seq: logp[seq] / ((5 + len(seq)) / 6) ** alpha for seq, s in status.items() if s == "finished"}
    best = max(finished, key=finished.get)
    # layout: leaves top to bottom in depth-first order, a parent at the mean of its children
    children = {}
    for seq in logp:
        if seq:
            children.setdefault(seq[:-1], []).append(seq)
    for kids in children.values():
        kids.sort(key=lambda s: -logp[s])
    y, next_leaf = {}, [0.0]

    def place(seq):
        if seq not in children:
            y[seq] = next_leaf[0]
            next_leaf[0] -= 1.0
        else:
            for kid in children[seq]:
                place(kid)
            y[seq] = sum(y[k] for k in children[seq]) / len(children[seq])

    place(())
    fig, ax = plt.subplots(figsize=(13.5, 6.0))
    ax.set_xlim(-0.2, 14.2)
    ax.set_ylim(next_leaf[0] + 0.4, 1.3)
    ax.axis("off")
    faces = {"kept": SELF_COLOUR, "pruned": "#eeeeee", "finished": CROSS_COLOUR}
    x_of = {depth: 0.3 + 2.75 * depth for depth in range(max_len)}
    for depth in range(1, max_len):
        ax.text(x_of[depth], 1.0, _t("step {}").format(depth), ha="center", fontsize=10)
    for seq in logp:
        x = x_of[len(seq)]
        if seq:
            parent = seq[:-1]
            on_greedy = seq in greedy
            ax.plot([x_of[len(parent)] + (0.45 if not parent else 0.93), x - 0.93], [y[parent], y[seq]],
                    color=ORANGE if on_greedy else GREY, lw=2.0 if on_greedy else 0.8, ls="--" if on_greedy else "-")
            p = table[parent][seq[-1]]
            text = f"{names[seq[-1]]}   p {p:g}\nlog p {logp[seq]:.2f}"
            _box(ax, x, y[seq], 1.85, 0.62, text, face=faces[status[seq]],
                 edge="k" if status[seq] != "pruned" else GREY, fontsize=8,
                 color="k" if status[seq] != "pruned" else GREY)
            if seq == best:
                ax.text(x + 1.05, y[seq], "★", fontsize=14, color="#c44e52", va="center")
        else:
            _box(ax, x, y[seq], 0.9, 0.5, "<bos>", fontsize=9)
    ax.text(10.0, -4.75, _t("finished, score = log p / ((5 + |Y|) / 6)^0.6:"), fontsize=8.5)
    lines = []
    for seq in sorted(finished, key=finished.get, reverse=True):
        lp = ((5 + len(seq)) / 6) ** alpha
        mark = "  ★" if seq == best else ""
        lines.append(f"{' '.join(names[t] for t in seq):<9} {logp[seq]:.2f} / {lp:.2f} = {finished[seq]:.2f}{mark}")
    ax.text(10.0, -5.0, "\n".join(lines), fontsize=8.5, family="monospace", va="top")   # Latin only
    legend = [(SELF_COLOUR, "k", _t("in the beam (the 2 best of the step)")),
              ("#eeeeee", GREY, _t("pruned: not among the 2 best")),
              (CROSS_COLOUR, "k", _t("finished: <eos>, or max_len reached"))]
    for i, (face, edge, text) in enumerate(legend):
        ax.add_patch(plt.Rectangle((10.0, -1.5 - 0.55 * i), 0.35, 0.3, facecolor=face, edgecolor=edge, lw=0.8))
        ax.text(10.5, -1.35 - 0.55 * i, text, va="center", fontsize=8.5)
    ax.plot([10.0, 10.35], [-3.15, -3.15], color=ORANGE, lw=2.0, ls="--")
    ax.text(10.5, -3.15, _t("greedy decoding: A A <eos>, p = 0.12"), va="center", fontsize=8.5)
    ax.text(10.0, 0.2, _t("beam 2, max_len 4 (<bos> and 3 tokens); the model: a table\nof next-token probabilities. p: the token's probability after\nthe tokens before it; log p: the sum of the logs along the path"),
            fontsize=9, va="top")
    return fig


# ------------------------------------------------------------ "what you should see"

# lesson 12: tiling, kv_cache_bytes

def tiling() -> plt.Figure:
    """Lesson 12: the tiles of a causal FlashAttention pass, Lq = Lk = 12 in blocks of 3 and 4:
    the tiles a query block visits, those the causal mask leaves empty, the running statistics."""
    Lq, Lk, bq, bk = 12, 12, 3, 4
    fig, ax = plt.subplots(figsize=(12.5, 5.2))
    ax.set_xlim(-3.0, 27.0)
    ax.set_ylim(-0.9, 14.4)
    ax.set_aspect("equal")
    ax.axis("off")
    cell, x0, top = 0.9, 0.0, 12.0
    # K (columns, above) and Q (rows, left), cut into blocks
    for j in range(Lk):
        face = SELF_COLOUR if (j // bk) % 2 == 0 else "#9ecae1"
        ax.add_patch(plt.Rectangle((x0 + j * cell, top + 0.3), cell, 0.7, facecolor=face, edgecolor="white", lw=0.6))
    for i in range(Lq):
        face = MASKED_COLOUR if (i // bq) % 2 == 0 else "#fdae6b"
        ax.add_patch(plt.Rectangle((x0 - 1.0, top - (i + 1) * cell), 0.7, cell, facecolor=face, edgecolor="white",
                                   lw=0.6))
    ax.text(x0 + Lk * cell / 2, top + 1.45, _t("keys and values: blocks of block_k = {}").format(bk), ha="center",
            fontsize=10)
    ax.text(x0 - 1.3, top - Lq * cell / 2, _t("queries: blocks of block_q = {}").format(bq), ha="right",
            va="center", rotation=90, fontsize=10)
    current = 2                                                     # the query block being worked on
    for bi in range(Lq // bq):
        for bj in range(Lk // bk):
            rows = range(bi * bq, bi * bq + bq)
            cols = range(bj * bk, bj * bk + bk)
            empty = min(cols) > max(rows)                           # above the diagonal: all masked
            face = "#f4f4f4" if empty else ("#e6550d" if bi == current and bj == 1 else
                                             "#fdd0a2" if bi == current else "#ffffff")
            ax.add_patch(plt.Rectangle((x0 + bj * bk * cell, top - (bi + 1) * bq * cell), bk * cell, bq * cell,
                                       facecolor=face, edgecolor="k", lw=1.0))
            for i in rows:
                for j in cols:
                    if j <= i and not empty:
                        ax.plot(x0 + (j + 0.5) * cell, top - (i + 0.5) * cell, ".", color=GREY, ms=3)
            if empty:
                ax.text(x0 + (bj * bk + bk / 2) * cell, top - (bi * bq + bq / 2) * cell, _t("skipped"),
                        ha="center", va="center", fontsize=7, color=GREY)
    ax.text(x0 + Lk * cell / 2, top - Lq * cell - 0.8, _t("one tile [block_q, block_k] of scores at a time; "
                                                        "dots: allowed by the causal mask"),
            ha="center", fontsize=9, color="#444444")
    # the loop over the current query block's tiles
    bx = 12.6
    ax.text(bx, 13.6, _t("for the orange block of queries, tile after tile:"), fontsize=10)
    steps = [
        _t("S = Q_i K_jᵀ / √d   (one tile, masked)"),
        _t("m_b = rowmax(S),  P̃ = exp(S − m_b),  ℓ_b = rowsum(P̃)"),
        _t("(m, ℓ) ← merge_softmax_stats(m, ℓ, m_b, ℓ_b)"),
        _t("acc ← acc · exp(m_old − m) + (P̃ V_j) · exp(m_b − m)"),
    ]
    for n, text in enumerate(steps):
        _box(ax, bx + 6.0, 12.3 - 1.35 * n, 12.0, 0.95, text, face="#fff5eb" if n != 2 else "#e5f5e0", fontsize=8)
        if n:
            _arrow(ax, (bx + 6.0, 12.3 - 1.35 * n + 0.87), (bx + 6.0, 12.3 - 1.35 * n + 0.48))
    _arrow(ax, (bx + 12.1, 12.3 - 1.35 * 3), (bx + 12.1, 12.3), rad=0.4, colour=GREY)
    ax.text(bx + 12.8, 10.3, _t("next\nkey block"), fontsize=8, color=GREY, va="center")
    _box(ax, bx + 6.0, 5.9, 12.0, 1.2, _t("after the last key block:\nO_i = acc / ℓ,   lse_i = m + log ℓ"),
         face=SELF_COLOUR, fontsize=9)
    _arrow(ax, (bx + 6.0, 12.3 - 1.35 * 3 - 0.48), (bx + 6.0, 6.5))
    ax.text(bx, 4.4, _t("kept per query: m (running max), ℓ (running sum), acc (d numbers)"), fontsize=9)
    ax.text(bx, 3.5, _t("never made: the [Lq, Lk] matrix of scores or of probabilities"), fontsize=9, color="#a50f15")
    ax.text(bx, 2.6, _t("causal, aligned to the bottom right: query i sees keys j ≤ i + (Lk − Lq)"), fontsize=9)
    return fig


KV_CONFIGS = {   # lesson 12's table: (layers, query heads, key-value heads, d_head), as published
    "LLaMA-2-7B": (32, 32, 32, 128),
    "LLaMA-2-70B": (80, 64, 8, 128),
    "LLaMA-3-8B": (32, 32, 8, 128),
    "Mistral-7B": (32, 32, 8, 128),
}


def kv_cache_bytes() -> plt.Figure:
    """Lesson 12: key-value cache bytes per token in 16 bits, 2 · layers · kv heads · d_head · 2, with
    every head its own (MHA), as published, and with one key-value head (MQA)."""
    import numpy as np

    names = list(KV_CONFIGS)
    kib = {kind: [2 * layers * n * d_head * 2 / 1024 for layers, heads, kv, d_head in KV_CONFIGS.values()
                  for n in [{"MHA": heads, "GQA": kv, "MQA": 1}[kind]]] for kind in ("MHA", "GQA", "MQA")}
    labels = {"MHA": _t("every query head its own key–value head (MHA)"),
              "GQA": _t("as published"),
              "MQA": _t("one key–value head (MQA)")}
    fig, ax = plt.subplots(figsize=(9.5, 4.2))
    x = np.arange(len(names))
    for n, (kind, colour) in enumerate(zip(("MHA", "GQA", "MQA"), (GREY, BLUE, GREEN), strict=True)):
        bars = ax.bar(x + (n - 1) * 0.27, kib[kind], 0.25, color=colour, label=labels[kind])
        for bar, value in zip(bars, kib[kind], strict=True):
            ax.text(bar.get_x() + bar.get_width() / 2, value * 1.08, f"{value:,.0f}", ha="center", fontsize=8)
    ax.set_yscale("log")
    ax.set_ylim(8, 40000)
    ax.set_xticks(x, [f"{name}\n" + _t("{} layers, {} heads, {} kv").format(*KV_CONFIGS[name][:3])
                      for name in names], fontsize=9)
    ax.set_ylabel(_t("cache per token (KiB, 16-bit)"))
    ax.set_title(_t("key–value cache per token: 2 · layers · key–value heads · d_head · 2 bytes"), fontsize=10)
    ax.legend(fontsize=8, loc="upper right")
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    return fig


@dataclass
class NotebookFigures:
    """Figures drawn by cells of a reference notebook: {cell id: [file name or None per figure]}."""
    cells: dict[str, list[str | None]]
    skip: set[str] = field(default_factory=set)          # cells not needed (slow, or after)
    replace: dict[str, str] = field(default_factory=dict)  # cell id -> code run instead
    env: dict[str, str] = field(default_factory=dict)
    globals: dict[str, object] = field(default_factory=dict)  # names the cells may use


def _notebook_cells(lesson: str, edition: str = "en") -> list[dict]:
    path = catalogue.get(lesson).solution(edition)
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    for cell in cells:
        cell["source"] = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
    return cells


def _is_test_cell(cell: dict) -> bool:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return bool(meta.get("grade")) and not meta.get("solution")


def run_notebook_figures(lesson: str, spec: NotebookFigures, edition: str = "en") -> dict[str, plt.Figure]:
    """Execute the reference notebook's code cells in order, up to its last figure cell,
    and collect the figures that the cells of ``spec.cells`` draw (in the notebook of
    ``edition``: the Chinese edition's cells carry its Chinese labels, with the same ids)."""
    import numpy as np
    import torch

    wanted = dict(spec.cells)
    figures: dict[str, plt.Figure] = {}
    ns: dict = {"__name__": f"figures_{lesson}", **spec.globals}
    saved_env = {k: os.environ.get(k) for k in spec.env}
    os.environ.update(spec.env)
    show = plt.show
    plt.show = lambda *a, **k: None                       # keep the figures open
    try:
        for cell in _notebook_cells(lesson, edition):
            if not wanted:
                break
            cid = cell.get("id")
            if cell["cell_type"] != "code" or _is_test_cell(cell) or cid in spec.skip:
                continue
            source = spec.replace.get(cid, _MAGIC.sub("", cell["source"]))
            plt.close("all")
            torch.manual_seed(0)
            np.random.seed(0)
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                exec(compile(source, f"<{lesson} cell {cid}>", "exec", dont_inherit=True), ns)  # not this file's __future__
            if cid in wanted:
                names = wanted.pop(cid)
                numbers = plt.get_fignums()
                if len(numbers) != len(names):
                    raise RuntimeError(f"{lesson} cell {cid} drew {len(numbers)} figures, expected {len(names)}")
                for number, name in zip(numbers, names, strict=True):
                    if name:
                        figures[name] = plt.figure(number)
        if wanted:
            raise RuntimeError(f"{lesson}: no cells {sorted(wanted)}")
    finally:
        plt.show = show
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return figures


_LOAD_09 = """
import torch
model, CFG, SRC_VOCAB, TGT_VOCAB = load_checkpoint(CHECKPOINT_PATH, DEVICE)
history = History(**torch.load(CHECKPOINT_PATH, map_location="cpu")["history"])
"""

# The preset's target (99.5% valid exact match) decides when the reference run stops, not
# the 5-minute budget, which a busy machine may exhaust first.
_UNTIMED = 'import dataclasses\nCFG = dataclasses.replace(CFG, max_minutes=60.0)\n'

_SAVE_09 = """
import torch
save_checkpoint(CHECKPOINT_PATH, model, CFG, SRC_VOCAB, TGT_VOCAB, history.steps)
torch.save(dict(torch.load(CHECKPOINT_PATH), history=asdict(history)), CHECKPOINT_PATH)
"""

_LOAD_10 = """
model, CFG, VOCAB, history = load_checkpoint(CHECKPOINT_PATH, DEVICE)
"""

_SAVE_10 = """
save_checkpoint(CHECKPOINT_PATH, model, CFG, VOCAB, history)
"""

NOTEBOOK_FIGURES: dict[str, NotebookFigures] = {
    "01_attention_by_hand": NotebookFigures({"9b3838d4": ["youxiu_weights"]}),
    "02_split_heads": NotebookFigures({"7dc54cae": ["heads", "reshape_only"]}),
    "03_scaled_dot_product_attention": NotebookFigures({"eb0dfdab": ["two_sentences"]}),
    "04_multi_head_attention": NotebookFigures({"017f8094": ["heads"]}),
    "05_layer_norm": NotebookFigures({"77bf8a84": ["ln_vs_bn"], "7c0c6c91": ["bn_depends_on_batch"]}),
    "06_gelu": NotebookFigures({"cb0882b8": ["gelu"], "5e08259f": ["gelu_grad"]}),
    "07_positional_encoding": NotebookFigures({"21b988f6": ["positional_encoding", "pe_columns"],
                                               "d8c0e465": ["pe_layouts"], "a436e149": ["pe_dot_products"],
                                               "6f35dac7": ["embedding_scales"]}),
    "09_training": NotebookFigures(
        {"4cebaaad": ["noam"], "44831423": ["training"], "751bbe3d": ["alignments"],
         "a9c0f003": ["attention_maps"]},
        skip={"5e54d959", "7ad18c72", "cache0009"},   # the test split's scoring and mistakes, the decoding timing
        replace={"f3a9a22f": _LOAD_09},
        env={"COURSE_PRESET": "cpu", "COURSE_THREADS": "1"},
        globals={"CHECKPOINT_PATH": str(CHECKPOINT)}),
    "10_decoder_only": NotebookFigures(
        {"d10c00a3": ["training"], "d10c00a8": ["attention"]},
        skip={"d10c0092", "d10c00a5", "d10c00a6"},   # the cache and SDPA check, the test split's scoring and mistakes
        replace={"d10c00a1": _LOAD_10},
        env={"COURSE_PRESET": "cpu", "COURSE_THREADS": "1"},
        globals={"CHECKPOINT_PATH": str(CHECKPOINT_10)}),
}

DIAGRAMS: dict[str, dict[str, Callable[[], plt.Figure]]] = {
    "01_attention_by_hand": {"soft_lookup": soft_lookup},
    "03_scaled_dot_product_attention": {"masks": masks},
    "04_multi_head_attention": {"multi_head_attention": multi_head_attention},
    "08_transformer": {"transformer": transformer, "model_masks": model_masks, "families": families},
    "10_decoder_only": {"blocks": blocks, "rope": rope, "rope_relative": rope_relative},
    "11_generation": {"kv_cache": kv_cache, "filtering": filtering, "beam_tree": beam_tree},
    "12_attention_at_scale": {"tiling": tiling, "kv_cache_bytes": kv_cache_bytes},
}


def retrain_09() -> None:
    """Train lesson 09's model with its cpu preset (the notebook's own training cell, one
    thread) and keep it in CHECKPOINT for the figures."""
    training = next(c["source"] for c in _notebook_cells("09_training") if c.get("id") == "f3a9a22f")
    spec = NOTEBOOK_FIGURES["09_training"]
    run_notebook_figures("09_training", NotebookFigures(
        {"f3a9a22f": []}, skip=spec.skip, replace={"f3a9a22f": _UNTIMED + training + "\n" + _SAVE_09},
        env=spec.env, globals=spec.globals))


def retrain_10() -> None:
    """Train lesson 10's model with its cpu preset (the notebook's own training cell, one
    thread) and keep it in CHECKPOINT_10 for the figures."""
    training = next(c["source"] for c in _notebook_cells("10_decoder_only") if c.get("id") == "d10c00a1")
    spec = NOTEBOOK_FIGURES["10_decoder_only"]
    run_notebook_figures("10_decoder_only", NotebookFigures(
        {"d10c00a1": []}, skip=spec.skip, replace={"d10c00a1": _UNTIMED + training + "\n" + _SAVE_10},
        env=spec.env, globals=spec.globals))


RETRAIN: dict[str, Callable[[], None]] = {"09": retrain_09, "10": retrain_10}


def make(lessons: list[str] | None = None, out: Path | None = None) -> list[Path]:
    """Write the figures of ``lessons`` (default all), in every edition the lesson has
    (``<name>.png``, ``<name>.zh.png``), and return their paths."""
    use_cjk_font()
    plt.rcParams.update({"figure.dpi": DPI, "savefig.dpi": DPI, "svg.hashsalt": "course"})
    written = []
    chosen = sorted(set(NOTEBOOK_FIGURES) | set(DIAGRAMS))
    if lessons:
        chosen = [lesson for lesson in chosen if lesson[:2] in {x[:2] for x in lessons}]
    for lesson in chosen:
        for edition in figure_editions(lesson):
            _LANG.clear()
            _LANG["edition"] = edition
            figures = {name: draw() for name, draw in DIAGRAMS.get(lesson, {}).items()}
            if _LANG.get("missing"):
                raise MissingWords(f"{lesson}: add to TEXT_ZH in docs/figures/make_figures.py: "
                                   f"{sorted(set(_LANG['missing']))}")
            _LANG["edition"] = "en"
            drawn = set(figures)
            if lesson in NOTEBOOK_FIGURES:
                figures.update(run_notebook_figures(lesson, NOTEBOOK_FIGURES[lesson], edition))
            folder = (out or ROOT / "solutions") / lesson / "figures"
            folder.mkdir(parents=True, exist_ok=True)
            for name, fig in figures.items():
                path = folder / f"{name}{catalogue.EDITIONS[edition]}.png"
                # a notebook's figure as Jupyter shows it: cropped to what is drawn, axis
                # labels included (the figure's own size cut them off)
                tight = {} if name in drawn else {"bbox_inches": "tight", "pad_inches": 0.1}
                fig.savefig(path, dpi=DPI, metadata={"Software": None}, **tight)
                written.append(path)
            plt.close("all")
    return written


def figure_editions(lesson: str) -> list[str]:
    """The editions of ``lesson`` whose reference notebook exists (none while a lesson being
    written is not yet in the catalogue)."""
    try:
        entry = catalogue.get(lesson)
    except KeyError:
        return []
    return [edition for edition in entry.editions if entry.solution(edition).is_file()]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lessons", help="comma-separated lesson numbers, e.g. 03,08 (default: all)")
    parser.add_argument("--out", type=Path, help="write into OUT/<lesson>/figures instead of solutions/")
    parser.add_argument("--retrain", action="store_true",
                        help="retrain the chosen lessons' models first (09's and 10's)")
    args = parser.parse_args(argv)
    lessons = args.lessons.split(",") if args.lessons else None
    if args.retrain:
        for lesson, retrain in RETRAIN.items():
            if lessons is None or lesson in lessons:
                retrain()
    for path in make(lessons, args.out):
        print(path.relative_to(args.out or ROOT) if args.out else path.relative_to(ROOT))


if __name__ == "__main__":
    main()
