"""The sandbox runs the interpreter the grader runs from: a venv's, whether its ``python``
is a symlink or a copy, wherever it lives (inside the checkout, in /tmp or /dev/shm, on a
path with spaces, behind a symlink, around the checkout), with that venv's packages, and
still none of the course."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import SANDBOX_REQUIRED, needs_bubblewrap

from grader.sandbox import available_protections

pytestmark = pytest.mark.sandbox

REPO = Path(__file__).resolve().parents[3]

# A worker entry that answers one question: what does the sandboxed interpreter see?
SCRIPT = r'''
import json, os, sys
from grader.sandbox import SandboxPool

ENTRY = b"""
import importlib, json, os, sys
def serve(sock):
    seen = {"prefix": sys.prefix, "executable": sys.executable, "repo": os.path.exists(REPO),
            "listing": sorted(os.listdir(REPO)) if os.path.isdir(REPO) else None}
    try:
        seen["secret"] = open(os.path.join(REPO, "solutions", "secret.py")).read()
    except OSError as exc:
        seen["secret"] = type(exc).__name__
    for name in ("grader.hidden", "solutions", "venv_marker"):
        try:
            importlib.import_module(name)
            seen[name] = "imported"
        except ImportError as exc:
            seen[name] = type(exc).__name__
    sock.sendall(json.dumps(seen).encode())
""".replace(b"REPO", repr(sys.argv[1]).encode())
with SandboxPool(entry="venv_entry:serve", worker_files={"venv_entry.py": ENTRY},
                 preload=()) as pool:
    w = pool.start()
    w.sock.settimeout(60)
    data = b""
    while chunk := w.sock.recv(1 << 16):
        data += chunk
    w.finish()
print(json.dumps({"inside": json.loads(data), "outside": sys.prefix,
                  "protections": pool.protections}))
'''


@needs_bubblewrap("bubblewrap cannot run here")
@pytest.mark.parametrize("copies", [False, True], ids=["symlinked", "copied"])
def test_the_sandbox_runs_a_venvs_own_interpreter(tmp_path: Path, copies: bool) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages",
                    *(["--copies"] if copies else []), str(venv)], check=True, timeout=120)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "venv_marker.py").write_text("")  # a package only this venv has
    proc = subprocess.run([str(venv / "bin" / "python"), "-c", SCRIPT, str(REPO)], cwd=REPO,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    inside = seen["inside"]
    assert seen["outside"] == str(venv)
    assert inside["prefix"] == str(venv) and inside["executable"] == str(venv / "bin" / "python")
    assert inside["venv_marker"] == "imported"
    assert inside["grader.hidden"] == inside["solutions"] == "ModuleNotFoundError"
    assert inside["repo"] is False
    assert "files-hidden" in seen["protections"]


def _course_copy(dest: Path) -> Path:
    """The grader and coursekit of this checkout, and a secret in its ``solutions/``."""
    for name in ("grader", "coursekit"):
        shutil.copytree(REPO / name, dest / name, ignore=shutil.ignore_patterns("__pycache__"),
                        dirs_exist_ok=True)
    (dest / "solutions").mkdir(exist_ok=True)
    (dest / "solutions" / "secret.py").write_text("ANSWER = 42\n")
    return dest


def _venv(path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages",
                    str(path)], check=True, timeout=120)
    site = next((path / "lib").glob("python3*/site-packages"))
    (site / "venv_marker.py").write_text("")  # a package only this venv has
    return path


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[dict[str, Path]]:
    """Folders for the layouts: tmp, shared memory, the home folder (each removed after)."""
    made = {"tmp": tmp_path}
    for name, parent in (("shm", Path("/dev/shm")), ("home", Path.home())):
        if parent.is_dir() and os.access(parent, os.W_OK):
            made[name] = Path(tempfile.mkdtemp(prefix="venv-layout-", dir=parent))
    yield made
    for name, path in made.items():
        if name != "tmp":
            shutil.rmtree(path, ignore_errors=True)


def _layout(kind: str, scratch: dict[str, Path]) -> tuple[Path, Path, Path]:
    """(the course, its venv, the venv's python as the user calls it)."""
    tmp = scratch["tmp"]
    if kind in ("shm", "home"):
        if kind not in scratch:
            pytest.skip(f"no writable folder for {kind} here")
        course = _course_copy(scratch[kind] / "course")
        venv = _venv(course / ("env" if kind == "shm" else ".venv"))
    elif kind == "dot-venv":
        course = _course_copy(tmp / "course")
        venv = _venv(course / ".venv")
    elif kind == "spaces":
        course = _course_copy(tmp / "my course (copy)")
        venv = _venv(course / "venv")
    elif kind == "symlink":
        (tmp / "real").mkdir()
        (tmp / "link").symlink_to(tmp / "real")
        _course_copy(tmp / "real" / "course")
        course = tmp / "link" / "course"
        venv = _venv(course / ".venv")
    elif kind == "venv-around":  # pip install -e git+...: the checkout in the venv's src/
        venv = _venv(tmp / "venv")
        course = _course_copy(venv / "src" / "course")
    elif kind == "venv-is-checkout":  # python -m venv . in the checkout itself
        course = venv = _venv(tmp / "course")
        _course_copy(course)
    else:
        raise ValueError(kind)
    return course, venv, venv / "bin" / "python"


LAYOUTS = ["dot-venv", "spaces", "shm", "home", "symlink", "venv-around", "venv-is-checkout"]


@pytest.mark.parametrize("without", ["", "bwrap"], ids=["bwrap", "no-bwrap"])
@pytest.mark.parametrize("kind", LAYOUTS)
def test_a_venv_anywhere_runs_in_the_sandbox_and_the_checkout_stays_hidden(
        scratch: dict[str, Path], kind: str, without: str) -> None:
    """Issue 23: ``python3 -m venv .venv`` inside a fresh clone gave every notebook 0."""
    if not without and "files-hidden" not in available_protections() and not SANDBOX_REQUIRED:
        pytest.skip("bubblewrap cannot run here")
    course, venv, python = _layout(kind, scratch)
    env = dict(os.environ, GRADER_SANDBOX_WITHOUT=without)
    proc = subprocess.run([str(python), "-c", SCRIPT, str(course)], cwd=course, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    inside = seen["inside"]
    assert inside["prefix"] == seen["outside"]
    assert os.path.realpath(seen["outside"]) == os.path.realpath(venv)
    assert inside["venv_marker"] == "imported"
    if without:  # said so, and runs all the same
        assert "files-hidden" not in seen["protections"]
        return
    assert "files-hidden" in seen["protections"]
    assert inside["grader.hidden"] == inside["solutions"] == "ModuleNotFoundError"
    assert inside["secret"] in ("FileNotFoundError", "PermissionError")
    # the checkout shows the venv's own folders at most
    allowed = {"bin", "lib", "lib64", "include"} if kind == "venv-is-checkout" else {venv.name}
    assert inside["listing"] is None or set(inside["listing"]) <= allowed, inside["listing"]
