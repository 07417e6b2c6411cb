"""``grader check``'s work: grade one notebook and write its report, in one function that
the CLI (a cold check) and the check helper's trusted process (a warm one) both call, with
what differs between them (where workers come from, whether to colour) as arguments. How
the report is shown (``show``: ``grader.outputs.render.check_output``) is the caller's too:
the renderers are a stage above this one.

Light to import (the CLI's parser uses :func:`add_arguments`): what grades loads inside
:func:`run_check`.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

from coursekit.errors import UnknownLesson, UserError
from grader.check import timeline
from grader.common import logs
from grader.common.limits import DEFAULT_LIMITS, Limits
from grader.i18n import LANGUAGES

if TYPE_CHECKING:
    from grader.check.launch import WorkerSource
    from grader.results import Report

#: Where a check's workers come from: ``grader.check.launch.default_source`` in a cold check.
SourceFactory = Callable[[Limits], "WorkerSource"]
#: What ``check`` prints of a report in a format (text, json, html), with colours or not:
#: ``grader.outputs.render.check_output``.
Show = Callable[["Report", str, bool], str]


@dataclass(frozen=True)
class CheckOptions:
    """``grader check``'s command line, less what only the CLI reads (``--no-helper``)."""

    notebook: str
    lesson: str | None = None
    format: str = "text"  # text, json or html
    timeout: float = DEFAULT_LIMITS.wall_s
    call_timeout: float = DEFAULT_LIMITS.call_s
    lang: str | None = None
    profile: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> CheckOptions:
        return cls(notebook=args.notebook, lesson=args.lesson, format=args.format,
                   timeout=args.timeout, call_timeout=args.call_timeout, lang=args.lang,
                   profile=args.profile)


def call_timeout_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--call-timeout", type=float, default=DEFAULT_LIMITS.call_s, metavar="S",
                        help="seconds one call of a hidden check may take (default "
                             f"{DEFAULT_LIMITS.call_s:g}); a call that hangs costs its exercise "
                             "only: the exercises after it are graded in a fresh run")


def add_arguments(check: argparse.ArgumentParser) -> None:
    """``grader check``'s options (the CLI's subcommand, and the helper's reading of the
    command line its client sent)."""
    check.add_argument("notebook")
    check.add_argument("--format", choices=["text", "json", "html"], default="text",
                       help="json: the spec's object; html: the table as an HTML fragment")
    check.add_argument("--lesson", default=None, help="lesson id, if the file name does not say it")
    check.add_argument("--timeout", type=float, default=DEFAULT_LIMITS.wall_s,
                       help=f"seconds the notebook may take (default {DEFAULT_LIMITS.wall_s:g})")
    call_timeout_option(check)
    check.add_argument("--no-helper", action="store_true",
                       help="check in this process, without the warm helper that later checks "
                            "reuse (COURSE_CHECK_HELPER=off: never start one)")
    check.add_argument("--profile", action="store_true", help=argparse.SUPPRESS)
    check.add_argument("--lang", choices=list(LANGUAGES), default=None,
                       help="language of the hints (default: $COURSE_LANG, else the notebook's: "
                            "zh for a Chinese edition)")
    logs.add_options(check, below=True)  # a check the helper answers logs in the helper's log


def parse(args: list[str]) -> CheckOptions:
    """The options of ``python -m grader check ARGS...``; argparse's exit (usage on stderr)
    when they do not parse."""
    return CheckOptions.from_args(parser().parse_args(args))


@functools.cache
def parser() -> argparse.ArgumentParser:
    """``parse``'s parser, made once (the helper's zygote makes it before it forks)."""
    made = argparse.ArgumentParser(prog="python -m grader check")
    add_arguments(made)
    return made


def lesson_id(key: str) -> str:
    """A lesson's id from its id or its number (``04``, ``4``); else the key itself, for
    ``hidden_test_file`` to refuse with the known lessons."""
    from coursekit import catalogue

    try:
        return catalogue.get(key).id
    except UnknownLesson:
        return key


def main(opts: CheckOptions, show: Show, source: SourceFactory | None = None,
         color: bool | None = None) -> int:
    """``grader check`` as its own command: the check, its profile with ``--profile``, a
    user's error in one line (``grader: ...``) with its exit code."""
    try:
        try:
            return run_check(opts, show, source, color)
        finally:  # a refused notebook's time too
            if opts.profile:
                print(timeline.dumps(), file=sys.stderr)
    except UserError as exc:  # anything else is a bug: its traceback says where
        print(f"grader: {refusal(exc, opts)}", file=sys.stderr)
        return exc.exit_code


def refusal(exc: UserError, opts: CheckOptions) -> str:
    """What a check that could not grade says, in the student's language: ``--lang``, else
    ``COURSE_LANG``, else the edition the notebook's name says (``NN_name.zh.ipynb``)."""
    from grader.i18n import choose, notebook_edition, render, said_by

    return render(said_by(exc), choose(opts.lang, notebook_edition(None, opts.notebook)))


def run_check(opts: CheckOptions, show: Show, source: SourceFactory | None = None,
              color: bool | None = None) -> int:
    """Grade ``opts.notebook`` with workers from ``source`` (default: the sandbox, else plain
    processes) and write the report on stdout as ``show`` renders it, the sandbox's notes on
    stderr. ``color``: colours in the text report (None: when stdout is a terminal). Raises
    UserError."""
    from grader.check import launch
    from grader.i18n import choose, localize, render

    out = _private_stdout() if opts.format in ("json", "html") else sys.stdout
    limits = DEFAULT_LIMITS.with_(wall_s=opts.timeout, call_s=opts.call_timeout)
    lesson = lesson_id(opts.lesson) if opts.lesson else None
    with launch.prepare_check(opts.notebook, lesson, limits, source) as (workers, started):
        from grader.check.engine import check_notebook

        result = check_notebook(opts.notebook, lesson, limits, source=workers, started=started)
        notes = launch.sandbox_notes(workers)  # said once graded: a refusal stays one line
    result = localize(result, choose(opts.lang, result.edition))
    out.write(show(result, opts.format, out.isatty() if color is None else color))
    out.flush()
    for note in notes:
        print(render(note, result.lang), file=sys.stderr)
    return 0


def _private_stdout() -> TextIO:
    """Keep the real stdout for our own output and send fd 1 to stderr, so nothing any
    library (or notebook) prints can reach or corrupt the machine-readable output."""
    sys.stdout.flush()
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return out
