"""The test suite in a clone an instructor works in (issue 49, item 8): the README's
commands leave files in the clone (``deadlines.toml``, ``handout-zh/``, nbgrader's
``submitted/``, ``gradebook.db``, ...), and ``make test`` there failed 19 tests.

- Every path the READMEs' commands create in the clone is in ``.gitignore``: the tests that
  copy the repository (``git ls-files --others --exclude-standard``: the README runs) would
  otherwise copy the instructor's files with it.
- No test reads them: every ``grade`` a test runs names its deadlines (``--deadlines``), since
  without it ``grade`` reads a ``deadlines.toml`` from the current folder and the checkout.
"""

from __future__ import annotations

import ast
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from support import ROOT

READMES = [ROOT / "README.md", ROOT / "README.zh.md"]
SHELL = re.compile(r"^```(?:sh|bash|console)[ \t]*\n(.*?)^```", re.M | re.S)

#: What nbgrader's and the grader's commands create in the course folder without naming it.
IMPLIED = {
    "nbgrader ": [".nbgrader.log"],
    "nbgrader generate_assignment": ["gradebook.db"],
    "nbgrader autograde": ["autograded", "gradebook.db"],
    "nbgrader generate_feedback": ["feedback"],
    "nbgrader collect": ["submitted"],
    "nbgrader zip_collect": ["submitted"],
    "python -m grader gradebook": ["course-gradebook.csv"],  # its --out's default
    "python -m grader deadlines": ["gradebook.db"],
}
#: The options and positions that name a path a command writes.
WRITES = [
    re.compile(r"^mkdir -p (?P<paths>.+)$"),
    re.compile(r"^cp (?:-r )?\S+ (?P<paths>\S+)$"),
    re.compile(r"^python -m grader release (?P<paths>\S+)"),
    re.compile(r"^python -m grader gradescope \S+ (?P<paths>\S+)"),
    re.compile(r"^python docs/examples/term_class.py (?:--canvas-zip )?(?P<paths>\S+)"),
    re.compile(r"^python -m zipfile -e \S+ (?P<paths>\S+)"),
    re.compile(r"--Exchange\.root=(?P<paths>[\w./-]+)"),
    re.compile(r"^nbgrader export --to (?P<paths>\S+)"),
    re.compile(r"^python -m grader (?:lms|gradebook|return-feedback) .*--(?:out|to) (?P<paths>(?!canvas\b|moodle\b)\S+)"),
    re.compile(r"> (?P<paths>\S+)$"),
]


def readme_commands() -> list[list[str]]:
    """The command lines of the READMEs' shell blocks, each split at ``&&`` and ``;``."""
    found = []
    for readme in READMES:
        for body in SHELL.findall(readme.read_text(encoding="utf-8")):
            for line in body.splitlines():
                line = line.split(" # ")[0].strip()
                if line and not line.startswith("#"):
                    found.append([part.strip() for part in re.split(r"&&|;", line) if part.strip()])
    return found


def created_paths() -> set[str]:
    """The top-level paths of the clone that the READMEs' commands create (``grade --out``'s
    folder excepted: ``grade`` writes a ``.gitignore`` into it), as ``git check-ignore``
    reads them: a folder with a trailing ``/``. What a line runs after ``cd`` into a folder
    it made is inside that folder."""
    tops = set()
    for line in readme_commands():
        for command in line:
            if command.startswith("cd "):
                break
            if not command.startswith("python -m grader grade "):
                tops |= _written(command)
    return tops


def _written(command: str) -> set[str]:
    paths = [p for implied, made in IMPLIED.items() if command.startswith(implied) for p in made]
    for pattern in WRITES:
        m = pattern.search(command)
        if m:
            paths += shlex.split(m.group("paths"))
    tops = set()
    for path in paths:
        parts = Path(path).parts
        if parts and parts[0] not in ("..", "/", "~") and "$" not in path:
            tops.add(parts[0] if len(parts) == 1 and "." in parts[0] else parts[0] + "/")
    return tops


def _tracked_tops() -> set[str]:
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    return {Path(n).parts[0] for n in names}


def test_every_path_the_readmes_commands_create_is_ignored() -> None:
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    created = created_paths()
    # the reading above is sure to see these (a change of the READMEs' commands fails here)
    assert {"handout/", "handout-zh/", "gradescope-01/", "gradescope-try/", "submitted/",
            "deadlines.toml", "gradebook.db", "exchange/", "student/", "grades.csv"} <= created
    tracked = _tracked_tops()
    untracked = sorted(p for p in created if p.rstrip("/") not in tracked)
    proc = subprocess.run(["git", "check-ignore", "--no-index", "--verbose", "--non-matching",
                           *untracked], cwd=ROOT, capture_output=True, text=True)
    not_ignored = [line.split("\t")[-1] for line in proc.stdout.splitlines() if line.startswith("::")]
    assert not not_ignored, f"created by the README's commands, not in .gitignore: {not_ignored}"


def _grade_commands(path: Path) -> list[tuple[int, str]]:
    """The statements of a test file that run ``python -m grader grade`` (a literal ``"grade"``
    right after ``"grader"``, or as a helper's first command argument), with their source."""
    source = path.read_text(encoding="utf-8")
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.stmt) or isinstance(node, ast.FunctionDef | ast.ClassDef | ast.If
                                                        | ast.With | ast.For | ast.Try):
            continue
        text = ast.get_source_segment(source, node) or ""
        if re.search(r'"grader",\s*"grade"|_grader\(\w+,\s*"grade"', text):
            found.append((node.lineno, text))
    return found


def test_every_grade_a_test_runs_names_its_deadlines() -> None:
    """``grade`` without ``--deadlines`` reads ``deadlines.toml`` from the current folder, the
    class's course folder and the checkout: a test's result would depend on the instructor's
    file (a penalty, or an error while it is half-edited)."""
    unnamed = [f"{path.name}:{line}" for path in sorted((ROOT / "tests").rglob("*.py"))
               for line, text in _grade_commands(path) if "--deadlines" not in text]
    assert _grade_commands(ROOT / "tests" / "support.py"), "the scan finds no grade command"
    assert not unnamed, f"runs `grade` without --deadlines: {unnamed}"
