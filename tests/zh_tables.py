"""The tables a notebook prints, read back from its text output: is each one aligned by display
width (汉字 take two columns, as ``coursekit.text.pad`` counts them), and is its header in the
notebook's language?

A table is three or more consecutive lines of two or more cells each (a cell: text without two
spaces in a row), the same number of cells in every line, and the line just above it when
each of that line's cells lines up with one of the table's columns (a header over a first column
of row labels, ``pad("", n)``). Lines holding ``[`` or ``]`` (tensors, lists) are never tables.
A column is aligned when its cells start at one column, end at one column, or hold a ``/`` at
one column (``12 / 30``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from coursekit.text import width

CELL = re.compile(r"\S+(?: \S+)*")
#: Chinese characters and full-width punctuation (as grader.authoring.editions counts them).
CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")
#: An English word: three or more lowercase letters, not part of a name in code (x.shape, top_k, f(x)).
ENGLISH_WORD = re.compile(r"(?<![\w.])[a-z]{3,}(?![\w.(])")

Cell = tuple[int, int, str]  # first display column, last + 1, text


@dataclass
class Table:
    header: list[Cell] | None
    rows: list[list[Cell]]

    def lines(self) -> list[list[Cell]]:
        return ([self.header] if self.header else []) + self.rows


def cells_of(line: str) -> list[Cell]:
    """The cells of ``line``, placed by display width."""
    out: list[Cell] = []
    column = position = 0
    for match in CELL.finditer(line):
        column += width(line[position:match.start()])
        out.append((column, column + width(match.group()), match.group()))
        column += width(match.group())
        position = match.end()
    return out


def _slash(cell: Cell) -> int | None:
    start, _, text = cell
    return start + width(text[:text.index("/")]) if "/" in text else None


def _aligned(cells: list[Cell]) -> bool:
    slashes = {_slash(c) for c in cells}
    return (len({c[0] for c in cells}) == 1 or len({c[1] for c in cells}) == 1
            or (None not in slashes and len(slashes) == 1))


def _over(header: list[Cell], rows: list[list[Cell]]) -> bool:
    """Whether every cell of ``header`` lines up with one column of ``rows``."""
    columns = [[row[j] for row in rows] for j in range(len(rows[0]))]
    return all(any(_aligned(column + [cell]) for column in columns) for cell in header)


def tables(text: str) -> list[Table]:
    """The tables in ``text``."""
    found: list[Table] = []
    lines = [line for line in text.splitlines()]
    parsed = [[] if "[" in line or "]" in line else cells_of(line) for line in lines]
    i = 0
    while i < len(lines):
        j = i
        while j < len(lines) and len(parsed[j]) >= 2 and len(parsed[j]) == len(parsed[i]):
            j += 1
        if j - i >= 3:
            rows = parsed[i:j]
            above = parsed[i - 1] if i else []
            header = above if above and len(above) < len(rows[0]) and _over(above, rows) else None
            found.append(Table(header, rows))
        i = max(j, i + 1)
    return found


def misaligned(table: Table) -> list[int]:
    """The columns (counted in the rows) whose cells do not line up."""
    return [j for j in range(len(table.rows[0])) if not _aligned([row[j] for row in table.rows])]


def english(table: Table) -> list[str]:
    """The cells of the table's first line (its header) that are English words, not Chinese."""
    first = table.lines()[0]
    return [text for _, _, text in first if not CJK.search(text) and ENGLISH_WORD.search(text)]
