"""The bubblewrap command line that starts a zygote, and what the interpreter needs inside.

The zygote runs the very interpreter that runs the grader (``sys.executable``, not its
real path: a venv's ``python`` finds its ``pyvenv.cfg`` and site-packages from where it
is called), with the grader's own import path minus the course itself. Those folders are
bound read-only; nothing else of the disk is visible but ``/usr`` and a few files of
``/etc``. An installed copy of the course (``grader``, ``solutions``, ``tests`` in a
site-packages folder) is covered by an empty tmpfs.

The interpreter may live anywhere: in an environment made inside the checkout
(``.venv``, ``venv``, ``env``, a conda ``-p`` env: its folders are bound, the rest of the
checkout is not), in ``/tmp`` or ``/dev/shm`` (bound on top of the sandbox's own), behind
symlinks, or around the checkout (a venv whose ``src/`` holds it: the checkout is
covered by an empty tmpfs).
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


def _inside(path: str, folder: str) -> bool:
    """``path`` is ``folder`` or lies below it (both real, absolute paths)."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _course_root() -> str:
    return os.path.realpath(COURSE_ROOT)


def _prefixes() -> list[str]:
    """The interpreter's prefixes (a venv's or conda env's and the Python it was made
    from), real paths, without duplicates."""
    return list(dict.fromkeys(os.path.realpath(p) for p in (
        sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)))


def _in_env_inside_course(real: str) -> bool:
    """``real`` belongs to an environment made inside the checkout (``.venv``, ``venv``,
    ``env``, a conda ``-p`` env): a prefix below the course root, and not one of the
    course's own folders. A venv made in the checkout's root itself lends only its
    ``bin``, ``lib*`` and ``include`` folders."""
    root = _course_root()
    for prefix in _prefixes():
        if not _inside(prefix, root) or not _inside(real, prefix):
            continue
        if prefix != root:
            return True
        top = os.path.relpath(real, root).split(os.sep)[0]
        if top in ("bin", "lib", "lib64", "include"):
            return True
    return False


def _is_course(path: str) -> bool:
    """The course's own checkout or a folder inside it (but for an environment made in
    it: its files are the interpreter's), or a folder holding the graders."""
    real = os.path.realpath(path)
    if os.path.isdir(os.path.join(real, "grader", "hidden")):
        return True
    if not _inside(real, _course_root()):
        return False
    hidden = [os.path.join(_course_root(), name) for name in HIDDEN_PACKAGES]
    return any(_inside(real, h) for h in hidden) or not _in_env_inside_course(real)


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


def _interpreter_folders() -> list[str]:
    """Every folder the interpreter needs, shortest first: its prefixes, the folder of
    ``sys.executable`` and the import path, each under its real path and, where that
    differs, under the path the interpreter knows it by; never the course's own."""
    wanted = [sys.base_prefix, sys.prefix, sys.base_exec_prefix, sys.exec_prefix,
              os.path.dirname(sys.executable), *import_paths()]
    dirs: set[str] = set()
    for d in wanted:
        if not os.path.exists(d) or _is_course(d):
            continue
        folder = d if os.path.isdir(d) else os.path.dirname(d)
        dirs.add(os.path.realpath(folder))
        dirs.add(os.path.abspath(folder))
    return sorted(dirs, key=len)


def _outermost(dirs: list[str]) -> list[str]:
    return [d for i, d in enumerate(dirs) if not any(_inside(d, p) for p in dirs[:i])]


def bind_plan() -> tuple[list[str], list[str], list[str]]:
    """``(outer, hidden, inner)``: the interpreter's outermost folders, bound first; the
    places where the checkout shows inside one of them (the course cloned into a venv's
    ``src/``, as ``pip install -e git+...`` does), each covered by an empty tmpfs; and the
    folders of an environment made inside that checkout, bound again on top of it."""
    dirs = _interpreter_folders()
    outer = _outermost(dirs)
    root = _course_root()
    hidden = []
    for d in outer:
        real = os.path.realpath(d)
        if real != root and _inside(root, real):
            hidden.append(d.rstrip(os.sep) + root[len(real):])
    inner = [d for d in dirs if d not in outer
             and any(_inside(d, h) or _inside(os.path.realpath(d), h) for h in hidden)]
    return outer, hidden, _outermost(inner)


def python_dirs() -> list[str]:
    """What the interpreter needs, outermost first, without duplicates (with the folders
    of an environment inside a checkout that an outer folder holds: see ``bind_plan``)."""
    outer, _, inner = bind_plan()
    return outer + inner


def under_scratch(*scratch: str) -> list[str]:
    """The interpreter's folders that a submission's tmpfs on one of ``scratch`` (``/tmp``,
    ``/dev/shm``) would cover: the zygote binds them back on top."""
    tops = [s.rstrip("/") + "/" for s in scratch or ("/tmp",)]
    return [d for d in bind_plan()[0] if any(d.startswith(t) for t in tops)]


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
    outer, hidden, nested = bind_plan()
    args = [bwrap, *NAMESPACE_FLAGS, "--hostname", "sandbox", "--cap-drop", "ALL"]
    if not as_root:
        args[1:1] = ["--unshare-user", "--disable-userns"]
    for cap in ROOT_ZYGOTE_CAPS if as_root else USER_ZYGOTE_CAPS:
        args += ["--cap-add", cap]
    # first the fresh mounts, so that a venv under /tmp or /dev/shm is bound on top of them
    args += ["--tmpfs", "/tmp", "--proc", "/proc", "--dev", "/dev"]
    args += _system_binds()
    args += _traversable_parents(outer)
    for d in outer:
        args += ["--ro-bind", d, d]
    for d in hidden:
        args += ["--tmpfs", d]
    args += _traversable_parents(nested)
    for d in nested:
        args += ["--ro-bind", d, d]
    for d in hidden:
        args += ["--remount-ro", d]
    args += _hide_installed_course(outer + nested)
    for prefix in {sys.prefix, sys.exec_prefix}:  # a venv made in the checkout's root
        cfg = os.path.join(prefix, "pyvenv.cfg")
        if os.path.realpath(prefix) == _course_root() and os.path.isfile(cfg):
            args += ["--ro-bind", cfg, cfg]
    if code_dir is not None:
        args += ["--ro-bind", str(code_dir), SANDBOX_CODE]
    args += [
        *(["--bind", str(mpl_dir), SANDBOX_MPL] if mpl_dir is not None else []),
        "--remount-ro",
        "/",
        "--chdir",
        "/",
        "--",
        *inner,
    ]
    return args
