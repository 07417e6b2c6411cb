"""``python -m grader grade``: grade a whole class, one sandboxed worker per submission.

``SUBMITTED/<student_id>/<lesson>/<lesson>.ipynb`` in (nbgrader's layout); out:
``grades.csv`` (one row per student folder, whatever happened), ``results/<id>.json``
(the ``check`` object plus ``status``) and ``feedback/<id>/<lesson>.html``. Each
student's files are written atomically as soon as they are graded, so an interrupted run
loses nothing, and a rerun grades only the students without results (``force`` regrades).
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coursekit import catalogue

from . import results
from .engine import exercise_points, grade_with_worker
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
    isolation: str = "full"  # "full" | "auto" | "none"
    wall_s: float = 120.0
    call_timeout: float = 20.0
    memory_bytes: int = 2 << 30


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
def workers(opts: Options) -> Iterator[tuple[Callable[[bytes], Any], list[str]]]:
    """Yields ``(start, protections)``: ``start(notebook_bytes)`` returns a fresh worker."""
    if opts.isolation == "none":
        from .launch import LocalLimits, LocalWorker

        limits = LocalLimits(memory_bytes=opts.memory_bytes)
        yield (lambda _nb: LocalWorker(limits)), list(LocalWorker.protections)
        return
    from .sandbox import Limits, SandboxPool, default_worker_files

    limits = Limits(wall_s=opts.wall_s, memory_bytes=opts.memory_bytes)
    files = {**default_worker_files(), **public_files(opts.lesson)}
    with SandboxPool(jobs=opts.jobs, limits=limits, isolation=opts.isolation,
                     worker_files=files) as pool:
        yield pool.start, list(pool.protections)


# --- one student ------------------------------------------------------------------------

def grade_student(student: str, opts: Options, submitted: Path, start: Callable[[bytes], Any]) -> Report:
    lesson = opts.lesson
    # nbgrader's layout: <student>/<lesson>/<notebook>, the notebook of any edition
    folder = submitted / student / lesson
    names = [path.name for path in catalogue.get(lesson).notebooks("student").values()]
    path = next((folder / name for name in names if (folder / name).is_file()), folder / names[0])
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
    worker = start(data)
    watchdog = threading.Timer(opts.wall_s, worker.kill)
    watchdog.start()
    try:
        report = grade_with_worker(nb, lesson, worker, notebook=shown, load_timeout=opts.wall_s,
                                   call_timeout=opts.call_timeout)
    finally:
        watchdog.cancel()
    return report


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

    @property
    def median_s(self) -> float:
        return statistics.median(self.per_submission) if self.per_submission else 0.0


def student_folders(submitted: Path) -> list[str]:
    return sorted(p.name for p in submitted.iterdir() if p.is_dir() and not p.name.startswith("."))


def grade_class(submitted: Path, opts: Options, progress: bool = True) -> RunSummary:
    from tqdm import tqdm

    students = student_folders(submitted)
    out = opts.out
    (out / "results").mkdir(parents=True, exist_ok=True)
    todo = [s for s in students if opts.force or not (out / "results" / f"{s}.json").exists()]
    started = time.perf_counter()
    seconds: list[float] = []
    with workers(opts) as (start, protections), ThreadPoolExecutor(max(1, opts.jobs)) as pool, \
            tqdm(total=len(todo), desc=f"grading {opts.lesson}", unit="nb", disable=not progress) as bar:
        futures = {pool.submit(_grade_and_save, s, opts, submitted, start): s for s in todo}
        for future in as_completed(futures):
            seconds.append(future.result())
            bar.update(1)
    write_csv(out, students, list(exercise_points(opts.lesson)))
    summary = RunSummary(len(todo), len(students) - len(todo), time.perf_counter() - started,
                         seconds, protections)
    write_atomic(out / "run.json", json.dumps({
        "lesson": opts.lesson, "students": len(students), "graded": summary.graded,
        "reused": summary.reused, "jobs": opts.jobs, "isolation": opts.isolation,
        "protections": protections, "seconds": round(summary.seconds, 3),
        "median_seconds_per_submission": round(summary.median_s, 4)}, indent=2))
    return summary


_LOG_LOCK = threading.Lock()


def _log_error(out: Path, student: str, attempt: int, exc: BaseException) -> None:
    """The instructor's record of what went wrong in the grader itself (trusted code only)."""
    text = "".join(traceback.format_exception(exc))
    with _LOG_LOCK, open(out / "errors.log", "a", encoding="utf-8") as log:
        log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} {student} (attempt {attempt + 1})\n{text}")


def _grade_and_save(student: str, opts: Options, submitted: Path, start: Callable[[bytes], Any]) -> float:
    began = time.perf_counter()
    report, failure = None, "unknown"
    for attempt in range(2):  # a failure of the machinery (not of the notebook) is retried once
        try:
            report = grade_student(student, opts, submitted, start)
            break
        except Exception as exc:  # noqa: BLE001 - one submission never costs another its result
            _log_error(opts.out, student, attempt, exc)
            failure = type(exc).__name__
    if report is None:
        report = not_graded(f"{student}/{opts.lesson}", opts.lesson, exercise_points(opts.lesson),
                            Status.ERROR,
                            f"The grader failed on this submission ({failure}); see errors.log.")
    write_atomic(opts.out / "feedback" / student / f"{opts.lesson}.html",
                 results.feedback_html(report, student))
    write_atomic(opts.out / "results" / f"{student}.json", results.record_json(report))
    return time.perf_counter() - began
