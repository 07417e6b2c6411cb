"""The code of earlier lessons, for the lessons that build on them.

Lesson 04 uses lesson 03's attention, lesson 08 the blocks of lessons 03-07, lesson 09 the
model of lesson 08. Their setup cells ask for it by the lesson's number::

    from coursekit.earlier import lesson_code

    lesson03 = lesson_code("03")

:func:`lesson_code` returns the course's reference code of that lesson where it is
installed (``coursekit/reference/lessonNN.py``: in the course repository, in the grader's
sandbox, in a student bundle whose instructor chose to ship it), and otherwise the
student's own notebook of that lesson, loaded by :func:`load_my_code`. So a bundle never
hands students an earlier lesson's answers unless their instructor decides to, and the
graders always grade a lesson on the references of the lessons before it.

When the student's own code cannot be used (the notebook is not there, a cell is gone,
an exercise still raises ``NotImplementedError``, a cell fails as it runs),
:class:`EarlierLessonError` says so in words and names the lesson to finish.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import types
from pathlib import Path

from . import catalogue
from .catalogue import Lesson

_MARKERS = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*(\n|$)", re.M)


class EarlierLessonError(Exception):
    """An earlier lesson's code that a later lesson needs cannot be used; says which and why."""


class MissingCells(KeyError):
    """A notebook lacks cells (by grade id) that its lesson exports."""

    def __init__(self, notebook: Path, grade_ids: list[str]):
        super().__init__(f"{notebook.name} has no cell with grade_id {', '.join(grade_ids)}")
        self.grade_ids = grade_ids


def lesson_code(lesson: str) -> types.ModuleType:
    """The code of an earlier ``lesson`` (id or number): its reference module where it is
    installed, else the student's own notebook (:func:`load_my_code`)."""
    entry = catalogue.get(lesson)
    if importlib.util.find_spec(entry.reference_module) is not None:
        return importlib.import_module(entry.reference_module)
    return load_my_code(entry.id)


def my_notebook(lesson: Lesson) -> Path:
    """The student's notebook of ``lesson``: ``lessons/<id>/<id>.ipynb`` of this course, else
    the same folder beside the current one (nbgrader's fetched assignments); of several
    editions, the one saved last."""
    folders = [lesson.student().parent, Path.cwd().parent / lesson.id, Path.cwd() / lesson.id]
    found = [folder / path.name for folder in folders for path in lesson.notebooks("student").values()
             if (folder / path.name).is_file()]
    return max(found, key=lambda p: p.stat().st_mtime_ns) if found else lesson.student()


def exported_cells(notebook: Path, grade_ids: list[str] | tuple[str, ...],
                   provided_from: Path | None = None) -> list[tuple[str, str]]:
    """``(grade_id, python)`` of the notebook's setup cell and the named cells, in that
    order, without solution markers and IPython lines.

    With ``provided_from`` (a reference notebook), a provided cell that ``notebook`` lacks
    (a student notebook released before the cell was added) is taken from there."""
    cells = {catalogue.grade_id(c): catalogue.cell_source(c)
             for c in catalogue.code_cells(catalogue.read_json(notebook)) if catalogue.grade_id(c)}
    if provided_from is not None:
        for cell in catalogue.code_cells(catalogue.read_json(provided_from)):
            gid = catalogue.grade_id(cell)
            if gid in grade_ids and gid not in cells and catalogue.is_provided(cell):
                cells[gid] = catalogue.cell_source(cell)
    missing = [g for g in grade_ids if g not in cells]
    if missing:
        raise MissingCells(notebook, missing)
    ids = [catalogue.SETUP_ID] * (catalogue.SETUP_ID in cells) + list(grade_ids)
    return [(gid, catalogue.python_of(_MARKERS.sub("", cells[gid])).strip() + "\n") for gid in ids]


def extract(notebook: Path, grade_ids: list[str] | tuple[str, ...],
            provided_from: Path | None = None) -> str:
    """The Python of :func:`exported_cells` as one source."""
    return "\n\n".join(code for _, code in exported_cells(notebook, grade_ids, provided_from))


def unfinished(notebook: Path, grade_ids: list[str] | tuple[str, ...]) -> list[str]:
    """Grade ids of the named answer cells that still raise ``NotImplementedError``."""
    found = []
    for cell in catalogue.code_cells(catalogue.read_json(notebook)):
        name = catalogue.grade_id(cell)
        if name is not None and name in grade_ids and catalogue.is_solution(cell):
            tree = catalogue.parse(catalogue.cell_source(cell))
            if tree is not None and any(_raises_not_implemented(n) for n in ast.walk(tree)):
                found.append(name)
    return found


def _raises_not_implemented(node: ast.AST) -> bool:
    if not isinstance(node, ast.Raise) or node.exc is None:
        return False
    exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
    return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"


_loaded: dict[tuple[Path, int], types.ModuleType] = {}


def load_my_code(lesson: str, notebook: str | Path | None = None) -> types.ModuleType:
    """The exported names of ``lesson`` (id or number), run from the student's own notebook
    (default :func:`my_notebook`) instead of the reference one. Raises
    :class:`EarlierLessonError`, naming the lesson, when that code cannot be used."""
    entry = catalogue.get(lesson)
    path = Path(notebook) if notebook else my_notebook(entry)
    where = _shown(path, entry)
    fix = (f"finish lesson {entry.number} first, or ask your instructor for the course's "
           f"reference code of lesson {entry.number}")
    if not path.is_file():
        raise EarlierLessonError(
            f"This lesson builds on your lesson {entry.number} ({entry.title}), but its "
            f"notebook is not at {where}: put your lesson {entry.number} notebook there (the "
            f"folders as your handout has them), or ask your instructor for the course's "
            f"reference code of lesson {entry.number}.")
    key = (path.resolve(), path.stat().st_mtime_ns)
    if key in _loaded:
        return _loaded[key]
    reference = entry.solution() if entry.solution().is_file() else None
    try:
        grade_ids = entry.exported_ids() if reference else _exported_ids(path)
        cells = exported_cells(path, grade_ids, provided_from=reference)
        todo = unfinished(path, grade_ids)
    except MissingCells as exc:
        names = ", ".join(f"`{gid}`" for gid in exc.grade_ids)
        raise EarlierLessonError(f"This lesson builds on your lesson {entry.number}, but {where} "
                                 f"has no cell {names} (deleted?): {fix}.") from None
    except (ValueError, TypeError, UnicodeDecodeError) as exc:
        raise EarlierLessonError(f"This lesson builds on your lesson {entry.number}, but {where} "
                                 f"cannot be read as a notebook ({exc}): {fix}.") from None
    if todo:
        names = ", ".join(f"`{gid}`" for gid in todo)
        raise EarlierLessonError(
            f"This lesson builds on your lesson {entry.number} ({entry.title}), but {names} "
            f"in {where} {'is' if len(todo) == 1 else 'are'} not written yet (still "
            f"`raise NotImplementedError()`): {fix}.")
    module = types.ModuleType(f"my_lesson{entry.number}", f"your code of {entry.id}, from {path}")
    for gid, code in cells:
        try:
            exec(compile(code, f"{path.name} [{gid}]", "exec"), module.__dict__)
        except Exception as exc:  # noqa: BLE001 - any failure of the student's cell, in words
            raise EarlierLessonError(
                f"This lesson builds on your lesson {entry.number} ({entry.title}), but the cell "
                f"`{gid}` of {where} raised {type(exc).__name__}: {exc}: {fix}.") from exc
    _loaded[key] = module
    return module


def _exported_ids(notebook: Path) -> tuple[str, ...]:
    cells = catalogue.code_cells(catalogue.read_json(notebook))
    return tuple(catalogue.grade_id(c) or "" for c in cells if catalogue.EXPORT_TAG in catalogue.tags(c))


def _shown(path: Path, lesson: Lesson) -> str:
    try:
        return path.resolve().relative_to(lesson.root).as_posix()
    except ValueError:
        return str(path)
