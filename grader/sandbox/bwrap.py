"""The bubblewrap command line that starts a zygote."""

from __future__ import annotations

import os
import site
import sys
from pathlib import Path

SANDBOX_CODE = "/sbx"
SANDBOX_MPL = "/tmp/.matplotlib"
# The zygote keeps only what it needs to confine its children; each child drops all.
ZYGOTE_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP", "CAP_SYS_ADMIN")
HIDDEN_PACKAGES = ("grader", "solutions", "tests")
# New pid, net, ipc, uts and cgroup namespaces; gone with the grader; no controlling tty.
NAMESPACE_FLAGS = (
    "--unshare-pid",
    "--unshare-net",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup",
    "--die-with-parent",
    "--new-session",
)


def _python_dirs() -> list[str]:
    """Interpreter prefixes and package folders, outermost first, without duplicates."""
    dirs = [sys.base_prefix, sys.prefix, *site.getsitepackages()]
    if site.ENABLE_USER_SITE and site.getusersitepackages():
        dirs.append(site.getusersitepackages())
    real = [os.path.realpath(d) for d in dirs if os.path.isdir(d)]
    unique = sorted(set(real), key=len)
    return [
        d for i, d in enumerate(unique) if not any(d.startswith(p + os.sep) for p in unique[:i])
    ]


def _traversable_parents(dirs: list[str]) -> list[str]:
    """bwrap creates the missing parents of a bind with the host's modes, so a prefix under
    ``/root`` (mode 700) would stay unreadable once a child drops to an unprivileged uid;
    create those parents 0755 (only the bound folders themselves are visible below them)."""
    args: list[str] = []
    seen: set[str] = set()
    for d in dirs:
        for parent in reversed(Path(d).parents):
            path = str(parent)
            if path == "/" or path in seen or path == "/usr" or path.startswith("/usr/"):
                continue
            seen.add(path)
            args += ["--perms", "0755", "--dir", path]
    return args


def _system_binds() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    for name in ("/etc/ld.so.cache", "/etc/localtime", "/etc/fonts"):
        if os.path.exists(name):
            args += ["--ro-bind", name, name]
    return args


def _hide_installed_course(dirs: list[str]) -> list[str]:
    """An installed copy of the course (grader/hidden...) must stay invisible too."""
    args: list[str] = []
    for d in site.getsitepackages():
        for name in HIDDEN_PACKAGES:
            path = os.path.join(os.path.realpath(d), name)
            if os.path.isdir(path) and any(path.startswith(p) for p in dirs):
                args += ["--tmpfs", path]
    return args


def bwrap_command(
    bwrap: str, code_dir: Path, inner: list[str], as_root: bool, mpl_dir: Path | None = None
) -> list[str]:
    """bwrap + its options + ``inner``; ``as_root`` keeps the zygote the capabilities it
    needs to confine its children (it runs no student code). ``mpl_dir``: the pool's
    matplotlib cache, writable by the zygotes; each child's own tmpfs on /tmp hides it."""
    dirs = _python_dirs()
    args = [
        bwrap,
        *NAMESPACE_FLAGS,
        "--hostname",
        "sandbox",
        "--cap-drop",
        "ALL",
    ]
    for cap in ZYGOTE_CAPS if as_root else ():
        args += ["--cap-add", cap]
    args += _system_binds()
    args += _traversable_parents(dirs)
    for d in dirs:
        args += ["--ro-bind", d, d]
    args += _hide_installed_course(dirs)
    args += [
        "--ro-bind",
        str(code_dir),
        SANDBOX_CODE,
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--tmpfs",
        "/tmp",
        *(["--bind", str(mpl_dir), SANDBOX_MPL] if mpl_dir is not None else []),
        "--remount-ro",
        "/",
        "--chdir",
        "/",
        "--",
        *inner,
    ]
    return args
