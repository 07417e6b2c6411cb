"""``grader check``'s warm helper: one process per user that answers a check in about a second.

A cold ``grader check`` starts two Pythons that each import torch (the trusted side for the
graders' oracles, the worker for the notebook) before the first cell runs. The helper keeps
both warm and gives every check fresh copies of them::

    python -m grader check ...        a cold process, standard library only until it knows
      |                               whether a helper answers
      | Unix socket, in a folder only this user can enter (0700)
      v
    helper                            light (no torch); one thread per check
      | - SandboxPool("auto"):        warm zygotes (numpy, torch, matplotlib imported); each
      |                               check's worker is a fresh sandboxed fork of one, started
      |                               (and its torch warmed up) between checks: a spare
      | - the trusted zygote:         a process with the graders imported (torch, the hidden
      |                               tests' modules), one thread, never grades anything
      v
    trusted process (one per check)   a fresh fork of the trusted zygote, forked between
                                      checks and waiting for its request: runs ``grader
                                      check`` (``grader.check.command``) with the command line of
                                      its client, its workers from the helper's pool; writes
                                      the answer to the client, exits

Nothing of one check reaches another: the worker is a fresh fork of a zygote that never
ran student code, and the trusted side a fresh fork of a process whose hidden-test
modules were imported, never run. Two checks at once get two trusted processes and two
workers (a second zygote starts when the first is busy; the second check's processes are
forked when it comes). So a check waits for neither fork: from the client's request to the
first cell takes a few tens of milliseconds (``benchmarks/check_latency.py``).

A check that finds no helper runs the cold way, then starts one for the checks after it
(detached: it warms up while the answer is read; a check that comes sooner waits for it).
A cold check answers sooner than a helper that starts, which imports more. The helper
stops by itself after ``COURSE_CHECK_HELPER`` minutes without a check (default 15; ``off``
disables it), when its code changes on disk (the next check starts a new one), or on
``python -m grader helper stop``. A check it cannot answer runs the cold way instead.

By job: ``client`` (what ``grader check`` runs), ``private`` (the per-user folder of the
socket, its lock and log), ``server`` (the helper process), ``zygote`` (the trusted zygote
and the trusted process of one check), ``lend`` (workers lent over a channel, also to
``grade --jobs N``'s processes). Nothing here imports ``grader.cli``.
"""

from grader.helper.client import Answer, HelperError, check, request, start
from grader.helper.private import HelperUnavailable

__all__ = ["Answer", "HelperError", "HelperUnavailable", "check", "request", "start"]
