"""Isolation layer of the class grader: run each student's worker in a sandbox.

``SandboxPool`` keeps warm "zygote" processes (inside bubblewrap where it works: only the
interpreter, its packages and the worker's own code are visible, read-only) and forks
one confined worker per submission. What confines it depends on the machine, and is
named by what it stops (``PROTECTIONS``): per-submission pid, mount and IPC namespaces,
a private tmpfs scratch, a uid of its own (root) or a user namespace (everyone else), no
capabilities, no_new_privs, a seccomp filter, a cgroup (v1 or v2) or rlimits. The
trusted side enforces the wall clock and kills every process of the submission.

Use (the engine's side)::

    with SandboxPool(jobs=2, limits=Limits(wall_s=60), spares=0) as pool:
        print(pool.plan.describe())      # what is active, and what is missing and why
        worker = pool.start()            # a fresh fork (spares: one started ahead); thread-safe
        ...                              # talk to serve() over worker.sock
        worker.kill()                    # on a broken socket / deadline (idempotent)
        status = worker.finish()         # "ok" | "memory" | "timeout" | "crashed"
        excerpt = worker.output_excerpt(2000)
        # or, once it answered its shutdown: worker.release() (excerpt whole, reaped later)

``isolation="auto"`` (default) uses what the machine offers; ``"strict"`` raises
``SandboxUnavailable`` naming every missing protection; ``"none"`` runs unconfined.
"""

from ..common.limits import Limits, WorkerHandle
from .pool import SandboxError, SandboxPool, SandboxWorker, default_worker_files
from .probe import (
    PROTECTIONS,
    SandboxPlan,
    SandboxUnavailable,
    available_protections,
    missing_protections,
    plan,
)

__all__ = [
    "PROTECTIONS",
    "Limits",
    "SandboxPlan",
    "SandboxError",
    "SandboxPool",
    "SandboxUnavailable",
    "SandboxWorker",
    "WorkerHandle",
    "available_protections",
    "default_worker_files",
    "missing_protections",
    "plan",
]
