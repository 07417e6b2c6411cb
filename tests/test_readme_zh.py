"""README.zh.md, the Chinese README: every command it shows is run, in order, in a temporary
copy of the repository, and its sample outputs match (the rules of tests/test_readme.py;
``make lab`` and ``make test`` are shown as text there and run by README.md's test). A
block's commands run in one shell, so ``export`` carries to the next line."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from conftest import ROOT
from test_readme import SHELL_LANGS, match_output
from test_readme import blocks as readme_blocks

from coursekit import catalogue

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
