"""Confinement of one freshly forked submission process (runs inside the sandbox).

This module is copied into the sandbox next to ``_zygote.py``: it imports only the
standard library (and ``pyseccomp`` when seccomp is enabled), never anything from
``grader``.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import resource
import socket
import sys
from collections.abc import Mapping, Sequence
from typing import Any

PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_BIND = 0x1000
# statvfs f_flag bits -> the mount flags a remount must keep (a locked mount refuses to lose them)
_KEPT_FLAGS = {0x2: MS_NOSUID, 0x4: MS_NODEV, 0x8: MS_NOEXEC, 0x400: 0x400, 0x800: 0x800,
               0x1000: 0x200000}
MS_REC = 0x4000
MS_PRIVATE = 0x40000
_CAP_VERSION_3 = 0x20080522
_LAST_CAP = 63

# Namespace-creating clone flags (CLONE_NEWTIME, NEWNS, NEWCGROUP, NEWUTS, NEWIPC,
# NEWUSER, NEWPID, NEWNET).
NAMESPACE_FLAGS = (
    0x00000080,
    0x00020000,
    0x02000000,
    0x04000000,
    0x08000000,
    0x10000000,
    0x20000000,
    0x40000000,
)
DENIED_SYSCALLS = (
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsmount",
    "fsconfig",
    "fspick",
    "mount_setattr",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "pidfd_getfd",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "acct",
    "swapon",
    "swapoff",
    "reboot",
    "syslog",
    "quotactl",
    "name_to_handle_at",
    "open_by_handle_at",
    "lookup_dcookie",
    "vhangup",
)

_libc = ctypes.CDLL(None, use_errno=True)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def build_seccomp_filter() -> Any:
    """Compile the filter once in the zygote; children only ``load()`` it."""
    import pyseccomp as sc

    flt = sc.SyscallFilter(defaction=sc.ALLOW)
    deny = sc.ERRNO(errno.EPERM)
    flt.add_rule(sc.ERRNO(errno.EAFNOSUPPORT), "socket", sc.Arg(0, sc.NE, socket.AF_UNIX))
    flt.add_rule(sc.ERRNO(errno.EAFNOSUPPORT), "socketpair", sc.Arg(0, sc.NE, socket.AF_UNIX))
    for name in DENIED_SYSCALLS:
        try:
            flt.add_rule(deny, name)
        except (OSError, ValueError, RuntimeError):
            pass  # syscall unknown on this architecture/libseccomp
    for flag in NAMESPACE_FLAGS:
        flt.add_rule(deny, "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    # clone3 passes its flags in memory, which seccomp cannot inspect: make libc
    # fall back to clone(2), which the rules above do inspect.
    flt.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    return flt


def _mount(source: bytes, target: str, fstype: bytes | None, flags: int, opts: bytes | None,
           what: str) -> None:
    _check(_libc.mount(source, target.encode(), fstype, flags, opts), what)


def private_mounts(scratch: str, size_bytes: int, uid: int, gid: int,
                   keep: Sequence[str] = (), new_proc: bool = False) -> None:
    """In a fresh mount namespace (and a fresh SysV IPC namespace): a private, size-capped
    tmpfs at ``scratch`` and on ``/dev/shm``, and ``/dev`` read-only; with ``new_proc`` (we
    are in a new pid namespace), a ``/proc`` that shows only that namespace. ``keep``:
    folders below ``scratch`` or ``/dev/shm`` (a venv in /tmp) bound back, read-only, on
    top.

    Everything disappears with the last process of the submission.
    """
    _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWIPC), "unshare(CLONE_NEWNS | CLONE_NEWIPC)")
    _mount(b"none", "/", None, MS_REC | MS_PRIVATE, None, "mount --make-rprivate /")
    kept = [(path, os.open(path, os.O_PATH | os.O_DIRECTORY)) for path in keep]
    size = max(size_bytes, 1 << 20)
    mode = "0711" if kept else "0700"  # 0711: we (no DAC caps as root) must reach below it
    opts = f"size={size},mode={mode},uid={uid},gid={gid}".encode()
    _mount(b"tmpfs", scratch, b"tmpfs", MS_NOSUID | MS_NODEV, opts, f"mount tmpfs on {scratch}")
    if os.path.isdir("/dev/shm") and scratch != "/dev/shm":
        opts = f"size={size},mode=1777".encode()
        _mount(b"tmpfs", "/dev/shm", b"tmpfs", MS_NOSUID | MS_NODEV, opts, "mount tmpfs on /dev/shm")
    for path, fd in kept:
        _libc.setfsuid(uid)  # its owner may write in the scratch (root here lacks DAC caps)
        try:
            os.makedirs(path, mode=0o755, exist_ok=True)
        finally:
            _libc.setfsuid(os.getuid())
        _mount(f"/proc/self/fd/{fd}".encode(), path, None, MS_BIND | MS_REC, None, f"bind {path}")
        remount_read_only(path)
        os.close(fd)
    if new_proc:
        _mount(b"proc", "/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None, "mount /proc")
    if os.path.ismount("/dev") and not os.statvfs("/dev").f_flag & os.ST_RDONLY:
        remount_read_only("/dev")  # bwrap's /dev is a tmpfs (its device nodes are binds)


def remount_read_only(path: str) -> None:
    kept = os.statvfs(path).f_flag
    flags = MS_REMOUNT | MS_BIND | 0x1  # MS_RDONLY
    for bit, flag in _KEPT_FLAGS.items():
        if kept & bit:
            flags |= flag
    _mount(b"none", path, None, flags, None, f"remount {path} read-only")


def unshare_pid() -> None:
    """Our next child is process 1 of a new pid namespace (we stay where we are)."""
    _check(_libc.unshare(CLONE_NEWPID), "unshare(CLONE_NEWPID)")


def enter_pid_namespace(fd: int) -> None:
    """Our next child is born in the pid namespace ``fd`` refers to (ours, again)."""
    _check(_libc.setns(fd, CLONE_NEWPID), "setns(CLONE_NEWPID)")


def unshare_network() -> None:
    """A network namespace of its own: only a loopback device, and that one down."""
    _check(_libc.unshare(CLONE_NEWNET), "unshare(CLONE_NEWNET)")


def set_child_subreaper() -> None:
    """Orphans of our descendants become our children (so we can kill every last one)."""
    _check(_libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "PR_SET_CHILD_SUBREAPER")


def set_not_dumpable() -> None:
    """No ptrace and no /proc access to this process from processes of the same uid."""
    _check(_libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "PR_SET_DUMPABLE")


def set_dumpable() -> None:
    """Back to normal (a fork inherits the zygote's "not dumpable")."""
    _check(_libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "PR_SET_DUMPABLE")


def _memory_rlimit() -> int:
    # RLIMIT_DATA counts heap and private writable mappings (not reserved address space,
    # which torch has plenty of); elsewhere only RLIMIT_AS exists.
    return resource.RLIMIT_DATA if sys.platform.startswith("linux") else resource.RLIMIT_AS


def data_in_use() -> int:
    """Bytes this process already has that RLIMIT_DATA counts (``VmData``: a fork's share
    of what its zygote preloaded; torch with CUDA alone is ~850 MB), 0 where unknown."""
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status", "rb") as status:
        for line in status:
            if line.startswith(b"VmData:"):
                return int(line.split()[1]) * 1024
    return 0


def set_rlimits(limits: Mapping[str, int], nproc_base: int = 0, memory_base: int = 0) -> None:
    """Lower rlimits (never raise: root here lacks CAP_SYS_RESOURCE). ``max_pids`` is
    counted on top of ``nproc_base`` processes that RLIMIT_NPROC already counts (those of
    the same uid in the same user namespace); ``memory_bytes`` only when given, on top of
    ``memory_base`` bytes that the memory rlimit already counts (what a forked worker
    inherited: as a cgroup counts only what the submission itself allocates)."""
    table = {
        "cpu_s": resource.RLIMIT_CPU,
        "file_size_bytes": resource.RLIMIT_FSIZE,
        "open_files": resource.RLIMIT_NOFILE,
        "max_pids": resource.RLIMIT_NPROC,
        "memory_bytes": _memory_rlimit(),
    }
    wanted = {res: int(limits[key]) for key, res in table.items() if key in limits}
    if "memory_bytes" in limits:
        wanted[table["memory_bytes"]] += memory_base
    if resource.RLIMIT_NPROC in wanted:
        wanted[resource.RLIMIT_NPROC] += nproc_base
    wanted[resource.RLIMIT_CORE] = 0
    for res, value in wanted.items():
        soft, hard = resource.getrlimit(res)
        new_hard = value + 1 if res == resource.RLIMIT_CPU else value
        if hard != resource.RLIM_INFINITY:
            new_hard = min(new_hard, hard)
        resource.setrlimit(res, (min(value, new_hard), new_hard))


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def _clear_all_caps() -> None:
    header = _CapHeader(_CAP_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(header), data), "capset")


def _drop_bounding_set() -> None:
    for cap in range(_LAST_CAP + 1):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() not in (
            errno.EINVAL,
            errno.EPERM,
        ):
            _check(-1, "PR_CAPBSET_DROP")


def drop_capabilities() -> None:
    """Keep our uid; empty every capability set (and the bounding set, where allowed)."""
    _drop_bounding_set()
    _clear_all_caps()


def drop_privileges(uid: int, gid: int) -> None:
    """Switch to ``uid``/``gid`` for good, with an empty bounding set and no caps."""
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    _drop_bounding_set()
    os.setresuid(uid, uid, uid)
    _clear_all_caps()
    if os.getuid() != uid or os.geteuid() != uid or os.getegid() != gid:
        raise OSError(errno.EPERM, "privilege drop did not take effect")


def set_no_new_privs() -> None:
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "PR_SET_NO_NEW_PRIVS")


def capabilities_all_zero() -> bool:
    with open("/proc/self/status", "rb") as fh:
        fields = dict(line.split(b":", 1) for line in fh if line.startswith(b"Cap"))
    return all(int(fields[k], 16) == 0 for k in (b"CapInh", b"CapPrm", b"CapEff", b"CapAmb"))
