"""``python -m grader``: grade one notebook (check), a class (grade), build a student bundle."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TextIO

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
    from . import report as fmt
    from .engine import check_notebook

    out = _private_stdout() if args.format == "json" else sys.stdout
    try:
        result = check_notebook(args.notebook, args.lesson, load_timeout=args.timeout)
    except NotebookError as exc:
        print(f"grader: {exc}", file=sys.stderr)
        return 2
    except KeyError as exc:
        print(f"grader: {exc.args[0]}", file=sys.stderr)
        return 2
    if args.format == "json":
        out.write(fmt.to_json(result) + "\n")
        out.flush()
    else:
        out.write(fmt.to_text(result, color=out.isatty()) + "\n")
    return 0


def cmd_release(args: argparse.Namespace) -> int:
    from .release import ReleaseError, build, summary

    try:
        plan = build(args.out, args.lessons, force=args.force)
    except ReleaseError as exc:
        print(f"grader release: {exc}", file=sys.stderr)
        return 2
    print(summary(args.out, plan))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m grader", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    check = commands.add_parser("check", help="grade one notebook with the hidden graders")
    check.add_argument("notebook")
    check.add_argument("--format", choices=["text", "json"], default="text")
    check.add_argument("--lesson", default=None, help="lesson id, if the file name does not say it")
    check.add_argument("--timeout", type=float, default=120.0,
                       help="seconds the notebook may take to run (default 120)")
    check.set_defaults(func=cmd_check)

    release = commands.add_parser(
        "release", help="build the student bundle: lessons, their data and helpers, no secrets")
    release.add_argument("out", metavar="OUT", help="folder to create")
    release.add_argument("--lessons", default=None, metavar="LESSONS",
                         help="which lessons: 01-04, 01,03,05-07 or all (default all)")
    release.add_argument("--force", action="store_true", help="replace OUT if it exists")
    release.set_defaults(func=cmd_release)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)
