"""A lesson's editions share one code: the English notebook is the source of the others'.

A lesson may have a second edition, the Chinese one: ``NN_name.zh.ipynb`` beside
``NN_name.ipynb``, in ``solutions/`` and (generated) in ``lessons/``. Its prose is its own;
its code cells are the English edition's, cell for cell: same code, same order, same cell
ids, same nbgrader metadata (grade ids, points, locks) and tags. Only what a reader reads
may differ: comments, docstrings, the messages of visible tests, plot labels and titles,
printed text. Precisely (:func:`code_difference`), two cells hold the same code when their
syntax trees are equal, except that

- comments are not code (nbgrader's ``### BEGIN SOLUTION`` / ``### END SOLUTION`` /
  ``### BEGIN HIDDEN TESTS`` markers are, and must sit at the same place);
- the hidden tests' hooks (``### BEGIN HIDDEN TESTS`` ... ``### END HIDDEN TESTS``) are
  the same text, comments included;
- a string literal may differ when the English one has Latin letters to translate and the
  other edition's has Chinese characters (a translation). Any other string (a lesson id,
  a dtype, a dictionary key, Chinese data such as ``"一千二百三十四"``) must be equal;
- an f-string may change its text and word order, never the expressions it formats.

Editing a code cell means editing the English notebook once and running ::

    python -m grader.authoring.editions sync [LESSONS]     # English code -> every other edition

which copies each changed English code cell into the other edition, keeps that edition's
comments and strings wherever the code around them is unchanged, adds new English cells
(code and prose) in place, drops removed ones, follows reordering, and lists what needs
translating. Each translated cell remembers a fingerprint of the English text it was
translated from (``metadata.translation.source``), so prose or comments changed in English
later are listed as stale, never silently left behind::

    python -m grader.authoring.editions status [LESSONS]   # what needs translating (writes nothing)
    python -m grader.authoring.editions accept LESSON [CELL_ID ...]  # these cells are translated again
    python -m grader.authoring.editions check [LESSONS]    # the drift test, as a command (exit 1 on drift)
    python -m grader.authoring.editions new LESSON         # start an edition: a copy of the English one

Then regenerate the student notebooks (``python -m grader.authoring.generate --assignments NN``).
``tests/grader/authoring/test_editions.py`` runs :func:`compare` on every lesson with a second edition.
"""

from __future__ import annotations

import argparse
import ast
import copy
import difflib
import hashlib
import io
import re
import sys
import tokenize
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from coursekit import catalogue
from coursekit.catalogue import Lesson
from grader.common import logs

#: Chinese characters and full-width punctuation: a string holding one is a translation.
CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")
LATIN = re.compile(r"[A-Za-z]")
#: nbgrader's region markers: comments that are code (their place matters).
MARKER = re.compile(r"^([ \t]*)#{2,3}[ \t]*((?:BEGIN|END) (?:SOLUTION|HIDDEN TESTS))[ \t]*$", re.M)
HIDDEN = re.compile(r"#{2,3}[ \t]*BEGIN HIDDEN TESTS.*?#{2,3}[ \t]*END HIDDEN TESTS", re.S)
MAGIC = re.compile(r"^([ \t]*)([%!].*)$", re.M)
#: Cell metadata that may differ between editions (bookkeeping and view state).
FREE_METADATA = {"translation", "collapsed", "scrolled", "jupyter", "execution"}
OTHER_EDITIONS = [e for e in catalogue.EDITIONS if e != "en"]


# --- what may differ in a code cell -------------------------------------------------------

def translated(english: str, other: str) -> bool:
    """Whether ``other`` may stand for the string literal ``english`` in another edition."""
    return english == other or bool(LATIN.search(english) and CJK.search(other))


def _as_python(source: str) -> str:
    """The cell as Python: nbgrader's markers and IPython lines become calls, so that their
    place and text are compared like code."""
    source = MARKER.sub(lambda m: f"{m.group(1)}__nbgrader__({m.group(2)!r})", source)
    return MAGIC.sub(lambda m: f"{m.group(1)}__ipython__({m.group(2)!r})", source)


_SENTINELS = {"__nbgrader__", "__ipython__"}


def _first_difference(a: Any, b: Any, where: ast.AST | None) -> ast.AST | None | bool:
    """The English node where ``a`` and ``b`` first differ (``True`` when there is no node
    to point at), else ``None``."""
    if isinstance(a, list) or isinstance(b, list):
        if not (isinstance(a, list) and isinstance(b, list)) or len(a) != len(b):
            return where or True
        for x, y in zip(a, b, strict=True):
            found = _first_difference(x, y, where)
            if found is not None:
                return found
        return None
    if not isinstance(a, ast.AST) or not isinstance(b, ast.AST):
        return None if type(a) is type(b) and a == b else (where or True)
    if type(a) is not type(b):
        return a if hasattr(a, "lineno") else (where or True)
    here = a if hasattr(a, "lineno") else where
    if isinstance(a, ast.Call) and isinstance(a.func, ast.Name) and a.func.id in _SENTINELS:
        return None if ast.dump(a) == ast.dump(b) else here
    if isinstance(a, ast.Constant) and isinstance(b, ast.Constant):  # b: a's type, checked above
        if isinstance(a.value, str) and isinstance(b.value, str):
            return None if translated(a.value, b.value) else here
        same = type(a.value) is type(b.value) and (a.value == b.value or a.value != a.value and b.value != b.value)
        return None if same else here
    if isinstance(a, ast.JoinedStr) and isinstance(b, ast.JoinedStr):
        fields_a = sorted(ast.dump(v) for v in a.values if isinstance(v, ast.FormattedValue))
        fields_b = sorted(ast.dump(v) for v in b.values if isinstance(v, ast.FormattedValue))
        text_a = "".join(str(v.value) for v in a.values if isinstance(v, ast.Constant))
        text_b = "".join(str(v.value) for v in b.values if isinstance(v, ast.Constant))
        return None if fields_a == fields_b and translated(text_a, text_b) else here
    for name in a._fields:
        found = _first_difference(getattr(a, name, None), getattr(b, name, None), here)
        if found is not None:
            return found
    return None


def _token_difference(english: str, other: str) -> int | None:
    """For cells that are not Python: the first English line whose tokens differ (comments
    dropped, strings compared as :func:`translated` does)."""
    def tokens(source: str) -> list[tuple[int, str, int]]:
        out = []
        try:
            for tok in tokenize.generate_tokens(io.StringIO(source).readline):
                if tok.type in (tokenize.COMMENT, tokenize.NL, tokenize.ENDMARKER):
                    continue
                out.append((tok.type, tok.string, tok.start[0]))
        except (tokenize.TokenError, SyntaxError, IndentationError):
            out = [(-1, line, i) for i, line in enumerate(source.splitlines(), 1)]
        return out

    ta, tb = tokens(_as_python(english)), tokens(_as_python(other))
    for (ka, sa, line), (kb, sb, _) in zip(ta, tb, strict=False):
        if ka != kb or not (sa == sb or ka == tokenize.STRING and translated(sa, sb)):
            return line
    if len(ta) != len(tb):
        return ta[min(len(ta), len(tb))][2] if len(ta) > len(tb) else (ta[-1][2] if ta else 1)
    return None


def code_difference(english: str, other: str) -> str | None:
    """``None`` when the two cells hold the same code (see the module's rules), else where
    they first differ, as ``"line N: <the English line>"``."""
    if english == other:
        return None
    hidden_a, hidden_b = HIDDEN.findall(english), HIDDEN.findall(other)
    if hidden_a != hidden_b:  # the hidden tests' hooks are nobody's reading: no translation
        return "the hidden tests differ (### BEGIN HIDDEN TESTS ... ### END HIDDEN TESTS)"
    try:
        tree_a, tree_b = ast.parse(_as_python(english)), ast.parse(_as_python(other))
    except SyntaxError:
        line = _token_difference(english, other)
    else:
        found = _first_difference(tree_a, tree_b, None)
        if found is None:
            return None
        line = getattr(found, "lineno", 1) if isinstance(found, ast.AST) else 1
    if line is None:
        return None
    lines = english.splitlines() or [""]
    return f"line {line}: {lines[min(line, len(lines)) - 1].strip()}"


# --- comparing two notebooks --------------------------------------------------------------

def _metadata(cell: dict[str, Any]) -> dict[str, Any]:
    """The metadata both editions share: all but view state and bookkeeping, and but the
    checksum nbgrader writes into a student notebook (of the cell's text, comments included)."""
    meta = {k: v for k, v in cell.get("metadata", {}).items() if k not in FREE_METADATA}
    if "checksum" in meta.get("nbgrader", {}):
        meta["nbgrader"] = {k: v for k, v in meta["nbgrader"].items() if k != "checksum"}
    return meta


def _graded(cell: dict[str, Any]) -> bool:
    return bool(catalogue.nbgrader(cell))


def compare(english: dict[str, Any], other: dict[str, Any]) -> list[str]:
    """Every way ``other`` (an edition's notebook) departs from the code of ``english``; an
    empty list when the editions share their code. Checks: the code cells (same count,
    order, ids, code as :func:`code_difference` says, metadata: nbgrader's, tags, locks),
    every cell with nbgrader metadata (markdown too) in the same order, the kernel."""
    problems: list[str] = []
    for key in ("kernelspec", "language_info"):
        if english.get("metadata", {}).get(key) != other.get("metadata", {}).get(key):
            problems.append(f"notebook metadata {key!r} differs")
    code_a, code_b = catalogue.code_cells(english), catalogue.code_cells(other)
    ids_a, ids_b = [c.get("id") for c in code_a], [c.get("id") for c in code_b]
    if ids_a != ids_b:
        missing = [i for i in ids_a if i not in ids_b]
        extra = [i for i in ids_b if i not in ids_a]
        if missing or extra:
            problems.append(f"code cells differ: missing {missing}, not in English {extra} "
                            "(run `python -m grader.authoring.editions sync`)")
        else:
            problems.append("code cells are in another order (run `python -m grader.authoring.editions sync`)")
    by_id = {c.get("id"): c for c in code_b}
    for cell in code_a:
        twin = by_id.get(cell.get("id"))
        if twin is None:
            continue
        name = catalogue.grade_id(cell) or cell.get("id")
        where = code_difference(catalogue.cell_source(cell), catalogue.cell_source(twin))
        if where:
            problems.append(f"code cell {name}: the code differs at {where}")
        if _metadata(cell) != _metadata(twin):
            problems.append(f"code cell {name}: metadata differs "
                            f"({_metadata(cell)} against {_metadata(twin)})")
    graded_a = [(c["cell_type"], _metadata(c)) for c in english.get("cells", []) if _graded(c)]
    graded_b = [(c["cell_type"], _metadata(c)) for c in other.get("cells", []) if _graded(c)]
    if graded_a != graded_b and ids_a == ids_b:
        problems.append("the cells with nbgrader metadata (grade ids, points) differ: "
                        f"{[m.get('nbgrader', {}).get('grade_id') for _, m in graded_a]} against "
                        f"{[m.get('nbgrader', {}).get('grade_id') for _, m in graded_b]}")
    return problems


def compare_files(english: Path, other: Path) -> list[str]:
    return compare(catalogue.read_json(english), catalogue.read_json(other))


# --- what a cell's translatable text is ---------------------------------------------------

def _strings_and_comments(source: str) -> list[str]:
    """What a reader reads in a code cell: its comments and the string literals that have
    Latin letters (the ones a translation may change)."""
    found: list[str] = []
    before: list[str] = ["", ""]
    try:
        for tok in tokenize.generate_tokens(io.StringIO(_as_python(source)).readline):
            if tok.type == tokenize.COMMENT:
                found.append(tok.string)
            elif tok.type == tokenize.STRING and LATIN.search(tok.string) \
                    and not (before[-1] == "(" and before[-2] in _SENTINELS):
                found.append(tok.string)
            before = [before[-1], tok.string]
    except (tokenize.TokenError, SyntaxError, IndentationError):
        found = [source]
    return found


def fingerprint(cell: dict[str, Any]) -> str:
    """What a translation of ``cell`` (an English cell) was made from: the text of a prose
    cell, the comments and strings of a code cell."""
    source = catalogue.cell_source(cell)
    text = source if cell.get("cell_type") != "code" else "\n".join(_strings_and_comments(source))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def needs_words(cell: dict[str, Any]) -> bool:
    """Whether an English cell has words to translate: prose, or in code a comment with
    Latin letters or a string of several words."""
    source = catalogue.cell_source(cell)
    if cell.get("cell_type") == "code":
        return any(LATIN.search(s) and (s.startswith("#") or re.search(r"[A-Za-z]\s+\S", s))
                   for s in _strings_and_comments(source))
    return bool(LATIN.search(source))


# --- merging a changed code cell ----------------------------------------------------------

def _chunks(source: str) -> list[tuple[tuple, str]] | None:
    """The cell cut into logical lines, each with the comment and blank lines before it:
    ``(key, text)``, the key being its tokens without comments and with strings blanked
    (so a translated line keys like its English one). ``None`` if it cannot be tokenized."""
    lines = source.splitlines(keepends=True)
    out: list[tuple[tuple, str]] = []
    start = 0
    key: list[tuple[int, str]] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type in (tokenize.COMMENT, tokenize.NL, tokenize.ENDMARKER):
                continue
            if tok.type == tokenize.NEWLINE:
                end = tok.end[0]
                out.append((tuple(key), "".join(lines[start:end])))
                start, key = end, []
                continue
            key.append((tok.type, "<str>" if tok.type == tokenize.STRING else tok.string))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return None
    if start < len(lines):
        out.append((("<tail>",), "".join(lines[start:])))
    return out


def merge_code(english: str, translation: str) -> tuple[str, int]:
    """The English code with the translation's comments and strings kept where the code
    around them did not change: ``(merged source, English lines taken as they are)``. The
    result always holds the English code (:func:`code_difference` is ``None``); when the
    lines cannot be matched safely it is the English cell itself."""
    if code_difference(english, translation) is None:
        return translation, 0
    chunks_a, chunks_b = _chunks(english), _chunks(translation)
    whole = (english, sum(1 for line in english.splitlines()
                          if any(LATIN.search(s) for s in _strings_and_comments(line))))
    if chunks_a is None or chunks_b is None:
        return whole
    matcher = difflib.SequenceMatcher(None, [k for k, _ in chunks_a], [k for k, _ in chunks_b],
                                      autojunk=False)
    parts: list[str] = []
    untranslated = 0
    for op, a0, a1, b0, b1 in matcher.get_opcodes():
        if op == "equal":
            parts += [text for _, text in chunks_b[b0:b1]]
        else:
            taken = [text for _, text in chunks_a[a0:a1]]
            parts += taken
            untranslated += sum(1 for text in taken for line in text.splitlines()
                                if any(LATIN.search(s) for s in _strings_and_comments(line)))
    merged = "".join(parts)
    if english.endswith("\n") != merged.endswith("\n"):
        merged = merged.rstrip("\n") + ("\n" if english.endswith("\n") else "")
    if code_difference(english, merged) is not None:
        return whole
    return merged, untranslated


# --- syncing an edition -------------------------------------------------------------------

@dataclass
class EditionSync:
    """What :func:`sync` did and what is left to translate, by cell id."""

    added: list[str] = field(default_factory=list)       # English cells new to the edition
    merged: dict[str, int] = field(default_factory=dict)  # code cells updated: lines still English
    removed: list[str] = field(default_factory=list)     # cells dropped with their English one
    stale: list[str] = field(default_factory=list)       # English text changed since translated
    untranslated: list[str] = field(default_factory=list)  # still the English text

    @property
    def changed(self) -> bool:
        return bool(self.added or self.merged or self.removed)

    @property
    def to_translate(self) -> list[str]:
        todo = self.added + [c for c, n in self.merged.items() if n] + self.stale + self.untranslated
        return list(dict.fromkeys(todo))

    def lines(self) -> list[str]:
        out = []
        if self.added:
            out.append(f"added from English: {', '.join(self.added)}")
        for cell, n in self.merged.items():
            out.append(f"code updated from English: {cell}" + (f" ({n} line(s) to translate)" if n else ""))
        if self.removed:
            out.append(f"removed with the English cell: {', '.join(self.removed)}")
        if self.stale:
            out.append(f"English text changed since translated (then `accept`): {', '.join(self.stale)}")
        if self.untranslated:
            out.append(f"not translated yet: {', '.join(self.untranslated)}")
        return out


def _anchors(cells: list[dict[str, Any]], english_ids: set[str]) -> list[tuple[str | None, dict[str, Any]]]:
    """Each cell of an edition with the English cell it belongs to: its own id when the
    English notebook has it, else the anchor of the cell before (a translation may split
    one English cell into several)."""
    out, anchor = [], None
    for cell in cells:
        if cell.get("id") in english_ids:
            anchor = cell.get("id")
        out.append((anchor, cell))
    return out


def _cell_id(cell: dict[str, Any]) -> Any:
    """A cell's id, as its notebook has it (nbformat 4.5 gives every cell one)."""
    return cell.get("id")


def _translation_meta(cell: dict[str, Any]) -> dict[str, Any]:
    return cell.setdefault("metadata", {}).setdefault("translation", {})


def sync(english: dict[str, Any], other: dict[str, Any]) -> tuple[dict[str, Any], EditionSync]:
    """``other`` brought up to ``english``'s code and cells; see the module's docstring."""
    report = EditionSync()
    result = copy.deepcopy(other)
    en_cells = english.get("cells", [])
    en_ids = {c.get("id") for c in en_cells}
    segments: dict[str | None, list[dict[str, Any]]] = {}
    for anchor, cell in _anchors(copy.deepcopy(other.get("cells", [])), en_ids):
        segments.setdefault(anchor, []).append(cell)
    for anchor in segments:
        if anchor not in en_ids:
            report.removed += [_cell_id(c) for c in segments[anchor]]
    cells: list[dict[str, Any]] = []
    for en in en_cells:
        cid = _cell_id(en)
        segment = segments.get(cid)
        if not segment:
            new = copy.deepcopy(en)
            if needs_words(en):
                report.added.append(cid)
            cells.append(new)
            continue
        head = segment[0]
        if en.get("cell_type") == "code":
            for cell in segment[1:]:  # a code cell is never split: extra cells go
                report.removed.append(_cell_id(cell))
            segment = [head]
            english_source = catalogue.cell_source(en)
            source, left = merge_code(english_source, catalogue.cell_source(head))
            if source != catalogue.cell_source(head):
                report.merged[cid] = left
            head["source"] = source
            head["cell_type"] = "code"
            kept = {k: v for k, v in head.get("metadata", {}).items() if k in FREE_METADATA}
            head["metadata"] = {**copy.deepcopy(en.get("metadata", {})), **kept}
            head.setdefault("outputs", [])
            head.setdefault("execution_count", None)
        cells += segment
    for anchor, cell in _anchors(cells, en_ids):
        if anchor is None or cell.get("id") != anchor:
            continue
        en = next(c for c in en_cells if c.get("id") == anchor)
        meta, mark = _translation_meta(cell), fingerprint(en)
        if not needs_words(en):
            meta["source"] = mark
        elif catalogue.cell_source(cell) == catalogue.cell_source(en):
            if not (meta.get("as_is") and meta.get("source") == mark) and anchor not in report.added:
                report.untranslated.append(anchor)  # unless accepted as it is (`accept ID`)
        elif "source" not in meta:
            meta["source"] = mark  # adopted: translated from today's English
        elif meta["source"] != mark:
            report.stale.append(anchor)
    for cell in cells:
        if not cell.get("metadata", {}).get("translation"):
            cell.get("metadata", {}).pop("translation", None)
    result["cells"] = cells
    result["metadata"] = {**copy.deepcopy(other.get("metadata", {})),
                          **{k: copy.deepcopy(v) for k, v in english.get("metadata", {}).items()
                             if k in ("kernelspec", "language_info")}}
    return result, report


def accept(english: dict[str, Any], other: dict[str, Any], cell_ids: list[str] | None) -> list[str]:
    """Record that the cells ``cell_ids`` (default: every stale one) are translated from the
    English text of today (a cell left as the English on purpose too); returns their ids."""
    en_by_id = {c.get("id"): c for c in english.get("cells", [])}
    done = []
    for cell in other.get("cells", []):
        cid = cell.get("id")
        if cid not in en_by_id:
            continue
        meta = _translation_meta(cell)
        mark = fingerprint(en_by_id[cid])
        stale = "source" in meta and meta["source"] != mark
        if (cid in cell_ids) if cell_ids else stale:
            if meta.get("source") != mark or not meta.get("as_is"):
                done.append(cid)
            meta["source"] = mark
            if catalogue.cell_source(cell) == catalogue.cell_source(en_by_id[cid]):
                meta["as_is"] = True  # nothing to translate in it: not listed as untranslated
            else:
                meta.pop("as_is", None)
        if not meta:
            cell["metadata"].pop("translation")
    return done


def new_edition(english: dict[str, Any]) -> dict[str, Any]:
    """A new edition: the English notebook, every cell to translate."""
    result, _ = sync(english, {"cells": [], "metadata": {}, "nbformat": english.get("nbformat", 4),
                               "nbformat_minor": english.get("nbformat_minor", 5)})
    return result


# --- files --------------------------------------------------------------------------------

def lessons_with(edition: str, spec: str | None = None,
                 course: catalogue.Catalogue = catalogue.COURSE) -> list[Lesson]:
    """The selected lessons that declare ``edition`` in the catalogue."""
    return [lesson for lesson in course.select(spec) if edition in lesson.editions]


def read(path: Path) -> dict[str, Any]:
    return nbformat.read(path, as_version=4)


def write(nb: dict[str, Any], path: Path) -> None:
    nbformat.write(nbformat.from_dict(nb), path)


def _cli_lessons(spec: str | None, edition: str, course: catalogue.Catalogue) -> list[Lesson]:
    chosen = lessons_with(edition, spec, course)
    if not chosen:
        print(f"no selected lesson has a {edition!r} edition (add it to the lesson's `editions` "
              f"in coursekit/catalogue.py, then `python -m grader.authoring.editions new NN`)", file=sys.stderr)
    return chosen


def main(argv: list[str] | None = None, course: catalogue.Catalogue = catalogue.COURSE,
         prog: str = "python -m grader.authoring editions") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("--edition", default="zh", choices=OTHER_EDITIONS)
    commands = parser.add_subparsers(dest="command", required=True)
    for name, text in [("check", "the drift test: exit 1 if an edition's code departs from the English"),
                       ("sync", "copy the English code into the edition, keep its translations"),
                       ("status", "list what needs translating, write nothing")]:
        sub = commands.add_parser(name, help=text)
        sub.add_argument("lessons", nargs="?", default=None, help="01-03, 04, all (default all)")
    sub = commands.add_parser("accept", help="cells translated again from today's English text")
    sub.add_argument("lesson")
    sub.add_argument("cells", nargs="*", help="cell ids (default: every stale cell)")
    sub = commands.add_parser("new", help="start the edition of a lesson: a copy of the English")
    sub.add_argument("lesson")
    logs.add_options(parser)
    args = parser.parse_args(argv)
    logs.start(args, prog)
    edition = args.edition

    if args.command == "new":
        lesson = course.get(args.lesson)
        path = lesson.root / "solutions" / lesson.id / f"{lesson.id}{catalogue.EDITIONS[edition]}.ipynb"
        if path.exists():
            print(f"{path.relative_to(lesson.root)} exists: use `sync`", file=sys.stderr)
            return 1
        write(new_edition(read(lesson.solution())), path)
        print(f"wrote {path.relative_to(lesson.root)}; add {edition!r} to the lesson's editions in "
              "coursekit/catalogue.py, translate, then `python -m grader.authoring.generate --assignments "
              f"{lesson.number}`")
        return 0
    if args.command == "accept":
        lesson = course.get(args.lesson)
        nb = read(lesson.solution(edition))
        done = accept(read(lesson.solution()), nb, args.cells or None)
        write(nb, lesson.solution(edition))
        print(f"{lesson.id}: accepted {', '.join(done) or 'nothing (no stale cell)'}")
        return 0

    status = 0
    for lesson in _cli_lessons(args.lessons, edition, course):
        english, path = read(lesson.solution()), lesson.solution(edition)
        if args.command == "check":
            problems = compare(english, read(path))
            if lesson.student(edition).is_file() and lesson.student().is_file():
                problems += [f"lessons/: {p}" for p in compare_files(lesson.student(), lesson.student(edition))]
            print(f"{lesson.id}: " + ("same code ✓" if not problems else f"{len(problems)} difference(s)"))
            for problem in problems:
                print(f"  {problem}")
            status |= bool(problems)
            continue
        synced, report = sync(english, read(path))
        if args.command == "sync" and synced != read(path):
            write(synced, path)
        todo = report.lines()
        verb = "synced" if args.command == "sync" and report.changed else "up to date"
        print(f"{lesson.id} ({edition}): {verb}" + ("" if todo else ", nothing to translate"))
        for line in todo:
            print(f"  {line}")
    if args.command == "sync":
        print("next: translate what is listed, then `python -m grader.authoring.generate --assignments "
              "<lessons>` to regenerate lessons/", file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
