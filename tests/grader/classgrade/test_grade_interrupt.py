"""Ctrl-C or SIGTERM during ``grader grade``: the workers stop, no process and no
half-written file is left, and running the same command again grades only the students
without a result."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from support import ROOT, lesson_path, solution_path

pytestmark = pytest.mark.sandbox

LESSON = "01_attention_by_hand"


def _with_cell(base: Path, source: str) -> str:
    nb = json.loads(base.read_text(encoding="utf-8"))
    nb["cells"].append({"cell_type": "code", "metadata": {}, "source": source, "outputs": [],
                        "execution_count": None})
    return json.dumps(nb)


def _marked(mark: str) -> list[str]:
    return subprocess.run(["pgrep", "-f", mark], capture_output=True, text=True).stdout.split()


def _command(submitted: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "grader", "grade", str(submitted), "--lesson", LESSON,
            "--out", str(out), "--jobs", "2", "--timeout", "300", "--deadlines", "none"]


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_an_interrupted_run_loses_nothing_and_resumes(tmp_path: Path, signum: int) -> None:
    mark = f"interrupt-{uuid.uuid4().hex[:8]}"
    stuck = _with_cell(lesson_path(LESSON), (
        "import subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', '{mark}'])\n"
        "while True:\n    time.sleep(1)\n"))
    submitted = tmp_path / "submitted"
    notebooks = {"a1": solution_path(LESSON).read_text(encoding="utf-8"),
                 "a2": lesson_path(LESSON).read_text(encoding="utf-8"),
                 "b1": stuck, "b2": stuck, "b3": stuck}
    for student, text in notebooks.items():
        folder = submitted / student / LESSON
        folder.mkdir(parents=True)
        (folder / f"{LESSON}.ipynb").write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    # as from a terminal: Ctrl-C reaches it even where this test runs with SIGINT ignored
    # (a background job), which Python would otherwise keep ignoring
    proc = subprocess.Popen(_command(submitted, out), cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 240
        while len(_marked(mark)) < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.2)  # a1, a2 are graded; b1 and b2 are stuck, one per worker
        assert len(_marked(mark)) == 2, proc.communicate(timeout=60)
        done_before = sorted(p.name for p in (out / "results").iterdir())
        assert done_before == ["a1.json", "a2.json"]
        stamps = {p.name: p.stat().st_mtime_ns for p in (out / "results").iterdir()}
        t0 = time.monotonic()
        proc.send_signal(signum)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    print(f"\nstopped {time.monotonic() - t0:.1f} s after {signal.Signals(signum).name}")
    assert proc.returncode == 128 + signum, stderr[-2000:]
    assert "interrupted" in stderr and "run the same command again" in stderr
    assert time.monotonic() - t0 < 30
    assert _marked(mark) == [], "a student process outlived the interrupted run"
    assert sorted(p.name for p in (out / "results").iterdir()) == done_before
    leftovers = [p for p in out.rglob("*") if p.name.endswith(".tmp")
                 or (p.name.startswith(".") and p != out / ".gitignore")]  # the folder ignores itself
    assert leftovers == [], leftovers
    for path in (out / "results").iterdir():
        assert json.loads(path.read_text())["status"] == "ok"  # complete, parseable
    from grader.sandbox import cgroup

    parents = {parent for _, parent in cgroup.parent_dirs()[0].values()}
    assert not [g for p in parents for g in p.glob(f"grader-sandbox-{proc.pid}-*")]

    for student in ("b1", "b2", "b3"):  # the students fixed their notebooks meanwhile
        shutil.copy(solution_path(LESSON), submitted / student / LESSON / f"{LESSON}.ipynb")
    rerun = subprocess.run(_command(submitted, out), cwd=ROOT, capture_output=True, text=True,
                           timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert "graded 3 submission(s), kept 2 earlier result(s)" in rerun.stdout
    assert {p.name: p.stat().st_mtime_ns for p in (out / "results").iterdir()
            if p.name in stamps} == stamps
    assert len((out / "grades.csv").read_text().splitlines()) == 1 + len(notebooks)
