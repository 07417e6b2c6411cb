"""``coursekit.settings``' helpers for the lessons' runs (issue 53, item 9): ``load_preset``,
``choose_device`` and ``choose_threads``, written once there (they were written in lessons 09,
10 and 11), each lesson passing its own ``PRESETS``. Their environment variables:
``COURSE_PRESET``, ``COURSE_DIRECTION``, ``COURSE_GRADING``/``CI``, ``COURSE_THREADS``."""

from __future__ import annotations

import dataclasses
import os

import pytest
import torch

from coursekit import settings


@dataclasses.dataclass(frozen=True)
class Toy:
    name: str
    direction: str = "digits2zh"
    width: int = 8


PRESETS = {"smoke": Toy("smoke", width=2), "cpu": Toy("cpu"), "gpu": Toy("gpu", width=64)}


def test_load_preset_by_argument_with_changes(no_course_env) -> None:
    assert settings.load_preset(PRESETS, "cpu") == Toy("cpu")
    assert settings.load_preset(PRESETS, "gpu", "zh2digits") == Toy("gpu", "zh2digits", 64)
    assert settings.load_preset(PRESETS, "cpu", width=3) == Toy("cpu", width=3)
    assert PRESETS["cpu"] == Toy("cpu"), "the lesson's preset itself is left as it was"


def test_load_preset_from_the_environment(no_course_env) -> None:
    no_course_env.setenv(settings.PRESET, "gpu")
    no_course_env.setenv(settings.DIRECTION, "zh2digits")
    assert settings.load_preset(PRESETS) == Toy("gpu", "zh2digits", 64)
    assert settings.load_preset(PRESETS, "smoke", "digits2zh") == Toy("smoke", width=2), \
        "arguments beat the environment"


def test_load_preset_default_smoke_when_grading_else_by_device(no_course_env, tmp_path) -> None:
    no_course_env.chdir(tmp_path)
    assert settings.load_preset(PRESETS).name == ("gpu" if torch.cuda.is_available() else "cpu")
    no_course_env.setattr(torch.cuda, "is_available", lambda: True)
    assert settings.load_preset(PRESETS).name == "gpu"
    no_course_env.setattr(torch.cuda, "is_available", lambda: False)
    assert settings.load_preset(PRESETS) == Toy("cpu")
    for name, value in ((settings.GRADING, "1"), ("CI", "true")):
        no_course_env.setenv(name, value)
        assert settings.load_preset(PRESETS).name == "smoke", f"{name}={value}: the smallest preset"
        no_course_env.delenv(name)
    (tmp_path / "autograded" / "alice" / "10_decoder_only").mkdir(parents=True)
    no_course_env.chdir(tmp_path / "autograded" / "alice" / "10_decoder_only")
    assert settings.load_preset(PRESETS).name == "smoke", "nbgrader's autograded/ folder is grading"


def test_load_preset_refuses_an_unknown_preset_or_field(no_course_env) -> None:
    with pytest.raises(ValueError, match="unknown preset 'large'; choose one of smoke, cpu, gpu"):
        settings.load_preset(PRESETS, "large")
    no_course_env.setenv(settings.PRESET, "huge")
    with pytest.raises(ValueError, match="'huge'"):
        settings.load_preset(PRESETS)
    with pytest.raises(TypeError):
        settings.load_preset(PRESETS, "cpu", not_a_field=1)


def test_choose_device(monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert settings.choose_device() == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert settings.choose_device() == torch.device("cuda")


def test_choose_threads_from_the_environment(monkeypatch) -> None:
    monkeypatch.setenv(settings.THREADS, "3")
    assert settings.choose_threads() == 3
    monkeypatch.setenv(settings.THREADS, "0")
    assert settings.choose_threads() == 1, "at least one thread"
    monkeypatch.setenv(settings.THREADS, "many")
    with pytest.raises(ValueError, match="COURSE_THREADS"):
        settings.choose_threads()


@pytest.mark.parametrize(("cores", "load", "want"), [(8, 2.4, 6), (8, 0.0, 8), (4, 7.0, 1), (None, 0.0, 1)])
def test_choose_threads_takes_the_free_cores(monkeypatch, cores, load, want) -> None:
    monkeypatch.delenv(settings.THREADS, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    assert settings.choose_threads() == want


def test_choose_threads_without_a_load_average(monkeypatch) -> None:
    monkeypatch.delenv(settings.THREADS, raising=False)

    def missing() -> tuple[float, float, float]:
        raise OSError("no load average here")

    monkeypatch.setattr(os, "getloadavg", missing)
    assert settings.choose_threads() == 1


@dataclasses.dataclass(frozen=True)
class Grown:
    """Toy with two fields added after checkpoints were saved; one without a value from then."""
    name: str
    width: int = 8
    base: float = settings.added_field(100.0, before=10000.0)
    sample: int | None = settings.added_field(500, before=None)
    margin: float = 0.02


def test_a_field_added_later_has_todays_default_in_new_presets() -> None:
    assert Grown("cpu") == Grown("cpu", 8, 100.0, 500, 0.02)


def test_a_saved_preset_takes_the_values_that_applied_when_it_was_saved() -> None:
    old = {"name": "cpu", "width": 4}                      # saved before base, sample and margin
    assert settings.saved_preset(Grown, old) == Grown("cpu", 4, base=10000.0, sample=None)
    assert settings.saved_preset(Grown, old).margin == 0.02, "no value from then: today's default"
    assert settings.saved_preset(Grown, {**old, "base": 50.0, "sample": 7}) == Grown("cpu", 4, 50.0, 7), \
        "a saved value wins"
    assert old == {"name": "cpu", "width": 4}, "the checkpoint's dict is left as it was"


def test_the_course_variables_go_whole_to_another_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """A warm check sends its ``COURSE_*`` (``course_variables``); the helper's trusted process
    takes them in place of its own (``use_course_variables``), nothing else."""
    for key in settings.course_variables():
        monkeypatch.delenv(key)
    monkeypatch.setenv("COURSE_PRESET", "cpu")
    monkeypatch.setenv("COURSE_THREADS", "3")
    monkeypatch.setenv("NOT_THE_COURSES", "x")
    assert settings.course_variables() == {"COURSE_PRESET": "cpu", "COURSE_THREADS": "3"}
    monkeypatch.setenv("COURSE_LANG", "zh")  # the trusted process's own: dropped
    settings.use_course_variables({"COURSE_PRESET": "gpu", "COURSE_THREADS": 2, "PATH": "/nowhere"})
    assert settings.course_variables() == {"COURSE_PRESET": "gpu", "COURSE_THREADS": "2"}
    assert os.environ["NOT_THE_COURSES"] == "x" and os.environ["PATH"] != "/nowhere"
