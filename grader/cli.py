"""``python -m grader`` (or ``grader``): grade one notebook (check), a class (grade), build a
student bundle. Every command takes ``-v`` / ``--log-level LEVEL`` (``grader.common.logs``)."""

from __future__ import annotations

import argparse
import logging
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from coursekit.errors import UserError
from grader.check import command as checking
from grader.check import timeline
from grader.check.command import CheckOptions, call_timeout_option, lesson_id
from grader.common import logs
from grader.common.limits import DEFAULT_LIMITS, GIB, Limits
from grader.helper.client import ANSWER_MARGIN_S, status_lines
from grader.i18n.message import Message, msg, said_by
from grader.runtime.wire import one_thread_each

if TYPE_CHECKING:
    from grader.classgrade.classroom import Interrupted, Options
    from grader.classgrade.late import Deadlines

_log = logging.getLogger(__name__)


def cmd_check(args: argparse.Namespace) -> int:
    opts = CheckOptions.from_args(args)
    if not args.no_helper:
        from grader import helper
        from grader.helper import client

        with timeline.span("helper"):
            answer = None if client.tried else helper.check(  # __main__'s quick_check did
                _check_argv(args.argv), color=sys.stdout.isatty(),
                timeout_s=args.timeout + ANSWER_MARGIN_S)
        _log.debug("the warm helper %s", "answered" if answer is not None else
                   "did not answer (none runs, or it cannot): checking in this process")
        if answer is not None:
            if args.profile:
                print(timeline.dumps(), file=sys.stderr)
            return answer.emit()
        code = checking.main(opts, _check_output())
        helper.start()  # none answered: one for the checks after this one, warm by then
        return code
    return checking.main(opts, _check_output())


def _check_output() -> checking.Show:
    """How ``check`` shows its report (imported when a check runs here, not for the helper's)."""
    from grader.outputs.render import check_output

    return check_output


def _check_argv(argv: list[str]) -> list[str]:
    """``check ...`` as the helper reads it: the options before the command (the log's,
    whose values are never ``check``) left out."""
    return argv[argv.index("check"):]


START_WAIT_S = 180.0  # `helper start`: for its zygotes to be warm (a busy machine)


def cmd_helper(args: argparse.Namespace) -> int:
    from grader import helper

    if args.action == "start":
        if not helper.start(wait_s=START_WAIT_S):
            print(said(msg("the check helper is off here (COURSE_CHECK_HELPER, or CI)")), file=sys.stderr)
            return 2
    reply = helper.request("status" if args.action == "start" else args.action)
    if reply is None:
        print(said(msg("no check helper is running for this copy of the course and this Python")))
        return 0 if args.action != "start" else 2
    if args.action == "stop":
        print(said(msg("the check helper is stopping")))
    else:
        for line in status_lines(reply):
            print(said(line))
    return 0


def _raise_interrupted(signum: int, frame: object) -> None:
    from grader.classgrade.classroom import Interrupted

    raise Interrupted(signum)


def _interrupted(exc: Interrupted) -> int:
    """``grade`` stopped by Ctrl-C or SIGTERM: what it had done, and its exit status."""
    done = exc.summary
    left = msg("{graded} graded, {left} left", graded=done.graded, left=done.left) if done \
        else msg("nothing graded")
    print("grader: " + said(msg("interrupted ({progress}); every result written is complete: run "
                                "the same command again to grade the rest", progress=left)),
          file=sys.stderr)
    return 128 + exc.signum


def _languages() -> list[str]:
    """The languages ``--lang`` takes: English and every catalogue's (``grader.i18n``)."""
    from grader.i18n import LANGUAGES

    return list(LANGUAGES)


def cmd_grade(args: argparse.Namespace) -> int:
    """Grade the class (``grade_options`` reads the command line): the run, stopped cleanly
    by Ctrl-C or SIGTERM, then its summary in the class's language."""
    import signal

    from grader.classgrade.classroom import Interrupted, grade_class
    from grader.i18n import class_language

    submitted, opts = grade_options(args)
    said_now = class_language(args.lang, ())  # the class's editions are known once graded
    warnings.simplefilter("ignore")  # oracles' warnings are not the instructor's business
    signal.signal(signal.SIGTERM, _raise_interrupted)
    try:
        summary = grade_class(submitted, opts,
                              on_plan=lambda plan: print(plan.describe(said_now), file=sys.stderr))
    except KeyboardInterrupt:  # before grading began (then grade_class raises Interrupted)
        return _interrupted(Interrupted(signal.SIGINT))
    except Interrupted as exc:
        return _interrupted(exc)
    from grader.classgrade.classroom import editions_handed_in, summary_lines
    from grader.i18n import words

    t = words(class_language(args.lang, editions_handed_in(opts.out, summary.statuses)))
    for line in summary_lines(summary, opts):
        print(t(line))
    return 0


def grade_options(args: argparse.Namespace) -> tuple[Path, Options]:
    """``grade``'s command line as the class grader's options (SUBMITTED, then the rest);
    UserError for what cannot be graded (no such folder or lesson, a student's folder given
    for the class, an unknown protection)."""
    from grader.classgrade.classroom import Options
    from grader.testkit.lessons import hidden_test_file

    submitted = Path(args.submitted)
    if not submitted.is_dir():
        raise UserError(msg("{folder}: no such folder", folder=submitted))
    lesson = lesson_id(args.lesson)  # "04" or "4" as `release` takes them
    hidden_test_file(lesson)
    problem = _class_layout_problem(submitted, lesson)
    if problem:
        raise UserError(problem)
    return submitted, Options(
        lesson=lesson, out=Path(args.out), jobs=args.jobs, force=args.force,
        isolation=args.isolation, require=_protections(args.require),
        limits=_limits(args), students=tuple(args.student or ()),
        deadlines=_deadlines(args.deadlines, submitted), lang=args.lang)


def _limits(args: argparse.Namespace) -> Limits:
    """``--timeout``, ``--memory`` (GiB) and ``--call-timeout`` over the defaults."""
    return DEFAULT_LIMITS.with_(wall_s=args.timeout, call_s=args.call_timeout,
                                memory_bytes=int(args.memory * GIB))


def _protections(text: str | None) -> tuple[str, ...]:
    """``--require``'s comma-separated protections; UserError for one the sandbox lacks."""
    from grader.sandbox.probe import PROTECTIONS

    require = tuple(r.strip() for r in (text or "").split(",") if r.strip())
    unknown = [r for r in require if r not in PROTECTIONS]
    if unknown:
        raise UserError(msg("unknown protection(s) {unknown}; known: {known}",
                            unknown=", ".join(unknown), known=", ".join(PROTECTIONS)))
    return require


def _deadlines(given: str | None, submitted: Path) -> Deadlines | None:
    """``--deadlines FILE`` (``none``: no penalties), else the ``deadlines.toml`` found near
    SUBMITTED; said on stderr when there is none."""
    from grader.classgrade.late import default_locations, find_default, load

    found = given or find_default(submitted)
    if found is None:
        looked = ", ".join(str(p.parent) for p in default_locations(submitted))
        print("grader: " + said(msg("no deadlines.toml (looked in {folders}): no late penalties "
                                    "this run; --deadlines FILE names one, --deadlines none says so",
                                    folders=looked)), file=sys.stderr)
        return None
    return None if str(found) == "none" else load(found, lessons=_lesson_ids())


def cmd_release(args: argparse.Namespace) -> int:
    from grader.authoring.release import build, summary

    plan = build(args.out, args.lessons, force=args.force, with_reference=args.with_reference,
                 with_references=args.with_references, lang=args.edition)
    print(summary(args.out, plan, lang=_language(args)))  # its --lang is the bundle's edition
    return 0


def cmd_deadlines(args: argparse.Namespace) -> int:
    from pathlib import Path

    from grader.classgrade.classroom import student_folders
    from grader.classgrade.late import format_duration, load

    deadlines = load(args.file, lessons=_lesson_ids())
    rule = deadlines.rule
    after = msg(", nothing after {duration}", duration=format_duration(rule.zero_after)) \
        if rule.zero_after else ""
    print(said(msg("{file}: {due} due date(s), {extended} student(s) with an extension; penalty "
                   "{per_day} of the raw score per day late, at most {most}, grace {grace}{after}",
                   file=args.file, due=len(deadlines.due), extended=len(deadlines.extensions),
                   per_day=f"{rule.per_day:.0%}", most=f"{rule.max:.0%}",
                   grace=format_duration(rule.grace), after=after)))
    if args.no_gradebook:
        return 0
    from grader.integrations.nbgrader.late import write_to_gradebook

    course_id, db_url = _nbgrader_course(Path.cwd())
    folders = [s for where in ("submitted", "autograded") if Path(where).is_dir()
               for s in student_folders(Path(where))]
    for line in write_to_gradebook(args.file, db_url, course_id, _lesson_ids(), folders):
        print(f"  {line}")
    print(said(msg("wrote them into nbgrader's gradebook ({database})", database=db_url)))
    return 0


def cmd_gradebook(args: argparse.Namespace) -> int:
    from grader.outputs.gradebook import point_table, write

    if args.points:
        print(point_table())
        return 0
    if not args.folders or not args.roster:
        raise UserError(msg("give the folders `grade` wrote and --roster"))
    return write(args.folders, args.roster, args.out, key=args.key, weights=args.weights,
                 local_part=args.local_part, lang=_language(args)).report("gradebook", _language(args))


def cmd_return_feedback(args: argparse.Namespace) -> int:
    from grader.outputs.feedback import summary, to_folders, to_nbgrader

    if args.nbgrader:
        done = to_nbgrader(args.folders, args.nbgrader)
        where: Message | str = msg("{folder}/feedback/ (now: nbgrader release_feedback LESSON)",
                                   folder=args.nbgrader)
    else:
        done = to_folders(args.folders, args.to)
        where = f"{args.to}/<student_id>/"
    print(summary(done, where, _language(args)))
    return 0


def cmd_selftest(args: argparse.Namespace) -> int:
    from grader.classgrade.selftest import run

    warnings.simplefilter("ignore")
    return 0 if run(args.lessons, isolation=args.isolation, lang=_language(args)) else 1


def _nbgrader_course(folder: object) -> tuple[str, str]:
    """The course id and gradebook URL of the nbgrader course in ``folder``."""
    from pathlib import Path

    from traitlets.config.loader import PyFileConfigLoader

    folder = Path(str(folder))
    config = PyFileConfigLoader("nbgrader_config.py", str(folder)).load_config() \
        if (folder / "nbgrader_config.py").is_file() else {}
    course = config.get("CourseDirectory", {}) if config else {}
    course_id = str(course.get("course_id", "default_course"))
    db_url = str(course.get("db_url", f"sqlite:///{(folder / 'gradebook.db').resolve()}"))
    return course_id, db_url


def _class_layout_problem(submitted: Path, lesson: str) -> Message | None:
    """What makes SUBMITTED certainly wrong for LESSON (the grade would be all ``missing``):
    a student's folder given instead of the class, or folders of other lessons only."""
    from collections import Counter

    from coursekit import catalogue
    from grader.classgrade.classroom import student_folders

    lessons = set(catalogue.COURSE.ids())
    students = student_folders(submitted)
    as_lessons = [s for s in students if s in lessons]
    if as_lessons:
        return msg("{folder} holds lesson folders ({lessons}), not one folder per student: give "
                   "the folder above it, nbgrader's submitted/ "
                   "(SUBMITTED/<student_id>/<lesson>/<lesson>.ipynb)",
                   folder=submitted, lessons=", ".join(as_lessons))
    held = Counter(child.name for s in students for child in (submitted / s).iterdir()
                   if child.is_dir() and child.name in lessons)
    if held and lesson not in held:
        found = ", ".join(f"{name} ({n} students)" for name, n in held.most_common())
        return msg("no student folder in {folder} holds {lesson}/; they hold {found}: is it "
                   "--lesson {likely}?", folder=submitted, lesson=lesson, found=found,
                   likely=held.most_common(1)[0][0])
    return None


def _lesson_ids() -> list[str]:
    from coursekit import catalogue

    return catalogue.COURSE.ids()


def cmd_gradescope(args: argparse.Namespace) -> int:
    from grader.integrations.gradescope.package import build, summary

    pkg = build(lesson_id(args.lesson), args.out, timeout_s=args.timeout, memory_gib=args.memory,
                visibility=args.visibility, stdout_visibility=args.stdout_visibility)
    print(summary(pkg, _language(args)))
    return 0


def cmd_lms(args: argparse.Namespace) -> int:
    from grader.outputs.lms import export

    return export(args.folders, args.roster, args.to, key=args.key, assignments=args.assignment,
                  out=args.out, local_part=args.local_part, lang=_language(args)).report("lms", _language(args))


def cmd_report(args: argparse.Namespace) -> int:
    from grader.outputs.class_report import write_report

    _, text = write_report(args.folder, args.submitted, lang=args.lang)
    print(text)
    return 0


def build_parser(prog: str = "python -m grader") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    check = commands.add_parser("check", help="grade one notebook with the hidden graders")
    checking.add_arguments(check)
    check.set_defaults(func=cmd_check)

    helper = commands.add_parser(
        "helper", help="the warm helper that answers `check` in about a second: status, stop, "
                       "start (and wait until it is warm)")
    helper.add_argument("action", choices=["status", "stop", "start"])
    helper.set_defaults(func=cmd_helper)

    grade = commands.add_parser("grade", help="grade a class, each notebook in a sandbox")
    grade.add_argument("submitted", help="SUBMITTED/<student_id>/<lesson>/<lesson>.ipynb")
    grade.add_argument("--lesson", required=True)
    grade.add_argument("--out", required=True, help="folder for grades.csv, results/, feedback/")
    grade.add_argument("--jobs", type=int, default=1, help="notebooks graded at once")
    grade.add_argument("--force", action="store_true", help="regrade every student")
    grade.add_argument("--student", action="append", metavar="ID",
                       help="regrade this student (repeatable); other results are left as they "
                            "are (students without one are graded). Without it, a rerun grades "
                            "new students and those whose submission changed")
    grade.add_argument("--deadlines", default=None, metavar="FILE",
                       help="due dates, extensions and late penalty (default: deadlines.toml "
                            "in this folder, in the folder above SUBMITTED or beside "
                            "nbgrader_config.py, the first found; 'none' to ignore it)")
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
    grade.add_argument("--memory", type=float, default=DEFAULT_LIMITS.memory_gib,
                       help=f"GiB of memory per notebook (default {DEFAULT_LIMITS.memory_gib:g})")
    call_timeout_option(grade)
    grade.add_argument("--lang", choices=_languages(), default=None,
                       help="language of the feedback pages (default: each notebook's) and "
                            "of the summary printed at the end (default: $COURSE_LANG, else the "
                            "edition most of the class handed in); grades.csv and results/ are "
                            "always English")
    grade.set_defaults(func=cmd_grade)

    gradebook = commands.add_parser(
        "gradebook", help="one course gradebook (every lesson, totals) from the folders "
                          "`grade` wrote and a roster")
    gradebook.add_argument("folders", nargs="*", metavar="DIR", help="folders `grade` wrote")
    gradebook.add_argument("--roster", help="the LMS's roster export (as for `grader lms`)")
    gradebook.add_argument("--key", default=None,
                           help="roster column holding the student_id (as for `grader lms`)")
    gradebook.add_argument("--local-part", action="store_true",
                           help="match only what precedes @ in the roster's key")
    gradebook.add_argument("--weights", default=None, metavar="W",
                           help="weights per lesson for a weighted percentage, e.g. 01=1,08=2,09=3")
    gradebook.add_argument("--out", default="course-gradebook.csv")
    gradebook.add_argument("--points", action="store_true",
                           help="print the points of every lesson (Markdown) and stop")
    gradebook.set_defaults(func=cmd_gradebook)

    back = commands.add_parser(
        "return-feedback", help="copy `grade`'s feedback pages into a folder per student, or "
                                "into nbgrader's feedback layout for release_feedback")
    back.add_argument("folders", nargs="+", metavar="DIR", help="folders `grade` wrote")
    where = back.add_mutually_exclusive_group()
    where.add_argument("--to", default="returned-feedback",
                       help="folder with one subfolder per student (default returned-feedback)")
    where.add_argument("--nbgrader", metavar="COURSE", default=None,
                       help="the nbgrader course folder: pages go to COURSE/feedback/, ready "
                            "for `nbgrader release_feedback`")
    back.set_defaults(func=cmd_return_feedback)

    selftest = commands.add_parser(
        "selftest", help="quick check of this installation: each lesson's reference notebook "
                         "earns full marks and its student notebook zero, in the sandbox")
    selftest.add_argument("--lessons", default=None, metavar="LESSONS",
                          help="which lessons: 01-04, 01,03 or all (default all)")
    selftest.add_argument("--isolation", choices=["auto", "strict", "none"], default="auto")
    selftest.set_defaults(func=cmd_selftest)

    deadlines = commands.add_parser(
        "deadlines", help="check deadlines.toml and write its due dates and extensions into "
                          "nbgrader's gradebook (run it in the course folder)")
    deadlines.add_argument("file", nargs="?", default="deadlines.toml")
    deadlines.add_argument("--no-gradebook", action="store_true",
                           help="only check the file; leave nbgrader's gradebook alone")
    deadlines.set_defaults(func=cmd_deadlines)

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
    release.add_argument("--lang", dest="edition", choices=["en", "zh", "both"], default="en",
                         help="the lessons' edition: en (default), zh (Chinese, with a Chinese "
                              "README), or both for students to choose")
    release.add_argument("--force", action="store_true", help="replace OUT if it exists")
    release.set_defaults(func=cmd_release)

    gradescope = commands.add_parser(
        "gradescope", help="build a Gradescope autograder zip for one lesson")
    gradescope.add_argument("lesson", metavar="LESSON")
    gradescope.add_argument("out", metavar="OUT", help="folder for autograder.zip, or a .zip path")
    gradescope.add_argument("--timeout", type=float, default=DEFAULT_LIMITS.wall_s,
                            help="seconds the notebook may run (default "
                                 f"{DEFAULT_LIMITS.wall_s:g})")
    gradescope.add_argument("--memory", type=float, default=DEFAULT_LIMITS.memory_gib,
                            help=f"GiB of memory for the notebook (default "
                                 f"{DEFAULT_LIMITS.memory_gib:g}; capped below the container's "
                                 "own limit)")
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
    report.add_argument("--lang", choices=_languages(), default=None,
                        help="language of the page and of this summary, the students' hints "
                             "as they read them (default: $COURSE_LANG, else the edition most of "
                             "the class handed in)")
    report.set_defaults(func=cmd_report)
    logs.add_options(parser)  # on every command
    return parser


def main(argv: list[str] | None = None, prog: str = "python -m grader") -> int:
    timeline.mark("main")
    args = build_parser(prog).parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    one_thread_each()
    try:
        logs.start(args, f"{prog} {args.command}")
        return args.func(args)
    except UserError as exc:  # anything else is a bug: its traceback says where
        print(f"{error_prefix(args.command)}: {said(said_by(exc), args)}", file=sys.stderr)
        return exc.exit_code


def _language(args: argparse.Namespace | None = None) -> str:
    """The instructor's language: ``--lang`` where the command has one, else ``COURSE_LANG``
    (``grader.i18n.choose``, as ``grade`` picks the class's language), else English."""
    from grader.i18n import choose

    return choose(getattr(args, "lang", None))


def said(text: Message | str, args: argparse.Namespace | None = None) -> str:
    """A line for the instructor in their language (:func:`_language`)."""
    from grader.i18n import render

    return render(text, _language(args)) if isinstance(text, Message) else str(text)


def error_prefix(command: str) -> str:
    """``grader`` before the errors of check, grade and deadlines (as they always read),
    ``grader COMMAND`` before the others'."""
    return "grader" if command in ("check", "grade", "deadlines") else f"grader {command}"
