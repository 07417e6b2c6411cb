"""``python -m grader release OUT [--lessons 01-04] [--with-reference 03]``: the bundle an
instructor hands out.

A bundle holds what students need and nothing secret:

- the chosen lessons' folders ``lessons/<id>/`` (the generated student notebooks);
- the datasets those lessons declare in the catalogue (``coursekit.catalogue``);
- the public helpers ``coursekit/`` *without* the generated reference modules
  ``coursekit/reference/lessonNN.py`` (each one is lesson NN's answers): a later lesson
  runs on the student's own notebooks of the lessons it builds on
  (``coursekit.earlier.lesson_code``). An instructor ships some of them on purpose, e.g.
  once those lessons are due: ``--with-reference 03,04``, or ``--with-references`` for every
  lesson the bundled ones build on; the summary lists each one shipped;
- a student README (how to install per OS: the CPU build of torch on Linux and Windows),
  a ``pyproject.toml`` and ``requirements.txt`` installing ``coursekit`` with the course's
  pins of what a student runs (``student-dependencies`` in ``pyproject.toml``), and
  ``environment.yml`` (from ``grader/common/templates``);
- in each lesson's opening cell, the advice to grade yourself with ``python -m grader
  check`` (a command of the course repository) replaced by what this bundle offers.

Never ``solutions/``, never the ``grader`` package (hidden tests). Before the bundle is
moved into place it is scanned for every solution region and hidden-test region of
``solutions/`` and for the source lines of ``grader/hidden``; a hit aborts the release.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from coursekit import catalogue
from coursekit.catalogue import Catalogue, Lesson, SelectionError
from coursekit.errors import UserError
from grader.check.notebook import BEGIN_HIDDEN_TESTS, BEGIN_SOLUTION
from grader.common.templating import render
from grader.i18n import said_lines
from grader.i18n.message import msg, said_by

_SKIP = {"__pycache__", ".ipynb_checkpoints", ".pytest_cache", ".DS_Store"}
_REGION = re.compile(r"### BEGIN (SOLUTION|HIDDEN TESTS)[^\n]*\n(.*?)### END \1", re.S)
_MARKERS = (BEGIN_SOLUTION, BEGIN_HIDDEN_TESTS)


class ReleaseError(UserError):
    """The bundle cannot be built; ``str(exc)`` is a one-line reason."""


#: ``--lang``: the editions a bundle's lessons ship in.
LANGS = {"en": ("en",), "zh": ("zh",), "both": ("en", "zh")}


@dataclass
class BundlePlan:
    lessons: list[Lesson]
    datasets: list[str] = field(default_factory=list)
    references: list[Lesson] = field(default_factory=list)  # reference modules that ship
    uses_own: dict[str, list[Lesson]] = field(default_factory=dict)  # lesson id -> the students' own
    not_bundled: list[Lesson] = field(default_factory=list)  # of those, the ones not in the bundle
    lang: str = "en"                                          # en, zh or both (--lang)

    def editions(self, lesson: Lesson) -> list[str]:
        """The editions of ``lesson`` this bundle ships: those ``--lang`` asks for that the
        lesson has, else its English one."""
        return [e for e in LANGS[self.lang] if e in lesson.editions] or ["en"]

    def notebook(self, lesson: Lesson, edition: str | None = None) -> str:
        """``lessons/<id>/<id>[.zh].ipynb``: the path of one of its notebooks in the bundle."""
        editions = self.editions(lesson)
        edition = edition if edition in editions else editions[0]
        return f"lessons/{lesson.id}/{lesson.notebook('student', edition).name}"

    @property
    def untranslated(self) -> list[Lesson]:
        """Lessons without an edition ``--lang`` asks for: they ship in English only."""
        return [lesson for lesson in self.lessons
                if any(e not in lesson.editions for e in LANGS[self.lang])]

    def keeps(self, lesson: Lesson, path: Path) -> bool:
        """Whether a file of the lesson's folder ships: its notebooks in this bundle's
        editions, and its figures in them (``name.zh.png`` in a Chinese bundle, where it
        exists; ``name.png`` otherwise)."""
        editions = self.editions(lesson)
        name = path.name
        if name.endswith(".ipynb"):
            return any(name == lesson.notebook("student", e).name for e in editions)
        stem, dot, suffix = name.rpartition(".")
        for edition, mark in catalogue.EDITIONS.items():
            if mark and stem.endswith(mark):           # a figure of another edition
                return edition in editions
        variants = [path.with_name(f"{stem}{catalogue.EDITIONS[e]}{dot}{suffix}") for e in editions]
        return "en" in editions or not any(v.is_file() for v in variants)


def select(spec: str | None, course: Catalogue, option: str = "--lessons") -> list[Lesson]:
    """The lessons ``spec`` names (``01-04``, ``01,03,05-07``, ids, ``all``) among ``course``."""
    if not course.lessons:
        raise ReleaseError(msg("no lessons found in lessons/"))
    try:
        return course.select(spec)
    except SelectionError as exc:
        raise ReleaseError(msg("{option}: {problem}", option=option, problem=said_by(exc))) from None


def plan(lessons: list[Lesson], course: Catalogue, references: list[Lesson] | None = None,
         all_references: bool = False) -> BundlePlan:
    """What a bundle of ``lessons`` holds. ``references``: the lessons whose reference
    module ships; ``all_references``: those of every lesson the bundled ones build on."""
    bundled = {lesson.id for lesson in lessons}
    needs = {lesson.id: course.builds_on(lesson) for lesson in lessons}
    if all_references:
        wanted = {dep.id: dep for deps in needs.values() for dep in deps}
        references = [dep for _, dep in sorted(wanted.items()) if dep.reference_file.is_file()]
    references = list(references or [])
    shipped = {ref.id for ref in references}
    for ref in references:
        if not ref.reference_file.is_file():
            raise ReleaseError(msg("--with-reference: lesson {lesson} has no reference code "
                                   "(it exports nothing to later lessons)", lesson=ref.number))
        missing = [dep for dep in course.builds_on(ref) if dep.id not in shipped]
        if missing:
            numbers = [d.number for d in missing]
            selection = catalogue.spec_of([r.number for r in references] + numbers)
            if len(missing) > 1:
                raise ReleaseError(msg("--with-reference: lesson {lesson}'s reference code builds on "
                                       "lessons {lessons}: ship those too (--with-reference {selection})",
                                       lesson=ref.number, lessons=", ".join(numbers), selection=selection))
            raise ReleaseError(msg("--with-reference: lesson {lesson}'s reference code builds on lesson "
                                   "{earlier_lesson}: ship it too (--with-reference {selection})",
                                   lesson=ref.number, earlier_lesson=numbers[0], selection=selection))
    result = BundlePlan(lessons=list(lessons), references=references)
    for lesson in lessons:
        own = [dep for dep in needs[lesson.id] if dep.id not in shipped]
        if own:
            result.uses_own[lesson.id] = own
        result.not_bundled += [dep for dep in own
                               if dep.id not in bundled and dep not in result.not_bundled]
    result.not_bundled.sort(key=lambda lesson: lesson.number)
    datasets = {name for lesson in [*lessons, *references] for name in lesson.datasets}
    for name in sorted(datasets):
        if not (course.root / "datasets" / name).is_dir():
            raise ReleaseError(msg("the lessons use datasets/{dataset}, which is missing", dataset=name))
    result.datasets = sorted(datasets)
    return result


def _copy_tree(src: Path, dst: Path, keep=lambda path: True) -> None:
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        if _SKIP.intersection(rel.parts) or path.suffix == ".pyc" or not path.is_file():
            continue
        if not keep(path):
            continue
        target = dst / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)


def _name(requirement: str) -> str:
    """The normalized name of a requirement (``Foo_Bar[x]==1; marker`` -> ``foo-bar``)."""
    return canonicalize_name(Requirement(requirement).name)


def _pins(root: Path) -> tuple[str, list[str], str]:
    """The course's version, the pins a student installs (``student-dependencies`` of
    ``[tool.attention-course]``; every pin when the table is absent) and
    ``requires-python``."""
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    project = config["project"]
    pins = list(project["dependencies"])
    wanted = config.get("tool", {}).get("attention-course", {}).get("student-dependencies")
    if wanted is not None:
        names = {_name(n) for n in wanted}
        pins = [pin for pin in pins if _name(pin) in names]
    return project.get("version", "0.0.0"), pins, project.get("requires-python", ">=3.11")


# --- self-check advice ---------------------------------------------------------------------

#: What each lesson says after its ``grader check`` fence, for students on a JupyterHub
#: (nbgrader's release of lessons/ has no ``grader`` either); a bundle replaces both.
HUB_ADVICE = {
    "en": "On a JupyterHub, or in a student edition without the `grader` package, press "
          "**Validate** in the notebook's toolbar instead: it runs every visible test from a "
          "fresh kernel, and the hidden tests run when your work is graded.",
    "zh": "在 JupyterHub 上，或者在不含 `grader` 包的学生版里，请改为点击笔记本工具栏里的 "
          "**Validate**：它在新的内核里从头运行所有可见测试；隐藏测试在评分时运行。",
}
_CHECK_FENCE = re.compile(r"```[^\n]*\n\s*python -m grader check (?P<path>\S+\.ipynb)\s*\n```"
                          r"(?:\n\n(?:" + "|".join(re.escape(a) for a in HUB_ADVICE.values()) + "))?")
_ADVICE = {
    "en": "(This student edition has no hidden tests and no `grader`: press **Validate** in "
          "the notebook's toolbar, or run the command above, to run every visible test from "
          "a fresh kernel; your instructor's grader runs the hidden tests when you hand in.)",
    "zh": "（这个学生版不含隐藏测试，也不含 `grader`：点击笔记本工具栏的 **Validate**，或运行上面的"
          "命令，在新的内核里从头运行所有可见测试；提交后，老师的评分程序会运行隐藏测试。）",
}


def bundle_advice(notebook: Path) -> bool:
    """Rewrite a lesson's advice to run ``python -m grader check`` (the course repository's
    command) into what a student bundle offers: nbgrader's Validate. Only prose cells
    without nbgrader metadata change (no checksum is involved); True when one did."""
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    edition = catalogue.COURSE.edition_of(notebook)
    changed = False
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "markdown" or catalogue.cell_role(cell) is not catalogue.Role.PROSE:
            continue
        source = catalogue.cell_source(cell)
        new = _CHECK_FENCE.sub(lambda m: f"```\nnbgrader validate {m.group('path')}\n```\n\n"
                               f"{_ADVICE.get(edition, _ADVICE['en'])}", source)
        if new != source:
            cell["source"] = new.splitlines(keepends=True)
            changed = True
    if changed:
        notebook.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return changed


# --- the leak scan ------------------------------------------------------------------------

def notebook_code(path: Path) -> str:
    return "\n".join(c["source"] for c in catalogue.code_cells(catalogue.read_json(path)))


def _text_of(path: Path) -> str:
    data = path.read_bytes()
    text = data.decode("utf-8", errors="ignore")
    if path.suffix == ".ipynb":
        try:
            nb = json.loads(text)
        except json.JSONDecodeError:
            return text
        parts = [text]
        for cell in nb.get("cells", []):
            try:
                parts.append(catalogue.cell_source(cell))
            except TypeError:
                pass
            for output in cell.get("outputs", []):
                parts.append(json.dumps(output, ensure_ascii=False))
        return "\n".join(parts)
    return text


def _normal(text: str) -> str:
    return "\n".join(line.strip() for line in text.strip().splitlines() if line.strip())


def _notebooks(course: Catalogue, kind: str) -> list[Path]:
    return [path for lesson in course for path in lesson.notebooks(kind).values() if path.is_file()]


def secrets(course: Catalogue) -> list[tuple[str, str]]:
    """(where, text) of everything a bundle must never contain: every solution and
    hidden-test region of ``solutions/``, and every line of ``grader/hidden`` longer than
    30 characters, except import lines (``from __future__ import annotations`` is no secret)
    and lines that the public student notebooks show anyway (a visible test may build the
    same input as a hidden one: ``x = np.array([[1.0, 2.0]])``)."""
    root = course.root
    found = []
    for nb in _notebooks(course, "solution"):
        for kind, body in _REGION.findall(notebook_code(nb)):
            if _normal(body):
                found.append((f"{nb.relative_to(root)} ({kind.lower()})", _normal(body)))
    public = "\n".join(_normal(notebook_code(nb)) for nb in _notebooks(course, "student"))
    for path in sorted((root / "grader" / "hidden").glob("*.py")):
        for line in path.read_text(encoding="utf-8").splitlines():
            line = line.strip()
            if len(line) > 30 and not re.match(r"(from\s+\S+\s+)?import\s", line) \
                    and line not in public:
                found.append((str(path.relative_to(root)), line))
    return found


def exported_regions(lesson: Lesson) -> list[str]:
    """Solution regions of the lesson's cells tagged ``export``: they ship in its reference module."""
    if not lesson.solution().is_file():
        return []
    return [_normal(body) for cell in catalogue.code_cells(catalogue.read_json(lesson.solution()))
            if catalogue.EXPORT_TAG in catalogue.tags(cell)
            for kind, body in _REGION.findall(cell["source"]) if kind == "SOLUTION"]


def imports_grader(source: str) -> bool:
    """Whether Python ``source`` imports the ``grader`` package (read with ``ast``)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return True  # nothing in a bundle should be unreadable Python: report it
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "grader" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.level == 0 \
                and (node.module or "").split(".")[0] == "grader":
            return True
    return False


#: lines of an exercise's answer from which given code that repeats them is taken for a copy of
#: it (lesson 10's block_forward repeated six of DecoderBlock.forward's, issue 49; no other
#: given function of lessons 01-11 repeats more than two)
ANSWER_LINES = 4


def _answer_lines(source: str, owner: str | None = None) -> set[str]:
    """The lines of ``source`` that say something (15 characters or more), comments and
    spacing left out, and ``self.`` or ``owner.`` (a helper's first argument, the module it
    reads: ``block.attn_norm``) written ``<module>.``."""
    found = set()
    for line in source.splitlines():
        line = re.sub(r"\s+", " ", line.split("#")[0]).strip()
        line = re.sub(rf"\b(self{'|' + re.escape(owner) if owner else ''})\.", "<module>.", line)
        if len(line) >= 15:
            found.add(line)
    return found


def _functions(source: str) -> list[tuple[str, str | None, str]]:
    """``(name, first argument, source)`` of every function a cell defines, methods included."""
    code = re.sub(r"^\s*[%!].*$", "", source, flags=re.M)  # IPython's magics
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    return [(node.name, node.args.args[0].arg if node.args.args else None,
             ast.get_source_segment(code, node) or "")
            for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def given_answers(lesson: Lesson) -> dict[str, tuple[str, ...]]:
    """``GIVEN_ANSWERS`` of the lesson's hidden graders (read with ``ast``): for each exercise,
    the given code its grader refuses (``grader.testkit.parts.judged_alone``)."""
    path = lesson.root / "grader" / "hidden" / f"test_{lesson.id}.py"
    if not path.is_file():
        return {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "GIVEN_ANSWERS" for t in node.targets):
            return {str(k): tuple(v) for k, v in ast.literal_eval(node.value).items()}
    return {}


def repeated_answers(lesson: Lesson, notebook: Path) -> list[str]:
    """The functions that ``notebook`` (a student notebook of ``lesson``) gives, outside the
    exercises and their tests, which repeat ``ANSWER_LINES`` lines or more of an exercise's
    answer (its solution region in ``solutions/``), unless that exercise's grader refuses
    them: ``name repeats N lines of Exercise``."""
    if not lesson.solution().is_file():
        return []
    answers: dict[str, set[str]] = {}
    for cell in catalogue.code_cells(catalogue.read_json(lesson.solution())):
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if grade_id in lesson.graded:
            body = "\n".join(b for kind, b in _REGION.findall(catalogue.cell_source(cell)) if kind == "SOLUTION")
            answers.setdefault(grade_id, set()).update(_answer_lines(body))
    refused = given_answers(lesson)
    found = []
    for cell in catalogue.code_cells(catalogue.read_json(notebook)):
        if catalogue.cell_role(cell) in (catalogue.Role.ANSWER, catalogue.Role.TESTS):
            continue
        for name, owner, source in _functions(catalogue.cell_source(cell)):
            lines = _answer_lines(source, owner)
            for exercise, answer in answers.items():
                shared = len(lines & answer)
                if shared >= ANSWER_LINES and name not in refused.get(exercise, ()):
                    found.append(f"{name} repeats {shared} lines of {exercise}")
    return found


def scan(bundle: Path, p: BundlePlan, course: Catalogue) -> list[str]:
    """Leaks found in ``bundle``: ``file: what`` lines (empty when clean)."""
    shipped: dict[str, list[str]] = {}   # reference module -> the exported regions it holds
    for lesson in p.references:
        module = lesson.reference_file.relative_to(course.root).as_posix()
        shipped.setdefault(module, []).extend(exported_regions(lesson))
    leaks = []
    needles = secrets(course)
    for path in sorted(bundle.rglob("*")):
        if not path.is_file():
            continue
        rel = path.relative_to(bundle).as_posix()
        if rel.split("/")[0] in ("solutions", "grader"):
            leaks.append(f"{rel}: {rel.split('/')[0]}/ must not ship")
        text = _text_of(path)
        normal = _normal(text)
        for marker in _MARKERS:
            if marker in text:
                leaks.append(f"{rel}: contains {marker!r}")
        for where, needle in needles:
            # a module asked for ships its lesson's exported regions, and so any secret that is
            # part of one (lesson 10's RMSNorm begins as lesson 05's LayerNorm does)
            if needle in normal and not any(needle in region for region in shipped.get(rel, ())):
                leaks.append(f"{rel}: contains text of {where}")
        if path.suffix == ".py" and imports_grader(text):
            leaks.append(f"{rel}: imports the grader package, which does not ship")
    for lesson in p.lessons:  # given code that computes an exercise, and its grader takes it
        for edition in p.editions(lesson):
            notebook = bundle / p.notebook(lesson, edition)
            if notebook.is_file():
                leaks += [f"{p.notebook(lesson, edition)}: {what}, and its grader does not refuse it "
                          f"(GIVEN_ANSWERS)" for what in repeated_answers(lesson, notebook)]
    return leaks


# --- building -----------------------------------------------------------------------------

def build(out: str | Path, spec: str | None = None, course: Catalogue | None = None,
          force: bool = False, with_reference: str | None = None,
          with_references: bool = False, lang: str = "en") -> BundlePlan:
    """Build the bundle of the lessons ``spec`` selects into the new folder ``out``, in the
    editions ``lang`` names (``en``, ``zh`` or ``both``); a Chinese bundle's README is
    Chinese, one with both editions has ``README.md`` and ``README.zh.md``."""
    if lang not in LANGS:
        raise ReleaseError(msg("--lang: {language} is not one of {choices}", language=repr(lang),
                               choices=", ".join(LANGS)))
    course = course or catalogue.COURSE
    root = course.root
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        if not force:
            raise ReleaseError(msg("{folder} exists and is not empty (choose a new folder, or --force "
                                   "to replace it)", folder=out))
        if (out / "solutions").exists() or (out / ".git").exists():
            raise ReleaseError(msg("refusing to replace {folder}: it looks like a course repository", folder=out))
    lessons = select(spec, course.released())
    references = select(with_reference, course, "--with-reference") if with_reference else None
    p = plan(lessons, course, references, with_references)
    p.lang = lang
    version, pins, python = _pins(root)
    torch_pin = next((pin for pin in pins if _name(pin) == "torch"), "torch")
    reference_files = {lesson.reference_file for lesson in course}
    shipped = {lesson.reference_file for lesson in p.references}

    def keep_helper(path: Path) -> bool:
        return path not in reference_files or path in shipped

    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".bundle-", dir=out.parent) as tmp:
        stage = Path(tmp) / "bundle"
        for lesson in p.lessons:
            _copy_tree(lesson.student().parent, stage / "lessons" / lesson.id,
                       lambda path, lesson=lesson: p.keeps(lesson, path))
        for notebook in sorted((stage / "lessons").rglob("*.ipynb")):
            bundle_advice(notebook)
        _copy_tree(root / "coursekit", stage / "coursekit", keep_helper)
        for name in p.datasets:
            _copy_tree(root / "datasets" / name, stage / "datasets" / name)
        readmes = {"en": {"README.md": "release-README.md.j2"},
                   "zh": {"README.md": "release-README.zh.md.j2"},
                   "both": {"README.md": "release-README.md.j2", "README.zh.md": "release-README.zh.md.j2"}}
        files = {name: render(template, plan=p, torch_pin=torch_pin, python=python)
                 for name, template in readmes[lang].items()}
        files |= {
                 "pyproject.toml": render("release-pyproject.toml.j2", version=version, pins=pins,
                                          python=python),
                 "requirements.txt": render("release-requirements.txt.j2", pins=pins),
                 "environment.yml": render("release-environment.yml.j2", pins=pins)}
        for name, text in files.items():
            (stage / name).write_text(text, encoding="utf-8")
        leaks = scan(stage, p, course)
        if leaks:
            leak = msg("refusing to release, the bundle would leak: {leak}", leak=leaks[0])
            raise ReleaseError(leak if len(leaks) == 1 else
                               msg("{message} (and {count} more)", message=leak, count=len(leaks) - 1))
        if out.exists():
            shutil.rmtree(out)
        shutil.move(str(stage), out)
    return p


def _closed_spec(lessons: list[Lesson], course: Catalogue) -> str:
    """A --with-reference value for ``lessons`` and every lesson their code builds on."""
    numbers = {lesson.number for lesson in lessons}
    numbers |= {dep.number for lesson in lessons for dep in course.builds_on(lesson)}
    return catalogue.spec_of(numbers)


def summary(out: Path, p: BundlePlan, course: Catalogue | None = None, lang: str = "en") -> str:
    """What ``release`` wrote, in ``lang`` (the instructor's)."""
    course = course or catalogue.COURSE
    files = [f for f in Path(out).rglob("*") if f.is_file()]
    size = sum(f.stat().st_size for f in files)
    readme = {"zh": msg(" (README in Chinese)"), "both": msg(" (README.md and README.zh.md)")}
    lines = [msg("lessons:  {lessons}", lessons=", ".join(lesson.id for lesson in p.lessons)),
             *([msg("edition:  {edition}{readme}", edition=p.lang, readme=readme.get(p.lang, ""))]
               if p.lang != "en" else []),
             *([msg("note: in English only (no Chinese edition yet): {lessons}",
                    lessons=", ".join(lesson.id for lesson in p.untranslated))] if p.untranslated else []),
             msg("datasets: {datasets}", datasets=", ".join(p.datasets) or msg("(none)"))]
    if not p.references:
        lines.append(msg("reference code: none (no lesson's answers ship)"))
    bundled = {lesson.id for lesson in p.lessons}
    for ref in p.references:
        lines.append(msg("reference code: coursekit/reference/{file} ships the answers of {lesson}'s "
                         "exported exercises{bundled}", file=ref.reference_file.name, lesson=ref.id,
                         bundled=msg(" (a lesson of this bundle!)") if ref.id in bundled else ""))
    for lesson, own in p.uses_own.items():
        lines.append(msg("builds on: {lesson} runs on the students' own {lessons}", lesson=lesson,
                         lessons=", ".join(dep.id for dep in own)))
    if p.not_bundled:
        lines.append(msg("note: not in this bundle: {lessons}. Students keep their own notebooks of "
                         "those from an earlier handout, or ship the course's code: --with-reference "
                         "{spec}", lessons=", ".join(dep.id for dep in p.not_bundled),
                         spec=_closed_spec(p.not_bundled, course)))
    first = msg("wrote {folder}: {lessons} lesson(s), {files} files, {megabytes} MB", folder=out,
                lessons=len(p.lessons), files=len(files), megabytes=f"{size / 1e6:.2f}")
    return said_lines(first, lines, lang)
