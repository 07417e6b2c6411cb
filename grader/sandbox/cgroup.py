"""Per-submission cgroups (v1 ``memory`` and ``pids`` controllers).

The trusted side creates one group per submission under a pool group, below the
grading process's own cgroup when that is writable (so the grader's own limits still
apply), moves the worker in before any student code runs, and kills every member at
the end.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
CONTROLLERS = ("memory", "pids")


def _own_relative_path(controller: str) -> str:
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return "/"
    for line in lines:
        _, names, path = line.split(":", 2)
        if controller in names.split(","):
            return path
    return "/"


def _writable_dir(path: Path) -> bool:
    probe = path / f"grader-probe-{uuid.uuid4().hex[:8]}"
    try:
        probe.mkdir()
    except OSError:
        return False
    with contextlib.suppress(OSError):
        probe.rmdir()
    return True


def parent_dir(controller: str) -> Path | None:
    """Where this process may create groups for ``controller`` (v1), or None."""
    base = CGROUP_ROOT / controller
    if not (base / "cgroup.procs").exists():
        return None
    own = base / _own_relative_path(controller).lstrip("/")
    for candidate in (own, base):
        if candidate.is_dir() and _writable_dir(candidate):
            return candidate
    return None


def available_controllers() -> list[str]:
    return [c for c in CONTROLLERS if parent_dir(c) is not None]


def _write(path: Path, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


def _rmdir(path: Path, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def kill_until_gone(list_pids: Callable[[], Iterable[int]], timeout_s: float) -> bool:
    """SIGKILL every process list_pids() names, again and again, until it names none
    (zombies go once their reaper ran); True when none is left within timeout_s."""
    deadline = time.monotonic() + timeout_s
    while pids := list(list_pids()):
        if time.monotonic() > deadline:
            return False
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.002)
    return True


class PoolCgroups:
    """A group per controller for a whole pool; submissions get children of it."""

    def __init__(self, controllers: list[str]) -> None:
        self.dirs: dict[str, Path] = {}
        name = f"grader-sandbox-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        for controller in controllers:
            parent = parent_dir(controller)
            if parent is None:
                raise OSError(f"cgroup controller {controller!r} is not writable")
            path = parent / name
            path.mkdir()
            self.dirs[controller] = path

    def submission(self, name: str, memory_bytes: int, max_pids: int) -> SubmissionCgroup:
        return SubmissionCgroup({c: d / name for c, d in self.dirs.items()}, memory_bytes, max_pids)

    def remove(self) -> None:
        for path in self.dirs.values():
            with contextlib.suppress(OSError):
                _rmdir(path, 2.0)


class SubmissionCgroup:
    def __init__(self, dirs: dict[str, Path], memory_bytes: int, max_pids: int) -> None:
        self.dirs = dirs
        for controller, path in dirs.items():
            path.mkdir()
            if controller == "memory":
                _write(path / "memory.limit_in_bytes", str(memory_bytes))
                if (path / "memory.memsw.limit_in_bytes").exists():
                    _write(path / "memory.memsw.limit_in_bytes", str(memory_bytes))
            elif controller == "pids":
                _write(path / "pids.max", str(max_pids))

    def add(self, pid: int) -> None:
        for path in self.dirs.values():
            _write(path / "cgroup.procs", str(pid))

    def pids(self) -> set[int]:
        found: set[int] = set()
        for path in self.dirs.values():
            with contextlib.suppress(OSError):
                found.update(int(p) for p in (path / "cgroup.procs").read_text().split())
        return found

    def kill_all(self, timeout_s: float = 10.0) -> bool:
        """SIGKILL every member until the group is empty; True when it is."""
        return kill_until_gone(self.pids, timeout_s)

    def oom_kills(self) -> int:
        path = self.dirs.get("memory")
        if path is None:
            return 0
        with contextlib.suppress(OSError, ValueError):
            for line in (path / "memory.oom_control").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        return 0

    def memory_peak(self) -> int:
        path = self.dirs.get("memory")
        if path is None:
            return 0
        with contextlib.suppress(OSError, ValueError):
            return int((path / "memory.max_usage_in_bytes").read_text())
        return 0

    def remove(self) -> None:
        """Remove every controller's group; raises the first failure after trying all."""
        errors: list[OSError] = []
        for path in self.dirs.values():
            try:
                _rmdir(path)
            except OSError as exc:
                errors.append(exc)
        if errors:
            raise errors[0]
