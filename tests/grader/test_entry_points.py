"""Every entry point grades a notebook alike and says alike what the sandbox lacks: ``check``
cold, ``check`` through the warm helper, ``grade``, ``selftest`` and Gradescope's
``run_autograder``, at full protection and without bubblewrap.

The suite runs this from whatever interpreter runs it; ``.ci/run`` runs it from a ``.venv``
inside a fresh clone too, the layout that once gave every notebook 0 cold and 10/10
through the helper (issue 23)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import AUTOGRADER_PYTHON as PYTHON
from support import ROOT, SANDBOX_REQUIRED, solution_path, unpack

from grader.integrations.gradescope.run import PRIVATE
from grader.sandbox import available_protections

pytestmark = [pytest.mark.sandbox, pytest.mark.slow]

LESSON = "01_attention_by_hand"
NOTE = re.compile(r"sandboxed with \d+ of \d+ protections here, without ([\w, -]+) \(")


def _env(tmp: Path, without: str, helper: bool) -> dict[str, str]:
    env = dict(os.environ, TMPDIR=str(tmp), GRADER_SANDBOX_WITHOUT=without,
               COURSE_CHECK_HELPER="5" if helper else "off")
    for name in ("XDG_RUNTIME_DIR", "CI", "PYTHONPATH"):
        env.pop(name, None)
    return env


def _grader(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "grader", *args], capture_output=True,
                          text=True, timeout=600, cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc


def _missing_in_note(stderr: str) -> list[str]:
    found = NOTE.search(stderr)
    return found.group(1).split(", ") if found else []


@pytest.fixture(params=["", "bwrap"], ids=["as-available", "without-bwrap"])
def setup(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict]:
    without = request.param
    if not without and "files-hidden" not in available_protections() and not SANDBOX_REQUIRED:
        pytest.skip("bubblewrap cannot run here: the other case covers this machine")
    reference = solution_path(LESSON).read_text(encoding="utf-8")
    planted = reference.replace("np.sqrt(K.shape[-1])", "K.shape[-1]")  # scaled by d_k
    assert planted != reference
    submitted = tmp_path / "submitted"
    for student, text in (("alice", reference), ("bob", planted)):
        folder = submitted / student / LESSON
        folder.mkdir(parents=True)
        (folder / f"{LESSON}.ipynb").write_text(text, encoding="utf-8")
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="entry-points-") as private:
        yield {"without": without, "submitted": submitted, "tmp": tmp_path,
               "private": Path(private)}
        subprocess.run([sys.executable, "-m", "grader", "helper", "stop"], capture_output=True,
                       timeout=60, cwd=ROOT, env=_env(Path(private), without, True))


def test_every_entry_point_gives_the_same_scores_and_names_the_same_missing_protections(
        setup: dict) -> None:
    without, submitted, tmp = setup["without"], setup["submitted"], setup["tmp"]
    students = ("alice", "bob")
    notebooks = {s: submitted / s / LESSON / f"{LESSON}.ipynb" for s in students}
    scores: dict[str, dict[str, float]] = {}
    missing: dict[str, list[str]] = {}

    for way, helper in (("check cold", False), ("check helper", True)):
        env = _env(setup["private"] if helper else tmp, without, helper)
        if helper:
            _grader(env, "helper", "start")  # and wait until it is warm
        for student, path in notebooks.items():
            proc = _grader(env, "check", str(path), "--format", "json")
            scores.setdefault(way, {})[student] = json.loads(proc.stdout)["score"]
            missing[way] = _missing_in_note(proc.stderr)
    if "check helper" in scores:
        status = _grader(_env(setup["private"], without, True), "helper", "status").stdout
        assert "checks: " in status

    env = _env(tmp, without, False)
    out = tmp / "graded"
    _grader(env, "grade", str(submitted), "--lesson", LESSON, "--out", str(out), "--jobs", "2",
            "--deadlines", "none")
    scores["grade"] = {s: json.loads((out / "results" / f"{s}.json").read_text())["score"]
                      for s in students}
    missing["grade"] = list(json.loads((out / "run.json").read_text())["sandbox"]["missing"])

    proc = _grader(env, "selftest", "--lessons", "01")
    line = next(x for x in proc.stdout.splitlines() if x.startswith("sandbox (isolation"))
    missing["selftest"] = line.split("missing: ", 1)[1].split(", ") if "missing: " in line else []
    assert "passed: 1 lesson(s)" in proc.stdout

    package = tmp / "gradescope.zip"
    _grader(env, "gradescope", LESSON, str(package))
    for student, path in notebooks.items():
        root = unpack(package, tmp / f"autograder-{student}")
        (root / "submission" / path.name).write_bytes(path.read_bytes())
        run = subprocess.run([str(root / "source" / "run_autograder")], cwd=root,
                             env=dict(env, AUTOGRADER_ROOT=str(root), AUTOGRADER_PYTHON=PYTHON),
                             capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
        results = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
        scores.setdefault("gradescope", {})[student] = results["score"]
        missing["gradescope"] = [m for m in results["extra_data"]["missing"] if m != PRIVATE]

    assert scores["check cold"] == {"alice": 10.0, "bob": scores["check cold"]["bob"]}
    assert 0 < scores["check cold"]["bob"] < 10  # the planted bug loses points, not all
    for way, got in scores.items():
        assert got == scores["check cold"], (way, scores)
    for way, got in missing.items():
        assert got == missing["grade"], (way, missing)
    if without:
        assert {"files-hidden", "read-only"} <= set(missing["grade"])
