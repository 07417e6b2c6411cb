"""The sandbox runs the interpreter the grader runs from: a venv's, whether its ``python``
is a symlink or a copy, with that venv's packages, and still none of the course."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from grader.sandbox import available_protections

REPO = Path(__file__).resolve().parents[1]

# A worker entry that answers one question: what does the sandboxed interpreter see?
SCRIPT = r'''
import json, os, sys
from grader.sandbox import SandboxPool

ENTRY = b"""
import importlib, json, os, sys
def serve(sock):
    seen = {"prefix": sys.prefix, "executable": sys.executable, "repo": os.path.exists(REPO)}
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


@pytest.mark.skipif("files-hidden" not in available_protections(),
                    reason="bubblewrap cannot run here")
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
