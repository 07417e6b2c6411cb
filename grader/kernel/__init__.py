"""Grading inside a notebook kernel, for nbgrader's hidden test cells.

A hidden test cell of the reference notebook ends with::

    ### BEGIN HIDDEN TESTS
    from grader.kernel import grade
    grade("01_attention_by_hand", "softmax", globals())
    ### END HIDDEN TESTS

``grade`` runs the hidden checks of one exercise against the kernel's namespace, prints
what it earned with hints (nbgrader shows that in the feedback), writes nothing to stderr
(nbgrader scores a cell 0 if it does), and returns the points as a plain float, which
nbgrader takes as partial credit. The student's code shares this process, so these scores
are advisory; ``python -m grader grade`` is the authoritative, sandboxed grader.

Each call of a check is limited to ``DEFAULT_LIMITS.call_s`` seconds, or
``$COURSE_CALL_TIMEOUT`` (an alarm in the kernel's main thread): a call that hangs fails its check with a hint naming the call, the
exercise's other checks fail at once, and the kernel goes on to the next cell, so a hang
costs its exercise only, as under ``grade``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from coursekit import settings
from grader.check.engine import quiet, run_hidden_tests
from grader.common.limits import DEFAULT_LIMITS
from grader.common.templating import points as shown
from grader.i18n import Message, choose, msg, words
from grader.results import ExerciseResult
from grader.testkit.submission import InProcessSubmission


def grade(lesson: str, exercise: str, namespace: dict[str, Any]) -> float:
    sub = InProcessSubmission(namespace, prepare=False,
                              call_timeout=settings.call_timeout() or DEFAULT_LIMITS.call_s)
    with quiet():
        try:
            results = run_hidden_tests(sub, lesson, only={exercise})
        except Exception as exc:  # noqa: BLE001 - never write to stderr from a grade cell
            failure: Message | str = msg("{exercise}: the grader could not run ({error_type}: {error})", exercise=exercise, error_type=type(exc).__name__, error=exc)
        else:
            failure = ""
    t = words(choose(None))  # $COURSE_LANG: nbgrader_config.py sets it per notebook's edition
    if failure:
        print(t(failure))
        return 0.0
    text, points = exercise_text(exercise, results, t)
    print(text, end="")
    return points


#: Shown under a cell that raised an error when the notebook was graded in the sandbox
#: (``grader.integrations.nbgrader.sandbox``: nbgrader's autograde never runs the notebook itself).
CELL_ERROR = msg("This cell raised an error when the notebook was graded:")
#: The comment above a test cell's hidden tests in nbgrader's autograded notebook and
#: feedback (``grader.integrations.nbgrader.cells.hidden_tests_only``).
VISIBLE_TESTS_RAN = (msg("The visible tests of this exercise run when you press Validate; grading runs the hidden tests, which check the same and more."))
#: A graded test cell without the course's hidden tests gets no points in the sandbox.
NO_HIDDEN_TESTS = (msg("This test cell calls none of the course's hidden tests, so the sandboxed grader gave it no points."))


def exercise_text(exercise: str, results: list[ExerciseResult], t: Callable[[Message | str], str]) -> tuple[str, float]:
    """What a test cell shows for its exercise (the points, then each hint; ``t``
    translates) and the points earned, as nbgrader reads them for partial credit."""
    points = float(sum(r.points for r in results))
    max_points = float(sum(r.max_points for r in results))
    lines = [t(msg("{exercise}: {points} / {max_points} points", exercise=exercise, points=shown(points), max_points=shown(max_points)))]
    label = t("hint:")
    gap = "" if label.endswith("：") else " "
    lines += [f"  {label}{gap}{t(hint.text)}" for result in results for hint in result.hints]
    return "\n".join(lines) + "\n", points
