"""Lesson 08's checkpoints (visible cells tagged ``checkpoint`` after each of its five parts)
say which part is wrong, and are never stricter than the hidden graders: every
alternative correct solution of tests/planted/l08.py passes all of them, and a planted
bug is never blamed on an earlier part than its own."""

from __future__ import annotations

import json

import pytest
from planted import Variant, l08
from support import run_checkpoints, solution_path

LESSON = "08_transformer"
PARTS = ["PositionwiseFeedForward", "EncoderLayer", "DecoderLayer", "Transformer", "greedy_decode"]


def _notebook(variant: Variant | None = None) -> dict:
    nb = json.loads(solution_path(LESSON).read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        cell["source"] = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
    return variant.apply(nb) if variant else nb


def test_the_reference_passes_all_five_checkpoints() -> None:
    results = run_checkpoints(_notebook())
    assert [part for part, _ in results] == [1, 2, 3, 4, 5]
    assert all(failure is None for _, failure in results), results


@pytest.mark.parametrize("variant", l08.ALTERNATIVES, ids=[v.description for v in l08.ALTERNATIVES])
def test_no_checkpoint_rejects_an_alternative_correct_solution(variant: Variant) -> None:
    failed = [(part, failure) for part, failure in run_checkpoints(_notebook(variant)) if failure]
    assert not failed, f"{variant.description}: a checkpoint is stricter than the hidden graders: {failed}"


@pytest.mark.parametrize("variant", l08.BUGS, ids=[v.description for v in l08.BUGS])
def test_a_planted_bug_is_blamed_on_its_own_part(variant: Variant) -> None:
    part = PARTS.index(variant.exercise) + 1
    failed = [(p, failure) for p, failure in run_checkpoints(_notebook(variant)) if failure]
    if failed:
        first, message = failed[0]
        assert first == part, f"{variant.description} (part {part}) first failed checkpoint {first}: {message}"
        assert f"Part {part}" in message, message


def test_the_checkpoints_catch_most_planted_bugs() -> None:
    caught = {p: 0 for p in range(1, 6)}
    total = {p: 0 for p in range(1, 6)}
    for variant in l08.BUGS:
        part = PARTS.index(variant.exercise) + 1
        total[part] += 1
        caught[part] += any(p == part and f for p, f in run_checkpoints(_notebook(variant)))
    # Dropout is invisible in eval mode, and some bugs only the hidden graders' extra
    # cases reveal; the checkpoints must still catch most mistakes of every part.
    for p in total:
        assert caught[p] >= total[p] // 2, f"checkpoint {p} caught {caught[p]} of {total[p]} planted bugs"
