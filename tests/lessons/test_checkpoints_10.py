"""Lesson 10's checkpoints (visible cells tagged ``checkpoint``: RMSNorm, RoPE, SwiGLU, the
block, the model, each against PyTorch's own functions) are never stricter than the hidden
graders: the reference and every alternative correct solution of tests/planted/l10.py pass
all five, and a planted bug never fails a checkpoint before its own exercise's."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest
import support
from planted import Variant, l10

from coursekit import catalogue

LESSON = "10_decoder_only"
# The checkpoint after each exercise (rms_norm and RMSNorm share one, so do the two RoPE ones).
CHECKPOINT_OF = {"rms_norm": 1, "RMSNorm": 1, "rope_angles": 2, "apply_rope": 2, "SwiGLU": 3, "DecoderBlock": 4,
                 "DecoderLM": 5, "lm_loss": 6}


def run_checkpoints(nb: dict) -> list[tuple[int, str | None]]:
    """Each checkpoint's failure or None, run up to the last one (the training code after
    it is not needed)."""
    try:
        return support.run_checkpoints(nb, through_last=True)
    finally:
        plt.close("all")                               # checkpoint 2 draws its scores


def _notebook(variant: Variant | None = None) -> dict:
    nb = catalogue.read_json(catalogue.get(LESSON).solution())
    return variant.apply(nb) if variant else nb


def test_the_reference_passes_all_five_checkpoints() -> None:
    results = run_checkpoints(_notebook())
    assert [part for part, _ in results] == [1, 2, 3, 4, 5]
    assert all(failure is None for _, failure in results), results


@pytest.mark.parametrize("variant", l10.ALTERNATIVES, ids=[v.description for v in l10.ALTERNATIVES])
def test_no_checkpoint_rejects_an_alternative_correct_solution(variant: Variant) -> None:
    failed = [(part, failure) for part, failure in run_checkpoints(_notebook(variant)) if failure]
    assert not failed, f"{variant.description}: a checkpoint is stricter than the hidden graders: {failed}"


@pytest.mark.parametrize("variant", l10.BUGS, ids=[v.description for v in l10.BUGS])
def test_a_planted_bug_fails_no_earlier_checkpoint(variant: Variant) -> None:
    failed = [p for p, failure in run_checkpoints(_notebook(variant)) if failure]
    assert not failed or failed[0] >= CHECKPOINT_OF[variant.exercise], \
        f"{variant.description} ({variant.exercise}) first failed checkpoint {failed[0]}"
