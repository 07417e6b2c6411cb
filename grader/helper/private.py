"""The check helper's private folder: one socket (and its lock and log) per user,
interpreter and copy of the course, in a folder only this user may enter (0700).

A warm check's client imports this module: paths are strings (``os.path``, not
``pathlib``), and ``tempfile`` is imported only where no runtime folder serves
(tests/grader/test_commands.py::test_a_warm_check_imports_only_what_asking_needs)."""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, NamedTuple

from coursekit import settings

if TYPE_CHECKING:
    from hashlib import _Hash


def sha256(data: bytes = b"") -> _Hash:
    """``hashlib.sha256``, from CPython's own module where there is one: ``hashlib`` loads
    OpenSSL's library first (~3 ms of CPU, a warm check's client asks only this)."""
    for module in ("_sha2", "_sha256"):  # Python 3.12 on, 3.11
        try:
            return __import__(module).sha256(data)
        except ImportError:
            continue
    import hashlib

    return hashlib.sha256(data)


GRADER_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
PACKAGE_PARENT = os.path.dirname(GRADER_DIR)
MAX_FOLDER_BYTES = 70  # a socket's path holds at most 104 bytes (macOS; 108 on Linux)


class HelperUnavailable(Exception):
    """No helper can serve this check; ``check`` runs the cold way."""


def private_dir() -> str:
    """``$XDG_RUNTIME_DIR/attention-course`` (or ``<tmp>/attention-course-<uid>``, or
    ``/tmp/attention-course-<uid>`` where the temporary folder's path is too long for a
    socket): made 0700 here, and refused unless it is a real folder of this user that no
    one else may enter."""
    folder = next((c for c in _candidates() if len(os.fsencode(c)) <= MAX_FOLDER_BYTES), None)
    if folder is None:
        from grader.i18n.message import msg  # here: said when refused (``helper status`` shows it)

        raise HelperUnavailable(msg("no folder with a path short enough for a socket"))
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder, mode=0o700)
    if not _private(folder):
        from grader.i18n.message import msg

        raise HelperUnavailable(msg("{folder} is not a private folder of this user", folder=folder))
    return folder


def _candidates() -> Iterator[str]:
    """Where the private folder may be, in order (lazily: ``tempfile`` is not imported
    where the runtime folder serves)."""
    runtime = settings.runtime_dir()
    if runtime and os.path.isdir(runtime) and _private(runtime):
        yield os.path.join(runtime, "attention-course")
    import tempfile

    yield os.path.join(tempfile.gettempdir(), f"attention-course-{os.getuid()}")
    yield os.path.join("/tmp", f"attention-course-{os.getuid()}")


def _private(path: str) -> bool:
    st = os.lstat(path)
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


def instance_key() -> str:
    """Which helper serves this process: its interpreter, its environment (a venv's prefix;
    venvs of one interpreter share its real path) and its copy of the course."""
    ident = f"{os.path.realpath(sys.executable)}\0{sys.prefix}\0{sys.version}\0{PACKAGE_PARENT}"
    return sha256(ident.encode()).hexdigest()[:16]


class Paths(NamedTuple):
    socket: str
    lock: str
    log: str


def paths() -> Paths:
    folder, key = private_dir(), instance_key()
    return Paths(*(os.path.join(folder, f"check-{key}.{kind}") for kind in ("sock", "lock", "log")))


def fingerprint() -> str:
    """The code a helper runs (the grader's and coursekit's files, by size and time): a
    helper started before an edit retires, and the next check starts a new one."""
    digest = sha256()
    for root in (GRADER_DIR, os.path.join(PACKAGE_PARENT, "coursekit")):
        for path, st in sorted(_code_files(root)):
            digest.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:24]


def _code_files(folder: str) -> Iterator[tuple[str, os.stat_result]]:
    """The code files under ``folder`` (``__pycache__`` skipped), each with its stat:
    ``os.scandir`` reads both in one pass, a check's client pays a few milliseconds."""
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for entry in entries:
            with contextlib.suppress(OSError):
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__":
                        yield from _code_files(entry.path)
                elif os.path.splitext(entry.name)[1] in (".py", ".j2", ".ini", ".json"):
                    yield entry.path, entry.stat()


def log(text: str, at: int = 20) -> None:
    """A line of the helper's log (``grader.helper``'s records, at ``logging.INFO`` unless
    ``at`` says): the helper's stderr, which the client that started it sends to
    ``Paths.log`` (``grader.common.logs.HELPER``)."""
    import logging  # here: a warm check's client imports no more than asking needs

    logging.getLogger("grader.helper").log(at, "%s", text)
