"""Benchmark: grade one class with ``grader grade`` and with ``nbgrader autograde``.

    python benchmarks/grade_class.py --lesson 04_multi_head_attention --students 100 --jobs 1,2
    sudo python benchmarks/grade_class.py --as-user alice:/home/alice/venv/bin/python \
        --nbgrader-students 0

Builds a class of correct, buggy (planted bugs from tests/planted) and blank submissions,
grades it with the course grader (sandboxed, ``--jobs N``) and with nbgrader autograde in
a temporary course, and prints seconds per submission side by side with their ratio.
``--jobs 1,2`` (the default) grades the class once per value, and the run ends with
``jobs-2/jobs-1 throughput: <ratio>`` (submissions per second of the last value over the first).
A class of 100 still feels the run's fixed cost (torch and the hidden tests imported in the
sandbox's first zygote and the first trusted process; the others are forks of them), so
the run also prints the throughput once each job has graded its first submission (from
when the results are written), which is what a larger class tends to.
nbgrader autograde runs twice, through this interpreter: as the course configures it (each
notebook in the course's sandbox) and in nbgrader's own kernels (``COURSE_AUTOGRADE=kernel``,
a kernel per notebook, slow), so ``--nbgrader-students K`` grades only the first K
submissions with it (default: all; 0 skips it).

What limits ``--jobs N``: the run also grades the class with N separate ``grade --jobs 1``
at once, each on its share of the class, which share nothing but the machine: what N
graders can get from it, beside what ``--jobs N`` gets (each of them also starts its next
worker ahead where it sees a core beside its own, so on N cores they compete for them).
CPU is counted for the whole machine (``/proc/stat``, so run it on an idle machine): a
run's own counters (``RUSAGE_CHILDREN``) miss the sandbox's zygotes and every worker they
reaped, whose time never comes back up through bubblewrap's processes (a pool that ran 100
workers: 10 CPU s in its zygote and the workers it reaped, 0.07 s in ``RUSAGE_CHILDREN``).

``--as-user USER:PYTHON[:COURSE]`` (run as root) grades the same class a second time as
USER, with PYTHON (e.g. that user's venv) from COURSE (a checkout USER can read; default
this one): the sandbox then runs unprivileged (a user namespace, rlimits instead of root's
cgroups), and the two medians per submission are printed side by side with their ratio.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from grader.check.notebook import read_notebook  # noqa: E402
from grader.classgrade.jobs import cores  # noqa: E402


def build_class(lesson: str, students: int, folder: Path) -> dict[str, str]:
    """SUBMITTED/<id>/<lesson>/<lesson>.ipynb: 40% correct, 40% buggy, 20% blank."""
    from planted import modules

    solution = read_notebook(ROOT / "solutions" / lesson / f"{lesson}.ipynb")
    blank = read_notebook(ROOT / "lessons" / lesson / f"{lesson}.ipynb")
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


def machine_cpu_seconds() -> float | None:
    """CPU seconds every core of this machine has spent busy since boot (Linux), else None."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    idle, iowait = fields[3], fields[4]
    return (sum(fields[:8]) - idle - iowait) / os.sysconf("SC_CLK_TCK")


def machine_cpu_since(before: float | None) -> float | None:
    """CPU seconds the machine has spent busy since ``machine_cpu_seconds()`` said ``before``."""
    now = machine_cpu_seconds()
    return None if before is None or now is None else now - before


def run_independent(submitted: Path, lesson: str, graders: int, isolation: str,
                    tmp: Path) -> dict:
    """``graders`` separate ``grade --jobs 1`` runs at once, each on its share of the class
    (round robin): nothing shared but the machine, so the most ``--jobs`` could give here."""
    shares = [tmp / f"share-{i}" for i in range(min(graders, len(list(submitted.iterdir()))))]
    for i, student in enumerate(sorted(p.name for p in submitted.iterdir())):
        shutil.copytree(submitted / student, shares[i % len(shares)] / student)
    machine_before = machine_cpu_seconds()
    start = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-m", "grader", "grade", str(share), "--lesson",
                               lesson, "--out", str(tmp / f"{share.name}-out"), "--jobs", "1",
                               "--isolation", isolation], cwd=ROOT, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL) for share in shares]
    if any(proc.wait() != 0 for proc in procs):
        sys.exit("an independent grading run failed")
    wall = time.perf_counter() - start
    return {"wall": wall, "cpu": machine_cpu_since(machine_before),
            "n": sum(len(list(share.iterdir())) for share in shares)}


def run_course_grader(submitted: Path, lesson: str, jobs: int, isolation: str, out: Path,
                      user: str | None = None, python: str = sys.executable,
                      course: Path = ROOT) -> dict:
    cmd = [python, "-m", "grader", "grade", str(submitted), "--lesson", lesson, "--out",
           str(out), "--jobs", str(jobs), "--isolation", isolation]
    if user is not None:
        out.mkdir(parents=True)
        shutil.chown(out, user)
        cmd = ["runuser", "-u", user, "--", "env", "-i", "PATH=/usr/bin:/bin",
               f"HOME={Path('~' + user).expanduser()}", *cmd]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    machine_before = machine_cpu_seconds()
    start, started_at = time.perf_counter(), time.time()
    proc = subprocess.run(cmd, cwd=course, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"grading failed ({' '.join(cmd)}):\n{proc.stderr[-3000:]}")
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = machine_cpu_since(machine_before)
    run = json.loads((out / "run.json").read_text())
    # when each result was written: the first ``jobs`` end the run's fixed cost
    written = sorted(p.stat().st_mtime for p in (out / "results").glob("*.json"))
    first = steady = None
    if len(written) > jobs and written[-1] > written[jobs - 1] and written[0] >= started_at:
        # (files carry the wall clock's times: where it was set back during the run, none)
        first = written[jobs - 1] - started_at
        steady = (len(written) - jobs) / (written[-1] - written[jobs - 1])
    if cpu is None:  # the processes waited for: the sandbox's workers are missing from it
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall": wall, "median": run["median_seconds_per_submission"], "n": run["students"],
            "protections": run["protections"], "missing": run["sandbox"]["missing"], "cpu": cpu,
            "first": first, "steady": steady}


def run_nbgrader(submitted: Path, lesson: str, count: int, course: Path) -> dict[str, dict]:
    """``nbgrader autograde`` of the first ``count`` submissions, through this interpreter,
    twice: as the course configures it (the sandbox) and in nbgrader's own kernels
    (``COURSE_AUTOGRADE=kernel``)."""
    shutil.copytree(ROOT / "solutions", course / "solutions")
    shutil.copy(ROOT / "nbgrader_config.py", course)
    env = dict(os.environ, PYTHONPATH=str(ROOT))  # this checkout's grader, in nbgrader and kernels
    nbgrader = [sys.executable, "-m", "nbgrader"]
    subprocess.run([*nbgrader, "generate_assignment", lesson, "--force"], cwd=course, check=True,
                   capture_output=True, env=env)
    chosen = sorted(p.name for p in submitted.iterdir())[:count]
    for student in chosen:
        shutil.copytree(submitted / student, course / "submitted" / student)
    timed = {}
    for mode in ("sandbox", "kernel"):
        start = time.perf_counter()
        subprocess.run([*nbgrader, "autograde", lesson, "--force"], cwd=course, check=True,
                       capture_output=True, env=dict(env, COURSE_AUTOGRADE=mode))
        timed[mode] = {"wall": time.perf_counter() - start, "n": len(chosen)}
    return timed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lesson", default="04_multi_head_attention")
    parser.add_argument("--students", type=int, default=100)
    parser.add_argument("--jobs", default="1,2", help="comma-separated, e.g. 1,2,4")
    parser.add_argument("--isolation", default="auto")
    parser.add_argument("--nbgrader-students", type=int, default=None)
    parser.add_argument("--as-user", default=None, metavar="USER:PYTHON[:COURSE]")
    args = parser.parse_args()
    job_counts = [int(j) for j in args.jobs.split(",")]

    most_jobs = max(job_counts)
    rows: list[tuple[str, dict]] = []
    independent = None
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        tmp.chmod(0o755)
        kinds = build_class(args.lesson, args.students, tmp / "submitted")
        for jobs in job_counts:
            rows.append((f"`grade --jobs {jobs}` as {getpass.getuser()}, {sys.executable}",
                         run_course_grader(tmp / "submitted", args.lesson, jobs,
                                           args.isolation, tmp / f"out-{jobs}")))
        if most_jobs > 1:
            independent = run_independent(tmp / "submitted", args.lesson, most_jobs,
                                          args.isolation, tmp)
        if args.as_user:
            user, python, *course = args.as_user.split(":")
            rows.append((f"`grade --jobs {job_counts[-1]}` as {user}, {python}",
                         run_course_grader(tmp / "submitted", args.lesson, job_counts[-1],
                                           args.isolation, tmp / "out-user", user, python,
                                           Path(course[0]) if course else ROOT)))
        count = args.students if args.nbgrader_students is None else args.nbgrader_students
        theirs = run_nbgrader(tmp / "submitted", args.lesson, count, tmp / "course") if count else None
    mix = {k: list(kinds.values()).count(k) for k in ("correct", "buggy", "blank")}
    print(f"lesson {args.lesson}: {args.students} submissions {mix}; machine: "
          f"{cores()} cores; load: {subprocess.getoutput('uptime').strip()}")
    for label, r in rows:
        print(f"{label}: protections {', '.join(r['protections'])}; missing "
              f"{', '.join(r['missing']) or 'none'}")
    print()
    print("| grader | submissions | total s | s / submission | median s / submission "
          "| CPU s / submission | cores busy | first N graded at, s | s / submission after them |")
    print("|---|---|---|---|---|---|---|---|---|")
    for label, r in rows:
        steady = f"{r['first']:.1f} | {1 / r['steady']:.3f}" if r.get("steady") else "– | –"
        print(f"| {label} | {r['n']} | {r['wall']:.1f} | {r['wall'] / r['n']:.3f} | "
              f"{r['median']:.3f} | {r['cpu'] / r['n']:.3f} | {r['cpu'] / r['wall']:.2f} | {steady} |")
    if independent is not None:
        r = independent
        busy = f"{r['cpu'] / r['n']:.3f} | {r['cpu'] / r['wall']:.2f}" if r["cpu"] else "– | –"
        print(f"| {most_jobs} separate `grade --jobs 1` at once, a share of the class each | "
              f"{r['n']} | {r['wall']:.1f} | {r['wall'] / r['n']:.3f} | – | {busy} | – | – |")
    for mode, label in (("sandbox", "nbgrader autograde (the course's sandbox)"),
                        ("kernel", "nbgrader autograde, nbgrader's kernels")):
        if theirs is not None:
            r = theirs[mode]
            print(f"| {label} | {r['n']} | {r['wall']:.1f} | {r['wall'] / r['n']:.3f} | – | – | – | – | – |")
    print()
    ours = rows[:len(job_counts)]
    if args.as_user:
        user, same_jobs = rows[-1], ours[-1][1]
        print(f"{user[0].split(',')[0]} / {getpass.getuser()}, median per submission: "
              f"{user[1]['median'] / same_jobs['median']:.2f}×")
    if theirs is not None:
        for mode in ("sandbox", "kernel"):
            r = theirs[mode]
            for (_, course), jobs in zip(ours, job_counts, strict=True):
                print(f"nbgrader autograde ({mode}) / course grader --jobs {jobs}, per submission: "
                      f"{(r['wall'] / r['n']) / (course['wall'] / course['n']):.1f}×")
    if len(job_counts) > 1:
        first, last = ours[0][1], ours[-1][1]
        if independent is not None and job_counts[0] == 1:
            print(f"{most_jobs} separate graders at once / --jobs 1, throughput (what this machine "
                  f"gives {most_jobs} graders that share nothing): "
                  f"{(independent['n'] / independent['wall']) / (first['n'] / first['wall']):.2f}")
        if first["steady"] and last["steady"]:
            print(f"jobs-{job_counts[-1]}/jobs-{job_counts[0]} throughput once each job has graded "
                  f"its first submission (at {first['first']:.1f} s with --jobs {job_counts[0]}, "
                  f"{last['first']:.1f} s with --jobs {job_counts[-1]}): "
                  f"{last['steady'] / first['steady']:.2f}")
        print(f"jobs-{job_counts[-1]}/jobs-{job_counts[0]} throughput: "
              f"{(last['n'] / last['wall']) / (first['n'] / first['wall']):.2f}")


if __name__ == "__main__":
    main()
