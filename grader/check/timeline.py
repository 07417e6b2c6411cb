"""Where a check's time goes: named spans of wall-clock time, for ``check --profile``.

``benchmarks/check_latency.py`` reads them to show the breakdown (interpreter start,
imports, the sandbox, the worker's start, the notebook's cells, the hidden tests). Times
are ``time.time()`` (seconds since the epoch), comparable between the processes of one
machine; spans with the same name add up. Nothing here changes what is graded.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator

_lock = threading.Lock()
_spans: list[tuple[str, float, float]] = []


def add(name: str, start: float, end: float) -> None:
    with _lock:
        _spans.append((name, float(start), float(end)))


@contextlib.contextmanager
def span(name: str) -> Iterator[None]:
    start = time.time()
    try:
        yield
    finally:
        add(name, start, time.time())


def mark(name: str) -> None:
    now = time.time()
    add(name, now, now)


def spans() -> list[tuple[str, float, float]]:
    with _lock:
        return list(_spans)


PREFIX = "grader-profile: "


def dumps() -> str:
    """One line: ``grader-profile: [[name, start, end], ...]``."""
    return PREFIX + json.dumps([[n, round(s, 6), round(e, 6)] for n, s, e in spans()])
