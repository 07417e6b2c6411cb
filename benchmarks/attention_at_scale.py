"""Benchmark: lesson 12's attention at scale, memory and time, and grouped-query attention.

Three parts, each printed as a table (``--only memory|cache|gqa``):

- **memory**: the peak memory of plain attention (lesson 03's formula, the ``[L, L]`` scores) and
  of lesson 12's tiled ``flash_attention`` (blocks of ``--block``) on one sequence and one head of
  ``d = 64``, as L grows from 512 to 16,384 (``--lengths``). Each measurement runs in a child
  process of its own and reads that process's peak resident memory (``resource.getrusage``'s
  ``ru_maxrss``; Linux and macOS) before and after the call, so no run inherits another's peak.
  With ``--plot PATH`` the two curves are drawn on a log-log plot. Then the time of plain
  attention, the tiled version and ``F.scaled_dot_product_attention`` at one length (``--time-length``),
  measured side by side in alternating rounds, as ratios to the fastest.
- **cache**: the key-value cache per token of LLaMA-2-7B/70B, LLaMA-3-8B and Mistral-7B in 16 bits,
  with every head its own key-value head (MHA), as published (GQA) and with one (MQA), derived from
  their published head counts (lesson 12's ``CONFIGS``).
- **gqa**: lesson 10's model with lesson 12's ``GroupedQueryAttention``, trained side by side in one
  run with 4, 2 and 1 key-value heads and with a window (lesson 12's ``train_variants``, the
  ``--preset``'s sizes as lesson 12 shrinks them): parameters, steps to the target, time per step
  and cache as ratios to the first run, for each seed.

    python benchmarks/attention_at_scale.py --threads 1 --only memory --plot /tmp/memory.png
    python benchmarks/attention_at_scale.py --threads 2 --only gqa --seeds 0 1 2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from coursekit.data import load_numerals  # noqa: E402
from coursekit.reference import lesson10  # noqa: E402
from coursekit.reference.lesson12 import (  # noqa: E402
    CONFIGS,
    SMALLER,
    cache_bytes_per_token,
    flash_attention,
    plain_attention,
    train_variants,
    variants_of,
    variants_table,
)

# What a child process runs: one call of one method at one length; it prints the growth of its
# peak resident memory over the call, in bytes (ru_maxrss is KiB on Linux, bytes on macOS).
CHILD = r"""
import resource, sys
import torch
torch.set_num_threads(int(sys.argv[4]))
from coursekit.reference.lesson12 import flash_attention, plain_attention
method, L, block = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
g = torch.Generator().manual_seed(L)
q, k, v = (torch.randn(1, 1, L, 64, generator=g) for _ in range(3))
scale = 1 if sys.platform == "darwin" else 1024


def run(q, k, v):
    with torch.no_grad():
        if method == "plain":
            return plain_attention(q, k, v)
        return flash_attention(q, k, v, block_q=block, block_k=block)[0]


run(q[:, :, :64], k[:, :, :64], v[:, :, :64])        # warm up: the libraries' own first allocations
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
out = run(q, k, v)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print((after - before) * scale)
"""


def peak_in_child(method: str, length: int, block: int, threads: int) -> int:
    """Bytes by which one call raised the peak memory of a fresh process."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    done = subprocess.run([sys.executable, "-c", CHILD, method, str(length), str(block), str(threads)],
                          capture_output=True, text=True, check=True, env=env, cwd=ROOT)
    return int(done.stdout.split()[-1])


def memory(lengths: list[int], block: int, threads: int, plot: Path | None) -> None:
    rows = []
    print(f"{'L':>6} {'plain (MiB)':>12} {'tiled (MiB)':>12} {'plain / tiled':>14} {'[L, L] float32 (MiB)':>21}")
    for length in lengths:
        plain, tiled = (peak_in_child(m, length, block, threads) for m in ("plain", "tiled"))
        rows.append((length, plain, tiled))
        print(f"{length:>6} {plain / 2**20:>12.1f} {tiled / 2**20:>12.1f} {plain / max(tiled, 1):>14.1f} "
              f"{length * length * 4 / 2**20:>21.1f}", flush=True)
    print("(the growth of a fresh process's peak resident memory over one call; one head, d = 64, "
          f"blocks of {block}; small values are the allocator's granularity)")
    if plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 3.8))
        ax.loglog([r[0] for r in rows], [max(r[1], 1) / 2**20 for r in rows], "o-", label="plain attention")
        ax.loglog([r[0] for r in rows], [max(r[2], 1) / 2**20 for r in rows], "s-", label="tiled (flash_attention)")
        ax.set_xlabel("sequence length L")
        ax.set_ylabel("peak memory growth (MiB)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(plot, dpi=90)
        print(f"wrote {plot}")


def seconds(fn, *args, **kwargs) -> float:
    start = time.perf_counter()
    with torch.no_grad():
        fn(*args, **kwargs)
    return time.perf_counter() - start


def timing(length: int, block: int, rounds: int) -> None:
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 4, length, 64, generator=g) for _ in range(3))
    methods = {
        "plain attention (lesson 03)": lambda: plain_attention(q, k, v, causal=True),
        f"flash_attention (blocks of {block})": lambda: flash_attention(q, k, v, True, None, block, block),
        "F.scaled_dot_product_attention": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
    }
    best = dict.fromkeys(methods, float("inf"))
    for _ in range(rounds):                                   # alternating: the machine's drift hits all
        for name, run in methods.items():
            best[name] = min(best[name], seconds(run))
    fastest = min(best.values())
    print(f"causal attention, 4 heads, L = {length}, d = 64, {torch.get_num_threads()} thread(s), "
          f"best of {rounds} alternating rounds:")
    for name, t in best.items():
        print(f"  {name:<38} {t / fastest:6.1f} × the fastest")


def cache() -> None:
    print(f"{'model':<12} {'MHA (KiB)':>10} {'published (KiB)':>16} {'MQA (KiB)':>10} {'published / MHA':>16}")
    for name, (layers, heads, kv_heads, d_head) in CONFIGS.items():
        mha, gqa, mqa = (cache_bytes_per_token(layers, n, d_head) for n in (heads, kv_heads, 1))
        print(f"{name:<12} {mha / 1024:>10,.0f} {gqa / 1024:>16,.0f} {mqa / 1024:>10,.0f} {gqa / mha:>16.3f}")


def gqa(preset: str, seeds: list[int]) -> None:
    base = lesson10.load_preset(preset)
    cfg = replace(base, **SMALLER.get(base.name, {}))
    train_pairs, valid_pairs = load_numerals("train", cfg.direction), load_numerals("valid", cfg.direction)
    vocab = lesson10.build_vocab(train_pairs)
    print(json.dumps({k: v for k, v in vars(cfg).items() if not isinstance(v, tuple)}))
    for seed in seeds:
        results = train_variants(cfg, vocab, train_pairs, valid_pairs, variants_of(cfg.n_head), seed=seed)
        print(f"seed {seed}")
        print(variants_table(results, cfg.target))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("memory", "cache", "gqa"), default=None)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--lengths", type=int, nargs="+", default=[512, 1024, 2048, 4096, 8192, 16384])
    parser.add_argument("--block", type=int, default=256)
    parser.add_argument("--time-length", type=int, default=4096)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--plot", type=Path, default=None)
    parser.add_argument("--preset", default="cpu", choices=("smoke", "cpu", "gpu"))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    args = parser.parse_args(argv)
    threads = args.threads or lesson10.choose_threads()
    torch.set_num_threads(threads)
    if args.only in (None, "memory"):
        memory(args.lengths, args.block, threads, args.plot)
        timing(args.time_length, 128, args.rounds)
    if args.only in (None, "cache"):
        cache()
    if args.only in (None, "gqa"):
        gqa(args.preset, args.seeds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
