"""The lessons of the course, and what each one is: the one list every part of the course reads.

A lesson is a folder ``NN_name`` holding its notebook, in ``solutions/`` (the reference,
with answers and hidden-test hooks) and in ``lessons/`` (the student version that
``nbgrader generate_assignment`` makes from it). :data:`LESSONS` declares each lesson once:
its id, title, the names a student writes (the graded contract of ``COURSE_SPEC.md``),
the datasets it uses and its editions. What its code says is read from the notebook
itself, with ``ast``: the cells it exports to later lessons (tagged ``export``), the names
they define, and the earlier lessons it builds on.

This module also holds what every reader of a notebook needs: choosing lessons
(:func:`select`: ``"01-04"``, ``"01,03,05-07"``, ``"all"``, full ids), nbgrader's cell roles
with nbgrader's own semantics (:func:`is_grade`, :func:`is_solution`, :func:`is_locked`,
:func:`is_autograder_test`), and a cell's source as one string (:func:`cell_source`).

Standard library only: students' notebooks import it (through :mod:`coursekit.earlier`),
and so do the grader and the authoring tools.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import Any

from .errors import UnknownLesson, UserError, sentence

ROOT = Path(__file__).resolve().parents[1]

#: Editions of a lesson and the suffix of their notebook's name: ``NN_name{suffix}.ipynb``.
EDITIONS: dict[str, str] = {"en": "", "zh": ".zh"}
#: Where a lesson's notebooks live: the reference (solution) and the student version.
KINDS: dict[str, str] = {"solution": "solutions", "student": "lessons"}

EXPORT_TAG = "export"  # a cell later lessons or the graders reuse (coursekit/reference/lessonNN.py)
DEMO_TAG = "demo"      # plots and long demonstrations, skipped when grading
SETUP_ID = "setup"     # grade_id of the locked cell of imports every lesson starts with

# A later lesson asks for an earlier one's code by calling one of these with its id or number.
LOADERS = ("lesson_code", "load_my_code")


@dataclass(frozen=True)
class Lesson:
    """One lesson. ``id`` is its folder and notebook name (``04_multi_head_attention``)."""

    id: str
    title: str
    graded: tuple[str, ...] = ()    # the names a student writes, graded by the hidden tests
    datasets: tuple[str, ...] = ()  # folders of datasets/ its code reads
    editions: tuple[str, ...] = ("en",)
    title_zh: str = ""              # the Chinese edition's title (docs/zh-glossary.md's terms)
    trains: bool = False            # its graded code builds torch.optim optimizers (the
    # grader's workers then start with torch._dynamo, which the first optimizer imports: seconds)
    root: Path = field(default=ROOT, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not re.fullmatch(r"\d\d_[a-z0-9_]+", self.id):
            raise ValueError(f"lesson id {self.id!r} is not NN_name (two digits, lower-case name)")
        unknown = set(self.editions) - set(EDITIONS)
        if unknown or "en" not in self.editions:
            raise ValueError(f"{self.id}: editions {self.editions} (known: {', '.join(EDITIONS)}; "
                             "en is the source of every other)")

    @property
    def number(self) -> str:
        return self.id[:2]

    def title_in(self, edition: str = "en") -> str:
        """The lesson's title in an edition's language (English where it has none)."""
        return self.title_zh if edition == "zh" and self.title_zh else self.title

    def heading(self, edition: str = "en") -> str:
        """The first line of the edition's notebook: ``# Lesson 01 · <title>``, ``# 第 01 课 · <标题>``."""
        if edition == "zh":
            return f"# 第 {self.number} 课 · {self.title_in('zh')}"
        return f"# Lesson {self.number} · {self.title}"

    def notebook(self, kind: str = "solution", edition: str = "en") -> Path:
        """``solutions/<id>/<id>.ipynb`` (kind ``solution``) or ``lessons/...`` (``student``);
        another edition's notebook sits beside it (``<id>.zh.ipynb``)."""
        if edition not in self.editions:
            raise KeyError(f"{self.id} has no {edition!r} edition (has {', '.join(self.editions)})")
        return self.root / KINDS[kind] / self.id / f"{self.id}{EDITIONS[edition]}.ipynb"

    def solution(self, edition: str = "en") -> Path:
        return self.notebook("solution", edition)

    def student(self, edition: str = "en") -> Path:
        return self.notebook("student", edition)

    def notebooks(self, kind: str = "solution") -> dict[str, Path]:
        """``{edition: path}`` of every edition."""
        return {edition: self.notebook(kind, edition) for edition in self.editions}

    @property
    def reference_module(self) -> str:
        """The module that holds the exported cells of the reference notebook."""
        return f"coursekit.reference.lesson{self.number}"

    @property
    def reference_file(self) -> Path:
        return self.root / "coursekit" / "reference" / f"lesson{self.number}.py"

    @property
    def source_notebook(self) -> Path:
        """The notebook the lesson's facts are read from: the reference where it exists (the
        course repository), else the student version (a student's bundle)."""
        solution = self.solution()
        return solution if solution.is_file() else self.student()

    def exported_ids(self) -> tuple[str, ...]:
        """Grade ids of the cells tagged ``export``, in notebook order."""
        return _facts(self.source_notebook).exported_ids

    def exports(self) -> tuple[str, ...]:
        """The names the exported cells define (functions, classes, assignments)."""
        return _facts(self.source_notebook).exports

    def builds_on(self) -> tuple[str, ...]:
        """Numbers of the earlier lessons whose code this lesson's code uses: imports of
        ``coursekit.reference.lessonNN`` and calls ``lesson_code("NN")``, read with ``ast``."""
        return _facts(self.source_notebook).builds_on


@dataclass(frozen=True)
class _Facts:
    exported_ids: tuple[str, ...]
    exports: tuple[str, ...]
    builds_on: tuple[str, ...]


def _facts(path: Path) -> _Facts:
    """What a notebook's code says (nothing when the notebook is not there)."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return _Facts((), (), ())
    return _read_facts(path, stat.st_mtime_ns, stat.st_size)


@cache
def _read_facts(path: Path, _mtime_ns: int, _size: int) -> _Facts:
    cells = code_cells(read_json(path))
    exported = [c for c in cells if EXPORT_TAG in tags(c)]
    names: list[str] = []
    for cell in exported:
        names += [n for n in defined_names(cell_source(cell)) if n not in names]
    numbers: set[str] = set()
    for cell in cells:
        numbers |= lessons_used(cell_source(cell))
    return _Facts(tuple(grade_id(c) or "" for c in exported), tuple(names), tuple(sorted(numbers)))


# --- the course's lessons ---------------------------------------------------------------

LESSONS: tuple[Lesson, ...] = (
    Lesson("01_attention_by_hand", "Attention by hand: 优 and 秀",
           graded=("dot_scores", "softmax", "attention"), editions=("en", "zh"),
           title_zh="手算注意力：优与秀"),
    Lesson("02_split_heads", "Splitting into heads, the BERT-keras way",
           graded=("split_qkv", "split_heads", "merge_heads"), editions=("en", "zh"),
           title_zh="拆分成多个头：BERT-keras 的做法"),
    Lesson("03_scaled_dot_product_attention", "Scaled dot-product attention, with masks",
           graded=("scaled_dot_product_attention", "causal_mask", "padding_mask"),
           editions=("en", "zh"), title_zh="缩放点积注意力与掩码"),
    Lesson("04_multi_head_attention", "Multi-head attention",
           graded=("MultiHeadAttention",),
           title_zh="多头注意力", editions=("en", "zh")),
    Lesson("05_layer_norm", "Layer normalisation (层规范化) versus batch normalisation (批量规范化)",
           graded=("layer_norm", "batch_norm", "layer_norm_backward", "LayerNorm"),
           title_zh="层规范化与批量规范化", editions=("en", "zh")),
    Lesson("06_gelu", "GELU, the activation of the feed-forward block",
           graded=("gelu", "gelu_tanh", "gelu_grad"),
           title_zh="GELU：前馈网络的激活函数", editions=("en", "zh")),
    Lesson("07_positional_encoding", "Positional encoding (位置编码) and scaled token embeddings",
           graded=("sinusoidal_positional_encoding", "PositionalEncoding", "TokenEmbedding"),
           editions=("en", "zh"),
           title_zh="位置编码与缩放的词元嵌入"),
    Lesson("08_transformer", "The whole Transformer: encoder, decoder, masks, greedy decoding",
           graded=("PositionwiseFeedForward", "EncoderLayer", "DecoderLayer", "Transformer",
                   "greedy_decode"),
           editions=("en", "zh"),
           title_zh="完整的 Transformer：编码器、解码器、掩码与贪心搜索"),
    Lesson("09_training", "Training the Transformer: 1234 → 一千二百三十四",
           graded=("noam_lr", "label_smoothed_nll", "train_step"), datasets=("numerals",),
           editions=("en", "zh"), trains=True,
           title_zh="训练 Transformer：1234 → 一千二百三十四"),
    Lesson("10_decoder_only",
           "Today's Transformer: a decoder-only model with RMSNorm, RoPE and SwiGLU",
           graded=("rms_norm", "RMSNorm", "rope_angles", "apply_rope", "SwiGLU", "DecoderBlock",
                   "DecoderLM", "lm_loss"),
           datasets=("numerals",), editions=("en", "zh"),
           title_zh="今天的 Transformer：RMSNorm、RoPE 与 SwiGLU 的只含解码器模型"),
    Lesson("11_generation", "Generating: a KV cache, sampling, and beam search",
           graded=("filter_logits", "sample", "decoder_step", "generate", "beam_search"),
           datasets=("numerals",), editions=("en", "zh"), title_zh="生成：键值缓存、采样与束搜索"),
    Lesson("12_attention_at_scale",
           "Attention at scale: FlashAttention's tiles, grouped-query attention, sliding windows",
           graded=("merge_softmax_stats", "flash_attention", "flash_attention_backward", "repeat_kv",
                   "sliding_window_mask", "GroupedQueryAttention"),
           # trains: grading its backward pass imports torch._dynamo (tests/grader/classgrade/test_classroom.py measures it)
           datasets=("numerals",), editions=("en", "zh"), trains=True,
           title_zh="大规模注意力：FlashAttention 的分块、分组查询注意力与滑动窗口"),
)


class SelectionError(UserError, ValueError):
    """A lesson selection that names no lesson; its argument a :class:`~coursekit.errors.Sentence`
    (``str(exc)`` its English, one line)."""


class Catalogue:
    """An ordered set of lessons in one copy of the course (``root``), looked up by id or number."""

    def __init__(self, lessons: Iterable[Lesson], root: Path = ROOT):
        self.root = Path(root)
        self.lessons = tuple(sorted((lesson if lesson.root == self.root else replace(lesson, root=self.root)
                                     for lesson in lessons), key=lambda lesson: lesson.number))
        numbers = [lesson.number for lesson in self.lessons]
        if len(set(numbers)) != len(numbers):
            raise ValueError(f"two lessons share a number: {numbers}")

    def __iter__(self) -> Iterator[Lesson]:
        return iter(self.lessons)

    def __len__(self) -> int:
        return len(self.lessons)

    def ids(self) -> list[str]:
        return [lesson.id for lesson in self.lessons]

    def get(self, key: str) -> Lesson:
        """The lesson with id ``key``, or number ``key`` (``"3"``, ``"03"``)."""
        for lesson in self.lessons:
            if key == lesson.id or (key.isdigit() and len(key) <= 2 and f"{int(key):02d}" == lesson.number):
                return lesson
        raise UnknownLesson(sentence("no lesson {lesson} (lessons: {lessons})", lesson=repr(key),
                                     lessons=", ".join(self.ids())))

    def at(self, root: Path) -> Catalogue:
        """The same lessons in another copy of the course (a bundle, a test's folder)."""
        return Catalogue(self.lessons, root)

    def released(self) -> Catalogue:
        """The lessons whose student notebook exists."""
        return Catalogue((lesson for lesson in self.lessons if lesson.student().is_file()), self.root)

    def before(self, lesson: Lesson) -> list[Lesson]:
        return [other for other in self.lessons if other.number < lesson.number]

    def builds_on(self, lesson: Lesson) -> list[Lesson]:
        """Every earlier lesson ``lesson`` builds on, directly or through another, in order."""
        found: dict[str, Lesson] = {}
        pending = [lesson]
        while pending:
            for number in pending.pop().builds_on():
                if number not in found and number != lesson.number:
                    found[number] = self.get(number)
                    pending.append(found[number])
        return [found[n] for n in sorted(found)]

    def lesson_of(self, path: str | Path) -> Lesson | None:
        """The lesson of a notebook, from its name (any edition) or its folder's."""
        path = Path(path)
        names = [path.name.removesuffix(".ipynb").removesuffix(suffix)
                 for suffix in EDITIONS.values() if suffix] + [path.stem, path.parent.name]
        for name in names:
            for lesson in self.lessons:
                if name == lesson.id:
                    return lesson
        return None

    def edition_of(self, path: str | Path) -> str:
        """The edition of a notebook, from its name (``NN_name.zh.ipynb`` is ``zh``)."""
        name = Path(path).name.removesuffix(".ipynb")
        for edition, suffix in EDITIONS.items():
            if suffix and name.endswith(suffix):
                return edition
        return "en"

    def select(self, spec: str | None) -> list[Lesson]:
        """``None``, ``""`` or ``all``: every lesson; else ``01-04``, ``01,03,05-07`` or ids."""
        if not self.lessons:
            raise SelectionError(sentence("there are no lessons"))
        if spec is None or spec.strip().lower() in ("", "all"):
            return list(self.lessons)
        have = ", ".join(lesson.number for lesson in self.lessons)
        by_number = {lesson.number: lesson for lesson in self.lessons}
        chosen: list[Lesson] = []
        for part in (p.strip() for p in spec.split(",")):
            if not part:
                continue
            m = re.fullmatch(r"(\d{1,2})\s*-\s*(\d{1,2})", part)
            if m:
                lo, hi = int(m.group(1)), int(m.group(2))
                if lo > hi:
                    raise SelectionError(sentence("empty range {selection}", selection=repr(part)))
                numbers = [f"{n:02d}" for n in range(lo, hi + 1)]
                missing = [n for n in numbers if n not in by_number]
                if missing:
                    raise SelectionError(sentence("{selection}: no lesson {missing} (have {lessons})", selection=part,
                                                    missing=", ".join(missing), lessons=have))
                chosen += [by_number[n] for n in numbers]
            elif re.fullmatch(r"\d{1,2}", part):
                number = f"{int(part):02d}"
                if number not in by_number:
                    raise SelectionError(sentence("no lesson {number} (have {lessons})", number=number, lessons=have))
                chosen.append(by_number[number])
            elif part in self.ids():
                chosen.append(self.get(part))
            else:
                raise SelectionError(sentence("cannot read {selection} (use e.g. 01-04 or 01,03,05-07; have {lessons})",
                                              selection=repr(part), lessons=have))
        return sorted(dict.fromkeys(chosen), key=lambda lesson: lesson.number)


COURSE = Catalogue(LESSONS)


def lessons() -> list[Lesson]:
    return list(COURSE)


def get(key: str) -> Lesson:
    return COURSE.get(key)


def select(spec: str | None) -> list[Lesson]:
    return COURSE.select(spec)


def spec_of(numbers: Iterable[str]) -> str:
    """Lesson numbers as a selection: ``03-05,08``."""
    parts: list[list[int]] = []
    for n in sorted({int(n) for n in numbers}):
        if parts and n == parts[-1][-1] + 1:
            parts[-1].append(n)
        else:
            parts.append([n])
    return ",".join(f"{r[0]:02d}-{r[-1]:02d}" if len(r) > 1 else f"{r[0]:02d}" for r in parts)


# --- notebooks and nbgrader's cell roles ------------------------------------------------

def read_json(path: str | Path) -> dict[str, Any]:
    """A trusted notebook (the course's own) as JSON, every cell's source one string."""
    nb = json.loads(Path(path).read_text(encoding="utf-8"))
    for cell in nb.get("cells", []):
        cell["source"] = cell_source(cell)
    return nb


def cell_source(cell: dict[str, Any]) -> str:
    """A cell's source as one string (nbformat stores it as a string or a list of lines);
    ``TypeError`` if it is neither."""
    source = cell.get("source", "")
    if isinstance(source, list) and all(isinstance(line, str) for line in source):
        return "".join(source)
    if not isinstance(source, str):
        raise TypeError("a cell's source must be a string or a list of strings")
    return source


def code_cells(nb: dict[str, Any]) -> list[dict[str, Any]]:
    return [cell for cell in nb.get("cells", []) if cell.get("cell_type") == "code"]


def nbgrader(cell: dict[str, Any]) -> dict[str, Any]:
    """The cell's ``nbgrader`` metadata ({} when it has none)."""
    meta = cell.get("metadata", {})
    value = meta.get("nbgrader", {}) if isinstance(meta, dict) else {}
    return value if isinstance(value, dict) else {}


def tags(cell: dict[str, Any]) -> list[str]:
    meta = cell.get("metadata", {})
    value = meta.get("tags") if isinstance(meta, dict) else None
    return value if isinstance(value, list) else []


def grade_id(cell: dict[str, Any]) -> str | None:
    return nbgrader(cell).get("grade_id")


def grade_ids(nb: dict[str, Any]) -> set[str]:
    """The grade ids of a notebook's cells (those that have one)."""
    return {cell_id for cell in nb.get("cells", []) if (cell_id := grade_id(cell)) is not None}


def is_grade(cell: dict[str, Any]) -> bool:
    """nbgrader's grade cell: it carries points (autograder tests, manually graded answers)."""
    return bool(nbgrader(cell).get("grade", False))


def is_solution(cell: dict[str, Any]) -> bool:
    """nbgrader's solution cell: the student writes in it (its solution regions)."""
    return bool(nbgrader(cell).get("solution", False))


def is_locked(cell: dict[str, Any]) -> bool:
    """nbgrader's rule: a solution cell is never locked, a grade cell always is, any other
    cell when its metadata says ``locked``."""
    if is_solution(cell):
        return False
    if is_grade(cell):
        return True
    return bool(nbgrader(cell).get("locked", False))


def is_autograder_test(cell: dict[str, Any]) -> bool:
    """An "Autograder tests" cell: a graded code cell the student does not write (visible
    asserts and the hooks of the hidden tests)."""
    return cell.get("cell_type") == "code" and is_grade(cell) and not is_solution(cell)


def is_provided(cell: dict[str, Any]) -> bool:
    """A read-only code cell that is not a test: code the course gives (setup, helpers)."""
    return cell.get("cell_type") == "code" and is_locked(cell) and not is_grade(cell)


def is_demo(cell: dict[str, Any]) -> bool:
    return DEMO_TAG in tags(cell)


class Role(StrEnum):
    """What a cell is to the course (CONTRIBUTING.md's table of cells)."""

    PROSE = "prose"        # markdown (or raw): nothing the student writes, nothing locked
    ANSWER = "answer"      # nbgrader's solution cell: the student writes in it
    TESTS = "tests"        # autograder tests: graded, not written by the student
    DEMO = "demo"          # tagged ``demo``: plots and long demonstrations
    PROVIDED = "provided"  # read-only: the setup cell, code or text the course gives
    CODE = "code"          # any other code cell: the student's own


#: The cells a grader runs, in notebook order: all code but the tests and the demos.
RUN_WHEN_GRADING = frozenset({Role.ANSWER, Role.PROVIDED, Role.CODE})


def cell_role(cell: dict[str, Any]) -> Role:
    """The one place that decides a cell's role, from nbgrader's metadata and the tags; a
    test cell or a demo is never run when grading, whatever else its metadata says."""
    code = cell.get("cell_type") == "code"
    if is_autograder_test(cell):
        return Role.TESTS
    if code and is_demo(cell):
        return Role.DEMO
    if is_solution(cell):
        return Role.ANSWER
    if is_locked(cell):
        return Role.PROVIDED
    return Role.CODE if code else Role.PROSE


# --- what a cell's code says (ast, never regex) -----------------------------------------

_IPYTHON_LINE = re.compile(r"^[ \t]*[%!].*$", re.M)


def python_of(source: str) -> str:
    """A cell's source without its IPython lines (``%matplotlib inline``, ``!pip ...``)."""
    return _IPYTHON_LINE.sub("", source)


def parse(source: str) -> ast.Module | None:
    try:
        return ast.parse(python_of(source))
    except SyntaxError:
        return None


def defined_names(source: str) -> list[str]:
    """Names a cell defines at top level: functions, classes, assignments."""
    tree = parse(source)
    names: list[str] = []
    for node in tree.body if tree else []:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names += [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]
    return list(dict.fromkeys(names))


_REFERENCE = re.compile(r"coursekit\.reference\.lesson(\d\d)")
_MODULE = re.compile(r"lesson(\d\d)")


def lessons_used(source: str) -> set[str]:
    """Numbers of the lessons whose code ``source`` uses: ``from coursekit.reference.lesson03
    import ...``, ``from coursekit.reference import lesson03``, ``lesson_code("03")``,
    ``load_my_code("03_scaled_dot_product_attention")``. Comments and other strings are not
    code: ``# load_my_code("03")`` uses nothing."""
    tree = parse(source)
    found: set[str] = set()
    for node in ast.walk(tree) if tree else []:
        if isinstance(node, ast.ImportFrom) and node.module:
            if m := _REFERENCE.fullmatch(node.module):
                found.add(m.group(1))
            elif node.module == "coursekit.reference":
                found |= {m.group(1) for a in node.names if (m := _MODULE.fullmatch(a.name))}
        elif isinstance(node, ast.Import):
            found |= {m.group(1) for a in node.names if (m := _REFERENCE.fullmatch(a.name))}
        elif isinstance(node, ast.Call) and node.args and _called_name(node.func) in LOADERS:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str) \
                    and (m := re.match(r"(\d\d?)(_|$)", arg.value)):
                found.add(f"{int(m.group(1)):02d}")
    return found


def _called_name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""
