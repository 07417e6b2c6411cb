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
- the one serve loop: each server's requests and replies are dataclasses (the class's
  name is the message's ``op``; ``fds``, the descriptors a request brings); :func:`serve`
  answers each request with its handler, refuses one it does not serve (:class:`Refused`)
  and ends with the channel, with bounded waits; :func:`expect` and :func:`call` are the
  other side (:class:`NoAnswer`, within the bound, and at once where the server ended);
- :class:`Child`: the trusted side's handle on a server or a forked process: alive,
  bounded wait, kill (by pidfd where it is not our child: never a process that took its
  pid since), clean-up.

The control channel itself is ``grader.runtime.wire.Channel`` (JSON lines, descriptors
passed with SCM_RIGHTS); this module takes any object with its ``send``, ``recv``,
``pending`` and ``sock``, so that it imports nothing of the grader.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

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
    where no process can be made.

    The objects this process holds are frozen for the fork (``gc.freeze``): the child's
    garbage collections never scan what it inherits (a warm zygote's torch, its hidden
    tests: one full collection of them costs tens of ms of a check's CPU), nor write to
    its pages; here they are collected as before."""
    for stream in (sys.stdout, sys.stderr):  # the child must not write our buffer again
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()
    parent = os.getpid()
    gc.freeze()
    try:
        pid = os.fork()
    finally:
        if os.getpid() == parent:
            gc.unfreeze()
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


#: A handler's answer to a request: a reply (a dataclass), a reply and the descriptors
#: handed over with it (closed here once sent), or None (no reply).
Answer = Any
#: What serves one kind of request: given the request and the descriptors it brought.
Handler = Callable[[Any, list[int]], Answer]
M = TypeVar("M")


@dataclasses.dataclass
class Refused:
    """The answer to a request that is not served (an unknown ``op``, fields or descriptors
    that do not fit), or whose handler failed where the server says so."""

    error: str


class BadMessage(ValueError):
    """A message that is none of the kinds awaited, or whose fields do not fit its kind."""


def tell(channel: Any, message: Any, fds: Sequence[int] = ()) -> None:
    """Send ``message`` (a reply, or news nothing asked for: a server's ``Ready``)."""
    channel.send(_encode(message), fds)


def _encode(message: Any) -> dict[str, Any]:
    fields = dataclasses.fields(message)
    return {"op": type(message).__name__, **{f.name: getattr(message, f.name) for f in fields}}


def _decode(kinds: Iterable[type[M]], message: dict[str, Any]) -> M:
    op = message.get("op")
    kind = next((k for k in kinds if k.__name__ == op), None)
    if kind is None:
        raise BadMessage(f"unknown request {op!r}")
    try:
        return kind(**{k: v for k, v in message.items() if k != "op"})
    except TypeError as exc:
        raise BadMessage(f"{op!r} with fields that do not fit ({exc})") from None


def serve(channel: Any, handlers: Mapping[Any, Handler], *,
          tick: Callable[[], float | None] = lambda: None,
          silent: Callable[[], bool] = lambda: True,
          watch: Mapping[int, Callable[[], None]] | None = None,
          failed: Callable[[Exception], Any] | None = None) -> None:
    """Serve ``channel`` until it ends (its other end closed, or it fails): each request is
    decoded into its type (a key of ``handlers``) and answered by its handler (see
    :data:`Answer`); its descriptors are closed once the handler returns. An unknown
    request, or one whose fields or descriptors do not fit, is answered :class:`Refused`; a
    handler's exception is answered ``failed(exc)`` where given, else it ends the server
    (its driver sees the channel end). Before each wait ``tick()`` bounds it (None: until a
    request comes); after one that brought nothing, ``silent()`` says whether to go on.
    ``watch``: more descriptors waited on, each with what to do once it is readable."""
    watched = dict(watch or {})
    while True:
        if not channel.pending():  # a stream (no SOCK_SEQPACKET) may bring several at once
            ready = select.select([channel.sock, *watched], [], [], tick())[0]
            for fd in watched:
                if fd in ready:
                    watched[fd]()
            if not ready and not silent():
                return
            if channel.sock not in ready:
                continue
        if not _answer_one(channel, handlers, failed):
            return


def _answer_one(channel: Any, handlers: Mapping[Any, Handler],
                failed: Callable[[Exception], Any] | None) -> bool:
    """Read one request and answer it; False at the channel's end."""
    try:
        message, fds = channel.recv()
    except ValueError as exc:  # not a JSON object
        return _reply(channel, Refused(str(exc)))
    except OSError:
        return False
    if message is None:
        return False
    try:
        try:
            request: Any = _decode(handlers, message)
            if len(fds) != getattr(request, "fds", 0):
                raise BadMessage(f"{message.get('op')!r} with {len(fds)} descriptor(s)")
        except BadMessage as exc:
            return _reply(channel, Refused(str(exc)))
        try:
            answer = handlers[type(request)](request, fds)
        except Exception as exc:
            if failed is None:
                raise
            answer = failed(exc)
    finally:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
    return _reply(channel, answer)


def _reply(channel: Any, answer: Answer) -> bool:
    reply, fds = answer if isinstance(answer, tuple) else (answer, ())
    try:
        if reply is not None:
            tell(channel, reply, fds)
    except OSError:
        return False
    finally:
        for fd in fds:
            os.close(fd)
    return True


class NoAnswer(Exception):
    """No message of the kinds awaited: none within the bound (``timed_out``), the channel's
    end, something else (``got``: it, a :class:`Refused` included)."""

    def __init__(self, why: str, got: Any = None, timed_out: bool = False):
        super().__init__(why)
        self.got, self.timed_out = got, timed_out


def expect(channel: Any, kinds: type[M] | tuple[type, ...], timeout: float | None,
           fds: bool = False) -> Any:
    """The next message on ``channel``, of one of ``kinds``, within ``timeout`` s (None:
    wait); with ``fds``, ``(message, the descriptors that came with it)`` (otherwise they
    are closed). :class:`NoAnswer` otherwise: at once where the other end has ended."""
    wanted = kinds if isinstance(kinds, tuple) else (kinds,)
    try:
        message, got = channel.recv(timeout)
    except (OSError, ValueError) as exc:  # TimeoutError is an OSError
        return _typed(wanted, None, [], fds, exc, timeout)
    return _typed(wanted, message, got, fds)


def call(channel: Any, request: Any, kind: type[M], timeout: float | None,
         fds: Sequence[int] = ()) -> tuple[M, list[int]]:
    """Send ``request`` (with ``fds``) and wait at most ``timeout`` s for its reply, a
    ``kind``, and the descriptors that came with it (the channel is held for the round
    trip). :class:`NoAnswer` where none comes in time, the other end has ended (then at
    once), or it refused."""
    try:
        message, got = channel.call(_encode(request), timeout, fds)
    except (OSError, ValueError) as exc:  # ConnectionError: it ended
        return _typed((kind,), None, [], True, exc, timeout)
    return _typed((kind,), message, got, True)


def _typed(wanted: tuple[type, ...], message: dict[str, Any] | None, fds: list[int],
           keep_fds: bool, failure: Exception | None = None, timeout: float | None = None
           ) -> Any:
    awaited = "|".join(kind.__name__ for kind in wanted)
    if isinstance(failure, TimeoutError):
        raise NoAnswer(f"no {awaited} within {timeout:g} s", timed_out=True)
    if message is None:
        raise NoAnswer(f"no {awaited}: {failure or 'the other end has ended'}")
    reply: Any = message
    with contextlib.suppress(BadMessage):
        reply = _decode((*wanted, Refused), message)
    if not isinstance(reply, wanted):
        for fd in fds:
            os.close(fd)
        why = f"{awaited} refused: {reply.error}" if isinstance(reply, Refused) else ""
        raise NoAnswer(why or f"no {awaited} (got {reply!r})", reply)
    if keep_fds:
        return reply, fds
    for fd in fds:
        os.close(fd)
    return reply


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
