"""Planted mistakes and alternative correct solutions, one module per lesson.

Each module ``tests/planted/lNN.py`` defines ``LESSON``, ``BUGS`` and ``ALTERNATIVES``.
A :class:`Variant` edits solution cells of the reference notebook (by nbgrader grade_id):
``replace`` substitutes text inside the cell (the text must be there, so a variant
cannot silently rot), ``source`` replaces the whole cell. A bug must lose points on its
``exercise``; an alternative must keep full marks everywhere.
"""

from __future__ import annotations

import copy
import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Variant:
    exercise: str  # the contract name = the grade_id of the solution cell edited
    description: str
    replace: tuple[tuple[str, str], ...] = ()
    source: str | None = None
    cell: str | None = None  # grade_id of the cell to edit, if not the exercise's own
    also: dict[str, Any] = field(default_factory=dict)  # extra {grade_id: [(old, new), ...]}

    def apply(self, nb: dict[str, Any]) -> dict[str, Any]:
        nb = copy.deepcopy(nb)
        edits = {self.cell or self.exercise: (self.replace, self.source)}
        for grade_id, pairs in self.also.items():
            edits[grade_id] = (tuple(pairs), None)
        for grade_id, (pairs, source) in edits.items():
            cell = _cell(nb, grade_id)
            text = source if source is not None else cell["source"]
            for old, new in pairs:
                if old not in text:
                    raise AssertionError(f"{self.description}: {old!r} not in cell {grade_id}")
                text = text.replace(old, new)
            cell["source"] = text
        return nb


def _cell(nb: dict[str, Any], grade_id: str) -> dict[str, Any]:
    for cell in nb["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == grade_id:
            return cell
    raise AssertionError(f"no cell with grade_id {grade_id}")


def bug(exercise: str, description: str, *pairs: tuple[str, str], **kw: Any) -> Variant:
    return Variant(exercise, description, replace=tuple(pairs), **kw)


def modules() -> list[Any]:
    return [importlib.import_module(f"planted.{m.name}")
            for m in pkgutil.iter_modules(__path__) if m.name.startswith("l")]
