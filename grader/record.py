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

Every file is written atomically (a temporary file, then ``os.replace``): a reader, or an
interrupted run, never sees half a file.
"""

from __future__ import annotations

import csv
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coursekit.errors import UserError
from grader import csvcells
from grader.results import CSV_HEADER, LATE_COLUMNS, Report, Status

__all__ = ["CSV_HEADER", "LATE_COLUMNS", "SCHEMA", "Folder", "Grades", "HintData",
           "RecordError", "Result", "ExerciseRecord", "Status", "write_atomic"]

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


# --- typed contents ---------------------------------------------------------------------

@dataclass(frozen=True)
class HintData:
    """One hint a student reads: its text, the mistake id it diagnoses (a key of the
    lesson's ``MISTAKES``, None for a symptom or an error) and its kind (``diagnosis``,
    ``error`` or ``symptom``: ``grader.hint.Hint``)."""

    text: str
    mistake: str | None = None
    kind: str = "symptom"

    def as_dict(self) -> dict[str, Any]:
        return {"text": self.text, "mistake": self.mistake, "kind": self.kind}

    @classmethod
    def of(cls, hint: Any) -> HintData:
        """From a ``grader.hint.Hint`` (or a plain string: a symptom)."""
        return cls(str(hint), getattr(hint, "mistake", None), getattr(hint, "kind", "symptom"))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HintData:
        mistake = data.get("mistake")
        return cls(str(data.get("text", "")), str(mistake) if mistake else None,
                   str(data.get("kind") or "symptom"))


@dataclass
class ExerciseRecord:
    """One exercise of ``results/<id>.json``. ``hints`` is None in a folder written before
    hints were kept as data: only ``message`` (the hints joined by ``"; "``) is known."""

    name: str
    points: float
    max_points: float
    passed: bool
    message: str
    hints: list[HintData] | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ExerciseRecord:
        hints = data.get("hints")
        return cls(str(data["name"]), float(data.get("points", 0)),
                   float(data.get("max_points", 0)), bool(data.get("passed", False)),
                   str(data.get("message") or ""),
                   [HintData.from_dict(h) for h in hints] if isinstance(hints, list) else None)


@dataclass
class Result:
    """``results/<id>.json``, typed; ``data`` is the object as read."""

    notebook: str
    lesson: str
    score: float
    max_score: float
    status: str
    exercises: list[ExerciseRecord]
    data: dict[str, Any] = field(repr=False, default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Result:
        return cls(str(data.get("notebook", "")), str(data.get("lesson", "")),
                   float(data.get("score", 0)), float(data.get("max_score", 0)),
                   str(data.get("status", "")),
                   [ExerciseRecord.from_dict(x) for x in data.get("exercises", [])], data)


def result_object(report: Report) -> dict[str, Any]:
    """``results/<id>.json`` of ``report``: the contract's object (``Report.as_record``),
    each exercise's hints kept as data beside its ``message``."""
    data = report.as_record()
    for exercise, shown in zip(data["exercises"], report.exercises, strict=True):
        exercise["hints"] = [HintData.of(h).as_dict() for h in shown.hints]
    return data


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
        write_atomic(self.result_path(student), json.dumps(result_object(report), ensure_ascii=False))

    def write_record(self, student: str, record: dict[str, Any]) -> None:
        write_atomic(self.record_path(student),
                     json.dumps(dict(record, schema=SCHEMA), ensure_ascii=False))

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

    def result_data(self, student: str) -> dict[str, Any] | None:
        """``results/<student>.json`` as read (None when absent or unreadable)."""
        try:
            data = json.loads(self.result_path(student).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def read_result(self, student: str) -> Result | None:
        data = self.result_data(student)
        return Result.from_dict(data) if data is not None else None

    def read_record(self, student: str) -> dict[str, Any] | None:
        """``records/<student>.json``: None when the student has no result; {} when the
        result has no readable record (made before records). Raises :class:`RecordError`
        for a record of a newer schema."""
        if not self.result_path(student).is_file():
            return None
        path = self.record_path(student)
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(record, dict):
            return {}
        check_schema(record, path)
        return record

    def feedback_pages(self) -> Iterator[tuple[str, str, Path]]:
        """``(student, lesson, page)`` of every feedback page, in order."""
        for page in sorted((self.path / "feedback").glob("*/*.html")):
            yield page.parent.name, page.stem, page

