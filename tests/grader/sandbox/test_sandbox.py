"""The sandbox that runs each student's worker: every protection, shown by a hostile act.

The worker entry used here (``ENTRY``) runs whatever Python code the test sends over the
socket and answers with a JSON reply, so each test plays a hostile notebook. Each test
needs the protections it shows (``needs(...)``) and holds whichever mechanism meets them:
root (a uid per submission) or not (a user namespace), cgroup or rlimits. CI runs this
file as root and as an unprivileged user.
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

from grader.runtime import forkserver
from grader.sandbox import (
    PROTECTIONS,
    Limits,
    SandboxError,
    SandboxPool,
    SandboxUnavailable,
    SandboxWorker,
    available_protections,
    default_worker_files,
    missing_protections,
    plan,
)
from grader.sandbox._zygote import Kill
from grader.sandbox.bwrap import python_dirs

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[3]

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

AVAILABLE = available_protections()
ROOT = os.geteuid() == 0


def needs(*protections: str) -> pytest.MarkDecorator:
    lacking = {p: missing_protections()[p] for p in protections if p not in AVAILABLE}
    return pytest.mark.skipif(bool(lacking), reason=f"not available here: {lacking}")


def alive(pid: int) -> bool:
    """Is ``pid`` a running (not zombie) process?"""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def marked(mark: str) -> list[str]:
    """Pids of processes whose command line holds ``mark``, as seen from here."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                with open(f"/proc/{entry.name}/cmdline", "rb") as fh:
                    if mark.encode() in fh.read():
                        found.append(entry.name)
            except OSError:
                pass
    return found


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
    before = tree_snapshot(REPO)
    with SandboxPool(jobs=2, entry=ENTRY_NAME, worker_files=WORKER_FILES) as p:
        yield p
    assert tree_snapshot(REPO) == before, "a worker changed a file of the repository"


def gone(w: SandboxWorker) -> bool:
    """Nothing of the submission is left: its worker, and (root) every process of its uid."""
    return not alive(w.pid) and (not w._pool.plan.uid_drop or uid_processes(w.uid) == [])


@pytest.fixture
def worker(pool: SandboxPool) -> Iterator[SandboxWorker]:
    w = pool.start()
    yield w
    w.kill()
    w.finish()
    assert gone(w), "a student process outlived finish()"


# -- what is reported ---------------------------------------------------------------------


def test_the_default_reports_what_is_active_and_what_is_missing(pool: SandboxPool) -> None:
    assert pool.isolation == "auto"
    assert pool.protections == AVAILABLE
    assert set(pool.plan.active) | set(pool.plan.missing) == set(PROTECTIONS)
    assert not set(pool.plan.active) & set(pool.plan.missing)
    assert all(pool.plan.missing.values()), "every missing protection says why"
    text = pool.plan.describe()
    assert all(name in text for name in PROTECTIONS)
    if ROOT and "bwrap" in (pool.plan.bwrap or ""):
        assert pool.plan.uid_drop and pool.plan.namespaces


def test_strict_refuses_naming_what_is_missing(monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no bwrap anywhere
    monkeypatch.delenv("GRADER_SANDBOX_WITHOUT", raising=False)
    with pytest.raises(SandboxUnavailable, match="files-hidden: no bubblewrap"):
        plan("strict")
    with pytest.raises(SandboxUnavailable, match="files-hidden"):
        SandboxPool(isolation="strict", entry=ENTRY_NAME, worker_files=WORKER_FILES)
    with pytest.raises(SandboxUnavailable, match="read-only"):
        plan("auto", require=("read-only",))
    auto = plan("auto")
    assert "files-hidden" in auto.missing and "files-hidden" not in auto.active
    assert "bubblewrap is not installed" in str(auto.missing["files-hidden"])
    with pytest.raises(SandboxUnavailable):
        plan("full")  # the old name of strict
    with pytest.raises(ValueError):
        plan("partial")
    with pytest.raises(ValueError, match="known"):
        plan("auto", require=("no-such-thing",))


def test_auto_runs_with_what_is_available(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with SandboxPool(entry=ENTRY_NAME, worker_files=WORKER_FILES, preload=()) as p:
        assert p.protections == plan("auto").protections
        assert "files-hidden" not in p.protections
        w = p.start()
        reply = run(w, "import os; result = [os.getuid(), os.getcwd()]")
        w.sock.close()
        assert w.finish() == "ok"
    assert reply["ok"]
    if p.plan.uid_drop:
        assert reply["result"][0] != 0


def test_none_is_only_the_time_limit() -> None:
    with SandboxPool(isolation="none", entry=ENTRY_NAME, worker_files=WORKER_FILES,
                     preload=()) as p:
        assert p.protections == ["time-limit"]
        assert set(p.plan.missing) == set(PROTECTIONS) - {"time-limit"}
        w = p.start()
        assert run(w, "result = 6 * 7")["result"] == 42
        w.sock.close()
        assert w.finish() == "ok"


# -- confinement --------------------------------------------------------------------------


@needs("no-privileges", "syscall-filter", "files-hidden", "private-scratch")
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
result["fds"] = sorted(int(fd) for fd in os.listdir("/proc/self/fd"))
result["repo"] = sorted(os.listdir(__REPO__)) if os.path.isdir(__REPO__) else None
result["home_dir"] = sorted(os.listdir(__HOMEDIR__)) if os.path.isdir(__HOMEDIR__) else []
""".replace("__REPO__", repr(str(REPO))).replace("__HOMEDIR__", repr(str(Path.home()))),
    )["result"]
    uid = str(worker.uid if worker._pool.plan.uid_drop else os.getuid())
    assert reply["Uid"].split()[0] == uid != "0"
    assert int(reply["CapEff"], 16) == int(reply["CapPrm"], 16) == int(reply["CapBnd"], 16) == 0
    assert reply["NoNewPrivs"] == "1" and reply["Seccomp"] == "2"
    assert reply["cwd"] == reply["home"] == "/tmp"
    # the checkout shows nothing but the folders of a venv inside it (``.venv``), if any
    assert reply["repo"] is None or set(reply["repo"]) <= {
        Path(d).relative_to(REPO).parts[0] for d in python_dirs() if Path(d).is_relative_to(REPO)}
    needed = {Path(d).relative_to(Path.home()).parts[0] for d in python_dirs()
              if Path(d).is_relative_to(Path.home())}
    assert set(reply["home_dir"]) <= needed  # only the folders of a venv under your home, if any
    assert reply["fds"][:4] == [0, 1, 2, 3] and len(reply["fds"]) == 5  # + listdir's own


@needs("files-hidden")
def test_cannot_read_repository_or_home(worker: SandboxWorker) -> None:
    planted = [REPO / ".sbx-planted-solution.py", Path.home() / ".sbx-planted-secret"]
    if not os.access(REPO, os.W_OK):
        planted = planted[1:]
    for path in planted:
        path.write_text("SECRET = 42\n")
    try:
        code = f"""
import glob, os
paths = {[str(p) for p in planted]!r} + [{str(REPO / "solutions")!r}, {str(REPO.parent)!r}, "/root"]
seen = {{}}
for p in paths:
    try:
        seen[p] = open(p).read() if os.path.isfile(p) else os.listdir(p)
    except OSError as exc:
        seen[p] = type(exc).__name__
seen["glob"] = [p for d in ("/", "/root", {str(Path.home())!r}, "/tmp", "/sbx", "/sbx/code")
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
    # the checkout's folder shows at most the folders of a venv beside it, if any
    assert seen[str(REPO.parent)] == "FileNotFoundError" or set(seen[str(REPO.parent)]) <= {
        Path(d).relative_to(REPO.parent).parts[0] for d in python_dirs()
        if Path(d).is_relative_to(REPO.parent)}
    assert "SECRET" not in json.dumps(seen)


@needs("read-only", "private-scratch")
def test_cannot_write_outside_scratch(worker: SandboxWorker) -> None:
    targets = [
        "/sbx/x",
        "/usr/x",
        "/x",
        "/etc/x",
        "/dev/x",
        "/proc/x",
        "/root/x",
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


@needs("no-network")
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
    if "syscall-filter" in AVAILABLE:
        assert set(reply.values()) == {97}  # EAFNOSUPPORT from the seccomp filter


@needs("syscall-filter", "no-privileges")
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
    assert reply["setuid0"] in (1, 22)  # EPERM; EINVAL in a user namespace (no uid 0 there)


def test_memory_bomb_is_stopped(pool: SandboxPool) -> None:
    """A cgroup kills the whole submission ("memory"); a memory rlimit (no cgroup) makes
    the allocation fail with MemoryError, which the engine reports as "memory"."""
    w = pool.start(limits=Limits(memory_bytes=1 << 30))
    t0 = time.monotonic()
    send(w, "import numpy as np\nx = np.ones(6 << 30, dtype=np.uint8)\nresult = int(x[-1])")
    if "memory-cap" in pool.protections:
        with pytest.raises((EOFError, ConnectionError)):
            recv(w, timeout=60)
        reason = w.finish()
        assert reason == "memory"
    else:
        reply = recv(w, timeout=60)
        assert not reply["ok"] and reply["error"].startswith("MemoryError"), reply
        w.sock.close()
        reason = w.finish()
        assert reason == "ok"
    print(f"\nmemory bomb (6 GiB, cap 1 GiB): {reason!r} after {time.monotonic() - t0:.2f} s")
    assert gone(w)
    w2 = pool.start()  # the pool is still serving
    assert run(w2, "result = 1")["result"] == 1
    w2.sock.close()
    assert w2.finish() == "ok"


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="Linux's RLIMIT_DATA")
def test_a_memory_rlimit_leaves_the_submission_its_own_memory(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a memory cgroup (a normal user's machine) each worker gets an RLIMIT_DATA,
    which also counts what it inherited from its zygote (torch with CUDA: ~850 MB). So
    ``--memory`` is on top of that, as a cgroup counts only what the submission allocates:
    with a cap smaller than its zygote's numpy, a worker still allocates most of the cap
    and imports an extension its zygote did not load (``numpy.random``: a shared object
    mapped now), and a bomb still fails."""
    monkeypatch.setenv("GRADER_SANDBOX_WITHOUT", "cgroups")
    cap = 24 << 20
    with SandboxPool(entry=ENTRY_NAME, worker_files=WORKER_FILES, preload=("numpy",)) as p:
        assert "memory-cap" in p.plan.missing
        w = p.start(limits=Limits(memory_bytes=cap))
        reply = run(w, f"""
import resource, sys
inherited = [int(line.split()[1]) * 1024 for line in open("/proc/self/status")
             if line.startswith("VmData:")][0]
headroom = resource.getrlimit(resource.RLIMIT_DATA)[0] - inherited
import numpy as np
kept = np.ones({cap * 3 // 4}, dtype=np.uint8)
assert "numpy.random" not in sys.modules
sample = np.random.default_rng(0).random(2)
result = [inherited, headroom]
""")
        assert reply["ok"], reply
        inherited, headroom = reply["result"]
        assert inherited > cap  # the old cap (the rlimit at --memory) left it nothing
        assert cap - (1 << 20) <= headroom <= cap
        assert not run(w, "x = bytearray(6 << 30)")["ok"]
        w.sock.close()
        assert w.finish() == "ok"


@needs("process-cap")
def test_fork_bomb_is_bounded(pool: SandboxPool) -> None:
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
    if w.cgroup is not None:
        count = len(w.cgroup.pids())
        assert count <= 32, count
    w.kill()
    assert w.finish() == "timeout"
    assert gone(w)
    assert reply["result"] < 32


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
    assert alive(w.pid)  # still spinning
    t0 = time.monotonic()
    reason = w.finish(grace_s=10)  # the wall-clock watchdog fires at 1.5 s
    assert reason == "timeout"
    assert time.monotonic() - t0 < 5
    assert gone(w)


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
def test_abrupt_ends_are_crashes(pool: SandboxPool, code: str, expected: str) -> None:
    w = pool.start()
    send(w, code)
    with pytest.raises((EOFError, ConnectionError)):
        recv(w)
    assert w.finish() == expected
    assert gone(w)


def test_a_crash_stays_a_crash_when_the_engine_kills_afterwards(pool: SandboxPool) -> None:
    w = pool.start()
    send(w, "import ctypes; ctypes.string_at(0)")
    with pytest.raises((EOFError, ConnectionError)):
        recv(w)
    w.kill()  # what the engine does when its socket breaks
    assert w.finish() == "crashed"


DAEMON = """
import os, subprocess, sys, time
r, wr = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.write(wr, b"x")
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)", "MARK"])
    os._exit(0)
os.read(r, 1)
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "MARK"],
                 start_new_session=True)
time.sleep(0.5)
result = "spawned"
"""


@needs("nothing-outlives")
def test_daemon_grandchildren_are_gone_after_finish(pool: SandboxPool) -> None:
    mark = f"sbx-daemon-{os.getpid()}-{time.monotonic_ns()}"
    w = pool.start()
    assert run(w, DAEMON.replace("MARK", mark))["result"] == "spawned"
    assert len(marked(mark)) == 2
    w.sock.close()  # the worker returns; its daemons would live on
    assert w.finish() == "ok"
    assert marked(mark) == []
    assert gone(w)


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


@needs("processes-unreachable")
def test_cannot_kill_the_grader(pool: SandboxPool) -> None:
    w = pool.start()
    reply = run(
        w,
        f"""
import os, signal
out = {{}}
for name, pid in [("parent", os.getppid()), ("init", 1), ("grader", {os.getpid()}), ("all", -1)]:
    if pid == 0:  # a parent outside its pid namespace reads as 0 (and kill(0) is itself)
        out[name] = "out of sight"
        continue
    try:
        os.kill(pid, signal.SIGKILL)
        out[name] = "sent"
    except OSError as exc:
        out[name] = type(exc).__name__
result = out
""",
    )["result"]
    # Refused (another uid), not there (another pid namespace) or ignored (SIGKILL to the
    # first process of a pid namespace, from inside it, does nothing): we are still here.
    assert reply["grader"] in ("ProcessLookupError", "PermissionError")
    assert run(w, "result = 'still here'")["result"] == "still here"
    send(w, "import os, signal; os.killpg(0, signal.SIGKILL)")  # its own group: itself
    with pytest.raises((EOFError, ConnectionError)):
        recv(w)
    assert w.finish() == "crashed"
    w2 = pool.start()
    assert run(w2, "result = 'still here'")["result"] == "still here"
    w2.sock.close()
    assert w2.finish() == "ok"


@needs("private-scratch", "processes-invisible")
def test_parallel_submissions_cannot_see_each_other(pool: SandboxPool) -> None:
    a, b = pool.start(), pool.start()
    try:
        run(a, "open('secret-a', 'w').write('A'); open('/dev/shm/secret-a', 'w').write('A')")
        a_pid = run(a, "import os; result = os.getpid()")["result"]
        reply = run(
            b,
            f"""
import os
out = {{"listing": os.listdir("/tmp") + os.listdir("/dev/shm")}}
for p in ["/tmp/secret-a", "/dev/shm/secret-a", "/proc/{a_pid}/cwd/secret-a", "/proc/{a_pid}/root/tmp/secret-a"]:
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


def _load_and_shut_down(w: SandboxWorker, cell: str) -> dict:
    from grader.runtime import protocol

    w.sock.settimeout(60)
    protocol.send(w.sock, {"op": "load"}, {"cells": [[0, cell]]})
    reply, _ = protocol.recv(w.sock)
    protocol.send(w.sock, {"op": "shutdown"})
    assert protocol.recv(w.sock)[0]["ok"] is True
    return reply


def test_the_real_worker_runs_in_the_sandbox() -> None:
    """With the default entry (``grader.runtime.worker:serve``) and worker files."""
    assert "grader/runtime/worker.py" in default_worker_files()
    cell = "import torch\nx = torch.ones(3) * 2\nprint('hello from the notebook')"
    with SandboxPool(jobs=1) as p:
        w = p.start()
        reply = _load_and_shut_down(w, cell)
        assert w.finish() == "ok"
    assert reply["ok"] is True
    assert "hello from the notebook" in w.output_excerpt()


def test_workers_start_with_the_course_modules_loaded_and_run_byte_code() -> None:
    """The class's worker files: the zygote preloads the course modules the lessons import
    (and registers the course's font, a ``module:function`` preload), and the code folder
    is byte-compiled when the pool opens (the sandbox's Python runs with -B on a read-only
    folder: without it every worker compiled them again)."""
    from grader.classgrade.classroom import public_files

    files = {**default_worker_files(), **public_files("04_multi_head_attention"),
             "byte_code_probe.py": b"VALUE = 'compiled'\n"}
    cell = ("import sys\nimport byte_code_probe\nfrom matplotlib import font_manager\n"
            "print('preloaded', 'coursekit.text' in sys.modules, byte_code_probe.VALUE)\n"
            "print('font', any(f.name == 'Noto Sans SC' for f in font_manager.fontManager.ttflist))")
    with SandboxPool(jobs=1, worker_files=files) as p:
        assert p._code_dir is not None
        probe = p._code_dir / "code" / "byte_code_probe.py"
        probe.write_bytes(b"VALUE = 'source'\n")  # runs only if the folder were compiled late
        w = p.start()
        reply = _load_and_shut_down(w, cell)
        assert w.finish() == "ok"
    assert reply["ok"] is True, reply
    assert "preloaded True compiled" in w.output_excerpt(), w.output_excerpt()
    assert "font True" in w.output_excerpt(), w.output_excerpt()


def test_a_dead_zygote_is_replaced() -> None:
    """Killing the first zygote kills its clone too: both are replaced as they are needed."""
    with SandboxPool(jobs=2, entry=ENTRY_NAME, worker_files=WORKER_FILES, preload=()) as p:
        root, clone = p._zygotes
        assert root.proc is not None and clone.parent is root
        os.killpg(root.proc.pid, signal.SIGKILL)
        root.proc.wait()
        held = [p.start(), p.start()]  # both slots at once
        assert not {w._zygote for w in held} & {root, clone}
        for w in held:
            assert run(w, "result = 'fresh'")["result"] == "fresh"
            w.sock.close()
            assert w.finish() == "ok"


SEEN_FROM_INSIDE = """import os
result = [os.getcwd() == '/tmp', sorted(p for p in os.listdir('/proc') if p.isdigit())
          if os.getpid() < 10 else 'not alone', os.getuid() == 0, os.getppid() == 0]"""


@pytest.mark.parametrize("without", ["", "bwrap,namespaces"])
def test_the_other_zygotes_are_clones_of_the_first_and_confine_alike(
        monkeypatch: pytest.MonkeyPatch, without: str) -> None:
    """The pool's first zygote imports the preloads; the others are forks of it, which
    share them instead of importing them again (seconds each). A clone's worker is
    confined as the first one's is, and nothing of either outlives the pool."""
    if without:
        monkeypatch.setenv("GRADER_SANDBOX_WITHOUT", without)
    with SandboxPool(jobs=2, entry=ENTRY_NAME, worker_files=WORKER_FILES,
                     preload=("json",), spares=1) as p:
        root, *clones = p._zygotes
        assert root.parent is None and [z.parent for z in clones] == [root, root]
        held = [p.start() for _ in range(3)]  # every zygote serves one at once
        assert {w._zygote for w in held} == {root, *clones}
        seen = [run(w, SEEN_FROM_INSIDE)["result"] for w in held]
        assert seen[0] == seen[1] == seen[2], seen
        for w in held:
            w.sock.close()
            assert w.finish() == "ok"
    assert root.proc is not None and root.proc.poll() is not None
    assert all(gone(w) for w in held)


def test_late_preloads_reach_the_workers_of_the_zygote_and_of_its_clones() -> None:
    """``preload_late`` (a cold check's torch, issue 52 item 4): the first zygote imports
    it once it has said it is ready, so the pool opens without waiting for it, and before
    it forks anything: its workers, and its clones', find it loaded."""
    with SandboxPool(jobs=2, entry=ENTRY_NAME, worker_files=WORKER_FILES, preload=(),
                     preload_late=("colorsys",)) as p:
        held = [p.start(), p.start()]
        assert len({w._zygote for w in held}) == 2
        seen = [run(w, "import sys\nresult = 'colorsys' in sys.modules")["result"]
                for w in held]
        for w in held:
            w.sock.close()
            assert w.finish() == "ok"
    assert seen == [True, True]


def test_where_no_clone_can_be_made_the_pool_starts_a_zygote_itself(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from grader.sandbox import pool as pool_module

    def no_clone(*args: object) -> None:
        raise SandboxError("a clone of the sandbox zygote did not start (got None)")

    monkeypatch.setattr(pool_module._Zygote, "clone", no_clone)
    with SandboxPool(jobs=2, entry=ENTRY_NAME, worker_files=WORKER_FILES, preload=()) as p:
        assert [z.parent for z in p._zygotes] == [None, None]
        held = [p.start(), p.start()]
        for w in held:
            assert run(w, "result = 'served'")["result"] == "served"
            w.sock.close()
            assert w.finish() == "ok"


def test_a_dead_clone_is_replaced_while_its_first_zygote_keeps_grading() -> None:
    with SandboxPool(jobs=2, entry=ENTRY_NAME, worker_files=WORKER_FILES, preload=()) as p:
        root, clone = p._zygotes
        held = p.start()
        assert held._zygote is root
        root.send(Kill(clone.clone_id))  # as when a clone stops answering
        deadline = time.monotonic() + 10
        while clone.alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not clone.alive()
        w = p.start()
        assert w._zygote.parent is root and w._zygote is not clone  # a new clone
        assert run(w, "result = 'fresh'")["result"] == "fresh"
        assert run(held, "result = 'unharmed'")["result"] == "unharmed"
        for one in (w, held):
            one.sock.close()
            assert one.finish() == "ok"


def test_the_zygote_refuses_what_it_does_not_serve_and_serves_on() -> None:
    """The zygote's one serve loop: an unknown request, or a spawn without its descriptors,
    is refused (the pool hears why at once, not after its answer bound) and the zygote
    still forks the next worker."""
    with SandboxPool(jobs=1, entry=ENTRY_NAME, worker_files=WORKER_FILES, preload=()) as p:
        (zygote,) = p._zygotes
        zygote.channel.send({"op": "Exec", "argv": ["sh"]})
        assert forkserver.expect(zygote.channel, forkserver.Refused, 10).error == \
            "unknown request 'Exec'"
        zygote.channel.send({"op": "Spawn", "id": 99})
        assert "fields that do not fit" in forkserver.expect(zygote.channel, forkserver.Refused,
                                                             10).error
        w = p.start()
        assert w._zygote is zygote and run(w, "result = 'served'")["result"] == "served"
        w.sock.close()
        assert w.finish() == "ok"


def test_replacing_a_first_zygote_spares_the_submissions_of_its_clones() -> None:
    """A zygote that stopped answering is replaced; where it has clones it is only left to
    end, after them: killing it would kill them, and another student's grading."""
    with SandboxPool(jobs=2, entry=ENTRY_NAME, worker_files=WORKER_FILES, preload=()) as p:
        root, clone = p._zygotes
        first, second = p.start(), p.start()
        assert second._zygote is clone
        first.sock.close()
        assert first.finish() == "ok"
        root.broken = True  # as when it stopped answering
        third = p.start()  # its slot, replaced
        assert third._zygote not in (root, clone)
        assert run(third, "result = 'fresh'")["result"] == "fresh"
        assert run(second, "result = 'unharmed'")["result"] == "unharmed"
        assert root.proc is not None and root.proc.poll() is None  # its clone still serves
        for w in (second, third):
            w.sock.close()
            assert w.finish() == "ok"
    assert root.proc.poll() is not None


def test_closing_the_pool_kills_running_workers() -> None:
    with SandboxPool(jobs=1, entry=ENTRY_NAME, worker_files=WORKER_FILES, preload=()) as p:
        w = p.start()
        send(w, "while True:\n    pass\n")
    assert gone(w)
    assert w.reason == "crashed"


@pytest.mark.parametrize("without", ["bwrap,namespaces", "all"])
def test_machines_without_namespaces_still_grade_and_say_what_is_missing(
    monkeypatch: pytest.MonkeyPatch, without: str
) -> None:
    """As in a container whose seccomp profile forbids user namespaces (no bwrap, no
    namespaces), or with only what macOS has (``all``: rlimits and the wall clock)."""
    monkeypatch.setenv("GRADER_SANDBOX_WITHOUT", without)
    mark = f"sbx-degraded-{os.getpid()}-{time.monotonic_ns()}"
    with SandboxPool(entry=ENTRY_NAME, worker_files=WORKER_FILES, preload=()) as p:
        assert p.plan.bwrap is None and not p.plan.namespaces
        for name in ("files-hidden", "read-only", "processes-invisible"):
            assert "GRADER_SANDBOX_WITHOUT" in str(p.plan.missing[name])
        w = p.start()
        reply = run(w, DAEMON.replace("MARK", mark) + "import os\nresult = os.getcwd()")
        scratch = reply["result"]
        assert scratch != "/tmp" and os.path.isdir(scratch)  # a folder of its own, on the host
        w.sock.close()
        assert w.finish() == "ok"
        left = marked(mark)
        if "nothing-outlives" in p.protections:
            assert left == [], p.plan.active["nothing-outlives"]
        else:  # e.g. macOS: said so, and true
            assert len(left) == 2 and "session of its own survives" in str(p.plan.missing[
                "nothing-outlives"])
            for pid in left:
                os.kill(int(pid), signal.SIGKILL)
        assert not os.path.exists(scratch)
    if without == "all":
        assert p.protections == ["time-limit"] or set(p.protections) <= {
            "time-limit", "private-scratch", "processes-unreachable", "no-privileges", "process-cap"}


def test_a_spare_waits_ready_and_its_wall_clock_starts_when_it_is_handed_out() -> None:
    """``spares=1``: the next worker is started while this one is graded, from a zygote of
    its own; it must not lose its wall clock waiting, nor outlive the pool."""
    short = Limits(wall_s=1.0)
    with SandboxPool(jobs=1, limits=short, entry=ENTRY_NAME, worker_files=WORKER_FILES,
                     preload=(), spares=1) as p:
        assert len(p._zygotes) == 2
        first = p.start()
        spare = p._spares[0].result(timeout=60)  # started while ``first`` is held
        assert spare is not first and alive(spare.pid)
        first.sock.close()
        assert first.finish() == "ok"
        time.sleep(1.5)  # longer than its wall clock, before it is handed out
        w = p.start()
        assert w is spare
        assert run(w, "result = 'ready'")["result"] == "ready"
        send(w, "while True:\n    pass\n")
        assert w.finish(grace_s=10) == "timeout"  # 1 s after it was handed out
        longer = p.start(Limits(wall_s=30))  # other limits than the spare was started for
        assert longer is not w and longer.limits.wall_s == 30
        assert run(longer, "result = 2 + 2")["result"] == 4
        longer.sock.close()
        assert longer.finish() == "ok"
        waiting = p._spares[0].result(timeout=60)
    assert waiting.reason == "crashed" and gone(waiting), "closing the pool stops its spare"
    assert gone(first) and gone(w) and gone(longer)


def test_prime_starts_a_spare_before_the_first_submission_and_refill_false_leaves_it_to_prime() -> None:
    """``prime()`` (the check helper, between checks): a worker ready before anything asks;
    ``start(refill=False)`` hands it out without starting the next. Limits that travelled
    as ``as_dict()`` (a check's, through the helper) are the ones the spare enforces."""
    with SandboxPool(jobs=1, entry=ENTRY_NAME, worker_files=WORKER_FILES, preload=(),
                     spares=1) as p:
        p.open()
        assert not p._spares
        p.prime()
        spare = p._spares[0].result(timeout=60)
        p.prime()  # it has all the spares it keeps
        assert len(p._spares) == 1
        travelled = Limits(**p.limits.as_dict())
        assert travelled != p.limits  # cpu_s is spelled out: still the same limits
        w = p.start(travelled, refill=False)
        assert w is spare and not p._spares
        assert run(w, "result = 'ready'")["result"] == "ready"
        w.sock.close()
        assert w.finish() == "ok"
        p.prime()
        assert p._spares[0].result(timeout=60) is not w


def test_a_spare_that_died_while_it_waited_is_not_handed_out() -> None:
    """A helper's spare waits minutes between checks: if something kills it meanwhile, the
    next submission gets a fresh worker, not a dead one."""
    with SandboxPool(jobs=1, entry=ENTRY_NAME, worker_files=WORKER_FILES, preload=(),
                     spares=1) as p:
        p.prime()
        spare = p._spares[0].result(timeout=60)
        os.kill(spare.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while alive(spare.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        w = p.start()
        assert w is not spare
        assert run(w, "result = 'fresh'")["result"] == "fresh"
        w.sock.close()
        assert w.finish() == "ok"


@pytest.mark.parametrize("without", ["", "bwrap,namespaces"])
def test_a_released_worker_has_all_its_output_and_is_reaped_before_the_pool_closes(
    monkeypatch: pytest.MonkeyPatch, without: str
) -> None:
    """``release()`` after the shutdown's answer: the excerpt is whole at once (the worker
    closed its output), the exit and clean-up happen in the background, and the pool waits
    for them. A process the notebook left running holds the output until it is killed
    with the worker's pid namespace, or as an orphan of the zygote: the excerpt then waits
    for that (and a worker whose output does not end is finished in ``release``)."""
    if without:
        monkeypatch.setenv("GRADER_SANDBOX_WITHOUT", without)
    mark = f"sbx-release-{os.getpid()}-{time.monotonic_ns()}"
    holder = ("import subprocess, sys\n"
              f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', '{mark}'],"
              " start_new_session=True)\nprint('started')")
    with SandboxPool(jobs=1) as p:
        w = p.start()
        assert _load_and_shut_down(w, "print('all of it', end='')")["ok"] is True
        w.release()
        assert w.output_excerpt() == "all of it"
        held = p.start()
        assert _load_and_shut_down(held, holder)["ok"] is True
        held.release()
        assert "started" in held.output_excerpt()
        outlives = "nothing-outlives" not in p.protections
    assert w.reason == "ok" and gone(w)
    assert held.reason is not None
    left = marked(mark)
    for pid in left:
        os.kill(int(pid), signal.SIGKILL)
    assert outlives or left == []


def test_the_worker_closes_its_output_when_it_answers_its_shutdown(tmp_path: Path) -> None:
    """What ``release()`` relies on: EOF on the worker's output comes with the shutdown's
    answer, not with the process's exit (here delayed by 30 s)."""
    import subprocess
    import sys

    from grader.runtime import protocol

    ours, theirs = socket.socketpair()
    script = ("import socket, sys, time\nfrom grader.runtime.worker import serve\n"
              "serve(socket.socket(fileno=int(sys.argv[1])))\ntime.sleep(30)\n")
    proc = subprocess.Popen([sys.executable, "-c", script, str(theirs.fileno())],
                            pass_fds=[theirs.fileno()], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, cwd=tmp_path,
                            env=dict(os.environ, PYTHONPATH=str(REPO)))
    theirs.close()
    try:
        ours.settimeout(60)
        protocol.send(ours, {"op": "load"}, {"cells": [[0, "print('last words', end='')"]]})
        assert protocol.recv(ours)[0]["ok"] is True
        protocol.send(ours, {"op": "shutdown"})
        assert protocol.recv(ours)[0]["ok"] is True
        assert proc.stdout is not None
        os.set_blocking(proc.stdout.fileno(), False)
        deadline, out = time.monotonic() + 10, b""
        while time.monotonic() < deadline:
            try:
                chunk = os.read(proc.stdout.fileno(), 1 << 16)
            except BlockingIOError:
                time.sleep(0.01)
                continue
            if not chunk:
                break
            out += chunk
        else:
            pytest.fail(f"no EOF on the worker's output after its shutdown (read {out!r})")
        assert out.endswith(b"last words")
        assert proc.poll() is None  # still alive: the EOF came from the worker, not its exit
    finally:
        proc.kill()
        proc.wait()
        ours.close()


def test_a_zygote_finishing_a_released_worker_is_not_busy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check helper grows its pool when it is busy: a zygote whose released worker is
    being finished in the background comes free in milliseconds, so it must not count."""
    import threading

    go_on = threading.Event()
    finish = SandboxWorker.finish

    def held_finish(self: SandboxWorker, grace_s: float = 2.0) -> str:
        go_on.wait(30)
        return finish(self, grace_s)

    with SandboxPool(jobs=1, entry=ENTRY_NAME, worker_files=WORKER_FILES, preload=()) as p:
        w = p.start()
        assert p.busy()
        monkeypatch.setattr(SandboxWorker, "finish", held_finish)
        w.sock.close()  # the test entry ends at EOF, and its output with it
        w.release()
        assert w.reason is None  # being finished in the background
        assert not p.busy() and p.grow(2) is False
        go_on.set()
    assert w.reason == "ok" and gone(w)


def test_release_waits_for_the_output_to_end_and_else_finishes_the_worker_itself() -> None:
    """``release()`` hands a worker to the background only once its output has ended (its
    excerpt is then whole); while something still holds the output, it finishes it there."""
    from types import SimpleNamespace

    from grader.sandbox.output import OutputTap

    handed: list[SandboxWorker] = []
    pool = SimpleNamespace(_finish_later=handed.append)
    for holds_output in (True, False):
        read_end, write_end = os.pipe()
        w = SandboxWorker(pool, None, 1, 0, Limits())  # type: ignore[arg-type]
        w._tap = OutputTap(read_end)
        finished: list[bool] = []

        def finish(grace_s: float = 2.0, finished: list[bool] = finished) -> str:
            finished.append(True)
            return "ok"

        w.finish = finish  # type: ignore[method-assign]
        os.write(write_end, b"last words")
        if not holds_output:
            os.close(write_end)
        handed.clear()
        w.release(output_wait_s=0.3)
        assert (finished, handed) == (([True], []) if holds_output else ([], [w]))
        assert w.output_excerpt() == "last words"
        if holds_output:
            os.close(write_end)
