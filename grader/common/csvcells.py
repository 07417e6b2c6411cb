"""CSV cells a spreadsheet shows as text, never runs as a formula (OWASP: CSV injection).

Excel and LibreOffice may evaluate a cell that begins with ``=``, ``+``, ``-``, ``@``, a tab
or a carriage return (``=HYPERLINK(...)``, ``@SUM(...)``, ``-2+3``), and a student id is a
folder name the student may have chosen. Every CSV the course writes (``grades.csv``, the
LMS exports, the course gradebook, nbgrader's export) passes its text cells through
:func:`text`, which puts ``'`` before such a cell: both spreadsheets show the rest as text
and hide the quote. A cell that already begins with ``'`` gets one more, so :func:`read`
gives back exactly what was written. Numbers are left as they are.

:class:`Writer` is the course's CSV writer: :func:`text` on every cell, ``\n`` between rows,
and a row holding a carriage return quoted in full (Python's ``csv`` quotes a field that
holds its line terminator, ``\n``, but not a lone ``\r``, which readers take for a line end).
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from typing import IO, Any

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
QUOTE = "'"


class Verbatim(str):
    """A cell written as it is: a form the reader expects, e.g. Canvas's ``="=Sum, Eve"``."""


def text(value: Any) -> Any:
    """``value`` as a CSV cell: a string that could start a formula is quoted."""
    if isinstance(value, Verbatim):
        return str(value)
    if isinstance(value, str) and value[:1] in (*FORMULA_STARTS, QUOTE):
        return QUOTE + value
    return value


def row(values: Iterable[Any]) -> list[Any]:
    return [text(value) for value in values]


def read(value: str) -> str:
    """A cell :func:`text` wrote, as it was before."""
    return value[1:] if value[:1] == QUOTE else value


def read_row(values: dict[str, str]) -> dict[str, str]:
    """A ``csv.DictReader`` row of a CSV the course wrote, every cell as it was before."""
    return {key: read(value) if isinstance(value, str) else value for key, value in values.items()}


class Writer:
    """``csv.writer`` for the course's CSVs (see the module's docstring)."""

    def __init__(self, f: IO[str]) -> None:
        self._plain = csv.writer(f, lineterminator="\n")
        self._quoted = csv.writer(f, lineterminator="\n", quoting=csv.QUOTE_ALL)

    def writerow(self, values: Iterable[Any]) -> None:
        cells = row(values)
        quoted = any(isinstance(cell, str) and "\r" in cell for cell in cells)
        (self._quoted if quoted else self._plain).writerow(cells)

    def writerows(self, rows: Iterable[Iterable[Any]]) -> None:
        for values in rows:
            self.writerow(values)
