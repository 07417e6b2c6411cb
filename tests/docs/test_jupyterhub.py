"""docs/jupyterhub.md: the students' environment holds no hidden test and no answer.

The environment is built as the guide says (``python -m grader release``, then a new
virtual environment with the handout installed, not editable), except that nothing is
downloaded: the venv sees this machine's packages through one ``.pth`` line (as in
tests/grader/authoring/test_release.py), which keeps the course repository's own install invisible. Then:
every file of the environment and the handout is scanned for every solution region and
hidden-test line (``grader.authoring.release.scan``); importing the grader, a hidden test or a
reference module fails in it; and, as the guide's permissions make it, a ``useradd``
student can neither list nor read the course repository.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from support import ROOT

from coursekit import catalogue

pytestmark = pytest.mark.e2e

GUIDE = ROOT / "docs" / "jupyterhub.md"


def guide_blocks() -> list[str]:
    return re.findall(r"```sh\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.S)


@pytest.fixture(scope="module")
def student_env(tmp_path_factory) -> tuple[Path, Path]:
    """(the venv's python, the handout), built as the guide's section 2 says."""
    srv = tmp_path_factory.mktemp("srv")
    section2 = guide_blocks()[1]
    assert "python -m grader release ../handout --lessons all" in section2
    assert "python -m pip install --extra-index-url https://download.pytorch.org/whl/cpu ./handout" \
        in section2
    proc = subprocess.run([sys.executable, "-m", "grader", "release", str(srv / "handout"),
                           "--lessons", "all"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    venv = srv / "student-env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=300)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "_system_site.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = subprocess.run([str(python), "-m", "pip", "install", "--no-index", "--no-build-isolation",
                           "--no-deps", "./handout"], cwd=srv, capture_output=True, text=True,
                          timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return python, srv / "handout"


def _own_site(python: Path) -> Path:
    return Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())


def test_the_students_environment_holds_no_hidden_test_and_no_answer(student_env) -> None:
    from grader.authoring import release

    python, handout = student_env
    plan = release.plan(catalogue.COURSE.lessons, catalogue.COURSE)
    site = _own_site(python)
    installed = site / "coursekit"
    assert installed.is_dir() and not (installed / "__editable__").exists()  # a copy, not -e
    for folder in (site, handout):
        assert release.scan(folder, plan, catalogue.COURSE) == [], folder
    names = {p.name for p in site.rglob("*")}
    hidden = {p.name for p in (ROOT / "grader" / "hidden").glob("test_*.py")}
    assert hidden and not hidden & names
    assert not [p for p in (site / "coursekit" / "reference").glob("lesson*.py")]


@pytest.mark.parametrize("attempt", [
    "import grader",
    "import grader.hidden",
    "from grader.kernel import grade",
    "import coursekit.reference.lesson03",
    "from coursekit.earlier import lesson_code; lesson_code('03')",
])
def test_importing_the_grader_or_an_answer_fails(student_env, tmp_path, attempt: str) -> None:
    python, _ = student_env
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = subprocess.run([str(python), "-c", attempt], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env=env)
    assert proc.returncode != 0, proc.stdout
    assert re.search(r"ModuleNotFoundError|EarlierLessonError", proc.stderr), proc.stderr[-2000:]


def test_the_lessons_run_in_it(student_env, tmp_path) -> None:
    """The environment is not merely empty: lesson 01 imports and runs its setup there."""
    python, handout = student_env
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    code = ("import numpy, coursekit.catalogue as c; "
            "print(c.COURSE.get('01').id)")
    proc = subprocess.run([str(python), "-c", code], cwd=handout, capture_output=True,
                          text=True, timeout=300, env=env)
    assert proc.returncode == 0 and proc.stdout.strip() == "01_attention_by_hand", proc.stderr


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("useradd") is None
                    or not Path("/usr/bin/python3").exists(),
                    reason="needs root, useradd and /usr/bin/python3 to act as a student")
def test_a_student_account_cannot_read_the_course(student_env) -> None:
    """The guide's permissions: the course repository is the instructors' (0750, group
    instructors); a student reads the handout (a+rX) and nothing of the course. (A system
    Python plays the student's interpreter: this checkout's may live in root's home.)"""
    import tempfile

    _, handout = student_env
    srv = Path(tempfile.mkdtemp(prefix="attention-srv-", dir="/tmp"))
    student = f"hubstu{os.getpid() % 100000}"
    try:
        course = srv / "course"
        shutil.copytree(ROOT / "grader" / "hidden", course / "grader" / "hidden")
        shutil.copytree(ROOT / "solutions" / "01_attention_by_hand", course / "solutions" / "01")
        shutil.copytree(handout, srv / "handout")
        os.chmod(srv, 0o755)
        for path in [course, *course.rglob("*")]:
            os.chmod(path, 0o750 if path.is_dir() else 0o640)  # root:instructors, o-rwx
        for path in [srv / "handout", *(srv / "handout").rglob("*")]:  # the guide's a+rX,go-w
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
        subprocess.run(["useradd", "--no-create-home", student], check=True, capture_output=True)
        hidden = next((course / "grader" / "hidden").glob("test_*.py"))
        lesson = srv / "handout" / "lessons" / "01_attention_by_hand" / "01_attention_by_hand.ipynb"
        probe = (f"import os, sys\n"
                 f"for attempt in (lambda: os.listdir({str(course)!r}),\n"
                 f"                lambda: open({str(hidden)!r}).read(),\n"
                 f"                lambda: os.listdir({str(course / 'solutions')!r})):\n"
                 f"    try:\n        attempt()\n        sys.exit('read the course')\n"
                 f"    except PermissionError:\n        pass\n"
                 f"print('ok', len(open({str(lesson)!r}).read()) > 0)\n")
        uid = pwd.getpwnam(student).pw_uid
        proc = subprocess.run(["/usr/bin/python3", "-c", probe], cwd=srv, capture_output=True,
                              text=True, timeout=300, env={"PATH": "/usr/bin:/bin"},
                              user=uid, group=uid)
        assert proc.returncode == 0 and proc.stdout.strip() == "ok True", proc.stdout + proc.stderr
    finally:
        subprocess.run(["userdel", student], capture_output=True)
        shutil.rmtree(srv, ignore_errors=True)
