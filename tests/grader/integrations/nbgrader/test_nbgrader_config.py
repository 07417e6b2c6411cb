"""nbgrader_config.py tells nbgrader's kernels that a notebook is being graded, and only them.

JupyterLab's server loads the file whenever a student presses Validate; an environment
variable it set there would reach every kernel the server starts afterwards, and lesson 09
would train on its "smoke" preset in the students' own notebooks.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[4]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COURSE_GRADING", "CI")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def test_loading_the_config_leaves_the_process_environment_alone() -> None:
    # What nbgrader's Validate handler does inside the JupyterLab server process.
    probe = ("import os; from nbgrader.apps import NbGrader; app = NbGrader(); "
             "app.config_file_paths.append([os.getcwd()]); app.load_config_file(); "
             "assert app.config.Execute.extra_arguments, 'config not loaded'; "
             "print(os.environ.get('COURSE_GRADING'))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=_env(),
                         capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "None"


def test_nbgraders_kernels_know_they_grade(tmp_path: Path) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        "import os\nassert os.environ.get('COURSE_GRADING') == '1', 'not told it is graded'")]
    path = tmp_path / "probe.ipynb"
    nbformat.write(nb, path)
    out = subprocess.run([sys.executable, "-m", "nbgrader", "validate", str(path)], cwd=ROOT,
                         env=_env(), capture_output=True, text=True, timeout=300)
    assert "Success!" in out.stdout, out.stdout + out.stderr
