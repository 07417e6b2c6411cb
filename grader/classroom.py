"""``python -m grader grade``: grade a whole class, one sandboxed worker per submission.

``SUBMITTED/<student_id>/<lesson>/<lesson>.ipynb`` in (nbgrader's layout); out:
``grades.csv`` (one row per student folder, whatever happened), ``results/<id>.json``
(the ``check`` object plus ``status``), ``feedback/<id>/<lesson>.html`` and ``run.json``
(what ran, with the sandbox's active and missing protections). Each student's files are
written atomically as soon as they are graded, so an interrupted run (Ctrl-C, SIGTERM:
``Interrupted``) loses nothing, and a rerun grades only the students without results
(``force`` regrades).
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coursekit import catalogue
from coursekit.earlier import unfinished

from . import i18n, results
from .engine import exercise_points, grade_with_worker
from .limits import DEFAULT_LIMITS, Limits
from .notebook import NotebookError, parse_notebook
from .results import Report, Status, not_graded

ROOT = Path(__file__).resolve().parents[1]
MAX_NOTEBOOK_BYTES = 50 << 20


@dataclass
class Options:
    lesson: str
    out: Path
    jobs: int = 1
    force: bool = False
    isolation: str = "auto"  # "auto" | "strict" | "none" (see grader.sandbox.probe)
    require: tuple[str, ...] = ()  # protections "auto" must not go without
    limits: Limits = field(default_factory=lambda: DEFAULT_LIMITS)
    lang: str | None = None  # the feedback's language; None: each notebook's (grader.i18n)


class Interrupted(Exception):
    """``grade`` was stopped by a signal (SIGTERM; Ctrl-C raises KeyboardInterrupt)."""

    def __init__(self, signum: int):
        super().__init__(f"stopped by signal {signum}")
        self.signum = signum


# --- workers ----------------------------------------------------------------------------

def public_files(lesson: str) -> dict[str, Path]:
    """Files a submission may see besides the worker's code: the public helpers and data,
    and the reference modules of *earlier* lessons only (later ones hold solutions)."""
    this = catalogue.get(lesson)
    withheld = {other.reference_file for other in catalogue.COURSE if other.number >= this.number}
    files: dict[str, Path] = {}
    for path in sorted((ROOT / "coursekit").rglob("*.py")):
        if path not in withheld:
            files[path.relative_to(ROOT).as_posix()] = path
    for path in sorted((ROOT / "datasets").rglob("*")):
        if path.is_file() and path.suffix in {".tsv", ".md", ".txt", ".py", ".json"}:
            files[path.relative_to(ROOT).as_posix()] = path
    return files


@contextlib.contextmanager
def workers(opts: Options) -> Iterator[Any]:
    """The sandbox pool that grades this class (``pool.start()`` gives a fresh worker,
    ``pool.plan`` says which protections are active and which are missing)."""
    from .sandbox import SandboxPool, default_worker_files

    files = {**default_worker_files(), **public_files(opts.lesson)}
    with SandboxPool(jobs=opts.jobs, limits=opts.limits, isolation=opts.isolation,
                     require=opts.require, worker_files=files) as pool:
        yield pool


# --- one student ------------------------------------------------------------------------

def handed_in(folder: Path, lesson: catalogue.Lesson) -> Path:
    """The notebook a student handed in for ``lesson``: of its editions (``<id>.ipynb``,
    ``<id>.zh.ipynb``), the one they worked in, the one with the fewest exercises still
    raising NotImplementedError (an nbgrader submission may carry both editions, one
    untouched); on a tie, English. The English path when there is none."""
    names = [path.name for path in lesson.notebooks("student").values()]
    found = [folder / name for name in names if (folder / name).is_file()]
    if len(found) <= 1:
        return found[0] if found else folder / names[0]

    def left(path: Path) -> int:
        try:
            if path.stat().st_size > MAX_NOTEBOOK_BYTES:
                return len(lesson.graded) + 1
            return len(unfinished(path, lesson.graded))
        except Exception:  # noqa: BLE001 - unreadable: the other edition is the one to grade
            return len(lesson.graded) + 1
    return min(found, key=left)


def grade_student(student: str, opts: Options, submitted: Path, start: Callable[[], Any]) -> Report:
    lesson = opts.lesson
    # nbgrader's layout: <student>/<lesson>/<notebook>, the notebook of any edition
    folder = submitted / student / lesson
    path = handed_in(folder, catalogue.get(lesson))
    shown = path.relative_to(submitted).as_posix()
    if not path.is_file():
        return not_graded(shown, lesson, exercise_points(lesson), Status.MISSING,
                          f"No submission: {shown} was not found.")
    try:
        if path.stat().st_size > MAX_NOTEBOOK_BYTES:
            raise NotebookError(f"{shown}: larger than {MAX_NOTEBOOK_BYTES >> 20} MiB")
        data = path.read_bytes()
        nb = parse_notebook(data, shown)
    except (NotebookError, OSError) as exc:
        return not_graded(shown, lesson, exercise_points(lesson), Status.UNREADABLE,
                          f"The notebook could not be read: {str(exc).removeprefix(shown + ': ')}.")
    return grade_with_worker(nb, lesson, start(), notebook=shown, limits=opts.limits)


# --- files ------------------------------------------------------------------------------

def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_csv(out: Path, students: list[str], exercises: list[str]) -> None:
    rows = []
    for student in students:
        record = json.loads((out / "results" / f"{student}.json").read_text(encoding="utf-8"))
        rows.append(results.csv_row(student, Report.from_record(record), exercises))
    write_atomic(out / "grades.csv", results.csv_table(rows, exercises))


# --- the class --------------------------------------------------------------------------

@dataclass
class RunSummary:
    graded: int
    reused: int
    seconds: float
    per_submission: list[float]
    protections: list[str]
    missing: dict[str, str] = field(default_factory=dict)
    left: int = 0  # students not graded because the run was interrupted

    @property
    def median_s(self) -> float:
        return statistics.median(self.per_submission) if self.per_submission else 0.0


def student_folders(submitted: Path) -> list[str]:
    return sorted(p.name for p in submitted.iterdir() if p.is_dir() and not p.name.startswith("."))


def grade_class(submitted: Path, opts: Options, progress: bool = True,
                on_plan: Callable[[Any], None] | None = None) -> RunSummary:
    """Grade every student without a result (all with ``force``). On Ctrl-C or SIGTERM
    (``Interrupted``) the workers are killed, the results being computed are dropped, and
    the exception propagates with ``.summary`` attached: the files already written stay."""
    from tqdm import tqdm

    students = student_folders(submitted)
    out = opts.out
    todo = [s for s in students if opts.force or not (out / "results" / f"{s}.json").exists()]
    started = time.perf_counter()
    seconds: list[float] = []
    stop = threading.Event()
    with workers(opts) as pool:  # refuses (strict, require) before anything is written
        (out / "results").mkdir(parents=True, exist_ok=True)
        if on_plan is not None:
            on_plan(pool.plan)
        summary = RunSummary(0, len(students) - len(todo), 0.0, seconds, pool.protections,
                             dict(pool.plan.missing))
        executor = ThreadPoolExecutor(max(1, opts.jobs))
        futures = [executor.submit(_grade_and_save, s, opts, submitted, pool.start, stop)
                   for s in todo]
        try:
            with tqdm(total=len(todo), desc=f"grading {opts.lesson}", unit="nb",
                      disable=not progress) as bar:
                for future in as_completed(futures):
                    seconds.append(future.result())
                    bar.update(1)
        except BaseException as exc:
            stop.set()  # results finished from now on are dropped: our kill may have hurt them
            for future in futures:
                future.cancel()
            pool.close()
            executor.shutdown(wait=True)
            summary.graded = sum(1 for f in futures if not f.cancelled() and f.exception() is None
                                 and f.result() is not None)
            summary.left = len(todo) - summary.graded
            exc.summary = summary  # type: ignore[attr-defined]
            raise
        executor.shutdown(wait=True)
    write_csv(out, students, list(exercise_points(opts.lesson)))
    summary.graded, summary.seconds = len(todo), time.perf_counter() - started
    write_atomic(out / "run.json", json.dumps({
        "lesson": opts.lesson, "submitted": str(submitted.resolve()), "students": len(students),
        "graded": summary.graded,
        "reused": summary.reused, "jobs": opts.jobs, "isolation": pool.plan.isolation,
        "protections": pool.protections, "sandbox": pool.plan.report(),
        "limits": opts.limits.as_dict(), "seconds": round(summary.seconds, 3),
        "median_seconds_per_submission": round(summary.median_s, 4)}, indent=2))
    return summary


_LOG_LOCK = threading.Lock()


def _log_error(out: Path, student: str, attempt: int, exc: BaseException) -> None:
    """The instructor's record of what went wrong in the grader itself (trusted code only)."""
    text = "".join(traceback.format_exception(exc))
    with _LOG_LOCK, open(out / "errors.log", "a", encoding="utf-8") as log:
        log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} {student} (attempt {attempt + 1})\n{text}")


def _grade_and_save(student: str, opts: Options, submitted: Path, start: Callable[[], Any],
                    stop: threading.Event) -> float | None:
    """Grade one student and write their files; None when the run was stopped first."""
    began = time.perf_counter()
    report, failure = None, "unknown"
    for attempt in range(2):  # a failure of the machinery (not of the notebook) is retried once
        if stop.is_set():
            return None
        try:
            report = grade_student(student, opts, submitted, start)
            break
        except Exception as exc:  # noqa: BLE001 - one submission never costs another its result
            if stop.is_set():
                return None
            _log_error(opts.out, student, attempt, exc)
            failure = type(exc).__name__
    if stop.is_set():
        return None
    if report is None:
        report = not_graded(f"{student}/{opts.lesson}", opts.lesson, exercise_points(opts.lesson),
                            Status.ERROR,
                            f"The grader failed on this submission ({failure}); see errors.log.")
    lang = i18n.choose(opts.lang, report.edition)
    write_atomic(opts.out / "feedback" / student / f"{opts.lesson}.html",
                 results.feedback_html(i18n.localize(report, lang), student))
    write_atomic(opts.out / "results" / f"{student}.json", results.record_json(report))
    return time.perf_counter() - began
