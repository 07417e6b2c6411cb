"""Make every figure the lessons show before anything is run, from the reference code.

    python docs/figures/make_figures.py                 # all lessons
    python docs/figures/make_figures.py --lessons 03,08 # some
    python docs/figures/make_figures.py --retrain       # also retrain lesson 09's model

Each figure is written to ``solutions/<lesson>/figures/<name>.png``
``nbgrader
generate_assignment`` copies that folder into ``lessons/<lesson>/`` (and a release bundle
carries it), and the lessons' markdown shows it as ``![…](figures/<name>.png)``. Two kinds:

- **diagrams** drawn here (attention as a soft lookup, the masks, the Transformer, the
  three model families), from the reference masks of ``coursekit.reference``;
- **"what you should see"**: a lesson's own plotting cell, run on the reference solution
  (the notebook's setup, provided, solution and earlier demo cells are executed first, in
  order, exactly as a student runs them), its figure saved. So an image cannot drift from
  the code that draws it. Lesson 09's come from the model trained with its ``cpu`` preset,
  kept in ``docs/figures/numerals_cpu.pt`` (``--retrain`` trains it again, a few minutes).

Output is deterministic for pinned matplotlib, font and torch (no timestamps in the PNG);
``tests/test_figures.py`` regenerates everything and compares the pixels with a tolerance.
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

from coursekit.fonts import use_cjk_font  # noqa: E402

DPI = 90
CHECKPOINT = Path(__file__).resolve().parent / "numerals_cpu.pt"
_MAGIC = re.compile(r"^\s*[%!].*$", re.M)

# ----------------------------------------------------------------------------- diagrams

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
    hard.set_title("a dictionary: the one equal key", fontsize=11)
    _box(hard, 1.4, 3.5, 1.8, 0.8, "query\n秀", face="#eeeeee")
    for y, key, value, hit in [(5.2, "优", "v₁", False), (3.5, "秀", "v₂", True), (1.8, "好", "v₃", False)]:
        _box(hard, 5.0, y, 1.4, 0.8, f"key {key}", face="#ffe9a8" if hit else "white")
        _box(hard, 7.8, y, 1.4, 0.8, f"value {value}", face="#ffe9a8" if hit else "white")
        _arrow(hard, (5.7, y), (7.1, y), colour=GREY)
        _arrow(hard, (2.3, 3.5), (4.3, y), colour="k" if hit else "#dddddd", lw=1.6 if hit else 0.8)
    hard.text(5.0, 0.5, "exact match or nothing (KeyError)", ha="center", fontsize=9, color=GREY)

    soft.set_title("attention: compare with every key, average the values", fontsize=11)
    _box(soft, 0.9, 3.5, 1.4, 0.8, "query q", face="#eeeeee")
    weights = [0.15, 0.70, 0.15]
    for y, (i, w) in zip((5.2, 3.5, 1.8), enumerate(weights), strict=True):
        _box(soft, 3.4, y, 1.3, 0.8, f"key k{'₁₂₃'[i]}")
        _arrow(soft, (1.6, 3.5), (2.75, y), colour=GREY)
        soft.text(4.2, y + 0.45, f"score q·k{'₁₂₃'[i]}", fontsize=8, color=GREY)
        soft.add_patch(plt.Rectangle((5.0, y - 0.3), 1.8 * w, 0.6, color=BLUE))
        soft.text(5.05 + 1.8 * w, y, f" {w:.2f}", va="center", fontsize=9)
        _box(soft, 7.7, y, 1.2, 0.8, f"value v{'₁₂₃'[i]}")
    soft.text(5.9, 6.25, "softmax weights", ha="center", fontsize=9)
    _box(soft, 9.3, 3.5, 1.2, 1.6, "0.15 v₁\n+ 0.70 v₂\n+ 0.15 v₃", face="#d9ead3", fontsize=8)
    for y in (5.2, 3.5, 1.8):
        _arrow(soft, (8.3, y), (8.7, 3.5), colour=GREY)
    soft.text(5.5, 0.5, "weights ≥ 0, summing to 1: a weighted average (attention pooling, 注意力汇聚)",
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
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    ax.set_title(title, fontsize=10)


def masks() -> plt.Figure:
    """Lesson 03: the padding, causal and combined masks of one padded sentence."""
    import torch

    from coursekit.reference.lesson03 import causal_mask, padding_mask

    chars = ["这", "很", "优", "秀", "pad", "pad"]
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

    src_labels = ["2", "0", "eos", "pad", "pad"]
    tgt_labels = ["bos", "二", "十", "eos", "pad", "pad"]
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
    axes[2].set_xlabel("key (encoder output)")
    axes[2].set_ylabel("query (decoder)")
    fig.tight_layout()
    return fig


def _sublayer(ax, x, y, w, text, face):
    _box(ax, x, y, w, 0.62, text, face=face, fontsize=9)
    _box(ax, x, y + 0.78, w, 0.42, "add & norm", face="#f3f3d0", fontsize=8)


def transformer() -> plt.Figure:
    """Lesson 08: the encoder-decoder Transformer, its three attentions and their masks."""
    fig, ax = plt.subplots(figsize=(11, 8.6))
    ax.set_xlim(0, 11)
    ax.set_ylim(0, 11.2)
    ax.axis("off")
    ex, dx, w = 2.9, 7.7, 2.9
    # inputs
    _box(ax, ex, 0.45, w, 0.5, "src tokens [B, Ls]  (digits + eos)", fontsize=8)
    _box(ax, dx, 0.45, w, 0.5, "tgt tokens [B, Lt]  (bos + reading)", fontsize=8)
    for x in (ex, dx):
        _box(ax, x, 1.35, w, 0.55, "TokenEmbedding × √D\n+ PositionalEncoding", face="#eadcf0", fontsize=8)
        _arrow(ax, (x, 0.7), (x, 1.07))
    # encoder stack
    ax.add_patch(FancyBboxPatch((ex - w / 2 - 0.35, 2.15), w + 0.7, 3.45, boxstyle="round,pad=0.02",
                                facecolor="none", edgecolor=GREY, ls="--"))
    ax.text(ex - w / 2 - 0.45, 3.9, "N ×", ha="right", fontsize=11)
    _sublayer(ax, ex, 2.75, w, "multi-head self-attention", SELF_COLOUR)
    _sublayer(ax, ex, 4.45, w, "feed-forward (FFN)", "#e8e8e8")
    _arrow(ax, (ex, 1.63), (ex, 2.44))
    _arrow(ax, (ex, 3.74), (ex, 4.14))
    ax.text(ex, 6.1, "memory [B, Ls, D]", ha="center", fontsize=9)
    _arrow(ax, (ex, 5.44), (ex, 5.95))
    ax.text(ex + w / 2 + 0.1, 2.75, "mask:\npadding_mask(src)", va="center", fontsize=8, color=BLUE)
    # decoder stack
    ax.add_patch(FancyBboxPatch((dx - w / 2 - 0.35, 2.15), w + 0.7, 5.15, boxstyle="round,pad=0.02",
                                facecolor="none", edgecolor=GREY, ls="--"))
    ax.text(dx + w / 2 + 0.45, 6.6, "× N", ha="left", fontsize=11)
    _sublayer(ax, dx, 2.75, w, "masked multi-head\nself-attention", MASKED_COLOUR)
    _sublayer(ax, dx, 4.45, w, "cross-attention\nQ: decoder   K, V: memory", CROSS_COLOUR)
    _sublayer(ax, dx, 6.15, w, "feed-forward (FFN)", "#e8e8e8")
    _arrow(ax, (dx, 1.63), (dx, 2.44))
    _arrow(ax, (dx, 3.74), (dx, 4.14))
    _arrow(ax, (dx, 5.44), (dx, 5.84))
    ax.text(dx + w / 2 + 0.1, 2.75, "mask: causal_mask\n& padding_mask(tgt)", va="center", fontsize=8,
            color=ORANGE)
    _arrow(ax, (ex + 0.9, 6.05), (dx - w / 2, 4.45), colour=GREEN, lw=1.6, rad=-0.25)
    ax.text(5.3, 5.95, "keys, values", fontsize=8, color=GREEN)
    ax.text(dx + w / 2 + 0.1, 4.45, "mask:\npadding_mask(src)", va="center", fontsize=8, color=GREEN)
    # output
    _box(ax, dx, 8.0, w, 0.5, "generator: Linear(D, V)", face="#eadcf0", fontsize=9)
    _box(ax, dx, 8.85, w, 0.5, "logits [B, Lt, V] → softmax", fontsize=9)
    _arrow(ax, (dx, 7.14), (dx, 7.75))
    _arrow(ax, (dx, 8.25), (dx, 8.6))
    # legend
    for i, (colour, text) in enumerate([(SELF_COLOUR, "encoder self-attention: every source token sees every real source token"),
                                        (MASKED_COLOUR, "decoder self-attention: each target position sees itself and earlier ones"),
                                        (CROSS_COLOUR, "cross-attention (编码器－解码器注意力): target queries, source keys and values")]):
        ax.add_patch(plt.Rectangle((0.3, 10.55 - 0.45 * i), 0.35, 0.3, facecolor=colour, edgecolor="k", lw=0.5))
        ax.text(0.8, 10.7 - 0.45 * i, text, va="center", fontsize=9)
    ax.text(0.3, 9.2, "post-LN (the paper): each sub-layer is x ← LayerNorm(x + Sublayer(x));\n"
                      "pre-LN (norm_first=True): x ← x + Sublayer(LayerNorm(x)), plus a final norm per stack",
            fontsize=8, color="#444444")
    fig.tight_layout()
    return fig


def _stack(ax, x, y, w, layers, title, faces):
    top = y
    for text, face in reversed(layers):
        _box(ax, x, top, w, 0.55, text, face=face, fontsize=8)
        top += 0.7
    ax.text(x, top + 0.05, title, ha="center", fontsize=12)
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
    ax.text(2.1, 3.3, "mask: padding\nonly", fontsize=8)
    ax.text(1.9, 0.15, "masked language model (掩蔽语言模型):\nguess the [MASK]ed tokens", ha="center", fontsize=8)
    _stack(ax, 6.0, 0.8, 2.9, [("encoder: self-attention", SELF_COLOUR), ("decoder: masked self + cross", CROSS_COLOUR)],
           "encoder–decoder (lessons 08–09)", None)
    ax.text(6.0, 0.15, "sequence to sequence: translation,\nsummarisation (Transformer, T5, BART)", ha="center", fontsize=8)
    _stack(ax, 10.1, 0.8, 2.6, [("causal self-attention", MASKED_COLOUR), ("feed-forward", "#e8e8e8")],
           "GPT: decoder only", None)
    _mini_mask(ax, 9.5, 3.55, "causal")
    ax.text(10.3, 3.3, "mask: causal\n(no cross-attention)", fontsize=8)
    ax.text(10.1, 0.15, "language model:\npredict the next token", ha="center", fontsize=8)
    _arrow(ax, (4.45, 1.5), (3.3, 1.5), colour=GREY, lw=1.5)
    _arrow(ax, (7.55, 1.5), (8.7, 1.5), colour=GREY, lw=1.5)
    ax.text(3.9, 1.7, "keep the\nencoder", ha="center", fontsize=8, color=GREY)
    ax.text(8.1, 1.7, "keep the\ndecoder", ha="center", fontsize=8, color=GREY)
    fig.tight_layout()
    return fig


# ------------------------------------------------------------ "what you should see"

@dataclass
class NotebookFigures:
    """Figures drawn by cells of a reference notebook: {cell id: [file name or None per figure]}."""
    cells: dict[str, list[str | None]]
    skip: set[str] = field(default_factory=set)          # cells not needed (slow, or after)
    replace: dict[str, str] = field(default_factory=dict)  # cell id -> code run instead
    env: dict[str, str] = field(default_factory=dict)
    globals: dict[str, object] = field(default_factory=dict)  # names the cells may use


def _notebook_cells(lesson: str) -> list[dict]:
    path = ROOT / "solutions" / lesson / f"{lesson}.ipynb"
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    for cell in cells:
        cell["source"] = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
    return cells


def _is_test_cell(cell: dict) -> bool:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return bool(meta.get("grade")) and not meta.get("solution")


def run_notebook_figures(lesson: str, spec: NotebookFigures) -> dict[str, plt.Figure]:
    """Execute the reference notebook's code cells in order, up to its last figure cell,
    and collect the figures that the cells of ``spec.cells`` draw."""
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
        for cell in _notebook_cells(lesson):
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
_UNTIMED = 'CFG = replace(CFG, max_minutes=60.0)\n'

_SAVE_09 = """
import torch
save_checkpoint(CHECKPOINT_PATH, model, CFG, SRC_VOCAB, TGT_VOCAB, history.steps)
torch.save(dict(torch.load(CHECKPOINT_PATH), history=asdict(history)), CHECKPOINT_PATH)
"""

NOTEBOOK_FIGURES: dict[str, NotebookFigures] = {
    "01_attention_by_hand": NotebookFigures({"9b3838d4": ["youxiu_weights"]}),
    "02_split_heads": NotebookFigures({"7dc54cae": ["heads"]}),
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
        skip={"5e08259f", "7ad18c72", "cache0009"},
        replace={"f3a9a22f": _LOAD_09},
        env={"COURSE_PRESET": "cpu", "COURSE_THREADS": "1"},
        globals={"CHECKPOINT_PATH": str(CHECKPOINT)}),
}

DIAGRAMS: dict[str, dict[str, Callable[[], plt.Figure]]] = {
    "01_attention_by_hand": {"soft_lookup": soft_lookup},
    "03_scaled_dot_product_attention": {"masks": masks},
    "08_transformer": {"transformer": transformer, "model_masks": model_masks, "families": families},
}


def retrain_09() -> None:
    """Train lesson 09's model with its cpu preset (the notebook's own training cell, one
    thread) and keep it in CHECKPOINT for the figures."""
    training = next(c["source"] for c in _notebook_cells("09_training") if c.get("id") == "f3a9a22f")
    spec = NOTEBOOK_FIGURES["09_training"]
    run_notebook_figures("09_training", NotebookFigures(
        {"f3a9a22f": []}, skip=spec.skip, replace={"f3a9a22f": _UNTIMED + training + "\n" + _SAVE_09},
        env=spec.env, globals=spec.globals))


def make(lessons: list[str] | None = None, out: Path | None = None) -> list[Path]:
    """Write the figures of ``lessons`` (default all) and return their paths."""
    use_cjk_font()
    plt.rcParams.update({"figure.dpi": DPI, "savefig.dpi": DPI, "svg.hashsalt": "course"})
    written = []
    chosen = sorted(set(NOTEBOOK_FIGURES) | set(DIAGRAMS))
    if lessons:
        chosen = [lesson for lesson in chosen if lesson[:2] in {x[:2] for x in lessons}]
    for lesson in chosen:
        figures = {name: draw() for name, draw in DIAGRAMS.get(lesson, {}).items()}
        if lesson in NOTEBOOK_FIGURES:
            figures.update(run_notebook_figures(lesson, NOTEBOOK_FIGURES[lesson]))
        folder = (out or ROOT / "solutions") / lesson / "figures"
        folder.mkdir(parents=True, exist_ok=True)
        for name, fig in figures.items():
            path = folder / f"{name}.png"
            fig.savefig(path, dpi=DPI, metadata={"Software": None})
            written.append(path)
        plt.close("all")
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lessons", help="comma-separated lesson numbers, e.g. 03,08 (default: all)")
    parser.add_argument("--out", type=Path, help="write into OUT/<lesson>/figures instead of solutions/")
    parser.add_argument("--retrain", action="store_true", help="retrain lesson 09's model first")
    args = parser.parse_args(argv)
    if args.retrain:
        retrain_09()
    for path in make(args.lessons.split(",") if args.lessons else None, args.out):
        print(path.relative_to(args.out or ROOT) if args.out else path.relative_to(ROOT))


if __name__ == "__main__":
    main()
