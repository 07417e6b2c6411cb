"""Benchmark: train the lesson-08 Transformer on the numerals task with a lesson-09 preset.

Runs lesson 09's own training loop (`fit`: validation every `eval_every` steps, screened on
a sample of `screen_examples` until it comes near the target; stop at the preset's target)
once per seed, then scores the test split. Prints, per seed: the curve, the time to stop
(training, validation and both, wall and CPU), the test exact match at the stop, the
accuracy per digit count; then one summary table over the seeds. The recipe before lesson
09's speedrun (the paper's schedule) is

    python benchmarks/train_numerals.py --threads 1 --seeds 0 1 2 --lr-factor 0.15 --warmup 150 \
        --noam-decay --eval-every 50 --screen-examples 0

    python benchmarks/train_numerals.py --threads 2 --seeds 0 1 2          # cpu preset, digits -> Chinese
    python benchmarks/train_numerals.py --threads 2 --direction zh2digits --seeds 0 1 2
    python benchmarks/train_numerals.py --preset gpu                       # on a CUDA machine
    torchrun --nproc_per_node 2 benchmarks/train_numerals.py --preset gpu  # data-parallel (DDP)

`--curve` also scores the test split at every validation (not counted in any time) and
reports the first step at which it reached 99%. Everything comes from the lessons'
generated modules (coursekit.reference.lesson08/09): presets, model, train_step, fit,
translate, checkpoints.

Data-parallel: under `torchrun` (WORLD_SIZE > 1) every process holds the whole model and
trains on every WORLD_SIZE-th row of each global batch of `batch_size x WORLD_SIZE` rows
(`--batch-size` sets the per-process batch). Gradients are averaged weighted by each
process's share of the batch's target tokens, so one step equals one single-process step
on the global batch (the loss is a mean over target tokens); the noam schedule steps once
per global step; process 0 validates, and saves the checkpoint in the single-process
format (`--checkpoint`), which `load_checkpoint` of lesson 09 reads.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import asdict
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from coursekit.data import CharVocab, accuracy_by_length, load_numerals  # noqa: E402
from coursekit.reference.lesson09 import (  # noqa: E402
    PRESETS,
    Preset,
    autocast_forward,
    build_model,
    choose_device,
    choose_threads,
    digits_of,
    exact_match,
    fit,
    load_preset,
    make_optimizer,
    save_checkpoint,
    screened_exact_match,
    train_step,
    training_set,
)

# ---------------------------------------------------------------- data parallel (torchrun)

def init_distributed() -> tuple[int, int]:
    """(rank, world size): from torchrun's environment, the process group started when
    there is more than one process (NCCL on CUDA, gloo on CPU)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return 0, 1
    import torch.distributed as dist

    if torch.cuda.is_available():
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    return dist.get_rank(), world


def _token_weighted_allreduce(state: DataParallelStep, bucket):
    """DDP communication hook: sum over processes of share x gradient (DDP's default
    would average, weighting every process alike whatever its number of tokens)."""
    import torch.distributed as dist

    grads = bucket.buffer().mul_(state.share)
    return dist.all_reduce(grads, async_op=True).get_future().then(lambda fut: fut.value()[0])


class DataParallelStep:
    """`fit`'s step for one process of a data-parallel run: lesson 09's train_step on this
    process's rows of the global batch, through DistributedDataParallel."""

    def __init__(self, model: torch.nn.Module, optimizer, scheduler, cfg: Preset, rank: int, world: int,
                 weighted: bool = True):
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel

        class DDP(DistributedDataParallel):
            def __getattr__(self, name: str):  # train_step reads model.pad_id
                try:
                    return super().__getattr__(name)
                except AttributeError:
                    return getattr(self.module, name)

        self.device = next(model.parameters()).device
        self.ddp = DDP(model, device_ids=[self.device.index] if self.device.type == "cuda" else None)
        if weighted:
            self.ddp.register_comm_hook(self, _token_weighted_allreduce)
        self.optimizer, self.scheduler, self.cfg = optimizer, scheduler, cfg
        self.rank, self.world, self.dist = rank, world, dist
        self.share = 1.0 / world

    def __call__(self, batch: tuple[torch.Tensor, torch.Tensor]) -> float:
        src, tgt = (t[self.rank::self.world] for t in batch)
        mine = float((tgt[:, 1:] != self.ddp.pad_id).sum())
        if not len(src):  # a last batch with fewer rows than processes: train on a row with weight 0
            src, tgt = batch[0][:1], batch[1][:1]
        total = torch.tensor([mine], device=self.device)
        self.dist.all_reduce(total)  # the global batch's target tokens
        self.share = mine / total.item()
        loss = train_step(self.ddp, (src, tgt), self.optimizer, self.scheduler, smoothing=self.cfg.smoothing)
        total = torch.tensor([loss * self.share], device=self.device)
        self.dist.all_reduce(total)  # the global batch's loss: token-weighted mean of the shares'
        return total.item()

    def evaluate(self, score) -> float:
        """score() on process 0, its result on every process."""
        value = torch.tensor([score() if self.rank == 0 else 0.0], device=self.device)
        self.dist.broadcast(value, src=0)
        return value.item()

    def agree(self, stop: bool) -> bool:
        """True on every process as soon as one process wants to stop (time budgets differ)."""
        flag = torch.tensor([float(stop)], device=self.device)
        self.dist.all_reduce(flag, op=self.dist.ReduceOp.MAX)
        return bool(flag.item())


# ---------------------------------------------------------------- one run


def run(cfg: Preset, seed: int, data: dict, device: torch.device, rank: int, world: int,
        args: argparse.Namespace) -> dict:
    """Train once (lesson 09's fit), score the test split; returns the measurements."""
    train, valid, test, src_vocab, tgt_vocab = (data[k] for k in ("train", "valid", "test", "src", "tgt"))
    torch.manual_seed(seed)  # the same initial weights in every process
    model = build_model(cfg, src_vocab, tgt_vocab).to(device)
    if device.type == "cuda":
        autocast_forward(model)  # as lesson 09 trains on a GPU: forward passes in bf16
    optimizer, scheduler = make_optimizer(model, cfg)
    torch.manual_seed(seed * 1000 + rank)  # but each process its own dropout
    main = rank == 0
    stats = {"tokens": 0, "curve": [], "lr": [], "cpu": 0.0, "valid_cpu": 0.0}

    def score_valid() -> float:
        cpu = time.process_time()
        acc = screened_exact_match(model, valid[:cfg.eval_examples], src_vocab, tgt_vocab, cfg)
        stats["valid_cpu"] += time.process_time() - cpu
        return acc

    if world > 1:
        parallel = DataParallelStep(model, optimizer, scheduler, cfg, rank, world, weighted=not args.plain_average)
        base_step, evaluate, agree = parallel, lambda: parallel.evaluate(score_valid), parallel.agree
    else:
        def base_step(batch):
            return train_step(model, batch, optimizer, scheduler, smoothing=cfg.smoothing)
        evaluate, agree = score_valid, None

    def step(batch) -> float:
        cpu = time.process_time()
        stats["tokens"] += int((batch[1][:, 1:] != tgt_vocab.pad_id).sum())
        loss = base_step(batch)
        stats["lr"].append(scheduler.get_last_lr()[0])
        stats["cpu"] += time.process_time() - cpu
        return loss

    def validate() -> float:
        acc = evaluate()
        if main and args.curve:  # the test curve, outside fit's clocks
            paused = time.perf_counter()
            test_acc = exact_match(model, test, src_vocab, tgt_vocab)[0]
            validate.excluded += time.perf_counter() - paused
            stats["curve"].append(test_acc)
        return acc

    validate.excluded = 0.0
    history = fit(model, cfg, train, valid[:cfg.eval_examples], src_vocab, tgt_vocab, optimizer, scheduler,
                  seed=seed, batch_size=cfg.batch_size * world, step=step, evaluate=validate, agree=agree,
                  progress=main and not args.quiet)
    eval_seconds = history.eval_seconds - validate.excluded
    result = {"seed": seed, "steps": history.steps, "train_s": history.train_seconds, "valid_s": eval_seconds,
              "cpu_s": stats["cpu"], "valid_cpu_s": stats["valid_cpu"], "tokens": stats["tokens"], "valid": history.valid_acc[-1],
              "loss": history.loss, "lr": stats["lr"], "eval_step": history.eval_step,
              "eval_time": history.eval_time, "valid_curve": history.valid_acc, "test_curve": stats["curve"]}
    if main:
        acc, predictions = exact_match(model, test[:cfg.test_examples], src_vocab, tgt_vocab)
        pairs = test[:cfg.test_examples]
        result.update(test=acc, by_length=accuracy_by_length(
            [digits_of(p, cfg.direction) for p in pairs], predictions, [t for _, t in pairs]),
            wrong=[(s, t, p) for (s, t), p in zip(pairs, predictions, strict=True) if p != t])
        if args.checkpoint:
            save_checkpoint(args.checkpoint, model, cfg, src_vocab, tgt_vocab, history.steps)
    if world > 1:
        import torch.distributed as dist

        dist.barrier()
    return result


# ---------------------------------------------------------------- reports


def print_run(r: dict, cfg: Preset, target: float) -> None:
    total = r["train_s"] + r["valid_s"]
    print(f"seed {r['seed']}: stopped after {r['steps']} steps at valid exact match {r['valid']:.2%}: "
          f"{r['train_s']:.1f} s training + {r['valid_s']:.1f} s validation = {total:.1f} s "
          f"({r['cpu_s']:.1f} s CPU training, {r['valid_cpu_s']:.1f} s CPU validation); test exact match {r['test']:.2%}"
          + ("" if r["test"] >= target else f"  (BELOW {target:.0%})"))
    if r["test_curve"]:
        first = next((i for i, a in enumerate(r["test_curve"]) if a >= target), None)
        curve = "  ".join(f"{s}:{v:.1%}/{t:.1%}" for s, v, t in zip(r["eval_step"], r["valid_curve"],
                                                                    r["test_curve"], strict=False))
        print(f"  step:valid/test  {curve}")
        if first is not None:
            print(f"  test first >= {target:.0%} at step {r['eval_step'][first]} "
                  f"({r['eval_time'][first]:.1f} s of training)")
    print()
    print("| digits | " + " | ".join(str(n) for n in r["by_length"]) + " |")
    print("| ---: | " + " | ".join("---:" for _ in r["by_length"]) + " |")
    print("| exact match | " + " | ".join(f"{c / t:.2%}" for c, t in r["by_length"].values()) + " |")
    print("| wrong / total | " + " | ".join(f"{t - c} / {t}" for c, t in r["by_length"].values()) + " |")
    if r["wrong"]:
        print(f"\n{len(r['wrong'])} wrong, e.g.: " + ";  ".join(f"{s} → {p} (not {t})" for s, t, p in r["wrong"][:6]))
    print(flush=True)


def print_summary(results: list[dict], target: float, threads: str) -> None:
    print("| seed | steps | training s | validation s | total s | training CPU s | validation CPU s "
          "| target tokens/s | valid | test |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in results:
        print(f"| {r['seed']} | {r['steps']} | {r['train_s']:.1f} | {r['valid_s']:.1f} | "
              f"{r['train_s'] + r['valid_s']:.1f} | {r['cpu_s']:.1f} | {r['valid_cpu_s']:.1f} | "
              f"{r['tokens'] / r['train_s']:,.0f} | {r['valid']:.2%} | {r['test']:.2%} |")
    totals = [r["train_s"] + r["valid_s"] for r in results]
    steps = [r["steps"] for r in results]
    ok = sum(r["test"] >= target for r in results)
    print()
    print(f"{ok} of {len(results)} runs reached >= {target:.0%} test exact match ({threads}); "
          f"steps median {statistics.median(steps):.0f} (min {min(steps)}, max {max(steps)}); "
          f"time to stop (training + validation) median {statistics.median(totals):.1f} s "
          f"(min {min(totals):.1f}, max {max(totals):.1f})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="cpu", choices=sorted(PRESETS))
    parser.add_argument("--direction", default="digits2zh", choices=["digits2zh", "zh2digits"])
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads (default: lesson 09's choose_threads(): $COURSE_THREADS, "
                             "else the cores free now)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="one run per seed")
    parser.add_argument("--test-target", type=float, default=0.99, help="test exact match to reach")
    parser.add_argument("--curve", action="store_true",
                        help="score the test split at every validation too (not timed)")
    parser.add_argument("--checkpoint", type=Path, help="save the last run's model here")
    parser.add_argument("--history", type=Path, help="write the runs' measurements here as JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--plain-average", action="store_true",
                        help="data-parallel only: DDP's plain gradient average instead of the "
                             "token-weighted one (not equal to a single-process step)")
    preset = parser.add_argument_group("changes to the preset (default: the preset's)")
    for name, kind in [("batch_size", int), ("lr_factor", float), ("warmup", int), ("decay_steps", int),
                       ("min_lr_ratio", float), ("oversample", int), ("eval_every", int),
                       ("eval_examples", int), ("screen_examples", int), ("screen_margin", float),
                       ("max_steps", int), ("max_minutes", float), ("smoothing", float), ("dropout", float)]:
        preset.add_argument("--" + name.replace("_", "-"), type=kind, dest=name)
    preset.add_argument("--noam-decay", action="store_const", const=None, default=0, dest="noam_decay",
                        help="decay_steps None: the paper's step^-0.5 decay after the warm-up")
    preset.add_argument("--batch-by-length", action="store_true", default=None, dest="batch_by_length",
                        help="batch numbers of similar length together (less padding, more steps)")
    preset.add_argument("--valid-target", type=float, dest="valid_target",
                        help="the valid exact match that stops training (the preset's target)")
    args = parser.parse_args(argv)

    changes = {k: v for k, v in vars(args).items()
               if v is not None and k in Preset.__dataclass_fields__ and k not in ("name", "direction")}
    if args.noam_decay is None:
        changes["decay_steps"] = None
    if args.valid_target is not None:
        changes["target"] = args.valid_target
    cfg = load_preset(args.preset, args.direction, **changes)
    rank, world = init_distributed()
    device = choose_device()
    if device.type == "cpu":
        torch.set_num_threads(args.threads or choose_threads())
    main_process = rank == 0

    train = load_numerals("train", cfg.direction)
    data = {"train": training_set(train, cfg), "valid": load_numerals("valid", cfg.direction),
            "test": load_numerals("test", cfg.direction),
            "src": CharVocab.build(s for s, _ in train), "tgt": CharVocab.build(t for _, t in train)}
    threads = (f"{torch.get_num_threads()} thread(s)" if device.type == "cpu"
               else torch.cuda.get_device_name(device))
    if main_process:
        n_params = sum(p.numel() for p in build_model(cfg, data["src"], data["tgt"]).parameters())
        print(f"{cfg}\n{n_params:,} parameters; {len(data['train']):,} training pairs "
              f"({len(data['train']) - len(train):,} of them repeated short numbers); device {device}, "
              f"{threads}; {world} process(es), global batch {cfg.batch_size * world}")
        print(f"load average at start: {os.getloadavg()[0]:.2f} ({os.cpu_count()} CPUs)\n", flush=True)

    results = []
    for seed in args.seeds:
        result = run(cfg, seed, data, device, rank, world, args)
        results.append(result)
        if main_process:
            print_run(result, cfg, args.test_target)
    if main_process:
        print_summary(results, args.test_target, threads)
        print(f"load average at end: {os.getloadavg()[0]:.2f}")
        if args.history:
            keep = ("seed", "steps", "train_s", "valid_s", "cpu_s", "valid_cpu_s", "tokens", "valid", "test", "loss", "lr",
                    "eval_step", "valid_curve", "test_curve")
            args.history.write_text(json.dumps({"preset": asdict(cfg), "world": world,
                                                "runs": [{k: r[k] for k in keep} for r in results]}))
    if world > 1:
        import torch.distributed as dist

        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
