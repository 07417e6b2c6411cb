"""One source for code that later lessons reuse: the earlier lessons' notebooks.

Lesson 04 needs the attention of lesson 03; lesson 08 needs the blocks of lessons 03–07.
They never carry hand-copied versions. Instead the code cells tagged ``export`` in a
reference notebook ``solutions/NN_name/NN_name.ipynb`` are extracted, after its
``setup`` cell (its imports), into the generated module ``coursekit/reference/lessonNN.py``
(regenerate with ``python -m coursekit.export``; a test fails when they are stale). A later lesson imports the reference versions, so a
student who failed an earlier lesson can still do it; :func:`load_my_code` loads the same
names from the student's own notebook instead.
"""

from __future__ import annotations

import json
import re
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REFERENCE_DIR = Path(__file__).resolve().parent / "reference"

EXPORT_TAG = "export"
SETUP_ID = "setup"
_MARKERS = re.compile(r"^\s*### (BEGIN|END) SOLUTION\s*$\n?", re.M)
_IPYTHON_LINE = re.compile(r"^\s*[%!].*$\n?", re.M)


def _code_cells(notebook: Path) -> list[dict]:
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    cells = [c for c in nb["cells"] if c["cell_type"] == "code"]
    for cell in cells:
        src = cell["source"]
        cell["source"] = "".join(src) if isinstance(src, list) else src
    return cells


def _grade_id(cell: dict) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def exported_ids(notebook: Path) -> list[str]:
    """Grade ids of the cells tagged ``export``, in notebook order."""
    return [_grade_id(c) for c in _code_cells(notebook)
            if EXPORT_TAG in (c.get("metadata", {}).get("tags") or [])]


def _is_provided(cell: dict) -> bool:
    """A locked cell that is not an answer: code the course gives, not the student's."""
    nbgrader = cell.get("metadata", {}).get("nbgrader", {})
    return bool(nbgrader.get("locked")) and not nbgrader.get("solution")


def extract(notebook: Path, grade_ids: list[str], provided_from: Path | None = None) -> str:
    """Python source of the notebook's setup cell and the named cells, in that order.

    With ``provided_from`` (a reference notebook), a provided cell that ``notebook`` lacks
    (a student notebook released before the cell was added) is taken from there."""
    cells = {_grade_id(c): c["source"] for c in _code_cells(notebook) if _grade_id(c)}
    if provided_from is not None:
        for cell in _code_cells(provided_from):
            if _grade_id(cell) in grade_ids and _grade_id(cell) not in cells and _is_provided(cell):
                cells[_grade_id(cell)] = cell["source"]
    missing = [g for g in grade_ids if g not in cells]
    if missing:
        raise KeyError(f"{notebook.name} has no cell with grade_id {', '.join(missing)}")
    parts = [cells.get(SETUP_ID, "")] + [cells[g] for g in grade_ids]
    code = "\n\n\n".join(_IPYTHON_LINE.sub("", _MARKERS.sub("", p)).strip() for p in parts if p)
    return code + "\n"


def module_name(lesson: str) -> str:
    return f"lesson{lesson[:2]}"


def exporting_lessons() -> dict[str, Path]:
    """Reference notebooks that export something, by lesson id."""
    found = {}
    for notebook in sorted((ROOT / "solutions").glob("*/*.ipynb")):
        if notebook.stem == notebook.parent.name and exported_ids(notebook):
            found[notebook.stem] = notebook
    return found


def reference_source(lesson: str, notebook: Path) -> str:
    header = (f'"""Reference code of lesson {lesson}, GENERATED from '
              f'{notebook.relative_to(ROOT)}\nby `python -m coursekit.export`. Do not edit."""\n'
              f"# ruff: noqa\n\n")
    return header + extract(notebook, exported_ids(notebook))


def generated_files() -> dict[Path, str]:
    """Every file of ``coursekit/reference`` with the content it should have."""
    files = {REFERENCE_DIR / "__init__.py":
             '"""Generated reference building blocks of earlier lessons (see coursekit.export)."""\n'}
    for lesson, notebook in exporting_lessons().items():
        files[REFERENCE_DIR / f"{module_name(lesson)}.py"] = reference_source(lesson, notebook)
    return files


def write_all() -> list[Path]:
    REFERENCE_DIR.mkdir(exist_ok=True)
    files = generated_files()
    for path, text in files.items():
        path.write_text(text, encoding="utf-8")
    return list(files)


def load_my_code(lesson: str, notebook: str | Path | None = None) -> types.ModuleType:
    """The exported names of ``lesson``, taken from the student's own notebook
    (default ``lessons/<lesson>/<lesson>.ipynb``) instead of the reference one."""
    reference = ROOT / "solutions" / lesson / f"{lesson}.ipynb"
    path = Path(notebook) if notebook else ROOT / "lessons" / lesson / f"{lesson}.ipynb"
    grade_ids = exported_ids(reference) if reference.exists() else exported_ids(path)
    mod = types.ModuleType(f"my_{module_name(lesson)}", f"your code of {lesson}, from {path}")
    source = extract(path, grade_ids, provided_from=reference if reference.exists() else None)
    exec(compile(source, str(path), "exec"), mod.__dict__)
    return mod


if __name__ == "__main__":
    for p in write_all():
        print(p.relative_to(ROOT), file=sys.stderr)
