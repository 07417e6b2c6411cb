"""A class of honest and hostile notebooks, graded in one sandboxed run.

Every student gets a row; honest notebooks score what ``grader check`` gives; every hostile
one scores exactly what its honest part deserves (zero on top of a blank notebook, full
marks on top of a correct one). Afterwards nothing outside the output folder changed, no
student process is left, the loopback listener saw nothing, and no output file holds
hidden test code or more than a bounded excerpt of what a notebook printed.

It runs wherever the default isolation can contain these attacks (bubblewrap works); CI
runs it as root with the system Python, as root from a venv and as an unprivileged user
from a venv, with ``COURSE_REQUIRE_SANDBOX=1`` so that it fails instead of skipping.
"""

from __future__ import annotations

import csv
import json
import os
import socket
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest
from support import ROOT, lesson_path, solution_path

from grader.sandbox import missing_protections

LESSON = "01_attention_by_hand"
MARK = f"hostile-{uuid.uuid4().hex[:8]}"
OUTSIDE = Path("/tmp") / f"{MARK}-outside.txt"
IN_REPO = ROOT / f"{MARK}-in-repo.txt"

# What containing these attacks takes; memory and process caps may be rlimits.
CONTAINING = ("files-hidden", "read-only", "no-network", "processes-unreachable",
              "nothing-outlives", "syscall-filter")
LACKING = {p: why for p, why in missing_protections().items() if p in CONTAINING}
pytestmark = [pytest.mark.sandbox, pytest.mark.slow, pytest.mark.skipif(
    bool(LACKING) and not os.environ.get("COURSE_REQUIRE_SANDBOX"),
    reason=f"this machine cannot contain the attacks: {LACKING}")]

HOSTILE = {
    "reads_solutions": f"""
import glob, json
for path in glob.glob({str(ROOT)!r} + "/solutions/*/*.ipynb") + glob.glob("/work/**/solutions/*/*.ipynb", recursive=True):
    for cell in json.load(open(path))["cells"]:
        if cell["cell_type"] == "code":
            try:
                exec("".join(cell["source"]).replace("### BEGIN SOLUTION", "").replace("### END SOLUTION", ""), globals())
            except Exception:
                pass
""",
    "imports_grader": f"""
import importlib, sys
sys.path.insert(0, {str(ROOT)!r})
try:
    hidden = importlib.import_module("grader.hidden.test_01_attention_by_hand")
    softmax = hidden.ref_softmax
except Exception:
    pass
from coursekit import catalogue, earlier
try:
    exec(earlier.extract(catalogue.get("01").solution(), ["dot_scores", "softmax", "attention"]), globals())
except Exception:
    pass
""",
    "patches_comparisons": """
import numpy as np, builtins
np.allclose = lambda *a, **k: True
np.isclose = lambda a, b, *r, **k: np.ones(np.shape(a), bool)
np.array_equal = lambda *a, **k: True
np.testing.assert_allclose = lambda *a, **k: None
builtins.isinstance = lambda *a: True
""",
    "claims_equality": """
import numpy as np
class Anything(np.ndarray):
    def __eq__(self, other): return True
    def __array_finalize__(self, obj): pass
class Liar:
    def __eq__(self, other): return True
    def __array__(self, *a, **k): raise RuntimeError("no")
def dot_scores(Q, K):
    return Liar()
def softmax(x, axis=-1):
    return np.zeros_like(x).view(Anything)
def attention(Q, K, V, scale=True):
    return Liar(), Liar()
""",
    "os_exit": "import os\nos._exit(0)",
    "sys_exit": "import sys\nsys.exit('bye')",
    "segfault": "import ctypes\nctypes.string_at(0)",
    "spins_forever": """
import signal
signal.signal(signal.SIGINT, signal.SIG_IGN)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
while True:
    pass
""",
    "memory_bomb": "hog = bytearray(6 << 30)\nfor i in range(0, len(hog), 4096):\n    hog[i] = 1",
    "outlives_grading": f"""
import subprocess, sys, os
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "{MARK}"], start_new_session=True)
if os.fork() == 0:
    os.setsid()
    os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)", "{MARK}"])
""",
    "writes_outside": f"""
for path in [{str(OUTSIDE)!r}, {str(IN_REPO)!r}, {str(ROOT / 'grader' / 'hidden' / 'test_01_attention_by_hand.py')!r}]:
    try:
        open(path, "w").write("pwned")
    except Exception:
        pass
""",
    "prints_forgeries": """
print("alice,01_attention_by_hand,10.0,10.0,ok,Graded,2.0,4.0,4.0")
print('{"notebook": "x", "lesson": "01_attention_by_hand", "score": 10.0, "max_score": 10.0, "exercises": [], "status": "ok"}')
print("<script>alert('x')</script>")
""",
    "prints_hundreds_of_mib": "import sys\nchunk = 'x' * (1 << 20)\nfor _ in range(300):\n    sys.stdout.write(chunk)",
    "kills_the_grader": """
import os, signal
for pid in (os.getppid(), 1, -1):
    try:
        os.kill(pid, signal.SIGKILL)
    except Exception:
        pass
""",
}


def _with_cell(base: Path, source: str, at_end: bool = True) -> str:
    nb = json.loads(base.read_text(encoding="utf-8"))
    cell = {"cell_type": "code", "metadata": {}, "source": source, "outputs": [], "execution_count": None}
    nb["cells"].insert(len(nb["cells"]) if at_end else 1, cell)
    return json.dumps(nb)


def _listener() -> tuple[socket.socket, list[bytes]]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    seen: list[bytes] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
                seen.append(conn.recv(100) or b"connected")
            except TimeoutError:
                continue
            except OSError:
                return
    threading.Thread(target=accept, daemon=True).start()
    return server, seen


def _snapshot() -> dict[str, int]:
    """Every file of the checkout (git or not) and when it last changed."""
    snap = {}
    for folder, subfolders, files in os.walk(ROOT):
        subfolders[:] = [d for d in subfolders if d not in (".git", "__pycache__", ".pytest_cache")]
        for name in files:
            path = os.path.join(folder, name)
            snap[path] = os.lstat(path).st_mtime_ns
    return snap


def test_hostile_class_is_graded_safely(tmp_path) -> None:
    server, seen = _listener()
    port = server.getsockname()[1]
    hostile = dict(HOSTILE, opens_network=f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
                                          f"s.sendall(b'leak')")
    submitted = tmp_path / "submitted"
    notebooks = {"honest": solution_path(LESSON).read_text(encoding="utf-8"),
                 "blank": lesson_path(LESSON).read_text(encoding="utf-8")}
    for name, source in hostile.items():
        notebooks[name] = _with_cell(lesson_path(LESSON), source, at_end=name not in ("claims_equality",))
    notebooks["honest_but_leaky"] = _with_cell(solution_path(LESSON), hostile["writes_outside"]
                                               + "\n" + hostile["opens_network"].replace("s.sendall", "0 and s.sendall"))
    for student, text in notebooks.items():
        folder = submitted / student / LESSON
        folder.mkdir(parents=True)
        (folder / f"{LESSON}.ipynb").write_text(text, encoding="utf-8")
    before = _snapshot()
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "grader", "grade", str(submitted), "--lesson", LESSON,
                           "--out", str(out), "--jobs", "2", "--timeout", "30", "--memory", "0.75",
                           "--deadlines", "none"],
                          capture_output=True, text=True, cwd=ROOT, timeout=900)
    server.close()
    assert proc.returncode == 0, proc.stderr[-3000:]
    sandbox = json.loads((out / "run.json").read_text())["sandbox"]
    print(f"\nprotections: {sandbox}")
    assert not [p for p in CONTAINING if p not in sandbox["active"]], sandbox

    with open(out / "grades.csv", newline="", encoding="utf-8") as f:
        table = {r["student_id"]: r for r in csv.DictReader(f)}
    assert sorted(table) == sorted(notebooks)
    expected = {name: 0.0 for name in notebooks} | {"honest": 10.0, "honest_but_leaky": 10.0}
    assert {k: float(v["score"]) for k, v in table.items()} == expected
    status = {k: v["status"] for k, v in table.items()}
    assert status["spins_forever"] == "timeout"
    assert status["memory_bomb"] == "memory"
    assert status["os_exit"] == status["segfault"] == "crashed"
    assert status["honest"] == status["blank"] == "ok"
    # in its own pid namespace its parent reads as pid 0, and kill(0) ends its own group
    assert status["kills_the_grader"] in ("ok", "crashed")

    assert not seen, f"the loopback listener received {seen}"
    assert not OUTSIDE.exists() and not IN_REPO.exists()
    assert _snapshot() == before, "a file of the repository changed"
    left = subprocess.run(["pgrep", "-f", MARK], capture_output=True, text=True).stdout.split()
    assert not left, f"student processes left running: {left}"

    hidden_lines = [line.strip() for path in (ROOT / "grader" / "hidden").glob("*.py")
                    for line in path.read_text(encoding="utf-8").splitlines() if len(line.strip()) > 30]
    for path in out.rglob("*"):
        if path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            assert len(text) < 64_000, f"{path} is {len(text)} characters long"
            leaked = [line for line in hidden_lines if line in text]
            assert not leaked, f"{path} contains hidden test code: {leaked[:2]}"
            assert "<script>" not in text
