"""nbgrader's autograde with the students' code in the course's sandbox, never as the instructor.

nbgrader's own ``Execute`` step runs each submitted notebook in a Jupyter kernel of the
instructor's account: a notebook can read the reference solutions and the hidden tests,
write into the instructor's home, and fake its scores. :class:`SandboxedAutograde` takes
its place in ``c.Autograde.autograde_preprocessors`` (``nbgrader_config.py`` does it): it
grades the sanitized notebook the way ``python -m grader grade`` does (a fresh sandboxed
worker per notebook from a pool kept for the whole ``autograde`` run, the reference
modules of this lesson and later ones withheld, the same limits and hidden inputs), and
writes what each test cell earned where nbgrader reads it:

- the test cell's output is what ``grader.kernel.grade`` prints in a kernel (the points,
  the hints, in the notebook's language) and an ``execute_result`` holding the points,
  which nbgrader's ``SaveAutoGrades`` takes as partial credit;
- an error a cell of the notebook raised in the sandbox is shown under that cell, so the
  feedback page says where a notebook stopped; what the notebook printed is not kept.

nbgrader's gradebook, late penalties, ``generate_feedback`` and ``export`` work as before.
Scores equal ``grade``'s for every notebook, since the same engine gives them. An
assignment that is not a lesson of this course falls back to nbgrader's ``Execute`` (with
a warning: it runs as the instructor)."""

from __future__ import annotations

import ast
import atexit
import contextlib
import logging
import threading
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from nbformat import NotebookNode
from nbformat.v4 import new_output
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Bool, Enum, Float, Unicode

from coursekit import catalogue, settings
from grader.check.engine import grade_with_worker
from grader.check.launch import sandbox_notes
from grader.common.limits import DEFAULT_LIMITS, Limits
from grader.i18n import choose, localize, msg, render, words
from grader.kernel import CELL_ERROR, NO_HIDDEN_TESTS, exercise_text
from grader.results import Report, Status

if TYPE_CHECKING:
    from grader.sandbox import SandboxPool

_POOLS: dict[tuple[str, str, str, Limits], SandboxPool] = {}
_POOLS_LOCK = threading.Lock()


def graded_exercise(cell: dict[str, Any]) -> str | None:
    """The exercise a test cell's hidden tests grade: the second argument of its
    ``grade("<lesson>", "<exercise>", globals())`` call (read with ``ast``)."""
    tree = catalogue.parse(catalogue.cell_source(cell))
    if tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and catalogue._called_name(node.func) == "grade" \
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) \
                and isinstance(node.args[1].value, str):
            return node.args[1].value
    return None


def _pool(lesson: str, isolation: str, require: str, limits: Limits,
          log: logging.Logger) -> SandboxPool:
    """The sandbox pool of this lesson for the rest of the process (``autograde`` grades
    the notebooks of one lesson in turn: one pool, a fresh worker each)."""
    from grader.classgrade.classroom import Options, workers

    key = (lesson, isolation, require, limits)
    with _POOLS_LOCK:
        if key not in _POOLS:
            needed = tuple(r.strip() for r in require.split(",") if r.strip())
            stack = contextlib.ExitStack()
            opts = Options(lesson=lesson, out=None, isolation=isolation,  # type: ignore[arg-type]
                           require=needed, limits=limits)
            pool = stack.enter_context(workers(opts, ahead=True))
            atexit.register(stack.close)
            _POOLS[key] = pool
            # the sentence `check` prints when a protection is missing, as a warning here
            missing = SimpleNamespace(missing=dict(pool.plan.missing), unavailable="")
            for note in sandbox_notes(missing):
                log.warning("%s", note)
            if not missing.missing:
                log.info("grader: sandboxed with every protection: %s", ", ".join(pool.protections))
        return _POOLS[key]


class SandboxedAutograde(NbGraderPreprocessor):
    """Autograde's execution step, sandboxed: see the module's docstring."""

    isolation = Enum(["auto", "strict"], default_value="auto", config=True,
                     help="auto: every protection this machine offers; strict: refuse to grade "
                          "unless all of them are there (as `grade --isolation strict`).")
    require = Unicode("", config=True,
                      help="Comma-separated protections auto must not go without (as `grade --require`).")
    timeout = Float(DEFAULT_LIMITS.wall_s, config=True,
                    help="Seconds for one notebook: running its cells and answering every check.")
    call_timeout = Float(None, allow_none=True, config=True,
                         help="Seconds for one call of a hidden check (default: "
                              f"$COURSE_CALL_TIMEOUT, else the grader's {DEFAULT_LIMITS.call_s:g}).")
    fallback_to_kernel = Bool(True, config=True,
                              help="For an assignment that is not a lesson of this course, run "
                                   "nbgrader's Execute (in a kernel of the instructor's account).")

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        info = resources.get("nbgrader", {})
        lesson, name = str(info.get("assignment", "")), str(info.get("notebook", ""))
        if lesson not in catalogue.COURSE.ids():
            return self._not_a_lesson(nb, resources, lesson)
        call_s = self.call_timeout or settings.call_timeout() or DEFAULT_LIMITS.call_s
        limits = DEFAULT_LIMITS.with_(wall_s=self.timeout, call_s=call_s)
        pool = _pool(lesson, self.isolation, self.require, limits, self.log)
        report = grade_with_worker(nb, lesson, pool.start(limits), notebook=f"{name}.ipynb",
                                   limits=limits, restart=lambda: pool.start(limits))
        lang = choose(None, report.edition)
        self.log.info("grader: %s/%s: %g of %g points (%s)", lesson, name, report.score,
                      report.max_score, report.status)
        write_outputs(nb, report, lang)
        return nb, resources

    def _not_a_lesson(self, nb: NotebookNode, resources: dict[str, Any],
                      lesson: str) -> tuple[NotebookNode, dict[str, Any]]:
        if not self.fallback_to_kernel:  # nbgrader shows the text: in the instructor's language
            raise ValueError(render(msg("{lesson} is not a lesson of this course ({lessons}): nothing was graded",
                                        lesson=repr(lesson), lessons=", ".join(catalogue.COURSE.ids())),
                                    choose(None)))
        from nbgrader.preprocessors import Execute

        self.log.warning("%r is not a lesson of this course: nbgrader's Execute runs it in a "
                         "kernel of your account, outside the course's sandbox", lesson)
        return Execute(parent=self.parent).preprocess(nb, resources)


def write_outputs(nb: NotebookNode, report: Report, lang: str) -> None:
    """Each test cell's points and hints, each cell error under its cell, the report's
    notes (a call that hung, a notebook stopped by its limits) above the first test."""
    t = words(lang)
    errors = {int(e.get("cell", -1)): str(e.get("error", "")) for e in report.cell_errors}
    shown = localize(report, lang)  # its notes and reason; the hints are translated below
    notes = [shown.said(t)] if report.status != Status.OK else [t(note) for note in shown.notes]
    count = 0
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        cell.outputs = []
        count += 1
        cell.execution_count = count
        if index in errors:
            ename, _, evalue = errors[index].partition(": ")
            cell.outputs.append(new_output("error", ename=ename or "Error", evalue=evalue,
                                           traceback=[t(CELL_ERROR), errors[index]]))
        if not catalogue.is_autograder_test(cell):
            continue
        exercise = graded_exercise(cell)
        if exercise is None:  # a test cell an instructor added: never full marks unseen
            cell.outputs.append(new_output("error", ename="NotGraded", evalue=t(NO_HIDDEN_TESTS),
                                           traceback=[t(NO_HIDDEN_TESTS)]))
            continue
        results = [r for r in report.exercises if r.name == exercise]
        text, points = exercise_text(exercise, results, t)
        if notes:
            text = "".join(f"{note}\n" for note in notes) + text
            notes = []
        cell.outputs.append(new_output("stream", name="stdout", text=text))
        cell.outputs.append(new_output("execute_result", data={"text/plain": repr(points)},
                                       execution_count=count))
