"""Lesson 11's hidden tests answer a warm check quickly (issue 52): what they cost, in counts.

``sample``'s distribution is judged on 1,000 draws per setting compared one by one with
torch.multinomial's (20,000 only for a sampler that draws otherwise), the cases several
tests share are drawn once per grading run, the top_k + top_p case computes a mistake's
outcome only while its draw can still serve, and an ending generation case continues several
prompts on one drawn model; lessons 08 and 10 are loaded with the module where their reference
modules are installed.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

import nbformat
import pytest
import torch
from support import solution_path

from coursekit import earlier
from grader.check.engine import in_process_submission, run_hidden_tests
from grader.hidden import test_11_generation as hidden
from grader.testkit.framework import gen, grading_run

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def sub() -> Any:
    return in_process_submission(nbformat.read(solution_path("11_generation"), as_version=4))


def test_sample_is_judged_on_a_thousand_draws_per_setting(sub, monkeypatch) -> None:
    rows: list[int] = []
    call = sub.call

    def counted(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "sample":
            rows.append(int(args[0].shape[0]))
        return call(name, *args, **kwargs)

    monkeypatch.setattr(sub, "call", counted)
    results = run_hidden_tests(sub, "11_generation", only={"sample"}, seed=52)
    assert all(r.points == r.max_points for r in results)
    assert sorted(rows)[-4:] == [500, *[hidden.N_SEEDED] * 3], \
        f"the reference's draws match torch.multinomial's: three settings, no {hidden.N_DRAWS:,}-draw check ({rows})"
    assert sum(rows) < 5000, rows  # 64,806 before (three settings of 20,000)


def test_a_sampler_that_draws_otherwise_is_not_taken_for_torchs() -> None:
    """_drawn_as_torch is True for torch.multinomial's draws only: the same distribution drawn
    by inverse CDF from the same generator is left to the statistical check."""
    class Sampler:
        def __init__(self, inverse_cdf: bool) -> None:
            self.inverse_cdf = inverse_cdf

        def fixture(self, name: str, seed: int) -> torch.Generator:
            return torch.Generator().manual_seed(seed)

        def call(self, name: str, x: torch.Tensor, temperature: float, top_k: Any, top_p: Any,
                 generator: torch.Generator) -> torch.Tensor:
            probs = hidden.ref_filter(x, temperature, top_k, top_p).float().softmax(-1)
            if not self.inverse_cdf:
                return torch.multinomial(probs, 1, generator=generator).squeeze(-1)
            u = torch.rand(x.shape[0], 1, generator=generator)
            return torch.searchsorted(probs.cumsum(-1), u).squeeze(-1).clamp(max=x.shape[-1] - 1)

    with grading_run(52):
        x = hidden.distribution_case(110, 0.6, 4, None)
        assert hidden._drawn_as_torch(Sampler(inverse_cdf=False), x, 110, 0.6, 4, None)
        assert not hidden._drawn_as_torch(Sampler(inverse_cdf=True), x, 110, 0.6, 4, None)


def test_a_case_is_drawn_once_per_grading_run() -> None:
    drawn: list[int] = []

    @hidden.per_run
    def case(n: int) -> torch.Tensor:
        drawn.append(n)
        return torch.randn(3, generator=gen(n))

    with grading_run(1):
        first = case(7)
        assert case(7) is first and drawn == [7]
    with grading_run(2):
        assert not torch.equal(case(7), first) and drawn == [7, 7]


def _counted(monkeypatch, name: str) -> list[int]:
    """Calls of the hidden module's function ``name`` from now on, counted."""
    calls: list[int] = []
    fn = getattr(hidden, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return fn(*args, **kwargs)

    monkeypatch.setattr(hidden, name, counted)
    return calls


def test_the_combined_case_filters_only_while_a_draw_can_still_serve(monkeypatch) -> None:
    calls = _counted(monkeypatch, "ref_filter")
    for seed in range(10):
        with grading_run(seed):
            hidden.combined_case(16)
    assert len(calls) < 760, len(calls)  # 675 now, 941 before: every outcome of every draw


def test_an_ending_generation_case_mostly_draws_one_model(monkeypatch) -> None:
    models = _counted(monkeypatch, "lm_model")
    for seed in range(10):
        with grading_run(seed):
            hidden.generate_case(309, 8, ending=True)
    assert len(models) <= 12, len(models)  # 10 now; 20 before: one prompt continued per model


def test_the_generate_tests_share_the_greedy_case(sub, monkeypatch) -> None:
    """The tests of generate that need prompts whose continuations never meet eos (greedy, the
    cache, the mode, sampling) try test_generate_greedy's case first: over ten runs they draw
    one such case and the ending case, each attempt a model continued T tokens in float64
    (before: four cases, 301, 305, 309 and 316)."""
    cases: list[int] = []
    attempt = hidden._attempt

    def counted(n: int, i: int) -> torch.Generator:
        cases.append(n)
        return attempt(n, i)

    monkeypatch.setattr(hidden, "_attempt", counted)
    for seed in range(1, 11):
        cases.clear()
        results = run_hidden_tests(sub, "11_generation", only={"generate"}, seed=seed)
        assert all(r.points == r.max_points for r in results), results
        assert set(cases) <= {301, 309}, (seed, sorted(set(cases)))


def test_the_expected_samples_share_each_steps_forward() -> None:
    """test_generate_passes_sampling_on expects one of two samples (the pad's logit left or set to
    -inf): both run through the float32 model as one batch, T forwards in all (2 T before), and
    each is the sample drawn alone."""
    with grading_run(3):
        T = hidden._int(*hidden.GREEDY_T)
        state, _, pad_id, prompt, _, _ = hidden.generate_case(hidden.GREEDY_CASE, T, ending=False)
    m32 = hidden.decoder_lm(pad_id, state)
    forwards: list[int] = []
    m32.register_forward_hook(lambda *_: forwards.append(1))
    both = hidden.sampled_generate(m32, prompt, T, seed=5, nevers=(None, pad_id), **hidden.SAMPLING)
    assert len(forwards) == T
    for never, sample in zip((None, pad_id), both, strict=True):
        alone, = hidden.sampled_generate(m32, prompt, T, seed=5, nevers=(never,), **hidden.SAMPLING)
        assert torch.equal(sample, alone) and sample.shape == (prompt.shape[0], prompt.shape[1] + T)


def test_the_reference_lessons_are_loaded_with_the_module() -> None:
    """The check helper's zygote imports the hidden module once: lessons 08 and 10 come with it."""
    importlib.reload(hidden)
    assert hidden._lesson.cache_info().currsize == 2


def test_a_students_notebook_is_never_loaded_at_import(monkeypatch) -> None:
    """Where the reference modules are not installed, lesson_code would load the student's
    notebook: the preload leaves that to the test that needs it."""
    def no_notebook(lesson: str) -> None:
        raise AssertionError(f"lesson {lesson}'s notebook loaded at import")

    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args: None)
    monkeypatch.setattr(earlier, "load_my_code", no_notebook)
    hidden._lesson.cache_clear()
    try:
        hidden._preload_references()
        assert hidden._lesson.cache_info().currsize == 0
    finally:
        hidden._lesson.cache_clear()


def test_the_table_model_looks_each_prefix_up_once() -> None:
    """The table model's decode returns the logits of every position, but a search asks for each
    prefix's one token more: the rows it built before are reused. On the underflow scenario (a
    beam of 3 over 35 steps) the reference's search asks for 1,878 positions and 101 are looked up
    (every one of the 1,878 before)."""
    from coursekit.reference.lesson11 import beam_search
    from grader.runtime.fixtures import table_model

    with grading_run(52):
        table, best = hidden.underflow_case(gen(423))
    model = table_model([table], hidden.V_U, hidden.PAD)
    asked: list[int] = []
    decode = model.decode

    def counted(tgt: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        asked.append(tgt.numel())
        return decode(tgt, *args, **kwargs)

    model.decode = counted
    out = beam_search(model, torch.tensor([[3, 4, 5, hidden.PAD]]), hidden.UNDERFLOW_BEAM, hidden.UNDERFLOW_LEN,
                      hidden.BOS, hidden.EOS_T, length_penalty=hidden.UNDERFLOW_ALPHA)
    assert tuple(out[0].tolist()) == best
    assert sum(asked) > 1500 and getattr(model, "looked_up", sum(asked)) <= 120, (sum(asked), getattr(model, "looked_up", None))


def test_the_form_check_searches_a_short_transformer_case(sub, monkeypatch) -> None:
    """A search costs a decoder call per source and step (the reference, as most students',
    searches source by source): test_beam_one_is_greedy's beam of 1 searches the Transformer's
    three sources up to a max_len of 4 to 6, test_beam_output_form's beam of 4 its two padded
    ones up to 3 (before: 5 to 7 and 4; then 5; before that all three, both up to a max_len of 6
    to 9). Over these ten runs the Transformer's decoder expands 260 target positions on the
    reference (458 before, then 698, 2,429 before that)."""
    from grader.runtime import fixtures

    positions: list[int] = []
    build = fixtures.FIXTURES["transformer"]

    def counted(*args: Any, **kwargs: Any) -> Any:
        model = build(*args, **kwargs)
        decode = model.decode

        def counting(tgt: torch.Tensor, *a: Any, **k: Any) -> torch.Tensor:
            positions.append(tgt.numel())
            return decode(tgt, *a, **k)

        model.decode = counting
        return model

    monkeypatch.setitem(fixtures.FIXTURES, "transformer", counted)
    for seed in range(1, 11):
        results = run_hidden_tests(sub, "11_generation", only={"beam_search"}, seed=seed)
        assert all(r.points == r.max_points for r in results), results
    assert sum(positions) <= 280, sum(positions)


def test_the_generate_tests_draw_one_model_and_build_no_other(sub, monkeypatch) -> None:
    """Over ten runs of generate's tests on the reference: the greedy and ending cases share a
    model drawn once a run, their prompts continued as one float64 batch; the expected samples
    run through that model converted to float32 and back (no model built); the cache test reads
    the greedy test's generation, the mode test its generation without the cache (71 calls of
    generate; 81 before). Before: 20 models drawn and 30 built, 253 forwards of them, 91 calls of
    generate."""
    drawn, built, forwards, calls = [], [], [], []
    lm_model, decoder_lm, request = hidden.lm_model, hidden.decoder_lm, type(sub)._request

    def drawing(*args: Any) -> Any:
        drawn.append(1)
        return lm_model(*args)

    def building(*args: Any, **kwargs: Any) -> Any:
        model = decoder_lm(*args, **kwargs)
        built.append(1)
        model.register_forward_hook(lambda *_: forwards.append(1))
        return model

    def requesting(self: Any, op: str, header: dict[str, Any], value: Any = None) -> Any:
        calls.append(header.get("target") == "generate")
        return request(self, op, header, value)

    monkeypatch.setattr(hidden, "lm_model", drawing)
    monkeypatch.setattr(hidden, "decoder_lm", building)
    monkeypatch.setattr(type(sub), "_request", requesting)
    for seed in range(1, 11):
        results = run_hidden_tests(sub, "11_generation", only={"generate"}, seed=seed)
        assert all(r.points == r.max_points for r in results), results
    assert len(drawn) <= 11 and len(built) == len(drawn), (len(drawn), len(built))
    assert len(forwards) <= 210, len(forwards)  # 201 now
    assert sum(calls) <= 71, sum(calls)


def _calls_of(sub, monkeypatch, name: str) -> list[tuple[list[Any], dict[str, Any]]]:
    """The submission's calls of ``name`` from now on, batched ones included: their arguments
    as they cross (a model as its HandleRef)."""
    calls: list[tuple[list[Any], dict[str, Any]]] = []
    dispatch = sub.target.dispatch

    def counted(op: str, header: dict[str, Any], value: Any = None) -> Any:
        if op == "call" and header.get("target") == name:
            calls.append((value["args"], value["kwargs"]))
        return dispatch(op, header, value)

    monkeypatch.setattr(sub.target, "dispatch", counted)
    return calls


def test_top_p_one_on_32000_tokens_computes_no_oracle(sub, monkeypatch) -> None:
    """The oracle keeps every token at top_p=1: only the student's filter runs on the 32,000
    tokens (before: the oracle's float64 sort and the mistake's float32 one too, 5 ms)."""
    widths: list[int] = []
    ref_filter = hidden.ref_filter

    def counted(logits: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        widths.append(logits.shape[-1])
        return ref_filter(logits, *args, **kwargs)

    monkeypatch.setattr(hidden, "ref_filter", counted)
    results = run_hidden_tests(sub, "11_generation", only={"filter_logits"}, seed=52)
    assert all(r.points == r.max_points for r in results)
    assert widths and max(widths) < 1000, sorted(set(widths))


def test_the_uncached_greedy_generation_runs_once(sub, monkeypatch) -> None:
    """test_generate_without_cache judges the run of use_cache=False that test_generate_uses_the_cache
    counts (before: one of its own, on the dropout model); the dropout model generates one token,
    and a prompt row alone ALONE_T tokens."""
    calls = _calls_of(sub, monkeypatch, "generate")
    for seed in (1, 2, 3):
        calls.clear()
        results = run_hidden_tests(sub, "11_generation", only={"generate"}, seed=seed)
        assert all(r.points == r.max_points for r in results), results
        with grading_run(seed):
            T = hidden._int(*hidden.GREEDY_T)
        uncached = sorted(args[2] for args, kwargs in calls if kwargs.get("use_cache") is False)
        assert uncached == [1, T], uncached
        alone = [args[2] for args, _ in calls if args[1].shape[0] == 1]
        assert alone == [hidden.ALONE_T], alone
        assert len(calls) == 7, len(calls)  # 8 before


def test_the_beam_searches_on_lesson_08s_models_are_short(sub, monkeypatch) -> None:
    """A search costs a decoder call per source and step: on the copy model and the Transformer,
    the sources times max_len - 1 of every search, summed, are 79-91 per run (102-114 before:
    sources of 7 columns, max_len 5 to 7 and 4 on the Transformer, now 5 columns, 4 to 6 and 3)."""
    calls = _calls_of(sub, monkeypatch, "beam_search")
    for seed in (1, 2, 3):
        calls.clear()
        results = run_hidden_tests(sub, "11_generation", only={"beam_search"}, seed=seed)
        assert all(r.points == r.max_points for r in results), results
        steps = sum(args[1].shape[0] * (args[3] - 1) for args, _ in calls
                    if not args[0].type_name.endswith("TableModel"))
        assert steps < 95, steps


def test_the_combined_case_checks_its_rows_at_once() -> None:
    """combined_case keeps the rows clear of ties and of p's boundary with one batched check of
    its 8 rows (before: each row's own, 8 times the operations): the same answer row by row."""
    mixed: set[bool] = set()
    for seed in range(20):
        with grading_run(seed):
            x = torch.randn(8, 10, generator=gen(1)) * torch.tensor([0.7, 3.0]).repeat(4)[:, None]
            p = 0.6 + 0.35 * float(torch.rand(1, generator=gen(2)))
        for gap, margin in ((1e-3, 2e-3), (0.1, 0.05)):  # the second: rows of both answers
            assert hidden._gaps_ok_rows(x, gap).tolist() == [hidden._gaps_ok(r, gap) for r in x]
            assert hidden._totals_clear_rows(x, 0.4, p, margin).tolist() == \
                [hidden._totals_clear(r, 0.4, p, margin) for r in x]
            mixed.update(hidden._gaps_ok_rows(x, gap).tolist() + hidden._totals_clear_rows(x, 0.4, p, margin).tolist())
    assert mixed == {True, False}


def test_the_greedy_and_ending_cases_cost_few_forwards(monkeypatch) -> None:
    """The greedy and ending cases are continued together, one float64 forward a token: the
    ending case's max_new_tokens is drawn from 6 to 8 (before: 7 to 9), so that over ten runs
    the shared model runs 102 forwards (112 before)."""
    forwards: list[int] = []
    lm_model = hidden.lm_model

    def drawing(*args: Any) -> Any:
        state, m64 = lm_model(*args)
        m64.register_forward_hook(lambda *_: forwards.append(1))
        return state, m64

    monkeypatch.setattr(hidden, "lm_model", drawing)
    for seed in range(1, 11):
        with grading_run(seed):
            T = hidden._int(*hidden.GREEDY_T)
            hidden.greedy_and_ending(T, hidden._int(*hidden.ENDING_T))
    assert len(forwards) <= 105, len(forwards)
