"""The grader's words in other languages: hints, verdicts, feedback (Chinese: ``zh``).

Every sentence a student reads is written once, in English, where it is made: the hidden
graders' ``check``/``close``/``diagnose``/``suspect`` messages, the framework's evidence,
the fixed sentences of ``messages``, ``results`` and ``classroom``. Most are f-strings
with values in them. A language's catalogue, ``grader/locale/<lang>.json``, maps each
English **template** (the message as written in the source, an f-string's fields kept as
``{expression}``) to its translation, which has the same fields in any order::

    "softmax(x, axis={axis}) normalises over axis 0: use the `axis` argument ...":
        "softmax(x, axis={axis}) 在第 0 轴上归一化：max 和 sum 都要用参数 `axis` ..."

:func:`translate` finds the template a message was made from (its literal text equal,
each field matching anything), translates each field's value that is itself a message (a
hint inside another, the evidence in parentheses) and fills in the translation. English
stays the source; the gradebook (``grades.csv``, ``results/``) stays English whatever the
language; ``grader check --lang``, the feedback pages and the hints nbgrader shows use it.

A translation cannot silently go stale:

- ``python -m grader.i18n sync`` reads every template in the source (with ``ast``), adds
  the new ones to each catalogue with an empty translation, and drops those no longer in
  the source (a changed English sentence is a new template: its old translation goes);
- ``tests/test_i18n.py`` fails while a template has no translation or a translation's
  fields differ from its English ones, and grades the planted bugs, the blank and the
  reference notebooks of every lesson to check that every hint they produce translates in
  full (``python -m grader.i18n status`` prints the coverage).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

from grader.hint import Hint

PACKAGE = Path(__file__).resolve().parent
LOCALE_DIR = PACKAGE / "locale"
LANGUAGES = ("en", "zh")

#: The modules whose strings students read (paths relative to the grader package).
SOURCES = ("hidden/*.py", "check/framework.py", "check/messages.py", "check/engine.py",
           "check/lessons.py", "check/calls.py", "results/__init__.py", "outputs/render.py",
           "classgrade/classroom.py",
           "classgrade/find.py", "classgrade/late.py", "kernel.py", "runtime/errors.py",
           "outputs/class_report.py", "templates/*.j2")
#: Dictionaries of the hidden graders that are never shown (mistake ids' descriptions, the
#: requirements each exercise's checks answer).
NOT_SHOWN = {"MISTAKES", "REQUIREMENTS"}
#: Fields whose values are the student's own words or Python's (an exception's message):
#: shown as they are in every language.
VERBATIM = re.compile(r"^(exc\b|where$|err\b|str\(exc|excerpt$)")

#: A Chinese character: what a translated sentence has.
CJK_RE = re.compile(r"[\u4e00-\u9fff]")


# --- templates --------------------------------------------------------------------------

def _parts(template: str) -> list[tuple[str, str]]:
    """``[("text", ...), ("field", "{expr}")]``: ``{{``/``}}`` are literal braces."""
    out: list[tuple[str, str]] = []
    i, text = 0, ""
    while i < len(template):
        two = template[i:i + 2]
        if two in ("{{", "}}"):
            text += two[0]
            i += 2
            continue
        if template[i] == "{":
            depth, j = 0, i
            while j < len(template):
                depth += {"{": 1, "}": -1}.get(template[j], 0)
                if depth == 0:
                    break
                j += 1
            if text:
                out.append(("text", text))
                text = ""
            out.append(("field", template[i:j + 1]))
            i = j + 1
            continue
        text += template[i]
        i += 1
    if text:
        out.append(("text", text))
    return out


def fields(template: str) -> list[str]:
    return [value for kind, value in _parts(template) if kind == "field"]


def _literal(template: str) -> str:
    return "".join(value for kind, value in _parts(template) if kind == "text")


@dataclass(frozen=True)
class _Pattern:
    english: str
    regexes: tuple[re.Pattern[str], ...]  # fields greedy, then lazy: two ways to split
    fields: tuple[str, ...]
    anchor: str        # the longest literal piece: a quick filter before the regex
    weight: int        # literal characters: the more, the more specific


def _pattern(english: str) -> _Pattern:
    parts = _parts(english)
    texts = [v for k, v in parts if k == "text"] or [""]
    regexes = tuple(re.compile("".join(re.escape(v) if k == "text" else group for k, v in parts), re.S)
                    for group in ("(.*)", "(.*?)"))
    return _Pattern(english, regexes, tuple(v for k, v in parts if k == "field"),
                    max(texts, key=len), sum(len(t) for t in texts))


def _unbalanced(text: str) -> int:
    return sum(abs(text.count(a) - text.count(b)) for a, b in ("()", "[]", "（）"))


# --- catalogues ---------------------------------------------------------------------------

#: A catalogue's translation that says "the same in this language, on purpose" (a log line,
#: a date format, a library's names): told apart from a translation nobody wrote.
SAME = "="


def catalogue_path(lang: str) -> Path:
    return LOCALE_DIR / f"{lang}.json"


@cache
def catalogue(lang: str) -> dict[str, str]:
    """``{English template: translation}`` of ``lang`` (empty for English or a missing file)."""
    path = catalogue_path(lang)
    if lang == "en" or not path.is_file():
        return {}
    return json.loads(path.read_text(encoding="utf-8"))


#: How messages are put together, whatever their words: a message and its evidence or note in
#: parentheses (``close``'s ``f"{message} ({difference})"``, ``fold``'s ``(+3 related checks
#: failed)``). Both parts are translated in turn.
STRUCTURE = {"zh": {"{message} ({detail})": "{message}（{detail}）",
                    "left": "左侧", "right": "右侧"}}  # a side's name, formatted into a hint


def _table(lang: str) -> dict[str, str]:
    own = {english: english if target == SAME else target for english, target in catalogue(lang).items()}
    return {**STRUCTURE.get(lang, {}), **own}


@cache
def _patterns(lang: str) -> tuple[_Pattern, ...]:
    found = [_pattern(english) for english, target in _table(lang).items() if target and fields(english)]
    return tuple(sorted(found, key=lambda p: (-p.weight, p.english)))


def _fill(target: str, values: dict[str, str]) -> str:
    out = []
    for kind, value in _parts(target):
        out.append(values.get(value, value) if kind == "field" else value)
    return "".join(out)


def _match(text: str, lang: str, depth: int) -> tuple[str, list[str]] | None:
    """``(translation, English parts left untranslated)``, or None when no template fits.
    Of the templates (and ways to split a message into their fields) that fit, the one
    that leaves the least English wins, then the one whose fields have balanced brackets,
    then the most specific."""
    table = _table(lang)
    key = text.replace("{", "{{").replace("}", "}}")
    if table.get(key):
        return _fill(table[key], {}), []
    if depth > 6:
        return None
    best: tuple[tuple[int, int, int], str, list[str]] | None = None
    for p in _patterns(lang):
        if p.anchor not in text or (best is not None and not best[0][0] and not best[0][1]
                                    and p.weight < -best[0][2]):
            continue
        for regex in p.regexes:
            m = regex.fullmatch(text)
            if m is None:
                continue
            values: dict[str, str] = {}
            left: list[str] = []
            unbalanced = 0
            for name, value in zip(p.fields, m.groups(), strict=True):
                if VERBATIM.match(name.strip("{}")):
                    values[name] = value
                    continue
                unbalanced += _unbalanced(value)
                inner = _match(value, lang, depth + 1) if value.strip() else None
                if inner is None:
                    values[name] = value
                    if _is_words(value):
                        left.append(value)
                else:
                    values[name], more = inner
                    left += more
            score = (len(left), unbalanced, -p.weight)
            if best is None or score < best[0]:
                best = (score, _fill(table[p.english], values), left)
    return None if best is None else (best[1], best[2])


def translate_checked(text: str, lang: str) -> tuple[str, list[str]]:
    """``text`` in ``lang``, and the English parts that had no translation (``[]``: all)."""
    if lang == "en" or not text:
        return text, []
    found = _match(text, lang, 0)
    if found is None:
        return text, [text] if _is_words(text) else []
    return found


def with_detail(message: str, detail: str, lang: str) -> str:
    """``message (detail)`` with the brackets ``lang`` writes; both parts are in ``lang`` already."""
    return _fill(STRUCTURE.get(lang, {}).get(_WITH_DETAIL, _WITH_DETAIL), {"{message}": message, "{detail}": detail})


_WITH_DETAIL = "{message} ({detail})"


def translate(text: str, lang: str) -> str:
    """``text`` (a hint, a verdict, a word of the feedback page) in ``lang``; English
    where the catalogue has no translation for it."""
    return translate_checked(text, lang)[0]


def choose(lang: str | None, edition: str | None = None) -> str:
    """The language to use: ``lang`` if given (``--lang``), else ``COURSE_LANG``, else the
    notebook's edition's language, else English."""
    from coursekit import settings

    for value in (lang, settings.language(), edition):
        if value in LANGUAGES:
            return value
    return "en"


def class_language(lang: str | None, editions: Iterable[str]) -> str:
    """The language of what a class's commands say (``grade``'s summary, ``report``):
    ``lang`` (``--lang``), else ``COURSE_LANG``, else the edition most of the class handed in
    (English on a tie), as ``check`` takes a notebook's edition for its language."""
    counts: dict[str, int] = {}
    for edition in editions:
        counts[edition] = counts.get(edition, 0) + 1
    most = max(counts, key=lambda e: (counts[e], e == "en"), default=None)
    return choose(lang, most)


def notebook_edition(nb: dict[str, Any] | None, name: str | Path = "") -> str:
    """The edition of a notebook: its name's (``NN_name.zh.ipynb``), else its title line's
    (``# 第 01 课 · ...``: a Chinese notebook handed in under the English name)."""
    from coursekit import catalogue

    edition = catalogue.COURSE.edition_of(name) if name else "en"
    if edition != "en" or not nb:
        return edition
    for cell in nb.get("cells", [])[:3]:
        if isinstance(cell, dict) and cell.get("cell_type") == "markdown":
            try:
                first = catalogue.cell_source(cell).lstrip().split("\n", 1)[0]
            except TypeError:
                return "en"
            return "zh" if re.match(r"#\s*第\s*\d+\s*课", first) else "en"
    return "en"


def words(lang: str) -> Any:
    """``t(text)``: the fixed words of a page or a table (``hint``, ``total``) in ``lang``."""
    return lambda text: translate(text, lang)


def _translated_hint(failure: Hint, lang: str) -> Hint:
    """A failed check's hint in ``lang``, still the same kind of hint (a diagnosis stays
    one, so the hints are chosen and folded as in English)."""
    return failure.with_text(translate(failure.text, lang))


def localize(report: Any, lang: str) -> Any:
    """A copy of a :class:`grader.results.Report` with its hints, reason and notes (a call
    that hung, which file was graded, how late) in ``lang``; the report itself, which the
    gradebook is written from, stays English."""
    if lang == "en":
        return report
    exercises = [replace(e, failures=[_translated_hint(f, lang) for f in e.failures], lang=lang)
                 for e in report.exercises]
    return replace(report, exercises=exercises, reason=translate(report.reason, lang), lang=lang,
                   notes=[translate(note, lang) for note in report.notes])


# --- reading the templates from the source ------------------------------------------------

def _template_of(node: ast.AST) -> str | None:
    """The template of a string expression: a literal, an f-string, or ``+`` of them."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.replace("{", "{{").replace("}", "}}")
    if isinstance(node, ast.JoinedStr):
        out = ""
        for value in node.values:
            if isinstance(value, ast.Constant):
                out += str(value.value).replace("{", "{{").replace("}", "}}")
            elif isinstance(value, ast.FormattedValue):
                out += "{" + ast.unparse(value.value) + "}"
        return out
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _template_of(node.left), _template_of(node.right)
        if left is None and right is None:
            return None
        left = left if left is not None else "{" + ast.unparse(node.left) + "}"
        right = right if right is not None else "{" + ast.unparse(node.right) + "}"
        return left + right
    return None


def _skipped_nodes(tree: ast.AST) -> set[int]:
    """Docstrings, the descriptions in ``MISTAKES``, and the parts of larger templates."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                and node.body and isinstance(node.body[0], ast.Expr) \
                and isinstance(node.body[0].value, ast.Constant):
            skip.add(id(node.body[0].value))
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in NOT_SHOWN
                                                for t in node.targets):
            skip |= {id(n) for n in ast.walk(node.value)}
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "t":
            skip |= {id(n) for n in ast.walk(node)}  # read by templates_in_python as a word
        if isinstance(node, (ast.JoinedStr, ast.BinOp)) and _template_of(node) is not None:
            skip |= {id(n) for n in ast.walk(node) if n is not node}
        if isinstance(node, ast.Compare):  # `"word" in text`: code, not a sentence
            skip |= {id(n) for n in ast.walk(node)}
    return skip


def is_sentence(template: str) -> bool:
    """Whether a template may be words for people: an English word in its text and a space
    between two of its parts (a name, a path or a dtype has none). Generous on purpose: a
    string that is no sentence gets itself as translation, a sentence missed would stay
    English."""
    with_values = "".join(v if k == "text" else "value" for k, v in _parts(template)).strip()
    return bool(re.search(r"[A-Za-z]{3,}", _literal(template)) and re.search(r"\S\s+\S", with_values))


_WORD = re.compile(r"[(\[]?[A-Za-z]{2,}[,:;.!?)\]]?")


def _is_words(text: str) -> bool:
    """Whether a value left untranslated is English words: two plain words in a row (not a
    number, a shape, a list of names such as ``q_proj.bias, k_proj.bias``)."""
    tokens = text.split()
    return any(_WORD.fullmatch(a) and _WORD.fullmatch(b) and re.search(r"[A-Za-z]{3,}", a + b)
               for a, b in zip(tokens, tokens[1:], strict=False))


def templates_in_python(source: str) -> list[str]:
    tree = ast.parse(source)
    skip = _skipped_nodes(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "t" \
                and node.args and (template := _template_of(node.args[0])) is not None:
            found.append(template)  # a word marked for translation: t("total")
        if id(node) in skip:
            continue
        template = _template_of(node)
        if template is not None and is_sentence(template):
            found.append(template)
    return found


_T_CALL = re.compile(r"""\bt\(\s*"((?:[^"\\]|\\.)*)"\s*\)""")


def templates_in_jinja(source: str) -> list[str]:
    """The words of a template marked ``t("...")``."""
    return [m.group(1).replace("{", "{{").replace("}", "}}") for m in _T_CALL.finditer(source)]


def source_templates(root: Path = PACKAGE) -> dict[str, list[str]]:
    """``{template: [files it appears in]}`` of every sentence a student may read."""
    found: dict[str, list[str]] = {}
    for pattern in SOURCES:
        for path in sorted(root.glob(pattern)):
            text = path.read_text(encoding="utf-8")
            items = templates_in_jinja(text) if path.suffix == ".j2" else templates_in_python(text)
            for template in items:
                where = found.setdefault(template, [])
                name = path.relative_to(root).as_posix()
                if name not in where:
                    where.append(name)
    return found


# --- keeping the catalogues in step ------------------------------------------------------

@dataclass
class Coverage:
    templates: int
    translated: int
    missing: list[str]
    stale: list[str]
    bad_fields: list[str]   # translations with a field their English lacks (a field may go:
                            # ``{'s' if n > 1 else ''}`` has no place in Chinese)
    same: list[str] = field(default_factory=list)  # marked the same in this language (SAME)

    @property
    def percent(self) -> float:
        return 100.0 * self.translated / self.templates if self.templates else 100.0


def coverage(lang: str, templates: Iterable[str] | None = None) -> Coverage:
    table = catalogue(lang)
    wanted = list(templates if templates is not None else source_templates())
    # a "translation" that is the English itself, unmarked, is one nobody wrote
    missing = [t for t in wanted if not table.get(t) or table[t] == t]
    stale = [t for t in table if t not in set(wanted)]
    bad = [t for t, target in table.items() if target and target != SAME
           and not set(fields(target)) <= set(fields(t))]
    same = [t for t in wanted if table.get(t) == SAME]
    return Coverage(len(wanted), len(wanted) - len(missing), missing, stale, bad, same)


def sync_catalogue(lang: str) -> Coverage:
    """Add the source's new templates (untranslated) and drop the stale ones."""
    wanted = source_templates()
    table = dict(catalogue(lang))
    merged = {t: table.get(t, "") for t in sorted(wanted, key=lambda t: (wanted[t][0], t))}
    path = catalogue_path(lang)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(merged, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    catalogue.cache_clear()
    _patterns.cache_clear()
    return coverage(lang, wanted)


def main(argv: list[str] | None = None, prog: str = "python -m grader.authoring i18n") -> int:
    from grader import logs

    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["status", "sync", "missing"])
    parser.add_argument("--lang", default="zh", choices=[x for x in LANGUAGES if x != "en"])
    logs.add_options(parser)
    args = parser.parse_args(argv)
    logs.start(args, prog)
    result = sync_catalogue(args.lang) if args.command == "sync" else coverage(args.lang)
    if args.command == "missing":
        for template in result.missing:
            print(template)
        return 1 if result.missing else 0
    print(f"{args.lang}: {result.translated} of {result.templates} templates translated "
          f"({result.percent:.1f}%), of which {len(result.same)} marked the same in this language "
          f"(\"{SAME}\": logs, formats, library names); {len(result.stale)} stale, "
          f"{len(result.bad_fields)} with other fields")
    for template in result.bad_fields:
        print(f"  fields differ: {template}")
    return 1 if result.missing or result.bad_fields else 0


if __name__ == "__main__":
    sys.exit(main())
