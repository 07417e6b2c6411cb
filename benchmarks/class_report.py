"""Benchmark: how long ``python -m grader report`` takes for a class of lesson 08.

    python benchmarks/class_report.py [--students 50 100 200]

Builds (untimed) a graded folder as ``grade`` writes it (``grader.results.folder``: grades.csv,
results/, feedback-less) with
made-up scores and hints, and a ``submitted/`` folder of real notebooks: the reference,
planted bugs, independent correct solutions and disguised copies (tests/similarity_cases.py),
cycled. Prints, per class size, the seconds to write the report without similarity (no
notebooks at hand) and with it, side by side (after one untimed run for the imports).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from similarity_cases import copied_cases, independent_cases, reference_notebook  # noqa: E402

from grader.check.engine import exercise_points  # noqa: E402
from grader.common.hint import Hint  # noqa: E402
from grader.outputs.class_report import write_report  # noqa: E402
from grader.results import ExerciseResult, Report, Status  # noqa: E402
from grader.results.folder import Folder, grades_row  # noqa: E402

LESSON = "08_transformer"
HINTS = ["with norm_first=False (post-LN) the layer should compute x = norm1(x + self_attn(x)) (largest difference {d})",
         "cross-attention takes its queries from the decoder and its keys and values from memory",
         "`{x}` is not implemented yet (it raised NotImplementedError)"]


def build(folder: Path, students: int, seed: int = 0) -> tuple[Path, Path]:
    from planted import l08

    rng = random.Random(seed)
    points = exercise_points(LESSON)
    cases = [c for c in independent_cases() if c.lesson == LESSON]
    notebooks = [c.notebook for c in cases] + [b.notebook for _, b in copied_cases(cases)]
    notebooks += [bug.apply(reference_notebook(LESSON)) for bug in l08.BUGS]
    submitted, out = folder / "submitted", folder / "out"
    graded = Folder(out)
    graded.prepare()
    rows = []
    for i in range(students):
        sid = f"s{i:04d}"
        nb_dir = submitted / sid / LESSON
        nb_dir.mkdir(parents=True)
        (nb_dir / f"{LESSON}.ipynb").write_text(json.dumps(notebooks[i % len(notebooks)]))
        got = {x: rng.choice([0.0, p / 2, p, p, p]) for x, p in points.items()}
        status = rng.choices([Status.OK, Status.TIMEOUT, Status.CRASHED], [0.94, 0.04, 0.02])[0]
        exercises = [ExerciseResult(x, got[x], p, [] if got[x] >= p else [
                         Hint(rng.choice(HINTS).format(d=round(rng.random(), 3), x=x))])
                     for x, p in points.items()]
        report = Report("x", LESSON, exercises, status)
        graded.write_result(sid, report)
        rows.append(grades_row(sid, report, list(points)))
    graded.write_grades(rows, list(points))
    return submitted, out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, nargs="+", default=[50, 100, 200])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:  # imports (matplotlib, torch-free) once, untimed
        write_report(build(Path(tmp), 5)[1])
    print(f"{'students':>9}{'report s':>10}{'+ similarity s':>16}{'ratio':>7}{'flags':>7}")
    for n in args.students:
        with tempfile.TemporaryDirectory() as tmp:
            submitted, out = build(Path(tmp), n)
            started = time.perf_counter()
            write_report(out, submitted=Path(tmp) / "nowhere")
            plain = time.perf_counter() - started
            started = time.perf_counter()
            _, text = write_report(out, submitted=submitted)
            full = time.perf_counter() - started
            flags = text.split("similarity flags: ")[1].split()[0]
            print(f"{n:>9}{plain:>10.2f}{full:>16.2f}{full / plain:>7.1f}{flags:>7}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
