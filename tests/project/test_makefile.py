"""``make check``, the inner loop (issue 53, item 8): lint, types and the fast tests, with
nothing installed; ``make test`` beside it runs everything after ``make setup``."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from support import ROOT


def planned(target: str) -> list[str]:
    """The commands ``make TARGET`` would run (``make -n``), with ``python`` for $(PYTHON)."""
    proc = subprocess.run(["make", "-n", "--no-print-directory", target, "PYTHON=python"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT, check=True)
    return [line for line in proc.stdout.splitlines() if line.strip()]


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")
def test_make_check_lints_types_and_runs_the_fast_tests_without_installing() -> None:
    check = planned("check")
    assert not [line for line in check if "pip" in line], check
    assert any(line.startswith("python -m ruff check grader coursekit tests") for line in check)
    assert "python -m mypy" in check  # [tool.mypy]: grader/ and coursekit/, --check-untyped-defs
    tests = [line for line in check if line.startswith("python -m pytest")]
    assert len(tests) == 1 and '-m "not slow and not e2e and not browser"' in tests[0]
    assert any("pip install" in line for line in planned("test"))  # make test sets up first


def test_the_type_check_reads_untyped_functions_and_the_hidden_tests() -> None:
    """``make typecheck`` is ``mypy --check-untyped-defs grader coursekit`` (issue 53, item
    5): the bodies of unannotated functions too, the hidden tests (``grader/hidden/``) among
    them; only the generated reference modules are left out."""
    import tomllib

    mypy = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    assert mypy["check_untyped_defs"] is True and mypy["files"] == ["grader", "coursekit"]
    assert mypy["exclude"] == ["^coursekit/reference/"]
