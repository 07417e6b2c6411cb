"""What hidden tests are written with.

A hidden test is a pytest test that takes the ``sub`` fixture (a :class:`Submission`) and
carries ``@exercise(name, points)``. It fails through :func:`check` or :func:`close` with a
message written for the student, never with a bare ``assert`` (its text would show code).

    @exercise("softmax", points=1)
    def test_rows_sum_to_one(sub):
        w = sub.call("softmax", x)
        close(w.sum(-1), np.ones(3), "rows of the weights should sum to 1: softmax over the wrong axis?")
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest


class Failed(AssertionError):
    """A check failed; ``str(exc)`` is the message shown to the student."""


def exercise(name: str, points: float) -> pytest.MarkDecorator:
    """Mark a test as worth ``points`` of the exercise ``name`` (a contract name)."""
    return pytest.mark.exercise(name, points=float(points))


def check(condition: Any, message: str) -> None:
    if not bool(condition):
        raise Failed(message)


def _as_numpy(x: Any) -> np.ndarray:
    torch = __import__("sys").modules.get("torch")
    if torch is not None and isinstance(x, torch.Tensor):
        x = x.detach().to("cpu")
        if x.dtype in (torch.bfloat16, torch.float16):
            x = x.float()
        return x.numpy()
    if isinstance(x, np.ndarray):
        return x
    if x is None or isinstance(x, (str, dict)):
        raise Failed("")
    return np.asarray(x)


def shape_of(x: Any) -> tuple[int, ...] | None:
    try:
        return tuple(_as_numpy(x).shape)
    except (Failed, ValueError, TypeError):
        return None


def close(actual: Any, expected: Any, message: str, *, atol: float = 1e-6, rtol: float = 1e-5,
          check_dtype: bool = False) -> None:
    """Fail with ``message`` (plus what differs) unless ``actual`` matches ``expected``."""
    try:
        got = _as_numpy(actual)
    except (Failed, ValueError, TypeError):
        raise Failed(f"{message} (got a {type(actual).__name__}, expected an array)") from None
    want = _as_numpy(expected)
    if got.shape != want.shape:
        raise Failed(f"{message} (expected shape {list(want.shape)}, got {list(got.shape)})")
    if check_dtype and got.dtype != want.dtype:
        raise Failed(f"{message} (expected dtype {want.dtype}, got {got.dtype})")
    if got.dtype.kind not in "biufc":
        raise Failed(f"{message} (got values of dtype {got.dtype})")
    if got.dtype.kind == "b" or want.dtype.kind == "b":
        if not np.array_equal(got.astype(bool), want.astype(bool)):
            raise Failed(f"{message} ({int((got.astype(bool) != want.astype(bool)).sum())} entries differ)")
        return
    got64, want64 = got.astype(np.complex128 if got.dtype.kind == "c" else np.float64), want.astype(np.float64)
    nan_mismatch = np.isnan(got64) != np.isnan(want64)
    if nan_mismatch.any():
        raise Failed(f"{message} (found NaN where a number was expected)" if np.isnan(got64).any()
                     else f"{message} (a NaN was expected)")
    ok = np.isclose(got64, want64, atol=atol, rtol=rtol, equal_nan=True)
    if not ok.all():
        diff = np.where(np.isnan(got64), 0, np.abs(got64 - want64))
        worst = np.unravel_index(int(np.argmax(np.where(ok, -1, diff))), got.shape) if got.ndim else ()
        raise Failed(f"{message} (largest difference {float(np.max(np.where(ok, 0, diff))):.3g} "
                     f"at index {list(map(int, worst))})")
