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
                                    would (classroom._grade_and_save), and answers each with
                                    the seconds it took

A trusted process that dies mid-submission is replaced and the submission graded once more
by the new one (a failure of the machinery is retried once, as in-process); a second death
records the submission as ``error``. Student code never runs in these processes: it runs in
the sandboxed workers, exactly as with one job. Options cross as a pickle from this process
to its own child (both trusted); nothing of a student's is pickled.
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
from functools import partial
from typing import IO, Any, NoReturn

from grader import COURSE_ROOT


def cores() -> int:
    """The CPUs this process may run on (``nproc`` would say OMP_NUM_THREADS, if set)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _same_grader_env() -> dict[str, str]:
    """This environment, with this copy of the grader first on the path (the instructor's
    folder stays the working folder: the options' relative paths keep their meaning)."""
    parent = str(COURSE_ROOT)
    path = os.environ.get("PYTHONPATH", "")
    return dict(os.environ, PYTHONPATH=os.pathsep.join([parent, path]) if path else parent)


class TrustedProcess:
    """One ``python -m grader.classgrade.jobs`` and the thread that lends it workers."""

    def __init__(self, pool: Any, job: dict[str, Any]):
        from grader.helper.lend import lend_workers
        from grader.runtime.wire import Channel, pair

        ours, theirs = pair()
        answers_r, answers_w = os.pipe()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "grader.classgrade.jobs", str(theirs.fileno()), str(answers_w)],
            stdin=subprocess.PIPE, pass_fds=(theirs.fileno(), answers_w), env=_same_grader_env(),
            start_new_session=True)  # Ctrl-C reaches ``grade``, which kills it first
        theirs.close()
        os.close(answers_w)
        self.answers: IO[str] = os.fdopen(answers_r, "r", encoding="utf-8")
        self.points: dict[str, float] | None = None  # the lesson's, once the process has said
        # the pool's own start(limits, wait_s=) is what lend_workers calls
        self.lender = threading.Thread(target=lend_workers, args=(Channel(ours), pool), daemon=True)
        self.lender.start()
        self._send(base64.b64encode(pickle.dumps(job)).decode("ascii"))

    def _send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((line + "\n").encode("utf-8"))
        self.proc.stdin.flush()

    def grade(self, student: str) -> float | None:
        """The seconds ``student`` took (None: stopped); OSError when the process died."""
        self._send(json.dumps({"student": student}))
        while True:
            line = self.answers.readline()
            if not line:
                raise OSError(f"the trusted grading process {self.proc.pid} died "
                              f"(exit status {self.proc.poll()})")
            answer = json.loads(line)
            if "points" not in answer:
                return None if answer["seconds"] is None else float(answer["seconds"])
            self.points = {str(k): float(v) for k, v in answer["points"].items()}

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, 9)
        self.proc.wait()
        with contextlib.suppress(OSError):
            self.answers.close()
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        self.lender.join(timeout=5)

    def end_input(self) -> None:
        """No more students: the process exits when its input ends."""
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()

    def close(self) -> None:
        """End of the run: wait for the process to exit (its input ended), then clean up."""
        self.end_input()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=30)
        self.kill()


class Jobs:
    """N trusted processes, one per thread of ``grade_class``'s executor: ``start(n)`` starts
    them ahead (they import torch and the hidden tests while the sandbox boots); a thread
    without one takes a started one, or starts its own (a replacement)."""

    def __init__(self, pool: Any, job: dict[str, Any], stop: threading.Event):
        self.pool, self.job, self.stop = pool, job, stop
        self._local = threading.local()
        #: the lesson's ``{exercise: points}``, as the first trusted process to start read
        #: them (so ``grade`` need not import torch and the graders to write grades.csv)
        self.points: dict[str, float] | None = None
        self._all: list[TrustedProcess] = []
        self._ready: list[TrustedProcess] = []
        self._lock = threading.Lock()

    def start(self, count: int) -> None:
        """Start ``count`` trusted processes now. No worker is lent before a student is
        sent, so the pool may still be booting."""
        with self._lock:
            for _ in range(count):
                proc = TrustedProcess(self.pool, self.job)
                self._all.append(proc)
                self._ready.append(proc)

    def _process(self) -> TrustedProcess:
        proc = getattr(self._local, "proc", None)
        if proc is None:
            with self._lock:
                if self.stop.is_set():
                    raise OSError("the run was stopped")
                if self._ready:
                    proc = self._ready.pop()
                else:
                    proc = TrustedProcess(self.pool, self.job)
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
                proc = self._process()
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

def serve(rpc_fd: int, answers_fd: int) -> NoReturn:
    """Read the job (its options and the functions that grade and warm up, pickled by name),
    then grade one student per line of stdin until it ends; then exit."""
    from grader.check.engine import exercise_points
    from grader.helper.lend import HelperSource
    from grader.runtime.wire import Channel, exit_now

    _die_with_parent()
    os.dup2(2, 1)  # whatever a grader prints goes to stderr; answers have their own pipe
    answers = os.fdopen(answers_fd, "w", encoding="utf-8")
    job = pickle.loads(base64.b64decode(sys.stdin.readline()))
    opts, submitted, settings = job["opts"], job["submitted"], job["settings"]
    source = HelperSource(Channel(socket.socket(fileno=rpc_fd)))
    start = partial(source.start, opts.limits)
    stop = threading.Event()
    job["warm_up"](opts.lesson)
    answers.write(json.dumps({"points": exercise_points(opts.lesson)}) + "\n")
    for line in sys.stdin:
        student = json.loads(line)["student"]
        seconds = job["grade"](student, opts, submitted, start, stop, None, settings)
        answers.write(json.dumps({"student": student, "seconds": seconds}) + "\n")
        answers.flush()
    answers.close()
    exit_now(0)  # every record is written: skip the interpreter's clean-up of torch and the graders


def _die_with_parent() -> None:
    """Linux: killed with ``grade`` (a killed run must not write results afterwards)."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]))
