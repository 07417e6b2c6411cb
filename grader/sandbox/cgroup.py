"""Per-submission cgroups: the ``memory`` and ``pids`` controllers, on cgroup v1, v2 or both.

Where each controller lives is read per controller (``hierarchies()``): a cgroup v1
hierarchy of its own, or the unified v2 one (a "hybrid" machine has some of each). The
trusted side makes one group for the pool below a writable parent and one group per
submission below that, moves the worker in before any student code runs, and kills every
member at the end (``cgroup.kill`` where v2 has it).

cgroup v2 allows controllers only in groups without processes of their own: when our own
group holds processes (a container's root group, or a delegated scope that holds just the
grader), they move into a leaf child (``leaf``) first, and the controllers are enabled in
the group's ``cgroup.subtree_control``. Everything reads and writes below ``root`` (the
real ``/sys/fs/cgroup`` unless a test passes a folder standing in for it).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
CONTROLLERS = ("memory", "pids")
LEAF = "leaf"


@dataclass(frozen=True)
class Hierarchy:
    """One mounted cgroup hierarchy, as this process sees it."""

    version: int  # 1 or 2
    mount: Path  # where it is mounted
    mount_root: str  # which of its groups the mount shows at ``mount`` ("/" unless bound)
    own: str  # this process's group in it, as /proc/self/cgroup says

    @property
    def own_dir(self) -> Path:
        rel = os.path.relpath(self.own, self.mount_root) if self.own != self.mount_root else ""
        return self.mount / rel if rel and not rel.startswith("..") else self.mount


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def hierarchies(
    mountinfo: str | None = None, proc_cgroup: str | None = None, root: Path = CGROUP_ROOT
) -> dict[str, Hierarchy]:
    """Where each of ``CONTROLLERS`` lives: ``{"memory": Hierarchy(1, ...), ...}``.

    ``mountinfo`` and ``proc_cgroup`` default to this process's ``/proc/self/mountinfo``
    and ``/proc/self/cgroup``; a controller that no hierarchy offers is left out.
    """
    if mountinfo is None:
        mountinfo = _read(Path("/proc/self/mountinfo"))
    if proc_cgroup is None:
        proc_cgroup = _read(Path("/proc/self/cgroup"))
    own_v1: dict[str, str] = {}
    own_v2 = "/"
    for line in proc_cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            own_v2 = parts[2]
        for name in parts[1].split(","):
            own_v1[name] = parts[2]
    found: dict[str, Hierarchy] = {}
    unified: tuple[Path, str] | None = None
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 5 or len(tail) < 3:
            continue
        mount_root, mount = fields[3], Path(fields[4])
        if not str(mount).startswith(str(root)):
            continue
        if tail[0] == "cgroup2":
            unified = (mount, mount_root)
        elif tail[0] == "cgroup":
            for name in tail[2].split(","):
                if name in CONTROLLERS and name not in found:
                    found[name] = Hierarchy(1, mount, mount_root, own_v1.get(name, "/"))
    if unified is not None:
        h = Hierarchy(2, unified[0], unified[1], own_v2)
        offered = _read(h.own_dir / "cgroup.controllers").split()
        for name in CONTROLLERS:
            if name not in found and name in offered:
                found[name] = h
    return found


def _writable_dir(path: Path) -> bool:
    probe = path / f"grader-probe-{uuid.uuid4().hex[:8]}"
    try:
        probe.mkdir()
    except OSError:
        return False
    with contextlib.suppress(OSError):
        probe.rmdir()
    return True


def _write(path: Path, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


def _pids(path: Path) -> list[int]:
    return [int(p) for p in _read(path / "cgroup.procs").split()]


def _enabled(path: Path) -> set[str]:
    return {c.lstrip("+") for c in _read(path / "cgroup.subtree_control").split()}


def _is_true_root(path: Path) -> bool:
    """The real root group (no ``cgroup.type``): processes and controllers may mix there."""
    return (path / "cgroup.procs").exists() and not (path / "cgroup.type").exists()


def _into_leaf(base: Path) -> None:
    """Move every process of ``base`` into ``base/leaf`` (v2: no processes where
    controllers are enabled)."""
    leaf = base / LEAF
    leaf.mkdir(exist_ok=True)
    moved: set[int] = set()
    for _ in range(5):
        pids = [p for p in _pids(base) if p not in moved]
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                _write(leaf / "cgroup.procs", str(pid))
            moved.add(pid)


def enable_controllers(path: Path, controllers: Iterable[str]) -> None:
    wanted = [c for c in controllers if c not in _enabled(path)]
    if wanted:
        _write(path / "cgroup.subtree_control", " ".join(f"+{c}" for c in wanted))


def prepare_v2(h: Hierarchy, controllers: list[str]) -> Path:
    """A v2 group below which the pool may create groups with ``controllers``; raises
    OSError saying why there is none."""
    base = h.own_dir
    offered = _read(base / "cgroup.controllers").split()
    lacking = [c for c in controllers if c not in offered]
    if lacking:
        raise OSError(f"cgroup v2 offers no {'/'.join(lacking)} controller in {base}")
    if set(controllers) <= _enabled(base):
        if _writable_dir(base):
            return base
        raise OSError(f"{base} is not writable (not delegated to this user)")
    if not _writable_dir(base):
        raise OSError(f"{base} is not writable (not delegated to this user)")
    procs = _pids(base)
    if procs and not _is_true_root(base):
        ours = set(procs) <= {os.getpid()}
        if not (ours or h.own == "/" or os.geteuid() != 0):
            raise OSError(
                f"{base} holds other processes, and cgroup v2 allows no controllers there"
            )
        _into_leaf(base)
    enable_controllers(base, controllers)
    return base


def parent_dirs(controllers: Iterable[str] = CONTROLLERS, root: Path = CGROUP_ROOT,
                mountinfo: str | None = None, proc_cgroup: str | None = None
                ) -> tuple[dict[str, tuple[int, Path]], dict[str, str]]:
    """Where the pool may create its groups, per controller: ``({controller: (version,
    parent)}, {controller: why not})``. May enable controllers in a v2 group of ours."""
    found = hierarchies(mountinfo, proc_cgroup, root)
    usable: dict[str, tuple[int, Path]] = {}
    reasons: dict[str, str] = {}
    v2_wanted = [c for c in controllers if c in found and found[c].version == 2]
    v2_parent: Path | None = None
    if v2_wanted:
        try:
            v2_parent = prepare_v2(found[v2_wanted[0]], v2_wanted)
        except OSError as exc:
            reasons.update(dict.fromkeys(v2_wanted, f"cgroup v2: {exc}"))
    for c in controllers:
        h = found.get(c)
        if h is None:
            reasons[c] = f"no cgroup hierarchy offers the '{c}' controller"
        elif h.version == 2:
            if v2_parent is not None:
                usable[c] = (2, v2_parent)
        else:
            parent = next((d for d in (h.own_dir, h.mount) if d.is_dir() and _writable_dir(d)),
                          None)
            if parent is None:
                reasons[c] = f"cgroup v1: neither {h.own_dir} nor {h.mount} is writable"
            else:
                usable[c] = (1, parent)
    return usable, reasons


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
    """A group per hierarchy for a whole pool; submissions get children of it."""

    def __init__(self, parents: dict[str, tuple[int, Path]]) -> None:
        name = f"grader-sandbox-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.groups: dict[Path, tuple[int, list[str]]] = {}  # pool group -> version, controllers
        by_parent: dict[Path, tuple[int, list[str]]] = {}
        for controller, (version, parent) in parents.items():
            by_parent.setdefault(parent, (version, []))[1].append(controller)
        try:
            for parent, (version, controllers) in by_parent.items():
                path = parent / name
                path.mkdir()
                self.groups[path] = (version, controllers)
                if version == 2:
                    enable_controllers(path, controllers)
        except OSError:
            self.remove()
            raise

    @property
    def controllers(self) -> list[str]:
        return [c for _, cs in self.groups.values() for c in cs]

    def submission(self, name: str, memory_bytes: int, max_pids: int) -> SubmissionCgroup:
        return SubmissionCgroup(
            [(path / name, v, cs) for path, (v, cs) in self.groups.items()], memory_bytes, max_pids
        )

    def remove(self) -> None:
        for path in self.groups:
            with contextlib.suppress(OSError):
                _rmdir(path, 2.0)


_LIMIT_FILES = {  # (version, controller) -> [(file, required)]
    (1, "memory"): [("memory.limit_in_bytes", True), ("memory.memsw.limit_in_bytes", False)],
    (1, "pids"): [("pids.max", True)],
    (2, "memory"): [("memory.max", True), ("memory.swap.max", False)],
    (2, "pids"): [("pids.max", True)],
}


class SubmissionCgroup:
    """One submission's group in each hierarchy: limits, members, kill, OOM count."""

    def __init__(
        self, groups: list[tuple[Path, int, list[str]]], memory_bytes: int, max_pids: int
    ) -> None:
        self.groups = groups
        values = {"memory": str(memory_bytes), "pids": str(max_pids)}
        try:
            for path, version, controllers in groups:
                path.mkdir()
                for controller in controllers:
                    for name, required in _LIMIT_FILES[(version, controller)]:
                        value = "0" if name == "memory.swap.max" else values[controller]
                        try:
                            _write(path / name, value)
                        except OSError:
                            if required:
                                raise
        except OSError:
            with contextlib.suppress(OSError):
                self.remove()
            raise

    @property
    def dirs(self) -> list[Path]:
        return [path for path, _, _ in self.groups]

    def add(self, pid: int) -> None:
        for path in self.dirs:
            _write(path / "cgroup.procs", str(pid))

    def pids(self) -> set[int]:
        found: set[int] = set()
        for path in self.dirs:
            with contextlib.suppress(OSError, ValueError):
                found.update(_pids(path))
        return found

    def kill_all(self, timeout_s: float = 10.0) -> bool:
        """Kill every member (``cgroup.kill`` on v2 where it exists, then SIGKILL whatever
        is still listed) until the groups are empty; True when they are."""
        for path, version, _ in self.groups:
            if version == 2:
                with contextlib.suppress(OSError):
                    _write(path / "cgroup.kill", "1")
        return kill_until_gone(self.pids, timeout_s)

    def oom_kills(self) -> int:
        for path, version, controllers in self.groups:
            if "memory" not in controllers:
                continue
            name = "memory.events" if version == 2 else "memory.oom_control"
            for line in _read(path / name).splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    with contextlib.suppress(ValueError):
                        return int(value)
        return 0

    def remove(self) -> None:
        """Remove every hierarchy's group; raises the first failure after trying all."""
        errors: list[OSError] = []
        for path in self.dirs:
            try:
                _rmdir(path)
            except OSError as exc:
                errors.append(exc)
        if errors:
            raise errors[0]
