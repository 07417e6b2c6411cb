"""README.zh.md, the Chinese README: every command it shows is run, in order, in a temporary
copy of the repository, and its sample outputs match (the rules of tests/docs/test_readme.py;
``make lab`` and ``make test`` are shown as text there and run by README.md's test). A
block's commands run in one shell, so ``export`` carries to the next line."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tomllib

import pytest
from support import ROOT
from test_readme import SHELL_LANGS, match_output
from test_readme import blocks as readme_blocks

from coursekit import catalogue

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

README_ZH = ROOT / "README.zh.md"


def blocks() -> list[tuple[str, str, str]]:
    return readme_blocks(README_ZH)


def test_every_shell_block_is_marked_and_the_english_readme_links_here() -> None:
    unmarked = [body for kind, lang, body in blocks() if lang in SHELL_LANGS and kind != "run"]
    assert not unmarked
    assert "[README.zh.md](README.zh.md)" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_lesson_table_is_the_catalogue() -> None:
    text = README_ZH.read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| 第 ")]
    assert [r.split("|")[1].strip() for r in rows] == \
        [f"第 {x.number} 课 · {x.title_zh}" for x in catalogue.COURSE]


NOTES = ("《自注意力机制原理，selfattention机制》", "《李沐论文讲解笔记之 Transformer》")


def test_both_readmes_cite_the_source_notes_by_title() -> None:
    """The course's origin: the two Chinese notes it grew from, named by their titles."""
    for readme in (ROOT / "README.md", README_ZH):
        text = readme.read_text(encoding="utf-8")
        assert all(title in text for title in NOTES), readme.name
    assert "第一份笔记" + NOTES[0] in README_ZH.read_text(encoding="utf-8")
    assert "第二份笔记" + NOTES[1] in README_ZH.read_text(encoding="utf-8")


def test_the_chinese_readme_states_the_supported_pythons_and_the_torch_pin() -> None:
    """What README.md says of installing holds in Chinese too, from pyproject.toml's pins:
    the Pythons supported, the CPU-only torch at the pinned version, a PyPI mirror."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    low, high = re.fullmatch(r">=3\.(\d+),<3\.(\d+)", project["requires-python"]).groups()
    text = README_ZH.read_text(encoding="utf-8")
    assert f"Python 3.{low} 到 3.{int(high) - 1}" in text
    torch = next(d for d in project["dependencies"] if d.startswith("torch=="))
    assert f"python3 -m pip install {torch} --index-url https://download.pytorch.org/whl/cpu" in text
    assert "PIP_INDEX_URL" in text and "pip config set global.index-url" in text


def _grader_parser() -> argparse.ArgumentParser:
    from grader.cli import build_parser

    return build_parser()


@pytest.mark.parametrize("readme", ["README.md", "README.zh.md"])
def test_every_grader_command_it_names_exists(readme: str) -> None:
    """Every ``python -m grader X --option`` a README names, in prose or in a block, is a
    subcommand with that option (the blocks are also run; prose is not)."""
    subparsers = next(a for a in _grader_parser()._actions if isinstance(a, argparse._SubParsersAction))
    text = (ROOT / readme).read_text(encoding="utf-8")
    wrong = []
    for m in re.finditer(r"python -m grader ([a-z][\w-]*)([^`\n]*)", text):
        command, rest = m.group(1), m.group(2)
        if command not in subparsers.choices:
            wrong.append(m.group(0))
            continue
        known = {o for a in subparsers.choices[command]._actions for o in a.option_strings}
        wrong += [f"{m.group(0)} ({flag})" for flag in re.findall(r"(?<![\w-])--[a-z][\w-]*", rest)
                  if flag not in known]
    assert not wrong, wrong


def test_readme_zh_commands_run(tmp_path) -> None:
    copy = tmp_path / "repo"
    tracked = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             cwd=ROOT, capture_output=True, check=True).stdout.decode().split("\0")
    for rel in filter(None, tracked):
        if (ROOT / rel).is_file():
            (copy / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, copy / rel)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTEST_ADDOPTS", "PYTEST_CURRENT_TEST", "COURSE_EDITION", "COURSE_LANG")}
    env.update(PYTHONPATH=str(copy), MPLBACKEND="Agg",
               PATH=f"{os.path.dirname(sys.executable)}{os.pathsep}{env['PATH']}")
    last = None
    ran = []
    for kind, _lang, body in blocks():
        if kind == "output" and last is not None:
            match_output(body, last)
        elif kind == "run":
            proc = subprocess.run(["bash", "-ec", body], cwd=copy, env=env, capture_output=True,
                                  text=True, timeout=900)
            assert proc.returncode == 0, f"{body}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
            last = proc.stdout
            ran.append(body.strip())
        else:
            last = None
    assert len(ran) >= 5, ran
    assert sorted(p.name for p in (copy / "handout-zh" / "lessons" / "01_attention_by_hand").glob("*.ipynb")) \
        == ["01_attention_by_hand.zh.ipynb"]
