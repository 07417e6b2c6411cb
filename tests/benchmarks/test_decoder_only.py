"""benchmarks/decoder_only.py's machine-independent lines: each seed's steps to the target, a run
that stopped short of it told apart (issue 52 counts steps to the target, not steps to stop)."""

from __future__ import annotations

import sys

from support import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import decoder_only  # noqa: E402


def _run(lesson: str, seed: int, steps: int, valid: float, cpu_s: float) -> dict:
    return {"lesson": lesson, "seed": seed, "steps": steps, "valid": valid, "target": 0.995, "cpu_s": cpu_s}


def test_a_run_that_stopped_short_of_the_target_is_not_counted_as_reaching_it() -> None:
    lines = decoder_only.machine_independent([
        _run("09", 0, 160, 0.9962, 16.0), _run("10", 0, 260, 0.9971, 39.0), _run("10", 2, 300, 0.9933, 45.0)])
    assert lines[0] == "steps to the target, lesson 09: 160 (seed 0)"
    assert lines[1] == ("steps to the target, lesson 10: 260 (seed 0), "
                        "not reached in 300 (seed 2: valid 99.33% < 99.5%)")


def test_the_cpu_time_per_step_is_lesson_10_over_lesson_09_over_all_their_steps() -> None:
    lines = decoder_only.machine_independent([_run("09", 0, 100, 1.0, 10.0), _run("10", 0, 200, 1.0, 30.0)])
    assert lines[-1] == ("CPU time per training step, lesson 10 / lesson 09: 1.50 (150 ms / 100 ms, "
                         "measured in this run)")
