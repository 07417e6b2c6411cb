"""``grader release --lang zh|en|both``: a Chinese bundle holds the Chinese notebooks, their
Chinese figures and a Chinese student README; a bundle with both editions holds both and
both READMEs; in a fresh environment the Chinese lesson 01 runs, its visible tests speak
Chinese, and nbgrader's Validate passes once it is solved. The leak scan (grader.authoring.release's
own, and test_release.py's independent one) covers the Chinese notebooks too."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from test_release import (
    FIRST,
    _answered,
    _clean_env,
    _errors,
    _run_lesson,
    _test_cells,
    _venv,
    bundle_text,
    exported,
    release,
    secrets,
)

from coursekit import catalogue

pytestmark = pytest.mark.e2e

ZH = [lesson.id for lesson in catalogue.COURSE if "zh" in lesson.editions]
CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(scope="module", params=["zh", "both"])
def bundle(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(f"bundle-{request.param}") / "course"
    proc = release(out, "--lessons", "01-04", "--lang", request.param)
    assert proc.returncode == 0, proc.stderr
    return request.param, out, proc.stdout


def _files(out, lesson: str) -> set[str]:
    return {p.relative_to(out / "lessons" / lesson).as_posix()
            for p in (out / "lessons" / lesson).rglob("*") if p.is_file()}


def as_bundled(notebook: Path, tmp_path: Path) -> bytes:
    """The student notebook as a bundle ships it: its advice to run the repository's
    ``grader check`` turned into Validate (``grader.authoring.release.bundle_advice``)."""
    from grader.authoring.release import bundle_advice

    copy = tmp_path / notebook.name
    copy.write_bytes(notebook.read_bytes())
    bundle_advice(copy)
    return copy.read_bytes()


def test_the_bundle_holds_the_editions_asked_for(bundle, tmp_path) -> None:
    lang, out, said = bundle
    for lesson in (catalogue.get(n) for n in ("01", "02", "03", "04")):
        files = _files(out, lesson.id)
        notebooks = {f for f in files if f.endswith(".ipynb")}
        figures = {f for f in files if f.endswith(".png")}
        if "zh" not in lesson.editions:
            assert notebooks == {f"{lesson.id}.ipynb"}
            assert f"in English only (no Chinese edition yet): {lesson.id}" in said
            continue
        english, chinese = f"{lesson.id}.ipynb", f"{lesson.id}.zh.ipynb"
        assert notebooks == ({chinese} if lang == "zh" else {english, chinese})
        assert (out / "lessons" / lesson.id / chinese).read_bytes() == as_bundled(lesson.student("zh"), tmp_path)
        zh_figures = {f for f in figures if f.endswith(".zh.png")}
        assert zh_figures, lesson.id
        if lang == "zh":  # the English version of a figure the Chinese edition has is left out
            assert figures == zh_figures
    assert f"edition:  {lang}" in said


def test_the_student_readme_speaks_the_bundles_language(bundle) -> None:
    lang, out, _ = bundle
    chinese = (out / ("README.md" if lang == "zh" else "README.zh.md")).read_text(encoding="utf-8")
    assert chinese.startswith("# 注意力：从“优秀”到可训练的 Transformer")
    assert "## 安装（只需一次）" in chinese and "Set up (once)" not in chinese
    # the CPU install path per system, as in the English README (issue 18 item 6)
    assert "python -m pip install -r requirements.txt" in chinese and "Python 3.11、3.12、3.13 或 3.14" in chinese
    assert "Intel 芯片的 Mac" in chinese and "torch==2.13.0" in chinese and "{{" not in chinese
    for lesson in ZH:
        if lesson[:2] <= "04":
            entry = catalogue.get(lesson)
            assert f"`lessons/{lesson}/{lesson}.zh.ipynb`：第 {entry.number} 课 · {entry.title_zh}" in chinese
    assert f"nbgrader validate lessons/{FIRST}/{FIRST}.zh.ipynb" in chinese
    prose = [line for line in chinese.splitlines() if line and not line.startswith(("```", "python", "jupyter"))]
    assert sum(bool(CJK.search(line)) for line in prose) > 0.8 * len(prose)
    if lang == "both":
        english = (out / "README.md").read_text(encoding="utf-8")
        assert "[README.zh.md](README.zh.md)" in english and "## Set up (once)" in english
        assert "[README.md](README.md)" in chinese
    else:
        assert not (out / "README.zh.md").exists()


def test_no_solution_or_hidden_test_text_in_either_edition(bundle) -> None:
    _, out, _ = bundle
    needles = secrets()
    assert any(".zh" in where or "solution" in where for where, _ in needles)
    allowed = {text for lesson in catalogue.COURSE for text in exported(lesson.id)}
    for path in (p for p in out.rglob("*") if p.is_file() and p.suffix in (".ipynb", ".md", ".py")):
        text = bundle_text(path)
        for where, needle in needles:
            assert needle not in text or needle in allowed and "reference" in path.parts, (path, where)


def test_refuses_an_unknown_language(tmp_path) -> None:
    proc = release(tmp_path / "x", "--lessons", "01", "--lang", "fr")
    assert proc.returncode != 0 and "--lang" in proc.stderr


# --- the Chinese lesson 01 in a fresh environment made from a Chinese bundle ---------------

@pytest.fixture(scope="module")
def zh_env(tmp_path_factory):
    where = tmp_path_factory.mktemp("venv-bundle-zh")
    out = where / "course"
    assert release(out, "--lessons", "01", "--lang", "zh").returncode == 0
    return _venv(out, where), out


def test_the_chinese_lesson_01_runs_and_its_visible_tests_speak_chinese(zh_env, tmp_path) -> None:
    python, out = zh_env
    notebook = out / "lessons" / FIRST / f"{FIRST}.zh.ipynb"
    nb = _run_lesson(python, notebook)
    for cell in _test_cells(nb):
        assert _errors(cell) == ["NotImplementedError"], cell["outputs"]
    solved = _answered(FIRST, notebook)
    answered = tmp_path / f"{FIRST}.zh.ipynb"
    answered.write_text(json.dumps(solved), encoding="utf-8")
    nb = _run_lesson(python, answered)
    for cell in nb["cells"]:
        assert not _errors(cell), (cell["source"][:80], cell["outputs"])
        stderr = "".join(o.get("text", "") for o in cell.get("outputs", []) if o.get("name") == "stderr")
        assert "Glyph" not in stderr and "missing from" not in stderr, stderr  # Chinese labels render
    for cell in _test_cells(nb):
        assert "可见测试通过 ✓" in "".join(o.get("text", "") for o in cell["outputs"]), cell["outputs"]
    proc = subprocess.run([str(python), "-m", "nbgrader", "validate", str(answered)],
                          cwd=out, capture_output=True, text=True, timeout=600, env=_clean_env())
    assert "Success! Your notebook passes all the tests." in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.parametrize("lesson", [lesson.id for lesson in catalogue.COURSE])
def test_hub_students_are_told_to_press_validate(lesson: str, tmp_path) -> None:
    """lessons/ is what nbgrader releases on a hub, where there is no `grader check`: each
    lesson says, after the command, to press Validate there; a bundle says it instead."""
    from grader.authoring.release import HUB_ADVICE

    for edition, path in catalogue.get(lesson).notebooks("student").items():
        text = path.read_text(encoding="utf-8")
        prose = "".join(catalogue.cell_source(c) for c in json.loads(text)["cells"]
                        if c["cell_type"] == "markdown")
        assert "python -m grader check" in prose and HUB_ADVICE[edition] in prose, path
        bundled = as_bundled(path, tmp_path).decode("utf-8")
        prose = "".join(catalogue.cell_source(c) for c in json.loads(bundled)["cells"]
                        if c["cell_type"] == "markdown")
        assert "python -m grader check" not in prose and HUB_ADVICE[edition] not in prose, path
        assert "nbgrader validate" in prose
