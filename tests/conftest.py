"""Shared fixtures of the course's own test suite."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

# Kernels started by the tests (nbclient, nbgrader) must import this checkout's packages.
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
os.environ.setdefault("MPLBACKEND", "Agg")


def lessons() -> list[str]:
    return sorted(p.name for p in (ROOT / "solutions").iterdir() if (p / f"{p.name}.ipynb").exists())


def solution_path(lesson: str) -> Path:
    return ROOT / "solutions" / lesson / f"{lesson}.ipynb"


def lesson_path(lesson: str) -> Path:
    return ROOT / "lessons" / lesson / f"{lesson}.ipynb"


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT
