"""Isolation layer of the class grader: run each student's worker in a sandbox.

``SandboxPool`` keeps warm "zygote" processes inside bubblewrap (only the interpreter,
its packages and the worker's own code are visible, read-only) and forks one confined
worker per submission: its own cgroup (memory, pids), rlimits, private tmpfs scratch,
unprivileged uid, no capabilities, no_new_privs and a seccomp filter. The trusted side
enforces the wall clock and kills the whole cgroup at the end.
"""

from .limits import Limits
from .pool import SandboxError, SandboxPool, SandboxWorker, WorkerHandle, default_worker_files
from .probe import (
    ALL_PROTECTIONS,
    SandboxUnavailable,
    available_protections,
    missing_reasons,
    select_protections,
)

__all__ = [
    "ALL_PROTECTIONS",
    "Limits",
    "SandboxError",
    "SandboxPool",
    "SandboxUnavailable",
    "SandboxWorker",
    "WorkerHandle",
    "available_protections",
    "default_worker_files",
    "missing_reasons",
    "select_protections",
]
