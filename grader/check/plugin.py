"""A pytest plugin that runs hidden tests against one submission and collects points."""

from __future__ import annotations

from typing import Any

import pytest

from grader.check import messages
from grader.results import ExerciseResult
from grader.testkit.submission import Submission

SUBMISSION_KEY = pytest.StashKey[Submission]()


def _exercise_of(item: pytest.Item) -> tuple[str, float] | None:
    mark = item.get_closest_marker("exercise")
    if mark is None:
        return None
    return str(mark.args[0]), float(mark.kwargs.get("points", 1.0))


class CollectPoints:
    """Registered with ``pytest.main(plugins=[...])``; see :func:`grader.check.engine.run_hidden_tests`."""

    def __init__(self, submission: Submission, only: set[str] | None = None):
        self.submission = submission
        self.only = only
        self.results: dict[str, ExerciseResult] = {}
        self._points: dict[str, tuple[str, float]] = {}
        self.errors: list[str] = []

    def pytest_configure(self, config: pytest.Config) -> None:
        config.stash[SUBMISSION_KEY] = self.submission

    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        keep = []
        for item in items:
            found = _exercise_of(item)
            if found is None:
                continue
            name, points = found
            if self.only is not None and name not in self.only:
                continue
            result = self.results.setdefault(name, ExerciseResult(name))
            result.max_points += points
            self._points[item.nodeid] = (name, points)
            keep.append(item)
        items[:] = keep

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.errors.append(f"could not collect {report.nodeid}")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo) -> Any:
        outcome = yield
        report = outcome.get_result()
        if item.nodeid not in self._points or report.when != "call" and not report.failed:
            return
        name, points = self._points[item.nodeid]
        result = self.results[name]
        if report.when == "call" and report.passed:
            result.points += points
        elif report.failed:
            exc = call.excinfo.value if call.excinfo else None
            result.failures.append(messages.explain(exc, name))
