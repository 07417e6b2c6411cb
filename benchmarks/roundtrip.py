"""Benchmark: the CPU one request to a worker costs, on each side, before and after.

    python benchmarks/roundtrip.py --before HEAD~3 --rounds 5 --requests 300

A hidden test reaches the student's code in a worker process (``grader.check.launch.
LocalWorker``, the worker ``python -m grader.runtime.worker``) through ``RemoteSubmission``.
Each round starts a fresh worker for the course at ``--before`` (a git revision, extracted
to a temporary folder) and one for this copy, alternately, loads a small torch notebook
into it and sends ``--requests`` requests of each kind:

- ``call tensor``: ``sub.call("scale", x)``, a 4 x 8 tensor in, one out;
- ``call module``: ``sub.call("apply", model, x)``: a module (a handle) and a tensor in;
- ``method``: ``model(x)``, the module's own ``__call__`` through its handle;
- ``has``: ``sub.has("scale")``;
- ``batch of 20``: twenty ``call tensor`` in one ``sub.batch()``, per call;
- ``sum of five``: the sum of the five, round by round (a full garbage collection of the
  objects torch made costs tens of ms: the case it falls in varies, their sum less).

Per request, the median over the rounds of CPU time (user + system) in microseconds: the
trusted side (this process's ``time.process_time``) and the worker (its ``/proc`` times,
read before and after: 10 ms ticks, hence many requests). CPU, not wall-clock, time: the
figure to compare on a busy machine. Linux only (``/proc``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from check_latency import extract  # noqa: E402 - the benchmarks folder is not a package

CASES = ("call tensor", "call module", "method", "has", "batch of 20")
ALL = "sum of five"

CELLS = '''
import torch

def scale(x):
    return x * 2.0

def apply(model, x):
    return model(x)

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8)
        self.b = torch.nn.Linear(8, 8)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))
'''

CHILD = r'''
import gc, json, os, sys, time
sys.path.insert(0, sys.argv[1])
n = int(sys.argv[2])
import torch
from grader.check.launch import LocalWorker
from grader.check.remote import RemoteSubmission

TICK = os.sysconf("SC_CLK_TCK")

def worker_cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK

worker = LocalWorker()
sub = RemoteSubmission(worker.sock)
sub.load([(0, sys.argv[3])], timeout=120)
model = sub.new("Net")
x = torch.randn(4, 8)

def batch():
    with sub.batch() as b:
        outs = [b.call("scale", x) for _ in range(20)]
    return [o.value for o in outs]

cases = {
    "call tensor": (lambda: sub.call("scale", x), 1),
    "call module": (lambda: sub.call("apply", model, x), 1),
    "method": (lambda: model(x), 1),
    "has": (lambda: sub.has("scale"), 1),
    "batch of 20": (batch, 20),
}
gc.collect()  # the collections torch's import left due: not the first case's cost
out = {}
for name, (fn, per) in cases.items():
    for _ in range(20):
        fn()  # warm: first-time paths on both sides
    reps = max(n // per, 10)
    t0, w0 = time.process_time(), worker_cpu(worker.pid)
    for _ in range(reps):
        fn()
    t1, w1 = time.process_time(), worker_cpu(worker.pid)
    out[name] = {"trusted": (t1 - t0) / (reps * per) * 1e6, "worker": (w1 - w0) / (reps * per) * 1e6}
sub.close()
worker.finish()
print(json.dumps(out))
'''


def run(tree: Path, requests: int) -> dict[str, dict[str, float]]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    done = subprocess.run([sys.executable, "-c", CHILD, str(tree), str(requests), CELLS],
                          cwd=tree, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the run in {tree} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", default="HEAD", help="git revision to compare with (default HEAD)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=300, help="requests of each kind per round")
    args = parser.parse_args()
    samples: dict[str, list[dict[str, dict[str, float]]]] = {"before": [], "now": []}
    with tempfile.TemporaryDirectory(prefix="roundtrip-") as tmp:
        trees = {"before": extract(args.before, Path(tmp)), "now": ROOT}
        for _ in range(args.rounds):  # alternated: a change in the load falls on both
            for variant, tree in trees.items():
                samples[variant].append(run(tree, args.requests))

    def median(variant: str, case: str, side: str) -> float:
        if case == ALL:  # where a full garbage collection falls varies: their sum does less
            return statistics.median(sum(s[c][side] for c in CASES) for s in samples[variant])
        return statistics.median(s[case][side] for s in samples[variant])

    print(f"CPU per request, µs (median of {args.rounds} rounds, {args.requests} requests each; "
          f"before = {args.before})")
    print(f"{'request':<14}{'trusted before':>16}{'trusted now':>13}{'worker before':>15}"
          f"{'worker now':>12}{'total before':>14}{'total now':>11}")
    for case in (*CASES, ALL):
        tb, tn = median("before", case, "trusted"), median("now", case, "trusted")
        wb, wn = median("before", case, "worker"), median("now", case, "worker")
        print(f"{case:<14}{tb:>16.0f}{tn:>13.0f}{wb:>15.0f}{wn:>12.0f}{tb + wb:>14.0f}{tn + wn:>11.0f}")


if __name__ == "__main__":
    main()
