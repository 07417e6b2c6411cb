"""The helper process (``python -m grader.helper serve``): listens on the private
folder's socket, forks a trusted process per check from its trusted zygote, lends it
workers from its warm sandbox pool, and stops when idle, when its code changes on disk or
when asked to."""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import logging
import os
import signal
import socket
import struct
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from coursekit import settings
from grader.common import logs
from grader.helper.client import connect, read_line, write_line
from grader.helper.lend import lend_workers
from grader.helper.private import HelperUnavailable, Paths, fingerprint, log, paths
from grader.helper.zygote import TrustedZygote
from grader.runtime.wire import Channel, one_thread_each, pair

if TYPE_CHECKING:
    from grader.check.launch import WorkerSource
    from grader.common.limits import Limits, WorkerHandle
    from grader.sandbox import SandboxPool

READY_WAIT_S = 180.0  # for its zygotes to be warm (torch imports on a busy machine)
MAX_ZYGOTES = 2  # checks at once, each with a warm worker


class Helper:
    """The helper process: listens, forks a trusted process per check, lends it workers."""

    def __init__(self, where: Paths, idle_s: float):
        self.where = where
        self.idle_s = idle_s
        self.fingerprint = fingerprint()
        self.listener, self.inode = _listen(where)
        self.trusted = TrustedZygote(close_in_child=[self.listener])
        self.source: WorkerSource | None = None
        self.protections: list[str] = []
        self.ready = threading.Event()
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.active = 0
        self.served = 0
        self.last = time.monotonic()
        self.started = time.time()

    # -- lifecycle --------------------------------------------------------------------------
    def run(self) -> None:
        log(f"listening on {self.where.socket}; stops after {self.idle_s / 60:g} idle minutes")
        threading.Thread(target=self._open_pool, name="helper-pool", daemon=True).start()
        threading.Thread(target=self._watchdog, name="helper-idle", daemon=True).start()
        self.listener.settimeout(1.0)
        while not self.stopping.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                break
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()
        deadline = time.monotonic() + 300
        while self.active and time.monotonic() < deadline:
            time.sleep(0.1)
        if self.source is not None:
            self.source.close()
        self.trusted.close()
        log(f"stopped after {self.served} check(s)")

    def stop(self, why: str) -> None:
        if self.stopping.is_set():
            return
        log(f"stopping: {why}")
        self._unlink()
        self.stopping.set()
        with contextlib.suppress(OSError):
            self.listener.close()

    def _unlink(self) -> None:
        """Remove our socket, unless a newer helper has put its own there."""
        with _locked(self.where.lock), contextlib.suppress(OSError):
            if os.stat(self.where.socket).st_ino == self.inode:
                os.unlink(self.where.socket)

    def _watchdog(self) -> None:
        while not self.stopping.wait(min(5.0, self.idle_s / 4)):
            with self.lock:
                idle = time.monotonic() - self.last if self.active == 0 else 0.0
            if idle >= self.idle_s:
                self.stop(f"idle for {idle / 60:.1f} minutes")
            elif not self.trusted.alive():
                self.stop("the trusted zygote stopped")
            else:
                try:
                    moved = os.stat(self.where.socket).st_ino != self.inode
                except OSError:
                    moved = True
                if moved:
                    self.stop("its socket was removed or replaced")

    def _open_pool(self) -> None:
        from grader.check.launch import LocalSource, course_files
        from grader.common.limits import DEFAULT_LIMITS
        from grader.sandbox import SandboxPool, default_worker_files
        from grader.sandbox.pool import DEFAULT_PRELOAD

        try:
            pool = SandboxPool(jobs=1, limits=DEFAULT_LIMITS, isolation="auto",
                               preload=DEFAULT_PRELOAD, spares=1,
                               worker_files={**default_worker_files(), **course_files()})
            pool.open()
            pool.prime()
            self.source = _PoolSource(pool)
            self.protections = pool.protections
        except Exception as exc:  # noqa: BLE001 - plain processes, as a cold check would
            log(f"the sandbox could not start ({exc}); workers are plain processes")
            self.source = LocalSource((str(exc).splitlines() or [type(exc).__name__])[0])
        self.ready.set()
        log("ready")

    # -- one connection ---------------------------------------------------------------------
    def _handle(self, conn: socket.socket) -> None:
        try:
            if not _same_user(conn):
                return
            message = read_line(conn, 10.0)
            op = message.get("op")
            if op == "status":
                write_line(conn, self._status())
            elif op == "stop":
                write_line(conn, {"ok": True})
                self.stop("asked to")
            elif op == "check":
                if message.get("fingerprint") != self.fingerprint:
                    self.stop("its code changed on disk")  # first: the next connect is a new one
                    write_line(conn, {"stale": True})
                    return
                with self._busy():
                    self._check(conn, message)
        except Exception as exc:  # noqa: BLE001 - this connection only
            log(f"connection failed: {type(exc).__name__}: {exc}")
            with contextlib.suppress(OSError):
                write_line(conn, {"error": f"{type(exc).__name__}: {exc}"})
        finally:
            conn.close()

    @contextlib.contextmanager
    def _busy(self) -> Iterator[None]:
        with self.lock:
            self.active += 1
        try:
            yield
        finally:
            with self.lock:
                self.active -= 1
                self.served += 1
                self.last = time.monotonic()

    def _status(self) -> dict[str, Any]:
        with self.lock:
            idle = time.monotonic() - self.last if self.active == 0 else 0.0
        return {"ok": True, "pid": os.getpid(), "socket": str(self.where.socket),
                "ready": self.ready.is_set(), "checks": self.served, "active": self.active,
                "idle_s": round(idle, 1), "stops_after_idle_s": self.idle_s,
                "uptime_s": round(time.time() - self.started, 1),
                "protections": self.protections, "log": str(self.where.log)}

    def _check(self, conn: socket.socket, message: dict[str, Any]) -> None:
        if not self.ready.wait(READY_WAIT_S):
            raise HelperUnavailable("the helper's sandbox is not ready yet")
        source = self.source
        assert source is not None  # set before ready
        ours, theirs = pair()
        with contextlib.closing(ours):
            try:
                sandbox = {"missing": source.missing,
                           "unavailable": source.unavailable}  # for its stderr note
                self.trusted.fork(dict(message, sandbox=sandbox),
                                  [conn.fileno(), theirs.fileno()], READY_WAIT_S)
            finally:
                theirs.close()
            try:
                lend_workers(Channel(ours), source)
            finally:
                if isinstance(source, _PoolSource):
                    source.prime()  # the next check's worker, started between checks


class _PoolSource:
    """Workers from the helper's pool: one started ahead, between checks (a spare), so
    that a check's worker is ready when it asks; a further zygote starts when every one
    is busy (checks at once)."""

    def __init__(self, pool: SandboxPool):
        self.pool = pool
        self.missing = pool.plan.report()["missing"]  # English: it crosses to the client as JSON
        self.unavailable = ""

    def start(self, limits: Limits, wait_s: float | None = None) -> WorkerHandle:
        if self.pool.busy():
            threading.Thread(target=self.pool.grow, args=(MAX_ZYGOTES,), daemon=True).start()
        return self.pool.start(limits, wait_s=wait_s, refill=False)

    def prime(self) -> None:
        self.pool.prime()

    def close(self) -> None:
        self.pool.close()


@contextlib.contextmanager
def _locked(path: str) -> Iterator[None]:
    with open(path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _listen(where: Paths) -> tuple[socket.socket, int]:
    """Bind the helper's socket, unless a live helper has it (then HelperUnavailable)."""
    with _locked(where.lock):
        alive = connect(where.socket)
        if alive is not None:
            alive.close()
            raise HelperUnavailable("another helper is running")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(where.socket)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            listener.bind(str(where.socket))
        finally:
            os.umask(old)
        listener.listen(16)
        return listener, os.stat(where.socket).st_ino


def _same_user(conn: socket.socket) -> bool:
    """The peer is this user (Linux says; elsewhere the private folder is the guard)."""
    peercred = getattr(socket, "SO_PEERCRED", None)
    if peercred is None:
        return True
    _, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, peercred, 12))
    return uid == os.getuid()


def serve(idle_minutes: float) -> int:
    """``python -m grader.helper serve``: run a helper until it has been idle that long."""
    one_thread_each()
    try:
        helper = Helper(paths(), idle_minutes * 60)
    except HelperUnavailable as exc:
        log(f"not started: {exc}")
        return 0
    signal.signal(signal.SIGTERM, lambda *_: helper.stop("SIGTERM"))
    helper.run()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.helper",
                                     description="the warm helper of `grader check`")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("serve", help="run a helper (a check starts one when needed)")
    run.add_argument("--idle-minutes", type=float, default=settings.CHECK_HELPER_DEFAULT_MINUTES)
    logs.add_options(parser)  # before or after ``serve``
    args = parser.parse_args(argv)
    chosen = logs.configure(args.log_level, fmt=logs.HELPER)  # its stderr is its log file
    logging.getLogger("grader.helper").setLevel(min(chosen, logging.INFO))  # its own lines
    return serve(args.idle_minutes)


