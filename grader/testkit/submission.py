"""The narrow interface through which hidden tests reach a submission.

Tests only ever: ask whether a name exists, call a named function, build a named class,
call methods of what they built, load and read weights, and read values back. Everything
that crosses is plain data (numpy arrays, torch tensors, numbers, strings, containers);
other objects stay with the submission as :class:`Handle` s. Two implementations:

- :class:`InProcessSubmission`: the student's namespace in this process (nbgrader kernel);
- :class:`grader.check.remote.RemoteSubmission`: a worker process, possibly sandboxed.
"""

from __future__ import annotations

import contextlib
import re
from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Any

from grader.runtime import values
from grader.runtime.errors import (
    CallHung,
    GradingError,
    MissingName,
    ProtocolError,
    SubmissionError,
)
from grader.runtime.target import Target
from grader.runtime.values import HandleRef
from grader.testkit import calls


class Submission(ABC):
    """What a hidden test may do with a submission."""

    #: ``{cell index: (source, error)}`` of the notebook's cells that failed when it loaded
    failed_cells: dict[int, tuple[str, str]] = {}

    def note_load(self, cells: list[tuple[int, str]], loaded: Any) -> None:
        """Remember the cells that failed to run (from ``load``'s reply)."""
        sources = dict(cells)
        errors = loaded.get("errors", []) if isinstance(loaded, dict) else []
        self.failed_cells = {int(e["cell"]): (sources.get(int(e["cell"]), ""), str(e.get("error", "")))
                             for e in errors if isinstance(e, dict) and e.get("cell") in sources}

    def explain_missing(self, exc: MissingName) -> MissingName:
        """``exc`` with the error of the failed cell that would have defined its name."""
        defines = re.compile(rf"^(?:async\s+def|def|class)\s+{re.escape(exc.name)}\b"
                             rf"|^{re.escape(exc.name)}\s*(?::[^=]*)?=", re.MULTILINE)
        for _, (source, error) in sorted(self.failed_cells.items()):
            if defines.search(source):
                exc.cause = error.splitlines()[0][:200] if error else ""
                break
        return exc

    @abstractmethod
    def _request(self, op: str, header: dict[str, Any], value: Any = None) -> Any:
        """Run one operation on the submission side and return its (plain) result."""

    def _post(self, op: str, header: dict[str, Any], value: Any = None,
              later: Later | None = None) -> None:
        """Run an operation whose result is not needed yet: by default at once; a worker's
        submission sends it and reads its answer with the next request or :meth:`settle`.
        Its result goes to ``later``; without one, its error is raised there."""
        try:
            result = self._wrap(self._request(op, header, value))
        except GradingError as exc:
            if later is None:
                raise
            later.fail(exc)
            return
        if later is not None:
            later.set(result)

    def settle(self) -> None:  # noqa: B027 - nothing is posted ahead by default
        """Wait for every posted operation; raise the first error of one without a ``Later``."""

    def read(self, later: Later) -> None:  # noqa: B027 - in process, every result is there
        """Wait for the answers up to ``later``'s (a lazy batch's result, read); raise the
        first error of an operation without a ``Later`` among them."""

    def cut(self) -> None:  # noqa: B027 - in process, every operation has run already
        """End the chain of posted operations: a failure before this point does not stop
        the operations posted after it (a batch's calls stop only at its own failures)."""

    def bind_id(self) -> int:
        """A new handle id for an object built without waiting (:meth:`Batch.new`): the
        grader chooses it, negative, so it never meets one the submission side numbers."""
        self._bound = getattr(self, "_bound", 0) - 1
        return self._bound

    @contextlib.contextmanager
    def settled(self) -> Iterator[None]:
        """Run a check: the operations it posted are answered before it ends, and one that
        failed is its error (it came before whatever the check raised afterwards)."""
        try:
            yield
        except BaseException:
            self.settle()
            raise
        self.settle()

    def batch(self, lazy: bool = False) -> Batch:
        """``with sub.batch() as b: out = b.method(m, "__call__", x)``: the calls made with
        ``b`` travel together, in order, and their results are read after the block
        (``out.value``); a call after one that failed does not run (its ``value`` raises
        the first failure). Read the results in the order the calls were made, so that a
        check fails as it would have call by call.

        ``lazy``: the block ends without waiting; the answers are read when a result is
        first used (or by the next request that waits). What the check computes in between
        (its oracles) runs while the worker runs the calls."""
        return Batch(self, lazy)

    def has(self, name: str) -> bool:
        return bool(self._request("has", {"name": name}))

    def call(self, name: str, *args: Any, forbid: tuple[str, ...] = (),
             changes: tuple[int | str, ...] = (), **kwargs: Any) -> Any:
        """Call the notebook's function ``name``. It may change only the arguments listed in
        ``changes``, by position or keyword (``train_step``'s model, 0): any other it changes
        fails the call (``grader.runtime.unchanged``)."""
        return self._wrap(self._request("call", *_call_request(name, None, args, kwargs, forbid, changes)))

    def new(self, name: str, *args: Any, forbid: tuple[str, ...] = (), **kwargs: Any) -> Handle:
        """Build an instance of the notebook's class ``name``."""
        result = self._wrap(self._call(name, None, args, kwargs, forbid))
        if not isinstance(result, Handle):
            raise ProtocolError(f"{name}(...) did not build an object")
        return result

    def fixture(self, name: str, *args: Any, **kwargs: Any) -> Handle:
        """Build a trusted helper object next to the submission (see runtime.fixtures)."""
        value = {"args": _unwrap(list(args)), "kwargs": _unwrap(kwargs)}
        return self._wrap(self._request("fixture", {"name": name}, value))

    @contextlib.contextmanager
    def course_versions(self, source: str, names: tuple[str, ...]) -> Iterator[None]:
        """Within the block, ``names`` are the course's versions defined by ``source``
        (see ``Target.substitute``); the student's own come back afterwards."""
        self._post("substitute", {"names": list(names)}, {"source": source})
        try:
            yield
        finally:
            self._post("restore", {"names": list(names)})

    @contextlib.contextmanager
    def refusing(self, names: tuple[str, ...]) -> Iterator[None]:
        """Within the block, calling the notebook's given code ``names`` raises (see
        ``Target.refuse``): code the course gives that computes an exercise's answer."""
        self._post("refuse", {"names": list(names)})
        try:
            yield
        finally:
            self._post("allow", {"names": list(names)})

    def _call(self, target: str | int, method: str | None, args: tuple, kwargs: dict,
              forbid: tuple[str, ...]) -> Any:
        return self._request("call", *_call_request(target, method, args, kwargs, forbid))

    def _wrap(self, value: Any) -> Any:
        return values.map_leaves(value, lambda v: Handle(self, v) if isinstance(v, HandleRef) else v)

    def close(self) -> bool:
        """Release the submission (stop its worker, if any); True when a worker answered
        that it stops (``RemoteSubmission``)."""
        return False


class Posted(Exception):  # noqa: N818 - it is not an error of its own: it carries one
    """The error of an operation sent without waiting (loading weights, ``eval()``), raised
    by the next request. Not a ``SubmissionError``: a check's ``except SubmissionError``
    around that next request must not take it for that request's own failure (it would
    have been raised where the operation was asked for, before the ``try``). The hint is
    the error's own (``grader.check.messages.explain``)."""

    def __init__(self, error: Exception):
        super().__init__(str(error))
        self.error = error


class Later:
    """The result of a call made in a :class:`Batch`, there once the batch has ended (a
    lazy batch's: once it is read)."""

    def __init__(self, sub: Submission | None = None) -> None:
        self._sub = sub  # a lazy batch's submission: reading settles it
        self._done = False
        self._value: Any = None
        self._error: BaseException | None = None
        self._failures: list[BaseException] | None = None  # its batch's, in the order they came

    def set(self, value: Any) -> None:
        self._done, self._value = True, value

    def fail(self, error: BaseException) -> None:
        self._done, self._error = True, error
        if self._failures is not None:
            self._failures.append(error)

    @property
    def value(self) -> Any:
        """The call's result; its error (or the batch's earlier one) is raised here."""
        if not self._done and self._sub is not None:
            self._sub.read(self)
        if not self._done:
            raise RuntimeError("a batch's result is read before the batch has ended")
        if self._error is not None:
            raise self._error
        return self._value


class Made(Later):
    """A constructor's result in a :class:`Batch`: its :class:`Handle` (``handle``) can be
    used in the same batch at once; ``value`` checks that an object was built."""

    def __init__(self, sub: Submission | None, handle: Handle, name: str) -> None:
        super().__init__(sub)
        self.handle = handle
        self._name = name

    @property
    def value(self) -> Handle:
        built = super().value
        if not isinstance(built, Handle) or built.ref.id != self.handle.ref.id:
            raise ProtocolError(f"{self._name}(...) did not build an object")
        self.handle.ref = built.ref  # its type as the submission names it
        return self.handle


class Batch:
    """Calls sent to the submission together (see :meth:`Submission.batch`)."""

    def __init__(self, sub: Submission, lazy: bool = False):
        self._sub = sub
        self._lazy = lazy
        self._failures: list[BaseException] = []  # its calls' errors, in order (answers come in order)

    def __enter__(self) -> Batch:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self._sub.cut() if self._lazy else self._sub.settle()

    def _post(self, op: str, header: dict[str, Any], value: Any, later: Later | None = None) -> Later:
        later = later or Later(self._sub if self._lazy else None)
        failed = self._failures[0] if self._failures else None
        later._failures = self._failures
        if failed is not None:  # answered at once (in process): the calls after a failure do not run
            later.fail(failed)
        else:
            self._sub._post(op, header, value, later)
        return later

    def call(self, name: str, *args: Any, forbid: tuple[str, ...] = (),
             changes: tuple[int | str, ...] = (), **kwargs: Any) -> Later:
        """``sub.call(name, ...)``, its result later."""
        return self._post("call", *_call_request(name, None, args, kwargs, forbid, changes))

    def new(self, name: str, *args: Any, forbid: tuple[str, ...] = (), **kwargs: Any) -> Made:
        """``sub.new(name, ...)`` without waiting: ``.handle`` is the object for the calls
        that follow in this batch; ``.value`` (the handle) raises the constructor's error."""
        header, value = _call_request(name, None, args, kwargs, forbid)
        handle = Handle(self._sub, HandleRef(self._sub.bind_id(), name))
        made = Made(self._sub if self._lazy else None, handle, name)
        self._post("call", dict(header, bind=handle.ref.id), value, made)
        return made

    def method(self, handle: Handle, name: str, *args: Any, forbid: tuple[str, ...] = (),
               **kwargs: Any) -> Later:
        """``handle.method(name, ...)`` (``"__call__"`` for ``handle(...)``), its result later."""
        return self._post("call", *_call_request(handle.ref.id, name, args, kwargs, forbid))

    def get(self, handle: Handle, attr: str) -> Later:
        """``handle.get(attr)``, its result later."""
        return self._post("getattr", {"target": handle.ref.id, "attr": attr}, None)

    def inspect(self, handle: Handle, values: bool = True) -> Later:
        """``handle.inspect(values)``, its result later."""
        return self._post("inspect", _inspect_request(handle, values), None)

    def grad(self, handle: Handle, *args: Any, grad_output: Any, method: str | None = None,
             forbid: tuple[str, ...] = (), **kwargs: Any) -> Later:
        """``handle.grad(...)``, its result later."""
        return self._post("grad", *_grad_request(handle, args, kwargs, grad_output, method, forbid))


class Handle:
    """An object (module, optimizer, ...) that lives with the submission."""

    def __init__(self, sub: Submission, ref: HandleRef):
        self._sub = sub
        self.ref = ref

    @property
    def type_name(self) -> str:
        return self.ref.type_name

    def __call__(self, *args: Any, forbid: tuple[str, ...] = (), **kwargs: Any) -> Any:
        return self.method("__call__", *args, forbid=forbid, **kwargs)

    def method(self, name: str, *args: Any, forbid: tuple[str, ...] = (), **kwargs: Any) -> Any:
        return self._sub._wrap(self._sub._call(self.ref.id, name, args, kwargs, forbid))

    def get(self, attr: str) -> Any:
        """Read an attribute (dotted paths allowed, e.g. ``"q_proj.weight"``)."""
        return self._sub._wrap(self._sub._request("getattr", {"target": self.ref.id, "attr": attr}))

    def inspect(self, values: bool = True) -> dict[str, Any]:
        """``{"type", "is_module", "parameters", "buffers", "modules", "training"}``; without
        ``values``, each parameter and buffer is its shape (a list of ints), not a copy of
        the tensor: all a check needs that reads only names or shapes, and a fraction of
        the cost for a model's many tensors."""
        return self._sub._request("inspect", _inspect_request(self, values))

    def state_shapes(self) -> dict[str, list[int] | None] | None:
        """``{name: shape}`` of ``state_dict()`` without its values (``None`` for an entry
        that is not a tensor; ``None`` if it returns no dict): one small reply where
        ``state_dict()`` would send every tensor back."""
        return self._sub._request("shapes", {"target": self.ref.id})

    def grad(self, *args: Any, grad_output: Any, method: str | None = None,
             forbid: tuple[str, ...] = (), **kwargs: Any) -> dict[str, Any]:
        """Forward, then backward of ``grad_output``: output, input and parameter grads."""
        return self._sub._request("grad", *_grad_request(self, args, kwargs, grad_output, method,
                                                        forbid))

    # conveniences for nn.Module
    def state_dict(self) -> dict[str, Any]:
        return self.method("state_dict")

    # conveniences for nn.Module whose results are not needed: posted (see Submission._post)
    def load_state_dict(self, state: dict[str, Any], strict: bool = True) -> None:
        self._post("load_state_dict", state, strict=strict)

    def eval(self) -> Handle:
        self._post("eval")
        return self

    def train(self, mode: bool = True) -> Handle:
        self._post("train", mode)
        return self

    def _post(self, name: str, *args: Any, **kwargs: Any) -> None:
        self._sub._post("call", *_call_request(self.ref.id, name, args, kwargs, ()))


def _call_request(target: str | int, method: str | None, args: tuple, kwargs: dict,
                  forbid: tuple[str, ...], changes: tuple[int | str, ...] = ()) -> tuple[dict[str, Any], dict[str, Any]]:
    header: dict[str, Any] = {"target": target, "method": method, "forbid": list(forbid)}
    if changes:
        header["changes"] = list(changes)
    return header, {"args": _unwrap(list(args)), "kwargs": _unwrap(kwargs)}


def _grad_request(handle: Handle, args: tuple, kwargs: dict, grad_output: Any, method: str | None,
                  forbid: tuple[str, ...]) -> tuple[dict[str, Any], dict[str, Any]]:
    header = {"target": handle.ref.id, "method": method, "forbid": list(forbid)}
    return header, {"args": _unwrap(list(args)), "kwargs": _unwrap(kwargs), "grad_output": grad_output}


def _inspect_request(handle: Handle, values: bool) -> dict[str, Any]:
    return {"target": handle.ref.id} if values else {"target": handle.ref.id, "values": False}


def _unwrap(value: Any) -> Any:
    return values.map_leaves(value, lambda v: v.ref if isinstance(v, Handle) else v)


class InProcessSubmission(Submission):
    """The student's namespace in this very process (e.g. the nbgrader kernel).

    Values are copied both ways exactly as over the wire, so a test sees the same thing
    whichever implementation runs it; but student code shares this process, so scores
    computed this way are advisory. With ``call_timeout``, a request that runs longer is
    interrupted (``grader.testkit.calls.alarm``, main thread only) and raises ``CallHung``; every
    later request then fails at once with it, as a hung worker's would.
    """

    def __init__(self, namespace: dict[str, Any] | None = None, prepare: bool = True,
                 call_timeout: float | None = None):
        self.target = Target(namespace, prepare)
        self.call_timeout = call_timeout
        self.broken: Exception | None = None

    def load(self, cells: list[tuple[int, str]]) -> dict[str, Any]:
        loaded = self.target.load(cells)
        self.note_load(cells, loaded)
        return loaded

    def _request(self, op: str, header: dict[str, Any], value: Any = None) -> Any:
        if self.broken is not None:
            raise self.broken
        value = values.normalize(value) if value is not None else None
        with calls.alarm(self.call_timeout) as alarm:
            try:
                return self.target.dispatch(op, header, value)
            except MissingName as exc:
                raise self.explain_missing(exc) from None
            except (SubmissionError, calls.CallTimedOut):
                if not alarm["fired"]:
                    raise
        self.broken = CallHung(calls.describe_request(op, header, value), self.call_timeout or 0)
        raise self.broken
