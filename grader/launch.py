"""Starting a worker process for one notebook, without a sandbox (``grader check``).

The class grader (``grader grade``) uses ``grader.sandbox`` instead; both hand the engine
an object with the same small interface: ``sock``, ``pid``, ``kill()``, ``finish()`` and
``output_excerpt()``.
"""

from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from coursekit import settings

PACKAGE_PARENT = str(Path(__file__).resolve().parents[1])
EXCERPT_BYTES = 64 << 10


@dataclass
class LocalLimits:
    memory_bytes: int = 4 << 30
    cpu_s: int = 300
    file_size_bytes: int = 64 << 20


class OutputDrain(threading.Thread):
    """Reads a pipe to the end, keeping only the first ``limit`` bytes."""

    def __init__(self, pipe, limit: int = EXCERPT_BYTES):  # noqa: ANN001
        super().__init__(daemon=True)
        self.pipe, self.limit = pipe, limit
        self.kept = bytearray()
        self.dropped = 0

    def run(self) -> None:
        while chunk := self.pipe.read1(1 << 16):
            room = self.limit - len(self.kept)
            self.kept += chunk[:room]
            self.dropped += max(0, len(chunk) - room)

    def excerpt(self, max_chars: int) -> str:
        text = self.kept.decode("utf-8", "replace")
        more = len(text) > max_chars or self.dropped
        return text[:max_chars] + ("\n[... output truncated ...]" if more else "")


class LocalWorker:
    """A worker subprocess in its own session, with rlimits; no filesystem isolation."""

    protections = ["subprocess", "rlimits (memory, cpu, file size)", "timeouts"]

    def __init__(self, limits: LocalLimits | None = None):
        self.limits = limits or LocalLimits()
        self.scratch = tempfile.TemporaryDirectory(prefix="grader-")
        self.sock, child = socket.socketpair()
        env = dict(os.environ, MPLBACKEND="Agg", OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1",
                   PYTHONPATH=os.pathsep.join([PACKAGE_PARENT, os.environ.get("PYTHONPATH", "")]))
        env.pop(settings.GRADER_SEED, None)  # the seed of the hidden inputs stays with the grader
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "grader.runtime.worker", "--fd", str(child.fileno())],
            pass_fds=[child.fileno()], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, cwd=self.scratch.name, env=env, start_new_session=True,
            preexec_fn=self._apply_limits,
        )
        child.close()
        self.pid = self.proc.pid
        self.drain = OutputDrain(self.proc.stdout)
        self.drain.start()
        self.killed = False

    def _apply_limits(self) -> None:
        lim = self.limits
        for res, value in ((resource.RLIMIT_AS, lim.memory_bytes), (resource.RLIMIT_CPU, lim.cpu_s),
                           (resource.RLIMIT_FSIZE, lim.file_size_bytes)):
            try:
                resource.setrlimit(res, (value, value))
            except (ValueError, OSError):
                pass

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
        try:
            os.killpg(self.pid, signal.SIGKILL)  # anything it left behind in its session
        except ProcessLookupError:
            pass
        self.drain.join(timeout=2)
        self.sock.close()
        self.scratch.cleanup()
        if self.killed:
            return "timeout"
        if code == 0:
            return "ok"
        if code == -signal.SIGXCPU:
            return "timeout"
        if "MemoryError" in self.drain.excerpt(EXCERPT_BYTES):
            return "memory"
        return "crashed"

    def output_excerpt(self, max_chars: int = 2000) -> str:
        return self.drain.excerpt(max_chars)
