"""The graded folder ``grade --out DIR``: the one module that reads and writes it.

``DIR`` holds ``grades.csv`` (one row per student folder), ``results/<id>.json`` (the
``check`` object plus ``status``), ``records/<id>.json`` (what that result was made from
and with), ``feedback/<id>/<lesson>.html`` and ``run.json`` (what the run did). The files
keep the spec's formats; this module only adds to them:

- ``run.json`` and every ``records/<id>.json`` carry ``"schema"`` (:data:`SCHEMA`). A
  folder without it was written before it (schema 0): read as it always was. A folder of
  a newer schema is refused (:class:`RecordError`), never guessed at.
- each exercise of ``results/<id>.json`` keeps its hints as data beside the documented
  ``message`` (the hints joined by ``"; "``): ``"hints": [{"text", "mistake", "kind"}]``,
  so that readers group by mistake id and kind instead of parsing the English back.

A student's two files hold one :class:`~grader.results.Report`: :meth:`Folder.write_result`
splits :meth:`Report.to_dict <grader.results.Report.to_dict>`'s object into them (the spec
fixes ``results/<id>.json``'s keys: the ``check`` object plus ``status``), and
:meth:`Folder.read_result` reads them back into one, whichever grader wrote them.

Every file is written atomically (a temporary file, then ``os.replace``): a reader, or an
interrupted run, never sees half a file.
"""

from __future__ import annotations

import csv
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coursekit.errors import UserError
from grader import csvcells
from grader.results import Report, Status
from grader.results.render import CSV_HEADER, LATE_COLUMNS

__all__ = ["CSV_HEADER", "LATE_COLUMNS", "SCHEMA", "Folder", "Grades", "RecordError", "Status",
           "result_object", "write_atomic"]

#: The version of the folder's layout that this grader writes and the newest it reads.
#: 0: before hints were kept as data (no ``schema`` anywhere); 1: ``hints`` per exercise.
SCHEMA = 1


class RecordError(UserError):
    """A graded folder this grader cannot read as ``grade`` wrote it; ``str(exc)`` says why."""


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that no reader ever sees a partial file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def check_schema(data: Any, where: Path) -> int:
    """The schema of a ``run.json`` or ``records/<id>.json`` object (0 before there was
    one); raises :class:`RecordError` for a schema newer than this grader's."""
    schema = data.get("schema", 0) if isinstance(data, dict) else 0
    if not isinstance(schema, int) or isinstance(schema, bool) or schema < 0:
        raise RecordError(f"{where}: its schema {schema!r} is not one `grade` writes")
    if schema > SCHEMA:
        raise RecordError(f"{where} was written by a newer grader (folder schema {schema}; this "
                          f"grader reads up to {SCHEMA}): update the grader to read it")
    return schema


# --- what a student's two files hold ------------------------------------------------------

#: The keys of :meth:`Report.to_dict <grader.results.Report.to_dict>` that go to
#: ``results/<id>.json`` (the spec's object); the others go to ``records/<id>.json``.
RESULT_KEYS = ("notebook", "lesson", "score", "max_score", "exercises", "status")


def split(report: Report) -> tuple[dict[str, Any], dict[str, Any]]:
    """``results/<id>.json`` and ``records/<id>.json`` of ``report``: the contract's object
    plus ``status``, each exercise's hints kept as data beside its ``message``; then the
    rest (its notes, seed and provenance) and the folder's schema."""
    record = report.to_dict()
    result = {key: record.pop(key) for key in RESULT_KEYS}
    return result, record | {"schema": SCHEMA}


def result_object(report: Report) -> dict[str, Any]:
    """``results/<id>.json`` of ``report`` (:func:`split`)."""
    return split(report)[0]


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
        """The student's record, then their result (a result is never without its record)."""
        result, record = split(report)
        write_atomic(self.record_path(student), json.dumps(record, ensure_ascii=False))
        write_atomic(self.result_path(student), json.dumps(result, ensure_ascii=False))

    def write_feedback(self, student: str, lesson: str, html: str) -> None:
        write_atomic(self.feedback_path(student, lesson), html)

    def write_grades(self, text: str) -> None:
        write_atomic(self.grades_csv, text)

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
            raise RecordError(f"cannot read {path}: {exc.strerror or exc} "
                              "(a folder `grade --out` wrote?)") from None
        return Grades(path, header, rows)

    def read_result(self, student: str) -> Report | None:
        """The student's report, from ``results/<student>.json`` and its record (None when
        the result is absent or unreadable; a result written before records, or before hints
        were kept as data, is read as it was written). Raises :class:`RecordError` for a
        record of a newer schema."""
        data = _json_object(self.result_path(student))
        if data is None:
            return None
        record = _json_object(self.record_path(student)) or {}
        check_schema(record, self.record_path(student))
        try:
            return Report.from_dict(dict(record, **{k: data[k] for k in RESULT_KEYS if k in data}))
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
