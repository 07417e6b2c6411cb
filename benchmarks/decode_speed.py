"""Benchmark: what validating lesson 09's model costs, with and without the decoding cache.

Decodes the valid and test splits of the numerals task with the model trained by the `cpu`
preset (the checkpoint the figures use, docs/figures/numerals_cpu.pt) in three ways, in
alternating rounds:

- lesson 08's `greedy_decode` (the whole prefix through the decoder at every step), in
  batches of 500 in the order of the file (lesson 09 before the cache);
- `greedy_decode_cached` in the same batches;
- lesson 09's `translate`: the cache, batches of 1,000, shortest sources first.

It checks that the three give the same translations, and prints seconds per split and the
time of one training step for scale (the same model, a batch of the preset).

    python benchmarks/decode_speed.py --threads 1
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from coursekit.data import load_numerals, make_batches  # noqa: E402
from coursekit.reference.lesson08 import greedy_decode  # noqa: E402
from coursekit.reference.lesson09 import (  # noqa: E402
    choose_threads,
    greedy_decode_cached,
    load_checkpoint,
    make_optimizer,
    train_step,
    training_set,
    translate,
)

CHECKPOINT = ROOT / "docs" / "figures" / "numerals_cpu.pt"


def in_file_order(decode, model, sources, src_vocab, tgt_vocab, batch_size=500) -> list[str]:
    out = []
    for start in range(0, len(sources), batch_size):
        chunk = [src_vocab.encode(s, add_eos=True) for s in sources[start:start + batch_size]]
        width = max(map(len, chunk))
        src = torch.tensor([c + [src_vocab.pad_id] * (width - len(c)) for c in chunk])
        out += [tgt_vocab.decode(row) for row in decode(model, src, 20, tgt_vocab.bos_id, tgt_vocab.eos_id)]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads or choose_threads())
    model, cfg, src_vocab, tgt_vocab = load_checkpoint(CHECKPOINT)
    print(f"{CHECKPOINT.relative_to(ROOT)}: preset {cfg.name}, {cfg.direction}; "
          f"{torch.get_num_threads()} thread(s); load average at start {os.getloadavg()[0]:.2f}")

    ways = {
        "greedy_decode, batches of 500": lambda s: in_file_order(greedy_decode, model, s, src_vocab, tgt_vocab),
        "greedy_decode_cached, batches of 500":
            lambda s: in_file_order(greedy_decode_cached, model, s, src_vocab, tgt_vocab),
        "translate (cached, 1,000, shortest first)": lambda s: translate(model, s, src_vocab, tgt_vocab),
    }
    splits = {split: [s for s, _ in load_numerals(split, cfg.direction)] for split in ("valid", "test")}
    seconds = {(way, split): [] for way in ways for split in splits}
    first: dict[str, list[str]] = {}
    for r in range(args.rounds):
        for way in (list(ways) if r % 2 == 0 else list(ways)[::-1]):
            for split, sources in splits.items():
                start = time.process_time()
                out = ways[way](sources)
                seconds[way, split].append(time.process_time() - start)
                assert out == first.setdefault(split, out), f"{way} translates the {split} split differently"

    train = training_set(load_numerals("train", cfg.direction), cfg)
    batches = list(make_batches(train, src_vocab, tgt_vocab, cfg.batch_size, seed=0,
                                by_length=cfg.batch_by_length))[:25]
    optimizer, scheduler = make_optimizer(model, cfg)
    for batch in batches[:5]:
        train_step(model, batch, optimizer, scheduler)
    start = time.process_time()
    for batch in batches[5:]:
        train_step(model, batch, optimizer, scheduler)
    step = (time.process_time() - start) / len(batches[5:])

    print("\nCPU seconds, median of rounds (the same translations every way)\n")
    print("| decoding | valid (2,099) | test (5,247) |")
    print("| --- | ---: | ---: |")
    for way in ways:
        print(f"| {way} | {statistics.median(seconds[way, 'valid']):.2f} | "
              f"{statistics.median(seconds[way, 'test']):.2f} |")
    print(f"| for scale: one training step, batch {cfg.batch_size} | {step:.3f} | |")
    print(f"\nload average at end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
