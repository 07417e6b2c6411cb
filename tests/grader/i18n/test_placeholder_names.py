"""A placeholder's name tells the translator what it holds (issue 53, item 4): the translator
reads ``msgid "largest difference {largest} at index {worst}"`` alone, not the code that fills
it. A name glued together from the code that computes the value reads badly
(``{where_ok_diff}``, ``{got_astype_want}``, ``{exc_exc_type}``, ``{opts_out_3}``); this test
finds such names by three marks, whatever the name:

* a part that is a number (``_2``, ``_3``): a second value told apart by counting, not by what
  it is;
* a part written twice (``exc_exc_type``, ``n_kv_D_MODEL_n_head``): two expressions glued;
* a run of parts, short of the whole name, that is a function the value is computed with
  (``isinstance``, ``getattr``, ``astype``, ``rsplit``, ``removeprefix``, ``shape_of``,
  ``format_duration``): the code glued to its arguments, not the value (a class is no such mark:
  ``{error_type}`` may be ``type(exc).__name__``; nor is a name that is the function's whole
  name, ``{arguments}`` of ``_arguments(value)``).
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Iterator
from functools import cache

from grader.i18n import catalogues


def called(expr: ast.expr) -> set[str]:
    """The functions and methods ``expr`` calls, by name (builtin classes left out)."""
    names = set()
    for node in ast.walk(expr):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if name and not isinstance(getattr(builtins, name, None), type):
                names.add(name.lstrip("_"))
    return names


def code_marks(name: str, functions: set[str] = frozenset()) -> list[str]:  # type: ignore[assignment]
    """Why ``name`` reads as code ([] when it does not); ``functions``: those its value calls."""
    parts = name.split("_")
    marks = [f"part {p!r} is a number" for p in parts if p.isdigit()]
    marks += [f"part {p!r} twice" for p in dict.fromkeys(parts) if parts.count(p) > 1]
    runs = {"_".join(parts[i:j]) for i in range(len(parts)) for j in range(i + 1, len(parts) + 1)}
    marks += [f"named after {run}()" for run in sorted(runs & functions) if len(run) > 1 and run != name]
    return marks


@cache
def placeholders() -> tuple[tuple[str, str, str, frozenset[str]], ...]:
    """(file:line, template, field, the functions its value calls) of each ``msg(...)`` field
    (and each field of coursekit's ``sentence(...)``)."""
    found = []
    for where, path in catalogues.source_files():
        if path.suffix != ".py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in catalogues.MESSAGE_CALLS
                    and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                values = {kw.arg: kw.value for kw in node.keywords if kw.arg}
                for name in catalogues.fields(node.args[0].value):
                    calls = called(values[name]) if name in values else set()
                    found.append((f"{where}:{node.lineno}", node.args[0].value, name, frozenset(calls)))
    return tuple(found)


def _bad() -> Iterator[str]:
    for where, template, name, calls in placeholders():
        if marks := code_marks(name, set(calls)):
            yield f"{where}: {{{name}}} in {template!r}: {', '.join(marks)}"


def test_the_marks_find_the_names_a_codemod_makes() -> None:
    assert code_marks("where_ok_diff", {"format", "max", "where"})
    assert code_marks("got_astype_want", {"int", "astype", "sum"})
    assert code_marks("out_shape_isinstance", {"list", "isinstance"})
    assert code_marks("shape_of_out", {"shape_of"})
    assert code_marks("exc_exc_type") and code_marks("n_kv_D_MODEL_n_head") and code_marks("opts_out_3")
    assert not code_marks("largest", {"format", "max", "where"})
    assert not code_marks("error_type") and not code_marks("max_len") and not code_marks("T0")
    assert not code_marks("count", {"len"}) and not code_marks("twice_n_head")
    assert not code_marks("arguments", {"arguments"})


def test_every_template_is_read_with_its_fields() -> None:
    """The scan sees the source's messages (a scan that finds none would pass)."""
    seen = {template for _, template, _, _ in placeholders()}
    assert len(seen) > 300 and seen <= set(catalogues.source_templates())


def test_no_placeholder_is_named_after_code() -> None:
    bad = sorted(set(_bad()))
    assert not bad, f"{len(bad)} placeholders named after code:\n" + "\n".join(bad)
