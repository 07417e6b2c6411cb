"""Shared fixtures and hooks of the course's own test suite; the helpers the tests import are
in tests/support.py."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest
import support
from support import ROOT, autograde_term, built_once, grade_term, helper_env, rows


def pytest_configure(config: pytest.Config) -> None:
    """The environment of every test and of what they start, set once before collection."""
    # Kernels started by the tests (nbclient, nbgrader) must import this checkout's packages.
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    os.environ.setdefault("MPLBACKEND", "Agg")
    # `grader check` in a test runs cold, never leaving a warm helper behind (tests/grader/helper/test_helper.py
    # starts its own, in a private folder).
    os.environ.setdefault("COURSE_CHECK_HELPER", "off")


# --- markers that say the truth: an unmarked file that takes longer than `slow`'s bound fails the
# full run (make test). A file's time is its tests' setup, call and teardown, less the time spent
# building or awaiting a folder shared by the run (built_once), which no one file owns.
_FILE_SECONDS: dict[str, float] = {}
_SLOW_FILES: set[str] = set()
_UNMARKED_SLOW: list[str] = []


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> pytest.TestReport:
    report = yield
    if support.shared_setup_s:
        report.user_properties.append(("shared_setup_s", support.shared_setup_s))
        support.shared_setup_s = 0.0
    return report


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = report.nodeid.split("::")[0]
    shared = sum(v for k, v in report.user_properties if k == "shared_setup_s")
    _FILE_SECONDS[path] = _FILE_SECONDS.get(path, 0.0) + max(0.0, report.duration - shared)
    if "slow" in report.keywords:
        _SLOW_FILES.add(path)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    if support.full_run(session.config):
        _UNMARKED_SLOW[:] = support.unmarked_slow_files(_FILE_SECONDS, _SLOW_FILES)
        failing = support.unmarked_slow_files(_FILE_SECONDS, _SLOW_FILES, support.SLOW_FILE_NOISE)
        if failing and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter) -> None:
    if _UNMARKED_SLOW:
        bound, noise = support.SLOW_FILE_S, support.SLOW_FILE_NOISE
        terminalreporter.section("slow files without the slow marker", red=True)
        terminalreporter.line(f"over {bound:g} s in this run (the run fails over {noise * bound:g} s); "
                              "mark them `pytestmark = pytest.mark.slow` (CONTRIBUTING.md, Testing):")
        for line in _UNMARKED_SLOW:
            terminalreporter.line(f"  {line}")


@pytest.hookimpl(tryfirst=True)  # before pytest-random-order's shuffle, when asked for
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files with a slow test first, each file's tests in order. `make test` hands whole
    files to its workers in this order (``--dist loadfile --no-loadscope-reorder``): the
    longest files start first, and no long file is left for last while the other worker
    idles (xdist's own order, most tests first, left the few-test end-to-end files last)."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow)


@pytest.fixture(scope="session")
def warm_check_env():
    """``helper_env`` of a helper of this test process's own, stopped at the end: for the
    tests that need many verdicts, not the cold start (tests/grader/helper/test_helper.py shows that both
    agree)."""
    import tempfile

    with tempfile.TemporaryDirectory(dir="/tmp", prefix="helper-") as name:
        env = helper_env(Path(name), "10")
        subprocess.run([sys.executable, "-m", "grader", "helper", "start"], cwd=ROOT, env=env,
                       capture_output=True, timeout=240)
        yield env
        subprocess.run([sys.executable, "-m", "grader", "helper", "stop"], cwd=ROOT, env=env,
                       capture_output=True, timeout=60)


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


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def term(tmp_path_factory) -> dict:
    """The term's class graded by ``grade`` with the example deadlines, once for the run:
    ``root`` (``submitted/``, ``deadlines.toml``), ``out``, grade's ``stdout``, ``rows``.
    Read it only; a test that regrades or adds to it works on a copy in its ``tmp_path``."""
    root = built_once(tmp_path_factory, "term", grade_term)
    return {"root": root, "out": root / "out", "rows": rows(root / "out"),
            "stdout": (root / "grade.stdout").read_text(encoding="utf-8")}


@pytest.fixture(scope="session")
def term_nbgrader(tmp_path_factory) -> dict:
    """Six students of the term in an nbgrader course, autograded once for the run (the
    course's sandbox, its late penalties): the ``course``, autograde's ``log``, nbgrader's
    ``export`` by student. Read it only; ``copy_of`` gives a test its own course."""
    folder = built_once(tmp_path_factory, "term-nbgrader", autograde_term)
    course = folder / "course"
    with open(course / "export.csv", newline="", encoding="utf-8") as f:
        exported = {row["student_id"]: row for row in csv.DictReader(f)}
    return {"course": course, "log": (folder / "autograde.log").read_text(encoding="utf-8"),
            "export": exported}
