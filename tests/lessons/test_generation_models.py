"""Lesson 11's models (coursekit.reference.lesson11): with no saved model, lesson 10's is trained
there, after an estimate of how long that takes, timed on a few steps of a throwaway model, and
under a progress bar; saved, it is loaded the next time instead."""

from __future__ import annotations

import re

import pytest
import torch

from coursekit.data import load_numerals
from coursekit.reference import lesson11

pytestmark = pytest.mark.usefixtures("one_thread")


def test_a_missing_model_is_trained_after_an_estimate_then_loaded(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COURSE_RUN_DIR", str(tmp_path / "runs"))
    cfg = lesson11.load_preset("smoke", "digits2zh")
    train, valid = load_numerals("train")[:2000], load_numerals("valid")[:50]
    run_dir = tmp_path / "runs" / cfg.name
    model, vocab = lesson11.decoder_only(cfg, torch.device("cpu"), train, valid, run_dir)
    out, err = capsys.readouterr()
    cfg10 = lesson11.lesson10.load_preset("smoke")
    estimate = re.search(r"lesson 10's model: about (\d+) steps of ([\d.]+) s and (\d+) validations .*: "
                         r"about (\d+) s \(timed on 4 steps of a throwaway model\)", out)
    assert estimate, f"no estimate printed before training:\n{out}"
    assert int(estimate[1]) == cfg10.max_steps and int(estimate[3]) == cfg10.max_steps // cfg10.eval_every
    assert out.index("about") < out.index("trained for"), "the estimate comes before the training"
    assert f"{cfg10.max_steps}/{cfg10.max_steps}" in err, f"a progress bar counts the steps:\n{err}"
    assert (run_dir / "decoder_only_digits2zh.pt").is_file()
    again, _ = lesson11.decoder_only(cfg, torch.device("cpu"), train, valid, run_dir)
    assert "about" not in capsys.readouterr().out, "a saved model is loaded, not trained"
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values(),
                                                  strict=True))
