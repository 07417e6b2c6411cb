"""The grader's log: the standard :mod:`logging` module, every module logging under the
``grader`` logger (``logging.getLogger(__name__)``), set up here once per process.

Every command of ``python -m grader`` (and ``python -m grader.authoring``) takes
``--log-level LEVEL`` and ``-v`` (``--log-level debug``), before or after the command's
name, as otter's ``-v`` and nbgrader's ``--log-level`` do; without them the level is
``$GRADER_LOG_LEVEL``, else ``debug`` under ``$GRADER_DEBUG``, else ``warning``
(:mod:`coursekit.settings`). The log goes to stderr, never to stdout, which carries
``check --format json``'s object. A command's level reaches the processes it starts
(``grade --jobs N``'s trusted processes, the check helper) through ``$GRADER_LOG_LEVEL``.

Two files are written through it as well, their lines as users know them: the check
helper's log (``check-<key>.log``: ``grader.helper``'s records, at ``info``, :data:`HELPER`
and :data:`CLIENT`) and a graded folder's ``errors.log`` (the grader's own failures, with
their tracebacks, :data:`ERRORS`), by :func:`append`.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from pathlib import Path
from typing import TextIO

from coursekit import settings

ROOT = "grader"
#: stderr's lines: ``grader.check.launch DEBUG: ...``
STDERR_FORMAT = "%(name)s %(levelname)s: %(message)s"
DATE_FORMAT = "%Y-%m-%d %H:%M:%S"
#: The check helper's log, as its process writes it (its stderr is the log file) ...
HELPER = "%(asctime)s [helper %(process)d] %(message)s"
#: ... and as a check's client adds to it.
CLIENT = "%(asctime)s [client %(process)d] %(message)s"
#: ``errors.log``: ``--- <time> <student> (attempt N)``, then the traceback.
ERRORS = "--- %(asctime)s %(message)s"

_FILE_LOCK = threading.Lock()


def add_options(parser: argparse.ArgumentParser, *, below: bool = False) -> None:
    """``--log-level`` and ``-v`` on ``parser`` and on each of its commands' parsers (add
    those first), before or after a command's name: a command's own options leave alone
    (``below``) the level given before its name when they are not given."""
    _add(parser, below)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in dict.fromkeys(action.choices.values()):  # aliases: once
                add_options(command, below=True)


def _add(parser: argparse.ArgumentParser, below: bool) -> None:
    if any("--log-level" in action.option_strings for action in parser._actions):
        return  # it has them (``grader check``'s parser, shared with the check helper)
    default = argparse.SUPPRESS if below else None
    group = parser.add_argument_group("log")
    group.add_argument("--log-level", type=str.lower, choices=settings.LOG_LEVELS,
                       default=default, metavar="LEVEL",
                       help="what the grader says on stderr about its own work: "
                            f"{', '.join(settings.LOG_LEVELS)} (default warning, or "
                            f"${settings.LOG_LEVEL})")
    group.add_argument("-v", "--verbose", dest="log_level", action="store_const",
                       const="debug", default=default, help="--log-level debug")


def start(args: argparse.Namespace, prog: str) -> None:
    """:func:`configure` the level of a command's line (``args.log_level``, see
    :func:`add_options`), and log the command at ``debug``."""
    configure(getattr(args, "log_level", None))
    options = {k: v for k, v in vars(args).items() if k not in ("func", "argv", "log_level")}
    logging.getLogger(ROOT).debug("%s: %s", prog, options)


def level(name: str | None = None) -> int:
    """The level named (a command's option), else the environment's (see the module);
    ``coursekit.errors.SettingError`` (a UserError) for a ``$GRADER_LOG_LEVEL`` that names none."""
    name = name or settings.log_level() or ("debug" if settings.debug() else "warning")  # SettingError
    return logging.getLevelNamesMapping()[name.upper()]


def configure(name: str | None = None, stream: TextIO | None = None,
              fmt: str = STDERR_FORMAT) -> int:
    """Send the ``grader`` logger's records of the level asked (:func:`level`) and above to
    ``stream`` (default stderr), replacing what an earlier call set up; a level given by
    name is passed on to the processes started from now on. Returns the level."""
    chosen = level(name)
    logger = logging.getLogger(ROOT)
    for old in [h for h in logger.handlers if getattr(h, "grader_stream", False)]:
        logger.removeHandler(old)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(logging.Formatter(fmt, DATE_FORMAT))
    handler.grader_stream = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(chosen)
    if name:
        os.environ[settings.LOG_LEVEL] = name
    return chosen


def append(path: str | Path, fmt: str, logger: logging.Logger, at: int, msg: str, *args: object,
           exc: BaseException | None = None) -> None:
    """Log ``msg % args`` (and ``exc``'s traceback) on ``logger`` at level ``at``, and write
    it to ``path`` as well, in ``fmt``, whatever the level: the file is opened and closed
    each time (several processes append to one). Raises OSError when it cannot be written."""
    info = (type(exc), exc, exc.__traceback__) if exc is not None else None
    record = logger.makeRecord(logger.name, at, "(unknown file)", 0, msg, args, info)
    with _FILE_LOCK, open(path, "a", encoding="utf-8") as file:
        file.write(logging.Formatter(fmt, DATE_FORMAT).format(record) + "\n")
    if logger.isEnabledFor(at):
        logger.handle(record)
