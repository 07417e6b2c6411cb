"""What a hidden check asked of a submission, said without the hidden values, and a time
limit for one such request when the submission runs in this very process.

When a call hangs or crashes the worker, the student is told which call it was: the
function or method and the shapes of its arguments (``softmax(array float64 [4, 3],
axis=0)``), never the values of a hidden input. Scalars (an axis, a flag, a length) are
shown: they are the call's meaning, not the test's data.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any

from grader.i18n import Message, concat, join, msg
from grader.runtime.values import HandleRef

MAX_ARGS = 6


def short_type(type_name: str) -> str:
    """``__main__.MultiHeadAttention`` -> ``MultiHeadAttention``."""
    return type_name.rsplit(".", 1)[-1] or "object"


def describe_value(value: Any, depth: int = 0) -> Message | str:
    """A value as its kind and shape: ``array float64 [4, 3]``, ``tensor bool [1, 5]``,
    ``0``, ``True``, ``'relu'``, ``a MultiHeadAttention``, ``list of 3``."""
    if isinstance(value, HandleRef):
        return msg("a {type_name}", type_name=short_type(value.type_name))
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        kind = "tensor" if type(value).__module__.startswith("torch") else "array"
        dims = ", ".join(str(int(n)) for n in tuple(shape))
        return f"{kind} {str(dtype).removeprefix('torch.')} [{dims}]"
    if value is None or isinstance(value, bool | int | float):
        text = repr(value)
        return text if len(text) <= 24 else type(value).__name__
    if isinstance(value, str):
        return repr(value) if len(value) <= 24 else msg("a string")
    if isinstance(value, list | tuple):
        if depth == 0 and len(value) <= 3:
            inner = join(", ", (describe_value(v, depth + 1) for v in value))
            return concat("[", inner, "]") if isinstance(value, list) else concat("(", inner, "," * (len(value) == 1) + ")")
        return msg("{type_name} of {count}", type_name=type(value).__name__, count=len(value))
    if isinstance(value, dict):
        return msg("dict of {value}", value=len(value))
    return msg("a {type_name}", type_name=type(value).__name__)


def _arguments(value: Any) -> Message | str:
    value = value if isinstance(value, dict) else {}
    args = list(value.get("args", []))
    kwargs = dict(value.get("kwargs", {}))
    parts = [describe_value(a) for a in args[:MAX_ARGS]]
    parts += [concat(f"{k}=", describe_value(v)) for k, v in list(kwargs.items())[:MAX_ARGS]]
    if len(args) > MAX_ARGS or len(kwargs) > MAX_ARGS:
        parts.append("...")
    return join(", ", parts)


def describe_request(op: str, header: dict[str, Any], value: Any,
                     types: dict[int, str] | None = None) -> Message | str:
    """The request a check made, for a person: ``softmax(array float64 [4, 3], axis=0)``,
    ``MultiHeadAttention(...)(tensor float32 [2, 5, 16], ...)``, ``reading .attn_weights``."""
    types = types or {}
    target = header.get("target")
    if isinstance(target, int):
        who = short_type(types.get(target, "object"))
        owner: Message | str = msg("a {type_name}", type_name=who)
    else:
        who = owner = str(target)
    method = header.get("method")
    if op in ("call", "grad"):
        if isinstance(target, int):
            name = f"{who}(...)" if method in (None, "__call__") else f"{who}.{method}"
        else:
            name = who if method in (None, "__call__") else f"{who}.{method}"
        text = concat(f"{name}(", _arguments(value), ")")
        return msg("the backward pass of {text}", text=text) if op == "grad" else text
    if op == "getattr":
        return msg("reading .{header} of {owner}", header=header.get('attr'), owner=owner)
    if op == "inspect":
        return msg("listing the parameters of {owner}", owner=owner)
    if op == "shapes":
        return msg("listing the state dict of {owner}", owner=owner)
    if op == "fixture":
        return msg("setting up {header} for {arguments}", header=header.get('name'), arguments=_arguments(value) or msg("the check"))
    if op == "has":
        return msg("looking up {header}", header=header.get('name'))
    return str(op)


class CallTimedOut(BaseException):
    """Raised inside student code by :func:`alarm` (a BaseException: an ``except
    Exception`` in the student's loop does not swallow it; it is raised again every
    half second in case a bare ``except`` does)."""


@contextlib.contextmanager
def alarm(seconds: float | None) -> Iterator[dict[str, bool]]:
    """Interrupt the code run inside after ``seconds`` (SIGALRM; the main thread of a
    process whose SIGALRM is free, such as a notebook kernel). Elsewhere, or with
    ``seconds`` None, nothing is limited. Yields ``{"fired": bool}``."""
    state = {"fired": False}
    usable = (seconds is not None and seconds > 0 and hasattr(signal, "setitimer")
              and threading.current_thread() is threading.main_thread()
              and signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, signal.SIG_IGN, None))
    if not usable or seconds is None:
        yield state
        return

    def fire(signum: int, frame: Any) -> None:
        state["fired"] = True
        raise CallTimedOut(msg("no answer within {seconds} s", seconds=format(seconds, 'g')))

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, float(seconds), 0.5)
    try:
        yield state
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
