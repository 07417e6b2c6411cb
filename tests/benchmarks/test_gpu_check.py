"""benchmarks/gpu_check.py, the GPU check of lessons 09 and 10, as far as a CPU can take it: it refuses
at once without CUDA, and its parts run on the CPU with the smoke preset (`--cpu-smoke`).
(Its notebook part runs lesson 09 through papermill, as tests/lessons/test_training.py does.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from support import ROOT

SCRIPT = ROOT / "benchmarks" / "gpu_check.py"
pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: run the real check")]


def _run(*args: str, cwd) -> subprocess.CompletedProcess:
    env = dict(os.environ, COURSE_THREADS="1", OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=300)


def test_without_cuda_it_stops_at_once_and_says_why(tmp_path) -> None:
    result = _run("--out", str(tmp_path / "out"), cwd=tmp_path)
    assert result.returncode == 2
    assert "no CUDA device" in result.stderr and "--cpu-smoke" in result.stderr
    assert not (tmp_path / "out").exists()


def test_cpu_rehearsal_runs_the_paths_training_and_throughput_parts(tmp_path) -> None:
    """Lesson 09's parts and lesson 10's (its SDPA switch, KV cache, throughput, training)."""
    result = _run("--cpu-smoke", "--skip", "notebook", "--out", str(tmp_path), cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    parts = {p["part"]: p for p in report["parts"]}
    assert [parts[p]["result"] for p in ("paths", "notebook", "train", "throughput")] == [
        "ok", "skipped", "ok", "ok"]
    assert "greedy_decode_cached == greedy_decode" in parts["paths"]["detail"]
    assert "ours / nn.Transformer" in parts["throughput"]["detail"]
    assert [parts[p]["result"] for p in ("l10_paths", "l10_throughput", "l10_train")] == ["ok", "ok", "ok"]
    assert "greedy_answers (KV cache) == the model's own forward" in parts["l10_paths"]["detail"]
    assert "F.scaled_dot_product_attention" in parts["l10_throughput"]["detail"]
    assert "| throughput | ok |" in result.stdout
    assert (tmp_path / "train.pt").exists() and (tmp_path / "throughput.log").exists()
