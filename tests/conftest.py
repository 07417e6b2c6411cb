"""Shared fixtures of the course's own test suite."""

from __future__ import annotations

import contextlib
import io
import os
import re
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


_CHECKPOINT = re.compile(r'"Checkpoint (\d)')


def run_checkpoints(nb: dict, through_last: bool = False) -> list[tuple[int, str | None]]:
    """Run what grading runs (grader.runtime's loop over the cells the catalogue's roles
    choose) and the demos tagged ``checkpoint``, in notebook order, in a quiet namespace of
    their own, up to the last checkpoint when ``through_last``; return (checkpoint, failure
    message or None) for each checkpoint. Any other cell must not fail."""
    from grader.runtime.execute import prepare_namespace, run_cells

    cells = [(i, cell["source"]) for i, cell in enumerate(nb["cells"])
             if catalogue.cell_role(cell) in catalogue.RUN_WHEN_GRADING
             or "checkpoint" in catalogue.tags(cell) and catalogue.cell_role(cell) is catalogue.Role.DEMO]
    if through_last:
        last = max(n for n, (_, source) in enumerate(cells) if _CHECKPOINT.search(source))
        cells = cells[:last + 1]
    with contextlib.redirect_stdout(io.StringIO()):
        errors = {e.cell: e.error for e in run_cells(cells, prepare_namespace({"__name__": "__checkpoints__"})).errors}
    results = [(int(found.group(1)), errors.pop(i, None)) for i, source in cells
               if (found := _CHECKPOINT.search(source))]
    assert not errors, f"cells that are not checkpoints failed: {errors}"
    return results


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT
