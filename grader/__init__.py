"""Grading package of the course "Attention, from 优秀 to a trainable Transformer".

Layout:
- ``grader.runtime``: code that runs next to student code (inside a notebook kernel or a
  sandboxed worker). It never imports the hidden tests.
- ``grader.hidden``: the hidden pytest graders, one module per lesson.
- everything else: the trusted side, in the order a notebook goes through it: ``check``
  (one notebook: its worker, the hidden tests, the result), ``sandbox`` (where the worker
  runs), ``results`` (a grade, and the graded folder that keeps it), ``outputs`` (how a
  result is shown: ``check``'s report, feedback, reports, gradebook, LMS files),
  ``classgrade`` (a whole class), ``integrations`` (nbgrader, Gradescope),
  ``authoring`` (lessons, editions, releases); CONTRIBUTING.md, "Where things live".
"""

from pathlib import Path

__version__ = "0.1.0"

#: This package's folder, and the course's (its parent: coursekit/, datasets/, ...).
PACKAGE_DIR = Path(__file__).resolve().parent
COURSE_ROOT = PACKAGE_DIR.parent
