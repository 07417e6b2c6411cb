"""nbgrader's autograde runs no student code as the instructor, and agrees with `grade`.

One class of lesson 01 in a temporary nbgrader course: the reference, the blank handout,
every planted bug and alternative of ``tests/planted/l01.py``, and notebooks that attack
the instructor's account (read the reference solutions, write into the home folder, fake
the grader, spin in a scratch cell). Graded three ways with the same hidden inputs
(``COURSE_GRADER_SEED``): ``python -m grader grade``, ``nbgrader autograde`` as configured
(the course's sandbox), and ``nbgrader autograde`` with ``COURSE_AUTOGRADE=kernel``
(nbgrader's own kernels, for the well-behaved notebooks only). Every student gets the same
score from all three, and the first hint ``grade`` gives reaches nbgrader's feedback page.
"""

from __future__ import annotations

import csv
import html
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from planted import l01
from support import ROOT, lesson_path, solution_path

from grader.sandbox import missing_protections

pytestmark = [pytest.mark.sandbox, pytest.mark.e2e, pytest.mark.slow]

LESSON = "01_attention_by_hand"
SEED = "20261201"
TIMEOUT = "25"  # a notebook's wall clock, for grade and the sandboxed autograde alike
CONTAINING = ("files-hidden", "read-only")
LACKING = {p: why for p, why in missing_protections().items() if p in CONTAINING}

HOSTILE = {
    "reads_solutions": """
import glob, json, os
for path in glob.glob(os.path.expanduser("~") + "/**/solutions/*/*.ipynb", recursive=True):
    for cell in json.load(open(path))["cells"]:
        if cell["cell_type"] == "code":
            print("".join(cell["source"]))
            try:
                exec("".join(cell["source"]).replace("### BEGIN SOLUTION", "").replace("### END SOLUTION", ""), globals())
            except Exception:
                pass
""",
    "writes_home": """
import os
open(os.path.join(os.path.expanduser("~"), "PWNED.txt"), "w").write("pwned")
""",
    "fakes_the_grader": """
import sys, types
fake = types.ModuleType("grader.kernel")
fake.grade = lambda lesson, exercise, namespace: {"dot_scores": 2.0, "softmax": 4.0, "attention": 4.0}[exercise]
sys.modules["grader.kernel"] = fake
""",
    "spins_in_a_scratch_cell": "while True:\n    pass\n",
}


def _notebook(path: Path) -> dict:
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if isinstance(cell["source"], list):
            cell["source"] = "".join(cell["source"])
    return nb


def _with_cell(nb: dict, source: str) -> dict:
    nb["cells"].append({"cell_type": "code", "metadata": {}, "source": source, "outputs": [],
                        "execution_count": None})
    return nb


def _run(args: list[str], cwd: Path, env: dict[str, str], timeout: float = 900) -> str:
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def _export(course: Path, env: dict[str, str], to: Path) -> dict[str, float]:
    _run([sys.executable, "-m", "nbgrader", "export", "--to", str(to)], course, env)
    with open(to, newline="") as f:
        return {row["student_id"]: float(row["raw_score"]) for row in csv.DictReader(f)}


@pytest.fixture(scope="module")
def sandboxed_class(tmp_path_factory):
    """The class graded by `grade` and by the sandboxed autograde; the home folder of the
    account that ran them."""
    base = tmp_path_factory.mktemp("nbgrader-sandbox")
    home = base / "home"
    course = home / "course"
    shutil.copytree(ROOT / "solutions", course / "solutions")
    shutil.copy(ROOT / "nbgrader_config.py", course)
    env = {**os.environ, "HOME": str(home), "COURSE_GRADER_SEED": SEED}
    env.pop("COURSE_AUTOGRADE", None)
    _run([sys.executable, "-m", "nbgrader", "generate_assignment", LESSON, "--force"], course, env)

    reference = _notebook(solution_path(LESSON))
    notebooks = {"reference": reference, "blank": _notebook(lesson_path(LESSON))}
    for i, variant in enumerate(l01.BUGS):
        notebooks[f"bug{i:02d}"] = variant.apply(json.loads(json.dumps(reference)))
    for i, variant in enumerate(l01.ALTERNATIVES):
        notebooks[f"alt{i:02d}"] = variant.apply(json.loads(json.dumps(reference)))
    blank = notebooks["blank"]
    for name, source in HOSTILE.items():
        notebooks[name] = _with_cell(json.loads(json.dumps(blank)), source)
    for student, nb in notebooks.items():
        folder = course / "submitted" / student / LESSON
        folder.mkdir(parents=True)
        (folder / f"{LESSON}.ipynb").write_text(json.dumps(nb), encoding="utf-8")

    _run([sys.executable, "-m", "grader", "grade", str(course / "submitted"), "--lesson", LESSON,
          "--out", str(base / "graded"), "--jobs", "2", "--timeout", TIMEOUT, "--deadlines", "none"],
         course, env)
    with open(base / "graded" / "grades.csv", newline="") as f:
        graded = {row["student_id"]: row for row in csv.DictReader(f)}
    log = _run([sys.executable, "-m", "nbgrader", "autograde", LESSON, "--force",
                f"--SandboxedAutograde.timeout={TIMEOUT}"], course, env)
    autograded = _export(course, env, base / "nbgrader.csv")
    return {"base": base, "home": home, "course": course, "env": env, "graded": graded,
            "autograded": autograded, "log": log, "students": list(notebooks)}


def test_the_sandboxed_autograde_gives_grades_scores(sandboxed_class) -> None:
    ran = json.loads((sandboxed_class["course"] / "autograded" / "reference" / LESSON / f"{LESSON}.ipynb").read_text())
    data = next(c for c in ran["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "data")
    assert not data["outputs"], "a kernel ran a student's notebook"
    differ = {s: (float(sandboxed_class["graded"][s]["score"]), sandboxed_class["autograded"][s])
              for s in sandboxed_class["students"] if float(sandboxed_class["graded"][s]["score"]) != sandboxed_class["autograded"][s]}
    assert not differ, f"grade and nbgrader's autograde disagree: {differ}"
    assert sandboxed_class["autograded"]["reference"] == 10 and sandboxed_class["autograded"]["blank"] == 0
    bugs = [s for s in sandboxed_class["students"] if s.startswith("bug")]
    assert all(0 <= sandboxed_class["autograded"][s] < 10 for s in bugs)
    assert sum(0 < sandboxed_class["autograded"][s] for s in bugs) >= len(bugs) // 2, "partial credit, as grade gives"
    assert all(sandboxed_class["autograded"][s] == 10 for s in sandboxed_class["students"] if s.startswith("alt"))


@pytest.mark.skipif(bool(LACKING) and not os.environ.get("COURSE_REQUIRE_SANDBOX"),
                    reason=f"this machine cannot hide files or make them read-only: {LACKING}")
def test_no_student_code_runs_as_the_instructor(sandboxed_class) -> None:
    for name in HOSTILE:
        assert sandboxed_class["autograded"][name] == 0, name
    assert sandboxed_class["graded"]["spins_in_a_scratch_cell"]["status"] == "timeout"
    assert not (sandboxed_class["home"] / "PWNED.txt").exists(), "a notebook wrote into the instructor's home"
    _run([sys.executable, "-m", "nbgrader", "generate_feedback", LESSON, "--force"], sandboxed_class["course"], sandboxed_class["env"])
    page = (sandboxed_class["course"] / "feedback" / "reads_solutions" / LESSON / f"{LESSON}.html").read_text()
    assert "np.exp(shifted)" not in page, "the feedback page shows the reference solution"


def test_the_feedback_page_shows_grades_first_hint(sandboxed_class) -> None:
    _run([sys.executable, "-m", "nbgrader", "generate_feedback", LESSON, "--force"], sandboxed_class["course"], sandboxed_class["env"])
    shown = 0
    for student in sandboxed_class["students"]:
        if not student.startswith("bug"):
            continue
        record = json.loads((sandboxed_class["base"] / "graded" / "results" / f"{student}.json").read_text())
        page = html.unescape((sandboxed_class["course"] / "feedback" / student / LESSON / f"{LESSON}.html").read_text())
        for exercise in record["exercises"]:
            if exercise["passed"]:
                continue
            first = exercise["message"].split("; ")[0]
            assert f"{exercise['name']}: {exercise['points']:g} / {exercise['max_points']:g} points" in page
            assert first[:60] in page, (student, first)
            shown += 1
    assert shown >= len(l01.BUGS)


def test_nbgraders_own_kernels_give_the_same_partial_credit(sandboxed_class, tmp_path) -> None:
    """COURSE_AUTOGRADE=kernel: each test cell keeps only its hidden tests in autograde, so a
    failed visible assert no longer zeroes an exercise that `grade` gives partial credit."""
    course = tmp_path / "course"  # a copy: the class's own gradebook stays as it was
    shutil.copytree(sandboxed_class["course"], course, ignore=shutil.ignore_patterns("autograded", "feedback"))
    for name in HOSTILE:  # they would run as this account
        shutil.rmtree(course / "submitted" / name)
    env = {**sandboxed_class["env"], "COURSE_AUTOGRADE": "kernel"}
    trusted = [s for s in sandboxed_class["students"] if s not in HOSTILE]
    _run([sys.executable, "-m", "nbgrader", "autograde", LESSON, "--force"], course, env, timeout=1200)
    ran = json.loads((course / "autograded" / "reference" / LESSON / f"{LESSON}.ipynb").read_text())
    data = next(c for c in ran["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "data")
    assert data["outputs"], "nbgrader's kernel ran the notebook's cells"
    scores = _export(course, env, tmp_path / "kernel.csv")
    differ = {s: (float(sandboxed_class["graded"][s]["score"]), scores[s])
              for s in trusted if float(sandboxed_class["graded"][s]["score"]) != scores[s]}
    assert not differ, f"grade and nbgrader's kernels disagree: {differ}"
