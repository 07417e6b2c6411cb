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

from typing import Any

from coursekit import settings

from .engine import quiet, run_hidden_tests
from .i18n import choose, words
from .limits import DEFAULT_LIMITS
from .submission import InProcessSubmission


def grade(lesson: str, exercise: str, namespace: dict[str, Any]) -> float:
    sub = InProcessSubmission(namespace, prepare=False,
                              call_timeout=settings.call_timeout() or DEFAULT_LIMITS.call_s)
    with quiet():
        try:
            results = run_hidden_tests(sub, lesson, only={exercise})
        except Exception as exc:  # noqa: BLE001 - never write to stderr from a grade cell
            failure = f"{exercise}: the grader could not run ({type(exc).__name__}: {exc})"
        else:
            failure = ""
    t = words(choose(None))  # $COURSE_LANG: nbgrader_config.py sets it per notebook's edition
    if failure:
        print(t(failure))
        return 0.0
    points = float(sum(r.points for r in results))
    max_points = float(sum(r.max_points for r in results))
    print(t(f"{exercise}: {points:g} / {max_points:g} points"))
    for result in results:
        for hint in result.hints:
            label = t("hint:")
            print(f"  {label}{'' if label.endswith('：') else ' '}{t(hint)}")
    return points
