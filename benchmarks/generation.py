"""Benchmark: lesson 11's generation, the KV cache's speed-up and beam search against greedy.

Two measurements, each printed as markdown tables (`--only cache` or `--only beam` for one):

1. **Cached against uncached generation.** Lesson 11's `generate(..., use_cache=True)` against
   `use_cache=False` (the whole sequence through lesson 10's `DecoderLM` at every step), greedy,
   on a model of the size of lesson 10's `cpu` preset (`--size gpu`: the `gpu` preset's sizes,
   float32, the lesson's own attention both ways) whose position tables are long enough for the
   prompt and the longest run. The weights are random, drawn by lesson 10's `init_weights` with
   a standard deviation of 0.2 (`--init-std`) instead of its 0.02, with which an untrained model
   repeats one token and the check that both ways give the same tokens would check little; the
   time of a step does not depend on the weights' values, only on the shapes. `eos_id=-1`, an id
   no argmax returns, makes every run produce all its tokens. The prompts are the first test
   numbers followed by "=", left-padded. Cached and uncached runs alternate in
   rounds (`--repeats`, fewer where one uncached run takes more than `--budget-s`); the tables
   give the medians of tokens per second (new tokens of all rows, by CPU time of the process on
   a CPU, by wall clock on a GPU), the median of the per-round speed-ups, and whether the two
   produced identical tokens (they must).
2. **Beam search against greedy** on lesson 09's trained encoder-decoder (the checkpoint
   `docs/figures/numerals_cpu.pt`, or `--checkpoint`): greedy (lesson 09's `translate`: cached,
   batched) on the whole test split, then `beam_search` with beams 1, 2, 4, 8 at α = 0.6 (the
   paper's setting) and beam 4 at α = 0 on a subset (`--limit N`: per digit count, the first of
   its share of N in the order of the file; 0: the whole split), by number length, with the CPU
   seconds each took, and which numbers beam search fixes or breaks relative to greedy. Beam
   search can fix only greedy's mistakes, which are few: every greedy mistake of the whole test
   split is also decoded by each beam, and counted apart.

    python benchmarks/generation.py --threads 1                        # both, cpu size
    python benchmarks/generation.py --threads 1 --only cache --batches 1 16 --lengths 32 128 512
    python benchmarks/generation.py --threads 1 --only beam --limit 700
    python benchmarks/generation.py --threads 1 --only beam --limit 0 --beams 4 --extra-alpha   # whole split
    python benchmarks/generation.py --only cache --size gpu            # on a CUDA GPU

Everything comes from the lessons' generated modules (coursekit.reference.lesson09, lesson10 and
lesson11).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from coursekit.data import accuracy_by_length, load_numerals  # noqa: E402
from coursekit.reference import lesson09, lesson10  # noqa: E402
from coursekit.reference.lesson11 import beam_search, generate  # noqa: E402

CHECKPOINT = ROOT / "docs" / "figures" / "numerals_cpu.pt"


def _clock(device: torch.device) -> tuple[float, float]:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter(), time.process_time()


def _seconds(start: tuple[float, float], device: torch.device) -> tuple[float, float]:
    """(seconds by the benchmark's clock: CPU time of the process on a CPU, wall on a GPU; wall)."""
    wall, cpu = _clock(device)
    wall -= start[0]
    return (cpu - start[1] if device.type == "cpu" else wall), wall


# --- 1. cached against uncached generation ------------------------------------------------------

def cache_model(size: str, vocab_size: int, max_len: int, pad_id: int, device: torch.device,
                init_std: float = 0.2, seed: int = 0) -> torch.nn.Module:
    """A DecoderLM with the preset's sizes and position tables for max_len positions, random
    weights by lesson 10's init_weights with init_std, in eval mode (no SDPA, no autocast)."""
    cfg = replace(lesson10.load_preset(size), init_std=init_std)
    torch.manual_seed(seed)
    model = lesson10.DecoderLM(vocab_size, d_model=cfg.d_model, n_head=cfg.n_head, n_layer=cfg.n_layer,
                               d_ff=cfg.d_ff, max_len=max_len, dropout=0.0, pad_id=pad_id)
    return lesson10.init_weights(model, cfg).to(device).eval()


def measure_cache(args: argparse.Namespace, device: torch.device) -> list[dict]:
    train = load_numerals("train", "digits2zh")
    vocab = lesson10.build_vocab(train)
    sources = [s for s, _ in load_numerals("test", "digits2zh")]
    results = []
    for batch in args.batches:
        prompt = lesson10.prompt_batch(sources[:batch], vocab).to(device)
        model = cache_model(args.size, len(vocab), prompt.size(1) + max(args.lengths), vocab.pad_id, device,
                            args.init_std)
        if batch == args.batches[0]:
            params = sum(p.numel() for p in model.parameters())
            print(f"model: lesson 10's DecoderLM, `{args.size}` preset's sizes, {params:,} parameters, "
                  f"vocabulary {len(vocab)}, position tables for {prompt.size(1) + max(args.lengths)} "
                  f"positions, random weights (init_weights, std {args.init_std:g})", flush=True)
        for use_cache in (True, False):   # warm-up: first calls, allocator
            generate(model, prompt, 4, eos_id=-1, use_cache=use_cache)
        for new in args.lengths:
            runs: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
            outputs: dict[bool, torch.Tensor] = {}
            for r in range(args.repeats):
                for use_cache in ((True, False) if r % 2 == 0 else (False, True)):
                    start = _clock(device)
                    out = generate(model, prompt, new, eos_id=-1, use_cache=use_cache)
                    runs[use_cache].append(_seconds(start, device))
                    outputs.setdefault(use_cache, out)
                if runs[False][-1][0] > args.budget_s:
                    break
            tokens = batch * new
            assert outputs[True].shape == (batch, prompt.size(1) + new), outputs[True].shape
            ratios = [u[0] / c[0] for c, u in zip(runs[True], runs[False], strict=True)]
            result = {"batch": batch, "new": new, "prompt": prompt.size(1), "rounds": len(ratios),
                      "identical": torch.equal(outputs[True], outputs[False]),
                      "distinct": int(outputs[True][:, prompt.size(1):].unique().numel()),
                      "speedup": statistics.median(ratios), "speedup_range": (min(ratios), max(ratios))}
            for use_cache, name in ((True, "cached"), (False, "uncached")):
                result[name] = tokens / statistics.median(s for s, _ in runs[use_cache])
                result[name + "_wall"] = tokens / statistics.median(w for _, w in runs[use_cache])
            results.append(result)
            print(f"  batch {batch}, {new} new tokens: cached {result['cached']:,.0f} tokens/s, uncached "
                  f"{result['uncached']:,.0f}, speed-up {result['speedup']:.1f}× "
                  f"({len(ratios)} round(s)); identical: {result['identical']}, {result['distinct']} distinct "
                  "tokens", flush=True)
    return results


def print_cache(results: list[dict], clock: str) -> None:
    print(f"\nTokens per second of {clock} (new tokens of all rows; wall clock in brackets), "
          "median of the rounds; speed-up: median of the per-round ratios (min–max)\n")
    print("| batch | new tokens | rounds | cached tokens/s | uncached tokens/s | speed-up | identical tokens "
          "| distinct tokens |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |")
    for r in results:
        low, high = r["speedup_range"]
        spread = f" ({low:.1f}–{high:.1f})" if r["rounds"] > 1 else ""
        print(f"| {r['batch']} | {r['new']} | {r['rounds']} | {r['cached']:,.0f} ({r['cached_wall']:,.0f}) | "
              f"{r['uncached']:,.0f} ({r['uncached_wall']:,.0f}) | **{r['speedup']:.1f}×**{spread} | "
              f"{'yes' if r['identical'] else 'NO'} | {r['distinct']} |")


# --- 2. beam search against greedy --------------------------------------------------------------

def stratified(pairs: list[tuple[str, str]], limit: int, direction: str) -> list[tuple[str, str]]:
    """Per digit count, the first round(limit · its share) pairs (at least one), in file order."""
    if not limit or limit >= len(pairs):
        return list(pairs)
    counts: dict[int, int] = {}
    for pair in pairs:
        n = len(lesson09.digits_of(pair, direction))
        counts[n] = counts.get(n, 0) + 1
    quota = {n: max(1, round(limit * c / len(pairs))) for n, c in counts.items()}
    taken: dict[int, int] = {}
    out = []
    for pair in pairs:
        n = len(lesson09.digits_of(pair, direction))
        if taken.get(n, 0) < quota[n]:
            taken[n] = taken.get(n, 0) + 1
            out.append(pair)
    return out


def beam_translate(model, sources: list[str], src_vocab, tgt_vocab, beam: int, alpha: float,
                   max_len: int, device: torch.device) -> list[str]:
    """beam_search on every source; sources of one length go together (no padding)."""
    out = [""] * len(sources)
    by_length: dict[int, list[int]] = {}
    for i, s in enumerate(sources):
        by_length.setdefault(len(s), []).append(i)
    for rows in by_length.values():
        for start in range(0, len(rows), 256):
            chunk = rows[start:start + 256]
            src = torch.tensor([src_vocab.encode(sources[i], add_eos=True) for i in chunk], device=device)
            ys = beam_search(model, src, beam, max_len, tgt_vocab.bos_id, tgt_vocab.eos_id, length_penalty=alpha)
            for i, row in zip(chunk, ys.tolist(), strict=True):
                out[i] = tgt_vocab.decode(row)
    return out


def measure_beam(args: argparse.Namespace, device: torch.device) -> None:
    model, cfg, src_vocab, tgt_vocab = lesson09.load_checkpoint(args.checkpoint, device)
    direction = cfg.direction
    test = load_numerals("test", direction)
    subset = stratified(test, args.limit, direction)
    print(f"checkpoint {args.checkpoint} ({direction}, d_model {cfg.d_model}, {cfg.layers} + {cfg.layers} "
          f"layers, {sum(p.numel() for p in model.parameters()):,} parameters); test split {len(test):,} "
          f"numbers, subset {len(subset):,} (--limit {args.limit}); max_len {args.max_len}", flush=True)

    start = _clock(device)
    greedy_all = lesson09.translate(model, [s for s, _ in test], src_vocab, tgt_vocab, max_len=args.max_len)
    greedy_all_s = _seconds(start, device)[0]
    greedy_of = {s: p for (s, _), p in zip(test, greedy_all, strict=True)}
    mistakes = [(s, t) for s, t in test if greedy_of[s] != t]
    print(f"greedy on the whole test split: {sum(greedy_of[s] == t for s, t in test) / len(test):.2%} "
          f"({len(mistakes)} wrong), {greedy_all_s:.2f} s", flush=True)

    def digits(pairs):
        return [lesson09.digits_of(p, direction) for p in pairs]

    start = _clock(device)
    greedy = lesson09.translate(model, [s for s, _ in subset], src_vocab, tgt_vocab, max_len=args.max_len)
    greedy_s = _seconds(start, device)[0]
    refs = [t for _, t in subset]
    rows = [{"name": "greedy (`translate`: cached, batched)", "alpha": None, "pred": greedy, "seconds": greedy_s,
             "fixed_all": None}]
    configs = [(b, args.alpha) for b in args.beams] + [(b, a) for b in (4,) for a in args.extra_alpha]
    for beam, alpha in configs:
        start = _clock(device)
        pred = beam_translate(model, [s for s, _ in subset], src_vocab, tgt_vocab, beam, alpha, args.max_len,
                              device)
        seconds = _seconds(start, device)[0]
        on_mistakes = beam_translate(model, [s for s, _ in mistakes], src_vocab, tgt_vocab, beam, alpha,
                                     args.max_len, device)
        rows.append({"name": f"beam {beam}", "alpha": alpha, "pred": pred, "seconds": seconds, "beam": beam,
                     "fixed_all": [(s, t, greedy_of[s], p) for (s, t), p in zip(mistakes, on_mistakes, strict=True)
                                   if p == t],
                     "mistakes": [(s, t, greedy_of[s], p) for (s, t), p in zip(mistakes, on_mistakes, strict=True)]})
        print(f"  beam {beam}, α {alpha}: {sum(p == t for p, t in zip(pred, refs, strict=True)) / len(refs):.2%} "
              f"in {seconds:.1f} s", flush=True)

    lengths = sorted(accuracy_by_length(digits(subset), greedy, refs))
    print(f"\nExact match on the subset ({len(subset):,} numbers), correct / total per digit count; seconds of "
          "CPU time (wall on a GPU) for the subset; fixed / broken: numbers of the subset that greedy got "
          "wrong and the beam right / the other way round; same as greedy: identical outputs\n")
    print("| decoding | α | exact match | " + " | ".join(f"{n} digits" for n in lengths)
          + " | seconds | ms per number | same as greedy | fixed | broken |")
    print("| --- | ---: | ---: | " + " | ".join("---:" for _ in lengths) + " | ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        pred = row["pred"]
        by_length = accuracy_by_length(digits(subset), pred, refs)
        exact = sum(p == t for p, t in zip(pred, refs, strict=True)) / len(refs)
        same = sum(p == g for p, g in zip(pred, greedy, strict=True))
        fixed = [(s, t, g, p) for (s, t), g, p in zip(subset, greedy, pred, strict=True) if g != t and p == t]
        broken = [(s, t, g, p) for (s, t), g, p in zip(subset, greedy, pred, strict=True) if g == t and p != t]
        row["broken"] = broken
        alpha = "" if row["alpha"] is None else f"{row['alpha']:g}"
        cells = " | ".join(f"{by_length[n][0]} / {by_length[n][1]}" for n in lengths)
        print(f"| {row['name']} | {alpha} | {exact:.2%} | {cells} | {row['seconds']:.1f} | "
              f"{1000 * row['seconds'] / len(subset):.1f} | {same} | {len(fixed)} | {len(broken)} |")

    print(f"\nGreedy's {len(mistakes)} mistakes on the whole test split ({len(test):,} numbers), decoded by each "
          "beam: how many it gets right, and how many it changes without getting them right\n")
    print("| decoding | α | fixed | changed, still wrong |")
    print("| --- | ---: | ---: | ---: |")
    for row in rows[1:]:
        changed = sum(p != g and p != t for _, t, g, p in row["mistakes"])
        print(f"| {row['name']} | {row['alpha']:g} | {len(row['fixed_all'])} / {len(mistakes)} | {changed} |")
    print()
    for row in rows[1:]:
        label = f"beam {row['beam']}, α {row['alpha']:g}"
        if row["fixed_all"]:
            print(f"{label}, fixed (number: greedy → beam): "
                  + ";  ".join(f"{s}: {g} → {p}" for s, _, g, p in row["fixed_all"][:args.examples]))
        if row["broken"]:
            print(f"{label}, broken (number: greedy → beam, of the subset): "
                  + ";  ".join(f"{s}: {g} → {p}" for s, _, g, p in row["broken"][:args.examples]))
    fixed_by_any = {s for row in rows[1:] for s, *_ in row["fixed_all"]}
    unfixed = [(s, t) for s, t in mistakes if s not in fixed_by_any]
    if unfixed:
        print(f"fixed by no beam: {len(unfixed)}, e.g. (number: greedy, not reference): "
              + ";  ".join(f"{s}: {greedy_of[s]}, not {t}" for s, t in unfixed[:args.examples]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["cache", "beam"], help="one of the two measurements")
    parser.add_argument("--threads", type=int, default=None,
                        help="CPU threads (default: lesson 09's choose_threads(): $COURSE_THREADS, else the "
                             "cores free now)")
    cache = parser.add_argument_group("1. cached against uncached generation")
    cache.add_argument("--size", default="cpu", choices=["cpu", "gpu"],
                       help="the sizes of lesson 10's preset of that name (default cpu)")
    cache.add_argument("--lengths", type=int, nargs="+", default=[32, 128, 512], help="new tokens per run")
    cache.add_argument("--batches", type=int, nargs="+", default=[1, 16], help="prompts per run")
    cache.add_argument("--repeats", type=int, default=3, help="rounds (one cached and one uncached run each)")
    cache.add_argument("--init-std", type=float, default=0.2,
                       help="standard deviation of the random weights (default 0.2; lesson 10's 0.02 makes "
                            "an untrained model repeat one token)")
    cache.add_argument("--budget-s", type=float, default=20.0,
                       help="no further round once an uncached run took longer than this (default 20 s)")
    beam = parser.add_argument_group("2. beam search against greedy")
    beam.add_argument("--checkpoint", type=Path, default=CHECKPOINT,
                      help="lesson 09's checkpoint (default docs/figures/numerals_cpu.pt)")
    beam.add_argument("--limit", type=int, default=700,
                      help="numbers of the test split decoded by beam search, stratified by digit count "
                           "(default 700; 0: all 5,247)")
    beam.add_argument("--beams", type=int, nargs="+", default=[1, 2, 4, 8])
    beam.add_argument("--alpha", type=float, default=0.6, help="length penalty α of --beams (the paper's 0.6)")
    beam.add_argument("--extra-alpha", type=float, nargs="*", default=[0.0],
                      help="further α for beam 4 (default 0)")
    beam.add_argument("--max-len", type=int, default=20, help="tokens of a translation, <bos> included")
    beam.add_argument("--examples", type=int, default=5, help="examples printed per kind")
    args = parser.parse_args(argv)

    device = lesson10.choose_device()
    if device.type == "cpu":
        torch.set_num_threads(args.threads or lesson09.choose_threads())
    where = (f"{torch.get_num_threads()} thread(s)" if device.type == "cpu"
             else torch.cuda.get_device_name(device))
    print(f"device {device}, {where}; torch {torch.__version__}; "
          f"load average at start: {os.getloadavg()[0]:.2f} ({os.cpu_count()} CPUs)\n", flush=True)
    if args.only in (None, "cache"):
        print("## 1. Cached against uncached generation (greedy, eos never produced)\n")
        results = measure_cache(args, device)
        print_cache(results, "CPU time" if device.type == "cpu" else "wall clock")
        if not all(r["identical"] for r in results):
            print("\nCACHED AND UNCACHED TOKENS DIFFER")
        print(flush=True)
    if args.only in (None, "beam"):
        print("## 2. Beam search against greedy (lesson 09's trained model)\n")
        measure_beam(args, device)
    print(f"\nload average at end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
