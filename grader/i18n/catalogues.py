"""The catalogues: gettext ``.po`` files, one per language, read and written with Babel.

``grader/i18n/locale/<lang>/LC_MESSAGES/grader.po``: each ``msgid`` is a message's English
template (its id, as written in ``msg("...")`` or ``t("...")``), each ``msgstr`` its
translation, with the same ``{name}`` fields in any order (a field may go: ``{s}``, the
English plural's ending, has no place in Chinese). An entry flagged ``same`` is the same in
that language on purpose (a log line, a date format, a library's names); an empty ``msgstr``
is one nobody wrote yet. A new language is one more such file.

:func:`source_templates` reads every id in the source (with ``ast``: the first argument of
each ``msg(...)`` and ``t(...)``, and of each ``sentence(...)`` of ``coursekit``, whose errors
say :class:`coursekit.errors.Sentence`; ``t("...")`` in the Jinja templates); :func:`sync` adds the
new ones with an empty translation and drops those no longer in the source; :func:`coverage`
counts what is missing.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from grader.i18n.message import escape, parts

PACKAGE = Path(__file__).resolve().parents[1]   # grader/
LOCALE_DIR = Path(__file__).resolve().parent / "locale"
DOMAIN = "grader"
#: The flag of an entry that is the same in this language on purpose.
SAME = "same"
#: Where the ids are written (paths relative to the grader package).
SOURCES = ("**/*.py", "common/templates/*.j2")
#: coursekit (it imports nothing of the grader): its errors' ``sentence("...")``.
COURSEKIT = PACKAGE.parent / "coursekit"
#: The calls whose first argument is a message's template, as written.
MESSAGE_CALLS = ("msg", "sentence")
#: The files' header dates (``write``'s, a ``datetime`` made there: a check never imports it):
#: no diff on each sync.
FIXED_DATE = (2026, 1, 1)


def po_path(lang: str, root: Path | None = None) -> Path:
    return (root or LOCALE_DIR) / lang / "LC_MESSAGES" / f"{DOMAIN}.po"


def languages(root: Path | None = None) -> tuple[str, ...]:
    """English (the source) and every language with a catalogue."""
    return ("en", *sorted(p.parent.parent.name for p in (root or LOCALE_DIR).glob(f"*/LC_MESSAGES/{DOMAIN}.po")))


@dataclass(frozen=True)
class Entry:
    translation: str
    same: bool = False

    @property
    def text(self) -> str:
        """What the id renders as ("" when nobody translated it)."""
        return self.translation


def read(lang: str, root: Path | None = None) -> dict[str, Entry]:
    """``{id: Entry}`` of ``lang``'s catalogue (empty when it has none)."""
    path = po_path(lang, root)
    if not path.is_file():
        return {}
    from babel.messages.pofile import read_po

    with path.open("rb") as fh:
        catalog = read_po(fh, locale=lang.replace("-", "_") if lang.isalpha() else None)
    out = {}
    for message in catalog:
        if message.id and isinstance(message.id, str):
            same = SAME in message.flags
            out[message.id] = Entry(message.id if same else str(message.string or ""), same)
    return out


def write(lang: str, entries: dict[str, Entry], root: Path | None = None) -> Path:
    from datetime import UTC, datetime

    from babel.messages.catalog import Catalog
    from babel.messages.pofile import write_po

    date = datetime(*FIXED_DATE, tzinfo=UTC)
    catalog = Catalog(locale=lang if lang.isalpha() else None, domain=DOMAIN, project="attention-course",
                      charset="utf-8", fuzzy=False, creation_date=date, revision_date=date)
    for key, entry in entries.items():
        flags = (["python-brace-format"] if re.search(r"(?<!\{)\{[A-Za-z_]", key) else []) + ([SAME] if entry.same else [])
        catalog.add(key, key if entry.same else entry.translation, flags=flags)
    path = po_path(lang, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh:
        write_po(fh, catalog, width=0, omit_header=False)
    return path


@cache
def table(lang: str) -> dict[str, str]:
    """``{id: translation}`` of ``lang`` (empty for English): what :func:`grader.i18n.render`
    reads."""
    if lang == "en":
        return {}
    return {key: entry.text for key, entry in read(lang).items() if entry.text}


def fields(template: str) -> list[str]:
    return [v for k, v in parts(template) if k == "field"]


# --- the ids in the source ------------------------------------------------------------------

def _first_string(node: ast.Call) -> str | None:
    if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
        return node.args[0].value
    return None


def ids_in_python(source: str) -> list[str]:
    """The ids of ``msg("...", ...)``, ``sentence("...", ...)`` and ``t("...")`` (a fixed word
    of a page) calls."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in (*MESSAGE_CALLS, "t"):
            text = _first_string(node)
            if text is not None:
                found.append(escape(text) if node.func.id == "t" else text)
    return found


_T_CALL = re.compile(r"""\bt\(\s*"((?:[^"\\]|\\.)*)"\s*\)""")


def ids_in_jinja(source: str) -> list[str]:
    """The words of a template marked ``t("...")``."""
    return [escape(m.group(1)) for m in _T_CALL.finditer(source)]


def source_files(root: Path = PACKAGE) -> list[tuple[str, Path]]:
    """``(name, path)`` of each file messages are written in: the grader's (named from
    ``root``), then coursekit's (``coursekit/...``)."""
    files = [(path.relative_to(root).as_posix(), path) for pattern in SOURCES
             for path in sorted(root.glob(pattern)) if "locale" not in path.parts]
    if root == PACKAGE:
        files += [(path.relative_to(PACKAGE.parent).as_posix(), path) for path in sorted(COURSEKIT.glob("*.py"))]
    return files


def source_templates(root: Path = PACKAGE) -> dict[str, list[str]]:
    """``{id: [files it is written in]}`` of every message a student or instructor may read."""
    found: dict[str, list[str]] = {}
    for name, path in source_files(root):
        text = path.read_text(encoding="utf-8")
        for template in ids_in_jinja(text) if path.suffix == ".j2" else ids_in_python(text):
            where = found.setdefault(template, [])
            if name not in where:
                where.append(name)
    return found


# --- keeping the catalogues in step ---------------------------------------------------------

@dataclass
class Coverage:
    templates: int
    translated: int
    missing: list[str]
    stale: list[str]
    bad_fields: list[str]   # translations with a field their English lacks
    same: list[str] = field(default_factory=list)  # marked the same in this language

    @property
    def percent(self) -> float:
        return 100.0 * self.translated / self.templates if self.templates else 100.0


def coverage(lang: str, templates: Iterable[str] | None = None,
             entries: dict[str, Entry] | None = None) -> Coverage:
    entries = read(lang) if entries is None else entries
    wanted = list(templates if templates is not None else source_templates())
    # a "translation" that is the English itself, unmarked, is one nobody wrote
    missing = [t for t in wanted if t not in entries
               or not (entries[t].same or entries[t].text and entries[t].text != t)]
    stale = [t for t in entries if t not in set(wanted)]
    bad = [t for t, e in entries.items() if e.text and not e.same and not set(fields(e.text)) <= set(fields(t))]
    same = [t for t in wanted if t in entries and entries[t].same]
    return Coverage(len(wanted), len(wanted) - len(missing), missing, stale, bad, same)


def in_sync_order(wanted: dict[str, list[str]]) -> list[str]:
    """The ids as a catalogue keeps them: by the first file each is written in, then the id
    (so that a sync adds or drops entries in place and moves none)."""
    return sorted(wanted, key=lambda t: (wanted[t][0], t))


def sync(lang: str) -> Coverage:
    """Add the source's new ids (untranslated) and drop the stale ones."""
    wanted = source_templates()
    old = read(lang)
    merged = {t: old.get(t, Entry("")) for t in in_sync_order(wanted)}
    write(lang, merged)
    table.cache_clear()
    return coverage(lang, wanted)
