"""Per-submission cgroups on v1, v2 and hybrid machines.

A temporary folder stands in for ``/sys/fs/cgroup`` (with the mountinfo and
``/proc/self/cgroup`` text a machine of each kind has): the tests check the files the
grader writes and reads there. Where this machine has cgroup v2, the same code also runs
against the real thing (``cgroup.kill``, membership, and ``memory.max`` where the memory
controller is on v2).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader.sandbox import cgroup
from grader.sandbox.cgroup import Hierarchy, PoolCgroups, SubmissionCgroup

pytestmark = pytest.mark.sandbox

V1_MOUNTINFO = """\
30 25 0:26 / {root} rw,nosuid,nodev,noexec - tmpfs tmpfs ro,mode=755
36 30 0:31 / {root}/memory rw,relatime shared:12 - cgroup cgroup rw,memory
37 30 0:32 / {root}/pids rw,relatime shared:13 - cgroup cgroup rw,pids
38 30 0:33 / {root}/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct
"""
V1_CGROUP = "5:pids:/user.slice\n4:memory:/grading/job-7\n2:cpu,cpuacct:/\n0::/\n"
V2_MOUNTINFO = "29 24 0:26 / {root} rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw\n"
HYBRID_MOUNTINFO = V1_MOUNTINFO.replace("37 30 0:32 / {root}/pids rw,relatime shared:13 - cgroup cgroup rw,pids\n", "") + (
    "39 30 0:34 / {root}/unified rw,relatime - cgroup2 cgroup2 rw\n")


def fake_group(path: Path, controllers: str = "memory pids", procs: str = "",
               root: bool = False) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "cgroup.controllers").write_text(controllers + "\n")
    (path / "cgroup.subtree_control").write_text("")
    (path / "cgroup.procs").write_text(procs)
    if not root:
        (path / "cgroup.type").write_text("domain\n")
    return path


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """Every write the cgroup code makes, in order, as (file name, value)."""
    seen: list[tuple[str, str]] = []
    real = cgroup._write

    def record(path: Path, value: str) -> None:
        seen.append((path.name, value))
        real(path, value)

    monkeypatch.setattr(cgroup, "_write", record)
    return seen


def test_v1_each_controller_in_its_own_hierarchy(tmp_path: Path) -> None:
    found = cgroup.hierarchies(V1_MOUNTINFO.format(root=tmp_path), V1_CGROUP, tmp_path)
    assert found["memory"] == Hierarchy(1, tmp_path / "memory", "/", "/grading/job-7")
    assert found["memory"].own_dir == tmp_path / "memory" / "grading" / "job-7"
    assert found["pids"].version == 1 and found["pids"].own_dir == tmp_path / "pids" / "user.slice"


def test_v2_only_where_the_controllers_are_offered(tmp_path: Path) -> None:
    own = "/user.slice/user-1000.slice/user@1000.service/app.slice/grade.scope"
    fake_group(tmp_path / own.lstrip("/"), "cpu memory pids")
    found = cgroup.hierarchies(V2_MOUNTINFO.format(root=tmp_path), f"0::{own}\n", tmp_path)
    assert {c: h.version for c, h in found.items()} == {"memory": 2, "pids": 2}
    assert found["memory"].own_dir == tmp_path / own.lstrip("/")
    fake_group(tmp_path / own.lstrip("/"), "cpu")  # not delegated to us
    assert cgroup.hierarchies(V2_MOUNTINFO.format(root=tmp_path), f"0::{own}\n", tmp_path) == {}


def test_hybrid_is_decided_per_controller(tmp_path: Path) -> None:
    fake_group(tmp_path / "unified", "pids hugetlb", root=True)
    found = cgroup.hierarchies(HYBRID_MOUNTINFO.format(root=tmp_path), V1_CGROUP, tmp_path)
    assert found["memory"].version == 1 and found["pids"].version == 2
    assert found["pids"].own_dir == tmp_path / "unified"


def test_a_bind_mounted_hierarchy_shows_our_group_at_its_mount(tmp_path: Path) -> None:
    """A container sees its own group at the mount point (mountinfo's root field)."""
    mountinfo = f"36 30 0:31 /docker/abc {tmp_path}/memory rw - cgroup cgroup rw,memory\n"
    found = cgroup.hierarchies(mountinfo, "4:memory:/docker/abc\n", tmp_path)
    assert found["memory"].own_dir == tmp_path / "memory"


def test_v2_container_root_moves_its_processes_into_a_leaf(
    tmp_path: Path, writes: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """cgroup v2: no controllers where processes live. In a container (our group is the
    namespace's root, "/"), every process moves to ``leaf`` first, then the controllers
    are enabled for the groups the pool makes."""
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    fake_group(tmp_path, procs="1\n42\n")
    mountinfo = V2_MOUNTINFO.format(root=tmp_path)
    usable, reasons = cgroup.parent_dirs(root=tmp_path, mountinfo=mountinfo, proc_cgroup="0::/\n")
    assert reasons == {} and usable == {"memory": (2, tmp_path), "pids": (2, tmp_path)}
    assert writes == [("cgroup.procs", "1"), ("cgroup.procs", "42"),
                      ("cgroup.subtree_control", "+memory +pids")]
    assert (tmp_path / "leaf").is_dir()


def test_v2_refuses_to_move_processes_it_does_not_own(
    tmp_path: Path, writes: list[tuple[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Root in a login session's group (systemd's): other processes live there, and
    moving them would fight systemd; the grader falls back to rlimits and says why."""
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    own = "/user.slice/user-0.slice/session-3.scope"
    fake_group(tmp_path / own.lstrip("/"), procs="1200\n1201\n")
    usable, reasons = cgroup.parent_dirs(root=tmp_path, mountinfo=V2_MOUNTINFO.format(
        root=tmp_path), proc_cgroup=f"0::{own}\n")
    assert usable == {} and "holds other processes" in reasons["memory"]
    assert writes == []


def test_v2_delegated_to_a_user(tmp_path: Path, writes: list[tuple[str, str]],
                                monkeypatch: pytest.MonkeyPatch) -> None:
    """``systemd-run --user --scope -p Delegate=yes python -m grader grade ...``: the
    scope is the user's to organise; the grader moves itself into ``leaf``."""
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    own = "/user.slice/user-1000.slice/user@1000.service/app.slice/run-r1.scope"
    base = fake_group(tmp_path / own.lstrip("/"), procs=f"{os.getpid()}\n")
    usable, _ = cgroup.parent_dirs(root=tmp_path, mountinfo=V2_MOUNTINFO.format(root=tmp_path),
                                   proc_cgroup=f"0::{own}\n")
    assert usable == {"memory": (2, base), "pids": (2, base)}
    assert writes == [("cgroup.procs", str(os.getpid())), ("cgroup.subtree_control", "+memory +pids")]


def test_v2_controllers_already_enabled_need_no_move(tmp_path: Path, writes: list) -> None:
    base = fake_group(tmp_path / "grading", procs="")
    (base / "cgroup.subtree_control").write_text("memory pids\n")
    usable, _ = cgroup.parent_dirs(root=tmp_path, mountinfo=V2_MOUNTINFO.format(root=tmp_path),
                                   proc_cgroup="0::/grading\n")
    assert usable["memory"] == (2, base) and writes == []


def test_v2_submission_files(tmp_path: Path, writes: list[tuple[str, str]]) -> None:
    pool = PoolCgroups({"memory": (2, tmp_path), "pids": (2, tmp_path)})
    (group,) = pool.groups
    assert writes == [("cgroup.subtree_control", "+memory +pids")]
    sub = pool.submission("sub-1", 750 << 20, 64)
    assert writes[1:] == [("memory.max", str(750 << 20)), ("memory.swap.max", "0"),
                          ("pids.max", "64")]
    sub.add(4321)
    assert writes[-1] == ("cgroup.procs", "4321")
    (group / "sub-1" / "cgroup.procs").write_text("")  # the kernel empties it as they die
    assert sub.kill_all(timeout_s=1.0)
    assert writes[-1] == ("cgroup.kill", "1")
    (group / "sub-1" / "memory.events").write_text("low 0\nhigh 0\nmax 9\noom 1\noom_kill 1\n")
    assert sub.oom_kills() == 1
    for name in ("cgroup.procs", "memory.max", "memory.swap.max", "pids.max", "cgroup.kill",
                 "memory.events"):
        (group / "sub-1" / name).unlink()
    sub.remove()
    (group / "cgroup.subtree_control").unlink()
    pool.remove()
    assert list(tmp_path.iterdir()) == []


def test_v1_submission_files(tmp_path: Path, writes: list[tuple[str, str]]) -> None:
    (tmp_path / "memory").mkdir()
    (tmp_path / "pids").mkdir()
    pool = PoolCgroups({"memory": (1, tmp_path / "memory"), "pids": (1, tmp_path / "pids")})
    sub = pool.submission("sub-2", 1 << 30, 32)
    assert writes == [("memory.limit_in_bytes", str(1 << 30)),
                      ("memory.memsw.limit_in_bytes", str(1 << 30)), ("pids.max", "32")]
    sub.add(99)
    assert writes[-2:] == [("cgroup.procs", "99"), ("cgroup.procs", "99")]
    memory = next(p for p in sub.dirs if p.parent.parent.name == "memory")
    (memory / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
    assert sub.oom_kills() == 2
    assert not [n for n, _ in writes if n == "cgroup.kill"]


# -- the real thing ----------------------------------------------------------------------


def _real_v2() -> Path | None:
    """A writable group of ours on this machine's cgroup v2 hierarchy, or None."""
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        if " - cgroup2 " in line:
            mount = Path(line.split()[4])
            own = next((ln[3:] for ln in Path("/proc/self/cgroup").read_text().splitlines()
                        if ln.startswith("0::")), "/")
            for candidate in (mount / own.lstrip("/"), mount):
                if candidate.is_dir() and cgroup._writable_dir(candidate):
                    return candidate
    return None


REAL_V2 = _real_v2()
needs_v2 = pytest.mark.skipif(REAL_V2 is None,
                              reason="no writable cgroup v2 hierarchy on this machine")


@needs_v2
def test_real_v2_kill_takes_every_member() -> None:
    """A submission's group on the real v2 hierarchy: membership, cgroup.kill (or the
    kill loop) reaching a setsid'd grandchild, removal."""
    assert REAL_V2 is not None
    sub = SubmissionCgroup([(REAL_V2 / f"grader-test-{os.getpid()}", 2, [])], 0, 0)
    try:
        child = subprocess.Popen([sys.executable, "-c", (
            "import os, sys, time\n"
            "sys.stdin.read(1)\n"  # wait until we are in the group
            "if os.fork() == 0:\n    os.setsid()\n    time.sleep(600)\n"
            "time.sleep(600)\n")], stdin=subprocess.PIPE)
        sub.add(child.pid)
        child.stdin.write(b"x")
        child.stdin.flush()
        deadline = time.monotonic() + 10
        while len(sub.pids()) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(sub.pids()) == 2
        has_kill = (sub.dirs[0] / "cgroup.kill").exists()
        assert sub.kill_all(timeout_s=10)
        child.wait(timeout=10)
        assert sub.pids() == set()
        print(f"\ncgroup.kill {'present' if has_kill else 'absent (kill loop)'} on this kernel")
    finally:
        sub.kill_all(timeout_s=5)
        sub.remove()


def test_real_v2_memory_max_kills_and_counts() -> None:
    """Where the grader would put memory on cgroup v2 here, a bomb is OOM-killed and
    counted in memory.events."""
    usable, reasons = cgroup.parent_dirs()
    if usable.get("memory", (1, None))[0] != 2:
        pytest.skip(f"the grader's memory cap is not on cgroup v2 here: {usable or reasons}")
    pool = PoolCgroups({c: usable[c] for c in ("memory", "pids") if c in usable})
    sub = pool.submission("sub-1", 64 << 20, 16)
    try:
        child = subprocess.Popen([sys.executable, "-c", (
            "import sys\nsys.stdin.read(1)\nhog = bytearray(512 << 20)\n"
            "for i in range(0, len(hog), 4096):\n    hog[i] = 1\n")], stdin=subprocess.PIPE)
        sub.add(child.pid)
        child.stdin.write(b"x")
        child.stdin.flush()
        assert child.wait(timeout=60) == -9
        assert sub.oom_kills() >= 1
    finally:
        sub.kill_all(timeout_s=5)
        sub.remove()
        pool.remove()
