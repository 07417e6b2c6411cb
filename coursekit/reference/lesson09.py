"""Reference code of lesson 09_training, GENERATED from solutions/09_training/09_training.ipynb
by `python -m coursekit.export`. Do not edit."""
# ruff: noqa

import math
import os
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from tqdm.auto import tqdm

from coursekit.data import (CharVocab, accuracy_by_length, dataset_dir, load_numerals, make_batches,
                            oversample_by_length)
# The model of lesson 08, generated from its reference notebook (coursekit.export).
from coursekit.reference.lesson08 import Transformer, greedy_decode


DIRECTIONS = ("digits2zh", "zh2digits")


@dataclass(frozen=True)
class Preset:
    """Everything a training run is told: model sizes, optimisation, when to stop. The
    defaults are the `cpu` preset's."""

    name: str
    direction: str = "digits2zh"     # "digits2zh" (1234 → 一千二百三十四) or "zh2digits"
    # the model of lesson 08 (as many decoder layers as encoder layers)
    d_model: int = 64
    n_head: int = 4
    layers: int = 2
    d_ff: int = 256
    dropout: float = 0.0
    # optimisation: Adam, learning rate lr_factor * noam_lr(step, d_model, warmup)
    batch_size: int = 128
    lr_factor: float = 0.15
    warmup: int = 150
    smoothing: float = 0.0
    oversample: int = 2000           # repeat each number length up to this many pairs (0: off)
    batch_by_length: bool = False    # batch numbers of similar length together (section 6)
    # when to stop: valid exact match >= target, or max_steps, or max_minutes of training
    target: float = 0.995
    max_steps: int = 20_000
    max_minutes: float = 5.0
    eval_every: int = 50             # steps between two validations
    eval_examples: int | None = None  # valid pairs scored each time (None: all 2,099)
    test_examples: int | None = None  # test pairs scored at the end (None: all 5,247)

    def __post_init__(self) -> None:
        if self.direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {DIRECTIONS}, got {self.direction!r}")
        if self.d_model % self.n_head:
            raise ValueError(f"d_model = {self.d_model} is not divisible by n_head = {self.n_head}")


PRESETS = {
    "smoke": Preset("smoke", d_model=32, n_head=2, layers=1, d_ff=64, batch_size=64, lr_factor=2.0,
                    warmup=50, smoothing=0.1, oversample=100, target=1.01, max_steps=60,
                    max_minutes=0.25, eval_every=30, eval_examples=100, test_examples=200),
    "cpu": Preset("cpu"),
    "gpu": Preset("gpu", d_model=256, n_head=8, layers=3, d_ff=1024, dropout=0.1, batch_size=512,
                  lr_factor=0.5, warmup=1000, smoothing=0.1, target=0.998, max_minutes=10.0,
                  eval_every=100),
}


def load_preset(name: str | None = None, direction: str | None = None, **changes) -> Preset:
    """The preset `name` (else $COURSE_PRESET, else smoke when grading or in CI, else gpu
    with CUDA, else cpu) for `direction` (else $COURSE_DIRECTION, else digits2zh), with
    any field changed by keyword: load_preset("cpu", batch_size=64)."""
    name = name or os.environ.get("COURSE_PRESET") or None
    if name is None:
        grading = (os.environ.get("COURSE_GRADING") == "1" or os.environ.get("CI", "").lower() == "true"
                   or "autograded" in Path.cwd().parts)
        name = "smoke" if grading else "gpu" if torch.cuda.is_available() else "cpu"
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
    direction = direction or os.environ.get("COURSE_DIRECTION") or "digits2zh"
    return replace(PRESETS[name], direction=direction, **changes)


def choose_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def choose_threads() -> int:
    """CPU threads for training: $COURSE_THREADS, else the cores that are free now (CPU
    count minus the 1-minute load average, at least 1). On an idle 2-core machine two
    threads train this model about 1.5x faster than one; on a busy one, OpenMP threads
    waiting for a core made two threads 15-25x SLOWER than one (benchmarks/README.md)."""
    if os.environ.get("COURSE_THREADS"):
        return max(1, int(os.environ["COURSE_THREADS"]))
    cores = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # not available on Windows
        return 1
    return max(1, min(cores, round(cores - load)))


def noam_lr(step: int, d_model: int, warmup: int) -> float:
    """d_model^-0.5 * min(step^-0.5, step * warmup^-1.5); step counts from 1."""
    return d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def label_smoothed_nll(logits: torch.Tensor, target: torch.Tensor, smoothing: float,
                       pad_id: int) -> torch.Tensor:
    """Mean label-smoothed cross-entropy over the tokens of target that are not pad_id."""
    V = logits.size(-1)
    logp = torch.log_softmax(logits.reshape(-1, V).float(), dim=-1)
    target = target.reshape(-1)
    keep = target != pad_id
    logp, target = logp[keep], target[keep]
    nll = -logp.gather(1, target[:, None]).squeeze(1)
    uniform = -logp.mean(dim=-1)
    return ((1.0 - smoothing) * nll + smoothing * uniform).mean()


def train_step(model: nn.Module, batch, optimizer: torch.optim.Optimizer, scheduler=None,
               smoothing: float = 0.0) -> float:
    """One optimisation step on batch = (src, tgt); returns the loss before the update."""
    device = next(model.parameters()).device
    src, tgt = (t.to(device, non_blocking=True) for t in batch)
    model.train()
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
        logits = model(src, tgt[:, :-1])
    loss = label_smoothed_nll(logits.float(), tgt[:, 1:], smoothing, model.pad_id)
    loss.backward()
    optimizer.step()
    if scheduler is not None:
        scheduler.step()
    return loss.item()


class CachedSelfAttention(nn.Module):
    """A decoder layer's self-attention for decoding one position at a time: it keeps the
    inputs of the positions decoded so far, and the newest position attends to all of them."""

    def __init__(self, attn: nn.Module):
        super().__init__()
        self.attn, self.past = attn, None

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                mask: torch.Tensor | None = None) -> torch.Tensor:
        # query = key = value: the newest position [B, 1, D]; it may see every position so
        # far (the causal mask allows no more), except <pad>s (mask [B, 1, 1, t]).
        self.past = key if self.past is None else torch.cat([self.past, key], dim=1)  # [B, t, D]
        return self.attn(query, self.past, self.past, mask)


@torch.no_grad()
def greedy_decode_cached(model: Transformer, src: torch.Tensor, max_len: int, bos_id: int,
                         eos_id: int) -> torch.Tensor:
    """greedy_decode of lesson 08, the same tokens, but each step runs the decoder on the
    newest position only: the layers' outputs at earlier positions cannot change (causal
    mask), so they are not computed again; the self-attentions keep their inputs instead."""
    was_training = model.training
    model.eval()
    src_mask = (src != model.pad_id)[:, None, None, :]                  # [B, 1, 1, Ls]
    memory = model.encode(src, src_mask)
    ys = torch.full((src.size(0), 1), bos_id, dtype=torch.long, device=src.device)
    done = torch.zeros(src.size(0), dtype=torch.bool, device=src.device)
    attentions = [layer.self_attn for layer in model.decoder_layers]
    try:
        for layer in model.decoder_layers:
            layer.self_attn = CachedSelfAttention(layer.self_attn)
        while ys.size(1) < max_len and not done.all():
            x = model.pos_enc(model.tgt_embed(ys))[:, -1:]          # the newest position [B, 1, D]
            keep = (ys != model.pad_id)[:, None, None, :]           # [B, 1, 1, t]
            for layer in model.decoder_layers:
                x = layer(x, memory, tgt_mask=keep, memory_mask=src_mask)
            if model.norm_first:
                x = model.decoder_norm(x)
            next_token = model.generator(x[:, -1]).argmax(-1).masked_fill(done, model.pad_id)
            ys = torch.cat([ys, next_token[:, None]], dim=1)
            done = done | (next_token == eos_id)
    finally:
        for layer, attn in zip(model.decoder_layers, attentions):
            layer.self_attn = attn
        model.train(was_training)
    return ys


@torch.no_grad()
def translate(model: Transformer, sources: list[str], src_vocab: CharVocab, tgt_vocab: CharVocab,
              batch_size: int = 1000, max_len: int = 20) -> list[str]:
    """Greedy translations of the source strings, decoded shortest first (a batch stops
    as soon as its longest translation has ended) with greedy_decode_cached."""
    device = next(model.parameters()).device
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    out = [""] * len(sources)
    for start in range(0, len(order), batch_size):
        rows = order[start:start + batch_size]
        chunk = [src_vocab.encode(sources[i], add_eos=True) for i in rows]
        width = max(map(len, chunk))
        src = torch.tensor([c + [src_vocab.pad_id] * (width - len(c)) for c in chunk], device=device)
        ys = greedy_decode_cached(model, src, max_len, tgt_vocab.bos_id, tgt_vocab.eos_id)
        for i, row in zip(rows, ys.tolist()):
            out[i] = tgt_vocab.decode(row)
    return out


def exact_match(model: Transformer, pairs: list[tuple[str, str]], src_vocab: CharVocab,
                tgt_vocab: CharVocab) -> tuple[float, list[str]]:
    """Fraction of pairs translated exactly, and the translations."""
    predictions = translate(model, [s for s, _ in pairs], src_vocab, tgt_vocab)
    return sum(p == t for p, (_, t) in zip(predictions, pairs)) / max(1, len(pairs)), predictions


def digits_of(pair: tuple[str, str], direction: str) -> str:
    """The number, in digits, of a (source, target) pair of the numerals task."""
    return pair[0] if direction == "digits2zh" else pair[1]


def training_set(pairs: list[tuple[str, str]], cfg: Preset) -> list[tuple[str, str]]:
    """The training pairs, with every digit count repeated up to cfg.oversample pairs."""
    if not cfg.oversample:
        return list(pairs)
    return oversample_by_length(pairs, cfg.oversample, key=lambda pair: len(digits_of(pair, cfg.direction)))


def build_model(cfg: Preset, src_vocab: CharVocab, tgt_vocab: CharVocab) -> Transformer:
    return Transformer(len(src_vocab), len(tgt_vocab), d_model=cfg.d_model, n_head=cfg.n_head,
                       num_encoder_layers=cfg.layers, num_decoder_layers=cfg.layers,
                       d_ff=cfg.d_ff, dropout=cfg.dropout, max_len=64, pad_id=src_vocab.pad_id)


def make_optimizer(model: nn.Module, cfg: Preset):
    """Adam with the paper's betas and eps, scheduled by noam_lr (times cfg.lr_factor)."""
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: cfg.lr_factor * noam_lr(s + 1, cfg.d_model, cfg.warmup))
    return optimizer, scheduler


def save_checkpoint(path: str | Path, model: Transformer, cfg: Preset, src_vocab: CharVocab,
                    tgt_vocab: CharVocab, step: int) -> None:
    """The weights and everything needed to rebuild the model, as plain types."""
    torch.save({"model": model.state_dict(), "config": asdict(cfg), "step": step,
                "src_vocab": src_vocab.to_dict(), "tgt_vocab": tgt_vocab.to_dict()}, path)


def load_checkpoint(path: str | Path, device: str | torch.device = "cpu"):
    """(model in eval mode on device, preset, source vocabulary, target vocabulary)."""
    saved = torch.load(path, map_location="cpu")
    cfg = Preset(**saved["config"])
    src_vocab, tgt_vocab = CharVocab.from_dict(saved["src_vocab"]), CharVocab.from_dict(saved["tgt_vocab"])
    model = build_model(cfg, src_vocab, tgt_vocab)
    model.load_state_dict(saved["model"])
    return model.to(device).eval(), cfg, src_vocab, tgt_vocab


@dataclass
class History:
    """What fit() records: the loss of every step, the validation exact match of every
    evaluation, and the time spent training (evaluations excluded) and evaluating."""

    step: list[int] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    eval_step: list[int] = field(default_factory=list)
    eval_time: list[float] = field(default_factory=list)   # training seconds at each evaluation
    valid_acc: list[float] = field(default_factory=list)
    train_seconds: float = 0.0
    eval_seconds: float = 0.0
    epochs: int = 0

    @property
    def steps(self) -> int:
        return len(self.step)


def fit(model: nn.Module, cfg: Preset, train_set: list[tuple[str, str]],
        valid_pairs: list[tuple[str, str]], src_vocab: CharVocab, tgt_vocab: CharVocab,
        optimizer: torch.optim.Optimizer, scheduler, *, seed: int = 0, batch_size: int | None = None,
        step=None, evaluate=None, agree=None, progress: bool = True) -> History:
    """Train until the exact match on valid_pairs reaches cfg.target, or cfg.max_steps
    steps, or cfg.max_minutes of training. On CUDA the steps run under bf16 autocast.

    A data-parallel run (benchmarks/train_numerals.py under torchrun) replaces three
    pieces: `step(batch)` (one optimisation step, returns the loss), `evaluate()` (the
    validation exact match) and `agree(stop)` (every process stops at the same step)."""
    step = step or (lambda batch: train_step(model, batch, optimizer, scheduler, smoothing=cfg.smoothing))
    evaluate = evaluate or (lambda: exact_match(model, valid_pairs, src_vocab, tgt_vocab)[0])
    agree = agree or (lambda stop: stop)
    device = next(model.parameters()).device
    history, done = History(), False
    bar = tqdm(total=cfg.max_steps, desc=f"training ({cfg.name}, {cfg.direction})", unit="step",
               disable=not progress)
    say = bar.write if progress else (lambda text: None)
    started = time.perf_counter()
    while not done:
        batches = make_batches(train_set, src_vocab, tgt_vocab, batch_size or cfg.batch_size,
                               seed=10_000 * seed + history.epochs, by_length=cfg.batch_by_length)
        for batch in batches:
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
                loss = step(batch)
            history.train_seconds = time.perf_counter() - started - history.eval_seconds
            history.step.append(history.steps + 1)
            history.loss.append(loss)
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.3f}", lr=f"{scheduler.get_last_lr()[0]:.2e}")
            out_of_budget = agree(history.steps >= cfg.max_steps
                                  or history.train_seconds >= 60 * cfg.max_minutes)
            if history.steps % cfg.eval_every == 0 or out_of_budget:
                eval_start = time.perf_counter()
                acc = evaluate()
                history.eval_seconds += time.perf_counter() - eval_start
                history.eval_step.append(history.steps)
                history.eval_time.append(history.train_seconds)
                history.valid_acc.append(acc)
                say(f"step {history.steps:>5}  {history.train_seconds:6.1f} s  loss {loss:.3f}  "
                          f"valid exact match {acc:.2%}")
                done = acc >= cfg.target or out_of_budget
            if done:
                break
        history.epochs += 1
    bar.close()
    return history
