"""Benchmark: train the lesson-08 Transformer on the numerals task with a lesson-09 preset.

Prints the curve of test exact match against training time, the time to reach the target
(default 99% test exact match, digits -> Chinese) and the final accuracy per number length.

    python benchmarks/train_numerals.py                      # cpu preset, 1 thread
    python benchmarks/train_numerals.py --threads 2 --max-minutes 8
    python benchmarks/train_numerals.py --preset gpu         # on a CUDA machine

Everything comes from the lessons' generated modules (coursekit.reference.lesson08/09):
the model, train_step, noam_lr, the optimizer and evaluation helpers, the presets.
Training time excludes evaluation; both wall-clock and CPU (process) time are reported,
since on a shared machine the wall clock also measures the other processes.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="cpu", choices=["smoke", "cpu", "gpu"])
    parser.add_argument("--direction", default="digits2zh", choices=["digits2zh", "zh2digits"])
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads (default: lesson 09's choose_threads(): $COURSE_THREADS, "
                             "else the cores free now)")
    parser.add_argument("--target", type=float, default=0.99, help="test exact match to reach")
    parser.add_argument("--max-minutes", type=float, default=None,
                        help="training-time budget (default: the preset's)")
    parser.add_argument("--eval-every", type=int, default=None, help="steps between evaluations")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--oversample", type=int, default=None,
                        help="repeat the training pairs of each digit count up to at least this "
                             "many (short numbers are rare: 10, 59, 585 of 1, 2, 3 digits); "
                             "default: the preset's; 0: none")
    parser.add_argument("--clock", default="wall", choices=["wall", "cpu"],
                        help="which training time the budget counts: wall clock (default) or "
                             "this process's CPU time (fair on a machine other processes load)")
    args = parser.parse_args(argv)

    import torch

    from coursekit.data import CharVocab, accuracy_by_length, load_numerals, make_batches
    from coursekit.reference.lesson09 import (
        PRESETS,
        build_model,
        choose_device,
        choose_threads,
        exact_match,
        make_optimizer,
        oversample_short,
        train_step,
    )

    cfg = dict(PRESETS[args.preset])
    device = choose_device()
    if device.type == "cpu":
        torch.set_num_threads(args.threads or choose_threads())
    budget = 60 * (args.max_minutes if args.max_minutes is not None else cfg["max_minutes"])
    eval_every = args.eval_every or cfg["eval_every"]

    train = load_numerals("train", args.direction)
    test = load_numerals("test", args.direction)
    oversample = cfg["oversample"] if args.oversample is None else args.oversample
    if oversample:
        # by the length of the number, whichever side of the pair it is on
        key = (lambda p: p) if args.direction == "digits2zh" else (lambda p: (p[1], p[0]))
        before = len(train)
        train = [key(p) for p in oversample_short([key(p) for p in train], oversample)]
        print(f"oversampling short numbers to >= {oversample} per length: {len(train) - before:,} "
              f"repeated pairs added to {before:,}")
    src_vocab = CharVocab.build(s for s, _ in train)
    tgt_vocab = CharVocab.build(t for _, t in train)
    torch.manual_seed(args.seed)
    model = build_model(cfg, src_vocab, tgt_vocab).to(device)
    optimizer, scheduler = make_optimizer(model, cfg)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"preset {args.preset}, {args.direction}, device {device}"
          + (f", {torch.get_num_threads()} thread(s)" if device.type == "cpu" else "")
          + f", {n_params:,} parameters, batch {cfg['batch_size']}, budget {budget:.0f} s ({args.clock})")
    print(f"load average at start: {os.getloadavg()[0]:.2f} ({os.cpu_count()} CPUs)")
    print()
    print(f"{'step':>6} {'epoch':>5} {'train wall s':>12} {'train CPU s':>11} {'loss':>7} {'test exact match':>16}")

    wall = cpu = 0.0
    step, epoch, reached, done = 0, 0, None, False
    tokens = 0
    while not done:
        for batch in make_batches(train, src_vocab, tgt_vocab, cfg["batch_size"], seed=args.seed * 1000 + epoch):
            w0, c0 = time.perf_counter(), time.process_time()
            loss = train_step(model, batch, optimizer, scheduler, smoothing=cfg["smoothing"])
            if device.type == "cuda":
                torch.cuda.synchronize()
            wall += time.perf_counter() - w0
            cpu += time.process_time() - c0
            tokens += int((batch[1][:, 1:] != tgt_vocab.pad_id).sum())
            step += 1
            spent = wall if args.clock == "wall" else cpu
            if step % eval_every == 0 or spent >= budget:
                acc, predictions = exact_match(model, test, src_vocab, tgt_vocab)
                print(f"{step:>6} {epoch:>5} {wall:>12.1f} {cpu:>11.1f} {loss:>7.4f} {acc:>15.2%}", flush=True)
                if reached is None and acc >= args.target:
                    reached = (step, wall, cpu, acc)
                done = reached is not None or spent >= budget
            if done:
                break
        epoch += 1

    print()
    if reached:
        s, w, c, a = reached
        print(f"reached {a:.2%} >= {args.target:.0%} test exact match after {s} steps: "
              f"{w:.1f} s wall, {c:.1f} s CPU of training")
    else:
        print(f"did NOT reach {args.target:.0%} within {budget:.0f} s ({args.clock}) of training ({step} steps)")
    print(f"training throughput: {tokens / wall:,.0f} target tokens/s, {step / wall:.1f} steps/s (wall); "
          f"{tokens / cpu:,.0f} tokens/s, {step / cpu:.1f} steps/s (CPU)")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    sources = [s for s, _ in test] if args.direction == "digits2zh" else [t for _, t in test]
    by_length = accuracy_by_length(sources, predictions, [t for _, t in test])
    print()
    print("| digits | correct | total | exact match |")
    print("| ---: | ---: | ---: | ---: |")
    for length, (correct, total) in by_length.items():
        print(f"| {length} | {correct} | {total} | {correct / total:.2%} |")
    wrong = [(s, t, p) for (s, t), p in zip(test, predictions, strict=False) if p != t]
    if wrong:
        print()
        print(f"{len(wrong)} wrong, e.g.:")
        for s, t, p in wrong[:10]:
            print(f"  {s:>10}  expected {t}  got {p}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
