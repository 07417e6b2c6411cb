"""Warm parent ("zygote") of the sandboxed workers; runs inside the sandbox.

Started once per pool (``python -I -B _zygote.py CONFIG_JSON``), then cloned. It imports the
preloaded modules (numpy, torch) without running any multithreaded operation, then
waits on its control socket (``wire``: JSON lines, file descriptors passed
with SCM_RIGHTS) and forks one confined worker per submission. Standard library only
(plus ``pyseccomp``): nothing from ``grader`` is importable here but the worker code, and
the pool's copies of ``_confine.py``, ``grader/runtime/wire.py`` and
``grader/runtime/forkserver.py`` beside this file: a fork server built as the grader's others
are (its forks, their parent-death signal, the reaping of its children).

A zygote serves one submission at a time. More zygotes of a pool are *clones* of the first
(``{"op": "clone"}``): a fork that serves a control socket of its own, sharing the first
one's imported modules copy-on-write instead of importing them again (seconds of CPU, and
hundreds of MB, each). A clone ends with the zygote it came from, which in turn waits for
its clones before it exits. In ``"ns"`` mode the worker W is born in a pid
namespace of its own, whose process 1 is a ``sleep`` spawned just before it (W cannot
signal it; the zygote is out of W's sight): W sees no process but its own. W then enters
a mount and IPC namespace of its own, with a fresh tmpfs as scratch folder and on
``/dev/shm`` and its own ``/proc``. (Its parent, the zygote, is outside that namespace,
so ``os.getppid()`` reads 0 there.) When W ends, the zygote kills that process 1, and the
kernel kills whatever else is left in the namespace. ``"plain"`` mode (no namespaces
allowed here) uses a scratch folder on disk, and the zygote, a child subreaper, kills
whatever W left behind. Either way the exit is reported once nothing of W is left.

Its control channel is served by the grader's one serve loop (``forkserver.serve``); the
messages are the dataclasses below: trusted side -> zygote :class:`Spawn` (with fds
``[socket, output]``), :class:`Clone` (with fd ``[control socket]``: the clone says
:class:`Ready` there), :class:`Kill` (a worker or a clone); zygote -> trusted side
:class:`Ready` once, :class:`Spawned` per spawn, and :class:`Exit` (W's wait status) once
nothing of W is left.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib
import io
import json
import os
import signal
import socket
import struct
import sys
import traceback
from dataclasses import dataclass, field
from typing import Any, ClassVar

_SANDBOX_FD = 3
_WAKE_FDS: list[int] = []  # the zygote's signal wake-up pipe, closed in each child
_OWN_PID_NS = [-1]  # "ns" mode: our own pid namespace, to return to after each submission
_ZYGOTE_PID = [-1]
_SLEEP = ""  # "ns" mode: the program each submission's process 1 runs
_CLONES: dict[int, int] = {}  # pid -> id of the zygotes forked from us (see _clone)


@dataclass
class Spawn:
    """One submission's worker: its id, and how it is confined."""

    fds: ClassVar[int] = 2  # its socket, its output pipe
    id: int
    uid: int
    gid: int
    scratch: str
    scratch_bytes: int
    tmpfs: bool
    drop_uid: bool
    drop_caps: bool
    no_new_privs: bool
    rlimits: dict[str, int] = field(default_factory=dict)
    warm: bool = False
    nproc_base: int = 0  # the zygote's count of its uid's processes


@dataclass
class Clone:
    fds: ClassVar[int] = 1  # the clone's control socket
    id: int


@dataclass
class Kill:
    id: int


@dataclass
class Ready:
    pid: int
    threads: int


@dataclass
class Spawned:
    id: int
    pid: int


@dataclass
class Exit:
    id: int
    status: int


def _wire() -> Any:
    """The pool's copy of ``grader/runtime/wire.py`` beside this file (on ``sys.path``
    once ``main`` has run)."""
    return importlib.import_module("wire")


def _forks() -> Any:
    """The pool's copy of ``grader/runtime/forkserver.py`` beside this file."""
    return importlib.import_module("forkserver")


def _import_preloads(cfg: dict[str, Any], key: str = "preload") -> None:
    """Import what every worker needs once, here, so each fork starts warm (``module:function``:
    then call the function). A module that is not installed is skipped (the worker imports
    it itself if it must), and so is a function that fails."""
    for name in cfg.get(key, ()):
        module, _, function = name.partition(":")
        try:
            loaded = importlib.import_module(module)
        except ImportError:
            continue
        if function:
            with contextlib.suppress(Exception):
                getattr(loaded, function)()
    if key != "preload":
        return
    module = cfg["entry"].partition(":")[0]
    try:
        importlib.import_module(module)
    except Exception:  # noqa: BLE001 - reported again by the child, with its traceback
        traceback.print_exc()


def _redirect_fds(sock_fd: int, out_fd: int) -> socket.socket:
    """stdin </dev/null, stdout/stderr -> output pipe, socket -> fd 3; close the rest."""
    high_sock = fcntl.fcntl(sock_fd, fcntl.F_DUPFD, 100)
    high_out = fcntl.fcntl(out_fd, fcntl.F_DUPFD, 100)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(high_out, 1)
    os.dup2(high_out, 2)
    os.dup2(high_sock, _SANDBOX_FD)
    os.closerange(_SANDBOX_FD + 1, 1 << 16)
    return socket.socket(fileno=_SANDBOX_FD)


def _handshake(sock: socket.socket) -> None:
    """Tell the trusted side our pid (translated by the kernel) and wait until it has put
    us in our cgroup."""
    sock.settimeout(30)
    if hasattr(socket, "SCM_CREDENTIALS"):
        creds = struct.pack("3i", os.getpid(), os.getuid(), os.getgid())
        sock.sendmsg([b"h"], [(socket.SOL_SOCKET, socket.SCM_CREDENTIALS, creds)])
    else:  # no pid namespace there: the zygote's view of our pid is the grader's
        sock.sendall(b"h")
    if sock.recv(1) != b"g":
        raise RuntimeError("no go-ahead from the grading process")


def _own_processes() -> int:
    """Processes of our uid that we can see: what RLIMIT_NPROC counts already."""
    if not os.path.isdir("/proc/self"):
        return 0
    uid, count = os.getuid(), 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            with contextlib.suppress(OSError):
                count += os.stat(f"/proc/{name}").st_uid == uid
    return count


def _confine(req: Spawn, flt: Any) -> None:
    # the code folder's top level in the sandbox: grader/sandbox/_confine.py, copied beside us
    import _confine as cf  # type: ignore[import-not-found]

    uid, gid, scratch = req.uid, req.gid, req.scratch
    if not req.tmpfs:
        os.makedirs(scratch, mode=0o700, exist_ok=True)
        if req.drop_uid:
            os.chown(scratch, uid, gid)
    if req.rlimits:  # --memory is the submission's own, beside what the fork inherited
        cf.set_rlimits(req.rlimits, req.nproc_base, memory_base=cf.data_in_use())
    if req.drop_uid:
        cf.drop_privileges(uid, gid)
    elif req.drop_caps:
        cf.drop_capabilities()
    if (req.drop_uid or req.drop_caps) and not cf.capabilities_all_zero():
        raise RuntimeError("capabilities still present after the privilege drop")
    if req.no_new_privs:
        cf.set_no_new_privs()
    if flt is not None:
        flt.load()


def _enter_scratch(scratch: str) -> None:
    import tempfile

    os.chdir(scratch)
    for var in ("HOME", "TMPDIR", "PWD"):
        os.environ[var] = scratch
    tempfile.tempdir = None


def _worker(req: Spawn, fds: list[int], cfg: dict[str, Any], flt: Any) -> None:
    """W: confine ourselves, then serve the grader until it is done with us."""
    sock = _redirect_fds(fds[0], fds[1])
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(line_buffering=True)  # a killed worker's last lines still show
    try:
        if cfg["mode"] == "ns":
            import _confine as cf

            cf.private_mounts(req.scratch, req.scratch_bytes, req.uid, req.gid,
                              cfg["keep_under_scratch"], new_proc=True)
            cf.set_dumpable()
        _handshake(sock)
        _confine(req, flt)
        _enter_scratch(req.scratch)
        _wire().one_torch_thread()
        if req.warm:  # a spare, waiting for its submission
            with contextlib.suppress(Exception):  # only ever a speed-up
                _wire().warm_up_torch()
        module, _, func = cfg["entry"].partition(":")
        entry = getattr(importlib.import_module(module), func)
        sock.settimeout(None)
        sock.sendall(b"r")
    except BaseException as exc:  # noqa: BLE001 - report, then die
        traceback.print_exc()
        _report_failure(sock, exc)
        os._exit(71)
    code = 0
    try:
        entry(sock)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - the worker's own failure
        traceback.print_exc()
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def _report_failure(sock: socket.socket, exc: BaseException) -> None:
    with contextlib.suppress(OSError):
        sock.sendall(b"e" + f"{type(exc).__name__}: {exc}".encode()[:4000])


def _fork(ctrl: socket.socket, cfg: dict[str, Any], **how: Any) -> int:
    """A child that holds neither our control socket nor our signal wake-up pipe, with
    SIGCHLD's default handler (``forkserver.fork_child``)."""
    return int(_forks().fork_child([ctrl, *_WAKE_FDS], default_signals=[signal.SIGCHLD],
                                   **how))


def _spawn(
    ctrl: socket.socket,
    req: Spawn,
    fds: list[int],
    cfg: dict[str, Any],
    flt: Any,
    children: dict[int, tuple[int, str | None, int]],
) -> Spawned:
    req.nproc_base = 0 if req.drop_uid else _own_processes() + 1
    sys.stdout.flush()
    sys.stderr.flush()
    init = 0
    if cfg["mode"] == "ns":
        import _confine as cf

        cf.unshare_pid()  # our next children are born in a new pid namespace...
        try:
            init = _spawn_init([*fds, ctrl.fileno(), *_WAKE_FDS])  # ...its process 1, then W
            pid = _fork(ctrl, cfg, new="session", dies_with_parent=cfg["parent_death"])
        except BaseException:
            if init:
                os.kill(init, signal.SIGKILL)
            raise
        finally:
            if os.getpid() == _ZYGOTE_PID[0]:
                cf.enter_pid_namespace(_OWN_PID_NS[0])  # the next submission's will be fresh
    else:
        pid = _fork(ctrl, cfg, new="session", dies_with_parent=cfg["parent_death"])
    if pid == 0:
        try:
            _worker(req, fds, cfg, flt)
        finally:
            os._exit(70)
    # a scratch folder inside the zygote's own sandbox is removed once the submission ends
    leftover = req.scratch if cfg["mode"] != "ns" and cfg["in_bwrap"] else None
    children[pid] = (req.id, leftover, init)
    return Spawned(req.id, pid)  # its descriptors are closed here once this returns


def _spawn_init(close: list[int]) -> int:
    """Process 1 of the submission's pid namespace: ``sleep infinity``, spawned without
    copying our memory (vfork). W cannot signal it (process 1 ignores what it has no
    handler for); when W ends we kill it, and the kernel then kills all that is left."""
    actions = [(os.POSIX_SPAWN_CLOSE, fd) for fd in close]
    if _SLEEP:
        return os.posix_spawn(_SLEEP, [_SLEEP, "infinity"], {}, file_actions=actions,
                              setsid=True)
    pid = _forks().fork_child(close)
    if pid == 0:
        while True:
            signal.pause()
    return int(pid)


def _children() -> list[int]:
    """Our children (any thread's: an orphan may be given to any of them), from /proc, but
    for our clones."""
    pids: list[int] = []
    for task in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError), open(f"/proc/self/task/{task}/children") as fh:
            pids += [int(p) for p in fh.read().split()]
    return [pid for pid in pids if pid not in _CLONES]


def _kill_orphans(timeout_s: float = 5.0) -> None:
    """SIGKILL and reap every child we have (W's orphans, adopted by us as subreaper)."""
    import time

    deadline = time.monotonic() + timeout_s
    while (pids := _children()) and time.monotonic() < deadline:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        for pid in pids:
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(pid, os.WNOHANG) == (0, 0):
                    time.sleep(0.001)  # not dead yet: the next round looks again


def _reap(channel: Any, children: dict[int, tuple[int, str | None, int]],
          cfg: dict[str, Any]) -> None:
    for pid, status in _forks().reaped():
        _CLONES.pop(pid, None)
        if pid in children:
            sub, leftover, init = children.pop(pid)
            if init:  # its namespace ends with its process 1: nothing of it is left after
                with contextlib.suppress(ProcessLookupError):
                    os.kill(init, signal.SIGKILL)
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(init, 0)
            if cfg["subreaper"] and cfg["mode"] != "ns":  # in "ns" mode W's namespace
                _kill_orphans()  # adopted them, and ended with its process 1, above
            if leftover:
                import shutil

                shutil.rmtree(leftover, ignore_errors=True)
            _forks().tell(channel, Exit(sub, status))


def _kill(req: Kill, children: dict[int, tuple[int, str | None, int]]) -> None:
    for pid, clone in _CLONES.items():
        if clone == req.id:  # its own pid namespace ends with it, and its workers
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    for pid, (sub, _, init) in children.items():
        if sub == req.id:
            if init:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(init, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                os.killpg(pid, signal.SIGKILL)


def _serve(ctrl: socket.socket, cfg: dict[str, Any], flt: Any, first: bool = False) -> None:
    channel = _wire().Channel(ctrl)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    os.set_blocking(wake_r, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    _WAKE_FDS[:] = [wake_r, wake_w]
    children: dict[int, tuple[int, str | None, int]] = {}

    def reap() -> None:  # SIGCHLD woke us
        with contextlib.suppress(BlockingIOError):
            while os.read(wake_r, 4096):
                pass
        _reap(channel, children, cfg)

    threads = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else -1
    _forks().tell(channel, Ready(os.getpid(), threads))
    if first:  # the pool's first request waits on these, not its ``ready`` (see _import_preloads)
        _import_preloads(cfg, "preload_late")
    _forks().serve(channel, {
        Spawn: lambda req, fds: _spawn(ctrl, req, fds, cfg, flt, children),
        Clone: lambda req, fds: _clone(ctrl, req, fds[0], cfg, flt),
        Kill: lambda req, fds: _kill(req, children),
    }, watch={wake_r: reap})
    _end(ctrl)  # the pool closed: no finalization (seconds, with torch loaded)


def _end(ctrl: socket.socket) -> None:
    """Exit, once our clones have ended: our end would end theirs (in "ns" mode they live
    in our pid namespace, and with bwrap in its), and each ends when the pool closes its
    control socket."""
    sys.stdout.flush()
    sys.stderr.flush()
    ctrl.close()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for pid in list(_CLONES):
        with contextlib.suppress(ChildProcessError, InterruptedError):
            os.waitpid(pid, 0)
    os._exit(0)


def _clone(ctrl: socket.socket, req: Clone, fd: int, cfg: dict[str, Any],
           flt: Any) -> None:
    """Fork a zygote that serves the control socket ``fd``: it has everything we imported
    (shared, copy-on-write) without importing it again. It dies with us; in "ns" mode it
    is process 1 of a pid namespace of its own, below ours, as we are below the one we
    were started in."""
    try:  # fd is closed here once this returns
        pid = _fork(ctrl, cfg, dies_with_parent=True)
    except OSError:  # the pool hears nothing on fd, and starts a zygote itself
        return
    if pid:
        _CLONES[pid] = req.id
        return
    try:
        _CLONES.clear()
        import _confine as cf

        _settle(cf, cfg, network=False)  # the network namespace is ours already
        _serve(socket.socket(fileno=fd), cfg, flt)
    except BaseException:  # noqa: BLE001 - the pool sees the socket close, and boots one
        traceback.print_exc()
    finally:
        os._exit(70)


def _settle(cf: Any, cfg: dict[str, Any], network: bool) -> None:
    """What makes this process a zygote, before it imports or serves anything."""
    if cfg["mode"] == "ns":
        _own_namespaces(cf, network=network)
    if cfg["subreaper"]:
        cf.set_child_subreaper()
    if sys.platform.startswith("linux"):
        cf.set_not_dumpable()  # no ptrace, no /proc peeking by a worker of our uid


def _own_namespaces(cf: Any, network: bool) -> None:
    """Become process 1 of a pid namespace of our own (owned by our user namespace, unlike
    bwrap's, so we may ``setns`` back to it after each submission's ``unshare``) and,
    without bwrap, of a network namespace of our own. Our parent waits and ends as we do."""
    import shutil

    if network:
        cf.unshare_network()
    cf.unshare_pid()
    pid = _forks().fork_child(dies_with_parent=True)
    if pid != 0:
        os._exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) & 0xFF)
    _OWN_PID_NS[0] = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    _ZYGOTE_PID[0] = os.getpid()
    global _SLEEP
    _SLEEP = shutil.which("sleep", path="/usr/bin:/bin") or ""


def main() -> None:
    cfg = json.loads(sys.argv[1])
    sys.path[:0] = cfg["code_paths"]
    sys.path += [p for p in cfg["python_paths"] if p not in sys.path]  # e.g. PYTHONPATH's
    ctrl = socket.socket(fileno=cfg["ctrl_fd"])
    import _confine

    if cfg["parent_death"]:
        _forks().die_with_parent()
    _settle(_confine, cfg, network=cfg["own_namespaces"])
    _import_preloads(cfg)
    flt = _confine.build_seccomp_filter() if cfg["seccomp"] else None
    _serve(ctrl, cfg, flt, first=True)


if __name__ == "__main__":
    main()
