"""``python -m grader check``: the spec's JSON, exit codes, and robustness to bad input."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from support import ROOT, lesson_path, lessons, solution_path

pytestmark = [pytest.mark.sandbox, pytest.mark.e2e, pytest.mark.slow]

KEYS = {"notebook", "lesson", "score", "max_score", "exercises"}
EXERCISE_KEYS = {"name", "points", "max_points", "passed", "message"}


def check(path, *extra: str, timeout: float = 300,
          env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grader", "check", str(path), "--format", "json",
                           *extra], capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env)


def verdict(path, *extra: str, env: dict[str, str] | None = None) -> dict:
    proc = check(path, *extra, env=env)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)  # exactly one JSON object, nothing else
    assert set(result) == KEYS
    for exercise in result["exercises"]:
        assert set(exercise) == EXERCISE_KEYS
    return result


@pytest.mark.parametrize("lesson", lessons())
def test_reference_solution_gets_full_marks(lesson: str, warm_check_env) -> None:
    result = verdict(solution_path(lesson), env=warm_check_env)
    assert result["lesson"] == lesson
    assert result["max_score"] > 0
    assert result["score"] == result["max_score"], result
    assert all(e["passed"] and e["message"] == "" for e in result["exercises"])


@pytest.mark.parametrize("lesson", lessons())
def test_untouched_student_notebook_gets_zero(lesson: str, warm_check_env) -> None:
    result = verdict(lesson_path(lesson), env=warm_check_env)
    assert result["score"] == 0, result
    assert all(not e["passed"] and e["message"] for e in result["exercises"])


def _notebook(cells: list[dict]) -> dict:
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells}


def _code(source: str) -> dict:
    return {"cell_type": "code", "metadata": {}, "source": source, "outputs": [],
            "execution_count": None}


def _lesson01(tmp_path, edit=None) -> object:
    nb = json.loads(solution_path("01_attention_by_hand").read_text(encoding="utf-8"))
    if edit:
        edit(nb)
    path = tmp_path / "01_attention_by_hand.ipynb"
    path.write_text(json.dumps(nb), encoding="utf-8")
    return path


@pytest.mark.parametrize(("content", "reason"), [
    (b"", "empty"),
    (b"{not json", "not valid JSON"),
    (b"\x89PNG\r\n\x1a\n\x00\x00garbage\xff", "not a text file"),
    (b'{"hello": "world"}', "not a Jupyter notebook"),
    (b"[1, 2, 3]", "not a Jupyter notebook"),
    (json.dumps({"nbformat": 3, "nbformat_minor": 0, "worksheets": [], "metadata": {}}).encode(),
     "nbformat 3 is too old"),
    (json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}}).encode(), "no list of cells"),
    (json.dumps(_notebook([{"cell_type": "code", "source": 42}])).encode(), "malformed source"),
])
def test_unreadable_notebooks_give_a_one_line_reason(tmp_path, content: bytes, reason: str) -> None:
    path = tmp_path / "01_attention_by_hand.ipynb"
    path.write_bytes(content)
    proc = check(path)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert reason in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "Traceback" not in proc.stderr


def test_missing_file_and_unknown_lesson(tmp_path) -> None:
    proc = check(tmp_path / "01_attention_by_hand.ipynb")
    assert proc.returncode == 2 and "no such file" in proc.stderr
    other = tmp_path / "homework.ipynb"
    other.write_text(json.dumps(_notebook([])))
    proc = check(other)
    assert proc.returncode == 2 and "--lesson" in proc.stderr
    assert verdict(other, "--lesson", "01_attention_by_hand")["score"] == 0


def test_user_errors_are_one_line_and_a_bug_is_a_traceback(tmp_path, monkeypatch, capsys) -> None:
    """``main`` says a user's error in one line (exit 2, or 3 for no sandbox); a KeyError
    from a slip in the grader's own code is no user error: it propagates, traceback and all."""
    from coursekit import catalogue
    from grader import cli
    from grader.check import launch
    from grader.classgrade import selftest
    from grader.sandbox import SandboxUnavailable

    notebook = tmp_path / "homework.ipynb"
    notebook.write_text(json.dumps(_notebook([])))
    assert cli.main(["check", str(notebook), "--lesson", "42_nope", "--no-helper"]) == 2
    known = ", ".join(catalogue.COURSE.ids())
    assert capsys.readouterr().err == f"grader: no graders for lesson '42_nope'; known lessons: {known}\n"

    def no_sandbox(*args, **kwargs):
        raise SandboxUnavailable("strict isolation needs bwrap")

    monkeypatch.setattr(selftest, "run", no_sandbox)
    assert cli.main(["selftest", "--lessons", "01"]) == 3
    assert capsys.readouterr().err == "grader selftest: strict isolation needs bwrap\n"

    def slip(*args, **kwargs):
        return {}["lesson_id"]

    monkeypatch.setattr(launch, "prepare_check", slip)
    with pytest.raises(KeyError, match="lesson_id"):
        cli.main(["check", str(notebook), "--lesson", "01", "--no-helper"])


def test_a_renamed_notebook_is_known_by_its_graded_cells(tmp_path) -> None:
    """As `grade` knows it (an LMS renames files: submission_1234.ipynb); issue 24."""
    renamed = tmp_path / "submission_1234.ipynb"
    renamed.write_bytes(solution_path("02_split_heads").read_bytes())
    result = verdict(renamed)
    assert result["lesson"] == "02_split_heads" and result["score"] == result["max_score"]


def test_notebook_without_cells_scores_zero(tmp_path) -> None:
    path = tmp_path / "01_attention_by_hand.ipynb"
    path.write_text(json.dumps(_notebook([])))
    result = verdict(path)
    assert result["score"] == 0
    assert "not defined" in result["exercises"][0]["message"]


def _drop_cell(grade_id: str):
    def edit(nb: dict) -> None:
        nb["cells"] = [c for c in nb["cells"]
                       if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") != grade_id]
    return edit


def _rename(old: str, new: str):
    def edit(nb: dict) -> None:
        for cell in nb["cells"]:
            cell["source"] = "".join(cell["source"]).replace(f"def {old}(", f"def {new}(")
    return edit


def test_deleted_exercise_cell_loses_only_that_exercise(tmp_path) -> None:
    result = verdict(_lesson01(tmp_path, _drop_cell("dot_scores")))
    by_name = {e["name"]: e for e in result["exercises"]}
    assert by_name["dot_scores"]["points"] == 0
    assert "not defined" in by_name["dot_scores"]["message"]
    assert by_name["softmax"]["passed"]


def test_renamed_function_is_reported(tmp_path) -> None:
    result = verdict(_lesson01(tmp_path, _rename("softmax", "my_softmax")))
    by_name = {e["name"]: e for e in result["exercises"]}
    assert by_name["softmax"]["points"] == 0
    assert "`softmax` is not defined" in by_name["softmax"]["message"]
    assert by_name["dot_scores"]["passed"]


def test_nothing_a_notebook_prints_reaches_stdout(tmp_path) -> None:
    forged = json.dumps({"notebook": "x", "lesson": "01_attention_by_hand", "score": 10.0,
                         "max_score": 10.0, "exercises": []})

    def edit(nb: dict) -> None:
        nb["cells"].insert(0, _code(
            f"import os, sys\nprint({forged!r})\nos.write(1, b'{{\"score\": 99}}\\n')\n"
            f"sys.stderr.write('noise\\n')\nsys.__stdout__.write('more noise')"))
    result = verdict(_lesson01(tmp_path, edit))
    assert result["score"] == 10.0 and result["notebook"] != "x"


def test_infinite_loop_times_out_with_a_clear_message(tmp_path) -> None:
    def edit(nb: dict) -> None:
        nb["cells"].append(_code("import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                                 "while True:\n    pass"))
    result = verdict(_lesson01(tmp_path, edit), "--timeout", "3")
    assert result["score"] == 0
    assert "took too long" in result["exercises"][0]["message"]


def test_memory_bomb_is_stopped(tmp_path) -> None:
    def edit(nb: dict) -> None:
        nb["cells"].insert(3, _code("hog = bytearray(64 << 30)"))
    result = verdict(_lesson01(tmp_path, edit))
    assert result["score"] == 0  # the cell reached the memory limit: nothing is graded
    assert all("reached its memory limit" in e["message"] for e in result["exercises"])


def test_notebook_that_kills_its_process_is_reported(tmp_path) -> None:
    def edit(nb: dict) -> None:
        nb["cells"].append(_code("import os\nos._exit(3)"))
    result = verdict(_lesson01(tmp_path, edit))
    assert result["score"] == 0
    assert "stopped" in result["exercises"][0]["message"]


def test_text_report_has_hints(tmp_path) -> None:
    proc = subprocess.run([sys.executable, "-m", "grader", "check", str(lesson_path("01_attention_by_hand"))],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0
    assert "total" in proc.stdout and "hint: `softmax` is not implemented yet" in proc.stdout


def test_python_m_grader_exits_fast_yet_runs_its_atexit_functions(tmp_path) -> None:
    """``python -m grader`` skips the interpreter's own clean-up (0.5-0.9 s with torch
    loaded), not what a normal exit owes: the atexit functions run, the output is whole."""
    import os

    marker = tmp_path / "atexit-ran"
    code = ("import atexit, pathlib, runpy, sys; "
            f"atexit.register(pathlib.Path({str(marker)!r}).write_text, 'yes'); "
            "sys.argv = ['grader', 'check', sys.argv[1], '--format', 'json']; "
            "runpy.run_module('grader', run_name='__main__')")
    proc = subprocess.run([sys.executable, "-c", code, str(lesson_path("01_attention_by_hand"))],
                          capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env={**os.environ, "COURSE_CHECK_HELPER": "off"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout)["score"] == 0
    assert marker.read_text() == "yes"
