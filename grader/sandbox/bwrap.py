"""The bubblewrap command line that starts a zygote, and what the interpreter needs inside.

The zygote runs the very interpreter that runs the grader (``sys.executable``, not its
real path: a venv's ``python`` finds its ``pyvenv.cfg`` and site-packages from where it
is called), with the grader's own import path minus the course itself. Those folders are
bound read-only; nothing else of the disk is visible but ``/usr`` and a few files of
``/etc``. An installed copy of the course (``grader``, ``solutions``, ``tests`` in a
site-packages folder) is covered by an empty tmpfs.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

SANDBOX_CODE = "/sbx"
SANDBOX_MPL = "/tmp/.matplotlib"
HIDDEN_PACKAGES = ("grader", "solutions", "tests")
COURSE_ROOT = Path(__file__).resolve().parents[2]
# As root the zygote keeps only what it needs to confine its children (a uid per
# submission, namespaces) and to kill what they leave behind; unprivileged, only the
# namespaces (in its own user namespace).
ROOT_ZYGOTE_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP", "CAP_SYS_ADMIN", "CAP_KILL")
USER_ZYGOTE_CAPS = ("CAP_SETPCAP", "CAP_SYS_ADMIN")
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


def _is_course(path: str) -> bool:
    """The course's own checkout (or a folder inside it), or a folder holding the graders."""
    real = os.path.realpath(path)
    root = str(COURSE_ROOT)
    return (
        real == root
        or real.startswith(root + os.sep)
        or os.path.isdir(os.path.join(real, "grader", "hidden"))
    )


def import_paths() -> list[str]:
    """The grader's own ``sys.path`` entries that the worker may use too: those of the
    interpreter (below its prefixes), package folders (``site-packages``, a user site) and
    what ``PYTHONPATH`` names; never the course itself, nor the current folder or a
    script's folder (which may be your home)."""
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix,
                                              sys.base_exec_prefix)}
    asked = {os.path.realpath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
    paths = []
    for entry in sys.path:
        if not entry or not os.path.exists(entry) or _is_course(entry) or entry in paths:
            continue
        real = os.path.realpath(entry)
        if (any(real == p or real.startswith(p + os.sep) for p in prefixes) or real in asked
                or os.path.basename(real) in ("site-packages", "dist-packages")):
            paths.append(entry)
    return paths


def python_dirs() -> list[str]:
    """What the interpreter needs, outermost first, without duplicates: its prefixes, the
    folder of ``sys.executable`` and the import path. Each appears under its real path and,
    where that differs, under the path the interpreter knows it by."""
    wanted = [sys.base_prefix, sys.prefix, sys.base_exec_prefix, sys.exec_prefix,
              os.path.dirname(sys.executable), *import_paths()]
    dirs: set[str] = set()
    for d in wanted:
        if not os.path.exists(d) or _is_course(d):
            continue
        folder = d if os.path.isdir(d) else os.path.dirname(d)
        dirs.add(os.path.realpath(folder))
        dirs.add(os.path.abspath(folder))
    unique = sorted(dirs, key=len)
    return [
        d for i, d in enumerate(unique) if not any(d.startswith(p + os.sep) for p in unique[:i])
    ]


def under_scratch(scratch: str = "/tmp") -> list[str]:
    """The interpreter's folders that a submission's tmpfs on ``scratch`` would cover."""
    return [d for d in python_dirs() if d.startswith(scratch.rstrip("/") + "/")]


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
    for d in import_paths():
        for name in HIDDEN_PACKAGES:
            path = os.path.join(d, name)
            if os.path.isdir(path) and any(path.startswith(p + os.sep) for p in dirs):
                args += ["--tmpfs", path]
    return args


def bwrap_command(
    bwrap: str, code_dir: Path | None, inner: list[str], as_root: bool,
    mpl_dir: Path | None = None,
) -> list[str]:
    """bwrap + its options + ``inner``. As root, the zygote keeps the capabilities it needs
    to confine its children; unprivileged, bwrap runs in a user namespace where the
    zygote holds just enough to give each child namespaces of its own. Neither runs
    student code. ``mpl_dir``: the pool's matplotlib cache, writable by the zygotes; each
    child's own tmpfs on /tmp hides it."""
    dirs = python_dirs()
    args = [bwrap, *NAMESPACE_FLAGS, "--hostname", "sandbox", "--cap-drop", "ALL"]
    if not as_root:
        args[1:1] = ["--unshare-user", "--disable-userns"]
    for cap in ROOT_ZYGOTE_CAPS if as_root else USER_ZYGOTE_CAPS:
        args += ["--cap-add", cap]
    args += ["--tmpfs", "/tmp"]  # first: a venv under /tmp is bound on top of it
    args += _system_binds()
    args += _traversable_parents(dirs)
    for d in dirs:
        args += ["--ro-bind", d, d]
    args += _hide_installed_course(dirs)
    if code_dir is not None:
        args += ["--ro-bind", str(code_dir), SANDBOX_CODE]
    args += [
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        *(["--bind", str(mpl_dir), SANDBOX_MPL] if mpl_dir is not None else []),
        "--remount-ro",
        "/",
        "--chdir",
        "/",
        "--",
        *inner,
    ]
    return args
