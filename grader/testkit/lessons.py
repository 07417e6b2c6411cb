"""Which lessons the grader knows, and where each one's hidden graders are.

The lowest module of the check: ``engine``, ``parts``, Gradescope's packager and the CLI ask it,
and it asks only the catalogue.
"""

from __future__ import annotations

from pathlib import Path

from coursekit import catalogue
from coursekit.errors import UnknownLesson
from grader import PACKAGE_DIR
from grader.i18n import msg

HIDDEN_DIR = PACKAGE_DIR / "hidden"


def known_lessons() -> list[str]:
    """The catalogue's lesson ids (each has its hidden graders: tests/lessons/test_lessons.py checks)."""
    return catalogue.COURSE.ids()


def hidden_test_file(lesson: str) -> Path:
    path = HIDDEN_DIR / f"test_{lesson}.py"
    if not path.exists():
        raise UnknownLesson(msg("no graders for lesson {lesson}; known lessons: {lessons}", lesson=repr(lesson), lessons=', '.join(known_lessons())))
    return path
