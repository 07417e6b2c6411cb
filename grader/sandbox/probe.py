"""What this machine allows: ``available_protections()``."""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import subprocess
import sys

from . import cgroup
from .bwrap import NAMESPACE_FLAGS

# Every protection the sandbox knows, in the order they are reported.
ALL_PROTECTIONS: tuple[str, ...] = (
    "bwrap",  # bubblewrap: a new mount namespace with read-only binds of only what is needed
    "pid-ns",
    "net-ns",
    "ipc-ns",
    "uts-ns",
    "tmpfs-scratch",  # a private, size-capped tmpfs per submission as cwd/HOME/TMPDIR
    "uid-drop",  # a distinct unprivileged uid/gid per submission
    "no-caps",  # empty capability sets (and bounding set)
    "no_new_privs",
    "seccomp",
    "cgroup memory",
    "cgroup pids",
    "rlimits",
)
BWRAP_PROTECTIONS = ("bwrap", "pid-ns", "net-ns", "ipc-ns", "uts-ns")


class SandboxUnavailable(RuntimeError):
    """The requested isolation cannot be provided on this machine."""


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


@functools.cache
def _bwrap_works(path: str) -> bool:
    cmd = [
        path,
        *NAMESPACE_FLAGS,
        "--ro-bind",
        "/",
        "/",
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "true",
    ]
    try:
        return subprocess.run(cmd, capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@functools.cache
def _seccomp_works() -> bool:
    if not sys.platform.startswith("linux") or importlib.util.find_spec("pyseccomp") is None:
        return False
    try:
        import pyseccomp  # noqa: F401
    except Exception:  # noqa: BLE001 - e.g. libseccomp missing
        return False
    return True


def _readable_by_others(path: str) -> bool:
    """Can an unprivileged uid reach ``path`` (every ancestor searchable by others)?"""
    current = os.path.realpath(path)
    while True:
        try:
            if not os.stat(current).st_mode & 0o001:
                return False
        except OSError:
            return False
        parent = os.path.dirname(current)
        if parent == current:
            return True
        current = parent


def missing_reasons() -> dict[str, str]:
    """Why each unavailable protection is unavailable (empty when all are there)."""
    linux = sys.platform.startswith("linux")
    reasons: dict[str, str] = {}
    path = bwrap_path()
    if path is None:
        why = "bwrap (bubblewrap) not found on PATH"
    elif not _bwrap_works(path):
        why = f"{path} cannot create namespaces here"
    else:
        why = ""
    if why:
        reasons.update(dict.fromkeys(BWRAP_PROTECTIONS, why))
    if not linux or os.geteuid() != 0:
        why = "needs root on Linux (to switch to a per-submission uid and mount a tmpfs)"
        reasons.update(dict.fromkeys(("tmpfs-scratch", "uid-drop", "no-caps"), why))
    elif "bwrap" in reasons and not _readable_by_others(sys.base_prefix):
        why = (
            f"without bwrap to bind it, the interpreter under {sys.base_prefix} is not "
            "readable by an unprivileged uid"
        )
        reasons.update(dict.fromkeys(("uid-drop", "no-caps"), why))
    if not linux:
        reasons["no_new_privs"] = "Linux only"
    if not _seccomp_works():
        reasons["seccomp"] = "pyseccomp/libseccomp unavailable (pip install pyseccomp)"
    writable = cgroup.available_controllers() if linux else []
    for controller in cgroup.CONTROLLERS:
        if controller not in writable:
            reasons[f"cgroup {controller}"] = (
                f"no writable cgroup v1 '{controller}' hierarchy under /sys/fs/cgroup"
            )
    if importlib.util.find_spec("resource") is None:
        reasons["rlimits"] = "no resource module"
    return reasons


def available_protections() -> list[str]:
    """The protections this machine allows, in ``ALL_PROTECTIONS`` order."""
    missing = missing_reasons()
    return [p for p in ALL_PROTECTIONS if p not in missing]


def select_protections(isolation: str) -> list[str]:
    """The protections a pool will use for ``isolation`` ("full", "auto" or "none")."""
    if isolation == "none":
        return []
    if isolation not in ("full", "auto"):
        raise ValueError(f"isolation must be 'full', 'auto' or 'none', not {isolation!r}")
    missing = missing_reasons()
    if isolation == "full" and missing:
        lines = "; ".join(f"{p}: {why}" for p, why in missing.items())
        raise SandboxUnavailable(
            f"full isolation is not available here. Missing {lines}. "
            "Use isolation='auto' to run with what is available."
        )
    chosen = [p for p in ALL_PROTECTIONS if p not in missing]
    if not chosen:
        raise SandboxUnavailable(
            "no protection at all is available on this machine; "
            "pass isolation='none' to run student code unconfined"
        )
    return chosen
