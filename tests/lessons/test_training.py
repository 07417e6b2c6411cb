"""Lesson 09's provided training code (coursekit.reference.lesson09): presets as a typed
config, the cached greedy decoder, the training set of either direction, fit's stopping
rules and hooks, checkpoints."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from coursekit.data import CharVocab, load_numerals
from coursekit.reference.lesson08 import Transformer, greedy_decode
from coursekit.reference.lesson09 import (
    PRESETS,
    Preset,
    build_model,
    digits_of,
    exact_match,
    fit,
    greedy_decode_cached,
    load_checkpoint,
    load_preset,
    make_optimizer,
    noam_lr,
    save_checkpoint,
    schedule_lr,
    screened_exact_match,
    training_set,
    translate,
)

# tiny models: one thread (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("one_thread")


def test_presets_are_typed_and_complete() -> None:
    assert set(PRESETS) == {"smoke", "cpu", "gpu"}
    for name, preset in PRESETS.items():
        assert isinstance(preset, Preset) and preset.name == name
        assert preset.direction == "digits2zh"
    with pytest.raises(dataclasses.FrozenInstanceError):
        PRESETS["cpu"].batch_size = 1


def test_load_preset_from_arguments_environment_and_grading(no_course_env, tmp_path) -> None:
    assert load_preset("cpu", "zh2digits") == dataclasses.replace(PRESETS["cpu"], direction="zh2digits")
    assert load_preset("cpu", batch_size=64).batch_size == 64
    no_course_env.setenv("COURSE_PRESET", "smoke")
    no_course_env.setenv("COURSE_DIRECTION", "zh2digits")
    assert (load_preset().name, load_preset().direction) == ("smoke", "zh2digits")
    assert load_preset("gpu", "digits2zh").name == "gpu"  # arguments beat the environment
    no_course_env.delenv("COURSE_PRESET")
    no_course_env.setenv("CI", "true")
    assert load_preset().name == "smoke"
    no_course_env.delenv("CI")
    no_course_env.chdir(tmp_path)
    assert load_preset().name == ("gpu" if torch.cuda.is_available() else "cpu")
    (tmp_path / "autograded" / "alice" / "09_training").mkdir(parents=True)
    no_course_env.chdir(tmp_path / "autograded" / "alice" / "09_training")
    assert load_preset().name == "smoke"


@pytest.mark.parametrize("bad", [dict(name="large"), dict(direction="digits2en"),
                                 dict(changes={"n_head": 5}), dict(changes={"not_a_field": 1})])
def test_load_preset_refuses_what_does_not_exist(no_course_env, bad) -> None:
    with pytest.raises((ValueError, TypeError)):
        load_preset(bad.get("name", "cpu"), bad.get("direction"), **bad.get("changes", {}))


def test_schedule_lr_warms_up_as_noam_then_falls_in_a_straight_line_to_its_floor() -> None:
    cfg = load_preset("cpu", lr_factor=0.5, warmup=20, decay_steps=120, min_lr_ratio=0.1)
    peak = 0.5 * noam_lr(20, cfg.d_model, 20)
    assert [schedule_lr(s, cfg) for s in (1, 10, 20)] == [0.5 * noam_lr(s, cfg.d_model, 20) for s in (1, 10, 20)]
    assert schedule_lr(70, cfg) == pytest.approx(peak / 2)    # half-way down the line
    assert schedule_lr(110, cfg) == pytest.approx(peak / 10)  # the line meets the floor here
    assert schedule_lr(120, cfg) == schedule_lr(5000, cfg) == pytest.approx(peak / 10)
    paper = dataclasses.replace(cfg, decay_steps=None)
    assert [schedule_lr(s, paper) for s in (1, 20, 70, 5000)] == [
        0.5 * noam_lr(s, cfg.d_model, 20) for s in (1, 20, 70, 5000)]
    model = torch.nn.Linear(2, 2)
    optimizer, scheduler = make_optimizer(model, cfg)
    rates = []
    for _ in range(130):
        rates.append(scheduler.get_last_lr()[0])
        optimizer.step()
        scheduler.step()
    assert rates == pytest.approx([schedule_lr(s, cfg) for s in range(1, 131)])  # LambdaLR counts from 0
    with pytest.raises(ValueError, match="decay_steps"):
        load_preset("cpu", warmup=50, decay_steps=50)


@pytest.mark.parametrize(("sample", "calls"), [(0.5, [256]), (0.974, [256]), (0.976, [256, 2099]),
                                                (1.0, [256, 2099])])
def test_validation_scores_a_sample_until_it_comes_close_to_the_target(monkeypatch, sample, calls) -> None:
    import coursekit.reference.lesson09 as lesson09

    seen = []

    def scored(model, pairs, src_vocab, tgt_vocab):
        seen.append(len(pairs))
        return (sample if len(pairs) == 256 else 0.9), []

    monkeypatch.setattr(lesson09, "exact_match", scored)
    cfg = load_preset("cpu", target=0.995, screen_examples=256, screen_margin=0.02)
    valid = load_numerals("valid")
    assert screened_exact_match(None, valid, None, None, cfg) == (sample if calls == [256] else 0.9)
    assert seen == calls
    seen.clear()
    assert screened_exact_match(None, valid, None, None, dataclasses.replace(cfg, screen_examples=None)) == 0.9
    assert screened_exact_match(None, valid[:100], None, None, cfg) == 0.9  # fewer pairs than the sample
    assert seen == [2099, 100]


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_cached_decoding_gives_greedy_decodes_tokens(norm_first, seed) -> None:
    """Untrained models too: they emit <pad> and <bos> mid-sentence, which must be masked as
    greedy_decode masks them; rows of different lengths, eos at different steps."""
    torch.manual_seed(seed)
    model = Transformer(9, 8, d_model=16, n_head=2, num_encoder_layers=2, num_decoder_layers=2, d_ff=32,
                        dropout=0.1, norm_first=norm_first)
    src = torch.randint(3, 9, (64, 7))
    src[::3, 4:] = 0
    with torch.no_grad():  # make <eos> (2) likely, so that rows end at different steps
        model.generator.bias[2] += 1.5
    model.train()
    cached = greedy_decode_cached(model, src, 12, 1, 2)
    assert model.training, "the mode must be restored"
    assert all(not hasattr(layer.self_attn, "past") for layer in model.decoder_layers), "not unwrapped"
    assert torch.equal(cached, greedy_decode(model, src, 12, 1, 2))


def test_translate_keeps_the_order_of_the_sources() -> None:
    torch.manual_seed(0)
    pairs = load_numerals("valid")[:300]
    src_vocab, tgt_vocab = CharVocab.build("0123456789"), CharVocab.build("零一二三四五六七八九十百千万")
    model = build_model(PRESETS["smoke"], src_vocab, tgt_vocab)
    sources = [s for s, _ in pairs]
    together = translate(model, sources, src_vocab, tgt_vocab, batch_size=64)  # decoded shortest first
    assert len(together) == len(sources)
    assert together[:20] == [translate(model, [s], src_vocab, tgt_vocab)[0] for s in sources[:20]]


@pytest.mark.parametrize("direction", ["digits2zh", "zh2digits"])
def test_training_set_oversamples_by_digit_count_in_both_directions(direction) -> None:
    cfg = load_preset("cpu", direction, oversample=500)
    train = load_numerals("train", direction)
    counts: dict[int, int] = {}
    for pair in training_set(train, cfg):
        counts[len(digits_of(pair, direction))] = counts.get(len(digits_of(pair, direction)), 0) + 1
    assert counts[1] >= 500 and counts[2] >= 500 and counts[3] >= 500
    assert counts[8] == 13_000  # long numbers are not repeated
    assert training_set(train, dataclasses.replace(cfg, oversample=0)) == train


def _tiny_run(max_steps=40, target=1.01, eval_every=10, **hooks):
    cfg = load_preset("smoke", "digits2zh", max_steps=max_steps, target=target, eval_every=eval_every,
                      max_minutes=30)
    train = load_numerals("train")[:3000]
    src_vocab, tgt_vocab = CharVocab.build(s for s, _ in train), CharVocab.build(t for _, t in train)
    torch.manual_seed(0)
    model = build_model(cfg, src_vocab, tgt_vocab)
    optimizer, scheduler = make_optimizer(model, cfg)
    history = fit(model, cfg, training_set(train, cfg), load_numerals("valid")[:50], src_vocab, tgt_vocab,
                  optimizer, scheduler, progress=False, **hooks)
    return history, model, cfg, src_vocab, tgt_vocab, scheduler


def test_fit_stops_at_the_step_budget_and_records_everything() -> None:
    history, _, cfg, _, _, scheduler = _tiny_run()
    assert history.steps == cfg.max_steps == 40
    assert history.step == list(range(1, 41)) and len(history.loss) == 40
    assert history.eval_step == [10, 20, 30, 40] and len(history.valid_acc) == 4
    assert history.loss[-1] < history.loss[0]
    assert scheduler.last_epoch == 40  # one scheduler step per training step


def test_fit_stops_when_the_validation_target_is_reached() -> None:
    scores = iter([0.5, 0.9, 0.999, 0.2])
    history, *_ = _tiny_run(target=0.99, evaluate=lambda: next(scores))
    assert history.steps == 30 and history.valid_acc == [0.5, 0.9, 0.999]


def test_fit_agree_hook_stops_every_process_together() -> None:
    history, *_ = _tiny_run(agree=lambda stop: stop or True, evaluate=lambda: 0.0)
    assert history.steps == 1 and history.eval_step == [1]


def test_fit_step_hook_replaces_the_training_step() -> None:
    seen = []
    history, model, *_ = _tiny_run(max_steps=5, step=lambda batch: seen.append(batch[0].shape[0]) or 1.0)
    assert len(seen) == 5 and history.loss == [1.0] * 5


def test_a_checkpoint_saved_before_the_schedule_fields_loads_as_it_was_trained(tmp_path) -> None:
    """The paper's decay (decay_steps None) and validation on all pairs (screen_examples None),
    what applied before those fields existed, not today's defaults."""
    _, model, cfg, src_vocab, tgt_vocab, _ = _tiny_run(max_steps=1)
    cfg = dataclasses.replace(cfg, warmup=1000)  # beyond the cpu preset's decay_steps, as gpu's
    save_checkpoint(tmp_path / "old.pt", model, cfg, src_vocab, tgt_vocab, 1)
    saved = torch.load(tmp_path / "old.pt")
    for name in ("decay_steps", "min_lr_ratio", "screen_examples", "screen_margin"):
        del saved["config"][name]
    torch.save(saved, tmp_path / "old.pt")
    _, loaded, *_ = load_checkpoint(tmp_path / "old.pt")
    assert loaded == dataclasses.replace(cfg, decay_steps=None, screen_examples=None)


def test_checkpoint_round_trip_rebuilds_preset_vocabularies_and_model(tmp_path) -> None:
    _, model, cfg, src_vocab, tgt_vocab, _ = _tiny_run(max_steps=3)
    save_checkpoint(tmp_path / "m.pt", model, cfg, src_vocab, tgt_vocab, 3)
    raw = torch.load(tmp_path / "m.pt", weights_only=True)  # plain types only
    assert raw["config"]["name"] == "smoke" and raw["step"] == 3
    reloaded, cfg2, sv, tv = load_checkpoint(tmp_path / "m.pt")
    assert cfg2 == cfg and sv.itos == src_vocab.itos and tv.itos == tgt_vocab.itos
    assert not reloaded.training
    pairs = load_numerals("valid")[:30]
    assert exact_match(reloaded, pairs, sv, tv) == exact_match(model, pairs, src_vocab, tgt_vocab)


def test_lesson_runs_in_the_other_direction_from_papermill_parameters(tmp_path, monkeypatch) -> None:
    """The notebook top to bottom with `-p PRESET smoke -p DIRECTION zh2digits -p CHANGES ...`."""
    import papermill
    from support import solution_path

    monkeypatch.setenv("COURSE_RUN_DIR", str(tmp_path / "runs"))
    monkeypatch.delenv("COURSE_PRESET", raising=False)
    papermill.execute_notebook(str(solution_path("09_training")), str(tmp_path / "out.ipynb"),
                               parameters={"PRESET": "smoke", "DIRECTION": "zh2digits",
                                           "CHANGES": {"max_steps": 20, "test_examples": 50}},
                               cwd=str(tmp_path), kernel_name="python3", progress_bar=False)
    model, cfg, src_vocab, tgt_vocab = load_checkpoint(tmp_path / "runs" / "smoke" / "numerals_zh2digits.pt")
    assert (cfg.name, cfg.direction, cfg.max_steps, cfg.test_examples) == ("smoke", "zh2digits", 20, 50)
    assert "万" in src_vocab.itos and "万" not in tgt_vocab.itos  # Chinese in, digits out
