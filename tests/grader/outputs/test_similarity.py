"""Similarity flags (grader/outputs/similarity.py): disguises do not hide a copy, independently
written correct solutions are not flagged, neither are short exercises nor code copied
from what the lesson provides. benchmarks/similarity.py prints the same measurement as a
table (false-positive and detection rates)."""

from __future__ import annotations

import pytest
from similarity_cases import disguise, evaluate, graded_cells, independent_cases, with_cell

from grader.check import runner
from grader.outputs.similarity import Settings, class_flags, exercise_source, lesson_context

L08 = "08_transformer"


@pytest.fixture(scope="module")
def cases():
    return independent_cases()


@pytest.fixture(scope="module")
def context():
    return lesson_context(L08)


def exercises(lesson: str) -> list[str]:
    return list(dict.fromkeys(c[1] for c in runner.collect(lesson)))


def test_disguises_vanish_in_normal_form(cases, context) -> None:
    for case in cases:
        if case.lesson != L08 or case.source is None:
            continue
        copy = disguise(case.source, case.exercise, case.lesson)
        assert copy != case.source
        original = context.normalise(exercise_source([case.source], case.exercise)[0], case.exercise)
        disguised = context.normalise(exercise_source([copy], case.exercise)[0], case.exercise)
        assert original[0] == disguised[0], case.label


def test_no_independent_pair_flagged_and_distinctive_copies_are(cases) -> None:
    rows, false_flags, misses, _ = evaluate(cases, Settings())
    assert not false_flags, [(f.exercise, f.a.student, f.b.student, f.shared) for f in false_flags]
    compared = [r for r in rows if r[2] != "-"]
    assert {r[0] for r in compared} == {"PositionwiseFeedForward", "EncoderLayer", "DecoderLayer",
                                        "Transformer", "greedy_decode", "train_step"}
    assert {r[0] for r in rows if r[2] == "-"} == {"noam_lr", "label_smoothed_nll"}  # too short
    pairs, copies, found = (sum(r[i] for r in compared) for i in (2, 4, 5))
    assert pairs > 250 and copies >= 30
    assert found / copies >= 0.9, misses
    # what is missed are copies of code that is nearly the reference or the plainest answer
    nearly_reference = ("straightforward", "alternative: causal target mask",
                        "alternative: the encoder stack also kept under a second name")
    assert all(any(label in m for label in nearly_reference) for m in misses), misses


PASTED = '''
    def attend(self, query, key, value, mask=None):
        B, Lq, _ = query.shape
        Lk = key.size(1)
        H, d = self.n_head, self.d_head
        q = self.q_proj(query).view(B, Lq, H, d).transpose(1, 2)
        k = self.k_proj(key).view(B, Lk, H, d).transpose(1, 2)
        v = self.v_proj(value).view(B, Lk, H, d).transpose(1, 2)
        p = self.dropout if self.training else 0.0
        out, weights = scaled_dot_product_attention(q, k, v, mask, p)
        self.attn_weights = weights.detach()
        out = out.transpose(1, 2).reshape(B, Lq, self.d_model)
        return self.out_proj(out)
'''
HOMEMADE = '''
    def attend(self, query, key, value, mask=None):
        scores = torch.einsum("bqd,bkd->bqk", query, key) / math.sqrt(query.size(-1))
        if mask is not None:
            scores = scores.masked_fill(~mask.squeeze(1), float("-inf"))
        weights = torch.nan_to_num(scores.softmax(-1))
        self.cache = {"weights": weights, "scores": scores, "shape": tuple(scores.shape)}
        mixed = torch.einsum("bqk,bkd->bqd", weights, value)
        for _ in range(2):
            mixed = mixed + 0.0 * mixed.tanh()
        return mixed
'''


@pytest.mark.parametrize("helper, flagged", [(PASTED, False), (HOMEMADE, True)])
def test_code_copied_from_the_provided_cells_is_not_flagged(cases, context, helper, flagged) -> None:
    """Two students paste lesson 04's MultiHeadAttention.forward (a module they may import)
    into their own, different DecoderLayers: not a flag. The same students sharing a
    helper nobody was given: a flag (so the test can fail)."""
    two = [c for c in cases if c.lesson == L08 and c.exercise == "DecoderLayer" and c.source][:2]
    students = {}
    for i, case in enumerate(two):
        source = case.source.rstrip() + "\n" + helper
        students[f"s{i}"] = graded_cells(with_cell(case.notebook, "DecoderLayer", source))
    found = class_flags(L08, students, exercises(L08), context=context)["DecoderLayer"]
    assert bool(found) == flagged, [(f.shared, f.coverage) for f in found]
    if flagged:
        flag = found[0]
        shown = flag.a.source.splitlines()
        assert flag.lines_a and all(1 <= n <= len(shown) for n in flag.lines_a)
        assert any("einsum" in shown[n - 1] for n in flag.lines_a)


def test_short_exercises_are_never_compared(cases) -> None:
    """Two students handing in the same non-reference label_smoothed_nll (12 lines): the
    exercise is too short to mean anything, so there is no flag even for identical code."""
    alt = next(c for c in cases if c.exercise == "label_smoothed_nll" and c.source)
    students = {s: graded_cells(alt.notebook) for s in ("a", "b")}
    flags = class_flags("09_training", students, exercises("09_training"))
    assert "label_smoothed_nll" not in flags and "noam_lr" not in flags
    # both have the reference train_step, character for character, but it is 12 lines the
    # student writes (fewer than min_identical_lines): independent answers can coincide
    assert flags["train_step"] == []


def test_reference_and_blank_submissions_give_no_units(context) -> None:
    from support import lesson_path, solution_path

    from grader.check.notebook import parse_notebook

    students = {"ref1": graded_cells(parse_notebook(solution_path(L08).read_bytes())),
                "ref2": graded_cells(parse_notebook(solution_path(L08).read_bytes())),
                "blank1": graded_cells(parse_notebook(lesson_path(L08).read_bytes())),
                "blank2": graded_cells(parse_notebook(lesson_path(L08).read_bytes()))}
    flags = class_flags(L08, students, exercises(L08), context=context)
    assert set(flags) == {"PositionwiseFeedForward", "EncoderLayer", "DecoderLayer", "Transformer",
                          "greedy_decode"}
    # the blanks give no unit; the two reference notebooks are identical, character for
    # character: a flag (a solution passed around) where the student writes at least 15
    # lines (EncoderLayer 20, DecoderLayer 26, Transformer 39; PositionwiseFeedForward 11
    # and greedy_decode 14 lines are too few to tell a copy from a coincidence)
    for name, found in flags.items():
        expected = [("ref1", "ref2", True)] if name in ("EncoderLayer", "DecoderLayer", "Transformer") else []
        assert [(f.a.student, f.b.student, f.identical) for f in found] == expected, name


def test_identical_long_answers_are_flagged_even_when_they_are_the_reference(context) -> None:
    """Nine students hand in the same MultiHeadAttention, character for character: the
    reference answer itself (issue 24: none was flagged). Eight flags, one per student
    after the first; a student with the same code reformatted gets none of those."""
    from support import solution_path

    from grader.check.notebook import parse_notebook

    reference = parse_notebook(solution_path("04_multi_head_attention").read_bytes())
    students = {f"s{i}": graded_cells(reference) for i in range(9)}
    own = [c.replace("    ", "  ") if "class MultiHeadAttention" in c else c for c in graded_cells(reference)]
    students["t"] = own
    found = class_flags("04_multi_head_attention", students, exercises("04_multi_head_attention"))
    flags = found["MultiHeadAttention"]
    assert sorted((f.a.student, f.b.student) for f in flags) == [("s0", f"s{i}") for i in range(1, 9)]
    assert all(f.identical and f.lines_a == set(range(1, len(f.a.source.splitlines()) + 1)) for f in flags)
