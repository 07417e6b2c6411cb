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
      |                               check's worker is a fresh sandboxed fork of one
      | - the trusted zygote:         a process with the graders imported (torch, the hidden
      |                               tests' modules), one thread, never grades anything
      v
    trusted process (one per check)   a fresh fork of the trusted zygote: runs ``grader
                                      check`` with the same command line a cold process
                                      would, its workers from the helper's pool; writes the
                                      answer to the client, exits

Nothing of one check reaches another: the worker is a fresh fork of a zygote that never
ran student code, and the trusted side a fresh fork of a process whose hidden-test
modules were imported, never run. Two checks at once get two trusted processes and two
workers (a second zygote starts when the first is busy).

The first check starts the helper and waits for it (about as long as a cold check). It
stops by itself after ``COURSE_CHECK_HELPER`` minutes without a check (default 15; ``off``
disables it), when its code changes on disk (the next check starts a new one), or on
``python -m grader helper stop``. A check it cannot answer runs the cold way instead.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from coursekit import settings
from coursekit.errors import UserError

from .runtime.wire import Channel, one_thread_each, pair

if TYPE_CHECKING:  # the client imports as little as it can: these load where they are used
    from .launch import WorkerSource
    from .limits import Limits, WorkerHandle

PACKAGE_DIR = Path(__file__).resolve().parent
PACKAGE_PARENT = PACKAGE_DIR.parent
START_WAIT_S = 15.0  # for a new helper to listen
READY_WAIT_S = 180.0  # for its zygotes to be warm (torch imports on a busy machine)
MAX_LINE = 64 << 20
MAX_ZYGOTES = 2  # checks at once, each with a warm worker
RPC_WAIT_S = 90.0  # for the helper to answer a trusted process (start it, finish it ...)
MAX_FOLDER_BYTES = 70  # a socket's path holds at most 104 bytes (macOS; 108 on Linux)


class HelperUnavailable(Exception):
    """No helper can serve this check; ``check`` runs the cold way."""


# --- where: one socket per interpreter and copy of the course, in a private folder ---------

def private_dir() -> Path:
    """``$XDG_RUNTIME_DIR/attention-course`` (or ``<tmp>/attention-course-<uid>``, or
    ``/tmp/attention-course-<uid>`` where the temporary folder's path is too long for a
    socket): made 0700 here, and refused unless it is a real folder of this user that no
    one else may enter."""
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    candidates = [Path(runtime) / "attention-course"] if (
        runtime and os.path.isdir(runtime) and _private(runtime)) else []
    candidates += [Path(tempfile.gettempdir()) / f"attention-course-{os.getuid()}",
                   Path("/tmp") / f"attention-course-{os.getuid()}"]
    folder = next((c for c in candidates if len(os.fsencode(c)) <= MAX_FOLDER_BYTES), None)
    if folder is None:
        raise HelperUnavailable("no folder with a path short enough for a socket")
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700)
    if not _private(folder):
        raise HelperUnavailable(f"{folder} is not a private folder of this user")
    return folder


def _private(path: str | Path) -> bool:
    st = os.lstat(path)
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


def instance_key() -> str:
    """Which helper serves this process: its interpreter, its environment (a venv's prefix;
    venvs of one interpreter share its real path) and its copy of the course."""
    ident = f"{os.path.realpath(sys.executable)}\0{sys.prefix}\0{sys.version}\0{PACKAGE_PARENT}"
    return hashlib.sha256(ident.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Paths:
    socket: Path
    lock: Path
    log: Path


def paths() -> Paths:
    folder, key = private_dir(), instance_key()
    return Paths(folder / f"check-{key}.sock", folder / f"check-{key}.lock",
                 folder / f"check-{key}.log")


def fingerprint() -> str:
    """The code a helper runs (the grader's and coursekit's files, by size and time): a
    helper started before an edit retires, and the next check starts a new one."""
    digest = hashlib.sha256()
    for root in (PACKAGE_DIR, PACKAGE_PARENT / "coursekit"):
        for path in sorted(root.rglob("*")):
            if path.suffix in (".py", ".j2", ".ini", ".json") and "__pycache__" not in path.parts:
                with contextlib.suppress(OSError):
                    st = path.stat()
                    digest.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:24]


def course_env() -> dict[str, str]:
    """The course's settings of this process (``COURSE_*``), which a check must see."""
    return {k: v for k, v in os.environ.items() if k.startswith("COURSE_")}


# --- the client: ``grader check`` --------------------------------------------------------

@dataclass
class Answer:
    """What ``grader check`` prints and returns, as the helper's trusted process made it."""

    code: int
    stdout: str
    stderr: str

    def emit(self) -> int:
        sys.stdout.write(self.stdout)
        sys.stdout.flush()
        sys.stderr.write(self.stderr)
        sys.stderr.flush()
        return self.code


def check(argv: list[str], color: bool, timeout_s: float) -> Answer | None:
    """Run ``grader check argv`` in the helper, starting it if none runs; None when no
    helper can answer (then the caller checks the cold way)."""
    minutes = settings.check_helper_minutes()
    if minutes is None:
        return None
    try:
        where = paths()
        request = {"op": "check", "argv": list(argv), "cwd": os.getcwd(), "env": course_env(),
                   "color": bool(color), "fingerprint": fingerprint()}
        for _ in range(2):  # a second time after a helper retired (older code)
            conn = _connect(where.socket) or _start(where, minutes)
            with contextlib.closing(conn):
                reply = _ask(conn, request, timeout_s)
            if reply.get("stale"):
                continue
            if "error" in reply:
                raise HelperUnavailable(str(reply["error"]))
            return Answer(int(reply["code"]), str(reply["stdout"]), str(reply["stderr"]))
        raise HelperUnavailable("the helper retired twice")
    except (OSError, ValueError, KeyError, TypeError, HelperUnavailable) as exc:
        _note(f"check without the helper: {type(exc).__name__}: {exc}")
    return None


class HelperError(UserError):
    """``grader helper status|stop`` could not ask the helper (said as it is, exit 2)."""


def request(op: str) -> dict[str, Any] | None:
    """``status`` or ``stop`` of this user's helper for this course (None: none runs)."""
    try:
        where = paths()
        conn = _connect(where.socket)
        if conn is None:
            return None
        with contextlib.closing(conn):
            return _ask(conn, {"op": op}, 30.0)
    except (OSError, ValueError, HelperUnavailable) as exc:
        raise HelperError(str(exc)) from exc


def _note(text: str) -> None:
    """A line in the helper's log (never on the check's own output)."""
    with contextlib.suppress(OSError, HelperUnavailable):
        with open(paths().log, "a", encoding="utf-8") as log:
            log.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} [client {os.getpid()}] {text}\n")


def _connect(path: Path) -> socket.socket | None:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(path))
    except (FileNotFoundError, ConnectionRefusedError):
        conn.close()
        return None
    return conn


def _start(where: Paths, minutes: float) -> socket.socket:
    """Start a helper, detached from this process, and connect to it."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(PACKAGE_PARENT), os.environ.get("PYTHONPATH", "")) if p))
    with open(where.log, "a", encoding="utf-8") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "grader.helper", "serve", "--idle-minutes", f"{minutes:g}"],
            cwd=PACKAGE_PARENT, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            start_new_session=True, close_fds=True)
    deadline = time.monotonic() + START_WAIT_S
    while time.monotonic() < deadline:
        conn = _connect(where.socket)
        if conn is not None:
            return conn
        if proc.poll() not in (None, 0):
            raise HelperUnavailable(f"the helper stopped at once (see {where.log})")
        time.sleep(0.02)
    raise HelperUnavailable(f"no helper answered within {START_WAIT_S:g} s (see {where.log})")


def _ask(conn: socket.socket, message: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    conn.settimeout(timeout_s)
    conn.sendall(json.dumps(message).encode() + b"\n")
    data = bytearray()
    while not data.endswith(b"\n"):
        chunk = conn.recv(1 << 16)
        if not chunk:
            raise HelperUnavailable("the helper closed the connection without an answer")
        data += chunk
        if len(data) > MAX_LINE:
            raise HelperUnavailable("the helper's answer is too long")
    reply = json.loads(data)
    if not isinstance(reply, dict):
        raise HelperUnavailable("malformed answer")
    return reply


# --- the trusted zygote and the trusted process of one check -----------------------------

def _warm_up() -> None:
    """What every check's trusted side imports, imported once. Nothing runs a check here."""
    from . import (  # noqa: F401
        cli,  # noqa: F401 - the command a check runs
        engine,
        launch,
        remote,
        results,
        runner,
    )
    from .runtime import target  # noqa: F401 - backward(), values on the trusted side

    for name in ("torch.fx.experimental.symbolic_shapes", "torch._dynamo"):  # see DEFAULT_PRELOAD
        with contextlib.suppress(ImportError):
            __import__(name)
    for lesson in engine.known_lessons():
        with contextlib.suppress(Exception):
            runner.collect(lesson)  # imports the hidden tests' module (and torch)


def _trusted_zygote(ctrl: Channel) -> None:
    """Fork one trusted process per request; never grade anything here."""
    one_thread_each()
    try:
        _warm_up()
    except Exception:  # noqa: BLE001 - logged; each check imports what it lacks
        traceback.print_exc()
    ctrl.send({"op": "ready"})
    while True:
        try:
            message, fds = ctrl.recv(timeout=1.0)
        except TimeoutError:
            _reap()
            continue
        if message is None:
            return
        pid = os.fork()
        if pid == 0:
            ctrl.sock.close()
            _trusted_process(message["request"], fds)
            os._exit(0)
        for fd in fds:
            os.close(fd)
        ctrl.send({"op": "forked", "pid": pid})
        _reap()


def _reap() -> None:
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


def _trusted_process(req: dict[str, Any], fds: list[int]) -> None:
    """Run ``grader check`` for one client, exactly as its own process would have."""
    client = socket.socket(fileno=fds[0])
    rpc = Channel(socket.socket(fileno=fds[1]))
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
        signal.signal(signum, signal.SIG_DFL)
    answer = {"code": 1, "stdout": "", "stderr": "grader: the check helper failed\n"}
    try:
        _fresh_state(req)
        answer = _run_cli(req, rpc)
    except BaseException:  # noqa: BLE001 - the client checks the cold way
        answer = {"error": traceback.format_exc(limit=5)}
        traceback.print_exc(file=sys.__stderr__)
    finally:
        with contextlib.suppress(OSError):
            client.sendall(json.dumps(answer).encode() + b"\n")
            client.close()


def _fresh_state(req: dict[str, Any]) -> None:
    """The client's course settings and folder; random states of a new process."""
    for key in [k for k in os.environ if k.startswith("COURSE_")]:
        del os.environ[key]
    os.environ.update({str(k): str(v) for k, v in dict(req.get("env", {})).items()
                       if str(k).startswith("COURSE_")})
    os.chdir(str(req["cwd"]))
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed()
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.seed()


def _run_cli(req: dict[str, Any], rpc: Channel) -> dict[str, Any]:
    from . import cli, launch

    argv = [str(a) for a in req["argv"]]
    if not argv or argv[0] != "check":
        return {"error": "the helper only runs `check`"}
    launch.SOURCE = lambda limits: HelperSource(rpc, req.get("sandbox"))
    cli.COLOR = bool(req.get("color"))
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        try:
            code = cli.main([*argv, "--no-helper"])
        except SystemExit as exc:  # argparse: usage on stderr
            code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
        finally:
            for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
                with contextlib.suppress(Exception):
                    if stream is not None:
                        stream.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
        texts = []
        for f in (out, err):
            f.seek(0)
            texts.append(f.read().decode("utf-8", "replace"))
    return {"code": int(code or 0), "stdout": texts[0], "stderr": texts[1]}


class HelperSource:
    """``grader.launch``'s worker source inside a trusted process: workers from the
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
        from . import timeline

        with timeline.span("worker"):
            from .sandbox.pool import RELEASE_MARGIN_S

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

    @property
    def timed_out(self) -> bool:
        if self._status is not None:
            return self._timed_out
        return bool(self.source.call({"op": "timed_out", "id": self.id})[0]["value"])

    def output_excerpt(self, max_chars: int = 2000) -> str:
        return str(self.source.call({"op": "excerpt", "id": self.id,
                                     "max_chars": int(max_chars)})[0]["text"])


# --- the helper --------------------------------------------------------------------------

class _TrustedZygote:
    """The helper's handle on its trusted zygote (forked before any thread starts)."""

    def __init__(self, close_in_child: list[socket.socket]):
        ours, theirs = pair()
        pid = os.fork()
        if pid == 0:
            for sock in [ours, *close_in_child]:
                sock.close()
            try:
                _trusted_zygote(Channel(theirs))
            finally:
                os._exit(0)
        theirs.close()
        self.pid = pid
        self.ctrl = Channel(ours)
        self._ready = False
        self._lock = threading.Lock()

    def fork(self, req: dict[str, Any], fds: list[int], timeout: float) -> int:
        """A trusted process for ``req``, handed ``fds`` (the client, its worker channel)."""
        with self._lock:
            if not self._ready:
                message, _ = self.ctrl.recv(timeout=timeout)
                if message is None or message.get("op") != "ready":
                    raise HelperUnavailable("the trusted zygote did not start")
                self._ready = True
            self.ctrl.send({"op": "fork", "request": req}, fds)
            message, _ = self.ctrl.recv(timeout=30.0)
        if message is None or message.get("op") != "forked":
            raise HelperUnavailable("the trusted zygote did not fork")
        return int(message["pid"])

    def alive(self) -> bool:
        try:
            return os.waitpid(self.pid, os.WNOHANG)[0] == 0
        except ChildProcessError:
            return False

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.ctrl.sock.close()
        deadline = time.monotonic() + 5
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)


def _log(text: str) -> None:
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} [helper {os.getpid()}] {text}", file=sys.stderr,
          flush=True)


class Helper:
    """The helper process: listens, forks a trusted process per check, lends it workers."""

    def __init__(self, where: Paths, idle_s: float):
        self.where = where
        self.idle_s = idle_s
        self.fingerprint = fingerprint()
        self.listener, self.inode = _listen(where)
        self.trusted = _TrustedZygote(close_in_child=[self.listener])
        self.source: Any = None
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
        _log(f"listening on {self.where.socket}; stops after {self.idle_s / 60:g} idle minutes")
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
        _log(f"stopped after {self.served} check(s)")

    def stop(self, why: str) -> None:
        if self.stopping.is_set():
            return
        _log(f"stopping: {why}")
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
        from .launch import LocalSource, course_files
        from .limits import DEFAULT_LIMITS
        from .sandbox import SandboxPool, default_worker_files
        from .sandbox.pool import DEFAULT_PRELOAD

        try:
            pool = SandboxPool(jobs=1, limits=DEFAULT_LIMITS, isolation="auto",
                               preload=DEFAULT_PRELOAD,
                               worker_files={**default_worker_files(), **course_files()})
            pool.open()
            self.source = _PoolSource(pool)
            self.protections = pool.protections
        except Exception as exc:  # noqa: BLE001 - plain processes, as a cold check would
            _log(f"the sandbox could not start ({exc}); workers are plain processes")
            self.source = LocalSource((str(exc).splitlines() or [type(exc).__name__])[0])
        self.ready.set()
        _log("ready")

    # -- one connection ---------------------------------------------------------------------
    def _handle(self, conn: socket.socket) -> None:
        try:
            if not _same_user(conn):
                return
            message = _read_line(conn, 10.0)
            op = message.get("op")
            if op == "status":
                _write_line(conn, self._status())
            elif op == "stop":
                _write_line(conn, {"ok": True})
                self.stop("asked to")
            elif op == "check":
                if message.get("fingerprint") != self.fingerprint:
                    self.stop("its code changed on disk")  # first: the next connect is a new one
                    _write_line(conn, {"stale": True})
                    return
                with self._busy():
                    self._check(conn, message)
        except Exception as exc:  # noqa: BLE001 - this connection only
            _log(f"connection failed: {type(exc).__name__}: {exc}")
            with contextlib.suppress(OSError):
                _write_line(conn, {"error": f"{type(exc).__name__}: {exc}"})
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
        ours, theirs = pair()
        with contextlib.closing(ours):
            try:
                sandbox = {"missing": self.source.missing,
                           "unavailable": self.source.unavailable}  # for its stderr note
                self.trusted.fork(dict(message, sandbox=sandbox),
                                  [conn.fileno(), theirs.fileno()], READY_WAIT_S)
            finally:
                theirs.close()
            _lend_workers(Channel(ours), self.source)


class _PoolSource:
    """Workers from the helper's pool; a second zygote starts when the first is busy."""

    def __init__(self, pool: Any):
        self.pool = pool
        self.missing = dict(pool.plan.missing)
        self.unavailable = ""

    def start(self, limits: Any, wait_s: float | None = None) -> Any:
        if self.pool.busy():
            threading.Thread(target=self.pool.grow, args=(MAX_ZYGOTES,), daemon=True).start()
        return self.pool.start(limits, wait_s=wait_s)

    def close(self) -> None:
        self.pool.close()


def _lend_workers(rpc: Channel, source: WorkerSource) -> None:
    """Serve one trusted process's requests for workers until it closes the channel; then
    stop every worker it left running."""
    from .limits import DEFAULT_LIMITS, Limits
    from .sandbox.pool import RELEASE_MARGIN_S

    workers: dict[int, WorkerHandle] = {}
    finished: dict[int, str] = {}
    try:
        while True:
            walls = [w.limits.wall_s for w in workers.values()]
            idle_s = max([DEFAULT_LIMITS.wall_s, *walls]) + RELEASE_MARGIN_S
            try:
                message, fds = rpc.recv(timeout=idle_s)
            except TimeoutError:
                _log(f"a check's trusted process sent nothing for {idle_s:g} s: its workers "
                     "are stopped")
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
               finished: dict[int, str], source: WorkerSource, limits_type: type[Limits],
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
    if op == "timed_out":
        return {"ok": True, "value": worker.timed_out}
    if op == "excerpt":
        return {"ok": True, "text": worker.output_excerpt(int(message.get("max_chars", 2000)))}
    return {"ok": False, "error": f"unknown request {op!r}"}


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _listen(where: Paths) -> tuple[socket.socket, int]:
    """Bind the helper's socket, unless a live helper has it (then HelperUnavailable)."""
    with _locked(where.lock):
        alive = _connect(where.socket)
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


def _read_line(conn: socket.socket, timeout: float) -> dict[str, Any]:
    conn.settimeout(timeout)
    data = bytearray()
    while not data.endswith(b"\n"):
        chunk = conn.recv(1 << 16)
        if not chunk or len(data) > MAX_LINE:
            raise ValueError("no request")
        data += chunk
    message = json.loads(data)
    if not isinstance(message, dict):
        raise ValueError("malformed request")
    return message


def _write_line(conn: socket.socket, message: dict[str, Any]) -> None:
    conn.sendall(json.dumps(message).encode() + b"\n")


def serve(idle_minutes: float) -> int:
    """``python -m grader.helper serve``: run a helper until it has been idle that long."""
    one_thread_each()
    try:
        helper = Helper(paths(), idle_minutes * 60)
    except HelperUnavailable as exc:
        _log(f"not started: {exc}")
        return 0
    signal.signal(signal.SIGTERM, lambda *_: helper.stop("SIGTERM"))
    helper.run()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.helper", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("serve", help="run a helper (a check starts one when needed)")
    run.add_argument("--idle-minutes", type=float, default=settings.CHECK_HELPER_DEFAULT_MINUTES)
    args = parser.parse_args(argv)
    return serve(args.idle_minutes)


if __name__ == "__main__":
    sys.exit(main())
