"""``python -m grader.helper serve``: run a helper (a check starts one when needed)."""

import sys

from .server import main

sys.exit(main())
