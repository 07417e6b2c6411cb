"""``python -m grader.helper serve``: run a helper (a check starts one when needed)."""

import sys

from grader.helper.server import main

sys.exit(main())
