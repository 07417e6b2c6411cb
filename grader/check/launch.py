"""Where ``grader check`` gets the worker process that runs a notebook.

A *worker source* hands out fresh workers (``start(limits)``) until it is closed. Every
worker has the same small interface, whichever source made it (``grader.common.limits.WorkerHandle``:
``sock``, ``pid``, ``limits``, ``kill()``, ``finish()``, ``output_excerpt()`` and
``timed_out``), and enforces the notebook's wall clock itself.

- :class:`SandboxSource` (the default): a one-check ``grader.sandbox.SandboxPool`` at the
  ``auto`` level, the class grader's sandbox;
- :class:`LocalSource`: plain subprocesses (:class:`LocalWorker`) with rlimits, where the
  sandbox cannot start;
- the check helper (``grader.helper``) passes its own source to the process that grades
  one check (``grader.check.command.run_check``): workers forked from its warm zygotes.

:func:`prepare_check` starts the source, then its first worker with the notebook sent
(:func:`start_early`), and meanwhile the trusted side's imports (the engine, the lesson's
hidden tests and torch with them) in a thread: the notebook runs while those imports
finish, the two processes loading torch at once.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Set
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from coursekit import catalogue, settings
from grader import COURSE_ROOT
from grader.check import timeline
from grader.common.limits import DEFAULT_LIMITS, Limits, WorkerHandle
from grader.runtime.errors import MEMORY_EXIT
from grader.runtime.wire import one_thread_env
from grader.sandbox.output import OutputTap

if TYPE_CHECKING:
    from grader.check.remote import RemoteSubmission
    from grader.i18n import Message

PACKAGE_PARENT = str(COURSE_ROOT)
DATA_SUFFIXES = {".tsv", ".md", ".txt", ".py", ".json"}


def course_files(withheld: Set[Path] = frozenset()) -> dict[str, Path]:
    """The course's public files a sandboxed notebook may import or read: ``coursekit``
    (less ``withheld``) and the datasets' data files, by path relative to the course. The
    one list: ``classroom.public_files`` (and so a Gradescope zip) withholds from it the
    reference modules of a lesson and the lessons after it."""
    files: dict[str, Path] = {}
    for path in sorted((COURSE_ROOT / "coursekit").rglob("*.py")):
        if path not in withheld:
            files[path.relative_to(COURSE_ROOT).as_posix()] = path
    for path in sorted((COURSE_ROOT / "datasets").rglob("*")):
        if path.is_file() and path.suffix in DATA_SUFFIXES:
            files[path.relative_to(COURSE_ROOT).as_posix()] = path
    return files


class WorkerSource(Protocol):
    missing: dict[str, str]  # protection -> why it is missing (what the check says)
    unavailable: str  # why the sandbox could not start ("": it did)

    def start(self, limits: Limits, wait_s: float | None = None) -> WorkerHandle: ...

    def close(self) -> None: ...


class LocalWorker:
    """A worker subprocess in its own session, with rlimits; no filesystem isolation."""

    def __init__(self, limits: Limits = DEFAULT_LIMITS):
        self.limits = limits
        self.scratch = tempfile.TemporaryDirectory(prefix="grader-")
        self.sock, child = socket.socketpair()
        env = dict(os.environ, **one_thread_env(), MPLBACKEND="Agg", PYTHONUNBUFFERED="1",
                   PYTHONPATH=os.pathsep.join([PACKAGE_PARENT, os.environ.get("PYTHONPATH", "")]))
        env.pop(settings.GRADER_SEED, None)  # the seed of the hidden inputs stays with the grader
        out_r, out_w = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "grader.runtime.worker", "--fd", str(child.fileno())],
                pass_fds=[child.fileno()], stdin=subprocess.DEVNULL, stdout=out_w, stderr=out_w,
                cwd=self.scratch.name, env=env, start_new_session=True,
                preexec_fn=self._apply_limits,
            )
        finally:
            os.close(out_w)
            child.close()
        self.pid = self.proc.pid
        self.tap = OutputTap(out_r, keep=limits.output_bytes)
        self.killed = False
        self.timed_out = False  # killed by its wall clock
        self._timer = threading.Timer(limits.wall_s, self._on_deadline)
        self._timer.daemon = True
        self._timer.start()

    def _apply_limits(self) -> None:
        from grader.sandbox._confine import set_rlimits

        lim = self.limits.as_dict()
        set_rlimits({k: lim[k] for k in ("cpu_s", "file_size_bytes", "memory_bytes")})

    def _on_deadline(self) -> None:
        self.timed_out = True
        self.kill()

    def kill(self) -> None:
        self.killed = True
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def release(self) -> None:
        self.finish()

    def finish(self) -> str:
        """Reap the worker; returns ``ok``, ``timeout``, ``memory`` or ``crashed``."""
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.proc.wait()
        self._timer.cancel()
        try:
            os.killpg(self.pid, signal.SIGKILL)  # anything it left behind in its session
        except ProcessLookupError:
            pass
        self.tap.join(2.0)
        self.sock.close()
        self.scratch.cleanup()
        if self.killed:
            return "timeout"
        if code == 0:
            return "ok"
        if code == MEMORY_EXIT:
            return "memory"  # its memory rlimit, reached (grader.runtime.errors.out_of_memory)
        if code == -signal.SIGXCPU:
            return "timeout"
        if "MemoryError" in self.tap.excerpt(1 << 20):
            return "memory"
        return "crashed"

    def output_excerpt(self, max_chars: int = 2000) -> str:
        return self.tap.excerpt(max_chars)


class LocalSource:
    """Plain worker subprocesses (no sandbox); ``unavailable``: why the sandbox could not
    start."""

    description = "a separate process with rlimits (no sandbox)"

    def __init__(self, unavailable: str = "") -> None:
        self.unavailable = unavailable
        self.missing: dict[str, str] = {}

    def start(self, limits: Limits, wait_s: float | None = None) -> LocalWorker:
        return LocalWorker(limits)  # never waits: a new process each time

    def close(self) -> None:
        return None


class SandboxSource:
    """Workers from a one-check sandbox pool at the ``auto`` level: every protection this
    machine offers (``grader grade``'s sandbox). ``check`` is a learner grading their own
    work in their own copy of the course, so the sandbox holds every reference module
    (the class grader withholds those of the lesson graded and later ones)."""

    def __init__(self, limits: Limits, preload: tuple[str, ...] = (),
                 while_booting: Callable[[], None] | None = None):
        from grader.sandbox import SandboxPool, default_worker_files

        with timeline.span("sandbox"):
            self.pool = SandboxPool(jobs=1, limits=limits, isolation="auto",
                                    preload=(), preload_late=preload,
                                    worker_files={**default_worker_files(), **course_files()})
            self.pool.open(while_booting)
        self.description = "sandboxed: " + ", ".join(self.pool.protections)
        self.missing = self.pool.plan.report()["missing"]
        self.unavailable = ""

    def start(self, limits: Limits, wait_s: float | None = None) -> WorkerHandle:
        with timeline.span("worker"):
            return self.pool.start(limits, wait_s=wait_s)

    def close(self) -> None:
        self.pool.close()


def default_source(limits: Limits, while_booting: Callable[[], None] | None = None,
                   preload: tuple[str, ...] = ()) -> WorkerSource:
    """The sandbox; plain processes, with a word on stderr, where it cannot start.
    ``while_booting()`` runs once the sandbox's own set-up is done, while its first
    process starts (where it cannot start: not at all). ``preload``: what its zygote
    imports once it is ready (:func:`cold_preload`), before it forks the worker."""
    try:
        return SandboxSource(limits, preload=preload, while_booting=while_booting)
    except Exception as exc:  # noqa: BLE001 - a check still runs, and says how
        return LocalSource((str(exc).splitlines() or [type(exc).__name__])[0])


def sandbox_notes(source: WorkerSource) -> list[Message]:
    """What a check says on stderr about the sandbox it ran in, whichever source it had
    (its own pool, the helper's, plain processes): nothing when every protection is on."""
    from grader.i18n import msg

    if source.unavailable:
        return [msg("grader: the sandbox could not start here ({why}); checking in a plain process",
                    why=source.unavailable)]
    missing = source.missing
    if not missing:
        return []
    from grader.sandbox.probe import PROTECTIONS

    return [msg("grader: sandboxed with {active} of {protections} protections here, without {missing} "
                "(the score is the same; `python -m grader selftest` says why)",
                active=len(PROTECTIONS) - len(missing), protections=len(PROTECTIONS),
                missing=", ".join(missing))]


class BackgroundImports:
    """``first``, then ``then`` once :meth:`release` is called, imported in order in a
    daemon thread from :meth:`start` on (its import locks make a later ``import`` of one of
    them wait for it, never run it twice)."""

    def __init__(self, first: list[str], then: list[str] | None = None):
        self.first = first
        self.then = then or []
        self.thread: threading.Thread | None = None
        self._released = threading.Event()

    def start(self) -> None:
        """Start the imports, unless they have started already."""
        if self.thread is None:
            self.thread = threading.Thread(target=self._run, name="grader-imports", daemon=True)
            self.thread.start()

    def release(self) -> None:
        """Let the imports of ``then`` begin."""
        self._released.set()

    def _run(self) -> None:
        with timeline.span("imports"):
            if _imported(self.first):
                self._released.wait(RELEASE_WAIT_S)
                _imported(self.then)


def _imported(modules: list[str]) -> bool:
    """Import ``modules`` in order; False at the first that fails (the main thread's own
    import of it says why)."""
    for name in modules:
        try:
            __import__(name)
        except Exception:  # noqa: BLE001 - said by the main thread's import
            return False
    return True


#: What a cold check's zygote imports for a notebook that imports torch: the worker would
#: import each itself, the last in its first backward (``DEFAULT_PRELOAD`` says why).
TORCH_PRELOAD = ("torch", "torch.fx.experimental.symbolic_shapes")
_IMPORTS_TORCH = re.compile(r"^\s*(?:import|from)\s+torch\b", re.MULTILINE)


def cold_preload(notebook: str, lesson: str | None) -> tuple[str, ...]:
    """What the zygote of a cold check's one-check sandbox imports, once it has said it is
    ready (so that the sandbox's start waits for none of it) and before it forks the
    worker: torch and what its first backward imports for a notebook that imports torch,
    and ``torch._dynamo`` (the first optimizer's) for a lesson that trains. Nothing for a
    numpy lesson, or a notebook that cannot be read (the check says why)."""
    from grader.check.notebook import NotebookError, cells_to_run, read_notebook

    try:
        cells = cells_to_run(read_notebook(notebook))
    except NotebookError:
        return ()
    if not any(_IMPORTS_TORCH.search(source) for _, source in cells):
        return ()
    found = _lesson_named(notebook, lesson)
    trains = found in catalogue.COURSE.ids() and catalogue.get(found).trains
    return (*TORCH_PRELOAD, "torch._dynamo") if trains else TORCH_PRELOAD


#: The longest :class:`BackgroundImports` waits for :meth:`~BackgroundImports.release`.
RELEASE_WAIT_S = 10.0


def _lesson_named(notebook: str, lesson: str | None) -> str | None:
    """The lesson a check grades, when its id or the notebook's name says it."""
    return lesson or getattr(catalogue.COURSE.lesson_of(notebook), "id", None)


@contextlib.contextmanager
def prepare_check(notebook: str, lesson: str | None, limits: Limits,
                  source: Callable[[Limits], WorkerSource] | None = None
                  ) -> Iterator[tuple[WorkerSource, Started | None]]:
    """The worker source of one check (``source(limits)``; None: :func:`default_source`,
    the sandbox) and its first worker, the notebook sent to it (:func:`start_early`), made
    while the trusted side imports what it needs (the engine, then the lesson's hidden
    tests: torch) in a thread.

    In this order: the sandbox's set-up and a worker's start are Python in this process
    too, many short steps that each wait for the interpreter while the other thread holds
    it (the sandbox's folder took 0.5-0.6 s instead of 0.1, and loading torch's library
    holds it for tenths of a second at a time). The imports start once the sandbox's
    first process is on its way, torch's once the first worker has started."""
    from grader import sandbox  # noqa: F401 - here, before the thread's imports start

    found = _lesson_named(notebook, lesson)
    imports = BackgroundImports(["grader.check.engine"],
                                then=[f"grader.hidden.test_{found}"] if found else [])
    preload = cold_preload(notebook, lesson) if source is None else ()
    if source is None:
        workers = default_source(limits, while_booting=imports.start, preload=preload)
    else:
        workers = source(limits)
    imports.start()  # where no sandbox started it
    if preload:  # the worker's start waits for its zygote's imports, not for this process
        imports.release()
    try:
        try:
            started = start_early(notebook, lesson, limits, workers)
        finally:
            imports.release()
        yield workers, started
    finally:
        workers.close()  # the imports: a daemon thread, never waited for


@dataclass
class Started:
    """A check's first worker, the notebook's cells sent to it (:func:`start_early`)."""

    nb: dict[str, Any]
    worker: WorkerHandle
    sub: RemoteSubmission

    def discard(self) -> None:
        """Stop the worker unused (the check ended before grading)."""
        self.worker.kill()
        self.sub.sock.close()
        self.worker.finish()


def start_early(notebook: str, lesson: str | None, limits: Limits,
                workers: WorkerSource) -> Started | None:
    """The check's first worker from ``workers``, its notebook sent: the notebook runs
    while the hidden tests are still being imported (a cold check imports torch on both
    sides, each on a core of its own). None, and nothing started, where the lesson is not
    known by its id or the notebook's name, or the notebook cannot be read:
    ``engine.check_notebook`` finds the lesson, or says why, as without this."""
    from grader.check.notebook import NotebookError, cells_to_run, read_notebook
    from grader.check.remote import RemoteSubmission

    if _lesson_named(notebook, lesson) not in catalogue.COURSE.ids():
        return None
    try:
        nb = read_notebook(notebook)
        cells = cells_to_run(nb)
    except NotebookError:
        return None
    worker = workers.start(limits)
    sub = RemoteSubmission(worker.sock, limits.call_s)
    sub.begin_load(cells, timeout=limits.wall_s + 5)
    return Started(nb, worker, sub)
