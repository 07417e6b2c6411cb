"""Planted mistakes and alternative correct solutions, one module per lesson.

Each module ``tests/planted/lNN.py`` defines ``LESSON``, ``BUGS`` and ``ALTERNATIVES``.
A :class:`Variant` edits solution cells of the reference notebook (by nbgrader grade_id):
``replace`` substitutes text inside the cell (the text must be there, so a variant
cannot silently rot), ``source`` replaces the whole cell. A bug declares the ``mistake``
it plants (a key of its lesson's ``MISTAKES`` in ``grader/hidden``): it must lose points on
its ``exercise``, the first hint there must name that mistake, and no hint anywhere may
name another (``related`` lists the ids a bug may also show: the same mistake seen from a
second exercise). ``score`` is what the exercise earns with the bug, when the rubric fixes
it (CONTRIBUTING). An alternative must keep full marks everywhere.
"""

from __future__ import annotations

import copy
import dataclasses
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
    mistake: str = ""  # the id of the planted mistake (bugs only)
    related: tuple[str, ...] = ()  # other ids its hints may show
    score: float | None = None  # the exercise's score with this bug, when the rubric fixes it

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


def bug(exercise: str, mistake: str, description: str, *pairs: tuple[str, str], **kw: Any) -> Variant:
    """A planted mistake: text substitutions in the exercise's cell."""
    return Variant(exercise, description, replace=tuple(pairs), mistake=mistake, **kw)


def modules() -> list[Any]:
    """The lesson modules, each bug given its rubric score from the module's ``SCORES``
    (``{(exercise, description): score}``)."""
    found = []
    for m in pkgutil.iter_modules(__path__):
        if m.name.startswith("l") and m.name[1:].isdigit():
            module = importlib.import_module(f"planted.{m.name}")
            scores = getattr(module, "SCORES", {})
            module.BUGS = [dataclasses.replace(v, score=scores.get((v.exercise, v.description), v.score))
                           for v in module.BUGS]
            found.append(module)
    return found
