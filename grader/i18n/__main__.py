"""``python -m grader.i18n ...``: the same tool as ``python -m grader.authoring i18n ...``."""

import sys

from grader.i18n import main

if __name__ == "__main__":
    sys.exit(main())
