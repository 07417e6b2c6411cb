"""Shared fixtures of the course's own test suite."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from coursekit import catalogue

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

# Kernels started by the tests (nbclient, nbgrader) must import this checkout's packages.
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
os.environ.setdefault("MPLBACKEND", "Agg")
# `grader check` in a test runs cold, never leaving a warm helper behind (tests/test_helper.py
# starts its own, in a private folder).
os.environ.setdefault("COURSE_CHECK_HELPER", "off")


# CI sets it: a sandbox test that cannot run fails instead of skipping.
SANDBOX_REQUIRED = bool(os.environ.get("COURSE_REQUIRE_SANDBOX"))


def needs_bubblewrap(reason: str = "bubblewrap cannot hide the course's files here") -> pytest.MarkDecorator:
    """Skip where bubblewrap cannot run, unless SANDBOX_REQUIRED: then the test runs, and fails."""
    from grader.sandbox import available_protections

    lacking = "files-hidden" not in available_protections()
    return pytest.mark.skipif(lacking and not SANDBOX_REQUIRED, reason=reason)


@pytest.fixture(scope="module")
def one_thread():
    """For modules of tiny models (``pytestmark = pytest.mark.usefixtures("one_thread")``):
    a second OpenMP thread only waits for a busy core."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def no_course_env(monkeypatch):
    """No preset, direction or grading mode chosen from outside the test."""
    for name in ("COURSE_PRESET", "COURSE_DIRECTION", "COURSE_GRADING", "CI"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def lessons() -> list[str]:
    """The ids of the course's lessons (coursekit.catalogue)."""
    return catalogue.COURSE.ids()


def solution_path(lesson: str) -> Path:
    return catalogue.get(lesson).solution()


def lesson_path(lesson: str) -> Path:
    return catalogue.get(lesson).student()


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT
