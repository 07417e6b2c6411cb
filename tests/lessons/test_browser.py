"""Lesson 01 in a real JupyterLab, in a real browser, doing what a student does.

A JupyterLab server (nbgrader's Validate extension enabled in the server's own config;
token auth, loopback only, a free port) serves a temporary copy of the course; headless
Chromium (Debian's ``chromium`` via Python Playwright, no ``playwright install``) opens
``lessons/01_attention_by_hand``, an answer is typed into each exercise cell, all cells
are run: the visible tests print their success line and nothing is written to stderr;
nbgrader's Validate button says the notebook passes. With the exercises left blank,
Validate reports the failing cells.

Needs ``/usr/bin/chromium`` (apt) and ``playwright`` (pip): skipped without them, unless
``COURSE_REQUIRE_BROWSER=1`` (CI sets it). On failure a screenshot and the page's text are
kept in ``$COURSE_BROWSER_ARTIFACTS`` (default: the test's tmp dir), and the failure
message says where. ``COURSE_BROWSER_SCREENSHOT=path.png`` saves the passing lesson's
screenshots, ``path.png`` and ``path-validate.png`` (the README's pictures).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest
from browser_support import TIMEOUT_MS, _missing, browser_page, expect
from support import ROOT

LESSON = "01_attention_by_hand"
pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.slow,
              pytest.mark.skipif(bool(_missing), reason=_missing or "")]


class Phases:
    """Seconds each phase took (printed: ``pytest -s`` shows them, a failure report too)."""

    def __init__(self) -> None:
        self.t = time.monotonic()

    def __call__(self, name: str) -> None:
        now = time.monotonic()
        print(f"  {name}: {now - self.t:.1f} s")
        self.t = now


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _answers() -> dict[str, str]:
    """The exercise cells as a student would type them: the reference answers, no markers."""
    nb = json.loads((ROOT / "solutions" / LESSON / f"{LESSON}.ipynb").read_text(encoding="utf-8"))
    out = {}
    for cell in nb["cells"]:
        meta = cell["metadata"].get("nbgrader", {})
        if meta.get("solution"):
            src = "".join(cell["source"])
            out[meta["grade_id"]] = re.sub(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*(\n|$)", "", src, flags=re.M).rstrip() + "\n"
    return out


@contextmanager
def jupyterlab(tmp_path: Path, with_grader: bool = False):
    """A JupyterLab server on a fresh copy of the course (a student's: no grader, unless
    ``with_grader``, a self-learner's clone); yields (base_url, token, course)."""
    course = tmp_path / "course"
    for name in ("lessons", "coursekit", "datasets", *(["grader"] if with_grader else [])):
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, course / name,
                            ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    shutil.copy(ROOT / "nbgrader_config.py", course)
    home = tmp_path / "jupyter"
    config = home / "config"
    config.mkdir(parents=True)
    # nbgrader's Validate needs its server extension: enable it here, not globally.
    (config / "jupyter_server_config.json").write_text(json.dumps({"ServerApp": {
        "jpserver_extensions": {"nbgrader.server_extensions.validate_assignment": True}}}))
    settings = home / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    port, token = _free_port(), secrets.token_hex(16)
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(config),
           "JUPYTERLAB_SETTINGS_DIR": str(home / "settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(home / "workspaces"),
           "JUPYTER_RUNTIME_DIR": str(home / "runtime"), "MPLBACKEND": "Agg",
           "PYTHONPATH": os.pathsep.join([str(course), os.environ.get("PYTHONPATH", "")])}
    log = (tmp_path / "jupyterlab.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ServerApp.ip=127.0.0.1",
         f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={course}",
         "--LabApp.expose_app_in_browser=True",
         *(["--ServerApp.allow_root=True"] if os.geteuid() == 0 else [])],
        cwd=course, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("JupyterLab did not start:\n"
                                   + (tmp_path / "jupyterlab.log").read_text()[-3000:])
            time.sleep(0.3)
        yield base, token, course
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def open_lesson(page, base: str, token: str, name: str = f"{LESSON}.ipynb") -> None:
    # A unique workspace per test: JupyterLab would otherwise restore another test's tabs.
    page.goto(f"{base}/lab/workspaces/t{uuid.uuid4().hex}/tree/lessons/{LESSON}/{name}"
              f"?token={token}&reset")
    page.locator(".jp-Notebook .jp-Cell").first.wait_for()
    # The kernel indicator says idle while the kernel is still starting: wait for "Idle"
    # in the status bar, which appears once the kernel has really connected.
    expect(page.locator(".jp-StatusBar-Widget", has_text="Idle").first).to_be_visible(timeout=TIMEOUT_MS)


def cell(page, text: str):
    return page.locator(".jp-Notebook .jp-CodeCell", has=page.locator(".jp-InputArea-editor",
                                                                     has_text=text))


def type_answer(page, grade_id: str, answer: str) -> None:
    editor = cell(page, f"def {grade_id}(").locator(".cm-content")
    editor.click()
    page.keyboard.press("Control+a")
    # insert_text types the text as one input event: CodeMirror does not auto-indent it.
    page.keyboard.insert_text(answer)
    expect(editor).to_contain_text(answer.strip().splitlines()[-1].strip())
    expect(editor).not_to_contain_text("NotImplementedError")


def run_all(page) -> None:
    page.locator(".lm-MenuBar-item", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-item:visible", has_text=re.compile(r"^Run All Cells")).first.click()
    n_code = page.locator(".jp-Notebook .jp-CodeCell").count()
    # Finished when every code cell has its prompt number (none pending, "[*]").
    expect(page.locator(".jp-CodeCell .jp-InputPrompt",
                        has_text=re.compile(r"\[\d+\]"))).to_have_count(n_code, timeout=TIMEOUT_MS)
    expect(page.locator(".jp-StatusBar-Widget", has_text="Idle").first).to_be_visible()


def validate(page):
    page.locator(".validate-button").first.click()
    dialog = page.locator(".jp-Dialog")
    expect(dialog.locator(".validation-success, .validation-failed, .validation-changed, "
                          ".validation-type-changed")).to_have_count(1, timeout=TIMEOUT_MS)
    return dialog


def test_lesson_01_solved_in_jupyterlab_passes_visible_tests_and_validate(tmp_path, request) -> None:
    answers = _answers()
    assert set(answers) == {"dot_scores", "softmax", "attention"}
    phase = Phases()
    with jupyterlab(tmp_path) as (base, token, course), browser_page(tmp_path, request) as page:
        phase("server and browser started")
        open_lesson(page, base, token)
        phase("lesson open, kernel idle")
        for grade_id, answer in answers.items():
            type_answer(page, grade_id, answer)
        phase("answers typed")
        run_all(page)
        phase("all cells run")
        test_cells = cell(page, "visible tests passed")
        expect(test_cells).to_have_count(3)
        for i, name in enumerate(answers):
            outputs = test_cells.nth(i).locator(".jp-OutputArea")
            expect(outputs).to_contain_text(f"{name}: visible tests passed ✓")
            expect(outputs.locator('[data-mime-type="application/vnd.jupyter.stderr"]')).to_have_count(0)
        # No cell failed. (Lesson 01's demo plots may warn on stderr about a missing CJK
        # font on machines without one: a warning, not an error, so only tracebacks count.)
        expect(page.locator(".jp-Notebook .jp-OutputArea-output",
                            has_text=re.compile(r"Traceback|Error:"))).to_have_count(0)
        dialog = validate(page)
        expect(dialog).to_contain_text("Success! Your notebook passes all the tests.")
        phase("validated")
        shot = os.environ.get("COURSE_BROWSER_SCREENSHOT")
        if shot:
            page.screenshot(path=shot.removesuffix(".png") + "-validate.png")
            page.keyboard.press("Escape")
            expect(dialog).to_have_count(0)
            cell(page, "def attention(").locator(".cm-content").click()
            page.keyboard.press("Escape")  # command mode, so the notebook can scroll
            cell(page, "scale the scores").first.scroll_into_view_if_needed()
            page.screenshot(path=shot)
        # Validate saved what was typed: the file on disk holds the answers.
        saved = json.loads((course / "lessons" / LESSON / f"{LESSON}.ipynb").read_text())
        sources = ["".join(c["source"]) for c in saved["cells"] if c["cell_type"] == "code"]
        assert not any("raise NotImplementedError()" in s for s in sources)


def test_lesson_01_left_blank_fails_validate(tmp_path, request) -> None:
    phase = Phases()
    with jupyterlab(tmp_path) as (base, token, _), browser_page(tmp_path, request) as page:
        phase("server and browser started")
        open_lesson(page, base, token)
        phase("lesson open, kernel idle")
        dialog = validate(page)
        phase("validated")
        expect(dialog.locator(".validation-failed")).to_have_count(1)
        expect(dialog).to_contain_text("The following cell failed:")
        expect(dialog).to_contain_text("NotImplementedError")
        expect(dialog).not_to_contain_text("passes all the tests")


def test_check_cell_in_jupyterlab_grades_the_notebook_as_saved(tmp_path, request) -> None:
    """A self-learner's clone: the last cell's check grades the saved file, says when answers
    typed in the browser are not saved yet, and shows the verdict as a table."""
    answers = _answers()
    phase = Phases()
    with jupyterlab(tmp_path, with_grader=True) as (base, token, _), \
            browser_page(tmp_path, request) as page:
        phase("server and browser started")
        open_lesson(page, base, token)
        phase("lesson open, kernel idle")
        for grade_id, answer in answers.items():
            type_answer(page, grade_id, answer)
        run_all(page)  # the check cell runs last, before anything was saved
        phase("all cells run")
        verdict = cell(page, "check_my_work(").locator(".jp-OutputArea")
        expect(verdict.locator("table.verdict")).to_have_count(1, timeout=TIMEOUT_MS)
        expect(verdict).to_contain_text("not saved (dot_scores, softmax, attention)")
        expect(verdict).to_contain_text("0 / 10")
        expect(verdict).to_contain_text("hint: `softmax` is not implemented yet")
        page.keyboard.press("Control+s")
        expect(page.locator(".jp-mod-dirty")).to_have_count(0, timeout=TIMEOUT_MS)
        cell(page, "check_my_work(").locator(".jp-InputArea-editor").click()
        page.keyboard.press("Shift+Enter")
        expect(verdict).to_contain_text("10 / 10", timeout=TIMEOUT_MS)
        expect(verdict).not_to_contain_text("not saved")
        expect(verdict.locator("td", has_text="✘")).to_have_count(0)
        phase("checked after saving")


def test_the_chinese_lesson_01_solved_in_jupyterlab_passes_its_chinese_tests_and_validate(
        tmp_path, request) -> None:
    """The Chinese edition opens in JupyterLab with its Chinese title, its visible tests speak
    Chinese, its plots draw Chinese labels without a missing-glyph warning, and Validate passes."""
    name = f"{LESSON}.zh.ipynb"
    answers = _answers()
    with jupyterlab(tmp_path) as (base, token, course), browser_page(tmp_path, request) as page:
        open_lesson(page, base, token, name)
        expect(page.locator(".jp-Notebook .jp-MarkdownCell h1").first).to_contain_text(
            "第 01 课 · 手算注意力：优与秀")
        for grade_id, answer in answers.items():
            type_answer(page, grade_id, answer)
        run_all(page)
        test_cells = cell(page, "可见测试通过")
        expect(test_cells).to_have_count(3)
        for i, exercise in enumerate(answers):
            outputs = test_cells.nth(i).locator(".jp-OutputArea")
            expect(outputs).to_contain_text(f"{exercise}：可见测试通过 ✓")
        expect(page.locator('.jp-Notebook [data-mime-type="application/vnd.jupyter.stderr"]')).to_have_count(0)
        expect(page.locator(".jp-Notebook .jp-OutputArea-output",
                            has_text=re.compile(r"Traceback|Error:"))).to_have_count(0)
        dialog = validate(page)
        expect(dialog).to_contain_text("Success! Your notebook passes all the tests.")
        saved = json.loads((course / "lessons" / LESSON / name).read_text())
        assert not any("raise NotImplementedError()" in "".join(c["source"])
                       for c in saved["cells"] if c["cell_type"] == "code")
