"""Isolation layer of the class grader: run each student's worker in a sandbox.

``SandboxPool`` keeps warm "zygote" processes inside bubblewrap (only the interpreter,
its packages and the worker's own code are visible, read-only) and forks one confined
worker per submission: its own cgroup (memory, pids), rlimits, private tmpfs scratch,
unprivileged uid, no capabilities, no_new_privs and a seccomp filter. The trusted side
enforces the wall clock and kills the whole cgroup at the end.

Use (the engine's side)::

    with SandboxPool(jobs=2, limits=Limits(wall_s=60), isolation="full") as pool:
        print(pool.protections)          # exactly what is active
        worker = pool.start()            # a fresh fork; ~20-40 ms; thread-safe
        ...                              # talk to serve() over worker.sock
        worker.kill()                    # on a broken socket / deadline (idempotent)
        status = worker.finish()         # "ok" | "memory" | "timeout" | "crashed"
        excerpt = worker.output_excerpt(2000)

``isolation="full"`` raises ``SandboxUnavailable`` naming what is missing; ``"auto"`` runs
with ``available_protections()``; ``"none"`` (explicit only) runs unconfined.
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
