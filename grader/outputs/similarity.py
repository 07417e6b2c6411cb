"""Similarity flags: pairs of submissions whose code for a long exercise is unusually alike.

A flag is a prompt for the instructor to look, never a verdict. Per exercise, each
submission's code (the top-level function or class with the contract name) is normalised
so that cosmetic disguises vanish: comments, docstrings and annotations dropped, every name
the student chose (variables, parameters, helper methods, their own ``self.`` attributes)
replaced by one placeholder, methods in a canonical order. What is left is the code's
structure and the public names it uses (``torch``, ``self.linear1``, ``.masked_fill``).

Two submissions are compared on k-grams (``K`` tokens) of those tokens, counting only
*unusual* shared code. Expected code is the notebook's provided code (what every student
has, including earlier lessons' modules they may paste) and the course's reference answer
(what a correct answer looks like): a k-gram weighs the share of its ``SUB_K``-token pieces
that expected code lacks (nothing when it is expected code, a little when it is a small
variation of it), divided by the number of other students who share it too. A pair is flagged when its shared unusual code is
long (``min_shared`` weighted k-grams) and covers most of the smaller submission's unusual
code (``min_coverage``), or when it is very long whatever else differs
(``min_shared_alone``). Submissions whose code for a long exercise is identical, character
for character, are flagged whatever it resembles, when the student wrote at least
``min_identical_lines`` lines of it (:func:`identical`). Short exercises, where every correct answer looks the same, have
too little unusual code to reach the threshold; exercises whose reference solution is
shorter than ``min_reference_tokens`` are not compared at all.
"""

from __future__ import annotations

import ast
import builtins
import functools
import io
import itertools
import tokenize
from collections import Counter
from collections.abc import Set
from dataclasses import dataclass, field
from typing import Any

K = 12  # tokens per k-gram
SUB_K = 8  # a k-gram's novelty: the share of its SUB_K-grams that expected code lacks
PLACEHOLDER = "_"
_KEPT_METHODS = {"__init__", "forward", "encode", "decode", "extra_repr", "reset_parameters"}


@dataclass(frozen=True)
class Settings:
    min_reference_tokens: int = 140  # exercises shorter than this (reference answer) are skipped
    min_shared: float = 20.0  # weighted shared unusual k-grams
    min_coverage: float = 0.7  # of the smaller submission's unusual k-grams
    min_shared_alone: float = 60.0  # this much shared unusual code is a flag whatever the coverage
    min_identical_lines: int = 15  # identical code is a flag when the student wrote this many lines of it


@dataclass
class Unit:
    """One submission's code for one exercise."""

    student: str
    exercise: str
    source: str  # as the student wrote it
    first_line: int  # line of ``source`` in its cell (1-based), for listings
    grams: dict[tuple[str, ...], float]  # unusual k-gram -> its novelty (0..1]
    statements: dict[int, str]  # line in source -> normalised statement


@dataclass
class Flag:
    exercise: str
    a: Unit
    b: Unit
    shared: float  # weighted shared unusual k-grams
    coverage: float
    lines_a: set[int] = field(default_factory=set)  # lines of a.source shared with b
    lines_b: set[int] = field(default_factory=set)
    identical: bool = False  # the same code, character for character (comments included)


# --- finding the exercise's code --------------------------------------------------------

def _parse(source: str) -> ast.Module | None:
    """The cell's code without its IPython lines, or None if it is not Python."""
    from coursekit.catalogue import parse

    try:
        return parse(source)
    except ValueError:  # a null byte
        return None


@functools.lru_cache(maxsize=4096)
def _definitions(source: str) -> dict[str, tuple[str, int]]:
    """Top-level ``def``/``class`` of a cell: name -> (its source with decorators, first line)."""
    tree = _parse(source)
    found: dict[str, tuple[str, int]] = {}
    for node in tree.body if tree else []:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            start = min([d.lineno for d in node.decorator_list] + [node.lineno])
            found[node.name] = ("\n".join(source.splitlines()[start - 1:node.end_lineno]), start)
    return found


def exercise_source(cells: list[str], name: str) -> tuple[str, int] | None:
    """The last top-level ``def``/``class`` called ``name`` in ``cells`` (its source with
    decorators, and its first line), or None."""
    found = None
    for source in cells:
        found = _definitions(source).get(name, found)
    return found


# --- normalising ------------------------------------------------------------------------

def _bound_names(tree: ast.AST) -> set[str]:
    """Names the code binds itself (parameters, assignments, loop and comprehension targets,
    nested defs, imports, except handlers)."""
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store | ast.Del):
            bound.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node is not tree:
            bound.add(node.name)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return bound


def _own_attributes(tree: ast.AST, public: set[str]) -> set[str]:
    """Attributes of the object itself (``self.X``, whatever the first parameter is called)
    and helper methods, unless graders read them by name: the names a student chooses."""
    selves = {"self"}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.args.args:
                    selves.add(item.args.args[0].arg)
    own = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                node.value.id in selves:
            own.add(node.attr)
        if isinstance(node, ast.ClassDef):
            own |= {item.name for item in node.body if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)}
    return {a for a in own if a not in public and a not in _KEPT_METHODS}


class _Normaliser(ast.NodeTransformer):
    def __init__(self, bound: set[str], own_attrs: set[str], keep: str,
                 known: set[str] | None) -> None:
        self.bound, self.own_attrs, self.keep, self.known = bound, own_attrs, keep, known

    def _body(self, body: list[ast.stmt]) -> list[ast.stmt]:
        kept = [s for s in body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        return kept or [ast.Pass()]

    def generic_visit(self, node: ast.AST) -> ast.AST:
        for name in ("body", "orelse", "finalbody"):
            if isinstance(getattr(node, name, None), list) and getattr(node, name) and \
                    isinstance(getattr(node, name)[0], ast.stmt):
                setattr(node, name, self._body(getattr(node, name)))
        return super().generic_visit(node)

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if node.id in self.bound or (self.known is not None and node.id not in self.known
                                     and node.id != self.keep):
            node.id = PLACEHOLDER
        return node

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.arg, node.annotation = PLACEHOLDER, None
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.Attribute:
        self.generic_visit(node)
        if node.attr in self.own_attrs:
            node.attr = PLACEHOLDER
        return node

    def _def(self, node: Any) -> Any:
        node.returns = None
        node.decorator_list = [self.visit(d) for d in node.decorator_list]
        if node.name in self.own_attrs or (node.name in self.bound and node.name not in _KEPT_METHODS):
            node.name = PLACEHOLDER
        return self.generic_visit(node)

    visit_FunctionDef = visit_AsyncFunctionDef = _def

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.ClassDef:
        if node.name != self.keep and node.name in self.bound:
            node.name = PLACEHOLDER
        self.generic_visit(node)  # in place: a ClassDef's children are statements
        methods = [s for s in node.body if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef)]
        others = [s for s in node.body if s not in methods]

        def order(m: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[int, str]:
            return (0 if m.name == "__init__" else 1 if m.name != PLACEHOLDER else 2,
                    m.name if m.name != PLACEHOLDER else ast.unparse(m))

        ordered = sorted(methods, key=order)
        node.body = [*others, *ordered]
        return node

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.stmt:
        if node.value is None:
            return ast.Pass()
        return self.visit(ast.copy_location(ast.Assign(targets=[node.target], value=node.value), node))

    def visit_Global(self, node: ast.Global | ast.Nonlocal) -> ast.Pass:
        return ast.Pass()

    visit_Nonlocal = visit_Global


def _tokens(code: str) -> list[str]:
    skip = {tokenize.NL, tokenize.COMMENT, tokenize.ENCODING, tokenize.ENDMARKER}
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(code).readline):
        if tok.type in skip:
            continue
        out.append({tokenize.INDENT: "<in>", tokenize.DEDENT: "<out>", tokenize.NEWLINE: ";"}.get(tok.type, tok.string))
    return out


def grams(tokens: list[str], k: int = K) -> set[tuple[str, ...]]:
    if len(tokens) < k:
        return {tuple(tokens)} if tokens else set()
    return {tuple(tokens[i:i + k]) for i in range(len(tokens) - k + 1)}


def normalise(source: str, keep: str, public: set[str],
              known: set[str] | None = None) -> tuple[list[str], dict[int, str]]:
    """Tokens of the normalised code, and each leaf statement's normalised text by line.
    ``keep`` is the exercise's own name; ``public`` the attribute names graders read;
    ``known`` (if given) the global names the lesson provides: any other global name is
    the student's own choice (a helper they defined) and becomes the placeholder too."""
    tree = _parse(source)
    if tree is None:
        return [], {}
    bound = _bound_names(tree) - {keep}
    own = _own_attributes(tree, public)
    normalised = _Normaliser(bound, own, keep, known).visit(tree)
    statements: dict[int, str] = {}  # nodes keep their original line numbers through the transformation
    for node in ast.walk(normalised):
        if isinstance(node, ast.stmt) and not hasattr(node, "body") and hasattr(node, "lineno") \
                and not isinstance(node, ast.Pass):
            text = ast.unparse(node)
            for line in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                statements.setdefault(line, text)
    return _tokens(ast.unparse(normalised)), statements


def public_names(texts: list[str]) -> set[str]:
    """The attribute names that test code (hidden and visible tests) reads: ``x.name``,
    ``getattr(x, "name")`` and the parts of dotted strings such as ``"linear1.weight"``.
    A student cannot rename those without losing points, so they are kept."""
    names: set[str] = set()
    for text in texts:
        tree = _parse(text)
        for node in ast.walk(tree) if tree else []:
            if isinstance(node, ast.Attribute):
                names.add(node.attr)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                names.update(p for p in node.value.split(".") if p.isidentifier())
    return names


def top_level_names(cells: list[str]) -> set[str]:
    """Names the code binds at its top level (imports, definitions, assignments)."""
    names: set[str] = set()
    for source in cells:
        tree = _parse(source)
        for node in tree.body if tree else []:
            names |= _bound_names(ast.Module(body=[node], type_ignores=[])) if not \
                isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) else {node.name}
    return names


def provided_tokens(cells: list[str], public: set[str], known: set[str]) -> list[list[str]]:
    """Normalised tokens of the provided code, each top-level statement on its own."""
    found = []
    for source in cells:
        tree = _parse(source)
        if tree is None:
            continue
        for node in tree.body:
            segment = ast.get_source_segment(source, node, padded=False)
            if segment:
                found.append(normalise(segment, getattr(node, "name", ""), public, known)[0])
    return found


@dataclass
class Expected:
    """Code every correct submission may contain: provided code and the reference answer."""

    grams: set[tuple[str, ...]]
    sub_grams: set[tuple[str, ...]]

    @classmethod
    def of(cls, streams: list[list[str]]) -> Expected:
        return cls(set().union(*(grams(t) for t in streams)),
                   set().union(*(grams(t, SUB_K) for t in streams)))

    def novelty(self, gram: tuple[str, ...]) -> float:
        if gram in self.grams:
            return 0.0
        subs = grams(list(gram), SUB_K)
        return sum(1 for g in subs if g not in self.sub_grams) / len(subs)


# --- comparing --------------------------------------------------------------------------

def make_unit(student: str, exercise: str, cells: list[str], context: Context,
              expected: Expected) -> Unit | None:
    found = exercise_source(cells, exercise)
    if found is None:
        return None
    source, first = found
    tokens, statements = context.normalise(source, exercise)
    novel = {g: n for g in grams(tokens) if (n := expected.novelty(g)) > 0}
    return Unit(student, exercise, source, first, novel, statements)


def compare(units: list[Unit], settings: Settings = Settings()) -> list[Flag]:
    """Flags among ``units`` (one exercise)."""
    df: Counter[tuple[str, ...]] = Counter()
    for unit in units:
        df.update(unit.grams.keys())
    flags = []
    for a, b in itertools.combinations(units, 2):
        if not a.grams or not b.grams:
            continue
        common = a.grams.keys() & b.grams.keys()
        if not common:
            continue
        shared = sum(a.grams[g] / (df[g] - 1) for g in common)  # df - 1: the pair counts once
        coverage = sum(a.grams[g] for g in common) / min(sum(a.grams.values()), sum(b.grams.values()))
        if shared >= settings.min_shared and \
                (coverage >= settings.min_coverage or shared >= settings.min_shared_alone):
            flags.append(Flag(a.exercise, a, b, round(shared, 1), round(coverage, 3)))
    flags.sort(key=lambda f: -f.shared)
    return flags


def identical(units: list[Unit], flagged: list[Flag], handout: Set[str] = frozenset(),
              min_lines: int = Settings.min_identical_lines) -> list[Flag]:
    """Flags for submissions whose code for the exercise is the same, character for
    character (trailing spaces aside), even where it is the reference answer's, when the
    student wrote at least ``min_lines`` lines of it (lines that are not the ``handout``'s):
    that many lines written apart are seldom identical, comments and blank lines included,
    where a few lines the contract dictates may well be. One flag per student beyond the
    first of each group; pairs already flagged are marked."""
    groups: dict[str, list[Unit]] = {}
    for unit in units:
        text = "\n".join(line.rstrip() for line in unit.source.strip().splitlines())
        written = [line for line in text.splitlines() if line.strip() and line.strip() not in handout]
        if len(written) >= min_lines:
            groups.setdefault(text, []).append(unit)
    seen = {frozenset((f.a.student, f.b.student)): f for f in flagged}
    new = []
    for same in (g for g in groups.values() if len(g) > 1):
        for other in same[1:]:
            flag = seen.get(frozenset((same[0].student, other.student)))
            if flag is None:
                flag = Flag(same[0].exercise, same[0], other, 0.0, 1.0)
                flag.shared = round(sum(same[0].grams.values()), 1)
                new.append(flag)
            flag.identical = True
    return new


def mark_shared_lines(flag: Flag, expected_statements: set[str]) -> None:
    """Lines of both listings whose normalised statement the other has too (and that is
    neither provided nor the reference's)."""
    sa = {t for t in flag.a.statements.values() if t not in expected_statements}
    sb = {t for t in flag.b.statements.values() if t not in expected_statements}
    both = sa & sb
    flag.lines_a = {line for line, t in flag.a.statements.items() if t in both}
    flag.lines_b = {line for line, t in flag.b.statements.items() if t in both}


# --- a class ----------------------------------------------------------------------------

@dataclass
class Context:
    """What every student of a lesson was given, and the reference answers."""

    public: set[str]  # attribute names graders read
    known: set[str]  # global names the lesson provides, and builtins
    provided: list[list[str]]  # normalised tokens of each provided statement
    provided_statements: set[str]
    reference: dict[str, str]  # exercise -> reference source
    handout: dict[str, set[str]] = field(default_factory=dict)  # exercise -> its handout lines
    _cache: dict[tuple[str, str], tuple[list[str], dict[int, str]]] = field(default_factory=dict, repr=False)

    def normalise(self, source: str, name: str) -> tuple[list[str], dict[int, str]]:
        """Normalised with this lesson's names; cached (classes share much code)."""
        key = (source, name)
        if key not in self._cache:
            self._cache[key] = normalise(source, name, self.public, self.known)
        return self._cache[key]


def lesson_context(lesson_id: str) -> Context:
    """What every student of the lesson was given (the student notebook's code and the
    earlier lessons' reference modules they may import), the names graders read (hidden
    tests, visible tests) and the reference answers (the solutions notebook)."""
    from coursekit import catalogue
    from grader.testkit.lessons import hidden_test_file

    lesson = catalogue.get(lesson_id)
    student = catalogue.code_cells(catalogue.read_json(lesson.student()))
    code = [cell["source"] for cell in student]
    tests = [cell["source"] for cell in student if catalogue.is_autograder_test(cell)]
    public = public_names(tests + [hidden_test_file(lesson.id).read_text(encoding="utf-8")])
    code += [earlier.reference_file.read_text(encoding="utf-8")
             for earlier in catalogue.COURSE.before(lesson) if earlier.reference_file.is_file()]
    known = top_level_names(code) | set(dir(builtins))
    statements: set[str] = set()
    for source in code:
        tree = _parse(source)
        for node in tree.body if tree else []:
            segment = ast.get_source_segment(source, node) or ""
            statements |= set(normalise(segment, getattr(node, "name", ""), public, known)[1].values())
    solution = catalogue.code_cells(catalogue.read_json(lesson.solution()))
    answers = [cell["source"] for cell in solution]
    reference: dict[str, str] = {}
    for cell in solution:
        name = catalogue.grade_id(cell) or ""
        if catalogue.is_solution(cell) and (found := exercise_source(answers, name)):
            reference[name] = found[0]
    handout = {name: {line.strip() for line in found[0].splitlines()}
               for name in reference if (found := exercise_source(code[:len(student)], name))}
    return Context(public, known, provided_tokens(code, public, known), statements, reference, handout)


def eligible(context: Context, exercises: list[str], settings: Settings = Settings()) -> list[str]:
    """The exercises long enough to compare (their reference answer, normalised)."""
    long_enough = []
    for name in exercises:
        source = context.reference.get(name)
        if source and len(context.normalise(source, name)[0]) >= settings.min_reference_tokens:
            long_enough.append(name)
    return long_enough


def class_flags(lesson: str, cells_by_student: dict[str, list[str]], exercises: list[str],
                settings: Settings = Settings(), context: Context | None = None) -> dict[str, list[Flag]]:
    """Flags per eligible exercise of a class; ``cells_by_student`` are the code cells each
    student's notebook runs when graded."""
    context = context or lesson_context(lesson)
    flags = {}
    for name in eligible(context, exercises, settings):
        ref_tokens, ref_statements = context.normalise(context.reference[name], name)
        expected = Expected.of([*context.provided, ref_tokens])
        units = [u for s, cells in sorted(cells_by_student.items())
                 if (u := make_unit(s, name, cells, context, expected)) is not None]
        found = compare(units, settings)
        found += identical(units, found, context.handout.get(name, set()), settings.min_identical_lines)
        for flag in found:
            if flag.identical:  # every line is shared
                flag.lines_a = set(range(1, len(flag.a.source.splitlines()) + 1))
                flag.lines_b = set(range(1, len(flag.b.source.splitlines()) + 1))
            else:
                mark_shared_lines(flag, context.provided_statements | set(ref_statements.values()))
        flags[name] = found
    return flags
