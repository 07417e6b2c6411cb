"""``SandboxPool``: warm zygotes that fork one confined worker per submission."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import itertools
import json
import marshal
import os
import queue
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from coursekit import settings
from coursekit.errors import UserError

from ..common.limits import DEFAULT_LIMITS, Limits
from ..runtime import forkserver, wire
from ..runtime.errors import MEMORY_EXIT
from . import bwrap, probe
from ._zygote import Clone, Exit, Kill, Ready, Spawn, Spawned
from .cgroup import PoolCgroups, SubmissionCgroup, kill_until_gone
from .output import OutputTap

_HERE = Path(__file__).resolve().parent
_REPO_GRADER = _HERE.parent
_UID_BASE = 200_000
_uids = itertools.count()
# How long past the longest wall clock of the submissions being graded ``start()`` waits
# for a zygote to come free: a holder is killed at its wall clock, then finished.
RELEASE_MARGIN_S = 60.0


class SandboxError(UserError, RuntimeError):
    """A worker could not be started."""

    exit_code = 3


def default_worker_files() -> dict[str, Path | bytes]:
    """``grader/__init__.py`` and ``grader/runtime/`` (Python files only)."""
    files: dict[str, Path | bytes] = {"grader/__init__.py": b""}
    if (_REPO_GRADER / "__init__.py").is_file():
        files["grader/__init__.py"] = _REPO_GRADER / "__init__.py"
    runtime = _REPO_GRADER / "runtime"
    if runtime.is_dir():
        for path in sorted(runtime.rglob("*.py")):
            files[f"grader/{path.relative_to(_REPO_GRADER).as_posix()}"] = path
    return files


def _build_code_dir(state: Path, worker_files: Mapping[str, Path | bytes]) -> Path:
    """The read-only code folder of the sandbox: zygote (with its ``wire``) + worker code,
    nothing else."""
    root = state / "sbx"
    (root / "_sbx").mkdir(parents=True)
    for code in (_HERE / "_zygote.py", _HERE / "_confine.py", _REPO_GRADER / "runtime" / "wire.py",
                 _REPO_GRADER / "runtime" / "forkserver.py"):
        shutil.copy2(code, root / "_sbx" / code.name)
    for rel, src in worker_files.items():
        dest = root / "code" / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(src if isinstance(src, bytes) else Path(src).read_bytes())
    _compile(root, bytecode_cache())
    for path in [root, *root.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return root


def _compile(root: Path, cache: Path | None) -> None:
    """Byte-compile the code folder's Python files for this interpreter: the sandbox's
    Python runs with ``-B`` on a read-only folder, so without these every worker compiled
    the course's modules again from source. ``UNCHECKED_HASH``: the folder never changes
    while the pool lives, so the caches are used without looking at the sources.

    Compiling the folder's 34 files costs 60-80 ms of CPU (copying them: 10-30), and a
    cold ``grader check`` does it while its other thread imports torch: each file's
    bytecode is kept in ``cache`` (:func:`bytecode_cache`; None: not kept), named by the
    hash of its source and the interpreter's bytecode version, and copied from there the
    next time."""
    import py_compile

    for source in root.rglob("*.py"):
        target = Path(importlib.util.cache_from_source(str(source)))
        data = source.read_bytes()
        kept = cache / f"{hashlib.sha256(data).hexdigest()[:40]}-{_TAG}.pyc" if cache else None
        if kept is not None and _copied(kept, target, _header(data)):
            continue
        with contextlib.suppress(py_compile.PyCompileError, OSError):
            py_compile.compile(str(source), cfile=str(target), doraise=True,
                               invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
            if kept is not None:
                _keep(target, kept)


_TAG = importlib.util.MAGIC_NUMBER.hex()  # this interpreter's bytecode version


def _header(source: bytes) -> bytes:
    """The first 16 bytes of an ``UNCHECKED_HASH`` compiled file of ``source``: the
    interpreter's magic number, the flags (hash-based, not checked) and the source's hash."""
    return importlib.util.MAGIC_NUMBER + (1).to_bytes(4, "little") + importlib.util.source_hash(source)


def _copied(kept: Path, target: Path, header: bytes) -> bool:
    """Copy ``kept`` to ``target`` if it is the whole compiled file of the source with
    ``header`` (one cut short or of another source is compiled again)."""
    try:
        data = kept.read_bytes()
    except OSError:
        return False
    if not data.startswith(header):
        return False
    try:
        marshal.loads(data[len(header):])
    except (EOFError, ValueError, TypeError):
        return False
    with contextlib.suppress(OSError):
        target.parent.mkdir(exist_ok=True)
        target.write_bytes(data)
        return True
    return False


def bytecode_cache() -> Path | None:
    """This user's folder of the code folder's compiled files (``$XDG_CACHE_HOME`` or
    ``~/.cache``, then ``attention-course/sandbox-bytecode``), None where none can be made.
    Only this user writes there, and only the sandbox's Python reads what it holds."""
    folder = settings.cache_home() / "attention-course" / "sandbox-bytecode"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return None
    return folder if os.access(folder, os.W_OK | os.X_OK) else None


def _keep(compiled: Path, kept: Path) -> None:
    """Copy ``compiled`` to ``kept`` whole or not at all (two pools may write it at once)."""
    with contextlib.suppress(OSError):
        fd, partial = tempfile.mkstemp(dir=kept.parent, prefix=".partial-")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(compiled.read_bytes())
            os.replace(partial, kept)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(partial)


# What the worker imports lazily (notebook execution, safetensors replies, plots): loaded
# once per zygote instead of once per submission. None of them starts a thread.
# ``module:function``: the module, then its function called with no argument (its
# result ignored, an exception too: only ever a speed-up).
DEFAULT_PRELOAD: tuple[str, ...] = (
    "numpy",
    "numpy.ctypeslib",  # safetensors.torch converts tensors through it
    "numpy.random",  # a shared object a notebook maps with its first np.random call
    "torch",
    "torch.fx.experimental.symbolic_shapes",  # imported by the first backward()
    "torch._dynamo",  # imported by the first optimizer (lesson 09): seconds
    "safetensors.numpy",
    "safetensors.torch",
    "IPython.core.inputtransformer2",
    "matplotlib",
    "matplotlib.pyplot",
    # the course's own modules that the lessons import (from the pool's code folder: a
    # module not there is skipped), so a notebook's first cell finds them loaded
    "coursekit.text",
    "coursekit.fonts:register_cjk_font",  # lessons 10 and 11 call use_cjk_font in graded cells
    "coursekit.selfcheck",
    "coursekit.earlier",
    "coursekit.numerals",
    "coursekit.data",
    "tqdm.auto",
)


def _seed_matplotlib_cache(dest: Path) -> None:
    """Copy the host's matplotlib font list (if any) so zygotes need not rebuild it (~1 s
    each). Only ``fontlist-*.json`` is copied, never anything else of the user's home."""
    candidates = [settings.matplotlib_config_dir(), str(settings.cache_home() / "matplotlib"),
                  os.path.expanduser("~/.cache/matplotlib")]
    for folder in filter(None, candidates):
        with contextlib.suppress(OSError):
            for src in Path(folder).glob("fontlist-v*.json"):
                shutil.copyfile(src, dest / src.name)
            if any(dest.iterdir()):
                return


def _zygote_env(home: str, mpl_dir: str) -> dict[str, str]:
    env = {
        "PATH": os.pathsep.join(dict.fromkeys([os.path.dirname(sys.executable), "/usr/bin", "/bin"])),
        "LANG": "C.UTF-8",
        "HOME": home,
        "TMPDIR": home,
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": mpl_dir,
    }
    return {**env, **wire.one_thread_env()}


class _Zygote:
    """One warm parent process and its control socket: a process of its own (``proc``), or
    a clone of another zygote (``parent``), forked by it."""

    proc: subprocess.Popen[bytes] | None = None
    parent: _Zygote | None = None
    clone_id = 0

    def __init__(
        self,
        cfg: dict[str, Any],
        code_dir: Path,
        plan: probe.SandboxPlan,
        startup_timeout: float,
        launcher: ThreadPoolExecutor,
    ) -> None:
        theirs = self._open_channel()
        code_root = bwrap.SANDBOX_CODE if plan.bwrap else str(code_dir)
        cfg = dict(
            cfg, ctrl_fd=theirs.fileno(), code_paths=[f"{code_root}/_sbx", f"{code_root}/code"]
        )
        inner = [sys.executable, "-I", "-B", f"{code_root}/_sbx/_zygote.py", json.dumps(cfg)]
        cmd = (
            bwrap.bwrap_command(plan.bwrap, code_dir, inner, os.geteuid() == 0,
                                code_dir.parent / "mpl")
            if plan.bwrap
            else inner
        )
        # bwrap --die-with-parent (and the zygote's own parent-death signal) ties the zygote
        # to the *thread* that forked it: fork from the pool's long-lived launcher thread.
        self.proc = launcher.submit(
            subprocess.Popen,
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            pass_fds=[theirs.fileno()],
            env=_zygote_env("/tmp", bwrap.SANDBOX_MPL)
            if plan.bwrap
            else _zygote_env(str(code_dir.parent / "home"), str(code_dir.parent / "mpl")),
            start_new_session=True,
        ).result()
        theirs.close()
        self._await_ready(startup_timeout, "the sandbox zygote did not start")

    def _open_channel(self) -> socket.socket:
        """Our end of a fresh control socket; returns the zygote's end."""
        ours, theirs = wire.pair()
        self.channel = wire.Channel(ours)
        self.broken = False  # alive but stopped answering: replaced, never reused
        return theirs

    def _await_ready(self, timeout: float, failed: str) -> None:
        try:
            ready = forkserver.expect(self.channel, Ready, timeout)
        except forkserver.NoAnswer as exc:
            self.broken = self.parent is not None  # a clone may still be starting: killed
            self.close()
            raise SandboxError(f"{failed} (got {exc.got!r}); see its traceback on stderr") from None
        self.threads = ready.threads

    @classmethod
    def clone(cls, parent: _Zygote, clone_id: int, timeout: float) -> _Zygote:
        """A zygote forked by ``parent``, with all it imported (in a fraction of a second,
        where starting one imports torch again for seconds). SandboxError if it does not
        say it is ready within ``timeout`` s."""
        self = cls.__new__(cls)
        theirs = self._open_channel()
        self.parent, self.clone_id = parent, clone_id
        try:
            parent.send(Clone(clone_id), [theirs.fileno()])
        except OSError as exc:
            self.channel.close()
            raise SandboxError(f"the sandbox zygote could not be cloned ({exc})") from None
        finally:
            theirs.close()
        self._await_ready(timeout, "a clone of the sandbox zygote did not start")
        return self

    def send(self, msg: Any, fds: Sequence[int] = ()) -> None:
        forkserver.tell(self.channel, msg, fds)

    def recv(self, timeout: float | None) -> Any:
        """The next message (a ``Spawned``, an ``Exit``, or what else came), or None on
        timeout or EOF."""
        try:
            return forkserver.expect(self.channel, (Spawned, Exit), timeout)
        except forkserver.NoAnswer as exc:
            return exc.got

    def alive(self) -> bool:
        if self.parent is not None:
            return self.parent.alive() and not _hung_up(self.channel.sock)  # the clone has ended
        assert self.proc is not None
        return self.proc.poll() is None

    def close(self) -> None:
        self.channel.close()
        if self.parent is not None:  # it exits at the end of its socket; or ask its parent
            if self.broken and self.parent.alive():
                with contextlib.suppress(OSError):
                    self.parent.send(Kill(self.clone_id))
            return
        assert self.proc is not None  # SIGKILLed after its grace: only a process stuck in
        forkserver.Child.started(self.proc, group=True).close(  # the kernel stays 10 s
            grace_s=0.5 if self.broken else 5, killed_s=10)


class SandboxWorker:
    """A running submission; implements ``grader.common.limits.WorkerHandle``."""

    def __init__(
        self, pool: SandboxPool, zygote: _Zygote, sub_id: int, uid: int, limits: Limits
    ) -> None:
        self._pool = pool
        self._zygote = zygote
        self.id = sub_id
        self.uid = uid
        self.limits = limits
        self.ahead = False  # started ahead (a spare): it warms torch up while it waits
        self.pid = 0
        self.cgroup: SubmissionCgroup | None = None
        self.host_scratch: str | None = None
        self.status: int | None = None
        self.reason: str | None = None
        self._kill_reason: str | None = None
        self._deadline_hit = False
        self._lock = threading.Lock()
        self._finish_lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._tap: OutputTap | None = None
        self.sock: socket.socket

    # -- trusted-side controls ------------------------------------------------------------
    def kill(self, reason: str = "timeout") -> None:
        """Kill the worker and everything it spawned; idempotent."""
        with self._lock:
            if self._kill_reason is None:
                self._kill_reason = reason
            self._kill_everything()

    def _kill_everything(self) -> None:
        if self.cgroup is not None:
            self.cgroup.kill_all()
        if self.pid:
            for target in (-self.pid, self.pid):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(target, signal.SIGKILL)
        elif self.status is None:  # not joined yet: only the zygote knows where it is
            with contextlib.suppress(OSError):
                self._zygote.send(Kill(self.id))
        if self.cgroup is None and self._pool.plan.uid_drop:
            _kill_uid(self.uid, 2.0)  # no cgroup: setsid'd descendants still share our uid

    def _start_clock(self) -> None:
        """Its wall clock runs from here: when it is handed out, not when it was forked (a
        spare waits for its submission)."""
        self._timer = threading.Timer(self.limits.wall_s, self._on_deadline)
        self._timer.daemon = True
        self._timer.start()

    def _usable(self) -> bool:
        """A spare that nothing has killed or finished while it waited, and that has not
        ended by itself (a helper's spare waits minutes: something may kill it)."""
        return self._kill_reason is None and self.reason is None and not _hung_up(self.sock)

    def _on_deadline(self) -> None:
        self._deadline_hit = True
        self.kill("timeout")

    @property
    def timed_out(self) -> bool:
        """Killed by its wall clock."""
        return self._deadline_hit

    def output_excerpt(self, max_chars: int = 2000) -> str:
        """A bounded excerpt of what the worker printed (head and tail)."""
        return self._tap.excerpt(max_chars) if self._tap else ""

    @property
    def output_bytes(self) -> int:
        return self._tap.total if self._tap else 0

    def release(self, output_wait_s: float = 0.2) -> None:
        """The worker answered its shutdown and closed its output: its excerpt is complete
        once EOF is read; it is reaped and cleaned up in the background (its exit alone
        takes milliseconds of the kernel's time with torch mapped). A worker whose output
        does not end (a process it started still holds it) is finished here."""
        if self._tap is not None:
            self._tap.join(output_wait_s)
            if not self._tap.ended():
                self.finish()
                return
        self._pool._finish_later(self)

    def finish(self, grace_s: float = 2.0) -> str:
        """Reap and clean up; returns "ok", "memory", "timeout" or "crashed". Thread-safe:
        a second caller (the pool closing) waits for the first one's answer."""
        with self._finish_lock:
            if self.reason is None:
                self._finish(grace_s)
            return self.reason  # type: ignore[return-value]

    def _finish(self, grace_s: float) -> None:
        try:
            self.status = self._wait_exit(grace_s)
            if self.status is None:
                self.kill("timeout")
                self.status = self._wait_exit(10.0)
                if self.status is None:  # killed, yet its zygote never reported the exit
                    self._zygote.broken = True
            with self._lock:
                self._kill_everything()  # daemons left behind by a worker that exited
            if self._pool.plan.uid_drop:
                _kill_uid(self.uid)  # ...and wait until the last one is reaped
            self.reason = self._classify()
        finally:
            self._cleanup()

    def _wait_exit(self, timeout: float) -> int | None:
        if self._zygote.broken:
            return -1
        deadline = time.monotonic() + timeout
        while True:
            msg = self._zygote.recv(max(deadline - time.monotonic(), 0.001))
            if msg is None:
                if not self._zygote.alive():
                    return -1
                return None
            if isinstance(msg, Exit) and msg.id == self.id:
                return int(msg.status)

    def _classify(self) -> str:
        status = -1 if self.status is None else self.status  # -1: its zygote died first
        known = status >= 0
        if known and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
            return "timeout" if self._deadline_hit else "ok"
        if self.cgroup is not None and self.cgroup.oom_kills() > 0:
            return "memory"
        if known and os.WIFEXITED(status) and os.WEXITSTATUS(status) == MEMORY_EXIT:
            return "memory"  # its memory rlimit, reached (grader.runtime.errors.out_of_memory)
        if self._deadline_hit:
            return "timeout"
        if known and os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGXCPU:
            return "timeout"
        if known and os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
            # SIGKILL: ours (kill()) or its own doing
            return self._kill_reason or "crashed"
        if not known and self._kill_reason is not None:
            return self._kill_reason
        return "crashed"  # it ended itself: a signal, or a non-zero exit status

    def _cleanup(self) -> None:
        try:
            if self._timer is not None:
                self._timer.cancel()
            with contextlib.suppress(OSError, AttributeError):
                self.sock.close()
            if self._tap is not None:
                self._tap.join(2.0)
            if self.cgroup is not None:
                try:
                    self.cgroup.remove()
                except OSError:
                    self._pool._stale_cgroups.append(self.cgroup)  # retried at close()
            if self.host_scratch:
                shutil.rmtree(self.host_scratch, ignore_errors=True)
        finally:
            self._pool._release(self, self._zygote, self.status == -1 or self._zygote.broken)


def _uid_processes(uid: int) -> list[int]:
    """Pids (zombies included) whose owner is ``uid``, as seen from here."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if entry.stat().st_uid == uid:
                    found.append(int(entry.name))
    return found


def _kill_uid(uid: int, timeout_s: float = 10.0) -> bool:
    """SIGKILL every process of the submission's own uid until none is left, zombies
    included (they go once their reaper ran); True when none is left."""
    return kill_until_gone(lambda: _uid_processes(uid), timeout_s)


def _hung_up(sock: socket.socket) -> bool:
    """The other end of ``sock`` is closed: the process that held it has ended (a peer
    that waits sends nothing, so anything readable is the end, or data left for later)."""
    try:
        if not select.select([sock], [], [], 0)[0]:
            return False
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except (OSError, ValueError):
        return True


class SandboxPool:
    """Warm pool of sandbox zygotes; ``start()`` forks a fresh worker per submission.

    ``isolation`` is ``"auto"`` (every protection the machine offers), ``"strict"``
    (refuse unless every protection is there) or ``"none"``; ``require`` names protections
    that ``auto`` must not go without. ``plan`` says what is active and what is missing.

    A zygote serves one worker at a time, so a pool holds one per job and per spare: the
    first imports the preloads (seconds), the others are its clones (forks of it that
    share its memory), made in a fraction of a second each.

    ``spares``: workers kept started ahead, each from a zygote of its own, so that
    ``start()`` hands out one that is ready and starts the next in the background (on a
    core the graders leave idle: forking and confining a worker, and its cgroup, then cost
    the submission nothing). A spare's wall clock starts when it is handed out.
    """

    def __init__(
        self,
        jobs: int = 1,
        limits: Limits | None = None,
        isolation: str = "auto",
        preload: tuple[str, ...] = DEFAULT_PRELOAD,
        entry: str = "grader.runtime.worker:serve",
        worker_files: Mapping[str, Path | bytes] | None = None,
        startup_timeout: float = 120.0,
        require: tuple[str, ...] = (),
        answer_timeout: float = 30.0,
        spares: int = 0,
        preload_late: tuple[str, ...] = (),
    ) -> None:
        self.jobs = max(1, jobs)
        self.spares = max(0, spares)
        self.limits = limits or DEFAULT_LIMITS
        self.plan = probe.plan(isolation, require)
        self.isolation = self.plan.isolation
        self.protections: list[str] = self.plan.protections
        self.entry = entry
        self._cfg = {
            "preload": list(preload),
            "preload_late": list(preload_late),  # imported after ``ready``: see its docstring
            "entry": entry,
            "mode": "ns" if self.plan.namespaces else "plain",
            "seccomp": self.plan.seccomp,
            "subreaper": self.plan.subreaper,
            "own_namespaces": self.plan.new_net,  # no bwrap: the zygote's own network namespace
            "parent_death": sys.platform.startswith("linux") and not self.plan.bwrap,
            "in_bwrap": bool(self.plan.bwrap),
            "python_paths": bwrap.import_paths(),
            "keep_under_scratch": bwrap.under_scratch("/tmp", "/dev/shm"),
        }
        self._worker_files = default_worker_files() if worker_files is None else worker_files
        self._startup_timeout = startup_timeout
        self.answer_timeout = answer_timeout  # for a zygote or a new worker to answer
        self._code_dir: Path | None = None
        self._cgroups: PoolCgroups | None = None
        self._free: queue.Queue[_Zygote] = queue.Queue()
        self._zygotes: list[_Zygote] = []
        self._retired: list[_Zygote] = []  # replaced, but left to end with their clones
        self._lock = threading.Lock()
        self._grow_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._closed = False
        self._closing = False  # no new spare; a wait for a zygote gives up
        self._spares: list[Future[SandboxWorker]] = []
        self._spare_maker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sandbox-spare")
        self._finisher = ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="sandbox-end")
        self._ending = 0  # released workers being finished: their zygotes come free soon
        self._active: set[SandboxWorker] = set()
        self._stale_cgroups: list[SubmissionCgroup] = []
        self._launcher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sandbox-launcher")

    # -- lifecycle ------------------------------------------------------------------------
    def __enter__(self) -> SandboxPool:
        try:
            self.open()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self, while_booting: Callable[[], None] | None = None) -> None:
        """Boot the zygotes (each in its own process, ``jobs`` at once); ``while_booting()``
        runs in this thread meanwhile (e.g. the graders' own imports)."""
        if self._code_dir is not None:
            return
        state = Path(tempfile.mkdtemp(prefix="grader-sandbox-"))
        state.chmod(0o755)
        (state / "home").mkdir(mode=0o700)
        (state / "mpl").mkdir(mode=0o700)
        _seed_matplotlib_cache(state / "mpl")
        self._code_dir = _build_code_dir(state, self._worker_files)
        if self.plan.cgroups:
            self._cgroups = PoolCgroups(self.plan.cgroups)
        errors: list[BaseException] = []

        def boot() -> None:
            try:
                first = self._new_zygote()
                self._add_zygote(first)
                for _ in range(self.jobs + self.spares - 1):  # the others: clones of it
                    self._add_zygote(self._new_zygote(clone_of=first))
            except BaseException as exc:  # noqa: BLE001 - re-raised below
                errors.append(exc)

        booting = threading.Thread(target=boot)
        booting.start()
        try:
            if while_booting is not None:
                while_booting()
        finally:
            booting.join()
        if errors:
            self.close()
            raise errors[0]

    def _new_zygote(self, clone_of: _Zygote | None = None) -> _Zygote:
        """A clone of ``clone_of`` (or of another zygote that has its own process) where
        one can be made, else a zygote that starts from nothing."""
        assert self._code_dir is not None
        if clone_of is None:
            with self._lock:
                clone_of = next((z for z in self._zygotes if z.parent is None and not z.broken
                                 and z.alive()), None)
        if clone_of is not None:
            try:
                return _Zygote.clone(clone_of, next(self._ids), self.answer_timeout)
            except SandboxError:
                pass  # e.g. it died meanwhile: start one
        return _Zygote(
            self._cfg, self._code_dir, self.plan, self._startup_timeout, self._launcher
        )

    def _add_zygote(self, zygote: _Zygote) -> None:
        with self._lock:
            self._zygotes.append(zygote)
        self._free.put(zygote)

    def _release(self, worker: SandboxWorker, zygote: _Zygote, dead: bool) -> None:
        with self._lock:
            self._active.discard(worker)
        if self._closed:
            return
        if dead or not zygote.alive():
            try:
                zygote = self._replace(zygote)
            except Exception:  # noqa: BLE001 - this slot is gone; the others keep serving
                return
        self._free.put(zygote)

    def _wait_bound(self, limits: Limits) -> float:
        """How long ``start`` waits for a zygote: the longest wall clock among this request
        and the submissions holding one, plus the time to finish one."""
        with self._lock:
            walls = [w.limits.wall_s for w in self._active]
        return max([limits.wall_s, *walls]) + RELEASE_MARGIN_S

    def _take_zygote(self, wait_s: float) -> _Zygote:
        deadline = time.monotonic() + wait_s
        while True:
            try:
                return self._free.get(timeout=min(1.0, max(deadline - time.monotonic(), 0.01)))
            except queue.Empty:
                with self._lock:
                    if not self._zygotes or self._closed or self._closing:
                        raise SandboxError("no sandbox zygote is left in this pool") from None
                    held = len(self._zygotes)
                if time.monotonic() >= deadline:
                    raise SandboxError(
                        f"no sandbox zygote came free within {wait_s:g} s: all {held} are "
                        "held by submissions that were never finished") from None

    def _replace(self, zygote: _Zygote) -> _Zygote:
        """A fresh zygote in place of one that died or stopped answering."""
        with self._lock:
            if zygote in self._zygotes:
                self._zygotes.remove(zygote)
            clones = any(z.parent is zygote for z in self._zygotes)
        if clones and zygote.alive():  # killing it would kill them, and their submissions
            zygote.channel.close()  # it exits once they have
            with self._lock:
                self._retired.append(zygote)
        else:
            zygote.close()
        fresh = self._new_zygote()
        with self._lock:
            self._zygotes.append(fresh)
        return fresh

    def busy(self) -> bool:
        """Every zygote is serving a submission (``start()`` would wait for one), none of
        them only finishing a released worker (it comes free in milliseconds)."""
        with self._lock:
            return self._free.empty() and not self._ending

    def grow(self, most: int) -> bool:
        """Start one more zygote if every zygote is busy and there are fewer than ``most``
        (a pool that serves requests as they come, e.g. ``grader check``'s helper); True
        when one was added. Thread-safe."""
        with self._grow_lock:
            with self._lock:
                if self._closed or not self._free.empty() or self._ending \
                        or len(self._zygotes) >= most:
                    return False
            try:
                self._add_zygote(self._new_zygote())
            except SandboxError:
                return False
            return True

    def close(self) -> None:
        """Kill what still runs, stop the zygotes, remove cgroups and temporary files."""
        self._closing = True
        self._spare_maker.shutdown(wait=True, cancel_futures=True)  # a spare being started
        self._finisher.shutdown(wait=True)  # workers released, being reaped
        with self._lock:
            active = list(self._active)
        for worker in active:
            worker.kill("crashed")
        for worker in active:
            worker.finish(grace_s=1.0)
        self._closed = True
        for cg in self._stale_cgroups:
            with contextlib.suppress(OSError):
                cg.kill_all(2.0)
                cg.remove()
        with self._lock:
            zygotes, self._zygotes = self._zygotes, []
            zygotes += self._retired
        for zygote in sorted(zygotes, key=lambda z: z.parent is None):  # clones first
            zygote.close()
        self._launcher.shutdown(wait=False)
        if self._cgroups is not None:
            self._cgroups.remove()
        if self._code_dir is not None:
            shutil.rmtree(self._code_dir.parent, ignore_errors=True)

    # -- submissions ----------------------------------------------------------------------
    def start(self, limits: Limits | None = None, wait_s: float | None = None,
              refill: bool = True) -> SandboxWorker:
        """Fork a fresh confined worker; returns once it is ready to serve. ``limits``
        overrides the pool's limits for this submission. Every wait is bounded: for a free
        zygote ``wait_s`` (default: see ``_wait_bound``), then ``answer_timeout`` for the
        zygote and for the worker; past either, ``SandboxError`` says which. A spare handed
        out is replaced at once unless ``refill`` is False (then :meth:`prime` does it)."""
        if self._code_dir is None:
            self.open()
        if self._closed:
            raise SandboxError("the pool is closed")
        limits = limits or self.limits
        worker = self._spare(limits) or self._start(limits, wait_s)
        worker._start_clock()
        if refill:
            self._add_spare(limits)
        return worker

    def prime(self, limits: Limits | None = None) -> None:
        """Start the missing spares for ``limits`` (the pool's by default) in the
        background: before the first submission, or once a burst of them has ended."""
        if self._code_dir is None:
            self.open()
        while self._add_spare(limits or self.limits):
            pass

    def _spare(self, limits: Limits) -> SandboxWorker | None:
        """A spare started for these limits and still fine, or None."""
        with self._lock:
            if not self._spares:
                return None
            future = self._spares.pop(0)
        try:
            worker = future.result()
        except Exception:  # noqa: BLE001 - start() starts one itself, and says what fails
            return None
        if worker.limits.as_dict() == limits.as_dict() and worker._usable():  # as enforced
            return worker
        worker.kill("crashed")
        worker.finish(grace_s=0.5)
        return None

    def _finish_later(self, worker: SandboxWorker) -> None:
        def finish() -> None:
            try:
                worker.finish()
            finally:
                with self._lock:
                    self._ending -= 1

        with self._lock:
            self._ending += 1
        try:
            self._finisher.submit(finish)
        except RuntimeError:  # the pool is closing
            finish()

    def _add_spare(self, limits: Limits) -> bool:
        """Start one more spare, unless the pool has all it keeps; True when one was."""
        with self._lock:
            if self._closing or len(self._spares) >= self.spares:
                return False
            try:
                self._spares.append(self._spare_maker.submit(self._start, limits, None, True))
            except RuntimeError:  # the pool is closing
                return False
            return True

    def _start(self, limits: Limits, wait_s: float | None, ahead: bool = False) -> SandboxWorker:
        zygote = self._take_zygote(self._wait_bound(limits) if wait_s is None else wait_s)
        if not zygote.alive() or zygote.broken:
            try:
                zygote = self._replace(zygote)
            except SandboxError:
                raise
            except Exception as exc:
                raise SandboxError(f"a sandbox zygote died and none could replace it ({exc})") from exc
        sub_id = next(self._ids)
        uid = _UID_BASE + ((os.getpid() % 512) << 12) + next(_uids) % 4096
        worker = SandboxWorker(self, zygote, sub_id, uid, limits)
        worker.ahead = ahead
        with self._lock:
            self._active.add(worker)
        try:
            self._launch(worker, zygote)
        except BaseException:
            worker.kill("crashed")
            worker.finish(grace_s=0.5)
            raise
        return worker

    def _launch(self, worker: SandboxWorker, zygote: _Zygote) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        if hasattr(socket, "SO_PASSCRED"):
            ours.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        worker.sock = ours
        out_r, out_w = os.pipe()
        worker._tap = OutputTap(out_r, keep=worker.limits.output_bytes)
        if self._cgroups is not None:
            worker.cgroup = self._cgroups.submission(
                f"sub-{worker.id}", worker.limits.memory_bytes, worker.limits.max_pids
            )
        try:
            zygote.send(self._spawn_request(worker), [theirs.fileno(), out_w])
        finally:
            theirs.close()
            os.close(out_w)
        msg = zygote.recv(self.answer_timeout)
        while isinstance(msg, Exit) and msg.id != worker.id:
            msg = zygote.recv(self.answer_timeout)  # a late exit report of an earlier worker
        if not isinstance(msg, Spawned):
            if zygote.alive():
                zygote.broken = True
                raise SandboxError(f"the sandbox zygote did not answer within "
                                   f"{self.answer_timeout:g} s (got {msg!r}); it is replaced")
            raise SandboxError(f"the sandbox zygote died before forking a worker (got {msg!r})")
        worker.pid = self._join(worker, ours, msg.pid)
        self._await_ready(ours)

    def _spawn_request(self, worker: SandboxWorker) -> Spawn:
        plan, lim = self.plan, worker.limits
        if plan.namespaces:
            scratch = "/tmp"  # a fresh tmpfs in the submission's own mount namespace
        elif plan.bwrap:
            scratch = f"/tmp/scratch-{worker.id}"  # the zygote removes it afterwards
        else:
            scratch = tempfile.mkdtemp(prefix=f"grader-sbx-scratch-{worker.id}-")
            worker.host_scratch = scratch
        rlimits: dict[str, int] = {}
        if plan.rlimits:
            rlimits = {k: v for k, v in lim.as_dict().items()
                       if k in ("cpu_s", "file_size_bytes", "open_files")}
            if sys.platform.startswith("linux"):  # elsewhere we cannot count what it counts
                # even beside a pids cgroup: a fork over RLIMIT_NPROC fails before copying
                # the address space, a fork over pids.max only after (a fork bomb crawls)
                rlimits["max_pids"] = lim.max_pids
            if "memory" not in plan.cgroups:
                rlimits["memory_bytes"] = lim.memory_bytes
        return Spawn(
            id=worker.id,
            uid=worker.uid if plan.uid_drop else os.getuid(),
            gid=worker.uid if plan.uid_drop else os.getgid(),
            scratch=scratch,
            scratch_bytes=lim.scratch_bytes,
            tmpfs=plan.namespaces,
            drop_uid=plan.uid_drop,
            drop_caps=plan.namespaces or bool(plan.bwrap),
            no_new_privs=plan.no_new_privs,
            rlimits=rlimits,
            warm=worker.ahead,
        )

    def _join(self, worker: SandboxWorker, sock: socket.socket, pid: int) -> int:
        """Receive the worker's pid (translated by the kernel), put it in its cgroup, go.
        ``pid``: the zygote's view, right where there is no pid namespace in between."""
        sock.settimeout(self.answer_timeout)
        try:
            data, ancdata, _, _ = sock.recvmsg(1, socket.CMSG_SPACE(64))
        except TimeoutError:
            raise SandboxError(f"the new worker did not answer within {self.answer_timeout:g} s"
                               ) from None
        if data == b"e":
            raise SandboxError(f"the sandbox could not confine a worker: {_read_error(sock)}")
        if data != b"h":
            raise SandboxError("the worker died before its handshake")
        for level, kind, payload in ancdata:
            if level == socket.SOL_SOCKET and kind == getattr(socket, "SCM_CREDENTIALS", None):
                pid = struct.unpack("3i", payload[:12])[0]  # the kernel translated it for us
        if hasattr(socket, "SO_PASSCRED"):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 0)
        if worker.cgroup is not None:
            worker.cgroup.add(pid)
        sock.sendall(b"g")
        return pid

    @staticmethod
    def _await_ready(sock: socket.socket) -> None:
        try:
            first = sock.recv(1)
        except TimeoutError:
            raise SandboxError("the worker did not say it was ready in time") from None
        if first == b"r":
            sock.settimeout(None)
            return
        detail = _read_error(sock) if first == b"e" else ""
        raise SandboxError("the worker failed to confine itself: " + (detail or "it died"))


def _read_error(sock: socket.socket) -> str:
    with contextlib.suppress(OSError):
        return sock.recv(4096).decode("utf-8", "replace")
    return ""
