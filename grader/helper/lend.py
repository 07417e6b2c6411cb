"""Workers lent over a channel: a trusted process (a check's, in the helper; a job's, in
``grade --jobs N``) asks for sandboxed workers, and the process that holds the pool starts,
kills and finishes them for it, handing over each worker's socket (``grader.runtime.wire``).

- :func:`lend_workers`: the pool's side, one thread per trusted process;
- :class:`HelperSource`: the trusted process's side, a ``grader.check.launch.WorkerSource``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from typing import TYPE_CHECKING, Any

from grader.helper.private import HelperUnavailable, log
from grader.runtime.wire import Channel

if TYPE_CHECKING:
    from grader.common.limits import Limits, WorkerHandle, WorkerStarter

RPC_WAIT_S = 90.0  # for the helper to answer a trusted process (start it, finish it ...)


class HelperSource:
    """``grader.check.launch``'s worker source inside a trusted process: workers from the
    helper's warm sandbox pool, asked for over ``rpc``."""

    description = "the check helper's sandbox"

    def __init__(self, rpc: Channel, sandbox: dict[str, Any] | None = None):
        self.rpc = rpc
        self.missing = dict((sandbox or {}).get("missing", {}))  # as the helper's pool has it
        self.unavailable = str((sandbox or {}).get("unavailable", ""))

    def call(self, message: dict[str, Any], timeout: float | None = None
             ) -> tuple[dict[str, Any], list[int]]:
        """``message``'s reply and fds; HelperUnavailable (not a SandboxError, which ``main``
        would report) when the helper cannot give one, so the client checks the cold way."""
        timeout = RPC_WAIT_S if timeout is None else timeout

        try:
            reply, fds = self.rpc.call(message, timeout)
        except TimeoutError:
            raise HelperUnavailable(f"the check helper did not answer within {timeout:g} s "
                               f"({message.get('op')})") from None
        except (OSError, ValueError) as exc:
            raise HelperUnavailable(f"the check helper did not answer ({exc})") from None
        if not reply.get("ok"):
            for fd in fds:
                os.close(fd)
            raise HelperUnavailable(str(reply.get("error", "the check helper refused")))
        return reply, fds

    def start(self, limits: Limits, wait_s: float | None = None) -> HelperWorker:
        from grader.check import timeline

        with timeline.span("worker"):
            from grader.sandbox.pool import RELEASE_MARGIN_S

            if wait_s is None:
                wait_s = limits.wall_s + RELEASE_MARGIN_S  # for one of its zygotes to come free
            reply, fds = self.call({"op": "start", "limits": limits.as_dict(), "wait_s": wait_s},
                                   timeout=wait_s + RPC_WAIT_S)
        return HelperWorker(self, int(reply["id"]), int(reply["pid"]), socket.socket(fileno=fds[0]),
                            limits)

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
            self.source.call({"op": "kill", "id": self.id})

    def finish(self) -> str:
        if self._status is None:
            with contextlib.suppress(OSError):
                self.sock.close()
            reply, _ = self.source.call({"op": "finish", "id": self.id})
            self._status, self._timed_out = str(reply["status"]), bool(reply["timed_out"])
        return self._status

    def release(self) -> None:
        if self._status is None:
            with contextlib.suppress(OSError):
                self.sock.close()
            self.source.call({"op": "release", "id": self.id})
            self._status, self._timed_out = "ok", False  # it answered its shutdown

    @property
    def timed_out(self) -> bool:
        if self._status is not None:
            return self._timed_out
        return bool(self.source.call({"op": "timed_out", "id": self.id})[0]["value"])

    def output_excerpt(self, max_chars: int = 2000) -> str:
        return str(self.source.call({"op": "excerpt", "id": self.id,
                                     "max_chars": int(max_chars)})[0]["text"])


def lend_workers(rpc: Channel, source: WorkerStarter) -> None:
    """Serve one trusted process's requests for workers until it closes the channel; then
    stop every worker it left running."""
    from grader.common.limits import DEFAULT_LIMITS, Limits
    from grader.sandbox.pool import RELEASE_MARGIN_S

    workers: dict[int, WorkerHandle] = {}
    finished: dict[int, str] = {}
    try:
        while True:
            walls = [w.limits.wall_s for w in workers.values()]
            idle_s = max([DEFAULT_LIMITS.wall_s, *walls]) + RELEASE_MARGIN_S
            try:
                message, fds = rpc.recv(timeout=idle_s)
            except TimeoutError:
                log(f"a check's trusted process sent nothing for {idle_s:g} s: its workers "
                    "are stopped", logging.WARNING)
                return
            for fd in fds:
                os.close(fd)
            if message is None:
                return
            op, wid = message.get("op"), message.get("id")
            try:
                reply = _worker_op(op, wid, message, workers, finished, source, Limits, rpc)
            except Exception as exc:  # noqa: BLE001 - the trusted process reports it
                reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
            if reply is not None:
                rpc.send(reply)
    except OSError:
        return
    finally:
        for wid, worker in workers.items():
            if wid not in finished:
                with contextlib.suppress(Exception):
                    worker.kill()
                    worker.finish()


def _worker_op(op: Any, wid: Any, message: dict[str, Any], workers: dict[int, WorkerHandle],
               finished: dict[int, str], source: WorkerStarter, limits_type: type[Limits],
               rpc: Channel) -> dict[str, Any] | None:
    if op == "start":
        fields = {k: v for k, v in dict(message["limits"]).items()
                  if k in limits_type.__dataclass_fields__}
        wait_s = message.get("wait_s")
        worker = source.start(limits_type(**fields),
                              wait_s=float(wait_s) if isinstance(wait_s, (int, float)) else None)
        wid = len(workers) + 1
        workers[wid] = worker
        rpc.send({"ok": True, "id": wid, "pid": worker.pid}, [worker.sock.fileno()])
        worker.sock.close()  # the trusted process holds it now: its end closes the worker's
        return None
    worker = workers[int(wid)]
    if op == "kill":
        if int(wid) not in finished:
            worker.kill()
        return {"ok": True}
    if op == "finish":
        if int(wid) not in finished:
            finished[int(wid)] = worker.finish()
        return {"ok": True, "status": finished[int(wid)],
                "timed_out": worker.timed_out}
    if op == "release":
        if int(wid) not in finished:
            worker.release()
            finished[int(wid)] = "ok"
        return {"ok": True}
    if op == "timed_out":
        return {"ok": True, "value": worker.timed_out}
    if op == "excerpt":
        return {"ok": True, "text": worker.output_excerpt(int(message.get("max_chars", 2000)))}
    return {"ok": False, "error": f"unknown request {op!r}"}

