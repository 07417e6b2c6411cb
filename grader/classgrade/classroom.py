"""``python -m grader grade``: grade a whole class, one sandboxed worker per submission.

``SUBMITTED/<student_id>/<lesson>/<lesson>.ipynb`` in (nbgrader's layout); out:
``grades.csv`` (one row per student folder, whatever happened), ``results/<id>.json`` (the
``check`` object plus ``status``, then what that result was made from and with: one file
per student, ``grader.results.folder``), ``feedback/<id>/<lesson>.html`` and ``run.json``
(what ran, with the sandbox's active and missing protections). Each student's files are
written atomically as soon as they are graded, so an interrupted run (Ctrl-C, SIGTERM:
``Interrupted``) loses nothing.

Each result records what it was made from (the notebook graded, found by
``grader.classgrade.find`` whatever its name, its content hash and nbgrader's
``timestamp.txt``) and with (grader version, isolation level and protections:
``grader.check.provenance``). A rerun grades the students without a result and those whose
submission changed; ``students`` regrades chosen ones, ``force`` everyone. ``run.json``
lists which results this run made, and which kept results were made under other
settings. With a course's due dates (``grader.classgrade.late``), ``grades.csv`` adds nbgrader's
``timestamp``, ``duedate``, ``raw_score`` and ``late_submission_penalty`` columns.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import statistics
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from coursekit import catalogue
from coursekit.errors import UserError
from coursekit.settings import edition as course_edition
from grader import i18n
from grader.check import provenance
from grader.check.engine import exercise_points, grade_with_worker
from grader.check.launch import course_files
from grader.check.notebook import NotebookError, read_notebook
from grader.classgrade import find as submissions
from grader.classgrade import jobs as class_jobs
from grader.classgrade.late import Deadlines, format_utc, read_timestamp
from grader.common import ids, logs
from grader.common.limits import DEFAULT_LIMITS, Limits, WorkerHandle
from grader.i18n import Message, msg
from grader.outputs.render import feedback_html
from grader.results import Provenance, Report, Status, not_graded
from grader.results.folder import Folder, grades_row

if TYPE_CHECKING:
    from grader.sandbox.pool import SandboxPool
    from grader.sandbox.probe import SandboxPlan


@dataclass
class Options:
    lesson: str
    out: Path
    jobs: int = 1
    force: bool = False
    isolation: str = "auto"  # "auto" | "strict" | "none" (see grader.sandbox.probe)
    require: tuple[str, ...] = ()  # protections "auto" must not go without
    limits: Limits = field(default_factory=lambda: DEFAULT_LIMITS)
    students: tuple[str, ...] = ()  # regrade these (and only these) students
    deadlines: Deadlines | None = None  # the course's due dates, extensions, penalty rule
    lang: str | None = None  # the feedback's language; None: each notebook's (grader.i18n)


class Interrupted(Exception):
    """``grade`` was stopped by a signal (SIGTERM; Ctrl-C raises KeyboardInterrupt, which
    :func:`grade_class` turns into this once it grades). ``summary``: what the run had done
    by then (None when it was stopped before grading began)."""

    def __init__(self, signum: int, summary: RunSummary | None = None):
        super().__init__(msg("stopped by signal {signum}", signum=signum))
        self.signum = signum
        self.summary = summary


# --- workers ----------------------------------------------------------------------------

def public_files(lesson: str) -> dict[str, Path]:
    """Files a submission may see besides the worker's code: the public helpers and data,
    and the reference modules of *earlier* lessons only (later ones hold solutions)."""
    this = catalogue.get(lesson)
    return course_files(withheld={other.reference_file for other in catalogue.COURSE
                                  if other.number >= this.number})


def preload(lesson: str) -> tuple[str, ...]:
    """What the workers' zygotes import before they fork: torch._dynamo (seconds: only the
    first optimizer needs it) for a lesson that trains, the rest for every lesson."""
    from grader.sandbox.pool import DEFAULT_PRELOAD

    if catalogue.get(lesson).trains:
        return DEFAULT_PRELOAD
    return tuple(name for name in DEFAULT_PRELOAD if name != "torch._dynamo")


def spares(jobs: int) -> int:
    """Workers to start ahead (``SandboxPool(spares=)``): one per job while the machine has
    a core beside each job's, none when the jobs take every core (there, starting ahead
    only takes a core from a job)."""
    return max(0, min(jobs, class_jobs.cores() - jobs))


@contextlib.contextmanager
def workers(opts: Options, while_booting: Callable[[SandboxPool], None] | None = None,
            ahead: bool = False) -> Iterator[SandboxPool]:
    """The sandbox pool that grades this class (``pool.start()`` gives a fresh worker,
    ``pool.plan`` says which protections are active and which are missing). A pool that
    lacks a protection ``opts`` requires is refused before anything starts; then
    ``while_booting(pool)`` runs, as the pool's zygotes boot in their own processes.
    ``ahead``: many submissions follow one another, so start workers ahead (``spares``);
    not for one or two (a spare would only cost a zygote's clone and a worker's warm-up)."""
    from grader.sandbox import SandboxPool, default_worker_files

    files = {**default_worker_files(), **public_files(opts.lesson)}
    pool = SandboxPool(jobs=opts.jobs, limits=opts.limits, isolation=opts.isolation,
                       require=opts.require, worker_files=files,
                       spares=spares(opts.jobs) if ahead else 0, preload=preload(opts.lesson))
    try:
        pool.open(while_booting=None if while_booting is None else partial(while_booting, pool))
        yield pool
    finally:
        pool.close()


# --- one student ------------------------------------------------------------------------

@dataclass
class HandedIn:
    """What a student handed in for the lesson, as far as a rerun cares."""

    folder: Path  # SUBMITTED/<student>
    found: submissions.Found
    digest: str | None
    timestamp: Any  # datetime | None (nbgrader's timestamp.txt)

    def key(self) -> dict[str, Any]:
        """Compared with the result's ``submission``: a change means a regrade."""
        shown = self.found.path.relative_to(self.folder.parent).as_posix() if self.found.path else None
        return {"file": shown, "sha256": self.digest, "timestamp": format_utc(self.timestamp) or None}


def handed_in(submitted: Path, student: str, lesson: str) -> HandedIn:
    folder = submitted / student
    found = submissions.find(folder, catalogue.get(lesson))
    digest = None
    if found.path is not None:
        try:
            digest = submissions.digest(found.path)
        except OSError:
            digest = None
    stamp_folder = found.path.parent if found.path is not None else folder / lesson
    stamp = read_timestamp(stamp_folder) or read_timestamp(folder / lesson)
    return HandedIn(folder, found, digest, stamp)


def grade_student(student: str, opts: Options, submitted: Path,
                  start: Callable[[], WorkerHandle],
                  handed: HandedIn | None = None) -> Report:
    lesson = opts.lesson
    handed = handed or handed_in(submitted, student, lesson)
    found = handed.found
    if found.problem == "missing":
        return missing(student, lesson)
    if found.problem == "ambiguous":
        names = submissions.shown_list(found.candidates, handed.folder)
        return not_graded(f"{student}/{lesson}", lesson, exercise_points(lesson), Status.AMBIGUOUS,
                          msg("{count} different notebooks of {lesson} were handed in: {names}; none was graded: hand in only the one to grade.", count=len(found.candidates), lesson=lesson, names=names))
    path = found.path
    assert path is not None, found.problem  # find() leaves it None only with a problem, above
    report = grade_notebook(path, path.relative_to(submitted).as_posix(), opts, start)
    if found.note:
        report.notes.insert(0, found.note)
    return report


def missing(student: str, lesson: str) -> Report:
    """The report of a student without a notebook of ``lesson``: its message names the file
    nbgrader expects in this course (``COURSE_EDITION``: ``NN_name.zh.ipynb`` in a Chinese
    class, either edition's in a class of both), and a Chinese class reads it in Chinese."""
    held = course_edition()
    editions = [e for e in catalogue.get(lesson).editions if held in ("both", e)] or ["en"]
    expected = [f"{student}/{lesson}/{catalogue.get(lesson).student(e).name}" for e in editions]
    canonical = ", ".join(expected)
    report = not_graded(expected[0], lesson, exercise_points(lesson), Status.MISSING,
                        msg("No submission: no notebook of {lesson} in {student}/ (nbgrader's layout: {canonical}).", lesson=lesson, student=student, canonical=canonical))
    report.edition = held if held in editions else "en"
    return report


def grade_notebook(path: Path, shown: str, opts: Options, start: Callable[[], WorkerHandle]) -> Report:
    """Grade the one notebook ``path`` (``shown`` is its name in the report) as ``grade``
    grades a student's: at most ``MAX_NOTEBOOK_BYTES`` read, run by a worker of ``start``
    (the sandbox pool's) under ``opts.limits``. Never raises for what the notebook holds."""
    lesson = opts.lesson
    try:
        nb = read_notebook(path, shown)
    except NotebookError as exc:
        return _unreadable(shown, lesson, exc.reason)
    except OSError as exc:
        return _unreadable(shown, lesson, str(exc))
    return grade_with_worker(nb, lesson, start(), notebook=shown, limits=opts.limits, restart=start)


def _unreadable(shown: str, lesson: str, error: Message | str) -> Report:
    """The report of a notebook that could not be read (``error``: why, without its name)."""
    return not_graded(shown, lesson, exercise_points(lesson), Status.UNREADABLE,
                      msg("The notebook could not be read: {error}.", error=error))


# --- files ------------------------------------------------------------------------------

def write_csv(out: Path, students: list[str], exercises: list[str],
              deadlines: Deadlines | None = None) -> dict[str, str]:
    """Write ``grades.csv`` from the results; returns each student's status."""
    late_columns = deadlines is not None
    folder = Folder(out)
    rows, statuses = [], {}
    for student in students:
        report = folder.read_result(student)
        if report is None:
            raise FileNotFoundError(folder.result_path(student))
        late = _late_columns(report, student, deadlines) if deadlines is not None else None
        rows.append(grades_row(student, report, exercises, late))
        statuses[student] = str(report.status)
    folder.write_grades(rows, exercises, late=late_columns)
    return statuses


def _late_columns(report: Report, student: str, deadlines: Deadlines) -> dict[str, Any]:
    from grader.classgrade.late import parse_timestamp

    stamp = (_made(report).submission or {}).get("timestamp")
    lateness = deadlines.lateness(report.lesson, student, parse_timestamp(stamp) if stamp else None)
    penalty = lateness.penalty(report.score)
    note = lateness.describe() if lateness.late.total_seconds() > 0 else ""
    return {"timestamp": stamp or "", "duedate": format_utc(lateness.due),
            "raw_score": report.score, "late_submission_penalty": penalty, "note": note}


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
    changed: list[str] = field(default_factory=list)  # regraded: their submission changed
    other_settings: dict[str, str] = field(default_factory=dict)  # kept, made otherwise: how
    waiting: list[str] = field(default_factory=list)  # new or changed, left out by --student
    statuses: dict[str, str] = field(default_factory=dict)  # every student's, once written

    @property
    def median_s(self) -> float:
        return statistics.median(self.per_submission) if self.per_submission else 0.0


def progress_label(opts: Options) -> str:
    """The progress bar's label, in the class's language as far as it is known before grading
    (``--lang``, ``COURSE_LANG``)."""
    label = msg("grading {lesson}", lesson=opts.lesson)
    return i18n.render(label, i18n.class_language(opts.lang, ()))


def summary_lines(summary: RunSummary, opts: Options) -> list[Message]:
    """What ``grade`` prints when it is done, a sentence a line (each a template of the
    catalogues: ``cli`` says them in the class's language, ``i18n.class_language``)."""
    changed = msg(" ({changed} changed since graded)", changed=len(summary.changed)) if summary.changed else ""
    lines: list[Message] = [msg("graded {graded} submission(s){changed}, kept {reused} earlier result(s) in {seconds} s (median {median_seconds} s per submission)", graded=summary.graded, changed=changed, reused=summary.reused, seconds=format(summary.seconds, '.1f'), median_seconds=format(summary.median_s, '.2f'))]
    if summary.waiting:
        lines.append(msg("not regraded (changed since graded, not chosen with --student): {students}", students=', '.join(summary.waiting)))
    if summary.other_settings:
        lines.append(msg("kept {count} result(s) made under other settings (isolation, grader version), not vouched for by this run: {students}; regrade them with --student ID or --force", count=len(summary.other_settings), students=', '.join(summary.other_settings)))
    if opts.deadlines is not None:
        lines.append(msg("late work: {deadlines_file} (raw_score, late_submission_penalty and score in grades.csv)", deadlines_file=opts.deadlines.source))
    isolation = "strict" if opts.isolation == "full" else opts.isolation
    protections = ", ".join(summary.protections) or "none"
    lines.append(msg("protections: {protections} (isolation {isolation})", protections=protections, isolation=isolation))
    if summary.missing:
        lines.append(msg("missing: {students} (why: {run_file})", students=', '.join(summary.missing), run_file=opts.out / 'run.json'))
    ambiguous = [s for s in summary.statuses if summary.statuses[s] == "ambiguous"]
    if ambiguous:  # the instructor's step; the students' pages say only what they can do
        lines.append(msg("ambiguous: {ambiguous} handed in several different notebooks: keep the one to grade in each folder, then regrade with --student ID", ambiguous=', '.join(ambiguous)))
    lines.append(msg("wrote {grades_file}, {results_folder}/, {feedback_folder}/", grades_file=opts.out / 'grades.csv', results_folder=opts.out / 'results', feedback_folder=opts.out / 'feedback'))
    return lines


def editions_handed_in(out: Path, students: Iterable[str]) -> list[str]:
    """The edition of each student's notebook, as its result names it."""
    folder = Folder(out)
    reports = (folder.read_result(student) for student in students)
    return [i18n.notebook_edition(None, r.notebook) for r in reports if r is not None and r.notebook]


def student_folders(submitted: Path) -> list[str]:
    return sorted(p.name for p in submitted.iterdir() if p.is_dir() and not p.name.startswith("."))


class OutputBusy(UserError, RuntimeError):
    """Another ``grade`` writes to the same output folder."""


@contextlib.contextmanager
def only_writer(out: Path) -> Iterator[None]:
    """Hold a lock on the folder ``OUT`` itself while grading (no file left behind): two
    runs writing one folder would interleave their results."""
    import fcntl

    out.mkdir(parents=True, exist_ok=True)
    fd = os.open(out, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise OutputBusy(msg("another `grade` is writing to {out}: wait until it ends, or give this one another --out", out=out)) from None
        yield
    finally:
        os.close(fd)  # and with it the lock


class UnknownStudent(UserError, ValueError):
    """``--student`` names a folder that is not in SUBMITTED."""


def _made(report: Report | None) -> Provenance:
    """What ``report`` was made from and with (nothing known for a result written before
    results recorded it, or for no result)."""
    return report.made if report is not None and report.made is not None else Provenance()


@dataclass
class Plan:
    """Who a run grades (:func:`plan_run`), and why."""

    students: list[str]  # every student folder, in order (grades.csv has a row for each)
    handed: dict[str, HandedIn]  # what each handed in
    todo: list[str]  # graded by this run
    changed: list[str] = field(default_factory=list)  # regraded: their submission changed
    waiting: list[str] = field(default_factory=list)  # new or changed, left out by --student

    @property
    def kept(self) -> list[str]:
        """The students whose earlier results this run keeps."""
        todo = set(self.todo)
        return [s for s in self.students if s not in todo]


def plan_run(submitted: Path, opts: Options) -> Plan:
    """The students this run grades: everyone (``force``); those without a result and the
    chosen ones (``students``); or those without a result and those whose submission
    changed since their result."""
    students = student_folders(submitted)
    handed = {s: handed_in(submitted, s, opts.lesson) for s in students}
    stale, changed = [], []
    folder = Folder(opts.out)
    for student in students:
        kept = folder.read_result(student)
        if kept is None:
            stale.append(student)
        elif _made(kept).submission != handed[student].key():
            stale.append(student)
            changed.append(student)
    if not opts.students:
        return Plan(students, handed, list(students) if opts.force else stale, changed)
    chosen = {ids.spelled_as(s, handed) for s in opts.students}  # as the folder spells it
    unknown = [ids.shown(s) for s in chosen if s not in handed]
    if unknown:
        raise UnknownStudent(msg("no student folder {unknown} in the submissions", unknown=', '.join(unknown)))
    # the chosen students, and those without any result (grades.csv has a row for each)
    fresh = [s for s in stale if s not in changed]
    return Plan(students, handed, [s for s in students if s in chosen or s in fresh],
                changed=[s for s in changed if s in chosen],
                waiting=[s for s in changed if s not in chosen])


@dataclass(frozen=True)
class ClassJob:
    """What grades a student of this run, in ``grade`` or in a trusted process of
    ``--jobs N`` (``grader.classgrade.jobs``, which receives it pickled: trusted to
    trusted, its class by name): the options, the submissions, and the settings every
    result is stamped with (``grader.check.provenance``)."""

    opts: Options
    submitted: Path
    settings: dict[str, Any]

    @property
    def lesson(self) -> str:
        return self.opts.lesson

    @property
    def limits(self) -> Limits:
        return self.opts.limits

    def warm_up(self) -> None:
        warm_up(self.opts.lesson)

    def grade(self, student: str, start: Callable[[], WorkerHandle], stop: threading.Event,
              handed: HandedIn | None = None) -> float | None:
        """Grade ``student`` and write their files: the seconds it took (None: stopped)."""
        return _grade_and_save(student, self.opts, self.submitted, start, stop, handed,
                               self.settings)

    def failed(self, student: str, exc: BaseException) -> float:
        """Record ``student`` as ``error``: their trusted grading process died twice."""
        return _save_failure(student, self.opts, self.submitted, self.settings, exc)


class _ClassRun:
    """One :func:`grade_class` run: its plan, the trusted processes of ``--jobs N`` (None
    for one job: the submissions are graded by threads of this process) and what it timed."""

    def __init__(self, submitted: Path, opts: Options, plan: Plan):
        self.submitted, self.opts, self.plan = submitted, opts, plan
        self.stop = threading.Event()
        self.seconds: list[float] = []
        self.job = ClassJob(opts, submitted, {})
        self.jobs: class_jobs.Jobs | None = None
        # the graders' side warms up (torch, the hidden tests) while the sandbox's zygotes
        # boot: in this process for one job, in the N trusted processes for N jobs (where
        # the cores allow: else each starts with its first submission)
        self.warming = threading.Thread(target=warm_up, args=(opts.lesson,), daemon=True)

    def while_booting(self, pool: SandboxPool) -> None:
        self.job.settings.update(provenance.settings_record(
            pool.plan.isolation, pool.protections, list(pool.plan.missing), self.opts.limits.as_dict()))
        if not self.plan.todo:
            return
        if self.opts.jobs == 1:
            self.warming.start()
            return
        # a trusted process per job: N cores for N submissions' graders
        self.jobs = class_jobs.Jobs(pool, self.job, self.stop)
        # ahead where the N are one process and its forks (one import of torch beside the
        # zygote's, as with one job), or where the cores allow N imports at once: else the
        # zygote's and the trusted processes' imports only slow one another down
        if class_jobs.forks() or class_jobs.cores() >= 2 * self.opts.jobs:
            self.jobs.start(self.opts.jobs)

    def _submit(self, executor: ThreadPoolExecutor, pool: SandboxPool) -> list[Future[float | None]]:
        jobs, job = self.jobs, self.job
        if jobs is not None:
            return [executor.submit(jobs.grade, s, partial(job.failed, s)) for s in self.plan.todo]
        return [executor.submit(job.grade, s, pool.start, self.stop, self.plan.handed[s])
                for s in self.plan.todo]

    def grade_all(self, pool: SandboxPool, progress: bool) -> None:
        """Grade the plan's students; on Ctrl-C or SIGTERM, stop everything and raise
        :class:`Interrupted` with what was done."""
        from tqdm import tqdm

        opts = self.opts
        if self.warming.is_alive():
            self.warming.join()  # the first submission's seconds are its own
        executor = ThreadPoolExecutor(max(1, opts.jobs))
        futures = self._submit(executor, pool)
        try:
            with tqdm(total=len(futures), desc=progress_label(opts), unit="nb",
                      disable=not progress) as bar:
                for future in as_completed(futures):
                    took = future.result()
                    if took is not None:  # None only for a run stopped (then it raised here)
                        self.seconds.append(took)
                    bar.update(1)
        except BaseException as exc:
            self._halt(futures, pool, executor)
            if isinstance(exc, KeyboardInterrupt | Interrupted):
                graded = sum(1 for f in futures if not f.cancelled()
                             and f.exception() is None and f.result() is not None)
                signum = exc.signum if isinstance(exc, Interrupted) else int(signal.SIGINT)
                raise Interrupted(signum, self.summary(pool, graded)) from exc
            raise
        executor.shutdown(wait=True)
        if self.jobs is not None:
            self.jobs.close()

    def _halt(self, futures: list[Future[float | None]], pool: SandboxPool,
              executor: ThreadPoolExecutor) -> None:
        self.stop.set()  # results finished from now on are dropped: our kill may have hurt them
        for future in futures:
            future.cancel()
        self.close_jobs()  # before their workers: nothing hurt is written
        pool.close()
        executor.shutdown(wait=True)

    def close_jobs(self) -> None:
        """Kill the trusted processes left (none after a run that ended well)."""
        if self.jobs is not None:
            self.jobs.close(kill=True)

    def summary(self, pool: SandboxPool, graded: int) -> RunSummary:
        return RunSummary(graded, len(self.plan.kept), 0.0, self.seconds, pool.protections,
                          missing=pool.plan.report()["missing"], left=len(self.plan.todo) - graded,
                          changed=self.plan.changed, waiting=self.plan.waiting)

    def other_settings(self) -> dict[str, str]:
        """The kept results made under other settings than this run's: how (English, as
        ``run.json`` keeps it)."""
        other: dict[str, str] = {}
        folder = Folder(self.opts.out)
        for student in self.plan.kept:
            made = _made(folder.read_result(student)).graded_with
            if not provenance.same_settings(made, self.job.settings):
                other[student] = str(msg("isolation {isolation}, grader {grader_version}", isolation=made.get('isolation'), grader_version=made.get('grader'))
                                     if made else msg("made before results recorded their settings"))
        return other

    def finish(self, pool: SandboxPool, started: float) -> RunSummary:
        """``grades.csv`` and ``run.json``, once every student of the plan is graded."""
        opts, plan = self.opts, self.plan
        summary = self.summary(pool, len(plan.todo))
        summary.other_settings = self.other_settings()
        jobs = self.jobs
        points = jobs.points if jobs is not None and jobs.points else exercise_points(opts.lesson)
        summary.statuses = write_csv(opts.out, plan.students, list(points), opts.deadlines)
        summary.seconds = time.perf_counter() - started
        Folder(opts.out).write_run({
            "lesson": opts.lesson, "submitted": str(self.submitted.resolve()),
            "students": len(plan.students), "graded": summary.graded,
            "reused": summary.reused, "jobs": opts.jobs, "isolation": pool.plan.isolation,
            "protections": pool.protections, "sandbox": pool.plan.report(),
            "limits": opts.limits.as_dict(), "grader": self.job.settings["grader"],
            "seconds": round(summary.seconds, 3),
            "median_seconds_per_submission": round(summary.median_s, 4),
            # this run vouches for the results it made, under the settings above, only
            "results_of_this_run": plan.todo, "regraded_changed": summary.changed,
            "kept_results": plan.kept, "kept_results_made_otherwise": summary.other_settings,
            "deadlines": opts.deadlines.source if opts.deadlines else None})
        return summary


def grade_class(submitted: Path, opts: Options, progress: bool = True,
                on_plan: Callable[[SandboxPlan], None] | None = None) -> RunSummary:
    """Grade the students :func:`plan_run` picks. On Ctrl-C or SIGTERM the workers are
    killed, the results being computed are dropped, and :class:`Interrupted` is raised with
    the run's summary: the files already written stay. An ``OUT`` that a newer grader
    wrote (``grader.results.folder``) is refused before anything is written."""
    Folder(opts.out).schema()  # a folder of a newer grader is refused (RecordError), never mixed
    plan = plan_run(submitted, opts)
    started = time.perf_counter()
    run = _ClassRun(submitted, opts, plan)
    try:
        with workers(opts, run.while_booting, len(plan.todo) > opts.jobs) as pool, \
                only_writer(opts.out):  # refuses (strict, require) before anything is written
            Folder(opts.out).prepare()
            if on_plan is not None:
                on_plan(pool.plan)
            run.grade_all(pool, progress)
    finally:
        run.close_jobs()  # started, but the pool or the folder was refused: none left
    return run.finish(pool, started)


_log = logging.getLogger(__name__)


def _log_error(out: Path, student: str, attempt: int, exc: BaseException) -> None:
    """The instructor's record of what went wrong in the grader itself (trusted code only):
    ``errors.log``, and the log at ``info``."""
    logs.append(out / "errors.log", logs.ERRORS, _log, logging.INFO, "%s (attempt %d)",
                student, attempt + 1, exc=exc)


def _untouched(handed: HandedIn, lesson: str) -> bool:
    """Every code cell of the file is one of the handout's, as handed out (either edition):
    nothing was written, not even in a cell of one's own."""
    if handed.found.path is None:
        return False
    try:
        code = {catalogue.cell_source(c).strip()
                for c in catalogue.code_cells(catalogue.read_json(handed.found.path))}
        handout = {catalogue.cell_source(c).strip()
                   for path in catalogue.get(lesson).notebooks("student").values() if path.is_file()
                   for c in catalogue.code_cells(catalogue.read_json(path))}
    except Exception:  # noqa: BLE001 - an unreadable notebook is reported by its status
        return False
    return code <= handout


def _grade_and_save(student: str, opts: Options, submitted: Path,
                    start: Callable[[], WorkerHandle],
                    stop: threading.Event, handed: HandedIn | None = None,
                    settings: dict[str, Any] | None = None) -> float | None:
    """Grade one student and write their files; None when the run was stopped first."""
    began = time.perf_counter()
    handed = handed or handed_in(submitted, student, opts.lesson)
    report, failure = None, "unknown"
    for attempt in range(2):  # a failure of the machinery (not of the notebook) is retried once
        if stop.is_set():
            return None
        try:
            report = grade_student(student, opts, submitted, start, handed)
            break
        except Exception as exc:  # noqa: BLE001 - one submission never costs another its result
            if stop.is_set():
                return None
            _log_error(opts.out, student, attempt, exc)
            failure = type(exc).__name__
    if stop.is_set():
        return None
    if report is None:
        report = _grader_failed(student, opts, failure)
    _save(student, opts, report, handed, settings)
    return time.perf_counter() - began


def _grader_failed(student: str, opts: Options, failure: str) -> Report:
    return not_graded(f"{student}/{opts.lesson}", opts.lesson, exercise_points(opts.lesson),
                      Status.ERROR, msg("The grader failed on this submission ({failure}); see errors.log.", failure=failure))


def _save_failure(student: str, opts: Options, submitted: Path, settings: dict[str, Any],
                  exc: BaseException) -> float:
    """A submission whose trusted grading process died twice (``grader.classgrade.jobs``)."""
    began = time.perf_counter()
    _log_error(opts.out, student, 1, exc)
    _save(student, opts, _grader_failed(student, opts, type(exc).__name__),
          handed_in(submitted, student, opts.lesson), settings)
    return time.perf_counter() - began


def _save(student: str, opts: Options, report: Report, handed: HandedIn,
          settings: dict[str, Any] | None) -> None:
    """The student's feedback page, then their result with what it was made from and with."""
    shown, penalty = report, 0.0
    if opts.deadlines is not None and opts.deadlines.due_for(opts.lesson, student) is not None:
        lateness = opts.deadlines.lateness(opts.lesson, student, handed.timestamp)
        shown = dataclasses.replace(report, notes=[*report.notes, lateness.describe()])
        penalty = lateness.penalty(report.score)  # the page's score is the gradebook's
    lang = i18n.choose(opts.lang, report.edition)
    folder = Folder(opts.out)
    folder.write_feedback(student, opts.lesson,
                          feedback_html(i18n.localize(shown, lang), student, penalty))
    made = Provenance(handed.key(), settings or {},
                      time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                      _untouched(handed, opts.lesson))
    folder.write_result(student, dataclasses.replace(report, made=made))


def warm_up(lesson: str) -> None:
    """What grading ``lesson`` imports (torch, the hidden tests), imported before the first
    submission so that its seconds are its own."""
    from grader.check import runner

    runner.collect(lesson)
