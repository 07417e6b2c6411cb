"""``python -m grader release OUT [--lessons 01-04]``: the bundle an instructor hands out.

A bundle holds what students need and nothing secret:

- the chosen ``lessons/<id>/`` folders (the generated student notebooks);
- the ``datasets/<name>/`` folders those lessons use (found by scanning their code for
  ``dataset_dir("name")``, ``load_numerals``, ``datasets/name``, plus :data:`EXTRA_DATASETS`);
- the public helpers ``coursekit/``, but of its generated reference modules
  ``coursekit/reference/lessonNN.py`` (each one carries lesson NN's *solutions*) only
  those a bundled lesson imports, and only when lesson NN is itself in the bundle:
  otherwise the release is refused with the lessons to add;
- a student README, a ``pyproject.toml`` and ``requirements.txt`` installing ``coursekit``
  with the course's pins, and ``environment.yml``.

Never ``solutions/``, never the ``grader`` package (hidden tests). Before the bundle is
moved into place it is scanned for every solution region and hidden-test region of
``solutions/`` and for the source lines of ``grader/hidden``; a hit aborts the release.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Datasets a lesson needs that scanning its code might miss, by lesson number.
EXTRA_DATASETS: dict[str, tuple[str, ...]] = {"09": ("numerals",)}

_SKIP = {"__pycache__", ".ipynb_checkpoints", ".pytest_cache", ".DS_Store"}
_REF_IMPORT = re.compile(r"coursekit\.reference\.lesson(\d\d)\b")
_REF_FROM = re.compile(r"from\s+coursekit\.reference\s+import\s+\(?([\w\s,]+)\)?")
_LOAD_MY_CODE = re.compile(r"load_my_code\(\s*['\"](\d\d)")
_DATASET_DIR = re.compile(r"dataset_dir\(\s*(?:name\s*=\s*)?['\"]([\w.\-]+)['\"]")
_DATASET_DIR_DEFAULT = re.compile(r"dataset_dir\(\s*\)")
_DATASET_PATH = re.compile(r"datasets/([\w.\-]+)")
_LOADER = re.compile(r"\bload_(numerals)\b")
_IMPORTS_GRADER = re.compile(r"^\s*(from\s+grader[\s.]|import\s+grader\b)", re.M)
_REGION = re.compile(r"### BEGIN (SOLUTION|HIDDEN TESTS)[^\n]*\n(.*?)### END \1", re.S)
_MARKERS = ("### BEGIN SOLUTION", "### BEGIN HIDDEN TESTS")


class ReleaseError(Exception):
    """The bundle cannot be built; ``str(exc)`` is a one-line reason."""


@dataclass
class Plan:
    lessons: list[str]
    datasets: list[str] = field(default_factory=list)
    references: list[str] = field(default_factory=list)  # lesson ids whose reference module ships
    needed_by: dict[str, list[str]] = field(default_factory=dict)  # reference lesson -> importers


def available_lessons(root: Path = ROOT) -> list[str]:
    lessons = root / "lessons"
    if not lessons.is_dir():
        return []
    return sorted(p.name for p in lessons.iterdir() if (p / f"{p.name}.ipynb").is_file())


def select_lessons(spec: str | None, available: list[str]) -> list[str]:
    """``None`` or ``all``: every lesson; else ``01-04``, ``01,03,05-07`` or full ids."""
    if not available:
        raise ReleaseError("no lessons found in lessons/")
    if spec is None or spec.strip().lower() in ("", "all"):
        return list(available)
    by_number = {lesson[:2]: lesson for lesson in available}
    have = ", ".join(by_number)
    chosen: list[str] = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        m = re.fullmatch(r"(\d{1,2})\s*-\s*(\d{1,2})", part)
        if m:
            lo, hi = int(m.group(1)), int(m.group(2))
            if lo > hi:
                raise ReleaseError(f"--lessons: empty range {part!r}")
            numbers = [f"{n:02d}" for n in range(lo, hi + 1)]
            missing = [n for n in numbers if n not in by_number]
            if missing:
                raise ReleaseError(f"--lessons {part}: no lesson {', '.join(missing)} in "
                                   f"lessons/ (have {have})")
            chosen += [by_number[n] for n in numbers]
        elif re.fullmatch(r"\d{1,2}", part):
            number = f"{int(part):02d}"
            if number not in by_number:
                raise ReleaseError(f"--lessons: no lesson {number} in lessons/ (have {have})")
            chosen.append(by_number[number])
        elif part in available:
            chosen.append(part)
        else:
            raise ReleaseError(f"--lessons: cannot read {part!r} (use e.g. 01-04 or 01,03,05-07; "
                               f"have {have})")
    return sorted(dict.fromkeys(chosen))


def notebook_code(path: Path) -> str:
    nb = json.loads(path.read_text(encoding="utf-8"))
    sources = []
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code":
            src = cell.get("source", "")
            sources.append("".join(src) if isinstance(src, list) else src)
    return "\n".join(sources)


def _lesson_code(root: Path, lesson: str) -> str:
    folder = root / "lessons" / lesson
    code = notebook_code(folder / f"{lesson}.ipynb")
    extra = [p.read_text(encoding="utf-8") for p in sorted(folder.rglob("*.py"))
             if not _SKIP.intersection(p.parts)]
    return "\n".join([code, *extra])


def referenced_lessons(code: str) -> set[str]:
    """Lesson numbers whose reference code (or own-code loader) ``code`` uses."""
    found = set(_REF_IMPORT.findall(code)) | set(_LOAD_MY_CODE.findall(code))
    for names in _REF_FROM.findall(code):
        found |= set(re.findall(r"lesson(\d\d)\b", names))
    return found


def used_datasets(code: str) -> set[str]:
    found = set(_DATASET_DIR.findall(code)) | set(_DATASET_PATH.findall(code))
    found |= set(_LOADER.findall(code))
    if _DATASET_DIR_DEFAULT.search(code):
        found.add("numerals")
    return found


def plan(lessons: list[str], root: Path = ROOT) -> Plan:
    """What a bundle of ``lessons`` must contain; refuses what would leak a solution."""
    by_number = {lesson[:2]: lesson for lesson in available_lessons(root)}
    bundled = {lesson[:2]: lesson for lesson in lessons}
    result = Plan(lessons=list(lessons))
    datasets: set[str] = set()
    pending = [(lesson, lesson[:2], _lesson_code(root, lesson)) for lesson in lessons]
    refs: dict[str, list[str]] = {}
    missing: dict[str, set[str]] = {}  # lesson number not in the bundle -> who needs it
    while pending:
        who, own, code = pending.pop(0)
        datasets |= used_datasets(code)
        datasets |= set(EXTRA_DATASETS.get(own, ()))
        for number in sorted(referenced_lessons(code)):
            if number == own:
                continue
            if number not in refs:
                module = root / "coursekit" / "reference" / f"lesson{number}.py"
                refs[number] = []
                if module.is_file():  # a reference module may import another one
                    pending.append((f"coursekit/reference/lesson{number}.py", number,
                                    module.read_text(encoding="utf-8")))
            if number not in bundled:
                missing.setdefault(number, set()).add(who)
            if not who.startswith("coursekit/"):
                refs[number].append(who)
    if missing:
        users = sorted({w for ws in missing.values() for w in ws if not w.startswith("coursekit/")})
        names = ", ".join(by_number.get(n, f"lesson {n}") for n in sorted(missing))
        add = ",".join(sorted(missing))
        many = len(missing) > 1
        whose = "those lessons' solutions" if many else "that lesson's solution"
        raise ReleaseError(
            f"{', '.join(users)} import{'' if len(users) > 1 else 's'} the reference code of "
            f"{names} ({whose}): add lesson{'s' if many else ''} {add} to --lessons "
            f"(e.g. --lessons {_spec(sorted({*bundled, *missing}))})")
    for name in sorted(datasets):
        if not (root / "datasets" / name).is_dir():
            raise ReleaseError(f"the lessons use datasets/{name}, which is missing")
    result.datasets = sorted(datasets)
    result.references = [bundled[n] for n in sorted(refs)]
    result.needed_by = {bundled[n]: sorted(set(who)) for n, who in sorted(refs.items())}
    return result


def _spec(numbers: list[str]) -> str:
    """Lesson numbers as a --lessons value: 03-05,08."""
    parts, run = [], []
    for n in map(int, numbers):
        if run and n == run[-1] + 1:
            run.append(n)
        else:
            if run:
                parts.append(run)
            run = [n]
    if run:
        parts.append(run)
    return ",".join(f"{r[0]:02d}-{r[-1]:02d}" if len(r) > 1 else f"{r[0]:02d}" for r in parts)


def _copy_tree(src: Path, dst: Path, keep=lambda path: True) -> None:
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        if _SKIP.intersection(rel.parts) or path.suffix == ".pyc" or not path.is_file():
            continue
        if not keep(path):
            continue
        target = dst / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)


def _pins(root: Path) -> tuple[str, list[str]]:
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return project.get("version", "0.0.0"), list(project["dependencies"])


def _pyproject(version: str, pins: list[str]) -> str:
    deps = "".join(f'    "{pin}",\n' for pin in pins)
    return f"""# The student edition of the course: installs the lessons' helpers (coursekit) and
# the course's pinned dependencies.  python -m pip install -e .
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "attention-course-lessons"
version = "{version}"
description = "Attention, from 优秀 to a trainable Transformer: the student notebooks"
requires-python = ">=3.11,<3.12"
dependencies = [
{deps}]

[tool.setuptools.packages.find]
include = ["coursekit*"]
"""


def _requirements(pins: list[str]) -> str:
    return ("# The course's pinned dependencies (the same as pyproject.toml); from this folder:\n"
            "#   python -m pip install -r requirements.txt\n" + "\n".join(pins) + "\n-e .\n")


def _environment(pins: list[str]) -> str:
    lines = "".join(f"      - {pin}\n" for pin in pins)
    return ("# Conda environment of the course; the same pins as pyproject.toml.\n"
            "#   conda env create -f environment.yml && conda activate attention-course\n"
            "name: attention-course\nchannels:\n  - conda-forge\ndependencies:\n"
            "  - python=3.11\n  - pip\n  - pip:\n" + lines + "      - -e .\n")


def _readme(p: Plan) -> str:
    lessons = "\n".join(f"- `lessons/{lesson}/{lesson}.ipynb`" for lesson in p.lessons)
    first = p.lessons[0]
    data = ("".join(f"- `datasets/{name}/` (its `README.md` is the datasheet)\n" for name in p.datasets)
            or "- none for these lessons\n")
    return f"""# Attention, from 优秀 to a trainable Transformer: your lessons

Lessons in this folder:

{lessons}

Data they use:

{data}
## Set up (once)

You need Python 3.11. From this folder:

```
python -m venv .venv && . .venv/bin/activate      # Windows: .venv\\Scripts\\activate
python -m pip install -e .
```

(With conda instead: `conda env create -f environment.yml && conda activate attention-course`.)
This installs the pinned versions the course is tested with (torch, numpy, JupyterLab,
nbgrader, ...) and `coursekit`, the small helper package the lessons import.

## Open a lesson

```
jupyter lab lessons/
```

Open a lesson's notebook and read from the top. Run cells with Shift+Enter.

## Work

Each exercise is a cell with `# YOUR CODE HERE` and `raise NotImplementedError()`:
delete the `raise` line and write your code in its place. Do not rename the function or
class, and do not change its arguments: your work is graded by calling it by name.
The locked cells (imports, data, tests) cannot be edited.

## Check your work

- **Visible tests.** Right below each exercise is a test cell. Run it: it prints
  `...: visible tests passed ✓`, or fails with a message saying what to fix. Before you
  fill in an exercise its test fails with `NotImplementedError`: that is expected.
- **Validate.** In JupyterLab, *Kernel → Restart Kernel and Run All Cells*, then press
  **Validate** in the notebook's toolbar (nbgrader). It runs the whole notebook from a fresh
  kernel and says whether every test cell passes, or which ones fail. From a terminal:
  `nbgrader validate lessons/{first}/{first}.ipynb`.
- **Hidden tests.** When you hand in, your instructor grades the notebook with more tests
  than the visible ones (other inputs, edge cases). They are not in this folder. The lessons
  mention `python -m grader check`: that command is part of the full course repository
  (for self-learners), not of this student edition; here, the visible tests and Validate
  are your checks. Passing them is necessary, not sufficient: test your code on your own
  cases too.

## Hand in

Save the notebook (Ctrl+S) and hand in the `.ipynb` file the way your instructor asked,
keeping its name. Restart and run all cells once before handing in: the grader runs the
notebook from the top, so code that only worked thanks to a cell you deleted will fail.
"""


def _text_of(path: Path) -> str:
    data = path.read_bytes()
    text = data.decode("utf-8", errors="ignore")
    if path.suffix == ".ipynb":
        try:
            nb = json.loads(text)
        except json.JSONDecodeError:
            return text
        parts = [text]
        for cell in nb.get("cells", []):
            src = cell.get("source", "")
            parts.append("".join(src) if isinstance(src, list) else src)
            for output in cell.get("outputs", []):
                parts.append(json.dumps(output, ensure_ascii=False))
        return "\n".join(parts)
    return text


def _normal(text: str) -> str:
    return "\n".join(line.strip() for line in text.strip().splitlines() if line.strip())


def secrets(root: Path = ROOT) -> list[tuple[str, str]]:
    """(where, text) of everything a bundle must never contain: every solution and
    hidden-test region of ``solutions/``, and every line of ``grader/hidden`` longer than
    30 characters, except import lines (``from __future__ import annotations`` is no secret)
    and lines that the public student notebooks ``lessons/*/*.ipynb`` show anyway (a
    visible test may build the same input as a hidden one: ``x = np.array([[1.0, 2.0]])``)."""
    found = []
    for nb in sorted((root / "solutions").glob("*/*.ipynb")):
        for kind, body in _REGION.findall(notebook_code(nb)):
            if _normal(body):
                found.append((f"{nb.relative_to(root)} ({kind.lower()})", _normal(body)))
    public = "\n".join(_normal(notebook_code(nb)) for nb in sorted((root / "lessons").glob("*/*.ipynb")))
    for path in sorted((root / "grader" / "hidden").glob("*.py")):
        for line in path.read_text(encoding="utf-8").splitlines():
            line = line.strip()
            if len(line) > 30 and not re.match(r"(from\s+\S+\s+)?import\s", line) \
                    and line not in public:
                found.append((str(path.relative_to(root)), line))
    return found


def exported_regions(lesson: str, root: Path = ROOT) -> list[str]:
    """Solution regions of lesson's cells tagged ``export``: they ship in its reference module."""
    source = root / "solutions" / lesson / f"{lesson}.ipynb"
    if not source.is_file():
        return []
    nb = json.loads(source.read_text(encoding="utf-8"))
    regions = []
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "code" and "export" in (cell.get("metadata", {}).get("tags") or []):
            src = cell.get("source", "")
            src = "".join(src) if isinstance(src, list) else src
            regions += [_normal(body) for kind, body in _REGION.findall(src) if kind == "SOLUTION"]
    return regions


def scan(bundle: Path, p: Plan, root: Path = ROOT) -> list[str]:
    """Leaks found in ``bundle``: ``file: what`` lines (empty when clean)."""
    allowed: dict[str, set[str]] = {}
    for lesson in p.references:
        module = f"coursekit/reference/lesson{lesson[:2]}.py"
        for region in exported_regions(lesson, root):
            allowed.setdefault(region, set()).add(module)
    leaks = []
    needles = secrets(root)
    for path in sorted(bundle.rglob("*")):
        if not path.is_file():
            continue
        rel = path.relative_to(bundle).as_posix()
        if rel.split("/")[0] in ("solutions", "grader"):
            leaks.append(f"{rel}: {rel.split('/')[0]}/ must not ship")
        text = _text_of(path)
        normal = _normal(text)
        for marker in _MARKERS:
            if marker in text:
                leaks.append(f"{rel}: contains {marker!r}")
        for where, needle in needles:
            if needle in normal and rel not in allowed.get(needle, ()):
                leaks.append(f"{rel}: contains text of {where}")
        if path.suffix == ".py" and _IMPORTS_GRADER.search(text):
            leaks.append(f"{rel}: imports the grader package, which does not ship")
    return leaks


def build(out: str | Path, spec: str | None = None, root: Path = ROOT,
          force: bool = False) -> Plan:
    """Build the bundle of the lessons ``spec`` selects into the new folder ``out``."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        if not force:
            raise ReleaseError(f"{out} exists and is not empty (choose a new folder, or --force "
                               f"to replace it)")
        if (out / "solutions").exists() or (out / ".git").exists():
            raise ReleaseError(f"refusing to replace {out}: it looks like a course repository")
    p = plan(select_lessons(spec, available_lessons(root)), root)
    version, pins = _pins(root)
    shipped_refs = {f"lesson{lesson[:2]}.py" for lesson in p.references}
    reference_dir = root / "coursekit" / "reference"

    def keep_helper(path: Path) -> bool:
        if path.parent == reference_dir and re.fullmatch(r"lesson\d\d\.py", path.name):
            return path.name in shipped_refs
        return True

    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".bundle-", dir=out.parent) as tmp:
        stage = Path(tmp) / "bundle"
        for lesson in p.lessons:
            _copy_tree(root / "lessons" / lesson, stage / "lessons" / lesson)
        _copy_tree(root / "coursekit", stage / "coursekit", keep_helper)
        for name in p.datasets:
            _copy_tree(root / "datasets" / name, stage / "datasets" / name)
        (stage / "README.md").write_text(_readme(p), encoding="utf-8")
        (stage / "pyproject.toml").write_text(_pyproject(version, pins), encoding="utf-8")
        (stage / "requirements.txt").write_text(_requirements(pins), encoding="utf-8")
        (stage / "environment.yml").write_text(_environment(pins), encoding="utf-8")
        leaks = scan(stage, p, root)
        if leaks:
            raise ReleaseError(f"refusing to release, the bundle would leak: {leaks[0]}"
                               + (f" (and {len(leaks) - 1} more)" if len(leaks) > 1 else ""))
        if out.exists():
            shutil.rmtree(out)
        shutil.move(str(stage), out)
    return p


def summary(out: Path, p: Plan) -> str:
    files = [f for f in Path(out).rglob("*") if f.is_file()]
    size = sum(f.stat().st_size for f in files)
    lines = [f"wrote {out}: {len(p.lessons)} lesson(s), {len(files)} files, {size / 1e6:.2f} MB",
             f"  lessons:  {', '.join(p.lessons)}",
             f"  datasets: {', '.join(p.datasets) or '(none)'}"]
    for lesson, users in p.needed_by.items():
        lines.append(f"  note: coursekit/reference/lesson{lesson[:2]}.py ships the solutions of "
                     f"{lesson}'s exported exercises (imported by {', '.join(users)})")
    return "\n".join(lines)
