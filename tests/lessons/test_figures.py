"""The figures the lessons show before anything is run: regenerated from the reference code
by docs/figures/make_figures.py, they match the committed images; every image a lesson
shows exists in solutions/ and in lessons/, and a release bundle carries it."""

from __future__ import annotations

import importlib.util
import json
import re
import sys

import pytest
from matplotlib.testing.compare import compare_images
from support import ROOT, lessons

from coursekit import catalogue

pytestmark = pytest.mark.slow  # over ~30 s on 2 cores: out of the quick loop (-m "not slow")

FIGURE_LINK = re.compile(r"!\[[^\]]*\]\((figures/[\w.\-]+\.png)\)")
TOLERANCE = 2.0  # RMS difference in 0-255 grey levels: antialiasing, not content


def _make_figures():
    spec = importlib.util.spec_from_file_location("make_figures", ROOT / "docs" / "figures" / "make_figures.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["make_figures"] = module               # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def shown(lesson: str) -> set[str]:
    """The figure paths the lesson's markdown shows (in any edition), relative to its folder."""
    found: set[str] = set()
    for path in catalogue.get(lesson).notebooks().values():
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
        found |= set(FIGURE_LINK.findall(text))
    return found


@pytest.mark.parametrize("lesson", [x for x in lessons() if "zh" in catalogue.get(x).editions])
def test_a_chinese_edition_shows_its_own_figures(lesson: str) -> None:
    """Where a figure has a Chinese version (``<name>.zh.png``) the Chinese edition shows it,
    and the English edition never does."""
    entry = catalogue.get(lesson)
    by_edition = {}
    for edition, path in entry.notebooks().items():
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        by_edition[edition] = set(FIGURE_LINK.findall(
            "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")))
    assert not {f for f in by_edition["en"] if f.endswith(".zh.png")}
    chinese = {f.removesuffix(".zh.png") for f in committed(lesson) if f.endswith(".zh.png")}
    english_shown = {f.removesuffix(".png") for f in by_edition["zh"] if not f.endswith(".zh.png")}
    assert not english_shown & chinese, f"{lesson}: the Chinese edition shows the English version " \
        f"of {sorted(english_shown & chinese)}: link <name>.zh.png"


def committed(lesson: str) -> set[str]:
    folder = ROOT / "solutions" / lesson / "figures"
    return {f"figures/{p.name}" for p in folder.glob("*.png")} if folder.is_dir() else set()


def shown_in(path) -> set[str]:
    """The figure paths one notebook's markdown shows."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return set(FIGURE_LINK.findall("\n".join("".join(c["source"]) for c in cells
                                             if c["cell_type"] == "markdown")))


@pytest.mark.parametrize("lesson", lessons())
def test_every_lesson_shows_two_figures_before_it_is_run(lesson: str) -> None:
    """Every edition of every lesson shows at least two pictures to a reader who runs
    nothing (issue 50: lesson 02 had merged its two into one)."""
    for path in catalogue.get(lesson).notebooks().values():
        assert len(shown_in(path)) >= 2, f"{path.name} shows {sorted(shown_in(path))} before it is run"


@pytest.mark.parametrize("lesson", lessons())
def test_every_figure_a_lesson_shows_is_committed_and_used(lesson: str) -> None:
    assert shown(lesson), f"{lesson} shows no figure before it is run"
    assert shown(lesson) == committed(lesson), (
        f"{lesson}: shown but missing {sorted(shown(lesson) - committed(lesson))}, "
        f"committed but never shown {sorted(committed(lesson) - shown(lesson))}")


@pytest.mark.parametrize("lesson", lessons())
def test_the_student_notebook_carries_the_same_figures(lesson: str) -> None:
    for figure in committed(lesson):
        student = ROOT / "lessons" / lesson / figure
        assert student.is_file(), f"lessons/{lesson}/{figure} is missing: run nbgrader generate_assignment"
        assert student.read_bytes() == (ROOT / "solutions" / lesson / figure).read_bytes(), (
            f"lessons/{lesson}/{figure} is stale: run nbgrader generate_assignment {lesson} --force")


def test_regenerated_figures_match_the_committed_ones(tmp_path) -> None:
    make_figures = _make_figures()
    written = make_figures.make(out=tmp_path)
    made = {(p.parent.parent.name, f"figures/{p.name}") for p in written}
    expected = {(lesson, figure) for lesson in lessons() for figure in committed(lesson)}
    assert made == expected, f"made but not committed {sorted(made - expected)}, committed but not made {sorted(expected - made)}"
    for lesson, figure in sorted(made):
        difference = compare_images(str(ROOT / "solutions" / lesson / figure), str(tmp_path / lesson / figure),
                                    tol=TOLERANCE)
        assert difference is None, (f"solutions/{lesson}/{figure} differs from a fresh "
                                    f"`python docs/figures/make_figures.py`: {difference}")


def test_figures_have_no_timestamps(tmp_path) -> None:
    make_figures = _make_figures()
    first = {p.name: p.read_bytes() for p in make_figures.make(["03"], out=tmp_path / "a")}
    second = {p.name: p.read_bytes() for p in make_figures.make(["03"], out=tmp_path / "b")}
    assert first == second
    assert all(b"Software" not in data and b"Creation" not in data for data in first.values())


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_release_bundle_carries_the_figures(tmp_path, lang: str) -> None:
    """Every figure its notebooks show (a Chinese bundle: the Chinese versions)."""
    from grader.authoring import release

    release.build(tmp_path / "course", "01-03", lang=lang)
    for lesson in lessons()[:3]:
        entry = catalogue.get(lesson)
        edition = lang if lang in entry.editions else "en"
        cells = json.loads(entry.solution(edition).read_text(encoding="utf-8"))["cells"]
        text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
        for figure in set(FIGURE_LINK.findall(text)):
            assert (tmp_path / "course" / "lessons" / lesson / figure).is_file(), f"the bundle lacks {lesson}/{figure}"
