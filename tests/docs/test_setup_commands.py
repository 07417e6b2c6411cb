"""The set-up commands a student or instructor types before any virtual environment exists
use ``python3`` (issue 49, item 9): Debian and Ubuntu have no ``python`` command
(``python: command not found``) until a venv provides one. Inside an activated venv,
``python`` is fine. Checked in every README and guide, and in the templates of the release
bundle's READMEs in both languages."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support import ROOT

from grader.common.templating import TEMPLATES

#: A command that runs before a venv is there: making the venv, or asking the version.
BEFORE_VENV = re.compile(r"(?<![\w/.-])python (?:-m venv|--version)\b")
#: An install the guide runs before any venv ("first", "先运行"): outside a venv
BARE_INSTALL = re.compile(r"(?:first|先运行)[^`]{0,40}`python -m pip")

DOCS = sorted([ROOT / "README.md", ROOT / "README.zh.md", *(ROOT / "docs").glob("*.md"),
               *(ROOT / "datasets").glob("*/README*.md")])
BUNDLE_READMES = ["release-README.md.j2", "release-README.zh.md.j2"]


@pytest.mark.parametrize("path", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_guides_make_a_venv_with_python3(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert not BEFORE_VENV.findall(text) and not BARE_INSTALL.findall(text)


@pytest.mark.parametrize("name", BUNDLE_READMES)
def test_the_bundles_readme_makes_its_venv_with_python3(name: str) -> None:
    source = (TEMPLATES / name).read_text(encoding="utf-8")
    assert not BEFORE_VENV.findall(source), name
    assert "python3 -m venv .venv" in source and "py -m venv .venv" in source
