"""Fixtures of the hidden graders.

Run by the engine (``python -m grader check``), or directly with pytest for debugging:
``pytest grader/hidden/test_01_attention_by_hand.py --notebook path/to/notebook.ipynb``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from grader.check.plugin import SUBMISSION_KEY
from grader.i18n import msg
from grader.testkit.framework import _RUN_SEED, fresh_seed, secret_to_seed
from grader.testkit.submission import Submission


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--notebook", default=None, help=str(msg("notebook to grade (direct pytest runs)")))
    parser.addoption("--seed", default=None, help=str(msg("seed of the hidden inputs (default: fresh, or COURSE_GRADER_SEED)")))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", str(msg("exercise(name, points): exercise and points of a check")))
    if _RUN_SEED.get() is None:  # a direct pytest run (the engine sets its own): one seed
        seed = config.getoption("--seed", None)
        _RUN_SEED.set(secret_to_seed(seed) if seed else fresh_seed())


@pytest.fixture(scope="session")
def sub(request: pytest.FixtureRequest) -> Submission:
    if SUBMISSION_KEY in request.config.stash:
        return request.config.stash[SUBMISSION_KEY]
    path = request.config.getoption("--notebook")
    if not path:
        pytest.skip(str(msg("hidden graders need --notebook (or run them through python -m grader)")))
    from grader.check.engine import in_process_submission
    from grader.check.notebook import read_notebook

    return in_process_submission(read_notebook(path))


@pytest.fixture(autouse=True)
def course_versions_of_what_it_builds_on(request: pytest.FixtureRequest, sub: Submission) -> Iterator[None]:
    """The exercises a test's exercise builds on are the course's versions while it runs
    (grader.testkit.parts; the engine's runner does the same)."""
    from grader.testkit.parts import judged_alone

    marker = request.node.get_closest_marker("exercise")
    with judged_alone(sub, request.module, str(marker.args[0]) if marker else ""):
        yield
    sub.settle()  # what the test sent without waiting is answered within it
