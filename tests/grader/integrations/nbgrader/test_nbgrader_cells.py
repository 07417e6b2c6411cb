"""nbgrader's autograde of the term's class (tests/conftest.py ``term_nbgrader``) says only
what is wrong: one checksum warning for the one locked test cell rewritten, none of nbgrader's
false alarms (grader/integrations/nbgrader/cells.py), and an error for the truncated notebook."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def test_nbgrader_on_a_truncated_notebook(term_nbgrader) -> None:
    """What the instructor sees: an error in autograde's log, no autograded notebook, and
    0.0 in the export, as for a blank notebook; ``grade`` says ``unreadable``."""
    assert "NotJSONError" in term_nbgrader["log"] or "Notebook does not appear to be JSON" in \
        term_nbgrader["log"]
    assert term_nbgrader["export"]["gina"]["raw_score"] == "0.0"


def test_nbgrader_log_warns_only_about_real_tampering(term_nbgrader) -> None:
    """No false checksum alarms (jupyter/nbgrader#1961), no SQLAlchemy warnings, no kernel
    TCP warnings: one warning line per real problem."""
    log = term_nbgrader["log"]
    warnings = [line for line in log.splitlines() if "WARNING" in line or "Warning" in line]
    checksum = [w for w in warnings if "Attribute 'checksum'" in w]
    assert len(checksum) == 1 and "test_softmax" in checksum[0]  # mallory's changed test cell
    assert not [w for w in warnings if "SAWarning" in w or "without encryption" in w]
    late = [w for w in warnings if "seconds late" in w or "Late submission penalty" in w]
    assert late and all("hank" in w or "Late submission penalty: 2.0" in w for w in late)
    # gina's truncated notebook: errors naming her (nbgrader warns "Removing failed ..." only
    # when it had written something for her, which depends on the course's notebook names)
    truncated = [w for w in warnings if "Removing failed" in w]
    assert all("/gina/" in w for w in truncated), truncated
    errors = [line for line in log.splitlines() if "[AutogradeApp | ERROR]" in line]
    assert any("for student 'gina'" in e for e in errors), errors
    assert all("gina" in e or "Please see the" in e or e.endswith("Traceback (most recent call last):")
               for e in errors), errors
    sandbox = [w for w in warnings if "grader: sandboxed with" in w]  # a missing protection
    rest = [w for w in warnings if w not in checksum + late + truncated + sandbox]
    assert rest == [], rest
