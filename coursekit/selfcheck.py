"""Check a lesson from inside its notebook: the last cell of every lesson calls
``check_my_work("NN_name")``.

The check grades the notebook **as saved**, with the hidden graders, in a separate process
(``python -m grader check NOTEBOOK --format html``: the grader runs the notebook in its
sandbox); the hidden tests never run in this kernel and their code is never shown. What
comes back is the command line's verdict, as a table: the same words as ``grader check``.

This module never imports the grader (a student bundle ships ``coursekit`` without it): it
finds the grader beside itself, in this copy of the course, and says what to do instead in a
handout that has none.

Which notebook: the one JupyterLab's kernel belongs to (``__session__`` or
``$JPY_SESSION_NAME``), else ``<lesson>.ipynb`` in the working folder (a ``jupyter nbconvert
--execute`` run works in the notebook's folder). Where the kernel ran an exercise cell that
differs from the saved file, the verdict says so: the grader sees only what is saved.
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import catalogue, settings

COURSE_ROOT = Path(__file__).resolve().parents[1]
CHECK_TIMEOUT_S = 900.0

MESSAGES = {
    "en": {
        "save_first": "This notebook has changes that are not saved ({names}): the check grades "
                      "the file as saved. Save it (Ctrl+S, or ⌘S on a Mac) and run this cell again.",
        "no_grader": "This copy of the course has no hidden graders (a student edition): run "
                     "every visible test from a fresh kernel (Kernel → Restart Kernel and Run All "
                     "Cells, or nbgrader's Validate button); your instructor's grader runs the "
                     "hidden tests when you hand in.",
        "not_found": "Could not find this notebook's file. Save it, or name it: "
                     "check_my_work({lesson!r}, \"path/to/{lesson}.ipynb\").",
        "grading": "Skipped while the notebook is being graded: the grader runs the hidden tests itself.",
        "too_long": "The check took more than {seconds:g} s and was stopped.",
        "no_start": "The grader could not start: {reason}",
        "failed": "The grader could not check this notebook: {reason}",
    },
    "zh": {
        "save_first": "这个笔记本有尚未保存的改动（{names}）：检查的是已保存的文件。请先保存"
                      "（Ctrl+S，Mac 上是 ⌘S），再运行这个单元格。",
        "no_grader": "这份课程不含隐藏测试（学生版）：请在新的内核里运行所有可见测试（内核 → "
                     "重启内核并运行所有单元格，或点击 nbgrader 的 Validate 按钮）；提交后，老师的"
                     "评分程序会运行隐藏测试。",
        "not_found": "找不到这个笔记本的文件。请先保存，或者写出它的路径："
                     "check_my_work({lesson!r}, \"path/to/{lesson}.zh.ipynb\")。",
        "grading": "笔记本正在被评分，这里跳过：评分程序会自己运行隐藏测试。",
        "too_long": "检查超过了 {seconds:g} 秒，已被停止。",
        "no_start": "评分程序无法启动：{reason}",
        "failed": "评分程序无法检查这个笔记本：{reason}",
    },
}


@dataclass
class Verdict:
    """What the check cell shows: the grader's table (HTML), or a sentence saying why there
    is none; a note above it (unsaved changes)."""

    html: str = ""
    message: str = ""
    note: str = ""

    def _repr_html_(self) -> str:
        parts = [f"<p><b>{html.escape(self.note)}</b></p>" if self.note else ""]
        parts.append(self.html or f"<p>{html.escape(self.message)}</p>")
        return "".join(parts)

    def __repr__(self) -> str:
        body = self.message or _text_of(self.html)
        return "\n".join(p for p in (self.note, body) if p)


def check_my_work(lesson: str, notebook: str | Path | None = None,
                  timeout: float = CHECK_TIMEOUT_S) -> Verdict:
    """Grade this lesson's notebook as saved, with the hidden graders, in a separate sandboxed
    process; the verdict shows as a table. ``notebook``: its path, where it cannot be found."""
    lesson = catalogue.get(lesson).id
    path = Path(notebook).expanduser() if notebook else find_notebook(lesson)
    say = MESSAGES[language(path)]
    if autograding():
        return Verdict(message=say["grading"])
    root = grader_root()
    if root is None:
        return Verdict(message=say["no_grader"])
    if path is None or not path.is_file():
        return Verdict(message=say["not_found"].format(lesson=lesson))
    path = path.resolve()
    unsaved = unsaved_exercises(path)
    note = say["save_first"].format(names=", ".join(unsaved)) if unsaved else ""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(root), os.environ.get("PYTHONPATH", "")) if p))
    command = [sys.executable, "-m", "grader", "check", str(path), "--lesson", lesson,
               "--format", "html"]
    try:
        proc = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return Verdict(message=say["too_long"].format(seconds=timeout), note=note)
    except OSError as exc:
        return Verdict(message=say["no_start"].format(reason=exc), note=note)
    if proc.returncode != 0:
        reason = proc.stderr.strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
        return Verdict(message=say["failed"].format(reason=reason[0]), note=note)
    return Verdict(html=proc.stdout, note=note)


def language(notebook: Path | None) -> str:
    """The language of the cell's sentences: ``$COURSE_LANG``, else the notebook's edition
    (the grader's table follows the same rule)."""
    chosen = settings.language()
    if chosen in MESSAGES:
        return chosen
    edition = catalogue.COURSE.edition_of(notebook) if notebook is not None else "en"
    return edition if edition in MESSAGES else "en"


def autograding() -> bool:
    """nbgrader autograde runs this notebook (in its ``autograded/<student>/`` folder).
    Not ``settings.grading()``, which is also true in the kernel of nbgrader's Validate and
    under CI, where checking the saved notebook is harmless."""
    return settings.AUTOGRADED_FOLDER in Path.cwd().parts


def grader_root() -> Path | None:
    """This copy of the course, where it holds the grader and its hidden tests."""
    grader = COURSE_ROOT / "grader"
    if (grader / "__main__.py").is_file() and (grader / "hidden").is_dir():
        return COURSE_ROOT
    return None


def find_notebook(lesson: str) -> Path | None:
    """The notebook of ``lesson`` this kernel runs: JupyterLab's session, else the working
    folder's ``<lesson>.ipynb`` or another edition of it (the one whose cells the kernel ran)."""
    session = _user_namespace().get("__session__") or settings.jupyter_session()
    candidates: list[Path] = []
    if session:
        named = Path(str(session)).expanduser()
        candidates += [named, Path.cwd() / named, Path.cwd() / named.name]
    candidates += [Path.cwd() / path.name for path in catalogue.get(lesson).notebooks("student").values()]
    found = [path for path in candidates
             if path.suffix == ".ipynb" and path.is_file() and _lesson_id(path) == lesson]
    if session and found and found[0] in candidates[:3]:  # JupyterLab named it
        return found[0]
    # no session (nbconvert): of the editions in the folder, the one whose cells this kernel ran
    return max(found, key=_cells_run, default=None)


def _cells_run(path: Path) -> int:
    """How many of the saved notebook's code cells this kernel ran, as saved."""
    ran = {_normal(source) for source in _history()}
    try:
        cells = catalogue.code_cells(catalogue.read_json(path))
    except (OSError, ValueError):
        return -1
    return sum(_normal(catalogue.cell_source(cell)) in ran for cell in cells)


def _lesson_id(path: Path) -> str | None:
    found = catalogue.COURSE.lesson_of(path)
    return getattr(found, "id", None)


def unsaved_exercises(path: Path) -> list[str]:
    """The exercises whose cell this kernel last ran differs from the saved notebook's."""
    history = _history()
    if not history:
        return []
    try:
        saved = catalogue.read_json(path)
    except (OSError, ValueError):
        return []
    changed = []
    for cell in catalogue.code_cells(saved):
        name = catalogue.grade_id(cell)
        if not name or not catalogue.is_solution(cell):
            continue
        defines = re.compile(rf"^(?:def|class)\s+{re.escape(name)}\b", re.M)
        ran = [source for source in history if defines.search(source)]
        if ran and _normal(ran[-1]) != _normal(catalogue.cell_source(cell)):
            changed.append(name)
    return changed


def _normal(source: str) -> str:
    return "\n".join(line.rstrip() for line in source.strip().splitlines())


def _ipython() -> Any:
    module = sys.modules.get("IPython")
    return module.get_ipython() if module is not None else None


def _user_namespace() -> dict[str, Any]:
    shell = _ipython()
    return getattr(shell, "user_ns", None) or {}


def _history() -> list[str]:
    """The sources of the cells this kernel ran, oldest first (IPython's raw input history)."""
    shell = _ipython()
    manager = getattr(shell, "history_manager", None)
    raw = getattr(manager, "input_hist_raw", None) or []
    return [str(s) for s in raw if s]


def _text_of(fragment: str) -> str:
    """The HTML table as plain lines (a notebook's text output)."""
    text = re.sub(r"</(?:tr|p|h\d|li)>|<br\s*/?>", "\n", fragment)
    text = re.sub(r"</t[dh]>", "  ", text)
    text = html.unescape(re.sub(r"<[^>]+>", "", text))
    return "\n".join(line.rstrip() for line in text.splitlines() if line.strip())
