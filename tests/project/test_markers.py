"""The `slow` marker says the truth (issue 53 item 8): in the full run (`make test`), a test
file that takes longer than the marker's bound without carrying it fails the run, named in
a section of its own; a run of some files, or of a selection, is not judged."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import ROOT

pytestmark = pytest.mark.slow  # five pytest runs of their own

SLEEPY = "import time\n\n{mark}\n\ndef test_sleeps():\n    time.sleep(0.8)\n"


def _run(tmp_path: Path, mark: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    conftest = ROOT / "tests" / "conftest.py"  # the course's hooks, run from this folder
    (tmp_path / "conftest.py").write_text(
        f"exec(compile(open({str(conftest)!r}).read(), {str(conftest)!r}, 'exec'))\n", encoding="utf-8")
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\ntestpaths = .\nmarkers =\n    slow: a test file over the bound\n", encoding="utf-8")
    (tmp_path / "test_sleepy.py").write_text(SLEEPY.format(mark=mark), encoding="utf-8")
    (tmp_path / "test_quick.py").write_text("def test_quick():\n    pass\n", encoding="utf-8")
    env = {**os.environ, "COURSE_SLOW_FILE_S": "0.5",
           "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")]), **(env or {})}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def test_an_unmarked_slow_file_fails_the_full_run(tmp_path: Path) -> None:
    proc = _run(tmp_path, "")
    assert proc.returncode == 1, proc.stdout
    assert "slow files without the slow marker" in proc.stdout
    assert "test_sleepy.py took 1 s" in proc.stdout and "test_quick.py" not in proc.stdout.split("marker")[-1]
    assert "2 passed" in proc.stdout


def test_a_file_just_over_the_bound_is_named_and_does_not_fail_the_run(tmp_path: Path) -> None:
    """Between the bound and SLOW_FILE_NOISE times it: a file's time varies from run to run."""
    proc = _run(tmp_path, "", env={"COURSE_SLOW_FILE_S": "0.7"})  # 0.8 s: over 0.7, under 1.05
    assert proc.returncode == 0, proc.stdout
    assert "slow files without the slow marker" in proc.stdout and "test_sleepy.py took 1 s" in proc.stdout


@pytest.mark.parametrize(("mark", "args"), [("import pytest\n\npytestmark = pytest.mark.slow", ()),
                                            ("", ("test_sleepy.py",)), ("", ("-k", "sleeps"))])
def test_a_marked_file_or_a_partial_run_passes(tmp_path: Path, mark: str, args: tuple[str, ...]) -> None:
    proc = _run(tmp_path, mark, *args)
    assert proc.returncode == 0, proc.stdout
    assert "without the slow marker" not in proc.stdout


def test_time_spent_on_a_folder_shared_by_the_run_is_charged_to_no_file(tmp_path: Path) -> None:
    """The term's class, graded once for the run, is built in the setup of whichever test asks first."""
    (tmp_path / "test_shared.py").write_text(
        "import time\n\nimport pytest\nfrom support import built_once\n\n\n@pytest.fixture(scope='session')\n"
        "def shared(tmp_path_factory):\n    return built_once(tmp_path_factory, 'x', lambda p: (time.sleep(0.8), p.mkdir()))\n\n\n"
        "def test_reads(shared):\n    assert shared.is_dir()\n", encoding="utf-8")
    proc = _run(tmp_path, "import pytest\n\npytestmark = pytest.mark.slow")
    assert proc.returncode == 0, proc.stdout
