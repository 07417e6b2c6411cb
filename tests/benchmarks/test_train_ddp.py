"""Data-parallel training (torchrun, DDP) of benchmarks/train_numerals.py equals one process
training on the same global batches: two CPU processes with the gloo backend against a
single process with twice the batch.

Tolerance. Each process averages the loss over its own target tokens; the gradients of
the processes are summed weighted by their share of the global batch's tokens, so in exact
arithmetic a data-parallel step IS the single-process step. In float32 the sums run in a
different order: the losses measured here differ by at most 2e-7 relative over 20 steps
(float32 resolves 6e-8). The test allows 5e-6. DDP's plain average of the processes'
gradients (`--plain-average`, every process weighted alike whatever its token count)
drifts to ~4e-4 in the same 20 steps, so the test tells the two apart.

Parameters are compared through what they compute (logits), not one by one: the key
projections' biases have an exactly zero gradient (softmax ignores a constant added to all
of a query's scores), Adam turns the float noise in it into full-size steps, and they drift
apart in both runs without changing any output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from support import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

pytestmark = pytest.mark.e2e

STEPS = 20
PER_PROCESS = 32
COMMON = ["--preset", "smoke", "--threads", "1", "--max-steps", str(STEPS), "--eval-every", "1000",
          "--max-minutes", "30", "--quiet", "--seeds", "3"]
TOLERANCE = 5e-6


def _torchrun(tmp_path, *extra: str) -> dict:
    history = tmp_path / "ddp.json"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                    str(ROOT / "benchmarks" / "train_numerals.py"), *COMMON, "--batch-size", str(PER_PROCESS),
                    "--history", str(history), *extra],
                   check=True, env=env, cwd=tmp_path, timeout=180, capture_output=True)
    return json.loads(history.read_text())


@pytest.fixture(scope="module")
def single(tmp_path_factory) -> dict:
    """One process, global batch 2 x PER_PROCESS, run in this interpreter."""
    import train_numerals

    tmp = tmp_path_factory.mktemp("single")
    threads = torch.get_num_threads()
    try:
        train_numerals.main([*COMMON, "--batch-size", str(2 * PER_PROCESS), "--history", str(tmp / "h.json"),
                             "--checkpoint", str(tmp / "model.pt")])
    finally:
        torch.set_num_threads(threads)
    return {"history": json.loads((tmp / "h.json").read_text()), "checkpoint": tmp / "model.pt"}


def _relative_gap(a: list[float], b: list[float]) -> float:
    assert len(a) == len(b) == STEPS
    return max(abs(x - y) / abs(y) for x, y in zip(a, b, strict=True))


def test_two_processes_train_like_one_on_the_global_batch(single, tmp_path) -> None:
    from coursekit.data import CharVocab, load_numerals, make_batches
    from coursekit.reference.lesson09 import load_checkpoint

    ddp = _torchrun(tmp_path, "--checkpoint", str(tmp_path / "ddp.pt"))
    one, two = single["history"]["runs"][0], ddp["runs"][0]
    assert ddp["world"] == 2 and single["history"]["world"] == 1
    assert ddp["preset"]["batch_size"] == PER_PROCESS
    # the loss of every step, and the learning rate (one noam step per global step)
    assert _relative_gap(two["loss"], one["loss"]) < TOLERANCE
    assert two["lr"] == pytest.approx(one["lr"], rel=1e-12)
    assert two["steps"] == one["steps"] == STEPS

    # the checkpoint, saved once by process 0, loads in the single-process code and
    # computes what the single-process model computes
    model_ddp, cfg, src_vocab, tgt_vocab = load_checkpoint(tmp_path / "ddp.pt")
    model_one, cfg_one, _, _ = load_checkpoint(single["checkpoint"])
    assert cfg.name == "smoke" and cfg.batch_size == PER_PROCESS and cfg_one.batch_size == 2 * PER_PROCESS
    pairs = load_numerals("valid")[:64]
    src, tgt = next(make_batches(pairs, src_vocab, tgt_vocab, 64, shuffle=False))
    with torch.no_grad():
        torch.testing.assert_close(model_ddp(src, tgt[:, :-1]), model_one(src, tgt[:, :-1]),
                                   rtol=1e-4, atol=1e-4)
    assert isinstance(src_vocab, CharVocab)


def test_plain_gradient_average_is_told_apart(single, tmp_path) -> None:
    """The tolerance is tight enough to catch DDP's unweighted average."""
    ddp = _torchrun(tmp_path, "--plain-average")
    assert _relative_gap(ddp["runs"][0]["loss"], single["history"]["runs"][0]["loss"]) > 20 * TOLERANCE
