"""No table a Chinese notebook prints has an English header or columns that do not line up by
display width (汉字 take two columns: ``f"{x:>10}"`` counts one, ``coursekit.text.pad`` two).

The tables are read from the stdout of every Chinese reference notebook, run once with the
``smoke`` preset (``conftest.executed_solution``, shared with ``test_solutions_execute``)."""

from __future__ import annotations

import nbformat
import pytest
from support import executed_solution, lessons
from zh_tables import cells_of, english, misaligned, tables

from coursekit import catalogue
from coursekit.text import row

pytestmark = pytest.mark.slow  # runs every Chinese notebook (once a run, shared)

ZH = [lesson for lesson in lessons() if "zh" in catalogue.get(lesson).editions]


def printed(nb: nbformat.NotebookNode) -> list[tuple[int, str]]:
    """(cell index, stdout text) of every code cell that printed something."""
    return [(index, "".join(o.text for o in cell.outputs if o.output_type == "stream" and o.name == "stdout"))
            for index, cell in enumerate(nb.cells) if cell.cell_type == "code"]


@pytest.mark.parametrize("lesson", ZH)
def test_chinese_tables_are_chinese_and_aligned(lesson: str, tmp_path_factory) -> None:
    nb = nbformat.read(executed_solution(tmp_path_factory, lesson, "zh"), as_version=4)
    problems = []
    for index, text in printed(nb):
        for table in tables(text):
            first = " | ".join(cell for _, _, cell in table.lines()[0])
            if words := english(table):
                problems.append(f"cell {index}: English in the header {words} ({first})")
            if columns := misaligned(table):
                problems.append(f"cell {index}: columns {columns} do not line up by display width ({first})")
    assert not problems, "\n".join(problems)


# --- the reader itself: what it must catch and what it must leave alone ------------------------

def test_a_table_padded_with_format_widths_is_misaligned_in_chinese() -> None:
    rows = [("位数", "完全匹配"), ("4", "99.5%"), ("12", "100.0%")]
    by_format = "\n".join(f"{a:>6} {b:>10}" for a, b in rows)            # :>N counts 汉字 as one
    by_width = "\n".join(row(r, (6, 10)) for r in rows)
    assert misaligned(tables(by_format)[0]) == [0, 1]
    assert misaligned(tables(by_width)[0]) == []


def test_an_english_header_is_found_over_a_column_of_labels() -> None:
    def lesson_11_table(header: tuple[str, str]) -> str:   # section 7.3's table: no label over the labels
        lines = [row(("", *header), (20, 18, 21), sep="  ")]
        lines += [row((label, a, b), (20, 18, 21), sep="  ")
                  for label, a, b in (("温度 1", "0.13%", "98.7%"), ("温度 1.5", "1.69%", "84.4%"),
                                      ("温度 1.5，top-p 0.9", "0.09%", "99.1%"))]
        return "\n".join(lines)

    (table,) = tables(lesson_11_table(("a token not drawn", "a whole answer right")))
    assert table.header is not None and english(table) == ["a token not drawn", "a whole answer right"]
    assert english(tables(lesson_11_table(("某个词元没抽中", "整个答案都对")))[0]) == []


def test_tensors_lists_and_code_names_are_not_tables_or_english() -> None:
    assert tables("tensor([[1.0,  2.0],\n        [3.0,  4.0],\n        [5.0,  6.0]])") == []
    table = tables("模块        毫秒\nLayerNorm   2.9\nnn.LayerNorm  0.4\nx.shape  1.0\n")[0]
    assert english(table) == []
    assert [c[2] for c in cells_of("  正确 / 总数   完全匹配")] == ["正确 / 总数", "完全匹配"]
    by_slash = "  位数      正确 / 总数\n     2         0 / 1\n     3         0 / 11\n"     # lesson 09's
    assert misaligned(tables(by_slash)[0]) == []
