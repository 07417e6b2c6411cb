"""coursekit.text pads by display width, so tables with Chinese line up."""

from __future__ import annotations

import pytest

from coursekit.text import pad, row, width


def test_width_counts_chinese_as_two_columns():
    assert width("1234") == 4
    assert width("一千二百") == 8
    assert width("预测：12") == 8            # full-width colon is wide too
    assert width("e\u0301") == 1             # a combining accent takes no column


@pytest.mark.parametrize("align, expected", [("<", "一千  |"), (">", "  一千|"), ("^", " 一千 |")])
def test_pad_fills_to_the_display_width(align, expected):
    assert pad("一千", 6, align) + "|" == expected


def test_rows_with_chinese_and_digits_line_up():
    rows = [pad(a, 10) + pad(b, 4, ">") for a, b in [("一万零五", 1), ("10005", 22)]]
    assert {width(r) for r in rows} == {14}


def test_pad_never_cuts_and_rejects_unknown_alignment():
    assert pad("一千二百三十四", 4) == "一千二百三十四"
    with pytest.raises(ValueError):
        pad("x", 3, "=")


def test_row_lines_up_headers_and_cells_by_display_width():
    header = row(("新词元数", "比值"), (10, 6))
    line = row((32, "19.6"), (10, 6))
    assert width(header) == width(line) == 17
    assert width(header.split("比值")[0]) == width(line.split("19.6")[0])         # the column ends line up
    assert row(("a", "b"), (2, 2), "<", " | ") == "a  | b "
    with pytest.raises(ValueError):
        row(("a", "b"), (2,))
