"""What hidden tests are written with.

A hidden test is a pytest test that takes the ``sub`` fixture (a :class:`Submission`) and
carries ``@exercise(name, points)``. It fails through :func:`check`, :func:`close` or
:func:`diagnose` with a message written for the student, never with a bare ``assert`` (its
text would show code).

Two kinds of failure reach the student:

- a **symptom** says what was observed ("rows of the weights do not sum to 1");
- a **diagnosis** names a mistake, with the evidence, and carries the mistake's id (a key
  of the lesson module's ``MISTAKES``). It fires only when the evidence is specific to
  that mistake: the robust way is a *suspect*, the output of the mistaken formula, which
  :func:`close` compares with the student's output when it differs from the right one::

      close(w, softmax(x, -1), "softmax([[...]]) should normalise each row",
            suspects=[suspect("softmax_axis", softmax(x, 0),
                              "softmax normalises over axis 0 instead of the `axis` argument")])

The student then reads that diagnosis first, and the symptoms it explains are folded
under it (see :func:`grader.check.messages.fold`).

Hidden inputs are drawn afresh for every grading run: build them with :func:`rng` (numpy)
or :func:`gen` (torch) inside the test, never at import time. A run's seed is random, or
``COURSE_GRADER_SEED`` (an instructor's secret) when set; the same seed reproduces a run.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import inspect
import secrets
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn, TypedDict, TypeVar

import numpy as np
import pytest

from coursekit import settings
from grader.i18n import Message, map_values, msg  # noqa: F401 - the hidden tests write their messages with these
from grader.runtime.device import ON_DEVICE, ON_DEVICE_MODEL  # noqa: F401 - for hidden tests' forbid=

T = TypeVar("T")

SEED_VARIABLE = settings.GRADER_SEED


class Failed(AssertionError):
    """A check failed; ``str(exc)`` is the message shown to the student and ``mistake``
    the id of the diagnosed mistake (``None`` for a symptom)."""

    def __init__(self, message: Message | None = None, mistake: str | None = None):
        super().__init__("" if message is None else str(message))
        self.message = message  # ``str(exc)`` is its English text alone, without its id
        self.mistake = mistake


def exercise(name: str, points: float) -> pytest.MarkDecorator:
    """Mark a test as worth ``points`` of the exercise ``name`` (a contract name)."""
    return pytest.mark.exercise(name, points=float(points))


def check(condition: Any, message: Message, *, mistake: str | None = None) -> None:
    """Fail with ``message`` unless ``condition``; ``mistake`` makes it a diagnosis, for a
    condition that only that mistake breaks."""
    if not bool(condition):
        raise Failed(message, mistake)


def diagnose(mistake: str, message: Message) -> NoReturn:
    """Fail with a diagnosis: the evidence gathered by the test names ``mistake``."""
    raise Failed(message, mistake)


# --- hidden inputs ------------------------------------------------------------------------

_RUN_SEED: contextvars.ContextVar[int | None] = contextvars.ContextVar("grader_run_seed", default=None)
_RUN_MEMO: contextvars.ContextVar[dict[Any, Any] | None] = contextvars.ContextVar("grader_run_memo", default=None)


def fresh_seed() -> int:
    """The seed of a new grading run: the instructor's ``COURSE_GRADER_SEED`` if set, else
    random."""
    secret = settings.grader_seed()
    if secret:
        return secret_to_seed(secret)
    return secrets.randbits(62)


def secret_to_seed(secret: str | int) -> int:
    if isinstance(secret, int) or str(secret).isdigit():
        return int(secret)
    return int.from_bytes(hashlib.blake2b(str(secret).encode(), digest_size=8).digest(), "little") >> 2


@contextlib.contextmanager
def grading_run(seed: int | None = None) -> Iterator[int]:
    """Run the hidden tests inside with ``seed`` (a fresh one when ``None``)."""
    seed = fresh_seed() if seed is None else int(seed)
    token, memo = _RUN_SEED.set(seed), _RUN_MEMO.set({})
    try:
        yield seed
    finally:
        _RUN_MEMO.reset(memo)
        _RUN_SEED.reset(token)


def run_memo() -> dict[Any, Any]:
    """A dict that lives as long as this grading run (one submission, one seed), where a
    hidden test keeps what a later test of the run would compute again (a check's
    outcome); outside a grading run, an empty one each time (nothing is kept)."""
    memo = _RUN_MEMO.get()
    return {} if memo is None else memo


def per_run(fn: Callable[..., T]) -> Callable[..., T]:
    """``fn(*args)``, a hidden input drawn from the run's generators, computed once per grading
    run (kept in :func:`run_memo`): the tests that draw the same case share it. They only read
    it; a submission is always given copies. Outside a grading run, computed at every call."""

    @functools.wraps(fn)
    def shared(*args: Any, **kwargs: Any) -> T:
        memo = run_memo()
        key = (per_run, fn.__module__, fn.__qualname__, args, tuple(sorted(kwargs.items())))
        if key not in memo:
            memo[key] = fn(*args, **kwargs)
        return memo[key]
    return shared


def run_seed() -> int:
    seed = _RUN_SEED.get()
    if seed is None:  # a hidden test called outside a grading run (debugging): fix one
        seed = fresh_seed()
        _RUN_SEED.set(seed)
    return seed


def seed(n: int) -> int:
    """The seed of a test's own generator number ``n`` in this grading run."""
    digest = hashlib.blake2b(f"{run_seed()}:{n}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 2


def rng(n: int) -> np.random.Generator:
    """A numpy generator for hidden inputs: fresh per grading run, the same for every call
    with ``n`` inside one run (so a test is deterministic on its own)."""
    return np.random.default_rng(seed(n))


def gen(n: int) -> Any:
    """A ``torch.Generator`` for hidden inputs (see :func:`rng`)."""
    import torch

    return torch.Generator().manual_seed(seed(n))


# --- comparing ----------------------------------------------------------------------------

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
        raise Failed()
    return np.asarray(x)


def shape_of(x: Any) -> tuple[int, ...] | None:
    try:
        return tuple(_as_numpy(x).shape)
    except (Failed, ValueError, TypeError):
        return None


@dataclass(frozen=True)
class Suspect:
    """What the output would be after a specific mistake (see :func:`suspect`)."""

    mistake: str
    candidate: Any
    message: Message


def suspect(mistake: str, candidate: Any, message: Message) -> Suspect:
    """The output of the mistaken formula for ``mistake`` (a value, or a function that
    computes it), and the diagnosis to show when the student's output matches it."""
    return Suspect(mistake, candidate, message)


def _difference(got: Any, want: Any, atol: float, rtol: float) -> Message | None:
    """``None`` if ``got`` matches ``want``, else what differs (for the message)."""
    try:
        got = _as_numpy(got)
    except (Failed, ValueError, TypeError):
        return msg("not an array")
    want = _as_numpy(want)
    if got.shape != want.shape:
        return msg("expected shape {want_shape}, got {got_shape}", want_shape=list(want.shape), got_shape=list(got.shape))
    if got.dtype.kind not in "biufc":
        return msg("got values of dtype {got_dtype}", got_dtype=got.dtype)
    if got.dtype.kind == "b" or want.dtype.kind == "b":
        differ = got.astype(bool) != want.astype(bool)
        return msg("{count} entries differ", count=int(differ.sum())) if differ.any() else None
    got64 = got.astype(np.complex128 if got.dtype.kind == "c" else np.float64)
    want64 = want.astype(np.float64)
    nan_mismatch = np.isnan(got64) != np.isnan(want64)
    if nan_mismatch.any():
        return msg("found NaN where a number was expected") if np.isnan(got64).any() else msg("a NaN was expected")
    ok = np.isclose(got64, want64, atol=atol, rtol=rtol, equal_nan=True)
    if ok.all():
        return None
    diff = np.where(np.isnan(got64), 0, np.abs(got64 - want64))
    worst = np.unravel_index(int(np.argmax(np.where(ok, -1, diff))), got.shape) if got.ndim else ()
    return msg("largest difference {largest} at index {worst}", largest=format(float(np.max(np.where(ok, 0, diff))), '.3g'), worst=list(map(int, worst)))


def matches(actual: Any, expected: Any, *, atol: float = 1e-6, rtol: float = 1e-5) -> bool:
    """Whether ``actual`` equals ``expected`` within tolerance (no failure raised)."""
    try:
        return _difference(actual, expected, atol, rtol) is None
    except Exception:  # noqa: BLE001 - anything unreadable is simply not a match
        return False


def identify(actual: Any, expected: Any, suspects: Sequence[Suspect], *, atol: float = 1e-6,
             rtol: float = 1e-5) -> Suspect | None:
    """The one suspect whose output ``actual`` matches, when it does not match ``expected``
    and the suspect's output itself differs from ``expected``; ``None`` when no suspect, or
    more than one, fits (the evidence would not single out a mistake)."""
    if matches(actual, expected, atol=atol, rtol=rtol):
        return None
    found = []
    for s in suspects:
        try:
            candidate = s.candidate() if callable(s.candidate) else s.candidate
        except Exception:  # noqa: BLE001 - the mistake cannot even run on this input
            continue
        if candidate is None or matches(candidate, expected, atol=atol, rtol=rtol):
            continue  # this input cannot tell the mistake apart from the right answer
        if matches(actual, candidate, atol=atol, rtol=rtol):
            found.append(s)
    return found[0] if len({s.mistake for s in found}) == 1 else None


class Tolerance(TypedDict, total=False):
    """:func:`close`'s tolerances, named once in a lesson's tests and passed as ``**TOL``."""

    atol: float
    rtol: float


def close(actual: Any, expected: Any, message: Message, *, atol: float = 1e-6, rtol: float = 1e-5,
          check_dtype: bool = False, suspects: Sequence[Suspect] = (), mistake: str | None = None) -> None:
    """Fail unless ``actual`` matches ``expected``: with the diagnosis of the one suspect
    whose output it matches instead, else with ``message`` (plus what differs)."""
    try:
        got = _as_numpy(actual)
    except (Failed, ValueError, TypeError):
        raise Failed(msg("{message} (got a {actual}, expected an array)", message=message, actual=type(actual).__name__), mistake) from None
    want = _as_numpy(expected)
    if check_dtype and got.shape == want.shape and got.dtype != want.dtype:
        raise Failed(msg("{message} (expected dtype {want_dtype}, got {got_dtype})", message=message, want_dtype=want.dtype, got_dtype=got.dtype), mistake)
    difference = _difference(got, want, atol, rtol)
    if difference is None:
        return
    found = identify(got, want, suspects, atol=atol, rtol=rtol)
    if found is not None:
        raise Failed(msg("{message} ({detail})", message=found.message, detail=_evidence(got, want)), found.mistake)
    raise Failed(msg("{message} ({detail})", message=message, detail=difference), mistake)


def _evidence(got: np.ndarray, want: np.ndarray) -> Message:
    """Where the mistake shows: one entry, yours and the right value."""
    if got.shape != want.shape:
        return msg("expected shape {want_shape}, got {got_shape}", want_shape=list(want.shape), got_shape=list(got.shape))
    if got.dtype.kind == "b" or want.dtype.kind == "b":
        return msg("{count} entries differ", count=int((got.astype(bool) != want.astype(bool)).sum()))
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    diff = np.where(np.isnan(diff), np.inf, diff)
    if got.ndim == 0:
        got, want = got.reshape(1), want.reshape(1)
    worst = np.unravel_index(int(np.argmax(diff)), got.shape)
    yours, right = float(got[worst]), float(want[worst])
    digits = 4
    while digits < 12 and f"{yours:.{digits}g}" == f"{right:.{digits}g}":
        digits += 1
    return msg("at index {worst}: yours {yours}, right {right}", worst=list(map(int, worst)), yours=format(yours, f".{digits}g"), right=format(right, f".{digits}g"))


NOT_NUMPY = "not_numpy"  # the id each numpy lesson declares for numpy_only's diagnosis


def numpy_only(name: str, *values: Any) -> None:
    """A numpy exercise takes and returns numpy arrays: diagnose ``not_numpy`` when one of
    ``values`` (what ``name`` returned) is a torch tensor, a list or anything else."""
    for value in values:
        if type(value).__module__.startswith("torch"):
            diagnose(NOT_NUMPY, msg("`{name}` returns a torch tensor: it is a numpy exercise, so it takes and returns numpy arrays (compute with numpy)", name=name))
        if not isinstance(value, np.ndarray):
            diagnose(NOT_NUMPY, msg("`{name}` returns a {value}, not a numpy array: a numpy exercise takes and returns numpy arrays (np.asarray)", name=name, value=type(value).__name__))


# --- "no Python loops" -------------------------------------------------------------------

# Count the lines of Python that run between ``python_lines_start()`` and
# ``python_lines_stop()`` outside the standard library, the installed packages and the
# grader: the student's own code. The grader's code, put next to the submission for the
# calls of one check (``python_lines``): vectorised code runs the same few lines for any
# size; a loop over the tokens, positions or features (torch, numpy or math inside) runs
# more for a larger input. Requests are served one after another in one thread (the
# worker, or in process), so the count spans exactly the call between.
def python_lines_start():  # the course's code, run next to the submission
    import os
    import sys

    roots = [os.path.dirname(os.__file__), sys.prefix, sys.base_prefix, sys.exec_prefix]
    roots += list(getattr(sys.modules.get("grader"), "__path__", []))
    skip = tuple(r for r in roots if r and len(r) > 1)
    here = python_lines_start.__code__.co_filename
    state = python_lines_start.__dict__["state"] = {"count": 0, "previous": sys.gettrace()}

    def local(frame, event, arg):
        if event == "line":
            state["count"] += 1
        return local

    def tracer(frame, event, arg):
        name = frame.f_code.co_filename
        if name == here or name.startswith(skip) or "-packages" in name or name.startswith("<frozen"):
            return None
        return local

    sys.settrace(tracer)


def python_lines_stop():
    import sys

    state = python_lines_start.__dict__["state"]
    sys.settrace(state["previous"])
    return state["count"]


@functools.cache
def _lines_source() -> str:
    return inspect.getsource(python_lines_start) + "\n\n" + inspect.getsource(python_lines_stop)


def python_lines(sub: Any, request: Callable[[], Any]) -> int:
    """How many lines of the student's own Python ``request()`` runs (one call of the
    submission: ``lambda: sub.call("name", x)``, ``lambda: module(x)``). A "no Python loops"
    check compares two sizes: vectorised code runs as many lines for both."""
    with sub.course_versions(_lines_source(), ("python_lines_start", "python_lines_stop")):
        sub.call("python_lines_start")
        try:
            request()
        finally:
            count = sub.call("python_lines_stop")
    return int(count)


def first_failure(*checks: Callable[[], Any]) -> None:
    """Run ``checks`` in order; a diagnosis raised by a later one wins over an earlier
    symptom (for tests where several observations are made)."""
    symptom: Failed | None = None
    for fn in checks:
        try:
            fn()
        except Failed as exc:
            if exc.mistake is not None:
                raise
            symptom = symptom or exc
    if symptom is not None:
        raise symptom
