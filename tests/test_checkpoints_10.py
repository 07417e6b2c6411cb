"""Lesson 10's checkpoints (visible cells tagged ``checkpoint``: RMSNorm, RoPE, SwiGLU, the
block, the model, each against PyTorch's own functions) are never stricter than the hidden
graders: the reference and every alternative correct solution of tests/planted/l10.py pass
all five, and a planted bug never fails a checkpoint before its own exercise's."""

from __future__ import annotations

import contextlib
import io
import re

import matplotlib.pyplot as plt
import pytest
from planted import Variant, l10

from coursekit import catalogue

LESSON = "10_decoder_only"
# The checkpoint after each exercise (rms_norm and RMSNorm share one, so do the two RoPE ones).
CHECKPOINT_OF = {"rms_norm": 1, "RMSNorm": 1, "rope_angles": 2, "apply_rope": 2, "SwiGLU": 3, "DecoderBlock": 4,
                 "DecoderLM": 5, "lm_loss": 6}


_MAGIC = re.compile(r"^\s*[%!].*$", re.M)


def run_checkpoints(nb: dict) -> list[tuple[int, str | None]]:
    """Run the setup and solution cells and every checkpoint, in notebook order, up to the
    last checkpoint (the training code after it is not needed); return (checkpoint, failure
    message or None) for each checkpoint."""
    cells = nb["cells"]
    last = max(i for i, c in enumerate(cells) if "checkpoint" in c.get("metadata", {}).get("tags", [])
               and '"Checkpoint' in c["source"])
    ns: dict = {"__name__": "__checkpoints__"}
    results = []
    for cell in cells[:last + 1]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        tags = cell.get("metadata", {}).get("tags", [])
        if cell["cell_type"] != "code" or (meta.get("grade") and not meta.get("solution")):
            continue                                   # markdown, autograder test cells
        if "demo" in tags and "checkpoint" not in tags:
            continue                                   # demonstrations
        source = _MAGIC.sub("", cell["source"])
        number = re.search(r'"Checkpoint (\d)', source)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(source, f"<{cell.get('id')}>", "exec"), ns)
        except Exception as exc:  # noqa: BLE001 - a failing checkpoint is the result
            if not number:
                raise
            results.append((int(number.group(1)), f"{type(exc).__name__}: {exc}"))
            continue
        if number:
            results.append((int(number.group(1)), None))
    plt.close("all")                                   # checkpoint 2 draws its scores
    return results


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
