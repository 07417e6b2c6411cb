"""Run notebook code cells in a namespace with notebook semantics, without a kernel.

IPython syntax (``%matplotlib inline``, ``%%time``, ``!pip ...``) is translated by
IPython's own input transformer; the resulting ``get_ipython()`` calls reach a small
shell that runs timing and capture magics and ignores the rest (plots, shell commands and
installs have no place in grading). Plots go to the non-interactive Agg backend.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import linecache
import os
import re
import sys
import time
import traceback
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, TypeGuard

from .errors import out_of_memory

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


_LINE_MAGIC = re.compile(r"%(?!%)([A-Za-z_]\w*)[ \t]*(.*)")


def _leading_magics(source: str) -> str:
    """``%name args`` lines at the top of a cell (``%matplotlib inline``) as the call
    IPython's transformer makes of them; the rest of the cell unchanged."""
    lines = source.splitlines(keepends=True)
    for i, line in enumerate(lines):
        match = _LINE_MAGIC.fullmatch(line.rstrip("\r\n"))
        if match:
            name, args = match.group(1), match.group(2).rstrip()
            lines[i] = f"get_ipython().run_line_magic({name!r}, {args!r})\n"
        elif line.strip() and not line.lstrip().startswith("#"):
            break
    return "".join(lines)


def compile_cell(source: str, filename: str) -> tuple[str, Any]:
    """``(python, code object)`` of a cell. Plain Python, and plain Python below line
    magics, compiles as it is; any other cell (``!cmd``, ``obj?``, ``%%time``, an indented
    first line) goes through IPython's transformer, whose import costs more than most
    cells take to run."""
    for code in (source, _leading_magics(source)):
        try:
            return code, compile(code, filename, "exec", dont_inherit=True)
        except SyntaxError:
            continue
    code = to_python(source)
    return code, compile(code, filename, "exec", dont_inherit=True)


def run_source(source: str, namespace: dict[str, Any], filename: str) -> Any:
    code, compiled = compile_cell(source, filename)
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    exec(compiled, namespace)


@dataclass
class CellError:
    cell: int
    error: str
    where: str = ""


@dataclass
class CellsRun:
    executed: int = 0
    errors: list[CellError] = field(default_factory=list)
    seconds: float = 0.0  # running the cells (``check --profile`` shows it)
    out_of_memory: bool = False  # a cell reached the process's memory limit (errors.out_of_memory)

    def as_dict(self) -> dict[str, Any]:
        return {
            "executed": self.executed,
            "errors": [{"cell": e.cell, "error": e.error, "where": e.where} for e in self.errors],
            "seconds": round(self.seconds, 6),
        }


def student_frames(tb: Any) -> str:
    """The lines of a traceback that point into notebook cells (never grader code)."""
    frames = [f for f in traceback.extract_tb(tb) if f.filename.startswith("<")]
    return "".join(traceback.format_list(frames[-3:]))


def run_cells(cells: list[tuple[int, str]], namespace: dict[str, Any]) -> CellsRun:
    """Execute ``(index, source)`` cells in order; errors are recorded and execution goes on."""
    report = CellsRun()
    start = time.perf_counter()
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
            report.out_of_memory = report.out_of_memory or out_of_memory(exc)
        report.executed += 1
        _close_figures()
    report.seconds = time.perf_counter() - start
    return report


#: Imported by most notebooks for their plots, rarely used by graded code: a fresh worker
#: defers them until first used (a warm sandbox zygote has them loaded already).
DEFERRED_IMPORTS = ("matplotlib.pyplot",)


class _Deferred(importlib.abc.MetaPathFinder):
    """Import the named modules with ``importlib.util.LazyLoader``: the module object
    exists at once, its code runs when one of its attributes is first used."""

    def __init__(self, names: tuple[str, ...]):
        self.names = set(names)

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name not in self.names:
            return None
        self.names.discard(name)  # once, and not for the lookup below
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = importlib.util.LazyLoader(spec.loader)
        return spec


def defer_imports(names: tuple[str, ...] = DEFERRED_IMPORTS) -> None:
    """Make ``import`` of ``names`` lazy in this process (a fresh worker's start-up)."""
    missing = tuple(n for n in names if n not in sys.modules)
    if missing:
        sys.meta_path.insert(0, _Deferred(missing))


def _loaded(module: ModuleType | None) -> TypeGuard[ModuleType]:
    return module is not None and type(module).__name__ != "_LazyModule"


def _close_figures() -> None:
    plt = sys.modules.get("matplotlib.pyplot")
    if _loaded(plt):
        try:
            plt.close("all")
        except Exception:  # noqa: BLE001
            pass
