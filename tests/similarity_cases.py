"""Cases for measuring the similarity flags (tests/grader/outputs/test_similarity.py, benchmarks/similarity.py).

- independent correct solutions of lessons 08 and 09's long exercises: the reference, the
  planted-bug sets' ALTERNATIVES and tests/fixtures/similarity/independent.py;
- copied-then-disguised pairs: each independent solution and a copy of it with every
  variable, parameter and own attribute renamed, methods in another order, docstrings
  dropped, comments added and the code reformatted.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import json
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "similarity"))

from coursekit import catalogue  # noqa: E402
from grader.check.notebook import cells_to_run, parse_notebook  # noqa: E402
from grader.outputs.similarity import _bound_names, _own_attributes, lesson_context  # noqa: E402

LESSONS = ("08_transformer", "09_training")


@dataclass
class Case:
    lesson: str
    exercise: str
    label: str  # "reference", "alternative: ...", "independent: ..."
    source: str | None  # the exercise cell's source (None: the reference's)
    notebook: dict


def reference_notebook(lesson: str) -> dict:
    return parse_notebook(catalogue.get(lesson).solution().read_bytes())


def with_cell(nb: dict, exercise: str, source: str) -> dict:
    nb = json.loads(json.dumps(nb))
    for cell in nb["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == exercise:
            cell["source"] = source
            return nb
    raise KeyError(exercise)


def independent_cases() -> list[Case]:
    import importlib

    from independent import SOLUTIONS

    cases = []
    for lesson in LESSONS:
        ref = reference_notebook(lesson)
        planted = importlib.import_module(f"planted.l{catalogue.get(lesson).number}")
        exercises = sorted({v.exercise for v in planted.ALTERNATIVES} | set(SOLUTIONS[lesson]))
        for exercise in exercises:
            cases.append(Case(lesson, exercise, "reference", None, ref))
            for variant in planted.ALTERNATIVES:
                if variant.exercise == exercise and variant.cell is None:
                    nb = variant.apply(ref)
                    cases.append(Case(lesson, exercise, f"alternative: {variant.description}",
                                      _cell_source(nb, exercise), nb))
            for style, source in SOLUTIONS[lesson].get(exercise, []):
                cases.append(Case(lesson, exercise, f"independent: {style}", source,
                                  with_cell(ref, exercise, source)))
    return cases


def _cell_source(nb: dict, exercise: str) -> str:
    for cell in nb["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == exercise:
            src = cell["source"]
            return "".join(src) if isinstance(src, list) else src
    raise KeyError(exercise)


def disguise(source: str, exercise: str, lesson: str) -> str:
    """A copy a student would hand in to hide where it came from: every name they may choose
    renamed (not the parameters and attributes the graders use), methods reversed,
    docstrings dropped, comments added, reformatted. It still earns full marks."""
    tree = ast.parse(source)
    contract = {exercise, "forward", "encode", "decode", "__init__"}
    signature = set()  # parameters of the contract's functions: graders pass them by name
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name in contract:
            signature |= {a.arg for a in node.args.args + node.args.kwonlyargs}
    imported = {(a.asname or a.name).split(".")[0] for n in ast.walk(tree) for a in getattr(n, "names", [])
                if isinstance(n, ast.Import | ast.ImportFrom)}
    names = {n: _alias(n) for n in _bound_names(tree) if n not in contract | imported | signature - {"self"}}
    target = next((n for n in tree.body if getattr(n, "name", None) == exercise), tree.body[-1])
    assigned = {n.attr for n in ast.walk(target) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)}
    methods = {n.name for n in ast.walk(target) if isinstance(n, ast.FunctionDef)}
    attrs = {a: _alias(a) for a in _own_attributes(target, graders_read(lesson)) & (assigned | methods)}

    class Rename(ast.NodeTransformer):
        def visit_Name(self, node):
            node.id = names.get(node.id, node.id)
            return node

        def visit_arg(self, node):
            node.arg = names.get(node.arg, node.arg)
            return self.generic_visit(node)

        def visit_Attribute(self, node):
            self.generic_visit(node)
            node.attr = attrs.get(node.attr, node.attr)
            return node

        def visit_FunctionDef(self, node):
            node.name = attrs.get(node.name, names.get(node.name, node.name))
            if node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant):
                node.body = node.body[1:] or [ast.Pass()]
            return self.generic_visit(node)

        def visit_ClassDef(self, node):
            node.body = [s for s in node.body
                         if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
            methods = [s for s in node.body if isinstance(s, ast.FunctionDef)]
            others = [s for s in node.body if s not in methods]
            node.body = others + methods[::-1]
            return self.generic_visit(node)

    code = ast.unparse(Rename().visit(tree))
    lines = []
    for i, line in enumerate(code.splitlines()):
        if line.strip().startswith(("def ", "return ", "if ", "for ")) and i % 2 == 0:
            lines.append(" " * (len(line) - len(line.lstrip())) + "# my own work, see the lecture notes")
        lines.append(line)
    return "\n".join(lines) + "\n"


def _alias(name: str) -> str:
    return f"v_{hashlib.sha1(name.encode()).hexdigest()[:6]}"


@functools.cache
def graders_read(lesson: str) -> frozenset[str]:
    """Attribute names the tests read: renaming those would cost the copier points."""
    return frozenset(lesson_context(lesson).public)


def copied_cases(cases: list[Case]) -> list[tuple[Case, Case]]:
    """(original, disguised copy) for every non-reference independent solution."""
    pairs = []
    for case in cases:
        if case.source is None:
            continue
        copy = disguise(case.source, case.exercise, case.lesson)
        pairs.append((case, Case(case.lesson, case.exercise, f"copy of {case.label}", copy,
                                 with_cell(reference_notebook(case.lesson), case.exercise, copy))))
    return pairs


def graded_cells(nb: dict) -> list[str]:
    """The code cells grading runs (what the class report compares)."""
    return [source for _, source in cells_to_run(parse_notebook(json.dumps(nb).encode()))]


def evaluate(cases: list[Case], settings):
    """Per exercise: (exercise, independent solutions, independently written pairs, of them
    flagged, copies, of them flagged, top score of an independent pair, copies' scores);
    and the false flags, the missed copies and the seconds spent comparing."""
    import itertools
    import time

    from grader.check import runner
    from grader.outputs.similarity import Settings, class_flags

    pairs = copied_cases(cases)
    rows, misses, false_flags, seconds = [], [], [], 0.0
    for lesson in LESSONS:
        context = lesson_context(lesson)
        exercises = list(dict.fromkeys(c[1] for c in runner.collect(lesson)))
        for exercise in sorted({c.exercise for c in cases if c.lesson == lesson}):
            independent = [c for c in cases if c.lesson == lesson and c.exercise == exercise]
            copies = [(a, b) for a, b in pairs if a.lesson == lesson and a.exercise == exercise]
            students = {c.label: graded_cells(c.notebook) for c in independent}
            students.update({b.label: graded_cells(b.notebook) for _, b in copies})
            started = time.perf_counter()
            flags = class_flags(lesson, students, exercises, settings, context).get(exercise)
            seconds += time.perf_counter() - started
            if flags is None:
                rows.append((exercise, len(independent), "-", "-", len(copies), "-", "too short", ""))
                continue
            everything = class_flags(lesson, students, exercises, Settings(min_shared=0, min_coverage=0),
                                     context)[exercise]
            scores = {frozenset((f.a.student, f.b.student)): f.shared for f in everything}
            flagged = {frozenset((f.a.student, f.b.student)): f for f in flags}
            copy_pairs = {frozenset((a.label, b.label)) for a, b in copies}
            all_pairs = {frozenset(p) for p in itertools.combinations(students, 2)}
            independent_pairs = all_pairs - copy_pairs
            fp = [flagged[p] for p in independent_pairs if p in flagged]
            found = [p for p in copy_pairs if p in flagged]
            false_flags += fp
            for a, b in copies:
                if frozenset((a.label, b.label)) not in flagged:
                    misses.append(f"{exercise}: {a.label}")
            top = max([scores.get(p, 0.0) for p in independent_pairs] or [0.0])
            copy_scores = sorted(scores.get(p, 0.0) for p in copy_pairs)
            rows.append((exercise, len(independent), len(independent_pairs), len(fp), len(copies), len(found),
                         f"{top:.1f}", " ".join(f"{x:.0f}" for x in copy_scores)))
    return rows, false_flags, misses, seconds
