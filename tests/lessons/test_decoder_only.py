"""Lesson 10's provided training code (coursekit.reference.lesson10): presets, sequences padded on
the left with their loss masks, the KV-cache generation against the model's own forward, the
switch to F.scaled_dot_product_attention against the manual attention, the optimiser's groups
and schedule, fit's stopping rules, checkpoints."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from coursekit.data import load_numerals
from coursekit.reference.lesson10 import (
    PRESETS,
    SEP,
    DecoderLM,
    Preset,
    block_forward,
    build_model,
    build_vocab,
    exact_match,
    fit,
    greedy_answers,
    init_weights,
    lm_batch,
    lm_batches,
    lm_loss,
    load_checkpoint,
    load_preset,
    make_optimizer,
    prompt_batch,
    save_checkpoint,
    training_set,
    translate,
    use_sdpa,
)

PAIRS = [("7", "七"), ("20", "二十"), ("1234", "一千二百三十四"), ("10005", "一万零五")]


# tiny models: one thread (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def vocab():
    return build_vocab(load_numerals("train"))


def tiny(vocab, seed: int = 0, **changes) -> torch.nn.Module:
    torch.manual_seed(seed)
    cfg = replace_preset(PRESETS["smoke"], **changes)
    return build_model(cfg, vocab).eval()


def replace_preset(cfg: Preset, **changes) -> Preset:
    return dataclasses.replace(cfg, **changes)


def test_presets_are_typed_and_complete(no_course_env) -> None:
    assert set(PRESETS) == {"smoke", "cpu", "gpu"}
    for name, preset in PRESETS.items():
        assert isinstance(preset, Preset) and preset.name == name
    assert not PRESETS["cpu"].sdpa and not PRESETS["cpu"].amp, "the cpu preset trains the student's own block"
    assert PRESETS["gpu"].sdpa and PRESETS["gpu"].amp
    assert load_preset("cpu", lr=1e-3).lr == 1e-3
    with pytest.raises(TypeError):
        load_preset("cpu", learning_rate=1e-3)
    with pytest.raises(ValueError, match="even size"):
        Preset("odd", d_model=12, n_head=4)          # heads of 3 features: RoPE turns pairs
    no_course_env.setenv("COURSE_PRESET", "smoke")
    no_course_env.setenv("COURSE_DIRECTION", "zh2digits")
    assert load_preset() == dataclasses.replace(PRESETS["smoke"], direction="zh2digits")


def test_sequences_are_padded_on_the_left_with_the_answer_masked_in(vocab) -> None:
    ids, loss_mask = lm_batch(PAIRS, vocab)
    assert ids.shape == loss_mask.shape == (4, max(len(s) + len(t) + 2 for s, t in PAIRS))
    row = ids[2].tolist()
    text = "".join(vocab.itos[i] for i in row if i != vocab.pad_id)
    assert text == "1234" + SEP + "一千二百三十四<eos>"
    assert ids[0, 0] == vocab.pad_id and ids[0, -1] == vocab.eos_id, "left padding: every row ends with its <eos>"
    for (_, target), mask, row in zip(PAIRS, loss_mask, ids, strict=True):
        assert mask.sum() == len(target) + 1, "the answer and its <eos> are scored"
        assert mask[-(len(target) + 1):].all() and not mask[:-(len(target) + 1)].any()
        assert row[-(len(target) + 2)] == vocab.stoi[SEP]
    prompts = prompt_batch([s for s, _ in PAIRS], vocab)
    assert (prompts[:, -1] == vocab.stoi[SEP]).all(), "every prompt ends at the same column"
    first = list(lm_batches(PAIRS * 10, vocab, batch_size=8, seed=3))
    again = list(lm_batches(PAIRS * 10, vocab, batch_size=8, seed=3))
    assert all(torch.equal(a[0], b[0]) for a, b in zip(first, again, strict=True)), "the order depends on the seed only"


def test_training_set_oversamples_by_digit_count_in_both_directions() -> None:
    pairs = [("1", "一")] + [("1234", "一千二百三十四")] * 5
    cfg = dataclasses.replace(PRESETS["smoke"], oversample=4)
    assert sum(s == "1" for s, _ in training_set(pairs, cfg)) == 4
    reverse = [(t, s) for s, t in pairs]
    cfg = dataclasses.replace(cfg, direction="zh2digits")
    assert sum(t == "1" for _, t in training_set(reverse, cfg)) == 4


@torch.no_grad()
def test_generation_with_a_kv_cache_equals_the_models_own_forward(vocab) -> None:
    model = tiny(vocab, d_model=32, n_head=4, n_layer=2)
    prompts = prompt_batch(["7", "1234", "20260601", "10005"], vocab)
    cached = greedy_answers(model, prompts, 10, vocab.eos_id)
    ids, done = prompts, torch.zeros(len(prompts), dtype=torch.bool)
    for _ in range(cached.size(1)):
        nxt = model(ids)[:, -1].argmax(-1).masked_fill(done, model.pad_id)
        ids, done = torch.cat([ids, nxt[:, None]], 1), done | (nxt == vocab.eos_id)
    assert torch.equal(cached, ids[:, prompts.size(1):])
    assert translate(model, ["1234"], vocab, max_new=10) == [vocab.decode(cached[1])]


@torch.no_grad()
def test_greedy_answers_name_max_len_when_the_answer_would_not_fit(vocab) -> None:
    """Issue 50: generating past the model's max_len raised an IndexError from the angle table."""
    torch.manual_seed(0)
    model = DecoderLM(len(vocab), d_model=32, n_head=4, n_layer=1, max_len=12, pad_id=vocab.pad_id).eval()
    prompts = prompt_batch(["1234"], vocab)                     # 5 columns
    assert greedy_answers(model, prompts, 7, vocab.eos_id).size(1) <= 7
    with pytest.raises(ValueError, match=r"max_new = 8 .* max_len = 12"):
        greedy_answers(model, prompts, 8, vocab.eos_id)


@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_the_sdpa_switch_equals_the_manual_attention(vocab, dropout) -> None:
    """use_sdpa replaces the blocks' forward by block_forward (F.scaled_dot_product_attention):
    in float32 on the CPU the logits at the real tokens agree to 1e-5 (relative and absolute),
    left padding included; with dropout, in eval mode; the switch goes back."""
    model = tiny(vocab, d_model=32, n_head=4, n_layer=2, dropout=dropout)
    ids, _ = lm_batch(load_numerals("valid")[:24], vocab)
    keep = ids != vocab.pad_id
    manual = model(ids)
    fast = use_sdpa(model, dropout=dropout)(ids)
    torch.testing.assert_close(fast[keep], manual[keep], rtol=1e-5, atol=1e-5)
    assert not fast.isnan().any()
    use_sdpa(model, on=False)
    assert torch.equal(model(ids), manual), "use_sdpa(model, on=False) restores the student's forward"
    block, x = model.blocks[0], torch.randn(3, 9, 32)     # no key mask: the causal mask alone
    cos, sin = model.cos[:9], model.sin[:9]
    torch.testing.assert_close(block_forward(block, x, cos, sin, n_head=4)[0], block(x, cos, sin),
                               rtol=1e-5, atol=1e-5)


def test_the_sdpa_switch_trains_like_the_manual_path(vocab) -> None:
    """Gradients through F.scaled_dot_product_attention equal those of the manual attention."""
    batch = lm_batch(load_numerals("train")[:16], vocab)
    grads = []
    for on in (False, True):
        model = tiny(vocab, d_model=32, n_head=4, n_layer=2).train()
        use_sdpa(model, on=on)
        lm_loss(model(batch[0]), *batch).backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    torch.testing.assert_close(grads[1], grads[0], rtol=1e-4, atol=1e-6)


def test_initialisation_optimiser_groups_and_schedule(vocab) -> None:
    cfg = dataclasses.replace(PRESETS["cpu"], warmup=10, decay_steps=110, min_lr_ratio=0.1, zero_init=False)
    model = DecoderLM(len(vocab), d_model=64, n_head=4, n_layer=4, max_len=64, pad_id=vocab.pad_id)
    init_weights(model, dataclasses.replace(cfg, zero_init=True))
    assert all(
        torch.equal(p.detach(), torch.zeros_like(p)) for block in model.blocks
        for p in (block.out_proj.weight, block.ffn.w2.weight)), "zero_init: the residual branches' last maps start at 0"
    init_weights(model, cfg)
    assert model.lm_head.weight is model.embed.weight, "initialising keeps the tied table tied"
    assert abs(model.blocks[0].q_proj.weight.std().item() - 0.02) < 0.003
    assert abs(model.blocks[0].out_proj.weight.std().item() - 0.02 / math.sqrt(8)) < 0.002
    assert torch.equal(model.norm.weight.detach(), torch.ones(64))
    optimizer, scheduler = make_optimizer(model, cfg)
    decay, no_decay = optimizer.param_groups
    assert decay["weight_decay"] == cfg.weight_decay and no_decay["weight_decay"] == 0.0
    assert all(p.dim() >= 2 for p in decay["params"]) and all(p.dim() == 1 for p in no_decay["params"])
    assert sum(p.numel() for g in optimizer.param_groups for p in g["params"]) == \
        sum(p.numel() for p in model.parameters()), "every parameter once, the tied table included"
    rates = []
    for _ in range(150):
        rates.append(scheduler.get_last_lr()[0])
        optimizer.step()
        scheduler.step()
    assert rates[0] == pytest.approx(cfg.lr / 10) and rates[9] == pytest.approx(cfg.lr)
    assert rates[60] == pytest.approx(cfg.lr * (0.1 + 0.9 * 0.5)), "half-way down the cosine"
    assert rates[110] == rates[149] == pytest.approx(cfg.lr * cfg.min_lr_ratio)


def test_the_cpu_preset_gives_the_output_layer_a_matrix_of_its_own(vocab) -> None:
    cpu = PRESETS["cpu"]
    assert (cpu.tie_weights, cpu.zero_init, cpu.rope_base) == (False, True, 100.0), "the speed run's recipe"
    assert cpu.min_lr_ratio == 0.0 and cpu.max_steps == cpu.decay_steps, "down to zero, where training ends"
    assert (cpu.lr, cpu.warmup) == (1e-2, 50), "the peak that reached the target on one and two threads (section 8.5)"
    assert PRESETS["gpu"].min_lr_ratio == 0.1 and PRESETS["gpu"].max_steps > PRESETS["gpu"].decay_steps
    model = build_model(cpu, vocab)
    assert model.lm_head.weight is not model.embed.weight, "tie_weights=False: an output matrix of its own"
    assert model.lm_head.weight.std().item() == pytest.approx(cpu.init_std, rel=0.2), "initialised as a matrix"
    optimizer, _ = make_optimizer(model, cpu)
    assert any(p is model.lm_head.weight for p in optimizer.param_groups[0]["params"]), \
        "the output matrix is trained, with weight decay"
    tied = build_model(dataclasses.replace(cpu, tie_weights=True), vocab)
    assert tied.lm_head.weight is tied.embed.weight


def test_build_model_turns_rope_by_the_presets_base(vocab) -> None:
    from coursekit.reference.lesson10 import rope_angles

    for base in (100.0, 10000.0):
        model = build_model(replace_preset(PRESETS["smoke"], rope_base=base), vocab)
        cos, sin = rope_angles(model.cos.size(0), 32 // 2, base)
        assert torch.equal(model.cos, cos) and torch.equal(model.sin, sin), f"base {base}"
        assert "cos" in dict(model.named_buffers()), "still a buffer: saved and moved with the model"


def test_fit_stops_on_its_budget_and_the_checkpoint_reloads(vocab, tmp_path) -> None:
    cfg = dataclasses.replace(PRESETS["smoke"], max_steps=6, eval_every=3, eval_examples=20)
    torch.manual_seed(0)
    model = build_model(cfg, vocab)
    optimizer, scheduler = make_optimizer(model, cfg)
    valid = load_numerals("valid")[:20]
    history = fit(model, cfg, training_set(load_numerals("train")[:500], cfg), valid, vocab, optimizer,
                  scheduler, progress=False)
    assert history.steps == 6 and history.eval_step == [3, 6]
    assert history.tokens > history.scored > 0
    path = tmp_path / "lm.pt"
    save_checkpoint(path, model, cfg, vocab, history)
    reloaded, cfg2, vocab2, history2 = load_checkpoint(path)
    assert cfg2 == cfg and vocab2.itos == vocab.itos and history2.loss == history.loss
    assert translate(reloaded, [s for s, _ in valid], vocab2) == translate(model, [s for s, _ in valid], vocab)
    assert exact_match(model, valid, vocab)[0] == exact_match(reloaded, valid, vocab2)[0]


def test_a_checkpoint_saved_before_the_recipe_fields_loads_as_it_was_trained(vocab, tmp_path) -> None:
    """A checkpoint saved before zero_init, rope_base, tie_weights and eval_sample existed: it
    loads with the values that applied then (base 10000, a tied table), not today's defaults, so
    the preset it shows is the one its model runs with."""
    from coursekit.reference.lesson10 import History, rope_angles

    then = dict(zero_init=False, rope_base=10000.0, tie_weights=True, eval_sample=None)
    cfg = replace_preset(PRESETS["smoke"], **then)
    torch.manual_seed(0)
    model = build_model(cfg, vocab).eval()
    path = tmp_path / "old.pt"
    save_checkpoint(path, model, cfg, vocab, History())
    saved = torch.load(path)
    for name in then:
        del saved["config"][name]
    torch.save(saved, path)
    reloaded, loaded, _, _ = load_checkpoint(path)
    assert loaded == cfg and "rope_base=10000.0" in repr(loaded)
    cos, sin = rope_angles(reloaded.cos.size(0), cfg.d_model // cfg.n_head, loaded.rope_base)
    assert torch.equal(reloaded.cos, cos) and torch.equal(reloaded.sin, sin), "the base it shows is the one it runs"
    assert reloaded.lm_head.weight is reloaded.embed.weight
    sources = [s for s, _ in PAIRS]
    assert translate(reloaded, sources, vocab) == translate(model, sources, vocab)


def test_validation_scores_a_sample_until_it_nears_the_target(monkeypatch) -> None:
    import coursekit.reference.lesson10 as lesson10

    cfg = replace_preset(PRESETS["cpu"], eval_sample=500)
    valid = load_numerals("valid")
    scored = []

    def exact_match_of(accuracy: float):
        def fake(model, pairs, vocab):
            scored.append(len(pairs))
            return accuracy, []
        return fake

    monkeypatch.setattr(lesson10, "exact_match", exact_match_of(0.98))
    assert lesson10.validate(None, cfg, valid, None) == 0.98 and scored == [500], "below target - 1 point: the sample"
    scored.clear()
    monkeypatch.setattr(lesson10, "exact_match", exact_match_of(0.99))
    assert lesson10.validate(None, cfg, valid, None) == 0.99 and scored == [500, len(valid)], \
        "near the target, the whole split decides"
    scored.clear()
    assert lesson10.validate(None, replace_preset(cfg, eval_sample=None), valid, None) == 0.99
    assert scored == [len(valid)]


def test_benchmark_prints_the_machine_independent_figures() -> None:
    import importlib.util

    from support import ROOT

    spec = importlib.util.spec_from_file_location("decoder_only_benchmark", ROOT / "benchmarks" / "decoder_only.py")
    benchmark = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(benchmark)
    def run(lesson: str, seed: int, steps: int, cpu_s: float, valid: float = 0.996) -> dict:
        return {"lesson": lesson, "seed": seed, "steps": steps, "cpu_s": cpu_s, "valid": valid, "target": 0.995}

    runs = [run("09", 0, 200, 16.0), run("10", 0, 300, 36.0), run("09", 1, 200, 16.0), run("10", 1, 250, 30.0)]
    lines = benchmark.machine_independent(runs)
    assert lines[0] == "steps to the target, lesson 09: 200 (seed 0), 200 (seed 1)"
    assert lines[1] == "steps to the target, lesson 10: 300 (seed 0), 250 (seed 1)"
    assert lines[2].startswith("CPU time per training step, lesson 10 / lesson 09: 1.50 (120 ms / 80 ms")
    short = benchmark.machine_independent([run("10", 2, 300, 36.0, valid=0.9933)])
    assert short == ["steps to the target, lesson 10: not reached in 300 (seed 2: valid 99.33% < 99.5%)"], \
        "a run that stopped short of the target is not counted as reaching it"
    assert benchmark.machine_independent(runs[1::2]) == ["steps to the target, lesson 10: 300 (seed 0), 250 (seed 1)"]
