"""Starting a worker process for one notebook, without a sandbox (``grader check``).

The class grader (``grader grade``) uses ``grader.sandbox`` instead; both hand the engine
an object with the same small interface: ``sock``, ``pid``, ``kill()``, ``finish()`` and
``output_excerpt()``, and both enforce the notebook's wall clock themselves.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from coursekit import settings

from .limits import DEFAULT_LIMITS, Limits
from .sandbox.output import OutputTap

PACKAGE_PARENT = str(Path(__file__).resolve().parents[1])


class LocalWorker:
    """A worker subprocess in its own session, with rlimits; no filesystem isolation."""

    def __init__(self, limits: Limits = DEFAULT_LIMITS):
        self.limits = limits
        self.scratch = tempfile.TemporaryDirectory(prefix="grader-")
        self.sock, child = socket.socketpair()
        env = dict(os.environ, MPLBACKEND="Agg", OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1",
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
        from .sandbox._confine import set_rlimits

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
        if code == -signal.SIGXCPU:
            return "timeout"
        if "MemoryError" in self.tap.excerpt(1 << 20):
            return "memory"
        return "crashed"

    def output_excerpt(self, max_chars: int = 2000) -> str:
        return self.tap.excerpt(max_chars)
