"""Reference code of lesson 09_training, GENERATED from solutions/09_training/09_training.ipynb
by `python -m coursekit.export`. Do not edit."""
# ruff: noqa

import math
import os
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from coursekit.data import CharVocab, accuracy_by_length, dataset_dir, load_numerals, make_batches
# The model of lesson 08, generated from its reference notebook (coursekit.export).
from coursekit.reference.lesson08 import Transformer, greedy_decode


PRESETS = {
    "smoke": dict(d_model=32, n_head=2, layers=1, d_ff=64, dropout=0.0, batch_size=64,
                  warmup=50, lr_factor=2.0, smoothing=0.1, max_steps=60, max_minutes=0.25,
                  eval_every=30, eval_examples=100, target=1.01, test_examples=200, oversample=100),
    "cpu": dict(d_model=64, n_head=4, layers=2, d_ff=256, dropout=0.0, batch_size=128,
                warmup=300, lr_factor=0.15, smoothing=0.0, max_steps=20_000, max_minutes=5.0,
                eval_every=250, eval_examples=1000, target=0.995, test_examples=None, oversample=2000),
    "gpu": dict(d_model=256, n_head=8, layers=3, d_ff=1024, dropout=0.1, batch_size=512,
                warmup=1000, lr_factor=0.5, smoothing=0.1, max_steps=20_000, max_minutes=10.0,
                eval_every=250, eval_examples=2099, target=0.998, test_examples=None, oversample=2000),
}


def choose_preset(preset: str | None = None) -> str:
    """The preset to run: the argument, else $COURSE_PRESET, else smoke when grading or
    in CI, else gpu with CUDA, else cpu."""
    preset = preset or os.environ.get("COURSE_PRESET") or None
    if preset is None:
        grading = (os.environ.get("COURSE_GRADING") == "1" or os.environ.get("CI", "").lower() == "true"
                   or "autograded" in Path.cwd().parts)
        preset = "smoke" if grading else "gpu" if torch.cuda.is_available() else "cpu"
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
    return preset


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
    logits = model(src, tgt[:, :-1])
    loss = label_smoothed_nll(logits.float(), tgt[:, 1:], smoothing, model.pad_id)
    loss.backward()
    optimizer.step()
    if scheduler is not None:
        scheduler.step()
    return loss.item()


@torch.no_grad()
def translate(model: nn.Module, sources: list[str], src_vocab: CharVocab, tgt_vocab: CharVocab,
              batch_size: int = 500, max_len: int = 20) -> list[str]:
    """Greedy translations of the source strings."""
    device = next(model.parameters()).device
    out = []
    for start in range(0, len(sources), batch_size):
        chunk = [src_vocab.encode(s, add_eos=True) for s in sources[start:start + batch_size]]
        width = max(map(len, chunk))
        src = torch.tensor([c + [src_vocab.pad_id] * (width - len(c)) for c in chunk], device=device)
        ys = greedy_decode(model, src, max_len, tgt_vocab.bos_id, tgt_vocab.eos_id)
        out += [tgt_vocab.decode(row) for row in ys.cpu()]
    return out


def exact_match(model: nn.Module, pairs: list[tuple[str, str]], src_vocab: CharVocab,
                tgt_vocab: CharVocab) -> tuple[float, list[str]]:
    """Fraction of pairs translated exactly, and the translations."""
    predictions = translate(model, [s for s, _ in pairs], src_vocab, tgt_vocab)
    return sum(p == t for p, (_, t) in zip(predictions, pairs)) / max(1, len(pairs)), predictions


def build_model(cfg: dict, src_vocab: CharVocab, tgt_vocab: CharVocab) -> Transformer:
    return Transformer(len(src_vocab), len(tgt_vocab), d_model=cfg["d_model"], n_head=cfg["n_head"],
                       num_encoder_layers=cfg["layers"], num_decoder_layers=cfg["layers"],
                       d_ff=cfg["d_ff"], dropout=cfg["dropout"], max_len=64, pad_id=src_vocab.pad_id)


def oversample_short(pairs: list[tuple[str, str]], minimum: int) -> list[tuple[str, str]]:
    """The pairs, plus repeats of every source length that has fewer than `minimum` pairs
    (the rare short numbers), so that each length is seen at least `minimum` times an epoch."""
    by_length: dict[int, list[tuple[str, str]]] = {}
    for pair in pairs:
        by_length.setdefault(len(pair[0]), []).append(pair)
    extra = [p for group in by_length.values() for p in group * (-(-minimum // len(group)) - 1)]
    return list(pairs) + extra


def make_optimizer(model: nn.Module, cfg: dict):
    """Adam with the paper's betas and eps, scheduled by noam_lr (times cfg['lr_factor'])."""
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: cfg["lr_factor"] * noam_lr(s + 1, cfg["d_model"], cfg["warmup"]))
    return optimizer, scheduler


import functools


def autocast_forward(model: nn.Module, dtype: torch.dtype = torch.bfloat16) -> nn.Module:
    """From now on, model(...) runs its forward pass under torch.autocast on the model's
    device (matrix products in `dtype`) and returns float32 outputs. Backward passes and
    optimizer steps, which happen outside that call, stay outside autocast. The parameters
    and the state_dict are unchanged; train_step needs no change."""
    device_type = next(model.parameters()).device.type
    forward = model.forward

    @functools.wraps(forward)
    def forward_in_autocast(*args, **kwargs):
        with torch.autocast(device_type=device_type, dtype=dtype):
            return forward(*args, **kwargs).float()

    model.forward = forward_in_autocast
    return model
