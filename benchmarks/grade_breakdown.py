"""Benchmark: where the class grader's time per submission goes, and the floor beneath it.

    python benchmarks/grade_breakdown.py --lessons 04_multi_head_attention,08_transformer
    python benchmarks/grade_breakdown.py --lessons 01_attention_by_hand --runs 20

Grades submissions one at a time, as ``grade`` does for one student (a fresh sandboxed
worker from the class grader's pool, strict isolation), and times each step; the kinds of
submission (reference, planted bugs, blank) alternate, so a change in the machine's load
falls on all of them alike. Medians in milliseconds per submission:

- ``start``: getting a fresh confined worker: where a core is free beside the grader, one
  started ahead (``SandboxPool(spares=)``, as ``grade`` does), so only the wait for it
  (it shows after a quick submission, a blank one: the next is still being started);
- ``run nb``: running the notebook's cells in it;
- ``hidden``: the hidden tests, split into ``waiting`` (the requests: the student's code,
  and each value's trip between the processes) and ``grader`` (the trusted side's own
  work: oracles, comparisons, hints);
- ``stop``: to the worker's release (its exit and clean-up happen in the background);
- ``total``: the sum;
- ``round trips``: the times the grader waits for an answer that has not come yet;
  ``requests``: the requests it sends (those of a batch travel together, and a lazy
  batch's answers are read when the check uses them: often they are there by then);
- ``floor``: the same hidden tests on the same notebook with no process boundary at all
  (``InProcessSubmission``, warm): what grading costs before any isolation. Each floor run
  follows the graded submission of its kind, with the same hidden inputs, after a run that
  warms it up, so a change in the machine's speed (a shared or throttled machine varies by
  a third from minute to minute) falls on both sides of the ratio alike.

It ends with one line per lesson and kind, ``floor-ratio <lesson> <kind> <ratio>``, the
median over the submissions of ``total / floor`` (each against the floor run beside it;
kinds ``reference``, ``planted-bug``, ``blank``), for scripts that follow the gap.

The ``--jobs 2`` class figures (``benchmarks/grade_class.py``) add the contention of two
submissions at once on top of ``total``.
"""

from __future__ import annotations

import argparse
import os
import select
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
os.environ.setdefault("OMP_NUM_THREADS", "1")  # as the grader's CLI sets it

from grader.check import runner  # noqa: E402
from grader.check.engine import quiet  # noqa: E402
from grader.check.notebook import cells_to_run, read_notebook  # noqa: E402
from grader.check.remote import RemoteSubmission  # noqa: E402
from grader.classgrade import classroom  # noqa: E402
from grader.common.limits import DEFAULT_LIMITS  # noqa: E402
from grader.sandbox import SandboxPool, default_worker_files  # noqa: E402
from grader.testkit.submission import InProcessSubmission  # noqa: E402

COLUMNS = ("start", "run nb", "hidden", "waiting", "grader", "stop", "total", "round trips", "requests",
           "floor")
COUNTS = ("round trips", "requests")


class TimedSubmission(RemoteSubmission):
    """A worker's submission that adds up the time it waits for answers, and counts its
    waits (round trips) and the requests it sends."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.waited, self.trips, self.requests = 0.0, 0, 0

    def _send(self, op: str, *args: Any, **kwargs: Any) -> None:
        if op not in ("load", "shutdown"):
            self.requests += 1
        super()._send(op, *args, **kwargs)

    def _drain(self, *args: Any, **kwargs: Any) -> Any:
        ops = {p.op for p in self._pending}
        # no answer there yet: none read ahead, none in the socket
        waits = not self._answers.buffered and not select.select([self.sock], [], [], 0)[0]
        start = time.perf_counter()
        try:
            return super()._drain(*args, **kwargs)
        finally:
            if not ops & {"load", "shutdown"}:
                self.waited += time.perf_counter() - start
                self.trips += waits


def submissions(lesson: str) -> dict[str, dict]:
    """The reference notebook, one with a planted bug, and the blank student notebook."""
    from planted import modules

    path = ROOT / "solutions" / lesson / f"{lesson}.ipynb"
    solution = read_notebook(path)
    bugs = [v for m in modules() if m.LESSON == lesson for v in m.BUGS]
    kinds = {"reference": solution}
    if bugs:
        kinds["planted bug"] = bugs[len(bugs) // 2].apply(read_notebook(path))
    kinds["blank"] = read_notebook(ROOT / "lessons" / lesson / f"{lesson}.ipynb")
    return kinds


def grade_once(pool: SandboxPool, nb: dict, lesson: str, seed: int) -> dict[str, float]:
    times: dict[str, float] = {}
    t0 = time.perf_counter()
    worker = pool.start(DEFAULT_LIMITS)
    t1 = time.perf_counter()
    sub = TimedSubmission(worker.sock, DEFAULT_LIMITS.call_s)
    sub.load(cells_to_run(nb), timeout=DEFAULT_LIMITS.wall_s)
    t2 = time.perf_counter()
    with quiet():
        runner.run(sub, lesson, seed=seed)
    t3 = time.perf_counter()
    if sub.close():  # as grader.check.engine does
        worker.release()
    else:
        worker.finish()
    t4 = time.perf_counter()
    times.update({"start": t1 - t0, "run nb": t2 - t1, "hidden": t3 - t2,
                  "waiting": sub.waited, "grader": t3 - t2 - sub.waited, "stop": t4 - t3,
                  "total": t4 - t0, "round trips": sub.trips, "requests": sub.requests})
    return times


def warm_floor(nb: dict, lesson: str) -> InProcessSubmission:
    """The notebook loaded in this process, its hidden tests run once (a warm-up)."""
    sub = InProcessSubmission()
    with quiet():
        sub.load(cells_to_run(nb))
        runner.run(sub, lesson, seed=0)
    return sub


def floor_once(sub: InProcessSubmission, lesson: str, seed: int) -> float:
    """Seconds of the hidden tests with no process boundary at all, the second of two runs
    (the first warms this process's caches after the worker's run)."""
    with quiet():
        runner.run(sub, lesson, seed=seed)
        start = time.perf_counter()
        runner.run(sub, lesson, seed=seed)
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lessons", default="04_multi_head_attention,08_transformer")
    parser.add_argument("--runs", type=int, default=10, help="submissions of each kind")
    args = parser.parse_args()
    print("load:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    ratios: list[tuple[str, str, float]] = []
    for lesson in args.lessons.split(","):
        kinds = submissions(lesson)
        measured: dict[str, dict[str, list[float]]] = {kind: defaultdict(list) for kind in kinds}
        files = {**default_worker_files(), **classroom.public_files(lesson)}
        with SandboxPool(jobs=1, limits=DEFAULT_LIMITS, isolation="strict", worker_files=files,
                         spares=classroom.spares(1)) as pool:
            for nb in kinds.values():
                grade_once(pool, nb, lesson, seed=0)  # warm the trusted side
            floors = {kind: warm_floor(nb, lesson) for kind, nb in kinds.items()}
            for i in range(args.runs):
                for kind, nb in kinds.items():
                    for key, value in grade_once(pool, nb, lesson, seed=i).items():
                        measured[kind][key].append(value)
                    # side by side: a change in the machine's speed falls on both alike
                    measured[kind]["floor"].append(floor_once(floors[kind], lesson, seed=i))
        print(f"\n{lesson}: medians of {args.runs} submissions of each kind, one at a time "
              f"(ms; round trips, requests: counts)\n")
        print("| kind | " + " | ".join(COLUMNS) + " |")
        print("|---|" + "---|" * len(COLUMNS))
        for kind in kinds:
            cells = []
            for column in COLUMNS:
                value = statistics.median(measured[kind][column])
                cells.append(f"{value:.0f}" if column in COUNTS else f"{1000 * value:.0f}")
            print(f"| {kind} | " + " | ".join(cells) + " |")
            pairs = zip(measured[kind]["total"], measured[kind]["floor"], strict=True)
            ratios.append((lesson, kind.replace(" ", "-"),
                           statistics.median(total / floor for total, floor in pairs)))
    print("\nload:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    print()
    for lesson, kind, ratio in ratios:
        print(f"floor-ratio {lesson} {kind} {ratio:.2f}")


if __name__ == "__main__":
    main()
