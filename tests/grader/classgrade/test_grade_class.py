"""``python -m grader grade``: one row per student whatever happened, the same scores as
``grader check``, atomic per-student results, resumable runs, safe feedback."""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import ROOT, lesson_path, solution_path

from grader.check.engine import exercise_points
from grader.results.folder import SPEC_KEYS

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

LESSON = "01_attention_by_hand"


def grade(submitted, out, *extra: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "grader", "grade", str(submitted), "--lesson", LESSON,
                           "--out", str(out), "--deadlines", "none", *extra], capture_output=True,
                          text=True, cwd=ROOT,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def put(submitted, student: str, notebook=None, content: bytes | None = None) -> None:
    folder = submitted / student / LESSON
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{LESSON}.ipynb"
    if notebook is not None:
        shutil.copy(notebook, target)
    elif content is not None:
        target.write_bytes(content)


def rows(out) -> dict[str, dict]:
    with open(out / "grades.csv", newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames[:6] == ["student_id", "lesson", "score", "max_score", "status", "message"]
        assert reader.fieldnames[6:] == ["dot_scores", "softmax", "attention"]
        return {r["student_id"]: r for r in reader}


def check_score(notebook) -> float:
    proc = subprocess.run([sys.executable, "-m", "grader", "check", str(notebook), "--format", "json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    return json.loads(proc.stdout)["score"]


@pytest.fixture
def classroom(tmp_path):
    submitted = tmp_path / "submitted"
    put(submitted, "alice", solution_path(LESSON))
    put(submitted, "bob", lesson_path(LESSON))
    nb = json.loads(solution_path(LESSON).read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "softmax":
            cell["source"] = "".join(cell["source"]).replace("axis=axis, keepdims=True)\n    e", "keepdims=True)\n    e")
    put(submitted, "carol", content=json.dumps(nb).encode())
    (submitted / "dave").mkdir()  # no notebook at all
    put(submitted, "erin", content=b"")
    put(submitted, "frank", content=b"{broken json")
    put(submitted, "grace", content=json.dumps({"nbformat": 3, "nbformat_minor": 0, "worksheets": []}).encode())
    put(submitted, "heidi", content=b"\x00\x01\x02binary\xff\xfe")
    return submitted


def test_every_student_gets_a_row_and_honest_scores_match_check(classroom, tmp_path) -> None:
    out = tmp_path / "out"
    proc = grade(classroom, out, "--isolation", "none", "--jobs", "2")
    assert "protections:" in proc.stdout
    table = rows(out)
    assert sorted(table) == ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi"]
    assert not (out / "records").exists()  # one file per student: results/<id>.json
    for student in ("alice", "bob", "carol"):
        notebook = classroom / student / LESSON / f"{LESSON}.ipynb"
        assert float(table[student]["score"]) == check_score(notebook), student
        assert table[student]["status"] == "ok"
    assert float(table["alice"]["score"]) == 10 and float(table["bob"]["score"]) == 0
    assert 0 < float(table["carol"]["score"]) < 10 and float(table["carol"]["softmax"]) < 4
    assert table["dave"]["status"] == "missing"
    for student in ("erin", "frank", "grace", "heidi"):
        assert table[student]["status"] == "unreadable" and table[student]["message"], student
    assert "nbformat 3" in table["grace"]["message"]
    for student in table:
        result = json.loads((out / "results" / f"{student}.json").read_text())
        assert list(result)[:len(SPEC_KEYS)] == list(SPEC_KEYS)  # the spec's, then its own
        assert set(result) == {*SPEC_KEYS, "notes", "seed", "submission", "graded_with",
                               "graded_at", "untouched", "schema"}
        page = (out / "feedback" / student / f"{LESSON}.html").read_text()
        assert "<html" in page and "def test_" not in page and "sub.call" not in page


def test_rerun_grades_only_what_is_missing_and_force_regrades(classroom, tmp_path) -> None:
    out = tmp_path / "out"
    grade(classroom, out, "--isolation", "none")
    alice = out / "results" / "alice.json"
    stamp = alice.stat().st_mtime_ns
    (out / "results" / "bob.json").unlink()  # as if the run had been interrupted before bob
    proc = grade(classroom, out, "--isolation", "none")
    assert "graded 1 submission(s), kept 7" in proc.stdout
    assert alice.stat().st_mtime_ns == stamp and (out / "results" / "bob.json").exists()
    assert len(rows(out)) == 8
    proc = grade(classroom, out, "--isolation", "none", "--force")
    assert "graded 8 submission(s)" in proc.stdout and alice.stat().st_mtime_ns != stamp


def test_bad_arguments_are_refused_with_a_reason(tmp_path) -> None:
    proc = subprocess.run([sys.executable, "-m", "grader", "grade", str(tmp_path / "nope"), "--lesson",
                           LESSON, "--out", str(tmp_path / "out"), "--deadlines", "none"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and "no such folder" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "grader", "grade", str(tmp_path), "--lesson", "99_nope",
                           "--out", str(tmp_path / "out"), "--deadlines", "none"], capture_output=True,
                          text=True, cwd=ROOT)
    assert proc.returncode == 2 and "known lessons" in proc.stderr


@pytest.mark.parametrize("forks", [True, False])
def test_trusted_processes_started_ahead_grade_as_lazy_ones(classroom, tmp_path, monkeypatch,
                                                            forks) -> None:
    """``--jobs N`` starts its N trusted processes while the sandbox boots: one and its forks
    (Linux), or, where the cores allow (2 per job), N of their own; they grade exactly as
    the processes started with a first submission (no forks, too few cores)."""
    from grader.classgrade import classroom as grading
    from grader.classgrade import jobs as class_jobs

    if forks and not class_jobs.forks():
        pytest.skip("trusted processes are forked on Linux only")
    started, made = [], []
    start, init = class_jobs.Jobs.start, class_jobs.TrustedProcess.__init__
    monkeypatch.setattr(class_jobs, "cores", lambda: 4)
    monkeypatch.setattr(class_jobs, "forks", lambda: forks)
    monkeypatch.setattr(class_jobs.Jobs, "start", lambda self, n: (start(self, n), started.append(len(made))))
    monkeypatch.setattr(class_jobs.TrustedProcess, "__init__",
                        lambda self, *args: (made.append(len(args) < 3), init(self, *args))[-1])  # a fork: no Popen
    ahead = tmp_path / "ahead"
    grading.grade_class(classroom, grading.Options(lesson=LESSON, out=ahead, jobs=2, isolation="none"),
                        progress=False)
    assert started == [2]  # both running before the first submission is sent
    assert made == ([False, True] if forks else [False, False])  # ...and the ones that graded
    monkeypatch.setattr(class_jobs, "cores", lambda: 2)
    monkeypatch.setattr(class_jobs, "forks", lambda: False)
    lazy = tmp_path / "lazy"
    grading.grade_class(classroom, grading.Options(lesson=LESSON, out=lazy, jobs=2, isolation="none"),
                        progress=False)
    assert started == [2]  # none started ahead this time: each with its first submission
    assert {s: (r["status"], r["score"]) for s, r in rows(ahead).items()} == \
        {s: (r["status"], r["score"]) for s, r in rows(lazy).items()}


def test_one_notebook_is_graded_by_its_path_with_the_class_protections(tmp_path) -> None:
    """grade_notebook (what Gradescope calls, with no submitted/ tree around the notebook)
    reads at most MAX_NOTEBOOK_BYTES and starts no worker for a notebook it cannot read."""
    from grader.check.notebook import MAX_NOTEBOOK_BYTES
    from grader.classgrade import classroom
    from grader.results import Status

    def start():
        raise AssertionError("no worker for a notebook that cannot be read")

    opts = classroom.Options(lesson=LESSON, out=tmp_path / "out")
    broken = tmp_path / "作业.ipynb"
    broken.write_text('{"cells": 3}', encoding="utf-8")
    report = classroom.grade_notebook(broken, "作业.ipynb", opts, start)
    assert report.status == Status.UNREADABLE and report.notebook == "作业.ipynb"
    assert report.message == "The notebook could not be read: JSON, but not a Jupyter notebook."
    huge = tmp_path / "huge.ipynb"
    with huge.open("wb") as f:
        f.truncate(MAX_NOTEBOOK_BYTES + 1)
    report = classroom.grade_notebook(huge, "huge.ipynb", opts, start)
    assert report.status == Status.UNREADABLE and "larger than" in report.message


@pytest.mark.parametrize("lesson", __import__("support").lessons())
def test_sandboxed_grade_agrees_with_check_on_every_lesson(tmp_path, lesson: str) -> None:
    """Every lesson's reference solution gets full marks and its blank notebook zero under
    the default isolation (modules imported lazily inside the sandbox must work too, and
    the lesson must fit the default limits, with rlimits where there is no cgroup)."""
    submitted = tmp_path / "submitted"
    for student, notebook in (("solution", solution_path(lesson)), ("blank", lesson_path(lesson))):
        folder = submitted / student / lesson
        folder.mkdir(parents=True)
        shutil.copy(notebook, folder / f"{lesson}.ipynb")
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "grader", "grade", str(submitted), "--lesson", lesson,
                           "--out", str(out), "--jobs", "2", "--deadlines", "none"], capture_output=True,
                          text=True, cwd=ROOT,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(out / "grades.csv", newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        table = {r["student_id"]: r for r in reader}
    # the columns as the trusted processes read them (this process never imports the graders)
    assert reader.fieldnames[6:] == list(exercise_points(lesson))
    log = out / "errors.log"
    assert table["solution"]["status"] == "ok", (table["solution"]["message"],
                                                log.read_text() if log.exists() else "")
    assert float(table["solution"]["score"]) == float(table["solution"]["max_score"]) > 0
    assert table["blank"]["status"] == "ok" and float(table["blank"]["score"]) == 0


def test_isolation_levels_from_the_command_line(classroom, tmp_path) -> None:
    """The default grades and lists what is active and what is missing (here: as on a
    machine without bubblewrap); strict refuses naming what is missing; so does --require."""
    import os

    env = dict(os.environ, GRADER_SANDBOX_WITHOUT="bwrap")
    base = [sys.executable, "-m", "grader", "grade", str(classroom), "--lesson", LESSON,
            "--deadlines", "none"]
    proc = subprocess.run(base + ["--out", str(tmp_path / "auto")], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "protections: " in proc.stdout and "(isolation auto)" in proc.stdout
    assert "missing: files-hidden, read-only" in proc.stdout
    assert "- files-hidden: MISSING, no bubblewrap (disabled by GRADER_SANDBOX_WITHOUT)" in proc.stderr
    sandbox = json.loads((tmp_path / "auto" / "run.json").read_text())["sandbox"]
    assert "files-hidden" in sandbox["missing"] and "time-limit" in sandbox["active"]
    for extra in (["--isolation", "strict"], ["--require", "no-network,read-only"]):
        proc = subprocess.run(base + ["--out", str(tmp_path / "refused"), *extra],
                              capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
        assert proc.returncode == 3, proc.stderr[-3000:]
        assert "read-only: no bubblewrap" in proc.stderr and "no-network" not in proc.stderr
        assert not (tmp_path / "refused").exists()
    proc = subprocess.run(base + ["--out", str(tmp_path / "x"), "--require", "magic"],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert proc.returncode == 2 and "unknown protection(s) magic" in proc.stderr


def _grading_processes(parent: int) -> list[int]:
    """The ``python -m grader.classgrade.jobs`` processes that ``grade`` (pid ``parent``) started."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            stat = (entry / "stat").read_text()
        except (OSError, ValueError):
            continue
        if b"grader.classgrade.jobs" in cmdline and int(stat.rsplit(")", 1)[1].split()[1]) == parent:
            found.append(int(entry.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds processes in /proc")
@pytest.mark.parametrize("which", ["first", "fork"])
def test_a_grading_process_that_dies_is_replaced_and_its_student_graded_again(tmp_path, which) -> None:
    """--jobs 2 grades in two trusted processes, the second forked from the first once it is
    warm; either one killed mid-run (the first takes its fork with it) costs no student a
    result."""
    from grader.classgrade import jobs as class_jobs

    if which == "fork" and not class_jobs.forks():
        pytest.skip("trusted processes are forked on Linux only")
    submitted = tmp_path / "submitted"
    for i in range(6):
        put(submitted, f"s{i}", solution_path(LESSON))
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "grader", "grade", str(submitted), "--lesson",
                             LESSON, "--out", str(out), "--isolation", "none", "--jobs", "2",
                             "--deadlines", "none"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed = None
    deadline = time.monotonic() + 300
    while killed is None and proc.poll() is None and time.monotonic() < deadline:
        children = _grading_processes(proc.pid)
        if which == "fork":
            children = [fork for child in children for fork in _grading_processes(child)]
        if children:
            killed = children[0]
            os.kill(killed, signal.SIGKILL)
        time.sleep(0.05)
    stdout, stderr = proc.communicate(timeout=600)
    assert killed is not None, "grade --jobs 2 started no grading process"
    assert proc.returncode == 0, stderr[-3000:]
    table = rows(out)
    assert sorted(table) == [f"s{i}" for i in range(6)]
    assert {r["status"] for r in table.values()} == {"ok"}, table
    assert {float(r["score"]) for r in table.values()} == {10.0}


def test_a_trusted_process_that_dies_before_it_reads_its_job_is_replaced(monkeypatch) -> None:
    """Killed between its start and the job ``grade`` sends it (a race that load makes
    likely): ``start`` does not fail the run; the student who meets it gets a fresh one."""
    import threading

    from grader.classgrade import jobs as class_jobs

    real_popen, spawned = subprocess.Popen, []

    def stand_in(args, **kwargs):  # reads its channel until it ends; the first is dead at once
        reads = "import os, sys\nwhile os.read(int(sys.argv[1]), 1 << 16): pass"
        proc = real_popen([sys.executable, "-c", reads, args[3]], **kwargs)
        spawned.append(proc)
        if len(spawned) == 1:
            proc.kill()
            proc.wait()
        return proc

    def sent(self, student: str) -> float:  # what matters here: the student reaches a live process
        class_jobs.forkserver.tell(self.ctl, class_jobs.Grade(student))
        return 1.5

    monkeypatch.setattr(class_jobs.subprocess, "Popen", stand_in)
    monkeypatch.setattr(class_jobs.TrustedProcess, "grade", sent)
    jobs = class_jobs.Jobs(None, {"job": "options"}, threading.Event())
    try:
        jobs.start(1)  # one process, no forks: the student meets the killed one first
        failures = []
        assert jobs.grade("s0", failures.append) == 1.5
        assert failures == [] and len(spawned) == 2
    finally:
        jobs.close(kill=True)
