"""Grading package of the course "Attention, from 优秀 to a trainable Transformer".

Layout:
- ``grader.runtime``: code that runs next to student code (inside a notebook kernel or a
  sandboxed worker). It never imports the hidden tests.
- ``grader.hidden``: the hidden pytest graders, one module per lesson.
- everything else: the trusted side (engine, CLI, reports).
"""

__version__ = "0.1.0"
