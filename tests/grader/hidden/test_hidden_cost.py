"""What a lesson's hidden tests cost, in machine-independent counts (issue 52: a warm check
answers at once, and its time is the hidden tests' own work): the objects they build in the
submission, the forwards they run, the tiles a watched call walks through."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import pytest
import torch
from support import solution_path

from grader.check.engine import quiet, run_hidden_tests
from grader.check.notebook import cells_to_run, read_notebook
from grader.hidden import test_12_attention_at_scale as l12
from grader.testkit.framework import grading_run
from grader.testkit.submission import InProcessSubmission

torch.set_num_threads(1)


class CountingSubmission(InProcessSubmission):
    """An in-process submission that counts what the hidden tests ask of it."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()
        self._posting = False

    def _post(self, op: str, header: dict[str, Any], value: Any = None, later: Any = None) -> None:
        """Sent without waiting (a worker's submission runs it while the check goes on)."""
        self._posting = True
        try:
            super()._post(op, header, value, later)
        finally:
            self._posting = False

    def _request(self, op: str, header: dict[str, Any], value: Any = None) -> Any:
        target, method = header.get("target"), header.get("method")
        self.counts["requests"] += 1
        if not self._posting:  # the check waits for its answer: nothing of its own runs meanwhile
            self.counts["waited"] += 1
        if op == "call" and method is None and isinstance(target, str) and target[:1].isupper():
            self.counts["built"] += 1  # a class of the notebook (or the course's version of it)
        if op == "call" and method in ("__call__", "encode", "decode"):
            self.counts["forwards"] += 1
        if op == "fixture":
            self.counts[f"fixture {header.get('name')}"] += 1
        return super()._request(op, header, value)


def _counts(lesson: str, seed: int) -> Counter[str]:
    sub = CountingSubmission()
    with quiet():
        sub.load(cells_to_run(read_notebook(solution_path(lesson))))
        results = run_hidden_tests(sub, lesson, seed=seed)
    assert all(r.points == r.max_points for r in results)
    return sub.counts


@pytest.mark.parametrize("seed", [1, 2])
def test_lesson_08_builds_each_model_once_and_batches_its_variants(seed: int) -> None:
    """One Transformer per configuration and one layer per branch in a grading run (the
    structure test's pre-LN model is test_transformer_pre_ln_logits's), the causality and
    padding variants in one forward each, the dropout checks reading shapes and loading only
    the weights they change (before: 31 objects, 63 forwards, 299 requests; then 17 objects,
    213 requests; then 50 forwards, 205 requests, before each layer's refusal of torch's
    attention ran in its first checked call instead of a call of its own)."""
    counts = _counts("08_transformer", seed)
    assert counts["built"] <= 16, counts
    assert counts["forwards"] <= 46, counts
    assert counts["requests"] <= 198, counts


@pytest.mark.parametrize("seed", [1, 2])
def test_lesson_08_audits_the_smallest_calls(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The device audit (grader.runtime.device) costs every torch operation of an audited call
    a Python call: lesson 08 audits a Transformer with one layer per stack (the model's own
    code, masks, embeddings and loops, all runs) and a decoding whose rows end in three steps
    (before: the padding test's two-layer model and up to six steps, 687 to 779 operations)."""
    from grader.runtime import device

    seen = Counter[str]()
    handle = device._Audit.handle

    def counted(self: Any, func: Any, args: tuple, kwargs: dict) -> Any:
        seen["operations"] += 1
        return handle(self, func, args, kwargs)

    monkeypatch.setattr(device._Audit, "handle", counted)
    _counts("08_transformer", seed)
    assert 0 < seen["operations"] <= 403, seen


@pytest.mark.parametrize("seed", [1, 2])
def test_lesson_11_builds_each_model_fixture_once_per_case(seed: int) -> None:
    """A model fixture holding a case's weights is built once in a grading run: the four
    decoder_step tests and the tests of generate share one DecoderLM (the greedy case's: the
    ending case is drawn on its model too), the two beam searches on lesson 08's Transformer one
    (before: 8 DecoderLMs, 2 Transformers; then 3 DecoderLMs, then 2: the decoder_step tests'
    own)."""
    counts = _counts("11_generation", seed)
    assert counts["fixture decoder_lm"] == 1, counts
    assert counts["fixture transformer"] == 1, counts


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize(("lesson", "waited"), [("08_transformer", 93), ("11_generation", 49)])
def test_expected_outputs_are_computed_while_the_worker_runs(lesson: str, waited: int, seed: int) -> None:
    """The calls whose expected outputs cost the check most are sent without waiting, so that
    the check computes them while the worker runs the student's code: lesson 08's layer and
    Transformer forwards (torch's layers, the float64 model; a dropout check's two calls sent
    together), lesson 11's beam searches (the exact best hypotheses, the Transformer's case),
    decoder steps (the float64 model) and sampled generation (the expected samples). Before:
    132 calls waited for in lesson 08 (109, then 101 with its models shared and the dropout
    checks reading shapes, not weights, now 93 with the refusals in checked calls and the
    parameter names read with the modules), 115 and 113 in lesson 11 (93 and 91, then 85 with
    its model fixtures and cases shared, 77 with the cache test reading the greedy test's
    generation, its positions counted in the same batch, 71 with one generation without the
    cache for two tests, the dropout model's calls in one batch and one DecoderLM fixture, now
    49 with each filter_logits test's calls sent together and the copy model's beam searches
    read with their mode)."""
    counts = _counts(lesson, seed)
    assert counts["waited"] <= waited, counts


def test_lesson_12_tile_bound_walks_few_tiles_and_keeps_its_power() -> None:
    """Every tile of a watched call costs the watch of its operations: the bound checks draw
    at most 3 × 3 tiles (before: up to 6 × 7), and an [Lq, Lk] mask, the smallest whole-matrix
    mistake, is still larger than everything a tiled call may make."""
    B, H, d = 1, 2, 2
    for seed in range(200):
        with grading_run(seed):
            for n in (60, 100):  # the forward's and the backward's cases
                bq, bk, Lq, Lk, q, _, _ = l12.bound_case(n, B, H, d)
                assert tuple(q.shape) == (B, H, Lq, d)
                assert math.ceil(Lq / bq) * math.ceil(Lk / bk) <= 9
                bound = max(B * H * Lq * d, B * H * Lk * d, B * Lk, B * H * Lq, B * H * bq * bk)
                assert Lq * Lk > bound, (seed, n, bq, bk, Lq, Lk)


def _module_level_calls(source: str) -> set[str]:
    """The names called by a cell's own statements (not inside the functions it defines)."""
    import ast

    calls: set[str] = set()
    try:
        tree = ast.parse(source)
    except SyntaxError:  # IPython magics: the check's own transformer runs those cells
        return calls
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        calls |= {node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                  for node in ast.walk(stmt) if isinstance(node, ast.Call)}
    return calls


@pytest.mark.parametrize("lesson", ["09_training", "10_decoder_only", "11_generation", "12_attention_at_scale"])
def test_grading_reads_no_dataset(lesson: str) -> None:
    """The cells a check runs build no data for the demos: lesson 12's cell that read the
    numerals' train and valid splits for its training demo cost a quarter of a second of
    every warm check (it is a demo cell now)."""
    cells = cells_to_run(read_notebook(str(solution_path(lesson))))
    loading = [i for i, source in cells if _module_level_calls(source) & {"load_numerals", "build_vocab"}]
    assert not loading, f"cells {loading} read the dataset while grading: tag them demo"
