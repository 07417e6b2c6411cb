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

``read_roster`` and :func:`pair` are the roster side, shared with the course-wide gradebook
(``grader.outputs.gradebook``): ids are compared in one Unicode form (``grader.common.ids``), a
roster matching nobody is refused with nothing written, and any id left unmatched on either
side is listed (:meth:`Match.mismatch`, and a non-zero exit status in both commands).

The columns an LMS matches students on (Canvas's ``ID``, ``SIS User ID``, ``SIS Login ID``;
Moodle's key column) are written exactly as the roster gave them: the LMS reads them, not
a spreadsheet, and an id with a ``'`` before it would match nobody. Every other cell is
neutralised as in every CSV of the course (``grader.common.csvcells``).
"""

from __future__ import annotations

import csv
import io
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from coursekit.errors import UserError
from grader.common import csvcells, ids
from grader.common.templating import points
from grader.i18n import said_lines
from grader.i18n.message import Message, msg
from grader.results.folder import Folder, RecordError, Status

CANVAS_IDENTITY = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
CANVAS_KEYS = {"login": "SIS Login ID", "sis": "SIS User ID", "id": "ID", "name": "Student"}
CANVAS_MATCHED_ON = ["ID", "SIS User ID", "SIS Login ID"]  # what Canvas's importer finds students by
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
    skipped: list[Message] = field(default_factory=list)  # rows that are not students, and why

    def name(self, row: dict[str, str]) -> str:
        if self.lms == "moodle":
            return f"{row.get('First name', '')} {row.get('Last name', '')}".strip()
        return row.get("Student") or row.get("Name") or ""


@dataclass
class Lesson:
    """One graded folder: its ``grades.csv`` rows by student_id (in NFC, ``grader.common.ids.key``)."""

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

    def unmatched_lines(self, roster: Roster, left: Message, dropped: Message) -> list[Message]:
        """The summary's lines naming every student that matched nothing (look-alike ids
        spelled out, ``grader.common.ids.shown``); ``left`` and ``dropped`` say what the command
        did with a roster student graded in no folder and a graded student not in the roster."""
        lines = []
        if self.roster_only:
            lines.append(msg("in the roster, graded in no folder ({done_with_them}): {students}",
                             done_with_them=left,
                             students=", ".join(_who(roster, r, self.key) for r in self.roster_only)))
        if self.blank_key:
            lines.append(msg("in the roster with an empty {column} (cannot be matched): {names}",
                             column=repr(self.key),
                             names=", ".join(roster.name(r) or "?" for r in self.blank_key)))
        if self.graded_only:
            lines.append(msg("graded, not in the roster ({done_with_them}): {students}",
                             done_with_them=dropped, students=", ".join(map(ids.shown, self.graded_only))))
        return lines

    def mismatch(self) -> Message | str:
        """What matched nothing, counted (the summary names them); empty when everyone matched."""
        parts: list[Message | str] = [msg("{students} graded student(s) not in the roster",
                                          students=len(self.graded_only))] if self.graded_only else []
        unmatched = len(self.roster_only) + len(self.blank_key)
        if unmatched:
            parts.append(msg("{students} roster student(s) matched to no graded student", students=unmatched))
        return msg("{first} and {second}", first=parts[0], second=parts[1]) if len(parts) == 2 \
            else (parts[0] if parts else "")


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
        raise LmsError(msg("cannot read the roster {roster}: {error}", roster=path, error=exc)) from None
    if not rows:
        raise LmsError(msg("the roster {roster} is empty", roster=path))
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
            roster.skipped.append(msg("line {line}: Canvas's Test Student", line=line))
            continue
        roster.rows.append(row)
    return roster


def key_column(roster: Roster, key: str | None) -> str:
    """The roster column that holds student_id: an alias (login, sis, id, email, ...) or a
    column name."""
    key = key or DEFAULT_KEY.get(roster.lms)
    if key is None:
        raise LmsError(msg("this roster is neither Canvas's nor Moodle's gradebook export: name its "
                           "key column with --key (columns: {columns})", columns=", ".join(roster.columns)))
    aliases = CANVAS_KEYS if roster.lms == "canvas" else MOODLE_KEYS if roster.lms == "moodle" else {}
    column = aliases.get(key, key)
    if column not in roster.columns:
        columns = ", ".join(roster.columns)
        if roster.lms == "canvas" and key == "email":
            raise LmsError(msg("the roster has no column {column} (Canvas's gradebook export has no email "
                               "column: its SIS Login ID is often the login or email); its columns: {columns}",
                               column=repr(column), columns=columns))
        raise LmsError(msg("the roster has no column {column}; its columns: {columns}",
                           column=repr(column), columns=columns))
    return column


def read_lesson(folder: str | Path, assignment: str | None = None) -> Lesson:
    """``grades.csv`` of a graded folder (``grader.results.folder``), by student_id."""
    graded = Folder(folder)
    try:
        grades = graded.read_grades()
    except RecordError as exc:
        raise LmsError(*exc.args) from None
    folder, path, rows = graded.path, grades.path, grades.rows
    if not rows or "student_id" not in grades.header:
        raise LmsError(msg("{grades} has no graded students", grades=path))
    lessons = {r["lesson"] for r in rows}
    if len(lessons) != 1:
        raise LmsError(msg("{grades} mixes lessons: {lessons}", grades=path, lessons=", ".join(sorted(lessons))))
    lesson = lessons.pop()
    by_id: dict[str, dict[str, str]] = {}
    for row in rows:
        same = by_id.setdefault(ids.key(row["student_id"]), row)
        if same is not row:
            raise LmsError(msg("{grades}: two rows are one student once Unicode composition is ignored: "
                               "{student}, {same_student}", grades=path, student=ids.shown(same["student_id"]),
                               same_student=ids.shown(row["student_id"])))
    return Lesson(folder, lesson, float(rows[0]["max_score"]), by_id, assignment or lesson)


# --- matching ---------------------------------------------------------------------------

def _norm(value: str) -> str:
    """A roster cell as compared: surrounding spaces (a spreadsheet's) dropped, then :func:`_id`."""
    return _id(value.strip())


def _id(student_id: str) -> str:
    """A graded student's id (a folder's name, kept whole: ``"\tx"`` and ``"\rx"`` are two
    folders) as compared: case and Unicode composition ignored."""
    return ids.key(ids.key(student_id).casefold())


def match(roster: Roster, key: str, student_ids: list[str], local_part: bool = False) -> Match:
    """Pair roster rows with graded student_ids by ``key`` (case, surrounding spaces and
    Unicode composition ignored: ``grader.common.ids``; with ``local_part``, only what precedes "@"
    in the roster's value, for rosters keyed by email and students by user name). Raises
    LmsError when a key is there twice, on either side."""
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
        raise LmsError(msg("the roster's {column} column is not unique: {values}", column=repr(key),
                           values=", ".join(dict.fromkeys(dupes))))
    graded: dict[str, str] = {}
    for student in student_ids:
        if graded.setdefault(_id(student), student) != student:
            raise LmsError(msg("two graded students are one id once case and Unicode composition are "
                               "ignored: {student}, {same_student}", student=ids.shown(graded[_id(student)]),
                               same_student=ids.shown(student)))
    matched = [(row, graded[k]) for k, row in by_key.items() if k in graded]
    roster_only = [row for k, row in by_key.items() if k not in graded]
    graded_only = sorted(s for k, s in graded.items() if k not in by_key)
    return Match(key, matched, roster_only, graded_only, blank)


def graded_students(lessons: Iterable[Lesson]) -> list[str]:
    """Every student graded in any of ``lessons``, once."""
    return sorted({s for x in lessons for s in x.rows})


def pair(roster: Roster, key: str, student_ids: list[str], local_part: bool = False) -> Match:
    """:func:`match`, refusing a roster whose ``key`` column matches no graded student (the
    wrong column, or emails against user names): an import, or a gradebook, of nobody."""
    m = match(roster, key, student_ids, local_part)
    if not m.matched:
        seen = [row.get(key, "").strip() for row in roster.rows if row.get(key, "").strip()]
        raise LmsError(msg(
            "no graded student matched the roster's {column} column (it holds e.g. {values}; the student ids "
            "are e.g. {students}): name the column that holds your student ids with --key (columns: "
            "{columns}){or_local_part}; nothing was written",
            column=repr(key), values=", ".join(map(ids.shown, seen[:3])) if seen else msg("nothing"),
            students=", ".join(map(ids.shown, student_ids[:3])), columns=", ".join(roster.columns),
            or_local_part="" if local_part else msg(", or --local-part for emails")))
    return m


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
        identity = [csvcells.Verbatim(row.get(c, "")) if c in CANVAS_MATCHED_ON else row.get(c, "")
                    for c in CANVAS_IDENTITY]
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
        line: list[str] = [csvcells.Verbatim(row.get(m.key, ""))]  # what Moodle matches on
        for x in lessons:
            graded = x.rows.get(student)
            line += [_score(x, student), graded["message"] if graded else ""]
        out.writerow(line)
    return buf.getvalue()


WRITERS = {"canvas": canvas_csv, "moodle": moodle_csv}


class Exported(NamedTuple):
    target: Path
    summary: str  # to print
    mismatch: Message | str  # what matched nothing (Match.mismatch): the command then exits 1

    def report(self, command: str, lang: str = "en") -> int:
        """Print the summary (and on stderr, any mismatch, in ``lang``: the summary's); the
        command's exit status."""
        from grader.i18n import render

        print(self.summary)
        if not self.mismatch:
            return 0
        print(f"grader {command}: " + render(msg(
            "{mismatch} (named above): {target} was written with the others; check the "
            "roster's key column (--key) and the folder names", mismatch=self.mismatch,
            target=self.target), lang), file=sys.stderr)
        return 1


def export(folders: list[str | Path], roster_path: str | Path, to: str, key: str | None = None,
           assignments: list[str] | None = None, out: str | Path | None = None,
           local_part: bool = False, lang: str = "en") -> Exported:
    """Write the import file (of the matched students: Moodle aborts an import at the
    first student it does not know)."""
    if to not in WRITERS:
        raise LmsError(msg("--to must be one of {choices}", choices=", ".join(WRITERS)))
    assignments = list(assignments or [])
    if len(assignments) > len(folders):
        raise LmsError(msg("more --assignment names than graded folders"))
    lessons = [read_lesson(f, a) for f, a in zip(folders, assignments + [None] * len(folders), strict=False)]
    roster = read_roster(roster_path)
    column = key_column(roster, key)
    graded = graded_students(lessons)
    m = pair(roster, column, graded, local_part)
    target = Path(out) if out else Path(folders[0]) / f"{to}-import.csv"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(WRITERS[to](roster, m, lessons), encoding="utf-8")
    return Exported(target, summary(target, roster, m, lessons, lang), m.mismatch())


def summary(target: Path, roster: Roster, m: Match, lessons: list[Lesson], lang: str = "en") -> str:
    """What ``lms`` wrote, in ``lang`` (the instructor's)."""
    lines = [msg("roster: {lms} export, {students} student(s), matched on {column}", lms=roster.lms,
                 students=len(roster.rows), column=repr(m.key))]
    for x in lessons:
        flagged = [f"{s} ({x.rows[s]['status']})" for _, s in m.matched
                   if s in x.rows and x.rows[s]["status"] != Status.OK]
        if flagged:
            lines.append(msg("{lesson}: not graded normally, exported as scored: {students}",
                             lesson=x.lesson, students=", ".join(flagged)))
    lines += m.unmatched_lines(roster, msg("left blank"), msg("not exported"))
    lines += [msg("skipped {row}", row=note) for note in roster.skipped]
    if not (m.roster_only or m.blank_key or m.graded_only):
        lines.append(msg("every roster student was graded and every graded student is in the roster"))
    if roster.lms == "canvas":
        known = [c for c in roster.columns if c not in CANVAS_IDENTITY]
        for x in lessons:
            if x.assignment not in known and not any(
                    c.startswith(x.assignment + " (") for c in known):
                lines.append(msg("WARNING: the roster has no assignment {assignment}: Canvas will add "
                                 "it as a new column. To fill an existing one, pass its name with "
                                 "--assignment (the roster's: {columns})", assignment=repr(x.assignment),
                                 columns=", ".join(c for c in known if re.search(r" [(][0-9]+[)]$", c))))
    first = msg("wrote {file}: {students} student(s), {assignments} assignment(s) ({names})",
                file=target, students=len(m.matched), assignments=len(lessons),
                names=", ".join(x.assignment for x in lessons))
    return said_lines(first, lines, lang)


def _who(roster: Roster, row: dict[str, str], key: str) -> str:
    name = roster.name(row)
    value = ids.shown(row.get(key, ""))
    return f"{name} <{value}>" if name else value
