"""``python -m grader lms DIR... --roster ROSTER --to canvas|moodle``: the class grader's
``grades.csv`` as a CSV that an LMS gradebook imports.

Students are matched through a roster exported from the LMS (Canvas: Grades > Export;
Moodle: Grades > Export > Plain text file) by one key column, whose values are the
``student_id`` folder names of ``submitted/``. Students on one side only are listed,
never dropped silently. The two layouts written follow the LMS's own code:

- Canvas: ``Student, ID, SIS User ID, SIS Login ID, Section``, then one column per
  assignment, ``Name (assignment_id)`` for an existing assignment or ``Name`` for a new one,
  and a ``Points Possible`` row (``GradebookImporter`` and ``GradebookExporter`` of
  instructure/canvas-lms: ``app/models/gradebook_importer.rb``, ``lib/gradebook_exporter.rb``;
  Instructure's guide "How do I import grades in the Gradebook?").
- Moodle: the key column (e.g. ``Email address``), then each assignment's grade and a
  feedback column; on import, map the key to the user field and each column to a grade
  item (``grade/import/csv`` of moodle/moodle: any unmatched user aborts the whole import,
  so only matched students are written).

``read_roster`` and ``match`` are the roster side, kept separate so that a course-wide
gradebook can reuse them.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from pathlib import Path

from coursekit.errors import UserError
from grader import csvcells
from grader.record import Folder, RecordError, Status
from grader.templating import points

CANVAS_IDENTITY = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
CANVAS_KEYS = {"login": "SIS Login ID", "sis": "SIS User ID", "id": "ID", "name": "Student"}
MOODLE_KEYS = {"email": "Email address", "idnumber": "ID number", "username": "Username"}
DEFAULT_KEY = {"canvas": "login", "moodle": "email"}
CANVAS_TEST_STUDENT = {"Student, Test", "Test Student"}
_FORMULA_GUARD = re.compile(r'^="(.*)"$')  # Canvas writes a name starting with "=" as ="..."


class LmsError(UserError):
    """A roster or grades file that cannot be used; ``str(exc)`` says why in a sentence."""


@dataclass
class Roster:
    lms: str  # "canvas", "moodle" or "csv"
    columns: list[str]
    rows: list[dict[str, str]]
    skipped: list[str] = field(default_factory=list)  # rows that are not students, and why

    def name(self, row: dict[str, str]) -> str:
        if self.lms == "moodle":
            return f"{row.get('First name', '')} {row.get('Last name', '')}".strip()
        return row.get("Student") or row.get("Name") or ""


@dataclass
class Lesson:
    """One graded folder: its ``grades.csv`` rows by student_id."""

    folder: Path
    lesson: str
    max_score: float
    rows: dict[str, dict[str, str]]
    assignment: str


@dataclass
class Match:
    key: str
    matched: list[tuple[dict[str, str], str]]  # (roster row, student_id)
    roster_only: list[dict[str, str]]  # in the LMS, graded in no folder
    graded_only: list[str]  # graded, not in the roster
    blank_key: list[dict[str, str]]  # roster rows with an empty key cell


# --- reading ----------------------------------------------------------------------------

def _rows(path: Path) -> list[list[str]]:
    text = path.read_text(encoding="utf-8-sig")  # Canvas adds a byte-order mark on request
    first = text.splitlines()[0] if text.strip() else ""
    delimiter = max([",", ";", "\t"], key=first.count)  # Canvas uses ";" in comma-decimal locales
    return [row for row in csv.reader(io.StringIO(text), delimiter=delimiter)]


def detect(header: list[str]) -> str:
    if len(header) > 3 and "Student" in header[0] and "ID" in header[1] and \
            any(h.strip() == "Section" for h in header):
        return "canvas"
    if "Email address" in header and "First name" in header:
        return "moodle"
    return "csv"


def read_roster(path: str | Path) -> Roster:
    """A roster exported from Canvas's or Moodle's gradebook (or any CSV with a header)."""
    path = Path(path)
    try:
        rows = _rows(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise LmsError(f"cannot read the roster {path}: {exc}") from None
    if not rows:
        raise LmsError(f"the roster {path} is empty")
    header = [h.strip() for h in rows[0]]
    roster = Roster(detect(header), header, [])
    for line, values in enumerate(rows[1:], start=2):
        if not any(v.strip() for v in values):
            continue
        first = values[0].strip()
        if roster.lms == "canvas" and first == "Points Possible":
            continue
        if roster.lms == "canvas" and all(re.fullmatch(r"\s*(Muted|Manual Posting.*)?\s*", v, re.I)
                                          for v in values):
            continue  # the posting-policy row under the header
        row = {h: _FORMULA_GUARD.sub(r"\1", v.strip()) for h, v in zip(header, values, strict=False)}
        if roster.lms == "canvas" and row.get("Student") in CANVAS_TEST_STUDENT:
            roster.skipped.append(f"line {line}: Canvas's Test Student")
            continue
        roster.rows.append(row)
    return roster


def key_column(roster: Roster, key: str | None) -> str:
    """The roster column that holds student_id: an alias (login, sis, id, email, ...) or a
    column name."""
    key = key or DEFAULT_KEY.get(roster.lms)
    if key is None:
        raise LmsError("this roster is neither Canvas's nor Moodle's gradebook export: name "
                       f"its key column with --key (columns: {', '.join(roster.columns)})")
    aliases = CANVAS_KEYS if roster.lms == "canvas" else MOODLE_KEYS if roster.lms == "moodle" else {}
    column = aliases.get(key, key)
    if column not in roster.columns:
        hint = (" (Canvas's gradebook export has no email column: its SIS Login ID is often "
                "the login or email)") if roster.lms == "canvas" and key == "email" else ""
        raise LmsError(f"the roster has no column {column!r}{hint}; its columns: "
                       f"{', '.join(roster.columns)}")
    return column


def read_lesson(folder: str | Path, assignment: str | None = None) -> Lesson:
    """``grades.csv`` of a graded folder (``grader.record``), by student_id."""
    graded = Folder(folder)
    try:
        grades = graded.read_grades()
    except RecordError as exc:
        raise LmsError(str(exc)) from None
    folder, path, rows = graded.path, grades.path, grades.rows
    if not rows or "student_id" not in grades.header:
        raise LmsError(f"{path} has no graded students")
    lessons = {r["lesson"] for r in rows}
    if len(lessons) != 1:
        raise LmsError(f"{path} mixes lessons: {', '.join(sorted(lessons))}")
    lesson = lessons.pop()
    return Lesson(folder, lesson, float(rows[0]["max_score"]), {r["student_id"]: r for r in rows},
                  assignment or lesson)


# --- matching ---------------------------------------------------------------------------

def _norm(value: str) -> str:
    return value.strip().casefold()


def match(roster: Roster, key: str, student_ids: list[str], local_part: bool = False) -> Match:
    """Pair roster rows with graded student_ids by ``key`` (case and surrounding spaces
    ignored; with ``local_part``, only what precedes "@" in the roster's value, for rosters
    keyed by email and students by user name). Raises LmsError when a key is there twice."""
    by_key: dict[str, dict[str, str]] = {}
    blank, dupes = [], []
    for row in roster.rows:
        value = _norm(row.get(key, ""))
        if local_part:
            value = value.split("@")[0]
        if not value:
            blank.append(row)
        elif value in by_key:
            dupes += [by_key[value].get(key, "").strip(), row.get(key, "").strip()]
        else:
            by_key[value] = row
    if dupes:
        raise LmsError(f"the roster's {key!r} column is not unique: {', '.join(dict.fromkeys(dupes))}")
    ids = {_norm(s): s for s in student_ids}
    matched = [(row, ids[k]) for k, row in by_key.items() if k in ids]
    roster_only = [row for k, row in by_key.items() if k not in ids]
    graded_only = sorted(s for k, s in ids.items() if k not in by_key)
    return Match(key, matched, roster_only, graded_only, blank)


# --- writing ----------------------------------------------------------------------------

def _score(lesson: Lesson, student: str) -> str:
    row = lesson.rows.get(student)
    return "" if row is None else points(float(row['score']))


def canvas_csv(roster: Roster, m: Match, lessons: list[Lesson]) -> str:
    buf = io.StringIO()
    out = csvcells.Writer(buf)
    out.writerow(CANVAS_IDENTITY + [x.assignment for x in lessons])
    out.writerow(["    Points Possible", "", "", "", ""] + [f"{x.max_score:g}" for x in lessons])
    for row, student in m.matched:
        identity = [row.get(c, "") for c in CANVAS_IDENTITY]
        if identity[0].startswith("="):
            identity[0] = csvcells.Verbatim(f'="{identity[0]}"')  # as Canvas's exporter writes it
        out.writerow(identity + [_score(x, student) for x in lessons])
    return buf.getvalue()


def moodle_csv(roster: Roster, m: Match, lessons: list[Lesson]) -> str:
    buf = io.StringIO()
    out = csvcells.Writer(buf)
    header = [m.key]
    for x in lessons:
        header += [x.assignment, f"{x.assignment} (feedback)"]
    out.writerow(header)
    for row, student in m.matched:
        line = [row.get(m.key, "")]
        for x in lessons:
            graded = x.rows.get(student)
            line += [_score(x, student), graded["message"] if graded else ""]
        out.writerow(line)
    return buf.getvalue()


WRITERS = {"canvas": canvas_csv, "moodle": moodle_csv}


def export(folders: list[str | Path], roster_path: str | Path, to: str, key: str | None = None,
           assignments: list[str] | None = None, out: str | Path | None = None,
           local_part: bool = False) -> tuple[Path, str]:
    """Write the import file; returns its path and the summary to print."""
    if to not in WRITERS:
        raise LmsError(f"--to must be one of {', '.join(WRITERS)}")
    assignments = list(assignments or [])
    if len(assignments) > len(folders):
        raise LmsError("more --assignment names than graded folders")
    lessons = [read_lesson(f, a) for f, a in zip(folders, assignments + [None] * len(folders), strict=False)]
    roster = read_roster(roster_path)
    column = key_column(roster, key)
    graded = sorted({s for x in lessons for s in x.rows})
    m = match(roster, column, graded, local_part)
    if not m.matched:  # an import of nobody: the key column is the wrong one
        seen = [row.get(column, "").strip() for row in roster.rows if row.get(column, "").strip()]
        raise LmsError(
            f"no graded student matched the roster's {column!r} column (it holds e.g. "
            f"{', '.join(seen[:3]) or 'nothing'}; the student ids are e.g. {', '.join(graded[:3])}): "
            f"name the column that holds your student ids with --key (columns: "
            f"{', '.join(roster.columns)}){'' if local_part else ', or --local-part for emails'}; "
            "nothing was written")
    target = Path(out) if out else Path(folders[0]) / f"{to}-import.csv"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(WRITERS[to](roster, m, lessons), encoding="utf-8")
    return target, summary(target, roster, m, lessons)


def summary(target: Path, roster: Roster, m: Match, lessons: list[Lesson]) -> str:
    lines = [f"wrote {target}: {len(m.matched)} student(s), "
             f"{len(lessons)} assignment(s) ({', '.join(x.assignment for x in lessons)})",
             f"  roster: {roster.lms} export, {len(roster.rows)} student(s), matched on {m.key!r}"]
    for x in lessons:
        flagged = [f"{s} ({x.rows[s]['status']})" for _, s in m.matched
                   if s in x.rows and x.rows[s]["status"] != Status.OK]
        if flagged:
            lines.append(f"  {x.lesson}: not graded normally, exported as scored: {', '.join(flagged)}")
    if m.roster_only:
        lines.append(f"  in the roster, graded in no folder (left blank): "
                     f"{', '.join(_who(roster, r, m.key) for r in m.roster_only)}")
    if m.blank_key:
        lines.append(f"  in the roster with an empty {m.key!r} (cannot be matched): "
                     f"{', '.join(roster.name(r) or '?' for r in m.blank_key)}")
    if m.graded_only:
        lines.append(f"  graded, not in the roster (not exported): {', '.join(m.graded_only)}")
    for note in roster.skipped:
        lines.append(f"  skipped {note}")
    if not (m.roster_only or m.blank_key or m.graded_only):
        lines.append("  every roster student was graded and every graded student is in the roster")
    if roster.lms == "canvas":
        known = [c for c in roster.columns if c not in CANVAS_IDENTITY]
        for x in lessons:
            if x.assignment not in known and not any(
                    c.startswith(x.assignment + " (") for c in known):
                lines.append(f"  WARNING: the roster has no assignment {x.assignment!r}: Canvas "
                             "will add it as a new column. To fill an existing one, pass its "
                             "name with --assignment (the roster's: "
                             f"{', '.join(c for c in known if re.search(r' [(][0-9]+[)]$', c))})")
    return "\n".join(lines)


def _who(roster: Roster, row: dict[str, str], key: str) -> str:
    name = roster.name(row)
    return f"{name} <{row.get(key, '')}>" if name else row.get(key, "")
