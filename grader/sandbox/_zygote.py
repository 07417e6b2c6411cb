"""Warm parent ("zygote") of the sandboxed workers; runs inside the sandbox.

Started once per pool slot (``python -I -B _zygote.py CONFIG_JSON``). It imports the
preloaded modules (numpy, torch) without running any multithreaded operation, then
waits on its control socket (SOCK_SEQPACKET, JSON lines, file descriptors passed
with SCM_RIGHTS) and forks one confined worker per submission. Standard library only
(plus ``pyseccomp``): nothing from ``grader`` is importable here but the worker code.

A zygote serves one submission at a time. Its process tree, per ``cfg["mode"]``:

- ``"ns"``: zygote -> S (unshares a pid namespace, waits) -> P1 (process 1 of that
  namespace: a fresh mount and IPC namespace, a tmpfs scratch, its own ``/proc``; reaps
  orphans) -> W (the worker). When W ends, P1 ends, and the kernel kills whatever else
  is left in the namespace before S is reaped: nothing of the submission outlives it.
- ``"plain"`` (no namespaces allowed here): zygote -> W. The zygote is a child subreaper
  (Linux): once W ends it kills every orphan W left behind before reporting the exit.

Control messages, trusted side -> zygote: ``{"op": "spawn", "id", ...}`` with fds
``[socket, output]``, ``{"op": "kill", "id"}``. Zygote -> trusted side: ``{"op":
"ready"}`` once, ``{"op": "spawned", "id", "pid"}`` and ``{"op": "exit", "id",
"status"}`` (a wait status: W's own, as P1 passed it on).
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib
import json
import os
import select
import signal
import socket
import struct
import sys
import traceback
from typing import Any

_SANDBOX_FD = 3
_WAKE_FDS: list[int] = []  # the zygote's signal wake-up pipe, closed in each child


def _send(ctrl: socket.socket, **msg: Any) -> None:
    ctrl.sendall(json.dumps(msg).encode() + b"\n")


def _import_preloads(cfg: dict[str, Any]) -> None:
    """Import what every worker needs once, here, so each fork starts warm. A module that
    is not installed is skipped (the worker imports it itself if it must)."""
    for name in cfg["preload"]:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
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


def _confine(req: dict[str, Any], flt: Any) -> None:
    import _confine as cf

    uid, gid, scratch = req["uid"], req["gid"], req["scratch"]
    if not req["tmpfs"]:
        os.makedirs(scratch, mode=0o700, exist_ok=True)
        if req["drop_uid"]:
            os.chown(scratch, uid, gid)
    if req["rlimits"]:
        cf.set_rlimits(req["rlimits"], req["nproc_base"])
    if req["drop_uid"]:
        cf.drop_privileges(uid, gid)
    elif req["drop_caps"]:
        cf.drop_capabilities()
    if (req["drop_uid"] or req["drop_caps"]) and not cf.capabilities_all_zero():
        raise RuntimeError("capabilities still present after the privilege drop")
    if req["no_new_privs"]:
        cf.set_no_new_privs()
    if flt is not None:
        flt.load()


def _enter_scratch(scratch: str) -> None:
    import tempfile

    os.chdir(scratch)
    for var in ("HOME", "TMPDIR", "PWD"):
        os.environ[var] = scratch
    tempfile.tempdir = None


def _worker(req: dict[str, Any], fds: list[int], cfg: dict[str, Any], flt: Any) -> None:
    """W: confine ourselves, then serve the grader until it is done with us."""
    sock = _redirect_fds(fds[0], fds[1])
    sys.stdout.reconfigure(line_buffering=True)  # a killed worker's last lines still show
    try:
        _handshake(sock)
        _confine(req, flt)
        _enter_scratch(req["scratch"])
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(1)
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


def _exit_code(status: int) -> int:
    """W's wait status as an exit code P1 and S can pass on: 128 + signal, or the code."""
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return min(os.waitstatus_to_exitcode(status), 127)


def _fork_after(setup: Any, fds: list[int], child: Any) -> int:
    """Run ``setup()``, then fork ``child()``; our copies of ``fds`` are closed. A failed
    setup is told to the grader over the worker's socket, and we end."""
    try:
        setup()
    except BaseException as exc:  # noqa: BLE001 - reported to the grader
        _report_failure(socket.socket(fileno=os.dup(fds[0])), exc)
        os._exit(72)
    pid = os.fork()
    if pid == 0:
        child()
        os._exit(70)
    for fd in fds:
        os.close(fd)
    return pid


def _namespace_init(req: dict[str, Any], fds: list[int], cfg: dict[str, Any], flt: Any) -> None:
    """P1, process 1 of the submission's pid namespace: set up its mounts, start W, reap
    orphans until W ends, then end (and with us every process left in the namespace)."""
    import _confine as cf

    def setup() -> None:
        cf.set_parent_death_signal()
        cf.private_mounts(req["scratch"], req["scratch_bytes"], req["uid"], req["gid"], True,
                          cfg["keep_under_scratch"])
        if req["new_net"]:
            cf.unshare_network()

    worker = _fork_after(setup, fds, lambda: _worker(req, fds, cfg, flt))
    with contextlib.suppress(OSError):
        cf.drop_capabilities()
        cf.set_no_new_privs()
        cf.set_not_dumpable()
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            os._exit(70)
        if pid == worker:
            os._exit(_exit_code(status))


def _child(
    ctrl: socket.socket, req: dict[str, Any], fds: list[int], cfg: dict[str, Any], flt: Any
) -> None:
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    os.close(ctrl.detach())
    for fd in _WAKE_FDS:
        os.close(fd)
    if cfg["mode"] != "ns":
        if cfg["parent_death"]:
            import _confine as cf

            cf.set_parent_death_signal()
        _worker(req, fds, cfg, flt)
    import _confine as cf

    def setup() -> None:  # S: our next child is process 1 of a new pid namespace
        cf.set_parent_death_signal()
        cf.unshare_pid()

    init = _fork_after(setup, fds, lambda: _namespace_init(req, fds, cfg, flt))
    _, status = os.waitpid(init, 0)  # ...and we pass on how it ended
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF if os.WIFEXITED(status) else 128 + 9)



def _spawn(
    ctrl: socket.socket,
    req: dict[str, Any],
    fds: list[int],
    cfg: dict[str, Any],
    flt: Any,
    children: dict[int, tuple[int, str | None]],
) -> None:
    req["nproc_base"] = 0 if req["drop_uid"] else _own_processes() + 2
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        try:
            _child(ctrl, req, fds, cfg, flt)
        finally:
            os._exit(70)
    for fd in fds:
        os.close(fd)
    # a scratch folder inside the zygote's own sandbox is removed once the submission ends
    leftover = req["scratch"] if cfg["mode"] != "ns" and cfg["in_bwrap"] else None
    children[pid] = (req["id"], leftover)
    _send(ctrl, op="spawned", id=req["id"], pid=pid)


def _worker_status(status: int, mode: str) -> int:
    """The wait status to report: W's own (decoded from what S passed on, in "ns" mode)."""
    if mode != "ns" or not os.WIFEXITED(status):
        return status
    code = os.WEXITSTATUS(status)
    return code - 128 if code > 128 else code << 8


def _kill_orphans() -> None:
    """SIGKILL and reap every child we have (W's orphans, adopted by us as subreaper)."""
    while True:
        try:
            with open(f"/proc/self/task/{os.getpid()}/children") as fh:
                pids = [int(p) for p in fh.read().split()]
        except OSError:
            return
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for pid in pids:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def _reap(ctrl: socket.socket, children: dict[int, tuple[int, str | None]],
          cfg: dict[str, Any]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid in children:
            sub, leftover = children.pop(pid)
            if cfg["subreaper"]:
                _kill_orphans()
            if leftover:
                import shutil

                shutil.rmtree(leftover, ignore_errors=True)
            _send(ctrl, op="exit", id=sub, status=_worker_status(status, cfg["mode"]))


def _kill(req: dict[str, Any], children: dict[int, tuple[int, str | None]]) -> None:
    for pid, (sub, _) in children.items():
        if sub == req.get("id"):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)  # S: its namespace follows (parent-death signal)
                os.killpg(pid, signal.SIGKILL)


def _serve(ctrl: socket.socket, cfg: dict[str, Any], flt: Any) -> None:
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    os.set_blocking(wake_r, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    _WAKE_FDS[:] = [wake_r, wake_w]
    children: dict[int, tuple[int, str | None]] = {}
    threads = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else -1
    _send(ctrl, op="ready", pid=os.getpid(), threads=threads)
    while True:
        readable, _, _ = select.select([ctrl, wake_r], [], [])
        if wake_r in readable:
            while True:
                try:
                    if not os.read(wake_r, 4096):
                        break
                except BlockingIOError:
                    break
            _reap(ctrl, children, cfg)
        if ctrl in readable:
            data, fds, _, _ = socket.recv_fds(ctrl, 1 << 16, 4)
            if not data:  # the pool closed: no finalization (seconds, with torch loaded)
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(0)
            req = json.loads(data)
            if req.get("op") == "spawn" and len(fds) == 2:
                _spawn(ctrl, req, fds, cfg, flt, children)
                continue
            for fd in fds:
                os.close(fd)
            if req.get("op") == "kill":
                _kill(req, children)


def main() -> None:
    cfg = json.loads(sys.argv[1])
    sys.path[:0] = cfg["code_paths"]
    sys.path += [p for p in cfg["python_paths"] if p not in sys.path]  # e.g. PYTHONPATH's
    ctrl = socket.socket(fileno=cfg["ctrl_fd"])
    import _confine

    if cfg["parent_death"]:
        _confine.set_parent_death_signal()
    if cfg["subreaper"]:
        _confine.set_child_subreaper()
    _import_preloads(cfg)
    flt = _confine.build_seccomp_filter() if cfg["seccomp"] else None
    _serve(ctrl, cfg, flt)


if __name__ == "__main__":
    main()
