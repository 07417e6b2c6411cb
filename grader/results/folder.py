"""The graded folder ``grade --out DIR``: the one module that reads and writes it.

``DIR`` holds ``grades.csv`` (one row per student folder), ``results/<id>.json`` (one file
per student: the ``check`` object plus ``status``, then what that result was made from and
with), ``feedback/<id>/<lesson>.html`` and ``run.json`` (what the run did). The files keep
the spec's formats; this module only adds to them:

- ``results/<id>.json`` is :meth:`Report.to_dict <grader.results.Report.to_dict>`'s object:
  the spec's keys (:data:`SPEC_KEYS`) first, each exercise's hints kept as data beside the
  documented ``message`` (the hints joined by ``"; "``: ``"hints": [{"text", "mistake",
  "kind"}]``, so that readers group by mistake id and kind instead of parsing the English
  back), then keys of its own: ``notes``, ``seed``, the provenance (``submission``,
  ``graded_with``, ``graded_at``, ``untouched``) and ``schema``.
- ``run.json`` and every ``results/<id>.json`` carry ``"schema"`` (:data:`SCHEMA`). A
  folder of a newer schema is refused (:class:`RecordError`), never guessed at. Older
  folders are read as they were written: schema 0 (no ``schema`` anywhere, no hints as data)
  and 1 (the provenance in a second file, ``records/<id>.json``, beside a result without
  ``schema``); a rerun into such a folder writes its new results whole and removes their
  old ``records/<id>.json``.

Every file is written atomically (a temporary file, then ``os.replace``): a reader, or an
interrupted run, never sees half a file.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coursekit.errors import UserError
from grader.common import csvcells
from grader.i18n.message import msg
from grader.results import Report, Status

__all__ = ["CSV_HEADER", "LATE_COLUMNS", "SCHEMA", "SPEC_KEYS", "Folder", "Grades", "RecordError",
           "Status", "grades_row", "grades_table", "result_object", "write_atomic"]

#: The version of the folder's layout that this grader writes and the newest it reads.
#: 0: before hints were kept as data (no ``schema`` anywhere); 1: ``hints`` per exercise,
#: the provenance in ``records/<id>.json``; 2: one file per student, ``results/<id>.json``.
SCHEMA = 2

#: The keys the spec fixes for ``results/<id>.json``: the ``check`` object plus ``status``.
SPEC_KEYS = ("notebook", "lesson", "score", "max_score", "exercises", "status")

#: ``grades.csv``'s first columns (the spec's); the exercise columns follow them.
CSV_HEADER = ["student_id", "lesson", "score", "max_score", "status", "message"]
#: With a course's due dates (``grader.classgrade.late``), after the exercise columns: nbgrader's names.
LATE_COLUMNS = ["timestamp", "duedate", "raw_score", "late_submission_penalty"]


class RecordError(UserError):
    """A graded folder this grader cannot read as ``grade`` wrote it; ``str(exc)`` says why."""


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that no reader ever sees a partial file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def check_schema(data: Any, where: Path) -> int:
    """The schema of a ``run.json``, ``results/<id>.json`` or ``records/<id>.json`` object
    (0 before there was one); raises :class:`RecordError` for a schema newer than this grader's."""
    schema = data.get("schema", 0) if isinstance(data, dict) else 0
    if not isinstance(schema, int) or isinstance(schema, bool) or schema < 0:
        raise RecordError(msg("{path}: its schema {schema} is not one `grade` writes", path=where,
                              schema=repr(schema)))
    if schema > SCHEMA:
        raise RecordError(msg("{path} was written by a newer grader (folder schema {schema}; this "
                              "grader reads up to {readable_schema}): update the grader to read it",
                              path=where, schema=schema, readable_schema=SCHEMA))
    return schema


def result_object(report: Report) -> dict[str, Any]:
    """``results/<id>.json`` of ``report``: :meth:`Report.to_dict
    <grader.results.Report.to_dict>` (the spec's keys first) and the folder's schema."""
    return report.to_dict() | {"schema": SCHEMA}


# --- grades.csv -------------------------------------------------------------------------

def _one_line(text: str, limit: int = 600) -> str:
    return " ".join(str(text).split())[:limit]


def grades_row(student: str, report: Report, exercises: list[str],
               late: dict[str, Any] | None = None) -> list[Any]:
    """The ``grades.csv`` row of one student (its cells, as :meth:`Folder.write_grades`
    writes them); ``exercises`` are the lesson's, in column order. ``late`` (the
    ``LATE_COLUMNS`` and ``note``): ``score`` is then the raw score less the penalty, and
    the note ends the message."""
    points = {x.name: round(x.points, 4) for x in report.exercises}
    penalty = float(late["late_submission_penalty"]) if late else 0.0
    message = " ".join([report.message, str(late.get("note", ""))] if late else [report.message])
    row = [student, report.lesson, round(report.score - penalty, 4), report.max_score,
           str(report.status), _one_line(message.strip())] + [points.get(x, 0) for x in exercises]
    return row + ([late[c] for c in LATE_COLUMNS] if late else [])


def grades_table(rows: list[list[Any]], exercises: list[str], late: bool = False) -> str:
    """``grades.csv``'s text: the header, then ``rows`` (:func:`grades_row`)."""
    buf = io.StringIO()
    writer = csvcells.Writer(buf)  # a student id is never a spreadsheet formula
    writer.writerow(CSV_HEADER + exercises + (LATE_COLUMNS if late else []))
    writer.writerows(rows)
    return buf.getvalue()


@dataclass
class Grades:
    """``grades.csv``: its header and rows (each a dict by column, cells as read)."""

    path: Path
    header: list[str]
    rows: list[dict[str, str]]

    @property
    def written_by_grade(self) -> bool:
        return self.header[:len(CSV_HEADER)] == CSV_HEADER

    @property
    def exercises(self) -> list[str]:
        """The exercise columns (the late-work columns that may follow them are not)."""
        return [h for h in self.header[len(CSV_HEADER):] if h not in LATE_COLUMNS]


# --- the folder -------------------------------------------------------------------------

class Folder:
    """A ``grade --out`` folder: every path in it, and every read and write of it."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    # paths
    @property
    def grades_csv(self) -> Path:
        return self.path / "grades.csv"

    @property
    def run_json(self) -> Path:
        return self.path / "run.json"

    def result_path(self, student: str) -> Path:
        return self.path / "results" / f"{student}.json"

    def record_path(self, student: str) -> Path:
        """Where schema 0 and 1 kept what a result was made from and with (read, never written)."""
        return self.path / "records" / f"{student}.json"

    def feedback_path(self, student: str, lesson: str) -> Path:
        return self.path / "feedback" / student / f"{lesson}.html"

    # writing
    def prepare(self) -> None:
        """The folder and its ``results/``; grades never end up in a commit by accident:
        the folder ignores itself."""
        (self.path / "results").mkdir(parents=True, exist_ok=True)
        ignore = self.path / ".gitignore"
        if not ignore.exists():
            write_atomic(ignore, "# written by `python -m grader grade`: grades stay out of git\n*\n")

    def write_result(self, student: str, report: Report) -> None:
        """The student's one file (:func:`result_object`); an older grader's
        ``records/<id>.json`` of them goes (their new result holds all of it)."""
        write_atomic(self.result_path(student), json.dumps(result_object(report), ensure_ascii=False))
        record = self.record_path(student)
        record.unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # the last one: records/ goes too
            record.parent.rmdir()

    def write_feedback(self, student: str, lesson: str, html: str) -> None:
        write_atomic(self.feedback_path(student, lesson), html)

    def write_grades(self, rows: list[list[Any]], exercises: list[str], late: bool = False) -> None:
        """``grades.csv`` of ``rows`` (:func:`grades_row`); ``late``: with ``LATE_COLUMNS``."""
        write_atomic(self.grades_csv, grades_table(rows, exercises, late))

    def write_run(self, run: dict[str, Any]) -> None:
        write_atomic(self.run_json, json.dumps(dict(run, schema=SCHEMA), indent=2))

    # reading
    def read_run(self) -> dict[str, Any]:
        """``run.json`` ({} when there is none: an interrupted first run, or not `grade`'s)."""
        try:
            run = json.loads(self.run_json.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(run, dict):
            return {}
        check_schema(run, self.run_json)
        return run

    def schema(self) -> int:
        """The folder's schema (``run.json``'s; 0 before there was one). Raises
        :class:`RecordError` when it is newer than this grader's."""
        return int(self.read_run().get("schema", 0))

    def read_grades(self) -> Grades:
        """``grades.csv`` as written (formula-guarded cells read back as typed). Raises
        :class:`RecordError` when it cannot be read or the folder's schema is newer."""
        self.schema()
        path = self.grades_csv
        try:
            with path.open(newline="", encoding="utf-8") as f:
                reader = csv.DictReader(f)
                header = list(reader.fieldnames or [])
                rows = [csvcells.read_row(r) for r in reader]
        except OSError as exc:
            raise RecordError(msg("cannot read {path}: {reason} (a folder `grade --out` wrote?)",
                                  path=path, reason=exc.strerror or exc)) from None
        return Grades(path, header, rows)

    def read_result(self, student: str) -> Report | None:
        """The student's report, from ``results/<student>.json`` (None when it is absent or
        unreadable). A result written before one result (no ``schema`` in it) is read with its
        ``records/<student>.json`` as it was written, one from before hints were kept as data
        too. Raises :class:`RecordError` for a result or record of a newer schema."""
        path = self.result_path(student)
        data = _json_object(path)
        if data is None:
            return None
        if "schema" in data:
            check_schema(data, path)
        else:  # schema 0 or 1: the spec's keys here, the rest in the record
            record = _json_object(self.record_path(student)) or {}
            check_schema(record, self.record_path(student))
            data = record | {k: data[k] for k in SPEC_KEYS if k in data}
        try:
            return Report.from_dict(data)
        except (KeyError, TypeError, ValueError):
            return None

    def feedback_pages(self) -> Iterator[tuple[str, str, Path]]:
        """``(student, lesson, page)`` of every feedback page, in order."""
        for page in sorted((self.path / "feedback").glob("*/*.html")):
            yield page.parent.name, page.stem, page


def _json_object(path: Path) -> dict[str, Any] | None:
    """The JSON object in ``path`` (None when absent, unreadable or not an object)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None
