"""Workers lent over a channel: a trusted process (a check's, in the helper; a job's, in
``grade --jobs N``) asks for sandboxed workers, and the process that holds the pool starts,
kills and finishes them for it, handing over each worker's socket (``grader.runtime.wire``).

- :func:`lend_workers`: the pool's side, one thread per trusted process, served by the
  grader's one serve loop (``grader.runtime.forkserver.serve``);
- :class:`HelperSource`: the trusted process's side, a ``grader.check.launch.WorkerSource``.

The requests and their replies are the dataclasses below (a class's name is its ``op``); a request
that fails is answered ``forkserver.Refused`` with what went wrong.
"""

from __future__ import annotations

import contextlib
import logging
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from grader.helper.private import HelperUnavailable, log
from grader.runtime import forkserver
from grader.runtime.wire import Channel

if TYPE_CHECKING:
    from grader.common.limits import Limits, WorkerHandle, WorkerStarter

RPC_WAIT_S = 90.0  # for the helper to answer a trusted process (start it, finish it ...)
R = TypeVar("R")


# -- trusted process -> the pool's holder ----------------------------------------------------
@dataclass
class Start:
    limits: dict[str, Any]
    wait_s: float | None = None


@dataclass
class Kill:
    id: int


@dataclass
class Finish:
    id: int


@dataclass
class Release:
    id: int


@dataclass
class AskTimedOut:
    id: int


@dataclass
class AskExcerpt:
    id: int
    max_chars: int = 2000


# -- and back ---------------------------------------------------------------------------------
@dataclass
class Started:
    """With the worker's socket."""

    id: int
    pid: int


@dataclass
class Done:
    """Kill or Release done."""


@dataclass
class Finished:
    status: str
    timed_out: bool


@dataclass
class TimedOut:
    value: bool


@dataclass
class Excerpt:
    text: str


class HelperSource:
    """``grader.check.launch``'s worker source inside a trusted process: workers from the
    helper's warm sandbox pool, asked for over ``rpc``."""

    description = "the check helper's sandbox"

    def __init__(self, rpc: Channel, sandbox: dict[str, Any] | None = None):
        self.rpc = rpc
        self.missing = dict((sandbox or {}).get("missing", {}))  # as the helper's pool has it
        self.unavailable = str((sandbox or {}).get("unavailable", ""))

    def call(self, request: Any, kind: type[R], timeout: float | None = None
             ) -> tuple[R, list[int]]:
        """``request``'s reply and fds; HelperUnavailable (not a SandboxError, which ``main``
        would report) when the helper cannot give one, so the client checks the cold way."""
        timeout = RPC_WAIT_S if timeout is None else timeout
        try:
            return forkserver.call(self.rpc, request, kind, timeout)
        except forkserver.NoAnswer as exc:
            if exc.timed_out:
                raise HelperUnavailable(f"the check helper did not answer within {timeout:g} s "
                                        f"({type(request).__name__.lower()})") from None
            if isinstance(exc.got, forkserver.Refused):
                raise HelperUnavailable(exc.got.error) from None
            raise HelperUnavailable(f"the check helper did not answer ({exc})") from None

    def start(self, limits: Limits, wait_s: float | None = None) -> HelperWorker:
        from grader.check import timeline

        with timeline.span("worker"):
            from grader.sandbox.pool import RELEASE_MARGIN_S

            if wait_s is None:
                wait_s = limits.wall_s + RELEASE_MARGIN_S  # for one of its zygotes to come free
            reply, fds = self.call(Start(limits.as_dict(), wait_s), Started,
                                   timeout=wait_s + RPC_WAIT_S)
        return HelperWorker(self, reply.id, reply.pid, socket.socket(fileno=fds[0]), limits)

    def close(self) -> None:
        return None


class HelperWorker:
    """A worker of the helper's pool, seen from a trusted process (``WorkerHandle``)."""

    def __init__(self, source: HelperSource, wid: int, pid: int, sock: socket.socket,
                 limits: Limits):
        self.source, self.id, self.pid, self.sock, self.limits = source, wid, pid, sock, limits
        self._status: str | None = None
        self._timed_out = False

    def kill(self) -> None:
        if self._status is None:
            self.source.call(Kill(self.id), Done)

    def finish(self) -> str:
        if self._status is None:
            with contextlib.suppress(OSError):
                self.sock.close()
            reply, _ = self.source.call(Finish(self.id), Finished)
            self._status, self._timed_out = reply.status, reply.timed_out
        return self._status

    def release(self) -> None:
        if self._status is None:
            with contextlib.suppress(OSError):
                self.sock.close()
            self.source.call(Release(self.id), Done)
            self._status, self._timed_out = "ok", False  # it answered its shutdown

    @property
    def timed_out(self) -> bool:
        if self._status is not None:
            return self._timed_out
        return self.source.call(AskTimedOut(self.id), TimedOut)[0].value

    def output_excerpt(self, max_chars: int = 2000) -> str:
        return self.source.call(AskExcerpt(self.id, int(max_chars)), Excerpt)[0].text


class _Lender:
    """The workers lent to one trusted process, and its requests' handlers."""

    def __init__(self, source: WorkerStarter):
        self.source = source
        self.workers: dict[int, WorkerHandle] = {}
        self.finished: dict[int, str] = {}
        self.handlers: dict[Any, forkserver.Handler] = {Start: self.start, Kill: self.kill, Finish: self.finish,
                         Release: self.release, AskTimedOut: self.timed_out,
                         AskExcerpt: self.excerpt}

    def idle_s(self) -> float:
        """How long the trusted process may stay silent: the longest wall clock of its
        workers (or the default one), and the time to finish one."""
        from grader.common.limits import DEFAULT_LIMITS
        from grader.sandbox.pool import RELEASE_MARGIN_S

        walls = [w.limits.wall_s for w in self.workers.values()]
        return max([DEFAULT_LIMITS.wall_s, *walls]) + RELEASE_MARGIN_S

    def silent(self) -> bool:
        log(f"a check's trusted process sent nothing for {self.idle_s():g} s: its workers "
            "are stopped", logging.WARNING)
        return False

    def start(self, req: Start, _: list[int]) -> forkserver.Answer:
        from grader.common.limits import Limits

        fields = {k: v for k, v in dict(req.limits).items() if k in Limits.__dataclass_fields__}
        wait_s = float(req.wait_s) if isinstance(req.wait_s, (int, float)) else None
        worker = self.source.start(Limits(**fields), wait_s=wait_s)
        wid = len(self.workers) + 1
        self.workers[wid] = worker
        # the trusted process holds it now: its end closes the worker's
        return Started(wid, worker.pid), [worker.sock.detach()]

    def kill(self, req: Kill, _: list[int]) -> forkserver.Answer:
        if self._running(req.id):
            self.workers[req.id].kill()
        return Done()

    def finish(self, req: Finish, _: list[int]) -> forkserver.Answer:
        if self._running(req.id):
            self.finished[req.id] = self.workers[req.id].finish()
        return Finished(self.finished[req.id], self.workers[req.id].timed_out)

    def release(self, req: Release, _: list[int]) -> forkserver.Answer:
        if self._running(req.id):
            self.workers[req.id].release()
            self.finished[req.id] = "ok"
        return Done()

    def timed_out(self, req: AskTimedOut, _: list[int]) -> forkserver.Answer:
        return TimedOut(self.workers[int(req.id)].timed_out)

    def excerpt(self, req: AskExcerpt, _: list[int]) -> forkserver.Answer:
        return Excerpt(self.workers[int(req.id)].output_excerpt(int(req.max_chars)))

    def _running(self, wid: int) -> bool:
        """Lent, and not finished yet (KeyError: never lent)."""
        self.workers[wid]  # noqa: B018 - KeyError for a worker never lent
        return wid not in self.finished

    def stop_all(self) -> None:
        for wid, worker in self.workers.items():
            if wid not in self.finished:
                with contextlib.suppress(Exception):
                    worker.kill()
                    worker.finish()


def _refused(exc: Exception) -> forkserver.Refused:
    return forkserver.Refused(f"{type(exc).__name__}: {exc}")


def lend_workers(rpc: Channel, source: WorkerStarter) -> None:
    """Serve one trusted process's requests for workers until it closes the channel (or
    stays silent past every bound); then stop every worker it left running."""
    lender = _Lender(source)
    try:
        forkserver.serve(rpc, lender.handlers, tick=lender.idle_s, silent=lender.silent,
                         failed=_refused)
    finally:
        lender.stop_all()
