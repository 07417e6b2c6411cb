"""Text tables that line up in a terminal and a notebook, with Chinese in them.

A Chinese character takes two columns of a monospaced font, a Latin letter one, so
``f"{name:<12}"`` pads ``"一千二百"`` to 16 columns where ``"1200"`` gets 12. The lessons pad
by display width instead::

    from coursekit.text import pad, row
    print(pad("预测", 10) + pad("1234", 6, ">"))
    print(row(("位数", "完全匹配"), (6, 10)))      # a whole line, each cell right-aligned

and a table's columns are as wide as their widest cell's display width (:func:`columns`).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable


def width(text: str) -> int:
    """The columns ``text`` takes in a monospaced font: 2 for wide and full-width
    characters (汉字, full-width punctuation), 0 for combining marks, 1 for the rest."""
    columns = 0
    for char in text:
        if unicodedata.combining(char):
            continue
        columns += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
    return columns


def pad(text: object, columns: int, align: str = "<") -> str:
    """``str(text)`` padded with spaces to ``columns`` display columns: ``"<"`` left-aligned,
    ``">"`` right-aligned, ``"^"`` centred. Text already that wide is returned unchanged."""
    if align not in ("<", ">", "^"):
        raise ValueError(f"align must be '<', '>' or '^', not {align!r}")
    text = str(text)
    room = max(columns - width(text), 0)
    if align == "<":
        return text + " " * room
    if align == ">":
        return " " * room + text
    return " " * (room // 2) + text + " " * (room - room // 2)


def row(cells: Iterable[object], widths: Iterable[int], align: str = ">", sep: str = " ") -> str:
    """One line of a table: each cell :func:`pad`-ded to its width, joined by ``sep``; as many
    widths as cells. ``align``: one alignment for every cell, or one per cell (``"<>>"``)."""
    items = list(cells)
    aligns = align if len(align) > 1 else align * len(items)
    return sep.join(pad(cell, room, how) for cell, room, how in zip(items, widths, aligns, strict=True))


def columns(lines: Iterable[Iterable[object]], least: Iterable[int] = ()) -> list[int]:
    """The widths of a table's columns: each the display width of its widest cell among
    ``lines`` (a header and rows), and at least ``least``'s (a cell still to come)."""
    found = list(least)
    for line in lines:
        for i, cell in enumerate(line):
            if i == len(found):
                found.append(0)
            found[i] = max(found[i], width(str(cell)))
    return found
