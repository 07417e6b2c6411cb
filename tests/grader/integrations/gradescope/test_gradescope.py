"""``python -m grader gradescope``: the zip follows Gradescope's layout, and its
``run_autograder``, run in a temporary root laid out like Gradescope's container
(``source/``, ``submission/``, ``results/``), writes a ``results.json`` that validates
against the schema written from Gradescope's specification, for the reference notebook,
a blank one, a hostile one and submissions without exactly one notebook."""

from __future__ import annotations

import ast
import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import jsonschema
import pytest
from support import AUTOGRADER_PYTHON as PYTHON
from support import ROOT, lesson_path, solution_path, unpack

from coursekit import catalogue
from grader.integrations.gradescope import SCHEMA_PATH
from grader.integrations.gradescope.run import PRIVATE
from grader.testkit.parts import builds_on

pytestmark = [pytest.mark.e2e, pytest.mark.root, pytest.mark.slow]  # Gradescope runs run_autograder as root

LESSON = "01_attention_by_hand"
EXERCISES = ["dot_scores", "softmax", "attention"]


@pytest.fixture(scope="module")
def package(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("pkg") / "l01.zip"
    proc = subprocess.run([sys.executable, "-m", "grader", "gradescope", LESSON, str(out)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert f"wrote {out}" in proc.stdout and "dot_scores, softmax, attention" in proc.stdout
    return out


def schema_validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def run_autograder(root: Path, **env_extra: str) -> tuple[dict, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    env.update(AUTOGRADER_ROOT=str(root), AUTOGRADER_PYTHON=PYTHON, **env_extra)
    proc = subprocess.run([str(root / "source" / "run_autograder")], cwd=root, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
    schema_validator().validate(results)
    assert [t["name"] for t in results["tests"]] == EXERCISES
    assert results["score"] == sum(t["score"] for t in results["tests"])
    return results, proc.stdout


def test_zip_layout_follows_gradescope_and_ships_no_solution(package) -> None:
    from grader.authoring.release import _REGION, _normal, notebook_code

    with zipfile.ZipFile(package) as zf:
        names = zf.namelist()
        for script in ("setup.sh", "run_autograder"):
            assert script in names
            assert stat.S_IMODE(zf.getinfo(script).external_attr >> 16) == 0o755
            assert zf.read(script).startswith(b"#!/usr/bin/env bash\n")
        config = json.loads(zf.read("autograder.json"))
        texts = {n: zf.read(n).decode("utf-8", "ignore") for n in names}
    assert config["lesson"] == LESSON and config["isolation"] == "auto"
    assert "course/grader/hidden/test_01_attention_by_hand.py" in names
    assert not [n for n in names if n.startswith("course/grader/hidden/test_0") and "01_attention" not in n]
    assert not [n for n in names if n.startswith(("solutions/", "course/solutions/"))]
    assert not [n for n in names if "coursekit/reference/lesson0" in n]  # later lessons' answers
    answers = [_normal(body) for kind, body in _REGION.findall(notebook_code(solution_path(LESSON)))
               if kind == "SOLUTION"]
    assert answers
    parts = f"course/grader/hidden/parts_{LESSON[:2]}.py"  # what BUILDS_ON substitutes (grader.testkit.parts)
    for name, text in texts.items():
        for answer in answers:
            assert name == parts or answer not in _normal(text), f"{name} holds a reference answer"
    if parts in texts:
        defined = {n.name for n in ast.parse(texts[parts]).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        assert defined == set(builds_on(LESSON)), "the zip carries the substituted exercises only"


def test_setup_script_pins_match_the_project(package) -> None:
    import tomllib

    pins = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    with zipfile.ZipFile(package) as zf:
        setup = zf.read("setup.sh").decode()
        requirements = zf.read("requirements.txt").decode().splitlines()
    torch = next(p for p in pins if p.startswith("torch=="))
    assert f'--index-url https://download.pytorch.org/whl/cpu "{torch}"' in setup
    assert sorted(r for r in requirements if not r.startswith("#")) == sorted(p for p in pins if p != torch)
    assert "/bin/uv\" python install 3.11" in setup and 'chmod -R go= "$SOURCE"' in setup
    for script in ("setup.sh", "run_autograder"):
        check = subprocess.run(["bash", "-n"], input=zipfile.ZipFile(package).read(script),
                               capture_output=True)
        assert check.returncode == 0, check.stderr


def test_out_folder_gets_autograder_zip_and_unknown_lesson_is_refused(tmp_path) -> None:
    number = LESSON[:2]  # "01", as check, grade and release take it
    proc = subprocess.run([sys.executable, "-m", "grader", "gradescope", number, str(tmp_path / "gs")],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0 and (tmp_path / "gs" / "autograder.zip").is_file()
    config = json.loads(zipfile.ZipFile(tmp_path / "gs" / "autograder.zip").read("autograder.json"))
    assert config["lesson"] == LESSON
    proc = subprocess.run([sys.executable, "-m", "grader", "gradescope", "42_nope", str(tmp_path)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 2 and "no graders for lesson '42_nope'" in proc.stderr


def test_reference_notebook_gets_full_marks_whatever_its_name(package, tmp_path) -> None:
    root = unpack(package, tmp_path / "autograder")
    (root / "submission" / "My Lesson 1 (final).ipynb").write_bytes(solution_path(LESSON).read_bytes())
    results, stdout = run_autograder(root)
    assert results["score"] == 10.0 and results["extra_data"]["status"] == "ok"
    assert all(t["status"] == "passed" and t["score"] == t["max_score"] for t in results["tests"])
    assert "protections active" in stdout
    expected = expected_protections()  # what holds for the user running it, root or not
    for name, shown in expected.items():
        assert f"  {shown} {name}: " in stdout, (name, stdout)
    assert (PRIVATE in stdout) == (PRIVATE in expected), stdout
    assert results["extra_data"]["notebook"] == "My Lesson 1 (final).ipynb"
    assert stat.S_IMODE(os.stat(root).st_mode) == 0o755  # private only while grading


def test_blank_notebook_scores_zero_with_a_hint_per_test(package, tmp_path) -> None:
    root = unpack(package, tmp_path / "autograder")
    (root / "submission" / f"{LESSON}.ipynb").write_bytes(lesson_path(LESSON).read_bytes())
    results, _ = run_autograder(root)
    assert results["score"] == 0 and results["extra_data"]["status"] == "ok"
    for test in results["tests"]:
        assert test["status"] == "failed" and test["score"] == 0 and test["max_score"] > 0
        assert "not implemented yet" in test["output"], test


def test_a_chinese_notebook_gets_chinese_hints(package, tmp_path) -> None:
    root = unpack(package, tmp_path / "autograder")
    zh = lesson_path(LESSON).with_name(f"{LESSON}.zh.ipynb")
    (root / "submission" / "作业.ipynb").write_bytes(zh.read_bytes())
    results, _ = run_autograder(root)
    assert results["score"] == 0 and results["extra_data"]["status"] == "ok"
    for test in results["tests"]:
        assert "还没有实现" in test["output"] and "not implemented yet" not in test["output"], test


HOSTILE = r'''
import json, os
ROOT = {root!r}
def _succeeds(action):
    try:
        action()
        return True
    except Exception:
        return False
read_graders = _succeeds(lambda: open(ROOT + "/source/course/grader/hidden/test_01_attention_by_hand.py").read())
listed = _succeeds(lambda: os.listdir(ROOT + "/source")) or _succeeds(lambda: os.listdir(ROOT))
forged = _succeeds(lambda: open(ROOT + "/results/results.json", "w").write(json.dumps({{"score": 987654}})))
patched = _succeeds(lambda: open(ROOT + "/source/course/grader/hidden/test_01_attention_by_hand.py", "a").write("#"))
print(json.dumps({{"score": 987654.0, "tests": [{{"name": "dot_scores", "score": 987654}}]}}))
print("\n" * 3 + '{{"score": 987654.0}}')
# Each exercise stays correct only if its attack failed: the score shows what got through.
if read_graders or listed:
    dot_scores = lambda Q, K: Q[:, :1] * 0
if forged:
    softmax = lambda x, axis=-1: x * 0
if patched:
    attention = lambda Q, K, V, scale=True: (V * 0, V * 0)
'''


def expected_protections() -> dict[str, str]:
    """Each protection the sandbox's probe reports for the user running the tests, ``+``
    (active) or ``-`` (missing), as run_autograder lists them. Gradescope runs it as root: the
    autograder's own files are made root-only (``autograder-files-private``) only then, and
    for any other user the line is absent (no newcomer's ``make test`` expects root's)."""
    probe = subprocess.run([PYTHON, "-c", "import json; from grader.sandbox.probe import plan; "
                            "p = plan('auto'); print(json.dumps([list(p.active), list(p.missing), "
                            "bool(p.uid_drop or p.bwrap)]))"],
                           env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                           text=True, cwd=ROOT, check=True)
    active, missing, contained = json.loads(probe.stdout)
    shown = {**{name: "+" for name in active}, **{name: "-" for name in missing}}
    if os.geteuid() == 0:
        shown[PRIVATE] = "+" if contained else "-"
    return shown


def uid_drop_without_bwrap() -> str | None:
    """Why a container without user namespaces cannot be stood in for here, or None."""
    probe = subprocess.run([PYTHON, "-c", "from grader.sandbox.probe import plan; p = plan('auto'); "
                            "print(p.uid_drop or p.missing.get('processes-unreachable', ''))"],
                           env={**os.environ, "GRADER_SANDBOX_WITHOUT": "bwrap,namespaces",
                                "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, cwd=ROOT)
    answer = probe.stdout.strip()
    return None if answer == "True" else answer or probe.stderr[-500:]


@pytest.mark.parametrize("without", ["", "bwrap,namespaces"], ids=["this-machine", "no-user-namespaces"])
def test_hostile_notebook_cannot_read_graders_forge_or_write_results(package, tmp_path, without) -> None:
    """Every attack, with what this machine allows, and as in a Docker container that forbids
    user namespaces (Gradescope's, perhaps): no bubblewrap, no namespaces, root, so the
    notebook runs under a uid of its own and /autograder is made root-only."""
    if without and (why := uid_drop_without_bwrap()):
        pytest.skip(f"no uid drop without bwrap here: {why}")
    root = unpack(package, tmp_path / "autograder")
    nb = json.loads(solution_path(LESSON).read_text(encoding="utf-8"))
    nb["cells"].append({"cell_type": "code", "execution_count": None, "id": "hostile", "metadata": {},
                        "outputs": [], "source": HOSTILE.format(root=str(root))})
    (root / "submission" / "hostile.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    hidden = root / "source" / "course" / "grader" / "hidden" / "test_01_attention_by_hand.py"
    before = hidden.read_bytes()
    results, stdout = run_autograder(root, GRADER_SANDBOX_WITHOUT=without)
    assert results["score"] == 10.0, (results["tests"], stdout)  # every attack failed
    assert hidden.read_bytes() == before
    assert sorted(p.name for p in (root / "results").iterdir()) == ["results.json"]
    # the forged score (not "99": a commit hash in the package's build line can hold that)
    assert "987654" not in json.dumps(results) and "987654" not in stdout
    if without:
        assert "  - files-hidden: MISSING" in stdout and "  + autograder-files-private: " in stdout


@pytest.mark.parametrize("files, expected", [
    ({}, "No notebook was submitted"),
    ({"answers.py": b"print(1)"}, "No notebook was submitted (found: answers.py)"),
    ({"a.ipynb": b"{}", "b/c.ipynb": b"{}"}, "2 notebooks were submitted (a.ipynb, b/c.ipynb)"),
    ({"broken.ipynb": b"{not json"}, "The notebook could not be read: not valid JSON"),
    ({"broken.ipynb": b'{"cells": [] "metadata": {}}'}, "Expecting ',' delimiter"),  # shown as text
])
def test_submissions_without_one_readable_notebook_get_a_clear_result(package, tmp_path, files, expected) -> None:
    root = unpack(package, tmp_path / "autograder")
    for name, data in {**files, ".ipynb_checkpoints/x-checkpoint.ipynb": b"{}"}.items():
        (root / "submission" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "submission" / name).write_bytes(data)
    results, _ = run_autograder(root)
    assert results["score"] == 0 and expected in results["output"], results["output"]
    assert results["output_format"] == "text" and "&#" not in results["output"]
    assert all(t["score"] == 0 and t["status"] == "failed" for t in results["tests"])


def test_the_wrong_lesson_is_named(package, tmp_path) -> None:
    root = unpack(package, tmp_path / "autograder")
    (root / "submission" / "lesson.ipynb").write_bytes(solution_path("02_split_heads").read_bytes())
    results, _ = run_autograder(root)
    assert results["score"] == 0
    sentence = ("This is lesson 02's notebook, not lesson 01's: nothing in it was graded. Hand "
                "in your lesson 01 notebook.")
    assert sentence in results["output"]
    assert all(t["output"] == sentence for t in results["tests"])


@pytest.mark.parametrize("edition", ["en", "zh"])
def test_a_later_lessons_notebook_is_named_not_the_lessons_it_builds_on(tmp_path, edition) -> None:
    """Issue 49: lesson 08's notebook uploaded to lesson 04 was told that "this lesson builds
    on your lesson 04": its setup cell defines lesson 04's MultiHeadAttention, so it passed
    for lesson 04's, and lesson 04's reference is not in lesson 04's package."""
    package = tmp_path / "l04.zip"
    subprocess.run([sys.executable, "-m", "grader", "gradescope", "04_multi_head_attention",
                    str(package)], capture_output=True, text=True, cwd=ROOT, timeout=300, check=True)
    root = unpack(package, tmp_path / "autograder")
    notebook = catalogue.get("08_transformer").notebooks("solution")[edition]
    (root / "submission" / "lesson.ipynb").write_bytes(notebook.read_bytes())
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    env.update(AUTOGRADER_ROOT=str(root), AUTOGRADER_PYTHON=PYTHON)
    proc = subprocess.run([str(root / "source" / "run_autograder")], cwd=root, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
    sentence = {"en": "This is lesson 08's notebook, not lesson 04's: nothing in it was graded. "
                      "Hand in your lesson 04 notebook.",
                "zh": "这是第 08 课的笔记本，不是第 04 课的：里面没有评分。请交你的第 04 课笔记本。"}[edition]
    assert results["score"] == 0 and sentence in results["output"], results["output"]
    assert [t["output"] for t in results["tests"]] == [sentence]
    assert "builds on" not in results["output"] and "EarlierLessonError" not in results["output"]


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not installed")
def test_scripts_pass_shellcheck(package, tmp_path) -> None:
    with zipfile.ZipFile(package) as zf:
        zf.extract("setup.sh", tmp_path)
        zf.extract("run_autograder", tmp_path)
    proc = subprocess.run(["shellcheck", "-s", "bash", str(tmp_path / "setup.sh"), str(tmp_path / "run_autograder")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


def test_schema_rejects_what_gradescope_does_not_document() -> None:
    validator = schema_validator()
    good = {"score": 1.0, "tests": [{"name": "x", "score": 1, "max_score": 1, "visibility": "visible"}]}
    validator.validate(good)
    for bad in ({"tests": [{"name": "x"}]},                          # no score anywhere
                {"score": 1, "visibility": "sometimes"},             # unknown visibility
                {"score": 1, "output_format": "rtf"},                # unknown format
                {"score": 1, "tests": [{"score": 1, "status": "ok"}]},  # unknown status
                {"score": "10"},                                     # not a number
                {"score": 1, "scores": 2}):                          # undocumented field
        assert not validator.is_valid(bad), bad
