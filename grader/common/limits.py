"""Every limit a graded notebook runs under, in one place (``check``, ``grade``, the sandbox),
and ``WorkerHandle``: the trusted side's handle on the worker process that enforces them.

``check`` and ``grade`` use the same defaults, so a notebook that passes ``check`` on a
student's laptop is not cut short by ``grade`` on the instructor's machine. How each limit
is enforced depends on what the machine allows (see ``grader.sandbox``): the memory cap is
a cgroup where one is writable, else a per-process ``RLIMIT_DATA``.
"""

from __future__ import annotations

import socket
from dataclasses import asdict, dataclass, replace
from typing import Any, Protocol

GIB = 1 << 30


@dataclass(frozen=True)
class Limits:
    wall_s: float = 120.0  # the whole notebook: running its cells and answering every check
    call_s: float = 20.0  # one request of a hidden check (a call, an attribute, a backward)
    cpu_s: int | None = None  # CPU seconds per process (RLIMIT_CPU); None: wall_s + 10
    memory_bytes: int = 2 << 30  # the submission's memory
    max_pids: int = 64  # processes and threads of the submission
    file_size_bytes: int = 64 << 20  # largest file it may write (RLIMIT_FSIZE)
    open_files: int = 256  # RLIMIT_NOFILE
    scratch_bytes: int = 256 << 20  # its private scratch folder (a tmpfs, where available)
    output_bytes: int = 64 << 10  # what is kept of what it prints: this much head and tail

    @property
    def cpu_limit_s(self) -> int:
        return int(self.cpu_s if self.cpu_s is not None else self.wall_s + 10)

    @property
    def memory_gib(self) -> float:
        return self.memory_bytes / GIB

    def with_(self, **changes: Any) -> Limits:
        """A copy with some limits changed (``None`` values are ignored)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    def as_dict(self) -> dict[str, Any]:
        return dict(asdict(self), cpu_s=self.cpu_limit_s)


DEFAULT_LIMITS = Limits()


class WorkerHandle(Protocol):
    """A started worker, whichever source made it (``launch.LocalWorker``,
    ``sandbox.SandboxWorker``, ``helper.HelperWorker``): the engine talks to it over
    ``sock`` and the worker enforces ``limits.wall_s`` itself (then ``timed_out``)."""

    sock: socket.socket
    pid: int

    @property
    def limits(self) -> Limits: ...

    @property
    def timed_out(self) -> bool:
        """Killed by its wall clock."""
        ...

    def kill(self) -> None: ...

    def finish(self) -> str:
        """Reap it: ``ok``, ``timeout``, ``memory`` or ``crashed``."""
        ...

    def release(self) -> None:
        """Let go of a worker that answered its shutdown (so exits as asked): returns once
        its output is complete; the rest of its end (exit, clean-up) may happen later,
        before its source closes."""
        ...

    def output_excerpt(self, max_chars: int = 2000) -> str: ...


class WorkerStarter(Protocol):
    """What starts workers: a sandbox pool, or a check's worker source
    (``grader.check.launch.WorkerSource``); ``grader.helper.lend`` lends theirs."""

    def start(self, limits: Limits, wait_s: float | None = None) -> WorkerHandle: ...
