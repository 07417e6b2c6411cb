"""Gradescope autograder for the course's lessons.

- :mod:`grader.integrations.gradescope.package` builds ``autograder.zip`` (``python -m grader gradescope
  LESSON OUT``): ``setup.sh``, ``run_autograder``, the graders and the public helpers a
  lesson's notebook imports, never ``solutions/``.
- :mod:`grader.integrations.gradescope.run` is what ``run_autograder`` starts inside Gradescope's
  container: it grades the one notebook in ``/autograder/submission`` in the same sandbox
  as ``python -m grader grade`` and writes ``/autograder/results/results.json``.
- ``results.schema.json`` is the JSON schema of ``results.json``, written from Gradescope's
  specification (https://gradescope-autograders.readthedocs.io/en/latest/specs/).
"""

from pathlib import Path

SCHEMA_PATH = Path(__file__).with_name("results.schema.json")
