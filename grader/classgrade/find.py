"""Finding the notebook a student handed in, whatever it is called and wherever it lies.

nbgrader's layout puts it at ``SUBMITTED/<student>/<lesson>/<lesson>.ipynb``; downloads
from an LMS do not: ``01_attention_by_hand (1).ipynb``, ``…-1.ipynb``, a Canvas prefix,
a folder inside the folder (a zip extracted whole), a macOS ``__MACOSX`` shadow copy, the
Chinese edition beside the English one. :func:`find` looks at every notebook under the
student's folder and keeps those *of this lesson*: a notebook whose cells carry one of
the lesson's grade ids (its exercises), or, when a file cannot be read, whose name says
the lesson. Then:

- one candidate: it is graded, and the report says which file it was when it is not the
  canonical name;
- several: the one the student worked on (the others still raise NotImplementedError in
  every exercise, e.g. the untouched edition nbgrader releases beside the other), or
  copies with the same content; otherwise ``ambiguous``: nothing is guessed, the
  instructor keeps one file and regrades.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coursekit import catalogue
from coursekit.earlier import unfinished
from grader.check.notebook import NotebookError, check_size, parse_notebook
from grader.i18n import Message, msg

JUNK_PARTS = {"__MACOSX", ".ipynb_checkpoints", ".git", "__pycache__"}
MAX_CANDIDATES = 50  # a folder with more notebooks than this is not a submission


@dataclass
class Found:
    """What :func:`find` decided. ``path`` is the notebook to grade (None: nothing to
    grade, see ``problem``); ``note`` says which file was chosen and why, when that is not
    obvious; ``candidates`` are every notebook of this lesson that was seen."""

    path: Path | None
    candidates: list[Path] = field(default_factory=list)
    note: Message | str = ""
    problem: str = ""  # "missing" or "ambiguous" when path is None


def _junk(path: Path, folder: Path) -> bool:
    parts = path.relative_to(folder).parts
    return any(p in JUNK_PARTS or p.startswith(".") for p in parts) or path.name.startswith("._")


def _names_lesson(path: Path, lesson: catalogue.Lesson) -> bool:
    """The file name says this lesson (``01_attention_by_hand (1).ipynb``, a Canvas prefix,
    ``01_Attention_By_Hand-2.ipynb``...)."""
    return lesson.id.lower() in re.sub(r"[\s-]+", "_", path.name.lower())


@dataclass
class _Candidate:
    path: Path
    readable: bool
    left: int  # exercises still raising NotImplementedError (all of them: untouched)
    digest: str


def _inspect(path: Path, lesson: catalogue.Lesson) -> _Candidate | None:
    """The notebook as a candidate for ``lesson``, or None when it is another notebook."""
    try:
        check_size(path, path.name)
        data = path.read_bytes()
        nb = parse_notebook(data, path.name)
    except (NotebookError, OSError):
        if _names_lesson(path, lesson):
            return _Candidate(path, False, -1, "")
        return None
    if not catalogue.grade_ids(nb) & set(lesson.graded) and not _names_lesson(path, lesson):
        return None  # a notebook of another lesson, or the student's scratch work
    try:
        left = len(unfinished(path, lesson.graded))
    except Exception:  # noqa: BLE001 - not parseable as code: counts as worked on
        left = 0
    return _Candidate(path, True, left, hashlib.sha256(data).hexdigest())


def find(student_folder: Path, lesson: catalogue.Lesson) -> Found:
    """The notebook of ``lesson`` in ``student_folder`` (``SUBMITTED/<student>``)."""
    folder = student_folder / lesson.id
    canonical = [folder / p.name for p in lesson.notebooks("student").values()]
    root = folder if folder.is_dir() else student_folder
    paths = sorted(p for p in root.rglob("*.ipynb") if p.is_file() and not _junk(p, root))
    if len(paths) > MAX_CANDIDATES:
        paths = [p for p in paths if _names_lesson(p, lesson)][:MAX_CANDIDATES]
    seen = [c for c in (_inspect(p, lesson) for p in paths) if c is not None]
    if not seen:
        return Found(None, [], problem="missing")
    candidates = [c.path for c in seen]
    if len(seen) == 1:
        return Found(seen[0].path, candidates, note=_which(seen[0].path, canonical, student_folder))
    worked = [c for c in seen if not c.readable or c.left < len(lesson.graded)]
    if len(worked) == 1:
        chosen = worked[0].path
        others = [c.path for c in seen if c.path != chosen]
        return Found(chosen, candidates, note=(
            msg("Graded {notebook}, the notebook worked on; untouched: {others}.", notebook=_shown(chosen, student_folder), others=', '.join(_shown(p, student_folder) for p in others))))
    if not worked or len({c.digest for c in worked}) == 1 and all(c.readable for c in worked):
        pool = worked or seen  # all untouched, or copies of one notebook
        chosen = next((p for p in canonical if p in [c.path for c in pool]), pool[0].path)
        why = msg("identical copies") if worked else msg("all untouched")
        return Found(chosen, candidates, note=(
            msg("Graded {notebook} of {seen} notebooks ({why}).", notebook=_shown(chosen, student_folder), seen=len(seen), why=why)))
    return Found(None, candidates, problem="ambiguous")


def other_lesson(nb: dict[str, Any], lesson: catalogue.Lesson) -> catalogue.Lesson | None:
    """The lesson ``nb`` is the notebook of, when that is not ``lesson``: told by its cells'
    grade ids (the names its answer cells hold), or by the names its code defines when it
    carries no grade id; None when it is ``lesson``'s or no lesson's. A later lesson's
    setup cell may define an earlier lesson's names (``MultiHeadAttention =
    lesson04.MultiHeadAttention``): its grade ids still say which lesson it is."""
    names = catalogue.grade_ids(nb) - {"setup"}
    if not names:
        names = {n for cell in catalogue.code_cells(nb) for n in catalogue.defined_names(cell["source"])}
    if names & set(lesson.graded):
        return None
    overlap = {other: len(names & set(other.graded)) for other in catalogue.COURSE if other != lesson}
    best = max(overlap, key=overlap.__getitem__, default=None)
    return best if best is not None and overlap[best] else None


def wrong_lesson(found: catalogue.Lesson, lesson: catalogue.Lesson) -> Message:
    """What a student reads who handed in lesson ``found``'s notebook for ``lesson``."""
    return (msg("This is lesson {found_lesson}'s notebook, not lesson {lesson}'s: nothing in it was graded. Hand in your lesson {lesson} notebook.", found_lesson=found.number, lesson=lesson.number))


def _which(path: Path, canonical: list[Path], student_folder: Path) -> Message | str:
    if path in canonical:
        return ""
    return msg("Graded {notebook} (not at nbgrader's name {canonical_name}).", notebook=_shown(path, student_folder), canonical_name=canonical[0].name)


def _shown(path: Path, student_folder: Path) -> str:
    return f"`{path.relative_to(student_folder).as_posix()}`"


def shown_list(paths: list[Path], student_folder: Path) -> str:
    return ", ".join(_shown(p, student_folder) for p in paths)


def digest(path: Path) -> str:
    """``sha256:<hex>`` of a file's bytes (what a regrade compares)."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return f"sha256:{h.hexdigest()}"
