"""``python -m grader release``: the student bundle holds the lessons, their data and public
helpers, and nothing secret (no lesson's answers unless the instructor asks); a lesson opens
and runs in a fresh environment made from the bundle's own files, and a later lesson runs
there on the student's own earlier notebook.

The leak scan here is written independently of ``grader.authoring.release`` (which runs its own
before it releases): every solution region and hidden-test region of ``solutions/`` and
every line of ``grader/hidden/*.py`` longer than 30 characters (import lines aside) must
appear in no file of the bundle.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from support import ROOT

from coursekit import catalogue

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

LESSONS = catalogue.COURSE.released().ids()
FIRST = "01_attention_by_hand"
REGION = re.compile(r"### BEGIN (SOLUTION|HIDDEN TESTS)[^\n]*\n(.*?)### END \1", re.S)


def release(out: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grader", "release", str(out), *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)


def cells(path: Path) -> list[dict]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if isinstance(cell["source"], list):
            cell["source"] = "".join(cell["source"])
    return nb["cells"]


def lines(text: str) -> str:
    return "\n".join(s.strip() for s in text.splitlines() if s.strip())


def secrets() -> list[tuple[str, str]]:
    found = []
    for nb in (path for lesson in catalogue.COURSE for path in lesson.notebooks("solution").values()):
        for cell in cells(nb):
            for kind, body in REGION.findall(cell["source"]):
                found.append((f"{nb.parent.name} {kind.lower()}", lines(body)))
    # lines the public student notebooks show anyway are no secret (a visible test may
    # build the same input as a hidden one)
    public = "\n".join(lines(c["source"]) for lesson in catalogue.COURSE
                       for nb in lesson.notebooks("student").values() for c in cells(nb))
    for path in sorted((ROOT / "grader" / "hidden").glob("*.py")):
        for line in path.read_text(encoding="utf-8").splitlines():
            line = line.strip()
            if len(line) > 30 and not re.match(r"(from\s+\S+\s+)?import\s", line) \
                    and line not in public:
                found.append((path.name, line))
    return [(where, text) for where, text in found if text]


def exported(lesson: str) -> set[str]:
    """Solution regions that a reference module carries on purpose."""
    return {lines(body) for cell in cells(catalogue.get(lesson).solution())
            if "export" in (cell["metadata"].get("tags") or [])
            for kind, body in REGION.findall(cell["source"]) if kind == "SOLUTION"}


def bundle_text(path: Path) -> str:
    text = path.read_bytes().decode("utf-8", errors="ignore")
    if path.suffix == ".ipynb":  # the raw JSON escapes quotes and newlines: read the cells too
        text += "\n" + "\n".join(c["source"] for c in cells(path))
    return lines(text)


#: (--lessons, --with-reference) -> the lessons bundled, and the reference modules shipped
RANGES = {("01", None): (["01"], []), ("01-04", None): (["01", "02", "03", "04"], []),
          ("all", None): ([catalogue.get(lesson).number for lesson in LESSONS], []),
          ("04,08", "03-07"): (["04", "08"], ["03", "04", "05", "06", "07"])}


@pytest.fixture(scope="module", params=list(RANGES), ids=[f"{a}+{b}" for a, b in RANGES])
def bundle(request, tmp_path_factory) -> tuple[Path, list[str], list[str]]:
    spec, refs = request.param
    want, shipped = RANGES[request.param]
    out = tmp_path_factory.mktemp(f"bundle-{spec}") / "course"
    proc = release(out, *([] if spec == "all" else ["--lessons", spec]),
                   *(["--with-reference", refs] if refs else []))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"wrote {out}"), proc.stdout
    for number in shipped:
        assert f"reference code: coursekit/reference/lesson{number}.py ships the answers" in proc.stdout
    if not shipped:
        assert "reference code: none" in proc.stdout
    return out, [catalogue.get(n).id for n in want], [f"lesson{n}.py" for n in shipped]


def test_bundle_holds_the_lessons_and_public_files_only(bundle) -> None:
    out, lessons, _ = bundle
    assert sorted(p.name for p in (out / "lessons").iterdir()) == lessons
    for lesson in lessons:  # the generated notebooks, but for the self-check advice
        shipped = catalogue.read_json(catalogue.COURSE.at(out).get(lesson).student())
        ours = catalogue.read_json(catalogue.get(lesson).student())
        assert len(shipped["cells"]) == len(ours["cells"])
        for a, b in zip(shipped["cells"], ours["cells"], strict=True):
            if a != b:
                assert a["cell_type"] == "markdown" and "nbgrader" not in a["metadata"]
                assert "python -m grader check" in catalogue.cell_source(b)
                assert a["source"] != b["source"] and a["metadata"] == b["metadata"]
    top = {p.name for p in out.iterdir()}
    assert {"README.md", "pyproject.toml", "requirements.txt", "environment.yml", "coursekit"} <= top
    assert not {"solutions", "grader", "tests", "Makefile", "nbgrader_config.py"} & top
    assert not list(out.rglob("__pycache__")) and not list(out.rglob("*.pyc"))


def test_no_solution_or_hidden_test_text_anywhere(bundle) -> None:
    out, lessons, _ = bundle
    needles = secrets()
    assert any("solution" in where for where, _ in needles)
    assert any("hidden tests" in where for where, _ in needles)
    assert any(where.startswith("test_") for where, _ in needles)
    shipped = {p.stem[len("lesson"):] for p in (out / "coursekit" / "reference").glob("lesson*.py")}
    regions: dict[str, list[str]] = {}   # a shipped module -> the exported regions it holds
    for number in shipped:
        regions[f"coursekit/reference/lesson{number}.py"] = exported(catalogue.get(number).id)
    files = [p for p in out.rglob("*") if p.is_file()]
    assert files
    for path in files:
        rel = path.relative_to(out).as_posix()
        text = bundle_text(path)
        assert "### BEGIN SOLUTION" not in text and "### BEGIN HIDDEN TESTS" not in text, rel
        assert "grader.kernel" not in text, rel
        for where, needle in needles:
            if needle in text:  # only inside what the module ships (another lesson's may repeat it)
                assert any(needle in region for region in regions.get(rel, ())), \
                    f"{rel} contains text of {where}:\n{needle}"


def test_reference_modules_only_where_the_instructor_asked(bundle) -> None:
    out, _, asked = bundle
    shipped = sorted(p.name for p in (out / "coursekit" / "reference").glob("lesson*.py"))
    assert shipped == asked
    # and every other public helper ships
    for path in (ROOT / "coursekit").rglob("*.py"):
        rel = path.relative_to(ROOT)
        if "__pycache__" in rel.parts or re.fullmatch(r"lesson\d\d\.py", path.name):
            continue
        assert (out / rel).read_bytes() == path.read_bytes(), rel


def test_bundle_pins_are_the_course_pins_a_student_runs(bundle) -> None:
    import tomllib

    out, _, _ = bundle
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    wanted = config["tool"]["attention-course"]["student-dependencies"]
    course = [pin for pin in config["project"]["dependencies"]
              if re.split(r"[=;<> ]", pin)[0] in wanted]
    assert len(course) == len(wanted)
    student = tomllib.loads((out / "pyproject.toml").read_text())["project"]
    assert student["dependencies"] == course
    assert student["requires-python"] == config["project"]["requires-python"]
    assert student["name"] != "attention-course"  # never shadows the course's own package
    for tool in ("pytest", "papermill", "pyseccomp"):  # the grader's, not a student's
        assert not any(pin.startswith(tool) for pin in student["dependencies"])
    lines = [s for s in (out / "requirements.txt").read_text().splitlines()
             if s and not s.startswith("#") and s != "-e ."]
    assert lines[0] == "--extra-index-url https://download.pytorch.org/whl/cpu"  # CPU torch
    assert lines[1:] == course
    env = re.findall(r"^\s+- (\S+==.+?)\s*$", (out / "environment.yml").read_text(), re.M)
    assert env == course


def test_the_lessons_import_nothing_a_student_install_lacks() -> None:
    """Every third-party module the lessons and coursekit import is a student dependency
    (or installed by one: the distribution that provides it is named)."""
    import ast
    import importlib.metadata
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    wanted = {n.lower() for n in config["tool"]["attention-course"]["student-dependencies"]}
    sources = [p.read_text() for p in (ROOT / "coursekit").rglob("*.py")]
    for notebook in (ROOT / "lessons").glob("*/*.ipynb"):
        sources += [c["source"] for c in catalogue.code_cells(catalogue.read_json(notebook))]
    modules = set()
    for source in sources:
        tree = catalogue.parse(source)
        for node in ast.walk(tree) if tree else []:
            if isinstance(node, ast.Import):
                modules |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                modules.add(node.module.split(".")[0])
    providers = importlib.metadata.packages_distributions()
    third_party = modules - set(sys.stdlib_module_names) - {"coursekit"}
    assert third_party, "no imports found"
    for module in sorted(third_party):
        dists = {d.lower().replace("_", "-") for d in providers.get(module, [])}
        assert dists & wanted, f"the lessons import {module} ({dists}), not a student dependency"


def test_the_bundled_lessons_advise_validate_not_the_grader(bundle) -> None:
    out, _, _ = bundle
    for notebook in (out / "lessons").rglob("*.ipynb"):
        text = notebook.read_text(encoding="utf-8")
        assert "python -m grader check" not in text, notebook
        assert "nbgrader validate lessons/" in text, notebook
    # the repository's own lessons keep the repository's advice
    assert "python -m grader check" in catalogue.get("01").student().read_text(encoding="utf-8")


def test_refuses_bad_selections(tmp_path) -> None:
    for spec, words in [("99", "no lesson 99"), ("03-01", "empty range"), ("x", "cannot read")]:
        proc = release(tmp_path / spec, "--lessons", spec)
        assert proc.returncode == 2 and words in proc.stderr, proc.stderr
        assert proc.stderr.count("\n") == 1 and not (tmp_path / spec).exists()
    out = tmp_path / "used"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    proc = release(out, "--lessons", "01")
    assert proc.returncode == 2 and "not empty" in proc.stderr
    assert (out / "keep.txt").read_text() == "mine"


# ---- the planner on a synthetic course: later lessons, reference code and datasets -------

def _notebook(path: Path, *sources: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {},
          "cells": [{"cell_type": "code", "metadata": {}, "source": s, "outputs": [],
                     "execution_count": None} for s in sources]}
    path.write_text(json.dumps(nb))


@pytest.fixture
def course(tmp_path) -> catalogue.Catalogue:
    """Lessons 01, 03, 04 (uses lesson 03), 08 (uses 04, so 03 too), 09 (reads the numerals);
    reference modules for 03 and 04; two datasets."""
    root = tmp_path / "course"
    (root / "coursekit" / "reference").mkdir(parents=True)
    (root / "coursekit" / "__init__.py").write_text("")
    (root / "coursekit" / "data.py").write_text("def load_numerals(split): ...\n")
    (root / "coursekit" / "reference" / "__init__.py").write_text("")
    (root / "coursekit" / "reference" / "lesson03.py").write_text("def sdpa(): return 3\n")
    (root / "coursekit" / "reference" / "lesson04.py").write_text(
        "from coursekit.earlier import lesson_code\n\nsdpa = lesson_code('03').sdpa\n\n\nclass MHA: pass\n")
    (root / "pyproject.toml").write_text('[project]\nversion = "1.0"\ndependencies = ["numpy==2.4.6"]\n')
    _notebook(root / "lessons" / "01_a" / "01_a.ipynb", "x = 1  # lesson_code('03') in a comment is no use")
    _notebook(root / "lessons" / "03_c" / "03_c.ipynb", "def sdpa(): raise NotImplementedError()")
    _notebook(root / "lessons" / "04_d" / "04_d.ipynb", "from coursekit.earlier import lesson_code\n"
              "sdpa = lesson_code('03').sdpa")
    _notebook(root / "lessons" / "08_h" / "08_h.ipynb", "from coursekit.reference import lesson04")
    _notebook(root / "lessons" / "09_i" / "09_i.ipynb",
              "from coursekit.data import load_numerals\ntrain = load_numerals('train')")
    for name in ("numerals", "other"):
        (root / "datasets" / name).mkdir(parents=True)
        (root / "datasets" / name / "README.md").write_text(name)
    return catalogue.Catalogue([catalogue.Lesson("01_a", "A"), catalogue.Lesson("03_c", "C"),
                                catalogue.Lesson("04_d", "D"), catalogue.Lesson("08_h", "H"),
                                catalogue.Lesson("09_i", "I", datasets=("numerals",))], root)


def _ids(lessons) -> list[str]:
    return [lesson.id for lesson in lessons]


def test_planner_ships_no_answers_by_default(course, tmp_path) -> None:
    from grader.authoring import release as r

    assert _ids(r.select("01,03-04", course)) == ["01_a", "03_c", "04_d"]
    p = r.plan(r.select("01,03-04", course), course)
    assert p.references == [] and p.datasets == [] and p.not_bundled == []
    assert {k: _ids(v) for k, v in p.uses_own.items()} == {"04_d": ["03_c"]}
    p = r.plan(r.select("08", course), course)  # 08 -> 04 -> 03, neither in the bundle
    assert {k: _ids(v) for k, v in p.uses_own.items()} == {"08_h": ["03_c", "04_d"]}
    assert _ids(p.not_bundled) == ["03_c", "04_d"]
    assert r.plan(r.select("09", course), course).datasets == ["numerals"]

    out = tmp_path / "b"
    summary = r.summary(out, r.build(out, "01,03-04", course=course), course)
    assert sorted(p.name for p in (out / "coursekit" / "reference").iterdir()) == ["__init__.py"]
    assert not (out / "datasets").exists()
    assert "reference code: none" in summary and "04_d runs on the students' own 03_c" in summary
    assert "runs on your own code of `03_c`" in (out / "README.md").read_text()
    r.build(out, "09", course=course, force=True)
    assert [p.name for p in (out / "datasets").iterdir()] == ["numerals"]


def test_reference_code_ships_when_the_instructor_asks(course, tmp_path) -> None:
    from grader.authoring import release as r

    p = r.plan(r.select("08", course), course, all_references=True)
    assert _ids(p.references) == ["03_c", "04_d"] and p.uses_own == {} and p.not_bundled == []
    out = tmp_path / "b"
    p = r.build(out, "04", course=course, with_reference="03")
    assert sorted(x.name for x in (out / "coursekit" / "reference").iterdir()) == \
        ["__init__.py", "lesson03.py"]
    summary = r.summary(out, p, course)
    assert "reference code: coursekit/reference/lesson03.py ships the answers of 03_c" in summary
    assert "course's own code of `03_c`" in (out / "README.md").read_text()


@pytest.mark.parametrize("spec, refs, words", [
    ("08", "04", "lesson 04's reference code builds on lesson 03: ship it too (--with-reference 03-04)"),
    ("04", "01", "lesson 01 has no reference code"),
    ("04", "07", "--with-reference: no lesson 07"),
])
def test_refuses_reference_code_that_cannot_work(course, tmp_path, spec, refs, words) -> None:
    from grader.authoring import release as r

    with pytest.raises(r.ReleaseError) as refused:
        r.build(tmp_path / "b", spec, course=course, with_reference=refs)
    assert "\n" not in str(refused.value)
    assert words in str(refused.value), refused.value
    assert not (tmp_path / "b").exists()


# ---- a fresh environment made from the bundle's own files --------------------------------

def _venv(bundle: Path, where: Path) -> Path:
    """A new virtual environment with the bundle installed (``pip install -e .``).

    To avoid downloading torch again, the venv sees the system's packages through one .pth
    line naming the system site-packages (like ``--system-site-packages``, but the system's
    own .pth files are not run, so the course repository's editable install of ``grader``
    and ``coursekit`` stays invisible); pip and setuptools come from there too
    (``--without-pip``: the venv's bundled setuptools 65 cannot build wheels).
    ``--no-index``: the bundle's pins are already satisfied; nothing is downloaded.
    """
    venv = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    python = venv / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "_system_site.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    proc = subprocess.run([str(python), "-m", "pip", "install", "--no-index", "--no-build-isolation",
                           "-e", "."], cwd=bundle, capture_output=True, text=True, timeout=600,
                          env=_clean_env())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return python


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["MPLBACKEND"] = "Agg"
    return env


RUN_LESSON = r"""
import json, sys
import nbformat
from nbclient import NotebookClient
nb = nbformat.read(sys.argv[1], as_version=4)
probe = nbformat.v4.new_code_cell("import coursekit, importlib.util, sys\n"
    "print(sys.executable); print(coursekit.__file__); print(importlib.util.find_spec('grader'))")
nb.cells.append(probe)
NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
               resources={"metadata": {"path": sys.argv[2]}}).execute()
print(json.dumps(nb))
"""


def _run_lesson(python: Path, notebook: Path) -> dict:
    proc = subprocess.run([str(python), "-c", RUN_LESSON, str(notebook), str(notebook.parent)],
                          capture_output=True, text=True, timeout=600, cwd=notebook.parent,
                          env=_clean_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    nb = json.loads(proc.stdout)
    for cell in nb["cells"]:
        if isinstance(cell["source"], list):
            cell["source"] = "".join(cell["source"])
    return nb


def _test_cells(nb: dict) -> list[dict]:
    return [c for c in nb["cells"] if c["cell_type"] == "code"
            and c["metadata"].get("nbgrader", {}).get("grade")
            and not c["metadata"]["nbgrader"].get("solution")]


def _errors(cell: dict) -> list[str]:
    return [o["ename"] for o in cell.get("outputs", []) if o["output_type"] == "error"]


def _probe(nb: dict, venv_python: Path, bundle: Path) -> None:
    out = "".join(o.get("text", "") for o in nb["cells"][-1]["outputs"]).split("\n")
    assert Path(out[0]).parent == venv_python.parent, out   # the kernel is the venv's python
    assert Path(out[1]).is_relative_to(bundle), out          # coursekit comes from the bundle
    assert out[2] == "None", out                             # and no grader package exists


def _bundle_env(tmp_path_factory, *args: str) -> tuple[Path, Path, str]:
    """A bundle built with ``grader release OUT *args`` and a fresh venv with it installed;
    returns the venv's python, the bundle and what release printed."""
    where = tmp_path_factory.mktemp("venv-bundle")
    out = where / "course"
    proc = release(out, *args)
    assert proc.returncode == 0, proc.stderr
    return _venv(out, where), out, proc.stdout


@pytest.fixture(scope="module")
def fresh_env(tmp_path_factory) -> tuple[Path, Path]:
    python, out, _ = _bundle_env(tmp_path_factory, "--lessons", "01")
    return python, out


def test_lesson_01_opens_and_its_visible_tests_fail_on_blank_exercises(fresh_env) -> None:
    python, out = fresh_env
    notebook = out / "lessons" / FIRST / f"{FIRST}.ipynb"
    nb = _run_lesson(python, notebook)
    _probe(nb, python, out)
    tests = _test_cells(nb)
    assert len(tests) == 3
    for cell in tests:
        assert _errors(cell) == ["NotImplementedError"], (cell["source"][:80], cell["outputs"])
    # nbgrader's Validate, as the student README shows it, from the bundle's folder
    proc = subprocess.run([str(python), "-m", "nbgrader", "validate", str(notebook.relative_to(out))],
                          cwd=out, capture_output=True, text=True, timeout=600, env=_clean_env())
    assert "VALIDATION FAILED ON 3 CELL(S)!" in proc.stdout, proc.stdout + proc.stderr
    others = [c for c in nb["cells"] if c["cell_type"] == "code" and c not in tests]
    for cell in others:  # the setup, data and scratch cells run fine
        if "dot_scores(" not in cell["source"] and "attention(" not in cell["source"]:
            assert not _errors(cell), cell["source"][:80]


def _answered(lesson: str, notebook: Path) -> dict:
    """The student notebook ``notebook`` with the reference answers pasted in place of each
    ``# YOUR CODE HERE`` stub, as a student who solved the lesson would have it."""
    solution = {c["metadata"]["nbgrader"]["grade_id"]: c["source"]
                for c in cells(catalogue.get(lesson).solution())
                if c["metadata"].get("nbgrader", {}).get("solution")}
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if cell["metadata"].get("nbgrader", {}).get("solution"):
            src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            for body in (m.group(2) for m in REGION.finditer(solution[grade_id])):
                stub = re.search(r"^[ \t]*# YOUR CODE HERE\n[ \t]*raise NotImplementedError\(\)\n?", src, re.M)
                assert stub, src
                src = src[:stub.start()] + body + src[stub.end():]
            assert "NotImplementedError()" not in src, src
            cell["source"] = src
    return nb


def test_lesson_01_visible_tests_pass_with_the_solution_bodies_pasted_in(fresh_env, tmp_path) -> None:
    python, out = fresh_env
    nb = _answered(FIRST, out / "lessons" / FIRST / f"{FIRST}.ipynb")
    assert sum(1 for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("solution")) == 3
    answered = tmp_path / f"{FIRST}.ipynb"
    answered.write_text(json.dumps(nb), encoding="utf-8")
    nb = _run_lesson(python, answered)
    for cell in nb["cells"]:
        assert not _errors(cell), (cell["source"][:80], cell["outputs"])
    for cell in _test_cells(nb):
        text = "".join(o.get("text", "") for o in cell["outputs"])
        assert "visible tests passed" in text, cell["outputs"]
        assert not [o for o in cell["outputs"] if o.get("name") == "stderr"], cell["outputs"]
    proc = subprocess.run([str(python), "-m", "nbgrader", "validate", str(answered)],
                          cwd=out, capture_output=True, text=True, timeout=600, env=_clean_env())
    assert "Success! Your notebook passes all the tests." in proc.stdout, proc.stdout + proc.stderr


# ---- a later lesson in a bundle: the student's own earlier notebook, or the reference -------

L03, L04 = "03_scaled_dot_product_attention", "04_multi_head_attention"

RUN_SETUP = r"""
import json, sys
import nbformat
from nbclient import NotebookClient
nb = nbformat.read(sys.argv[1], as_version=4)
nb.cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "setup"]
nb.cells.append(nbformat.v4.new_code_cell(
    "import coursekit; print(coursekit.__file__); print(scaled_dot_product_attention.__module__)"))
NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
               resources={"metadata": {"path": sys.argv[2]}}).execute()
errors = [f"{o.ename}: {o.evalue}" for o in nb.cells[0].outputs if o.output_type == "error"]
print("ERROR " + errors[0] if errors else "".join(o.get("text", "") for o in nb.cells[-1].outputs).strip())
"""


def _setup_of(python: Path, notebook: Path, bundle: Path | None = None) -> str:
    """Run only the setup cell of ``notebook`` in a kernel of ``python``, then report where
    the earlier lesson's code came from (or the error the setup cell raised)."""
    env = _clean_env()
    if bundle is not None:  # another bundle than the one installed in the venv
        env["PYTHONPATH"] = str(bundle)
    proc = subprocess.run([str(python), "-c", RUN_SETUP, str(notebook), str(notebook.parent)],
                          capture_output=True, text=True, timeout=600, cwd=notebook.parent, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip()


@pytest.fixture(scope="module")
def later_env(tmp_path_factory) -> tuple[Path, Path]:
    python, out, said = _bundle_env(tmp_path_factory, "--lessons", "03-04")
    assert not list((out / "coursekit" / "reference").glob("lesson*.py"))
    assert f"builds on: {L04} runs on the students' own {L03}" in said
    return python, out


def test_a_later_lesson_names_the_unfinished_lesson_it_builds_on(later_env) -> None:
    python, out = later_env
    said = _setup_of(python, out / "lessons" / L04 / f"{L04}.ipynb")
    assert said.startswith("ERROR EarlierLessonError: This lesson builds on your lesson 03"), said
    assert "`scaled_dot_product_attention`" in said and "finish lesson 03" in said, said


def test_a_later_lesson_runs_on_the_students_own_earlier_notebook(later_env, tmp_path) -> None:
    python, out = later_env
    own = out / "lessons" / L03 / f"{L03}.ipynb"
    blank = own.read_bytes()
    try:
        own.write_text(json.dumps(_answered(L03, own)), encoding="utf-8")
        said = _setup_of(python, out / "lessons" / L04 / f"{L04}.ipynb").splitlines()
        assert Path(said[0]).is_relative_to(out) and said[1] == "my_lesson03", said
        # the whole of lesson 04, answered, passes its visible tests on the student's lesson 03
        answered = out / "lessons" / L04 / "answered.ipynb"
        answered.write_text(json.dumps(_answered(L04, out / "lessons" / L04 / f"{L04}.ipynb")))
        nb = _run_lesson(python, answered)
        tests = _test_cells(nb)
        assert tests and all("visible tests passed" in "".join(o.get("text", "") for o in c["outputs"])
                             for c in tests), [c["outputs"] for c in tests]
    finally:
        own.write_bytes(blank)


def test_an_instructor_can_ship_the_earlier_lessons_reference_code(later_env, tmp_path) -> None:
    python, _ = later_env
    out = tmp_path / "course"
    proc = release(out, "--lessons", "04", "--with-reference", "03")
    assert proc.returncode == 0, proc.stderr
    assert "reference code: coursekit/reference/lesson03.py ships the answers" in proc.stdout
    said = _setup_of(python, out / "lessons" / L04 / f"{L04}.ipynb", bundle=out).splitlines()
    assert Path(said[0]).is_relative_to(out), said  # this bundle's coursekit, not the venv's
    assert said[1] == "coursekit.reference.lesson03", said


def test_the_leak_scan_catches_a_planted_leak(tmp_path) -> None:
    """The scan of this file and grader.authoring.release's own refuse a bundle with a solution in it."""
    from grader.authoring import release as r

    out = tmp_path / "course"
    assert release(out, "--lessons", "01").returncode == 0
    body = REGION.search(next(c["source"] for c in cells(ROOT / "solutions" / FIRST / f"{FIRST}.ipynb")
                              if c["metadata"].get("nbgrader", {}).get("grade_id") == "softmax"))
    (out / "coursekit" / "helpers.py").write_text("def f(x, axis=-1):\n" + body.group(2))
    hits = [where for where, needle in secrets() if needle in bundle_text(out / "coursekit" / "helpers.py")]
    assert f"{FIRST} solution" in hits
    course = catalogue.COURSE
    assert any("helpers.py" in leak for leak in r.scan(out, r.plan([course.get(FIRST)], course), course))


def test_the_leak_scan_finds_given_code_that_repeats_an_answer(tmp_path, monkeypatch) -> None:
    """Issue 49: lesson 10's given block_forward repeats six lines of DecoderBlock.forward, and a
    forward returning block_forward(self, ...)[0] earned 4/4. The scan refuses such given code
    unless the exercise's grader refuses it (GIVEN_ANSWERS, proved by a planted bug); no given
    code of any lesson repeats an answer its grader would take."""
    from grader.authoring import release as r

    for lesson in catalogue.COURSE:
        for notebook in lesson.notebooks("student").values():
            assert r.repeated_answers(lesson, notebook) == [], notebook
    assert r.given_answers(catalogue.COURSE.get("05"))["LayerNorm"] == ("LayerNormFunction", "FastLayerNorm")
    lesson = catalogue.COURSE.get("10")
    assert r.given_answers(lesson) == {"DecoderBlock": ("block_forward",)}
    out = tmp_path / "course"
    assert release(out, "--lessons", "10").returncode == 0
    monkeypatch.setattr(r, "given_answers", lambda lesson: {})  # the grader takes block_forward
    leaks = r.scan(out, r.plan([lesson], catalogue.COURSE), catalogue.COURSE)
    assert f"lessons/{lesson.id}/{lesson.id}.ipynb: block_forward repeats 6 lines of DecoderBlock, and its " \
           f"grader does not refuse it (GIVEN_ANSWERS)" in leaks, leaks
