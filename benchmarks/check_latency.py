"""Benchmark: how long ``python -m grader check`` takes, where the time goes, before and after.

    python benchmarks/check_latency.py                        # every lesson, 10 runs each
    python benchmarks/check_latency.py --lessons 01,04,09 --runs 5
    python benchmarks/check_latency.py --before 8fc2e0b --variants before,cold,helper
    python benchmarks/check_latency.py --before HEAD~2 --variants torch,before-cold,cold

Every run is a fresh ``python -m grader check SOLUTION --format json`` process (the grader
started cold), timed from spawn to exit; the runs alternate between lessons and variants,
so that a change in the machine's load falls on all of them alike. Variants:

- ``before``: the course at ``--before`` (a git revision, extracted to a temporary
  folder; default: the main branch before the check helper), each check in its own process;
- ``cold``: this copy, ``--no-helper``: each check in its own process, sandboxed;
- ``before-cold``: the course at ``--before`` (one with ``--profile``), ``--no-helper``;
- ``torch``: a bare ``python -c "import torch"``, the floor of a cold check on a torch
  lesson; with ``cold`` it ends with one line per lesson, ``cold/torch LESSON 1.32``;
- ``helper``: this copy, through the warm check helper (``grader/helper/``), started by
  a first check whose time is shown apart (``first``: it finds no helper), stopped at the end;
- ``before-helper``: the course at ``--before`` through its own warm helper, alternated
  with ``helper`` (e.g. ``--before HEAD~3 --variants before-helper,helper``: a change to
  the helper, measured side by side).

Each check prints where its time went (``--profile``; for ``before``, a small driver times
the same steps from outside). The breakdown, medians in seconds:

- ``cpu``: CPU time (user + system) of the check's process and the processes it waited
  for: through the helper, the client alone (the helper's side is not its child); the
  figure to compare on a busy machine, where wall-clock time is not;
- ``start``: spawn to the grader's ``main`` (the interpreter and the CLI's imports);
- ``setup``: ``main`` to the worker being forked (reading the notebook, the trusted side's
  imports where they come first, opening the sandbox, reaching the helper);
- ``sandbox``: of setup, opening a sandbox (cold: probe, zygote);
- ``worker``: starting the worker process;
- ``load``: running the notebook in the worker, its own imports included; ``cells`` of
  it: executing the cells;
- ``hidden``: the hidden tests (the import of their module excluded);
- ``imports``: the trusted side's imports of the engine and the lesson's hidden tests
  (torch): sequential before, in a thread beside the worker now, done in advance in the
  helper;
- ``exit``: from the last step to the process's end (closing the sandbox, exiting).

It prints ``uptime`` before and after: figures from a busy machine are slower.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BEFORE = "8fc2e0b"  # main before issue 15's check work (fresh worker per check, no helper)
TARGETS = {"01": 1.0, "02": 1.0, "09": 5.0}  # seconds; the other lessons (torch) 2.5
PREFIX = "grader-profile: "

DRIVER = r'''
import importlib, json, sys, time
T0 = time.time()
sys.path.insert(0, sys.argv[1])
spans = [["main", T0, T0]]

def timed(owner, name, label):
    original = getattr(owner, name)
    def inner(*args, **kwargs):
        start = time.time()
        try:
            return original(*args, **kwargs)
        finally:
            spans.append([label, start, time.time()])
    setattr(owner, name, inner)

import_module = importlib.import_module
def import_hidden(name, *args):
    if name.startswith("grader.hidden.") and name not in sys.modules:
        start = time.time()
        try:
            return import_module(name, *args)
        finally:
            spans.append(["imports", start, time.time()])
    return import_module(name, *args)
importlib.import_module = import_hidden

start = time.time()
import grader.check.engine as engine
spans.append(["imports", start, time.time()])
import grader.cli, grader.check.launch, grader.check.remote
timed(grader.check.launch.LocalWorker, "__init__", "worker")
timed(grader.check.remote.RemoteSubmission, "load", "load")
timed(engine, "run_hidden_tests", "hidden")
try:
    code = grader.cli.main(sys.argv[2:])
finally:
    print("grader-profile: " + json.dumps(spans), file=sys.stderr)
sys.exit(code)
'''


def lesson_ids(spec: str) -> list[str]:
    from coursekit import catalogue

    return [lesson.id for lesson in catalogue.select(spec)]


def extract(revision: str, dest: Path) -> Path:
    """The course at ``revision``, as files (``git archive``)."""
    archive = dest / "before.tar"
    subprocess.run(["git", "archive", "--format=tar", "-o", str(archive), revision], cwd=ROOT,
                   check=True)
    tree = dest / "before"
    with tarfile.open(archive) as tar:
        tar.extractall(tree, filter="data")
    return tree


def run_once(variant: str, lesson: str, before: Path | None, driver: Path | None,
             env: dict[str, str]) -> dict[str, float]:
    notebook = f"solutions/{lesson}/{lesson}.ipynb"
    if variant == "torch":
        cmd, cwd = [sys.executable, "-c", "import torch"], ROOT
    elif variant == "before":
        cmd = [sys.executable, str(driver), str(before), "check", notebook, "--format", "json"]
        cwd = before
    else:
        cmd = [sys.executable, "-m", "grader", "check", notebook, "--format", "json", "--profile"]
        cmd += ["--no-helper"] if variant in ("cold", "before-cold") else []
        cwd = before if variant.startswith("before-") else ROOT
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    spawned = time.time()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    ended = time.time()
    now = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = now.ru_utime - used.ru_utime + now.ru_stime - used.ru_stime
    if proc.returncode != 0:
        sys.exit(f"{variant} {lesson}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
    if variant == "torch":
        return dict.fromkeys(COLUMNS, 0.0) | {"total": ended - spawned, "cpu": cpu}
    result = json.loads(proc.stdout)
    if result["score"] != result["max_score"]:
        sys.exit(f"{variant} {lesson}: the reference scored {result['score']} of "
                 f"{result['max_score']}: {proc.stdout[:2000]}")
    spans: list[tuple[str, float, float]] = []
    for line in proc.stderr.splitlines():
        if line.startswith(PREFIX):
            spans += [tuple(s) for s in json.loads(line[len(PREFIX):])]
    return breakdown(spans, spawned, ended) | {"cpu": cpu}


def breakdown(spans: list[tuple[str, float, float]], spawned: float, ended: float) -> dict[str, float]:
    def total(name: str) -> float:
        return sum(e - s for n, s, e in set(spans) if n == name)

    def first(name: str, default: float) -> float:
        return min((s for n, s, _ in spans if n == name), default=default)

    main = first("main", spawned)
    worker = first("worker", main)
    hidden = [(s, e) for n, s, e in set(spans) if n == "hidden"]
    imports = [(s, e) for n, s, e in set(spans) if n == "imports"]
    # the hidden tests' time, less an import of their module (torch) made inside it
    waited = sum(max(0.0, min(e, he) - max(s, hs)) for hs, he in hidden for s, e in imports)
    last = max((e for _, _, e in spans), default=main)
    return {"total": ended - spawned, "start": main - spawned, "setup": worker - main,
            "sandbox": total("sandbox"), "worker": total("worker"), "load": total("load"),
            "cells": total("cells"), "hidden": total("hidden") - waited,
            "imports": total("imports"), "exit": ended - last}


COLUMNS = ["total", "cpu", "start", "setup", "sandbox", "worker", "load", "cells", "hidden", "imports",
           "exit"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lessons", default="all", help="01-04, 01,09, all (default)")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--before", default=BEFORE, help=f"git revision (default {BEFORE})")
    parser.add_argument("--variants", default="before,cold,helper")
    args = parser.parse_args()
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    lessons = lesson_ids(args.lessons)
    load_before = subprocess.getoutput("uptime").strip()
    env = dict(os.environ, COURSE_CHECK_HELPER="15")
    env.pop("CI", None)
    samples: dict[tuple[str, str], list[dict[str, float]]] = {}
    first: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        before = driver = None
        if {"before", "before-helper", "before-cold"} & set(variants):
            before = extract(args.before, Path(tmp))
            driver = Path(tmp) / "driver.py"
            driver.write_text(DRIVER, encoding="utf-8")
        helpers = {v: before if v == "before-helper" else ROOT
                   for v in variants if v in ("helper", "before-helper")}
        for variant, root in helpers.items():
            subprocess.run([sys.executable, "-m", "grader", "helper", "stop"], cwd=root, env=env,
                           capture_output=True)
            time.sleep(1.0)
            first[variant] = run_once(variant, lessons[0], before, None, env)["total"]
            subprocess.run([sys.executable, "-m", "grader", "helper", "start"], cwd=root, env=env,
                           capture_output=True)  # warm before the timed runs (older code: no-op)
        try:
            for run in range(args.runs):
                for lesson in lessons:
                    for variant in variants:
                        sample = run_once(variant, lesson, before, driver, env)
                        samples.setdefault((lesson, variant), []).append(sample)
                print(f"run {run + 1}/{args.runs} done", file=sys.stderr)
        finally:
            for root in helpers.values():
                subprocess.run([sys.executable, "-m", "grader", "helper", "stop"], cwd=root,
                               env=env, capture_output=True)
        if before is not None:
            shutil.rmtree(before, ignore_errors=True)
    load_after = subprocess.getoutput("uptime").strip()

    def median(lesson: str, variant: str, column: str) -> float:
        return statistics.median(s[column] for s in samples[(lesson, variant)])

    print(f"python -m grader check SOLUTION --format json, a fresh process each time; "
          f"median of {args.runs} alternating runs; {os.cpu_count()} cores")
    print(f"load before: {load_before}")
    print(f"load after:  {load_after}")
    print()
    head = ["lesson", "target s"] + [f"{v} s" for v in variants]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for lesson in lessons:
        target = TARGETS.get(lesson[:2], 2.5)
        cells = [f"{median(lesson, v, 'total'):.2f}" for v in variants]
        print(f"| {lesson} | ≤ {target:g} | " + " | ".join(cells) + " |")
    for variant, seconds in first.items():
        print(f"\nfirst check, no helper running ({variant}, {lessons[0]}): {seconds:.2f} s")
    print("\nWhere the time goes (medians, s; see the docstring for each column):\n")
    print("| lesson | variant | " + " | ".join(COLUMNS) + " |")
    print("|---|---|" + "---|" * len(COLUMNS))
    for lesson in lessons:
        for variant in variants:
            if variant != "torch":
                values = " | ".join(f"{median(lesson, variant, c):.{3 if c == 'cpu' else 2}f}"
                                    for c in COLUMNS)
                print(f"| {lesson} | {variant} | {values} |")
    if "torch" in variants:
        print()
        for variant in [v for v in variants if v in ("cold", "before-cold")]:
            for lesson in lessons:
                ratio = median(lesson, variant, "total") / median(lesson, "torch", "total")
                print(f"{variant}/torch {lesson} {ratio:.2f}")


if __name__ == "__main__":
    main()
