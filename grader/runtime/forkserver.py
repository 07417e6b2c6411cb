"""The grader's one process model: fork servers.

A *fork server* is a warm process (torch and the graders imported once) that forks a fresh
process per request, so that no submission and no check pays for those imports again. The
grader has three, and all three are built from this module (CONTRIBUTING.md, "Processes",
draws who forks whom in each setup):

- the sandbox's zygotes (``grader/sandbox/_zygote.py``), inside the sandbox: one forked
  worker per submission, and clones of themselves. This file is copied beside it, so it
  imports nothing but the standard library;
- the check helper's trusted zygote (``grader/helper/zygote.py``): one trusted process
  per check;
- the class grader's first trusted process (``grader/classgrade/jobs.py``): once warm, the
  other jobs' trusted processes.

What they share:

- :func:`fork_child`: a fork whose child side is done alike everywhere (the streams
  flushed first; in the child, the descriptors it must not hold closed, signal handlers
  back to their defaults, a process group or session of its own, the parent-death
  signal, and an exit at once where the parent died before that signal was set);
- :func:`may_fork`: whether this process may fork at all (one thread: a fork of a process
  with more may inherit a lock another thread held);
- :func:`die_with_parent`: the parent-death signal (Linux);
- :func:`reaped`: the children that have ended, reaped without waiting;
- :func:`expect`: the control channel's next message, of a given ``op`` (the server's
  ``{"op": "ready"}`` above all), waited for at most so long;
- :class:`Child`: the trusted side's handle on a server or a forked process: alive,
  bounded wait, kill (by pidfd where it is not our child: never a process that took its
  pid since), clean-up.

The control channel itself is ``grader.runtime.wire.Channel`` (JSON lines, descriptors
passed with SCM_RIGHTS); :func:`expect` takes any object with its ``recv``.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

PR_SET_PDEATHSIG = 1
#: What a forked child exits with when it cannot become what it was forked to be.
FORK_FAILED_EXIT = 70


def die_with_parent() -> None:
    """SIGKILL this process when the thread that forked it ends (Linux; elsewhere nothing).
    OSError where the kernel refuses."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"PR_SET_PDEATHSIG: {os.strerror(errno)}")


def may_fork() -> bool:
    """This process runs one thread (Python's and the libraries' own): a fork is safe."""
    if threading.active_count() != 1:
        return False
    with contextlib.suppress(OSError):
        return len(os.listdir("/proc/self/task")) == 1
    return True  # no /proc: Python's count is all we know


def fork_child(close: Iterable[int | socket.socket] = (), *, new: str = "",
               dies_with_parent: bool = False, default_signals: Iterable[int] = ()) -> int:
    """Fork: the child's pid here, 0 in the child. In the child, in this order: a signal
    wake-up descriptor unset and ``default_signals`` back to their default handlers,
    ``close`` closed, ``new`` ``"session"`` or ``"group"``: a session or a process group
    of its own, and with ``dies_with_parent`` the parent-death signal (the child exits
    with :data:`FORK_FAILED_EXIT` where the parent died before it was set). OSError here
    where no process can be made."""
    for stream in (sys.stdout, sys.stderr):  # the child must not write our buffer again
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()
    parent = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    try:
        _become_child(parent, list(close), new, dies_with_parent, list(default_signals))
    except BaseException:  # noqa: BLE001 - a child that is not what it should be ends
        os._exit(FORK_FAILED_EXIT)
    return 0


def _become_child(parent: int, close: list[int | socket.socket], new: str,
                  dies_with_parent: bool, default_signals: list[int]) -> None:
    with contextlib.suppress(ValueError):  # a wake-up fd would be written after it closed
        signal.set_wakeup_fd(-1)
    for signum in default_signals:
        signal.signal(signum, signal.SIG_DFL)
    for end in close:
        if isinstance(end, socket.socket):
            end.close()
        else:
            os.close(end)
    if new == "session":
        os.setsid()
    elif new == "group":
        os.setpgid(0, 0)
    if dies_with_parent:
        die_with_parent()
        # it died before the line above (0: the parent is outside the child's pid
        # namespace, where an orphan's parent would read as that namespace's process 1)
        if os.getppid() not in (parent, 0):
            os._exit(FORK_FAILED_EXIT)


def reaped() -> Iterator[tuple[int, int]]:
    """``(pid, wait status)`` of each child that has ended, reaped as it is yielded, until
    none has (never waits)."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        yield pid, status


class NoAnswer(Exception):
    """The control channel brought something else than the message awaited (``got``:
    None at its end or after the wait)."""

    def __init__(self, op: str, got: dict[str, Any] | None):
        super().__init__(f"no {op!r} (got {got!r})")
        self.got = got


def expect(channel: Any, op: str, timeout: float | None) -> dict[str, Any]:
    """The next message on ``channel`` (a ``wire.Channel``), which must be ``{"op": op,
    ...}`` and come within ``timeout`` s (None: wait); any descriptors with it are
    closed. :class:`NoAnswer` otherwise."""
    try:
        message, fds = channel.recv(timeout)
    except (TimeoutError, OSError, ValueError):
        raise NoAnswer(op, None) from None
    for fd in fds:
        os.close(fd)
    if message is None or message.get("op") != op:
        raise NoAnswer(op, message)
    return message


class Child:
    """A fork server or a process it forked, seen from the process that drives it.

    Three kinds, one interface: a process started with ``subprocess`` (``popen``), a child
    of ours forked by :func:`fork_child` (``ours``: we reap it), and a process that another
    one forked (neither: known by a pidfd, Linux, so that a signal never reaches a process
    that took its pid after it ended). ``group``: it leads a process group of its own, and
    :meth:`kill` kills the group."""

    def __init__(self, pid: int, popen: subprocess.Popen[bytes] | None = None, *,
                 ours: bool = False, group: bool = False):
        self.pid = pid
        self.popen = popen
        self.ours = ours
        self.group = group
        self.status: int | None = None  # our child's wait status, once reaped
        self._pidfd: int | None = None
        if popen is None and not ours:
            with contextlib.suppress(OSError, AttributeError):
                self._pidfd = os.pidfd_open(pid)

    @classmethod
    def started(cls, popen: subprocess.Popen[bytes], group: bool = False) -> Child:
        return cls(popen.pid, popen, group=group)

    def alive(self) -> bool:
        return not self.wait(0)

    def wait(self, timeout: float | None) -> bool:
        """Whether it has ended, waiting at most ``timeout`` s (None: until it has)."""
        if self.popen is not None:
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                return False
            return True
        if self.ours:
            return self._reap(timeout)
        if self._pidfd is None:
            return True  # nothing known of it any more
        return bool(select.select([self._pidfd], [], [], timeout)[0])  # readable: ended

    def _reap(self, timeout: float | None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.status is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere (a reaping loop of ours)
                self.status = -1
                break
            if pid:
                self.status = status
                break
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(0.005)
        return True

    def kill(self) -> None:
        """SIGKILL it (its process group, for a group leader), unless it has ended (and
        a process known by no pidfd: nothing could say it is still the same); it is not
        waited for."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if self._pidfd is not None:
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
                return
            if self.popen is not None:
                running = self.popen.poll() is None
            else:
                running = self.ours and self.status is None
            if running:
                (os.killpg if self.group else os.kill)(self.pid, signal.SIGKILL)

    def close(self, grace_s: float = 5.0, killed_s: float | None = 10.0) -> bool:
        """Wait ``grace_s`` s for it to end, then kill it and wait ``killed_s`` s more (None:
        until it has: only a process stuck in the kernel takes long); whether it ended."""
        ended = self.wait(grace_s)
        if not ended:
            self.kill()
            ended = self.wait(killed_s)
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None
        return ended
