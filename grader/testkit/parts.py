"""The course's own versions of a lesson's exercises, for judging the exercises built on them.

A lesson's later exercise often calls an earlier one: ``attention`` calls ``softmax``,
``PositionalEncoding`` builds its table with ``sinusoidal_positional_encoding``. Judged on
the student's namespace as it is, one mistake would cost points twice. A hidden test file
declares what each exercise builds on (``BUILDS_ON = {"attention": ("dot_scores",
"softmax")}``); while that exercise is graded, those names are the course's versions
(``Submission.course_versions``), so the mistake is charged once, to the exercise that made it.

The course's versions are the lesson's reference module (``coursekit/reference/lessonNN.py``,
generated from the cells its notebook tags ``export``), read here, on the grader's side: the
sandbox withholds that module from the submission, and only the definitions asked for (and
those they use) cross over, at the time they are needed.
"""

from __future__ import annotations

import ast
import contextlib
import functools
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from coursekit import catalogue
from grader import PACKAGE_DIR

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
HIDDEN = PACKAGE_DIR / "hidden"


def packaged_file(number: str) -> Path:
    """Where a Gradescope zip keeps the course's versions its graders substitute (the
    zip has no reference module of its own lesson: see :func:`packaged_source`)."""
    return HIDDEN / f"parts_{number}.py"


def builds_on(lesson: str) -> tuple[str, ...]:
    """Every name the hidden tests of ``lesson`` substitute (the union of its BUILDS_ON)."""
    import importlib

    from grader.testkit.lessons import hidden_test_file

    tests = importlib.import_module(f"grader.hidden.{hidden_test_file(lesson).stem}")
    return tuple(sorted({n for names in getattr(tests, "BUILDS_ON", {}).values() for n in names}))


def packaged_source(lesson: str) -> str | None:
    """What a Gradescope zip carries as ``grader/hidden/parts_NN.py``: the definitions its
    graders substitute, and nothing else of the lesson's answers."""
    names = builds_on(lesson)
    return course_source(lesson, names) if names else None


@functools.cache
def course_source(lesson: str, names: tuple[str, ...]) -> str | None:
    """Python source defining ``names`` as the course's reference module of ``lesson`` does:
    those definitions, and the imports, assignments and definitions they use (and those
    use), in the module's order; a top-level statement that binds no name (a call made for
    its effect) is kept. ``None`` where the module is not installed (a student's copy of the
    course without the grader's files). What is left out (a lesson's presets, its training
    loop) is never run in the worker, where each test that builds on ``names`` runs this."""
    info = catalogue.get(lesson)
    path = info.reference_file
    if not path.is_file():  # a Gradescope zip carries only what its graders need
        path = packaged_file(info.number)
        if not path.is_file():
            return None
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bound = {id(node): _bound(node) for node in tree.body}
    missing = set(names) - {name for node in tree.body if isinstance(node, _DEFS)
                            for name in bound[id(node)]}
    if missing:
        raise KeyError(f"{path.name} defines no {', '.join(sorted(missing))}")
    kept = [node for node in tree.body if not bound[id(node)]]  # docstring, calls
    wanted = set(names).union(*(_used(node) for node in kept))
    while True:
        more = [node for node in tree.body
                if node not in kept and bound[id(node)] & wanted]
        if not more:
            break
        kept += more
        wanted |= set().union(*(_used(node) for node in more))
    body = [node for node in tree.body if node in kept]
    return ast.unparse(ast.Module(body=body, type_ignores=[]))


def _bound(node: ast.stmt) -> set[str]:
    """The names a top-level statement binds."""
    if isinstance(node, _DEFS):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _used(node: ast.stmt) -> set[str]:
    """The names a statement reads (its body's, decorators', defaults' and annotations')."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def prepare(tests: ModuleType) -> None:
    """Build the sources ``judged_alone`` sends for ``tests`` (a hidden test module) now:
    the check helper's trusted zygote does, so a check forked from it does not parse the
    reference module again (6-39 ms a lesson, lessons 08-11, in a warm process)."""
    for names in getattr(tests, "BUILDS_ON", {}).values():
        course_source(_lesson_of(tests), tuple(names))


def _lesson_of(tests: ModuleType) -> str:
    return tests.__name__.rpartition(".")[2].split("_")[1]  # test_07_positional_... -> "07"


@contextlib.contextmanager
def judged_alone(sub: Any, tests: ModuleType, exercise: str) -> Iterator[None]:
    """While a test of ``exercise`` runs: the exercises it builds on (``tests.BUILDS_ON``, a
    hidden test module's) are the course's versions in ``sub``'s namespace, and the code the
    notebook gives that computes the exercise (``tests.GIVEN_ANSWERS``) is refused."""
    names = tuple(getattr(tests, "BUILDS_ON", {}).get(exercise, ()))
    source = course_source(_lesson_of(tests), names) if names else None
    given = tuple(getattr(tests, "GIVEN_ANSWERS", {}).get(exercise, ()))
    with contextlib.ExitStack() as stack:
        if source is not None:
            stack.enter_context(sub.course_versions(source, names))
        if given:
            stack.enter_context(sub.refusing(given))
        yield
