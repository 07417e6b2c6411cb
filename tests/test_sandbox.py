"""The sandbox that runs each student's worker: every protection, shown by a hostile act.

The worker entry used here (``ENTRY``) runs whatever Python code the test sends over the
socket and answers with a JSON reply, so each test plays a hostile notebook.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import socket
import statistics
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.sandbox import (
    ALL_PROTECTIONS,
    Limits,
    SandboxPool,
    SandboxUnavailable,
    SandboxWorker,
    available_protections,
    default_worker_files,
    missing_reasons,
    select_protections,
)
from grader.sandbox import probe as probe_mod

REPO = Path(__file__).resolve().parents[1]

ENTRY = b"""
import json, struct

def _recv(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf

def serve(sock):
    while True:
        try:
            n = struct.unpack("!I", _recv(sock, 4))[0]
        except EOFError:
            return
        ns = {"sock": sock}
        try:
            exec(_recv(sock, n).decode(), ns)
            out = {"ok": True, "result": ns.get("result")}
        except Exception as exc:
            out = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        data = json.dumps(out, default=repr).encode()
        sock.sendall(struct.pack("!I", len(data)) + data)
"""
WORKER_FILES = {"sbx_test_entry.py": ENTRY}
ENTRY_NAME = "sbx_test_entry:serve"

FULL = not missing_reasons()
needs_full = pytest.mark.skipif(not FULL, reason=f"full isolation unavailable: {missing_reasons()}")


def send(worker: SandboxWorker, code: str) -> None:
    data = code.encode()
    worker.sock.sendall(struct.pack("!I", len(data)) + data)


def recv(worker: SandboxWorker, timeout: float = 20.0) -> dict:
    worker.sock.settimeout(timeout)
    header = b""
    while len(header) < 4:
        chunk = worker.sock.recv(4 - len(header))
        if not chunk:
            raise EOFError("worker closed the socket")
        header += chunk
    n = struct.unpack("!I", header)[0]
    body = b""
    while len(body) < n:
        body += worker.sock.recv(n - len(body))
    return json.loads(body)


def run(worker: SandboxWorker, code: str, timeout: float = 20.0) -> dict:
    send(worker, code)
    return recv(worker, timeout)


def uid_processes(uid: int) -> list[int]:
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def tree_snapshot(root: Path) -> dict[str, tuple[int, int]]:
    snap = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in (".git", "__pycache__", ".pytest_cache")]
        for name in filenames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            snap[path] = (st.st_size, st.st_mtime_ns)
    return snap


@pytest.fixture(scope="module")
def pool() -> Iterator[SandboxPool]:
    if not FULL:
        pytest.skip(f"full isolation unavailable here: {missing_reasons()}")
    before = tree_snapshot(REPO)
    with SandboxPool(jobs=2, isolation="full", entry=ENTRY_NAME, worker_files=WORKER_FILES) as p:
        yield p
    assert tree_snapshot(REPO) == before, "a worker changed a file of the repository"


@pytest.fixture
def worker(pool: SandboxPool) -> Iterator[SandboxWorker]:
    w = pool.start()
    yield w
    w.kill()
    w.finish()
    assert uid_processes(w.uid) == [], "a student process outlived finish()"


# -- what is reported ---------------------------------------------------------------------


@needs_full
def test_full_isolation_reports_every_protection(pool: SandboxPool) -> None:
    assert pool.protections == list(ALL_PROTECTIONS)
    assert available_protections() == list(ALL_PROTECTIONS)


def test_full_fails_clearly_without_bwrap(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no bwrap anywhere
    with pytest.raises(SandboxUnavailable, match="bwrap"):
        select_protections("full")
    with pytest.raises(SandboxUnavailable, match="bwrap"):
        SandboxPool(isolation="full", entry=ENTRY_NAME, worker_files=WORKER_FILES)
    auto = select_protections("auto")
    assert "bwrap" not in auto and "pid-ns" not in auto
    assert auto == available_protections()


def test_auto_runs_with_what_is_available(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with SandboxPool(
        isolation="auto", entry=ENTRY_NAME, worker_files=WORKER_FILES, preload=()
    ) as p:
        assert p.protections == available_protections()
        assert "bwrap" not in p.protections
        w = p.start()
        reply = run(w, "import os; result = [os.getuid(), os.getcwd()]")
        w.sock.close()
        assert w.finish() == "ok"
    assert reply["ok"]
    if "uid-drop" in p.protections:
        assert reply["result"][0] != 0


def test_refuses_to_run_with_nothing_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(probe_mod, "missing_reasons", lambda: dict.fromkeys(ALL_PROTECTIONS, "x"))
    with pytest.raises(SandboxUnavailable, match="isolation='none'"):
        select_protections("auto")
    assert select_protections("none") == []
    with pytest.raises(ValueError):
        select_protections("partial")


def test_none_only_when_asked() -> None:
    with SandboxPool(
        isolation="none", entry=ENTRY_NAME, worker_files=WORKER_FILES, preload=()
    ) as p:
        assert p.protections == []
        w = p.start()
        assert run(w, "result = 6 * 7")["result"] == 42
        w.sock.close()
        assert w.finish() == "ok"


# -- confinement --------------------------------------------------------------------------


@needs_full
def test_worker_is_unprivileged_and_filtered(worker: SandboxWorker) -> None:
    reply = run(
        worker,
        """
import os
status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines())
result = {k: status[k].strip() for k in ("Uid", "CapEff", "CapPrm", "CapBnd", "NoNewPrivs",
          "Seccomp")}
result["cwd"] = os.getcwd()
result["home"] = os.environ["HOME"]
result["root"] = sorted(os.listdir("/"))
""",
    )["result"]
    assert reply["Uid"].split()[0] == str(worker.uid) != "0"
    assert int(reply["CapEff"], 16) == int(reply["CapPrm"], 16) == int(reply["CapBnd"], 16) == 0
    assert reply["NoNewPrivs"] == "1" and reply["Seccomp"] == "2"
    assert reply["cwd"] == reply["home"] == "/tmp"
    assert "work" not in reply["root"] and "home" not in reply["root"]


@needs_full
def test_cannot_read_repository_or_root(worker: SandboxWorker) -> None:
    planted = [REPO / ".sbx-planted-solution.py", Path("/root/.sbx-planted-secret")]
    for path in planted:
        path.write_text("SECRET = 42\n")
    try:
        code = f"""
import glob, os
paths = {[str(p) for p in planted]!r} + [{str(REPO / "solutions")!r}, "/work", "/root"]
seen = {{}}
for p in paths:
    try:
        seen[p] = open(p).read() if os.path.isfile(p) else os.listdir(p)
    except OSError as exc:
        seen[p] = type(exc).__name__
seen["glob"] = [p for d in ("/", "/root", "/tmp", "/sbx", "/sbx/code")
                for p in glob.glob(d + "/.sbx-planted-*")]
result = seen
"""
        seen = run(worker, code, timeout=60)["result"]
    finally:
        for path in planted:
            path.unlink()
    assert seen["glob"] == []
    for path in planted:
        assert seen[str(path)] in ("FileNotFoundError", "PermissionError")
    assert seen[str(REPO / "solutions")] == "FileNotFoundError"
    assert seen["/work"] == "FileNotFoundError"
    assert "SECRET" not in json.dumps(seen)


@needs_full
def test_cannot_write_outside_scratch(worker: SandboxWorker) -> None:
    targets = [
        "/sbx/x",
        "/usr/x",
        "/x",
        "/etc/x",
        "/dev/x",
        "/proc/x",
        "/root/x",
        "/dev/shm/x",
        "/sys/x",
        f"{os.path.realpath(os.__file__)}c",
    ]
    reply = run(
        worker,
        f"""
import os
out = {{}}
for p in {targets!r}:
    try:
        with open(p, "w") as fh:
            fh.write("pwned")
        out[p] = "written"
    except OSError as exc:
        out[p] = type(exc).__name__
with open("inside.txt", "w") as fh:
    fh.write("fine")
out["scratch"] = open("/tmp/inside.txt").read()
result = out
""",
    )["result"]
    assert reply.pop("scratch") == "fine"
    assert "written" not in reply.values(), reply
    assert not Path("/x").exists()


@needs_full
def test_file_size_is_capped(pool: SandboxPool) -> None:
    w = pool.start(limits=Limits(file_size_bytes=1 << 20))
    reply = run(
        w,
        """
try:
    with open("big", "wb") as fh:
        fh.write(b"x" * (4 << 20))
    result = "written"
except OSError as exc:
    result = exc.errno
""",
    )
    w.sock.close()
    assert w.finish() == "ok"
    assert reply["result"] == 27  # EFBIG


@needs_full
def test_no_network_and_the_listener_sees_nothing(worker: SandboxWorker) -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    try:
        reply = run(
            worker,
            f"""
import socket
out = {{}}
for name, fam, kind in [("tcp4", socket.AF_INET, socket.SOCK_STREAM),
                        ("udp4", socket.AF_INET, socket.SOCK_DGRAM),
                        ("tcp6", socket.AF_INET6, socket.SOCK_STREAM),
                        ("netlink", socket.AF_NETLINK, socket.SOCK_RAW),
                        ("packet", socket.AF_PACKET, socket.SOCK_RAW)]:
    try:
        s = socket.socket(fam, kind)
        s.settimeout(1)
        s.connect(("127.0.0.1", {port}) if fam == socket.AF_INET else ("::1", {port}))
        out[name] = "connected"
    except OSError as exc:
        out[name] = exc.errno
result = out
""",
        )["result"]
        listener.settimeout(0.5)
        with pytest.raises(TimeoutError):
            listener.accept()
    finally:
        listener.close()
    assert "connected" not in reply.values()
    assert set(reply.values()) == {97}  # EAFNOSUPPORT from the seccomp filter


@needs_full
def test_cannot_create_namespaces_mount_ptrace_or_regain_root(worker: SandboxWorker) -> None:
    reply = run(
        worker,
        """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def call(fn, *args):
    ctypes.set_errno(0)
    ret = fn(*args)
    return "ok" if ret == 0 else ctypes.get_errno()
out = {
    "unshare_user": call(libc.unshare, 0x10000000),
    "unshare_ns": call(libc.unshare, 0x00020000),
    "clone_newpid": call(libc.syscall, 56, 0x20000000 | 17, 0, 0, 0, 0),
    "mount": call(libc.mount, b"tmpfs", b"/tmp", b"tmpfs", 0, None),
    "ptrace_parent": call(libc.ptrace, 16, os.getppid(), 0, 0),
    "ptrace_me": call(libc.ptrace, 0, 0, 0, 0),
    "chroot": call(libc.chroot, b"/tmp"),
    "setuid0": call(libc.setuid, 0),
}
result = out
""",
    )["result"]
    assert "ok" not in reply.values(), reply
    assert reply["setuid0"] == 1  # EPERM


@needs_full
def test_memory_bomb_is_killed_as_memory(pool: SandboxPool) -> None:
    w = pool.start(limits=Limits(memory_bytes=1 << 30))
    t0 = time.monotonic()
    send(w, "import numpy as np\nx = np.ones(6 << 30, dtype=np.uint8)\nresult = int(x[-1])")
    with pytest.raises((EOFError, ConnectionError)):
        recv(w, timeout=60)
    reason = w.finish()
    elapsed = time.monotonic() - t0
    print(f"\nmemory bomb (touch 6 GiB, cap 1 GiB): {reason!r} after {elapsed:.2f} s")
    assert reason == "memory"
    assert uid_processes(w.uid) == []
    w2 = pool.start()  # the pool is still serving
    assert run(w2, "result = 1")["result"] == 1
    w2.sock.close()
    assert w2.finish() == "ok"


@needs_full
def test_fork_bomb_is_bounded_by_pids(pool: SandboxPool) -> None:
    w = pool.start(limits=Limits(max_pids=32))
    reply = run(
        w,
        """
import os, time
made = 0
for _ in range(500):
    try:
        if os.fork() == 0:
            while True:
                try:
                    os.fork()
                except OSError:
                    time.sleep(0.01)
        made += 1
    except OSError:
        time.sleep(0.001)
time.sleep(0.5)
result = made
""",
        timeout=60,
    )
    assert w.cgroup is not None
    count = len(w.cgroup.pids())
    assert count <= 32, count
    w.kill()
    assert w.finish() == "timeout"
    assert uid_processes(w.uid) == []
    assert reply["result"] < 32


@needs_full
def test_infinite_loop_ignoring_signals_is_killed(pool: SandboxPool) -> None:
    w = pool.start(limits=Limits(wall_s=1.5))
    send(
        w,
        """
import signal
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, signal.SIG_IGN)
while True:
    pass
""",
    )
    time.sleep(0.3)
    for sig in (signal.SIGINT, signal.SIGTERM):
        os.kill(w.pid, sig)
    time.sleep(0.2)
    assert w.pid in uid_processes(w.uid)  # still spinning
    t0 = time.monotonic()
    reason = w.finish(grace_s=10)  # the wall-clock watchdog fires at 1.5 s
    assert reason == "timeout"
    assert time.monotonic() - t0 < 5
    assert uid_processes(w.uid) == []


@needs_full
def test_cpu_rlimit_counts_as_timeout(pool: SandboxPool) -> None:
    w = pool.start(limits=Limits(cpu_s=1))
    send(w, "while True:\n    pass\n")
    assert w.finish(grace_s=15) == "timeout"


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("import os; os._exit(3)", "crashed"),
        ("import ctypes; ctypes.string_at(0)", "crashed"),
        ("import sys; sys.exit(4)", "crashed"),
        ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", "crashed"),
    ],
)
@needs_full
def test_abrupt_ends_are_crashes(pool: SandboxPool, code: str, expected: str) -> None:
    w = pool.start()
    send(w, code)
    with pytest.raises((EOFError, ConnectionError)):
        recv(w)
    assert w.finish() == expected
    assert uid_processes(w.uid) == []


@needs_full
def test_daemon_grandchild_is_gone_after_finish(pool: SandboxPool) -> None:
    w = pool.start()
    reply = run(
        w,
        """
import os, time
r, wr = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.write(wr, b"x")
        for fd in range(0, 64):
            try:
                os.close(fd)
            except OSError:
                pass
        while True:
            time.sleep(1)
    os._exit(0)
os.read(r, 1)
result = "spawned"
""",
    )
    assert reply["result"] == "spawned"
    assert len(uid_processes(w.uid)) >= 2
    w.sock.close()  # the worker returns; its daemon would live on
    assert w.finish() == "ok"
    assert uid_processes(w.uid) == []


@needs_full
def test_printing_hundreds_of_mib_is_harmless(pool: SandboxPool) -> None:
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    w = pool.start()
    t0 = time.monotonic()
    reply = run(
        w,
        """
import sys
line = "spam " * 200 + "\\n"
for _ in range(300 * 1024 * 1024 // len(line)):
    sys.stdout.write(line)
sys.stdout.flush()
sys.stderr.write("THE END\\n")
result = "printed"
""",
        timeout=120,
    )
    elapsed = time.monotonic() - t0
    w.sock.close()
    assert w.finish() == "ok"
    assert reply["result"] == "printed"
    excerpt = w.output_excerpt(2000)
    print(f"\n300 MiB printed and drained in {elapsed:.2f} s; excerpt {len(excerpt)} chars")
    assert w.output_bytes >= 300 * 1024 * 1024 - 4096
    assert len(excerpt) <= 2100 and excerpt.startswith("spam") and "THE END" in excerpt
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before < 100 * 1024


@needs_full
def test_cannot_kill_the_grader(pool: SandboxPool) -> None:
    w = pool.start()
    reply = run(
        w,
        f"""
import os, signal
out = {{}}
for name, pid in [("parent", os.getppid()), ("init", 1), ("grader", {os.getpid()})]:
    try:
        os.kill(pid, signal.SIGKILL)
        out[name] = "sent"
    except OSError as exc:
        out[name] = type(exc).__name__
result = out
""",
    )["result"]
    assert reply["parent"] == reply["init"] == "PermissionError"
    assert reply["grader"] in ("ProcessLookupError", "PermissionError")
    # kill(-1) reaches only processes of the submission's own uid (none but itself here)
    assert run(w, "import os, signal; os.kill(-1, signal.SIGKILL); result = 1")["result"] == 1
    send(w, "import os, signal; os.killpg(0, signal.SIGKILL)")  # its own group: itself
    with pytest.raises((EOFError, ConnectionError)):
        recv(w)
    assert w.finish() == "crashed"
    w2 = pool.start()
    assert run(w2, "result = 'still here'")["result"] == "still here"
    w2.sock.close()
    assert w2.finish() == "ok"


@needs_full
def test_parallel_submissions_cannot_see_each_other(pool: SandboxPool) -> None:
    a, b = pool.start(), pool.start()
    try:
        run(a, "open('secret-a', 'w').write('A'); import os; result = os.getpid()")
        a_pid = run(a, "import os; result = os.getpid()")["result"]
        reply = run(
            b,
            f"""
import os
out = {{"listing": os.listdir("/tmp")}}
for p in ["/tmp/secret-a", "/proc/{a_pid}/cwd/secret-a", "/proc/{a_pid}/root/tmp/secret-a"]:
    try:
        out[p] = open(p).read()
    except OSError as exc:
        out[p] = type(exc).__name__
result = out
""",
        )["result"]
    finally:
        for w in (a, b):
            w.sock.close()
            w.finish()
    assert "secret-a" not in reply.pop("listing")
    assert "A" not in reply.values(), reply


@needs_full
def test_notebook_bytes_reach_the_scratch_folder(pool: SandboxPool) -> None:
    w = pool.start(b'{"cells": []}')
    reply = run(w, "import os; result = open(os.environ['GRADER_NOTEBOOK']).read()")
    w.sock.close()
    w.finish()
    assert reply["result"] == '{"cells": []}'


@needs_full
def test_fork_to_ready_latency(pool: SandboxPool) -> None:
    times = []
    for _ in range(20):
        t0 = time.perf_counter()
        w = pool.start()
        times.append(time.perf_counter() - t0)
        w.sock.close()
        assert w.finish() == "ok"
    print(
        f"\nfork-to-ready over 20 starts: median {statistics.median(times) * 1000:.1f} ms, "
        f"max {max(times) * 1000:.1f} ms"
    )


@needs_full
def test_the_real_worker_runs_in_the_sandbox() -> None:
    """With the default entry (``grader.runtime.worker:serve``) and worker files."""
    if "grader/runtime/worker.py" not in default_worker_files():
        pytest.skip("grader/runtime/worker.py is not in this checkout yet")
    from grader.runtime import protocol

    cell = "import torch\nx = torch.ones(3) * 2\nprint('hello from the notebook')"
    with SandboxPool(jobs=1) as p:
        w = p.start()
        w.sock.settimeout(60)
        protocol.send(w.sock, {"op": "load"}, {"cells": [[0, cell]]})
        reply, _ = protocol.recv(w.sock)
        protocol.send(w.sock, {"op": "shutdown"})
        protocol.recv(w.sock)
        assert w.finish() == "ok"
    assert reply["ok"] is True
    assert "hello from the notebook" in w.output_excerpt()
