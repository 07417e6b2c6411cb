"""Run notebook code cells in a namespace with notebook semantics, without a kernel.

IPython syntax (``%matplotlib inline``, ``%%time``, ``!pip ...``) is translated by
IPython's own input transformer; the resulting ``get_ipython()`` calls reach a small
shell that runs timing and capture magics and ignores the rest (plots, shell commands and
installs have no place in grading). Plots go to the non-interactive Agg backend.
"""

from __future__ import annotations

import linecache
import os
import sys
import traceback
from dataclasses import dataclass, field
from typing import Any

os.environ.setdefault("MPLBACKEND", "Agg")

_BODY_MAGICS = {"time", "timeit", "capture", "prun", "debug"}


class GradingShell:
    """The part of IPython's shell API that transformed cell code calls."""

    def __init__(self, namespace: dict[str, Any]):
        self.namespace = namespace
        self.user_ns = namespace
        self.skipped: list[str] = []

    def run_line_magic(self, name: str, line: str, _stack_depth: int = 1) -> Any:
        if name in _BODY_MAGICS and line.strip():
            return run_source(line, self.namespace, f"<%{name}>")
        self.skipped.append(f"%{name} {line}".strip())
        return None

    def run_cell_magic(self, name: str, line: str, cell: str) -> Any:
        if name in _BODY_MAGICS:
            return run_source(cell, self.namespace, f"<%%{name}>")
        self.skipped.append(f"%%{name} {line}".strip())
        return None

    def system(self, cmd: str) -> None:
        self.skipped.append(f"!{cmd}")

    def getoutput(self, cmd: str) -> list[str]:
        self.skipped.append(f"!{cmd}")
        return []

    def set_next_input(self, *args: Any, **kwargs: Any) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None


def _display(*objs: Any, **kwargs: Any) -> None:
    return None


def prepare_namespace(namespace: dict[str, Any] | None = None) -> dict[str, Any]:
    namespace = {} if namespace is None else namespace
    namespace.setdefault("__name__", "__main__")
    namespace.setdefault("__builtins__", __builtins__)
    shell = GradingShell(namespace)
    namespace["get_ipython"] = lambda: shell
    namespace.setdefault("display", _display)
    return namespace


def to_python(source: str) -> str:
    """Translate IPython syntax in a cell to plain Python."""
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager().transform_cell(source)


def run_source(source: str, namespace: dict[str, Any], filename: str) -> Any:
    code = to_python(source)
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    exec(compile(code, filename, "exec"), namespace)


@dataclass
class CellError:
    cell: int
    error: str
    where: str = ""


@dataclass
class RunReport:
    executed: int = 0
    errors: list[CellError] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "executed": self.executed,
            "errors": [{"cell": e.cell, "error": e.error, "where": e.where} for e in self.errors],
        }


def student_frames(tb: Any) -> str:
    """The lines of a traceback that point into notebook cells (never grader code)."""
    frames = [f for f in traceback.extract_tb(tb) if f.filename.startswith("<")]
    return "".join(traceback.format_list(frames[-3:]))


def run_cells(cells: list[tuple[int, str]], namespace: dict[str, Any]) -> RunReport:
    """Execute ``(index, source)`` cells in order; errors are recorded and execution goes on."""
    report = RunReport()
    for index, source in cells:
        try:
            run_source(source, namespace, f"<cell {index}>")
        except SystemExit as exc:
            report.errors.append(CellError(index, f"SystemExit: the cell called exit({exc.code!r})"))
        except KeyboardInterrupt:
            report.errors.append(CellError(index, "KeyboardInterrupt"))
        except BaseException as exc:  # noqa: BLE001 - any student error is recorded
            where = student_frames(exc.__traceback__)
            report.errors.append(CellError(index, f"{type(exc).__name__}: {exc}"[:500], where))
        report.executed += 1
        _close_figures()
    return report


def _close_figures() -> None:
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None:
        try:
            plt.close("all")
        except Exception:  # noqa: BLE001
            pass
