"""Similarity flags: false-positive rate on independently written correct solutions and
detection rate on copied-then-disguised pairs, per exercise, in one table.

    python benchmarks/similarity.py [--check-marks]

The "class" of each lesson is every independent correct solution of its long exercises
(the reference, tests/planted ALTERNATIVES, tests/fixtures/similarity/independent.py)
plus a disguised copy of each non-reference one (tests/similarity_cases.py: every name a
student may choose renamed, methods reordered, docstrings dropped, comments added,
reformatted). A pair written independently that is flagged is a false positive; an
(original, copy) pair that is not flagged is a miss. ``--check-marks`` first grades every
independent solution to confirm it is correct (full marks on its exercise).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from similarity_cases import copied_cases, evaluate, independent_cases  # noqa: E402

from grader.outputs.similarity import Settings  # noqa: E402


def check_marks(cases) -> None:
    from grader.check.engine import grade_in_process

    wrong = []
    for case in cases:
        report = grade_in_process(case.notebook, case.lesson)
        result = next(x for x in report.exercises if x.name == case.exercise)
        if result.points < result.max_points:
            wrong.append(f"{case.exercise} / {case.label}: {result.points}/{result.max_points} {result.failures}")
    print(f"graded {len(cases)} solutions ({cases[0].label.split(':')[0]}, ...): "
          f"{'all full marks' if not wrong else f'{len(wrong)} NOT full marks'}")
    for line in wrong:
        print("  ", line)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check-marks", action="store_true")
    args = parser.parse_args()
    settings = Settings()
    cases = independent_cases()
    if args.check_marks:
        check_marks(cases)
        check_marks([copy for _, copy in copied_cases(cases)])
    rows, false_flags, misses, seconds = evaluate(cases, settings)
    print(f"settings: min_reference_tokens={settings.min_reference_tokens}, "
          f"min_shared={settings.min_shared}, min_coverage={settings.min_coverage}")
    print("score = weighted shared unusual code of a pair; flagged from "
          f"{settings.min_shared:g} (with coverage >= {settings.min_coverage:g})")
    print(f"{'exercise':<25}{'independent':>12}{'pairs':>7}{'flagged':>8}{'top score':>10}"
          f"{'copies':>7}{'detected':>9}  copies' scores")
    for row in rows:
        print(f"{row[0]:<25}{row[1]:>12}{row[2]!s:>7}{row[3]!s:>8}{row[6]:>10}{row[4]:>7}{row[5]!s:>9}  {row[7]}")
    counted = [r for r in rows if r[2] != "-"]
    n_pairs, n_fp = sum(r[2] for r in counted), sum(r[3] for r in counted)
    n_copies, n_found = sum(r[4] for r in counted), sum(r[5] for r in counted)
    n_short = sum(r[4] for r in rows if r[2] == "-")  # short exercises are not compared at all
    print(f"{'total':<25}{'':>12}{n_pairs:>7}{n_fp:>8}{'':>10}{n_copies:>7}{n_found:>9}")
    print(f"false-positive rate: {n_fp}/{n_pairs} = {n_fp / n_pairs:.1%} of independently written pairs")
    print(f"detection rate:      {n_found}/{n_copies} = {n_found / n_copies:.1%} of copied-then-disguised pairs "
          f"of the exercises compared ({n_found}/{n_copies + n_short} = "
          f"{n_found / (n_copies + n_short):.1%} counting the short exercises' copies as misses)")
    for flag in false_flags:
        print(f"  false positive: {flag.exercise}: {flag.a.student} ~ {flag.b.student} (shared {flag.shared})")
    for miss in misses:
        print(f"  missed: copy of {miss}")
    for row in rows:
        if row[2] == "-":
            print(f"  not compared (reference answer under {settings.min_reference_tokens} tokens): {row[0]}, "
                  f"{row[4]} copies")
    print(f"comparison time: {seconds:.2f} s for {sum(r[1] + r[4] for r in rows)} submissions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
