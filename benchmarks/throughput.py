"""Benchmark: training throughput of the course's Transformer against nn.Transformer.

Both models have the same sizes (the lesson-09 preset), the same embeddings, positional
encoding and output layer, the same batches of the numerals task, Adam, and the same
train_step of lesson 09; only the encoder-decoder stacks differ (ours: lessons 03-08;
theirs: torch.nn.Transformer with batch_first=True, dropout as the preset, bool masks).
Measurements alternate between the two models in rounds, so that a change in the load of
the machine hits both alike. Reported: target tokens (non-pad) per second, per round and
overall, and the ratio ours / nn.Transformer.

    python benchmarks/throughput.py                # cpu preset, 1 thread
    python benchmarks/throughput.py --threads 2 --rounds 8 --steps 40
    python benchmarks/throughput.py --preset gpu   # on a CUDA GPU: bf16 autocast, as lesson 09 trains

On a CUDA GPU both models run their forward passes under bf16 autocast (lesson 09's
`autocast_forward`, as its training cell does) and the output adds each model's peak GPU
memory.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def torch_transformer(cfg, src_vocab, tgt_vocab):
    """nn.Transformer wrapped with the lesson-08 interface (embeddings, PE, generator)."""
    import torch
    from torch import nn

    from coursekit.reference.lesson07 import PositionalEncoding, TokenEmbedding

    class TorchTransformer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            d = cfg.d_model
            self.pad_id = src_vocab.pad_id
            self.src_embed = TokenEmbedding(len(src_vocab), d)
            self.tgt_embed = TokenEmbedding(len(tgt_vocab), d)
            self.pos_enc = PositionalEncoding(d, 64, cfg.dropout)
            self.transformer = nn.Transformer(d, cfg.n_head, cfg.layers, cfg.layers, cfg.d_ff,
                                              cfg.dropout, batch_first=True)
            self.generator = nn.Linear(d, len(tgt_vocab))

        def forward(self, src, tgt):
            src_pad, tgt_pad = src == self.pad_id, tgt == self.pad_id
            causal = torch.ones(tgt.shape[1], tgt.shape[1], dtype=torch.bool, device=tgt.device).triu(1)
            h = self.transformer(self.pos_enc(self.src_embed(src)), self.pos_enc(self.tgt_embed(tgt)),
                                 tgt_mask=causal, src_key_padding_mask=src_pad,
                                 tgt_key_padding_mask=tgt_pad, memory_key_padding_mask=src_pad)
            return self.generator(h)

    return TorchTransformer()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="cpu", choices=["smoke", "cpu", "gpu"])
    parser.add_argument("--no-amp", dest="amp", action="store_false",
                        help="on CUDA, train in float32 instead of under bf16 autocast")
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads (default: lesson 09's choose_threads(): $COURSE_THREADS, "
                             "else the cores free now)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--steps", type=int, default=30, help="training steps per model per round")
    parser.add_argument("--diagnose", action="store_true",
                        help="add a third model: ours with torch's fused layer_norm in every LayerNorm")
    args = parser.parse_args(argv)

    import torch

    from coursekit.data import CharVocab, load_numerals, make_batches
    from coursekit.reference.lesson09 import (
        autocast_forward,
        build_model,
        choose_device,
        choose_threads,
        load_preset,
        make_optimizer,
        train_step,
    )

    cfg = load_preset(args.preset, "digits2zh")
    device = choose_device()
    if device.type == "cpu":
        torch.set_num_threads(args.threads or choose_threads())
    train = load_numerals("train")
    src_vocab = CharVocab.build(s for s, _ in train)
    tgt_vocab = CharVocab.build(t for _, t in train)
    batches = list(make_batches(train, src_vocab, tgt_vocab, cfg.batch_size, seed=0,
                                by_length=cfg.batch_by_length))  # the batches lesson 09 trains on
    batches = [(s.to(device), t.to(device)) for s, t in batches[: args.steps]]
    tokens = sum(int((t[:, 1:] != tgt_vocab.pad_id).sum()) for _, t in batches)

    torch.manual_seed(0)
    models = {"ours (lessons 03-08)": build_model(cfg, src_vocab, tgt_vocab).to(device),
              "nn.Transformer": torch_transformer(cfg, src_vocab, tgt_vocab).to(device)}
    if args.diagnose:
        from coursekit.reference.lesson05 import LayerNorm

        torch.manual_seed(0)
        fused = build_model(cfg, src_vocab, tgt_vocab).to(device)
        for module in fused.modules():
            if isinstance(module, LayerNorm):
                module.forward = (lambda m: lambda x: torch.nn.functional.layer_norm(
                    x, m.weight.shape, m.weight, m.bias, m.eps))(module)
        models["ours + fused LayerNorm"] = fused
    amp = args.amp and device.type == "cuda"
    for model in models.values():
        if amp:
            autocast_forward(model)  # lesson 09's: forward passes in bf16, float32 logits
    optim = {name: make_optimizer(m, cfg) for name, m in models.items()}
    for name, m in models.items():
        print(f"{name:<22} {sum(p.numel() for p in m.parameters()):>9,} parameters")
    print(f"preset {args.preset}, device {device}"
          + (f", {torch.get_num_threads()} thread(s)" if device.type == "cpu"
             else f" ({torch.cuda.get_device_name(device)}), {'bf16 autocast' if amp else 'float32'}")
          + f", {args.steps} steps of batch {cfg.batch_size} ({tokens:,} target tokens) per round")
    print(f"load average at start: {os.getloadavg()[0]:.2f} ({os.cpu_count()} CPUs)")

    peak = {}

    def run(name):
        model, (opt, sched) = models[name], optim[name]
        if device.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats(device)
        start, cpu_start = time.perf_counter(), time.process_time()
        for batch in batches:
            loss = train_step(model, batch, opt, sched, smoothing=cfg.smoothing)
        if device.type == "cuda":
            torch.cuda.synchronize()
            peak[name] = max(peak.get(name, 0), torch.cuda.max_memory_allocated(device))
        assert math.isfinite(loss)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        # On a CPU, process time is immune to other processes' load; on a GPU, use the wall clock.
        return tokens / (cpu if device.type == "cpu" else wall), tokens / wall

    for name in models:  # warm-up (allocator, first-call overheads)
        run(name)
    rates = {name: [] for name in models}
    walls = {name: [] for name in models}
    clock = "CPU time" if device.type == "cpu" else "wall clock"
    print(f"tokens/s by {clock} (wall-clock figures in brackets)")
    print()
    print("| round | " + " | ".join(f"{n} tokens/s" for n in models) + " | ratio ours / nn |")
    print("| ---: | " + " | ".join("---:" for _ in models) + " | ---: |")
    names = list(models)
    for r in range(args.rounds):
        order = names if r % 2 == 0 else names[::-1]
        for name in order:
            rate, wall_rate = run(name)
            rates[name].append(rate)
            walls[name].append(wall_rate)
        cells = " | ".join(f"{rates[n][-1]:,.0f} ({walls[n][-1]:,.0f})" for n in names)
        print(f"| {r + 1} | {cells} | {rates[names[0]][-1] / rates[names[1]][-1]:.3f} |", flush=True)
    med = {n: statistics.median(v) for n, v in rates.items()}
    cells = " | ".join(f"{med[n]:,.0f}" for n in names)
    print(f"| median | {cells} | {med[names[0]] / med[names[1]]:.3f} |")
    ratios = [x / y for x, y in zip(rates[names[0]], rates[names[1]], strict=False)]
    print()
    print(f"ours / nn.Transformer ({clock}): median of per-round ratios {statistics.median(ratios):.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f}); target: within 10% (>= 0.90)")
    for name, nbytes in peak.items():
        print(f"peak GPU memory, {name}: {nbytes / 2**20:,.0f} MiB")
    if args.diagnose:
        f = [x / y for x, y in zip(rates[names[2]], rates[names[1]], strict=False)]
        print(f"ours + fused LayerNorm / nn.Transformer: median {statistics.median(f):.3f}")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
