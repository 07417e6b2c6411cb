"""``python -m grader``, and the ``grader`` command (``[project.scripts]``): a check that the
warm helper answers takes the short way (the helper's client only); anything else, the full
command line (``grader.cli``)."""

import os
import sys
from typing import NoReturn

from grader.helper.client import quick_check
from grader.runtime.wire import exit_now


def main(prog: str | None = None) -> NoReturn:
    """Run the command line of this process (``prog``: the name its usage gives, default
    the command's own name)."""
    code = quick_check(sys.argv[1:])
    if code is None:
        from grader.cli import main as full

        code = full(prog=prog or os.path.basename(sys.argv[0])) or 0
    exit_now(code)


if __name__ == "__main__":
    main("python -m grader")
