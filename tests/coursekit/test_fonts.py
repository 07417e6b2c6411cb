"""优秀 in the plots: the course's install brings a CJK font that coursekit registers with
matplotlib, and every Chinese character the lessons plot has a glyph in it."""

from __future__ import annotations

import json
import re
import tomllib
import warnings

import matplotlib
import pytest
from support import ROOT, lessons, solution_path

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import font_manager  # noqa: E402
from matplotlib.ft2font import FT2Font  # noqa: E402

from coursekit import fonts  # noqa: E402
from coursekit.data import load_numerals  # noqa: E402

CJK = re.compile(r"[\u3000-\u303f\u3400-\u9fff\uff00-\uffef]")
PIN = "pylopdf-fonts-zh-cn==0.1.1"


def plotted_characters() -> str:
    """Every CJK character in the lessons' code (the strings they plot: 优秀, the two
    sentences, pinyin tables) and in the numerals dataset the lesson 09 plots label."""
    chars = set("优秀")
    for lesson in lessons():
        for cell in json.loads(solution_path(lesson).read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "code":
                chars |= set(CJK.findall("".join(cell["source"])))
    for split in ("train", "valid", "test"):
        chars |= {c for _, reading in load_numerals(split) for c in reading}
    return "".join(sorted(chars))


def test_the_course_pins_the_font_package_for_pip_and_conda() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert PIN in project["dependencies"]
    assert f"- {PIN}" in (ROOT / "environment.yml").read_text()


def test_the_bundled_font_is_installed_and_is_simplified_chinese() -> None:
    path = fonts.font_path()
    assert path is not None, f"the font package is missing: pip install {PIN}"
    assert font_manager.FontProperties(fname=str(path)).get_name() == fonts.FAMILY


def test_every_plotted_character_has_a_glyph_in_the_font() -> None:
    charmap = FT2Font(str(fonts.font_path())).get_charmap()
    text = plotted_characters()
    assert len(text) > 30, text
    missing = [c for c in text if ord(c) not in charmap]
    assert not missing, f"no glyph for {''.join(missing)}"


@pytest.mark.parametrize("fmt", ["png", "svg", "pdf"])
def test_matplotlib_draws_youxiu_without_a_missing_glyph(fmt, tmp_path) -> None:
    with matplotlib.rc_context():
        assert fonts.use_cjk_font() == fonts.FAMILY
        text = plotted_characters()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # "Glyph ... missing from font(s)" becomes an error
            fig, ax = plt.subplots(figsize=(6, 2))
            ax.set_title("优秀 attention")
            ax.set_xticks(range(2), ["优", "秀"])
            for row in range(0, len(text), 40):
                ax.text(0, row / 40, text[row:row + 40])
            fig.savefig(tmp_path / f"youxiu.{fmt}")
            plt.close(fig)


def test_registering_the_font_changes_no_setting() -> None:
    """What the grader's warm processes do before forking (the font file read once)."""
    with matplotlib.rc_context():
        before = dict(matplotlib.rcParams)
        assert fonts.register_cjk_font() is True
        assert fonts.register_cjk_font() is True
        assert dict(matplotlib.rcParams) == before
    names = [f.name for f in font_manager.fontManager.ttflist]
    assert names.count(fonts.FAMILY) == 1


def test_use_cjk_font_is_idempotent_and_keeps_latin_in_the_default_face() -> None:
    with matplotlib.rc_context():
        fonts.use_cjk_font()
        fonts.use_cjk_font()
        family = matplotlib.rcParams["font.family"]
        assert family.count(fonts.FAMILY) == 1 and family[-1] == fonts.FAMILY
        latin = font_manager.findfont(font_manager.FontProperties(family=[family[0]]))
        assert "NotoSansSC" not in latin
