"""Forward + backward of the course's MultiHeadAttention (lesson 04's reference, generated into
coursekit/reference/lesson04.py) against torch.nn.MultiheadAttention, side by side on CPU.

    python benchmarks/mha_vs_torch.py                 # B=32, L=64, d_model=256, 8 heads; 1 and 2 threads
    python benchmarks/mha_vs_torch.py --threads 1 --repeats 100 --check 1.2

Both modules hold the same weights (checked before timing) and run in training mode with
dropout 0 on the same input, self-attention, no mask. Runs alternate (ours, torch, ours,
torch, ...) so that a busy machine slows both alike; the table gives median times and the
ratio ours / torch (below 1: ours is faster). ``torch (need_weights=False)`` is PyTorch's
fused path that returns no weights; ours always keeps the per-head weights.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn as nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from coursekit.reference.lesson04 import MultiHeadAttention  # noqa: E402


def copy_weights(ours: MultiHeadAttention, theirs: nn.MultiheadAttention) -> None:
    wq, wk, wv = theirs.in_proj_weight.detach().chunk(3)
    bq, bk, bv = theirs.in_proj_bias.detach().chunk(3)
    ours.load_state_dict({
        "q_proj.weight": wq, "q_proj.bias": bq, "k_proj.weight": wk, "k_proj.bias": bk,
        "v_proj.weight": wv, "v_proj.bias": bv,
        "out_proj.weight": theirs.out_proj.weight.detach(), "out_proj.bias": theirs.out_proj.bias.detach(),
    })


def measure(threads: int, B: int, L: int, D: int, H: int, repeats: int, warmup: int) -> dict[str, float]:
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    theirs = nn.MultiheadAttention(D, H, batch_first=True)
    ours = MultiHeadAttention(D, H)
    copy_weights(ours, theirs)
    x = torch.randn(B, L, D)
    g = torch.randn(B, L, D)

    with torch.no_grad():
        diff = (ours(x, x, x) - theirs(x, x, x)[0]).abs().max().item()
    if diff > 1e-4:
        raise SystemExit(f"the two modules disagree (max |Δ| = {diff:.2e}): not timing them")

    def run_ours() -> None:
        xi = x.detach().requires_grad_(True)
        ours(xi, xi, xi).backward(g)

    def run_theirs() -> None:
        xi = x.detach().requires_grad_(True)
        theirs(xi, xi, xi)[0].backward(g)

    def run_theirs_fused() -> None:
        xi = x.detach().requires_grad_(True)
        theirs(xi, xi, xi, need_weights=False)[0].backward(g)

    runs = {"ours": run_ours, "torch": run_theirs, "torch_fused": run_theirs_fused}
    times: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(warmup):
        for fn in runs.values():
            fn()
    for _ in range(repeats):
        for name, fn in runs.items():
            ours.zero_grad(set_to_none=True)
            theirs.zero_grad(set_to_none=True)
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    med["ratio"] = med["ours"] / med["torch"]
    med["ratio_fused"] = med["ours"] / med["torch_fused"]
    return med


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--length", type=int, default=64)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--check", type=float, default=None,
                        help="exit 1 if ours / torch exceeds this ratio at any thread count")
    args = parser.parse_args(argv)

    print(f"MultiHeadAttention forward + backward, B={args.batch}, L={args.length}, "
          f"d_model={args.d_model}, heads={args.heads}, CPU, torch {torch.__version__}, "
          f"median of {args.repeats} alternating runs")
    header = f"{'threads':>7} | {'ours (ms)':>9} | {'torch (ms)':>10} | {'ours/torch':>10} | " \
             f"{'torch need_weights=False (ms)':>29} | {'ours/that':>9}"
    print(header)
    print("-" * len(header))
    worst = 0.0
    for threads in (int(t) for t in args.threads.split(",")):
        r = measure(threads, args.batch, args.length, args.d_model, args.heads, args.repeats, args.warmup)
        worst = max(worst, r["ratio"])
        print(f"{threads:>7} | {r['ours']:>9.2f} | {r['torch']:>10.2f} | {r['ratio']:>9.2f}x | "
              f"{r['torch_fused']:>29.2f} | {r['ratio_fused']:>8.2f}x")
    if args.check is not None:
        verdict = "met" if worst <= args.check else "NOT met"
        print(f"target ours/torch <= {args.check:.2f}x: {verdict} (worst {worst:.2f}x)")
        return 0 if worst <= args.check else 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
