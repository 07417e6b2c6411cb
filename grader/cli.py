"""``python -m grader``: grade one notebook (check), a class (grade), build a student bundle."""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from typing import TextIO

from .limits import DEFAULT_LIMITS
from .notebook import NotebookError


def _private_stdout() -> TextIO:
    """Keep the real stdout for our own output and send fd 1 to stderr, so nothing any
    library (or notebook) prints can reach or corrupt the machine-readable output."""
    sys.stdout.flush()
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return out


def cmd_check(args: argparse.Namespace) -> int:
    from . import results as fmt
    from .engine import check_notebook
    from .i18n import choose, localize

    out = _private_stdout() if args.format == "json" else sys.stdout
    try:
        result = check_notebook(args.notebook, args.lesson, load_timeout=args.timeout)
    except NotebookError as exc:
        print(f"grader: {exc}", file=sys.stderr)
        return 2
    except KeyError as exc:
        print(f"grader: {exc.args[0]}", file=sys.stderr)
        return 2
    result = localize(result, choose(args.lang, result.edition))
    if args.format == "json":
        out.write(fmt.to_json(result) + "\n")
        out.flush()
    else:
        out.write(fmt.to_text(result, color=out.isatty()) + "\n")
    return 0


def _raise_interrupted(signum: int, frame: object) -> None:
    from .classroom import Interrupted

    raise Interrupted(signum)


def cmd_grade(args: argparse.Namespace) -> int:
    import signal
    from pathlib import Path

    from .classroom import Options, grade_class
    from .engine import hidden_test_file

    submitted = Path(args.submitted)
    if not submitted.is_dir():
        print(f"grader: {submitted}: no such folder", file=sys.stderr)
        return 2
    try:
        hidden_test_file(args.lesson)
    except KeyError as exc:
        print(f"grader: {exc.args[0]}", file=sys.stderr)
        return 2
    warnings.simplefilter("ignore")  # oracles' warnings are not the instructor's business
    limits = DEFAULT_LIMITS.with_(wall_s=args.timeout, memory_bytes=int(args.memory * (1 << 30)))
    require = tuple(r.strip() for r in (args.require or "").split(",") if r.strip())
    from .sandbox.probe import PROTECTIONS

    unknown = [r for r in require if r not in PROTECTIONS]
    if unknown:
        print(f"grader: unknown protection(s) {', '.join(unknown)}; known: "
              f"{', '.join(PROTECTIONS)}", file=sys.stderr)
        return 2
    opts = Options(lesson=args.lesson, out=Path(args.out), jobs=args.jobs, force=args.force,
                   isolation=args.isolation, require=require, limits=limits,
                   lang=args.lang)
    signal.signal(signal.SIGTERM, _raise_interrupted)
    try:
        summary = grade_class(submitted, opts,
                              on_plan=lambda plan: print(plan.describe(), file=sys.stderr))
    except (KeyboardInterrupt, Exception) as exc:  # noqa: BLE001 - say why, briefly
        done = getattr(exc, "summary", None)
        if isinstance(exc, KeyboardInterrupt) or type(exc).__name__ == "Interrupted":
            left = f"{done.graded} graded, {done.left} left" if done else "nothing graded"
            print(f"grader: interrupted ({left}); every result written is complete: run the "
                  "same command again to grade the rest", file=sys.stderr)
            return 128 + getattr(exc, "signum", signal.SIGINT)
        if type(exc).__name__ in ("SandboxUnavailable", "SandboxError"):
            print(f"grader: {exc}", file=sys.stderr)
            return 3
        raise
    print(f"graded {summary.graded} submission(s), kept {summary.reused} earlier result(s) "
          f"in {summary.seconds:.1f} s (median {summary.median_s:.2f} s per submission)")
    isolation = "strict" if opts.isolation == "full" else opts.isolation
    print(f"protections: {', '.join(summary.protections) or 'none'} (isolation {isolation})")
    if summary.missing:
        print(f"missing: {', '.join(summary.missing)} (why: {opts.out / 'run.json'})")
    print(f"wrote {opts.out / 'grades.csv'}, {opts.out / 'results'}/, {opts.out / 'feedback'}/")
    return 0


def cmd_release(args: argparse.Namespace) -> int:
    from .release import ReleaseError, build, summary

    try:
        plan = build(args.out, args.lessons, force=args.force, with_reference=args.with_reference,
                     with_references=args.with_references, lang=args.lang)
    except ReleaseError as exc:
        print(f"grader release: {exc}", file=sys.stderr)
        return 2
    print(summary(args.out, plan))
    return 0


def cmd_gradescope(args: argparse.Namespace) -> int:
    from .gradescope.package import build, summary

    try:
        pkg = build(args.lesson, args.out, timeout_s=args.timeout, memory_gib=args.memory,
                    visibility=args.visibility, stdout_visibility=args.stdout_visibility)
    except (KeyError, ValueError) as exc:
        print(f"grader gradescope: {exc.args[0]}", file=sys.stderr)
        return 2
    print(summary(pkg))
    return 0


def cmd_lms(args: argparse.Namespace) -> int:
    from .lms import LmsError, export

    try:
        _, text = export(args.folders, args.roster, args.to, key=args.key,
                         assignments=args.assignment, out=args.out, local_part=args.local_part)
    except LmsError as exc:
        print(f"grader lms: {exc}", file=sys.stderr)
        return 2
    print(text)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from .class_report import ReportError, write_report

    try:
        _, text = write_report(args.folder, args.submitted)
    except ReportError as exc:
        print(f"grader report: {exc}", file=sys.stderr)
        return 2
    print(text)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m grader", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    check = commands.add_parser("check", help="grade one notebook with the hidden graders")
    check.add_argument("notebook")
    check.add_argument("--format", choices=["text", "json"], default="text")
    check.add_argument("--lesson", default=None, help="lesson id, if the file name does not say it")
    check.add_argument("--timeout", type=float, default=DEFAULT_LIMITS.wall_s,
                       help=f"seconds the notebook may take (default {DEFAULT_LIMITS.wall_s:g})")
    check.add_argument("--lang", choices=["en", "zh"], default=None,
                       help="language of the hints (default: $COURSE_LANG, else the notebook's: "
                            "zh for a Chinese edition)")
    check.set_defaults(func=cmd_check)

    grade = commands.add_parser("grade", help="grade a class, each notebook in a sandbox")
    grade.add_argument("submitted", help="SUBMITTED/<student_id>/<lesson>/<lesson>.ipynb")
    grade.add_argument("--lesson", required=True)
    grade.add_argument("--out", required=True, help="folder for grades.csv, results/, feedback/")
    grade.add_argument("--jobs", type=int, default=1, help="notebooks graded at once")
    grade.add_argument("--force", action="store_true", help="regrade students already graded")
    grade.add_argument("--isolation", choices=["auto", "strict", "none", "full"], default="auto",
                       help="auto (default): sandbox with every protection this machine offers, "
                            "listed with the missing ones; strict: refuse unless every "
                            "protection is active (full: old name of strict); none: no "
                            "sandbox (only for trusted notebooks)")
    grade.add_argument("--require", default=None, metavar="PROTECTIONS",
                       help="comma-separated protections to refuse to grade without, e.g. "
                            "memory-cap,no-network (see the README's threat model)")
    grade.add_argument("--timeout", type=float, default=DEFAULT_LIMITS.wall_s,
                       help=f"seconds per notebook (default {DEFAULT_LIMITS.wall_s:g})")
    grade.add_argument("--memory", type=float, default=DEFAULT_LIMITS.memory_bytes / (1 << 30),
                       help="GiB of memory per notebook (default "
                            f"{DEFAULT_LIMITS.memory_bytes / (1 << 30):g})")
    grade.add_argument("--lang", choices=["en", "zh"], default=None,
                       help="language of the feedback pages (default: each notebook's; "
                            "grades.csv and results/ are always English)")
    grade.set_defaults(func=cmd_grade)

    release = commands.add_parser(
        "release", help="build the student bundle: lessons, their data and helpers, no secrets")
    release.add_argument("out", metavar="OUT", help="folder to create")
    release.add_argument("--lessons", default=None, metavar="LESSONS",
                         help="which lessons: 01-04, 01,03,05-07 or all (default all)")
    release.add_argument("--with-reference", default=None, metavar="LESSONS",
                         help="also ship the course's code (answers) of these earlier lessons, "
                              "e.g. 03,04 once they are due; by default later lessons run on the "
                              "students' own notebooks")
    release.add_argument("--with-references", action="store_true",
                         help="ship the course's code of every lesson the bundled ones build on")
    release.add_argument("--lang", choices=["en", "zh", "both"], default="en",
                         help="the lessons' edition: en (default), zh (Chinese, with a Chinese "
                              "README), or both for students to choose")
    release.add_argument("--force", action="store_true", help="replace OUT if it exists")
    release.set_defaults(func=cmd_release)

    gradescope = commands.add_parser(
        "gradescope", help="build a Gradescope autograder zip for one lesson")
    gradescope.add_argument("lesson", metavar="LESSON")
    gradescope.add_argument("out", metavar="OUT", help="folder for autograder.zip, or a .zip path")
    gradescope.add_argument("--timeout", type=float, default=120.0,
                            help="seconds the notebook may run (default 120)")
    gradescope.add_argument("--memory", type=float, default=2.0,
                            help="GiB of memory for the notebook (default 2; capped below "
                                 "the container's own limit)")
    gradescope.add_argument("--visibility", default="visible",
                            help="when students see each test: visible (default), "
                                 "after_due_date, after_published or hidden")
    gradescope.add_argument("--stdout-visibility", default="hidden",
                            help="when students see the autograder's stdout (default hidden)")
    gradescope.set_defaults(func=cmd_gradescope)

    lms = commands.add_parser(
        "lms", help="grades.csv as an LMS gradebook import (Canvas, Moodle), matched by a roster")
    lms.add_argument("folders", nargs="+", metavar="DIR", help="folders written by `grade --out`")
    lms.add_argument("--roster", required=True,
                     help="the LMS's gradebook export (Canvas: Grades > Export; Moodle: Export > "
                          "Plain text file), or any CSV with a header")
    lms.add_argument("--to", required=True, choices=["canvas", "moodle"])
    lms.add_argument("--key", default=None,
                     help="roster column holding student_id: login (SIS Login ID, Canvas's "
                          "default), sis, id, name, email (Moodle's default), idnumber, "
                          "username, or a column name")
    lms.add_argument("--assignment", action="append", default=None, metavar="NAME",
                     help="the LMS assignment of each DIR, in order (Canvas: 'Name (id)' updates "
                          "an existing assignment; default: the lesson id, a new assignment)")
    lms.add_argument("--local-part", action="store_true",
                     help="match student_id with the part of the key before '@' (a roster "
                          "keyed by email, folders named by user name)")
    lms.add_argument("--out", default=None, help="file to write (default DIR/<lms>-import.csv)")
    lms.set_defaults(func=cmd_lms)

    report = commands.add_parser(
        "report", help="one HTML page about a graded class (DIR/report.html)")
    report.add_argument("folder", metavar="DIR", help="a folder written by `grade --out`")
    report.add_argument("--submitted", default=None, metavar="SUBMITTED",
                        help="the graded notebooks, for similarity flags (default: the folder "
                             "`grade` read, as run.json records it)")
    report.set_defaults(func=cmd_report)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)
