"""Every grader is proven against planted mistakes and alternative correct solutions.

Each planted bug (tests/planted/lNN.py) must lose points on its exercise and on no other
(a mistake is charged once: grader.testkit.parts), the first hint the student reads there must
name the planted mistake (its id), and no hint anywhere may name a mistake that was not made. Alternatives keep full marks. Hidden inputs are drawn
from the grading run's seed, so a bug is caught on every draw only if it is caught under
many: the whole lesson runs under the first seed, the bug's own exercise under nine more
(the cost of a lesson-08 grading is mostly in the other exercises); alternatives run whole
under two.
"""

from __future__ import annotations

import ast
import json
from functools import cache

import pytest
import torch
from planted import Variant, modules
from support import ROOT, solution_path

from grader.check.engine import grade_in_process, in_process_submission, run_hidden_tests
from grader.check.messages import SHARED_MISTAKES
from grader.i18n import Message

pytestmark = pytest.mark.slow  # over ~30 s on 2 cores: out of the quick loop (-m "not slow")

SEEDS = (20260101, 8675309)
MORE_SEEDS = (8675309, 1, 2, 3, 5, 8, 13, 2**31 - 1, 987654321)  # with SEEDS[0]: ten draws
torch.set_num_threads(1)  # tiny tensors: threads only spin (and the suite shares its cores)
CASES = [(m.LESSON, v) for m in modules() for v in m.BUGS]
ALTERNATIVES = [(m.LESSON, v) for m in modules() for v in m.ALTERNATIVES]


@cache
def _notebook(lesson: str) -> str:
    nb = json.loads(solution_path(lesson).read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if isinstance(cell["source"], list):
            cell["source"] = "".join(cell["source"])
    return json.dumps(nb)


def _grade(lesson: str, variant: Variant, seed: int, only: set[str] | None = None):
    nb = variant.apply(json.loads(_notebook(lesson)))
    if only is None:
        report = grade_in_process(nb, lesson, seed=seed)
        return {e.name: e for e in report.exercises}
    sub = in_process_submission(nb)
    return {e.name: e for e in run_hidden_tests(sub, lesson, only=only, seed=seed)}


def _ids(cases):
    return [f"{les}:{v.description}" for les, v in cases]


def _check_bug(variant: Variant, results) -> None:
    target = results[variant.exercise]
    assert target.points < target.max_points, f"{variant.description} kept full marks"
    hints = target.hints
    assert hints and all(str(h.text) for h in hints), "a failed exercise must say why"
    for hint in hints:
        assert "def " not in str(hint.text) and "sub.call" not in str(hint.text), "messages must not show code"
    assert hints[0].mistake == variant.mistake, (
        f"the first hint should name {variant.mistake!r}, it is ({hints[0].mistake!r}) {hints[0]}")
    allowed = {variant.mistake, *variant.related, None}
    for name, result in results.items():
        for hint in result.hints:
            # a message, with its id: no string operation on the way made it plain English
            assert isinstance(hint.text, Message), f"{name}: a hint without an id: {hint.text!r}"
            assert hint.mistake in allowed, f"{name}: a hint names {hint.mistake!r}, which was not planted: {hint}"
    if variant.score is not None:
        assert target.points == pytest.approx(variant.score), "the rubric fixes this bug's score"
    charged_twice = {name: r.points for name, r in results.items()
                     if name != variant.exercise and r.points < r.max_points}
    assert not charged_twice, (f"{variant.description} also cost points on {charged_twice}: a mistake "
                               f"is charged once, to its own exercise (BUILDS_ON, grader.testkit.parts)")


@pytest.mark.parametrize(("lesson", "variant"), CASES, ids=_ids(CASES))
def test_planted_bug_is_named_by_the_first_hint(lesson: str, variant: Variant) -> None:
    _check_bug(variant, _grade(lesson, variant, SEEDS[0]))


@pytest.mark.parametrize(("lesson", "variant"), CASES, ids=_ids(CASES))
def test_planted_bug_is_caught_on_every_draw(lesson: str, variant: Variant) -> None:
    """Caught, and named first, whatever hidden inputs a run draws: under nine more seeds."""
    for seed in MORE_SEEDS:
        try:
            _check_bug(variant, _grade(lesson, variant, seed, only={variant.exercise}))
        except AssertionError as exc:
            raise AssertionError(f"under seed {seed}: {exc}") from None


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("lesson", "variant"), ALTERNATIVES, ids=_ids(ALTERNATIVES))
def test_alternative_solution_keeps_full_marks(lesson: str, variant: Variant, seed: int) -> None:
    results = _grade(lesson, variant, seed)
    lost = {k: r.hints for k, r in results.items() if r.points < r.max_points}
    assert not lost, f"{variant.description} lost points: {lost}"


def _declared(lesson: str) -> dict[str, str]:
    tree = ast.parse((ROOT / "grader" / "hidden" / f"test_{lesson}.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "MISTAKES" for t in node.targets):
            return ast.literal_eval(node.value)
    return {}


@pytest.mark.parametrize("module", modules(), ids=lambda m: m.LESSON)
def test_every_planted_mistake_is_declared_and_every_diagnosis_is_planted(module) -> None:
    declared = _declared(module.LESSON)
    assert declared, f"grader/hidden/test_{module.LESSON}.py declares no MISTAKES"
    planted = {v.mistake for v in module.BUGS} | {m for v in module.BUGS for m in v.related}
    for v in module.BUGS:
        assert v.mistake, f"{v.description}: a planted bug declares the mistake it plants"
    unknown = planted - set(declared) - set(SHARED_MISTAKES)
    assert not unknown, f"planted mistakes not in MISTAKES: {sorted(unknown)}"
    unplanted = set(declared) - planted
    assert not unplanted, f"diagnoses no planted bug proves: {sorted(unplanted)}"


BATCHED = ("04_multi_head_attention",)  # lessons whose graders send lazy batches (issue 29)
#: lessons whose graders send some calls lazily (issue 52): their alternatives over the wire
SOME_BATCHED = ("08_transformer", "11_generation")
OVER_THE_WIRE = [(les, v) for les, v in CASES + ALTERNATIVES if les in BATCHED] + \
    [(les, v) for les, v in ALTERNATIVES if les in SOME_BATCHED]


@pytest.mark.parametrize(("lesson", "variant"), OVER_THE_WIRE, ids=_ids(OVER_THE_WIRE))
def test_a_worker_grades_as_the_process_itself(lesson: str, variant: Variant) -> None:
    """Batched and lazily read requests cross a process boundary: a worker's submission
    gives every exercise the same points and hints as the in-process one."""
    from grader.check.launch import LocalWorker
    from grader.check.notebook import cells_to_run
    from grader.check.remote import RemoteSubmission
    from grader.common.limits import DEFAULT_LIMITS

    nb = variant.apply(json.loads(_notebook(lesson)))
    local = _grade(lesson, variant, SEEDS[0])
    worker = LocalWorker(DEFAULT_LIMITS)
    remote = RemoteSubmission(worker.sock, DEFAULT_LIMITS.call_s)
    try:
        remote.load(cells_to_run(nb), timeout=120)
        results = {e.name: e for e in run_hidden_tests(remote, lesson, seed=SEEDS[0])}
    finally:
        remote.close()
        worker.kill()
        worker.finish()
    assert {k: (r.points, [str(h) for h in r.hints]) for k, r in results.items()} == \
        {k: (r.points, [str(h) for h in r.hints]) for k, r in local.items()}
