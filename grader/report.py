"""Printing a grading report: the spec's JSON, or a table for people."""

from __future__ import annotations

import json

from .engine import Report


def to_json(report: Report) -> str:
    return json.dumps(report.as_dict(), ensure_ascii=False)


def to_text(report: Report, color: bool = False) -> str:
    def paint(text: str, code: str) -> str:
        return f"\033[{code}m{text}\033[0m" if color else text

    width = max([len(e.name) for e in report.exercises] + [8])
    lines = [f"{report.lesson}  ({report.notebook})", ""]
    for e in report.exercises:
        mark = paint("✔", "32") if e.passed else paint("✘", "31")
        lines.append(f"  {mark} {e.name:<{width}}  {e.points:5.1f} / {e.max_points:<5.1f}")
        for failure in e.hints:
            lines.append(f"      hint: {failure}")
    lines.append(f"    {'total':<{width}}  {report.score:5.1f} / {report.max_score:<5.1f}")
    if report.message:
        lines += ["", paint(report.message, "33")]
    if report.cell_errors:
        lines += ["", "Cells that raised an error while the notebook ran:"]
        for err in report.cell_errors[:10]:
            lines.append(f"  cell {err.get('cell')}: {str(err.get('error'))[:200]}")
    return "\n".join(lines)
