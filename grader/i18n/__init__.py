"""The grader's words in other languages: hints, verdicts, feedback, reports (Chinese: ``zh``).

Every sentence a student or an instructor reads is a **message** written once, in English,
where it is made, with an id and arguments (:mod:`grader.i18n.message`)::

    check(ok, msg("softmax(x, axis={axis}) normalises over axis 0: use the `axis` argument",
                  axis=axis))

The id is the English template; a language's catalogue (:mod:`grader.i18n.catalogue`: gettext
``.po``, ``grader/i18n/locale/<lang>/LC_MESSAGES/grader.po``) maps it to the translation, which
has the same ``{name}`` fields in any order::

    msgid "softmax(x, axis={axis}) normalises over axis 0: use the `axis` argument ..."
    msgstr "softmax(x, axis={axis}) 在第 0 轴上归一化：max 和 sum 都要用参数 `axis` ..."

:func:`render` tells a message in a language from its id, each argument that is a message
itself (a hint inside another, the evidence in parentheses) in the same language, the others
(numbers, shapes, the student's own words, Python's exception text) as they are. A page's
fixed words are ids too: ``t("total")`` (:func:`words`). English stays the source; the
gradebook (``grades.csv``, ``results/``) stays English whatever the language and keeps each
hint's id and arguments beside its text; ``grader check --lang``, the feedback pages, the
hints nbgrader shows, ``grade``'s summary and the class report use the reader's language.

A translation cannot silently go stale: ``python -m grader.authoring i18n sync`` adds the
source's new ids to each catalogue with an empty translation and drops those no longer in the
source (a changed English sentence is a new id); ``tests/grader/i18n/test_i18n.py`` fails while an id has
no translation or a translation's fields differ from its English ones, and grades the planted
bugs, the blank and the reference notebooks of every lesson to check that every hint they
produce is a message that translates in full (``... i18n status`` prints the coverage).
A new language is one file: ``tests/grader/i18n/test_pseudo_locale.py`` proves it with a made-up one.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from coursekit.errors import Sentence
from grader.common.hint import Hint
from grader.i18n import catalogues as _catalogue
from grader.i18n.catalogues import LOCALE_DIR, Coverage, coverage, source_templates
from grader.i18n.message import (
    Message,
    concat,
    escape,
    fill,
    join,
    map_values,
    msg,
    parts,
    said_by,
    told,
    with_detail,
)

__all__ = ["LANGUAGES", "Message", "msg", "told", "said_by", "with_detail", "concat", "join", "map_values", "render", "translate", "translate_checked", "choose",
           "class_language", "notebook_edition", "words", "said_lines", "localize", "catalogue", "coverage",
           "source_templates", "Coverage", "LOCALE_DIR", "fields"]

LANGUAGES = _catalogue.languages()

#: Fields whose values are the student's own words or Python's (an exception's message, where
#: it was raised, an excerpt of the output): shown as they are in every language.
VERBATIM = re.compile(r"^(exc|err|error|where|excerpt)(_|$)")

#: A Chinese character: what a translated sentence has.
CJK_RE = re.compile(r"[\u4e00-\u9fff]")


def catalogue(lang: str) -> dict[str, str]:
    """``{id: translation}`` of ``lang`` (empty for English or a language without a file)."""
    return _catalogue.table(lang)


def fields(template: str) -> list[str]:
    return ["{" + name + "}" for kind, name in parts(template) if kind == "field"]


# --- rendering ------------------------------------------------------------------------------

def render_checked(text: Message | Sentence | str, lang: str) -> tuple[str, list[str]]:
    """``text`` in ``lang`` and the ids (or English arguments) left untranslated.

    A :class:`Message` (or a coursekit :class:`~coursekit.errors.Sentence`) is told from its
    id; plain text is a fixed word or sentence whose id is itself (``t("total")``, a hint read
    back from a record written before ids were kept)."""
    text = told(text)
    if lang == "en" or not text:
        return str(text), []
    table = catalogue(lang)
    if not isinstance(text, Message):
        target = table.get(escape(text))
        if target:
            return fill(target, {}), []
        return str(text), [text] if _is_words(text) else []
    left: list[str] = []
    target = table.get(text.id)
    if not target:
        target = text.id
        if _is_words(fill(text.id, {})):
            left.append(text.id)
    values: dict[str, str] = {}
    for name, value in text.args.items():
        if isinstance(value, Message):
            values[name], more = render_checked(value, lang)
            left += more
        else:
            values[name] = value
            if not VERBATIM.match(name) and _is_words(value):
                left.append(value)
    return fill(target, values), left


def render(text: Message | Sentence | str, lang: str) -> str:
    """A message (or a fixed word) in ``lang``; English where the catalogue has no translation."""
    return render_checked(text, lang)[0]


translate = render
translate_checked = render_checked


_WORD = re.compile(r"[(\[]?[A-Za-z]{2,}[,:;.!?)\]]?")


def _is_words(text: str) -> bool:
    """Whether text is English words: two plain words in a row (not a number, a shape, a list
    of names such as ``q_proj.bias, k_proj.bias``)."""
    tokens = text.split()
    return any(_WORD.fullmatch(a) and _WORD.fullmatch(b) and re.search(r"[A-Za-z]{3,}", a + b)
               for a, b in zip(tokens, tokens[1:], strict=False))


# --- which language -------------------------------------------------------------------------
def choose(lang: str | None, edition: str | None = None) -> str:
    """The language to use: ``lang`` if given (``--lang``), else ``COURSE_LANG``, else the
    notebook's edition's language, else English."""
    from coursekit import settings

    for value in (lang, settings.language(LANGUAGES), edition):
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


def words(lang: str) -> Callable[[Message | str], str]:
    """``t(text)``: the fixed words of a page or a table (``hint``, ``total``), or a
    message, in ``lang``."""
    return lambda text: render(text, lang)


def said_lines(first: Message, lines: Iterable[Message | str], lang: str) -> str:
    """A command's summary in ``lang``: its first line, then the others indented."""
    return "\n".join([render(first, lang), *("  " + render(line, lang) for line in lines)])


def _rendered_hint(failure: Hint, lang: str) -> Hint:
    """A failed check's hint in ``lang``, still the same kind of hint (a diagnosis stays
    one, so the hints are chosen and folded as in English)."""
    return failure.with_text(render(failure.text, lang))


def localize(report: Any, lang: str) -> Any:
    """A copy of a :class:`grader.results.Report` with its hints, reason and notes (a call
    that hung, which file was graded, how late) in ``lang``; the report itself, which the
    gradebook is written from, stays English."""
    if lang == "en":
        return report
    exercises = [replace(e, failures=[_rendered_hint(f, lang) for f in e.failures], lang=lang)
                 for e in report.exercises]
    return replace(report, exercises=exercises, reason=render(report.reason, lang), lang=lang,
                   notes=[render(note, lang) for note in report.notes])


# --- the authors' command -------------------------------------------------------------------

def main(argv: list[str] | None = None, prog: str = "python -m grader.authoring i18n") -> int:
    from grader.common import logs

    parser = argparse.ArgumentParser(prog=prog, description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("command", choices=["status", "sync", "extract", "missing"],
                        help="status: the coverage; sync (or extract): add the source's new ids "
                             "(empty translation), drop the stale ones; missing: list the ids "
                             "without a translation")
    parser.add_argument("--lang", default="zh",
                        help=f"a language with a catalogue ({', '.join(x for x in LANGUAGES if x != 'en')}), "
                             "or for sync a new one: its catalogue is made")
    logs.add_options(parser)
    args = parser.parse_args(argv)
    if args.lang == "en" or (args.lang not in LANGUAGES and args.command not in ("sync", "extract")):
        parser.error(f"--lang {args.lang}: no catalogue {_catalogue.po_path(args.lang)} (sync makes one)")
    logs.start(args, prog)
    if args.command in ("sync", "extract"):
        result = _catalogue.sync(args.lang)
    else:
        result = coverage(args.lang)
    if args.command == "missing":
        for template in result.missing:
            print(template)
        return 1 if result.missing else 0
    print(f"{args.lang}: {result.translated} of {result.templates} messages translated "
          f"({result.percent:.1f}%), of which {len(result.same)} marked the same in this language "
          f"(flag \"{_catalogue.SAME}\": logs, formats, library names); {len(result.stale)} stale, "
          f"{len(result.bad_fields)} with other fields ({_catalogue.po_path(args.lang)})")
    for template in result.bad_fields:
        print(f"  fields differ: {template}")
    return 1 if result.missing or result.bad_fields else 0


if __name__ == "__main__":
    sys.exit(main())
