"""What the course's tests share besides fixtures (tests/conftest.py holds those): the
checkout's paths, the reference and student notebooks, the term's class graded once a run,
nbgrader's commands. Tests import it by name (``from support import ROOT``); pyproject's
``pythonpath`` puts ``tests/`` and ``docs/examples/`` on the path."""

from __future__ import annotations

import contextlib
import csv
import io
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from coursekit import catalogue

ROOT = Path(__file__).resolve().parents[1]

#: The ``slow`` marker's bound: a test file that takes longer in the full run must carry it
#: (pyproject's marker says the same; tests/conftest.py checks it at the end of the run).
SLOW_FILE_S = float(os.environ.get("COURSE_SLOW_FILE_S", "30"))  # tests/project/test_markers.py: less
#: Seconds this process spent in :func:`built_once` (building a shared folder, or waiting
#: for another worker to build it) since conftest last read it: charged to no file.
shared_setup_s = 0.0

# CI sets it: a sandbox test that cannot run fails instead of skipping.
SANDBOX_REQUIRED = bool(os.environ.get("COURSE_REQUIRE_SANDBOX"))


def needs_bubblewrap(reason: str = "bubblewrap cannot hide the course's files here") -> pytest.MarkDecorator:
    """Skip where bubblewrap cannot run, unless SANDBOX_REQUIRED: then the test runs, and fails."""
    from grader.sandbox import available_protections

    lacking = "files-hidden" not in available_protections()
    return pytest.mark.skipif(lacking and not SANDBOX_REQUIRED, reason=reason)


def helper_env(tmp: Path, minutes: str) -> dict[str, str]:
    """The environment of a ``grader check`` whose warm helper lives in ``tmp`` (its private
    folder) and stops after ``minutes`` idle (``off``: a cold check)."""
    env = dict(os.environ, TMPDIR=str(tmp), COURSE_CHECK_HELPER=minutes)
    for unset in ("XDG_RUNTIME_DIR", "CI", "COURSE_LANG"):
        env.pop(unset, None)
    return env


def lessons() -> list[str]:
    """The ids of the course's lessons (coursekit.catalogue)."""
    return catalogue.COURSE.ids()


def solution_path(lesson: str) -> Path:
    return catalogue.get(lesson).solution()


def lesson_path(lesson: str) -> Path:
    return catalogue.get(lesson).student()


_CHECKPOINT = re.compile(r'"Checkpoint (\d)')


def run_checkpoints(nb: dict, through_last: bool = False) -> list[tuple[int, str | None]]:
    """Run what grading runs (grader.runtime's loop over the cells the catalogue's roles
    choose) and the demos tagged ``checkpoint``, in notebook order, in a quiet namespace of
    their own, up to the last checkpoint when ``through_last``; return (checkpoint, failure
    message or None) for each checkpoint. Any other cell must not fail."""
    from grader.runtime.execute import prepare_namespace, run_cells

    cells = [(i, cell["source"]) for i, cell in enumerate(nb["cells"])
             if catalogue.cell_role(cell) in catalogue.RUN_WHEN_GRADING
             or "checkpoint" in catalogue.tags(cell) and catalogue.cell_role(cell) is catalogue.Role.DEMO]
    if through_last:
        last = max(n for n, (_, source) in enumerate(cells) if _CHECKPOINT.search(source))
        cells = cells[:last + 1]
    with contextlib.redirect_stdout(io.StringIO()):
        errors = {e.cell: e.error for e in run_cells(cells, prepare_namespace({"__name__": "__checkpoints__"})).errors}
    results = [(int(found.group(1)), errors.pop(i, None)) for i, source in cells
               if (found := _CHECKPOINT.search(source))]
    assert not errors, f"cells that are not checkpoints failed: {errors}"
    return results


def full_run(config: pytest.Config) -> bool:
    """`make test`: every file of testpaths, no -k or -m selection, not a worker of it."""
    return (config.args_source is pytest.Config.ArgsSource.TESTPATHS
            and not config.option.keyword and not config.option.markexpr
            and not hasattr(config, "workerinput"))


#: How far over the bound an unmarked file may go in one run before the run fails: a file's
#: time varies from run to run (the other worker's load), and a file near the bound must not
#: make CI fail one run in two. Over the bound but within it, the file is named, not failed.
SLOW_FILE_NOISE = 1.5


def unmarked_slow_files(seconds: dict[str, float], slow: set[str],
                        factor: float = 1.0) -> list[str]:
    """The files over ``factor`` times the `slow` bound that do not carry the marker, slowest
    first."""
    over = [(s, path) for path, s in seconds.items() if s > factor * SLOW_FILE_S and path not in slow]
    return [f"{path} took {s:.0f} s" for s, path in sorted(over, reverse=True)]


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str,
               build: Callable[[Path], None]) -> Path:
    """The folder ``name``, made by ``build`` once for the whole run, then only read.

    pytest-xdist's workers (``make test``) share the parent of their temporary folders: the
    first worker to ask builds it under a lock, the others wait and read it, so a costly
    fixture shared by several files costs once, whichever workers run them.
    """

    global shared_setup_s
    start = time.perf_counter()
    try:
        return _built_once(tmp_path_factory, name, build)
    finally:
        shared_setup_s += time.perf_counter() - start


def _built_once(tmp_path_factory: pytest.TempPathFactory, name: str,
                build: Callable[[Path], None]) -> Path:
    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    folder, done = base / name, base / f"{name}.built"
    with FileLock(str(base / f"{name}.lock")):
        if not done.is_file():
            shutil.rmtree(folder, ignore_errors=True)
            build(folder)
            done.touch()
    return folder


# --- the reference notebooks, executed once a run ---------------------------------------------

def executed_solution(tmp_path_factory: pytest.TempPathFactory, lesson: str, edition: str) -> Path:
    """The reference notebook of ``lesson`` in ``edition``, run top to bottom in a real kernel with
    the ``smoke`` preset (errors kept as outputs), written once a run and shared by every test
    that reads its outputs (``tests/lessons/test_solutions_execute.py``, ``tests/lessons/test_zh_tables.py``)."""

    def build(folder: Path) -> None:
        import nbformat
        from nbclient import NotebookClient

        folder.mkdir(parents=True)
        nb = nbformat.read(catalogue.get(lesson).solution(edition), as_version=4)
        os.environ["COURSE_PRESET"] = "smoke"
        NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True,
                       resources={"metadata": {"path": str(folder)}}).execute()
        nbformat.write(nb, folder / "executed.ipynb")

    return built_once(tmp_path_factory, f"executed-{lesson}-{edition}", build) / "executed.ipynb"


def hoarding(path: Path, chunk: str = "np.ones((8192, 8192))") -> dict:
    """Lesson 01's notebook at ``path`` whose ``softmax`` keeps ``chunk`` (an expression,
    512 MiB by default) more at every call: a memory hog that reaches its limit during some
    check, not while its cells run."""
    nb = catalogue.read_json(path)
    cell = next(c for c in nb["cells"] if catalogue.grade_id(c) == "softmax")
    source = catalogue.cell_source(cell)
    cell["source"] = "_hoard = []\n\n" + source.replace(
        "    x = np.asarray(x, dtype=np.float64)\n",
        f"    _hoard.append({chunk})\n    x = np.asarray(x, dtype=np.float64)\n")
    assert "_hoard.append" in cell["source"], "lesson 01's softmax changed: update hoarding()"
    return nb


# --- a graded term (docs/examples/term_class.py): one class of lesson 01 with every case ------

TERM_LESSON = "01_attention_by_hand"
DEADLINES = (ROOT / "docs" / "examples" / "deadlines.toml").read_text(encoding="utf-8")


def grade(submitted: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    """``python -m grader grade`` of the term's lesson, which must succeed."""
    proc = subprocess.run(
        [sys.executable, "-m", "grader", "grade", str(submitted), "--lesson", TERM_LESSON, "--out",
         str(out), "--jobs", "2", "--call-timeout", "3", "--deadlines", "none", *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def rows(out: Path) -> dict[str, dict[str, str]]:
    """grades.csv of ``grade --out out``, by student."""
    with open(out / "grades.csv", newline="", encoding="utf-8") as f:
        return {row["student_id"]: row for row in csv.DictReader(f)}


def grade_term(root: Path) -> None:
    from term_class import build_class

    build_class(root / "submitted")
    (root / "deadlines.toml").write_text(DEADLINES, encoding="utf-8")
    first = grade(root / "submitted", root / "out", "--deadlines", str(root / "deadlines.toml"))
    (root / "grade.stdout").write_text(first.stdout, encoding="utf-8")


def nbgrader(args: list[str], course: Path, ok: bool = True, **env: str) -> subprocess.CompletedProcess:
    """An nbgrader command run in ``course``; it must succeed unless ``ok`` is false."""
    proc = subprocess.run(["nbgrader", *args], cwd=course, capture_output=True, text=True,
                          timeout=900, env=dict(os.environ, **env))
    if ok:
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def autograde_term(folder: Path) -> None:
    from term_class import build_class

    course = folder / "course"
    shutil.copytree(ROOT / "solutions" / TERM_LESSON, course / "solutions" / TERM_LESSON)
    shutil.copy(ROOT / "nbgrader_config.py", course)
    (course / "deadlines.toml").write_text(DEADLINES, encoding="utf-8")
    # the term's order: every due date and extension written first, each lesson generated
    # at its release (issue 49: alice's extension then cost her everything)
    proc = subprocess.run([sys.executable, "-m", "grader", "deadlines"], cwd=course,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "alice: 01_attention_by_hand extended by 2 days" in proc.stdout
    nbgrader(["generate_assignment", TERM_LESSON, "--force"], course)
    build_class(folder / "class")
    for student in ("alice", "bob", "carol", "gina", "hank", "mallory"):
        shutil.copytree(folder / "class" / student, course / "submitted" / student)
    log = nbgrader(["autograde", TERM_LESSON], course, ok=False, COURSE_CALL_TIMEOUT="3")
    (folder / "autograde.log").write_text(log.stdout + log.stderr, encoding="utf-8")
    nbgrader(["export", "--to", "export.csv"], course)


def copy_of(course: Path, tmp_path: Path) -> Path:
    """A copy of an nbgrader course, for a test that adds students or grades to it."""
    shutil.copytree(course, tmp_path / "course", symlinks=True)
    return tmp_path / "course"


# Gradescope's container, laid out in a temporary folder (tests/grader/integrations/gradescope/,
# tests/grader/test_entry_points.py)
def unpack(package: Path, root: Path) -> Path:
    """A folder laid out like Gradescope's /autograder, the zip in source/."""
    for name in ("source", "submission", "results"):
        (root / name).mkdir(parents=True)
    with zipfile.ZipFile(package) as zf:
        zf.extractall(root / "source")
        for info in zf.infolist():  # zipfile drops the mode bits; Gradescope's unzip keeps them
            mode = info.external_attr >> 16
            if mode:
                os.chmod(root / "source" / info.filename, mode & 0o777)
    return root


# The interpreter run_autograder uses (setup.sh's venv on Gradescope); COURSE_TEST_PYTHON
# may name another one with the course's packages, e.g. one any user can read.
AUTOGRADER_PYTHON = os.environ.get("COURSE_TEST_PYTHON") or sys.executable
