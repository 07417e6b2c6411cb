"""Benchmark: grade one class with ``grader grade`` and with ``nbgrader autograde``.

    python benchmarks/grade_class.py --lesson 04_multi_head_attention --students 100 --jobs 2

Builds a class of correct, buggy (planted bugs from tests/planted) and blank submissions,
grades it with the course grader (sandboxed, ``--jobs N``) and with nbgrader autograde in
a temporary course, and prints seconds per submission side by side with their ratio.
nbgrader is slow (a kernel per notebook), so ``--nbgrader-students K`` grades only the
first K submissions with it (default: all) and the per-submission figures are compared.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))


def load(path: Path) -> dict:
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        cell["source"] = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
    return nb


def build_class(lesson: str, students: int, folder: Path) -> dict[str, str]:
    """SUBMITTED/<id>/<lesson>/<lesson>.ipynb: 40% correct, 40% buggy, 20% blank."""
    from planted import modules

    solution = load(ROOT / "solutions" / lesson / f"{lesson}.ipynb")
    blank = load(ROOT / "lessons" / lesson / f"{lesson}.ipynb")
    bugs = [v for m in modules() if m.LESSON == lesson for v in m.BUGS]
    kinds = {}
    for i in range(students):
        kind = ("correct", "buggy", "correct", "buggy", "blank")[i % 5]
        nb = solution if kind == "correct" else blank if kind == "blank" else (
            bugs[i % len(bugs)].apply(solution) if bugs else solution)
        target = folder / f"s{i:03d}" / lesson / f"{lesson}.ipynb"
        target.parent.mkdir(parents=True)
        target.write_text(json.dumps(nb), encoding="utf-8")
        kinds[f"s{i:03d}"] = kind
    return kinds


def run_course_grader(submitted: Path, lesson: str, jobs: int, isolation: str, out: Path) -> dict:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "grader", "grade", str(submitted), "--lesson", lesson,
                    "--out", str(out), "--jobs", str(jobs), "--isolation", isolation],
                   check=True, cwd=ROOT, capture_output=True)
    wall = time.perf_counter() - start
    run = json.loads((out / "run.json").read_text())
    return {"wall": wall, "median": run["median_seconds_per_submission"], "n": run["students"],
            "protections": run["protections"]}


def run_nbgrader(submitted: Path, lesson: str, count: int, course: Path) -> dict:
    shutil.copytree(ROOT / "solutions", course / "solutions")
    shutil.copy(ROOT / "nbgrader_config.py", course)
    subprocess.run(["nbgrader", "generate_assignment", lesson, "--force"], cwd=course, check=True,
                   capture_output=True)
    chosen = sorted(p.name for p in submitted.iterdir())[:count]
    for student in chosen:
        shutil.copytree(submitted / student, course / "submitted" / student)
    start = time.perf_counter()
    subprocess.run(["nbgrader", "autograde", lesson, "--force"], cwd=course, check=True, capture_output=True)
    wall = time.perf_counter() - start
    return {"wall": wall, "n": len(chosen)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lesson", default="04_multi_head_attention")
    parser.add_argument("--students", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--isolation", default="full")
    parser.add_argument("--nbgrader-students", type=int, default=None)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        kinds = build_class(args.lesson, args.students, tmp / "submitted")
        ours = run_course_grader(tmp / "submitted", args.lesson, args.jobs, args.isolation, tmp / "out")
        theirs = run_nbgrader(tmp / "submitted", args.lesson, args.nbgrader_students or args.students,
                              tmp / "course")
    ours_per = ours["wall"] / ours["n"]
    theirs_per = theirs["wall"] / theirs["n"]
    mix = {k: list(kinds.values()).count(k) for k in ("correct", "buggy", "blank")}
    print(f"lesson {args.lesson}: {args.students} submissions {mix}; machine: {subprocess.getoutput('nproc')} cores")
    print(f"course grader protections: {', '.join(ours['protections'])}")
    print()
    print("| grader | submissions | total s | s / submission | median s / submission |")
    print("|---|---|---|---|---|")
    print(f"| python -m grader grade --jobs {args.jobs} | {ours['n']} | {ours['wall']:.1f} | {ours_per:.3f} | {ours['median']:.3f} |")
    print(f"| nbgrader autograde | {theirs['n']} | {theirs['wall']:.1f} | {theirs_per:.3f} | – |")
    print()
    print(f"nbgrader autograde / course grader, per submission: {theirs_per / ours_per:.1f}×")


if __name__ == "__main__":
    main()
