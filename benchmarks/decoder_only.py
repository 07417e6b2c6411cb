"""Benchmark: lesson 10's decoder-only model against lesson 09's encoder-decoder, same data.

Trains both, one after the other in one process, with their own `cpu` presets (or the preset
named by --preset) and their own training loops (`fit` of lessons 09 and 10: validation every
`eval_every` steps, lesson 10's on a sample until it nears the target (`lesson10.validate`),
stop at the preset's target, 99.5% of the whole valid split), once per
seed, then scores the test split. Prints, per run: the parameters, the steps and seconds to
stop (training, validation, both; and the training's CPU time), tokens per second (tokens the
model reads, and tokens the loss scores), the test exact match and the accuracy per digit
count; then two tables, and the figures another machine reproduces: each seed's steps to the
target (or, where a run stopped short, the exact match it reached) and the CPU time per
training step of lesson 10 over lesson 09's, both measured in this run.

    python benchmarks/decoder_only.py --threads 2                          # digits -> Chinese, seed 0
    python benchmarks/decoder_only.py --threads 2 --seeds 0 1 2 --direction zh2digits
    python benchmarks/decoder_only.py --only 10 --lr 2e-3                  # lesson 10 alone, a field changed

`--curve` also scores the test split at every validation (not counted in any time) and
reports the first step at which it reached 99%. Everything comes from the lessons' generated
modules (coursekit.reference.lesson09 and lesson10).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import typing
from dataclasses import fields
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from coursekit.data import CharVocab, accuracy_by_length, load_numerals  # noqa: E402
from coursekit.reference import lesson09, lesson10  # noqa: E402

NAMES = {"09": "encoder-decoder (lesson 09)", "10": "decoder-only (lesson 10)"}


def run_09(cfg, seed: int, data: dict, device: torch.device, curve: bool) -> dict:
    """Lesson 09's Transformer with lesson 09's fit."""
    train, valid, test, src_vocab, tgt_vocab = (data[k] for k in ("train09", "valid", "test", "src", "tgt"))
    torch.manual_seed(seed)
    model = lesson09.build_model(cfg, src_vocab, tgt_vocab).to(device)
    if device.type == "cuda":
        lesson09.autocast_forward(model)
    optimizer, scheduler = lesson09.make_optimizer(model, cfg)
    counts = {"read": 0, "scored": 0, "cpu": 0.0}

    def step(batch) -> float:
        cpu = time.process_time()
        src, tgt = batch
        counts["read"] += int((src != src_vocab.pad_id).sum() + (tgt[:, :-1] != tgt_vocab.pad_id).sum())
        counts["scored"] += int((tgt[:, 1:] != tgt_vocab.pad_id).sum())
        loss = lesson09.train_step(model, batch, optimizer, scheduler, smoothing=cfg.smoothing)
        counts["cpu"] += time.process_time() - cpu
        return loss

    def score(pairs):
        return lesson09.exact_match(model, pairs, src_vocab, tgt_vocab)

    validate, excluded = _validator(lambda: score(valid[:cfg.eval_examples])[0], lambda: score(test)[0], curve)
    history = lesson09.fit(model, cfg, train, valid[:cfg.eval_examples], src_vocab, tgt_vocab, optimizer,
                           scheduler, seed=seed, step=step, evaluate=validate, progress=False)
    return _result("09", model, cfg, seed, history, counts, excluded, lambda: score(test[:cfg.test_examples]),
                   test[:cfg.test_examples], lesson09.digits_of)


def run_10(cfg, seed: int, data: dict, device: torch.device, curve: bool) -> dict:
    """Lesson 10's DecoderLM with lesson 10's fit."""
    train, valid, test, vocab = (data[k] for k in ("train10", "valid", "test", "vocab"))
    torch.manual_seed(seed)
    model = lesson10.build_model(cfg, vocab, device)
    optimizer, scheduler = lesson10.make_optimizer(model, cfg)
    counts = {"read": 0, "scored": 0, "cpu": 0.0}

    def step(batch) -> float:
        cpu = time.process_time()
        ids, loss_mask = batch
        counts["read"] += int((ids != vocab.pad_id).sum())
        counts["scored"] += int(loss_mask[:, 1:].sum())
        loss = lesson10.train_step(model, batch, optimizer, scheduler, clip=cfg.clip)
        counts["cpu"] += time.process_time() - cpu
        return loss

    def score(pairs):
        return lesson10.exact_match(model, pairs, vocab)

    validate, excluded = _validator(lambda: lesson10.validate(model, cfg, valid[:cfg.eval_examples], vocab),
                                    lambda: score(test)[0], curve)
    history = lesson10.fit(model, cfg, train, valid[:cfg.eval_examples], vocab, optimizer, scheduler,
                           seed=seed, step=step, evaluate=validate, progress=False)
    return _result("10", model, cfg, seed, history, counts, excluded, lambda: score(test[:cfg.test_examples]),
                   test[:cfg.test_examples], lesson10.digits_of)


def _validator(valid_score, test_score, curve: bool):
    """fit's evaluate(); with curve, the test split scored too, its time kept apart."""
    excluded = {"seconds": 0.0, "test_curve": []}

    def validate() -> float:
        acc = valid_score()
        if curve:
            paused = time.perf_counter()
            excluded["test_curve"].append(test_score())
            excluded["seconds"] += time.perf_counter() - paused
        return acc

    return validate, excluded


def _result(lesson, model, cfg, seed, history, counts, excluded, score_test, pairs, digits_of) -> dict:
    acc, predictions = score_test()
    by_length = accuracy_by_length([digits_of(p, cfg.direction) for p in pairs], predictions, [t for _, t in pairs])
    return {"lesson": lesson, "seed": seed, "target": cfg.target,
            "params": sum(p.numel() for p in model.parameters()),
            "steps": history.steps, "train_s": history.train_seconds,
            "valid_s": history.eval_seconds - excluded["seconds"], "cpu_s": counts["cpu"],
            "read": counts["read"], "scored": counts["scored"], "valid": history.valid_acc[-1], "test": acc,
            "by_length": by_length, "eval_step": history.eval_step, "eval_time": history.eval_time,
            "valid_curve": history.valid_acc, "test_curve": excluded["test_curve"],
            "wrong": [(s, t, p) for (s, t), p in zip(pairs, predictions, strict=True) if p != t]}


def print_run(r: dict, target: float) -> None:
    total = r["train_s"] + r["valid_s"]
    print(f"{NAMES[r['lesson']]}, seed {r['seed']}: {r['params']:,} parameters; stopped after {r['steps']} steps "
          f"at valid exact match {r['valid']:.2%}: {r['train_s']:.1f} s training + {r['valid_s']:.1f} s "
          f"validation = {total:.1f} s ({r['cpu_s']:.1f} s CPU training); "
          f"{r['read'] / r['train_s']:,.0f} tokens/s read, {r['scored'] / r['train_s']:,.0f} scored; "
          f"test exact match {r['test']:.2%}" + ("" if r["test"] >= target else f"  (BELOW {target:.0%})"))
    if r["test_curve"]:
        first = next((i for i, a in enumerate(r["test_curve"]) if a >= target), None)
        curve = "  ".join(f"{s}:{v:.1%}/{t:.1%}" for s, v, t in zip(r["eval_step"], r["valid_curve"],
                                                                    r["test_curve"], strict=False))
        print(f"  step:valid/test  {curve}")
        if first is not None:
            print(f"  test first >= {target:.0%} at step {r['eval_step'][first]} "
                  f"({r['eval_time'][first]:.1f} s of training)")
    if r["wrong"]:
        print(f"  {len(r['wrong'])} wrong, e.g.: "
              + ";  ".join(f"{s} → {p} (not {t})" for s, t, p in r["wrong"][:6]))
    print(flush=True)


def print_tables(results: list[dict], target: float, threads: str) -> None:
    print("| model | seed | parameters | steps | training s | validation s | total s | training CPU s "
          "| tokens/s read | tokens/s scored | valid | test |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in results:
        print(f"| {NAMES[r['lesson']]} | {r['seed']} | {r['params']:,} | {r['steps']} | {r['train_s']:.1f} | "
              f"{r['valid_s']:.1f} | {r['train_s'] + r['valid_s']:.1f} | {r['cpu_s']:.1f} | "
              f"{r['read'] / r['train_s']:,.0f} | {r['scored'] / r['train_s']:,.0f} | {r['valid']:.2%} | "
              f"{r['test']:.2%} |")
    lengths = sorted({n for r in results for n in r["by_length"]})
    print()
    print("| model | seed | " + " | ".join(f"{n} digits" for n in lengths) + " |")
    print("| --- | ---: | " + " | ".join("---:" for _ in lengths) + " |")
    for r in results:
        cells = [f"{r['by_length'][n][0]} / {r['by_length'][n][1]}" if n in r["by_length"] else "" for n in lengths]
        print(f"| {NAMES[r['lesson']]} | {r['seed']} | " + " | ".join(cells) + " |")
    print()
    for lesson in sorted({r["lesson"] for r in results}):
        mine = [r for r in results if r["lesson"] == lesson]
        totals = [r["train_s"] + r["valid_s"] for r in mine]
        print(f"{NAMES[lesson]}: {sum(r['test'] >= target for r in mine)} of {len(mine)} runs >= {target:.0%} test "
              f"exact match ({threads}); steps median {statistics.median(r['steps'] for r in mine):.0f}; "
              f"time to stop median {statistics.median(totals):.1f} s (min {min(totals):.1f}, max {max(totals):.1f})")
    print()
    for line in machine_independent(results):
        print(line)


def cpu_per_step(runs: list[dict]) -> float:
    """Training CPU seconds per step over the runs (all of their steps together)."""
    return sum(r["cpu_s"] for r in runs) / max(1, sum(r["steps"] for r in runs))


def steps_to_target(run: dict) -> str:
    """A run's steps to its target (valid exact match), or, where it stopped short, the steps it
    ran and the exact match it had reached."""
    if run["valid"] >= run["target"]:
        return f"{run['steps']} (seed {run['seed']})"
    return f"not reached in {run['steps']} (seed {run['seed']}: valid {run['valid']:.2%} < {run['target']:.1%})"


def machine_independent(results: list[dict]) -> list[str]:
    """The figures another machine reproduces: each lesson's steps to its target, seed by seed, and the
    ratio of lesson 10's CPU time per training step to lesson 09's, both measured in this run."""
    by_lesson = {lesson: [r for r in results if r["lesson"] == lesson] for lesson in NAMES}
    lines = [f"steps to the target, lesson {lesson}: " + ", ".join(map(steps_to_target, runs))
             for lesson, runs in by_lesson.items() if runs]
    if by_lesson["09"] and by_lesson["10"]:
        per_step = {lesson: cpu_per_step(runs) for lesson, runs in by_lesson.items()}
        lines.append(f"CPU time per training step, lesson 10 / lesson 09: {per_step['10'] / per_step['09']:.2f} "
                     f"({1000 * per_step['10']:.0f} ms / {1000 * per_step['09']:.0f} ms, measured in this run)")
    return lines


def _flag(text: str) -> bool:
    return text.lower() in ("1", "true", "yes", "on")


def _kind(annotation):
    """How a command-line value of a Preset field is read (None: not settable from the command line)."""
    if isinstance(annotation, str):
        annotation = {"int": int, "float": float, "bool": bool, "int | None": int | None}.get(annotation)
    if annotation is bool:
        return _flag
    if annotation in (int, float):
        return annotation
    options = [a for a in typing.get_args(annotation) if a is not type(None)]
    return options[0] if len(options) == 1 and options[0] in (int, float) else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="cpu", choices=sorted(lesson10.PRESETS))
    parser.add_argument("--direction", default="digits2zh", choices=["digits2zh", "zh2digits"])
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads (default: lesson 10's choose_threads(): $COURSE_THREADS, else the "
                             "cores free now)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="one run of each model per seed")
    parser.add_argument("--only", choices=["09", "10"], help="train one of the two models only")
    parser.add_argument("--test-target", type=float, default=0.99, help="test exact match to reach")
    parser.add_argument("--curve", action="store_true",
                        help="score the test split at every validation too (not timed)")
    parser.add_argument("--history", type=Path, help="write the runs' measurements here as JSON")
    parser.add_argument("--budget-minutes", type=float, default=60.0,
                        help="both models' training budget (default 60: a run stops at its preset's target, "
                             "however busy the machine; the presets' own 5 minutes would cut a slowed run short)")
    changes = parser.add_argument_group("changes to lesson 10's preset (default: the preset's)")
    for f in fields(lesson10.Preset):
        kind = _kind(f.type)
        if f.name not in ("name", "direction") and kind is not None:
            changes.add_argument("--" + f.name.replace("_", "-"), type=kind, dest="l10_" + f.name,
                                 metavar=f.name.upper())
    args = parser.parse_args(argv)

    changes = {k[4:]: v for k, v in vars(args).items() if k.startswith("l10_") and v is not None}
    cfg10 = lesson10.load_preset(args.preset, args.direction, **{"max_minutes": args.budget_minutes, **changes})
    cfg09 = lesson09.load_preset(args.preset, args.direction, max_minutes=args.budget_minutes)
    device = lesson10.choose_device()
    if device.type == "cpu":
        torch.set_num_threads(args.threads or lesson10.choose_threads())
    threads = (f"{torch.get_num_threads()} thread(s)" if device.type == "cpu"
               else torch.cuda.get_device_name(device))

    train = load_numerals("train", args.direction)
    data = {"train09": lesson09.training_set(train, cfg09), "train10": lesson10.training_set(train, cfg10),
            "valid": load_numerals("valid", args.direction), "test": load_numerals("test", args.direction),
            "src": CharVocab.build(s for s, _ in train), "tgt": CharVocab.build(t for _, t in train),
            "vocab": lesson10.build_vocab(train)}
    print(f"lesson 09: {cfg09}\nlesson 10: {cfg10}")
    print(f"device {device}, {threads}; load average at start: {os.getloadavg()[0]:.2f} "
          f"({os.cpu_count()} CPUs)\n", flush=True)

    results = []
    for seed in args.seeds:
        for lesson, run, cfg in (("09", run_09, cfg09), ("10", run_10, cfg10)):
            if args.only and lesson != args.only:
                continue
            results.append(run(cfg, seed, data, device, args.curve))
            print_run(results[-1], args.test_target)
    print_tables(results, args.test_target, threads)
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    if args.history:
        keep = ("lesson", "seed", "target", "params", "steps", "train_s", "valid_s", "cpu_s", "read", "scored",
                "valid", "test", "eval_step", "valid_curve", "test_curve")
        args.history.write_text(json.dumps({"threads": threads, "runs": [
            {**{k: r[k] for k in keep}, "by_length": {str(n): v for n, v in r["by_length"].items()}}
            for r in results]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
