"""Grading: run a lesson's hidden tests against a submission and total the points."""

from __future__ import annotations

import contextlib
import io
import os
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from coursekit import catalogue, settings
from coursekit.errors import UnknownLesson
from grader.check import messages, runner, timeline
from grader.check.notebook import cells_to_run, read_notebook
from grader.check.plugin import CollectPoints
from grader.check.remote import RemoteSubmission
from grader.common.limits import DEFAULT_LIMITS, Limits, WorkerHandle
from grader.i18n import msg, notebook_edition
from grader.results import ExerciseResult, Report, Status
from grader.runtime.errors import (
    CallCrashed,
    CallHung,
    GradingError,
    ProtocolError,
    WorkerDied,
    WorkerOutOfMemory,
    WorkerTimeout,
)
from grader.testkit.framework import fresh_seed, grading_run
from grader.testkit.lessons import HIDDEN_DIR, hidden_test_file, known_lessons
from grader.testkit.submission import InProcessSubmission, Submission

if TYPE_CHECKING:
    from grader.check.launch import Started, WorkerSource

def exercise_points(lesson: str) -> dict[str, float]:
    """``{exercise: max points}`` of a lesson's hidden graders, in their order."""
    points: dict[str, float] = {}
    for _, exercise, value, _, _ in runner.collect(lesson):
        points[exercise] = points.get(exercise, 0.0) + value
    return points


@contextlib.contextmanager
def quiet() -> Any:
    """No warnings, no prints: nbgrader scores a cell 0 for any stderr output."""
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        yield


@contextlib.contextmanager
def _no_plugin_autoload() -> Any:
    """Third-party pytest plugins have no business in grading (and scanning for them is slow)."""
    old = os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD")
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
        else:
            os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = old


def run_hidden_tests(sub: Submission, lesson: str, only: set[str] | None = None,
                     use_pytest: bool = False, seed: int | None = None) -> list[ExerciseResult]:
    """Run the hidden graders of ``lesson`` (optionally only some exercises), with the
    fast thread-safe runner (default) or with pytest itself; hidden inputs are drawn from
    ``seed`` (fresh for every run when ``None``: see ``grader.testkit.framework.fresh_seed``)."""
    hidden_test_file(lesson)
    if not use_pytest:
        with timeline.span("hidden"):
            return runner.run(sub, lesson, only, seed)  # thread-safe: callers silence output if needed
    plugin = CollectPoints(sub, only)
    # no:unraisableexception: its clean-up runs gc.collect() five times per session, most
    # of a session's time once torch's objects fill the heap
    args = [str(hidden_test_file(lesson)), "-q", "-s", "-c", str(HIDDEN_DIR / "pytest.ini"),
            "--rootdir", str(HIDDEN_DIR)]
    for plugin_name in ("cacheprovider", "warnings", "stepwise", "faulthandler", "unraisableexception"):
        args += ["-p", f"no:{plugin_name}"]
    with quiet(), _no_plugin_autoload(), grading_run(seed):
        pytest.main(args, plugins=[plugin])
    if plugin.errors:
        raise RuntimeError("; ".join(plugin.errors))
    return list(plugin.results.values())


def in_process_submission(nb: dict[str, Any]) -> InProcessSubmission:
    sub = InProcessSubmission()
    with quiet():
        sub.load(cells_to_run(nb))
    return sub


def grade_in_process(nb: dict[str, Any], lesson: str, notebook: str = "",
                     seed: int | None = None) -> Report:
    """Grade in this process: fast, for the course's own tests. Not safe for untrusted code."""
    start = time.perf_counter()
    sub = in_process_submission(nb)
    with quiet():
        results = run_hidden_tests(sub, lesson, seed=seed)
    return Report(notebook, lesson, results, seconds=time.perf_counter() - start,
                  edition=notebook_edition(nb, notebook))


def resolve_lesson(path: str | Path, lesson: str | None) -> str:
    if lesson:
        hidden_test_file(lesson)
        return lesson
    found = catalogue.COURSE.lesson_of(path) or _lesson_by_cells(path)
    if found is None:
        raise UnknownLesson(msg("cannot tell the lesson of {path}: name it <lesson>.ipynb or pass --lesson (known: {lessons})", path=path, lessons=', '.join(known_lessons())))
    return found.id


def _lesson_by_cells(path: str | Path) -> catalogue.Lesson | None:
    """The one lesson whose graded cells (grade ids) the notebook holds, as ``grade`` finds a
    renamed notebook (an LMS's ``submission_1234.ipynb``); None when none or several."""
    try:
        ids = catalogue.grade_ids(read_notebook(path))
    except Exception:  # noqa: BLE001 - unreadable: the caller's error says so
        return None
    matches = [lesson for lesson in catalogue.COURSE.lessons if ids & set(lesson.graded)]
    return matches[0] if len(matches) == 1 else None


@dataclass
class _Run:
    """One run of the notebook in one worker: the exercises it graded, and how it ended."""

    results: list[ExerciseResult]
    status: Status = Status.OK
    cell_errors: list[dict[str, Any]] = field(default_factory=list)
    excerpt: str = ""
    failed_call: CallHung | CallCrashed | None = None  # a call that hung or stopped the worker


def _run_once(cells: list[tuple[int, str]], lesson: str, worker: WorkerHandle, limits: Limits,
              exercises: list[str], seed: int, sub: RemoteSubmission | None = None) -> _Run:
    """Run the notebook in ``worker`` and grade ``exercises`` in order. Stops after the
    exercise during which a call hung or stopped the worker (``failed_call``), so that the
    rest can be graded elsewhere; a notebook that hangs or dies while it loads, or runs out
    of its wall clock, fails every exercise left with the reason (its status says which).
    ``sub``: the worker's submission, when its cells were sent already (``begin_load``)."""
    sub = sub or RemoteSubmission(worker.sock, limits.call_s)
    run = _Run([])
    try:
        try:
            loaded = sub.load(cells, timeout=limits.wall_s + 5)
            run.cell_errors = list(loaded.get("errors", [])) if isinstance(loaded, dict) else []
        except GradingError:
            pass  # recorded in sub.broken; every check then fails with its reason
        for exercise in exercises:
            if isinstance(sub.broken, WorkerDied) and worker.timed_out:
                sub.broken = WorkerTimeout(msg("no answer within {seconds} s", seconds=format(limits.wall_s, 'g')))  # its wall clock
            loaded_fine = sub.broken is None
            run.results += run_hidden_tests(sub, lesson, only={exercise}, seed=seed)
            if loaded_fine and isinstance(sub.broken, CallHung | CallCrashed) \
                    and not worker.timed_out:
                run.failed_call = sub.broken
                break
    finally:
        if isinstance(sub.broken, WorkerTimeout):
            worker.kill()  # it may be spinning; a dead worker is only reaped
        elif sub.broken is not None and not isinstance(sub.broken, WorkerDied):
            worker.kill()
        if sub.close():  # it answered its shutdown: its output is all there, it exits as asked
            worker.release()
            ended = "ok"
        else:
            ended = worker.finish()
    run.excerpt = worker.output_excerpt()
    if Status.of_worker(ended) == Status.MEMORY:  # wherever it was: decided in grade_with_worker
        run.status, run.failed_call = Status.MEMORY, None
    elif sub.broken is not None and run.failed_call is None:
        run.status = Status.of_worker(ended)
        if run.status == Status.OK:
            run.status = Status.CRASHED
        if isinstance(sub.broken, WorkerTimeout):
            run.status = Status.TIMEOUT
        elif isinstance(sub.broken, ProtocolError) and not worker.timed_out:
            run.status = Status.GARBLED  # killed by the grader when it read the garbage
    return run


def grade_with_worker(nb: dict[str, Any], lesson: str, worker: WorkerHandle, notebook: str = "",
                      limits: Limits = DEFAULT_LIMITS,
                      restart: Callable[[], WorkerHandle] | None = None,
                      seed: int | None = None, sub: RemoteSubmission | None = None) -> Report:
    """Grade ``nb`` in a started worker (``launch.LocalWorker`` or a sandboxed one). The
    worker enforces ``limits.wall_s`` itself (one run of the notebook); each request of a
    check waits at most ``limits.call_s``.

    A call that hangs or stops the worker costs only its exercise: with ``restart`` (a
    function returning a fresh worker), the exercises after it are graded in a fresh
    worker, the notebook run again there, and the exercise is not retried; its hint names
    the call (``grader.testkit.calls``). Without ``restart``, every exercise left fails. Every
    check of the submission draws its hidden inputs from one ``seed`` (fresh when None:
    ``grader.testkit.framework.fresh_seed``), recorded in the report when it was drawn at random.
    ``sub``: ``worker``'s submission, when the notebook's cells were sent to it already
    (``RemoteSubmission.begin_load``: ``grader.check.launch.start_early``)."""
    start = time.perf_counter()
    cells = cells_to_run(nb)
    pending = list(exercise_points(lesson))
    report = Report(notebook, lesson, [], edition=notebook_edition(nb, notebook))
    if seed is None:
        seed = fresh_seed()
        report.seed = None if settings.grader_seed() else seed  # never the instructor's secret
    first = True
    while True:
        run = _run_once(cells, lesson, worker, limits, pending, seed, sub)
        sub = None  # a fresh worker's is made for it
        report.exercises += run.results
        if first:
            report.cell_errors, report.output_excerpt, first = run.cell_errors, run.excerpt, False
        pending = pending[len(run.results):]
        if run.status != Status.OK:
            report.status = run.status
        if run.failed_call is None:
            break
        hung, what = run.results[-1].name, messages.describe(run.failed_call)
        again = msg("; the exercises after it were graded in a fresh run of the notebook") \
            if pending and restart is not None else ""
        report.notes.append(msg("A check of `{hung}` failed ({what}): its checks left score 0{again}.", hung=hung, what=what, again=again))
        if not pending:
            break
        if restart is None:
            report.exercises += nothing_graded(lesson, run.failed_call, only=pending)
            break
        worker = restart()
    if report.status == Status.MEMORY:
        report.exercises = nothing_graded(lesson, WorkerOutOfMemory(limits.memory_bytes / 2**30))
    report.seconds = time.perf_counter() - start
    return report


def nothing_graded(lesson: str, reason: GradingError,
                   only: list[str] | None = None) -> list[ExerciseResult]:
    """Every exercise of ``lesson`` (or ``only`` those) at 0 for ``reason``. A notebook that
    reached its memory limit gets this for all of them, whenever it reached it: where a
    limit is reached depends on the run (hidden inputs, what the process holds, cgroup or
    rlimit), its score must not."""
    return [ExerciseResult(name, 0.0, points, [messages.explain(reason, name)])
            for name, points in exercise_points(lesson).items() if only is None or name in only]


def check_notebook(path: str | Path, lesson: str | None = None, limits: Limits = DEFAULT_LIMITS,
                   load_timeout: float | None = None, source: WorkerSource | None = None,
                   started: Started | None = None) -> Report:
    """``grader check``: read, run in a worker process, grade. Raises NotebookError
    (unreadable notebook) or KeyError (unknown lesson). ``load_timeout``: the wall clock.
    ``source``: where workers come from (``grader.check.launch``; default: the sandbox, opened
    and closed here). ``started``: the first worker, already running the notebook read
    (``grader.check.launch.start_early``, from ``source``, with these limits)."""
    from grader.check import launch

    limits = limits.with_(wall_s=load_timeout)
    try:
        nb = started.nb if started is not None else read_notebook(path)
        lesson = resolve_lesson(path, lesson)
    except BaseException:
        if started is not None:
            started.discard()
        raise
    if source is None:
        with contextlib.closing(launch.default_source(limits)) as own:
            return check_notebook(path, lesson, limits, source=own)
    worker, sub = (started.worker, started.sub) if started is not None else (source.start(limits), None)
    return grade_with_worker(nb, lesson, worker, notebook=str(path), limits=limits,
                             restart=lambda: source.start(limits), sub=sub)
