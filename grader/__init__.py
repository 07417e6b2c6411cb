"""Grading package of the course "Attention, from 优秀 to a trainable Transformer".

The folders are the stages, in the order a notebook goes through the grader: ``STAGES``
below, lowest first. A stage imports only itself and the stages before it
(tests/grader/test_layering.py); CONTRIBUTING.md's "Where things live" lists them in this order
(tests/grader/test_layering.py checks that too).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

__version__ = "0.1.0"


def __getattr__(name: str) -> Path:
    """``PACKAGE_DIR``, this package's folder, and ``COURSE_ROOT``, the course's (its parent:
    coursekit/, datasets/, ...): made when first asked for, so that a warm check's client,
    which imports this package, does not import pathlib."""
    if name not in ("PACKAGE_DIR", "COURSE_ROOT"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from pathlib import Path

    package = Path(__file__).resolve().parent
    globals().update(PACKAGE_DIR=package, COURSE_ROOT=package.parent)
    return globals()[name]

#: The grader's stages, lowest first: (its packages, its role). A module imports only its own
#: stage and the ones before it.
STAGES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("runtime",), "what runs beside the student's code (standard library, numpy and torch only)"),
    (("common", "i18n"), "what every stage shares: hints, limits, ids, CSV cells, templates, the log, the translations"),
    (("sandbox",), "where a worker runs"),
    (("testkit",), "what the hidden tests are written with"),
    (("check", "hidden", "results"), "one notebook: its worker, the hidden tests, its result and the graded folder that keeps it"),
    (("outputs",), "how a result is shown to people: check's report, feedback, class report, gradebook, LMS files"),
    (("helper",), "check's warm per-user helper"),
    (("classgrade",), "a whole class"),
    (("integrations", "kernel", "authoring"), "the grader inside nbgrader, Gradescope and a notebook kernel; writing the course"),
    (("cli", "__main__"), "the command line"),
)
