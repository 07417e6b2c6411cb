"""``python -m grader.authoring TOOL ...``: the course authors' tools as one command.

==============  ===========================================================  ==================
tool            what it does                                                 make
==============  ===========================================================  ==================
``generate``    the reference modules from ``solutions/`` (``--assignments``:  ``make lessons``
                the student notebooks of ``lessons/`` first)
``editions``    a lesson's second edition kept to the English code:          ``make editions``
                ``status``, ``sync``, ``accept``, ``check``, ``new``
``i18n``        the messages' translations (``grader/i18n/locale/``, .po):    ``make translations``
                ``status``, ``sync`` (``extract``), ``missing``
==============  ===========================================================  ==================

``python -m grader.authoring TOOL --help`` says a tool's options; ``-v`` / ``--log-level``
go before or after the tool's name. The tools' modules run alone as well (``python -m
grader.authoring.generate``, ``python -m grader.authoring.editions``, ``python -m
grader.i18n``), the same commands.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from grader.common import logs

#: Each tool: its module (whose ``main(argv, prog=...)`` runs it) and what it does.
TOOLS = {
    "generate": ("grader.authoring.generate",
                 "regenerate the reference modules (and with --assignments lessons/)"),
    "editions": ("grader.authoring.editions",
                 "keep a lesson's second edition's code the English code"),
    "i18n": ("grader.i18n", "the catalogues of the hints' translations"),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m grader.authoring", description=__doc__.split("\n\n")[0],
        epilog="tools: " + "; ".join(f"{name}: {text}" for name, (_, text) in TOOLS.items()))
    parser.add_argument("tool", choices=TOOLS)
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the tool's own command line")
    logs.add_options(parser)
    args = parser.parse_args(argv)
    rest = list(args.args)
    if args.log_level:  # given before the tool's name: the tool's own parser reads it
        rest.append(f"--log-level={args.log_level}")
    module = importlib.import_module(TOOLS[args.tool][0])
    return int(module.main(rest, prog=f"python -m grader.authoring {args.tool}"))


if __name__ == "__main__":
    sys.exit(main())
