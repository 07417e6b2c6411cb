"""Warm parent ("zygote") of the sandboxed workers; runs inside the sandbox.

Started once per pool slot (``python -I -B _zygote.py CONFIG_JSON``). It imports the
preloaded modules (numpy, torch) without running any multithreaded operation, then
waits on its control socket (SOCK_SEQPACKET, JSON lines, file descriptors passed
with SCM_RIGHTS) and forks one confined child per submission. Standard library only
(plus ``pyseccomp``): nothing from ``grader`` is importable here but the worker code.

Control messages, trusted side -> zygote: ``{"op": "spawn", "id", "uid", "gid",
"scratch", "tmpfs", "limits", ...}`` with fds ``[socket, output]``. Zygote -> trusted
side: ``{"op": "ready"}`` once, ``{"op": "spawned", "id", "pid"}`` and ``{"op": "exit",
"id", "status"}`` (the raw wait status).
"""

from __future__ import annotations

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


def _handshake(sock: socket.socket) -> bytes:
    """Tell the trusted side our pid (translated by the kernel), wait until it has put us
    in our cgroup, then receive the notebook bytes."""
    sock.settimeout(30)
    if hasattr(socket, "SCM_CREDENTIALS"):
        creds = struct.pack("3i", os.getpid(), os.getuid(), os.getgid())
        sock.sendmsg([b"h"], [(socket.SOL_SOCKET, socket.SCM_CREDENTIALS, creds)])
    else:  # no pid namespace there: the zygote's view of our pid is the grader's
        sock.sendall(b"h")
    header = _recv_exact(sock, 9)
    if header[:1] != b"g":
        raise RuntimeError("no go-ahead from the grading process")
    return _recv_exact(sock, struct.unpack("!Q", header[1:])[0])


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            raise EOFError("grading process went away")
        buf += chunk
    return bytes(buf)


def _confine(req: dict[str, Any], flt: Any) -> str:
    import _confine as cf

    uid, gid, scratch = req["uid"], req["gid"], req["scratch"]
    limits = req["limits"]
    if req["tmpfs"]:
        cf.private_tmpfs(scratch, limits["scratch_bytes"], uid, gid)
    else:
        os.makedirs(scratch, mode=0o700, exist_ok=True)
        if req["drop_uid"]:
            os.chown(scratch, uid, gid)
    if req["rlimits"]:
        cf.set_rlimits(limits)
    if req["drop_uid"]:
        cf.drop_privileges(uid, gid)
        if not cf.capabilities_all_zero():
            raise RuntimeError("capabilities still present after the privilege drop")
    if req["no_new_privs"]:
        cf.set_no_new_privs()
    if flt is not None:
        flt.load()
    return scratch


def _enter_scratch(scratch: str, notebook: bytes) -> None:
    import tempfile

    os.chdir(scratch)
    for var in ("HOME", "TMPDIR", "PWD"):
        os.environ[var] = scratch
    tempfile.tempdir = None
    if notebook:
        path = os.path.join(scratch, "submission.ipynb")
        with open(path, "wb") as fh:
            fh.write(notebook)
        os.environ["GRADER_NOTEBOOK"] = path


def _child(
    ctrl: socket.socket, req: dict[str, Any], fds: list[int], cfg: dict[str, Any], flt: Any
) -> None:
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    ctrl.detach()
    sock = _redirect_fds(fds[0], fds[1])
    sys.stdout.reconfigure(line_buffering=True)  # a killed worker's last lines still show
    try:
        notebook = _handshake(sock)
        scratch = _confine(req, flt)
        _enter_scratch(scratch, notebook)
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(1)
        module, _, func = cfg["entry"].partition(":")
        entry = getattr(importlib.import_module(module), func)
        sock.settimeout(None)
        sock.sendall(b"r")
    except BaseException as exc:  # noqa: BLE001 - report, then die
        traceback.print_exc()
        try:
            sock.sendall(b"e" + f"{type(exc).__name__}: {exc}".encode()[:4000])
        finally:
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


def _spawn(
    ctrl: socket.socket,
    req: dict[str, Any],
    fds: list[int],
    cfg: dict[str, Any],
    flt: Any,
    children: dict[int, int],
) -> None:
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
    children[pid] = req["id"]
    _send(ctrl, op="spawned", id=req["id"], pid=pid)


def _reap(ctrl: socket.socket, children: dict[int, int]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        if pid in children:
            _send(ctrl, op="exit", id=children.pop(pid), status=status)


def _serve(ctrl: socket.socket, cfg: dict[str, Any], flt: Any) -> None:
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    os.set_blocking(wake_r, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: dict[int, int] = {}
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
            _reap(ctrl, children)
        if ctrl in readable:
            data, fds, _, _ = socket.recv_fds(ctrl, 1 << 16, 4)
            if not data:
                return
            req = json.loads(data)
            if req.get("op") == "spawn" and len(fds) == 2:
                _spawn(ctrl, req, fds, cfg, flt, children)
            else:
                for fd in fds:
                    os.close(fd)


def main() -> None:
    cfg = json.loads(sys.argv[1])
    sys.path[:0] = cfg["code_paths"]
    ctrl = socket.socket(fileno=cfg["ctrl_fd"])
    _import_preloads(cfg)
    flt = None
    if cfg["seccomp"]:
        import _confine

        flt = _confine.build_seccomp_filter()
    _serve(ctrl, cfg, flt)


if __name__ == "__main__":
    main()
