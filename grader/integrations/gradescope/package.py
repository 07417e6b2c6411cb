"""``python -m grader gradescope LESSON OUT``: build a Gradescope autograder zip.

The zip follows Gradescope's layout (https://gradescope-autograders.readthedocs.io/en/latest/specs/):
``setup.sh`` and ``run_autograder`` at its root; Gradescope unpacks it into
``/autograder/source``. Beside them: ``autograder.json`` (lesson, limits, visibility),
``requirements.txt`` (the course's pins), ``course/`` (the ``grader`` package with the
hidden graders, and the public helpers and data the lesson's notebook imports: the same
files the sandbox of ``grade`` shows it) and ``selfcheck/`` (the blank student notebook,
graded once by ``setup.sh`` to check the image). Never ``solutions/``.
"""

from __future__ import annotations

import importlib.metadata
import io
import re
import subprocess
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

from coursekit import catalogue
from coursekit.errors import UserError
from grader import COURSE_ROOT
from grader.common.limits import DEFAULT_LIMITS
from grader.common.templating import render
from grader.i18n.message import msg
from grader.integrations.gradescope.run import Config
from grader.testkit.parts import packaged_file, packaged_source

ROOT = COURSE_ROOT
GRADER = ROOT / "grader"
PREFIX = "/opt/attention-course"
PYTHON = "3.11"
UV_VERSION = "0.13.9"
TORCH_INDEX = "https://download.pytorch.org/whl/cpu"
VISIBILITIES = ("visible", "after_due_date", "after_published", "hidden")
_EPOCH = (2020, 1, 1, 0, 0, 0)  # fixed timestamps: the same inputs give the same zip


@dataclass
class Package:
    path: Path
    lesson: str
    exercises: list[str]
    files: int
    size: int


class PackageError(UserError, ValueError):
    """Options, or pins, that no autograder zip can be built from."""


def pins() -> list[str]:
    """The course's pinned dependencies (pyproject.toml, or the installed metadata)."""
    pyproject = ROOT / "pyproject.toml"
    if pyproject.is_file():
        return list(tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["dependencies"])
    return [r for r in importlib.metadata.requires("attention-course") or [] if "extra ==" not in r]


def _torch_pin(all_pins: list[str]) -> str:
    found = [p for p in all_pins if re.match(r"torch\s*==", p)]
    if len(found) != 1:
        raise PackageError(msg("pyproject.toml must pin torch exactly once (torch==X.Y.Z)"))
    return found[0].replace(" ", "")


def _built() -> str:
    from grader import __version__

    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                                capture_output=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return f"grader {__version__}" + (f", commit {commit}" if commit else "")


def course_files(lesson: str) -> dict[str, Path]:
    """``course/...`` entries: the grader package with this lesson's hidden tests only
    (never another lesson's: a zip reaches every TA of a course), and the lesson's public
    files (the reference modules of the lessons before it)."""
    from grader.classgrade.classroom import public_files
    from grader.testkit.lessons import HIDDEN_DIR, hidden_test_file

    others = {p for p in HIDDEN_DIR.glob("test_*.py")} - {hidden_test_file(lesson)}
    files = {}
    for path in sorted(GRADER.rglob("*")):
        rel = path.relative_to(ROOT)
        if path.is_file() and "__pycache__" not in rel.parts and path.suffix not in (".pyc", ".pyo") \
                and path not in others:
            files[rel.as_posix()] = path
    files.update(public_files(lesson))
    return {f"course/{rel}": path for rel, path in files.items()}


def build(lesson: str, out: str | Path, *, timeout_s: float = DEFAULT_LIMITS.wall_s,
          memory_gib: float = DEFAULT_LIMITS.memory_gib,
          isolation: str = "auto", visibility: str = "visible",
          stdout_visibility: str = "hidden") -> Package:
    """Write the autograder zip for ``lesson`` to ``OUT/autograder.zip`` (or ``OUT`` if it
    ends in ``.zip``). Raises UnknownLesson (a KeyError) for an unknown lesson, PackageError
    (a ValueError) for bad options."""
    from grader.check.engine import exercise_points
    from grader.testkit.lessons import hidden_test_file

    hidden_test_file(lesson)
    for name, value in (("visibility", visibility), ("stdout visibility", stdout_visibility)):
        if value not in VISIBILITIES:
            raise PackageError(msg("{option} must be one of {choices}, not {value}", option=name,
                                   choices=", ".join(VISIBILITIES), value=repr(value)))
    out = Path(out)
    target = out if out.suffix == ".zip" else out / "autograder.zip"
    all_pins = pins()
    torch = _torch_pin(all_pins)
    exercises = list(exercise_points(lesson))
    built = _built()
    values = dict(lesson=lesson, built=built, prefix=PREFIX, python=PYTHON, uv_version=UV_VERSION,
                  torch_index=TORCH_INDEX, torch_pin=torch, exercises=exercises)
    texts = {
        "setup.sh": render("setup.sh.j2", **values),
        "run_autograder": render("run_autograder.j2", **values),
        "requirements.txt": "# The course's pins (pyproject.toml); torch comes from PyTorch's CPU "
                            "index in setup.sh.\n" + "\n".join(p for p in all_pins if p.replace(" ", "") != torch) + "\n",
        "autograder.json": Config(lesson=lesson, timeout_s=timeout_s, memory_gib=memory_gib,
                                  isolation=isolation, visibility=visibility,
                                  stdout_visibility=stdout_visibility, built=built).dumps(),
    }
    parts = packaged_source(lesson)
    if parts is not None:  # the course's versions BUILDS_ON substitutes (private to the grader)
        texts["course/" + packaged_file(catalogue.get(lesson).number).relative_to(ROOT).as_posix()] = parts
    blank = catalogue.get(lesson).student()
    files = dict(course_files(lesson))
    if blank.is_file():
        files[f"selfcheck/{lesson}.ipynb"] = blank
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(texts):
            _add(zf, name, texts[name].encode("utf-8"), executable=name in ("setup.sh", "run_autograder"))
        for name in sorted(files):
            _add(zf, name, files[name].read_bytes())
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data.getvalue())
    return Package(target, lesson, exercises, len(texts) + len(files), len(data.getvalue()))


def _add(zf: zipfile.ZipFile, name: str, data: bytes, executable: bool = False) -> None:
    info = zipfile.ZipInfo(name, date_time=_EPOCH)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = (0o100755 if executable else 0o100644) << 16
    zf.writestr(info, data)


def summary(pkg: Package, lang: str = "en") -> str:
    """What ``gradescope`` built, in ``lang`` (the instructor's)."""
    from grader.i18n import words

    t = words(lang)
    return "\n".join([
        t(msg("wrote {archive}: {files} files, {megabytes} MB", archive=pkg.path, files=pkg.files,
              megabytes=f"{pkg.size / 1e6:.1f}")),
        "  " + t(msg("lesson:  {lesson}", lesson=pkg.lesson)),
        "  " + t(msg("tests:   {exercises}", exercises=", ".join(pkg.exercises))),
        "  " + t(msg("upload:  Gradescope > assignment > Configure Autograder > Zip file upload")),
    ])
