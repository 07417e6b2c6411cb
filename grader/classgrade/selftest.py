"""``python -m grader selftest``: is this installation ready to grade? In about a minute.

For each lesson (``--lessons``, default all): the reference notebook must earn full marks
and the untouched student notebook zero, both graded exactly as ``grade`` grades a class:
in the sandbox, at the isolation level asked for, with the protections it lists. Lighter
than the test suite, and it checks the machine it runs on: the sandbox, the installed
packages, the graders.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from coursekit import catalogue
from coursekit.text import columns, row
from grader.check.engine import grade_with_worker
from grader.check.notebook import read_notebook
from grader.classgrade.classroom import Options, workers
from grader.i18n import words
from grader.i18n.message import Message, msg


@dataclass
class LessonSelftest:
    lesson: str
    solution: float
    blank: float
    max_score: float
    seconds: float
    problems: list[Message]


def check_lesson(lesson: catalogue.Lesson, isolation: str = "auto",
                 require: tuple[str, ...] = ()) -> tuple[LessonSelftest, list[str], dict[str, str]]:
    """Grade the lesson's reference and student notebooks in its own sandbox pool."""
    began = time.perf_counter()
    opts = Options(lesson=lesson.id, out=Path("."), jobs=2, isolation=isolation, require=require)
    paths = {"solution": lesson.solution(), "blank": lesson.student()}
    with workers(opts) as pool, ThreadPoolExecutor(2) as both:
        futures = {kind: both.submit(lambda p: grade_with_worker(
            read_notebook(p), lesson.id, pool.start(), notebook=str(p), restart=pool.start), path)
            for kind, path in paths.items()}
        reports = {kind: future.result() for kind, future in futures.items()}
        protections, missing = list(pool.protections), pool.plan.report()["missing"]
    good, blank = reports["solution"], reports["blank"]
    problems = []
    if good.status != "ok" or good.score != good.max_score:
        lost = [f"{x.name} ({x.message[:120]})" for x in good.exercises if not x.passed]
        problems.append(msg("the reference notebook scored {score}/{max_score} [{status}]: {lost}",
                            score=f"{good.score:g}", max_score=f"{good.max_score:g}", status=good.status,
                            lost=", ".join(lost) or good.message))
    if blank.status != "ok" or blank.score != 0:
        problems.append(msg("the untouched student notebook scored {score} [{status}]",
                            score=f"{blank.score:g}", status=blank.status))
    outcome = LessonSelftest(lesson.id, good.score, blank.score, good.max_score,
                      time.perf_counter() - began, problems)
    return outcome, protections, missing


#: The columns of a score cell, ``   4 / 4  `` (:func:`_score`).
SCORE_COLUMNS = 10


def _score(score: float, max_score: float) -> str:
    return f"{score:>4g} / {max_score:<3g}"


def run(spec: str | None = None, isolation: str = "auto", require: tuple[str, ...] = (),
        echo: bool = True, lang: str = "en") -> bool:
    """Check the lessons; print a table as it goes (in ``lang``, the instructor's); True when
    every lesson passed."""
    t = words(lang)
    lessons = catalogue.select(spec)
    began = time.perf_counter()
    header = [t("lesson"), t("reference"), t("untouched"), t("seconds")]
    # the rows are printed as each lesson is checked: their cells' widths are known ahead
    widths = columns([header, *([lesson.id] for lesson in lessons)], least=(0, SCORE_COLUMNS, SCORE_COLUMNS, 7))
    ok = True
    protections: list[str] = []
    missing: dict[str, str] = {}
    if echo:
        print(row(header, widths, "<<<<", "  ").rstrip())
    for lesson in lessons:
        outcome, protections, missing = check_lesson(lesson, isolation, require)
        ok = ok and not outcome.problems
        if echo:
            mark = t("ok") if not outcome.problems else t("FAILED")
            cells = [lesson.id, _score(outcome.solution, outcome.max_score), _score(outcome.blank, outcome.max_score),
                     f"{outcome.seconds:.1f}"]
            print(row(cells, widths, "<<<>", "  ") + "  " + mark)
            for problem in outcome.problems:
                print(f"    {t(problem)}")
    if echo:
        lacking = msg(", missing: {protections}", protections=", ".join(missing)) if missing else ""
        print(t(msg("sandbox (isolation {isolation}): {active} protection(s) active{missing}",
                    isolation=isolation, active=len(protections), missing=lacking)))
        print(t(msg("{verdict}: {lessons} lesson(s) in {seconds} s", verdict=msg("passed") if ok else msg("FAILED"),
                    lessons=len(lessons), seconds=f"{time.perf_counter() - began:.0f}")))
    return ok
