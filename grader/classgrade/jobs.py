"""``grade --jobs N`` with N > 1: N trusted grading processes, so N cores grade N submissions.

The trusted side of a submission (the hidden tests, their oracles, the hints) is Python and
torch work that holds the interpreter's lock; as threads of one process, N jobs would share
one core's worth of it. So the class grader starts N trusted processes::

    grade (this process)            plans the run, holds the sandbox pool, writes grades.csv
      | per job: a thread that feeds one trusted process a student at a time, and lends it
      | sandboxed workers from the pool over a socket (grader.helper.lend)
      v
    python -m grader.classgrade.jobs     says the lesson's points per exercise once warm (so
                                    ``grade`` never imports torch to write grades.csv), grades
                                    the students it is sent, exactly as a thread of ``grade``
                                    would (classroom.ClassJob.grade), and answers each with
                                    the seconds it took

Each trusted process is served by the grader's one serve loop (``forkserver.serve``) on a
control channel (``grader.runtime.wire.Channel``) whose messages are the dataclasses below:
:class:`Take` (the job) once, then :class:`Grade` per student; back :class:`Ready` once warm,
then :class:`Graded` per student.

On Linux the first trusted process, once warm, forks the other N - 1 (each with its own
control channel and lending socket, passed to it when it started), so torch and the hidden tests are
imported once, not once per job, and their memory is shared: a fork server, built as the
grader's others are (``grader.runtime.forkserver``). A fork is the leader of a process
group of its own and dies with the process it came from, as that one does with ``grade``.

A trusted process that dies mid-submission is replaced and the submission graded once more
by the new one (a failure of the machinery is retried once, as in-process); a second death
records the submission as ``error``. Student code never runs in these processes: it runs in
the sandboxed workers, exactly as with one job. Options cross as a pickle from this process
to its own child (both trusted): a ``Job`` (``classroom.ClassJob``), in :class:`Take`;
nothing of a student's is pickled.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import pickle
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, NoReturn, Protocol

from grader import COURSE_ROOT
from grader.runtime import forkserver
from grader.runtime.wire import Channel, pair

if TYPE_CHECKING:
    from grader.common.limits import Limits, WorkerHandle, WorkerStarter


class Job(Protocol):
    """What a trusted process grades with (``classroom.ClassJob``), sent to it pickled."""

    @property
    def lesson(self) -> str: ...

    @property
    def limits(self) -> Limits: ...

    def warm_up(self) -> None: ...

    def grade(self, student: str, start: Callable[[], WorkerHandle],
              stop: threading.Event) -> float | None:
        """Grade ``student`` and write their files: the seconds it took (None: stopped)."""
        ...


@dataclass
class Take:
    """The job, pickled (trusted to trusted)."""

    pickle: str


@dataclass
class Ready:
    points: dict[str, float]  # the lesson's, per exercise
    pid: int


@dataclass
class Grade:
    student: str


@dataclass
class Graded:
    student: str
    seconds: float | None  # None: stopped


def cores() -> int:
    """The CPUs this process may run on (``nproc`` would say OMP_NUM_THREADS, if set)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _same_grader_env() -> dict[str, str]:
    """This environment, with this copy of the grader first on the path (the instructor's
    folder stays the working folder: the options' relative paths keep their meaning), and
    one thread each for torch and its libraries, as the CLI sets (also when ``grade_class``
    is called from Python): a process with a thread of torch's own is not forked."""
    from grader.runtime.wire import one_thread_each

    parent = str(COURSE_ROOT)
    path = os.environ.get("PYTHONPATH", "")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([parent, path]) if path else parent)
    one_thread_each(env)
    return env


def forks() -> bool:
    """Whether a warm trusted process may be forked into more (Linux; elsewhere a fork of a
    process with torch loaded is not safe, so each job's process imports it itself)."""
    return sys.platform.startswith("linux") and hasattr(os, "pidfd_open")


class _Ends:
    """The sockets of one trusted process: its control channel (students, answers) and the
    one it borrows sandboxed workers over."""

    def __init__(self) -> None:
        self.ctl, self.their_ctl = pair()
        self.rpc, self.their_rpc = pair()

    def theirs(self) -> list[int]:
        return [self.their_ctl.fileno(), self.their_rpc.fileno()]

    def close_theirs(self) -> None:
        self.their_ctl.close()
        self.their_rpc.close()


class TrustedProcess:
    """One trusted grading process (``python -m grader.classgrade.jobs``, or a fork of one
    once it is warm: see ``spawn``) and the thread that lends it workers."""

    def __init__(self, pool: WorkerStarter, ends: _Ends,
                 proc: subprocess.Popen[bytes] | None = None):
        from grader.helper.lend import lend_workers

        self.proc = proc
        self.pid = proc.pid if proc is not None else None  # a fork's: when it has said it
        # ``grade`` started it (a group of its own), or the first one forked it (a pidfd)
        self._child = forkserver.Child.started(proc, group=True) if proc is not None else None
        self.ctl = Channel(ends.ctl)
        self.points: dict[str, float] | None = None  # the lesson's, once the process has said
        # the pool's own start(limits, wait_s=) is what lend_workers calls
        self.lender = threading.Thread(target=lend_workers, args=(Channel(ends.rpc), pool),
                                       daemon=True)
        self.lender.start()

    @classmethod
    def spawn(cls, pool: WorkerStarter, job: Job, forks: int = 0) -> list[TrustedProcess]:
        """A new trusted process, and ``forks`` more that it forks once it is warm: torch and
        the hidden tests are imported (and their memory held) once, not once per job. A
        process that dies before it has read its job, or a fork that cannot be made, is
        found dead by its first student, and a process of its own replaces it."""
        first, more = _Ends(), [_Ends() for _ in range(forks)]
        proc = subprocess.Popen(
            [sys.executable, "-m", "grader.classgrade.jobs", *map(str, first.theirs()),
             json.dumps([ends.theirs() for ends in more])], stdin=subprocess.DEVNULL,
            pass_fds=[fd for e in (first, *more) for fd in e.theirs()],
            env=_same_grader_env(), start_new_session=True)  # Ctrl-C reaches ``grade``, which kills it first
        for ends in (first, *more):
            ends.close_theirs()
        made = [cls(pool, first, proc)] + [cls(pool, ends) for ends in more]
        with contextlib.suppress(OSError):  # it died already: its first student finds it dead
            forkserver.tell(made[0].ctl, Take(base64.b64encode(pickle.dumps(job)).decode("ascii")))
        return made

    def grade(self, student: str) -> float | None:
        """The seconds ``student`` took (None: stopped); OSError when the process died."""
        try:
            if self.points is None:
                self._ready(forkserver.expect(self.ctl, Ready, None))
            graded, _ = forkserver.call(self.ctl, Grade(student), Graded, None)
        except forkserver.NoAnswer:
            status = self.proc.poll() if self.proc is not None else "unknown"
            raise OSError(f"the trusted grading process {self.pid} died (exit status {status})"
                          ) from None
        return None if graded.seconds is None else float(graded.seconds)

    def _ready(self, ready: Ready) -> None:
        self.points = {str(k): float(v) for k, v in ready.points.items()}
        if self._child is None and self.pid is None:  # a fork: it says which process it is
            self.pid = int(ready.pid)
            self._child = forkserver.Child(self.pid)  # never another that took its pid since

    def kill(self) -> None:
        if self._child is not None:
            self._child.close(grace_s=0, killed_s=None)
        self.ctl.close()
        self.lender.join(timeout=5)

    def end_input(self) -> None:
        """No more students: the process exits when its channel ends."""
        self.ctl.close()

    def close(self) -> None:
        """End of the run: wait for the process to exit (its input ended), then clean up."""
        self.end_input()
        if self._child is not None:
            self._child.wait(30)
        self.kill()


class Jobs:
    """N trusted processes, one per thread of ``grade_class``'s executor: ``start(n)`` starts
    them ahead (they import torch and the hidden tests while the sandbox boots); a thread
    without one takes a started one, or starts its own (a replacement)."""

    def __init__(self, pool: WorkerStarter, job: Job, stop: threading.Event):
        self.pool, self.job, self.stop = pool, job, stop
        self._local = threading.local()
        #: the lesson's ``{exercise: points}``, as the first trusted process to start read
        #: them (so ``grade`` need not import torch and the graders to write grades.csv)
        self.points: dict[str, float] | None = None
        self._all: list[TrustedProcess] = []
        self._ready: list[TrustedProcess] = []
        self._lock = threading.Lock()

    def start(self, count: int) -> None:
        """Start ``count`` trusted processes now (one, and forks of it, where ``forks()``).
        No worker is lent before a student is sent, so the pool may still be booting."""
        with self._lock:
            made = TrustedProcess.spawn(self.pool, self.job, count - 1) if forks() else [
                proc for _ in range(count) for proc in TrustedProcess.spawn(self.pool, self.job)]
            self._all += made
            self._ready += made

    def _process(self, fresh: bool = False) -> TrustedProcess:
        """This thread's process; else one started ahead, unless ``fresh``: one that starts
        now (a retry: what killed the last one, e.g. the death of the process it was forked
        from, may have killed those started ahead too)."""
        proc = getattr(self._local, "proc", None)
        if proc is None:
            with self._lock:
                if self.stop.is_set():
                    raise OSError("the run was stopped")
                if self._ready and not fresh:
                    proc = self._ready.pop()
                else:
                    (proc,) = TrustedProcess.spawn(self.pool, self.job)
                    self._all.append(proc)
            self._local.proc = proc
        return proc

    def grade(self, student: str, on_failure: Callable[[BaseException], float]) -> float | None:
        """Grade ``student`` in this thread's trusted process; a process that dies is
        replaced and the student graded once more; then ``on_failure(exc)`` records it."""
        for attempt in range(2):
            if self.stop.is_set():
                return None
            try:
                proc = self._process(fresh=attempt > 0)
                seconds = proc.grade(student)
                self.points = self.points or proc.points
                return seconds
            except Exception as exc:  # noqa: BLE001 - one process's death never stops the run
                if self.stop.is_set():
                    return None
                dead, self._local.proc = getattr(self._local, "proc", None), None  # None: it never started
                if dead is not None:
                    dead.kill()
                if attempt == 1:
                    return on_failure(exc)
        return None

    def close(self, kill: bool = False) -> None:
        with self._lock:
            procs, self._all, self._ready = self._all, [], []
        if not kill:
            for proc in procs:  # all at once: each exits while the others do
                proc.end_input()
        for proc in procs:
            proc.kill() if kill else proc.close()


# --- the trusted process -----------------------------------------------------------------

def serve(ctl_fd: int, rpc_fd: int, forks: list[list[int]]) -> NoReturn:
    """Read the job (a :class:`Job`, pickled), warm up, fork a process for each of
    ``forks`` (the ends of another job: its control channel and socket); then grade one
    student per request until the channel ends, and exit."""
    from grader.check.engine import exercise_points
    from grader.helper.lend import HelperSource
    from grader.runtime.wire import exit_now

    with contextlib.suppress(OSError):  # killed with ``grade``: a killed run writes nothing more
        forkserver.die_with_parent()
    os.dup2(2, 1)  # whatever a grader prints goes to stderr; answers have their own channel
    ctl = Channel(socket.socket(fileno=ctl_fd))
    job: Job = pickle.loads(base64.b64decode(forkserver.expect(ctl, Take, None).pickle))
    job.warm_up()
    for i, ends in enumerate(forks):
        if _fork_into(ends, [ctl.sock, rpc_fd, *(fd for e in forks[i + 1:] for fd in e)]):
            ctl, rpc_fd = Channel(socket.socket(fileno=ends[0])), ends[1]
            break
    source = HelperSource(Channel(socket.socket(fileno=rpc_fd)))
    start = partial(source.start, job.limits)
    stop = threading.Event()
    forkserver.tell(ctl, Ready(exercise_points(job.lesson), os.getpid()))
    forkserver.serve(ctl, {Grade: lambda req, _: Graded(req.student,
                                                         job.grade(req.student, start, stop))})
    exit_now(0)  # every record is written: skip the interpreter's clean-up of torch and the graders


def _fork_into(ends: list[int], theirs: list[int | socket.socket]) -> bool:
    """Fork a process for another job: True in it (``theirs``, the fds it must not keep,
    closed; killed alone, as the leader of a process group of its own, and with the process
    it is forked from, as that one with ``grade``), False here (``ends`` closed; also where
    no fork could be made: a process with a thread besides this one must not fork)."""
    pid = -1
    if forkserver.may_fork():
        with contextlib.suppress(OSError):
            pid = forkserver.fork_child(theirs, new="group", dies_with_parent=True)
    if pid == 0:
        return True
    for fd in ends:
        os.close(fd)
    return False


if __name__ == "__main__":
    from grader.common import logs

    logs.configure()  # the level of the grade that started it ($GRADER_LOG_LEVEL)
    serve(int(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3]) if len(sys.argv) > 3 else [])
