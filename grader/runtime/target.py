"""The submission side of the grading interface: runs operations on the student's namespace.

The same ``Target`` serves the in-process submission (inside a notebook kernel) and the
worker process (out of process, sandboxed). Every operation takes and returns normalized
values (see ``values``); objects that are not plain data stay here behind handle ids.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

from . import values
from .device import on_device
from .errors import GIVEN, ForbiddenCall, MissingName, SubmissionError, out_of_memory
from .execute import prepare_namespace, run_cells, student_frames
from .unchanged import LEAF_IN_PLACE, ArgumentChanged, ArgumentSnapshot
from .values import HandleRef


def _resolve_dotted(path: str) -> Any:
    module_name, _, attr = path.rpartition(".")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


@contextlib.contextmanager
def forbidding(names: list[str]) -> Iterator[None]:
    """Make calls to the named torch functions raise ``ForbiddenCall``, however they are
    reached (``F.gelu``, ``torch._C._nn.gelu``, ``nn.GELU``, an alias imported earlier).

    Where torch is not imported yet (a numpy lesson's worker), it is not imported for the
    guard: that would cost the call a torch import (seconds, counted in the call's own time
    limit) to guard functions nothing can reach without importing torch. If the call imports
    torch itself, the guard starts as soon as that import ends."""
    forbidden = tuple(n for n in names if not n.startswith("grader:"))  # guards: runtime.device
    if not forbidden:
        yield
        return
    with contextlib.ExitStack() as stack:
        if "torch" in sys.modules:
            stack.enter_context(_forbid_mode(forbidden)())
        else:
            stack.enter_context(_after_import("torch", lambda: stack.enter_context(
                _forbid_mode(forbidden)())))
        yield


class _AfterImport:
    """A ``sys.meta_path`` finder that runs ``then`` once module ``name`` has been imported."""

    def __init__(self, name: str, then: Callable[[], Any]):
        self.name, self.then, self.done = name, then, False

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != self.name or self.done:
            return None
        self.done = True  # the real finders below answer: this finder is asked only once
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self.done = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        load, hook = spec.loader.exec_module, self

        def exec_module(module: types.ModuleType) -> None:
            load(module)
            if not hook.done:
                hook.done = True
                hook.then()
        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


@contextlib.contextmanager
def _after_import(name: str, then: Callable[[], Any]) -> Iterator[None]:
    """Run ``then`` when ``name`` is imported inside the block (not at all if it is not)."""
    hook = _AfterImport(name, then)
    sys.meta_path.insert(0, hook)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(hook)


@functools.lru_cache(maxsize=32)
def _forbid_mode(names: tuple[str, ...]) -> type:
    """The torch function mode that refuses ``names``, made once per process for each set of
    names (a class made per call cost more than most calls it guards)."""
    import torch  # noqa: F401 - forbidden names are torch functions
    from torch.overrides import TorchFunctionMode

    funcs = {}
    for name in names:
        try:
            funcs[_resolve_dotted(name)] = name
        except (ImportError, AttributeError):
            continue

    class Forbid(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
            if func in funcs:
                raise ForbiddenCall(funcs[func])
            return func(*args, **(kwargs or {}))

    return Forbid


_ABSENT = object()


def _shape(tensor: Any) -> list[int] | None:
    return [int(n) for n in tensor.shape] if values.is_tensor(tensor) else None


@functools.lru_cache(maxsize=8)
def _compiled(source: str) -> types.CodeType:
    """The course's source, compiled once per process (every test of an exercise that
    builds on others runs it again)."""
    return compile(source, "<the course's version>", "exec")


class Target:
    """Operations on a submission's namespace, addressed by name or by handle id."""

    def __init__(self, namespace: dict[str, Any] | None = None, prepare: bool = True,
                 on_out_of_memory: Callable[[], None] | None = None):
        # unprepared: the caller's namespace as it is (a kernel's own globals)
        self.namespace: dict[str, Any] = (prepare_namespace(namespace) if prepare
                                          else {} if namespace is None else namespace)
        # called when the notebook's code reached the memory limit (the worker ends there)
        self.on_out_of_memory = on_out_of_memory
        self.handles: dict[int, Any] = {}
        self.saved: dict[str, Any] = {}  # the student's versions of substituted names
        self.refused: dict[str, Callable[[], None]] = {}  # given code refused: how to undo it

    # --- handles -------------------------------------------------------------------
    def register(self, obj: Any) -> HandleRef:
        hid = len(self.handles) + 1
        self.handles[hid] = obj
        return HandleRef(hid, values.type_name(obj))

    def _deref(self, value: Any) -> Any:
        """``value`` with each handle replaced by the object it stands for."""
        return values.map_leaves(value, lambda v: self.handles[v.id] if isinstance(v, HandleRef) else v)

    def _out(self, value: Any) -> Any:
        return values.normalize(value, self.register)

    def _lookup(self, target: str | int) -> Any:
        if isinstance(target, int):
            return self.handles[target]
        if target not in self.namespace:
            raise MissingName(target)
        return self.namespace[target]

    # --- operations ----------------------------------------------------------------
    def dispatch(self, op: str | None, header: dict[str, Any], value: Any) -> Any:
        """Run the operation ``op`` of a request (the header names its target, method,
        attribute; the value holds arguments): the one entry point of both the worker and
        the in-process submission."""
        value = value if isinstance(value, dict) else {}
        args, kwargs = value.get("args", []), value.get("kwargs", {})
        where: Any = header.get("target")  # a name or a handle id, as the wire sent it
        if op == "load":
            return self.load([(int(i), str(src)) for i, src in value["cells"]])
        if op == "has":
            return self.has(str(header["name"]))
        if op == "call":
            return self.call(where, header.get("method"), args, kwargs, header.get("forbid"),
                             header.get("bind"), header.get("changes") or ())
        if op == "getattr":
            return self.getattr(where, str(header["attr"]))
        if op == "inspect":
            return self.inspect(where, with_values=header.get("values") is not False)
        if op == "shapes":
            return self.shapes(where)
        if op == "grad":
            return self.grad(where, header.get("method"), args, kwargs,
                             value.get("grad_output"), header.get("forbid"))
        if op == "fixture":
            return self.fixture(str(header["name"]), args, kwargs)
        if op == "substitute":
            return self.substitute(str(value.get("source", "")), [str(n) for n in header["names"]])
        if op == "restore":
            return self.restore([str(n) for n in header["names"]])
        if op == "refuse":
            return self.refuse([str(n) for n in header["names"]])
        if op == "allow":
            return self.allow([str(n) for n in header["names"]])
        raise ValueError(f"unknown op {op!r}")

    def load(self, cells: list[tuple[int, str]]) -> dict[str, Any]:
        run = run_cells(cells, self.namespace)
        if run.out_of_memory and self.on_out_of_memory is not None:
            self.on_out_of_memory()
        return run.as_dict()

    def has(self, name: str) -> bool:
        return name in self.namespace

    def call(self, target: str | int, method: str | None, args: list, kwargs: dict,
             forbid: list[str] | None = None, bind: Any = None, changes: Any = ()) -> Any:
        """``bind``: the (negative) handle id the grader chose for the object this call
        builds, so that it could send calls on it without waiting for this one. ``changes``:
        the arguments the function is meant to change; any other it changes is an error
        (``runtime.unchanged``)."""
        fn = obj = self._lookup(target)
        label = target if isinstance(target, str) else values.type_name(fn)
        if method:
            label = f"{label}.{method}"
            fn = getattr(fn, method)
        args, kwargs = self._deref(args), self._deref(kwargs)
        with self._student_code(label):
            snapshot = ArgumentSnapshot(fn, args, kwargs, changes)
        with self._student_code(label), forbidding(forbid or []), \
                on_device(forbid, obj, args, kwargs) as audit:
            result = fn(*args, **kwargs)
            if audit is not None:
                audit.check_result(result)
        with self._student_code(label):  # outside the guards: the snapshot is the grader's
            snapshot.check()
        if type(bind) is int and bind < 0 and bind not in self.handles:
            return values.normalize(result, lambda made: self._bind(bind, made, result))
        return self._out(result)

    def _bind(self, hid: int, obj: Any, built: Any) -> HandleRef:
        """``built`` itself under ``hid``; any other object it holds numbered as usual."""
        if obj is not built or hid in self.handles:
            return self.register(obj)
        self.handles[hid] = obj
        return HandleRef(hid, values.type_name(obj))

    def getattr(self, target: str | int, attr: str) -> Any:
        obj = self._lookup(target)
        with self._student_code(f"reading {attr}"):
            for part in attr.split("."):
                obj = getattr(obj, part)
        return self._out(obj)

    def inspect(self, target: str | int, with_values: bool = True) -> dict[str, Any]:
        """Parameters, buffers and submodule types of a module; without ``with_values``,
        each parameter and buffer as its shape (a list of ints) instead of a copy of it."""
        module = self._lookup(target)
        torch = sys.modules.get("torch")
        if torch is None or not isinstance(module, torch.nn.Module):
            return {"type": values.type_name(module), "is_module": False}
        tensor = self._out if with_values else _shape
        with self._student_code("inspecting the module"):
            return {
                "type": values.type_name(module),
                "is_module": True,
                "parameters": {k: tensor(v) for k, v in module.named_parameters()},
                "buffers": {k: tensor(v) for k, v in module.named_buffers()},
                "modules": {k: values.type_name(m) for k, m in module.named_modules() if k},
                "training": bool(module.training),
            }

    def shapes(self, target: str | int) -> dict[str, list[int] | None] | None:
        """The shape of each entry of ``state_dict()`` (``None`` for one that is not a
        tensor), the values left behind: what a check needs before it loads weights by name.
        ``None`` when ``state_dict()`` does not return a dict."""
        obj = self._lookup(target)
        label = target if isinstance(target, str) else values.type_name(obj)
        with self._student_code(f"{label}.state_dict"):
            state = obj.state_dict()
        if not isinstance(state, dict):
            return None
        return {str(k): _shape(v) for k, v in state.items()}

    def grad(self, target: str | int, method: str | None, args: list, kwargs: dict,
             grad_output: Any, forbid: list[str] | None = None) -> dict[str, Any]:
        """Call, then backpropagate ``grad_output``; returns output and gradients of the
        floating-point tensor arguments and of the module's parameters."""
        import torch

        obj = self._lookup(target)
        fn = getattr(obj, method) if method else obj
        args = [
            a.detach().clone().requires_grad_(True)
            if isinstance(a, torch.Tensor) and a.is_floating_point() else a
            for a in self._deref(args)
        ]
        params = dict(obj.named_parameters()) if isinstance(obj, torch.nn.Module) else {}
        for p in params.values():
            p.grad = None
        label = target if isinstance(target, str) else values.type_name(obj)
        with self._student_code(label), forbidding(forbid or []), torch.enable_grad():
            try:
                output = fn(*args, **self._deref(kwargs))
            except RuntimeError as exc:  # the arguments here require grad: torch refuses first
                if LEAF_IN_PLACE in str(exc):
                    raise ArgumentChanged("") from None
                raise
            backward(output, grad_output)
        return self._out({
            "output": output,
            "input_grads": [a.grad if isinstance(a, torch.Tensor) else None for a in args],
            "param_grads": {k: p.grad for k, p in params.items()},
        })

    def fixture(self, name: str, args: list, kwargs: dict) -> Any:
        from . import fixtures

        factory = fixtures.FIXTURES[name]
        return self._out(factory(*self._deref(args), **self._deref(kwargs)))

    def substitute(self, source: str, names: list[str]) -> list[str]:
        """Run the course's ``source`` in a module of its own and put its ``names`` in the
        submission's namespace, in place of the student's versions (kept for ``restore``):
        a later exercise is then judged on its own code, not on a mistake in one it calls.
        Returns the names that were replaced."""
        module = types.ModuleType("course_parts")
        sys.modules[module.__name__] = module  # a dataclass looks its module up while it is built
        try:
            exec(_compiled(source), module.__dict__)  # noqa: S102 - the grader's
        finally:
            sys.modules.pop(module.__name__, None)
        parts = module.__dict__
        for name in names:
            self.saved.setdefault(name, self.namespace.get(name, _ABSENT))
            self.namespace[name] = parts[name]
        return names

    def restore(self, names: list[str]) -> list[str]:
        """Put back the student's own versions of ``names`` (or their absence)."""
        for name in names:
            old = self.saved.pop(name, _ABSENT)
            if old is _ABSENT:
                self.namespace.pop(name, None)
            else:
                self.namespace[name] = old
        return names

    def refuse(self, names: list[str]) -> list[str]:
        """Make the notebook's given code ``names`` (``block_forward``, or dotted through a
        module the notebook holds, ``lesson10.block_forward``) raise ``ForbiddenCall`` when
        called, until ``allow``: a function's code is replaced, and a class's methods, so that
        an alias of it is refused too. Returns the names found."""
        found = []
        for name in names:
            obj = self._resolve(name)
            if obj is _ABSENT or name in self.refused:
                continue
            undo = _disarm(obj, GIVEN + name.rpartition(".")[2])
            if undo is None and "." not in name:  # a closure: the name itself is refused
                self.namespace[name] = types.FunctionType(_trap(GIVEN + name), _BUILTINS)
                undo = functools.partial(self.namespace.__setitem__, name, obj)
            if undo is not None:
                self.refused[name] = undo
                found.append(name)
        return found

    def allow(self, names: list[str]) -> list[str]:
        """Undo ``refuse`` for ``names``."""
        for name in names:
            undo = self.refused.pop(name, None)
            if undo is not None:
                undo()
        return names

    def _resolve(self, dotted: str) -> Any:
        first, *rest = dotted.split(".")
        obj = self.namespace.get(first, _ABSENT)
        for part in rest:
            obj = getattr(obj, part, _ABSENT)
        return obj

    # --- helpers -------------------------------------------------------------------
    @contextlib.contextmanager
    def _student_code(self, label: str) -> Iterator[None]:
        try:
            yield
        except ForbiddenCall as exc:
            raise SubmissionError(label, "ForbiddenCall", exc.name) from None
        except (MissingName, SubmissionError):
            raise
        except SystemExit as exc:
            raise SubmissionError(label, "SystemExit", f"called exit({exc.code!r})") from None
        except BaseException as exc:  # noqa: BLE001 - any student error becomes a report
            if self.on_out_of_memory is not None and out_of_memory(exc):
                self.on_out_of_memory()
            forbidden = _forbidden_in_chain(exc)
            if forbidden:
                raise SubmissionError(label, "ForbiddenCall", forbidden) from None
            where = student_frames(exc.__traceback__)
            raise SubmissionError(label, type(exc).__name__, str(exc)[:500], where) from None


@functools.lru_cache(maxsize=64)
def _trap(name: str) -> types.CodeType:
    """The code of a function that raises ``ForbiddenCall(name)``, whatever its globals: it
    replaces the code of a given function (a function's ``__code__`` is looked up at each call,
    so every alias of it is refused)."""
    source = ("def given(*args, **kwargs):\n"
              "    raise __import__('grader.runtime.errors', fromlist=['ForbiddenCall'])"
              f".ForbiddenCall({name!r})\n")
    namespace: dict[str, Any] = {}
    exec(compile(source, "<given code, refused>", "exec"), namespace)  # noqa: S102 - the grader's
    return namespace["given"].__code__


_BUILTINS = {"__builtins__": __builtins__}


def _disarm(obj: Any, name: str) -> Callable[[], None] | None:
    """Make ``obj`` (a function without a closure, or a class's own methods) raise
    ``ForbiddenCall(name)``; returns what puts it back (``None``: ``obj`` is neither). A
    decorated function (``@torch.no_grad()``, any ``functools.wraps``) is refused in the function
    it wraps."""
    while isinstance(obj, types.FunctionType) and obj.__closure__ and hasattr(obj, "__wrapped__"):
        obj = obj.__wrapped__
    if isinstance(obj, types.FunctionType) and not obj.__closure__:
        code = obj.__code__
        obj.__code__ = _trap(name)

        def undo_function() -> None:
            obj.__code__ = code
        return undo_function
    if isinstance(obj, type):
        kept = {}
        for attr, value in list(vars(obj).items()):
            if isinstance(value, (types.FunctionType, staticmethod, classmethod)):
                trap = types.FunctionType(_trap(name), _BUILTINS)
                kept[attr] = value
                setattr(obj, attr, type(value)(trap) if isinstance(value, (staticmethod, classmethod))
                        else trap)

        def undo_class() -> None:
            for attr, value in kept.items():
                setattr(obj, attr, value)
        return undo_class
    return None


def backward(output: Any, grad_output: Any) -> None:
    """``output.backward(grad_output)``. Where both are tensors of one shape and dtype, as
    ``(output * grad_output).sum().backward()``: the same gradients, bit for bit (the
    product's gradient is ``grad_output`` times exactly 1), without the import of sympy
    (about a second) that torch makes on the first backward with an explicit gradient."""
    import torch

    if (isinstance(output, torch.Tensor) and isinstance(grad_output, torch.Tensor)
            and output.shape == grad_output.shape and output.dtype == grad_output.dtype
            and output.dtype.is_floating_point and not output.is_complex()):
        (output * grad_output).sum().backward()
    else:
        output.backward(grad_output)


def _forbidden_in_chain(exc: BaseException | None) -> str | None:
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, ForbiddenCall):
            return exc.name
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None
